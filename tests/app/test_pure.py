"""app.pure: the .py source wins over a compiled extension when asked or when newer."""

from __future__ import annotations

import os
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from app.pure import SourceFirst


def _module(tmp_path: Path, ext_age: float | None) -> None:
    (tmp_path / "hot.py").write_text("X = 1\n")
    os.utime(tmp_path / "hot.py", (1000, 1000))
    if ext_age is not None:
        ext = tmp_path / f"hot{EXTENSION_SUFFIXES[0]}"
        ext.write_bytes(b"")
        os.utime(ext, (1000 + ext_age, 1000 + ext_age))


def test_a_built_extension_newer_than_its_source_is_left_to_the_usual_finders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KEPL_PURE", raising=False)
    _module(tmp_path, ext_age=5)
    assert SourceFirst.find_spec("operators.hot", [str(tmp_path)]) is None
    _module(tmp_path, ext_age=None)
    assert SourceFirst.find_spec("operators.hot", [str(tmp_path)]) is None


def test_kepl_pure_loads_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEPL_PURE", "1")
    _module(tmp_path, ext_age=5)
    spec = SourceFirst.find_spec("app.hot", [str(tmp_path)])
    assert spec is not None and spec.origin == str(tmp_path / "hot.py")
    # other packages' modules are never answered
    assert SourceFirst.find_spec("elsewhere.hot", [str(tmp_path)]) is None


def test_a_source_newer_than_its_extension_runs_with_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KEPL_PURE", raising=False)
    _module(tmp_path, ext_age=-5)
    with pytest.warns(UserWarning, match="newer than its compiled extension"):
        spec = SourceFirst.find_spec("operators.hot", [str(tmp_path)])
    assert spec is not None and spec.origin == str(tmp_path / "hot.py")

"""Package metadata follows the current pyproject conventions (no setuptools deprecations)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_license_is_an_spdx_string_with_its_file() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    meta = project["project"]
    assert meta["license"] == "Apache-2.0"
    assert meta["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert not [c for c in meta.get("classifiers", []) if c.startswith("License ::")]
    # license expressions need setuptools 77 or later in the build environment
    assert project["build-system"]["requires"] == ["setuptools>=77"]

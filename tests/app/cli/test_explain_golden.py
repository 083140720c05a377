"""``kepl explain`` output for the statements of the public scenarios, kept as golden files.

To accept a deliberate change of the plan format, regenerate with
``KEPL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/app/cli/test_explain_golden.py``
and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.cli.explain import explain_file
from app.cli.main import main
from app.statements import load_statement_file

GOLDEN = Path(__file__).parent / "golden"
FILES = sorted(GOLDEN.glob("*.yaml"))


def test_golden_files_cover_a_few_dozen_statements() -> None:
    assert sum(len(load_statement_file(f).statements) for f in FILES) >= 36


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_explain_matches_golden(path: Path) -> None:
    lines, ok = explain_file(load_statement_file(path))
    text = "\n".join(lines) + "\n"
    expected = path.with_suffix(".explain")
    if os.environ.get("KEPL_UPDATE_GOLDEN"):
        expected.write_text(text)
    assert ok
    assert text == expected.read_text()


def test_cli_explain_prints_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    path = GOLDEN / "basics_length_window_walkthrough.yaml"
    assert main(["explain", str(path)]) == 0
    assert capsys.readouterr().out == path.with_suffix(".explain").read_text()

"""Every public conformance scenario passes in embedded mode (exact rows per step)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.conformance.runner import run_file, run_scenario_embedded, scenario_files

CASES = Path(__file__).resolve().parents[3].parent / "shared" / "conformance" / "cases"
FILES = [f for f in scenario_files([str(CASES)])] if CASES.is_dir() else []


def test_public_cases_are_present() -> None:
    assert len(FILES) >= 55, f"expected the public scenarios in {CASES}"


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_public_case_embedded(path: Path) -> None:
    outcome = run_file(path, run_scenario_embedded)
    assert outcome.passed, outcome.detail

"""kepl's own scenarios (tests/scenarios), same format as the public ones, embedded mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.conformance.runner import run_file, run_scenario_embedded, scenario_files

OWN = Path(__file__).resolve().parents[2] / "scenarios"
FILES = scenario_files([str(OWN)])


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_own_scenario_embedded(path: Path) -> None:
    outcome = run_file(path, run_scenario_embedded)
    assert outcome.passed, outcome.detail

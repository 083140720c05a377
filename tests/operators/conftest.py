"""Fixtures for operator tests: the view driver over both state stores, with restores."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.operators.harness import MODES, Harness


@pytest.fixture(params=MODES)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    """A factory ``harness(spec, start_ms=0)`` over each store and restore mode."""
    made: list[Harness] = []

    def make(spec: Any, start_ms: int = 0) -> Harness:
        h = Harness(spec, request.param, tmp_path / str(len(made)), start_ms)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()

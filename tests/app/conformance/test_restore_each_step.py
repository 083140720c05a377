"""Every scenario again, with the runtime rebuilt from a checkpoint before each step.

This is what Kafka-mode recovery does (a fresh Engine over the restored store, the same
plans deployed again): output buffers, tables, variables and named-window consumers
must carry on exactly where they were, so the output is the same as without restores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.conformance.runner import (
    Collected,
    load_scenario,
    replay,
    scenario_files,
    scenario_functions,
)
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from operators.state import MemoryStore

ROOT = Path(__file__).resolve().parents[3]
OWN = ROOT / "tests" / "scenarios"
PUBLIC = ROOT.parent / "shared" / "conformance" / "cases"
FILES = scenario_files([str(OWN)]) + (scenario_files([str(PUBLIC)]) if PUBLIC.is_dir() else [])


class Restoring:
    """An engine that is rebuilt from a checkpoint of its store before each step."""

    def __init__(self, doc: dict) -> None:
        catalog = Catalog.from_schemas(doc.get("schemas") or {},
                                       functions=scenario_functions(doc))
        self.catalog = catalog
        self.plans = [plan_statement(catalog, str(s["epl"]), s.get("name") or f"s{i}")
                      for i, s in enumerate(doc["statements"])]
        self.collected: dict[str, Collected] = {p.name: Collected() for p in self.plans}
        self.engine = self._build(MemoryStore(), 0)

    def _build(self, store: MemoryStore, now: int) -> Engine:
        engine = Engine(store=store, now_ms=now)
        for plan in self.plans:
            engine.deploy(plan)
        engine.listeners.append(self._listen)
        return engine

    def _listen(self, stmt: str, new: list, old: list, pid: Any) -> None:
        self.collected[stmt].new.extend(new)
        self.collected[stmt].old.extend(old)

    def restore(self) -> None:
        e = self.engine
        self.engine = self._build(MemoryStore.restore(e.store.checkpoint()), e.now_ms)

    def advance(self, t: int) -> None:
        self.restore()
        self.engine.advance_time(t)

    def send(self, type_name: str, event: dict) -> None:
        self.restore()
        self.engine.send(type_name, event)


KNOWN_RESTORE_BUGS: dict[str, str] = {}
"""Scenarios whose output still differs when the runtime is rebuilt before each step:
each one is a bug to fix, marked strict so that the fix has to remove it here."""


def _case(path: Path) -> Any:
    reason = KNOWN_RESTORE_BUGS.get(path.stem)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", [_case(f) for f in FILES])
def test_scenario_with_restores(path: Path) -> None:
    doc = load_scenario(path)
    r = Restoring(doc)
    diff = replay(doc, r.advance, r.send, r.collected, r.catalog, lambda: r.engine.now_ms)
    assert diff is None, diff

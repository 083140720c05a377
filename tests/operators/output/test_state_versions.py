"""Output-limiter state written in the version 1 layout (one ``meta`` entry with short
names, collectors under ``b``/``g``/``f``/``ln``/``lo``/``fo``) restores: a statement
continues from it with the rows it would have posted had it never stopped.

``state_v1.json`` holds, per statement, a MemoryStore checkpoint taken after six steps
with the version 1 code, and the rows that code posted over the steps after it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from operators.output.book import KEY, STATE_VERSION
from operators.state import MemoryStore

DATA = json.loads((Path(__file__).parent / "state_v1.json").read_text())


@pytest.mark.parametrize("case", DATA["cases"], ids=lambda c: c["name"])
def test_a_statement_continues_from_version_1_state(case: dict[str, Any]) -> None:
    store = MemoryStore.restore(bytes.fromhex(case["checkpoint"]))
    engine = Engine(store=store, now_ms=case["now"])
    engine.deploy(plan_statement(Catalog.from_schemas(DATA["schemas"]), case["epl"], "s"))
    out: list[list[Any]] = []
    engine.listeners.append(
        lambda stmt, new, old, pid: out.append([engine.now_ms, list(new), list(old)]))
    for kind, arg in DATA["after"]:
        if kind == "send":
            engine.send("T", dict(arg))
        else:
            engine.advance_time(arg)
    assert out == case["rows_after"]
    books = [v for ns in _namespaces(store.root) for k, v in ns.entries() if k == KEY]
    assert books and all(b["version"] == STATE_VERSION for b in books)
    assert not [k for ns in _namespaces(store.root) for k, _ in ns.entries()
                if k in ("meta", "ln", "lo", "fo")
                or (isinstance(k, tuple) and k and k[0] in ("b", "g", "f"))]


def _namespaces(ns: Any) -> list[Any]:
    out = [ns]
    for child in ns.children.values():
        out.extend(_namespaces(child))
    return out

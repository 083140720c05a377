"""A unidirectional join's aggregates are each triggering event's alone (Esper ref. 2.12):
they give the same rows, and without output limiting they are not kept in the state."""

from __future__ import annotations

from typing import Any

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from operators.state import MemoryNamespace, MemoryStore

SCHEMAS = {"A": {"k": "string", "v": "int"}, "B": {"k": "string", "w": "int"}}
WINNING = ("select a.k as k, b.w as w from A as a unidirectional, B#keepall as b "
           "where a.k = b.k and b.w > a.v group by a.k having b.w = max(b.w)")


def _run(epl: str, store: MemoryStore) -> list[Any]:
    engine = Engine(store=store)
    engine.deploy(plan_statement(Catalog.from_schemas(SCHEMAS), epl, "s"))
    rows: list[Any] = []
    engine.listeners.append(lambda s, new, old, pid: rows.append((new, old)))
    for t, e in (("B", {"k": "x", "w": 5}), ("B", {"k": "x", "w": 9}), ("B", {"k": "y", "w": 7}),
                 ("A", {"k": "x", "v": 1}), ("B", {"k": "x", "w": 12}), ("A", {"k": "x", "v": 1}),
                 ("A", {"k": "y", "v": 8}), ("A", {"k": "y", "v": 2})):
        engine.send(t, e)
    return rows


def _entries_under(ns: MemoryNamespace, name: str) -> int:
    """Entries of every namespace called ``name`` below ``ns``."""
    return sum((c.key_count() if n == name else _entries_under(c, name))
               for n, c in ns.children.items())


def test_each_trigger_aggregates_its_own_join_rows() -> None:
    store = MemoryStore()
    assert _run(WINNING, store) == [
        ([{"k": "x", "w": 9}], []), ([{"k": "x", "w": 12}], []), ([{"k": "y", "w": 7}], [])]
    assert _entries_under(store.root, "rs") == 0
    assert store.key_count() > 0  # B's window is stored


def test_with_output_limiting_the_aggregates_stay_in_the_state() -> None:
    store = MemoryStore()
    _run(WINNING + " output all every 2 events", store)
    assert _entries_under(store.root, "rs") > 0

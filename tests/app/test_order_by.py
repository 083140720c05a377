"""order by over expressions that are not output columns: aggregates, expressions over
them, properties not selected (each key computed with the row it orders, then dropped)."""

from __future__ import annotations

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine

SCHEMAS = {"M": {"sym": "string", "px": "double"}}


def run(epl: str, events: list[tuple[str, float | None]], end_ms: int = 1000
        ) -> list[list[dict]]:
    cat = Catalog.from_schemas(SCHEMAS)
    eng = Engine()
    out: list[list[dict]] = []
    eng.listeners.append(lambda s, n, o, p: out.append(n))
    eng.deploy(plan_statement(cat, epl, "s0"))
    for sym, px in events:
        eng.send("M", {"sym": sym, "px": px})
    eng.advance_time(end_ms)
    return out


EVENTS = [("B", 2.0), ("A", 5.0), ("C", 4.5), ("B", 1.0)]


def test_order_by_aggregate_with_limit() -> None:
    assert run("select sym, sum(px) as total from M#time_batch(1 sec) group by sym "
               "order by sum(px) desc limit 2", EVENTS) == [
        [{"sym": "A", "total": 5.0}, {"sym": "C", "total": 4.5}]]


def test_order_by_expression_over_aggregate_and_group_key() -> None:
    assert run("select sym from M#time_batch(1 sec) group by sym "
               "order by sum(px) * -1, sym", EVENTS) == [
        [{"sym": "A"}, {"sym": "C"}, {"sym": "B"}]]


def test_distinct_ignores_the_order_key_and_nulls_sort_first() -> None:
    assert run("select distinct sym from M#time_batch(1 sec) order by px",
               [*EVENTS, ("D", None)]) == [
        [{"sym": "D"}, {"sym": "B"}, {"sym": "C"}, {"sym": "A"}]]

"""An event that starts context partitions reaches them first, then the partitions that
existed before, in creation order (Esper hands a new partition its starting event as it
allocates it)."""

from __future__ import annotations

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine


def run(*epl: str, events: list[dict]) -> list[tuple]:
    catalog = Catalog.from_schemas({"T": {"k": "string", "v": "int"}})
    engine = Engine()
    for i, text in enumerate(epl):
        engine.deploy(plan_statement(catalog, text, f"s{i}"))
    out: list[tuple] = []
    engine.listeners.append(lambda name, new, old, pid: out.extend(
        (name, r["id"], r["cnt"]) for r in new))
    for e in events:
        engine.send("T", e)
    return out


def test_new_overlapping_partition_sees_its_starting_event_first() -> None:
    rows = run("create context I initiated by T(v > 5) terminated after 5 sec",
               "context I select context.id as id, count(*) as cnt from T",
               events=[{"k": "a", "v": 9}] * 3)
    assert rows == [("s1", 0, 1), ("s1", 1, 1), ("s1", 0, 2),
                    ("s1", 2, 1), ("s1", 0, 3), ("s1", 1, 2)]


def test_nested_keyed_over_initiated_by() -> None:
    rows = run("create context N context K partition by k from T, "
               "context I initiated by T(v > 5) terminated after 5 sec",
               "context N select context.id as id, count(*) as cnt from T",
               events=[{"k": "a", "v": 1}, {"k": "a", "v": 7}, {"k": "b", "v": 9},
                       {"k": "b", "v": 9}])
    assert rows == [("s1", 0, 1), ("s1", 1, 1), ("s1", 2, 1), ("s1", 1, 2)]

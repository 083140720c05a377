"""Sampled processing time per statement: one event in ``every`` is timed per statement
and counts ``every`` times; the rows are the same as without timing."""

from __future__ import annotations

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.timing import StatementTiming

STATEMENTS = {"cnt": "select count(*) as n from T#length(3)",
              "big": "select v from T where v > 2"}


def run(timing: StatementTiming | None, n: int) -> list[tuple]:
    catalog = Catalog.from_schemas({"T": {"k": "string", "v": "int"}})
    engine = Engine()
    engine.timing = timing
    for name, text in STATEMENTS.items():
        engine.deploy(plan_statement(catalog, text, name))
    out: list[tuple] = []
    engine.listeners.append(lambda name, new, old, pid: out.extend(
        (name, dict(r)) for r in new))
    for i in range(n):
        engine.send("T", {"k": "a", "v": i})
    engine.send_batch("T", [{"k": "b", "v": i} for i in range(n)])
    return out


def test_every_nth_event_is_timed_per_statement_and_rows_do_not_change() -> None:
    timing = StatementTiming(every=4)
    assert run(timing, 8) == run(None, 8)
    seconds = timing.take()
    assert set(seconds) == {"cnt", "big"} and all(s > 0 for s in seconds.values())
    assert timing.take() == {}
    # calls 1, 5 and 9 (the batch, one call) were timed: the next is the 13th
    assert timing.countdown == 4


def test_the_sample_stands_for_every_event() -> None:
    timing = StatementTiming(every=10)
    timing.add("s", 0.5)
    timing.add("s", 0.25)
    assert timing.take() == {"s": 7.5}

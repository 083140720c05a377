"""Output rate limiting (operators/output/) driven through a pipeline, on every store.

Each test runs in the harness's restore modes: the pipeline is rebuilt over its state
(fresh instance, MemoryStore checkpoint round trip, reopened RocksDB) before every step,
so the limiter's collectors and trigger state must be entirely in the store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from operators.aggregates import make_aggregator
from operators.base import PartitionCtx, Row, Rows
from operators.output import Assignment, OutputSpec
from operators.patterns.crontab import CronSpec
from operators.pipeline import PipelineSpec, StreamSpec
from operators.resultset import (
    AGG_ALL,
    GROUPED,
    GROUPED_ROWS,
    SIMPLE,
    AggregateDef,
    ResultSetSpec,
    SelectColumn,
)
from operators.state import MemoryStore, RocksStore
from operators.windows.registry import WindowParam, make_view_spec
from tests.operators.harness import MODES


def prop(name: str) -> Any:
    return lambda row, ctx: row.get(name)


def agg0(row: Row, ctx: PartitionCtx) -> Any:
    return ctx.aggs[0] if ctx.aggs is not None else None


SUM = AggregateDef("sum(price)", make_aggregator("sum"), prop("price"))
SYMBOL = SelectColumn("symbol", prop("symbol"))
TOTAL = SelectColumn("total", agg0)


def length(n: int) -> Any:
    return make_view_spec("length", [WindowParam(str(n), n)])


def spec(kind: str, output: OutputSpec, view: Any = None, irstream: bool = True,
         having: Any = None) -> PipelineSpec:
    if kind == SIMPLE:
        rs = ResultSetSpec(SIMPLE, (SYMBOL, SelectColumn("price", prop("price"))))
    elif kind == AGG_ALL:
        rs = ResultSetSpec(AGG_ALL, (TOTAL,), (SUM,), having=having)
    elif kind == GROUPED:
        rs = ResultSetSpec(GROUPED, (SYMBOL, TOTAL), (SUM,), (prop("symbol"),), having)
    else:
        rs = ResultSetSpec(GROUPED_ROWS, (SYMBOL, SelectColumn("price", prop("price")), TOTAL),
                           (SUM,), (prop("symbol"),), having)
    return PipelineSpec(rs, output, StreamSpec("T", None, view), None, None,
                        "irstream" if irstream else "istream")


class Driver:
    """One pipeline, its store, the clock, rebuilt before each step in restore modes."""

    def __init__(self, pspec: PipelineSpec, mode: str, tmp: Path,
                 variables: dict[str, Any] | None = None) -> None:
        self.spec = pspec
        self.mode = mode
        self.path = tmp / "rocks"
        self.store: Any = RocksStore(self.path) if mode.startswith("rocks") else MemoryStore()
        self.variables = variables if variables is not None else {}
        self.now = 0
        self.p = self._build()

    def _build(self) -> Any:
        ctx = PartitionCtx(variables=self.variables, now_ms=self.now)
        return self.spec.build(self.store.namespace("s", 0), ctx)

    def _step(self) -> None:
        if self.mode == "memory-checkpoint":
            self.store = MemoryStore.restore(self.store.checkpoint())
        elif self.mode == "rocks-reopen":
            self.store.close()
            self.store = RocksStore(self.path)
        if self.mode not in ("memory", "rocks"):
            self.p = self._build()

    def send(self, **row: Any) -> tuple[Rows, Rows]:
        self._step()
        return self.p.on_event("T", dict(row), self.now)

    def advance(self, t: int) -> list[tuple[int, Rows, Rows]]:
        out = []
        while True:
            self._step()
            due = self.p.next_timer()
            if due is None or due > t:
                break
            self.now = due
            new, old = self.p.on_time(due)
            if new or old:
                out.append((due, new, old))
        self.now = t
        return out

    def terminate(self) -> tuple[Rows, Rows]:
        self._step()
        return self.p.terminate(self.now)

    def close(self) -> None:
        if isinstance(self.store, RocksStore):
            self.store.close()


@pytest.fixture(params=MODES)
def drive(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    made: list[Driver] = []

    def make(pspec: PipelineSpec, variables: dict[str, Any] | None = None) -> Driver:
        d = Driver(pspec, request.param, tmp_path / str(len(made)), variables)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


def rows(*pairs: tuple[str, Any]) -> Rows:
    return [{"symbol": s, "total": t} for s, t in pairs]


def test_grouped_all_keeps_groups_whose_events_expired(drive: Any) -> None:
    """Esper ref. 2.12: 'output all' with group by lists every group ever seen."""
    d = drive(spec(GROUPED, OutputSpec("all", every_events=2, limited=True), length(2)))
    assert d.send(symbol="IBM", price=1.0) == ([], [])
    assert d.send(symbol="MSFT", price=2.0) == (
        rows(("IBM", 1.0), ("MSFT", 2.0)), rows(("IBM", None), ("MSFT", None)))
    d.send(symbol="HP", price=3.0)
    assert d.send(symbol="HP", price=4.0) == (
        rows(("IBM", None), ("MSFT", None), ("HP", 7.0)),
        rows(("IBM", 1.0), ("MSFT", 2.0), ("HP", None)))


def test_grouped_last_posts_one_row_per_updated_group(drive: Any) -> None:
    d = drive(spec(GROUPED, OutputSpec("last", every_events=3, limited=True)))
    d.send(symbol="A", price=1.0)
    d.send(symbol="B", price=2.0)
    assert d.send(symbol="A", price=3.0) == (
        rows(("A", 4.0), ("B", 2.0)), rows(("A", None), ("B", None)))
    d.send(symbol="B", price=1.0)
    d.send(symbol="B", price=1.0)
    assert d.send(symbol="B", price=1.0) == (rows(("B", 5.0)), rows(("B", 2.0)))


def test_fully_aggregated_posts_current_row_in_empty_interval(drive: Any) -> None:
    """Notes: timing starts at the first event; an interval without changes still posts."""
    d = drive(spec(AGG_ALL, OutputSpec("default", every_ms=1000, limited=True)))
    assert d.advance(5000) == []
    d.send(price=2.0)
    d.send(price=3.0)
    assert d.advance(6000) == [(6000, [{"total": 2.0}, {"total": 5.0}],
                                [{"total": None}, {"total": 2.0}])]
    assert d.advance(7000) == [(7000, [{"total": 5.0}], [{"total": 5.0}])]


def test_snapshot_posts_no_remove_stream(drive: Any) -> None:
    d = drive(spec(SIMPLE, OutputSpec("snapshot", every_events=2, limited=True), length(2)))
    d.send(symbol="a", price=1.0)
    d.send(symbol="b", price=2.0)
    d.send(symbol="c", price=3.0)
    new, old = d.send(symbol="d", price=4.0)
    assert [r["symbol"] for r in new] == ["c", "d"]
    assert old == []


def test_first_every_n_events_counts_the_first(drive: Any) -> None:
    d = drive(spec(SIMPLE, OutputSpec("first", every_events=2, limited=True), irstream=False))
    out = [d.send(symbol=s, price=1.0)[0] for s in "abcde"]
    assert [[r["symbol"] for r in o] for o in out] == [["a"], [], ["c"], [], ["e"]]


def test_when_expression_reads_builtins_and_then_set(drive: Any) -> None:
    when = lambda r, c: c.output["count_insert"] >= 2 and c.output["count_insert_total"] >= 2  # noqa: E731
    incr = Assignment("n", lambda r, c: c.variables["n"] + 1)
    variables = {"n": 0}
    d = drive(spec(SIMPLE, OutputSpec(when=when, then_set=(incr,), limited=True),
                   irstream=False), variables)
    assert d.send(symbol="a", price=1.0) == ([], [])
    new, _ = d.send(symbol="b", price=1.0)
    assert [r["symbol"] for r in new] == ["a", "b"]
    assert variables["n"] == 1


def test_last_output_timestamp_starts_at_partition_start(drive: Any) -> None:
    when = lambda r, c: c.output["current_timestamp"] - c.output["last_output_timestamp"] >= 5000  # noqa: E731
    d = drive(spec(SIMPLE, OutputSpec(when=when, limited=True), irstream=False))
    d.advance(1000)
    assert d.send(symbol="a", price=1.0) == ([], [])
    d.advance(6000)
    assert [r["symbol"] for r in d.send(symbol="b", price=1.0)[0]] == ["a", "b"]
    d.advance(8000)
    assert d.send(symbol="c", price=1.0) == ([], [])


def test_after_events_then_rate(drive: Any) -> None:
    """Esper: before 'after' holds, aggregated updates count in the next batch only."""
    d = drive(spec(AGG_ALL, OutputSpec("last", every_events=2, after_events=2, limited=True),
                   irstream=False))
    assert [d.send(price=p) for p in (1.0, 2.0, 4.0)] == [([], [])] * 3
    assert d.send(price=8.0) == ([{"total": 15.0}], [])


def test_when_terminated_guard_and_then_set(drive: Any) -> None:
    """Esper ref. 4.5: the guard decides output; 'then set' runs at termination regardless."""
    variables = {"v": 0}
    guard = lambda r, c: c.output["count_insert"] >= 2  # noqa: E731
    d = drive(spec(SIMPLE, OutputSpec(when_terminated=True, terminated_and=guard,
                                      terminated_set=(Assignment("v", lambda r, c: 3),),
                                      limited=True), irstream=False), variables)
    d.send(symbol="a", price=1.0)
    assert d.terminate() == ([], [])
    assert variables["v"] == 3


def test_every_events_from_a_variable(drive: Any) -> None:
    variables = {"rate": 3}
    d = drive(spec(SIMPLE, OutputSpec(every_events_expr=lambda r, c: c.variables["rate"],
                                      limited=True), irstream=False), variables)
    assert d.send(symbol="a", price=1.0) == ([], [])
    variables["rate"] = 2
    assert len(d.send(symbol="b", price=1.0)[0]) == 2


def test_output_at_crontab_arms_with_first_event(drive: Any) -> None:
    cron = CronSpec.parse(["*/2", "*", "*", "*", "*"])
    d = drive(spec(AGG_ALL, OutputSpec("last", at=cron, at_text="(*/2, *, *, *, *)",
                                       limited=True), irstream=False))
    assert d.advance(200_000) == []
    d.send(price=1.0)
    assert d.advance(240_000) == [(240_000, [{"total": 1.0}], [])]
    assert d.advance(360_000) == [(360_000, [{"total": 1.0}], [])]


def test_grouped_first_decides_per_group(drive: Any) -> None:
    d = drive(spec(GROUPED_ROWS, OutputSpec("first", every_events=2, limited=True),
                   irstream=False))
    outs = [d.send(symbol=s, price=1.0)[0] for s in ("A", "A", "B", "A", "B")]
    assert [[(r["symbol"], r["total"]) for r in o] for o in outs] == [
        [("A", 1.0)], [], [("B", 1.0)], [("A", 3.0)], []]


def test_order_by_and_limit_apply_per_batch(drive: Any) -> None:
    desc = ((prop("price"), True),)
    pspec = spec(SIMPLE, OutputSpec(every_events=3, limited=True), irstream=False)
    rs = pspec.resultset
    from dataclasses import replace

    pspec = replace(pspec, resultset=replace(rs, order_by=desc, limit=2))
    d = drive(pspec)
    d.send(symbol="a", price=1.0)
    d.send(symbol="b", price=3.0)
    new, _ = d.send(symbol="c", price=2.0)
    assert [r["symbol"] for r in new] == ["b", "c"]


def _total_over(limit: float) -> Any:
    return lambda row, ctx: ctx.aggs is not None and (ctx.aggs[0] or 0) > limit


def test_fully_aggregated_last_remove_row_falls_back_to_current_row(drive: Any) -> None:
    """Esper RowForAll output last: when no state before an update of the interval passes
    having, the remove row is the current row."""
    d = drive(spec(AGG_ALL, OutputSpec("last", every_events=3, limited=True),
                   having=_total_over(3)))
    d.send(price=None)
    d.send(price=1.0)
    assert d.send(price=4.0) == ([{"total": 5.0}], [{"total": 5.0}])


def test_fully_aggregated_all_remove_row_falls_back_to_current_row(drive: Any) -> None:
    """Esper RowForAll output all: a stream none of whose rows passed having in the
    interval posts the current row."""
    d = drive(spec(AGG_ALL, OutputSpec("all", every_events=2, limited=True),
                   having=_total_over(3)))
    d.send(price=1.0)
    assert d.send(price=4.0) == ([{"total": 5.0}], [{"total": 5.0}])


def test_grouped_first_with_having_remove_row_is_the_state_after(drive: Any) -> None:
    """Esper row-per-group output first with having: the remove row is built from the
    group's state after the update, like the insert row."""
    d = drive(spec(GROUPED, OutputSpec("first", every_events=5, limited=True),
                   having=_total_over(3)))
    assert d.send(symbol="A", price=1.0) == ([], [])
    assert d.send(symbol="A", price=4.0) == (rows(("A", 5.0)), rows(("A", 5.0)))


def _simple_at_output(kind: str) -> PipelineSpec:
    """A select of a value read when the row is built (as a subquery reads its window)."""
    rs = ResultSetSpec(SIMPLE, (SYMBOL, SelectColumn("at", lambda row, ctx: ctx.now_ms)))
    return PipelineSpec(rs, OutputSpec(kind, every_ms=1000, limited=True),
                        StreamSpec("T", None, None), None, None, "istream")


@pytest.mark.parametrize("kind,symbols", [("all", ["a", "b"]), ("last", ["b"])])
def test_simple_rows_are_built_at_output_time(drive: Any, kind: str, symbols: list) -> None:
    """Esper's simple result set keeps the interval's events and builds their rows when
    the output condition fires."""
    d = drive(_simple_at_output(kind))
    d.now = 200
    d.send(symbol="a")
    d.now = 700
    d.send(symbol="b")
    assert d.advance(1200) == [(1200, [{"symbol": s, "at": 1200} for s in symbols], [])]

"""The specialised per-event paths give the same rows as the general ones.

``ResultSet`` binds ``process`` to a kind-specific version, ``Pipeline`` binds
``on_event``/``next_timer``, and the aggregate updaters inline the common aggregators;
each is checked here against the general code (or the aggregator's own methods) over
random updates, including null values, batches and remove streams.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from app.epl.expr import Scope, compile_expr
from app.epl.parser import parse_expression
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from operators.aggregates import (
    Avg,
    Count,
    CountEver,
    CountStar,
    Max,
    Sum,
    fuse_updaters,
    results_reader,
    row_updater,
    swap_updater,
)
from operators.base import PartitionCtx
from operators.pipeline import LimitedPipeline, Pipeline, RowPipeline, StreamPipeline
from operators.resultset import ResultSet, ResultSetSpec
from operators.state import MemoryNamespace, MemoryStore, RocksStore

SCHEMA = {"T": {"symbol": "string", "amount": "double", "price": "double"}}


def _rows(rnd: random.Random, n: int) -> list[dict[str, Any]]:
    return [{"symbol": rnd.choice(["A", "B", "C", "\x00odd"]),
             "amount": rnd.choice([None, 1.0, 2.5, float(rnd.randrange(100))]),
             "price": rnd.random() * 10} for _ in range(n)]


def _plan(epl: str) -> Any:
    return plan_statement(Catalog.from_schemas(SCHEMA), epl, "s")


@pytest.mark.parametrize("aggregator", [CountStar(), Count(), CountEver(), Sum(), Sum(0),
                                        Avg(), Max()])
@pytest.mark.parametrize("with_value", [True, False])
@pytest.mark.parametrize("filtered", [True, False])
def test_row_updater_matches_enter_and_leave(aggregator: Any, with_value: bool,
                                             filtered: bool) -> None:
    """An updater leaves the same state as ``states[i] = enter/leave(states[i], value)``."""
    ctx = PartitionCtx()
    value = (lambda r, c: r["amount"]) if with_value else None
    filt = (lambda r, c: r["price"] > 3) if filtered else None
    if not with_value and type(aggregator) not in (CountStar, CountEver):
        value = lambda r, c: r["amount"]  # noqa: E731  (only counts read no value)
    enter = fuse_updaters([row_updater(aggregator, 1, value, filt, True)])
    leave = fuse_updaters([row_updater(aggregator, 1, value, filt, False)])
    read = results_reader([CountStar(), aggregator])
    rnd = random.Random(7)
    fast = [CountStar().initial(), aggregator.initial()]
    slow = [CountStar().initial(), aggregator.initial()]
    live: list[dict[str, Any]] = []
    for step in range(400):
        if live and rnd.random() < 0.45:
            row = live.pop(rnd.randrange(len(live)))
            leave(fast, row, ctx)
            fn = aggregator.leave
        else:
            row = _rows(rnd, 1)[0]
            live.append(row)
            enter(fast, row, ctx)
            fn = aggregator.enter
        if filt is None or filt(row, ctx):
            slow[1] = fn(slow[1], value(row, ctx) if value is not None else row)
        assert fast == slow, step
        assert read(fast) == [fast[0], aggregator.result(slow[1])]


def test_fused_updaters_apply_in_order() -> None:
    """Three or more updaters run one after the other on the same states."""
    ctx = PartitionCtx()
    value = lambda r, c: r["amount"]  # noqa: E731
    aggs = [CountStar(), Sum(), Avg(), Max()]
    enter = fuse_updaters([row_updater(a, i, None if i == 0 else value, None, True)
                           for i, a in enumerate(aggs)])
    states = [a.initial() for a in aggs]
    for v in (3.0, None, 1.0):
        enter(states, {"amount": v}, ctx)
    assert results_reader(aggs)(states) == [3, 4.0, 2.0, 3.0]


@pytest.mark.parametrize("order", ["count first", "sum first"])
@pytest.mark.parametrize("counter", [CountStar(), CountEver()])
@pytest.mark.parametrize("summer", [Sum(), Avg()])
def test_fused_count_and_sum_match_separate_updaters(order: str, counter: Any,
                                                     summer: Any) -> None:
    """A count(*) and a sum/avg fused into one function leave the states the two
    updaters leave one after the other (entering and leaving, nulls included)."""
    ctx = PartitionCtx()
    value = lambda r, c: r["amount"]  # noqa: E731
    aggs = [counter, summer] if order == "count first" else [summer, counter]
    values = [None if isinstance(a, CountStar) else value for a in aggs]
    fused = {entering: fuse_updaters([row_updater(a, i, v, None, entering)
                                      for i, (a, v) in enumerate(zip(aggs, values))])
             for entering in (True, False)}
    assert fused[True].__name__ == "count_sum_enter"
    separate = {entering: [row_updater(a, i, v, None, entering)
                           for i, (a, v) in enumerate(zip(aggs, values))]
                for entering in (True, False)}
    read = results_reader(aggs)
    rnd = random.Random(11)
    fast = [a.initial() for a in aggs]
    slow = [a.initial() for a in aggs]
    live: list[dict[str, Any]] = []
    for step in range(300):
        entering = not live or rnd.random() < 0.6
        row = _rows(rnd, 1)[0] if entering else live.pop(rnd.randrange(len(live)))
        if entering:
            live.append(row)
        fused[entering](fast, row, ctx)
        for u in separate[entering]:
            u(slow, row, ctx)
        assert fast == slow, step
        assert read(fast) == [a.result(s) for a, s in zip(aggs, slow)], step


@pytest.mark.parametrize("entering_first", [True, False])
def test_count_and_sum_over_a_property(entering_first: bool) -> None:
    """Over an event property the fused count/sum reads the property itself; its
    ``swap`` (one row in, one out) equals entering then leaving."""
    ctx = PartitionCtx()
    amount = compile_expr(parse_expression("amount"), Scope("event"))
    assert getattr(amount, "property_name", None) == "amount"
    aggs = [CountStar(), Sum()]
    values = [None, amount]
    enter, leave = (fuse_updaters([row_updater(a, i, v, None, entering)
                                   for i, (a, v) in enumerate(zip(aggs, values))])
                    for entering in (True, False))
    swap = swap_updater(enter, leave)
    assert swap.__name__ == "count_sum_swap"
    rnd = random.Random(12)
    fast = [a.initial() for a in aggs]
    slow = [a.initial() for a in aggs]
    window: list[dict[str, Any]] = []
    for step in range(300):
        row = _rows(rnd, 1)[0]
        window.append(row)
        if len(window) > 3:
            old = window.pop(0)
            swap(fast, row, old, ctx)
            slow[0] = aggs[0].leave(aggs[0].enter(slow[0], None), None)
            slow[1] = aggs[1].leave(aggs[1].enter(slow[1], row["amount"]), old["amount"])
        else:
            enter(fast, row, ctx)
            slow[0] = aggs[0].enter(slow[0], None)
            slow[1] = aggs[1].enter(slow[1], row["amount"])
        assert fast == slow, step


@pytest.mark.parametrize("epl", [
    "context K select k, count(*) as n, sum(amount) as s from T",
    "context K select count(*) as n, k from T",
    "context K select sum(amount) as s from T#length(2)",
    "context K select context.key1 as key, avg(amount) as a, count(*) from T",
    "select count(*) as n, sum(amount) as s, avg(price) as p from T",
    "context K select k, count(*) as n, sum(amount) as s, price from T",
    "context K select price, k, count(*) as n from T",
    "context K select count(*) as n, price from T",
])
def test_aggregate_projection_matches_column_expressions(epl: str) -> None:
    """A select clause of aggregates and a context property is projected from the
    aggregation values directly: the same row as evaluating each column's expression,
    also without aggregation values."""
    catalog = Catalog.from_schemas({"T": {"k": "string", "amount": "double",
                                          "price": "double"}})
    plan_statement(catalog, "create context K partition by k from T", "c")
    spec = plan_statement(catalog, epl, "s").pipeline.resultset
    pairs = tuple((c.name, c.expr) for c in spec.columns)
    general = ResultSetSpec._pairs_projector(pairs)
    assert spec.projector is not general
    assert spec.projector.__name__ in ("one", "two", "three", "four")
    ctx = PartitionCtx(props={"name": "K", "id": 3, "key1": "a"})
    for aggs in ([2, 7.5, 1.0][:len(spec.aggregates)], [0, None, None][:len(spec.aggregates)],
                 None):
        ctx.aggs = aggs
        for row in ({}, {"k": "a", "amount": 2.0, "price": 3.5}):
            assert spec.projector(row, ctx) == general(row, ctx)
            assert list(spec.projector(row, ctx)) == [c.name for c in spec.columns]


RESULT_SETS = [
    "select count(*), sum(amount) from T",
    "select count(*) as n, avg(amount) as a, countever(*) as e from T",
    "select count(amount), max(amount), sum(amount) from T having count(*) > 2",
    "select symbol, sum(amount) from T",
    "select *, sum(amount) as s from T",
    "select symbol, count(*), sum(price) from T having sum(amount) > 10",
    "select symbol, avg(amount) from T group by symbol",
    "select symbol, count(*) as n, sum(amount) as s from T group by symbol having count(*) > 1",
    "select symbol, amount, sum(price) from T group by symbol, amount",
    "select sum(amount) as s from T group by symbol",
]


@pytest.mark.parametrize("epl", RESULT_SETS)
@pytest.mark.parametrize("want_old", [True, False])
def test_resultset_fast_process_matches_general(epl: str, want_old: bool) -> None:
    """The kind-specific ``process`` posts the same rows and keeps the same state."""
    spec = _plan(epl).pipeline.resultset
    fast_ns, slow_ns = MemoryNamespace(), MemoryNamespace()
    fast = spec.build(fast_ns, PartitionCtx(), want_old)
    slow = spec.build(slow_ns, PartitionCtx(), want_old)
    assert type(fast).process is not ResultSet.process
    rnd = random.Random(3)
    live: list[dict[str, Any]] = []
    for step in range(300):
        new = _rows(rnd, rnd.choice([1, 1, 1, 2, 3]))
        old = [live.pop(rnd.randrange(len(live)))
               for _ in range(min(len(live), rnd.choice([0, 0, 1, 2])))]
        if rnd.random() < 0.1:
            new = []
        live.extend(new)
        got = fast.process(new, old)
        want = ResultSet.process(slow, new, old)
        assert got == want, (step, new, old)
        assert fast_ns.data == slow_ns.data
        assert fast.snapshot(live) == slow.snapshot(live)


@pytest.mark.parametrize("epl", RESULT_SETS)
def test_resultset_step_matches_process(epl: str) -> None:
    """``step`` (one row in, at most one out) posts the insert stream ``process`` posts
    and keeps the same state."""
    spec = _plan(epl).pipeline.resultset
    fast_ns, slow_ns = MemoryNamespace(), MemoryNamespace()
    fast = spec.build(fast_ns, PartitionCtx(), False)
    slow = spec.build(slow_ns, PartitionCtx(), False)
    rnd = random.Random(4)
    live: list[dict[str, Any]] = []
    for step in range(300):
        new = _rows(rnd, 1)[0]
        old = live.pop(rnd.randrange(len(live))) if live and rnd.random() < 0.5 else None
        live.append(new)
        got = fast.step(new, old)
        want = ResultSet.process(slow, [new], [] if old is None else [old])[0]
        assert got == want, (step, new, old)
        assert fast_ns.data == slow_ns.data
        assert fast.snapshot(live) == slow.snapshot(live)


def test_resultset_fast_process_writes_like_general_to_other_stores() -> None:
    """A store that copies values gets the same writes as from the general path: the
    record of every touched group, once per update."""

    class Copying(MemoryNamespace):
        """Stores a JSON copy of each value (as RocksDB does) and counts the writes."""

        puts = 0

        def put(self, key: Any, value: Any) -> None:
            self.puts += 1
            self.data[key] = json.loads(json.dumps(value))

    for epl in ("select count(*), sum(amount) from T",
                "select symbol, sum(amount) from T",
                "select symbol, avg(amount) from T group by symbol"):
        spec = _plan(epl).pipeline.resultset
        fast_ns, slow_ns = Copying(), Copying()
        fast = spec.build(fast_ns, PartitionCtx(), False)
        slow = spec.build(slow_ns, PartitionCtx(), False)
        for r in _rows(random.Random(1), 40):
            assert fast.process([r], []) == ResultSet.process(slow, [r], [])
            assert fast_ns.puts == slow_ns.puts
            assert fast_ns.data == slow_ns.data


def _any_timer(p: Pipeline) -> int | None:
    """The earliest timer of any part, asked of every part (the general ``next_timer``)."""
    dues = [t for part in (p.view, p.matcher, p.out) if part is not None
            and (t := part.next_timer()) is not None]
    return min(dues) if dues else None


PIPELINES = [
    "select * from T(amount >= 20)",
    "select count(*), sum(amount) from T#length(5)",
    "select irstream count(*), sum(amount) from T#length(3)",
    "select rstream symbol, amount from T#length(2)",
    "select irstream symbol, avg(price) from T#time(3 sec) group by symbol",
    "select symbol, sum(price) from T#groupwin(symbol)#length(2)",
    "select irstream symbol, count(*) from T#groupwin(symbol)#time(2 sec)",
    "select irstream symbol, amount from T#groupwin(symbol, amount)#length(2)",
    "select irstream * from T#unique(symbol)",
    "select symbol, count(*) from T(amount > 5)#time_batch(2 sec) group by symbol",
    "select irstream * from T#firstlength(3)",
    "select count(*) from T",
    "select symbol, count(*), sum(amount) from T(price > 2)#length(4) having count(*) > 1",
    "select count(*) as n, avg(amount) as a from T#lastevent",
    "select symbol, sum(amount) from T group by symbol",
    "select symbol, price from T#length(3) having price > 4",
]


def _maybe_advance(rnd: random.Random, now: int, *pipelines: Pipeline) -> int:
    """Now and then move time on, firing every due timer of each pipeline."""
    if rnd.random() < 0.2:
        now += rnd.choice([100, 500, 1500])
        for p in pipelines:
            while (due := _any_timer(p)) is not None and due <= now:
                p.on_time(due)
    return now


@pytest.mark.parametrize("epl", PIPELINES)
def test_pipeline_fast_on_event_matches_general(epl: str) -> None:
    """``on_event`` and ``next_timer`` as bound at build time equal the class methods."""
    spec = _plan(epl).pipeline
    fast = spec.build(MemoryStore().namespace("s"), PartitionCtx())
    slow = spec.build(MemoryStore().namespace("s"), PartitionCtx())
    assert isinstance(fast, StreamPipeline)
    rnd = random.Random(5)
    now = 0
    for step, row in enumerate(_rows(rnd, 300)):
        now = _maybe_advance(rnd, now, fast, slow)
        got = fast.on_event("T", row, now)
        want = Pipeline.on_event(slow, "T", row, now)
        assert got == want, step
        assert fast.next_timer() == _any_timer(slow), step
        assert fast.iterate() == slow.iterate()


@pytest.mark.parametrize("epl", [e for e in PIPELINES if "irstream" not in e
                                 and "rstream" not in e and "#" not in e.replace("#length", "")
                                 .replace("#lastevent", "")])
def test_row_pipeline_each_matches_general(epl: str) -> None:
    """``RowPipeline.each`` yields, event by event, the insert stream of the general
    ``on_event`` and leaves the same state."""
    spec = _plan(epl).pipeline
    store_fast, store_slow = MemoryStore(), MemoryStore()
    fast = spec.build(store_fast.namespace("s"), PartitionCtx())
    slow = spec.build(store_slow.namespace("s"), PartitionCtx())
    assert isinstance(fast, RowPipeline)
    rnd = random.Random(6)
    for batch in range(30):
        rows = _rows(rnd, rnd.choice([1, 3, 20]))
        got = list(fast.each(rows, batch))
        want = [Pipeline.on_event(slow, "T", r, batch) for r in rows]
        assert got == [new for new, _ in want], batch
        assert all(old == [] for _, old in want)
        assert store_fast.checkpoint() == store_slow.checkpoint()


@pytest.mark.parametrize("epl", PIPELINES)
@pytest.mark.parametrize("mode", ["memory-checkpoint", "rocks-reopen"])
def test_fast_paths_restore_from_state(epl: str, mode: str, tmp_path: Path) -> None:
    """A pipeline rebuilt from its store every few events carries on like one that never
    stopped (the fast paths skip no write a store needs)."""
    spec = _plan(epl).pipeline
    path = tmp_path / "rocks"
    store: Any = RocksStore(path) if mode == "rocks-reopen" else MemoryStore()
    fast = spec.build(store.namespace("s"), PartitionCtx())
    slow = spec.build(MemoryStore().namespace("s"), PartitionCtx())
    rnd = random.Random(11)
    now = 0
    try:
        for step, row in enumerate(_rows(rnd, 120)):
            if step % 7 == 3:
                if mode == "rocks-reopen":
                    store.close()
                    store = RocksStore(path)
                else:
                    store = MemoryStore.restore(store.checkpoint())
                fast = spec.build(store.namespace("s"), PartitionCtx(now_ms=now))
            now = _maybe_advance(rnd, now, fast, slow)
            got = fast.on_event("T", row, now)
            want = Pipeline.on_event(slow, "T", row, now)
            assert got == want, step
            assert fast.iterate() == slow.iterate()
    finally:
        if mode == "rocks-reopen":
            store.close()


@pytest.mark.parametrize("aggregator", [CountStar(), Count(), Sum(), Avg()])
def test_row_updater_leaving_an_absent_row_stops_at_empty(aggregator: Any) -> None:
    """The inlined counters and sums clamp like ``leave``: never below empty."""
    ctx = PartitionCtx()
    value = None if type(aggregator) is CountStar else (lambda r, c: r["amount"])
    leave = fuse_updaters([row_updater(aggregator, 0, value, None, False)])
    fast, slow = [aggregator.initial()], aggregator.initial()
    for amount in (2.5, 1.0):
        leave(fast, {"amount": amount}, ctx)
        slow = aggregator.leave(slow, amount)
    assert fast == [slow] and aggregator.result(slow) in (0, None)


LIMITED = [
    "select symbol, count(*), sum(amount) from T#time(2 sec) group by symbol "
    "output last every 1 sec",
    "select irstream symbol, count(*) from T#time(2 sec) group by symbol output last every 1 sec",
    "select symbol, count(*) as n from T#time(2 sec) group by symbol output all every 1 sec",
    "select symbol, count(*) from T#length(5) group by symbol having count(*) > 1 "
    "output last every 3 events",
    "select symbol, count(*) from T#time(2 sec) group by symbol "
    "output after 4 events last every 1 sec",
    "select * from T#length_batch(3) output every 2 events",
    "select irstream count(*), sum(amount) from T#time_batch(1 sec) output snapshot every 1 sec",
    "select symbol, sum(price) from T group by symbol output first every 1 sec",
    "select symbol, amount from T(amount > 5) output last every 2 events",
    "select rstream symbol, price from T#length(2) output every 1 sec",
]


def _fire(p: Pipeline, now: int) -> list:
    """Every due timer of ``p`` up to ``now``, with what each posted."""
    out = []
    while (due := _any_timer(p)) is not None and due <= now:
        out.append((due, p.on_time(due)))
    return out


@pytest.mark.parametrize("epl", LIMITED)
def test_limited_pipeline_matches_general(epl: str) -> None:
    """``LimitedPipeline.on_event`` posts what the general ``on_event`` posts, with the
    same timers, outputs at timers and state."""
    spec = _plan(epl).pipeline
    store_fast, store_slow = MemoryStore(), MemoryStore()
    fast = spec.build(store_fast.namespace("s"), PartitionCtx())
    slow = spec.build(store_slow.namespace("s"), PartitionCtx())
    assert isinstance(fast, LimitedPipeline)
    rnd = random.Random(8)
    now = 0
    posted = 0
    for step, row in enumerate(_rows(rnd, 300)):
        if rnd.random() < 0.2:
            now += rnd.choice([100, 500, 1500])
            got_t, want_t = _fire(fast, now), _fire(slow, now)
            assert got_t == want_t, step
            posted += sum(len(n) + len(o) for _, (n, o) in want_t)
        got = fast.on_event("T", row, now)
        want = Pipeline.on_event(slow, "T", row, now)
        assert got == want, step
        posted += len(want[0]) + len(want[1])
        assert fast.next_timer() == _any_timer(slow), step
    assert posted, "nothing posted: the comparison would prove nothing"
    assert store_fast.checkpoint() == store_slow.checkpoint()


@pytest.mark.parametrize("epl", [
    "select symbol, count(*) as n, sum(amount) as s from T#length(4) group by symbol",
    "select count(*), symbol, avg(price) from T#time(1 sec) group by symbol",
    "select symbol, amount, count(*) from T group by symbol, amount",
])
def test_touch_groups_is_grouped(epl: str) -> None:
    """``ResultSet.touch_groups`` leaves the aggregation and the stored state that
    ``grouped`` leaves and names the groups it touched in the same order, for one row
    in (then ``ctx.aggs`` alike too) and for updates of several rows in and out (groups
    emptied by leaving rows reclaimed alike)."""
    spec = _plan(epl).pipeline.resultset
    ns_fast, ns_slow = MemoryStore().namespace("s"), MemoryStore().namespace("s")
    ctx_fast, ctx_slow = PartitionCtx(), PartitionCtx()
    fast = spec.build(ns_fast, ctx_fast, False)
    slow = spec.build(ns_slow, ctx_slow, False)
    assert fast.quiet
    rnd = random.Random(3)
    live: list[dict[str, Any]] = []
    for step in range(300):
        new = _rows(rnd, rnd.choice([1, 1, 1, 2, 5]))
        old = [live.pop(0) for _ in range(min(len(live), rnd.choice([0, 0, 1, 3])))]
        if rnd.random() < 0.2:
            new = []
        live += new
        keys = list(fast.touch_groups(new, old))
        g = slow.grouped(new, old)
        assert keys == list(g.before), step
        if len(new) == 1 and not old:
            assert ctx_fast.aggs == ctx_slow.aggs, step
        assert fast.groups == slow.groups, step
        assert dict(ns_fast.items()) == dict(ns_slow.items()), step


@pytest.mark.parametrize("epl", [
    "select irstream symbol, count(*) from T group by symbol",
    "select symbol, count(*) from T group by symbol having count(*) > 1",
    "select symbol, upper(symbol) as u, count(*) from T group by symbol",
    "select symbol, count(*) from T group by symbol order by sum(amount)",
])
def test_enter_one_not_offered_where_rows_matter(epl: str) -> None:
    """A remove stream, having, a computed column or an order-by key: the rows of each
    update are needed or their building may do something, so no ``touch_groups``."""
    spec = _plan(epl).pipeline.resultset
    want_old = "irstream" in epl
    assert not spec.build(MemoryStore().namespace("s"), PartitionCtx(), want_old).quiet


KEYED_CATALOG = ["create context K partition by symbol from T"]


@pytest.mark.parametrize("epl", [
    "select count(*), sum(amount) from T",
    "select sum(amount) as s, symbol, count(*) as n, price from T",
    "select symbol, price, amount, count(*), avg(price) from T",
    "select symbol from T",
    "select symbol, price from T",
    "select price, amount, symbol from T",
    "select price as p, amount, symbol, price as q, amount as a from T",
    "context K select symbol, count(*) as n, sum(amount) as s, price from T",
    "context K select context.key1 as key, price, symbol, count(*) from T",
    "context K select symbol, price from T",
])
def test_plain_projection_matches_column_expressions(epl: str) -> None:
    """The projection reading aggregates and properties directly gives the row the
    column expressions give, with aggregation values at hand or not (an aggregate then
    reads null)."""
    catalog = Catalog.from_schemas(SCHEMA)
    if epl.startswith("context K"):
        plan_statement(catalog, KEYED_CATALOG[0], "ctx")
    spec = plan_statement(catalog, epl, "s").pipeline.resultset
    pairs = tuple((c.name, c.expr) for c in spec.columns)
    general = ResultSetSpec._pairs_projector(pairs)
    fast = spec.projector
    assert fast.__name__ in ("one", "two", "three", "four", "many", "properties")
    ctx = PartitionCtx()
    ctx.props = {"symbol": "A", "key1": "A"}
    rnd = random.Random(4)
    for row in _rows(rnd, 30):
        for aggs in (None, [rnd.randrange(9), rnd.random(), None][:len(spec.aggregates)]):
            ctx.aggs = aggs
            assert fast(row, ctx) == general(row, ctx)
            assert list(fast(row, ctx)) == list(general(row, ctx))


@pytest.mark.parametrize("columns", [
    ("a", "b", "c", "d"),                 # event properties only
    ("a", "b * 2", "c", "d", "a + b"),    # mixed with expressions
    ("a", "b", "c"),                      # three columns: the lambda of three
])
def test_a_projection_reading_properties_gives_each_expression_s_value(
        columns: tuple[str, ...]) -> None:
    from app.epl.expr import _property
    from operators.resultset import ResultSetSpec

    scope = Scope("event")
    pairs = tuple((f"c{i}", _property(text) if text.isalpha() else
                   compile_expr(parse_expression(text), scope))
                  for i, text in enumerate(columns))
    project = ResultSetSpec._pairs_projector(pairs)
    for row in ({"a": 1, "b": 2, "c": "x", "d": 1.5}, {"a": 3, "c": None}, {}):
        want = {name: expr(row, None) for name, expr in pairs}
        got = project(row, None)  # type: ignore[arg-type]
        assert got == want
        assert list(got) == list(want)

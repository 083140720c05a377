"""Pattern matcher: exact matches for Esper pattern semantics, on every state backend.

Each scenario runs four ways and must give the same rows: in memory; in memory with a
new matcher rebuilt from state after every step; on RocksDB (rocksdict) with a rebuild
after every step; and through a MemoryStore checkpoint/restore halfway.  The driver
applies the FORMAT.md clock rule: timers due in (A, B] fire in time order, each at its
own due time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from operators.base import PartitionCtx, Row
from operators.patterns import (
    And,
    CronSpec,
    Every,
    EveryDistinct,
    Filter,
    FollowedBy,
    Not,
    Or,
    PatternMatcher,
    PatternSpec,
    TimerAt,
    TimerInterval,
    Within,
)
from operators.state import MemoryStore, RocksStore

Step = tuple[Any, ...]
Out = list[tuple[int, Row]]
BACKENDS = ("memory", "memory-rebuild", "rocks-rebuild", "checkpoint")


def t(ms: int) -> Step:
    """Move the clock to ``ms``."""
    return ("t", ms)


def e(type_name: str, **props: Any) -> Step:
    """Send one event at the current time."""
    return ("e", type_name, props)


def prop(tag: str, name: str) -> Callable[..., Any]:
    """A pattern expression reading ``tag.name`` from the partial match."""
    return lambda et, ctx: et[1][tag][name]


class Driver:
    """Runs steps against a matcher, rebuilding it from state as the backend asks."""

    def __init__(self, spec: PatternSpec, backend: str, tmp: Path, start: int = 0) -> None:
        self.spec = spec
        self.backend = backend
        self.now = start
        self.rocks: RocksStore | None = None
        if backend == "rocks-rebuild":
            self.rocks = RocksStore(tmp / "db")
            self.ns: Any = self.rocks.namespace("stmt", 0, "pattern")
        else:
            self.store = MemoryStore()
            self.ns = self.store.namespace("stmt", 0, "pattern")
        self.m: PatternMatcher = spec.build(self.ns, PartitionCtx(now_ms=start))
        self.out: Out = []

    def rebuild(self) -> None:
        """A new matcher over the same namespace (what recovery does)."""
        self.m = self.spec.build(self.ns, PartitionCtx(now_ms=self.now))

    def checkpoint(self) -> None:
        """Serialize the whole store, restore it into a new one, rebuild from that."""
        self.store = MemoryStore.restore(self.store.checkpoint())
        self.ns = self.store.namespace("stmt", 0, "pattern")
        self.rebuild()

    def step(self, s: Step) -> None:
        if s[0] == "t":
            while (due := self.m.next_timer()) is not None and due <= s[1]:
                self.out += [(due, r) for r in self.m.on_time(due)]
            self.now = s[1]
        else:
            self.out += [(self.now, r) for r in self.m.on_event(s[1], s[2], self.now)]

    def run(self, steps: list[Step]) -> Out:
        for i, s in enumerate(steps):
            self.step(s)
            if self.backend in ("memory-rebuild", "rocks-rebuild"):
                self.rebuild()
            elif self.backend == "checkpoint" and i == len(steps) // 2:
                self.checkpoint()
        return self.out

    def close(self) -> None:
        if self.rocks is not None:
            self.rocks.close()


@pytest.fixture(params=BACKENDS)
def run(request: pytest.FixtureRequest, tmp_path: Path):
    """``run(spec, steps, start=0) -> (rows with their times, driver)`` on one backend."""
    drivers: list[Driver] = []

    def go(spec: PatternSpec, steps: list[Step], start: int = 0) -> tuple[Out, Driver]:
        d = Driver(spec, request.param, tmp_path / str(len(drivers)), start)
        drivers.append(d)
        return d.run(steps), d

    yield go
    for d in drivers:
        d.close()


A1, A2, A3 = {"id": 1}, {"id": 2}, {"id": 3}


def test_every_a_followed_by_b_pairs_each_a_with_next_b(run) -> None:
    """``every a=A -> b=B``: every A waits for the next B; two As + one B = two matches."""
    spec = PatternSpec(FollowedBy((Every(Filter("a", "A")), Filter("b", "B"))))
    out, d = run(spec, [t(1000), e("A", id=1), t(2000), e("A", id=2), t(3000), e("B", id=10),
                        t(4000), e("B", id=11), t(5000), e("A", id=3), t(6000), e("B", id=12)])
    assert out == [
        (3000, {"a": A1, "b": {"id": 10}}),
        (3000, {"a": A2, "b": {"id": 10}}),
        (6000, {"a": A3, "b": {"id": 12}}),
    ]
    assert not d.m.finished


def test_a_followed_by_b_matches_once_then_finishes(run) -> None:
    """Without ``every`` the whole pattern matches once and stops (finished)."""
    spec = PatternSpec(FollowedBy((Filter("a", "A"), Filter("b", "B"))))
    out, d = run(spec, [e("B", id=0), t(1000), e("A", id=1), e("A", id=2), t(2000),
                        e("B", id=10), t(3000), e("A", id=3), e("B", id=11)])
    assert out == [(2000, {"a": A1, "b": {"id": 10}})]
    assert d.m.finished
    assert d.m.next_timer() is None


def test_finished_turns_true_exactly_at_the_match(tmp_path: Path) -> None:
    """A context condition can ask ``finished`` after each call."""
    spec = PatternSpec(FollowedBy((Filter("a", "A"), Filter("b", "B"))))
    m = spec.build(MemoryStore().namespace("p"), PartitionCtx())
    assert not m.finished
    assert m.on_event("A", A1, 10) == []
    assert not m.finished
    assert m.on_event("B", A2, 20) == [{"a": A1, "b": A2}]
    assert m.finished
    assert m.on_event("A", A3, 30) == [] and m.on_event("B", A3, 30) == []


def test_correlated_filter_reads_earlier_tag(run) -> None:
    """``every a=A(x > 1) -> b=B(id = a.id)``: B's filter sees tag ``a``."""
    spec = PatternSpec(FollowedBy((
        Every(Filter("a", "A", lambda et, ctx: et[0]["x"] > 1)),
        Filter("b", "B", lambda et, ctx: et[0]["id"] == et[1]["a"]["id"]),
    )))
    out, _ = run(spec, [
        t(100), e("A", id=1, x=5), e("A", id=2, x=0), e("A", id=3, x=2),
        t(200), e("B", id=2, y="no-a2"), e("B", id=3, y="b3"),
        t(300), e("B", id=1, y="b1"), e("B", id=1, y="again"),
    ])
    assert out == [
        (200, {"a": {"id": 3, "x": 2}, "b": {"id": 3, "y": "b3"}}),
        (300, {"a": {"id": 1, "x": 5}, "b": {"id": 1, "y": "b1"}}),
    ]


def test_within_guard_ends_the_wait(run) -> None:
    """``every a=A -> (b=B where timer:within(10 sec))``; a B at the deadline is too late."""
    spec = PatternSpec(FollowedBy((
        Every(Filter("a", "A")), Within(Filter("b", "B"), 10_000))))
    out, d = run(spec, [
        t(1000), e("A", id=1), t(12_000), e("B", id=10),  # A1's guard ended at 11000
        t(13_000), e("A", id=2), t(15_000), e("B", id=11),
        t(20_000), e("A", id=3), t(30_000), e("B", id=12),  # deadline 30000 fires first
        t(31_000), e("A", id=4), t(40_999), e("B", id=13),
    ])
    assert out == [(15_000, {"a": A2, "b": {"id": 11}}),
                   (40_999, {"a": {"id": 4}, "b": {"id": 13}})]
    assert len(d.m.nodes) == 3  # '->', every, and the A filter: nothing leaks


def test_within_on_root_times_out_and_finishes(run) -> None:
    """``a=A where timer:within(5 sec)`` that sees no A turns false: finished."""
    spec = PatternSpec(Within(Filter("a", "A"), 5000))
    out, d = run(spec, [t(4999)], start=0)
    assert out == [] and not d.m.finished
    out, d = run(spec, [t(5000), e("A", id=1)], start=0)
    assert out == [] and d.m.finished


def test_power_on_followed_by_interval(run) -> None:
    """context_power_outage end condition: ``PowerOnEvent -> timer:interval(5)``."""
    spec = PatternSpec(FollowedBy((Filter(None, "PowerOnEvent"), TimerInterval(5000))),
                       text="PowerOnEvent -> timer:interval(5)")
    out, d = run(spec, [t(4000), t(6000), e("PowerOnEvent", id="on1"), t(9000), t(11_000),
                        t(12_000), e("PowerOnEvent", id="on2"), t(30_000)], start=3000)
    assert out == [(11_000, {})]
    assert d.m.finished


def test_every_interval_fires_each_minute_from_start(run) -> None:
    """``every timer:interval(1 min)`` from 0 fires at 60000, 120000, ... however cut."""
    spec = PatternSpec(Every(TimerInterval(60_000)))
    out, _ = run(spec, [t(30_000), t(150_000), t(180_000), t(239_999)])
    assert out == [(60_000, {}), (120_000, {}), (180_000, {})]
    out2, _ = run(spec, [t(s * 10_000) for s in range(1, 24)])
    assert out2 == out


def test_login_followed_by_txn(run) -> None:
    """context_keyed_multiple_streams: ``every l=LoginEvent -> t=BankTxn`` in C1's partition."""
    spec = PatternSpec(FollowedBy((Every(Filter("l", "LoginEvent")), Filter("t", "BankTxn"))))
    login = {"loginId": "C1"}
    tx1 = {"custId": "C1", "account": "A1", "amount": 100}
    tx2 = {"custId": "C1", "account": "A2", "amount": 200}
    out, _ = run(spec, [t(1000), e("LoginEvent", **login), t(3000), e("BankTxn", **tx1),
                        t(4000), e("BankTxn", **tx2), t(5000), e("LogoutEvent", loginId="C1")])
    assert out == [(3000, {"l": login, "t": tx1})]


def test_and_waits_for_both_in_any_order(run) -> None:
    """``a=A and b=B``: B first then A matches once; the pattern then finishes."""
    spec = PatternSpec(And((Filter("a", "A"), Filter("b", "B"))))
    out, d = run(spec, [t(10), e("B", id=10), t(20), e("B", id=11), t(30), e("A", id=1),
                        t(40), e("A", id=2), e("B", id=12)])
    assert out == [(30, {"a": A1, "b": {"id": 10}})]
    assert d.m.finished


def test_every_and_keeps_the_first_of_each_operand(run) -> None:
    """``every (a=A and b=B)``: an operand that matched stops listening until the match."""
    spec = PatternSpec(Every(And((Filter("a", "A"), Filter("b", "B")))))
    out, _ = run(spec, [t(1), e("A", id=1), t(2), e("A", id=2), t(3), e("B", id=10),
                        t(4), e("B", id=11), t(5), e("A", id=3)])
    assert out == [(3, {"a": A1, "b": {"id": 10}}), (5, {"a": A3, "b": {"id": 11}})]


def test_or_takes_the_first(run) -> None:
    """``a=A or b=B`` matches the first of either and finishes; ``every (...)`` each one."""
    spec = PatternSpec(Or((Filter("a", "A"), Filter("b", "B"))))
    out, d = run(spec, [t(5), e("B", id=10), t(6), e("A", id=1)])
    assert out == [(5, {"a": None, "b": {"id": 10}})]
    assert d.m.finished
    spec = PatternSpec(Every(Or((Filter("a", "A"), Filter("b", "B")))))
    out, _ = run(spec, [t(5), e("B", id=10), t(6), e("A", id=1), e("C", id=0), e("A", id=2)])
    assert out == [(5, {"a": None, "b": {"id": 10}}), (6, {"a": A1, "b": None}),
                   (6, {"a": A2, "b": None})]


def test_every_a_followed_by_b_and_not_c(run) -> None:
    """``every a=A -> (b=B and not C)``: a C kills every A still waiting for its B."""
    spec = PatternSpec(FollowedBy((
        Every(Filter("a", "A")), And((Filter("b", "B"), Not(Filter("c", "C")))))))
    out, _ = run(spec, [
        t(1), e("A", id=1), t(2), e("C", id=100), t(3), e("B", id=10),  # A1 killed
        t(4), e("A", id=2), t(5), e("B", id=11),  # A2 matched
        t(6), e("A", id=3), e("A", id=4), t(7), e("C", id=101), e("B", id=12),
        t(8), e("A", id=5), t(9), e("B", id=13), e("C", id=102),
    ])
    # a match row names every tag, null when it took no part (c under not)
    assert out == [(5, {"a": A2, "b": {"id": 11}, "c": None}),
                   (9, {"a": {"id": 5}, "b": {"id": 13}, "c": None})]


def test_interval_and_not_from_reference_example(run) -> None:
    """Esper 4.2.6: ``t1=TrainEnterEvent -> timer:interval(5 min) and not TrainLeaveEvent(...)``."""
    spec = PatternSpec(FollowedBy((
        Filter("t1", "TrainEnterEvent"),
        And((TimerInterval(300_000), Not(Filter(
            None, "TrainLeaveEvent", lambda et, ctx: et[0]["trainId"] == et[1]["t1"]["trainId"])))),
    )))
    enter = {"trainId": "T1"}
    out, d = run(spec, [t(1000), e("TrainEnterEvent", **enter), t(2000),
                        e("TrainLeaveEvent", trainId="T2"), t(400_000)])
    assert out == [(301_000, {"t1": enter})]
    assert d.m.finished
    out, d = run(spec, [t(1000), e("TrainEnterEvent", **enter), t(2000),
                        e("TrainLeaveEvent", trainId="T1"), t(400_000)])
    assert out == [] and d.m.finished


def test_every_distinct_with_period(run) -> None:
    """``every-distinct(a.id, 10 sec) a=A``: repeats are dropped until 10 s after the first."""
    spec = PatternSpec(EveryDistinct((prop("a", "id"),), 10_000, Filter("a", "A")))
    out, _ = run(spec, [t(1000), e("A", id=1, n=1), t(2000), e("A", id=1, n=2),
                        t(3000), e("A", id=2, n=3), t(10_999), e("A", id=1, n=4),
                        t(11_000), e("A", id=1, n=5), t(12_000), e("A", id=1, n=6),
                        e("A", id=2, n=7), t(13_000), e("A", id=2, n=8)])
    assert out == [
        (1000, {"a": {"id": 1, "n": 1}}),
        (3000, {"a": {"id": 2, "n": 3}}),
        (11_000, {"a": {"id": 1, "n": 5}}),
        (13_000, {"a": {"id": 2, "n": 8}}),
    ]


def test_every_distinct_without_period_keeps_keys(run) -> None:
    """``every-distinct(a.id) a=A``: each id matches once, ever."""
    spec = PatternSpec(EveryDistinct((prop("a", "id"),), None, Filter("a", "A")))
    out, _ = run(spec, [t(1), e("A", id=1), e("A", id=2), t(10**9), e("A", id=1),
                        e("A", id=3)])
    assert out == [(1, {"a": A1}), (1, {"a": A2}), (10**9, {"a": A3})]


DAY = 86_400_000
NINE = 9 * 3_600_000


def test_timer_at_nine_over_two_days(run) -> None:
    """``every timer:at(0, 9, *, *, *)`` in UTC fires 09:00 on each day, not at the start."""
    spec = PatternSpec(Every(TimerAt(CronSpec.parse([0, 9, "*", "*", "*"]))))
    out, _ = run(spec, [t(2 * DAY)])
    assert out == [(NINE, {}), (DAY + NINE, {})]
    out, _ = run(spec, [t(NINE + 1), t(2 * DAY + NINE)], start=NINE)
    assert out == [(DAY + NINE, {}), (2 * DAY + NINE, {})]


def test_timer_at_without_every_fires_once(run) -> None:
    """``timer:at(0, 9, *, *, *)`` alone fires once, then the pattern is finished."""
    spec = PatternSpec(TimerAt(CronSpec.parse([0, 9, "*", "*", "*"])))
    out, d = run(spec, [t(3 * DAY)], start=NINE - 1000)
    assert out == [(NINE, {})]
    assert d.m.finished


def test_timer_at_keeps_the_milliseconds_of_its_start(run) -> None:
    """Esper computes the next crontab instant from the start time and keeps its
    milliseconds: started at 08:59:59.999, ``timer:at(0, 9, *, *, *)`` fires at
    09:00:00.999, and ``*/3`` seconds started at 1.5 s fires at 3.5 s."""
    spec = PatternSpec(TimerAt(CronSpec.parse([0, 9, "*", "*", "*"])))
    out, _ = run(spec, [t(3 * DAY)], start=NINE - 1)
    assert out == [(NINE + 999, {})]
    cron = CronSpec.parse(["*", "*", "*", "*", "*", "*/3"])
    assert [cron.next_from(1500), cron.next_from(3500), cron.next_from(2999),
            cron.next_after(1500)] == [3500, 6500, 3999, 3000]


def test_timer_at_uses_the_pattern_time_zone(tmp_path: Path) -> None:
    """``tz`` on the spec moves the wall clock: 09:00 New York (EST) is 14:00 UTC."""
    spec = PatternSpec(TimerAt(CronSpec.parse([0, 9, "*", "*", "*"])), tz="America/New_York")
    m = spec.build(MemoryStore().namespace("p"), PartitionCtx())
    assert m.next_timer() == 14 * 3_600_000


def test_every_not_does_not_loop(run) -> None:
    """``every (not A)`` turns true while starting; like the reference it is dropped."""
    spec = PatternSpec(Every(Not(Filter("a", "A"))))
    out, d = run(spec, [t(1), e("A", id=1), t(100)])
    assert out == [] and d.m.finished


def test_not_alone_matches_at_start(tmp_path: Path) -> None:
    """A root ``not A`` is true at once: the match is kept in ``initial_matches``."""
    spec = PatternSpec(Not(Filter("a", "A")))
    m = spec.build(MemoryStore().namespace("p"), PartitionCtx())
    assert m.initial_matches == [{"a": None}]


def test_every_a_then_every_b_spawns_per_a(run) -> None:
    """``every a=A -> every b=B`` (Esper ref. 2, patterns in brief): each A pairs with every
    later B."""
    spec = PatternSpec(FollowedBy((Every(Filter("a", "A")), Every(Filter("b", "B")))))
    out, _ = run(spec, [t(1), e("A", id=1), t(2), e("B", id=10), t(3), e("A", id=2),
                        t(4), e("B", id=11)])
    assert out == [(2, {"a": A1, "b": {"id": 10}}),
                   (4, {"a": A1, "b": {"id": 11}}),
                   (4, {"a": A2, "b": {"id": 11}})]


def test_same_type_keeps_dispatch_order(run) -> None:
    """``every a=A -> b=A``: the restarted ``every`` filter keeps its place (first)."""
    spec = PatternSpec(FollowedBy((Every(Filter("a", "A")), Filter("b", "A"))))
    out, _ = run(spec, [t(1), e("A", id=1), e("A", id=2), e("A", id=3)])
    assert out == [(1, {"a": A1, "b": A2}), (1, {"a": A2, "b": A3})]


def test_outside_tags_are_visible_to_filters(tmp_path: Path) -> None:
    """A correlated end condition: ``EndEvent(id = a.id)`` with ``a`` from the start."""
    spec = PatternSpec(Filter("e", "End", lambda et, ctx: et[0]["id"] == et[1]["a"]["id"]))
    ns = MemoryStore().namespace("p")
    m = spec.build(ns, PartitionCtx(), tags={"a": {"id": 7}})
    assert m.on_event("End", {"id": 1}, 5) == []
    m2 = spec.build(ns, PartitionCtx())  # the outside tags were stored with the state
    assert m2.on_event("End", {"id": 7}, 6) == [{"e": {"id": 7}}]


def test_state_is_refused_by_another_pattern(tmp_path: Path) -> None:
    """State written by one pattern is not silently reinterpreted by another."""
    ns = MemoryStore().namespace("p")
    PatternSpec(Every(Filter("a", "A"))).build(ns, PartitionCtx())
    with pytest.raises(ValueError, match="different pattern"):
        PatternSpec(Every(Filter("b", "B"))).build(ns, PartitionCtx())


def test_rebuild_leaves_identical_state(tmp_path: Path) -> None:
    """Rebuilding after every step writes exactly the state an uninterrupted run writes."""
    spec = PatternSpec(FollowedBy((
        Every(Filter("a", "A")), Within(And((Filter("b", "B"), Not(Filter(None, "C")))), 5000))))
    steps = [t(1), e("A", id=1), t(2), e("A", id=2), t(3), e("B", id=3), t(4), e("A", id=4),
             t(5000), e("C"), t(5003), e("A", id=5), t(6000)]
    plain, rebuilt = Driver(spec, "memory", tmp_path), Driver(spec, "memory-rebuild", tmp_path)
    assert plain.run(steps) == rebuilt.run(steps)
    assert plain.store.root.dump() == rebuilt.store.root.dump()


def test_writes_stay_small(tmp_path: Path) -> None:
    """Per event only the touched instances are written, not the whole instance set."""
    writes: list[bytes] = []
    store = RocksStore(tmp_path / "db", sink=lambda k, v: writes.append(k))
    try:
        spec = PatternSpec(FollowedBy((Every(Filter("a", "A")), Filter("b", "B"))))
        m = spec.build(store.namespace("p"), PartitionCtx())
        for i in range(50):
            m.on_event("A", {"id": i}, i)
        writes.clear()
        m.on_event("A", {"id": 99}, 100)
        assert len(writes) <= 4  # old A filter deleted, new A and B filters put, meta
        writes.clear()
        assert len(m.on_event("B", {"id": 0}, 101)) == 51
        assert len(writes) <= 53
    finally:
        store.close()


def test_describe_and_types() -> None:
    """The spec lists the event types its filters consume and prints itself."""
    spec = PatternSpec(FollowedBy((Every(Filter("a", "A")), Within(Filter("b", "B"), 10_000))))
    assert spec.types() == frozenset({"A", "B"})
    assert spec.tags() == ("a", "b")
    assert spec.describe() == "pattern [every a=A -> (b=B where timer:within(10000 ms))]"
    assert PatternSpec(Filter(None, "X"), text="X").describe() == "pattern [X]"

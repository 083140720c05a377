"""The match_recognize stage of a pipeline: matches, ranking, skip, interval, window
removes, and that a pipeline rebuilt from its state before every step (a restarted
worker) continues a half-matched pattern with the same output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from operators.base import PartitionCtx, Rows
from operators.state import MemoryStore, RocksStore

SCHEMA = {"T": {"id": "string", "k": "string", "v": "long"}}
MODES = ["memory", "memory-rebuild", "memory-checkpoint", "rocks-reopen"]


class Driver:
    """A statement's pipeline over a store; ``mode`` says how it is rebuilt per step."""

    def __init__(self, epl: str, mode: str, tmp_path: Path) -> None:
        self.spec = plan_statement(Catalog.from_schemas(SCHEMA), epl, "q").pipeline
        self.mode = mode
        self.path = tmp_path / "rocks"
        self.store: Any = RocksStore(self.path) if mode.startswith("rocks") else MemoryStore()
        self.now = 0
        self.pipe = self._build()

    def _build(self) -> Any:
        return self.spec.build(self.store.namespace("q", 0), PartitionCtx(now_ms=self.now))

    def _restart(self) -> None:
        if self.mode == "memory-rebuild":
            self.pipe = self._build()
        elif self.mode == "memory-checkpoint":
            self.store = MemoryStore.restore(self.store.checkpoint())
            self.pipe = self._build()
        elif self.mode == "rocks-reopen":
            self.store.close()
            self.store = RocksStore(self.path)
            self.pipe = self._build()

    def send(self, *events: tuple[str, str, int]) -> Rows:
        out: Rows = []
        for ident, k, v in events:
            self._restart()
            out += self.pipe.on_event("T", {"id": ident, "k": k, "v": v}, self.now)[0]
        return out

    def advance(self, to_ms: int) -> Rows:
        out: Rows = []
        while True:
            self._restart()
            due = self.pipe.next_timer()
            if due is None or due > to_ms:
                break
            self.now = due
            out += self.pipe.on_time(due)[0]
        self.now = to_ms
        return out


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def run(epl: str, mode: str, tmp_path: Path, *events: tuple[str, str, int]) -> Rows:
    return Driver(epl, mode, tmp_path).send(*events)


def test_greedy_star_takes_a_row_reluctant_leaves_to_the_next(mode: str, tmp_path: Path) -> None:
    events = [("e1", "x", 20), ("e2", "x", 9), ("e3", "x", 20)]
    greedy = ("select * from T match_recognize (measures A.id as a, count(B.id) as nb, "
              "count(C.id) as nc, D.id as d pattern (A B* C* D) "
              "define A as A.v > 15, B as B.v < 12, C as C.v > 6, D as D.v > 15)")
    # e2 is a B and a C: the greedy B* counts it, the reluctant one leaves it to C
    assert run(greedy, mode, tmp_path, *events) == [{"a": "e1", "nb": 1, "nc": 0, "d": "e3"}]
    reluctant = greedy.replace("B* C*", "B*? C*?")
    assert run(reluctant, mode, tmp_path / "r", *events) == [
        {"a": "e1", "nb": 0, "nc": 1, "d": "e3"}]


def test_plus_at_the_end_matches_as_soon_as_it_can(mode: str, tmp_path: Path) -> None:
    epl = ("select * from T match_recognize (measures A.id as a, B[0].id as b0, "
           "last(B.id) as bl, count(B.id) as n pattern (A B+) "
           "define A as A.v > 10, B as B.v < 10)")
    assert run(epl, mode, tmp_path, ("e1", "x", 11), ("e2", "x", 1), ("e3", "x", 2)) == [
        {"a": "e1", "b0": "e2", "bl": "e2", "n": 1}]


def test_half_matched_pattern_continues_after_restart(mode: str, tmp_path: Path) -> None:
    epl = ("select * from T match_recognize (partition by k measures A.id as a, "
           "first(B.id) as b0, last(B.id) as bl, avg(B.v) as av, C.id as c "
           "pattern (A B+ C) define A as A.v > 12, B as B.v <= 12, C as C.v > 12)")
    d = Driver(epl, mode, tmp_path)
    assert d.send(("e1", "x", 15), ("e2", "y", 14), ("e3", "x", 2), ("e4", "y", 4),
                  ("e5", "x", 6)) == []
    assert d.send(("e6", "y", 20), ("e7", "x", 13)) == [
        {"a": "e2", "b0": "e4", "bl": "e4", "av": 4.0, "c": "e6"},
        {"a": "e1", "b0": "e3", "bl": "e5", "av": 4.0, "c": "e7"}]


def test_skip_to_next_row_and_all_matches(mode: str, tmp_path: Path) -> None:
    events = [("e1", "x", 6), ("e2", "x", 7), ("e3", "x", 8)]
    past = ("select * from T match_recognize (measures A.id as a, B.id as b "
            "pattern (A B) define A as A.v > 5, B as B.v > 5)")
    assert run(past, mode, tmp_path, *events) == [{"a": "e1", "b": "e2"}]
    nxt = past.replace("pattern", "after match skip to next row pattern")
    assert run(nxt, mode, tmp_path / "n", *events) == [{"a": "e1", "b": "e2"},
                                                       {"a": "e2", "b": "e3"}]
    every = ("select * from T match_recognize (measures A.id as a, count(B.id) as n, "
             "C.id as c all matches pattern (A B* C) "
             "define A as A.v > 5, B as B.v > 5, C as C.v > 7)")
    assert run(every, mode, tmp_path / "a", *events) == [
        {"a": "e1", "n": 1, "c": "e3"}, {"a": "e2", "n": 0, "c": "e3"}]


def test_window_removes_leave_partial_matches(mode: str, tmp_path: Path) -> None:
    epl = ("select * from T#length(3) match_recognize (measures A.id as a, "
           "count(B.id) as n, C.id as c pattern (A B* C) "
           "define A as A.v > 15, B as B.v < 15, C as C.v > 15)")
    # e1 leaves the window when e4 arrives: its partial match is gone
    assert run(epl, mode, tmp_path, ("e1", "x", 16), ("e2", "x", 1), ("e3", "x", 2),
               ("e4", "x", 17)) == []
    assert run(epl, mode, tmp_path / "b", ("e1", "x", 16), ("e2", "x", 1),
               ("e3", "x", 17)) == [{"a": "e1", "n": 1, "c": "e3"}]


def test_interval_holds_a_match_for_a_longer_one(mode: str, tmp_path: Path) -> None:
    epl = ("select * from T match_recognize (measures A.id as a, count(B.id) as n "
           "pattern (A B*) interval 5 seconds define A as A.v > 15, B as B.v < 15)")
    d = Driver(epl, mode, tmp_path)
    assert d.send(("e1", "x", 16)) == []
    d.advance(1000)
    assert d.send(("e2", "x", 1)) == []
    d.advance(2000)
    assert d.send(("e3", "x", 2)) == []
    assert d.advance(4999) == []
    assert d.advance(5000) == [{"a": "e1", "n": 2}]


def test_interval_or_terminated_releases_when_the_match_cannot_grow(
        mode: str, tmp_path: Path) -> None:
    epl = ("select * from T match_recognize (measures A.id as a, count(B.id) as n "
           "pattern (A B*) interval 5 seconds or terminated "
           "define A as A.v > 15, B as B.v < 15)")
    d = Driver(epl, mode, tmp_path)
    assert d.send(("e1", "x", 16), ("e2", "x", 1)) == []
    d.advance(1000)
    assert d.send(("e3", "x", 15)) == [{"a": "e1", "n": 1}]
    assert d.advance(10_000) == []


def test_events_leaving_together_leave_their_partial_matches(
        mode: str, tmp_path: Path) -> None:
    epl = ("select * from T#time(2 sec) match_recognize (measures A.id as a, "
           "count(B.id) as n, C.id as c pattern (A B* C) "
           "define A as A.v > 12, B as B.v <= 14, C as C.v > 16)")
    d = Driver(epl, mode, tmp_path)
    assert d.send(("u1", "x", 0), ("m1", "x", 15)) == []
    d.advance(1000)
    assert d.send(("m2", "x", 13)) == []
    assert d.advance(2500) == []  # u1 and m1 leave the window at 2000
    assert d.send(("c1", "x", 17)) == [{"a": "m2", "n": 0, "c": "c1"}]


def test_first_and_last_in_measures_read_non_null_values(mode: str, tmp_path: Path) -> None:
    epl = ("select * from T match_recognize (measures first(A.v) as af, last(A.v) as al, "
           "count(A.v) as an, B.id as b pattern (A{3} B) define B as B.v > 100)")
    assert run(epl, mode, tmp_path, ("e1", "x", None), ("e2", "x", 2), ("e3", "x", None),
               ("e4", "x", 200)) == [{"af": 2, "al": 2, "an": 1, "b": "e4"}]


def test_null_key_partition_outputs_each_match_of_one_event(mode: str, tmp_path: Path) -> None:
    # all matches: an event that is a B and a C completes two matches of its partition;
    # Esper 9 outputs neither in a keyed partition, both in the partition of null keys
    epl = ("select * from T match_recognize (partition by k measures B.id as b, C.id as c "
           "all matches pattern ((B | C)) define B as B.v < 3, C as C.v > 1)")
    assert run(epl, mode, tmp_path, ("e1", "x", 2)) == []
    assert run(epl, mode, tmp_path / "n", ("e1", None, 2)) == [
        {"b": "e1", "c": None}, {"b": None, "c": "e1"}]


def test_an_out_of_sequence_remove_steps_the_window_again(mode: str, tmp_path: Path
                                                          ) -> None:
    epl = ("select * from T#unique(k) match_recognize (measures A.id as a, B.id as b "
           "pattern (A B) define A as A.v > 10, B as B.v < 10)")
    # e4 replaces e3, which matched after e2: the window (e4 of x, e2 of y, in the
    # order of Esper's hash map) is stepped again, so e2 starts a partial match that
    # e4, stepped once more as the new event, completes; and so again for e5
    assert run(epl, mode, tmp_path, ("e1", "x", 0), ("e2", "y", 12), ("e3", "x", 6),
               ("e4", "x", 7), ("e5", "x", 3)) == [
        {"a": "e2", "b": "e3"}, {"a": "e2", "b": "e4"}, {"a": "e2", "b": "e5"}]


def test_an_equal_event_that_never_matched_is_not_the_matched_one(tmp_path: Path) -> None:
    epl = ("select * from T#length(3) match_recognize (measures B.v as b, C.v as c "
           "pattern (B C) define B as B.v <= 2, C as C.v >= 2)")
    # the first ("e", "x", 3) never matched; when it leaves, the equal one that did is
    # still in the window: no out-of-sequence restart steps ("f", "x", 2) twice
    d = Driver(epl, "memory", tmp_path)
    assert d.send(("e", "x", 3), ("d", "x", 0), ("e", "x", 3)) == [{"b": 0, "c": 3}]
    assert d.send(("f", "x", 2)) == []
    assert d.send(("g", "x", 5)) == [{"b": 2, "c": 5}]


def _engine_rows(epl: str, events: list[dict[str, Any]]) -> Rows:
    """The rows the engine posts for the events, sent as they are (not copied)."""
    engine = Engine()
    rows: Rows = []
    engine.listeners.append(lambda s, new, old, p: rows.extend(new))
    engine.deploy(plan_statement(Catalog.from_schemas(SCHEMA), epl, "q"))
    for e in events:
        engine.send("T", e)
    return rows


def test_one_object_sent_twice_is_two_events() -> None:
    epl = ("select * from T#length(3) match_recognize (measures A.id as a, B.id as b, "
           "C.id as c pattern (A B C) define A as A.v > 10, B as B.v > 10, C as C.v < 10)")
    x = {"id": "x", "k": "k", "v": 12}
    # the same row object twice leaves the window twice, oldest first, as two equal
    # events do (no out-of-sequence restart on the first remove)
    events = [x, x, {"id": "y", "k": "k", "v": 11}, {"id": "z", "k": "k", "v": 1},
              {"id": "w", "k": "k", "v": 13}, {"id": "u", "k": "k", "v": 14},
              {"id": "t", "k": "k", "v": 2}]
    copies = [dict(e) for e in events]
    assert _engine_rows(epl, events) == _engine_rows(epl, copies) == [
        {"a": "x", "b": "y", "c": "z"}, {"a": "w", "b": "u", "c": "t"}]


@pytest.mark.parametrize("mode", ["memory-checkpoint", "rocks-reopen"])
def test_restored_matched_events_are_the_windows_rows_again(mode: str, tmp_path: Path
                                                            ) -> None:
    """Read back from the state, the matched events and a length window's rows are
    separate copies; each matched event's number says which row it is, so they are made
    the same objects again, the matched one among equal rows included."""
    d = Driver("select * from T#length(4) match_recognize (measures B.v as b, C.v as c "
               "pattern (B C) define B as B.v <= 2, C as C.v >= 2)", mode, tmp_path)
    assert d.send(("a", "x", 3), ("b", "x", 0), ("c", "x", 3)) == [{"b": 0, "c": 3}]
    d._restart()
    rows, mr = d.pipe.view.posted(), d.pipe.mr
    assert [r["id"] for r in rows] == ["a", "b", "c"]
    assert sorted(mr.matched) == [2, 3] and mr.matched[3] is rows[2] and mr._restored == {}
    assert mr.matched[2] is rows[1]


def test_matched_events_over_a_window_out_of_arrival_order_stay_told_apart_by_value(
        tmp_path: Path) -> None:
    """A window that takes rows back out of arrival order (``#unique``) gives the
    numbers no position: the restored matched events keep their lookup by value."""
    d = Driver("select * from T#unique(id) match_recognize (measures B.v as b, C.v as c "
               "pattern (B C) define B as B.v <= 2, C as C.v >= 2)", "rocks-reopen",
               tmp_path)
    assert d.send(("a", "x", 3), ("b", "x", 0), ("c", "x", 3)) == [{"b": 0, "c": 3}]
    d._restart()
    mr = d.pipe.mr
    assert sorted(mr.matched) == [2, 3] and mr._restored != {}
    assert all(r is not w for r in mr.matched.values() for w in d.pipe.view.posted())

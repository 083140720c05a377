"""The join operator: insert and remove join rows, index and nested-loop lookups, and a
join rebuilt from its windows' state (every step, over both stores) giving the same rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from operators.base import PartitionCtx, Row, Rows
from operators.joins.join import Join
from operators.joins.spec import IndexDef, JoinSpec, JoinStream, Step
from operators.state import MemoryStore, RocksStore
from tests.operators.harness import MODES, P, T, W, X, chain


def _build_view(spec: Any, state: Any, ctx: PartitionCtx) -> Any:
    return spec.build(state, ctx)


def _k(name: str) -> Any:
    return lambda r, c: r.get(name)


def _q(stream: str, name: str) -> Any:
    return lambda r, c: r[stream].get(name)


class Driver:
    """A join of one partition over a store, rebuilt before every step unless plain."""

    def __init__(self, spec: JoinSpec, mode: str, tmp: Path) -> None:
        self.spec, self.mode, self.path = spec, mode, tmp / "rocks"
        self.store: Any = RocksStore(self.path) if mode.startswith("rocks") else MemoryStore()
        self.ctx = PartitionCtx()
        self.join = self._build()
        self.now = 0

    def _build(self) -> Any:
        return Join(self.spec, self.store.namespace("s", 0, "join"), self.ctx, _build_view)

    def _step(self) -> None:
        if self.mode == "memory-checkpoint":
            self.store = MemoryStore.restore(self.store.checkpoint())
        elif self.mode == "rocks-reopen":
            self.store.close()
            self.store = RocksStore(self.path)
        if self.mode not in ("memory", "rocks"):
            self.join = self._build()

    def send(self, type_name: str, event: Row) -> tuple[Rows, Rows]:
        self._step()
        return self.join.on_event(type_name, event, self.now)

    def advance(self, t: int) -> list[tuple[Rows, Rows]]:
        out = []
        while True:
            self._step()
            due = self.join.next_timer()
            if due is None or due > t:
                break
            self.now = due
            new, old = self.join.on_time(due)
            if new or old:
                out.append((new, old))
        self.now = t
        return out

    def close(self) -> None:
        if isinstance(self.store, RocksStore):
            self.store.close()


@pytest.fixture(params=MODES)
def drive(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    made: list[Driver] = []

    def make(spec: JoinSpec) -> Driver:
        d = Driver(spec, request.param, tmp_path / str(len(made)))
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


def _ab(a_view: Any, b_view: Any, indexed: bool) -> JoinSpec:
    """A as a, B as b joined on a.k = b.k, by hash indexes or by nested loops."""
    streams = (JoinStream("A", "a", None, a_view), JoinStream("B", "b", None, b_view))
    if not indexed:
        return JoinSpec(streams, (), ((Step(1),), (Step(0),)))
    indexes = (IndexDef(1, (_k("k"),), ("b.k",)), IndexDef(0, (_k("k"),), ("a.k",)))
    paths = ((Step(1, 0, (_q("a", "k"),), ("a.k",)),),
             (Step(0, 1, (_q("b", "k"),), ("b.k",)),))
    return JoinSpec(streams, indexes, paths)


def _vw(rows: Rows) -> list[tuple[Any, Any]]:
    return [(r["a"]["v"], r["b"]["w"]) for r in rows]


@pytest.mark.parametrize("indexed", [True, False])
def test_insert_and_remove_rows(drive: Any, indexed: bool) -> None:
    d = drive(_ab(W("length", P(2)), W("keepall"), indexed))
    def where(rows: Rows) -> Rows:
        return [r for r in rows if r["a"]["k"] == r["b"]["k"]]

    def send(t: str, e: Row) -> tuple[Any, Any]:
        new, old = d.send(t, e)
        return _vw(where(new)), _vw(where(old))

    assert send("A", {"k": "x", "v": 1}) == ([], [])
    assert send("B", {"k": "x", "w": 10}) == ([(1, 10)], [])
    assert send("B", {"k": "y", "w": 20}) == ([], [])
    assert send("A", {"k": "x", "v": 2}) == ([(2, 10)], [])
    assert send("B", {"k": "x", "w": 30}) == ([(1, 30), (2, 30)], [])
    # a 3rd A pushes v=1 out of length(2): its join rows are removed
    assert send("A", {"k": "y", "v": 3}) == ([(3, 20)], [(1, 10), (1, 30)])


def test_index_lookup_reads_matches_only(drive: Any) -> None:
    d = drive(_ab(W("length", P(5)), W("keepall"), True))
    for i in range(50):
        d.send("B", {"k": f"k{i}", "w": i})
    new, old = d.send("A", {"k": "k7", "v": 1})
    assert _vw(new) == [(1, 7)] and old == []
    assert len(d.join.hashes[0]) == 50 and not d.join.scans


def test_time_windows_expiring_together_remove_each_row_once(drive: Any) -> None:
    d = drive(_ab(W("time", T(10_000)), W("time", T(10_000)), True))
    d.send("A", {"k": "x", "v": 1})
    d.send("B", {"k": "x", "w": 10})
    d.advance(5000)
    assert _vw(d.send("A", {"k": "x", "v": 2})[0]) == [(2, 10)]
    fired = d.advance(10_000)
    assert [(_vw(n), _vw(o)) for n, o in fired] == [([], [(1, 10), (2, 10)])]
    assert d.advance(15_000) == []  # A's v=2 leaves, B is empty: no join row


def test_self_join_posts_each_pair_once(drive: Any) -> None:
    streams = (JoinStream("A", "x", None, W("length", P(2))),
               JoinStream("A", "y", None, W("length", P(2))))
    d = drive(JoinSpec(streams, (), ((Step(1),), (Step(0),))))

    def pairs(rows: Rows) -> list[tuple[int, int]]:
        return [(r["x"]["v"], r["y"]["v"]) for r in rows]

    assert pairs(d.send("A", {"v": 1})[0]) == [(1, 1)]
    assert pairs(d.send("A", {"v": 2})[0]) == [(2, 1), (2, 2), (1, 2)]
    new, old = d.send("A", {"v": 3})
    assert pairs(new) == [(3, 2), (3, 3), (2, 3)]
    assert pairs(old) == [(1, 1), (1, 2), (2, 1)]


def test_unidirectional_stream_alone_triggers(drive: Any) -> None:
    streams = (JoinStream("A", "a", None, None, unidirectional=True),
               JoinStream("B", "b", None, W("length", P(1))))
    indexes = (IndexDef(1, (_k("k"),), ("b.k",)),)
    spec = JoinSpec(streams, indexes, ((Step(1, 0, (_q("a", "k"),), ("a.k",)),), ()))
    d = drive(spec)
    assert d.send("B", {"k": "x", "w": 10}) == ([], [])
    assert _vw(d.send("A", {"k": "x", "v": 1})[0]) == [(1, 10)]
    # B's window replaces its row: no remove-stream row for the unidirectional join
    assert d.send("B", {"k": "x", "w": 20}) == ([], [])
    assert _vw(d.send("A", {"k": "x", "v": 2})[0]) == [(2, 20)]
    assert list(d.join.contents()) == []


def test_contents_is_the_join_of_the_windows(drive: Any) -> None:
    d = drive(_ab(W("length", P(3)), W("keepall"), True))
    for e in ({"k": "x", "v": 1}, {"k": "y", "v": 2}, {"k": "x", "v": 3}):
        d.send("A", e)
    d.send("B", {"k": "x", "w": 10})
    d.send("B", {"k": "z", "w": 30})
    assert _vw(list(d.join.contents())) == [(1, 10), (3, 10)]


def test_describe_names_index_and_loop() -> None:
    assert _ab(W("length", P(2)), W("keepall"), True).describe() == [
        "join A length(2) as a, B keepall() as b",
        "  event of a: lookup b by hash index on (b.k = a.k)",
        "  event of b: lookup a by hash index on (a.k = b.k)"]
    assert _ab(W("length", P(2)), W("keepall"), False).describe()[1:] == [
        "  event of a: lookup b by full scan (nested loop)",
        "  event of b: lookup a by full scan (nested loop)"]


def test_event_a_sort_window_takes_and_evicts_at_once_leaves_no_index_entry(drive: Any) -> None:
    # #sort(2, v desc): v=-1 enters and leaves in one update; B leaving later takes back
    # only the two rows that were joined
    d = drive(_ab(W("sort", P(2), X("v", descending=True)), W("time", T(2000)), True))
    d.send("B", {"k": "a", "w": 4})
    d.send("A", {"k": "a", "v": 1})
    d.send("A", {"k": "a", "v": 2})
    new, old = d.send("A", {"k": "a", "v": -1})
    assert (_vw(new), _vw(old)) == ([(-1, 4)], [(-1, 4)])
    assert len(d.join.hashes[1]) == 2
    fired = d.advance(2000)
    assert [(_vw(n), sorted(_vw(o))) for n, o in fired] == [([], [(1, 4), (2, 4)])]


@pytest.mark.parametrize("a_view", ["length_batch", "groupwin_length_batch"])
def test_batch_window_joins_its_released_batch_only(drive: Any, a_view: str) -> None:
    # Esper ref. 14.2: a batch window posts a batch when it releases it; the batch being
    # collected joins nothing yet, also when the join is rebuilt from its state (its
    # index must come from the released batch, not from the window's iterator)
    view = (W("length_batch", P(3)) if a_view == "length_batch"
            else chain(W("groupwin", X("k")), W("length_batch", P(3))))
    d = drive(_ab(view, W("lastevent"), True))
    assert d.send("A", {"k": "x", "v": 1}) == ([], [])
    assert d.send("A", {"k": "x", "v": 2}) == ([], [])
    assert d.send("B", {"k": "x", "w": 10}) == ([], [])
    new, old = d.send("A", {"k": "x", "v": 3})
    assert (_vw(new), old) == ([(1, 10), (2, 10), (3, 10)], [])
    assert d.send("A", {"k": "x", "v": 4}) == ([], [])
    # the join's snapshot also joins the released batch (v=4 is being collected)
    assert _vw(list(d.join.contents())) == [(1, 10), (2, 10), (3, 10)]
    new, old = d.send("B", {"k": "x", "w": 20})
    assert (_vw(new), _vw(old)) == ([(1, 20), (2, 20), (3, 20)], [(1, 10), (2, 10), (3, 10)])
    assert sorted(r["v"] for r in d.join.views[0].posted()) == [1, 2, 3]

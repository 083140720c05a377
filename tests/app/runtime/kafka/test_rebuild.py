"""A version that rebuilds a statement from-earliest: the engine partition replays its
retained input (events and watermarks) into that statement alone, its rows from the
replay continue its row ids in the next checkpoint, and every other statement keeps
its state and ids."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from app.runtime.kafka.checkpoint import CheckpointRound
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.rebuild import rebuild
from app.runtime.kafka.topology import Group, Topology
from tests.app.runtime.kafka.fakes import UP, FakeInputs, FakeOutput, Names, TruncAdmin, TruncLog

A_1 = "select count(*) as n from Withdrawal#length(100)"
A_2 = "select count(*) as n, sum(amount) as s from Withdrawal#time(2 sec)"
B = "select count(*) as n from Withdrawal#length(100)"


def group(*statements: tuple[str, str]) -> Group:
    config = AppConfig.from_dict({
        "app": "unit", "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "statements": [{"name": n, "epl": e} for n, e in statements]})
    return Topology.plan(config).groups["main"]


def stream(first: int, n: int) -> list[InRecord]:
    """Events with a watermark after every third (one second apart)."""
    out = []
    for i in range(first, first + n):
        out.append(InRecord("event", UP, 2 * i, "Withdrawal", 0, i,
                            {"account": "A", "amount": float(i + 1)}))
        out.append(InRecord("barrier", UP, 2 * i + 1, payload={"t": 1000 * (i // 3 + 1),
                                                               "id": f"w{i}"}))
    return out


class Retained:
    """The retained input: every record sent so far, in order."""

    def __init__(self) -> None:
        self.kept: list[InRecord] = []

    def records(self, part: EnginePartition, alive: Callable[[], None]
                ) -> Iterator[InRecord]:
        yield from self.kept


def run(part: EnginePartition, log: TruncLog, recs: list[InRecord],
        retained: Retained) -> list[tuple]:
    retained.kept.extend(recs)
    part.run(recs)
    rows = [(r.statement, r.seq, dict(r.row)) for r in part.outputs]
    inputs = FakeInputs()
    inputs.position = recs[-1].offset + 1 if recs else 0
    CheckpointRound(FakeOutput(log), Names(), TruncAdmin(log), lambda p: None).run(
        {("main", 0): part}, [], inputs, None)
    return rows


def opened(g: Group, path: Path, log: TruncLog, retained: Retained) -> EnginePartition:
    part = EnginePartition(g, 0, path, [UP], "changelog", None)
    part.rebuild = lambda p, names: rebuild(p, names, retained)
    part.restore(log)
    return part


def test_from_earliest_replays_the_input_into_one_statement(tmp_path: Path) -> None:
    log, retained = TruncLog(), Retained()
    v1 = group(("a", A_1), ("b", B))
    v1.resets = (1, {})
    part = opened(v1, tmp_path / "db", log, retained)
    first = run(part, log, stream(0, 7), retained)
    assert [r for r in first if r[0] == "b"][-1] == ("b", 7, {"n": 7})
    part.close()

    # what a's new text gives over the whole input, run alone from the start
    alone = group(("a", A_2))
    fresh = opened(alone, tmp_path / "alone", TruncLog(), Retained())
    expected = run(fresh, TruncLog(), stream(0, 9), Retained())
    fresh.close()

    v2 = group(("a", A_2), ("b", B))
    v2.resets, v2.replays = (2, {"a": 2}), {"a": 2}
    part = opened(v2, tmp_path / "db", log, retained)
    assert [r.statement for r in part.outputs] == ["a"] * len(part.outputs)
    rows = run(part, log, stream(7, 2), retained)
    part.close()
    # a: its replayed rows, then its live ones, ids after its 7 earlier rows; b goes on
    a_rows = [r for r in rows if r[0] == "a"]
    assert [r[2] for r in a_rows] == [r[2] for r in expected]
    assert [r[1] for r in a_rows] == list(range(8, 8 + len(expected)))
    assert [r for r in rows if r[0] == "b"] == [("b", 8, {"n": 8}), ("b", 9, {"n": 9})]

    # restarted on the same version: no second replay, nothing repeated
    part = opened(v2, tmp_path / "db", log, retained)
    assert part.outputs == []
    again = run(part, log, stream(9, 1), retained)
    part.close()
    # a worker elsewhere, restoring from the changelog alone, has the same state
    part = opened(v2, tmp_path / "elsewhere", log, retained)
    assert part.outputs == []
    elsewhere = run(part, log, stream(10, 1), retained)
    part.close()

    fresh = opened(alone, tmp_path / "alone2", TruncLog(), Retained())
    whole = run(fresh, TruncLog(), stream(0, 11), Retained())
    fresh.close()
    assert [r[2] for r in again + elsewhere if r[0] == "a"] == [r[2] for r in whole][
        len(expected):]
    assert [r for r in again + elsewhere if r[0] == "b"] == [
        ("b", 10, {"n": 10}), ("b", 11, {"n": 11})]


def test_a_fault_before_the_commit_replays_again_once(tmp_path: Path) -> None:
    """An aborted checkpoint reloads the partition: the replay runs again from the
    committed state, and its rows are in the batch once."""
    log, retained = TruncLog(), Retained()
    v1 = group(("a", A_1), ("b", B))
    v1.resets = (1, {})
    part = opened(v1, tmp_path / "db", log, retained)
    run(part, log, stream(0, 4), retained)
    part.close()
    v2 = group(("a", A_2), ("b", B))
    v2.resets, v2.replays = (2, {"a": 2}), {"a": 2}
    part = opened(v2, tmp_path / "db", log, retained)
    before = list(part.outputs)
    part.discard()
    part.load()
    assert part.outputs == before and len(before) == 5  # 4 events, 1 expiry at 2 s
    part.close()

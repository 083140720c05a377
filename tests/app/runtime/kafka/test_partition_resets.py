"""A version that rebuilds a statement from now: each engine partition drops that
statement's state once, writes the deletes to its changelog, and keeps its row ids and
every other statement's state."""

from __future__ import annotations

from pathlib import Path

from app.runtime.kafka.checkpoint import CheckpointRound
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.topology import Group, Topology
from tests.app.runtime.kafka.fakes import UP, FakeInputs, FakeOutput, Names, TruncAdmin, TruncLog


def group() -> Group:
    config = AppConfig.from_dict({
        "app": "unit", "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "statements": [
            {"name": "a", "epl": "select count(*) as n from Withdrawal#length(100)"},
            {"name": "b", "epl": "select count(*) as n from Withdrawal#length(100)"}]})
    return Topology.plan(config).groups["main"]


def events(first: int, n: int) -> list[InRecord]:
    return [InRecord("event", UP, i, "Withdrawal", 0, i, {"account": "A", "amount": 1.0})
            for i in range(first, first + n)]


def run(part: EnginePartition, log: TruncLog, recs: list[InRecord]) -> list[tuple]:
    part.run(recs)
    rows = [(r.statement, r.seq, r.row["n"]) for r in part.outputs]
    inputs = FakeInputs()
    inputs.position = recs[-1].offset + 1
    CheckpointRound(FakeOutput(log), Names(), TruncAdmin(log), lambda p: None).run(
        {("main", 0): part}, [], inputs, None)
    return rows


def test_a_from_now_rebuild_drops_one_statements_state_once(tmp_path: Path) -> None:
    log = TruncLog()
    g = group()
    g.resets = (1, {})
    part = EnginePartition(g, 0, tmp_path / "db", [UP], "changelog", None)
    part.restore(log)
    assert run(part, log, events(0, 3))[-2:] == [("a", 3, 3), ("b", 3, 3)]
    part.close()

    g.resets = (3, {"a": 2})  # version 2 rebuilt a from now, version 3 nothing more
    part = EnginePartition(g, 0, tmp_path / "db", [UP], "changelog", None)
    part.restore(log)
    assert run(part, log, events(3, 2)) == [("a", 4, 1), ("b", 4, 4), ("a", 5, 2), ("b", 5, 5)]
    part.close()

    # restarted on the same version: nothing dropped again
    part = EnginePartition(g, 0, tmp_path / "db", [UP], "changelog", None)
    part.restore(log)
    assert run(part, log, events(5, 1)) == [("a", 6, 3), ("b", 6, 6)]
    part.close()

    # a worker elsewhere, restoring from the changelog alone, has the same state
    part = EnginePartition(g, 0, tmp_path / "elsewhere", [UP], "changelog", None)
    part.restore(log)
    assert run(part, log, events(6, 1)) == [("a", 7, 4), ("b", 7, 7)]
    part.close()

"""A limited unidirectional join clears its stored aggregates at each triggering event by
deleting the records it holds (``drop_records``), not by scanning its namespace: the
rows, the changelog and the database are those of the scan, and a restore goes on alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.topology import Group, Topology
from operators import aggregates
from operators.bags import BagNamespace
from operators.state import RocksNamespace
from tests.app.runtime.kafka.fakes import UP, TruncLog

JOIN = ("select a.v as v, max(b.w) as m, count(*) as n from A as a unidirectional, "
        "B#length(4) as b where a.k = b.k group by a.v ")
STATEMENTS = [
    JOIN + "output every 3 events order by a.v",
    JOIN + "output first every 2 events",
    JOIN + "having max(b.w) > 3 output every 2 events order by a.v desc",
    "select a.k as k, sum(b.w) as s from A as a unidirectional, B#length(4) as b "
    "where a.k = b.k output every 2 events order by s",
]


def group(epl: str) -> Group:
    config = AppConfig.from_dict({
        "app": "uni", "schemas": {"A": {"k": "string", "v": "int"},
                                  "B": {"k": "string", "w": "int"}},
        "statements": [{"name": "s", "epl": epl}]}, Path("."))
    return Topology.plan(config).groups["main"]


def records() -> list[InRecord]:
    out = []
    for i in range(60):
        if i % 3:
            out.append(("A", {"k": f"k{i % 2}", "v": i % 7}))
        else:
            out.append(("B", {"k": f"k{i // 3 % 2}", "w": (i * 5) % 11}))
    return [InRecord("event", UP, i, t, 0, None, p, b"", UP, i) for i, (t, p) in enumerate(out)]


def run(tmp: Path, epl: str, log: TruncLog, recs: list[InRecord]) -> tuple[list, list]:
    """Rows of ``recs`` in batches of 7, each sealed and committed to ``log``, then the
    database's committed entries."""
    part = EnginePartition(group(epl), 0, tmp, [UP], "changelog", None)
    part.restore(log)
    rows: list[Any] = []
    for i in range(0, len(recs), 7):
        part.run(recs[i:i + 7])
        rows += [(r.seq, r.row) for r in part.outputs]
        rec = part.seal()
        if rec is not None:
            value = rec.encode()
            part.committed(log.append(value), len(value))
        part.outputs.clear()
    part.store.flush()
    entries = list(part.store.base.items())
    part.close()
    return rows, entries


@pytest.mark.parametrize("epl", STATEMENTS)
def test_dropping_the_held_records_is_the_scan(tmp_path: Path, epl: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # max() keeps its values in a bag stored per value from the second value on
    monkeypatch.setattr(aggregates, "BAG_FROM", 1)
    recs = records()
    dropped = run(tmp_path / "drop", epl, TruncLog(), recs)
    first_log, second_log = TruncLog(), TruncLog()
    # restarted halfway: the second half restores from the first half's changelog
    half = run(tmp_path / "h1", epl, first_log, recs[:28])
    rest = run(tmp_path / "h2", epl, first_log, recs[28:])
    monkeypatch.delattr(RocksNamespace, "drop_records")
    monkeypatch.delattr(BagNamespace, "drop_records")
    scanned = run(tmp_path / "scan", epl, second_log, recs)
    assert dropped[0] and dropped == scanned
    assert half[0] + rest[0] == dropped[0] and rest[1] == dropped[1]

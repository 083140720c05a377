"""Repeat-until and while patterns survive worker crashes: an engine partition killed
before or after its checkpoint and restored from the changelog gives the rows of an
uninterrupted run (the broker-free protocol of test_worker_restart)."""

from __future__ import annotations

import random
from pathlib import Path

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.reader import Deduper
from app.runtime.kafka.topology import Topology
from tests.app.runtime.kafka.test_worker_restart import MemLog

CONFIG = {
    "app": "unit",
    "schemas": {"A": {"id": "string", "v": "int"}, "B": {"id": "string", "v": "int"}},
    "statements": [
        {"name": "until", "epl": "select a[0].id as a0, a[1].id as a1, b.id as b "
                                 "from pattern [every ([2:] a=A until b=B)]"},
        {"name": "timed", "epl": "select a from pattern "
                                 "[every (a=A until timer:interval(2 sec))]"},
        {"name": "guard", "epl": "select b.id as b from pattern "
                                 "[a=A -> (every b=B) while (b.v > a.v)]"},
    ],
}


def records() -> list[InRecord]:
    """A and B events over four epochs closed by watermarks 1000 .. 4000."""
    out: list[InRecord] = []
    seq = 0
    for epoch, t in enumerate((1000, 2000, 3000, 4000)):
        for i in range(5):
            seq += 1
            kind = "B" if (i + epoch) % 3 == 2 else "A"
            out.append(InRecord("event", "src:0", len(out), kind, t - 1000 + i, seq,
                                {"id": f"{kind}{seq}", "v": (seq * 7) % 11}))
        out.append(InRecord("barrier", "src:0", len(out), payload={"t": t, "id": f"w{t}"}))
    return [r._replace(via="in", via_offset=i) for i, r in enumerate(out)]


def run(tmp: Path, rnd: random.Random, crash_rate: float) -> list[tuple[str, dict]]:
    """Feed batches, checkpoint each, and now and then die before or after the commit."""
    group = Topology.plan(AppConfig.from_dict(CONFIG)).groups["main"]
    arrival = records()
    log = MemLog()
    dedupe = Deduper()
    rows: list[tuple[str, dict]] = []

    def fresh() -> EnginePartition:
        part = EnginePartition(group, 0, tmp / "db", ["src:0"], "changelog")
        part.restore(log)
        return part

    part = fresh()
    pos = committed = 0
    while pos < len(arrival):
        batch = arrival[pos:pos + rnd.randint(1, 4)]
        part.run(batch)
        rec = part.seal()
        crash = rnd.random() < crash_rate
        if crash and rnd.random() < 0.5:  # killed before the transaction committed
            part.close()
            part = fresh()
            pos = committed
            continue
        if rec is not None:
            log.records.append(rec.encode())
            for stmt, _stream, cp, _t, seq, row, _c in part.outputs:
                if dedupe.fresh(f"{stmt}/{cp}/{seq}"):
                    rows.append((stmt, row))
        committed = min(pos + len(batch), part.hold().get("in", len(arrival)))
        if crash:  # killed after the transaction, before the local database commit
            part.close()
            part = fresh()
            pos = committed
            continue
        if rec is not None:
            part.committed(len(log.records) - 1)
        else:
            part.committed_unchanged()
        pos += len(batch)
    part.close()
    return rows


def test_repeat_and_while_state_survives_crashes(tmp_path: Path) -> None:
    reference = run(tmp_path / "ref", random.Random(0), crash_rate=0.0)
    by_stmt: dict[str, list[dict]] = {}
    for stmt, row in reference:
        by_stmt.setdefault(stmt, []).append(row)
    # events: A1 A2 B3 A4 A5 | A6 B7 A8 A9 B10 | B11 A12 A13 B14 A15 | A16 A17 B18 A19 A20
    assert [{k: r[k] for k in ("a0", "a1", "b")} for r in by_stmt["until"]] == [
        {"a0": "A1", "a1": "A2", "b": "B3"}, {"a0": "A4", "a1": "A5", "b": "B7"},
        {"a0": "A8", "a1": "A9", "b": "B10"}, {"a0": "A12", "a1": "A13", "b": "B14"},
        {"a0": "A15", "a1": "A16", "b": "B18"}]
    assert [[e["id"] for e in r["a"]] for r in by_stmt["timed"]] == [
        ["A1", "A2", "A4", "A5", "A6", "A8", "A9"],
        ["A12", "A13", "A15", "A16", "A17", "A19", "A20"]]
    assert by_stmt["guard"] == [{"b": "B3"}]  # A1 v=7; B3 v=10 > 7, B7 v=5 ends it
    for trial in range(8):
        rnd = random.Random(trial + 1)
        got = run(tmp_path / f"t{trial}", rnd, crash_rate=0.3)
        assert got == reference, f"trial {trial}"

"""Changelog snapshots and truncation, without a broker.

``Driver`` runs the worker's checkpoint (``CheckpointRound``) over an in-memory output log
whose changelog has a low watermark and deletes records: a batch record is appended
together with its output rows (one transaction), then the local database is committed;
when due, the snapshot parts are appended, committed, and the records before them
deleted.  Without transactions (``adjacent``) records of another writer can land between
ours.  Every test
compares with an uninterrupted run without snapshots: the same rows with the same ids
(deduplicated by ``kepl.id``), and the same state.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from app.runtime.kafka.checkpoint import CheckpointRound
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import Chain, EnginePartition, InRecord, SnapshotPolicy
from app.runtime.kafka.reader import Deduper
from app.runtime.kafka.store import ChangelogRecord, entry_size
from app.runtime.kafka.topology import Topology
from tests.app.runtime.kafka.fakes import (
    UP,
    FakeInputs,
    FakeOutput,
    Names,
    TruncAdmin,
    TruncLog,
)

POLICY = SnapshotPolicy(floor=4000, factor=4.0, part_bytes=600)


def group() -> Any:
    config = AppConfig.from_dict({
        "app": "unit", "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "statements": [
            {"name": "w", "epl": "select irstream count(*) as cnt, sum(amount) as total "
                                 "from Withdrawal#length(20)"},
            {"name": "g", "epl": "select account, sum(amount) as s "
                                 "from Withdrawal#time(3 sec) group by account"}]})
    return Topology.plan(config).groups["main"]


GROUP = group()


def records(n: int) -> list[InRecord]:
    """``n`` events of one upstream partition, a barrier (+1 s) after every 7th."""
    out: list[InRecord] = []
    t = 0
    for i in range(n):
        out.append(InRecord("event", UP, len(out), "Withdrawal", t, i,
                            {"account": f"A{i % 5}", "amount": float(i % 13 + 1)}))
        if i % 7 == 6:
            t += 1000
            out.append(InRecord("barrier", UP, len(out), payload={"t": t, "id": f"w{t}"}))
    return out


class Crash(Exception):
    """The worker died at a checkpoint's seam point."""


CRASH_POINTS = {"before_record": "before_flush", "after_record": "after_flush",
                "after_snapshot": "after_snapshot", "before_truncate": "before_truncate"}
"""The test's crash names and the checkpoint's seam points (``mid_snapshot`` apart)."""


class Driver:
    """A worker's part of the protocol: ``CheckpointRound`` over an in-memory output log
    whose changelog is a ``TruncLog``, with crash points."""

    def __init__(self, path: Path, log: TruncLog, policy: SnapshotPolicy | None,
                 adjacent: bool = False, whole: bool = True) -> None:
        """``whole``: a due snapshot is written at once, after the batch that made it
        due; else one part after each batch, as the worker writes them."""
        self.path = path
        self.adjacent = adjacent
        self.whole = whole
        self.log = log
        self.policy = policy
        self.out = FakeOutput(log, exactly_once=not adjacent)
        self.crash_at = ""
        self.round = CheckpointRound(self.out, Names(), TruncAdmin(log), self.write_rows,
                                     seam=self, parts_per_round=None if whole else 1)
        self.inputs = FakeInputs()
        self.dedupe = Deduper()
        self.rows: list[tuple[str, str, Any]] = []
        self.part = self.open()

    @property
    def snapshots(self) -> list[list[int]]:
        """Offsets of each committed snapshot's parts."""
        return self.out.snapshots

    @property
    def writing(self) -> list[int]:
        """Offsets of the parts of the snapshot being written."""
        return self.out.writing

    def open(self) -> EnginePartition:
        part = EnginePartition(GROUP, 0, self.path, [UP], "changelog", self.policy,
                               adjacent=self.adjacent)
        part.restore(self.log)
        return part

    def write_rows(self, part: EnginePartition) -> None:
        for r in part.outputs:
            self.out.produce("rows", json.dumps([f"{r.statement}/{r.context_partition}/"
                                                 f"{r.seq}", r.stream, r.row]).encode(), 0)

    def at(self, point: str) -> None:
        """The seam: die at the crash point this batch names."""
        crash = self.crash_at
        if not crash:
            return
        if crash == "mid_snapshot":
            w = self.part.writing
            # whole: the last part of a snapshot of several; else any part, before its
            # transaction commits
            if point == "snapshot_commit" and (
                    not self.whole or (w is not None and w.head is None and self.writing)):
                raise Crash(point)
        elif CRASH_POINTS[crash] == point:
            raise Crash(point)

    def crash(self, lose_db: bool = False) -> None:
        self.out.abort()
        self.part.close()
        if lose_db:
            shutil.rmtree(self.path)
        self.part = self.open()

    def batch(self, batch: list[InRecord], crash: str = "") -> None:
        """Apply and make durable; ``crash``: where the worker dies (``before_record``,
        ``after_record`` (record and rows committed, local database not),
        ``mid_snapshot``, ``after_snapshot``, ``before_truncate``)."""
        self.crash_at = crash
        self.part.run(batch)
        died = False
        try:
            self.round.run({("main", 0): self.part}, [], self.inputs, None)
        except Crash:
            died = True  # restarted below: the traceback holds the snapshot's iterator
        finally:
            self.publish()
        if died:
            self.crash()

    def publish(self) -> None:
        for value in self.out.taken("rows"):
            rid, stream, row = json.loads(value)
            if self.dedupe.fresh(rid):
                self.rows.append((rid, stream, row))

    def state(self) -> dict[bytes, bytes]:
        return dict(self.part.store.state_items())

    def close(self) -> None:
        self.part.close()


def batches(recs: list[InRecord], size: int) -> list[list[InRecord]]:
    return [recs[i:i + size] for i in range(0, len(recs), size)]


def reference(tmp: Path, recs: list[InRecord], size: int = 4) -> Driver:
    """The uninterrupted run without snapshots (closed; rows and state kept)."""
    d = Driver(tmp / "ref", TruncLog(), None)
    for b in batches(recs, size):
        d.batch(b)
    d.ref_state = d.state()  # type: ignore[attr-defined]
    d.close()
    assert len(d.rows) > len(recs)
    return d


# -- snapshot trigger ------------------------------------------------------------------


def test_snapshot_is_due_past_the_threshold_and_holds_the_whole_state(tmp_path: Path
                                                                      ) -> None:
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY)
    written = 0  # batch record bytes since the last snapshot
    last_snapshot = 0
    for b in batches(records(600), 4):
        part = d.part
        before = len(d.snapshots)
        d.batch(b)
        if len(d.snapshots) == before:
            assert ChangelogRecord.decode(log.records[part.cl_offset]).snapshot is None
            written += len(log.records[part.cl_offset])
            assert written <= max(4 * last_snapshot, POLICY.floor)
            assert part.since_snapshot == written
            continue
        # a snapshot: it followed the first batch that crossed the threshold
        offsets = d.snapshots[-1]
        batch_offset = offsets[0] - 1
        written += len(log.history[batch_offset])
        assert written > max(4 * last_snapshot, POLICY.floor)
        snap_state = dict(d.state())
        parts = [ChangelogRecord.decode(log.records[o]) for o in offsets]
        assert len(parts) > 1
        assert [p.snapshot["part"] for p in parts] == list(range(len(parts)))
        assert [p.snapshot["last"] for p in parts] == [False] * (len(parts) - 1) + [True]
        assert {p.snapshot["id"] for p in parts} == {batch_offset}
        assert [p.prev for p in parts] == [batch_offset + i for i in range(len(parts))]
        for p in parts:  # bounded parts (an entry larger than a part would go alone)
            assert sum(entry_size(k, v) for k, v in p.writes) <= POLICY.part_bytes
        union = [kv for p in parts for kv in p.writes]
        assert dict(union) == snap_state and len(union) == len(snap_state)
        total = sum(entry_size(k, v) for k, v in snap_state.items())
        assert [p.snapshot["bytes"] for p in parts] == [  # so far, the whole in the last
            sum(entry_size(k, v) for p in parts[:i + 1] for k, v in p.writes)
            for i in range(len(parts))]
        assert parts[-1].snapshot["bytes"] == total
        assert part.snapshot_bytes == total and part.since_snapshot == 0
        assert part.cl_offset == offsets[-1]
        assert log.low == offsets[0]  # everything before the snapshot is gone
        last_snapshot = total
        written = 0
    assert len(d.snapshots) >= 3
    # the next batch record continues the chain after the last part
    for offsets in d.snapshots[:-1]:
        nxt = ChangelogRecord.decode(log.history[offsets[-1] + 1])
        assert nxt.snapshot is None and nxt.prev == offsets[-1]
    d.close()


def test_a_snapshot_written_part_by_part_holds_the_state_it_began_with(tmp_path: Path
                                                                      ) -> None:
    """One part after each batch: the batches in between chain between the parts, and
    the parts together are the state committed when the snapshot began."""
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY, whole=False)
    began: dict[int, dict[bytes, bytes]] = {}  # snapshot id -> state at that point
    for b in batches(records(900), 4):
        writing = d.part.writing is not None
        d.batch(b)
        if not writing and d.part.writing is not None:
            began[d.part.writing.id] = d.state()
            assert d.part.since_snapshot > 0  # still counting until the last part is in
    assert len(d.snapshots) >= 2
    for offsets in d.snapshots:
        parts = [ChangelogRecord.decode(log.history[o]) for o in offsets]
        snap_id = parts[0].snapshot["id"]
        assert [p.snapshot["part"] for p in parts] == list(range(len(parts)))
        assert {p.snapshot["id"] for p in parts} == {snap_id}
        union = dict(kv for p in parts for kv in p.writes)
        assert union == began[snap_id] and union != d.state()
        between = [ChangelogRecord.decode(log.history[o])
                   for o in range(offsets[0] + 1, offsets[-1]) if o not in offsets]
        assert between and all(r.snapshot is None for r in between)  # interleaved
        # one chain, each part first in its checkpoint's transaction and that
        # checkpoint's batch after it in the same one
        at = Chain(offsets[0])
        at.take(ChangelogRecord.decode(log.history[offsets[0]]), offsets[0])
        for o in range(offsets[0] + 1, offsets[-1] + 1):
            rec = ChangelogRecord.decode(log.history[o])
            assert at.follows(rec)
            assert rec.n == (1 if o - 1 in offsets and o not in offsets else 0)
            at.take(rec, o)
    assert log.low == d.snapshots[-1][0]
    d.close()


@pytest.mark.parametrize("at", ["mid", "end"])
def test_restore_loads_parts_and_replays_the_batches_between_them(tmp_path: Path,
                                                                 at: str) -> None:
    """A new machine restores from a snapshot written part by part (the batches held
    until its last part is loaded), then goes on: same rows and state as without."""
    recs = records(900)
    ref = reference(tmp_path, recs)
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY, whole=False)
    bs = batches(recs, 4)
    restored = 0
    for i, b in enumerate(bs):
        d.batch(b)
        parts_written = -1 if d.part.writing is None else d.part.writing.part
        if restored < 2 and len(d.snapshots) >= 1 and (
                (at == "mid" and parts_written >= 2)
                or (at == "end" and parts_written < 0 and log.low == d.snapshots[-1][0]
                    and i % 5 == 0)):
            state, cl = d.state(), d.part.cl_offset
            log.reads = 0
            d.crash(lose_db=True)
            assert log.reads == log.high - log.low
            assert d.state() == state and d.part.cl_offset == cl
            restored += 1
    assert restored == 2
    assert d.rows == ref.rows
    assert d.state() == ref.ref_state  # type: ignore[attr-defined]
    d.close()


def test_no_policy_writes_no_snapshot(tmp_path: Path) -> None:
    log = TruncLog()
    d = Driver(tmp_path / "db", log, None)
    for b in batches(records(300), 4):
        d.batch(b)
    assert d.snapshots == [] and log.low == 0
    assert all(ChangelogRecord.decode(v).snapshot is None for v in log.history)
    d.close()


# -- restore ---------------------------------------------------------------------------


def test_restore_from_snapshot_and_tail_equals_uninterrupted_run(tmp_path: Path) -> None:
    recs = records(700)
    ref = reference(tmp_path, recs)
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY)
    bs = batches(recs, 4)
    half = len(bs) // 2
    for b in bs[:half]:
        d.batch(b)
    assert len(d.snapshots) >= 2 and log.low == d.snapshots[-1][0]
    state_before = d.state()
    cl_before = d.part.cl_offset
    log.reads = 0
    d.crash(lose_db=True)  # a new machine: only the changelog remains
    assert d.state() == state_before
    assert d.part.cl_offset == cl_before
    assert log.reads == log.high - log.low  # read from the low watermark only
    for b in bs[half:]:
        d.batch(b)
    assert d.rows == ref.rows
    assert d.state() == ref.ref_state  # type: ignore[attr-defined]
    d.close()


@pytest.mark.parametrize("whole", [True, False], ids=["whole", "part-per-batch"])
def test_restore_keeps_the_snapshot_schedule(tmp_path: Path, whole: bool) -> None:
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY, whole=whole)
    for b in batches(records(400), 4):
        d.batch(b)
    since, size = d.part.since_snapshot, d.part.snapshot_bytes
    assert since > 0 and size > 0
    d.crash()
    assert (d.part.since_snapshot, d.part.snapshot_bytes) == (since, size)
    d.crash(lose_db=True)
    assert (d.part.since_snapshot, d.part.snapshot_bytes) == (since, size)
    d.close()


@pytest.mark.parametrize("lose_db", [False, True])
def test_crash_mid_snapshot(tmp_path: Path, lose_db: bool) -> None:
    recs = records(700)
    ref = reference(tmp_path, recs)
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY)
    tail_end = -1  # last part of the incomplete snapshot
    for b in batches(recs, 4):
        if tail_end < 0 and d.snapshots and _due_after(d, b):
            low, high = log.low, log.high
            d.batch(b, crash="mid_snapshot")
            tail_end = log.high - 1
            # the incomplete snapshot stays at the tail; nothing was deleted
            tail = [ChangelogRecord.decode(log.records[o]) for o in range(high + 1, log.high)]
            assert tail and all(r.snapshot is not None for r in tail)
            assert not tail[-1].snapshot["last"]
            assert log.low == low
            if lose_db:  # restored from the earlier complete snapshot, past the partial one
                assert log.low > 0
                d.crash(lose_db=True)
            assert d.part.cl_offset == tail_end  # the chain continues after the parts
            continue
        d.batch(b)
        if tail_end >= 0 and tail_end + 1 in log.records:
            assert ChangelogRecord.decode(log.records[tail_end + 1]).prev == tail_end
    assert tail_end > 0
    assert len(d.snapshots) >= 3  # later snapshots complete as usual
    assert d.rows == ref.rows
    assert d.state() == ref.ref_state  # type: ignore[attr-defined]
    d.close()


def _due_after(d: Driver, batch: list[InRecord]) -> bool:
    """Whether ``batch`` will make a snapshot due (tried on a throw-away copy)."""
    probe = d.path.parent / "probe"
    shutil.rmtree(probe, ignore_errors=True)
    d.part.close()
    shutil.copytree(d.path, probe)
    d.part = d.open()
    part = EnginePartition(GROUP, 0, probe, [UP], "changelog", d.policy)
    part.restore(d.log)
    part.run(batch)
    rec = part.seal()
    due = False
    if rec is not None:
        part.committed(part.cl_offset + 1)
        due = part.snapshot_due()
    part.close()
    return due


def test_local_database_older_than_the_truncation_point(tmp_path: Path) -> None:
    recs = records(900)
    ref = reference(tmp_path, recs)
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY)
    bs = batches(recs, 4)
    for b in bs[:20]:
        d.batch(b)
    d.part.close()
    old = tmp_path / "old"
    shutil.copytree(d.path, old)  # this machine's database, left behind
    d.part = d.open()
    for b in bs[20:150]:
        d.batch(b)
    old_marker = EnginePartition(GROUP, 0, old, [UP], "changelog").store.marker()
    assert old_marker < log.low - 1  # the records after it were deleted
    expected = d.state()
    d.part.close()
    shutil.rmtree(d.path)
    shutil.copytree(old, d.path)  # the partition comes back to the old machine
    d.part = d.open()
    assert d.state() == expected
    for b in bs[150:]:
        d.batch(b)
    assert d.rows == ref.rows
    assert d.state() == ref.ref_state  # type: ignore[attr-defined]
    d.close()


def test_local_database_just_before_the_snapshot_continues(tmp_path: Path) -> None:
    """Marker = low watermark - 1: nothing it needs was deleted, so no rebuild."""
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY)
    for b in batches(records(300), 4):
        d.batch(b, crash="before_truncate" if log.high > 0 and _due_after(d, b) else "")
        if d.snapshots:
            break
    assert d.snapshots
    first = d.snapshots[0][0]
    d.part.store.set_marker(first - 1)  # as if it never saw the snapshot
    d.part.close()
    log.delete_before(first)
    part = EnginePartition(GROUP, 0, d.path, [UP], "changelog", POLICY)
    state = dict(part.store.state_items())
    log.reads = 0
    part.restore(log)
    assert log.reads == log.high - first
    assert part.cl_offset == log.high - 1
    assert dict(part.store.state_items()) == state  # continued, not rebuilt
    part.close()


def test_partly_truncated_snapshot_is_skipped(tmp_path: Path) -> None:
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY)
    for b in batches(records(700), 4):
        d.batch(b)
        if len(d.snapshots) == 2:
            break
    assert len(d.snapshots[-1]) > 1
    d.part.close()
    shutil.rmtree(d.path)
    log.delete_before(d.snapshots[-1][1])  # the first part of the newest snapshot is gone
    with pytest.raises(RuntimeError, match="no complete snapshot"):
        EnginePartition(GROUP, 0, d.path, [UP], "changelog", POLICY).restore(log)
    shutil.rmtree(d.path)
    # a later complete snapshot is found past the partial one
    log2 = TruncLog()
    d2 = Driver(tmp_path / "db2", log2, POLICY)
    for b in batches(records(700), 4):
        d2.batch(b, crash="before_truncate")
        if len(d2.snapshots) == 3:
            break
    state = d2.state()
    d2.part.close()
    shutil.rmtree(d2.path)
    log2.delete_before(d2.snapshots[1][1])
    part = EnginePartition(GROUP, 0, d2.path, [UP], "changelog", POLICY)
    part.restore(log2)
    assert dict(part.store.state_items()) == state
    assert part.cl_offset == log2.high - 1
    part.close()


def test_a_crash_between_the_transaction_and_a_due_snapshot_loses_nothing(tmp_path: Path
                                                                          ) -> None:
    """The batch record and its rows committed; the local database and the snapshot did
    not: restore replays the record, and the rows are not written twice."""
    recs = records(500)
    ref = reference(tmp_path, recs)
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY)
    crashes = 0
    for b in batches(recs, 4):
        if log.high > 0 and _due_after(d, b):
            crashes += 1
            d.batch(b, crash="after_record")
            d.crash(lose_db=crashes % 2 == 0)
            continue
        d.batch(b)
    assert crashes >= 2
    assert d.rows == ref.rows
    d.close()


@pytest.mark.parametrize("whole", [True, False], ids=["whole", "part-per-batch"])
@pytest.mark.parametrize("seed", range(8))
def test_random_crashes_with_snapshots(tmp_path: Path, seed: int, whole: bool) -> None:
    recs = records(500)
    ref = reference(tmp_path, recs)
    rnd = random.Random(seed)
    log = TruncLog()
    d = Driver(tmp_path / "db", log, SnapshotPolicy(floor=1500, factor=2.0, part_bytes=400),
               whole=whole)
    points = ["before_record", "after_record", "mid_snapshot", "after_snapshot",
              "before_truncate"]
    pos = 0
    while pos < len(recs):
        batch = recs[pos:pos + rnd.randint(1, 6)]
        crash = rnd.choice(points) if rnd.random() < 0.15 else ""
        d.batch(batch, crash)
        if crash:
            if rnd.random() < 0.3:
                d.crash(lose_db=True)
            # the consumer re-reads from somewhere not after the first unapplied record
            pos = max(0, pos - rnd.randint(0, 5))
            continue
        pos += len(batch)
    assert d.snapshots and log.low > 0
    assert d.rows == ref.rows
    assert d.state() == ref.ref_state  # type: ignore[attr-defined]
    d.close()


def zombie_records(prev: int, snapshot: bool) -> list[ChangelogRecord]:
    """Records of a writer that lost the partition: a stale ``prev``, foreign state."""
    writes = [(b"zombie", b"state")]
    if not snapshot:
        return [ChangelogRecord(prev, {"group": "main", "partition": 0}, writes)]
    meta = {"group": "main", "partition": 0}
    return [ChangelogRecord(prev + i, {**meta, "snapshot": {"id": prev, "part": i,
                                                            "parts": 2, "bytes": 13}},
                            writes) for i in range(2)]


@pytest.mark.parametrize("lose_db", [False, True])
def test_stale_writer_records_are_ignored(tmp_path: Path, lose_db: bool) -> None:
    recs = records(600)
    ref = reference(tmp_path, recs)
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY, adjacent=True)
    zombies = stops = 0
    bs = batches(recs, 4)
    i = 0
    while i < len(bs):
        if d.snapshots and i % 9 == 0 and zombies <= i // 9:
            # a stale writer appends after the live one's last record
            for z in zombie_records(d.part.cl_offset - 1, snapshot=zombies % 2 == 1):
                log.append(z.encode())
            zombies += 1
        try:
            d.batch(bs[i])
        except RuntimeError as e:
            # the live writer's record did not land right after its last one: it stops
            # (crash-only), restores, and the consumer delivers the batch again
            assert "another worker writes" in str(e)
            stops += 1
            d.crash(lose_db=lose_db)
            continue
        i += 1
    assert zombies >= 4 and stops >= zombies
    assert d.rows == ref.rows
    assert d.state() == ref.ref_state  # type: ignore[attr-defined]
    d.close()


def test_partial_snapshot_loaded_before_a_complete_one_is_wiped(tmp_path: Path) -> None:
    """Low watermark inside snapshot 1, snapshot 2 incomplete, snapshot 3 complete: the
    parts of 2 loaded while looking for a complete snapshot must not survive into 3."""
    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY)
    bs = iter(batches(records(900), 4))
    while len(d.snapshots) < 1:
        d.batch(next(bs), crash="before_truncate")
    for b in bs:
        if _due_after(d, b):
            d.batch(b, crash="mid_snapshot")
            break
        d.batch(b)
    for b in bs:
        d.batch(b, crash="before_truncate")
        if len(d.snapshots) == 2:
            break
    state = d.state()
    assert len(d.snapshots) == 2 and log.low == 0
    d.part.close()
    shutil.rmtree(d.path)
    log.delete_before(d.snapshots[0][1])
    part = EnginePartition(GROUP, 0, d.path, [UP], "changelog", POLICY)
    part.restore(log)
    assert dict(part.store.state_items()) == state
    part.close()


def test_a_restore_reports_progress_per_record_read(tmp_path: Path) -> None:
    # the worker's /healthz stays live through a long restore: one call per record
    log = TruncLog()
    d = Driver(tmp_path / "db", log, None)
    for b in batches(records(60), 4):
        d.batch(b)
    d.close()
    calls: list[int] = []
    part = EnginePartition(GROUP, 0, tmp_path / "fresh", [UP], "changelog", None)
    part.restore(log, lambda: calls.append(1))
    assert len(calls) == log.high - log.low > 0
    part.close()


def test_status_reports_the_snapshot_the_changelog_begins_with(tmp_path: Path) -> None:
    """``kepl status``: the snapshot at the low watermark, its parts counted past the
    batches between them, its size from the last part."""
    from app.runtime.kafka.ops import _first_snapshot

    log = TruncLog()
    d = Driver(tmp_path / "db", log, POLICY, whole=False)
    for b in batches(records(900), 4):
        d.batch(b)
        if len(d.snapshots) == 2 and d.part.writing is None:
            break
    offsets = d.snapshots[-1]
    assert log.low == offsets[0] and len(offsets) > 1
    assert _first_snapshot(log, "changelog", 0, log.low) == {
        "offset": offsets[0], "id": offsets[0] - 1, "parts": len(offsets),
        "bytes": d.part.snapshot_bytes}
    assert _first_snapshot(log, "changelog", 0, offsets[0] + 1) is None  # not a first part
    d.close()


def test_records_of_one_transaction_chain_by_its_token_not_a_stale_writers(
        tmp_path: Path) -> None:
    """Two records of one transaction share ``prev`` (the second cannot know the first's
    offset): the second follows by the transaction's token and place, so a stale
    writer's records with the same ``prev`` and places, interleaved, are passed over."""
    meta = {"group": "main", "partition": 0}

    def rec(prev: int, w: str, n: int, key: bytes) -> bytes:
        return ChangelogRecord(prev, meta, [(key, b"v")], w=w, n=n).encode()

    log = TruncLog()
    for value in (rec(-1, "live1", 0, b"a0"), rec(-1, "stale", 0, b"z0"),
                  rec(-1, "live1", 1, b"a1"), rec(-1, "stale", 1, b"z1"),
                  rec(2, "live2", 0, b"a2"), rec(-1, "stale", 2, b"z2"),
                  rec(2, "live2", 2, b"z3"), rec(2, "stale", 1, b"z4"),
                  rec(4, "live3", 0, b"a3")):
        log.append(value)
    part = EnginePartition(GROUP, 0, tmp_path / "db", [UP], "changelog", None)
    part.restore(log)
    assert part.cl_offset == 8
    assert sorted(k for k, _ in part.store.state_items() if k[:1] in (b"a", b"z")) == [
        b"a0", b"a1", b"a2", b"a3"]
    part.close()
    # an earlier changelog's records carry neither token nor place: a plain chain
    assert ChangelogRecord.decode_head(ChangelogRecord(3, meta).encode())[0] == \
        ChangelogRecord(3, meta)

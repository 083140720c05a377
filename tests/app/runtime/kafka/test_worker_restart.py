"""Crash safety: a worker killed with SIGKILL and started again continues exactly.

The rows read back (deduplicated by ``kepl.id``) must equal those of an uninterrupted
run: none lost, none counted twice.  Three ways to die: a real ``kill -9`` from outside
while events stream in, a kill injected right after a checkpoint's transaction (rows,
changelog record and input offsets) committed but before the local database did (so the
restart replays the changelog tail), or just before it committed (the transaction is
aborted and the input read again), and a restart that lost its local database
(full changelog replay).  With snapshots on a small threshold: the changelog is
truncated and a lost machine restores from the latest snapshot, also when killed while a
snapshot was half written.
"""

from __future__ import annotations

import random
import shutil
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.runtime.kafka.config import MAIN_GROUP, AppConfig
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.reader import Deduper, RowReader
from app.runtime.kafka.runner import KafkaApp
from app.runtime.kafka.store import ChangelogRecord
from app.runtime.kafka.topology import Topology
from app.runtime.kafka.worker import (
    CRASH_HOOK_ENV,
    SNAPSHOT_FACTOR_ENV,
    SNAPSHOT_MIN_BYTES_ENV,
    SNAPSHOT_PART_BYTES_ENV,
    KafkaChangelog,
)

N_EVENTS = 6000


def amount(i: int) -> float:
    return float(i % 97 + 1)


def expected_rows(n: int) -> list[dict]:
    """count(*)/sum(amount) over #length(5), computed without the engine."""
    window: deque[float] = deque(maxlen=5)
    out = []
    for i in range(n):
        window.append(amount(i))
        out.append({"cnt": len(window), "total": sum(window)})
    return out


def make_app(kafka_bootstrap: str, guarantee: str = "exactly_once") -> KafkaApp:
    name = f"restart-{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({
        "app": name, "processing_guarantee": guarantee,
        "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "statements": [{"name": "w", "epl": "select count(*) as cnt, sum(amount) as total "
                                            "from Withdrawal#length(5)"}],
    })
    return KafkaApp(config, kafka_bootstrap)


def check_rows(kapp: KafkaApp, reader: RowReader, n: int) -> None:
    kapp.settle(timeout_s=120)
    rows = reader.read_available()
    assert [r.id for r in rows] == [f"w/0/{i}" for i in range(1, n + 1)]
    assert [r.row for r in rows] == expected_rows(n)
    if kapp.config.processing_guarantee == "exactly_once":
        assert reader.duplicates == 0  # the raw output topic holds every row once


def wait_for_rows(reader: RowReader, at_least: int, timeout_s: float = 60) -> int:
    seen = 0
    deadline = time.monotonic() + timeout_s
    while seen < at_least:
        assert time.monotonic() < deadline, "the worker produced no output"
        seen += len(reader.read_available())
        time.sleep(0.02)
    return seen


@pytest.mark.kafka
def test_kill_9_mid_stream(kafka_bootstrap: str) -> None:
    kapp = make_app(kafka_bootstrap)
    reader = RowReader(kafka_bootstrap, [kapp.config.output_topic("w")])
    counting = RowReader(kafka_bootstrap, [kapp.config.output_topic("w")])
    try:
        kapp.worker.start()

        def stream() -> None:
            for i in range(N_EVENTS):
                kapp.send("Withdrawal", {"account": f"A{i % 7}", "amount": amount(i)})
                if i % 200 == 199:
                    kapp.producer.flush(10)
                    time.sleep(0.02)
            kapp.producer.flush(10)

        producer = threading.Thread(target=stream)
        producer.start()
        wait_for_rows(counting, 500)
        kapp.worker.kill()  # SIGKILL mid-stream
        killed_at = counting.read_available()
        kapp.worker.start()
        producer.join()
        check_rows(kapp, reader, N_EVENTS)
        assert len(killed_at) < N_EVENTS, "the kill came after the stream ended"
    finally:
        counting.close()
        reader.close()
        kapp.close()


@pytest.mark.kafka
@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
@pytest.mark.parametrize("point", ["after_flush", "before_flush"])
def test_kill_around_the_checkpoint_commit(kafka_bootstrap: str, point: str,
                                           guarantee: str) -> None:
    kapp = make_app(kafka_bootstrap, guarantee)
    reader = RowReader(kafka_bootstrap, [kapp.config.output_topic("w")])
    try:
        for i in range(N_EVENTS):
            kapp.send("Withdrawal", {"account": "A", "amount": amount(i)})
            if i % 1000 == 999:
                kapp.advance(i)  # several watermarks: several batches
        kapp.producer.flush(10)
        kapp.worker.start(env={CRASH_HOOK_ENV: f"{point}:2"})
        assert kapp.worker.proc is not None
        assert kapp.worker.proc.wait(60) == -9
        kapp.worker.start()
        check_rows(kapp, reader, N_EVENTS)
    finally:
        reader.close()
        kapp.close()


def _lose_manifests(data_dir: Path) -> None:
    """What a kill -9 inside RocksDB's file deletions leaves: ``CURRENT`` naming a
    manifest that is gone."""
    manifests = list(data_dir.rglob("MANIFEST-*"))
    assert manifests
    for manifest in manifests:
        manifest.unlink()


@pytest.mark.kafka
@pytest.mark.parametrize("loss", ["machine", "manifests"])
def test_restart_without_local_state_replays_the_changelog(kafka_bootstrap: str,
                                                           loss: str) -> None:
    kapp = make_app(kafka_bootstrap)
    reader = RowReader(kafka_bootstrap, [kapp.config.output_topic("w")])
    try:
        half = N_EVENTS // 2
        kapp.worker.start()
        for i in range(half):
            kapp.send("Withdrawal", {"account": "A", "amount": amount(i)})
        kapp.settle()
        kapp.worker.kill()
        if loss == "machine":
            shutil.rmtree(kapp.worker.data_dir)  # a new machine: only Kafka remains
        else:
            _lose_manifests(kapp.worker.data_dir)
        kapp.worker.start()
        for i in range(half, N_EVENTS):
            kapp.send("Withdrawal", {"account": "A", "amount": amount(i)})
        check_rows(kapp, reader, N_EVENTS)
    finally:
        reader.close()
        kapp.close()


SNAPSHOT_ENV = {SNAPSHOT_MIN_BYTES_ENV: "4096", SNAPSHOT_FACTOR_ENV: "4",
                SNAPSHOT_PART_BYTES_ENV: "256"}


def changelog_watermarks(kapp: KafkaApp) -> tuple[int, int]:
    return KafkaChangelog(kapp.bootstrap).watermarks(
        kapp.config.changelog_topic(MAIN_GROUP), 0)


def send_in_chunks(kapp: KafkaApp, start: int, stop: int, chunk: int = 150) -> None:
    """Events ``start..stop``, waiting for each chunk: many batches, many snapshots."""
    for lo in range(start, stop, chunk):
        for i in range(lo, min(lo + chunk, stop)):
            kapp.send("Withdrawal", {"account": "A", "amount": amount(i)})
        kapp.settle()


@pytest.mark.kafka
def test_snapshots_truncate_the_changelog_and_restore_a_lost_machine(kafka_bootstrap: str
                                                                     ) -> None:
    kapp = make_app(kafka_bootstrap)
    reader = RowReader(kafka_bootstrap, [kapp.config.output_topic("w")])
    try:
        half = N_EVENTS // 2
        kapp.worker.start(env=SNAPSHOT_ENV)
        send_in_chunks(kapp, 0, half)
        deadline = time.monotonic() + 30
        while changelog_watermarks(kapp)[0] == 0:  # the deletion is asynchronous
            assert time.monotonic() < deadline, "the changelog was never truncated"
            time.sleep(0.1)
        low, high = changelog_watermarks(kapp)
        assert 0 < low < high
        kapp.worker.kill()  # kill -9, and the machine is gone with its database
        shutil.rmtree(kapp.worker.data_dir)
        kapp.worker.start(env=SNAPSHOT_ENV)
        send_in_chunks(kapp, half, N_EVENTS)
        check_rows(kapp, reader, N_EVENTS)
        assert changelog_watermarks(kapp)[0] > low  # later snapshots truncated further
    finally:
        reader.close()
        kapp.close()


@pytest.mark.kafka
def test_kill_mid_snapshot(kafka_bootstrap: str) -> None:
    """Killed when one part of a snapshot was sent (its transaction never commits);
    restarted without local state."""
    kapp = make_app(kafka_bootstrap)
    reader = RowReader(kafka_bootstrap, [kapp.config.output_topic("w")])
    counting = RowReader(kafka_bootstrap, [kapp.config.output_topic("w")])
    try:
        kapp.worker.start(env={**SNAPSHOT_ENV, CRASH_HOOK_ENV: "mid_snapshot:3"})
        proc = kapp.worker.proc
        assert proc is not None
        kapp.send("Withdrawal", {"account": "A", "amount": amount(0)})
        kapp.producer.flush(10)
        wait_for_rows(counting, 1)  # the worker is up: what follows spans many checkpoints
        for lo in range(1, N_EVENTS, 150):
            for i in range(lo, min(lo + 150, N_EVENTS)):
                kapp.send("Withdrawal", {"account": "A", "amount": amount(i)})
            kapp.producer.flush(10)
            time.sleep(0.05)
        assert proc.wait(60) == -9
        topic = kapp.config.changelog_topic(MAIN_GROUP)
        # the third part sent may belong to the first snapshot or a later one (how many
        # parts a snapshot has depends on what the batches held), so the changelog may or
        # may not have been truncated by an earlier snapshot yet
        low, high = changelog_watermarks(kapp)
        committed = [(o, ChangelogRecord.decode(v))
                     for o, v in KafkaChangelog(kafka_bootstrap).read(topic, 0, low)]
        last_offset, last = committed[-1]
        # the half-written snapshot is invisible to a read_committed reader
        assert last_offset < high - 1
        assert last.snapshot is None or not last.snapshot["last"]  # mid-way, if a part
        shutil.rmtree(kapp.worker.data_dir)
        kapp.worker.start(env=SNAPSHOT_ENV)
        check_rows(kapp, reader, N_EVENTS)
    finally:
        counting.close()
        reader.close()
        kapp.close()


# -- the same protocol without a broker: two upstream partitions, crashes anywhere -------


class MemLog:
    """A changelog partition in memory (``ChangelogLog``)."""

    def __init__(self) -> None:
        self.records: list[bytes] = []

    def start(self, topic: str, partition: int) -> int:
        return 0

    def end(self, topic: str, partition: int) -> int:
        return len(self.records)

    def read(self, topic: str, partition: int, start: int) -> Iterator[tuple[int, bytes]]:
        yield from list(enumerate(self.records))[start:]


def upstream_records() -> dict[str, list[InRecord]]:
    """Two source partitions; three epochs closed by barriers at 1000, 2000, 3000."""
    out: dict[str, list[InRecord]] = {"src:0": [], "src:1": []}
    seq = 0
    for epoch, t in enumerate((1000, 2000, 3000)):
        for i in range(7):
            seq += 1
            up = "src:0" if (i + epoch) % 3 else "src:1"
            lane = out[up]
            lane.append(InRecord("event", up, len(lane), "Withdrawal", t - 1000, seq,
                                 {"account": f"A{i}", "amount": float(seq)}))
        for up, lane in out.items():
            lane.append(InRecord("barrier", up, len(lane), payload={"t": t, "id": f"w{t}"}))
    return out


def interleave(lanes: dict[str, list[InRecord]], rnd: random.Random) -> list[InRecord]:
    """Some arrival order that keeps each upstream's own order."""
    heads = {k: 0 for k in lanes}
    out = []
    while any(heads[k] < len(v) for k, v in lanes.items()):
        k = rnd.choice([k for k, v in lanes.items() if heads[k] < len(v)])
        out.append(lanes[k][heads[k]])
        heads[k] += 1
    return out


def run_with_crashes(tmp: Path, arrival: list[InRecord], rnd: random.Random,
                     crash_rate: float) -> list[tuple[str, list]]:
    """Feed batches as the worker does: a checkpoint writes the changelog record, its
    rows and the input offset (no further than the oldest waiting record, ``hold``) in
    one transaction.  Now and then the worker dies before or after the transaction
    committed; a new one restores from the log and reads again from the committed
    offset, or from a little before it."""
    config = AppConfig.from_dict({
        "app": "unit", "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "statements": [{"name": "w", "epl": "select irstream count(*) as cnt, "
                                            "sum(amount) as total from Withdrawal#length(4)"}]})
    group = Topology.plan(config).groups["main"]
    log = MemLog()
    dedupe = Deduper()
    rows: list[tuple[str, list]] = []
    # the arrival order is one input partition, "in", as a repartition topic would be
    arrival = [r._replace(via="in", via_offset=i) for i, r in enumerate(arrival)]

    def fresh() -> EnginePartition:
        part = EnginePartition(group, 0, tmp / "db", ["src:0", "src:1"], "changelog")
        part.restore(log)
        return part

    def publish(outputs: list) -> None:
        for stmt, stream, cp, _t, seq, row, _c in outputs:
            if dedupe.fresh(f"{stmt}/{cp}/{seq}"):
                rows.append((stream, [row["cnt"], row["total"]]))

    part = fresh()
    pos = committed = 0
    while pos < len(arrival):
        n = rnd.randint(1, 6)
        batch = arrival[pos:pos + n]
        part.run(batch)
        rec = part.seal()
        crash = rnd.random() < crash_rate
        if crash and rnd.random() < 0.5:  # killed before the transaction committed
            part.close()
            part = fresh()
            pos = max(0, committed - rnd.randint(0, 5))
            continue
        if rec is not None:
            log.records.append(rec.encode())
            publish(part.outputs)
        committed = min(pos + len(batch), part.hold().get("in", len(arrival)))
        if crash:  # killed after the transaction, before the local database commit
            part.close()
            part = fresh()
            pos = max(0, committed - rnd.randint(0, 8))
            continue
        if rec is not None:
            part.committed(len(log.records) - 1)
        else:
            part.committed_unchanged()
        pos += len(batch)
    part.close()
    return rows


def test_epochs_merge_deterministically_and_survive_crashes(tmp_path: Path) -> None:
    lanes = upstream_records()
    reference = run_with_crashes(tmp_path / "ref", interleave(lanes, random.Random(0)),
                                 random.Random(0), crash_rate=0.0)
    assert len(reference) == 2 * 21  # an insert and a remove row per event
    assert reference[:2] == [("insert", [1, 1.0]), ("remove", [0, None])]
    for trial in range(12):
        rnd = random.Random(trial + 1)
        got = run_with_crashes(tmp_path / f"t{trial}", interleave(lanes, rnd), rnd,
                               crash_rate=0.3)
        assert got == reference, f"trial {trial}"

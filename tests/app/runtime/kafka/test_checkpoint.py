"""The checkpoint protocol without a broker: ``CheckpointRound`` over a fake output log
and fake inputs, with a real engine partition and its RocksDB.

Each failure a step can meet is tried: a retriable error (retried), an abortable
transaction (``Rewind``: nothing of the checkpoint is committed anywhere), a fenced or
fatal producer (``Fenced``), and a crash between any two steps (a restarted partition
restores from the changelog, the input is read again from the committed offsets, and the
rows, deduplicated by id as readers do, and the state equal an uninterrupted run's).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from app.runtime.kafka.checkpoint import (
    POINTS,
    CheckpointRound,
    CrashSeam,
    Fenced,
    Rewind,
    Transactional,
)
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.reader import Deduper
from tests.app.runtime.kafka.fakes import UP, FakeInputs, FakeOutput, Names, TruncAdmin, TruncLog
from tests.app.runtime.kafka.test_snapshots import GROUP, records

OUT = "rows"


class Crash(Exception):
    """The worker died here."""


class Seam:
    def __init__(self, point: str = "", n: int = 1) -> None:
        self.point, self.n, self.seen = point, n, 0

    def at(self, point: str) -> None:
        if point == self.point:
            self.seen += 1
            if self.seen == self.n:
                raise Crash(point)


class Worker:
    """The worker's side around the round: batches in, rows out (deduplicated)."""

    def __init__(self, path: Path, seam: Seam | None = None) -> None:
        self.path = path
        self.log = TruncLog()
        self.out = FakeOutput(self.log)
        self.inputs = FakeInputs()
        self.dedupe = Deduper()
        self.rows: list[tuple[str, Any]] = []
        self.round = CheckpointRound(self.out, Names(), TruncAdmin(self.log), self.write_rows,
                                     seam=seam)
        self.part = self.open()

    def open(self) -> EnginePartition:
        part = EnginePartition(GROUP, 0, self.path, [UP], "changelog", None)
        part.restore(self.log)
        return part

    def write_rows(self, part: EnginePartition) -> None:
        for r in part.outputs:
            self.out.produce(OUT, json.dumps([r.statement, r.context_partition, r.seq,
                                              r.stream, r.row]).encode(), 0)

    def rows_read(self) -> list[tuple[str, Any]]:
        out = []
        for value in self.out.topics.get(OUT, []):
            stmt, cp, seq, stream, row = json.loads(value)
            rid = f"{stmt}/{cp}/{seq}"
            if self.dedupe.fresh(rid):
                out.append((rid, (stream, row)))
        return out

    def checkpoint(self, batch: list[InRecord]) -> None:
        self.part.run(batch)
        self.inputs.position = batch[-1].offset + 1
        self.round.run({("main", 0): self.part}, [], self.inputs, None)

    def crash(self) -> None:
        """Die: the open transaction is gone; restart from the changelog and the committed
        input offset."""
        self.out.abort()
        self.part.close()
        self.part = self.open()
        self.inputs.position = self.inputs.committed = self.out.offset

    def state(self) -> dict[bytes, bytes]:
        return dict(self.part.store.state_items())


def batches(n: int = 60, size: int = 6) -> list[list[InRecord]]:
    recs = records(n)
    return [recs[i:i + size] for i in range(0, len(recs), size)]


@pytest.fixture
def reference(tmp_path: Path) -> Iterator[tuple[list, dict]]:
    w = Worker(tmp_path / "ref")
    for b in batches():
        w.checkpoint(b)
    yield w.rows_read(), w.state()
    w.part.close()


def test_a_round_commits_rows_changelog_and_offsets_then_the_local_database(
        tmp_path: Path) -> None:
    w = Worker(tmp_path / "db")
    first = batches()[0]
    w.checkpoint(first)
    assert w.out.commits == [[first[-1].offset + 1]]
    assert w.inputs.committed == first[-1].offset + 1
    assert len(w.out.topics[OUT]) == 18 and w.part.outputs == []
    assert w.log.high == 1 and w.part.store.marker() == 0
    w.part.close()


@pytest.mark.parametrize("fail, raised", [
    (Rewind("abortable"), Rewind), (Fenced("fenced by a newer instance"), Fenced)])
def test_a_failed_commit_leaves_nothing_committed(tmp_path: Path, fail: BaseException,
                                                   raised: type[BaseException]) -> None:
    w = Worker(tmp_path / "db")
    bs = batches()
    w.checkpoint(bs[0])
    w.out.fail = fail
    with pytest.raises(raised):
        w.checkpoint(bs[1])
    assert (w.log.high, w.part.store.marker(), w.inputs.committed) == (
        1, 0, bs[0][-1].offset + 1)
    assert len(w.out.commits) == 1
    w.part.close()


@pytest.mark.parametrize("point", ["before_flush", "after_flush"])
@pytest.mark.parametrize("n", [1, 3, 7])
def test_a_crash_between_two_steps_loses_and_repeats_nothing(
        tmp_path: Path, reference: tuple[list, dict], point: str, n: int) -> None:
    w = Worker(tmp_path / "db", Seam(point, n))
    pending = list(batches())
    while pending:
        # read from the committed offset: a crashed batch's records not committed again
        batch = [r for r in pending[0] if r.offset >= w.inputs.committed]
        if not batch:
            pending.pop(0)
            continue
        try:
            w.checkpoint(batch)
            pending.pop(0)
        except Crash:
            w.crash()
    rows, state = reference
    assert w.rows_read() == rows
    assert w.state() == state
    w.part.close()


def test_retriable_errors_are_retried_and_an_abortable_one_rewinds() -> None:
    calls: list[str] = []

    def flaky() -> None:
        calls.append("call")
        if len(calls) < 3:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True))

    Transactional._retry("commit_transaction", flaky)
    assert calls == ["call", "call", "call"]

    out = object.__new__(Transactional)
    out.open, out.records, out.errors = True, 3, []
    out.producer = type("P", (), {"abort_transaction": lambda self, t: None,
                                  "poll": lambda self, t: 0})()

    def abortable() -> None:
        raise KafkaException(KafkaError(KafkaError._STATE, "abort", txn_requires_abort=True))

    with pytest.raises(Rewind, match="commit_transaction: abort"):
        out._guard("commit_transaction", abortable)
    assert not out.open

    def fenced() -> None:
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    with pytest.raises(Fenced, match="commit_transaction: fenced"):
        out._guard("commit_transaction", fenced)


class _TxnProducer:
    """A transactional producer's calls, with the thread each ran on."""

    def __init__(self, fail_first_send: bool = False) -> None:
        self.calls: list[tuple[str, Any, str]] = []
        self.fail_first_send = fail_first_send

    def begin_transaction(self) -> None:
        self.calls.append(("begin", None, threading.current_thread().name))

    def send_offsets_to_transaction(self, offsets: Any, meta: Any, timeout: float) -> None:
        self.calls.append(("offsets", offsets, threading.current_thread().name))
        if self.fail_first_send:
            self.fail_first_send = False
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True))

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append(("commit", None, threading.current_thread().name))


def _transactional(producer: _TxnProducer) -> Transactional:
    out = object.__new__(Transactional)
    out.open, out.records, out.errors, out.producer = False, 0, [], producer
    return out


def test_offsets_offered_early_are_sent_once_on_another_thread_before_the_commit(
) -> None:
    producer = _TxnProducer()
    out = _transactional(producer)
    consumer = type("C", (), {"consumer_group_metadata": lambda self: "meta"})()
    offsets = ["topic:0@5"]
    out.offer_offsets(offsets, consumer)
    out.commit(offsets, consumer)
    me = threading.current_thread().name
    assert [(what, arg) for what, arg, _ in producer.calls] == [
        ("begin", None), ("offsets", offsets), ("commit", None)]
    assert producer.calls[1][2] != me and producer.calls[2][2] == me
    assert not out.open and out._early is None
    out._pool.shutdown()


def test_offsets_whose_early_send_failed_are_sent_again_by_the_commit() -> None:
    producer = _TxnProducer(fail_first_send=True)
    out = _transactional(producer)
    consumer = type("C", (), {"consumer_group_metadata": lambda self: "meta"})()
    offsets = ["topic:0@5"]
    out.offer_offsets(offsets, consumer)
    out.commit(offsets, consumer)
    me = threading.current_thread().name
    assert [(what, t == me) for what, _, t in producer.calls] == [
        ("begin", True), ("offsets", False), ("offsets", True), ("commit", True)]
    out._pool.shutdown()


def test_a_crash_seam_names_a_point_and_a_count() -> None:
    assert CrashSeam("after_flush:2").point == "after_flush"
    with pytest.raises(ValueError, match="crash point must be POINT:N"):
        CrashSeam("somewhere:1")
    assert "mid_snapshot" in POINTS


def test_the_worker_producer_retries_a_concurrent_transaction_soon_unless_the_user_says(
) -> None:
    # a transaction begun right after the last commit is retried after retry.backoff.ms
    # (bench_txn_backoff: librdkafka's 100 ms put one back-to-back transaction in six
    # over 90 ms); the statement file's kafka section still decides
    from app.runtime.kafka import client
    from app.runtime.kafka.checkpoint import producer_config

    try:
        client.configure(None)
        assert client.conf(producer_config("b:9092", "t"))["retry.backoff.ms"] == 10
        assert producer_config("b:9092", None)["retry.backoff.ms"] == 10
        client.configure({"retry.backoff.ms": 250})
        assert client.conf(producer_config("b:9092", "t"))["retry.backoff.ms"] == "250"
    finally:
        client.configure(None)

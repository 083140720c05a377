"""One checkpoint = one Kafka transaction: output rows, changelog and repartition
records, progress, dead letters and the input offsets commit together.

``CheckpointRound`` runs the protocol's steps in order (docs/architecture.md, "The
checkpoint protocol") over the engine partitions and the inputs of a worker, through an
``OutputLog``: ``Transactional`` (``exactly_once``: ``transactional.id`` = the worker's
identity, so a restarted worker fences its previous incarnation and aborts what it left
open; KIP-447 group metadata fences a zombie that lost its partitions; a transaction
begins at the first record of a checkpoint and ``commit`` sends the input offsets with
the consumer's group metadata; readers use ``read_committed``) or ``Plain``
(``at_least_once``: the same records without a transaction, flushed, then the offsets
committed by the consumer).  Both hold the worker's one producer.  Faults are injected
through a ``Seam`` (tests; ``CrashSeam`` for crash tests of a real worker), never from
the environment inside the loop.

Errors by class (confluent-kafka's ``KafkaError``): retriable ones are retried under a
deadline; ``txn_requires_abort`` ones abort and raise ``Rewind`` (the worker drops
what it did since the last commit and reads it again); anything else (fenced, fatal)
raises ``Fenced``: the worker exits with one line.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from app.runtime.kafka import brokers, client, codec
from app.runtime.kafka.refusals import refused
from app.runtime.kafka.router import H_ERROR, H_SOURCE, encode_bundles

log = logging.getLogger("kepl.checkpoint")

Headers = list[tuple[str, bytes]]
OnDelivery = Callable[[Any, Any], None]

COMMIT_DEADLINE_S = 60.0


class Rewind(Exception):
    """The transaction was aborted: go back to the last committed state and offsets."""


class Fenced(Exception):
    """This worker may no longer write (another incarnation took over, or a fatal
    producer error): it must stop."""


class _NotFatal(logging.Filter):
    """Drops librdkafka's fatal-error lines: the worker reports a fatal error itself, in
    the one line it exits with."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.CRITICAL


class _RefusedTopic(logging.Filter):
    """Remembers the topic librdkafka names when the broker refuses to add it to a
    transaction (no ``Write``): the commit's error itself does not name it."""

    PATTERN = re.compile(r'Failed to add partition "([^"]+)" \[\d+\] to transaction: '
                         r"Broker: Topic authorization failed")
    topic: str | None = None
    """The topic last refused (any producer of this process)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        m = self.PATTERN.search(text)
        if m:
            _RefusedTopic.topic = m.group(1)
            return False  # the worker's one line says it
        return not ("TOPIC_AUTHORIZATION_FAILED" in text or
                    "to transaction: Broker: Operation not attempted" in text)


KAFKA_LOG = logging.getLogger("kepl.kafka")
"""librdkafka's log lines (consumer and producer of the worker) as Python log records."""
KAFKA_LOG.addFilter(_NotFatal())
KAFKA_LOG.addFilter(_RefusedTopic())


def producer_config(bootstrap: str, transactional_id: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "message.max.bytes": 64 * 1024 * 1024,
        "compression.type": "none",
        # a transaction begun right after the last one committed finds its coordinator
        # still writing the markers (CONCURRENT_TRANSACTIONS): the retry comes after this
        # backoff, doubling up to retry.backoff.max.ms (the Java client waits 20 ms
        # there, KAFKA-5477; with librdkafka's 100 ms, `make bench-txn`)
        "retry.backoff.ms": 10,
        "log_level": 3,
        "logger": KAFKA_LOG,
        # one line per broker lost and back (brokers.py), not one per failed connection
        **brokers.WATCH.settings(),
    }
    if transactional_id is not None:
        conf["transactional.id"] = transactional_id
        # short, so that a zombie's open transaction is aborted soon and the new owner's
        # offset fetch (waiting on it) goes on (Kafka Streams' EOS setting)
        conf["transaction.timeout.ms"] = 10_000
    return conf


class OutputLog(Protocol):
    """Where a checkpoint's records go and how they commit."""

    exactly_once: bool
    open: bool
    errors: list[str]

    def produce(self, topic: str, value: bytes, partition: int,
                headers: Headers | None = None, key: bytes | None = None,
                on_delivery: OnDelivery | None = None) -> None: ...

    def rows_landed(self) -> None:
        """Rows produced so far must be durable before a changelog record that applies
        their state (at-least-once); nothing to do inside a transaction."""
        ...

    def flush(self) -> None: ...

    def offer_offsets(self, offsets: list[Any], consumer: Any) -> None:
        """The input offsets the coming ``commit`` will carry, known before the
        checkpoint's records are produced: a transaction may start sending them now."""
        ...

    def commit(self, offsets: list[Any], consumer: Any) -> None: ...

    def abort(self) -> None: ...

    def fatal_reason(self) -> str | None:
        """Why the client became fatal, where a transactional call learnt it."""
        ...


class _Producer:
    """The worker's producer (see module docstring for the two ways it commits)."""

    exactly_once = False

    def __init__(self, bootstrap: str, transactional_id: str | None) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(client.conf(producer_config(bootstrap, transactional_id)))
        self._produce = self.producer.produce
        self._default_cb: OnDelivery | None = None if self.exactly_once else self._check
        self.open = False
        self.records = 0
        self.errors: list[str] = []

    def _check(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def produce(self, topic: str, value: bytes, partition: int,
                headers: Headers | None = None, key: bytes | None = None,
                on_delivery: OnDelivery | None = None) -> None:
        """Add a record to the current checkpoint.

        Under exactly-once a record without ``on_delivery`` gets no delivery callback: a
        record that fails makes the transaction abortable, and its commit raises.
        """
        if not self.open:
            self.begin()
        self.records += 1
        cb = on_delivery or self._default_cb
        try:
            # positional (callback, on_delivery, timestamp 0 = now, headers): the client
            # parses them in about 15 % fewer instructions than the headers keyword
            self._produce(topic, value, key, partition, cb, None, 0, headers)
        except BufferError:
            while True:
                self._serve(0.05)
                try:
                    self._produce(topic, value, key, partition, cb, None, 0, headers)
                    return
                except BufferError:
                    continue

    def sender(self) -> tuple[Callable[..., None], OnDelivery | None]:
        """The client's own produce and the delivery callback ``produce`` gives a record
        without one, the transaction begun: a run of rows is sent without a call through
        ``produce`` each, its arguments positional as ``produce`` passes them.  It raises
        BufferError on a full queue; the caller sends that record again with
        ``produce``, which waits for room."""
        if not self.open:
            self.begin()
        return self._produce, self._default_cb

    def begin(self) -> None:
        self.open = True

    def poll(self) -> None:
        self._serve(0)

    def _serve(self, timeout_s: float) -> None:
        """Serve the producer's callbacks; a fatal error it raises there (fenced by a
        newer instance after a broker failure) is ``Fenced``: one line, not a traceback."""
        from confluent_kafka import KafkaException

        try:
            self.producer.poll(timeout_s)
        except KafkaException as e:
            raise Fenced(f"producer: {e.args[0].str()}") from None

    def flush(self) -> None:
        """Wait until every record produced so far is acknowledged (a failure raises)."""
        from confluent_kafka import KafkaException

        while True:
            try:
                left = self.producer.flush(10)
            except KafkaException as e:
                raise Fenced(f"producer: {e.args[0].str()}") from None
            if not left:
                break
            log.warning("producer flush still waiting for the broker")
        if self.errors:
            errs, self.errors = self.errors, []
            raise Rewind(f"produce failed: {errs[0]} (+{len(errs) - 1} more)")

    def rows_landed(self) -> None:
        pass

    def fatal_reason(self) -> str | None:
        """Why the producer became fatal, as a transactional call that learnt it says
        (None: no such call); a produce that races that call only says "Fatal error"."""
        return None

    def offer_offsets(self, offsets: list[Any], consumer: Any) -> None:
        pass

    def commit(self, offsets: list[Any], consumer: Any) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        """Drop the open checkpoint."""
        self.open = False
        self.records = 0
        self.errors = []

    def _guard(self, what: str, call: Callable[[], Any]) -> None:
        """Run a transactional call; map its errors onto Rewind / Fenced (or
        ``NotAuthorized``: a topic it may not write)."""
        from confluent_kafka import KafkaError, KafkaException

        try:
            self._retry(what, call)
        except KafkaException as e:
            err = e.args[0]
            topic = None if err.fatal() else self._refused_topic(err)
            if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED or topic is not None:
                # retrying cannot help: one line and stop (the broker aborts it)
                raise refused(KafkaError.TOPIC_AUTHORIZATION_FAILED,
                              topic or "(one it writes)", "Write") from None
            if err.txn_requires_abort():
                self.abort()
                raise Rewind(f"{what}: {err.str()}") from None
            raise Fenced(f"{what}: {err.str()}") from None

    def _refused_topic(self, err: Any) -> str | None:
        """The topic the broker refused to add to the transaction, if it did.  The log
        line naming it may still wait in the producer's queue: served here, for up to a
        second when the error hints at a refusal (or at the state one leaves behind)."""
        text = err.str()
        hint = (err.code() == 29 or "authorization" in text.lower()
                or "Erroneous state" in text)
        deadline = time.monotonic() + (1.0 if hint else 0.0)
        while True:
            self.producer.poll(0.05 if hint else 0)
            if _RefusedTopic.topic is not None or time.monotonic() >= deadline:
                return _RefusedTopic.topic

    @staticmethod
    def _retry(what: str, call: Callable[[], Any]) -> None:
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + COMMIT_DEADLINE_S
        while True:
            try:
                call()
                return
            except KafkaException as e:
                err = e.args[0]
                if not err.retriable() or time.monotonic() > deadline:
                    raise
                log.warning("%s: %s; retrying", what, err.str())
                time.sleep(0.1)

    def close(self) -> None:
        try:
            self.abort()
            self.producer.flush(5)
        except Exception:  # noqa: BLE001 - going down
            pass


class Transactional(_Producer):
    """``exactly_once``: one Kafka transaction per checkpoint."""

    exactly_once = True
    _pool: ThreadPoolExecutor | None = None
    _early: tuple[list[Any], Future[None]] | None = None
    """Offsets being sent early (``offer_offsets``) and the send."""

    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        super().__init__(bootstrap, transactional_id)
        from confluent_kafka import KafkaException

        try:
            self._retry("init_transactions", lambda: self.producer.init_transactions(30))
        except KafkaException as e:
            denied = refused(e.args[0].code(), transactional_id, "Write")
            if denied is None:
                raise
            raise denied from None

    def close(self) -> None:
        super().close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)

    def begin(self) -> None:
        _RefusedTopic.topic = None
        self._guard("begin_transaction", self.producer.begin_transaction)
        self.open = True

    def offer_offsets(self, offsets: list[Any], consumer: Any) -> None:
        """Send ``offsets`` to the transaction on a thread of its own: the two round
        trips to the coordinators (AddOffsetsToTxn, TxnOffsetCommit) overlap the
        checkpoint's produce step instead of following it (librdkafka's produce and
        transactional calls may run on different threads; the GIL is released while
        it waits).  ``commit`` waits for it and sends again, the usual way, if it
        failed."""
        if not offsets:
            return
        self._settle_early()
        if not self.open:
            self.begin()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="kepl-offsets")
        self._early = (offsets, self._pool.submit(
            self.producer.send_offsets_to_transaction, offsets,
            consumer.consumer_group_metadata(), 30))

    def fatal_reason(self) -> str | None:
        from confluent_kafka import KafkaException

        if self._early is None:
            return None
        try:
            failed = self._early[1].exception(timeout=5)
        except Exception:  # noqa: BLE001 - still waiting, or cancelled: nothing learnt
            return None
        if not isinstance(failed, KafkaException):
            return None
        return f"send_offsets_to_transaction: {failed.args[0].str()}"

    def _settle_early(self) -> list[Any] | None:
        """Wait for offsets sent early; they, or None if none were sent or it failed
        (the error comes again from the commit's own send)."""
        early, self._early = self._early, None
        if early is None:
            return None
        offsets, sent = early
        try:
            sent.result()
        except Exception:  # noqa: BLE001 - sent again with the commit's error handling
            return None
        return offsets

    def commit(self, offsets: list[Any], consumer: Any) -> None:
        """Commit the checkpoint with the input ``offsets`` (TopicPartitions with the
        next offset to read and metadata)."""
        sent = self._settle_early()
        if not self.open and not offsets:
            return
        if not self.open:
            self.begin()
        if offsets and offsets is not sent:
            self._guard("send_offsets_to_transaction",
                        lambda: self.producer.send_offsets_to_transaction(
                            offsets, consumer.consumer_group_metadata(), 30))
        self.offsets_sent = time.time()
        self._guard("commit_transaction", lambda: self.producer.commit_transaction(30))
        if self.errors:  # a record failed although the commit went through
            errs, self.errors = self.errors, []
            raise Fenced(f"produce failed inside a committed transaction: {errs[0]}")
        self.open = False
        self.records = 0

    def abort(self) -> None:
        """Drop the open checkpoint (its records become invisible to read_committed)."""
        self._settle_early()
        if not self.open:
            return
        super().abort()
        try:
            self.producer.abort_transaction(30)
        except Exception as e:  # noqa: BLE001 - the caller rewinds or exits anyway
            log.warning("aborting the transaction failed: %s", e)


class Plain(_Producer):
    """``at_least_once``: the records without a transaction, flushed, then the offsets
    committed by the consumer; a crash may repeat rows (with the same ids)."""

    def rows_landed(self) -> None:
        self.flush()

    def commit(self, offsets: list[Any], consumer: Any) -> None:
        if not self.open and not offsets:
            return
        self.flush()
        if offsets:
            consumer.commit(offsets=offsets, asynchronous=False)
        self.open = False
        self.records = 0


def make_output(bootstrap: str, identity: str, guarantee: str) -> _Producer:
    """The worker's producer for its processing guarantee."""
    if guarantee == "exactly_once":
        return Transactional(bootstrap, identity)
    return Plain(bootstrap, None)


class Seam(Protocol):
    """Where a test (or a crash test's ``CrashSeam``) steps into a checkpoint: called at
    each named point (``POINTS``); it may raise or kill the process."""

    def at(self, point: str) -> None: ...


POINTS = ("before_flush", "after_flush", "mid_snapshot", "snapshot_commit",
          "after_snapshot", "before_truncate")
"""before_flush: records produced, the transaction not committed; after_flush: committed,
the local databases not written; mid_snapshot: a snapshot part that is not its
snapshot's last was sent, not committed; snapshot_commit: any snapshot part before its
commit; after_snapshot: a last part committed, the snapshot not yet marked complete;
before_truncate: a snapshot complete, the changelog before it not yet deleted."""


class NoSeam:
    def at(self, point: str) -> None:
        pass


class CrashSeam:
    """``point:n``: SIGKILL this process at the n-th time ``point`` is reached (the crash
    tests of a real worker set it through the worker's entry point)."""

    def __init__(self, spec: str) -> None:
        point, _, n = spec.partition(":")
        if point not in POINTS or not n.isdigit():
            raise ValueError(f"crash point must be POINT:N with POINT one of "
                             f"{', '.join(POINTS)}, got {spec!r}")
        self.point, self.n, self.count = point, int(n), 0

    def at(self, point: str) -> None:
        if point != self.point:
            return
        self.count += 1
        if self.count >= self.n:
            import os
            import signal
            import sys

            log.warning("crash point %s:%d reached: killing the worker", point, self.n)
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)


class Names(Protocol):
    """The topics a checkpoint writes (the app's config)."""

    dlq_topic: str
    progress_topic: str

    def changelog_topic(self, group: str) -> str: ...


class Inputs(Protocol):
    """The input offsets a checkpoint commits."""

    def offsets(self, holds: dict[str, int]) -> list[Any]:
        """Offsets to commit: the read positions, held back to ``holds`` (input partition
        ``topic:p`` -> the oldest offset an engine partition still waits on)."""
        ...

    def committed_offsets(self) -> list[Any]:
        """The offsets committed last (sent again to fence a transaction)."""
        ...

    def mark_committed(self, offsets: list[Any]) -> None: ...


class ChangelogAdmin(Protocol):
    def delete_before(self, topic: str, partition: int, offset: int) -> None: ...


@dataclass
class RoundResult:
    """What a checkpoint did (the worker's statistics)."""

    sealed: int = 0
    dead: int = 0
    changelog_bytes: int = 0


class CheckpointRound:
    """The steps of a checkpoint, in order:

    1. seal each engine partition (its batch becomes one changelog record);
    2. produce the next part of a snapshot it is writing, its dead letters, rows,
       changelog record and progress, and the progress of lanes that saw a watermark;
    3. input offsets, held back to the oldest waiting record (and the committed ones
       again when none moved: the broker checks the group generation with them),
       worked out before step 1 and offered to the output then (``offer_offsets``:
       a transaction sends them while steps 1-2 run);
    4. commit;
    5. mark the parts durable (deleting the changelog before a completed snapshot) and
       write each sealed partition's batch to RocksDB with its changelog offset;
    6. begin a snapshot where one is due, its parts for the next checkpoints (with
       ``parts_per_round`` None: all of them now, each in a transaction of its own).
    """

    def __init__(self, out: OutputLog, names: Names, changelog: ChangelogAdmin,
                 write_rows: Callable[[Any], None],
                 on_dead: Callable[[str, str], None] = lambda where, why: None,
                 seam: Seam | None = None, parts_per_round: int | None = 1) -> None:
        """``write_rows(part)`` produces an engine partition's output rows;
        ``parts_per_round``: snapshot parts per checkpoint (None: every part at once)."""
        self.out = out
        self.names = names
        self.changelog = changelog
        self.write_rows = write_rows
        self.on_dead = on_dead
        self.seam = seam or NoSeam()
        self.parts_per_round = parts_per_round
        self.marks: dict[str, float] = {}
        """Wall-clock times of the last round's steps (the worker's latency trace)."""
        self._part_offsets: dict[tuple[str, int], int] = {}
        """Changelog offsets of the snapshot parts produced last, as delivered."""

    def run(self, parts: dict[tuple[str, int], Any], lane_progress: list[tuple[str, Any]],
            inputs: Inputs, consumer: Any) -> RoundResult:
        """One checkpoint over ``parts`` ((group, partition) -> EnginePartition) and the
        progress of lanes (``(key, (t, id))``).  ``Rewind``: the transaction was aborted
        (nothing of it is committed locally); ``Fenced``: the worker must stop."""
        out, names, result = self.out, self.names, RoundResult()
        marks = self.marks
        marks["start"] = time.time()
        # step 3's offsets first (sealing and producing do not move them): a transaction
        # sends them while this thread produces
        holds: dict[str, int] = {}
        for part in parts.values():
            for via, off in part.hold().items():
                if off < holds.get(via, off + 1):
                    holds[via] = off
        offsets = inputs.offsets(holds)
        out.offer_offsets(offsets, consumer)
        cl_offsets: dict[tuple[str, int], int] = {}
        sealed: list[tuple[tuple[str, int], Any, int]] = []
        txn = uuid.uuid4().hex[:16]
        inline = self._inline_parts(parts, txn)
        for key, part in parts.items():
            rec = part.seal()
            if part.forwards:
                # events and watermarks for a statement reading them through its
                # repartition topic (``EnginePartition._on_export``)
                for (topic, q), entries in part.forwards.items():
                    for value in encode_bundles(entries):
                        out.produce(topic, value, q)
                part.forwards = {}
            for d in part.dead:
                result.dead += 1
                source = f"{d.record.upstream.replace(':', '/')}/{d.record.offset}"
                self.on_dead(source, d.reason)
                out.produce(names.dlq_topic, d.record.raw or codec.dumps(d.record.payload), 0,
                            [(H_ERROR, d.reason.encode()), (H_SOURCE, source.encode()),
                             *d.headers])
            if rec is None:
                continue
            rec.w, rec.n = txn, int(key in inline)
            self.write_rows(part)
            out.rows_landed()

            def done(err: Any, msg: Any, key: tuple[str, int] = key) -> None:
                if err is None:
                    cl_offsets[key] = msg.offset()
                else:
                    out.errors.append(str(err))

            data = rec.encode()
            result.changelog_bytes += len(data)
            out.produce(names.changelog_topic(key[0]), data, part.partition, on_delivery=done)
            sealed.append((key, part, len(data)))
            if part.barrier is not None and part.barrier != part.progress:
                self._progress(f"{key[0]}/{part.partition}", part.barrier)
        for key, barrier in lane_progress:
            self._progress(key, barrier)
        fence = offsets or (inputs.committed_offsets() if out.open else [])
        if sealed:
            self.seam.at("before_flush")
        if inline:
            if not all(inline.values()):
                self.seam.at("mid_snapshot")
            self.seam.at("snapshot_commit")
        marks["produced"] = time.time()
        out.commit(fence, consumer)
        marks["committed"] = time.time()
        marks["offsets"] = getattr(out, "offsets_sent", 0.0)
        if sealed:
            self.seam.at("after_flush")
        inputs.mark_committed(offsets)
        if inline:
            self._parts_committed(parts, inline)
        for key, part, size in sealed:
            part.committed(cl_offsets[key], size)
        done_keys = {k for k, _, _ in sealed}
        for key, part in parts.items():
            if key not in done_keys:
                part.committed_unchanged()
        result.sealed = len(sealed)
        marks["snapshot"] = time.time()
        for _key, part, _size in sealed:
            if part.snapshot_due():
                part.start_snapshot()
        # a snapshot's parts go one a checkpoint, in its transaction (``_inline_parts``),
        # or, with ``parts_per_round`` None, all at once, each in a transaction of its own
        while self.parts_per_round is None:
            writing = [(k, part) for k, part in parts.items() if part.writing is not None]
            if not writing:
                break
            self._snapshot_parts(writing, inputs, consumer)
        marks["local"] = time.time()
        return result

    def _progress(self, key: str, barrier: Any) -> None:
        t, wid = barrier
        self.out.produce(self.names.progress_topic,
                         codec.dumps({"key": key, "t": t, "id": wid}), 0, key=key.encode())

    def _inline_parts(self, parts: dict[tuple[str, int], Any], txn: str
                      ) -> dict[tuple[str, int], bool]:
        """Produce the next part of each snapshot being written, first in its partition's
        records of this transaction (``ChangelogRecord.n`` 0; the batch follows as 1): a
        part holds the state its snapshot began with, and a restore holds the batches
        chained after its first part.  Returns whether each part is its snapshot's last
        (none with ``parts_per_round`` None: ``_snapshot_parts`` writes them)."""
        if self.parts_per_round is None:
            return {}
        return self._produce_parts([(k, p) for k, p in parts.items()
                                    if p.writing is not None], txn)

    def _produce_parts(self, writing: list[tuple[tuple[str, int], Any]], txn: str
                       ) -> dict[tuple[str, int], bool]:
        """The next part of each of ``writing``'s snapshots, produced; their offsets
        land in ``self._part_offsets`` as they are delivered."""
        out = self.out
        got = self._part_offsets = {}
        last: dict[tuple[str, int], bool] = {}
        for key, part in writing:
            rec = part.snapshot_part()
            rec.w = txn
            last[key] = bool(rec.snapshot["last"])

            def done(err: Any, msg: Any, key: tuple[str, int] = key) -> None:
                if err is None:
                    got[key] = msg.offset()
                else:
                    out.errors.append(str(err))

            out.produce(self.names.changelog_topic(key[0]), rec.encode(), part.partition,
                        on_delivery=done)
        return last

    def _parts_committed(self, parts: dict[tuple[str, int], Any],
                         last: dict[tuple[str, int], bool]) -> None:
        """The parts just committed are durable; a snapshot whose last part is in
        deletes its changelog up to its first part."""
        if any(last.values()):
            self.seam.at("after_snapshot")
        for key in last:
            part = parts[key]
            first = part.snapshot_part_committed(self._part_offsets[key])
            if first is None:
                continue
            self.seam.at("before_truncate")
            topic = self.names.changelog_topic(key[0])
            self.changelog.delete_before(topic, part.partition, first)
            log.info("snapshot of %s[%d]: %d bytes at %d..%d", topic, part.partition,
                     part.snapshot_bytes, first, part.cl_offset)

    def _snapshot_parts(self, writing: list[tuple[tuple[str, int], Any]], inputs: Inputs,
                        consumer: Any) -> None:
        """The next part of each snapshot being written, in a transaction of its own."""
        last = self._produce_parts(writing, uuid.uuid4().hex[:16])
        if not all(last.values()):
            self.out.flush()
            self.seam.at("mid_snapshot")
        self.seam.at("snapshot_commit")
        # the input offsets just committed, sent again: the broker checks the group
        # generation, so a zombie cannot commit parts into a changelog its successor writes
        self.out.commit(inputs.committed_offsets(), consumer)
        self._parts_committed(dict(writing), last)

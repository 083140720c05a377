"""One checkpoint = one Kafka transaction: output rows, changelog and repartition
records, progress, dead letters and the input offsets commit together.

``Checkpoint`` owns the worker's one producer.  Under ``exactly_once`` it is
transactional (``transactional.id`` = the worker's identity, so a restarted worker
fences its previous incarnation and aborts what it left open; KIP-447 group metadata
fences a zombie that lost its partitions to another worker), a transaction is begun at
the first record of a checkpoint, and ``commit`` sends the input offsets with the
consumer's current group metadata and commits.  Readers use ``read_committed``.
Under ``at_least_once`` the same records are produced without a transaction, flushed,
and the offsets committed by the consumer afterwards.

Errors by class (confluent-kafka's ``KafkaError``): retriable ones are retried under a
deadline; ``txn_requires_abort`` ones abort and raise ``Rewind`` (the worker drops
what it did since the last commit and reads it again); anything else (fenced, fatal)
raises ``Fenced``: the worker exits with one line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from app.runtime.kafka import client

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


KAFKA_LOG = logging.getLogger("kepl.kafka")
"""librdkafka's log lines (consumer and producer of the worker) as Python log records."""
KAFKA_LOG.addFilter(_NotFatal())


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
        "log_level": 3,
        "logger": KAFKA_LOG,
    }
    if transactional_id is not None:
        conf["transactional.id"] = transactional_id
        # short, so that a zombie's open transaction is aborted soon and the new owner's
        # offset fetch (waiting on it) goes on (Kafka Streams' EOS setting)
        conf["transaction.timeout.ms"] = 10_000
    return conf


class Checkpoint:
    """The worker's producer and its commit protocol (see module docstring)."""

    def __init__(self, bootstrap: str, transactional_id: str | None) -> None:
        from confluent_kafka import Producer

        self.exactly_once = transactional_id is not None
        self.producer = Producer(client.conf(producer_config(bootstrap, transactional_id)))
        self._produce = self.producer.produce
        self._default_cb: OnDelivery | None = None if self.exactly_once else self._check
        self.open = False
        self.records = 0
        self.errors: list[str] = []
        if self.exactly_once:
            self._retry("init_transactions", lambda: self.producer.init_transactions(30))

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
            self._produce(topic, value, key, partition, cb, headers=headers)
        except BufferError:
            while True:
                self.producer.poll(0.05)
                try:
                    self._produce(topic, value, key, partition, cb, headers=headers)
                    return
                except BufferError:
                    continue

    def begin(self) -> None:
        if self.exactly_once:
            self._guard("begin_transaction", self.producer.begin_transaction)
        self.open = True

    def poll(self) -> None:
        self.producer.poll(0)

    def flush(self) -> None:
        """Wait until every record produced so far is acknowledged (a failure raises)."""
        while self.producer.flush(10) > 0:
            log.warning("producer flush still waiting for the broker")
        if self.errors:
            errs, self.errors = self.errors, []
            raise Rewind(f"produce failed: {errs[0]} (+{len(errs) - 1} more)")

    def commit(self, offsets: list[Any], consumer: Any) -> None:
        """Commit the checkpoint with the input ``offsets`` (TopicPartitions with the
        next offset to read and metadata)."""
        if not self.open and not offsets:
            return
        if self.exactly_once:
            if not self.open:
                self.begin()
            if offsets:
                self._guard("send_offsets_to_transaction",
                            lambda: self.producer.send_offsets_to_transaction(
                                offsets, consumer.consumer_group_metadata(), 30))
            self._guard("commit_transaction",
                        lambda: self.producer.commit_transaction(30))
            if self.errors:  # a record failed although the commit went through
                errs, self.errors = self.errors, []
                raise Fenced(f"produce failed inside a committed transaction: {errs[0]}")
        else:
            self.flush()
            if offsets:
                consumer.commit(offsets=offsets, asynchronous=False)
        self.open = False
        self.records = 0

    def abort(self) -> None:
        """Drop the open checkpoint (its records become invisible to read_committed)."""
        if not self.open:
            return
        self.open = False
        self.records = 0
        self.errors = []
        if self.exactly_once:
            try:
                self.producer.abort_transaction(30)
            except Exception as e:  # noqa: BLE001 - the caller rewinds or exits anyway
                log.warning("aborting the transaction failed: %s", e)

    def _guard(self, what: str, call: Callable[[], Any]) -> None:
        """Run a transactional call; map its errors onto Rewind / Fenced."""
        from confluent_kafka import KafkaException

        try:
            self._retry(what, call)
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                self.abort()
                raise Rewind(f"{what}: {err.str()}") from None
            raise Fenced(f"{what}: {err.str()}") from None

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

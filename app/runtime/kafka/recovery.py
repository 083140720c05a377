"""Reading changelog partitions back: what an engine partition restores from.

``KafkaChangelog`` is the ``ChangelogLog`` the worker hands to
``EnginePartition.restore``: low and high watermarks, a ``read_committed`` read of a
partition from an offset to its end (records of aborted transactions never appear;
markers take offsets, so the read ends on end-of-partition, not on a count), and
DeleteRecords for the truncation after a snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from app.runtime.kafka import client

log = logging.getLogger("kepl.recovery")

OFFSETS_RETRY_S = 60.0
"""How long a watermark-offset request is asked again while the partition has no
leader or its leader moved (a broker of a replicated cluster died)."""


_MOVED = ("NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "FENCED_LEADER_EPOCH",
          "UNKNOWN_LEADER_EPOCH", "UNKNOWN_TOPIC_OR_PART", "REQUEST_TIMED_OUT",
          "NETWORK_EXCEPTION", "_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN")


def _moved_codes() -> set[int]:
    from confluent_kafka import KafkaError

    return {getattr(KafkaError, n) for n in _MOVED if hasattr(KafkaError, n)}


def offsets(c: Any, tp: Any, budget_s: float = OFFSETS_RETRY_S) -> tuple[int, int]:
    """(low, high) of ``tp`` through consumer ``c``, asked again (with fresh metadata)
    on a retriable error such as NOT_LEADER_FOR_PARTITION until ``budget_s``."""
    import time

    from confluent_kafka import KafkaException

    deadline = time.monotonic() + budget_s
    pause = 0.1
    while True:
        try:
            low, high = c.get_watermark_offsets(tp, timeout=30)
            return int(low), int(high)
        except KafkaException as e:
            err = e.args[0]
            if (err.code() not in _moved_codes() and not err.retriable()) \
                    or time.monotonic() + pause > deadline:
                raise
            log.info("offsets of %s[%d]: %s; asking again", tp.topic, tp.partition,
                     err.str())
            time.sleep(pause)
            pause = min(1.0, pause * 2)
            c.list_topics(tp.topic, timeout=10)  # fresh metadata: the new leader


class KafkaChangelog:
    """``ChangelogLog`` over the broker: watermarks, reads of a partition, truncation."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._admin: Any = None

    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer(client.consumer_conf({
            "bootstrap.servers": self.bootstrap,
            "group.id": "kepl-restore",
            "enable.auto.commit": False, "enable.partition.eof": True,
            "isolation.level": "read_committed", "log_level": 3,
            # the worker's librdkafka log (brokers.QuietFailures applies)
            "logger": logging.getLogger("kepl.kafka"),
            "fetch.max.bytes": 64 * 1024 * 1024,
            # records deleted under a read must fail it, never skip ahead
            "auto.offset.reset": "error"}))

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(low, high): the first retained offset and the next offset to be written."""
        from confluent_kafka import TopicPartition

        c = self._consumer()
        try:
            return offsets(c, TopicPartition(topic, partition))
        finally:
            c.close()

    def start(self, topic: str, partition: int) -> int:
        return self.watermarks(topic, partition)[0]

    def end(self, topic: str, partition: int) -> int:
        return self.watermarks(topic, partition)[1]

    def delete_before(self, topic: str, partition: int, offset: int) -> None:
        """Ask the broker to delete the records before ``offset``; returns at once.

        Best effort: a failure is logged and only leaves the records longer (the next
        snapshot deletes them).
        """
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient(client.conf({"bootstrap.servers": self.bootstrap,
                                                   "log_level": 3}))

        def done(fut: Any) -> None:
            try:
                fut.result()
            except Exception as e:  # noqa: BLE001 - best effort, see docstring
                log.warning("deleting %s[%d] before %d failed: %s", topic, partition,
                            offset, e)

        try:
            futures = self._admin.delete_records([TopicPartition(topic, partition, offset)],
                                                 request_timeout=30, operation_timeout=30)
        except Exception as e:  # noqa: BLE001 - best effort, see docstring
            log.warning("deleting %s[%d] before %d failed: %s", topic, partition, offset, e)
            return
        for fut in futures.values():
            fut.add_done_callback(done)

    def read(self, topic: str, partition: int, start: int) -> Iterator[tuple[int, bytes]]:
        from confluent_kafka import KafkaError, TopicPartition

        c = self._consumer()
        try:
            tp = TopicPartition(topic, partition)
            low, high = offsets(c, tp)
            start = max(start, low)
            if start >= high:
                return
            c.assign([TopicPartition(topic, partition, start)])
            nxt = start
            while True:
                # transaction markers take offsets but are never delivered: the end is
                # reached at EOF or once the position passes the high watermark
                msgs = c.consume(max(1, min(1000, high - nxt)), 0.05)
                for m in msgs:
                    if m.error() is not None:
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            return
                        raise RuntimeError(f"reading {topic}[{partition}]: {m.error()}")
                    nxt = m.offset() + 1
                    yield m.offset(), m.value()
                if not msgs and c.position([tp])[0].offset >= high:
                    return
        finally:
            c.close()

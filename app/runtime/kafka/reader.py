"""Reading output topics with the repeats a crash can leave removed.

A worker that dies may publish some output rows twice; a replay re-emits them with the
same ``kepl.id`` (``statement/context-partition/sequence``), in the same order.  Within
one (statement, context partition) the sequence only grows, so a reader keeps the
highest sequence seen per key and drops any row at or below it: exact dedupe in O(number
of context partitions) memory.  Reads are ``read_committed``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from app.runtime.kafka import client, formats
from app.runtime.kafka.router import (
    H_ID,
    H_NONFINITE,
    H_PARTITION,
    H_STATEMENT,
    H_STREAM,
    H_TIME,
    headers_dict,
)
from app.runtime.rows import row_dict


@dataclass(frozen=True)
class OutputRow:
    """One output row with its headers and where it was read."""

    statement: str
    stream: str  # insert | remove
    context_partition: str
    time_ms: int
    id: str
    row: dict[str, Any]
    topic: str
    partition: int
    offset: int

    @property
    def seq(self) -> int:
        return int(self.id.rsplit("/", 1)[1])

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly view (``kepl tail``; ``kepl run`` prints the same shape)."""
        return row_dict(self.statement, self.stream, self.context_partition, self.time_ms,
                        self.id, self.row)


class Deduper:
    """Remembers the highest sequence per (statement, context partition)."""

    def __init__(self) -> None:
        self.high: dict[str, int] = {}

    def fresh(self, row_id: str) -> bool:
        """True the first time an id (or a later one of its partition) is seen."""
        key, _, seq_text = row_id.rpartition("/")
        seq = int(seq_text)
        if seq <= self.high.get(key, 0):
            return False
        self.high[key] = seq
        return True


def decode_row(msg: Any) -> OutputRow:
    """A confluent-kafka message of an output topic as an ``OutputRow``."""
    h = headers_dict(msg.headers())
    row_id = h.get(H_ID, b"").decode()
    stmt = h.get(H_STATEMENT)
    cp = h.get(H_PARTITION)
    return OutputRow(
        statement=stmt.decode() if stmt is not None else row_id.split("/", 1)[0],
        stream=h.get(H_STREAM, b"insert").decode(),
        context_partition=cp.decode() if cp is not None else (msg.key() or b"").decode(),
        time_ms=int(h.get(H_TIME, b"0")),
        id=row_id,
        row=formats.decode_row(msg.value(), msg.topic(), h.get(H_NONFINITE)),
        topic=msg.topic(),
        partition=msg.partition(),
        offset=msg.offset(),
    )


READ_WAIT_S = 0.01
"""How long one wait for records lasts before the positions are looked at again."""
FETCH_WAIT_MS = 10
"""The broker holds a fetch without new records this long (librdkafka's default, 500 ms,
would add up to that much to each read of records committed meanwhile)."""


def drain(consumer: Any, timeout_s: float, most: int = 1000) -> list[Any]:
    """The records that arrive within ``timeout_s`` (waiting for the first one only), and
    whatever else is already fetched, up to ``most``.  ``consume(n, t)`` alone waits for
    n records or the whole t."""
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    return [first, *consumer.consume(most - 1, 0)]


class RowReader:
    """An incremental, deduplicating reader of output topics (``kepl tail``, tests)."""

    def __init__(self, bootstrap: str, topics: list[str], from_beginning: bool = True,
                 conf: dict[str, Any] | None = None) -> None:
        """``conf``: extra client settings (``kepl tail``: its logger and error_cb)."""
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

        conf = {"bootstrap.servers": bootstrap, "group.id": "kepl-reader",
                "enable.auto.commit": False, "isolation.level": "read_committed",
                "enable.partition.eof": False, "fetch.wait.max.ms": FETCH_WAIT_MS,
                "log_level": 3, **(conf or {})}
        conf = client.consumer_conf(conf)
        self.consumer = Consumer(conf)
        # End offsets come from a client that never fetches: on the fetching client an
        # offsets request queues behind the fetch long-poll (up to fetch.wait.max.ms).
        # It reads the high watermark, not the last stable offset: a transaction's commit
        # returns before its coordinator wrote the commit markers into every partition,
        # so rows committed together with a progress record already seen may lie past a
        # partition's stable offset for a few milliseconds yet.
        self._meta = Consumer({**conf, "isolation.level": "read_uncommitted"})
        md = self.consumer.list_topics(timeout=30)
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        self.tps = [TopicPartition(t, p, start) for t in topics
                    for p in sorted(md.topics[t].partitions)]
        self.consumer.assign(self.tps)
        self.dedupe = Deduper()
        self.duplicates = 0

    def _ends(self) -> dict[tuple[str, int], int]:
        from confluent_kafka import TopicPartition

        out = {}
        for tp in self.tps:
            _, high = self._meta.get_watermark_offsets(
                TopicPartition(tp.topic, tp.partition), timeout=30)
            out[(tp.topic, tp.partition)] = high
        return out

    def read_available(self, timeout_s: float = 30.0) -> list[OutputRow]:
        """Every new unique row up to the current end of each partition: every record
        written by then, once its transaction is decided (an open one is waited for,
        an aborted one skipped)."""
        import time

        ends = self._ends()
        out: list[OutputRow] = []
        deadline = time.monotonic() + timeout_s
        while True:
            # the position counts the commit markers the consumer skipped, the rows do not
            # (a transaction leaves one marker per partition): wait on positions, and never
            # on a count of records, which ``consume`` would wait out to its timeout
            pos = {(tp.topic, tp.partition): tp.offset
                   for tp in self.consumer.position(self.tps)}
            if all(max(pos.get(k, 0), 0) >= end for k, end in ends.items()):
                break
            if time.monotonic() > deadline:
                raise TimeoutError("output topics did not deliver up to their end offsets")
            for m in drain(self.consumer, READ_WAIT_S):
                if m.error() is not None:
                    continue
                row = decode_row(m)
                if self.dedupe.fresh(row.id):
                    out.append(row)
                else:
                    self.duplicates += 1
        return out

    def follow(self, poll_s: float = 0.5,
               on_poll: Callable[[], None] | None = None) -> Iterator[OutputRow]:
        """New unique rows as they arrive, forever (``on_poll`` runs before each poll)."""
        while True:
            if on_poll is not None:
                on_poll()
            for m in drain(self.consumer, poll_s, 500):
                if m.error() is not None:
                    continue
                row = decode_row(m)
                if self.dedupe.fresh(row.id):
                    yield row
                else:
                    self.duplicates += 1

    def close(self) -> None:
        self.consumer.close()
        self._meta.close()


def read_rows(bootstrap: str, topic: str | list[str], timeout_s: float = 30.0
              ) -> Iterator[OutputRow]:
    """Unique rows of one or more output topics, from the beginning to the current end,
    in order within each partition."""
    reader = RowReader(bootstrap, [topic] if isinstance(topic, str) else list(topic))
    try:
        yield from reader.read_available(timeout_s)
    finally:
        reader.close()


def follow_rows(bootstrap: str, topics: list[str], from_beginning: bool = True
                ) -> Iterator[dict[str, Any]]:
    """Unique rows of output topics as they arrive, forever (``kepl tail``)."""
    reader = RowReader(bootstrap, topics, from_beginning=from_beginning)
    try:
        for row in reader.follow():
            yield row.as_dict()
    finally:
        reader.close()

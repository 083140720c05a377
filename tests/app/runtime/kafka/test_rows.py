"""Output rows as Kafka records, without a broker: an engine partition's rows at a
checkpoint are the records ``RowWriter.row`` makes of each."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import OutRow
from app.runtime.kafka.rows import RowWriter
from app.runtime.kafka.topology import Topology

CONFIG = AppConfig.from_dict({
    "app": "rows", "schemas": {"T": {"k": "string", "v": "double"}},
    "context_partitions": {"ByK": 4},
    "statements": [
        {"name": "ctx", "epl": "create context ByK partition by k from T"},
        {"name": "a", "epl": "context ByK select k, count(*) as n, sum(v) as s from T"},
        {"name": "b", "epl": "context ByK select k, v from T#length(2)"}]})


@dataclass
class Produced:
    records: list[tuple[str, bytes, int, list[tuple[str, bytes]], bytes | None]] = field(
        default_factory=list)

    def produce(self, topic: str, value: bytes, partition: int, headers: Any = None,
                key: bytes | None = None, on_delivery: Any = None) -> None:
        self.records.append((topic, value, partition, list(headers or []), key))


@dataclass
class Part:
    partition: int
    outputs: list[OutRow]


def writer() -> tuple[RowWriter, Produced]:
    out = Produced()
    return RowWriter(out, CONFIG, Topology.plan(CONFIG)), out  # type: ignore[arg-type]


def test_a_partitions_rows_are_the_records_of_each_row() -> None:
    rows = [
        OutRow("a", "insert", "x", 1000, 1, {"k": "x", "n": 1, "s": 2.5}),
        OutRow("a", "insert", "y", 1000, 1, {"k": "y", "n": 1, "s": float("nan")}),
        OutRow("b", "insert", "x", 1000, 1, {"k": "x", "v": 2.5}),
        OutRow("b", "remove", "x", 2000, 2, {"k": "x", "v": 2.5}),
        OutRow("a", "insert", "x", 2000, 2, {"k": "x", "n": 2, "s": Decimal("1.5")}),
        OutRow("a", "insert", "x", 2000, 3, {"k": "x", "n": 1 << 70, "s": None}),
        OutRow("b", "insert", "é/x", 2000, 1, {"k": "é/x", "v": float("-inf")}),
    ]
    one, by_row = writer()
    for r in rows:
        one.row(r.statement, r.stream, r.context_partition, r.time, r.seq, r.row, 3)
    batch, by_part = writer()
    batch.of_partition(Part(3, rows))  # type: ignore[arg-type]
    batch.of_partition(Part(3, rows[:2]))  # type: ignore[arg-type]
    assert by_part.records == by_row.records + by_row.records[:2]
    assert batch.counts == {"a": 6, "b": 3} and one.counts == {"a": 4, "b": 3}
    # what the records say: id, time, stream, the non-finite fields, key, partition
    topic, value, p, headers, key = by_part.records[3]
    assert (topic, p, key) == (CONFIG.output_topic("b"), 3 % 4, b"x")
    assert headers == [("kepl.id", b"b/x/2"), ("kepl.time", b"2000"),
                       ("kepl.stream", b"remove")]
    assert by_part.records[1][1] == b'{"k":"y","n":1,"s":"NaN"}'
    assert by_part.records[1][3][-1] == ("kepl.nonfinite", b'["s"]')
    assert by_part.records[5][1] == b'{"k":"x","n":1180591620717411303424,"s":null}'


@dataclass
class Client(Produced):
    """A producer offering the client's own produce (``sender``), its queue full on the
    records numbered in ``full`` (BufferError, as confluent-kafka raises)."""

    full: set[int] = field(default_factory=set)
    opened: int = 0
    sent: list[tuple[str, bytes, int, list[tuple[str, bytes]], bytes | None]] = field(
        default_factory=list)

    def sender(self) -> tuple[Any, Any]:
        self.opened += 1
        return self.send, "callback"

    def send(self, topic: str, value: bytes, key: bytes | None = None, partition: int = -1,
             callback: Any = None, on_delivery: Any = None, timestamp: int = 0,
             headers: Any = None) -> None:
        """confluent-kafka's ``Producer.produce``, its parameters in the client's order."""
        assert callback == "callback" and on_delivery is None and timestamp == 0
        if len(self.sent) + len(self.records) in self.full:
            self.full.discard(len(self.sent) + len(self.records))
            raise BufferError("Local: Queue full")
        self.sent.append((topic, value, partition, list(headers or []), key))


def test_rows_go_through_the_clients_own_produce_and_a_full_queue_through_produce(
) -> None:
    rows = [OutRow("a", "insert", f"k{i % 3}", 1000, i, {"k": f"k{i % 3}", "n": i, "s": 1.5})
            for i in range(1, 7)]
    plain, by_produce = writer()
    plain.of_partition(Part(1, rows))  # type: ignore[arg-type]
    out = Client(full={2, 5})
    fast = RowWriter(out, CONFIG, Topology.plan(CONFIG))  # type: ignore[arg-type]
    fast.of_partition(Part(1, rows))  # type: ignore[arg-type]
    assert out.opened == 1
    # the rows the queue refused went through produce (which waits for room), in place
    assert [r[3][0] for r in out.records] == [("kepl.id", b"a/k0/3"), ("kepl.id", b"a/k0/6")]
    merged = out.sent[:2] + out.records[:1] + out.sent[2:4] + out.records[1:]
    assert merged == by_produce.records
    assert fast.counts == plain.counts == {"a": 6}

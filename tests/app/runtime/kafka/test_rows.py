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

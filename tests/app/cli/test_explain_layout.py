"""``kepl explain``'s Kafka layout of a hash context: routed, read in place, and the note
that says when reading in place would do."""

from __future__ import annotations

from typing import Any

import pytest

from app.cli.explain import explain_file
from app.statements import parse_statement_file


def lines_of(function: str, extra: str, **doc: Any) -> list[str]:
    sf = parse_statement_file({
        "app": "h", "schemas": {"Txn": {"custId": "string"}}, "partitions": 4, **doc,
        "statements": [
            {"name": "ctx", "epl": f"create context H coalesce by {function}(custId) from Txn "
                                   f"granularity 4{extra}"},
            {"name": "n", "epl": "context H select count(*) as n from Txn"}]})
    lines, ok = explain_file(sf)
    assert ok
    return [line.strip() for line in lines[:lines.index("statement n (query)")]
            if line.strip().split(" ")[0] in ("path", "topic", "note")]


NOTE = ("note  its source topics have a partition per bucket: context_partitions {H: source} "
        "reads them in place, no repartition hop, when their producers key them by the hashed "
        "value (librdkafka's default partitioner)")


def test_a_preallocated_crc32_hash_context_on_a_partition_per_bucket_is_told_of_source(
        ) -> None:
    assert lines_of("consistent_hash_crc32", " preallocate") == [
        "topic in  Txn (4 partitions)",
        "topic via kepl.h.repartition.H (4 partitions, by consistent_hash_crc32 mod 4)",
        NOTE,
        "topic state kepl.h.changelog.H (4 partitions)"]
    assert lines_of("consistent_hash_crc32", " preallocate",
                    context_partitions={"H": "source"}) == [
        "topic in  Txn (4 partitions)",
        "path  direct: source partition p feeds engine partition p (4 partitions, no "
        "repartition hop)",
        "topic state kepl.h.changelog.H (4 partitions)"]


@pytest.mark.parametrize(("function", "extra", "partitions"), [
    ("consistent_hash_crc32", "", 4),  # ids by first use: the routing stage numbers them
    ("hash_code", " preallocate", 4),  # no producer partitions by a Java hash code
    ("consistent_hash_crc32", " preallocate", 8),  # not a partition per bucket
])
def test_no_note_where_reading_in_place_would_not_do(function: str, extra: str,
                                                     partitions: int) -> None:
    assert NOTE not in lines_of(function, extra, partitions=partitions)

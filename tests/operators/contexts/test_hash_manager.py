"""Hash context partitions: ids in allocation order embedded, the bucket when one engine
partition holds one bucket (Kafka mode)."""

from __future__ import annotations

import zlib
from dataclasses import replace

from operators.base import PartitionCtx
from operators.contexts.managers import Change, HashItem, HashSpec
from operators.state import MemoryNamespace

SPEC = HashSpec("H", (HashItem("T", "consistent_hash_crc32", lambda e, c: e["k"]),), 16)


def bucket(k: str) -> int:
    return zlib.crc32(k.encode()) % 16


def test_embedded_ids_follow_allocation_order() -> None:
    m = SPEC.build(MemoryNamespace(), PartitionCtx())
    assert m.deploy(0) == []
    assert [m.route("T", {"k": k}, 0) for k in ("alice", "carol", "alice")] == [[0], [1], [0]]


def test_owned_bucket_is_the_id() -> None:
    owned = bucket("carol")
    m = replace(SPEC, owned=owned).build(MemoryNamespace(), PartitionCtx())
    assert m.deploy(0) == []
    assert m.route("T", {"k": "carol"}, 0) == [owned]
    pre = replace(SPEC, owned=owned, preallocate=True).build(MemoryNamespace(), PartitionCtx())
    assert pre.deploy(0) == [Change("start", owned)]
    assert pre.live() == [owned]


def test_null_goes_to_bucket_zero() -> None:
    # as the reference product: a null hash parameter is bucket 0, not the hash of "None"
    ctx = PartitionCtx()
    assert SPEC.partition_of("T", {"k": None}, ctx) == 0
    code = HashSpec("H", (HashItem("T", "hash_code", lambda e, c: e["k"]),), 16)
    assert code.partition_of("T", {"k": None}, ctx) == 0


def test_negative_hash_code_takes_java_remainder_then_its_absolute_value() -> None:
    # Java: -7 % 4 == -3, then |-3| == 3 (Python's -7 % 4 would be 1)
    code = HashSpec("H", (HashItem("T", "hash_code", lambda e, c: e["k"]),), 4)
    assert code.partition_of("T", {"k": -7}, PartitionCtx()) == 3
    # Long.hashCode folds the high half in: -(2**40) hashes to -256, bucket |-256 % 4| == 0
    assert code.partition_of("T", {"k": -(2 ** 40)}, PartitionCtx()) == 0

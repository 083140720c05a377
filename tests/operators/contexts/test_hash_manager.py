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

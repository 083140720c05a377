"""Hash context partitions: ids in order of first use, the bucket when preallocated; in
Kafka mode one engine partition holds one bucket and learns the order of first use."""

from __future__ import annotations

import zlib
from dataclasses import replace

import pytest

from operators.base import PartitionCtx
from operators.contexts.managers import Change, HashItem, HashSpec, WrongBucket
from operators.state import MemoryNamespace

SPEC = HashSpec("H", (HashItem("T", "consistent_hash_crc32", lambda e, c: e["k"]),), 16)


def bucket(k: str) -> int:
    return zlib.crc32(k.encode()) % 16


def test_embedded_ids_follow_allocation_order() -> None:
    m = SPEC.build(MemoryNamespace(), PartitionCtx())
    assert m.deploy(0) == []
    assert [m.route("T", {"k": k}, 0) for k in ("alice", "carol", "alice")] == [[0], [1], [0]]


def test_owned_bucket_takes_its_rank_in_the_order_of_first_use() -> None:
    owned = bucket("carol")
    m = replace(SPEC, owned=owned).build(MemoryNamespace(), PartitionCtx())
    assert m.deploy(0) == [] and not m.numbered
    # alice's and bob's buckets were used first (elsewhere), then carol's, then dave's
    m.first_use([bucket("alice"), bucket("bob")])
    m.first_use([bucket("alice"), owned, bucket("dave")])
    assert m.numbered
    assert m.route("T", {"k": "carol"}, 0) == [2]
    assert m.live() == [2]  # the others live in other engine partitions
    m.first_use([bucket("erin")])  # after our own first use: changes nothing
    assert m.route("T", {"k": "carol"}, 0) == [2]
    state = MemoryNamespace()
    again = replace(SPEC, owned=owned).build(state, PartitionCtx())
    again.first_use([owned])
    assert again.route("T", {"k": "carol"}, 0) == [0]
    restored = replace(SPEC, owned=owned).build(state, PartitionCtx())
    assert restored.numbered and restored.live() == [0]
    numbered_only = MemoryNamespace()
    m = replace(SPEC, owned=owned).build(numbered_only, PartitionCtx())
    m.first_use([owned])  # numbered, its event not routed (yet)
    assert replace(SPEC, owned=owned).build(numbered_only, PartitionCtx()).live() == []


def test_state_of_an_owned_bucket_numbered_by_bucket_keeps_its_id() -> None:
    owned = bucket("carol")
    old = MemoryNamespace()
    old.put("ids", [[owned, owned]])
    m = replace(SPEC, owned=owned).build(old, PartitionCtx())
    assert m.numbered and m.live() == [owned]
    assert m.route("T", {"k": "carol"}, 0) == [owned]


def test_owned_bucket_without_first_use_counts_from_its_own_route() -> None:
    owned = bucket("carol")
    m = replace(SPEC, owned=owned).build(MemoryNamespace(), PartitionCtx())
    assert m.route("T", {"k": "carol"}, 0) == [0]


def test_preallocated_owned_bucket_is_the_id() -> None:
    owned = bucket("carol")
    pre = replace(SPEC, owned=owned, preallocate=True).build(MemoryNamespace(), PartitionCtx())
    assert pre.deploy(0) == [Change("start", owned)]
    assert pre.live() == [owned]
    assert pre.route("T", {"k": "carol"}, 0) == [owned]


@pytest.mark.parametrize("preallocate", [True, False])
def test_an_event_of_another_bucket_is_refused_by_an_owned_bucket(preallocate: bool) -> None:
    owned = bucket("carol")
    assert bucket("alice") != owned
    m = replace(SPEC, owned=owned, preallocate=preallocate).build(MemoryNamespace(),
                                                                 PartitionCtx())
    m.deploy(0)
    with pytest.raises(WrongBucket) as e:
        m.route("T", {"k": "alice"}, 0)
    assert str(e.value) == (
        f"hash context 'H': this T event is in bucket {bucket('alice')} but came to the "
        f"engine partition of bucket {owned}; a source topic read in place must put "
        "bucket b in partition b (record key = the hashed value, librdkafka's default "
        "partitioner, 16 partitions)")
    assert m.route("T", {"k": "carol"}, 0) == [owned if preallocate else 0]
    assert sorted(m.ids) == [owned]  # the refused event allocated nothing


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

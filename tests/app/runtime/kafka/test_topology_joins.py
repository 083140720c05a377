"""Join statements on Kafka: both streams of a join meet in one engine partition."""

from __future__ import annotations

import pytest

from app.runtime.catalog import NotSupported
from tests.app.runtime.kafka.test_topology import groups, plan

JOIN = ("select a.v as av, b.v as bv from T1#keepall as a, T2#keepall as b "
        "where a.custId = b.accountId")


def test_join_without_context_runs_in_main_over_both_types() -> None:
    t = plan([JOIN])
    assert groups(t) == {"main": (1, ["s0"])}
    assert t.groups["main"].types == {"T1", "T2"}
    assert t.lanes == []
    assert t.groups["main"].partition_of("T2", {"accountId": "x", "v": 1}) == 0


def test_keyed_join_routes_both_types_by_the_key() -> None:
    t = plan(["create context C partition by custId from T1, accountId from T2",
              f"context C {JOIN}"], context_partitions={"C": 8})
    g = t.groups["C"]
    assert (g.partitions, g.types) == (8, {"T1", "T2"})
    for key in ("a", "b", "k42"):
        assert g.partition_of("T1", {"custId": key, "v": 1}) == \
            g.partition_of("T2", {"accountId": key, "v": 1})


def test_hash_join_routes_both_types_to_one_bucket() -> None:
    t = plan(["create context H coalesce by consistent_hash_crc32(custId) from T1, "
              "consistent_hash_crc32(accountId) from T2 granularity 4",
              f"context H {JOIN}"])
    g = next(g for g in t.groups.values() if g.hash_spec is not None)
    assert g.types == {"T1", "T2"}
    for key in ("a", "b", "k42"):
        assert g.partition_of("T1", {"custId": key, "v": 1}) == \
            g.partition_of("T2", {"accountId": key, "v": 1})


def test_join_over_a_type_the_keyed_context_does_not_list_is_refused() -> None:
    with pytest.raises(NotSupported, match="T2, which the context does not partition"):
        plan(["create context C partition by custId from T1", f"context C {JOIN}"],
             context_partitions={"C": 8})

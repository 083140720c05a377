"""Subqueries on Kafka: a subquery's stream reaches the engine partition of its statement
(the same rules as a join's streams)."""

from __future__ import annotations

import pytest

from app.runtime.catalog import NotSupported
from tests.app.runtime.kafka.test_topology import groups, plan

SUB = ("select a.v as v, (select b.v from T2#unique(accountId) as b "
       "where b.accountId = a.custId) as bv from T1 as a")


def test_subquery_without_context_runs_in_main_over_both_types() -> None:
    t = plan([SUB])
    assert groups(t) == {"main": (1, ["s0"])}
    assert t.groups["main"].types == {"T1", "T2"}
    assert t.lanes == []  # a subquery keeps a window: never a stateless lane


def test_keyed_subquery_routes_its_stream_by_the_key() -> None:
    t = plan(["create context C partition by custId from T1, accountId from T2",
              f"context C {SUB}"], context_partitions={"C": 8})
    g = t.groups["C"]
    assert (g.partitions, g.types) == (8, {"T1", "T2"})
    for key in ("a", "b", "k42"):
        assert g.partition_of("T1", {"custId": key, "v": 1}) == \
            g.partition_of("T2", {"accountId": key, "v": 1})


def test_subquery_over_a_type_the_context_does_not_partition_is_refused() -> None:
    with pytest.raises(NotSupported, match="does not partition"):
        plan(["create context C partition by custId from T1", f"context C {SUB}"],
             context_partitions={"C": 8})


def test_on_statement_subquery_stream_joins_its_group() -> None:
    t = plan(["create window W#keepall as T1",
              "on T1 as x delete from W as w where exists (select * from T2#keepall as b "
              "where b.accountId = w.custId)"])
    assert t.groups["main"].types == {"T1", "T2"}

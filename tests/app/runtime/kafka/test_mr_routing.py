"""Which match_recognize statements are spread over engine partitions by their
partition by on Kafka, how their events are routed, and why the others stay in one."""

from __future__ import annotations

import zlib

import pytest

from app.runtime.kafka.config import MAIN_GROUP, AppConfig, ConfigError
from app.runtime.kafka.mr_routing import mr_route
from app.runtime.kafka.runner import MR_PARTITIONS, scenario_config
from app.runtime.kafka.topology import Topology
from operators.contexts.managers import key_text

SCHEMAS = {"T": {"id": "string", "k": "string", "g": "long", "v": "long"}}
MR = ("match_recognize (partition by {keys} measures A.id as a pattern (A B) "
      "define B as B.v > A.v)")


def topology(epl: str, partitions: int | str = 4, extra: list[dict] | None = None
             ) -> Topology:
    return Topology.plan(AppConfig.from_dict({
        "app": "mr", "schemas": SCHEMAS, "context_partitions": {"q": partitions},
        "statements": [*(extra or []), {"name": "q", "epl": epl}]}))


def test_a_named_statement_gets_its_own_group_routed_by_its_key() -> None:
    topo = topology("select * from T " + MR.format(keys="k"))
    g = next(g for g in topo.groups.values() if g.statements == ["q"])
    assert g.name != MAIN_GROUP and g.partitions == 4 and not g.direct
    assert g in topo.routed_groups()
    for k in ("a", "b", "c", "dd", "x"):
        q = g.partition_of("T", {"id": "1", "k": k, "g": 1, "v": 2})
        assert q == zlib.crc32(k.encode()) % 4  # a lone string key is its own text
    # the same key always goes to the same partition, whatever else the event holds
    assert {g.partition_of("T", {"id": str(i), "k": "a", "g": i, "v": i})
            for i in range(20)} == {zlib.crc32(b"a") % 4}
    assert topo.groups[MAIN_GROUP].statements == []


def test_two_keys_and_an_alias() -> None:
    topo = topology("select * from T#time(5 sec) as t "
                    + MR.format(keys="t.k, g"))
    g = next(g for g in topo.groups.values() if g.statements == ["q"])
    q = g.partition_of("T", {"id": "1", "k": "a", "g": 7, "v": 2})
    assert q == zlib.crc32(key_text(["a", 7]).encode()) % 4


def test_source_reads_the_source_partitions_in_place() -> None:
    topo = topology("select * from T " + MR.format(keys="k"), "source")
    g = next(g for g in topo.groups.values() if g.statements == ["q"])
    assert g.direct and g.partitions == 1


@pytest.mark.parametrize(("epl", "why"), [
    ("select * from T match_recognize (measures A.id as a pattern (A B))",
     "no partition by"),
    ("select * from T#length(5) " + MR.format(keys="k"), "data window length(5)"),
    ("select * from T#sort(3, v) " + MR.format(keys="k"), "data window sort"),
    ("select * from T match_recognize (partition by k measures A.id as a pattern (A B) "
     "interval 5 seconds define B as B.v > A.v)", "interval"),
    ("select * from T match_recognize (partition by k measures A.id as a pattern (A B) "
     "define B as B.v > prev(B.v))", "prev()"),
    ("select count(*) as n from T " + MR.format(keys="k"), "aggregates"),
    ("select * from T " + MR.format(keys="k") + " output every 2 events",
     "output rate limiting"),
    ("insert into Out select * from T " + MR.format(keys="k"), "insert into"),
    ("select * from T " + MR.format(keys="lim"), "partition by reads 'lim'"),
    ("select * from T match_recognize (partition by k measures A.id as a pattern (A B) "
     "define B as B.v > lim)", "reads variable 'lim'"),
    ("select * from W " + MR.format(keys="k"), "reads named window 'W'"),
    ("select * from S " + MR.format(keys="k"), "its stream S is inserted into"),
    ("select * from U " + MR.format(keys="k"), "its stream U is inserted into"),
    ("select * from T " + MR.format(keys="k") + " where (select count(*) from T#length(2)) > 0",
     "subqueries"),
])
def test_what_cannot_be_spread_is_refused_with_the_reason(epl: str, why: str) -> None:
    extra = [{"name": "lim", "epl": "create variable long lim = 1"},
             {"name": "setlim", "epl": "on T set lim = v"},
             {"name": "w", "epl": "create window W#keepall as T"},
             {"name": "s", "epl": "insert into S select id, k, v from T"},
             {"name": "u", "epl": "create schema U (id string, k string, v long)"},
             {"name": "to_u", "epl": "insert into U select id, k, v from T"}]
    with pytest.raises(ConfigError, match="cannot be spread over engine partitions") as e:
        topology(epl, extra=extra)
    assert why in str(e.value)


def test_a_name_that_is_both_a_context_and_a_statement_is_refused() -> None:
    with pytest.raises(ConfigError, match="both a context and a statement"):
        Topology.plan(AppConfig.from_dict({
            "app": "mr", "schemas": SCHEMAS, "context_partitions": {"q": 2},
            "statements": [{"name": "c", "epl": "create context q partition by k from T"},
                           {"name": "q", "epl": "select * from T " + MR.format(keys="k")}]}))


def test_scenario_runs_spread_the_routable_statements() -> None:
    doc = {"name": "x", "schemas": SCHEMAS, "statements": [
        {"name": "routed", "epl": "select * from T " + MR.format(keys="k")},
        {"name": "windowed", "epl": "select * from T#length(3) " + MR.format(keys="k")},
        {"name": "plain", "epl": "select * from T"}]}
    config = scenario_config(doc)
    assert config.context_partitions == {"routed": MR_PARTITIONS}
    topo = Topology.plan(config)
    assert "windowed" in topo.groups[MAIN_GROUP].statements


def test_mr_route_answers_for_other_statements() -> None:
    topo = topology("select * from T " + MR.format(keys="k"),
                    extra=[{"name": "p", "epl": "select * from T#length(2)"}])
    plan = next(p for p in topo.plans if p.name == "p")
    assert mr_route(plan, SCHEMAS["T"]) == (None, "not a match_recognize statement")

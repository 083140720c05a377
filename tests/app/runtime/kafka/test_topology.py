"""Engine groups and routing of an app, without a broker (``Topology.plan``)."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from app.runtime.catalog import NotSupported
from app.runtime.kafka.config import AppConfig, ConfigError
from app.runtime.kafka.router import (
    BUNDLE_MAX_ENTRIES,
    Routing,
    barrier_entry,
    dead_letter_headers,
    decode_bundle,
    decode_watermark,
    encode_bundles,
    event_entry,
)
from app.runtime.kafka.topology import Topology
from app.statements import ConfigError as FileError
from app.statements import parse_statement_file

SCHEMAS = {"T1": {"custId": "string", "v": "int"},
           "T2": {"accountId": "string", "region": "int", "v": "int"}}
KEYED = "create context C partition by custId from T1, accountId from T2(v > 0)"


def config(statements: list[str], **extra: Any) -> AppConfig:
    return AppConfig.from_dict({
        "app": "t", "schemas": SCHEMAS,
        "statements": [{"name": f"s{i}", "epl": e} for i, e in enumerate(statements)],
        **extra})


def plan(statements: list[str], **extra: Any) -> Topology:
    return Topology.plan(config(statements, **extra))


def groups(t: Topology) -> dict[str, tuple[int, list[str]]]:
    return {g.name: (g.partitions, [p.name for p in g.plans]) for g in t.groups.values()}


def test_keyed_context_stays_in_main_by_default() -> None:
    t = plan([KEYED, "context C select count(*) as n from T1"])
    assert groups(t) == {"main": (1, ["s0", "s1"])}
    assert t.groups["main"].partition_of("T1", {"custId": "a", "v": 1}) == 0


def test_keyed_context_gets_its_own_group() -> None:
    t = plan([KEYED,
              "context C create variable int cv = 0",
              "create variable int gv = 0",
              "context C create window W#keepall as T1",
              "context C insert into W select * from T1",
              "context C select count(*) as n from T1",
              "select count(*) as n from T2"],
             context_partitions={"C": 4})
    assert groups(t) == {"main": (1, ["s2", "s6"]),
                         "C": (4, ["s0", "s1", "s2", "s3", "s4", "s5"])}
    assert t.groups["C"].types == {"T1", "T2"}
    specs = t.topic_specs()
    assert specs["kepl.t.repartition.C"][0] == 4
    assert specs["kepl.t.changelog.C"][0] == 4
    assert specs["kepl.t.out.s5"][0] == 4
    # one-partition source topics: main reads them in place
    assert "kepl.t.repartition.main" not in specs
    assert t.groups["main"].direct and not t.groups["C"].direct


def test_keyed_partition_is_crc32_of_the_key_text() -> None:
    g = plan([KEYED, "context C select count(*) as n from T1"],
             context_partitions={"C": 6}).groups["C"]
    for cust in ["alice", "bob", "carol", "dave", "Ünïcode"]:
        assert g.partition_of("T1", {"custId": cust, "v": 0}) == \
            zlib.crc32(cust.encode()) % 6
        assert g.partition_of("T2", {"accountId": cust, "region": 1, "v": 1}) == \
            zlib.crc32(cust.encode()) % 6
    assert g.partition_of("T2", {"accountId": "A", "region": 7, "v": 0}) is None  # filter
    # two key values: the JSON text of the key tuple
    g2 = plan(["create context C2 partition by accountId and region from T2",
               "context C2 select count(*) as n from T2"],
              context_partitions={"C2": 6}).groups["C2"]
    assert g2.partition_of("T2", {"accountId": "A", "region": 7, "v": 1}) == \
        zlib.crc32(b'["A", 7]') % 6


def test_routing_sends_events_and_barriers_to_the_keyed_partitions() -> None:
    t = plan([KEYED, "context C select count(*) as n from T1"], context_partitions={"C": 4})
    routing = Routing(t)
    type_name, event = routing.decode("T1", None, b'{"custId": "bob", "v": 2}')
    assert (type_name, event) == ("T1", {"custId": "bob", "v": 2})
    assert routing.targets("T1", type_name, event) == [
        ("kepl.t.repartition.C", zlib.crc32(b"bob") % 4)]
    assert decode_watermark(b'{"t": 2000, "id": "w1"}') == (2000, "w1")
    assert routing.barrier_targets == [("kepl.t.repartition.C", p) for p in range(4)]


@pytest.mark.parametrize(("topic", "header", "value", "message"), [
    ("T1", None, b"x", "not JSON"),
    ("T1", None, None, "empty record (no value)"),
    ("T1", None, b"[1]", "an event of T1 must be a JSON object"),
    ("T1", b"T9", b"{}", "topic T1 does not carry event type 'T9'"),
])
def test_routing_refuses_what_is_not_an_event_of_the_topic(
        topic: str, header: bytes | None, value: bytes | None, message: str) -> None:
    from app.runtime.catalog import EventTypeError

    routing = Routing(plan([KEYED, "context C select count(*) as n from T1"]))
    with pytest.raises(EventTypeError) as e:
        routing.decode(topic, header, value)
    assert str(e.value).startswith(message)


def test_malformed_watermark_and_dead_letter_headers() -> None:
    with pytest.raises(ValueError) as e:
        decode_watermark(b'{"t": 1}')
    assert str(e.value) == 'malformed watermark: must be an object {"t": ms, "id": text}'
    assert dead_letter_headers([("kepl.type", b"T1"), ("kepl.error", b"old")], "bad", "T1",
                               2, 17) == [("kepl.type", b"T1"), ("kepl.error", b"bad"),
                                          ("kepl.source", b"T1/2/17")]


def test_hash_context_group_and_its_tables() -> None:
    t = plan(["create context H coalesce by consistent_hash_crc32(custId) from T1 "
              "granularity 16",
              "context H create table Tot(custId string primary key, n count(*))",
              "context H into table Tot select count(*) as n from T1 group by custId",
              "select count(*) as n from T1"])
    assert groups(t) == {"main": (1, ["s3"]), "H": (16, ["s0", "s1", "s2"])}
    assert t.groups["H"].partition_of("T1", {"custId": "alice", "v": 1}) == \
        zlib.crc32(b"alice") % 16


def test_a_hash_contexts_route_of_one_property_is_its_partition_of_for_every_value(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from app.runtime.kafka import topology

    monkeypatch.setattr(topology, "ROUTE_CACHE", 5)  # the cache fills and starts again
    hashed = "create context H coalesce by consistent_hash_crc32(custId) from T1 granularity 16"
    for ctx in (hashed, hashed.replace("from T1", "from T1(v > 0)")):
        g = plan([ctx, "context H select count(*) as n from T1"]).groups["H"]
        fn = g.partition_fn("T1")
        values: list[Any] = [f"c{i % 13}" for i in range(40)] + [None, 7, 7.5, "", "é"]
        events = [{"custId": v, "v": i % 3} for i, v in enumerate(values * 2)]
        assert [fn(e) for e in events] == [g.partition_of("T1", e) for e in events]
        assert fn({"custId": "alice", "v": 1}) == zlib.crc32(b"alice") % 16
    # with the filter, an event it drops has no partition, whatever its value did before
    assert fn({"custId": "c1", "v": 0}) is None and fn({"custId": "c1", "v": 1}) is not None


HASH4 = ("create context H coalesce by consistent_hash_crc32(custId) from T1, "
         "consistent_hash_crc32(accountId) from T2 granularity 4")


def test_a_preallocated_hash_context_reads_source_partitions_of_one_bucket_each() -> None:
    t = plan([HASH4 + " preallocate", "context H select count(*) as n from T1"],
             context_partitions={"H": "source"}, partitions=4)
    g = t.groups["H"]
    assert (g.partitions, g.direct, g.topics) == (4, True, ["T1", "T2"])
    assert g.upstreams(2, t.source_upstreams()) == ["T1:2", "T2:2"]
    assert [r.name for r in t.routed_groups()] == []
    # without 'source' the same context is fed through its repartition topic
    routed = plan([HASH4 + " preallocate", "context H select count(*) as n from T1"],
                  partitions=4).groups["H"]
    assert (routed.partitions, routed.direct) == (4, False)


@pytest.mark.parametrize(("epl", "counts", "message"), [
    (HASH4, {}, "context_partitions: hash context 'H' is 'source' but not preallocate: "
                "its context.id numbers the buckets in order of first use, which only the "
                "routing stage sees; add preallocate or leave it out of context_partitions"),
    (HASH4 + " preallocate", {"T2": 8},
     "context_partitions: hash context 'H' is 'source' but its granularity is 4 and T2 "
     "(8 partitions): each source topic must have one partition per bucket"),
])
def test_a_hash_context_read_in_place_needs_preallocate_and_a_partition_per_bucket(
        epl: str, counts: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        Topology.plan(config([epl, "context H select count(*) as n from T1"],
                             context_partitions={"H": "source"}, partitions=4), counts)
    assert str(e.value) == message


@pytest.mark.parametrize(("statements", "parts", "message"), [
    ([KEYED], {"D": 2}, "context_partitions: no context named 'D'"),
    (["create context H coalesce by consistent_hash_crc32(custId) from T1 granularity 4"],
     {"H": 4}, "context_partitions: 'H' is a hash context; its granularity sets its "
               "partitions (or 'source': its source topics are partitioned by its hash)"),
    (["create context Cat group v > 0 as pos, group v <= 0 as neg from T1"], {"Cat": 2},
     "context_partitions: 'Cat' is not a keyed context (only 'partition by' contexts are "
     "repartitioned by key)"),
])
def test_context_partitions_must_name_a_keyed_context(
        statements: list[str], parts: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        plan(statements, context_partitions=parts)
    assert str(e.value) == message


@pytest.mark.parametrize(("raw", "message"), [
    ([1], "'context_partitions' must map keyed context names to partition counts"),
    ({"C": 0}, "'context_partitions.C' must be an integer from 1 to 10000 or 'source', got 0"),
    ({"C": "4"}, "'context_partitions.C' must be an integer from 1 to 10000 or 'source', got '4'"),
    ({"C": True},
     "'context_partitions.C' must be an integer from 1 to 10000 or 'source', got True"),
])
def test_context_partitions_shape(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        config([KEYED], context_partitions=raw)
    assert str(e.value) == message


def test_context_partitions_round_trip_and_file_schema() -> None:
    c = config([KEYED], context_partitions={"C": 3}, partitions=2)
    assert (c.context_partitions, c.source_partitions) == ({"C": 3}, 2)
    assert AppConfig.from_dict(c.to_dict()) == c
    doc = {"app": "t", "schemas": SCHEMAS, "context_partitions": {"C": 3},
           "statements": [{"epl": KEYED}]}
    assert parse_statement_file(doc).raw["context_partitions"] == {"C": 3}
    with pytest.raises(FileError) as e:
        parse_statement_file({**doc, "context_partitions": {"C": 0}})
    assert str(e.value) == "<memory>: at context_partitions.C: 0 is less than the minimum of 1"


def test_insert_into_across_groups_is_refused() -> None:
    with pytest.raises(NotSupported) as e:
        plan([KEYED, "context C insert into S select custId from T1",
              "select count(*) as n from S"], context_partitions={"C": 2})
    assert str(e.value) == ("insert into 'S' consumed under another context partitioning "
                            "(engine group 'main', Kafka mode)")


def test_shared_variable_set_from_keyed_partitions_is_refused() -> None:
    statements = [KEYED, "create variable int gv = 0", "context C create variable int cv = 0",
                  "context C on T1 set cv = v",
                  "context C on T1 set gv = v"]
    with pytest.raises(NotSupported) as e:
        plan(statements, context_partitions={"C": 2})
    assert str(e.value) == ("statement 's4' sets variable 'gv', which has no context, from "
                            "the 2 partitions of keyed context 'C' (Kafka mode)")
    assert groups(plan(statements[:4], context_partitions={"C": 2}))["C"] == (
        2, ["s0", "s1", "s2", "s3"])
    assert groups(plan(statements, context_partitions={"C": 1}))["C"] == (
        1, ["s0", "s1", "s2", "s3", "s4"])


def test_global_table_used_from_one_single_partition_group() -> None:
    table = "create table Tot (custId string primary key, n count(*))"
    into = "into table Tot select count(*) as n from T1 group by custId"
    t = plan([table, into, KEYED, "context C select Tot[custId].n as n from T1"])
    assert groups(t)["main"][1] == ["s0", "s1", "s2", "s3"]
    with pytest.raises(NotSupported, match=r"table 'Tot' has no context and is used by "
                       r"statements of engine group 'C' \(4 partitions\), 'main' "
                       r"\(1 partition\)"):
        plan([table, into, KEYED, "context C select Tot[custId].n as n from T1"],
             context_partitions={"C": 4})


def test_a_batch_travels_as_bundles_in_order() -> None:
    t = plan([KEYED, "context C select count(*) as n from T1"], context_partitions={"C": 2})
    routing = Routing(t)
    lanes: dict[tuple[str, int], list[Any]] = {}
    for i in range(5000):
        type_name, event = routing.decode("T1", None, json.dumps(
            {"custId": f"c{i % 7}", "v": i}).encode())
        for target in routing.targets("T1", type_name, event):
            lanes.setdefault(target, []).append(
                event_entry(type_name, "T1:0", i, 1000 + i, None, event))
    for target in routing.barrier_targets:
        lanes.setdefault(target, []).append(barrier_entry("T1:0", 5000, 5000, "w1"))
    for p in (0, 1):
        entries = lanes[("kepl.t.repartition.C", p)]
        values = encode_bundles(entries)
        assert len(values) == -(-len(entries) // BUNDLE_MAX_ENTRIES)
        assert all(len(v) < 1024 * 1024 for v in values)
        got = [r for n, v in enumerate(values)
               for r in decode_bundle(v, f"kepl.t.repartition.C:{p}", n)]
        assert [(r.kind, r.type_name, r.upstream, r.offset, r.ts, r.payload) for r in got] == [
            tuple(e[:5]) + (e[6],) for e in entries]
        assert got[-1].kind == "barrier" and got[-1].payload == {"t": 5000, "id": "w1"}
        assert {r.via for r in got} == {f"kepl.t.repartition.C:{p}"}
        assert [r.payload["custId"] for r in got if r.kind == "event"] == [
            f"c{i % 7}" for i in range(5000) if zlib.crc32(f"c{i % 7}".encode()) % 2 == p]


def test_global_variable_assigned_in_one_group_and_read_in_another_is_refused() -> None:
    hashed = "create context H coalesce by consistent_hash_crc32(custId) from T1 granularity 4"
    var = "create variable int cap = 5"
    setter = "on T2 set cap = v"
    reader = "context H select custId from T1(v > cap)"
    with pytest.raises(NotSupported) as e:
        plan([hashed, var, setter, reader])
    assert str(e.value) == (
        "variable 'cap' has no context, is assigned in engine group 'main' and read by "
        "statement 's3' of engine group 'H': on Kafka each engine keeps its own copy; "
        "declare it with the context or keep its users in one engine group")
    # read where it is set, or never assigned: one value everywhere that matters
    assert groups(plan([hashed, var, setter, "select * from T1(v > cap)",
                        "context H select count(*) as n from T1"]))["main"][1] == [
        "s1", "s2", "s3"]
    assert groups(plan([hashed, var, reader]))["H"][1] == ["s0", "s1", "s2"]
    with pytest.raises(NotSupported, match="assigned in engine group 'H' of 4 partitions"):
        plan([hashed, var, "context H select count(*) as n from T1 output when count_insert >= 2 "
                           "then set cap = 1"])


def test_keyed_context_with_lifecycle_is_partitioned_by_key() -> None:
    """A keyed context terminated by a listed type runs per key; its initiating and
    terminating events go to their key's partition even when they fail the filter."""
    t = plan(["create context C partition by custId from T1, accountId from T2(v > 0) as t2 "
              "initiated by T2(v = 0) terminated by T2(v = 1000)",
              "context C select count(*) as n from T2 output last when terminated"],
             context_partitions={"C": 4})
    g = t.groups["C"]
    assert (g.partitions, g.types) == (4, {"T1", "T2"})
    want = zlib.crc32(b"a") % 4
    assert g.partition_of("T2", {"accountId": "a", "region": 1, "v": 0}) == want
    assert g.partition_of("T2", {"accountId": "a", "region": 1, "v": 1000}) == want
    timed = plan(["create context C partition by custId from T1 terminated after 10 sec",
                  "context C select count(*) as n from T1"], context_partitions={"C": 2})
    assert timed.groups["C"].partitions == 2


def test_keyed_context_terminated_by_an_unlisted_type_is_refused_per_key() -> None:
    """An unlisted terminating type ends every key's partition: main only on Kafka."""
    stmts = ["create context C partition by custId from T1 terminated by T2",
             "context C select count(*) as n from T1"]
    with pytest.raises(NotSupported, match="terminated by T2, an event type not listed"):
        plan(stmts, context_partitions={"C": 4})
    t = plan(stmts)
    assert groups(t) == {"main": (1, ["s0", "s1"])}
    assert t.groups["main"].types == {"T1", "T2"}


def test_a_variable_statement_gets_an_output_topic_in_the_group_that_assigns_it() -> None:
    t = plan(["create variable int a = 0", "create variable int unused = 0",
              "on T1 set a = v", "create expression twice {x => x * 2}",
              "select twice(v) as w from T1"])
    outs = t.output_topics()
    assert outs["s0"] == ("kepl.t.out.s0", 1)
    assert "s1" not in outs and "s3" not in outs
    assert set(outs) == {"s0", "s2", "s4"}


def test_match_recognize_is_never_a_stateless_lane() -> None:
    from app.epl.planner import plan_statement
    from app.runtime.catalog import Catalog
    from app.runtime.kafka.topology import is_stateless

    catalog = Catalog.from_schemas({"T": {"id": "string", "v": "long"}})
    plain = plan_statement(catalog, "select id from T(v > 1)", "p")
    mr = plan_statement(catalog, "select * from T match_recognize (measures A.id as a "
                        "pattern (A B) define A as A.v > 1)", "m")
    assert is_stateless(plain, set())
    assert not is_stateless(mr, set())  # its partial matches are state


def test_stateless_statements_run_as_lanes_unless_their_type_is_inserted_into_or_dropped() -> None:
    """A lane reads its source topic alone: a type statements also insert into has its
    readers in the engine, and so has a type a @Drop statement takes events of (the
    statements after it must not see them)."""
    assert [p.name for p in plan(["select v from T1", "select v from T2"]).lanes] == [
        "s0", "s1"]
    t = plan(["select v from T1", "insert into T1 select accountId as custId, v from T2",
              "select v from T2"])
    assert [p.name for p in t.lanes] == ["s2"]
    t = plan(["@Priority(1) @Drop select v from T1(v > 2)", "select v from T1",
              "select v from T2"])
    assert [p.name for p in t.lanes] == ["s2"]

"""The intake without a broker: consumed records, as the consumer returns them, go to the
lane, the directly fed engine partition or the dead-letter topic, once each."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.inputs import Input, Inputs
from app.runtime.kafka.intake import Intake
from app.runtime.kafka.lanes import Lane, LaneCursor
from app.runtime.kafka.partition import InRecord, Poisoned
from app.runtime.kafka.router import H_CONTROL, H_ERROR, H_SOURCE
from app.runtime.kafka.rows import RowWriter
from app.runtime.kafka.topology import Topology
from app.runtime.kafka.watch import DeadLetterLog
from app.runtime.kafka.wiring import Wiring

CONFIG = AppConfig.from_dict({
    "app": "unit", "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
    "statements": [
        {"name": "big", "epl": "select account, amount from Withdrawal(amount > 100)"},
        {"name": "w", "epl": "select count(*) as cnt from Withdrawal#length(20)"}]})
TOPIC = CONFIG.source_topics[0]


@dataclass
class Msg:
    """A consumed record, as confluent-kafka's ``Message`` answers."""

    off: int
    data: bytes | None
    hdrs: list[tuple[str, bytes]] | None = None

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self.off

    def value(self) -> bytes | None:
        return self.data

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self.hdrs

    def timestamp(self) -> tuple[int, int]:
        return 1, 1000 + self.off


@dataclass
class Produced:
    records: list[tuple[str, bytes, dict[str, bytes]]] = field(default_factory=list)

    def produce(self, topic: str, value: bytes, partition: int, headers: Any = None,
                key: bytes | None = None, on_delivery: Any = None) -> None:
        self.records.append((topic, value, dict(headers or [])))


class Part:
    """An engine partition that takes records, or fails on one read from its source."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at = fail_at
        self.taken: list[InRecord] = []

    def run(self, records: list[InRecord]) -> None:
        for r in records:
            if r.offset == self.fail_at:
                raise Poisoned(r, "engine error: boom")
            self.taken.append(r)


def event(account: str, amount: float) -> bytes:
    return json.dumps({"account": account, "amount": amount}).encode()


def intake(part: Part, applied: int = -1) -> tuple[Intake, Produced, dict[str, int]]:
    topology = Topology.plan(CONFIG, {TOPIC: 1})
    wiring = Wiring(CONFIG, topology)
    out = Produced()
    stats = {"events": 0, "dead": 0}
    inputs = Inputs()
    cur = LaneCursor(applied=applied)
    inp = inputs.add(Input(TOPIC, 0, True, cursor=cur, committed_cursor=cur.copy()))
    inp.lane = Lane(wiring.lane_plans[TOPIC], 0, cur, RowWriter(out, CONFIG, topology).row)
    parts: dict[tuple[str, int], Any] = {("main", 0): part}
    return (Intake(topology, wiring, inputs, parts, out, CONFIG.dlq_topic,
                   DeadLetterLog(CONFIG.dlq_topic), lost=None, stats=stats),  # type: ignore[arg-type]
            out, stats)


def test_an_event_goes_to_its_lane_and_its_engine_partition_once() -> None:
    part = Part()
    take, out, stats = intake(part)
    take.source(Msg(0, event("a", 150.0)), TOPIC)
    take.source(Msg(1, event("b", 50.0)), TOPIC)
    assert take.hand_over()
    assert [(t, json.loads(v)) for t, v, _ in out.records] == [
        (CONFIG.output_topic("big"), {"account": "a", "amount": 150.0})]
    assert [(r.kind, r.offset, r.payload) for r in part.taken] == [
        ("event", 0, {"account": "a", "amount": 150.0}),
        ("event", 1, {"account": "b", "amount": 50.0})]
    assert stats == {"events": 2, "dead": 0}
    assert take.pending == {} and take.inputs.get((TOPIC, 0)).cursor.applied == 1


def test_a_record_read_again_skips_the_lane_but_reaches_the_engine_partition() -> None:
    # the lane's cursor says offset 0 was handled before the rewind; the engine partition
    # held it uncommitted, so it takes it again
    part = Part()
    take, out, _ = intake(part, applied=0)
    take.source(Msg(0, event("a", 150.0)), TOPIC)
    assert take.hand_over()
    assert out.records == [] and [r.offset for r in part.taken] == [0]


@pytest.mark.parametrize("msg, reason", [
    (Msg(0, event("a", 1.0), [("kepl.colour", b"red")]),
     "unknown header 'kepl.colour' (kepl.* headers are kepl's own)"),
    (Msg(0, event("a", 1.0), [(H_CONTROL, b"pause")]),
     "unknown kepl.control 'pause' (known: watermark)"),
    (Msg(0, b'{"t": "soon", "id": "w"}', [(H_CONTROL, b"watermark")]),
     "malformed watermark: t must be a 64-bit integer (ms), got 'soon'"),
    (Msg(0, b"not json"), "not JSON: Expecting value: line 1 column 1 (char 0)"),
    (Msg(0, None), "empty record (no value)"),
    (Msg(0, b"[1, 2]"), "an event of Withdrawal must be a JSON object"),
    (Msg(0, b'{"account": "a", "amount": NaN}'),
     "Withdrawal.amount must be a finite double, got nan"),
    (Msg(0, b'{"account": "\\ud800", "amount": 1.0}'),
     "Withdrawal: string '\\ud800' holds a lone surrogate (not Unicode text)"),
    (Msg(0, b'{"account": 7, "amount": 1.0}'),
     "Withdrawal.account must be a string, got 7"),
])
def test_a_record_that_fails_validation_is_dead_lettered_and_goes_nowhere_else(
        msg: Msg, reason: str) -> None:
    part = Part()
    take, out, stats = intake(part)
    take.source(msg, TOPIC)
    assert take.hand_over()
    [(topic, value, headers)] = out.records
    assert (topic, value) == (CONFIG.dlq_topic, msg.data or b"")
    assert (headers[H_ERROR], headers[H_SOURCE]) == (reason.encode(), f"{TOPIC}/0/0".encode())
    assert part.taken == [] and stats == {"events": 0, "dead": 1}
    assert take.inputs.get((TOPIC, 0)).cursor.applied == 0


def test_an_event_is_decoded_as_the_router_decodes_it() -> None:
    # the intake's own parse of a one-type JSON topic gives what Routing.decode gives:
    # the coerced event (an integer amount becomes a double), in the record's order
    part = Part()
    take, _, _ = intake(part)
    value = b'{"amount": 150, "account": "a"}'
    take.source(Msg(0, value), TOPIC)
    assert take.hand_over()
    assert [r.payload for r in part.taken] == [take.routing.decode(TOPIC, None, value)[1]]
    assert part.taken[0].payload == {"account": "a", "amount": 150.0}
    assert type(part.taken[0].payload["amount"]) is float


def test_a_watermark_advances_the_lane_and_is_staged_for_the_engine_partition() -> None:
    part = Part()
    take, _, _ = intake(part)
    take.source(Msg(0, b'{"t": 5000, "id": "w1"}', [(H_CONTROL, b"watermark")]), TOPIC)
    assert take.lane_progress == {(TOPIC, 0)}
    assert take.hand_over()
    assert [(r.kind, r.payload) for r in part.taken] == [("barrier", {"t": 5000, "id": "w1"})]


def test_a_poison_record_is_noted_and_then_dead_lettered_by_every_room() -> None:
    part = Part(fail_at=1)
    take, out, stats = intake(part)
    for off in (0, 1, 2):
        take.source(Msg(off, event("a", 150.0 + off)), TOPIC)
    assert not take.hand_over()  # the worker rewinds to the last commit
    assert take.poison == {(f"{TOPIC}:0", 1): "engine error: boom"}
    # read again after the rewind (the worker discards what was staged)
    take, out, stats = intake(Part(fail_at=1))
    take.poison[(f"{TOPIC}:0", 1)] = "engine error: boom"
    for off in (0, 1, 2):
        take.source(Msg(off, event("a", 150.0 + off)), TOPIC)
    assert take.hand_over()
    assert [(t, h.get(H_ERROR)) for t, _, h in out.records] == [
        (CONFIG.output_topic("big"), None), (CONFIG.dlq_topic, b"engine error: boom"),
        (CONFIG.output_topic("big"), None)]
    assert stats == {"events": 2, "dead": 1}


@dataclass
class PMsg(Msg):
    """A consumed record of a given partition."""

    p: int = 0

    def partition(self) -> int:
        return self.p

    def error(self) -> None:
        return None


class Gaps:
    def __init__(self) -> None:
        self.seen: list[tuple[Any, int, int]] = []

    def gap(self, key: Any, expected: int, off: int) -> None:
        self.seen.append((key, expected, off))


def records_of(topic: str) -> Any:
    """``m(offset, value, partition, headers)``: a consumed record of ``topic``."""
    def m(off: int, data: bytes | None, p: int = 0, hdrs: Any = None) -> PMsg:
        msg = PMsg(off, data, hdrs, p)
        msg.topic = lambda: topic  # type: ignore[method-assign]
        return msg
    return m


def mixed_batch(topic: str) -> list[PMsg]:
    """Records of two partitions of ``topic`` in one consume batch: events (account
    "boom" fails where a test says so), one not JSON, a gap, a watermark, and one read
    again (partition 1 has applied offset 3)."""
    m = records_of(topic)
    return [m(0, event("a", 150.0)), m(1, event("boom", 500.0)), m(2, event("b", 1.0)),
            m(3, b"not json"),
            m(5, event("c", 300.0)),  # offset 4 never came: a gap
            m(6, b'{"t": 900, "id": "w"}', hdrs=[(H_CONTROL, b"watermark")]),
            m(7, event("d", 200.0)),
            m(3, event("e", 400.0), p=1),  # read again (applied 3): taken no further
            m(4, event("f", 600.0), p=1),
            m(8, event("boom", 1.0)), m(9, event("g", 101.0))]


def one_and_run(make: Any, topic: str, batch: list[PMsg]) -> tuple[Any, Any]:
    """Two intakes from ``make()``: the first takes ``batch`` a record at a time
    (``source``), the second in runs (``source_run``)."""
    one = make()
    for msg in batch:
        one[0].source(msg, topic)
    run = make()
    i = 0
    while i < len(batch):
        i = run[0].source_run(batch, i, topic)
    return one, run


def keyed_config(partitions: int | str) -> AppConfig:
    """A keyed context's app over ``partitions`` engine partitions (``source``: fed
    directly by the source partitions, else routed)."""
    return AppConfig.from_dict({
        "app": "unit", "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "statements": [
            {"name": "ctx",
             "epl": "create context ByAccount partition by account from Withdrawal"},
            {"name": "w", "epl": "context ByAccount select count(*) as cnt "
                                 "from Withdrawal#length(20)"}],
        "context_partitions": {"ByAccount": partitions}})


STATEFUL = keyed_config("source")
STATEFUL_TOPIC = STATEFUL.source_topics[0]


def stateful_intake(cfg: AppConfig = STATEFUL) -> tuple[Intake, Produced, dict[str, int], Gaps]:
    topic = cfg.source_topics[0]
    topology = Topology.plan(cfg, {topic: 2})
    wiring = Wiring(cfg, topology)
    out, stats, gaps, inputs = Produced(), {"events": 0, "dead": 0}, Gaps(), Inputs()
    for p, applied in ((0, -1), (1, 3)):
        cur = LaneCursor(applied=applied)
        inputs.add(Input(topic, p, True, cursor=cur, committed_cursor=cur.copy()))
    take = Intake(topology, wiring, inputs, {}, out, cfg.dlq_topic,
                  DeadLetterLog(cfg.dlq_topic), lost=gaps, stats=stats)  # type: ignore[arg-type]
    return take, out, stats, gaps


def test_a_run_of_one_partitions_records_is_taken_as_one_record_at_a_time() -> None:
    # Msg.topic() answers TOPIC: the records here say the stateful app's topic instead
    m = records_of(STATEFUL_TOPIC)

    batch = [m(0, event("a", 1.0)), m(1, event("b", 2.0)), m(2, b"not json"),
             m(4, event("c", 3.0)),  # offset 3 never came: a gap
             m(5, b'{"t": 900, "id": "w"}', hdrs=[(H_CONTROL, b"watermark")]),
             m(6, b"[1]"), m(7, event("d", 4.0)),
             m(2, event("e", 5.0), p=1),  # read again (applied 3): staged again
             m(4, event("f", 6.0), p=1),  # offset 3 of partition 1 never came
             m(8, event("g", 7.0))]
    (one, out1, stats1, gaps1), (run, out2, stats2, gaps2) = one_and_run(
        stateful_intake, STATEFUL_TOPIC, batch)

    def staged(take: Intake) -> dict[Any, list[tuple[Any, ...]]]:
        return {k: [(r.kind, r.upstream, r.offset, r.type_name, r.ts, r.seq, r.payload,
                     r.via, r.via_offset) for r in recs] for k, recs in take.pending.items()}

    assert staged(run) == staged(one)
    assert [r.offset for r in run.pending[("ByAccount", 0)]] == [0, 1, 4, 5, 7, 8]
    assert [r.offset for r in run.pending[("ByAccount", 1)]] == [2, 4]
    assert stats2 == stats1 == {"events": 7, "dead": 2}
    assert out2.records == out1.records and len(out1.records) == 2
    assert gaps2.seen == gaps1.seen == [((STATEFUL_TOPIC, 0), 3, 4), ((STATEFUL_TOPIC, 1), 3, 4)]
    for p in (0, 1):
        a, b = one.inputs.get((STATEFUL_TOPIC, p)), run.inputs.get((STATEFUL_TOPIC, p))
        assert (b.position, b.cursor.applied) == (a.position, a.cursor.applied)


HASHED = AppConfig.from_dict({
    "app": "unit", "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
    "statements": [
        {"name": "ctx", "epl": "create context H coalesce by consistent_hash_crc32(account) "
                               "from Withdrawal granularity 2 preallocate"},
        {"name": "w", "epl": "context H select count(*) as cnt from Withdrawal"}],
    "context_partitions": {"H": "source"}})


def test_an_event_read_from_another_buckets_partition_is_a_dead_letter_in_runs_too() -> None:
    """A hash context read in place: an event whose bucket is not the partition it was
    read from goes to the dead-letter topic saying why and nowhere else, a record at a
    time and in runs alike; one read again (already applied) goes nowhere."""
    topic = HASHED.source_topics[0]
    m = records_of(topic)
    in0, in1 = "d", "a"  # crc32 mod 2: bucket 0, bucket 1
    assert (zlib.crc32(b"d") % 2, zlib.crc32(b"a") % 2) == (0, 1)
    batch = [m(0, event(in0, 1.0)), m(1, event(in1, 2.0)), m(2, event(in0, 3.0)),
             m(3, event(in0, 4.0), p=1),  # read again (applied 3): taken no further
             m(4, event(in1, 5.0), p=1), m(5, event(in0, 6.0), p=1),
             m(3, event(in1, 7.0)), m(6, event(in1, 8.0), p=1)]
    (one, out1, stats1, _), (run, out2, stats2, _) = one_and_run(
        lambda: stateful_intake(HASHED), topic, batch)
    for take in (one, run):
        assert {k: [r.offset for r in recs] for k, recs in take.pending.items()} == {
            ("H", 0): [0, 2], ("H", 1): [4, 6]}
    assert stats2 == stats1 == {"events": 4, "dead": 3}
    assert out2.records == out1.records
    why = ("hash context 'H': this Withdrawal event is in bucket {b} but came to the engine "
           "partition of bucket {p}; a source topic read in place must put bucket b in "
           "partition b (record key = the hashed value, librdkafka's default partitioner, "
           "2 partitions)")
    assert [(json.loads(v)["amount"], h[H_ERROR].decode()) for _, v, h in out1.records] == [
        (2.0, why.format(b=1, p=0)), (6.0, why.format(b=0, p=1)),
        (7.0, why.format(b=1, p=0))]


LANE_ONLY = AppConfig.from_dict({
    "app": "unit", "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
    "statements": [
        {"name": "big", "epl": "select account, amount from Withdrawal(amount > 100)"}]})
LANE_TOPIC = LANE_ONLY.source_topics[0]


def lane_intake() -> tuple[Intake, Produced, dict[str, int], Gaps]:
    topology = Topology.plan(LANE_ONLY, {LANE_TOPIC: 2})
    wiring = Wiring(LANE_ONLY, topology)
    out, stats, gaps, inputs = Produced(), {"events": 0, "dead": 0}, Gaps(), Inputs()
    for p, applied in ((0, -1), (1, 3)):
        cur = LaneCursor(applied=applied)
        inp = inputs.add(Input(LANE_TOPIC, p, True, cursor=cur, committed_cursor=cur.copy()))
        inp.lane = Lane(wiring.lane_plans[LANE_TOPIC], p, cur,
                        RowWriter(out, LANE_ONLY, topology).row)
        engine_send = inp.lane.engine.send

        def send(type_name: str, event: dict[str, Any], real: Any = engine_send) -> None:
            if event["account"] == "boom":
                raise ZeroDivisionError("boom")
            real(type_name, event)
        inp.lane.engine.send = send  # type: ignore[method-assign]
    take = Intake(topology, wiring, inputs, {}, out, LANE_ONLY.dlq_topic,
                  DeadLetterLog(LANE_ONLY.dlq_topic), lost=gaps, stats=stats)  # type: ignore[arg-type]
    return take, out, stats, gaps


def test_a_run_of_a_lanes_records_gives_what_one_record_at_a_time_gives() -> None:
    batch = mixed_batch(LANE_TOPIC)
    (one, out1, stats1, gaps1), (run, out2, stats2, gaps2) = one_and_run(
        lane_intake, LANE_TOPIC, batch)

    assert out2.records == out1.records
    assert [(t == LANE_ONLY.dlq_topic, v[:16], h.get(H_ERROR, b"")[:12])
            for t, v, h in out1.records] == [
        (False, b'{"account":"a","', b""), (True, b'{"account": "boo', b"engine error"),
        (True, b"not json", b"not JSON: Ex"), (False, b'{"account":"c","', b""),
        (False, b'{"account":"d","', b""), (False, b'{"account":"f","', b""),
        (True, b'{"account": "boo', b"engine error"), (False, b'{"account":"g","', b"")]
    assert stats2 == stats1 == {"events": 8, "dead": 3}
    assert gaps2.seen == gaps1.seen == [((LANE_TOPIC, 0), 4, 5)]
    for p in (0, 1):
        a, b = one.inputs.get((LANE_TOPIC, p)), run.inputs.get((LANE_TOPIC, p))
        assert (b.position, b.cursor.applied) == (a.position, a.cursor.applied)


ROUTED = keyed_config(4)
ROUTED_TOPIC = ROUTED.source_topics[0]


def routed_intake() -> tuple[Intake, Produced, dict[str, int], Gaps]:
    take, out, stats, gaps = stateful_intake(ROUTED)
    # the group fails to route one account, in both the record's and the run's path
    (_, group), = take.routing._route_of[ROUTED_TOPIC]
    partition_of, partition_fn = group.partition_of, group.partition_fn

    def failing_of(type_name: str, ev: dict[str, Any]) -> int | None:
        if ev["account"] == "boom":
            raise ZeroDivisionError("boom")
        return partition_of(type_name, ev)

    def failing_fn(type_name: str) -> Any:
        fn = partition_fn(type_name)
        return lambda ev: failing_of(type_name, ev) if ev["account"] == "boom" else fn(ev)
    group.partition_of = failing_of  # type: ignore[method-assign]
    group.partition_fn = failing_fn  # type: ignore[method-assign]
    return take, out, stats, gaps


def test_a_run_of_routed_records_gives_what_one_record_at_a_time_gives() -> None:
    batch = mixed_batch(ROUTED_TOPIC)
    (one, out1, stats1, gaps1), (run, out2, stats2, gaps2) = one_and_run(
        routed_intake, ROUTED_TOPIC, batch)

    assert run.bundles == one.bundles
    offsets = sorted((e[2], e[3]) for entries in run.bundles.values() for e in entries
                     if e[0] == "event")
    assert offsets == [(f"{ROUTED_TOPIC}:0", o) for o in (0, 2, 5, 7, 9)] + [
        (f"{ROUTED_TOPIC}:1", 4)]
    assert out2.records == out1.records
    assert [(t == ROUTED.dlq_topic, h.get(H_ERROR, b"")[:12]) for t, _, h in out1.records] \
        == [(True, b"boom"), (True, b"not JSON: Ex"), (True, b"boom")]
    assert stats2 == stats1 == {"events": 6, "dead": 3}
    assert gaps2.seen == gaps1.seen == [((ROUTED_TOPIC, 0), 4, 5)]
    for p in (0, 1):
        a, b = one.inputs.get((ROUTED_TOPIC, p)), run.inputs.get((ROUTED_TOPIC, p))
        assert (b.position, b.cursor.applied) == (a.position, a.cursor.applied)

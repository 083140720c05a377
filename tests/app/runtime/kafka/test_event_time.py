"""Event time on a real broker: watermarks from the events (``kepl clock --from-events``),
events run in event-time order, an idle partition, and late events under each policy."""

from __future__ import annotations

import random
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig, ConfigError
from app.runtime.kafka.event_clock import EventClock
from app.runtime.kafka.eventtime import EventTime, Follower, HeldEvents
from app.runtime.kafka.ops import app_status, render_status
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.runner import KafkaApp
from operators.state import MemoryStore

SCHEMAS = {"Withdrawal": {"account": "string", "amount": "double"}}
STATEMENTS = [
    {"name": "w5", "epl": "select count(*) as cnt, sum(amount) as total "
                          "from Withdrawal#time(5 sec)"},
    {"name": "batch", "epl": "select account, sum(amount) as total "
                             "from Withdrawal#time_batch(3 sec) group by account "
                             "order by account"},
    {"name": "every", "epl": "select count(*) as cnt, max(amount) as top "
                             "from Withdrawal#length(4) output last every 2 sec"},
]
DELAY_MS = 2000


def config(event_time: dict[str, Any], late: str | None = None,
           statements: list[dict[str, str]] | None = None) -> AppConfig:
    name = f"et-{uuid.uuid4().hex[:8]}"
    return AppConfig.from_dict({
        "app": name, "schemas": SCHEMAS, "topics": {"Withdrawal": f"{name}.withdrawal"},
        "partitions": 3, "event_time": event_time,
        **({"late_events": late} if late else {}),
        "statements": statements or STATEMENTS})


def events(n: int, seed: int) -> list[tuple[int, dict[str, Any]]]:
    """(time, event) in time order, 200 ms apart from 1000."""
    rnd = random.Random(seed)
    return [(1000 + 200 * i, {"account": f"A{rnd.randrange(3)}",
                              "amount": float(rnd.randrange(1, 100))}) for i in range(n)]


def shuffled(evs: list[Any], block: int, seed: int) -> list[Any]:
    """Out of order within blocks of ``block`` events (less than the allowed delay)."""
    rnd = random.Random(seed)
    out = []
    for i in range(0, len(evs), block):
        chunk = evs[i:i + block]
        rnd.shuffle(chunk)
        out += chunk
    return out


def embedded(cfg: AppConfig, evs: list[tuple[int, dict[str, Any]]], end: int
             ) -> dict[str, list[Any]]:
    """Rows per statement of the embedded run of the events in time order."""
    catalog = Catalog.from_schemas(cfg.schemas)
    engine = Engine()
    for s in cfg.statements:
        engine.deploy(plan_statement(catalog, s.epl, s.name))
    out: dict[str, list[Any]] = {}

    def listen(stmt: str, new: list, _old: list, _pid: Any) -> None:
        out.setdefault(stmt, []).extend(dict(r) for r in new)

    engine.listeners.append(listen)
    for t, e in sorted(evs, key=lambda x: x[0]):
        engine.advance_time(t)
        engine.send("Withdrawal", e)
    engine.advance_time(end)
    return out


def kafka_rows(kapp: KafkaApp) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for s in kapp.config.statements:
        rows = [r.row for r in read_rows(kapp.bootstrap, kapp.config.output_topic(s.name))
                if r.stream == "insert"]
        if rows:
            out[s.name] = rows
    return out


class Running:
    """An ``EventClock`` in a thread."""

    def __init__(self, kapp: KafkaApp) -> None:
        self.clock = EventClock(kapp.bootstrap, kapp.config, None, every_s=0.1)
        self.thread = threading.Thread(target=self.clock.run,
                                       args=(lambda: self.clock.stopping,), daemon=True)
        self.thread.start()

    def wait_for(self, t: int, timeout_s: float = 60) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.clock.last is not None and self.clock.last >= t:
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        self.clock.stopping = True
        self.thread.join(10)
        self.clock.close()


@pytest.fixture
def kapp_of(kafka_bootstrap: str) -> Iterator[Any]:
    apps: list[KafkaApp] = []

    def make(cfg: AppConfig) -> KafkaApp:
        kapp = KafkaApp(cfg, kafka_bootstrap, start=True)
        apps.append(kapp)
        return kapp

    yield make
    for kapp in apps:
        kapp.close(graceful=False)
        kapp.delete_topics()


# -- pure parts ------------------------------------------------------------------------

def test_watermark_is_the_minimum_less_the_delay_and_idle_partitions_do_not_count() -> None:
    now = [0.0]
    f = Follower([("t", 0), ("t", 1)], EventTime(delay_ms=500, idle_ms=2000),
                 now=lambda: now[0])
    assert f.watermark() is None  # nothing from either partition yet
    f.saw(("t", 0), 4000)
    assert f.watermark() is None  # partition 1 is not idle yet: it holds time
    now[0] = 1.0
    f.saw(("t", 1), 3000)
    assert f.watermark() == 2500
    now[0] = 2.5  # partition 0 silent for 2.5 s > idle 2 s: partition 1 alone
    f.saw(("t", 1), 3500)
    assert f.watermark() == 3000
    now[0] = 10.0  # both idle: the newest of them
    assert f.watermark() == 3500


def test_held_events_come_out_in_time_order_and_are_state() -> None:
    ns = MemoryStore().namespace("kepl", "held")
    held = HeldEvents(ns)
    held.add((3000, 2, 0, 7), "W", {"a": 3})
    held.add((1000, 9, 1, 2), "W", {"a": 1})
    held.add((2000, 1, 2, 4), "W", {"a": 2})
    held.persist()  # a checkpoint: every event still held is state
    assert [e["a"] for _, _, e in held.due(2000)] == [1, 2]
    again = HeldEvents(ns)  # rebuilt from the state (a restart)
    assert [(k, e) for k, _, e in again.due(9999)] == [((3000, 2, 0, 7), {"a": 3})]


def test_held_events_in_and_out_of_order_come_out_as_one_sorted_stream() -> None:
    """Keys that come in order queue in a run, earlier ones in a heap: ``due`` merges
    the two, across checkpoints and a rebuild from the state, as one sort would."""
    rnd = random.Random(11)
    ns = MemoryStore().namespace("kepl", "held")
    held = HeldEvents(ns)
    want: list[tuple[int, int, int, int]] = []
    got: list[tuple[int, int, int, int]] = []
    t = released = 0
    for i in range(3000):
        # mostly in order, now and then up to 400 ms back, from one of two upstreams
        t += rnd.randrange(5)
        key = (max(released + 1, t - (rnd.randrange(400) if rnd.random() < 0.2 else 0)),
               rnd.randrange(3) - 1, rnd.randrange(2), i)
        held.add(key, "W", {"i": i})
        want.append(key)
        if i % 97 == 0:
            held.persist()
        if i % 250 == 249:
            released = t - 300
            got += [k for k, _, _ in held.due(released)]
        if i % 1000 == 999:
            held.persist()
            held = HeldEvents(ns)  # a restart: rebuilt from the state
    got += [k for k, _, _ in held.due(10 ** 12)]
    assert got == sorted(want) and len(held) == 0


def test_held_events_reach_the_state_at_the_checkpoint_that_finds_them_held() -> None:
    inner = MemoryStore().namespace("kepl", "held")
    writes: list[tuple[str, tuple]] = []

    class Recording:
        """The namespace, its writes recorded."""

        def items(self) -> Any:
            return inner.items()

        def put(self, key: tuple, value: Any) -> None:
            writes.append(("put", key))
            inner.put(key, value)

        def delete(self, key: tuple) -> None:
            writes.append(("delete", key))
            inner.delete(key)

    ns = Recording()
    held = HeldEvents(ns)
    held.add((1000, 0, 0, 1), "W", {"a": 1})
    held.add((5000, 0, 0, 2), "W", {"a": 5})
    assert [e["a"] for _, _, e in held.due(1000)] == [1]
    assert writes == []  # released before any checkpoint: never written
    held.persist()
    assert writes == [("put", (5000, 0, 0, 2))]
    held.add((3000, 0, 0, 3), "W", {"a": 3})
    assert [(tuple(k), v) for k, v in inner.items()] == [((5000, 0, 0, 2), ["W", {"a": 5}])]
    assert [e["a"] for _, _, e in held.due(9999)] == [3, 5]
    assert writes[1:] == [("delete", (5000, 0, 0, 2))]
    held.persist()
    assert list(inner.items()) == [] and len(held) == 0


def test_an_event_time_is_its_declared_property_or_the_record_timestamp() -> None:
    et = EventTime(property={"W": "at"})
    assert et.time_of("W", {"at": 1234}, 99) == 1234
    assert et.time_of("W", {"at": None}, 99) == 99
    assert et.time_of("V", {"at": 1234}, 99) == 99


def test_event_time_settings_are_checked() -> None:
    ok = config({"delay_ms": 100, "idle_ms": 50}, "dead-letter")
    assert ok.event_time == EventTime(100, 50, {}, "dead-letter")
    assert AppConfig.from_dict(ok.to_dict()).event_time == ok.event_time
    with pytest.raises(ConfigError, match="'late_events' must be one of process, "
                                          "dead-letter, got 'drop'"):
        config({}, "drop")
    with pytest.raises(ConfigError, match="'event_time.property.Withdrawal' must name a "
                                          "long property of Withdrawal"):
        config({"property": {"Withdrawal": "account"}})
    with pytest.raises(ConfigError, match="'event_time.delay_ms' must be a number of ms"):
        config({"delay_ms": -1})


def test_late_events_are_in_the_metrics() -> None:
    from prometheus_client import generate_latest

    from app.runtime.kafka.eventtime import LATE
    from app.runtime.kafka.health import Metrics

    before = LATE["dead-letter"]
    LATE["dead-letter"] += 2
    try:
        text = generate_latest(Metrics("m").registry).decode()
    finally:
        LATE["dead-letter"] = before
    assert f'kepl_late_events{{app="m",policy="dead-letter"}} {before + 2}.0' in text


# -- on the broker ---------------------------------------------------------------------

@pytest.mark.kafka
@pytest.mark.timeout(240)
def test_out_of_order_within_the_delay_gives_the_time_ordered_rows(kapp_of: Any) -> None:
    cfg = config({"delay_ms": DELAY_MS, "idle_ms": 30_000})
    kapp = kapp_of(cfg)
    evs = events(90, seed=3)
    clock = Running(kapp)
    try:
        for i, (t, e) in enumerate(shuffled(evs, 5, seed=4)):  # at most 800 ms out
            kapp.send("Withdrawal", e, timestamp_ms=t, partition=i % 3)
        kapp.producer.flush(30)
        newest = max(t for t, _ in evs)
        assert clock.wait_for(newest - DELAY_MS), clock.clock.last
    finally:
        clock.stop()
    end = newest + 10_000
    kapp.now = end
    kapp.settle()
    want = embedded(cfg, evs, end)
    assert set(want) == {"w5", "batch", "every"}
    assert kafka_rows(kapp) == want


@pytest.mark.kafka
@pytest.mark.timeout(240)
@pytest.mark.parametrize("local", ["kept", "lost"])
def test_held_events_survive_a_kill_9(kapp_of: Any, local: str) -> None:
    """Events a watermark has not released when the worker is killed come back from the
    committed state (their source offsets were committed with it), from the local
    database or, when it is lost, from the changelog: the rows are the uninterrupted
    run's, each once."""
    cfg = config({"delay_ms": 0, "idle_ms": 30_000})
    kapp = kapp_of(cfg)
    evs = events(60, seed=11)
    for i, (t, e) in enumerate(evs):
        kapp.send("Withdrawal", e, timestamp_ms=t, partition=i % 3)
    kapp.producer.flush(30)
    middle = evs[len(evs) // 2][0]
    kapp.now = middle
    kapp.settle()  # the checkpoint with this watermark holds the later half
    kapp.worker.kill()
    if local == "lost":
        shutil.rmtree(kapp.worker.data_dir)
    kapp.worker.start()
    end = max(t for t, _ in evs) + 10_000
    kapp.now = end
    kapp.settle()
    want = embedded(cfg, evs, end)
    assert sum(map(len, want.values())) > 60
    assert kafka_rows(kapp) == want


@pytest.mark.kafka
@pytest.mark.timeout(240)
def test_an_idle_partition_does_not_hold_time_back(kapp_of: Any) -> None:
    cfg = config({"delay_ms": DELAY_MS, "idle_ms": 1500})
    kapp = kapp_of(cfg)
    evs = events(40, seed=5)
    clock = Running(kapp)
    try:
        for i, (t, e) in enumerate(evs):  # partition 2 gets nothing
            kapp.send("Withdrawal", e, timestamp_ms=t, partition=i % 2)
        kapp.producer.flush(30)
        newest = max(t for t, _ in evs)
        # partitions 0 and 1 say newest - 200 and newest: the minimum, less the delay
        assert clock.wait_for(newest - 200 - DELAY_MS), clock.clock.last
        # and the rows up to there come out before any final watermark
        due = sum(1 for t, _ in evs if t <= newest - 200 - DELAY_MS)
        deadline = time.monotonic() + 60
        w5: list[Any] = []
        while len(w5) < due and time.monotonic() < deadline:
            w5 = [r.row for r in read_rows(kapp.bootstrap, cfg.output_topic("w5"))]
            time.sleep(0.5)
        assert len(w5) >= due
    finally:
        clock.stop()
    end = newest + 10_000
    kapp.now = end
    kapp.settle()
    assert kafka_rows(kapp) == embedded(cfg, evs, end)


@pytest.mark.kafka
@pytest.mark.timeout(240)
@pytest.mark.parametrize("policy", ["process", "dead-letter"])
def test_late_events(kapp_of: Any, policy: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    cfg = config({"delay_ms": 0}, policy, [
        {"name": "w10", "epl": "select count(*) as cnt, sum(amount) as total "
                               "from Withdrawal#time(10 sec)"}])
    kapp = kapp_of(cfg)
    for i, t in enumerate((1000, 2000, 3000)):
        kapp.send("Withdrawal", {"account": "A", "amount": 1.0}, timestamp_ms=t,
                  partition=i)
    kapp.advance(5000)  # what the event clock would publish
    kapp.send("Withdrawal", {"account": "A", "amount": 7.0}, timestamp_ms=2500, partition=1)
    kapp.now = 6000
    kapp.settle()
    rows = kafka_rows(kapp)["w10"]
    st = app_status(cfg, kapp.bootstrap, lambda _b, _t: None)
    assert st["late_events"] == {"policy": policy, "count": 1}
    assert f"late events: 1 (late_events: {policy})" in render_status(st)
    if policy == "process":  # at the runtime time it came in, as Esper would
        late = [(1000, {"account": "A", "amount": 1.0}), (2000, {"account": "A", "amount": 1.0}),
                (3000, {"account": "A", "amount": 1.0}), (5000, {"account": "A", "amount": 7.0})]
        assert rows == embedded(cfg, late, 6000)["w10"]
        assert rows[-1] == {"cnt": 4, "total": 10.0}
        dead: list[Any] = []
    else:
        assert rows == [{"cnt": 1, "total": 1.0}, {"cnt": 2, "total": 2.0},
                        {"cnt": 3, "total": 3.0}]
        c = Consumer({"bootstrap.servers": kapp.bootstrap, "group.id": uuid.uuid4().hex,
                      "isolation.level": "read_committed", "log_level": 0})
        c.assign([TopicPartition(cfg.dlq_topic, 0, OFFSET_BEGINNING)])
        dead = [m for m in c.consume(10, 5.0) if m.error() is None]
        c.close()
        assert len(dead) == 1
        headers = dict(dead[0].headers())
        assert headers["kepl.error"].decode() == (
            "late event: event time 2500 is 2500 ms behind the runtime time 5000 (a "
            "watermark passed it; late_events: dead-letter)")
        assert headers["kepl.lateness"] == b"2500"
        assert headers["kepl.source"].decode().startswith(f"{cfg.topic_of('Withdrawal')}/1/")

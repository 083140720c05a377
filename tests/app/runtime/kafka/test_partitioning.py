"""Context partitioning on a real broker: hash and keyed repartition topics.

- a hash context of granularity 16 gets a 16-partition repartition topic and each
  customer's records land on partition crc32(custId) mod 16 (Esper ref. 4.2.3); its
  ``context.id`` numbers the buckets in order of first use, with one worker or two;
- a keyed context named in ``context_partitions`` gets K partitions, each key on
  partition crc32(key) mod K, and gives per key the rows of the embedded Engine;
- the rows per context partition do not depend on how many worker processes share the
  consumer group.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import OutputRow, read_rows
from app.runtime.kafka.router import decode_bundle
from app.runtime.kafka.runner import KafkaApp, WorkerProcess
from operators.contexts.managers import key_text

pytestmark = pytest.mark.kafka

TXN = {"custId": "string", "amount": "double"}
LOGIN = {"userId": "string"}


def _describe_partitions(bootstrap: str, topic: str) -> int:
    """Partition count as ``kafka-topics --describe`` reports it."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)
    return len(desc.partitions)


def _read_topic(bootstrap: str, topic: str) -> list[Any]:
    """Every record of a topic, from the beginning to the current end."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "log_level": 3})
    try:
        md = c.list_topics(topic, timeout=30)
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in md.topics[topic].partitions}
        c.assign([TopicPartition(topic, p, 0) for p in ends])
        pos = dict.fromkeys(ends, 0)
        out: list[Any] = []
        deadline = time.monotonic() + 30
        while any(pos[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    out.append(m)
                    pos[m.partition()] = m.offset() + 1
        return out
    finally:
        c.close()


def _rows(kapp: KafkaApp, statement: str) -> list[OutputRow]:
    return list(read_rows(kapp.bootstrap, kapp.config.output_topic(statement)))


def _lanes(rows: list[OutputRow]) -> dict[str, list[tuple]]:
    """Rows per context partition, in order: (stream, row, time, id)."""
    out: dict[str, list[tuple]] = {}
    for r in rows:
        out.setdefault(r.context_partition, []).append((r.stream, r.row, r.time_ms, r.id))
    return out


# -- hash context, granularity 16 ----------------------------------------------------

CUSTOMERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
             "ivan", "judy", "mallory", "niaj", "olivia", "peggy", "rupert", "sybil"]


def _hash_app(name: str, granularity: str, **extra: Any) -> AppConfig:
    """A hash context ``H`` over the customer (``granularity``: its clause) and the count
    and total per customer with the context partition's id."""
    return AppConfig.from_dict({
        "app": name, "schemas": {"Txn": TXN}, "topics": {"Txn": f"{name}.txn"}, **extra,
        "statements": [
            {"name": "ctx", "epl": "create context H coalesce by "
                                   f"consistent_hash_crc32(custId) from Txn {granularity}"},
            {"name": "per_cust", "epl": "context H select context.id as cid, custId, "
                                        "count(*) as n, sum(amount) as total from Txn "
                                        "group by custId"},
        ],
    })


@pytest.mark.parametrize("workers", [1, 2])
def test_hash_context_granularity_16(kafka_bootstrap: str, workers: int) -> None:
    """16 repartition partitions; record partition = crc32(custId) mod 16; context.id
    numbers the buckets in order of first use (as embedded) over two source partitions,
    whichever worker runs a bucket; exact rows."""
    name = f"hash16-{uuid.uuid4().hex[:8]}"
    config = _hash_app(name, "granularity 16", partitions=2)
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    (kapp.workdir / "other").mkdir()
    other = WorkerProcess(config, kafka_bootstrap, kapp.workdir / "other")
    try:
        if workers == 2:
            other.start()
            _wait_for_members(kafka_bootstrap, f"kepl.{name}", config.repartition_topic("H"), 2)
        sent = [(CUSTOMERS[(i * 7) % len(CUSTOMERS)], float(10 * (i + 1))) for i in range(40)]
        kapp.advance(1000)
        for i, (cust, amount) in enumerate(sent):
            kapp.send("Txn", {"custId": cust, "amount": amount}, partition=i % 2)
        kapp.settle()
        if workers == 2:
            assert other.alive(), other.log_tail()
            assert list((other.data_dir / "H").glob("*"))

        topic = config.repartition_topic("H")
        assert _describe_partitions(kafka_bootstrap, topic) == 16
        # records are bundles of the events a router batch sent to one partition
        events = [(m.partition(), r) for m in _read_topic(kafka_bootstrap, topic)
                  for r in decode_bundle(m.value())
                  if r.kind == "event"]
        assert len(events) == len(sent)
        for partition, r in events:
            cust = r.payload["custId"]
            assert partition == zlib.crc32(cust.encode()) % 16, cust
        assert sorted(r.payload["custId"] for _, r in events) == sorted(c for c, _ in sent)

        expected: dict[str, list[tuple]] = {}
        counts: dict[str, tuple[int, float]] = {}
        seqs: dict[int, int] = {}
        for cust, amount in sent:
            n, total = counts.get(cust, (0, 0.0))
            counts[cust] = (n + 1, total + amount)
            bucket = zlib.crc32(cust.encode()) % 16
            seqs[bucket] = seqs.get(bucket, 0) + 1
            expected.setdefault(str(bucket), []).append(
                ("insert", {"cid": list(expected).index(str(bucket)), "custId": cust,
                            "n": n + 1, "total": total + amount}, 1000,
                 f"per_cust/{bucket}/{seqs[bucket]}"))
        assert len(expected) >= 6 and list(expected) != sorted(expected, key=int)
        rows = _rows(kapp, "per_cust")
        assert _lanes(rows) == expected
        assert all(r.partition == int(r.context_partition) for r in rows)
    finally:
        other.kill()
        kapp.close(graceful=False)
        kapp.delete_topics()


def test_a_preallocated_hash_context_reads_its_source_partitions_in_place(
        kafka_bootstrap: str) -> None:
    """``context_partitions: {H: source}``: the producer's own partitioner (librdkafka's
    default, CRC32 of the key) puts bucket b in partition b of a 4-partition topic, the
    engine partitions read it with no repartition topic, and the rows are those of the
    repartitioned context; an event written to another bucket's partition is a dead
    letter saying why, and the worker goes on."""
    from confluent_kafka import Producer

    from app.runtime.kafka.router import headers_dict
    from tests.app.runtime.kafka.test_dlq import dead_letters

    name = f"hashsrc-{uuid.uuid4().hex[:8]}"
    config = _hash_app(name, "granularity 4 preallocate", partitions=4,
                       context_partitions={"H": "source"})
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    topic = config.topic_of("Txn")
    try:
        assert kapp.topology.groups["H"].direct
        sent = [(CUSTOMERS[(i * 5) % len(CUSTOMERS)], float(i + 1)) for i in range(40)]
        kapp.advance(1000)
        producer = Producer({"bootstrap.servers": kafka_bootstrap, "log_level": 3})
        wrong = (zlib.crc32(b"alice") + 1) % 4
        for i, (cust, amount) in enumerate(sent):
            producer.produce(topic, json.dumps({"custId": cust, "amount": amount}).encode(),
                             key=cust.encode(), timestamp=1000)
            if i == 20:
                producer.produce(topic, b'{"custId": "alice", "amount": 1000.0}',
                                 key=b"alice", partition=wrong, timestamp=1000)
        assert producer.flush(30) == 0
        kapp.settle()

        placed = [(m.partition(), json.loads(m.value())["custId"])
                  for m in _read_topic(kafka_bootstrap, topic) if not m.headers()]
        assert len(placed) == len(sent) + 1
        assert [p for p, c in placed if p != zlib.crc32(c.encode()) % 4] == [wrong]
        assert config.repartition_topic("H") not in _topics(kafka_bootstrap)

        expected: dict[str, list[tuple]] = {}
        counts: dict[str, tuple[int, float]] = {}
        for cust, amount in sent:
            n, total = counts.get(cust, (0, 0.0))
            counts[cust] = (n + 1, total + amount)
            b = zlib.crc32(cust.encode()) % 4
            lane = expected.setdefault(str(b), [])
            lane.append(("insert", {"cid": b, "custId": cust, "n": n + 1,
                                    "total": total + amount}, 1000,
                         f"per_cust/{b}/{len(lane) + 1}"))
        assert len(expected) == 4
        assert _lanes(_rows(kapp, "per_cust")) == expected

        letters = dead_letters(kafka_bootstrap, config.dlq_topic)
        assert [json.loads(m.value()) for m in letters] == [
            {"custId": "alice", "amount": 1000.0}]
        bucket = zlib.crc32(b"alice") % 4
        assert headers_dict(letters[0].headers())["kepl.error"].decode() == (
            f"hash context 'H': this Txn event is in bucket "
            f"{bucket} but came to the engine partition of bucket {wrong}; a source topic "
            "read in place must put bucket b in partition b (record key = the hashed "
            "value, librdkafka's default partitioner, 4 partitions)")
        assert kapp.worker.alive()
    finally:
        kapp.close(graceful=False)
        kapp.delete_topics()


def _topics(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    return set(admin.list_topics(timeout=30).topics)


# -- keyed context -------------------------------------------------------------------

KEYED_STATEMENTS = [
    {"name": "ctx", "epl": "create context ByCust partition by custId from Txn, "
                           "userId from Login"},
    {"name": "win", "epl": "context ByCust select irstream context.key1 as k, count(*) as n, "
                           "sum(amount) as total from Txn#time(3 sec)"},
    {"name": "last", "epl": "context ByCust select custId, sum(amount) as total, "
                            "max(amount) as top from Txn#length(3) output last every 2 seconds"},
    {"name": "pat", "epl": "context ByCust select l.userId as u, t.amount as a "
                           "from pattern [every l=Login -> t=Txn]"},
]
KEYS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]


def _steps(seed: int = 11, epochs: int = 6, per_epoch: int = 12) -> list[Any]:
    """Sends (type, event, source partition) and clock moves (int ms)."""
    rnd = random.Random(seed)
    steps: list[Any] = [1000]
    for e in range(epochs):
        for _ in range(per_epoch):
            k = rnd.choice(KEYS)
            if rnd.random() < 0.25:
                steps.append(("Login", {"userId": k}, rnd.randrange(6)))
            else:
                steps.append(("Txn", {"custId": k, "amount": float(rnd.randint(1, 50))},
                              rnd.randrange(6)))
        steps.append(1000 + 1000 * (e + 1))
    steps.append(20_000)  # windows empty, last outputs flushed
    return steps


def _keyed_config(name: str, partitions: int) -> AppConfig:
    return AppConfig.from_dict({
        "app": name, "schemas": {"Txn": TXN, "Login": LOGIN},
        "topics": {"Txn": f"{name}.txn", "Login": f"{name}.login"},
        "partitions": 6,
        "context_partitions": {"ByCust": partitions},
        "statements": KEYED_STATEMENTS,
    })


def _wait_for_members(bootstrap: str, group: str, topic: str, members: int,
                      timeout_s: float = 45.0) -> None:
    """Until the consumer group is stable with ``members`` members, each assigned
    partitions of ``topic`` (so every process runs engine partitions)."""
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
        except Exception:  # noqa: BLE001 - the group does not exist yet
            desc = None
        if desc is not None and desc.state == ConsumerGroupState.STABLE:
            owners = [m for m in desc.members
                      if any(tp.topic == topic for tp in m.assignment.topic_partitions)]
            if len(desc.members) == members and len(owners) == members:
                return
        time.sleep(0.2)
    raise TimeoutError(f"consumer group {group} did not reach {members} members")


def _run_kafka(bootstrap: str, config: AppConfig, steps: list[Any], workers: int
               ) -> dict[str, dict[str, list[tuple]]]:
    """Run the steps with ``workers`` processes in one group: statement -> lanes."""
    kapp = KafkaApp(config, bootstrap)
    extra: list[WorkerProcess] = []
    tmp = Path(tempfile.mkdtemp(prefix=f"kepl-{config.app}-"))
    try:
        for i in range(1, workers):
            d = tmp / f"w{i}"
            d.mkdir()
            extra.append(WorkerProcess(config, bootstrap, d))
        kapp.worker.start()
        for w in extra:
            w.start()
        _wait_for_members(bootstrap, f"kepl.{config.app}",
                          config.repartition_topic("ByCust"), workers)
        for step in steps:
            if isinstance(step, int):
                kapp.advance(step)
            else:
                kapp.send(step[0], step[1], partition=step[2])
        kapp.settle()
        assert all(w.alive() for w in extra), [w.log_tail() for w in extra]
        k = config.context_partitions["ByCust"]
        owned = [{d.name for d in (w.data_dir / "ByCust").glob("*")}
                 for w in [kapp.worker, *extra]]
        assert set().union(*owned) == {str(p) for p in range(k)}
        assert sum(1 for o in owned if o) == workers  # every process ran engine partitions
        out = {}
        for s in [st.name for st in config.statements if st.name != "ctx"]:
            rows = _rows(kapp, s)
            # a key's rows come from the engine partition its records went to
            assert all(r.partition == zlib.crc32(r.context_partition.encode()) % k
                       for r in rows)
            out[s] = _lanes(rows)
        return out
    finally:
        for w in extra:
            w.kill()
        kapp.close(graceful=False)
        kapp.delete_topics()


def _run_embedded(config: AppConfig, steps: list[Any]) -> dict[str, dict[str, list]]:
    """The same steps in one Engine: statement -> key text -> (stream, row, time)."""
    catalog = Catalog.from_schemas(config.schemas)
    engine = Engine()
    for s in config.statements:
        engine.deploy(plan_statement(catalog, s.epl, s.name))
    out: dict[str, dict[str, list]] = {s.name: {} for s in config.statements
                                       if s.name != "ctx"}

    def listen(stmt: str, new: list, old: list, pid: Any) -> None:
        key = key_text(engine.contexts["ByCust"].manager.key(pid))
        lane = out[stmt].setdefault(key, [])
        lane += [("insert", r, engine.now_ms) for r in new]
        lane += [("remove", r, engine.now_ms) for r in old]

    engine.listeners.append(listen)
    for step in steps:
        if isinstance(step, int):
            engine.advance_time(step)
        else:
            engine.send(step[0], step[1])
    return out


def _plain(lanes: dict[str, dict[str, list[tuple]]]) -> dict[str, dict[str, list]]:
    """(stream, row as JSON gives it back, time) per statement and key; ids dropped."""
    return {s: {k: [(st, json.loads(json.dumps(r)), t) for st, r, t, *_ in lane]
                for k, lane in by.items()} for s, by in lanes.items()}


def test_keyed_context_four_partitions_matches_embedded(kafka_bootstrap: str) -> None:
    """K=4: each key's rows come from partition crc32(key) mod 4 and equal the embedded
    Engine's rows for that key; ids are statement/key/sequence."""
    steps = _steps(seed=5, epochs=4, per_epoch=10)
    config = _keyed_config(f"keyed4-{uuid.uuid4().hex[:8]}", 4)
    kafka = _run_kafka(kafka_bootstrap, config, steps, workers=1)
    embedded = _run_embedded(config, steps)
    assert all(embedded[s] for s in ("win", "last", "pat"))
    assert _plain(kafka) == _plain(embedded)
    txn_keys = {s[1]["custId"] for s in steps if not isinstance(s, int) and s[0] == "Txn"}
    assert set(kafka["win"]) == txn_keys
    for stmt, by_key in kafka.items():
        for key, lane in by_key.items():
            assert [i for *_, i in lane] == [f"{stmt}/{key}/{n}"
                                             for n in range(1, len(lane) + 1)]


def test_keyed_context_with_lifecycle_four_partitions_matches_embedded(
        kafka_bootstrap: str) -> None:
    """A keyed context whose key's partition ends on that key's Login and starts again on
    its next event: per key on 4 partitions, the rows equal the embedded Engine's."""
    steps = _steps(seed=7, epochs=4, per_epoch=12)
    name = f"keyedlc-{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({
        "app": name, "schemas": {"Txn": TXN, "Login": LOGIN},
        "topics": {"Txn": f"{name}.txn", "Login": f"{name}.login"},
        "partitions": 6, "context_partitions": {"ByCust": 4},
        "statements": [
            {"name": "ctx", "epl": "create context ByCust partition by custId from Txn as t, "
                                   "userId from Login terminated by Login"},
            {"name": "ended", "epl": "context ByCust select context.key1 as k, "
                                     "context.t.amount as first, count(*) as n, sum(amount) "
                                     "as total from Txn output last when terminated"},
            {"name": "each", "epl": "context ByCust select custId, count(*) as n from Txn"}]})
    kafka = _run_kafka(kafka_bootstrap, config, steps, workers=1)
    embedded = _run_embedded(config, steps)
    assert embedded["ended"] and embedded["each"]
    assert _plain(kafka) == _plain(embedded)


def test_keyed_rows_independent_of_worker_count(kafka_bootstrap: str) -> None:
    """6 source and 6 keyed partitions: 1 worker and 3 workers give the same rows."""
    steps = _steps()
    one = _run_kafka(kafka_bootstrap, _keyed_config(f"det1-{uuid.uuid4().hex[:8]}", 6),
                     steps, workers=1)
    three = _run_kafka(kafka_bootstrap, _keyed_config(f"det3-{uuid.uuid4().hex[:8]}", 6),
                       steps, workers=3)
    assert sum(len(lane) for by in one.values() for lane in by.values()) > 100
    assert three == one

"""A match_recognize statement named in ``context_partitions`` runs over several engine
partitions, each key's events in one of them: its rows are those of the embedded run
(the same rows; in the same order within a key), and a worker killed with SIGKILL while
patterns are half matched continues them from each partition's state."""

from __future__ import annotations

import threading
import time
import uuid
import zlib

import pytest
from confluent_kafka import KafkaException

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import RowReader
from app.runtime.kafka.runner import KafkaApp

pytestmark = pytest.mark.kafka

N_EVENTS = 20000
PARTITIONS = 3
SCHEMAS = {"T": {"id": "string", "k": "string", "v": "long"}}
EPL = ("select * from T#time(30 sec) match_recognize (partition by k measures A.k as k, "
       "A.id as a, count(B.id) as n, last(B.id) as bl, C.id as c pattern (A B+ C) "
       "define A as A.v > 14, B as B.v <= 14, C as C.v > 17)")


def event(i: int) -> dict:
    return {"id": f"e{i}", "k": f"k{(i * 7) % 13}", "v": (i * 31 + i // 7) % 21}


def embedded_rows() -> list[dict]:
    engine = Engine()
    rows: list[dict] = []
    engine.listeners.append(lambda s, new, old, p: rows.extend(new))
    engine.deploy(plan_statement(Catalog.from_schemas(SCHEMAS), EPL, "q"))
    for i in range(N_EVENTS):
        engine.send("T", event(i))
    return rows


def per_key(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["k"], []).append(r)
    return out


def test_rows_of_a_routed_match_recognize_survive_a_kill_9(kafka_bootstrap: str) -> None:
    expected = embedded_rows()
    assert len(expected) > 100
    name = f"mr-route-{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({"app": name, "schemas": SCHEMAS,
                                  "topics": {"T": f"{name}.t"},
                                  "context_partitions": {"q": PARTITIONS},
                                  "statements": [{"name": "q", "epl": EPL}]})
    kapp = KafkaApp(config, kafka_bootstrap)
    group = next(g for g in kapp.topology.groups.values() if "q" in g.statements)
    assert group.partitions == PARTITIONS and group.mr_keys is not None
    reader = RowReader(kafka_bootstrap, [config.output_topic("q")])
    counting = RowReader(kafka_bootstrap, [config.output_topic("q")])
    try:
        kapp.worker.start()
        kapp.settle(timeout_s=120)  # the worker runs and the new topics have leaders

        def stream() -> None:
            for i in range(N_EVENTS):
                kapp.send("T", event(i))
                if i % 100 == 99:
                    kapp.producer.flush(10)
                    time.sleep(0.02)
            kapp.producer.flush(10)

        producer = threading.Thread(target=stream)
        producer.start()
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 5:
            assert time.monotonic() < deadline, "the worker produced no output"
            try:
                seen += len(counting.read_available())
            except KafkaException:  # a new topic's leader not known to the client yet
                pass
            time.sleep(0.02)
        kapp.worker.kill()  # SIGKILL mid-stream, patterns half matched
        killed_at = len(counting.read_available()) + seen
        kapp.worker.start()
        producer.join()
        kapp.settle(timeout_s=120)
        rows = reader.read_available()
        assert killed_at < len(expected), "the kill came after the stream ended"
        assert reader.duplicates == 0
        # each key's rows come from the engine partition its key text hashes to
        for r in rows:
            k = r.row["k"]
            assert r.context_partition == str(zlib.crc32(k.encode()) % PARTITIONS)
        assert len({r.context_partition for r in rows}) == PARTITIONS
        # numbered per engine partition, none lost, none twice
        for p in range(PARTITIONS):
            mine = [r.id for r in rows if r.context_partition == str(p)]
            assert mine == [f"q/{p}/{i}" for i in range(1, len(mine) + 1)]
        assert per_key([r.row for r in rows]) == per_key(expected)
        assert len(rows) == len(expected)
    finally:
        counting.close()
        reader.close()
        kapp.close()

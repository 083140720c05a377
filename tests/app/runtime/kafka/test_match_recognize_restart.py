"""A worker killed with SIGKILL while match_recognize patterns are half matched, and
started again, continues them: the rows read back (deduplicated by ``kepl.id``) are those
of an uninterrupted embedded run, none lost, none twice."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import RowReader
from app.runtime.kafka.runner import KafkaApp

pytestmark = pytest.mark.kafka

N_EVENTS = 20000
SCHEMAS = {"T": {"id": "string", "k": "string", "v": "long"}}
EPL = ("select * from T match_recognize (partition by k measures A.id as a, "
       "count(B.id) as n, last(B.id) as bl, C.id as c pattern (A B+ C) "
       "define A as A.v > 14, B as B.v <= 14, C as C.v > 17)")


def event(i: int) -> dict:
    return {"id": f"e{i}", "k": f"k{(i * 7) % 11}", "v": (i * 37 + i // 5) % 21}


def embedded_rows() -> list[dict]:
    engine = Engine()
    rows: list[dict] = []
    engine.listeners.append(lambda s, new, old, p: rows.extend(new))
    engine.deploy(plan_statement(Catalog.from_schemas(SCHEMAS), EPL, "q"))
    for i in range(N_EVENTS):
        engine.send("T", event(i))
    return rows


def test_kill_9_with_half_matched_patterns(kafka_bootstrap: str) -> None:
    expected = embedded_rows()
    assert len(expected) > 100
    name = f"mr-restart-{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({"app": name, "schemas": SCHEMAS,
                                  "topics": {"T": f"{name}.t"},
                                  "statements": [{"name": "q", "epl": EPL}]})
    kapp = KafkaApp(config, kafka_bootstrap)
    reader = RowReader(kafka_bootstrap, [config.output_topic("q")])
    counting = RowReader(kafka_bootstrap, [config.output_topic("q")])
    try:
        kapp.worker.start()

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
            seen += len(counting.read_available())
            time.sleep(0.02)
        kapp.worker.kill()  # SIGKILL mid-stream
        killed_at = len(counting.read_available()) + seen
        kapp.worker.start()
        producer.join()
        kapp.settle(timeout_s=120)
        rows = reader.read_available()
        assert killed_at < len(expected), "the kill came after the stream ended"
        assert [r.id for r in rows] == [f"q/0/{i}" for i in range(1, len(expected) + 1)]
        assert [r.row for r in rows] == expected
        assert reader.duplicates == 0
    finally:
        counting.close()
        reader.close()
        kapp.close()

"""A join split by its join key on a real broker, 2 workers: the rows of one Engine.

``statement_partitions: {j: 4}`` routes the events of both streams by their own key
property (``Auction.seller``, ``Person.id``) to a 4-partition repartition topic; each
key's rows come from partition ``crc32(key text) mod 4`` and equal, with their ids and
times, the rows the embedded Engine numbers for that key.
"""

from __future__ import annotations

import random
import tempfile
import uuid
import zlib
from pathlib import Path
from typing import Any

import pytest

from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.runner import KafkaApp, WorkerProcess
from app.runtime.kafka.topology import Topology
from app.runtime.rows import RowNumbering
from tests.app.runtime.kafka.test_partitioning import _wait_for_members

pytestmark = pytest.mark.kafka

EPL = ("select irstream p.name as name, a.id as id, a.seller as seller, a.price as price "
       "from Auction(price > 5)#time(3 sec) as a, Person#unique(id) as p "
       "where a.seller = p.id")


def _config(name: str) -> AppConfig:
    return AppConfig.from_dict({
        "app": name,
        "schemas": {"Auction": {"id": "long", "seller": "long", "price": "double"},
                    "Person": {"id": "long", "name": "string"}},
        "topics": {"Auction": f"{name}.auction", "Person": f"{name}.person"},
        "partitions": 2, "statement_partitions": {"j": 4},
        "statements": [{"name": "j", "epl": EPL}]})


def _steps(seed: int = 5) -> list[Any]:
    """Clock moves (ms) and (type, event, source partition)."""
    rnd = random.Random(seed)
    steps: list[Any] = [1000]
    t, ids = 1000, 0
    for _ in range(10):
        for _ in range(rnd.randrange(3, 9)):
            key = rnd.randrange(8)
            if rnd.random() < 0.35:
                steps.append(("Person", {"id": key, "name": f"N{rnd.randrange(4)}"},
                              rnd.randrange(2)))
            else:
                ids += 1
                steps.append(("Auction", {"id": ids, "seller": key,
                                          "price": float(rnd.randrange(20))},
                              rnd.randrange(2)))
        t += rnd.choice([300, 800, 1000, 2600])
        steps.append(t)
    steps.append(t + 10_000)
    return steps


def _embedded(config: AppConfig, steps: list[Any]) -> dict[str, list[tuple]]:
    topology = Topology.plan(config)
    engine = Engine()
    for p in topology.plans:
        engine.deploy(p)
    numbering = RowNumbering(engine, topology)
    out: dict[str, list[tuple]] = {}

    def listen(stmt: str, new: list, old: list, pid: Any) -> None:
        for r in numbering.rows(stmt, new, old, pid):
            out.setdefault(r["context_partition"], []).append(
                (r["stream"], r["row"], r["time"], r["id"]))

    engine.listeners.append(listen)
    for step in steps:
        if isinstance(step, int):
            engine.advance_time(step)
        else:
            engine.send(step[0], step[1])
    return out


def test_split_join_two_workers_matches_embedded(kafka_bootstrap: str) -> None:
    config = _config(f"joinsplit-{uuid.uuid4().hex[:8]}")
    steps = _steps()
    expected = _embedded(config, steps)
    assert len(expected) > 3
    assert any(r[0] == "remove" for rows in expected.values() for r in rows)
    kapp = KafkaApp(config, kafka_bootstrap)
    tmp = Path(tempfile.mkdtemp(prefix=f"kepl-{config.app}-"))
    (tmp / "w1").mkdir()
    other = WorkerProcess(config, kafka_bootstrap, tmp / "w1")
    try:
        kapp.worker.start()
        other.start()
        _wait_for_members(kafka_bootstrap, f"kepl.{config.app}",
                          config.repartition_topic("j"), 2)
        for step in steps:
            if isinstance(step, int):
                kapp.advance(step)
            else:
                kapp.send(step[0], step[1], partition=step[2])
        kapp.settle()
        assert other.alive(), other.log_tail()
        owned = [{d.name for d in (w.data_dir / "j").glob("*")} for w in (kapp.worker, other)]
        assert all(owned) and set().union(*owned) == {"0", "1", "2", "3"}
        got: dict[str, list[tuple]] = {}
        for r in read_rows(kafka_bootstrap, config.output_topic("j")):
            assert r.partition == zlib.crc32(r.context_partition.encode()) % 4
            got.setdefault(r.context_partition, []).append((r.stream, r.row, r.time_ms, r.id))
        assert got == expected
    finally:
        other.kill()
        kapp.close(graceful=False)
        kapp.delete_topics()

"""A statement split by group key on a real broker, 2 workers: the rows of one Engine.

``statement_partitions: {s: 4}`` gives the statement a 4-partition repartition topic;
each group's rows come from partition ``crc32(group key) mod 4`` and equal, with their
ids and times, the rows the embedded Engine numbers for that group; the timed output of
every partition fires at the times one Engine's fires (the router's arming touch).
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

STATEMENTS = [
    {"name": "last", "epl": "select account, count(*) as cnt, sum(amount) as total "
                            "from W#time(3 sec) group by account output last every 1 sec"},
    {"name": "uniq", "epl": "select irstream account, sum(amount) as total "
                            "from W#unique(account) where amount > 5 group by account"},
]


def _config(name: str) -> AppConfig:
    return AppConfig.from_dict({
        "app": name, "schemas": {"W": {"account": "string", "amount": "double"}},
        "topics": {"W": f"{name}.w"}, "partitions": 3,
        "statement_partitions": {"last": 4, "uniq": 2}, "statements": STATEMENTS})


def _steps(seed: int = 3) -> list[Any]:
    """Clock moves (ms) and (event, source partition); the first event comes late, at
    1,700 ms, so the periodic output's phase is set by it."""
    rnd = random.Random(seed)
    steps: list[Any] = [1700]
    t = 1700
    for _ in range(8):
        for _ in range(rnd.randrange(3, 9)):
            steps.append(({"account": f"A{rnd.randrange(9)}",
                           "amount": float(rnd.randrange(20))}, rnd.randrange(3)))
        t += rnd.choice([300, 800, 1000, 2600])
        steps.append(t)
    steps.append(t + 10_000)
    return steps


def _embedded(config: AppConfig, steps: list[Any]) -> dict[str, dict[str, list[tuple]]]:
    topology = Topology.plan(config)
    engine = Engine()
    for p in topology.plans:
        engine.deploy(p)
    numbering = RowNumbering(engine, topology)
    out: dict[str, dict[str, list[tuple]]] = {s["name"]: {} for s in STATEMENTS}

    def listen(stmt: str, new: list, old: list, pid: Any) -> None:
        for r in numbering.rows(stmt, new, old, pid):
            out[stmt].setdefault(r["context_partition"], []).append(
                (r["stream"], r["row"], r["time"], r["id"]))

    engine.listeners.append(listen)
    for step in steps:
        if isinstance(step, int):
            engine.advance_time(step)
        else:
            engine.send("W", step[0])
    return out


def test_split_statement_two_workers_matches_embedded(kafka_bootstrap: str) -> None:
    config = _config(f"split-{uuid.uuid4().hex[:8]}")
    steps = _steps()
    expected = _embedded(config, steps)
    assert len(expected["last"]) > 3 and len(expected["uniq"]) > 3
    kapp = KafkaApp(config, kafka_bootstrap)
    tmp = Path(tempfile.mkdtemp(prefix=f"kepl-{config.app}-"))
    (tmp / "w1").mkdir()
    other = WorkerProcess(config, kafka_bootstrap, tmp / "w1")
    try:
        kapp.worker.start()
        other.start()
        _wait_for_members(kafka_bootstrap, f"kepl.{config.app}",
                          config.repartition_topic("last"), 2)
        for step in steps:
            if isinstance(step, int):
                kapp.advance(step)
            else:
                kapp.send("W", step[0], partition=step[1])
        kapp.settle()
        assert other.alive(), other.log_tail()
        owned = [{d.name for d in (w.data_dir / "last").glob("*")}
                 for w in (kapp.worker, other)]
        assert all(owned) and set().union(*owned) == {"0", "1", "2", "3"}
        for stmt, n in config.statement_partitions.items():
            got: dict[str, list[tuple]] = {}
            for r in read_rows(kafka_bootstrap, config.output_topic(stmt)):
                assert r.partition == zlib.crc32(r.context_partition.encode()) % n
                got.setdefault(r.context_partition, []).append(
                    (r.stream, r.row, r.time_ms, r.id))
            assert got == expected[stmt], stmt
    finally:
        other.kill()
        kapp.close(graceful=False)
        kapp.delete_topics()

"""A statement split by group key on a real broker, 2 workers: the rows of one Engine.

``statement_partitions: {s: 4}`` gives the statement a 4-partition repartition topic;
each group's rows come from partition ``crc32(group key) mod 4`` and equal, with their
ids and times, the rows the embedded Engine numbers for that group; the timed output of
every partition fires, and its ``#time_batch`` batches end, at the times one Engine's do
(the router's arming touch).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.topology import Topology
from tests.app.runtime.kafka.split_workers import two_worker_rows
from tests.app.runtime.split_rows import embedded_rows

pytestmark = pytest.mark.kafka

STATEMENTS = [
    {"name": "last", "epl": "select account, count(*) as cnt, sum(amount) as total "
                            "from W#time(3 sec) group by account output last every 1 sec"},
    {"name": "uniq", "epl": "select irstream account, sum(amount) as total "
                            "from W#unique(account) where amount > 5 group by account"},
    {"name": "top", "epl": "select irstream account, amount "
                           "from W#groupwin(account)#sort(2, amount desc)"},
    # every group's row at each firing, each partition posting the groups it holds
    {"name": "snap", "epl": "select account, count(*) as cnt from W#time(3 sec) "
                            "group by account output snapshot every 1 sec"},
    # batches on the grid of the statement's first arrival, in every partition
    {"name": "batch", "epl": "select account, count(*) as cnt from W#time_batch(1 sec) "
                             "group by account"},
]


def _config(name: str) -> AppConfig:
    return AppConfig.from_dict({
        "app": name, "schemas": {"W": {"account": "string", "amount": "double"}},
        "topics": {"W": f"{name}.w"}, "partitions": 3,
        "statement_partitions": {"last": 4, "uniq": 2, "top": 3, "snap": 3, "batch": 4},
        "statements": STATEMENTS})


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


def test_split_statement_two_workers_matches_embedded(kafka_bootstrap: str) -> None:
    config = _config(f"split-{uuid.uuid4().hex[:8]}")
    steps = _steps()
    expected = embedded_rows(Topology.plan(config), steps, lambda s: ("W", s[0]))
    assert all(len(expected[s]) > 3 for s in ("last", "uniq", "top", "snap", "batch"))
    got = two_worker_rows(kafka_bootstrap, config, steps, lambda s: ("W", s[0], s[1]))
    for stmt in config.statement_partitions:
        assert got[stmt] == expected[stmt], stmt

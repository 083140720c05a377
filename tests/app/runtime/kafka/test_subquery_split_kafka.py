"""Statements with correlated subqueries split by the correlated property on a real
broker, 2 workers: the rows of one Engine.

``statement_partitions: {big: 4, seen: 3}`` routes the outer stream's events by its key
property (``Payment.payer``) and each subquery stream's by its own (``Login.user``, and
``Payment.payer`` again for a subquery over the outer type) to the statement's
repartition topic; each key's rows come from partition ``crc32(key text) mod N`` and
equal, with their ids and times, the rows the embedded Engine numbers for that key.
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

BIG = ("select p.payer as payer, p.amount as amount, (select avg(q.amount) from "
       "Payment#time(3 sec) as q where q.payer = p.payer) as mean from Payment as p "
       "where p.amount > 15")
"""A payment beside its payer's mean over the last 3 s (the payment itself in it)."""

SEEN = ("select p.payer as payer, p.amount as amount from Payment as p where not exists "
        "(select * from Login#time(2 sec) as l where l.user = p.payer and l.ip = 'x')")
"""A payment without a login from ip x by the payer in the last 2 s."""


def _config(name: str) -> AppConfig:
    return AppConfig.from_dict({
        "app": name,
        "schemas": {"Login": {"user": "string", "ip": "string"},
                    "Payment": {"payer": "string", "amount": "double"}},
        "topics": {"Login": f"{name}.login", "Payment": f"{name}.payment"},
        "partitions": 2, "statement_partitions": {"big": 4, "seen": 3},
        "statements": [{"name": "big", "epl": BIG}, {"name": "seen", "epl": SEEN}]})


def _steps(seed: int = 11) -> list[Any]:
    """Clock moves (ms) and (type, event, source partition)."""
    rnd = random.Random(seed)
    steps: list[Any] = [1000]
    t = 1000
    for _ in range(12):
        for _ in range(rnd.randrange(3, 9)):
            user = f"U{rnd.randrange(7)}"
            if rnd.random() < 0.4:
                steps.append(("Login", {"user": user, "ip": rnd.choice(["x", "y"])},
                              rnd.randrange(2)))
            else:
                steps.append(("Payment", {"payer": user, "amount": float(rnd.randrange(30))},
                              rnd.randrange(2)))
        t += rnd.choice([300, 800, 1000, 2600])
        steps.append(t)
    steps.append(t + 10_000)
    return steps


def test_split_subqueries_two_workers_match_embedded(kafka_bootstrap: str) -> None:
    config = _config(f"subsplit-{uuid.uuid4().hex[:8]}")
    topology = Topology.plan(config)
    assert {topology.groups[s].split.kind for s in ("big", "seen")} == {"subquery"}
    steps = _steps()
    expected = embedded_rows(topology, steps, lambda s: (s[0], s[1]))
    assert len(expected["big"]) > 3 and len(expected["seen"]) > 3
    got = two_worker_rows(kafka_bootstrap, config, steps, lambda s: s)
    assert got == expected

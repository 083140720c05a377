"""A pattern split by its correlation key on a real broker, 2 workers: the rows of one
Engine.

``statement_partitions: {p: 4, t: 3}`` routes the events of each type in the pattern by
its own key property (``Login.user``, ``Payment.payer``) to the statement's repartition
topic; each key's rows come from partition ``crc32(key text) mod N`` and equal, with
their ids and times, the rows the embedded Engine numbers for that key (``t`` waits on
``timer:within``, which each partition's clock fires as one Engine's does).
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

FOLLOWED = ("select l.user as user, l.ip as ip, p.amount as amount from pattern "
            "[every l=Login -> every p=Payment(payer = l.user and amount > 10)]")

WITHIN = ("select l.user as user, p.amount as amount from pattern [every l=Login(ip = 'x') "
          "-> (p=Payment(payer = l.user) and not Login(user = l.user)) "
          "where timer:within(1500 msec)]")
"""A payment within 1.5 s of a login from ip x, no other login of the user between."""


def _config(name: str) -> AppConfig:
    return AppConfig.from_dict({
        "app": name,
        "schemas": {"Login": {"user": "string", "ip": "string"},
                    "Payment": {"payer": "string", "amount": "double"}},
        "topics": {"Login": f"{name}.login", "Payment": f"{name}.payment"},
        "partitions": 2, "statement_partitions": {"p": 4, "t": 3},
        "statements": [{"name": "p", "epl": FOLLOWED}, {"name": "t", "epl": WITHIN}]})


def _steps(seed: int = 7) -> list[Any]:
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


def test_split_pattern_two_workers_matches_embedded(kafka_bootstrap: str) -> None:
    config = _config(f"patsplit-{uuid.uuid4().hex[:8]}")
    topology = Topology.plan(config)
    assert {topology.groups[s].split.kind for s in ("p", "t")} == {"pattern"}
    steps = _steps()
    expected = embedded_rows(topology, steps, lambda s: (s[0], s[1]))
    assert len(expected["p"]) > 3 and len(expected["t"]) > 1
    got = two_worker_rows(kafka_bootstrap, config, steps, lambda s: s)
    assert got == expected

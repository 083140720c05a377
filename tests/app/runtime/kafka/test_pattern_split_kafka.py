"""A pattern split by its correlation key on a real broker, 2 workers: the rows of one
Engine.

``statement_partitions: {p: 4, t: 3}`` routes the events of each type in the pattern by
its own key property (``Login.user``, ``Payment.payer``) to the statement's repartition
topic; each key's rows come from partition ``crc32(key text) mod N`` and equal, with
their ids and times, the rows the embedded Engine numbers for that key (``t`` waits on
``timer:within``, which each partition's clock fires as one Engine's does).
"""

from __future__ import annotations

import uuid

import pytest

from app.runtime.kafka.topology import Topology
from tests.app.runtime.kafka.split_workers import (
    login_payment_app,
    login_payment_steps,
    two_worker_rows,
)
from tests.app.runtime.split_rows import embedded_rows

pytestmark = pytest.mark.kafka

FOLLOWED = ("select l.user as user, l.ip as ip, p.amount as amount from pattern "
            "[every l=Login -> every p=Payment(payer = l.user and amount > 10)]")

WITHIN = ("select l.user as user, p.amount as amount from pattern [every l=Login(ip = 'x') "
          "-> (p=Payment(payer = l.user) and not Login(user = l.user)) "
          "where timer:within(1500 msec)]")
"""A payment within 1.5 s of a login from ip x, no other login of the user between."""


def test_split_pattern_two_workers_matches_embedded(kafka_bootstrap: str) -> None:
    config = login_payment_app(f"patsplit-{uuid.uuid4().hex[:8]}",
                               {"p": (FOLLOWED, 4), "t": (WITHIN, 3)})
    topology = Topology.plan(config)
    assert {topology.groups[s].split.kind for s in ("p", "t")} == {"pattern"}
    steps = login_payment_steps(7)
    expected = embedded_rows(topology, steps, lambda s: (s[0], s[1]))
    assert len(expected["p"]) > 3 and len(expected["t"]) > 1
    got = two_worker_rows(kafka_bootstrap, config, steps, lambda s: s)
    assert got == expected

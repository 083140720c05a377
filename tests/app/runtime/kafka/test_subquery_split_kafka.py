"""Statements with correlated subqueries split by the correlated property on a real
broker, 2 workers: the rows of one Engine.

``statement_partitions: {big: 4, seen: 3}`` routes the outer stream's events by its key
property (``Payment.payer``) and each subquery stream's by its own (``Login.user``, and
``Payment.payer`` again for a subquery over the outer type) to the statement's
repartition topic; each key's rows come from partition ``crc32(key text) mod N`` and
equal, with their ids and times, the rows the embedded Engine numbers for that key.
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

BIG = ("select p.payer as payer, p.amount as amount, (select avg(q.amount) from "
       "Payment#time(3 sec) as q where q.payer = p.payer) as mean from Payment as p "
       "where p.amount > 15")
"""A payment beside its payer's mean over the last 3 s (the payment itself in it)."""

SEEN = ("select p.payer as payer, p.amount as amount from Payment as p where not exists "
        "(select * from Login#time(2 sec) as l where l.user = p.payer and l.ip = 'x')")
"""A payment without a login from ip x by the payer in the last 2 s."""

PER = ("select p.payer as payer, count(*) as n, sum(p.amount) as total "
       "from Payment#time(3 sec) as p where exists (select * from Login#time(2 sec) as l "
       "where l.user = p.payer) group by p.payer")
"""Per payer, the payments of the last 3 s made within 2 s of a login: grouped by the key
the subquery correlates on, so split by that group key."""

LAST = ("select p.payer as payer, count(*) as n, (select count(*) from Login#time(2 sec) as l "
        "where l.user = p.payer) as logins from Payment(amount > 5)#time(3 sec) as p "
        "group by p.payer output last every 700 msec")
"""Per payer every 0.7 s, the payments of the last 3 s and the logins of the last 2 s:
its output is armed by the first payment over 5, in every partition at once."""


def test_split_subqueries_two_workers_match_embedded(kafka_bootstrap: str) -> None:
    config = login_payment_app(f"subsplit-{uuid.uuid4().hex[:8]}",
                               {"big": (BIG, 4), "seen": (SEEN, 3), "per": (PER, 2),
                                "last": (LAST, 3)})
    topology = Topology.plan(config)
    assert {topology.groups[s].split.kind for s in ("big", "seen")} == {"subquery"}
    assert {topology.groups[s].split.kind for s in ("per", "last")} == {"group"}
    assert topology.groups["last"].arms
    steps = login_payment_steps(11)
    expected = embedded_rows(topology, steps, lambda s: (s[0], s[1]))
    assert all(len(expected[s]) > 3 for s in ("big", "seen", "per", "last"))
    got = two_worker_rows(kafka_bootstrap, config, steps, lambda s: s)
    assert got == expected

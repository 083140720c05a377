"""A join split by its join key on a real broker, 2 workers: the rows of one Engine.

``statement_partitions: {j: 4, g: 2, b: 3}`` routes the events of both streams by their own
key property (``Auction.seller``, ``Person.id``) to each statement's repartition topic;
each key's rows come from partition ``crc32(key text) mod N`` and equal, with their ids
and times, the rows the embedded Engine numbers for that key (``g`` aggregates per key;
``b`` joins two ``#time_batch`` windows, armed by the router's touches; ``o`` is a left
outer join, its rows without a partner numbered by the preserved side's key).
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

EPL = ("select irstream p.name as name, a.id as id, a.seller as seller, a.price as price "
       "from Auction(price > 5)#time(3 sec) as a, Person#unique(id) as p "
       "where a.seller = p.id")

GROUPED = ("select a.seller as seller, count(*) as n, sum(a.price) as total "
           "from Auction#time(3 sec) as a, Person#unique(id) as p where a.seller = p.id "
           "group by a.seller")

BATCHES = ("select p.id as id, p.name as name, a.price as price "
           "from Person#time_batch(1 sec) as p, Auction#time_batch(1 sec) as a "
           "where p.id = a.seller")
"""New users (Nexmark q8): each stream's batches on the grid of its first arrival."""

OUTER = ("select irstream a.seller as seller, a.price as price, p.name as name "
         "from Auction#time(2 sec) as a left outer join Person#time(3 sec) as p "
         "on a.seller = p.id")
"""Each auction with its seller's recent profiles, or alone (numbered by a.seller)."""


def _config(name: str) -> AppConfig:
    return AppConfig.from_dict({
        "app": name,
        "schemas": {"Auction": {"id": "long", "seller": "long", "price": "double"},
                    "Person": {"id": "long", "name": "string"}},
        "topics": {"Auction": f"{name}.auction", "Person": f"{name}.person"},
        "partitions": 2, "statement_partitions": {"j": 4, "g": 2, "b": 3, "o": 3},
        "statements": [{"name": "j", "epl": EPL}, {"name": "g", "epl": GROUPED},
                       {"name": "b", "epl": BATCHES}, {"name": "o", "epl": OUTER}]})


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


def test_split_join_two_workers_matches_embedded(kafka_bootstrap: str) -> None:
    config = _config(f"joinsplit-{uuid.uuid4().hex[:8]}")
    steps = _steps()
    expected = embedded_rows(Topology.plan(config), steps, lambda s: (s[0], s[1]))
    assert all(len(expected[s]) > 3 for s in ("j", "g", "b", "o"))
    assert any(r[1].get("name") is None for rows in expected["o"].values() for r in rows)
    assert any(r[0] == "remove" for rows in expected["j"].values() for r in rows)
    got = two_worker_rows(kafka_bootstrap, config, steps, lambda s: s)
    assert got == expected

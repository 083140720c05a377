"""A split statement with the statement feeding it its ``insert into`` stream, on a real
broker with 2 workers: closed auctions joined with their bids (Nexmark q9), both
statements split by the auction, give the rows, ids and times of one Engine."""

from __future__ import annotations

import random
import uuid

import pytest

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.topology import Topology
from tests.app.runtime.kafka.split_workers import two_worker_rows
from tests.app.runtime.split_rows import embedded_rows
from tests.app.runtime.test_feed_split import CHAINS, SCHEMAS, _steps

pytestmark = pytest.mark.kafka


def test_a_fed_split_two_workers_matches_embedded(kafka_bootstrap: str) -> None:
    name = f"feedsplit-{uuid.uuid4().hex[:8]}"
    feed, read = CHAINS["winning"]
    config = AppConfig.from_dict({
        "app": name, "schemas": SCHEMAS, "partitions": 2,
        "topics": {"Auction": f"{name}.auction", "Bid": f"{name}.bid"},
        "statement_partitions": {"read": 4, "feed": 4},
        "statements": [{"name": "feed", "epl": feed}, {"name": "read", "epl": read}]})
    steps = _steps(seed=7, count=160)
    rnd = random.Random(7)
    sources = {i: rnd.randrange(2) for i in range(len(steps))}
    indexed = [s if isinstance(s, int) else (i, s) for i, s in enumerate(steps)]
    expected = embedded_rows(Topology.plan(config), indexed, lambda s: s[1])
    assert sum(map(len, expected["read"].values())) > 5
    assert sum(map(len, expected["feed"].values())) > 5
    got = two_worker_rows(kafka_bootstrap, config, indexed,
                          lambda s: (*s[1], sources[s[0]]))
    assert got == {"read": expected["read"], "feed": expected["feed"]}



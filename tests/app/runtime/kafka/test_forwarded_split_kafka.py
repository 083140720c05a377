"""A split statement reading another group's ``insert into`` stream through its
repartition topic, on a real broker with 2 workers: every split statement's committed
rows, ids and times are those of one Engine (the chains of ``test_forwarded_split``)."""

from __future__ import annotations

import uuid

import pytest

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.topology import Topology
from tests.app.runtime.kafka.split_workers import two_worker_rows
from tests.app.runtime.kafka.test_forwarded_split import CHAINS, READER, SCHEMAS, SPLITS, workload
from tests.app.runtime.split_rows import embedded_rows

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("chain", ["windowed", "ties", "two_hops", "output_last",
                                   "two_readers", "main"])
def test_forwarded_rows_two_workers_match_embedded(kafka_bootstrap: str, chain: str) -> None:
    name = f"fwd-{chain}-{uuid.uuid4().hex[:8]}"
    # the reader first: ``two_worker_rows`` checks that the workers share its partitions
    splits = {READER[chain]: SPLITS[chain][READER[chain]], **SPLITS[chain]}
    config = AppConfig.from_dict({
        "app": name, "schemas": SCHEMAS, "partitions": 2,
        "topics": {"Auction": f"{name}.auction", "Bid": f"{name}.bid"},
        "statement_partitions": splits,
        "statements": [{"name": n, "epl": e} for n, e in CHAINS[chain]]})
    steps = workload(seed=11, count=150)
    expected = embedded_rows(Topology.plan(config), steps, lambda s: (s[1], s[2]))
    assert sum(map(len, expected[READER[chain]].values())) > 10
    got = two_worker_rows(kafka_bootstrap, config, steps, lambda s: (s[1], s[2], s[0]))
    assert got == {s: expected[s] for s in splits}

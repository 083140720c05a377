"""Nexmark on Kafka gives the embedded rows: q4 (insert-into chain, subquery, time windows,
group by), 2 exactly-once workers, the committed rows read raw (``read_committed``)."""

from __future__ import annotations

import pytest

from tests.bench.nexmark.generator import generate
from tests.bench.nexmark.kafka import config, embedded_rows, kafka_rows, run_query
from tests.bench.nexmark.queries import QUERIES

pytestmark = pytest.mark.kafka


def test_config_splits_each_statement_by_its_own_key() -> None:
    q4 = dict((q, stmts) for q, _, stmts in QUERIES)["q4"]
    # s0 and s1 by auction id; s2 by category, reading s1's insert into through its
    # repartition topic
    assert config("q4", q4).statement_partitions == {"s0": 4, "s1": 4, "s2": 4}
    assert config("q5x", ("select auction, count(*) as n from Bid#time(10 sec) "
                          "group by auction",)).statement_partitions == {"s0": 4}


def test_q4_two_workers_commit_the_embedded_rows(kafka_bootstrap: str) -> None:
    q4 = dict((q, stmts) for q, _, stmts in QUERIES)["q4"]
    stream = list(generate(1_000))
    cfg = config("q4", q4)
    want = embedded_rows(cfg, stream)
    assert sum(want.values()) == 176
    run = run_query(kafka_bootstrap, cfg, 2, stream)
    try:
        got = kafka_rows(run)
    finally:
        run.close()
    assert got == want

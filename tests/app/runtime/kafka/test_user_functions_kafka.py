"""User functions on Kafka: the scenarios that declare them pass, and an event on which
a function raises (in a lane, in an engine partition, as a hash context's hash function)
goes to the dead-letter topic once while the worker goes on; no statement takes it, so no
aggregate counts it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.conformance.runner import run_file
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.router import headers_dict
from app.runtime.kafka.runner import KafkaApp, run_scenario_kafka
from tests.app.runtime.kafka.test_dlq import dead_letters

pytestmark = pytest.mark.kafka

OWN = Path(__file__).resolve().parents[4] / "tests" / "scenarios"
CASES = [OWN / "context_hash_user_function.yaml", OWN / "udf_single_row_and_aggregation.yaml",
         OWN / "udf_expiry_expressions.yaml", OWN / "math_static_methods.yaml"]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_user_function_scenario_in_kafka_mode(path: Path, kafka_bootstrap: str) -> None:
    outcome = run_file(path, lambda doc: run_scenario_kafka(doc, kafka_bootstrap))
    assert outcome.passed, outcome.detail


@pytest.fixture(scope="module")
def app(kafka_bootstrap: str) -> Iterator[KafkaApp]:
    name = f"udf-{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({
        "app": name,
        "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "functions": {
            "checked": {"import": "raising_functions:checked", "params": ["double"],
                        "returns": "double"},
            "bucket": {"import": "raising_functions:bucket", "params": ["string"],
                       "returns": "int"},
            "capped": {"import": "raising_functions:capped", "params": ["double"],
                       "returns": "double"}},
        "statements": [
            {"name": "lane", "epl": "select account, checked(amount) as a from Withdrawal"},
            {"name": "agg", "epl": "select count(*) as cnt, sum(capped(amount)) as total "
                                   "from Withdrawal"},
            {"name": "ctx", "epl": "create context H coalesce by bucket(account) "
                                   "from Withdrawal granularity 2"},
            {"name": "per_bucket", "epl": "context H select account, count(*) as n "
                                          "from Withdrawal"}],
    }, Path(__file__).parent)
    assert AppConfig.from_dict(config.to_dict()) == config  # what the worker reads
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    kapp.send("Withdrawal", {"account": "A1", "amount": 10})  # offset 0
    kapp.settle()  # a first commit (offset 1 is its watermark)
    kapp.send("Withdrawal", {"account": "A2", "amount": -5})  # offset 2: checked raises
    kapp.send("Withdrawal", {"account": "BAD", "amount": 3})  # offset 3: bucket raises
    kapp.send("Withdrawal", {"account": "A4", "amount": 500})  # offset 4: capped raises
    kapp.send("Withdrawal", {"account": "A3", "amount": 7})  # offset 5
    kapp.settle()
    yield kapp
    kapp.close()


def test_a_raising_function_dead_letters_the_event(app: KafkaApp) -> None:
    src = app.config.topic_of("Withdrawal")
    got = sorted((headers_dict(m.headers())["kepl.source"].decode(),
                  headers_dict(m.headers())["kepl.error"].decode())
                 for m in dead_letters(app.bootstrap, app.config.dlq_topic))
    assert got == [
        (f"{src}/0/2", "engine error: UserFunctionError: function checked raised "
                       "ValueError: negative amount"),  # in the lane
        (f"{src}/0/3", "function bucket raised KeyError: 'BAD'"),  # routing to context H
        (f"{src}/0/4", "engine error: UserFunctionError: function capped raised "
                       "ValueError: too large"),  # in the engine partition of 'agg'
    ]


def test_the_worker_goes_on_and_no_aggregate_counts_the_event(app: KafkaApp) -> None:
    def rows(stmt: str) -> list[dict]:
        return [r.row for r in read_rows(app.bootstrap, app.config.output_topic(stmt))]

    assert rows("lane") == [{"account": "A1", "a": 10.0}, {"account": "A3", "a": 7.0}]
    assert rows("agg") == [{"cnt": 1, "total": 10.0}, {"cnt": 2, "total": 17.0}]
    assert rows("per_bucket") == [{"account": "A1", "n": 1}, {"account": "A3", "n": 2}]
    assert app.worker.alive()


def test_a_failure_before_the_first_commit(kafka_bootstrap: str) -> None:
    """The worker rewinds to the start of its inputs when nothing is committed yet: the
    events around the failing one are not lost."""
    name = f"udf-{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({
        "app": name,
        "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "functions": {"capped": {"import": "raising_functions:capped", "params": ["double"],
                                 "returns": "double"}},
        "statements": [{"name": "agg", "epl": "select count(*) as cnt, "
                                              "sum(capped(amount)) as total from Withdrawal"}],
    }, Path(__file__).parent)
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    try:
        kapp.send("Withdrawal", {"account": "A1", "amount": 10})
        kapp.send("Withdrawal", {"account": "A4", "amount": 500})
        kapp.send("Withdrawal", {"account": "A3", "amount": 7})
        kapp.settle()
        rows = [r.row for r in read_rows(kafka_bootstrap, config.output_topic("agg"))]
        assert rows == [{"cnt": 1, "total": 10.0}, {"cnt": 2, "total": 17.0}]
        got = [headers_dict(m.headers())["kepl.source"].decode()
               for m in dead_letters(kafka_bootstrap, config.dlq_topic)]
        assert got == [f"{config.topic_of('Withdrawal')}/0/1"]
    finally:
        kapp.close()

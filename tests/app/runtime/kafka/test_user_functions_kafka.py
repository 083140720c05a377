"""User functions on Kafka: the scenarios that declare them pass, and an event on which
a function raises goes to the dead-letter topic while the worker goes on, no aggregate
counting it (lane, engine partition and hash-context routing)."""

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
                       "returns": "int"}},
        "statements": [
            {"name": "lane", "epl": "select account, checked(amount) as a from Withdrawal"},
            {"name": "agg", "epl": "select count(*) as cnt, sum(checked(amount)) as total "
                                   "from Withdrawal"},
            {"name": "ctx", "epl": "create context H coalesce by bucket(account) "
                                   "from Withdrawal granularity 2"},
            {"name": "per_bucket", "epl": "context H select account, count(*) as n "
                                          "from Withdrawal"}],
    }, Path(__file__).parent)
    assert AppConfig.from_dict(config.to_dict()) == config  # what the worker reads
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    kapp.send("Withdrawal", {"account": "A1", "amount": 10})  # offset 0
    kapp.send("Withdrawal", {"account": "A2", "amount": -5})  # offset 1: checked raises
    kapp.send("Withdrawal", {"account": "BAD", "amount": 3})  # offset 2: bucket raises
    kapp.send("Withdrawal", {"account": "A3", "amount": 7})  # offset 3
    kapp.settle()
    yield kapp
    kapp.close()


def test_a_raising_function_dead_letters_the_event(app: KafkaApp) -> None:
    src = app.config.topic_of("Withdrawal")
    got = sorted((headers_dict(m.headers())["kepl.source"].decode(),
                  headers_dict(m.headers())["kepl.error"].decode())
                 for m in dead_letters(app.bootstrap, app.config.dlq_topic))
    checked = "engine error: UserFunctionError: function checked raised ValueError: " \
              "negative amount"
    assert got == [
        (f"{src}/0/1", checked),  # the lane
        (f"{src}/0/1", checked),  # the engine partition of 'agg'
        (f"{src}/0/2", "routing error: UserFunctionError: function bucket raised "
                       "KeyError: 'BAD'"),
    ]


def test_the_worker_goes_on_and_no_aggregate_counts_the_event(app: KafkaApp) -> None:
    def rows(stmt: str) -> list[dict]:
        return [r.row for r in read_rows(app.bootstrap, app.config.output_topic(stmt))]

    assert rows("lane") == [{"account": "A1", "a": 10.0}, {"account": "BAD", "a": 3.0},
                            {"account": "A3", "a": 7.0}]
    assert rows("agg") == [{"cnt": 1, "total": 10.0}, {"cnt": 2, "total": 13.0},
                           {"cnt": 3, "total": 20.0}]
    assert rows("per_bucket") == [{"account": "A1", "n": 1}, {"account": "A2", "n": 2},
                                  {"account": "A3", "n": 3}]
    assert app.worker.alive()

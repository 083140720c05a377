"""The continuous Spark job against a real kepl worker: rows land in Parquet exactly once.

A worker runs a filter statement. The stream job starts first (processing-time
trigger), the worker's rows arrive and land in Parquet; the job stops. More events go
through the worker and one published row is written again to the output topic with
its ``kepl.id`` (a crashed worker's repeat). The job restarts from its checkpoint, as
``kepl spark stream FILE --once``: only the new rows are added, the repeat is dropped,
and a third run with nothing new adds nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, Producer
from pyspark.sql import SparkSession

from app.analytics import cli
from app.analytics.jobs import stream
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.runner import KafkaApp

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

FIRST = [("A1", 100.0), ("A2", 250.0), ("A3", 300.0)]
SECOND = [("A1", 500.0), ("A2", 50.0), ("A3", 700.0)]
# Rows of statement "big" (amount >= 200), ids statement/context partition/sequence.
EXPECTED_FIRST = [
    ("big/0/1", {"account": "A2", "amount": 250.0}),
    ("big/0/2", {"account": "A3", "amount": 300.0}),
]
EXPECTED_ALL = [
    *EXPECTED_FIRST,
    ("big/0/3", {"account": "A1", "amount": 500.0}),
    ("big/0/4", {"account": "A3", "amount": 700.0}),
]


@pytest.fixture(scope="module")
def app_file(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A statement file of a fresh app with one filter statement."""
    name = f"spark-stream-{uuid.uuid4().hex[:8]}"
    doc = {
        "app": name,
        "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "statements": [{"name": "big", "epl": "select * from Withdrawal(amount >= 200)"}],
    }
    path = tmp_path_factory.mktemp("stream") / "app.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def worker(kafka_bootstrap: str, app_file: Path) -> Iterator[KafkaApp]:
    """A running worker of the app."""
    kapp = KafkaApp(AppConfig.from_file(app_file), kafka_bootstrap, start=True)
    kapp.advance(1000)
    yield kapp
    kapp.close()


def send(kapp: KafkaApp, events: list[tuple[str, float]], t_ms: int) -> None:
    """Events through the worker, then wait until it published their rows."""
    for account, amount in events:
        kapp.send("Withdrawal", {"account": account, "amount": amount})
    kapp.advance(t_ms)
    kapp.settle()


def parquet_rows(spark: SparkSession, path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(row id, row) of every Parquet row, in id order (repeats would show twice)."""
    rows = spark.read.parquet(str(path)).select("statement", "stream", "row_id", "value_json")
    assert {(r.statement, r.stream) for r in rows.collect()} <= {("big", "insert")}
    return sorted((r.row_id, json.loads(r.value_json)) for r in rows.collect())


def repeat_first_record(bootstrap: str, topic: str) -> str:
    """Publish the topic's first committed record again (key, value, headers, timestamp)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        msg = None
        while msg is None or msg.error():
            msg = consumer.poll(10)
    finally:
        consumer.close()
    headers = dict(msg.headers() or [])
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, msg.value(), msg.key(), headers=msg.headers(),
                     timestamp=msg.timestamp()[1])
    assert producer.flush(10) == 0
    return headers["kepl.id"].decode()


def test_stream_restarts_from_its_checkpoint_without_repeats(
    spark: SparkSession, worker: KafkaApp, app_file: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bootstrap = worker.bootstrap
    topic = worker.config.output_topic("big")
    assert cli.stream_topics([str(app_file)]) == [topic]
    out, ckpt = tmp_path / "rows", tmp_path / "checkpoint"

    # 1. continuous: the job runs before the rows exist and picks them up as they come
    query = stream(spark, bootstrap, [topic], sink="parquet", path=str(out),
                   checkpoint=str(ckpt), interval="1 second")
    try:
        send(worker, FIRST, 2000)
        query.processAllAvailable()
    finally:
        query.stop()
    assert parquet_rows(spark, out) == EXPECTED_FIRST

    # 2. while it is stopped: more rows, and a repeat of a row it already wrote
    send(worker, SECOND, 3000)
    assert repeat_first_record(bootstrap, topic) == "big/0/1"

    # 3. restarted from the checkpoint through the CLI: the new rows once, no repeat
    argv = ["stream", str(app_file), "--bootstrap", bootstrap, "--sink", "parquet",
            "--path", str(out), "--checkpoint", str(ckpt), "--once"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sink"] == "parquet" and report["input_rows"] == 3  # 2 new + the repeat
    assert parquet_rows(spark, out) == EXPECTED_ALL

    # 4. once more with nothing new: nothing is read, nothing is added
    assert cli.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["input_rows"] == 0
    assert parquet_rows(spark, out) == EXPECTED_ALL


@pytest.mark.parametrize(("argv", "message"), [
    (["stream", "t", "--path", "p"], "the parquet sink needs --path and --checkpoint"),
    (["stream", "--path", "p", "--checkpoint", "c"],
     "stream needs statement files or topics, or --app (not both)"),
    (["stream", "t", "--app", "a", "--sink", "console"],
     "stream needs statement files or topics, or --app (not both)"),
])
def test_stream_arguments_are_checked_before_spark_starts(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"kepl spark: error: {message}"


def test_security_settings_reach_the_kafka_source(tmp_path: Path) -> None:
    """A statement file's kafka: section, under a --kafka-config file, as kafka.* options."""
    from app.analytics.jobs import kafka_source_options
    from app.runtime.kafka import client

    statements = tmp_path / "app.yaml"
    statements.write_text(yaml.safe_dump({
        "app": "sec", "schemas": {"T": {"x": "long"}}, "topics": {"T": "sec.t"},
        "kafka": {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                  "sasl.username": "kepl", "sasl.password": "from-file-section"},
        "statements": [{"name": "s", "epl": "select * from T"}],
    }))
    properties = tmp_path / "kafka.properties"
    properties.write_text("sasl.password=from-properties\nssl.ca.location=/etc/ca.pem\n")
    try:
        assert cli.stream_topics([str(statements)], str(properties)) == ["kepl.sec.out.s"]
        options = kafka_source_options("b:9093", ["kepl.sec.out.s"])
    finally:
        client.configure()
    assert {k: v for k, v in options.items() if k.startswith("kafka.")} == {
        "kafka.bootstrap.servers": "b:9093",
        "kafka.isolation.level": "read_committed",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        # the Java client has no ssl.ca.location: the CA file as a PEM trust store
        "kafka.ssl.truststore.location": "/etc/ca.pem",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                  'required username="kepl" password="from-properties";',
    }

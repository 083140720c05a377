"""The Spark jobs read Avro output topics (spark-avro through Ivy, the subject's schema
from the real registry) as they read JSON ones: the same rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from app.analytics.jobs import output_topic_pattern, read_output
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.runner import KafkaApp

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture(scope="module")
def app(kafka_bootstrap: str, schema_registry: str) -> Iterator[KafkaApp]:
    name = f"sparkavro{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({
        "app": name,
        "registry": schema_registry,
        "schemas": {"W": {"account": "string", "amount": "double"}},
        "topics": {"W": f"{name}.w"},
        "formats": {"big_avro": {"format": "avro", "schema": "W"}},
        "statements": [
            {"name": "big_avro", "epl": "select * from W(amount >= 100)"},
            {"name": "big_json", "epl": "select * from W(amount >= 100)"},
        ],
    })
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    for account, amount in (("A", 150.0), ("B", 5.0), ("C", 1e6)):
        kapp.send("W", {"account": account, "amount": amount})
    kapp.settle()
    yield kapp
    kapp.close()


def test_avro_output_reads_as_the_json_output(spark: SparkSession, app: KafkaApp,
                                              schema_registry: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEPL_REGISTRY_URL", schema_registry)
    df = read_output(spark, app.bootstrap, pattern=output_topic_pattern(app.config.app))
    got = sorted((r.statement, r.row_id.split("/", 1)[1], r.stream, tuple(sorted(
        r.value.items()))) for r in df.collect())
    avro = [g[2:] for g in got if g[0] == "big_avro"]
    assert avro == [g[2:] for g in got if g[0] == "big_json"]
    assert avro == [
        ("insert", (("account", "A"), ("amount", "150.0"))),
        ("insert", (("account", "C"), ("amount", "1000000.0")))]

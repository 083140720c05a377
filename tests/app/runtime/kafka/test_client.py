"""Kafka client settings: statement file, properties file, environment, references."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.runtime.kafka import client
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.topology import REPLICATION, Topology


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for k in [k for k in __import__("os").environ if k.startswith(client.ENV_PREFIX)]:
        monkeypatch.delenv(k)
    client.configure(None)
    yield
    client.configure(None)


def test_later_sources_win_and_references_resolve(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-a-file\n")
    props = tmp_path / "client.properties"
    props.write_text("# cluster\nsecurity.protocol = SASL_SSL\nsasl.password=file:"
                     f"{secret}\nclient.id=from-file\n")
    monkeypatch.setenv("KEPL_KAFKA_CLIENT_ID", "from-env")
    monkeypatch.setenv("MY_USER", "alice")
    client.configure({"security.protocol": "PLAINTEXT", "sasl.username": "${MY_USER}",
                      "enable.ssl.certificate.verification": False}, props)
    assert client.conf({"bootstrap.servers": "b:9092", "client.id": "own"}) == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.username": "alice",
        "sasl.password": "from-a-file",
        "enable.ssl.certificate.verification": "false",
        "client.id": "from-env",
    }
    assert client.redacted(client.settings())["sasl.password"] == "****"
    assert client.redacted(client.settings())["sasl.username"] == "alice"


def test_a_consumer_fetches_again_soon_after_its_queue_was_full(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # librdkafka's default is a second: a worker's repartition partitions waited it out
    base = {"bootstrap.servers": "b:9092", "group.id": "g"}
    assert client.consumer_conf(base) == {**base, "fetch.queue.backoff.ms": 10}
    assert client.consumer_conf({**base, "fetch.queue.backoff.ms": 50}) == {
        **base, "fetch.queue.backoff.ms": 50}
    assert "fetch.queue.backoff.ms" not in client.conf(base)  # producers have no such setting
    monkeypatch.setenv("KEPL_KAFKA_FETCH_QUEUE_BACKOFF_MS", "1000")
    assert client.consumer_conf(base)["fetch.queue.backoff.ms"] == "1000"


def test_bad_settings_are_one_line(tmp_path: Path) -> None:
    client.configure({"sasl.password": "${NOT_SET_ANYWHERE}"})
    with pytest.raises(client.ClientConfigError) as e:
        client.settings()
    assert str(e.value) == ("Kafka client setting sasl.password: environment variable "
                            "NOT_SET_ANYWHERE is not set")
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol SSL\n")
    with pytest.raises(client.ClientConfigError) as e:
        client.configure(None, bad)
    assert str(e.value) == f"{bad}:1: expected key=value, got 'security.protocol SSL'"


def test_spark_options_carry_the_credentials_as_jaas() -> None:
    client.configure({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                      "sasl.username": "kepl", "sasl.password": "pw"})
    assert client.spark_options() == {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                  'required username="kepl" password="pw";',
    }


def test_spark_options_read_the_ca_as_a_pem_trust_store() -> None:
    client.configure({"security.protocol": "SSL", "ssl.ca.location": "/etc/kepl/ca.pem"})
    assert client.spark_options() == {
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/kepl/ca.pem",
    }
    client.configure(None)


def test_a_java_trust_store_goes_to_spark_only() -> None:
    """A JKS trust store for the Spark jobs' Java client: librdkafka clients keep the PEM
    CA and never see the Java-only settings."""
    client.configure({"security.protocol": "SASL_SSL", "ssl.ca.location": "/etc/kepl/ca.pem",
                      "ssl.truststore.location": "/etc/kepl/trust.jks",
                      "ssl.truststore.password": "pw", "sasl.mechanisms": "SCRAM-SHA-256",
                      "sasl.jaas.config": "custom;"})
    try:
        assert client.spark_options() == {
            "kafka.security.protocol": "SASL_SSL",
            "kafka.ssl.truststore.location": "/etc/kepl/trust.jks",
            "kafka.ssl.truststore.password": "pw",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": "custom;",
        }
        assert client.conf({"bootstrap.servers": "b:9093"}) == {
            "bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL",
            "ssl.ca.location": "/etc/kepl/ca.pem", "sasl.mechanisms": "SCRAM-SHA-256"}
    finally:
        client.configure(None)


def test_replication_and_min_isr_reach_every_topic_kepl_creates() -> None:
    config = AppConfig.from_dict({
        "app": "t", "replication_factor": 3, "min_insync_replicas": 2,
        "kafka": {"security.protocol": "SSL"},
        "schemas": {"T": {"k": "string"}},
        "statements": [{"name": "s", "epl": "select count(*) as n from T"}],
    })
    assert AppConfig.from_dict(config.to_dict()) == config
    specs = Topology.plan(config).topic_specs()
    assert {t: cfg[REPLICATION] for t, (_, cfg) in specs.items()} == {
        t: "3" for t in specs}
    internal = {t for t in specs if t.startswith("kepl.t.") and ".out." not in t
                and not t.endswith(".dlq")}
    assert internal == {"kepl.t.changelog.main", "kepl.t.watermarks", "kepl.t.progress"}
    assert all(specs[t][1]["min.insync.replicas"] == "2" for t in internal)
    assert "min.insync.replicas" not in specs["kepl.t.out.s"][1]
    assert specs["kepl.t.changelog.main"][1].get("cleanup.policy") is None  # see docstring

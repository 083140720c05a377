"""The test broker behaves like real Kafka: records, transactions and the CLI tools."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.kafka

REPO_ROOT = Path(__file__).resolve().parents[3]
KAFKA_BIN = REPO_ROOT / "deploy" / "kafka" / "bin"


def _new_topic(bootstrap: str, partitions: int) -> str:
    """Create a uniquely named topic and wait until it exists."""
    name = f"kepl-test-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(timeout=30)
    return name


def _read_all(bootstrap: str, topic: str, partitions: int, **conf: Any) -> list[Message]:
    """Consume ``topic`` from the start with a fresh group until every partition reports EOF."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kepl-test-{uuid.uuid4().hex[:12]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **conf,
        }
    )
    consumer.subscribe([topic])
    records: list[Message] = []
    at_eof: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_eof) < partitions:
            assert time.monotonic() < deadline, (
                f"timed out; got {len(records)} records, EOF on {sorted(at_eof)}"
            )
            for msg in consumer.consume(num_messages=100, timeout=1.0):
                err = msg.error()
                if err is None:
                    records.append(msg)
                    at_eof.discard(msg.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_eof.add(msg.partition())
                else:
                    raise AssertionError(f"consume error: {err}")
    finally:
        consumer.close()
    return records


def test_produce_and_consume_three_records(kafka_bootstrap: str) -> None:
    topic = _new_topic(kafka_bootstrap, partitions=3)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    for p in range(3):
        producer.produce(topic, key=f"k{p}".encode(), value=f"value-{p}".encode(), partition=p)
    assert producer.flush(30) == 0

    records = _read_all(kafka_bootstrap, topic, partitions=3)

    got = sorted((m.partition(), m.offset(), m.key(), m.value()) for m in records)
    assert got == [
        (0, 0, b"k0", b"value-0"),
        (1, 0, b"k1", b"value-1"),
        (2, 0, b"k2", b"value-2"),
    ]


def test_transactions_committed_visible_aborted_not(kafka_bootstrap: str) -> None:
    topic = _new_topic(kafka_bootstrap, partitions=1)
    producer = Producer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "transactional.id": f"kepl-test-tx-{uuid.uuid4().hex[:12]}",
        }
    )
    producer.init_transactions(30)
    for value, commit in ((b"committed-1", True), (b"aborted-1", False), (b"committed-2", True)):
        producer.begin_transaction()
        producer.produce(topic, value=value)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # make sure the aborted record really reached the log
            producer.abort_transaction(30)

    committed = _read_all(kafka_bootstrap, topic, 1, **{"isolation.level": "read_committed"})
    uncommitted = _read_all(kafka_bootstrap, topic, 1, **{"isolation.level": "read_uncommitted"})

    assert [m.value() for m in committed] == [b"committed-1", b"committed-2"]
    # The aborted record is in the log; only read_committed hides it.
    assert [m.value() for m in uncommitted] == [b"committed-1", b"aborted-1", b"committed-2"]


def test_kafka_topics_cli_lists_topic(kafka_bootstrap: str) -> None:
    topic = _new_topic(kafka_bootstrap, partitions=1)
    proc = subprocess.run(
        [str(KAFKA_BIN / "kafka-topics"), "--bootstrap-server", kafka_bootstrap, "--list"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert topic in proc.stdout.splitlines()


def test_a_tls_listener_and_the_authorizer_extend_the_broker_properties(
        tmp_path: Path) -> None:
    from app.kafka import tls
    from app.kafka.local_broker import Secure, _server_properties

    files = tls.TlsFiles(tmp_path / "tls")
    files.directory.mkdir()
    files.password_file.write_text("pw\n")
    text = _server_properties(9092, tmp_path, None, None,
                              Secure(files, 9094, {"u": "p"}, authorizer=True))
    props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line
                 and not line.startswith("#"))
    assert props["listeners"] == ("PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094,"
                                  "CONTROLLER://127.0.0.1:9093")
    assert props["advertised.listeners"] == ("PLAINTEXT://127.0.0.1:9092,"
                                             "SASL_SSL://127.0.0.1:9094")
    assert props["listener.security.protocol.map"].endswith(",SASL_SSL:SASL_SSL")
    assert props["listener.name.sasl_ssl.ssl.keystore.location"] == str(files.keystore)
    assert props["listener.name.sasl_ssl.ssl.keystore.password"] == "pw"
    assert props["sasl.enabled.mechanisms"] == "PLAIN"
    assert props["authorizer.class.name"] == ("org.apache.kafka.metadata.authorizer."
                                              "StandardAuthorizer")
    assert props["super.users"] == "User:ANONYMOUS"
    assert props["allow.everyone.if.no.acl.found"] == "false"


def test_a_scram_listener_keeps_its_credentials_out_of_the_properties(tmp_path: Path) -> None:
    from app.kafka import tls
    from app.kafka.local_broker import Secure, _server_properties

    files = tls.TlsFiles(tmp_path / "tls")
    files.directory.mkdir()
    files.password_file.write_text("pw\n")
    text = _server_properties(9092, tmp_path, None, None,
                              Secure(files, 9094, {"u": "s3cret"}, False, "SCRAM-SHA-256"))
    props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line
                 and not line.startswith("#"))
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-256"
    assert props["listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    assert "s3cret" not in text
    assert tls.scram_arguments({"u": "s3cret", "v": "pw2"}, "SCRAM-SHA-256") == [
        "--add-scram", "SCRAM-SHA-256=[name=u,password=s3cret]",
        "--add-scram", "SCRAM-SHA-256=[name=v,password=pw2]"]
    with pytest.raises(ValueError, match=r"SCRAM password \*\*\*\*: use letters"):
        tls.scram_arguments({"u": "a,b]"}, "SCRAM-SHA-512")
    with pytest.raises(ValueError, match="'SCRAM-SHA-1' is not one of PLAIN"):
        tls.check_mechanism("SCRAM-SHA-1")


def test_sasl_without_tls_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from app.kafka import cli

    assert cli.main(["start", "--sasl", "scram", "--port", "19092"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "kepl kafka start: --sasl needs --tls (the SASL_SSL listener)"]

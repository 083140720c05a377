"""Source topics ``kepl deploy`` creates keep records whose timestamps are runtime times
near 0 (1970), as kepl's own producers write them (the demo, ``kepl scenario run
--kafka``, the watermarks of ``kepl clock``): the broker's time-based retention check
would delete them before a worker read them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from app.cli.main import main
from tests.kafka_broker import RETENTION_CHECK_MS

ROOT = Path(__file__).resolve().parents[3]
BANK = ROOT / "examples" / "bank.yaml"
OLD = [1000, 2000, 3000]
"""Record timestamps: runtime times 1 s, 2 s, 3 s after the epoch."""


def _produce_old(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for t in OLD:
        producer.produce(topic, b'{"account": "A", "amount": 250}', partition=0, timestamp=t)
    assert producer.flush(30) == 0


def _offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    """(log start offset, end offset) of partition 0."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "retention-test"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def _timestamps(bootstrap: str, topic: str, n: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "retention-test",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[int] = []
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.timestamp()[1])
        return out
    finally:
        c.close()


@pytest.fixture
def kafka_own_broker(kafka_bootstrap: str,
                     kafka_broker_restart: Callable[[], None] | None) -> str:
    """The session's own broker, which checks retention every ``RETENTION_CHECK_MS``."""
    if kafka_broker_restart is None:
        pytest.skip("the broker is not this session's own: its retention check runs every "
                    "5 minutes by default")
    return kafka_bootstrap


@pytest.mark.kafka
def test_deployed_source_topic_keeps_old_records(kafka_own_broker: str,
                                                 tmp_path: Path) -> None:
    b = kafka_own_broker
    name = f"ret{uuid.uuid4().hex[:8]}"
    source = f"{name}-withdrawals"
    f = tmp_path / f"{name}.yaml"
    f.write_text(BANK.read_text().replace("app: bank", f"app: {name}")
                 .replace("Withdrawal: withdrawals", f"Withdrawal: {source}"))
    assert main(["deploy", str(f), "--bootstrap", b]) == 0
    admin = AdminClient({"bootstrap.servers": b})
    res = ConfigResource(ConfigResource.Type.TOPIC, source)
    cfg = admin.describe_configs([res])[res].result(timeout=10)
    assert {k: cfg[k].value for k in ("retention.ms", "retention.bytes",
                                      "message.timestamp.type")} == {
        "retention.ms": "-1", "retention.bytes": "-1", "message.timestamp.type": "CreateTime"}

    # a topic with the broker's default retention, the same records: the witness that
    # a retention check ran after they were written
    control = f"{name}-control"
    admin.create_topics([NewTopic(control, 1, 1)])[control].result(timeout=30)
    _produce_old(b, source)
    _produce_old(b, control)
    deadline = time.monotonic() + 30 + 5 * RETENTION_CHECK_MS / 1000
    while _offsets(b, control)[0] == 0:
        assert time.monotonic() < deadline, "the retention check never deleted the control"
        time.sleep(0.5)
    assert _offsets(b, control) == (3, 3)
    assert _offsets(b, source) == (0, 3)
    assert _timestamps(b, source, 3) == OLD
    admin.delete_topics([control, source])


@pytest.mark.kafka
def test_deploy_notes_an_existing_source_topic_with_time_retention(
        kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A source topic that exists is left as it is; deploy says when it deletes by time."""
    b = kafka_bootstrap
    name = f"ret{uuid.uuid4().hex[:8]}"
    source = f"{name}-withdrawals"
    f = tmp_path / f"{name}.yaml"
    f.write_text(BANK.read_text().replace("app: bank", f"app: {name}")
                 .replace("Withdrawal: withdrawals", f"Withdrawal: {source}"))
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(source, 1, 1, config={"retention.ms": "86400000"})]
                        )[source].result(timeout=30)
    capsys.readouterr()
    assert main(["deploy", str(f), "--bootstrap", b]) == 0
    out, err = capsys.readouterr()
    assert f"{source} (1 partition)" in out.splitlines()
    assert err == (
        f"kepl: deploy: note: source topic {source} existed and deletes records older than "
        "24 h (retention.ms=86400000) by their timestamps; records stamped with runtime "
        "times (kepl clock, kepl demo) are that old at once (kafka-configs --alter "
        f"--add-config retention.ms=-1 --entity-type topics --entity-name {source} keeps "
        "them)\n")
    # deployed again, with the topic kepl created: no note
    other = tmp_path / "again.yaml"
    other.write_text(f.read_text().replace(source, f"{name}-fresh"))
    assert main(["deploy", str(other), "--bootstrap", b]) == 0
    assert main(["deploy", str(other), "--bootstrap", b]) == 0
    assert capsys.readouterr().err == ""

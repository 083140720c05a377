"""``kepl tail FILE`` (following, as the README shows it) across a 20 s broker outage, a
stopped broker or a frozen one (its connections stay open, so librdkafka reports
nothing): one line on stderr when the broker goes, one when it answers again, and the
rows written after the outage are printed, each once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from app.cli.main import main
from app.runtime.kafka.router import H_ID, H_TIME

ROOT = Path(__file__).resolve().parents[3]
BANK = ROOT / "examples" / "bank.yaml"
OUTAGE_S = 20.0


def _write_row(bootstrap: str, topic: str, seq: int, account: str) -> None:
    """One output record of ``large_withdrawals`` as a worker writes it."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(topic, json.dumps({"account": account, "amount": 500.0}).encode(),
                     key=b"0", headers=[(H_ID, f"large_withdrawals/0/{seq}".encode()),
                                        (H_TIME, b"0")])
    assert producer.flush(30) == 0


def _wait_for(path: Path, text: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = path.read_text()
        if text in got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in {path.name} after {timeout_s} s: {path.read_text()!r}")


def _row(seq: int, account: str) -> str:
    return json.dumps({"statement": "large_withdrawals", "stream": "insert",
                       "context_partition": "0", "time": 0,
                       "id": f"large_withdrawals/0/{seq}",
                       "row": {"account": account, "amount": 500.0}})


@pytest.mark.kafka
@pytest.mark.parametrize("kind", ["stopped", "frozen"])
def test_tail_follows_across_a_broker_outage(
        kafka_bootstrap: str, kafka_broker_outage: Callable[[float], None] | None,
        kafka_broker_freeze: Callable[[float], None] | None, tmp_path: Path,
        kind: str) -> None:
    outage = kafka_broker_outage if kind == "stopped" else kafka_broker_freeze
    if outage is None:
        pytest.skip("the broker is not this session's own: it cannot be stopped")
    name = f"tail{uuid.uuid4().hex[:8]}"
    f = tmp_path / f"{name}.yaml"
    f.write_text(BANK.read_text().replace("app: bank", f"app: {name}")
                 .replace("Withdrawal: withdrawals", f"Withdrawal: {name}-withdrawals"))
    assert main(["deploy", str(f), "--bootstrap", kafka_bootstrap]) == 0
    topic = f"kepl.{name}.out.large_withdrawals"
    _write_row(kafka_bootstrap, topic, 1, "before")
    out, err = tmp_path / "tail.out", tmp_path / "tail.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        tail = subprocess.Popen([sys.executable, "-m", "app.cli.main", "tail", str(f),
                                 "--bootstrap", kafka_bootstrap], cwd=ROOT,
                                stdin=subprocess.DEVNULL, stdout=o, stderr=e)
    try:
        _wait_for(out, _row(1, "before"), 60)
        outage(OUTAGE_S)
        _write_row(kafka_bootstrap, topic, 2, "after")
        try:
            # the restarted broker loads its coordinators first: slow on a loaded machine
            printed = _wait_for(out, _row(2, "after"), 120)
        except AssertionError as e:
            raise AssertionError(f"{e}; tail's stderr: {err.read_text()!r}") from None
        assert printed == _row(1, "before") + "\n" + _row(2, "after") + "\n"
        _wait_for(err, "connected", 30)
        assert err.read_text() == (f"kepl: tail: broker {kafka_bootstrap} unreachable, "
                                   f"retrying\nkepl: tail: connected to {kafka_bootstrap}\n")
        assert tail.poll() is None
    finally:
        tail.kill()
        tail.wait()


class FakeConsumer:
    """Answers metadata requests while ``up``."""

    def __init__(self) -> None:
        self.up = True
        self.asked = 0

    def list_topics(self, timeout: float) -> None:
        from confluent_kafka import KafkaError, KafkaException

        self.asked += 1
        if not self.up:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))


def test_watch_asks_after_a_quiet_spell_and_after_connection_errors(
        capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka import KafkaError

    from app.cli.kafka_commands import BrokerWatch

    now = [0.0]
    watch = BrokerWatch("tail", "b:1", clock=lambda: now[0])
    consumer = FakeConsumer()
    watch.check(consumer)
    assert consumer.asked == 0  # rows or an answer less than 5 s ago: nothing asked
    now[0] = 4.9
    watch.alive()
    now[0] = 9.0
    watch.check(consumer)
    assert consumer.asked == 0
    now[0] = 10.0
    watch.check(consumer)
    assert consumer.asked == 1  # 5 s without a row: asked, and answered
    consumer.up = False
    watch.error(KafkaError(KafkaError._TRANSPORT))  # a connection error: ask at once
    watch.check(consumer)
    assert (consumer.asked, watch.down) == (2, True)
    watch.error(KafkaError(KafkaError._ALL_BROKERS_DOWN))  # already said
    watch.check(consumer)
    consumer.up = True
    watch.check(consumer)
    watch.check(consumer)
    assert capsys.readouterr().err == ("kepl: tail: broker b:1 unreachable, retrying\n"
                                       "kepl: tail: connected to b:1\n")

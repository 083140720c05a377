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
        printed = _wait_for(out, _row(2, "after"), 60)
        assert printed == _row(1, "before") + "\n" + _row(2, "after") + "\n"
        _wait_for(err, "connected", 30)
        assert err.read_text() == (f"kepl: tail: broker {kafka_bootstrap} unreachable, "
                                   f"retrying\nkepl: tail: connected to {kafka_bootstrap}\n")
        assert tail.poll() is None
    finally:
        tail.kill()
        tail.wait()

"""SIGTERM and SIGINT stop a worker within its shutdown timeout in every state: holding
records for a watermark, and with the broker gone (a commit or close that cannot end).
A second signal exits at once."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.kafka import local_broker
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.runner import KafkaApp

pytestmark = pytest.mark.kafka

TIMEOUT_S = 3


def _config(partitions: int = 1) -> AppConfig:
    name = f"stop-{uuid.uuid4().hex[:8]}"
    return AppConfig.from_dict({
        "app": name, "partitions": partitions,
        "schemas": {"T": {"k": "string", "v": "long"}},
        "topics": {"T": f"{name}.t"},
        "statements": [{"name": "total",
                        "epl": "select count(*) as n, sum(v) as total from T#time(1 hour)"}],
    })


def _stop_time(app: KafkaApp, *signals: signal.Signals) -> tuple[float, int]:
    """Seconds from the first signal until the worker process is gone, and its exit code."""
    proc = app.worker.proc
    assert proc is not None and proc.poll() is None
    t0 = time.monotonic()
    for sig in signals:
        proc.send_signal(sig)
        time.sleep(0.2)
    code = proc.wait(60)
    return time.monotonic() - t0, code


def _lines(app: KafkaApp, text: str) -> list[str]:
    return [line.split(" ", 2)[2] for line in app.worker.log_path.read_text().splitlines()
            if text in line]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_worker_holding_records_for_a_watermark_stops_at_once_and_keeps_them(
        kafka_bootstrap: str, sig: signal.Signals) -> None:
    app = KafkaApp(_config(partitions=2), kafka_bootstrap)
    try:
        app.worker.start(env={"KEPL_SHUTDOWN_TIMEOUT_S": str(TIMEOUT_S)})
        app.settle()
        for v in range(5):  # partition 1 sends no watermark: the engine holds these
            app.send("T", {"k": "a", "v": v}, partition=0)
        app.producer.flush(10)
        time.sleep(1.0)
        took, code = _stop_time(app, sig)
        assert code == 0
        assert took < 2.0, f"took {took:.1f} s"
        app.worker.start()
        app.settle()
        rows = [r.row for r in read_rows(kafka_bootstrap, app.config.output_topic("total"))]
        assert rows[-1] == {"n": 5, "total": 10}
    finally:
        app.close()


@pytest.fixture()
def own_broker(tmp_path: Path) -> Iterator[local_broker.BrokerInfo]:
    """A broker of this test's own (the test kills it; the shared one stays up)."""
    data_dir = tmp_path / "broker"
    info = local_broker.start(port=local_broker.free_port_pair(), data_dir=data_dir,
                              wait_s=90, die_with_parent=True)
    try:
        yield info
    finally:
        local_broker.stop(data_dir=data_dir, timeout_s=10)


def _broker_dies_mid_checkpoint(app: KafkaApp, broker: local_broker.BrokerInfo) -> None:
    """Events keep coming until the broker is killed, so the worker has read records it
    has not committed: its checkpoint waits on a broker that is gone."""
    assert broker.pid is not None
    app.settle()
    stop = threading.Event()

    def produce() -> None:
        v = 0
        while not stop.is_set():
            app.send("T", {"k": "a", "v": v})
            app.producer.poll(0)
            v += 1
            time.sleep(0.001)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    time.sleep(1.5)
    os.killpg(broker.pid, signal.SIGKILL)
    stop.set()
    t.join()
    time.sleep(0.5)


def test_a_worker_whose_broker_is_gone_stops_within_its_timeout(
        own_broker: local_broker.BrokerInfo) -> None:
    app = KafkaApp(_config(), own_broker.bootstrap)
    try:
        app.worker.start(env={"KEPL_SHUTDOWN_TIMEOUT_S": str(TIMEOUT_S)})
        _broker_dies_mid_checkpoint(app, own_broker)
        took, code = _stop_time(app, signal.SIGTERM)
        assert took < TIMEOUT_S + 2.0, f"took {took:.1f} s"
        assert code == 5
        assert _lines(app, "shutdown took") == [
            f"kepl.worker WARNING shutdown took longer than {TIMEOUT_S} s: exiting without "
            "the last commit (the next worker continues from the one before)"]
    finally:
        app.close(graceful=False)


def test_a_second_signal_exits_at_once(own_broker: local_broker.BrokerInfo) -> None:
    app = KafkaApp(_config(), own_broker.bootstrap)
    try:
        app.worker.start(env={"KEPL_SHUTDOWN_TIMEOUT_S": "60"})
        _broker_dies_mid_checkpoint(app, own_broker)
        took, code = _stop_time(app, signal.SIGTERM, signal.SIGINT)
        assert took < 3.0, f"took {took:.1f} s"
        assert code == 5
        assert _lines(app, "second signal") == [
            "kepl.worker WARNING second signal: exiting now, without the last commit"]
    finally:
        app.close(graceful=False)

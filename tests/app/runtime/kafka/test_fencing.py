"""A zombie worker is fenced: a second worker with the same identity takes over while
the first is frozen; the first wakes up, exits with code 3 and one line (and leaves the
code in its data directory for the metrics of the worker restarted there), and the output
topic holds every row once."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import pytest

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.loop import EXIT_FENCED
from app.runtime.kafka.reader import RowReader
from app.runtime.kafka.runner import KafkaApp, WorkerProcess
from app.runtime.kafka.worker import INSTANCE_ID_ENV


@pytest.mark.kafka
def test_a_fenced_zombie_exits_with_one_line_and_writes_nothing(kafka_bootstrap: str,
                                                                  tmp_path: Path) -> None:
    name = f"fence-{uuid.uuid4().hex[:8]}"
    kapp = KafkaApp(AppConfig.from_dict({
        "app": name,
        "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "statements": [{"name": "w", "epl": "select count(*) as cnt from Withdrawal"}],
    }), kafka_bootstrap)
    twin = WorkerProcess(kapp.config, kafka_bootstrap, tmp_path)
    reader = RowReader(kafka_bootstrap, [kapp.config.output_topic("w")])
    env = {INSTANCE_ID_ENV: "pod-0"}
    try:
        kapp.worker.start(env=env)
        for _ in range(100):
            kapp.send("Withdrawal", {"account": "A", "amount": 1.0})
        kapp.settle()
        zombie = kapp.worker.proc
        zombie_data = kapp.worker.data_dir
        assert zombie is not None
        zombie.send_signal(signal.SIGSTOP)
        for _ in range(100):
            kapp.send("Withdrawal", {"account": "A", "amount": 1.0})
        kapp.producer.flush(10)
        twin.start(env=env)  # the same identity, another machine's disk
        kapp.worker, zombie_proc = twin, zombie
        kapp.settle(timeout_s=90)
        zombie_proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 60
        while zombie_proc.poll() is None:
            assert time.monotonic() < deadline, \
                "the zombie did not exit:\n" + kapp.workdir.joinpath("worker.log").read_text()
            time.sleep(0.2)
        for _ in range(50):
            kapp.send("Withdrawal", {"account": "A", "amount": 1.0})
        kapp.settle()
        rows = reader.read_available()
        assert [r.row["cnt"] for r in rows] == list(range(1, 251))
        assert reader.duplicates == 0
        log = kapp.workdir.joinpath("worker.log").read_text()
        assert zombie_proc.returncode == EXIT_FENCED, log
        lines = log.splitlines()
        fenced = [line for line in lines if "CRITICAL" in line or "FATAL" in line]
        assert len(fenced) == 1, log
        # the consumer (static member) or the producer (transactional id) learns first
        line = fenced[0].split(" ", 2)[2]
        assert line.startswith("kepl.worker CRITICAL worker stops: "), line
        assert "fenced" in line and line.endswith("(another worker owns its partitions now)")
        assert "Traceback" not in log
        # for the next worker on that directory: kepl_previous_exit_code 3
        assert (zombie_data / "last-exit").read_text() == f"{EXIT_FENCED}\n"
        assert not (twin.data_dir / "last-exit").exists()
    finally:
        reader.close()
        twin.kill()
        kapp.close(graceful=False)

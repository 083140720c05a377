"""Spark on a standalone cluster: ``kepl spark cluster start`` runs a master and a worker
from the installed PySpark; ``kepl spark to-parquet --master spark://...`` exports output
topics exactly once across a restart of the job, as with a local master: as a batch
(``--once``) and as a continuous job whose driver is killed (``kill -9``) and restarted."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from app.analytics import cluster
from app.kafka.local_broker import free_port_pair
from tests.app.analytics.test_jobs import (
    ABORTED,
    COMMITTED,
    EXPECTED_ROWS,
    ROOT,
    Out,
    _by_id,
    _new_app,
    _produce,
    _rows,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A master and one worker of their own; stopped after the module."""
    port = free_port_pair()
    while not cluster._port_free(port + 2):
        port = free_port_pair()
    data_dir = tmp_path_factory.mktemp("spark-cluster")
    info = cluster.start(port, data_dir)
    try:
        yield info.master_url
    finally:
        assert not cluster.stop(port, data_dir).pids


@pytest.mark.long  # a few minutes on two cores: make spark-cluster
def test_to_parquet_on_a_cluster_is_exactly_once_across_a_restart(
        master: str, kafka_bootstrap: str, spark: SparkSession, tmp_path: Path) -> None:
    app = _new_app(kafka_bootstrap)
    _produce(kafka_bootstrap, app, COMMITTED, ABORTED)
    path, checkpoint = tmp_path / "rows", tmp_path / "checkpoint"

    def export() -> list[tuple[object, ...]]:
        proc = subprocess.run(
            [sys.executable, "-m", "app.cli.main", "spark", "to-parquet", "--master", master,
             "--bootstrap", kafka_bootstrap, "--app", app, "--path", str(path),
             "--checkpoint", str(checkpoint), "--once"],
            cwd=ROOT, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return _rows(spark.read.parquet(str(path)))

    assert export() == EXPECTED_ROWS
    new = Out("Alerts", 1, "insert", "p1", 6000, "Alerts/p1/2", {"sym": "B", "price": 13})
    _produce(kafka_bootstrap, app, [new, COMMITTED[2]], [])  # a new row and a replay
    assert export() == sorted(
        [*EXPECTED_ROWS, ("Alerts", "insert", "p1", 6000, "Alerts/p1/2",
                          {"sym": "B", "price": "13"})], key=_by_id)


def _wait_for(rows: Callable[[], list[tuple[object, ...]]], expected: list[tuple[object, ...]],
              job: subprocess.Popen[str], timeout_s: float = 420) -> float:
    """Seconds until ``rows()`` equals ``expected`` while ``job`` runs; fails if the job
    exits or the time runs out (the last rows in the message)."""
    t0 = time.monotonic()
    got: list[tuple[object, ...]] = []
    while time.monotonic() - t0 < timeout_s:
        assert job.poll() is None, f"the streaming job exited with {job.returncode}"
        try:
            got = rows()
        except Exception:  # noqa: BLE001 - no Parquet files committed yet
            got = []
        if got == expected:
            return time.monotonic() - t0
        time.sleep(2)
    raise AssertionError(f"after {timeout_s:.0f} s the Parquet rows are {got}")


@pytest.mark.long  # minutes on two cores: make spark-cluster
def test_a_continuous_job_on_a_cluster_is_exactly_once_across_a_driver_kill(
        master: str, kafka_bootstrap: str, spark: SparkSession, tmp_path: Path) -> None:
    app = _new_app(kafka_bootstrap)
    path, checkpoint = tmp_path / "rows", tmp_path / "checkpoint"
    logs = tmp_path / "job.log"

    def job() -> subprocess.Popen[str]:
        with open(logs, "a") as log:  # its own process group: kill -9 takes the JVM too
            return subprocess.Popen(
                [sys.executable, "-m", "app.cli.main", "spark", "to-parquet", "--master",
                 master, "--bootstrap", kafka_bootstrap, "--app", app, "--path", str(path),
                 "--checkpoint", str(checkpoint), "--interval", "2 seconds"],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                text=True, start_new_session=True)

    def rows() -> list[tuple[object, ...]]:
        return _rows(spark.read.parquet(str(path)))

    first = job()
    try:
        # the job runs before the rows exist and picks them up as they come
        _produce(kafka_bootstrap, app, COMMITTED, ABORTED)
        took = _wait_for(rows, EXPECTED_ROWS, first)
        print(f"continuous job on {master}: rows in Parquet {took:.1f} s after producing")
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # a crash of the driver, not a clean stop
        first.wait(60)
    new = Out("Alerts", 1, "insert", "p1", 6000, "Alerts/p1/2", {"sym": "B", "price": 13})
    _produce(kafka_bootstrap, app, [new, COMMITTED[2]], [])  # a new row and a replay
    expected = sorted([*EXPECTED_ROWS, ("Alerts", "insert", "p1", 6000, "Alerts/p1/2",
                                        {"sym": "B", "price": "13"})], key=_by_id)
    second = job()
    try:
        took = _wait_for(rows, expected, second)
        print(f"restarted from the checkpoint: the new row in Parquet after {took:.1f} s")
        time.sleep(6)  # a few more micro-batches: nothing is added
        assert second.poll() is None
    finally:
        second.send_signal(signal.SIGINT)  # ^C to the driver: it stops its query
        try:
            rc = second.wait(120)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(second.pid, signal.SIGKILL)  # whatever of the group is left
    assert rc == 130, logs.read_text()[-3000:]
    assert rows() == expected


def test_a_driver_of_a_local_cluster_binds_to_loopback() -> None:
    assert cluster.session_conf("spark://127.0.0.1:7077") == {
        "spark.executor.memory": "512m", "spark.cores.max": "1",
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    assert cluster.session_conf("spark://spark-master.prod:7077") == {
        "spark.executor.memory": "512m", "spark.cores.max": "1"}
    assert cluster.session_conf("local[2]") == {}

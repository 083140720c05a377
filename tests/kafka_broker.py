"""Pytest plugin: a real Kafka broker for tests marked ``kafka``.

Where the broker comes from, first match wins:

1. ``KAFKA_BOOTSTRAP_SERVERS`` is set: use that cluster as is.
2. A Docker engine answers ``docker info``: a testcontainers ``KafkaContainer``
   (image ``$KEPL_KAFKA_IMAGE``, default ``confluentinc/cp-kafka:8.1.0`` = Kafka 4.1).
3. Otherwise kepl's own local broker (``app.kafka.local_broker``) on a free port
   pair with a fresh data dir, started once per session.

Kafka tests are never skipped for want of a broker: if none can be had the
fixture fails with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.kafka import local_broker

DEFAULT_IMAGE = "confluentinc/cp-kafka:8.1.0"


def docker_available(timeout_s: float = 5.0) -> bool:
    """True if a Docker engine answers ``docker info`` within ``timeout_s``."""
    if shutil.which("docker") is None:
        return False
    try:
        proc = subprocess.run(
            ["docker", "info"], check=False, capture_output=True, timeout=timeout_s
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _container_broker() -> Iterator[str]:
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:  # testcontainers < 4.14 kept it at the old place
        from testcontainers.kafka import KafkaContainer

    image = os.environ.get("KEPL_KAFKA_IMAGE", DEFAULT_IMAGE)
    container = (
        KafkaContainer(image)
        .with_kraft()
        # Single broker: internal transaction topic must not ask for 3 replicas.
        .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
        .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
        .with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "true")
    )
    failure = ""
    try:
        container.start()
    except Exception as exc:  # noqa: BLE001 - any docker/testcontainers failure: report, never skip
        failure = str(exc)
    if failure:
        pytest.fail(f"Kafka test container ({image}) did not start: {failure}", pytrace=False)
    try:
        yield container.get_bootstrap_server()
    finally:
        container.stop()


RETENTION_CHECK_MS = 2000
"""The session's own broker checks time-based retention this often (default 5 min), so
a test sees what retention deletes."""
BROKER_OVERRIDES = {"log.retention.check.interval.ms": str(RETENTION_CHECK_MS)}

_OWNED: dict[str, Path] = {}
"""bootstrap -> data dir of the local broker this session started (it may restart it)."""


def _local_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir = tmp_path_factory.mktemp("kafka-broker")
    failure = ""
    try:
        port = local_broker.free_port_pair()
        info = local_broker.start(port=port, data_dir=data_dir, wait_s=90,
                                  die_with_parent=True, overrides=BROKER_OVERRIDES)
    except (local_broker.BrokerError, OSError, ValueError) as exc:  # report, never skip
        failure = str(exc)
        local_broker.stop(data_dir=data_dir, timeout_s=10)
    if failure:
        pytest.fail(
            f"local Kafka broker did not start (data dir {data_dir}): {failure}", pytrace=False
        )
    _OWNED[info.bootstrap] = data_dir
    try:
        yield info.bootstrap
    finally:
        local_broker.stop(data_dir=data_dir)


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``bootstrap.servers`` of a running Kafka broker for this test session."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if external:
        yield external
    elif docker_available():
        yield from _container_broker()
    else:
        yield from _local_broker(tmp_path_factory)


@pytest.fixture(scope="session")
def kafka_broker_restart(kafka_bootstrap: str) -> Callable[[], None] | None:
    """Stops and starts the session's broker (same port and data), or None where the
    broker is not this session's own (an external cluster, a container)."""
    data_dir = _OWNED.get(kafka_bootstrap)
    if data_dir is None:
        return None

    def restart() -> None:
        port = int(kafka_bootstrap.rpartition(":")[2])
        local_broker.stop(data_dir=data_dir, timeout_s=30)
        local_broker.start(port=port, data_dir=data_dir, wait_s=90, die_with_parent=True,
                           overrides=BROKER_OVERRIDES)

    return restart


@pytest.fixture(scope="session")
def kafka_broker_outage(kafka_bootstrap: str) -> Callable[[float], None] | None:
    """Stops the session's broker, waits ``seconds`` with no broker at its address, then
    starts it again (same port and data); None where the broker is not this session's
    own."""
    data_dir = _OWNED.get(kafka_bootstrap)
    if data_dir is None:
        return None

    def outage(seconds: float) -> None:
        import time

        port = int(kafka_bootstrap.rpartition(":")[2])
        local_broker.stop(data_dir=data_dir, timeout_s=30)
        time.sleep(seconds)
        local_broker.start(port=port, data_dir=data_dir, wait_s=90, die_with_parent=True,
                           overrides=BROKER_OVERRIDES)

    return outage


@pytest.fixture(scope="session")
def kafka_broker_freeze(kafka_bootstrap: str) -> Callable[[float], None] | None:
    """Freezes the session's broker (SIGSTOP) for ``seconds``, then lets it go on
    (SIGCONT): a broker that hangs with its connections open; None where the broker is
    not this session's own."""
    data_dir = _OWNED.get(kafka_bootstrap)
    if data_dir is None:
        return None

    def freeze(seconds: float) -> None:
        import signal
        import time

        pid = local_broker._read_pid(data_dir)
        assert pid is not None, f"no broker pid in {data_dir}"
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(pid, signal.SIGCONT)

    return freeze

"""One log line per broker lost and back, from the clients' statistics."""

from __future__ import annotations

import json
import logging

import pytest

from app.runtime.kafka.brokers import BrokerWatch, QuietFailures
from app.runtime.kafka.config import AppConfig, ConfigError


def stats(client: str, states: dict[int, str]) -> str:
    brokers = {f"127.0.0.1:{9000 + n}/{n}": {"nodeid": n, "nodename": f"127.0.0.1:{9000 + n}",
                                             "state": st} for n, st in states.items()}
    brokers["GroupCoordinator"] = {"nodeid": -1, "nodename": "127.0.0.1:9001", "state": "UP"}
    return json.dumps({"name": client, "brokers": brokers})


def test_one_line_per_loss_and_recovery(caplog: pytest.LogCaptureFixture) -> None:
    t = [0.0]
    w = BrokerWatch(clock=lambda: t[0])
    w._start_probe = lambda: None  # type: ignore[method-assign]
    caplog.set_level(logging.WARNING, "kepl.brokers")
    w.on_stats(stats("c", {1: "UP", 2: "UP"}))
    w.on_stats(stats("p", {1: "UP", 2: "INIT"}))
    t[0] = 1.0
    for _ in range(3):  # the consumer retries: still one line
        w.on_stats(stats("c", {1: "UP", 2: "CONNECT"}))
    t[0] = 4.5
    w.on_stats(stats("c", {1: "UP", 2: "UP"}))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "broker 2 (127.0.0.1:9002) lost: no connection; its partitions move to other "
        "replicas",
        "broker 2 (127.0.0.1:9002) back after 3.5 s"]
    assert (w.losses, w.recoveries) == (1, 1)


def test_a_broker_never_connected_is_not_lost(caplog: pytest.LogCaptureFixture) -> None:
    w = BrokerWatch()
    caplog.set_level(logging.WARNING, "kepl.brokers")
    w.on_stats(stats("p", {1: "UP", 3: "INIT"}))
    w.on_stats(stats("p", {1: "UP", 3: "DOWN"}))
    assert caplog.records == [] and w.losses == 0


def test_connection_failure_lines_are_dropped() -> None:
    f = QuietFailures()

    def rec(msg: str) -> logging.LogRecord:
        return logging.LogRecord("kepl.kafka", logging.ERROR, "", 0, msg, None, None)

    assert not f.filter(rec("FAIL [rdkafka#consumer-6] [thrd:127.0.0.1:9196/bootstrap]: "
                            "127.0.0.1:9196/bootstrap: Connect to ipv4#127.0.0.1:9196 "
                            "failed: Connection refused (after 0ms in state CONNECT)"))
    assert f.filter(rec("consumer: Broker: Offset out of range"))


def test_min_insync_replicas_within_the_replication_factor() -> None:
    base = {"app": "a", "schemas": {"T": {"x": "int"}},
            "statements": [{"name": "s", "epl": "select * from T"}]}
    ok = AppConfig.from_dict({**base, "replication_factor": 3, "min_insync_replicas": 2})
    assert (ok.replication_factor, ok.min_insync_replicas) == (3, 2)
    with pytest.raises(ConfigError, match=r"'min_insync_replicas' \(3\) must not exceed "
                                          r"'replication_factor' \(2\)"):
        AppConfig.from_dict({**base, "replication_factor": 2, "min_insync_replicas": 3})

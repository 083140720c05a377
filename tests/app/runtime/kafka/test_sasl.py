"""Kafka clusters with authentication: a broker with a SASL/PLAIN listener; the worker,
its producer-side and reader-side clients authenticate with the statement file's
``kafka:`` settings (the password from the environment); a wrong password is one line."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from app.kafka import local_broker
from app.runtime.kafka import client
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import RowReader
from app.runtime.kafka.runner import REPO_ROOT, KafkaApp

pytestmark = pytest.mark.kafka

PASSWORD_ENV = "KEPL_TEST_SASL_PASSWORD"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sasl_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A broker of its own whose second listener wants SASL/PLAIN (user kepl)."""
    data_dir = tmp_path_factory.mktemp("sasl-broker")
    port, sasl_port = local_broker.free_port_pair(), free_port()
    local_broker.start(port=port, data_dir=data_dir, wait_s=90, die_with_parent=True,
                       sasl_users={"kepl": "s3cret"}, sasl_port=sasl_port)
    try:
        yield f"127.0.0.1:{sasl_port}"
    finally:
        local_broker.stop(data_dir=data_dir)
        client.configure(None)


def app_config(password_ref: str) -> AppConfig:
    name = f"sasl-{uuid.uuid4().hex[:8]}"
    return AppConfig.from_dict({
        "app": name,
        "kafka": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                  "sasl.username": "kepl", "sasl.password": password_ref},
        "schemas": {"Trade": {"symbol": "string", "price": "double"}},
        "topics": {"Trade": f"{name}.trade"},
        "statements": [{"name": "big", "epl": "select symbol from Trade(price > 10)"}],
    })


def test_the_worker_and_its_clients_authenticate(sasl_bootstrap: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "s3cret")
    kapp = KafkaApp(app_config("${" + PASSWORD_ENV + "}"), sasl_bootstrap)
    try:
        kapp.worker.start()
        for i, price in enumerate([5.0, 20.0, 30.0]):
            kapp.send("Trade", {"symbol": f"S{i}", "price": price})
        kapp.settle()
        reader = RowReader(sasl_bootstrap, [kapp.config.output_topic("big")])
        try:
            assert [r.row for r in reader.read_available()] == [{"symbol": "S1"},
                                                                 {"symbol": "S2"}]
        finally:
            reader.close()
        assert "s3cret" not in kapp.worker.config_path.read_text()
        # the CLI: kepl send and kepl tail with the statement file's kafka: settings
        sf = kapp.workdir / "cli.yaml"
        sf.write_text(yaml.safe_dump({
            "app": kapp.config.app, "kafka": dict(kapp.config.kafka),
            "schemas": kapp.config.schemas, "topics": dict(kapp.config.topics),
            "statements": [{"name": s.name, "epl": s.epl} for s in kapp.config.statements],
        }))
        kepl = [sys.executable, "-m", "app.cli.main"]
        sent = subprocess.run([*kepl, "send", "--bootstrap", sasl_bootstrap, str(sf), "Trade",
                               '{"symbol": "S9", "price": 50.0}'],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0, sent.stderr
        kapp.settle()
        tail = subprocess.run([*kepl, "tail", str(sf), "--no-follow", "--bootstrap",
                               sasl_bootstrap], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=60)
        assert tail.returncode == 0, tail.stderr
        assert [json.loads(line)["row"] for line in tail.stdout.splitlines()] == [
            {"symbol": "S1"}, {"symbol": "S2"}, {"symbol": "S9"}]
        # the same from a properties file (--kafka-config), the statement file plain
        props = kapp.workdir / "client.properties"
        props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=PLAIN\n"
                         "sasl.username=kepl\nsasl.password=${" + PASSWORD_ENV + "}\n")
        plain = yaml.safe_load(sf.read_text())
        del plain["kafka"]
        sf.write_text(yaml.safe_dump(plain))
        tail = subprocess.run([*kepl, "tail", str(sf), "--no-follow", "--bootstrap",
                               sasl_bootstrap, "--kafka-config", str(props)],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert tail.returncode == 0, tail.stderr
        assert len(tail.stdout.splitlines()) == 3
    finally:
        kapp.close()
        client.configure(None)


def test_a_wrong_password_is_one_line(sasl_bootstrap: str, tmp_path: Path) -> None:
    config = app_config("wrong")
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(config.to_dict()))
    proc = subprocess.run(
        [sys.executable, "-m", "app.runtime.kafka.worker", "--config", str(path),
         "--bootstrap", sasl_bootstrap, "--data-dir", str(tmp_path / "data")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"kepl: worker: the broker at {sasl_bootstrap} refused the "
                     "credentials of user kepl (SASL mechanism PLAIN): SASL "
                     "authentication error: Authentication failed: "
                     "Invalid username or password (check the kafka: settings, "
                     "--kafka-config or KEPL_KAFKA_*)"], proc.stderr

"""SCRAM over TLS: ``kepl kafka start --tls --sasl scram`` makes a SASL_SSL listener
whose SCRAM-SHA-512 credentials are created when the storage is formatted; the worker,
``kepl send`` and ``kepl tail`` log in with the settings it writes; a wrong password is
one line naming the mechanism and the user; a restart with a new password replaces the
credentials."""

from __future__ import annotations

import json
import os
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

KEPL = [sys.executable, "-m", "app.cli.main"]


def _start(port: int, tls_port: int, data_dir: Path,
           password: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KEPL_SASL_PASSWORD"}
    if password is not None:
        env["KEPL_SASL_PASSWORD"] = password
    return subprocess.run([*KEPL, "kafka", "start", "--port", str(port), "--data-dir",
                           str(data_dir), "--tls", "--tls-port", str(tls_port), "--sasl",
                           "scram", "--no-appcds", "--wait", "120"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=180, env=env)


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """A broker of its own started by the CLI: its addresses and the settings it wrote."""
    data_dir = tmp_path_factory.mktemp("scram-broker").resolve()
    port, tls_port = local_broker.free_port_pair(), local_broker.free_port_pair()
    started = _start(port, tls_port, data_dir)
    try:
        assert started.returncode == 0, started.stderr
        yield {"port": port, "tls_port": tls_port, "data_dir": data_dir,
               "bootstrap": f"127.0.0.1:{tls_port}", "stdout": started.stdout}
    finally:
        subprocess.run([*KEPL, "kafka", "stop", "--data-dir", str(data_dir)], cwd=REPO_ROOT,
                       capture_output=True, timeout=60)
        client.configure(None)


def _app(settings: dict[str, str]) -> AppConfig:
    name = f"scram-{uuid.uuid4().hex[:8]}"
    return AppConfig.from_dict({
        "app": name, "kafka": settings,
        "schemas": {"Trade": {"symbol": "string", "price": "double"}},
        "topics": {"Trade": f"{name}.trade"},
        "statements": [{"name": "big", "epl": "select symbol from Trade(price > 10)"}],
    })


def _worker_exit(config: AppConfig, bootstrap: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    path = tmp / f"{config.app}.yaml"
    path.write_text(yaml.safe_dump(config.to_dict()))
    return subprocess.run(
        [sys.executable, "-m", "app.runtime.kafka.worker", "--config", str(path),
         "--bootstrap", bootstrap, "--data-dir", str(tmp / "data")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_start_prints_the_scram_settings_and_the_apps_log_in_with_them(
        scram_broker: dict[str, object]) -> None:
    data_dir, bootstrap = scram_broker["data_dir"], str(scram_broker["bootstrap"])
    assert isinstance(data_dir, Path)
    tls_dir = data_dir / "tls"
    props = tls_dir / "client-sasl.properties"
    assert str(scram_broker["stdout"]).splitlines()[1:] == [
        f"TLS listener (SASL_SSL, SCRAM-SHA-512, user kepl) bootstrap={bootstrap}; client "
        f"settings (also in {props}, for --kafka-config):",
        "  security.protocol=SASL_SSL",
        f"  ssl.ca.location={tls_dir / 'ca.pem'}",
        "  sasl.mechanisms=SCRAM-SHA-512",
        "  sasl.username=kepl",
        f"  sasl.password=file:{tls_dir / 'sasl-kepl.password'}",
    ]
    assert "SCRAM-SHA-512" in (data_dir / "server.properties").read_text()
    settings = client.read_properties(props)
    kapp = KafkaApp(_app(settings), bootstrap)
    try:
        kapp.worker.start()
        for i, price in enumerate([5.0, 20.0, 30.0]):
            kapp.send("Trade", {"symbol": f"S{i}", "price": price})
        kapp.settle()
        reader = RowReader(bootstrap, [kapp.config.output_topic("big")])
        try:
            assert [r.row for r in reader.read_available()] == [{"symbol": "S1"},
                                                                 {"symbol": "S2"}]
        finally:
            reader.close()
        # the CLI: the statement file without kafka: settings, the printed file instead
        plain = kapp.config.to_dict()
        del plain["kafka"]
        sf = kapp.workdir / "cli.yaml"
        sf.write_text(yaml.safe_dump(plain))
        sent = subprocess.run([*KEPL, "send", "--bootstrap", bootstrap, "--kafka-config",
                               str(props), str(sf), "Trade", '{"symbol": "S9", "price": 50.0}'],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0, sent.stderr
        kapp.settle()
        tail = subprocess.run([*KEPL, "tail", str(sf), "--no-follow", "--bootstrap", bootstrap,
                               "--kafka-config", str(props)],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert tail.returncode == 0, tail.stderr
        assert [json.loads(line)["row"] for line in tail.stdout.splitlines()] == [
            {"symbol": "S1"}, {"symbol": "S2"}, {"symbol": "S9"}]
    finally:
        kapp.close()
        client.configure(None)


def _wrong_password_line(bootstrap: str) -> str:
    return (f"kepl: worker: the broker at {bootstrap} refused the credentials of user kepl "
            "(SASL mechanism SCRAM-SHA-512): SASL authentication error: Authentication "
            "failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-512 (check the kafka: settings, --kafka-config or KEPL_KAFKA_*)")


def test_a_wrong_password_is_one_line_naming_the_mechanism_and_the_user(
        scram_broker: dict[str, object], tmp_path: Path) -> None:
    bootstrap, data_dir = str(scram_broker["bootstrap"]), scram_broker["data_dir"]
    assert isinstance(data_dir, Path)
    settings = client.read_properties(data_dir / "tls" / "client-sasl.properties")
    proc = _worker_exit(_app({**settings, "sasl.password": "wrong"}), bootstrap, tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [_wrong_password_line(bootstrap)], proc.stderr


def test_a_restart_with_a_new_password_replaces_the_credentials(
        scram_broker: dict[str, object], tmp_path: Path) -> None:
    bootstrap, data_dir = str(scram_broker["bootstrap"]), scram_broker["data_dir"]
    assert isinstance(data_dir, Path)
    old = client.read_properties(data_dir / "tls" / "client-sasl.properties")
    old["sasl.password"] = client.resolve("sasl.password", old["sasl.password"])
    stopped = subprocess.run([*KEPL, "kafka", "stop", "--data-dir", str(data_dir)],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    started = _start(int(str(scram_broker["port"])), int(str(scram_broker["tls_port"])),
                     data_dir, password="n3w-pass")
    assert started.returncode == 0, started.stderr
    assert (data_dir / "tls" / "sasl-kepl.password").read_text().strip() == "n3w-pass"
    proc = _worker_exit(_app(old), bootstrap, tmp_path)
    assert proc.stderr.strip().splitlines() == [_wrong_password_line(bootstrap)], proc.stderr
    try:
        client.configure(None, data_dir / "tls" / "client-sasl.properties")
        assert isinstance(client.probe(bootstrap, "test"), set)  # raises if refused
    finally:
        client.configure(None)

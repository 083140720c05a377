"""Kafka over TLS: a broker of its own whose listener is SASL_SSL with a CA and
certificate made by ``app.kafka.tls``; the worker, ``kepl send`` and ``kepl tail``
connect with the statement file's settings; a client trusting another CA is one line."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from app.kafka import local_broker, tls
from app.runtime.kafka import client
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import RowReader
from app.runtime.kafka.runner import REPO_ROOT, KafkaApp

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(bootstrap of the SASL_SSL listener, the CA file clients trust)."""
    data_dir = tmp_path_factory.mktemp("tls-broker")
    port = local_broker.free_port_pair()
    tls_port = local_broker.free_port_pair()
    local_broker.start(port=port, data_dir=data_dir, wait_s=90, die_with_parent=True,
                       appcds=False, sasl_users={"kepl": "s3cret"}, tls_port=tls_port)
    try:
        yield f"127.0.0.1:{tls_port}", tls.TlsFiles(data_dir / "tls").ca
    finally:
        local_broker.stop(data_dir=data_dir)
        client.configure(None)


def settings(ca: Path) -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca),
            "sasl.mechanisms": "PLAIN", "sasl.username": "kepl", "sasl.password": "s3cret"}


def app_config(ca: Path) -> AppConfig:
    name = f"tls-{uuid.uuid4().hex[:8]}"
    return AppConfig.from_dict({
        "app": name, "kafka": settings(ca),
        "schemas": {"Trade": {"symbol": "string", "price": "double"}},
        "topics": {"Trade": f"{name}.trade"},
        "statements": [{"name": "big", "epl": "select symbol from Trade(price > 10)"}],
    })


def test_worker_and_cli_run_over_sasl_ssl(tls_broker: tuple[str, Path]) -> None:
    bootstrap, ca = tls_broker
    kapp = KafkaApp(app_config(ca), bootstrap)
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
        sf = kapp.workdir / "cli.yaml"
        sf.write_text(yaml.safe_dump(kapp.config.to_dict()))
        kepl = [sys.executable, "-m", "app.cli.main"]
        sent = subprocess.run([*kepl, "send", "--bootstrap", bootstrap, str(sf), "Trade",
                               '{"symbol": "S9", "price": 50.0}'],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0, sent.stderr
        kapp.settle()
        tail = subprocess.run([*kepl, "tail", str(sf), "--no-follow", "--bootstrap",
                               bootstrap], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=60)
        assert tail.returncode == 0, tail.stderr
        assert [json.loads(line)["row"] for line in tail.stdout.splitlines()] == [
            {"symbol": "S1"}, {"symbol": "S2"}, {"symbol": "S9"}]
    finally:
        kapp.close()
        client.configure(None)


def test_a_wrong_ca_is_one_line(tls_broker: tuple[str, Path], tmp_path: Path) -> None:
    bootstrap, _ = tls_broker
    config = app_config(tls.make_ca(tmp_path / "other"))
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(config.to_dict()))
    proc = subprocess.run(
        [sys.executable, "-m", "app.runtime.kafka.worker", "--config", str(path),
         "--bootstrap", bootstrap, "--data-dir", str(tmp_path / "data")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"kepl: worker: the TLS handshake with the broker at "
                               f"{bootstrap} failed: SSL handshake failed: ")
    assert "certificate verify failed" in lines[0]
    assert lines[0].endswith("(check ssl.ca.location: the CA that signed the broker's "
                             "certificate)")


def test_kepl_kafka_start_tls_prints_settings_a_client_connects_with(tmp_path: Path) -> None:
    port = local_broker.free_port_pair()
    tls_port = local_broker.free_port_pair()
    data_dir = tmp_path / "broker"
    kepl = [sys.executable, "-m", "app.cli.main", "kafka"]
    started = subprocess.run([*kepl, "start", "--port", str(port), "--data-dir", str(data_dir),
                              "--tls", "--tls-port", str(tls_port), "--no-appcds"],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stderr
        ca = data_dir.resolve() / "tls" / "ca.pem"
        props = data_dir.resolve() / "tls" / "client.properties"
        assert started.stdout.splitlines()[1:] == [
            f"TLS listener bootstrap=127.0.0.1:{tls_port}; client settings (also in "
            f"{props}, for --kafka-config):",
            "  security.protocol=SSL",
            f"  ssl.ca.location={ca}",
        ]
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        admin.create_topics([NewTopic("over-tls", 1, 1)])["over-tls"].result(30)
        client.configure(None, props)  # the printed file, as --kafka-config
        assert "over-tls" in client.probe(f"127.0.0.1:{tls_port}", "test")
    finally:
        client.configure(None)
        subprocess.run([*kepl, "stop", "--data-dir", str(data_dir)], cwd=REPO_ROOT,
                       capture_output=True, timeout=60)

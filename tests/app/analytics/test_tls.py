"""Spark jobs over TLS: against a broker of its own whose listener is SASL_SSL with
SCRAM-SHA-512, ``kepl spark read`` takes the client settings from ``--kafka-config``
(the file ``kepl kafka start --tls --sasl scram`` writes) and ``kepl spark stream``
from a statement file's ``kafka:`` section; both give exactly the rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from app.analytics import cli
from app.kafka import local_broker, tls
from app.runtime.kafka import client
from tests.app.analytics.test_jobs import (
    ABORTED,
    COMMITTED,
    EXPECTED_ROWS,
    PARTITIONS,
    _by_id,
    _new_app,
    _produce,
    _rows,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

USER, PASSWORD = "spark-reader", "r3ader-pass"


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """(PLAINTEXT bootstrap to set up, SASL_SSL bootstrap, client properties file)."""
    data_dir = tmp_path_factory.mktemp("spark-tls-broker")
    port, tls_port = local_broker.free_port_pair(), local_broker.free_port_pair()
    info = local_broker.start(port=port, data_dir=data_dir, wait_s=120, appcds=False,
                              die_with_parent=True, tls_port=tls_port,
                              sasl_users={USER: PASSWORD}, sasl_mechanism="SCRAM-SHA-512")
    try:
        files = tls.TlsFiles(info.data_dir / "tls")
        _, password_file = tls.sasl_password(files, USER, PASSWORD)
        props = tls.write_client_properties(files, True, "SCRAM-SHA-512", USER, password_file)
        yield info.bootstrap, f"127.0.0.1:{tls_port}", props
    finally:
        local_broker.stop(data_dir=data_dir)
        client.configure(None)


def _json_rows(out: str) -> list[tuple[Any, ...]]:
    rows = [json.loads(line) for line in out.splitlines()]
    fields = ("statement", "stream", "context_partition", "runtime_ms", "row_id", "value")
    return sorted((tuple(r.get(f) for f in fields) for r in rows), key=_by_id)


def test_batch_and_streaming_jobs_read_over_sasl_ssl_with_scram(
        spark: SparkSession, scram_broker: tuple[str, str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    plain, secure, props = scram_broker
    app = _new_app(plain)
    _produce(plain, app, COMMITTED, ABORTED)
    try:
        # batch: the settings from a properties file
        capsys.readouterr()
        assert cli.main(["read", "--bootstrap", secure, "--app", app, "--json",
                         "--kafka-config", str(props)]) == 0
        assert _json_rows(capsys.readouterr().out) == EXPECTED_ROWS

        # streaming (availableNow) into Parquet: the settings in the statement file
        statements = tmp_path / "app.yaml"
        statements.write_text(yaml.safe_dump({
            "app": app, "kafka": client.read_properties(props),
            "schemas": {"T": {"x": "long"}}, "topics": {"T": f"{app}.in"},
            "statements": [{"name": s, "epl": "select * from T"} for s in PARTITIONS],
        }))
        path, checkpoint = tmp_path / "rows", tmp_path / "checkpoint"
        client.configure(None)
        assert cli.main(["stream", str(statements), "--bootstrap", secure, "--path",
                         str(path), "--checkpoint", str(checkpoint), "--once"]) == 0
        assert json.loads(capsys.readouterr().out)["input_rows"] == len(COMMITTED)
        assert _rows(spark.read.parquet(str(path))) == EXPECTED_ROWS
    finally:
        client.configure(None)

"""``kepl acls FILE``: one kafka-acls.sh command per resource, least operations."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.cli.main import main


def test_kepl_acls_prints_the_least_privileges(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump({
        "app": "fraud",
        "schemas": {"Trade": {"symbol": "string", "price": "double"}},
        "topics": {"Trade": "trades"},
        "statements": [{"name": "big", "epl": "select symbol, count(*) as n from Trade",
                        "output_topic": "big-trades"}],
    }))
    assert main(["acls", str(path), "--principal", "User:fraud-worker", "--bootstrap",
                 "kafka:9093", "--command-config", "admin.properties"]) == 0
    head = "kafka-acls.sh --bootstrap-server kafka:9093 --command-config admin.properties " \
           "--add --allow-principal User:fraud-worker"
    assert capsys.readouterr().out.splitlines() == [
        "# ACLs of a worker of app fraud (principal User:fraud-worker)",
        "# Topic trades: Read",
        f"{head} --operation Read --topic trades",
        "# Topic big-trades: Write",
        f"{head} --operation Write --topic big-trades",
        "# Topic kepl.fraud.changelog.main: Read, Write, Delete",
        f"{head} --operation Read --operation Write --operation Delete "
        "--topic kepl.fraud.changelog.main",
        "# Topic kepl.fraud.dlq: Write",
        f"{head} --operation Write --topic kepl.fraud.dlq",
        "# Topic kepl.fraud.progress: Write",
        f"{head} --operation Write --topic kepl.fraud.progress",
        "# Topic kepl.fraud.watermarks: Read",
        f"{head} --operation Read --topic kepl.fraud.watermarks",
        "# Group kepl.fraud: Read",
        f"{head} --operation Read --group kepl.fraud",
        "# TransactionalId kepl.fraud.*: Write",
        f"{head} --operation Write --transactional-id kepl.fraud. "
        "--resource-pattern-type prefixed",
    ]


def test_at_least_once_needs_no_transactional_id_and_options_add_create(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump({
        "app": "a", "processing_guarantee": "at_least_once",
        "schemas": {"T": {"k": "string"}},
        "statements": [{"name": "s", "epl": "select k from T"}],
    }))
    assert main(["acls", str(path), "--create-topics", "--idempotent-write"]) == 0
    comments = [line for line in capsys.readouterr().out.splitlines()
                if line.startswith("# ") and ":" in line][1:]
    assert comments == [
        "# Topic T: Read, Create",
        "# Topic kepl.a.dlq: Write, Create",
        "# Topic kepl.a.out.s: Write, Create",
        "# Topic kepl.a.progress: Write, Create",
        "# Topic kepl.a.watermarks: Read, Create",
        "# Group kepl.a: Read",
        "# Cluster kafka-cluster: IdempotentWrite",
    ]

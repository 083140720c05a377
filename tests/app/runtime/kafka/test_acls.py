"""Least privileges on a broker with KRaft's StandardAuthorizer: a worker authenticating
as ``User:worker`` runs with exactly the ACLs ``acls.worker_acls`` lists (what
``kepl acls`` prints), and with one of them missing it stops with one line naming the
resource and the operation."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from app.kafka import local_broker
from app.runtime.kafka import acls, client
from app.runtime.kafka.clock import Clock
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import RowReader
from app.runtime.kafka.runner import REPO_ROOT, KafkaApp, WorkerProcess
from app.runtime.kafka.worker import create_topics

pytestmark = pytest.mark.kafka

PRINCIPAL = "User:worker"
WORKER_SETTINGS = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                   "sasl.username": "worker", "sasl.password": "w0rker"}


@pytest.fixture(scope="module")
def secured() -> Iterator[tuple[str, str]]:
    """(bootstrap of the super user, PLAINTEXT; bootstrap of the worker, SASL)."""
    import tempfile

    data_dir = Path(tempfile.mkdtemp(prefix="kepl-acl-broker-"))
    port, sasl_port = local_broker.free_port_pair(), local_broker.free_port_pair()
    local_broker.start(port=port, data_dir=data_dir, wait_s=90, die_with_parent=True,
                       appcds=False, sasl_users={"worker": "w0rker"}, sasl_port=sasl_port,
                       authorizer=True)
    try:
        yield f"127.0.0.1:{port}", f"127.0.0.1:{sasl_port}"
    finally:
        local_broker.stop(data_dir=data_dir)
        client.configure(None)


def app_doc() -> dict[str, Any]:
    name = f"acl-{uuid.uuid4().hex[:8]}"
    return {
        "app": name,
        "schemas": {"Trade": {"symbol": "string", "price": "double"}},
        "topics": {"Trade": f"{name}.trade"},
        "context_partitions": {"BySymbol": 2},
        "statements": [
            {"name": "ctx", "epl": "create context BySymbol partition by symbol from Trade"},
            {"name": "counts", "epl": "context BySymbol select symbol, count(*) as n "
                                      "from Trade"},
            {"name": "big", "epl": "select symbol from Trade(price > 10)"},
        ],
    }


def grant(admin_bootstrap: str, granted: list[acls.Acl]) -> None:
    acls.apply(AdminClient({"bootstrap.servers": admin_bootstrap}), granted, PRINCIPAL)


def test_a_worker_runs_with_exactly_the_listed_acls(secured: tuple[str, str]) -> None:
    admin, worker_bootstrap = secured
    doc = app_doc()
    config = AppConfig.from_dict(doc)
    kapp = KafkaApp(config, admin)  # the set-up principal creates the topics
    needed = acls.worker_acls(config)
    assert {a.resource for a in needed} == {"Topic", "Group", "TransactionalId"}
    assert any(".repartition." in a.name for a in needed)
    grant(admin, needed)
    try:
        kapp.worker = WorkerProcess(AppConfig.from_dict({**doc, "kafka": WORKER_SETTINGS}),
                                    worker_bootstrap, kapp.workdir)
        kapp.worker.start()
        for symbol, price in [("A", 5.0), ("B", 20.0), ("A", 30.0)]:
            kapp.send("Trade", {"symbol": symbol, "price": price})
        kapp.settle()
        reader = RowReader(admin, [config.output_topic("big"), config.output_topic("counts")])
        try:
            rows = [(r.topic, r.row) for r in reader.read_available()]
        finally:
            reader.close()
        big = [row for topic, row in rows if topic == config.output_topic("big")]
        counts = sorted((row["symbol"], row["n"]) for topic, row in rows
                        if topic == config.output_topic("counts"))
        assert big == [{"symbol": "B"}, {"symbol": "A"}]
        assert counts == [("A", 1), ("A", 2), ("B", 1)]
    finally:
        kapp.close()
        client.configure(None)


def without(needed: list[acls.Acl], resource: str, name_part: str, op: str
            ) -> list[acls.Acl]:
    """``needed`` less ``op`` on the resource (``Describe`` kept when ``op`` is
    ``Write!``: the topic stays visible, the refusal comes when a transaction writes it)."""
    out = []
    for a in needed:
        ops = a.operations
        if a.resource == resource and name_part in a.name:
            ops = ("Describe",) if op == "Write!" else tuple(o for o in ops if o != op)
        if ops:
            out.append(acls.Acl(a.resource, a.name, ops, a.prefixed))
    return out


@pytest.mark.parametrize("resource,name_part,op,expected", [
    ("Group", "kepl.", "Read", "Read on Group kepl.{app}"),
    ("TransactionalId", "kepl.", "Write", "Write on TransactionalId kepl.{app}."),
    ("Topic", ".out.big", "Write", "Describe (and so Create) on Topic kepl.{app}.out.big"),
    ("Topic", ".out.counts", "Write!", "Write on Topic kepl.{app}.out.counts"),
])
def test_a_missing_acl_is_one_line(secured: tuple[str, str], tmp_path: Path, resource: str,
                                   name_part: str, op: str, expected: str) -> None:
    admin, worker_bootstrap = secured
    doc = app_doc()
    config = AppConfig.from_dict(doc)
    client.configure(None)
    create_topics(config, admin)
    grant(admin, without(acls.worker_acls(config), resource, name_part, op))
    producer = Producer({"bootstrap.servers": admin})  # input the worker will process
    for symbol, price in [("A", 5.0), ("B", 20.0)]:
        producer.produce(config.topic_of("Trade"),
                         json.dumps({"symbol": symbol, "price": price}).encode())
    producer.flush(30)
    clock = Clock(admin, config)
    clock.publish(1000)
    clock.close()
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump({**doc, "kafka": WORKER_SETTINGS}))
    proc = subprocess.run(
        [sys.executable, "-m", "app.runtime.kafka.worker", "--config", str(path),
         "--bootstrap", worker_bootstrap, "--data-dir", str(tmp_path / "data")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("kepl: worker: the broker refused "
                               + expected.format(app=config.app)), lines[0]
    assert lines[0].endswith(": the principal lacks that ACL (kepl acls FILE prints every "
                             "ACL a worker needs)")

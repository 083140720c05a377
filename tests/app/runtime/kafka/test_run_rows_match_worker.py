"""``kepl run`` prints the rows a Kafka worker writes for the same statement file and
events, field for field: context partition text, row id, time, stream and row."""

from __future__ import annotations

import json
import uuid
import zlib
from pathlib import Path

import pytest
import yaml

from app.cli.main import main
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.runner import KafkaApp

pytestmark = pytest.mark.kafka


def statement_file(name: str) -> dict:
    return {
        "app": name,
        "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "context_partitions": {"ByAcct": 2, "rises": 3},
        "statements": [
            # two stateless statements: one lane, one sequence for both
            {"name": "big", "epl": "select * from Withdrawal(amount >= 200)"},
            {"name": "small", "epl": "select account from Withdrawal(amount < 200)"},
            {"name": "ir", "epl": "select irstream count(*) as cnt, sum(amount) as total "
                                  "from Withdrawal#length(3)"},
            {"name": "hctx", "epl": "create context ByHash coalesce by "
                                    "consistent_hash_crc32(account) from Withdrawal "
                                    "granularity 4"},
            {"name": "per_bucket", "epl": "context ByHash select account, count(*) as n "
                                          "from Withdrawal"},
            {"name": "kctx", "epl": "create context ByAcct partition by account "
                                    "from Withdrawal"},
            {"name": "per_key", "epl": "context ByAcct select account, sum(amount) as s "
                                       "from Withdrawal"},
            {"name": "mctx", "epl": "create context InMain partition by account "
                                    "from Withdrawal"},
            {"name": "in_main", "epl": "context InMain select account, count(*) as n "
                                       "from Withdrawal#time(1 sec)"},
            # spread by its partition by: rows numbered per engine partition
            {"name": "rises", "epl": "select * from Withdrawal match_recognize (partition "
                                     "by account measures A.account as acct, A.amount as "
                                     "a, B.amount as b pattern (A B) define B as "
                                     "B.amount > A.amount)"},
        ],
    }


AMOUNTS = [100, 250, 300, 50, 500, 700, 20]
STEPS: list[dict] = [
    {"time": 1000},
    *({"send": "Withdrawal", "event": {"account": f"A{i % 3}", "amount": a}}
      for i, a in enumerate(AMOUNTS)),
    {"time": 1500},
    {"send": "Withdrawal", "event": {"account": "A1", "amount": 90}},
    {"time": 3000},
]


def by_id(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["statement"], r["context_partition"],
                                       int(r["id"].rsplit("/", 1)[1])))


def test_kepl_run_prints_the_rows_a_worker_writes(
        kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"same-{uuid.uuid4().hex[:8]}"
    doc = statement_file(name)
    f = tmp_path / "app.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    steps = tmp_path / "steps.jsonl"
    steps.write_text("".join(json.dumps(s) + "\n" for s in STEPS))
    assert main(["run", str(f), "--events", str(steps)]) == 0
    embedded = [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    config = AppConfig.from_dict(doc)
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    try:
        for s in STEPS:
            if "time" in s:
                kapp.advance(s["time"])
            else:
                kapp.send(s["send"], s["event"])
        kapp.settle()
        topics = sorted({config.output_topic(s) for s in kapp.topology.output_topics()})
        on_kafka = [r.as_dict() for r in read_rows(kafka_bootstrap, topics)]
    finally:
        kapp.close(graceful=False)
    assert {r["statement"] for r in embedded} == {
        "big", "small", "ir", "per_bucket", "per_key", "in_main", "rises"}
    assert by_id(embedded) == by_id(on_kafka)
    # the lane numbers big and small together; keyed rows are named by the key
    assert [r["id"] for r in by_id(embedded) if r["statement"] in ("big", "small")] == [
        "big/0/2", "big/0/3", "big/0/5", "big/0/6", "small/0/1", "small/0/4",
        "small/0/7", "small/0/8"]
    assert {r["context_partition"] for r in embedded if r["statement"] == "per_key"} == {
        "A0", "A1", "A2"}
    assert {(r["row"]["acct"], r["context_partition"]) for r in embedded
            if r["statement"] == "rises"} == {
        (k, str(zlib.crc32(k.encode()) % 3)) for k in ("A1", "A2")}  # A0 only falls

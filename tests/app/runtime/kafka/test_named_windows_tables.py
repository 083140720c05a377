"""Named windows and tables in Kafka mode: state in RocksDB, durable through the changelog.

The walk-through scenarios of named windows and tables pass on the real broker, also when
the worker is killed mid-scenario and started again; and the changelog records carry the
window's and the table's rows (so a worker on a new machine rebuilds them).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from app.conformance.runner import run_file
from app.runtime.kafka.config import MAIN_GROUP, AppConfig
from app.runtime.kafka.reader import RowReader
from app.runtime.kafka.recovery import KafkaChangelog
from app.runtime.kafka.runner import KafkaApp, run_scenario_kafka
from app.runtime.kafka.store import ChangelogRecord
from operators.state import decode_value, encode_key

pytestmark = pytest.mark.kafka

OWN = Path(__file__).resolve().parents[4] / "tests" / "scenarios"
CASES = [
    ("named_window_on_merge_walkthrough", None),
    ("named_window_context_nine_to_five", "after_flush:3"),
    ("table_on_merge_balances", "before_flush:2"),
    ("table_into_table_nine_to_five", "after_flush:2"),
    ("named_window_batch_consumers", "after_flush:2"),
]


@pytest.mark.parametrize(("name", "crash_at"), CASES, ids=[c[0] for c in CASES])
def test_scenario_on_broker(name: str, crash_at: str | None, kafka_bootstrap: str) -> None:
    outcome = run_file(OWN / f"{name}.yaml",
                       lambda doc: run_scenario_kafka(doc, kafka_bootstrap, crash_at))
    assert outcome.passed, outcome.detail


def changelog_records(bootstrap: str, topic: str) -> list[ChangelogRecord]:
    """Every committed record of partition 0 (transaction markers take offsets too)."""
    log = KafkaChangelog(bootstrap)
    return [ChangelogRecord.decode(v) for _, v in log.read(topic, 0, log.start(topic, 0))]


def test_window_and_table_rows_are_in_the_changelog(kafka_bootstrap: str) -> None:
    doc = yaml.safe_load((OWN / "table_on_merge_balances.yaml").read_text())
    name = f"nwt-{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({
        "app": name,
        "schemas": {"Deposit": {"account": "string", "amount": "double"}},
        "topics": {"Deposit": f"{name}.deposit"},
        "statements": [s for s in doc["statements"] if s["name"] != "read"] + [
            {"name": "win", "epl": "create window Last2#length(2) as Deposit"},
            {"name": "fill", "epl": "insert into Last2 select * from Deposit"},
        ],
    })
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    reader = RowReader(kafka_bootstrap, [config.output_topic("merge")])
    try:
        for acct, amt in (("A", 100.0), ("A", 50.0), ("B", 5.0)):
            kapp.send("Deposit", {"account": acct, "amount": amt})
        kapp.settle()
        rows = reader.read_available()
        assert [r.row for r in rows if r.stream == "remove"] == [
            {"account": "A", "balance": 100.0, "deposits": 1}]
        assert [r.row for r in rows if r.stream == "insert"] == [
            {"account": "A", "balance": 100.0, "deposits": 0},
            {"account": "A", "balance": 150.0, "deposits": 1},
            {"account": "B", "balance": 5.0, "deposits": 0},
        ]
        state: dict[bytes, bytes | None] = {}
        for rec in changelog_records(kafka_bootstrap, config.changelog_topic(MAIN_GROUP)):
            state.update(rec.writes)
        table = encode_key(("t", "Balances"))
        window = encode_key(("s", "win"))
        table_rows = sorted(str(decode_value(v)) for k, v in state.items()
                            if k.startswith(table) and v is not None)
        window_values = [decode_value(v) for k, v in state.items()
                         if k.startswith(window) and v is not None]
        assert len(table_rows) == 2 and "150.0" in table_rows[0] and "5.0" in table_rows[1]
        assert any("150.0" not in str(v) and "50.0" in str(v) for v in window_values)
        assert not any("100.0" in str(v) for v in window_values)  # left the length(2) window
    finally:
        reader.close()
        kapp.close(graceful=False)
        kapp.delete_topics()

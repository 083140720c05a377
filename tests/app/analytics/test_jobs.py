"""Spark analytics on a real broker: batch read, summary, Parquet export and the CLI.

Output-shaped records (JSON values, kepl headers) go to two output topics of a fresh
app in one committed transaction, with a replayed row (same ``kepl.id``); one more row
goes in an aborted transaction. Every job must show each id once and never the aborted
row.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import DataFrame, SparkSession

from app.analytics import cli
from app.analytics.jobs import output_topic_pattern, read_output, summary, to_parquet

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[3]

PARTITIONS = {"Alerts": 2, "Totals": 1}


@dataclass(frozen=True)
class Out:
    """One output record as a kepl worker would publish it."""

    statement: str
    partition: int
    stream: str
    context_partition: str
    runtime_ms: int
    row_id: str
    row: dict[str, Any]
    headers: bool = True  # False: a foreign record without kepl headers (kept as is)


COMMITTED = [
    Out("Alerts", 0, "insert", "p0", 1000, "Alerts/p0/1", {"sym": "A", "price": 12, "qty": 2}),
    Out("Alerts", 1, "insert", "p1", 1000, "Alerts/p1/1", {"sym": "B", "price": 12.5, "qty": 4}),
    Out("Alerts", 0, "insert", "p0", 2000, "Alerts/p0/2", {"sym": "A", "price": 11.5, "qty": 6}),
    # A crashed worker's replay: the same row again, with the same id.
    Out("Alerts", 0, "insert", "p0", 1000, "Alerts/p0/1", {"sym": "A", "price": 12, "qty": 2}),
    Out("Alerts", 0, "remove", "p0", 3000, "Alerts/p0/3", {"sym": "A", "price": 12, "qty": 2}),
    Out("Totals", 0, "insert", "", 3000, "Totals//1", {"n": 3, "label": "all", "ok": True}),
    Out("Totals", 0, "remove", "", 4000, "Totals//2", {"label": "all"}),
    # No kepl.id: never merged, even with an identical twin.
    Out("Totals", 0, "", "", 0, "", {"x": 1}, headers=False),
    Out("Totals", 0, "", "", 0, "", {"x": 1}, headers=False),
]
ABORTED = [Out("Alerts", 1, "insert", "p1", 5000, "Alerts/p1/2", {"sym": "Z", "price": 999})]

# (statement, stream, context_partition, runtime_ms, row_id, value as map<string,string>)
EXPECTED_ROWS = [
    (None, "insert", None, None, None, {"x": "1"}),
    (None, "insert", None, None, None, {"x": "1"}),
    ("Alerts", "insert", "p0", 1000, "Alerts/p0/1", {"sym": "A", "price": "12", "qty": "2"}),
    ("Alerts", "insert", "p0", 2000, "Alerts/p0/2", {"sym": "A", "price": "11.5", "qty": "6"}),
    ("Alerts", "remove", "p0", 3000, "Alerts/p0/3", {"sym": "A", "price": "12", "qty": "2"}),
    ("Alerts", "insert", "p1", 1000, "Alerts/p1/1", {"sym": "B", "price": "12.5", "qty": "4"}),
    ("Totals", "insert", "", 3000, "Totals//1", {"n": "3", "label": "all", "ok": "true"}),
    ("Totals", "remove", "", 4000, "Totals//2", {"label": "all"}),
]

# (statement, stream, rows, column, values, min, max, avg)
EXPECTED_SUMMARY = [
    (None, "insert", 2, "x", 2, 1.0, 1.0, 1.0),
    ("Alerts", "insert", 3, "price", 3, 11.5, 12.5, 12.0),
    ("Alerts", "insert", 3, "qty", 3, 2.0, 6.0, 4.0),
    ("Alerts", "remove", 1, "price", 1, 12.0, 12.0, 12.0),
    ("Alerts", "remove", 1, "qty", 1, 2.0, 2.0, 2.0),
    ("Totals", "insert", 1, "n", 1, 3.0, 3.0, 3.0),
    ("Totals", "remove", 1, None, None, None, None, None),
]


def _topic(app: str, statement: str) -> str:
    """The output topic of a statement (``kepl.<app>.out.<statement>``)."""
    return f"kepl.{app}.out.{statement}"


def _new_app(bootstrap: str) -> str:
    """A fresh app name with its output topics created."""
    app = f"spark{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(_topic(app, s), num_partitions=n, replication_factor=1)
              for s, n in PARTITIONS.items()]
    for future in admin.create_topics(topics).values():
        future.result(timeout=30)
    return app


def _produce(bootstrap: str, app: str, committed: list[Out], aborted: list[Out]) -> None:
    """Publish one committed transaction, then one aborted transaction."""
    producer = Producer({"bootstrap.servers": bootstrap,
                         "transactional.id": f"kepl-spark-test-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    for records, commit in ((committed, True), (aborted, False)):
        producer.begin_transaction()
        for out in records:
            # as a worker writes them: keyed by the context partition, the statement
            # inside the id, the stream only on a remove row
            headers = [
                ("kepl.id", out.row_id.encode()),
                ("kepl.time", str(out.runtime_ms).encode()),
            ] + ([("kepl.stream", b"remove")] if out.stream == "remove" else []) \
                if out.headers else None
            producer.produce(_topic(app, out.statement), json.dumps(out.row).encode(),
                             key=out.context_partition.encode() if out.headers else None,
                             partition=out.partition, headers=headers)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    """The comparable part of output rows, in row-id order (rows without one first)."""
    got = [(r.statement, r.stream, r.context_partition, r.runtime_ms, r.row_id, r.value)
           for r in df.collect()]
    return sorted(got, key=_by_id)


def _by_id(row: tuple[Any, ...]) -> str:
    """Sort key of an expected or actual row: its row id ("" when it has none)."""
    return row[4] or ""


def _summary_rows(df: DataFrame) -> list[tuple[Any, ...]]:
    """Summary rows as tuples, in the order the job sorts them."""
    return [tuple(r) for r in df.collect()]


@pytest.fixture(scope="module")
def app(kafka_bootstrap: str) -> str:
    """An app whose output topics hold ``COMMITTED`` (and the aborted ``ABORTED``)."""
    name = _new_app(kafka_bootstrap)
    _produce(kafka_bootstrap, name, COMMITTED, ABORTED)
    return name


def test_read_output_drops_repeats_and_aborted_rows(
    spark: SparkSession, kafka_bootstrap: str, app: str
) -> None:
    df = read_output(spark, kafka_bootstrap, pattern=output_topic_pattern(app))
    assert _rows(df) == EXPECTED_ROWS
    kept = df.where("row_id = 'Alerts/p0/1'").select("topic", "partition", "offset").collect()
    assert [tuple(r) for r in kept] == [(_topic(app, "Alerts"), 0, 0)]  # the first copy


def test_read_output_with_a_schema(spark: SparkSession, kafka_bootstrap: str, app: str) -> None:
    df = read_output(spark, kafka_bootstrap, [_topic(app, "Alerts")],
                     schema="sym string, price double, qty long")
    got = sorted((r.row_id, r.value.sym, r.value.price, r.value.qty) for r in df.collect())
    assert got == [
        ("Alerts/p0/1", "A", 12.0, 2),
        ("Alerts/p0/2", "A", 11.5, 6),
        ("Alerts/p0/3", "A", 12.0, 2),
        ("Alerts/p1/1", "B", 12.5, 4),
    ]


def test_summary(spark: SparkSession, kafka_bootstrap: str, app: str) -> None:
    rows = read_output(spark, kafka_bootstrap, pattern=output_topic_pattern(app))
    assert _summary_rows(summary(rows)) == EXPECTED_SUMMARY


def test_to_parquet_dedupes_across_restarts(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    app = _new_app(kafka_bootstrap)
    _produce(kafka_bootstrap, app, COMMITTED, ABORTED)
    path, checkpoint = str(tmp_path / "rows"), str(tmp_path / "checkpoint")

    def export() -> list[tuple[Any, ...]]:
        query = to_parquet(spark, kafka_bootstrap, path, checkpoint,
                           pattern=output_topic_pattern(app), available_now=True)
        assert query.awaitTermination(120), "availableNow export did not finish"
        assert query.exception() is None
        return _rows(spark.read.parquet(path))

    assert export() == EXPECTED_ROWS
    assert _summary_rows(summary(spark.read.parquet(path))) == EXPECTED_SUMMARY

    # Restart from the checkpoint: a new row and a late replay of an exported one.
    new = Out("Alerts", 1, "insert", "p1", 6000, "Alerts/p1/2", {"sym": "B", "price": 13})
    _produce(kafka_bootstrap, app, [new, COMMITTED[2]], [])
    assert export() == sorted(
        [*EXPECTED_ROWS, ("Alerts", "insert", "p1", 6000, "Alerts/p1/2",
                          {"sym": "B", "price": "13"})],
        key=_by_id,
    )


def test_cli_read_and_summary(
    spark: SparkSession, kafka_bootstrap: str, app: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--bootstrap", kafka_bootstrap, "--app", app, "--json"]
    assert cli.main(["read", *base]) == 0
    read = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r.get("row_id", "") for r in read) == [_by_id(r) for r in EXPECTED_ROWS]

    assert cli.main(["summary", *base]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    fields = ("statement", "stream", "rows", "column", "values", "min", "max", "avg")
    assert [tuple(d.get(f) for f in fields) for d in lines] == EXPECTED_SUMMARY
    assert not spark.sparkContext._jsc.sc().isStopped()  # the CLI left our session running


IVY_AND_JVM = (":: loading settings", "Ivy Default Cache set to", "The jars for the packages",
               ":: resolving dependencies", "confs: [default]", "found org.apache",
               ":: resolution report ::", ":: retrieving ::", "artifacts copied",
               "WARNING:", " WARN ")


def _spark_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """``kepl spark ...`` in a process of its own (its own JVM), stdout and stderr piped."""
    return subprocess.run([sys.executable, "-m", "app.cli.main", "spark", *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)


def test_cli_output_is_the_rows_alone_unless_verbose(kafka_bootstrap: str, app: str) -> None:
    """Ivy's resolution report and the JVM's warnings stay out of a command's output
    (stdout and stderr) unless --verbose; the JVM's log file goes when Spark stops."""
    base = ["read", "--bootstrap", kafka_bootstrap, "--app", app, "--json"]
    quiet = _spark_cli(*base)
    assert (quiet.returncode, quiet.stderr) == (0, "")
    read = [json.loads(line) for line in quiet.stdout.splitlines()]
    assert sorted(r.get("row_id", "") for r in read) == [_by_id(r) for r in EXPECTED_ROWS]
    assert not [line for line in quiet.stdout.splitlines()
                if any(m in line for m in IVY_AND_JVM)]

    loud = _spark_cli(*base, "--verbose")
    assert loud.returncode == 0, loud.stderr
    assert loud.stdout == quiet.stdout
    assert "Ivy Default Cache set to" in loud.stderr
    assert ":: resolving dependencies ::" in loud.stderr

"""A worker on a real broker: exact output rows and headers for the reference statements."""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterator

import pytest

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import OutputRow, RowReader, read_rows
from app.runtime.kafka.runner import KafkaApp

pytestmark = pytest.mark.kafka

SCHEMAS = {"Withdrawal": {"account": "string", "amount": "double"}}
AMOUNTS = [100, 250, 300, 50, 500, 700, 20]


@pytest.fixture(scope="module")
def app(kafka_bootstrap: str) -> Iterator[KafkaApp]:
    """One worker running the three statements, fed the Esper ref. 2 walk-through amounts."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({
        "app": name,
        "schemas": SCHEMAS,
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "statements": [
            {"name": "big", "epl": "select * from Withdrawal(amount >= 200)"},
            {"name": "cnt", "epl": "select count(*) as cnt, sum(amount) as total "
                                   "from Withdrawal#length(5)"},
            {"name": "ir", "epl": "select irstream count(*) as cnt, sum(amount) as total "
                                  "from Withdrawal#length(5)", "output_topic": f"{name}.ir"},
            {"name": "hctx", "epl": "create context ByAccount coalesce by "
                                    "consistent_hash_crc32(account) from Withdrawal "
                                    "granularity 4"},
            {"name": "per_acct", "epl": "context ByAccount select account, count(*) as n "
                                        "from Withdrawal"},
        ],
    })
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    kapp.advance(1000)
    for i, amount in enumerate(AMOUNTS):
        kapp.send("Withdrawal", {"account": f"A{i % 3}", "amount": amount})
    kapp.advance(2500)
    kapp.settle()
    yield kapp
    kapp.close()


def rows_of(kapp: KafkaApp, statement: str) -> list[OutputRow]:
    return list(read_rows(kapp.bootstrap, kapp.config.output_topic(statement)))


def test_topics_are_named_by_the_app(app: KafkaApp) -> None:
    c = app.config
    assert c.output_topic("big") == f"kepl.{c.app}.out.big"
    assert c.output_topic("ir") == f"{c.app}.ir"
    assert c.repartition_topic("main") == f"kepl.{c.app}.repartition.main"
    assert c.dlq_topic == f"kepl.{c.app}.dlq"
    assert set(app.topology.groups) == {"main", "ByAccount"}


def test_filter_rows_and_headers(app: KafkaApp) -> None:
    rows = rows_of(app, "big")
    assert [r.row for r in rows] == [
        {"account": "A1", "amount": 250.0},
        {"account": "A2", "amount": 300.0},
        {"account": "A1", "amount": 500.0},
        {"account": "A2", "amount": 700.0},
    ]
    assert [r.id for r in rows] == ["big/0/1", "big/0/2", "big/0/3", "big/0/4"]
    assert {(r.statement, r.stream, r.context_partition, r.time_ms) for r in rows} == {
        ("big", "insert", "0", 1000)}


def test_length_window_count_sum(app: KafkaApp) -> None:
    rows = rows_of(app, "cnt")
    assert [r.row for r in rows] == [
        {"cnt": 1, "total": 100.0},
        {"cnt": 2, "total": 350.0},
        {"cnt": 3, "total": 650.0},
        {"cnt": 4, "total": 700.0},
        {"cnt": 5, "total": 1200.0},
        {"cnt": 5, "total": 1800.0},  # W1 (100) leaves as W6 (700) enters
        {"cnt": 5, "total": 1570.0},
    ]
    assert [r.stream for r in rows] == ["insert"] * 7
    assert [r.id for r in rows] == [f"cnt/0/{i}" for i in range(1, 8)]


def test_irstream_insert_and_remove(app: KafkaApp) -> None:
    rows = rows_of(app, "ir")
    got = [(r.stream, r.row["cnt"], r.row["total"]) for r in rows]
    assert got == [
        ("insert", 1, 100.0), ("remove", 0, None),
        ("insert", 2, 350.0), ("remove", 1, 100.0),
        ("insert", 3, 650.0), ("remove", 2, 350.0),
        ("insert", 4, 700.0), ("remove", 3, 650.0),
        ("insert", 5, 1200.0), ("remove", 4, 700.0),
        ("insert", 5, 1800.0), ("remove", 5, 1200.0),
        ("insert", 5, 1570.0), ("remove", 5, 1800.0),
    ]
    assert [r.id for r in rows] == [f"ir/0/{i}" for i in range(1, 15)]
    assert all(r.topic == f"{app.config.app}.ir" and r.time_ms == 1000 for r in rows)


def test_hash_context_rows_land_in_the_crc32_partition(app: KafkaApp) -> None:
    """Context partition = Kafka partition = crc32(account) mod 4; counts per bucket."""
    rows = rows_of(app, "per_acct")
    expected: dict[int, list[dict]] = {}
    for i in range(len(AMOUNTS)):
        account = f"A{i % 3}"
        lane = expected.setdefault(zlib.crc32(account.encode()) % 4, [])
        lane.append({"account": account, "n": len(lane) + 1})
    got: dict[int, list[dict]] = {}
    for r in rows:
        got.setdefault(r.partition, []).append(r.row)
        assert r.context_partition == str(r.partition)
    assert got == expected
    for bucket, lane in expected.items():
        ids = [r.id for r in rows if r.partition == bucket]
        assert ids == [f"per_acct/{bucket}/{i}" for i in range(1, len(lane) + 1)]


def test_watermark_moves_time_and_reports_progress(app: KafkaApp) -> None:
    """A time step after the events: progress names the last barrier of each partition."""
    # the filter runs in the source partition's lane, the window in main, read in place
    assert app.progress.latest.keys() == {"main/0", *(f"ByAccount/{p}" for p in range(4)),
                                          f"lanes/{app.config.topic_of('Withdrawal')}:0"}
    reader = RowReader(app.bootstrap, [app.config.output_topic("cnt")])
    before = reader.read_available()
    app.advance(5000)
    app.send("Withdrawal", {"account": "A0", "amount": 1})
    app.settle()
    after = reader.read_available()
    reader.close()
    assert len(before) == 7
    assert [(r.row, r.time_ms, r.id) for r in after] == [
        ({"cnt": 5, "total": 1271.0}, 5000, "cnt/0/8")]  # 300 leaves, 1 enters

"""No record stops a worker, and no dead-lettered record is counted.

Good events go to a source topic with one poison record of each kind between them:
records that decode but cannot be written out again, kepl headers and control records
that are malformed or unknown.  Every poison record lands on the dead-letter topic with
its reason, the worker keeps running, and every statement (a lane, a direct aggregate, a
routed keyed context) counts the good events only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.router import headers_dict
from app.runtime.kafka.runner import KafkaApp
from tests.app.runtime.kafka.test_dlq import dead_letters

pytestmark = pytest.mark.kafka

GOOD = 120
DEEP = b'{"t": ' + b"[" * 10_000 + b"]" * 10_000 + b', "id": "w"}'

# (value, headers, the reason on the dead-letter topic)
POISON: list[tuple[bytes | None, list[tuple[str, bytes | None]], str]] = [
    (b'{"k": "B\\ud800", "v": 1}', [],
     "T: string 'B\\ud800' holds a lone surrogate (not Unicode text)"),
    (b'{"k": "A", "v": 1}', [("kepl.seq", b"abc")],
     "header kepl.seq must be a 64-bit integer, got b'abc'"),
    (b'{"k": "A", "v": 1}', [("kepl.seq", b"99999999999999999999999")],
     "header kepl.seq must be a 64-bit integer, got b'99999999999999999999999'"),
    (b'{"t": 1e999, "id": "w"}', [("kepl.control", b"watermark")],
     "malformed watermark: t must be a 64-bit integer (ms), got inf"),
    (DEEP, [("kepl.control", b"watermark")], "malformed watermark: nested too deeply"),
    (b'{"t": 123456789012345678901234567890, "id": "w"}', [("kepl.control", b"watermark")],
     "malformed watermark: t must be a 64-bit integer (ms), got 1.2345678901234568e+29"),
    (b'{"t": 5, "id": {"x": 1}}', [("kepl.control", b"watermark")],
     "malformed watermark: id must be a string, got {'x': 1}"),
    (b"[1]", [("kepl.control", b"watermark")],
     'malformed watermark: must be an object {"t": ms, "id": text}'),
    (b'{"k": "A", "v": 1}', [("kepl.control", b"xyz")],
     "unknown kepl.control 'xyz' (known: watermark)"),
    (b'{"k": "A", "v": 1}', [("kepl.control", None)],
     "unknown kepl.control '' (known: watermark)"),
    (b'{"k": "A", "v": 1}', [("kepl.frobnicate", b"1")],
     "unknown header 'kepl.frobnicate' (kepl.* headers are kepl's own)"),
    (b'{"k": "A", "v": 99999999999999999999}', [],
     "T.v is out of range for a long (64-bit signed), got 1e+20"),
]


@pytest.fixture(scope="module")
def app(kafka_bootstrap: str) -> Iterator[KafkaApp]:
    name = f"poison-{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({
        "app": name,
        "schemas": {"T": {"k": "string", "v": "long"}},
        "topics": {"T": f"{name}.t"},
        "context_partitions": {"ByK": 2},
        "statements": [
            {"name": "lane", "epl": "select k, v from T"},
            {"name": "total", "epl": "select count(*) as n, sum(v) as total from T"},
            {"name": "ctx", "epl": "create context ByK partition by k from T"},
            {"name": "per_k", "epl": "context ByK select k, count(*) as n, sum(v) as total "
                                     "from T"},
        ],
    })
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    topic = config.topic_of("T")
    every = GOOD // len(POISON)
    for i in range(GOOD):
        kapp.send("T", {"k": f"k{i % 3}", "v": i})
        if i % every == 0 and i // every < len(POISON):
            value, headers, _ = POISON[i // every]
            kapp.producer.produce(topic, value, headers=headers, partition=0)
    kapp.settle()
    yield kapp
    kapp.close()


def test_each_poison_record_is_a_dead_letter_with_its_reason(app: KafkaApp) -> None:
    got = [headers_dict(m.headers())["kepl.error"].decode()
           for m in dead_letters(app.bootstrap, app.config.dlq_topic)]
    assert got == [reason for _, _, reason in POISON]
    assert app.worker.alive()


def test_statements_count_the_good_events_only(app: KafkaApp) -> None:
    lane = [r.row for r in read_rows(app.bootstrap, app.config.output_topic("lane"))]
    assert lane == [{"k": f"k{i % 3}", "v": i} for i in range(GOOD)]
    total = [r.row for r in read_rows(app.bootstrap, app.config.output_topic("total"))]
    assert len(total) == GOOD
    assert total[-1] == {"n": GOOD, "total": sum(range(GOOD))}
    per_k = {}
    for r in read_rows(app.bootstrap, app.config.output_topic("per_k")):
        per_k[r.row["k"]] = r.row
    assert per_k == {f"k{j}": {"k": f"k{j}", "n": len(range(j, GOOD, 3)),
                               "total": sum(range(j, GOOD, 3))} for j in range(3)}

"""No record stops a worker, and no dead-lettered record is counted.

Good events go to a source topic with one poison record of each kind between them:
records that decode but cannot be written out again, kepl headers and control records
that are malformed or unknown.  Every poison record lands on the dead-letter topic with
its reason, the worker keeps running, and every statement (a lane, a direct aggregate, a
routed keyed context) counts the good events only.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.router import KNOWN_HEADERS, headers_dict
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


_KNOWN = sorted(KNOWN_HEADERS)
_bytes = st.one_of(st.none(), st.binary(max_size=24),
                   st.sampled_from([b"watermark", b"1", b"-1", b"abc", b"\xff\xfe", b""]))
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8)
_watermark_body = st.one_of(
    st.binary(max_size=40),
    st.builds(lambda t, i: json.dumps({"t": t, "id": i}).encode(), _json, _json),
    st.builds(lambda d: json.dumps(d).encode(), _json))
_event_body = st.one_of(
    st.binary(max_size=40),
    st.builds(lambda k, v: json.dumps({"k": k, "v": v}).encode(), _json, _json))


@st.composite
def _never_an_event(draw: st.DrawFn) -> tuple[bytes | None, list[tuple[str, bytes | None]]]:
    """A record with at least one kepl header or control body that keeps it from being an
    event (a control record, an unknown kepl.* header, a kepl.seq that is no number),
    among other headers of any name and value."""
    other = draw(st.lists(st.tuples(st.one_of(st.sampled_from(_KNOWN), st.text(max_size=12)),
                                    _bytes), max_size=3))
    other = [(k, v) for k, v in other if k not in ("kepl.control", "kepl.seq")
             and not (k.startswith("kepl.") and k not in KNOWN_HEADERS)]
    kind = draw(st.sampled_from(["watermark", "control", "header", "seq"]))
    if kind == "watermark":
        return draw(_watermark_body), [*other, ("kepl.control", b"watermark")]
    body = draw(_event_body)
    if kind == "control":
        value = draw(_bytes.filter(lambda b: b != b"watermark"))
        return body, [*other, ("kepl.control", value)]
    if kind == "header":
        name = "kepl." + draw(st.text(min_size=1, max_size=10).filter(
            lambda s: "kepl." + s not in KNOWN_HEADERS))
        return body, [*other, (name, draw(_bytes))]
    seq = draw(st.one_of(st.binary(max_size=8), st.text(max_size=8).map(str.encode)).filter(
        lambda b: not b.strip().lstrip(b"+-").replace(b"_", b"").isdigit()))
    return body, [*other, ("kepl.seq", seq)]


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(records=st.lists(_never_an_event(), min_size=30, max_size=60))
def test_fuzzed_headers_and_control_bodies_never_stop_the_worker(
        app: KafkaApp, records: list[tuple[bytes | None, list[tuple[str, bytes | None]]]]
) -> None:
    topic = app.config.topic_of("T")
    before = _count(app)
    for i, (value, headers) in enumerate(records):
        app.producer.produce(topic, value, headers=headers, partition=0)
        app.send("T", {"k": "fuzz", "v": i})
    app.settle()
    assert app.worker.alive()
    assert _count(app) == before + len(records)


def _count(app: KafkaApp) -> int:
    rows = [r.row for r in read_rows(app.bootstrap, app.config.output_topic("total"))]
    return rows[-1]["n"] if rows else 0

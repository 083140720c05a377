"""Bad source records go to the dead-letter topic, with the reason; the worker goes on."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.router import headers_dict
from app.runtime.kafka.runner import KafkaApp

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def app(kafka_bootstrap: str) -> Iterator[KafkaApp]:
    name = f"dlq-{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({
        "app": name,
        "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "statements": [{"name": "all", "epl": "select * from Withdrawal"}],
    })
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    kapp.send("Withdrawal", b"this is not json")  # offset 0
    kapp.send("Withdrawal", {"account": "A1", "amount": "lots"})  # offset 1
    kapp.send("Withdrawal", b"[1, 2]")  # offset 2
    kapp.send("Withdrawal", {"account": "A2", "amount": 12, "colour": "red"})  # offset 3
    kapp.send("Withdrawal", {"account": "A3", "amount": 250})  # offset 4: good
    kapp.send("Withdrawal", b'{"account": "A4", "amount": NaN}')  # offset 5
    kapp.send("Withdrawal", b'{"account": "A5", "amount": 1e999}')  # offset 6
    kapp.send("Withdrawal", b'{"account": "A6", "amount": -Infinity}')  # offset 7
    kapp.send("Withdrawal", {"account": "A7", "amount": 5})  # offset 8: good
    kapp.settle()
    yield kapp
    kapp.close()


def dead_letters(bootstrap: str, topic: str) -> list[Message]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kepl-test-dlq",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[Message] = []
    try:
        while True:
            m = consumer.poll(10)
            assert m is not None, "no EOF from the dead-letter topic"
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF
                return out
            out.append(m)
    finally:
        consumer.close()


def test_bad_records_land_on_the_dlq_with_the_reason(app: KafkaApp) -> None:
    src = app.config.topic_of("Withdrawal")
    got = [(m.value(), headers_dict(m.headers())) for m in
           dead_letters(app.bootstrap, app.config.dlq_topic)]
    reasons = [(v, h["kepl.error"].decode(), h["kepl.source"].decode()) for v, h in got]
    assert reasons == [
        (b"this is not json", "not JSON: Expecting value: line 1 column 1 (char 0)",
         f"{src}/0/0"),
        (b'{"account": "A1", "amount": "lots"}',
         "Withdrawal.amount must be a double, got 'lots'", f"{src}/0/1"),
        (b"[1, 2]", "an event of Withdrawal must be a JSON object", f"{src}/0/2"),
        (b'{"account": "A2", "amount": 12, "colour": "red"}',
         "Withdrawal has no property 'colour'", f"{src}/0/3"),
        (b'{"account": "A4", "amount": NaN}',
         "Withdrawal.amount must be a finite double, got nan", f"{src}/0/5"),
        (b'{"account": "A5", "amount": 1e999}',
         "Withdrawal.amount must be a finite double, got inf", f"{src}/0/6"),
        (b'{"account": "A6", "amount": -Infinity}',
         "Withdrawal.amount must be a finite double, got -inf", f"{src}/0/7"),
    ]
    assert all(h["kepl.seq"] for _, h in got)  # the original headers are kept


def test_the_worker_goes_on_with_the_next_good_record(app: KafkaApp) -> None:
    rows = list(read_rows(app.bootstrap, app.config.output_topic("all")))
    assert [(r.row, r.id) for r in rows] == [({"account": "A3", "amount": 250.0}, "all/0/1"),
                                             ({"account": "A7", "amount": 5.0}, "all/0/2")]
    assert app.worker.alive()


def test_the_worker_log_names_each_dead_letter_and_the_topic(app: KafkaApp) -> None:
    src = app.config.topic_of("Withdrawal")
    dlq = app.config.dlq_topic
    deadline = time.monotonic() + 10
    while True:
        log = app.worker.log_path.read_text().splitlines()
        lines = [line.split(" ", 2)[2] for line in log if " dead letter" in line]
        if len(lines) >= 6 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    # at most five a second, the rest summed up: seven bad records in one batch
    assert lines == [
        f"kepl.worker WARNING dead letter {src}/0/0 to {dlq}: not JSON: Expecting value: "
        "line 1 column 1 (char 0)",
        f"kepl.worker WARNING dead letter {src}/0/1 to {dlq}: Withdrawal.amount must be a "
        "double, got 'lots'",
        f"kepl.worker WARNING dead letter {src}/0/2 to {dlq}: an event of Withdrawal must "
        "be a JSON object",
        f"kepl.worker WARNING dead letter {src}/0/3 to {dlq}: Withdrawal has no property "
        "'colour'",
        f"kepl.worker WARNING dead letter {src}/0/5 to {dlq}: Withdrawal.amount must be a "
        "finite double, got nan",
        f"kepl.worker WARNING 2 more dead letter(s) to {dlq} in the last second",
    ]


def test_a_string_over_the_limit_is_a_dead_letter(kafka_bootstrap: str) -> None:
    name = f"dlq-{uuid.uuid4().hex[:8]}"
    config = AppConfig.from_dict({
        "app": name, "max_string_length": {"Withdrawal": 8},
        "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "statements": [{"name": "all", "epl": "select * from Withdrawal"}],
    })
    assert AppConfig.from_dict(config.to_dict()) == config  # what the worker reads
    kapp = KafkaApp(config, kafka_bootstrap, start=True)
    try:
        kapp.send("Withdrawal", {"account": "A" * 9, "amount": 1.0})
        kapp.send("Withdrawal", {"account": "A" * 8, "amount": 2.0})
        kapp.settle()
        got = [headers_dict(m.headers())["kepl.error"].decode()
               for m in dead_letters(kafka_bootstrap, config.dlq_topic)]
        assert got == ["Withdrawal.account holds 9 characters, more than the limit of 8 "
                       "(max_string_length)"]
        rows = list(read_rows(kafka_bootstrap, config.output_topic("all")))
        assert [r.row for r in rows] == [{"account": "AAAAAAAA", "amount": 2.0}]
    finally:
        kapp.close()

"""Input deleted before a worker read it (retention, DeleteRecords) is said, counted and
skipped, or stops the worker when the app says ``on_lost_input: stop``."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.ops import app_status, render_status
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.runner import KafkaApp

pytestmark = pytest.mark.kafka


def _config(policy: str | None = None) -> AppConfig:
    name = f"lost-{uuid.uuid4().hex[:8]}"
    return AppConfig.from_dict({
        "app": name,
        "schemas": {"T": {"k": "string", "v": "long"}},
        "topics": {"T": f"{name}.t"},
        **({"on_lost_input": policy} if policy else {}),
        "statements": [
            {"name": "lane", "epl": "select k, v from T"},
            {"name": "total", "epl": "select count(*) as n, sum(v) as total from T"},
        ],
    })


def _delete_before(bootstrap: str, topic: str, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(topic, 0, offset)],
                                    operation_timeout=30).values():
        fut.result()


def _log_lines(app: KafkaApp, text: str) -> list[str]:
    return [line.split(" ", 2)[2] for line in app.worker.log_path.read_text().splitlines()
            if text in line]


def _send(app: KafkaApp, values: range) -> None:
    for v in values:
        app.send("T", {"k": f"e{v}", "v": v})
    app.producer.flush(10)


def test_records_deleted_while_the_worker_was_down_are_said_counted_and_skipped(
        kafka_bootstrap: str) -> None:
    app = KafkaApp(_config(), kafka_bootstrap, start=True)
    topic = app.config.topic_of("T")
    try:
        _send(app, range(3))  # offsets 0-2
        app.settle()  # its watermark: offset 3
        app.worker.stop()
        _send(app, range(3, 9))  # offsets 4-9
        _delete_before(kafka_bootstrap, topic, 8)  # 4-7 go unread
        app.worker.start()
        app.settle()
        lane = [r.row["v"] for r in read_rows(kafka_bootstrap, app.config.output_topic("lane"))]
        assert lane == [0, 1, 2, 7, 8]
        total = [r.row for r in read_rows(kafka_bootstrap, app.config.output_topic("total"))]
        assert total[-1] == {"n": 5, "total": 0 + 1 + 2 + 7 + 8}
        assert _log_lines(app, "input lost") == [
            f"kepl.worker ERROR input lost: {topic}[0] offsets 4..7 (4 record(s)) were "
            "deleted before they were read (retention or DeleteRecords); continuing from "
            "offset 8"]
        assert app.worker.alive()
        st = app_status(app.config, kafka_bootstrap, lambda bootstrap, topic: None)
        assert [(d["topic"], d["partition"], d["lost"]) for d in st["lag"]
                if d["topic"] == topic] == [(topic, 0, 4)]
        assert f"input lost (deleted before the app read it: retention or DeleteRecords): " \
               f"{topic}[0] 4" in render_status(st)
    finally:
        app.close()


def test_records_deleted_while_the_worker_runs_are_said_and_skipped(
        kafka_bootstrap: str) -> None:
    app = KafkaApp(_config(), kafka_bootstrap, start=True)
    topic = app.config.topic_of("T")
    try:
        _send(app, range(2))  # offsets 0-1
        app.settle()  # offset 2
        assert app.worker.proc is not None
        os.kill(app.worker.proc.pid, signal.SIGSTOP)  # it cannot read what comes now
        time.sleep(0.5)  # its last fetch request, answered empty meanwhile
        try:
            _send(app, range(2, 7))  # offsets 3-7
            _delete_before(kafka_bootstrap, topic, 6)  # 3-5 go unread
        finally:
            os.kill(app.worker.proc.pid, signal.SIGCONT)
        app.settle()
        lane = [r.row["v"] for r in read_rows(kafka_bootstrap, app.config.output_topic("lane"))]
        assert lane == [0, 1, 5, 6]
        assert _log_lines(app, "input lost") == [
            f"kepl.worker ERROR input lost: {topic}[0] offsets 3..5 (3 record(s)) were "
            "deleted before they were read (retention or DeleteRecords); continuing from "
            "offset 6"]
    finally:
        app.close()


def test_on_lost_input_stop_says_so_and_exits(kafka_bootstrap: str) -> None:
    app = KafkaApp(_config("stop"), kafka_bootstrap, start=True)
    topic = app.config.topic_of("T")
    try:
        _send(app, range(2))
        app.settle()  # offset 2
        app.worker.stop()
        _send(app, range(2, 5))  # offsets 3-5
        _delete_before(kafka_bootstrap, topic, 5)
        app.worker.start()
        assert app.worker.proc is not None
        assert app.worker.proc.wait(60) == 4
        deadline = time.monotonic() + 5
        while not _log_lines(app, "input lost") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _log_lines(app, "input lost") == [
            f"kepl.worker CRITICAL input lost: {topic}[0] offsets 3..4 (2 record(s)) were "
            "deleted before they were read; on_lost_input: stop"]
    finally:
        app.close()

"""``kepl status`` says which version runs, whether its file is that version, and which
workers still run another one (their client id names it)."""

from __future__ import annotations

from typing import Any

from app.runtime.kafka.loop import consumer_config, version_client_id
from app.runtime.kafka.ops import render_status


def doc(version: dict[str, Any] | None, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {"app": "shop", "bootstrap": "b:9092", "version": version,
            "statements": [{"name": "s", "output_topic": "kepl.shop.out.s"}],
            "topics": [{"role": "input", "topic": "orders", "partitions": 1}],
            "group": {"id": "kepl.shop", "state": "stable", "members": members},
            "lag": [], "total_lag": 0, "watermark": {"topic": "w", "last": None},
            "dlq": {"topic": "d", "records": 0}, "changelogs": [], "state_dirs": None}


def member(version: int | None) -> dict[str, Any]:
    return {"member_id": "m", "instance_id": f"w{version}", "host": "/h",
            "client_id": "rdkafka" if version is None else version_client_id("shop", version),
            "partitions": ["orders[0]"], "version": version}


def test_the_running_version_and_workers_on_another() -> None:
    lines = render_status(doc({"recorded": 2, "topic": "kepl.shop.deployments",
                               "file_is_recorded": False, "others": [1]},
                              [member(1), member(2)]))
    assert lines[:2] == [
        "app shop at b:9092",
        "version: 2 runs (kepl.shop.deployments); this file differs from it (kepl deploy "
        "FILE --plan shows how)"]
    assert lines[2] == (
        "  workers on version 1 are in the group: they leave by themselves once they see "
        "version 2; restart them with its file (the chart's rolling restart does)")
    assert "  w1 (kepl.shop.v1 on /h, version 1): orders[0]" in lines
    assert "  w2 (kepl.shop.v2 on /h, version 2): orders[0]" in lines


def test_no_version_recorded() -> None:
    lines = render_status(doc(None, [member(None)]))
    assert lines[1] == "version: none recorded (kepl deploy FILE records one)"
    assert "  wNone (rdkafka on /h): orders[0]" in lines


def test_the_worker_names_its_version_in_its_client_id() -> None:
    assert consumer_config("b", "shop", "i", 3)["client.id"] == "kepl.shop.v3"
    assert "client.id" not in consumer_config("b", "shop", "i")

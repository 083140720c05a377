"""``kepl status`` says which version runs, whether its file is that version, and which
engine partitions a worker of another version checkpointed last (every changelog record
carries the version of the worker that wrote it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.runtime.kafka.ops import render_status
from app.runtime.kafka.partition import EnginePartition
from app.runtime.kafka.store import ChangelogRecord
from tests.app.runtime.kafka.fakes import UP, TruncLog
from tests.app.runtime.kafka.test_partition_resets import events, group, run


def doc(version: dict[str, Any] | None, changelogs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"app": "shop", "bootstrap": "b:9092", "version": version,
            "statements": [{"name": "s", "output_topic": "kepl.shop.out.s"}],
            "topics": [{"role": "input", "topic": "orders", "partitions": 1}],
            "group": {"id": "kepl.shop", "state": "stable", "members": []},
            "lag": [], "total_lag": 0, "watermark": {"topic": "w", "last": None},
            "dlq": {"topic": "d", "records": 0}, "changelogs": changelogs,
            "state_dirs": None}


def changelog(p: int, version: int | None) -> dict[str, Any]:
    return {"topic": "kepl.shop.changelog.main", "partition": p, "start": 0, "end": 9,
            "snapshot": None, "late": 0, "version": version}


def test_the_running_version_and_partitions_of_another() -> None:
    lines = render_status(doc({"recorded": 2, "topic": "kepl.shop.deployments",
                               "file_is_recorded": False,
                               "others": [{"partition": "kepl.shop.changelog.main[1]",
                                           "version": 1}]},
                              [changelog(0, 2), changelog(1, 1)]))
    assert lines[:3] == [
        "app shop at b:9092",
        "version: 2 runs (kepl.shop.deployments); this file differs from it (kepl deploy "
        "FILE --plan shows how)",
        "  last checkpointed by a worker of another version: kepl.shop.changelog.main[1] "
        "(version 1); workers on an older version leave by themselves once they see "
        "version 2, and a worker of version 2 (the chart's rolling restart starts them) "
        "checkpoints each partition once it loads it"]
    assert lines[-2:] == [
        "changelog kepl.shop.changelog.main[0]: offsets 0..9, no snapshot, version 2",
        "changelog kepl.shop.changelog.main[1]: offsets 0..9, no snapshot, version 1"]


def test_no_version_recorded() -> None:
    lines = render_status(doc(None, [changelog(0, None)]))
    assert lines[1] == "version: none recorded (kepl deploy FILE records one)"
    assert lines[-1] == "changelog kepl.shop.changelog.main[0]: offsets 0..9, no snapshot"


def test_each_changelog_record_carries_the_workers_version(tmp_path: Path) -> None:
    log = TruncLog()
    g = group()
    g.resets = (1, {})
    part = EnginePartition(g, 0, tmp_path / "db", [UP], "changelog", None)
    part.restore(log)
    run(part, log, events(0, 2))
    part.close()
    g.resets = (2, {})  # a new version: the first load checkpoints even without input
    part = EnginePartition(g, 0, tmp_path / "db", [UP], "changelog", None)
    part.restore(log)
    record = part.seal()
    assert record is not None and record.meta["version"] == 2
    part.close()
    assert [ChangelogRecord.decode(v).meta["version"] for v in log.history] == [1]

"""In-memory stand-ins for what a checkpoint writes to and reads from Kafka, for the
broker-free tests of the checkpoint protocol and of snapshots."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from app.runtime.kafka.partition import last_part
from app.runtime.kafka.store import ChangelogRecord

UP = "src:0"
"""The one upstream source partition of the tests' engine partitions."""


class TruncLog:
    """One changelog partition in memory: offsets, a low watermark, DeleteRecords."""

    def __init__(self) -> None:
        self.records: dict[int, bytes] = {}
        self.history: list[bytes] = []  # every record ever appended, deleted or not
        self.low = 0
        self.high = 0
        self.reads = 0

    def start(self, topic: str, partition: int) -> int:
        return self.low

    def end(self, topic: str, partition: int) -> int:
        return self.high

    def read(self, topic: str, partition: int, start: int) -> Iterator[tuple[int, bytes]]:
        for offset in range(max(start, self.low), self.high):
            self.reads += 1
            yield offset, self.records[offset]

    def append(self, value: bytes) -> int:
        self.records[self.high] = value
        self.history.append(value)
        self.high += 1
        return self.high - 1

    def delete_before(self, offset: int) -> None:
        for o in range(self.low, offset):
            del self.records[o]
        self.low = max(self.low, offset)


class TruncAdmin:
    """DeleteRecords on a ``TruncLog``."""

    def __init__(self, log: TruncLog) -> None:
        self.log = log

    def delete_before(self, topic: str, partition: int, offset: int) -> None:
        self.log.delete_before(offset)


@dataclass
class Msg:
    off: int

    def offset(self) -> int:
        return self.off


@dataclass
class FakeOutput:
    """An output log: records wait until ``commit`` (``abort`` drops them); the
    changelog's go to a ``TruncLog`` (offsets through the delivery callbacks), the rest to
    ``topics``.  It follows the snapshot parts it commits (``snapshots``, ``writing``)."""

    changelog: TruncLog
    exactly_once: bool = True
    open: bool = False
    errors: list[str] = field(default_factory=list)
    pending: list[tuple[str, bytes, Any]] = field(default_factory=list)
    topics: dict[str, list[bytes]] = field(default_factory=dict)
    commits: list[list[Any]] = field(default_factory=list)
    fail: BaseException | None = None
    offset: int = 0
    """The input offset the broker holds as committed."""
    writing: list[int] = field(default_factory=list)
    snapshots: list[list[int]] = field(default_factory=list)

    def produce(self, topic: str, value: bytes, partition: int, headers: Any = None,
                key: bytes | None = None, on_delivery: Any = None) -> None:
        self.open = True
        self.pending.append((topic, value, on_delivery))

    def rows_landed(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def offer_offsets(self, offsets: list[Any], consumer: Any) -> None:
        pass

    def commit(self, offsets: list[Any], consumer: Any) -> None:
        if self.fail is not None:
            self.abort()
            raise self.fail
        for topic, value, cb in self.pending:
            if topic == "changelog":
                off = self.changelog.append(value)
                self._follow(off, value)
                if cb is not None:
                    cb(None, Msg(off))
            else:
                self.topics.setdefault(topic, []).append(value)
        self.commits.append(offsets)
        self.offset = max([self.offset, *offsets])
        self.pending = []
        self.open = False

    def _follow(self, off: int, value: bytes) -> None:
        snap = ChangelogRecord.decode(value).snapshot
        if snap is None:
            return
        if snap["part"] == 0:
            self.writing = []
        self.writing.append(off)
        if last_part(snap):
            self.snapshots.append(self.writing)
            self.writing = []

    def abort(self) -> None:
        self.pending = []
        self.open = False

    def taken(self, topic: str) -> list[bytes]:
        """The committed records of ``topic`` not taken before."""
        out = self.topics.get(topic, [])
        self.topics[topic] = []
        return out


@dataclass
class Names:
    dlq_topic: str = "dlq"
    progress_topic: str = "progress"

    def changelog_topic(self, group: str) -> str:
        return "changelog"


@dataclass
class FakeInputs:
    """One input partition: where reading stands, what is committed."""

    position: int = 0
    committed: int = 0

    def offsets(self, holds: dict[str, int]) -> list[Any]:
        off = min(self.position, holds.get(UP, self.position))
        return [] if off == self.committed else [off]

    def committed_offsets(self) -> list[Any]:
        return [self.committed]

    def mark_committed(self, offsets: list[Any]) -> None:
        for off in offsets:
            self.committed = off

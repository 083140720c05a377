"""The input partitions a worker holds: one object per assigned topic partition.

An ``Input`` knows where reading stands (``position``: the next offset to read), what was
committed, and for a source partition its lane cursor (what its lane and routing stage
did, committed as the offset's metadata) and its lane.  ``Inputs`` answers the
checkpoint's questions: which offsets to commit, which were committed last.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.runtime.kafka.lanes import Lane, LaneCursor


@dataclass(slots=True, eq=False)
class Input:
    """One assigned input partition (of a source or a repartition topic)."""

    topic: str
    partition: int
    source: bool
    position: int | None = None
    """The next offset to read (None: nothing read since assignment or rewind)."""
    committed: int | None = None
    cursor: LaneCursor | None = None
    committed_cursor: LaneCursor | None = None
    lane: Lane | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}:{self.partition}"

    def rewind(self) -> None:
        """Back to the last commit: the read position and the cursor."""
        self.position = self.committed
        if self.source:
            self.cursor = (self.committed_cursor or LaneCursor()).copy()


class Inputs:
    """The worker's inputs by ``(topic, partition)``."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, int], Input] = {}

    def __iter__(self) -> Iterator[Input]:
        return iter(self.held.values())

    def get(self, key: tuple[str, int]) -> Input | None:
        return self.held.get(key)

    def add(self, inp: Input) -> Input:
        self.held[(inp.topic, inp.partition)] = inp
        return inp

    def drop(self, key: tuple[str, int]) -> Input | None:
        return self.held.pop(key, None)

    def dirty(self) -> bool:
        """Whether some position moved past its committed offset."""
        return any(i.position is not None and i.position != i.committed
                   for i in self.held.values())

    def offsets(self, holds: dict[str, int]) -> list[Any]:
        """Input offsets to commit: the read position, or the oldest record an engine
        partition still waits on; source partitions carry their cursor as metadata."""
        from confluent_kafka import TopicPartition

        out = []
        for inp in self.held.values():
            if inp.position is None:
                continue
            held = holds.get(inp.name)
            off = inp.position if held is None else min(inp.position, held)
            cur = inp.cursor
            if inp.committed == off and (cur is None or inp.committed_cursor == cur):
                continue
            meta = cur.metadata() if cur is not None else None
            out.append(TopicPartition(inp.topic, inp.partition, off, metadata=meta)
                       if meta is not None else TopicPartition(inp.topic, inp.partition, off))
        return out

    def committed_offsets(self) -> list[Any]:
        """The committed offsets (with their cursor metadata) of the inputs held."""
        from confluent_kafka import TopicPartition

        out = []
        for inp in self.held.values():
            if inp.committed is None or inp.position is None:
                continue
            cur = inp.committed_cursor
            meta = cur.metadata() if cur is not None else None
            out.append(TopicPartition(inp.topic, inp.partition, inp.committed, metadata=meta)
                       if meta is not None
                       else TopicPartition(inp.topic, inp.partition, inp.committed))
        return out

    def mark_committed(self, offsets: list[Any]) -> None:
        """The checkpoint committed ``offsets`` and every source cursor as it is now."""
        for tp in offsets:
            inp = self.held.get((tp.topic, tp.partition))
            if inp is not None:
                inp.committed = tp.offset
        for inp in self.held.values():
            if inp.cursor is not None:
                inp.committed_cursor = inp.cursor.copy()

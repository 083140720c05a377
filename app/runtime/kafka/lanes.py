"""Stateless lanes: statements whose rows depend on one event, run per source partition.

A lane is an Engine over a memory store holding only the app's stateless statements
of one source topic (``topology.is_stateless``), in place on one source partition: no
repartition hop, no changelog, no barrier wait, so rows flow as soon as the checkpoint
that holds them commits, and the statements scale with the source partitions.

What a lane must remember across a crash is three numbers: the last source offset it
processed, the time of the last watermark it saw, and its row sequence.  They travel as
the committed offset's metadata (``LaneCursor.metadata``), in the same transaction as
the rows, so a restarted lane continues exactly: it skips records up to ``applied`` (the
committed offset may lie behind it when an engine partition in the same worker still
holds older records of that partition).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from app.runtime.engine import Engine
from app.runtime.kafka import codec
from app.runtime.plan import StatementPlan

Emit = Callable[[str, str, str, int, int, Any, int], None]
"""emit(statement, stream, context partition, time, sequence, row, source partition)."""


@dataclass(slots=True)
class LaneCursor:
    """What a source partition's lane and routing stage have done with it."""

    applied: int = -1
    """The last offset the lane and the routing stage processed."""
    now: int = 0
    seq: int = 0
    barrier: str = ""
    """Id of the last watermark seen (the progress a restarted lane reports)."""
    lost: int = 0
    """Records of the partition deleted before they were read, so far (``kepl status``)."""
    used: dict[str, frozenset[int]] = field(default_factory=dict)
    """Repartition topic of a hash context numbered by first use -> its partitions this
    source partition sent events to (``Routing.forward``), and ``router.arm_key`` of a
    split statement armed from here -> the partition of the arming event; not in the
    metadata."""

    def metadata(self) -> str:
        items: list = [self.applied, self.now, self.seq, self.barrier]
        if self.lost:
            items.append(self.lost)
        return codec.dumps(items).decode()

    @classmethod
    def from_metadata(cls, text: str | None) -> LaneCursor:
        """A cursor from committed metadata (none, or not ours: a fresh one)."""
        if not text:
            return cls()
        try:
            a, t, s, b, *more = codec.loads(text)
            return cls(int(a), int(t), int(s), str(b), int(more[0]) if more else 0)
        except (ValueError, TypeError):
            return cls()

    def copy(self) -> LaneCursor:
        return LaneCursor(self.applied, self.now, self.seq, self.barrier, self.lost,
                          dict(self.used))


class Lane:
    """The stateless statements of one source partition."""

    def __init__(self, plans: list[StatementPlan], partition: int, cursor: LaneCursor,
                 emit: Emit) -> None:
        self.partition = partition
        self.cp = str(partition)
        self.cursor = cursor
        self._emit = emit
        self.engine = Engine(now_ms=cursor.now)
        self.engine.listeners.append(self._on_rows)
        self.types: set[str] = set()
        for p in plans:
            self.engine.deploy(p)
            if p.pipeline is not None and p.kind == "query":
                self.types.add(p.pipeline.stream.type_name)
        self._rows: list[tuple[str, str, Any]] = []
        self.busy_s = 0.0
        """Seconds spent running events since the metrics last took them."""

    def _on_rows(self, stmt: str, new: list, old: list, pid: Any) -> None:
        rows = self._rows
        for row in new:
            rows.append((stmt, "insert", row))
        for row in old:
            rows.append((stmt, "remove", row))

    def send(self, type_name: str, event: dict[str, Any]) -> None:
        """Run one event; its rows go out only if every statement took it (a failure
        raises and emits nothing)."""
        rows = self._rows
        rows.clear()
        t0 = perf_counter()
        try:
            self.engine.send(type_name, event)
        except Exception:
            rows.clear()
            raise
        finally:
            self.busy_s += perf_counter() - t0
        if rows:
            c = self.cursor
            for stmt, stream, row in rows:
                c.seq += 1
                self._emit(stmt, stream, self.cp, c.now, c.seq, row, self.partition)
            rows.clear()

    def advance(self, t: int, wid: str) -> None:
        """A watermark of this partition: nothing waits on it, time only moves."""
        c = self.cursor
        c.now = max(c.now, int(t))
        c.barrier = wid
        self.engine.advance_time(c.now)

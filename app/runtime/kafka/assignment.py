"""What a rebalance opens and closes: the worker's inputs and engine partitions.

On assignment each input partition becomes an ``inputs.Input``: a source partition with
its committed offset and lane cursor (the offset's metadata) and its lane, a repartition
partition with nothing more; and every engine partition the assigned partitions feed is
restored (``EnginePartition.restore``: local RocksDB, then the changelog tail).  A
committed offset below the log start is input lost (``lost_input``).  On revocation or
loss the inputs go and their engine partitions are closed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.health import Metrics
from app.runtime.kafka.inputs import Input, Inputs
from app.runtime.kafka.lanes import Lane, LaneCursor
from app.runtime.kafka.lost_input import LostInput
from app.runtime.kafka.partition import EnginePartition, SnapshotPolicy
from app.runtime.kafka.rebuild import RetainedInput, rebuild
from app.runtime.kafka.recovery import KafkaChangelog
from app.runtime.kafka.rows import RowWriter
from app.runtime.kafka.topology import Group
from app.runtime.kafka.wiring import Wiring
from app.runtime.timing import StatementTiming

log = logging.getLogger("kepl.worker")

Restored = Callable[[EnginePartition, float], None]


class Assignment:
    """The inputs and engine partitions of the current assignment (module docstring)."""

    def __init__(self, config: AppConfig, wiring: Wiring, inputs: Inputs,
                 parts: dict[tuple[str, int], EnginePartition], changelog: KafkaChangelog,
                 data_dir: Path, snapshots: SnapshotPolicy | None, exactly_once: bool,
                 rows: RowWriter, lost: LostInput, metrics: Metrics | None,
                 restored: Restored) -> None:
        """``parts``: the worker's engine partitions, kept here; ``restored(part, s)``
        is told each restore and its time."""
        self.config = config
        self.wiring = wiring
        self.inputs = inputs
        self.parts = parts
        self.changelog = changelog
        self.data_dir = data_dir
        self.snapshots = snapshots
        self.exactly_once = exactly_once
        self.rows = rows
        self.lost = lost
        self.metrics = metrics
        self.restored = restored
        self.retained: RetainedInput | None = None
        """Where a statement rebuilt from-earliest replays its input (``rebuild``)."""

    def assign(self, consumer: Any, tps: list[Any], alive: Callable[[], None]) -> int:
        """Open the inputs of ``tps`` and restore the engine partitions they feed
        (``alive`` is called per changelog record read); the number of those."""
        wiring = self.wiring
        sources = [tp for tp in tps if tp.topic in wiring.sources]
        committed = consumer.committed(sources, timeout=60) if sources else []
        for tp in committed:
            key = (tp.topic, tp.partition)
            cur = LaneCursor.from_metadata(tp.metadata if tp.offset >= 0 else None)
            inp = self.inputs.add(Input(tp.topic, tp.partition, True, cursor=cur,
                                        committed_cursor=cur.copy()))
            if tp.offset >= 0:
                inp.committed = inp.position = tp.offset
                low = self.lost.log_start(key)
                if low is not None and tp.offset < low:
                    # the consumer resets to the log start by itself (auto.offset.reset)
                    inp.position = low
                    self.lost.lost(key, tp.offset, low)
            if tp.topic in wiring.lane_plans:
                self.open_lane(inp, cur)
        opened: dict[tuple[str, int], Group] = {}
        for tp in tps:
            if tp.topic in wiring.sources:
                for g in wiring.direct_of[tp.topic]:
                    opened[(g.name, tp.partition)] = g
            elif tp.topic in wiring.repartition:
                self.inputs.add(Input(tp.topic, tp.partition, False))
                opened[(wiring.repartition[tp.topic].name, tp.partition)] = \
                    wiring.repartition[tp.topic]
        for key in sorted(opened):
            if key not in self.parts:
                self.parts[key] = self.restore(opened[key], key[1], alive)
        return len(opened)

    def open_lane(self, inp: Input, cur: LaneCursor) -> None:
        """A fresh lane for source input ``inp`` at cursor ``cur``."""
        inp.lane = Lane(self.wiring.lane_plans[inp.topic], inp.partition, cur, self.rows.row)
        if self.metrics is not None:
            inp.lane.engine.timing = StatementTiming()

    def restore(self, g: Group, p: int, alive: Callable[[], None]) -> EnginePartition:
        t0 = time.monotonic()
        part = EnginePartition(g, p, self.data_dir / g.name / str(p),
                               g.upstreams(p, self.wiring.all_upstreams),
                               self.config.changelog_topic(g.name), self.snapshots,
                               adjacent=not self.exactly_once)
        part.escalate = g.direct
        part.forward_to = self.wiring.forward_to.get(g.name, {})
        if self.metrics is not None:
            part.timing = StatementTiming()  # its engine keeps it on every load
        if self.retained is not None:
            retained = self.retained
            part.rebuild = lambda part, names: rebuild(part, names, retained, alive)
        part.restore(self.changelog, alive)
        part.progress = part.barrier  # already on the progress topic with its state
        seconds = time.monotonic() - t0
        if self.metrics is not None:
            self.metrics.restore_s.observe(seconds)
        log.info("restored %s[%d] in %.3f s (changelog at %d)", g.name, p, seconds,
                 part.cl_offset)
        self.restored(part, seconds)
        return part

    def reload(self) -> None:
        """Every engine partition back to its committed state."""
        for part in self.parts.values():
            part.discard()
            part.load()

    def drop(self, tps: list[Any]) -> None:
        """Close the inputs of ``tps`` and the engine partitions they feed."""
        for tp in tps:
            self.inputs.drop((tp.topic, tp.partition))
            for g in self.wiring.groups_of(tp.topic):
                part = self.parts.pop((g.name, tp.partition), None)
                if part is not None:
                    part.discard()
                    part.close()

    def close(self) -> None:
        for part in self.parts.values():
            part.discard()
            part.close()
        self.parts.clear()

"""One engine partition: an Engine over batch-atomic RocksDB state, fed from Kafka.

An ``EnginePartition`` owns partition *p* of a group's repartition topic.  It applies
input records (events and barriers), collects output rows with deterministic ids, and
at the end of a batch seals one changelog record holding everything the batch changed.
The worker produces that record with the batch's output rows, waits for the broker's
acknowledgement and only then commits the local database (``PartitionStore.commit``).

Bookkeeping kept in the same state (so it is committed atomically with the engine):

- ``applied``: per upstream source partition, the last source offset applied; records at
  or below it are duplicates (a restarted router re-forwards, a restarted worker re-reads)
  and are skipped;
- ``now``: the Engine's clock; ``barrier``: the last barrier completed (time, id);
- output sequence numbers per (statement, context partition): ``kepl.id`` =
  ``statement/context-partition/sequence`` is identical when a batch is replayed (the
  context partition of a keyed group is the key text, see ``_context_partition``);
- with more than one upstream partition, events wait in a persisted per-upstream queue
  (keyed by upstream ``topic:partition`` and offset)
  until every upstream has delivered the closing barrier of their epoch; the epoch is
  then merged deterministically (record timestamp, ``kepl.seq``, upstream, offset, each
  upstream's order kept) and the clock moves to the barrier.  With one upstream,
  records apply at once, in order.
"""

from __future__ import annotations

import heapq
import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.runtime.engine import Engine
from app.runtime.kafka.store import ChangelogRecord, PartitionStore
from app.runtime.kafka.topology import Group
from operators.contexts.managers import key_text


class ChangelogLog(Protocol):
    """Read access to changelog partitions (the worker gives a Kafka-backed one)."""

    def end(self, topic: str, partition: int) -> int:
        """The offset the next record will get (the high watermark)."""
        ...

    def read(self, topic: str, partition: int, start: int) -> Iterator[tuple[int, bytes]]:
        """(offset, value) of every record from ``start`` to the current end."""
        ...


@dataclass
class InRecord:
    """A repartition-topic record, decoded."""

    kind: str  # event | barrier
    upstream: str
    offset: int
    type_name: str = ""
    ts: int = 0
    seq: int | None = None
    payload: Any = None
    raw: bytes = b""


@dataclass
class DeadLetter:
    """An event the engine could not process (it failed inside a statement)."""

    record: InRecord
    reason: str


class _Fault(Exception):
    def __init__(self, rec: InRecord, reason: str) -> None:
        super().__init__(reason)
        self.rec = rec
        self.reason = reason


class EnginePartition:
    """Engine, state and Kafka bookkeeping of one partition of one group."""

    def __init__(self, group: Group, partition: int, path: Path, upstreams: list[str],
                 changelog_topic: str) -> None:
        self.group = group
        self.partition = partition
        self.upstreams = upstreams
        self.up_index = {u: i for i, u in enumerate(upstreams)}
        self.changelog_topic = changelog_topic
        self.store = PartitionStore(path)
        self.book = self.store.namespace("kepl")
        self.q_ns = self.book.child("q")
        self.seq_ns = self.book.child("seq")
        self.cl_offset = -1
        self.outputs: list[list[Any]] = []
        self.dead: list[DeadLetter] = []
        self.poison: set[tuple[str, int]] = set()
        self.engine: Engine | None = None
        self.touched = False
        self.sealed: ChangelogRecord | None = None
        self.progress: tuple[int, str] | None = None

    # -- life cycle --------------------------------------------------------------
    def restore(self, log: ChangelogLog) -> ChangelogRecord | None:
        """Bring the local database up to the end of the changelog; build the Engine.

        Returns the last changelog record (its outputs are re-published by the caller:
        the crash may have come after the record was written but before its outputs).
        """
        marker = self.store.marker()
        if marker >= log.end(self.changelog_topic, self.partition):
            # the changelog was recreated: the local state belongs to another incarnation
            self.store.wipe()
            marker = -1
        current = marker
        last: ChangelogRecord | None = None
        for offset, value in log.read(self.changelog_topic, self.partition, max(marker, 0)):
            rec = ChangelogRecord.decode(value)
            if offset <= marker:
                if offset == marker:
                    last = rec
                continue
            if rec.prev != current:  # written by a writer that had lost the partition
                continue
            self.store.apply_record(rec.writes, offset)
            current = offset
            last = rec
        self.cl_offset = current
        self.load()
        return last

    def load(self) -> None:
        """(Re)build the Engine and the bookkeeping from the committed state."""
        meta = self.book.get("meta") or {}
        self.now = int(meta.get("now", 0))
        self.applied: dict[str, int] = dict(meta.get("applied", {}))
        b = meta.get("barrier")
        self.barrier: tuple[int, str] | None = (int(b[0]), str(b[1])) if b else None
        self.seqs: dict[tuple[str, str], int] = {}
        self.dirty_seqs: set[tuple[str, str]] = set()
        self.queues: list[deque[list[Any]]] = [deque() for _ in self.upstreams]
        self.barriers_queued = [0] * len(self.upstreams)
        for (up, off), item in self.q_ns.items():
            ui = self.up_index[up]
            self.queues[ui].append([off, *item])
            if item[0] == "barrier":
                self.barriers_queued[ui] += 1
        for q in self.queues:
            if len(q) > 1 and any(q[i][0] > q[i + 1][0] for i in range(len(q) - 1)):
                raise RuntimeError("queued records out of order")
        engine = Engine(store=self.store, now_ms=self.now)
        engine.listeners.append(self._on_rows)
        for plan in self.group.plans:
            engine.deploy(plan)
        self.engine = engine

    def close(self) -> None:
        self.store.close()

    # -- records -----------------------------------------------------------------
    def run(self, records: list[InRecord]) -> None:
        """Apply a batch; an event that fails inside the engine is dead-lettered.

        On a failure the batch restarts from the committed state without that event, so
        the outcome is the same whenever (and however often) the batch is replayed.
        """
        while True:
            try:
                for r in records:
                    self._handle(r)
                return
            except _Fault as f:
                self.store.rollback()
                self.outputs.clear()
                self.load()
                self.poison.add((f.rec.upstream, f.rec.offset))
                self.dead.append(DeadLetter(f.rec, f.reason))

    def _handle(self, r: InRecord) -> None:
        if r.offset <= self.applied.get(r.upstream, -1):
            return
        self.touched = True
        ui = self.up_index.get(r.upstream)
        if ui is None:
            raise RuntimeError(f"record from unknown upstream partition {r.upstream}")
        self.applied[r.upstream] = r.offset
        if len(self.upstreams) == 1:
            if r.kind == "barrier":
                self._advance(r.payload["t"], r.payload["id"])
            else:
                self._event(r)
            return
        item = [r.kind, r.ts, r.seq, r.type_name, r.payload]
        self.q_ns.put((r.upstream, r.offset), item)
        self.queues[ui].append([r.offset, *item])
        if r.kind == "barrier":
            self.barriers_queued[ui] += 1
            self._release()

    def _release(self) -> None:
        """Run every epoch that all upstreams have closed with a barrier."""
        while all(self.barriers_queued):
            heads: list[list[list[Any]]] = []
            for q in self.queues:
                events = []
                while q[0][1] != "barrier":
                    events.append(q.popleft())
                heads.append(events)
            # one upstream's records keep their order; ties across upstreams are broken
            # by record timestamp, then the producer's kepl.seq, upstream, offset
            keyed = [[((it[2], -1 if it[3] is None else it[3], ui, it[0]), ui, it)
                      for it in events] for ui, events in enumerate(heads)]
            for _, ui, it in heapq.merge(*keyed, key=lambda x: x[0]):
                up = self.upstreams[ui]
                self.q_ns.delete((up, it[0]))
                rec = InRecord("event", up, it[0], it[4], it[2], it[3], it[5])
                self._event(rec)
            t: int | None = None
            wid = ""
            for ui, q in enumerate(self.queues):
                b = q.popleft()
                self.barriers_queued[ui] -= 1
                self.q_ns.delete((self.upstreams[ui], b[0]))
                bt = int(b[5]["t"])
                if t is None or bt < t:
                    t, wid = bt, str(b[5]["id"])
            self._advance(t or 0, wid)

    def _event(self, r: InRecord) -> None:
        if (r.upstream, r.offset) in self.poison:
            return
        assert self.engine is not None
        try:
            self.engine.send(r.type_name, r.payload)
        except Exception as e:  # noqa: BLE001 - a statement failing on one event
            raise _Fault(r, f"engine error: {type(e).__name__}: {e}") from e

    def _advance(self, t: int, wid: str) -> None:
        assert self.engine is not None
        target = max(int(t), self.engine.now_ms)
        self.engine.advance_time(target)
        self.barrier = (target, wid)

    def _context_partition(self, pid: Any) -> str:
        """``kepl.context_partition`` of a row: the same whichever worker runs it.

        Hash group: the bucket (= Kafka partition, 000 §4.2.3).  Keyed group: the key
        text, since ``context.id`` only numbers the keys of this engine partition.
        Otherwise the context partition id of the one Engine of ``main``.
        """
        g = self.group
        if g.hash_spec is not None:
            return str(self.partition)
        if g.keyed_spec is not None and self.engine is not None:
            key = self.engine.contexts[g.keyed_spec.name].manager.key(pid)
            if key is not None:
                return key_text(key)
        return _pid_text(pid)

    def _on_rows(self, stmt: str, new: list, old: list, pid: Any) -> None:
        cp = self._context_partition(pid)
        key = (stmt, cp)
        seq = self.seqs.get(key)
        if seq is None:
            seq = self.seq_ns.get(key, 0)
        now = self.engine.now_ms if self.engine is not None else 0
        for stream, rows in (("insert", new), ("remove", old)):
            for row in rows:
                seq += 1
                self.outputs.append([stmt, stream, cp, now, seq, row])
        self.seqs[key] = seq
        self.dirty_seqs.add(key)

    # -- batch end -----------------------------------------------------------------
    def seal(self) -> ChangelogRecord | None:
        """The changelog record of the batch, or None if it changed nothing."""
        assert self.engine is not None
        if not self.touched:
            return None
        self.touched = False
        for key in self.dirty_seqs:
            self.seq_ns.put(key, self.seqs[key])
        self.dirty_seqs.clear()
        self.book.put("meta", {"now": self.engine.now_ms, "applied": self.applied,
                               "barrier": list(self.barrier) if self.barrier else None})
        self.sealed = ChangelogRecord(
            self.cl_offset,
            {"group": self.group.name, "partition": self.partition,
             "now": self.engine.now_ms},
            self.store.batch_writes(), self.outputs)
        return self.sealed

    def committed(self, offset: int) -> bool:
        """The sealed record is durable at ``offset``: commit local state.

        Returns whether a new barrier was completed (the caller publishes progress).
        """
        if offset != self.cl_offset + 1:
            raise RuntimeError(
                f"changelog {self.changelog_topic}[{self.partition}] has a record at "
                f"{offset}, expected {self.cl_offset + 1}: another worker writes this "
                "partition")
        self.store.commit(offset, self.sealed.writes if self.sealed is not None else None)
        self.sealed = None
        self.cl_offset = offset
        self.outputs = []
        self.dead = []
        advanced = self.barrier is not None and self.barrier != self.progress
        self.progress = self.barrier
        return advanced

    def discard(self) -> None:
        """Forget an unsealed/unflushed batch (the caller is going down)."""
        self.store.rollback()
        self.outputs = []


def _pid_text(pid: Any) -> str:
    if isinstance(pid, int | str):
        return str(pid)
    return json.dumps(pid, default=str, separators=(",", ":"))

"""One engine partition: an Engine over batch-atomic RocksDB state, fed from Kafka.

An ``EnginePartition`` owns partition *p* of a group's repartition topic.  It applies
input records (events and barriers), collects output rows with deterministic ids, and
at the end of a batch seals one changelog record holding everything the batch changed.
The worker produces that record and the batch's output rows in one transaction with the
input offsets, and only once it committed writes the local database
(``PartitionStore.commit``).

Bookkeeping kept in the same state (so it is committed atomically with the engine):

- ``applied``: per upstream source partition, the last source offset applied; records at
  or below it are duplicates (a restarted router re-forwards, a restarted worker re-reads)
  and are skipped;
- ``now``: the Engine's clock; ``barrier``: the last barrier completed (time, id);
- output sequence numbers per (statement, context partition): ``kepl.id`` =
  ``statement/context-partition/sequence`` is identical when a batch is replayed (the
  context partition of a keyed group is the key text, see ``_context_partition``);
- a hash group without ``preallocate``: the ids of the buckets used before this
  partition's own (``HashManager.first_use``), learnt from the *touch* records the routing
  stage sends every engine partition at a bucket's first event from a source partition;
- a statement split by group key: output sequences per group (the group key text is the
  context partition, ``_on_split_rows``); a touch from the routing stage arms its timed
  output when the statement's first update went to another partition (``_arm_touches``);
- with more than one upstream partition, events wait in memory, per upstream, until
  every upstream has delivered the closing barrier of their epoch; the epoch is then
  merged deterministically (record timestamp, ``kepl.seq``, upstream, offset, each
  upstream's order kept) and the clock moves to the barrier.  Waiting events are not
  state: ``hold`` tells the worker the oldest Kafka record still holding one, and the
  worker commits its input offset no further, so a restarted worker reads them again
  (``applied`` drops what was already released).  With one upstream, records apply at
  once, in order.

Snapshots and truncation (``SnapshotPolicy``): batch records alone would make the
changelog grow forever (it cannot be compacted: a record is a batch, not a key), and a
replacement worker would replay all of it.  So once the changelog bytes written since the
last snapshot exceed ``max(factor × last snapshot bytes, floor)``, the partition's whole
committed state as of that moment is written into the changelog as snapshot parts,
chained like any record.  The parts are written a few at a time, one ``part_bytes`` part
in each checkpoint's transaction, ahead of its batch (``start_snapshot``,
``snapshot_part``, ``snapshot_part_committed``; ``Chain`` links two records of one
transaction), from a RocksDB iterator pinned at the state the snapshot began with; the
batches of the checkpoints in between are chained between the parts.  So the loop never
stops for a whole snapshot, only for one part.  Once the last part is durable the worker
deletes the records before the first part (Kafka DeleteRecords, best effort).  A snapshot
costs at most 1/factor of the changelog bytes written before it, so the state writes per
event stay O(1) amortized.

``restore`` starts at the partition's low watermark.  A local database whose marker is
at or after ``low watermark - 1`` continues from its marker (snapshot parts on its chain
are passed over: they hold the state it already has).  Otherwise (no database, or one
older than the truncation point) it is wiped and loaded from the first complete snapshot
at or after the low watermark: its parts are loaded as they come, the batches chained
between them are held, and once the last part is loaded the held batches are replayed in
order, then the records after it.  An incomplete snapshot (a crash while its parts were
written, or parts partly deleted) is never loaded; the chain simply continues through it.
"""

from __future__ import annotations

import gc
import heapq
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import itemgetter
from pathlib import Path
from time import perf_counter
from typing import Any, NamedTuple, Protocol

from app.runtime.engine import Engine
from app.runtime.kafka.eventtime import H_LATENESS, LATE, HeldEvents, late_reason
from app.runtime.kafka.statesize import StateSizes
from app.runtime.kafka.store import ChangelogRecord, PartitionStore, entry_size
from app.runtime.kafka.topology import Group
from app.runtime.rows import keyed_text, pid_text
from app.runtime.timing import StatementTiming
from operators.contexts.managers import HashManager


class ChangelogLog(Protocol):
    """Read access to changelog partitions (the worker gives a Kafka-backed one)."""

    def start(self, topic: str, partition: int) -> int:
        """The offset of the first record still in the log (the low watermark)."""
        ...

    def end(self, topic: str, partition: int) -> int:
        """The offset the next record will get (the high watermark)."""
        ...

    def read(self, topic: str, partition: int, start: int) -> Iterator[tuple[int, bytes]]:
        """(offset, value) of every record from ``start`` to the current end."""
        ...


@dataclass(frozen=True)
class SnapshotPolicy:
    """When a partition writes a snapshot into its changelog, and how it is split.

    Due when the changelog bytes since the last snapshot exceed
    ``max(factor × last snapshot bytes, floor)``; parts hold at most ``part_bytes`` of
    state entries (one larger entry goes alone), well under the topic's
    ``max.message.bytes``.  One part is written per checkpoint, so ``part_bytes`` bounds
    the pause a snapshot adds to a checkpoint.
    """

    floor: int = 1 << 20
    factor: float = 4.0
    part_bytes: int = 256 << 10


@dataclass
class _Tally:
    """Changelog bytes on the chain since the last complete snapshot, followed record by
    record (restore) so that a restarted writer keeps the same snapshot schedule."""

    since: int = 0
    snapshot_bytes: int = 0
    run: tuple[int, int] | None = field(default=None)  # (id, next part) of a snapshot

    def passed(self, rec: ChangelogRecord, size: int) -> None:
        snap = rec.snapshot
        if snap is None:  # a batch: between two parts it does not break their run
            self.since = int(rec.meta.get("since", self.since)) + size
            self.snapshot_bytes = int(rec.meta.get("snap", self.snapshot_bytes))
            return
        if snap["part"] == 0:
            self.run = (snap["id"], 0)
        if self.run == (snap["id"], snap["part"]):
            if last_part(snap):
                self.completed(snap)
                return
            self.run = (snap["id"], snap["part"] + 1)
        else:
            self.run = None
        self._counts(rec)  # a part adds nothing: the writer counts batch records only

    def resume(self, rec: ChangelogRecord) -> None:
        """The local database's marker is on this part: its run goes on from here."""
        snap = rec.snapshot
        assert snap is not None
        if last_part(snap):
            self.completed(snap)
        else:
            self.run = (snap["id"], snap["part"] + 1)
            self._counts(rec)

    def _counts(self, rec: ChangelogRecord) -> None:
        self.since = int(rec.meta.get("since", self.since))
        self.snapshot_bytes = int(rec.meta.get("snap", self.snapshot_bytes))

    def completed(self, snap: dict[str, int]) -> None:
        self.since = 0
        self.snapshot_bytes = int(snap["bytes"])
        self.run = None


def last_part(snap: dict[str, Any]) -> bool:
    """Whether a snapshot part is its snapshot's last (``last``; earlier changelogs
    give every part the number of parts instead)."""
    if "last" in snap:
        return bool(snap["last"])
    return int(snap["part"]) + 1 == int(snap["parts"])


@dataclass
class Chain:
    """Where a replay stands on a changelog's chain: the last record taken (its offset,
    and what a later record of the same transaction repeats of it)."""

    offset: int
    prev: int | None = None
    w: str = ""
    n: int = 0

    def follows(self, rec: ChangelogRecord) -> bool:
        """Whether ``rec`` continues the chain: the first record of a transaction names
        the last record taken as ``prev``; a later one of the same transaction comes
        next in it (``ChangelogRecord.w``, ``n``).  Any other was written by a writer
        that had lost the partition."""
        if rec.n == 0:
            return rec.prev == self.offset
        return (rec.w != "" and rec.w == self.w and rec.n == self.n + 1
                and rec.prev == self.prev)

    def take(self, rec: ChangelogRecord, offset: int) -> None:
        self.offset, self.prev, self.w, self.n = offset, rec.prev, rec.w, rec.n


@dataclass
class _Loading:
    """A snapshot being loaded by a restore: the parts so far, and the batches chained
    between them (replayed once the last part is in)."""

    id: int
    part: int
    chain: Chain
    held: list[tuple[int, ChangelogRecord, bytes, int]] = field(default_factory=list)
    """(offset, head, encoded record, where its writes start) of each batch held."""


@dataclass
class _Writing:
    """A snapshot being written: the iterator pinned at the state it began with."""

    id: int
    items: Iterator[tuple[bytes, bytes]]
    head: tuple[bytes, bytes] | None  # the next entry, None past the last one
    part: int = 0
    bytes: int = 0
    first: int = -1
    pending: tuple[int, bool] | None = None  # (bytes, last) of the part sent, unacknowledged


class InRecord(NamedTuple):
    """An input record of an engine partition, decoded: an event or a barrier of one
    upstream source partition, and the Kafka record that carried it (``via``: the source
    partition itself when the group is direct, else the repartition partition).  A
    tuple: the hot paths build it with ``tuple.__new__``, without a Python call."""

    kind: str  # event | barrier | touch (a bucket's first use, or a split statement's
    # first update: router.py)
    upstream: str
    offset: int
    type_name: str = ""
    ts: int = 0
    seq: int | None = None
    payload: Any = None
    raw: bytes = b""
    via: str = ""
    via_offset: int = -1


class OutRow(NamedTuple):
    """An output row of an engine partition, with its id's parts
    (``statement/context_partition/seq``)."""

    statement: str
    stream: str  # insert | remove
    context_partition: str
    time: int
    seq: int
    row: Any
    counter: RowCounter | None = None
    """Its row counter (the id's prefix and the record key, encoded once)."""


_new_tuple = tuple.__new__


class RowCounter:
    """The row counter of one (statement, context partition): the seq of its last row
    (``statement/context_partition/seq`` ids), whether the batch moved it, and what an
    output record of its rows repeats (the id's prefix, the key), encoded once."""

    __slots__ = ("key", "seq", "dirty", "put", "id_prefix", "record_key")

    def __init__(self, key: tuple[str, str], seq: int) -> None:
        self.key = key
        self.seq = seq
        self.dirty = False
        self.put: Callable[[int], None] | None = None
        """``seq_ns.putter(key)``: the key encoded once, at the first seal that writes it."""
        self.record_key = key[1].encode()
        self.id_prefix = b"%s/%s/" % (key[0].encode(), self.record_key)

    def __eq__(self, other: object) -> bool:
        """Counters of the same (statement, context partition) are equal: rows compare
        by what they are, not by the engine that numbered them."""
        return isinstance(other, RowCounter) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"RowCounter({self.key!r})"


@dataclass(frozen=True)
class Waiting:
    """Records an engine partition holds until every upstream closed the epoch with a
    watermark: how many, the upstreams whose watermark is missing, and the oldest."""

    records: int
    missing: tuple[str, ...]
    upstream: str
    offset: int
    via: str
    via_offset: int

    def describe(self) -> str:
        where = (f"{self.upstream} offset {self.offset}" if self.via == self.upstream
                 else f"{self.upstream} offset {self.offset}, carried by {self.via} "
                      f"offset {self.via_offset}")
        return (f"{self.records} record(s) wait for a watermark from "
                f"{', '.join(self.missing) or '(none missing)'}; oldest: {where}")


@dataclass
class DeadLetter:
    """An event the engine could not process (it failed inside a statement)."""

    record: InRecord
    reason: str
    headers: tuple[tuple[str, bytes], ...] = ()
    """More headers for the dead letter (a late event's ``kepl.lateness``)."""


class Poisoned(Exception):
    """A record read straight from a source partition failed inside a statement; the
    worker, not the partition, must take it out (other rooms also took it)."""

    def __init__(self, record: InRecord, reason: str) -> None:
        super().__init__(reason)
        self.record = record
        self.reason = reason


class _Fault(Exception):
    def __init__(self, rec: InRecord, reason: str) -> None:
        super().__init__(reason)
        self.rec = rec
        self.reason = reason


class _BatchFailed(Exception):
    """An event of a batch failed in the engine: which one is found by running the
    records since the commit again one at a time."""


_TS = itemgetter(4)
"""An ``InRecord``'s ``ts``."""
_TIMER_ORDER = [0, 0, -1, "", -1]
"""A forwarded event's order when a timer set it off (``_on_export``)."""
ARMED = "\x00armed"
"""The row counter saying an engine partition sent a reader its arming touch
(``_arm_reader``)."""
FORWARDED = "\x00forwarded"
"""The row counter numbering what an engine partition forwards (``_on_export``): no
statement name starts with a zero."""
ARM_TOUCH = "\x00arm"
"""The type name of a held arming touch (``_arm_at``; its payload: the arming event's
type): no event type starts with a zero."""
_KIND_TYPE, _PAYLOAD = itemgetter(0, 3), itemgetter(6)
_UPSTREAM, _OFFSET = itemgetter(1), itemgetter(2)


def merge_epoch(heads: list[list[InRecord]]) -> list[InRecord]:
    """An epoch's records, one list per upstream, in their deterministic order: one
    upstream's records keep their order; across upstreams the next is the one of least
    (record timestamp, producer's ``kepl.seq``, upstream, offset), as ``heapq.merge``
    takes them.  Where each upstream's records are in that order already (their
    timestamps rise) a sort of them all is the same order, without a Python merge."""
    filled = [ui for ui, events in enumerate(heads) if events]
    if len(filled) == 1:
        return heads[filled[0]]
    if all(r[5] is None for ui in filled for r in heads[ui]):  # no kepl.seq
        for ui in filled:
            ts = [r[4] for r in heads[ui]]
            if ts != sorted(ts):
                break
        else:
            # each upstream's timestamps rise: a stable sort by timestamp of the
            # upstreams' records one after another leaves ties in upstream order and,
            # within one upstream, in arrival order, as the merge does
            return sorted([r for ui in filled for r in heads[ui]], key=_TS)
    # merge keys are unique (upstream, offset): records are never compared
    keyed = [[((r.ts, -1 if r.seq is None else r.seq, ui, r.offset), r) for r in heads[ui]]
             for ui in filled]
    if all(k == sorted(k) for k in keyed):
        return [r for _, r in sorted([e for k in keyed for e in k])]
    return [r for _, r in heapq.merge(*keyed)]


class EnginePartition:
    """Engine, state and Kafka bookkeeping of one partition of one group."""

    def __init__(self, group: Group, partition: int, path: Path, upstreams: list[str],
                 changelog_topic: str, snapshots: SnapshotPolicy | None = None,
                 adjacent: bool = False) -> None:
        """``snapshots``: None writes no snapshots (restore still reads them).
        ``adjacent``: records are written without transactions, so each of ours lands
        right after the previous one; one that does not means another writer."""
        self.group = group
        self.adjacent = adjacent
        self.snapshots = snapshots
        self.since_snapshot = 0
        self.snapshot_bytes = 0
        self.writing: _Writing | None = None
        self.partition = partition
        self.upstreams = upstreams
        self.up_index = {u: i for i, u in enumerate(upstreams)}
        self.changelog_topic = changelog_topic
        self.store = PartitionStore(path)
        self.book = self.store.namespace("kepl")
        self.seq_ns = self.book.child("seq")
        self.cl_offset = -1
        self.outputs: list[OutRow] = []
        self.dead: list[DeadLetter] = []
        self.poison: set[tuple[str, int]] = set()
        self._since_commit: list[InRecord] = []
        self._pending: list[Any] = []
        """Payloads of consecutive events of one type not yet sent to the engine."""
        self._pending_type = ""
        self._exact = False
        """Send each event on its own (finding the one that failed in a batch)."""
        self.engine: Engine | None = None
        self.touched = False
        self.sealed: ChangelogRecord | None = None
        self._row_keys: dict[str, Callable[[Any], str]] = {}
        """Statement -> the key text of its rows (a split group's ``row_key``)."""
        self.progress: tuple[int, str] | None = None
        self.escalate = False
        """A fault on a record read from a source partition raises ``Poisoned`` instead
        of being replayed here (set by the worker for directly fed groups)."""
        self.busy_s = 0.0
        """Seconds spent in ``run`` since the metrics last took them."""
        self.sizes: StateSizes | None = None
        """State bytes per statement, kept once the metrics ask (``statesize``)."""
        # the committed bookkeeping, (re)built by ``load`` (empty until a restore)
        self.now = 0
        self.applied: dict[str, int] = {}
        self.barrier: tuple[int, str] | None = None
        self.counters: dict[tuple[str, str], RowCounter] = {}
        """Every row counter read or moved since the last ``load``."""
        self.dirty_counters: list[RowCounter] = []
        self._cps: dict[Any, tuple[str, dict[str, RowCounter]]] = {}
        """Context partition id -> its text (``_context_partition``) and its statements'
        row counters, for this engine: one lookup per emitting event, where random keys
        over 10^6 context partitions miss the CPU's caches on each (about 0.3-1 us a
        lookup on this machine)."""
        self.received: dict[str, int] = {}
        self.queues: list[deque[InRecord]] = [deque() for _ in upstreams]
        self.barriers_queued = [0] * len(upstreams)
        self.first_use: HashManager | None = None
        self.held: HeldEvents | None = None
        """Events waiting for a watermark to reach their time (event_time apps)."""
        self.late = 0
        """Late events seen (committed with the partition's metadata)."""
        self.rebuild: Callable[[EnginePartition, list[str]], Any] | None = None
        """Replays the retained input into statements rebuilt from-earliest (set by the
        worker, ``rebuild``)."""
        self.timing: StatementTiming | None = None
        """Sampled processing time per statement, once the metrics ask (``timing``)."""
        self.rebuilt = ""
        """What the last such replay did (said once the partition is restored)."""
        self.forward_to: dict[str, list[tuple[str, Group]]] = {}
        """Stream -> (repartition topic, group) of each split statement reading it there
        (``Group.forwards``; set by the worker before the restore)."""
        self.forwards: dict[tuple[str, int], list[list[Any]]] = {}
        """(repartition topic, partition) -> bundle entries forwarded since the last
        checkpoint (``_on_export``), produced in its transaction."""
        self._forwarded: RowCounter | None = None
        self._trigger: tuple[Any, ...] | None = None
        """(time, kepl.seq, upstream, offset) of the input event being sent (a forwarded
        event's held key), None while timers fire (``_on_export``)."""

    # -- life cycle --------------------------------------------------------------
    def restore(self, log: ChangelogLog, alive: Callable[[], None] | None = None) -> None:
        """Bring the local database up to the end of the changelog; build the Engine.
        See the module docstring for where the replay starts.  ``alive`` is called for
        every changelog record read (a long restore is progress, not a stuck loop).

        The cyclic garbage collector waits meanwhile: a restore allocates millions of
        objects that all stay alive, and each collection on the way would walk them all
        again (at 10^6 keys it took most of the restore's time)."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._restore(log, alive)
        finally:
            if collecting:
                gc.enable()

    def _restore(self, log: ChangelogLog, alive: Callable[[], None] | None) -> None:
        topic, p = self.changelog_topic, self.partition
        low, end = log.start(topic, p), log.end(topic, p)
        marker = self.store.marker()
        if marker >= end or marker < low - 1:
            # the changelog was recreated (the database belongs to another incarnation),
            # or records after the marker were deleted
            marker = -1
        if marker < 0:
            self.store.wipe()
            self.store.begin_bulk()
        try:
            self._replay(log, low, marker, alive)
        finally:
            self.store.end_bulk()
        self.load()

    def _replay(self, log: ChangelogLog, low: int, marker: int,
                alive: Callable[[], None] | None) -> None:
        """Apply the changelog records after ``marker`` (a snapshot first when the
        database is empty and the log starts after 0)."""
        topic, p = self.changelog_topic, self.partition
        need_snapshot = marker < 0 and low > 0
        loading: _Loading | None = None
        loaded_any = False
        tally = _Tally()
        current = Chain(marker)
        for offset, value in log.read(topic, p, max(marker, low)):
            if alive is not None:
                alive()
            rec, at = ChangelogRecord.decode_head(value)
            snap = rec.snapshot
            if need_snapshot:
                if snap is not None and snap["part"] == 0:
                    if loaded_any:  # what was loaded is no complete snapshot
                        self.store.wipe()
                    loading = _Loading(snap["id"], 0, Chain(offset))
                    loading.chain.take(rec, offset)
                elif loading is None:
                    continue
                elif snap is None:
                    if loading.chain.follows(rec):
                        loading.held.append((offset, rec, value, at))
                        loading.chain.take(rec, offset)
                    continue
                elif (snap["id"] == loading.id and snap["part"] == loading.part + 1
                      and loading.chain.follows(rec)):
                    loading.part = snap["part"]
                    loading.chain.take(rec, offset)
                else:  # not the next part: what was loaded is no complete snapshot
                    loading = None
                    continue
                self.store.apply_encoded(value, at, None)
                loaded_any = True
                if last_part(snap):
                    # the parts hold the state the snapshot began with; the batches
                    # written meanwhile follow it
                    for held_offset, held, data, held_at in loading.held:
                        self.store.apply_encoded(data, held_at, held_offset)
                        tally.passed(held, len(data))
                    self.store.set_marker(offset)
                    tally.completed(snap)
                    current = loading.chain
                    need_snapshot = False
                continue
            if offset == marker:  # the record this database reflects
                current.take(rec, offset)
                if snap is None:
                    tally.passed(rec, len(value))
                else:
                    tally.resume(rec)
                continue
            if not current.follows(rec):  # written by a writer that had lost the partition
                continue
            if snap is None:
                self.store.apply_encoded(value, at, offset)
            tally.passed(rec, len(value))
            current.take(rec, offset)
        if need_snapshot:
            raise RuntimeError(
                f"changelog {topic}[{p}] starts at {low} but holds no complete snapshot "
                "from there: the partition's state cannot be rebuilt")
        self.cl_offset = current.offset
        self.since_snapshot = tally.since
        self.snapshot_bytes = tally.snapshot_bytes

    def load(self) -> None:
        """(Re)build the Engine and the bookkeeping from the committed state."""
        meta = self.book.get("meta") or {}
        self.now = int(meta.get("now", 0))
        self.applied = dict(meta.get("applied", {}))
        b = meta.get("barrier")
        self.barrier = (int(b[0]), str(b[1])) if b else None
        self.counters = {}
        self.dirty_counters = []
        self._cps = {}
        self.received = dict(self.applied)
        self.queues = [deque() for _ in self.upstreams]
        self.barriers_queued = [0] * len(self.upstreams)
        self._reset_for_version()
        engine = Engine(store=self.store, now_ms=self.now)
        engine.timing = self.timing
        engine.listeners.append(self._on_rows)
        self.forwards = {}
        if self.forward_to:
            engine.exports = frozenset(self.forward_to)
            engine.on_export = self._on_export
            self._forwarded = self.counter((FORWARDED, ""))
        spec = self.group.hash_spec
        for plan in self.group.plans:
            if plan.kind == "context" and plan.context_spec is spec:
                # this engine holds one bucket (= its Kafka partition)
                plan = replace(plan, context_spec=replace(plan.context_spec,
                                                          owned=self.partition))
            engine.deploy(plan)
        self.engine = engine
        self.held = (HeldEvents(self.book.child("held")) if self.group.event_time is not None
                     else None)
        self.late = int(meta.get("late", 0))
        self.first_use = None
        if spec is not None and not spec.preallocate:
            self.first_use = engine.contexts[spec.name].manager

    def _reset_for_version(self) -> None:
        """Once per deployed version, drop the state of the statements it rebuilds
        (``deployments``) and replay the retained input into those rebuilt from-earliest
        (``rebuild``); the writes and rows go into the next checkpoint."""
        resets = self.group.resets
        at = int(self.book.get("version") or 0)
        if resets is None or at >= resets[0]:
            return
        ours = {p.name for p in self.group.plans}
        replay = []
        for name, version in resets[1].items():
            if version > at:
                self.store.namespace("s", name).clear()
                if name in ours and self.group.replays.get(name) == version:
                    replay.append(name)
        if replay:
            if self.rebuild is None:
                raise RuntimeError(f"{self.group.name}[{self.partition}]: "
                                   f"{', '.join(replay)} must be rebuilt from the "
                                   "retained input, and nothing reads it here")
            self.rebuild(self, sorted(replay))
        self.book.put("version", resets[0])
        self.touched = True

    def close(self) -> None:
        self.writing = None  # its iterator goes before the database
        self.store.close()

    # -- records -----------------------------------------------------------------
    def run(self, records: list[InRecord]) -> None:
        """Apply input records; an event that fails inside the engine is dead-lettered.

        On a failure everything since the last commit is applied again from the committed
        state without that event, so the outcome is the same whenever (and however often)
        the records are replayed.
        """
        self._since_commit.extend(records)
        t0 = perf_counter()
        # a partition forwarding what it inserts sends its events one at a time: each
        # forwarded event names the event that set it off (``_on_export``)
        self._exact = bool(self.forward_to)
        try:
            try:
                if (len(self.upstreams) == 1 and self.first_use is None
                        and not self.poison and not self._exact):
                    if self.held is None:
                        self._run_one_upstream(records)
                    else:
                        self._hold_one_upstream(records)
                elif len(self.upstreams) > 1:
                    self._queue(records)
                else:
                    for r in records:
                        self._handle(r)
                self._flush()
            except _BatchFailed:
                self._exact = True
                self._pending.clear()
                self._redo()
        except _Fault as f:
            if self.escalate and f.rec.via == f.rec.upstream:
                raise Poisoned(f.rec, f.reason) from None
            self._replay_without(f)
        finally:
            self._exact = False
            self._pending.clear()
            self.busy_s += perf_counter() - t0

    def _run_one_upstream(self, records: list[InRecord]) -> None:
        """``_handle`` of each record, for a partition of one upstream whose events go to
        the engine as they come (no event time, no bucket numbering, nothing poisoned):
        the events join the pending run in place; anything else takes ``_handle``."""
        up = self.upstreams[0]
        received, applied = self.received, self.applied
        start = last = received.get(up, -1)
        pending = self._pending
        for r in records:
            if r.kind != "event" or r.upstream != up:
                if last != start:
                    received[up] = applied[up] = last
                self._handle(r)
                start = last = received.get(up, -1)
                continue
            off = r.offset
            if off <= last:
                continue
            last = off
            self.touched = True
            if pending and self._pending_type != r.type_name:
                self._flush()
            self._pending_type = r.type_name
            pending.append(r.payload)
        if last != start:
            received[up] = applied[up] = last

    def _hold_one_upstream(self, records: list[InRecord]) -> None:
        """``_handle`` of each record, for an event-time partition of one upstream (no
        bucket numbering, nothing poisoned): an event not behind the engine's time joins
        the held events in place; anything else (a barrier, a late event) takes
        ``_handle``."""
        up = self.upstreams[0]
        received, applied = self.received, self.applied
        start = last = received.get(up, -1)
        hold = self._hold
        for r in records:
            if r.kind == "event" and r.upstream == up:
                if r.offset <= last:
                    continue
                if hold(r, 0):
                    last = r.offset
                    self.touched = True
                    continue
            if last != start:
                received[up] = applied[up] = last
            self._handle(r)
            start = last = received.get(up, -1)
        if last != start:
            received[up] = applied[up] = last

    def _redo(self) -> None:
        """Everything since the commit again from the committed state, one event at a
        time (raises the ``_Fault`` of the event that failed)."""
        self.store.rollback()
        self.outputs.clear()
        self._keep_poison_dead()
        self.load()  # forwards too
        for r in self._since_commit:
            self._handle(r)

    def _keep_poison_dead(self) -> None:
        """Before a replay since the commit: keep the dead letters of poisoned records
        (the replay passes them over); the others (a held event that failed when
        released, a late event) the replay dead-letters again."""
        poison = self.poison
        self.dead = [d for d in self.dead if (d.record.upstream, d.record.offset) in poison]

    def _flush(self) -> None:
        """Send the pending run of events of one type in one engine batch: the same rows
        as one ``send`` each (``Engine.send_batch``)."""
        pending = self._pending
        if not pending:
            return
        assert self.engine is not None
        try:
            self.engine.send_batch(self._pending_type, pending)
        except Exception as e:  # noqa: BLE001 - replayed one at a time to find the event
            raise _BatchFailed() from e
        finally:
            pending.clear()

    def _replay_without(self, fault: _Fault) -> None:
        while True:
            self.store.rollback()
            self.outputs.clear()
            self._keep_poison_dead()
            self.poison.add((fault.rec.upstream, fault.rec.offset))
            self.dead.append(DeadLetter(fault.rec, fault.reason))
            self.load()
            self._exact = True
            try:
                for r in self._since_commit:
                    self._handle(r)
                return
            except _Fault as f:
                fault = f

    def hold(self) -> dict[str, int]:
        """Per input Kafka partition (``via``), the offset of the oldest record that
        still carries a waiting event or barrier: input offsets must not be committed
        past it."""
        out: dict[str, int] = {}
        for q in self.queues:
            if q:
                r = q[0]
                if r.via_offset < out.get(r.via, r.via_offset + 1):
                    out[r.via] = r.via_offset
        return out

    def waiting(self) -> Waiting | None:
        """What this partition waits for, or None if nothing is held."""
        oldest: InRecord | None = None
        count = 0
        for q in self.queues:
            count += len(q)
            if q and (oldest is None or q[0].via_offset < oldest.via_offset):
                oldest = q[0]
        if oldest is None:
            return None
        missing = tuple(u for u, n in zip(self.upstreams, self.barriers_queued) if not n)
        return Waiting(count, missing, oldest.upstream, oldest.offset, oldest.via,
                       oldest.via_offset)

    def _handle(self, r: InRecord) -> None:
        up = r.upstream
        if r.offset <= self.received.get(up, -1):
            return
        self.touched = True
        ui = self.up_index.get(up)
        if ui is None:
            raise RuntimeError(f"record from unknown upstream partition {up}")
        self.received[up] = r.offset
        if len(self.upstreams) == 1:
            self.applied[up] = r.offset
            if r.kind == "barrier":
                self._advance(r.payload["t"], r.payload["id"])
            else:
                self._event(r)
            return
        self.queues[ui].append(r)
        if r.kind == "barrier":
            self.barriers_queued[ui] += 1
            self._release()

    def _queue(self, records: list[InRecord]) -> None:
        """``_handle`` of each record, for a partition of several upstreams: records
        wait in their upstream's queue, a barrier releases what every upstream closed."""
        received, up_index, queues = self.received, self.up_index, self.queues
        for r in records:
            up = r.upstream
            off = r.offset
            if off <= received.get(up, -1):
                continue
            self.touched = True
            ui = up_index.get(up)
            if ui is None:
                raise RuntimeError(f"record from unknown upstream partition {up}")
            received[up] = off
            queues[ui].append(r)
            if r.kind == "barrier":
                self.barriers_queued[ui] += 1
                self._release()

    def _release(self) -> None:
        """Run every epoch that all upstreams have closed with a barrier."""
        while all(self.barriers_queued):
            heads: list[list[InRecord]] = []
            for q in self.queues:
                events = []
                while q[0].kind != "barrier":
                    events.append(q.popleft())
                heads.append(events)
            if self.first_use is not None:
                if not self.first_use.numbered:
                    self.first_use.first_use(self._first_uses(heads))
                # touches take no part in the merge: how many a restarted router sent
                # again must not move an event
                heads = [[r for r in events if r.kind != "touch"] for events in heads]
            elif self.group.arms:
                heads = self._arm_touches(heads)
            merged = merge_epoch(heads)
            if self.first_use is None and self.held is None and not self.poison \
                    and not self._exact:
                self._pend(merged)
            elif self.first_use is None and self.held is not None and not self.poison:
                self._hold_merged(merged)
            else:
                applied = self.applied
                for r in merged:
                    applied[r.upstream] = r.offset
                    self._event(r)
            t: int | None = None
            wid = ""
            for ui, q in enumerate(self.queues):
                b = q.popleft()
                self.barriers_queued[ui] -= 1
                self.applied[b.upstream] = b.offset
                bt = int(b.payload["t"])
                if t is None or bt < t:
                    t, wid = bt, str(b.payload["id"])
            self._advance(t or 0, wid)

    def _pend(self, merged: list[InRecord]) -> None:
        """``_event`` of each of an epoch's merged records where nothing is numbered,
        held or poisoned and events go to the engine in runs of one type: the events
        join the pending run in place, a touch takes ``_event``."""
        applied, pending = self.applied, self._pending
        one = set(map(_KIND_TYPE, merged))
        if len(one) == 1:
            kind, type_name = one.pop()
            if kind == "event":
                # events of one type, the common epoch: each upstream's last offset and
                # the payloads in one pass each
                if pending and self._pending_type != type_name:
                    self._flush()
                self._pending_type = type_name
                pending.extend(map(_PAYLOAD, merged))
                applied.update(zip(map(_UPSTREAM, merged), map(_OFFSET, merged)))
                return
        for r in merged:
            applied[r.upstream] = r.offset
            if r.kind != "event":
                self._event(r)
                continue
            if pending and self._pending_type != r.type_name:
                self._flush()
            self._pending_type = r.type_name
            pending.append(r.payload)

    def _hold_merged(self, merged: list[InRecord]) -> None:
        """``_event`` of each of an epoch's merged records in an event-time partition
        where nothing is numbered or poisoned: an event not behind the engine's time
        joins the held events in place; anything else takes ``_event``."""
        applied, up_index, hold = self.applied, self.up_index, self._hold
        for r in merged:
            applied[r.upstream] = r.offset
            if r.kind != "event" or not hold(r, up_index.get(r.upstream, 0)):
                self._event(r)

    def _first_uses(self, heads: list[list[InRecord]]) -> list[int]:
        """Buckets in the order of their first use in an epoch of several upstreams.

        A bucket's place is the smallest merge key of its first record in each upstream
        (a touch, or for our own bucket an event).  An upstream counts up to its first
        event of our bucket: touches after it cannot come before our first use, and
        whether a restarted router sent some again must not matter."""
        own = self.partition
        first: dict[int, tuple[int, int, int, int]] = {}
        for ui, events in enumerate(heads):
            seen: set[int] = set()
            for r in events:
                b = int(r.payload) if r.kind == "touch" else own
                if b in seen:
                    continue
                seen.add(b)
                key = (r.ts, -1 if r.seq is None else r.seq, ui, r.offset)
                if b not in first or key < first[b]:
                    first[b] = key
                if b == own:
                    break
        return sorted(first, key=first.__getitem__)

    def _arm_touches(self, heads: list[list[InRecord]]) -> list[list[InRecord]]:
        """A split statement's touches in an epoch: its first update came to another
        partition (``router.Routing.arm``), so its timed output is armed now; the
        epoch's events all run at this clock time, so where in it does not matter.  In
        event time each touch arms at its event's time (``_arm_at``)."""
        touches = [(ui, r) for ui, events in enumerate(heads) for r in events
                   if r.kind == "touch"]
        if touches:
            if self.held is None:
                for type_name in dict.fromkeys(r.type_name for _, r in touches):
                    self._arm_outputs(type_name)
            else:
                for ui, r in touches:
                    self._arm_at(r, ui)
            heads = [[r for r in events if r.kind != "touch"] for events in heads]
        return heads

    def _arm_at(self, r: InRecord, ui: int) -> None:
        """An arming touch in event time: held with the events until a watermark reaches
        the time of the event that armed the other partition (the touch's), so that
        each partition arms at that time; one behind the engine's time arms now."""
        assert self.engine is not None and self.held is not None
        if r.ts < self.engine.now_ms:
            self._arm_outputs(r.type_name)
            return
        seq = r.seq
        key = ((r.ts, *seq, ui, r.offset) if type(seq) is list  # a forwarded event's
               else (r.ts, -1 if seq is None else seq, ui, r.offset))
        self.held.add(key, ARM_TOUCH, r.type_name)

    def _arm_held(self, t: int, type_name: str) -> None:
        """A held arming touch (``_arm_at``) whose time ``t`` a watermark reached."""
        assert self.engine is not None
        self.engine.advance_time(max(t, self.engine.now_ms))
        self._arm_outputs(type_name)

    def _arm_outputs(self, type_name: str) -> None:
        """Arm the split statement as its first update, or first event of ``type_name``
        (a join arms that stream's window), did in another partition."""
        assert self.engine is not None
        for name in self.group.statements:
            self.engine.arm_output(name, type_name)

    def _event(self, r: InRecord) -> None:
        if r.kind == "touch":  # one upstream: in order
            self._flush()
            if self.first_use is not None:
                self.first_use.first_use((int(r.payload),))
            elif self.group.arms and self.held is not None:
                self._arm_at(r, self.up_index.get(r.upstream, 0))
            elif self.group.arms:
                self._arm_outputs(r.type_name)
            return
        if self.first_use is not None:
            # our bucket's first use numbers it (a poisoned event's too: the other
            # partitions count it from its touch)
            self.first_use.first_use((self.partition,))
        if (r.upstream, r.offset) in self.poison:
            return
        assert self.engine is not None
        if self.held is not None:
            if self._event_time(r):
                return
        elif not self._exact:
            # runs of one type go to the engine in one batch (flushed before anything
            # else touches the engine); a failure is found by the exact replay
            if self._pending and self._pending_type != r.type_name:
                self._flush()
            self._pending_type = r.type_name
            self._pending.append(r.payload)
            return
        self._trigger = (r.ts, r.seq, r.upstream, r.offset)
        try:
            self.engine.send(r.type_name, r.payload)
        except Exception as e:  # noqa: BLE001 - a statement failing on one event
            raise _Fault(r, f"engine error: {type(e).__name__}: {e}") from e

    def _hold(self, r: InRecord, ui: int) -> bool:
        """Hold an event (of upstream index ``ui``) until a watermark reaches its time;
        False when it is late, behind the engine's time (its caller says what then)."""
        engine, held, et = self.engine, self.held, self.group.event_time
        assert engine is not None and held is not None and et is not None
        t = et.time_of(r.type_name, r.payload, r.ts)
        if t < engine.now_ms:
            return False
        seq = r.seq
        if type(seq) is list:  # a forwarded event: one engine's order of its insert
            held.add((t, *seq, ui, r.offset), r.type_name, r.payload)
        else:
            held.add((t, -1 if seq is None else seq, ui, r.offset), r.type_name, r.payload)
        return True

    def _event_time(self, r: InRecord) -> bool:
        """Event time (``eventtime``): hold the event until a watermark reaches its time;
        a late one is run now or dead-lettered.  True when it must not run now."""
        if self._hold(r, self.up_index.get(r.upstream, 0)):
            return True
        assert self.engine is not None
        et = self.group.event_time
        t = et.time_of(r.type_name, r.payload, r.ts)
        now = self.engine.now_ms
        self.late += 1
        LATE[et.late] += 1
        if et.late == "dead-letter":
            self.dead.append(DeadLetter(r, late_reason(t, now),
                                        ((H_LATENESS, str(now - t).encode()),)))
            return True
        return False

    def _release_held(self, t: int) -> None:
        """Run the held events of time <= ``t`` in event-time order, each at its time.

        Outside an exact replay, the events of one time and type go to the engine as one
        batch (``Engine.send_batch_at``); where that could differ from a clock move and a
        send each (a batch that armed a timer due now, an event that failed), everything
        since the commit runs again one event at a time."""
        assert self.engine is not None and self.held is not None
        if not self._exact:
            self._release_runs(t)
            return
        poison = self.poison
        for key, type_name, payload in self.held.due(t):
            et, ui, offset = key[0], key[-2], key[-1]
            seq = key[1] if len(key) == 4 else -1  # a forwarded event's: its order
            if type_name == ARM_TOUCH:
                self._arm_held(et, payload)
                continue
            up = self.upstreams[ui] if ui < len(self.upstreams) else ""
            if (up, offset) in poison:
                continue  # failed before: the replay without it passes it over
            self._trigger = None
            self.engine.advance_time(max(et, self.engine.now_ms))
            self._trigger = key if len(key) != 4 else (et, seq, up, offset)
            try:
                self.engine.send(type_name, payload)
            except Exception as e:  # noqa: BLE001 - a statement failing on one event
                # dead-lettered and everything since the commit replayed without it, as
                # an event that fails on arrival (its partial effect must not stay)
                raise _Fault(InRecord("event", up, offset, type_name, et,
                                      None if seq < 0 else seq, payload),
                             f"engine error: {type(e).__name__}: {e}") from e

    def _release_runs(self, t: int) -> None:
        """``_release_held`` by runs of one event time and type (raises ``_BatchFailed``
        where a run's outcome could differ from one event at a time)."""
        engine = self.engine
        assert engine is not None and self.held is not None
        run: list[Any] = []
        run_type = ""
        run_time = -1
        for key, type_name, payload in self.held.due(t):
            et = key[0]
            if run and (et != run_time or type_name != run_type):
                self._send_run(run_type, run)
                run = []
            if type_name == ARM_TOUCH:
                self._arm_held(et, payload)
                continue
            if not run:
                engine.advance_time(max(et, engine.now_ms))
                run_type, run_time = type_name, et
            run.append(payload)
        if run:
            self._send_run(run_type, run)

    def _send_run(self, type_name: str, events: list[Any]) -> None:
        engine = self.engine
        assert engine is not None
        try:
            if len(events) == 1:
                engine.send(type_name, events[0])
                return
            if engine.send_batch_at(type_name, events):
                return
        except Exception as e:  # noqa: BLE001 - found again by the exact replay
            raise _BatchFailed() from e
        raise _BatchFailed()

    def _advance(self, t: int, wid: str) -> None:
        assert self.engine is not None
        self._flush()
        if self.held is not None:
            self._release_held(int(t))
        target = max(int(t), self.engine.now_ms)
        self._trigger = None
        self.engine.advance_time(target)
        self.barrier = (target, wid)
        if self._forwarded is not None:
            self._forward_barrier(target, wid)

    def _on_export(self, stream: str, event: Any, now: int) -> None:
        """An event inserted into a stream read through a repartition topic: an entry
        bound for the partition of its key there, numbered by this partition's forward
        counter (its readers' ``applied`` offset of upstream ``group/partition``) and
        stamped with the engine's time, at which the reader holds it.

        Its ``seq`` is its place in one engine's order of inserts of that time: a
        timer's (0) before an event's (1), an event's by the merge key of the input
        event that set it off (its time, ``kepl.seq``, source partition, offset), which
        one engine takes in that order; inserts of one input event, and a timer's of one
        time, in this partition's order."""
        assert self._forwarded is not None
        trig = self._trigger
        if trig is None:
            order = _TIMER_ORDER
        elif len(trig) != 4:  # a forwarded event's held key: its own order, passed on
            order = list(trig[1:6])
        elif type(trig[1]) is list:  # a forwarded event run at once
            order = trig[1]
        else:
            order = [1, trig[0], -1 if trig[1] is None else trig[1], trig[2], trig[3]]
        up = f"{self.group.name}/{self.partition}"
        for topic, reader in self.forward_to[stream]:
            q = reader.partition_of(stream, event)
            if q is None:
                continue
            entry = ["event", stream, up, self.next_seq(self._forwarded), now, order, event]
            self.forwards.setdefault((topic, q), []).append(entry)
            if reader.arms:
                self._arm_reader(stream, topic, reader, q, event, now, order)

    def _arm_reader(self, stream: str, topic: str, reader: Group, q: int, event: Any,
                    now: int, order: list[Any]) -> None:
        """The first forwarded event that updates a reader whose timed output (or
        ``#time_batch``) its first update arms: a touch to the reader's other partitions,
        at the event's time and place, as the routing stage sends one at a source
        partition's first such event (``router.Routing.arm``).  Whether this partition
        sent it is kept in its committed state (a row counter, ``ARMED``)."""
        armed = self.counter((ARMED, reader.name))
        assert reader.split is not None and self._forwarded is not None
        if armed.seq or not reader.split.arms_with(event, reader._ctx, stream):
            return
        self.next_seq(armed)
        touch = ["touch", stream, f"{self.group.name}/{self.partition}",
                 self.next_seq(self._forwarded), now, order, q]
        for r in range(reader.partitions):
            if r != q:
                self.forwards.setdefault((topic, r), []).append(touch)

    def _forward_barrier(self, t: int, wid: str) -> None:
        """A completed watermark, after the events it released: to every partition
        reading what this one forwards, which merges its upstreams' epochs by it."""
        assert self._forwarded is not None
        entry = ["barrier", "", f"{self.group.name}/{self.partition}",
                 self.next_seq(self._forwarded), 0, None, {"t": t, "id": wid}]
        readers = {topic: g for each in self.forward_to.values() for topic, g in each}
        for topic, reader in readers.items():
            for q in range(reader.partitions):
                self.forwards.setdefault((topic, q), []).append(entry)

    def _context_partition(self, pid: Any) -> tuple[str, dict[str, RowCounter]]:
        """``kepl.context_partition`` of a row: the same whichever worker runs it; with
        the row counters of the context partition's statements (none yet).

        Hash group: the bucket (= Kafka partition; ``context.id`` follows first use
        unless preallocated); a match_recognize statement routed by its partition by:
        the engine partition.  Keyed group: the key
        text, since ``context.id`` only numbers the keys of this engine partition.
        Otherwise the context partition id of the one Engine of ``main``.
        """
        g = self.group
        if g.hash_spec is not None or g.mr_keys is not None:
            text = str(self.partition)
        elif g.keyed_spec is not None and self.engine is not None:
            found = keyed_text(self.engine, g.keyed_spec.name, pid)
            if found is None:
                return pid_text(pid), {}  # not one of its keys (yet): not kept
            text = found
        else:
            text = pid_text(pid)
        # an id names the same partition for the engine's lifetime (ids are not reused)
        cp = self._cps[pid] = (text, {})
        return cp

    def counter(self, key: tuple[str, str]) -> RowCounter:
        """The row counter of (statement, context partition text), read once."""
        c = self.counters.get(key)
        if c is None:
            c = self.counters[key] = RowCounter(key, self.seq_ns.get(key, 0))
        return c

    def next_seq(self, c: RowCounter) -> int:
        """The seq of one more row of a row counter's (statement, context partition)."""
        c.seq += 1
        if not c.dirty:
            c.dirty = True
            self.dirty_counters.append(c)
        return c.seq

    def _on_rows(self, stmt: str, new: list, old: list, pid: Any) -> None:
        if self.group.split is not None:
            self._on_split_rows(stmt, new, old)
            return
        found = self._cps.get(pid)
        text, by_stmt = self._context_partition(pid) if found is None else found
        c = by_stmt.get(stmt)
        if c is None:
            c = by_stmt[stmt] = self.counter((stmt, text))
        seq = c.seq
        now = self.engine.now_ms if self.engine is not None else 0
        append = self.outputs.append
        for row in new:  # OutRow(...) without its Python-level __new__
            seq += 1
            append(_new_tuple(OutRow, (stmt, "insert", text, now, seq, row, c)))
        for row in old:
            seq += 1
            append(_new_tuple(OutRow, (stmt, "remove", text, now, seq, row, c)))
        c.seq = seq
        if not c.dirty:
            c.dirty = True
            self.dirty_counters.append(c)

    def _on_split_rows(self, stmt: str, new: list, old: list) -> None:
        """Rows of a statement split by group key: numbered per group, the group's key
        text as their context partition, so the ids are those of one engine."""
        assert self.group.split is not None
        key_of = self._row_keys.get(stmt)
        if key_of is None:
            key_of = self._row_keys[stmt] = self.group.split.row_key(stmt)
        now = self.engine.now_ms if self.engine is not None else 0
        for stream, rows in (("insert", new), ("remove", old)):
            for row in rows:
                cp = key_of(row)
                c = self.counter((stmt, cp))
                seq = self.next_seq(c)
                self.outputs.append(OutRow(stmt, stream, cp, now, seq, row, c))

    # -- batch end -----------------------------------------------------------------
    def seal(self) -> ChangelogRecord | None:
        """The changelog record of the batch, or None if it changed nothing."""
        assert self.engine is not None
        if not self.touched:
            return None
        self.touched = False
        if self.held is not None:
            self.held.persist()
        for c in self.dirty_counters:
            put = c.put
            if put is None:
                put = c.put = self.seq_ns.putter(c.key)
            put(c.seq)
            c.dirty = False
        self.dirty_counters.clear()
        self.book.put("meta", {"now": self.engine.now_ms, "applied": self.applied,
                               "barrier": list(self.barrier) if self.barrier else None,
                               **({"late": self.late} if self.late else {})})
        self.sealed = ChangelogRecord(
            self.cl_offset,
            {"group": self.group.name, "partition": self.partition,
             "now": self.engine.now_ms,
             "since": self.since_snapshot, "snap": self.snapshot_bytes,
             **({"late": self.late} if self.late else {}),
             **({"version": self.group.resets[0]} if self.group.resets else {})},
            self.store.batch_writes())
        return self.sealed

    def committed(self, offset: int, size: int | None = None) -> bool:
        """The sealed record (``size`` bytes encoded) is durable at ``offset``: commit
        local state.

        Returns whether a new barrier was completed (the caller publishes progress).
        """
        self._check_offset(offset)
        sealed = self.sealed
        if self.sizes is not None and sealed is not None:
            self.sizes.apply(self.store.committed, sealed.writes)
        self.store.commit(offset, sealed.writes if sealed is not None else None)
        if sealed is not None:
            self.since_snapshot += len(sealed.encode()) if size is None else size
        self.sealed = None
        self.cl_offset = offset
        self.outputs = []
        self.dead = []
        self._keep_waiting()
        advanced = self.barrier is not None and self.barrier != self.progress
        self.progress = self.barrier
        return advanced

    def _check_offset(self, offset: int, after: int | None = None) -> None:
        """A record of ours landed at ``offset``: it must follow the last one (right after
        it unless transaction markers take offsets between)."""
        after = self.cl_offset if after is None else after
        if offset <= after or (self.adjacent and offset != after + 1):
            raise RuntimeError(
                f"changelog {self.changelog_topic}[{self.partition}] has our record at "
                f"{offset}, not after {after}: another worker writes this partition")

    # -- snapshots -----------------------------------------------------------------
    def snapshot_due(self) -> bool:
        """Whether the changelog since the last snapshot outgrew the policy's threshold
        (and no snapshot is being written)."""
        p = self.snapshots
        return (p is not None and self.writing is None
                and self.since_snapshot > max(p.factor * self.snapshot_bytes, p.floor))

    def start_snapshot(self) -> None:
        """Begin a snapshot of the committed state as it is now (at ``cl_offset``)."""
        if self.store.pending:
            raise RuntimeError("a snapshot needs a committed partition")
        items = self.store.state_items()
        self.writing = _Writing(self.cl_offset, items, next(items, None))

    def snapshot_part(self) -> ChangelogRecord:
        """The next part of the snapshot being written, chained after ``cl_offset``.

        Parts hold at most ``part_bytes`` of entries; the last one says so (``last``)
        and carries the snapshot's size (``bytes``).  A part is only taken once the one
        before it is durable (``snapshot_part_committed``).
        """
        w = self.writing
        if w is None or w.pending is not None:
            raise RuntimeError("no snapshot part to write")
        limit = (self.snapshots or SnapshotPolicy()).part_bytes
        entries: list[tuple[bytes, bytes | None]] = []
        size = 0
        head = w.head
        while head is not None:
            n = entry_size(*head)
            if entries and size + n > limit:  # an entry larger than a part goes alone
                break
            entries.append(head)
            size += n
            head = next(w.items, None)
        w.head = head
        last = head is None
        w.pending = (size, last)
        now = self.engine.now_ms if self.engine is not None else self.now
        return ChangelogRecord(
            self.cl_offset,
            {"group": self.group.name, "partition": self.partition, "now": now,
             "since": self.since_snapshot, "snap": self.snapshot_bytes,
             **({"late": self.late} if self.late else {}),
             "snapshot": {"id": w.id, "part": w.part, "last": last, "bytes": w.bytes + size}},
            entries)

    def snapshot_part_committed(self, offset: int) -> int | None:
        """The part from ``snapshot_part`` is durable at ``offset``.  Returns the offset
        of the snapshot's first part once its last part is in (the records before it
        may be deleted), else None."""
        w = self.writing
        if w is None or w.pending is None:
            raise RuntimeError("no snapshot part was written")
        self._check_offset(offset)
        size, last = w.pending
        # the last part lets the records before the snapshot go: RocksDB's marker must
        # not stay before them
        self.store.set_marker(offset, durable=last)
        self.cl_offset = offset
        w.pending = None
        w.bytes += size
        if w.part == 0:
            w.first = offset
        w.part += 1
        if not last:
            return None
        self.writing = None
        self.since_snapshot = 0
        self.snapshot_bytes = w.bytes
        return w.first

    def abandon_snapshot(self) -> None:
        """Stop writing the current snapshot (its parts stay, an incomplete snapshot)."""
        self.writing = None

    def committed_unchanged(self) -> None:
        """The checkpoint committed and this partition wrote no record: forget the
        records kept for a replay (waiting ones stay queued)."""
        self._keep_waiting()
        self.dead = []

    def _keep_waiting(self) -> None:
        # a replay after a fault starts from the committed state, where the waiting
        # records are not: they are applied again first
        self._since_commit = list(chain.from_iterable(self.queues))

    def discard(self) -> None:
        """Forget everything since the last commit (an aborted checkpoint, or the caller
        is going down); ``load`` rebuilds from the committed state."""
        self.store.rollback()
        self.writing = None
        self.outputs = []
        self.forwards = {}
        self.dead = []
        self._since_commit = []
        self.sealed = None

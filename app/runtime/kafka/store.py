"""Batch-atomic RocksDB state for one engine partition, and the changelog record codec.

An engine partition's state lives in a rocksdict database through ``operators.state``'s
``RocksStore`` protocol.  Writes made while a batch of input records is processed go to
an in-memory overlay first (reads see them); ``commit`` then writes the whole overlay and
the changelog position marker in one RocksDB ``WriteBatch``.  So the local database
always holds the state *as of a changelog record*, never half a batch, and a worker that
is killed mid-batch can trust it after a restart: it only replays the changelog records
after the marker.  ``rollback`` forgets the overlay (an engine error, or a crash test).

The overlay is also what goes into the batch's changelog record: the last value of every
key written during the batch (a key written 500 times costs one entry).  Values put
through a namespace are kept as objects and encoded once, when the batch's writes are
taken: an aggregation state rewritten on every event is encoded once per batch.

A changelog record is either a *batch* record (state writes and output rows) or one
*part* of a snapshot: the whole committed state (``state_items``: every key but the
local-only marker) split into records of bounded size, each marked in its meta with
``{"snapshot": {"id", "part", "last", "bytes"}}`` and chained with ``prev`` like a batch.
A complete snapshot lets the records before it be deleted from the topic: a database
rebuilt from nothing loads the snapshot's parts (``apply_writes``, no marker until the
last part, so a crash while loading leaves a database without marker, which is wiped),
then replays the batches after it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import zlib
from bisect import bisect_left, insort
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate, islice
from operator import itemgetter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rocksdict import (
    BlockBasedOptions,
    Cache,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from operators.state import RocksStore, encode_value

log = logging.getLogger("kepl.worker")

MARKER_KEY = b"\xffkepl.changelog.offset"
"""Local-only key: offset of the last changelog record reflected in this database."""

_NO_WAL = WriteOptions()
BLOCK_CACHE_ENV = "KEPL_BLOCK_CACHE_MB"
DEFAULT_BLOCK_CACHE_MB = 16
_block_cache: Cache | None = None


def block_cache() -> Cache:
    """One block cache for every engine partition database of the process
    (``KEPL_BLOCK_CACHE_MB``, default 16): RocksDB's default is 32 MiB per database, so
    a worker's resident size would grow with the partitions it holds, slowly, as reads
    fill each cache."""
    global _block_cache
    if _block_cache is None:
        given = os.environ.get(BLOCK_CACHE_ENV, "").strip()
        _block_cache = Cache(int(float(given) * (1 << 20)) if given
                             else DEFAULT_BLOCK_CACHE_MB << 20)
    return _block_cache
_NO_WAL.disable_wal = True
"""Batches skip RocksDB's write-ahead log: the changelog topic is the log.  After a crash
the database is as of its last memtable flush, a consistent batch boundary with its
marker, and the worker replays the changelog records after that marker."""

BEHIND_WRITES = 1 << 18
"""Writes committed (``PartitionStore.commit``) that may wait before they go into RocksDB:
a restart replays at most about this many more from the changelog.  Counted in writes,
not commits, so that a window row's chance to leave before its flush does not depend on
how many events a checkpoint holds (a live input commits every few hundred events, a
backlog every few thousand)."""
BEHIND_COMMITS = 1000
"""Commits whose writes may wait at most (bounds the changelog records a restart reads)."""
BEHIND_KEYS = 1 << 17
"""Keys that may wait (about 10 MB of state values)."""
BEHIND_KEPT = 0.75
"""Waiting pays when fewer writes reach RocksDB: at a flush that writes more than this
share of the writes it took, commits write through for ``THROUGH_COMMITS`` (a state
whose keys are each written once, e.g. 10^5 keys seen once each, would only pay for a
large dictionary)."""
THROUGH_COMMITS = 500

_MISSING = object()
_DEFERRED = object()
_DELETED = 0xFFFFFFFF
_U32 = struct.Struct(">I")
_MAGIC = b"KCL2"
"""A changelog record: the head, then its writes as every key's length, every value's
length (``_DELETED`` for a delete), the keys and the values, each laid end to end."""
_MAGIC_V1 = b"KCL1"
"""The earlier layout, still read: each write's key length, key, value length, value."""
_KEY = itemgetter(0)
"""Sort key of ``(key, value)`` pairs with distinct keys: the keys alone are compared
(a tuple comparison costs about twice as much)."""


class _ListIter:
    """The slice of rocksdict's iterator API that ``RocksNamespace`` uses, over a list."""

    __slots__ = ("_items", "_i")

    def __init__(self, items: list[tuple[bytes, bytes]]) -> None:
        self._items = items
        self._i = len(items)

    def seek(self, key: bytes) -> None:
        lo, hi = 0, len(self._items)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._items[mid][0] < key:
                lo = mid + 1
            else:
                hi = mid
        self._i = lo

    def valid(self) -> bool:
        return self._i < len(self._items)

    def key(self) -> bytes:
        return self._items[self._i][0]

    def value(self) -> bytes:
        return self._items[self._i][1]

    def next(self) -> None:
        self._i += 1


class _MergedIter:
    """A prefix scan over the database with the uncommitted overlay laid on top."""

    __slots__ = ("_base", "_overlay", "_it")

    def __init__(self, base: Rdict, overlay: OverlayDB) -> None:
        self._base = base
        self._overlay = overlay
        self._it = _ListIter([])

    def seek(self, key: bytes) -> None:
        # Scans only happen when an operator instance is (re)built or cleared, so merging
        # eagerly for the sought prefix region is cheap enough and keeps this simple.
        self._it = _ListIter(_merged(self._base, self._overlay, key))
        self._it.seek(key)

    def valid(self) -> bool:
        return self._it.valid()

    def key(self) -> bytes:
        return self._it.key()

    def value(self) -> bytes:
        return self._it.value()

    def next(self) -> None:
        self._it.next()


def _merged(base: Rdict, overlay: OverlayDB, prefix: bytes) -> list[tuple[bytes, bytes]]:
    """The entries under ``prefix``, the uncommitted overlay laid on the database's
    (committed writes still ``behind`` are written to the database first)."""
    if overlay.behind:
        overlay.flush_behind()
    stop = _prefix_end(prefix)
    entries = _range(base, prefix, stop)
    pending = overlay.pending_between(prefix, stop)
    if pending:
        merged = dict(entries)
        merged.update(pending)
        entries = sorted(((k, v) for k, v in merged.items() if v is not None), key=_KEY)
    return entries  # the database's order when nothing is pending


def _range(base: Rdict, lo: bytes, hi: bytes | None) -> list[tuple[bytes, bytes]]:
    """The committed entries with ``lo <= key < hi``, in key order: one call into
    rocksdict for the whole range (a restore scans 10^6 context keys at once)."""
    opt = ReadOptions()
    if hi is not None:
        opt.set_iterate_upper_bound(hi)
    return list(base.items(from_key=lo, read_opt=opt))


def _prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix``."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return None
    p[-1] += 1
    return bytes(p)


class OverlayDB:
    """Rdict look-alike: reads fall through the overlay to RocksDB, writes stay pending.

    ``transient`` holds the keys deleted after a put of the same batch: only for those
    can the delete be a no-op for the database (a row that entered and left a window
    within the batch), so only those are looked up when the batch's writes are taken.
    A key put with ``put_new`` (``fresh``: the database cannot hold it, a window's next
    sequence number) needs no lookup: its delete in the same batch is dropped
    (``vanished`` counts them).

    ``put_value`` keeps a value unencoded (``_DEFERRED`` in ``pending``, the object in
    ``values``) until ``materialize``; operators store the objects they keep (the
    embedded memory store holds the same references), so the value encoded is the one
    the operator holds at the batch's end.
    """

    def __init__(self, base: Rdict) -> None:
        self.base = base
        self.behind: dict[bytes, bytes | None] = {}
        """Committed writes not in ``base`` yet (``PartitionStore.flush`` writes them)."""
        self.flush_behind: Any = None
        """Writes ``behind`` into ``base``: a scan reads the database as committed."""
        self.unwritten: set[bytes] = set()
        """Keys ``behind`` that ``base`` does not hold (put with ``put_new``)."""
        self.cancel: list[bytes] = []
        """Keys of ``unwritten`` the batch deleted: they need not reach ``base`` at all."""
        self.pending: dict[bytes, Any] = {}
        self.values: dict[bytes, Any] = {}
        self.transient: set[bytes] = set()
        self.fresh: set[bytes] = set()
        self.vanished = 0
        self._order: list[bytes] = []
        """Pending keys in key order, as of the last scan."""
        self._recent: list[bytes] = []
        """Pending keys first written since the last scan (a scan sorts them in)."""

    def reset(self) -> None:
        """Forget the overlay (committed or rolled back)."""
        self.pending.clear()
        self.values.clear()
        self.transient.clear()
        self.fresh.clear()
        self.vanished = 0
        self.cancel.clear()
        self._order.clear()
        self._recent.clear()

    def pending_between(self, lo: bytes, hi: bytes | None) -> list[tuple[bytes, bytes | None]]:
        """Pending writes with ``lo <= key < hi`` in key order (``hi`` None: no bound).

        A new context partition scans its empty namespaces: this costs a bisection, not
        a pass over the batch's writes."""
        if self.values:
            self.materialize()
        recent = self._recent
        order = self._order
        if recent:
            if len(recent) * 8 > len(order):
                order.extend(recent)
                order.sort()
            else:
                for k in recent:
                    insort(order, k)
            recent.clear()
        i = bisect_left(order, lo)
        j = len(order) if hi is None else bisect_left(order, hi, i)
        pending = self.pending
        return [(k, pending[k]) for k in order[i:j]]

    def get(self, key: bytes) -> bytes | None:
        pending = self.pending
        if key in pending:
            v = pending[key]
            return encode_value(self.values[key]) if v is _DEFERRED else v
        return self.committed(key)

    def committed(self, key: bytes) -> bytes | None:
        """The committed value of ``key`` (the batch's writes left out)."""
        v = self.behind.get(key, _MISSING)
        return self.base.get(key) if v is _MISSING else v

    def committed_many(self, keys: list[bytes]) -> list[bytes | None]:
        """``committed`` of each of ``keys``: one multi-get for those not ``behind``."""
        behind = self.behind
        if not behind:
            return self.base.get(keys)
        out = [behind.get(k, _MISSING) for k in keys]
        missing = [k for k, v in zip(keys, out) if v is _MISSING]
        if missing:
            found = iter(self.base.get(missing))
            out = [next(found) if v is _MISSING else v for v in out]
        return out

    def put_value(self, key: bytes, value: Any) -> None:
        """Put an object, encoded at ``materialize``."""
        pending = self.pending
        if key not in pending:
            self._recent.append(key)
        pending[key] = _DEFERRED
        self.values[key] = value

    def put_new(self, key: bytes, value: Any) -> None:
        """``put_value`` of a key the database does not hold."""
        pending = self.pending
        if key not in pending:
            self._recent.append(key)
        pending[key] = _DEFERRED
        self.values[key] = value
        self.fresh.add(key)

    def materialize(self) -> dict[bytes, bytes | None]:
        """Encode the deferred values; the pending writes as bytes."""
        pending = self.pending
        get, encode = pending.get, encode_value
        for k, v in self.values.items():
            if get(k) is _DEFERRED:
                pending[k] = encode(v)
        self.values.clear()
        return pending

    def __getitem__(self, key: bytes) -> bytes:
        v = self.get(key)
        if v is None:
            raise KeyError(key)
        return v

    def __setitem__(self, key: bytes, value: bytes) -> None:
        pending = self.pending
        if key not in pending:
            self._recent.append(key)
        pending[key] = value

    def delete(self, key: bytes) -> None:
        pending = self.pending
        old = pending.get(key, _MISSING)
        if old is _MISSING:
            self._recent.append(key)
            if key in self.unwritten:
                self.cancel.append(key)
        elif old is not None:
            if key in self.fresh:
                self.vanished += 1
            else:
                self.transient.add(key)
        pending[key] = None

    def scan(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        """Every entry under ``prefix`` in key order, the overlay included (one list,
        not a call per key)."""
        return _merged(self.base, self, prefix)

    def iter(self) -> _MergedIter:
        return _MergedIter(self.base, self)

    def keys(self) -> Iterator[bytes]:
        it = self.iter()
        it.seek(b"")
        while it.valid():
            yield it.key()
            it.next()

    def close(self) -> None:
        self.base.close()


class PartitionStore(RocksStore):
    """``RocksStore`` whose writes are applied per batch (``commit``) or dropped (``rollback``)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.base = self._open()
        self.db = OverlayDB(self.base)
        self.db.flush_behind = self.flush
        self.committed = SimpleNamespace(get=self.db.committed_many)
        """Reads the committed values of keys (``get(keys)``), those ``behind`` too."""
        self.behind_marker: int | None = None
        self.behind_commits = 0
        self.behind_limit = BEHIND_COMMITS
        """Commits to a flush: ``BEHIND_COMMITS``, or 1 while writing through."""
        # partitions of one worker flush at different commits, not all in the same one
        self.flush_at = BEHIND_WRITES - zlib.crc32(str(self.path).encode()) % (BEHIND_WRITES // 2)
        """Writes taken (``staged``) at which the next flush comes."""
        self.staged = 0
        """Writes taken since the last flush."""
        self.through = 0
        """Commits left to write through."""
        self.sink = None
        self.bulk = False
        """Loading an empty database (``begin_bulk``): no compaction until ``end_bulk``."""

    def _open(self) -> Rdict:
        """The database at ``path``; one a crash left unreadable is started empty.

        The database only caches the changelog: a kill -9 in ``wipe`` (or by RocksDB's
        own file writes) can leave ``CURRENT`` naming a manifest that is gone, and a
        database without its marker is loaded from the changelog like a new one."""
        _drop_discarded(self.path)
        try:
            return self._open_rdict()
        except Exception as e:  # rocksdict raises a bare Exception
            if not _unreadable(e, self.path):
                raise
            log.warning("state store %s could not be opened (%s); it starts empty and "
                        "is restored from its changelog", self.path, e)
            _discard(self.path)
            return self._open_rdict()

    def _open_rdict(self) -> Rdict:
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        # memtables of 16 MiB, three of them (Kafka Streams' state store settings): a
        # batch's inserts search a small skiplist, so their cost barely grows with the
        # number of keys the partition holds (bench_contexts: 64 MiB cost twice as much)
        opts.set_write_buffer_size(16 << 20)
        opts.set_max_write_buffer_number(3)
        table = BlockBasedOptions()
        table.set_block_cache(block_cache())
        opts.set_block_based_table_factory(table)
        return Rdict(str(self.path), options=opts)

    @property
    def pending(self) -> dict[bytes, bytes | None]:
        """Uncommitted writes of the current batch (key -> value, None = deleted)."""
        return self.db.materialize() if self.db.values else self.db.pending

    def batch_writes(self) -> list[tuple[bytes, bytes | None]]:
        """The batch's net writes: a key put and deleted within the batch (a row that
        entered and left a window) leaves no trace in the changelog.

        Only keys put before their delete in this batch may be absent from the database;
        they are looked up in one multi-get (those put with ``put_new`` need none), every
        other delete is kept as it is (no read per delete: the cost of a batch does not
        grow with the size of the state)."""
        pending = self.pending
        db = self.db
        transient = [k for k in db.transient if pending.get(k, b"") is None]
        if not transient:
            if not db.vanished:
                return list(pending.items())
            gone = db.fresh
        else:
            gone = {k for k, v in zip(transient, db.committed_many(transient)) if v is None}
            gone.update(db.fresh)
        return [(k, v) for k, v in pending.items() if v is not None or k not in gone]

    def marker(self) -> int:
        """Offset of the last changelog record this database reflects (-1: none)."""
        self.flush()
        raw = self.base.get(MARKER_KEY)
        return -1 if raw is None else int(raw)

    def commit(self, marker: int, writes: list[tuple[bytes, bytes | None]] | None = None
               ) -> None:
        """Commit the overlay (or its ``batch_writes``) as of changelog record ``marker``.

        The writes join those committed before and not yet in the database (``behind``,
        which reads see): a row put into a window and deleted some batches later, before
        they reach the database, never costs RocksDB a put or a delete.  ``flush`` writes
        them with the marker atomically, every ``BEHIND_COMMITS`` commits (each commit
        while waiting does not pay: ``BEHIND_KEPT``), at ``BEHIND_KEYS`` keys, and before
        anything reads the database itself (a scan, the marker, a snapshot)."""
        db = self.db
        behind = db.behind
        writes = self.pending if writes is None else writes
        self.staged += len(writes)
        behind.update(writes)
        unwritten = db.unwritten
        for k in db.cancel:
            # deleted before it reached the database (unless a scan flushed it meanwhile)
            if k in unwritten and behind.get(k, b"") is None:
                del behind[k]
                unwritten.discard(k)
        if db.fresh:
            unwritten |= db.fresh
        self.behind_marker = marker
        self.behind_commits += 1
        self.db.reset()
        if (self.staged >= self.flush_at or self.behind_commits >= self.behind_limit
                or len(behind) >= BEHIND_KEYS):
            self.flush()

    def flushed(self) -> Rdict:
        """The database, every committed write in it."""
        self.flush()
        return self.base

    def flush(self) -> None:
        """Write the committed writes ``behind`` and their marker in one batch.

        In key order (a copy: the record keeps its own): RocksDB's memtable inserts keys
        in ascending order from where the last one landed, while a batch's keys come in
        event order, scattered over its context partitions (about 20 % less time in
        RocksDB for the keyed job)."""
        marker = self.behind_marker
        if marker is None:
            return
        behind = self.db.behind
        # the keys alone sorted (bytes against bytes), each value looked up after: a
        # third less time than sorting the items by a key function
        keys = sorted(behind)
        self._write(zip(keys, map(behind.__getitem__, keys)), marker)
        if self.through:
            self.through -= 1
            if not self.through:
                self.behind_limit = BEHIND_COMMITS
        elif self.staged >= 1000 and len(behind) > BEHIND_KEPT * self.staged:
            self.behind_limit = 1
            self.through = THROUGH_COMMITS
        behind.clear()
        self.db.unwritten.clear()
        self.behind_marker = None
        self.behind_commits = 0
        self.staged = 0
        self.flush_at = BEHIND_WRITES

    def rollback(self) -> None:
        """Forget every write since the last commit."""
        self.db.reset()

    def apply_record(self, writes: list[tuple[bytes, bytes | None]], marker: int) -> None:
        """Replay one changelog record (recovery), atomically with its marker."""
        self.flush()
        self._write(writes, marker)

    def apply_writes(self, writes: list[tuple[bytes, bytes | None]]) -> None:
        """Load a snapshot part: writes without moving the marker."""
        self.flush()
        self._write(writes, None)

    def apply_encoded(self, data: bytes, at: int, marker: int | None) -> None:
        """``apply_record`` (``marker`` None: ``apply_writes``) of the writes encoded in
        ``data`` from ``at`` (``ChangelogRecord.decode_head``)."""
        self.flush()
        wb = _batch(data, at) if marker is None else _sorted_batch(data, at)
        if marker is not None:
            wb.put(MARKER_KEY, str(marker).encode())
        self.base.write(wb, _NO_WAL)

    def begin_bulk(self) -> None:
        """A restore into an empty database starts: background compactions wait.

        Changelog keys arrive in random order, so level compactions would rewrite the
        same key ranges again and again while the load goes on (about 3 s of CPU at
        10^6 keys); ``end_bulk`` instead merges the flushed files once."""
        self.flush()
        self.bulk = True
        self.base.set_options({"disable_auto_compactions": "true"})

    def end_bulk(self) -> None:
        """The load is over: flush and compact the whole key range into one sorted run
        (the work is done now, not left to come due later), then compact as usual."""
        if not self.bulk:
            return
        self.bulk = False
        self.base.flush()
        self.base.compact_range(None, None)
        self.base.set_options({"disable_auto_compactions": "false"})

    def set_marker(self, marker: int, durable: bool = True) -> None:
        """Move the marker (records that change no state: snapshot parts).  Not
        ``durable``: the marker waits with the writes behind it for their flush (a
        restart then replays from an earlier record)."""
        if not durable:
            self.behind_marker = marker
            return
        self.flush()
        self._write((), marker)

    def _write(self, writes: Any, marker: int | None) -> None:
        wb = WriteBatch(raw_mode=True)
        put, delete = wb.put, wb.delete
        for k, v in writes:
            if v is None:
                delete(k)
            else:
                put(k, v)
        if marker is not None:
            wb.put(MARKER_KEY, str(marker).encode())
        self.base.write(wb, _NO_WAL)

    def state_items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every committed key and value except the marker, in key order, as of this call:
        the RocksDB iterator is created here and sees no later write (a snapshot)."""
        self.flush()
        it = self.base.iter()
        it.seek_to_first()
        return _entries(it)

    def wipe(self) -> None:
        """Drop every key (the changelog does not continue this database).

        The database is destroyed and created again rather than deleted key by key; the
        ``OverlayDB`` (which namespaces hold) is kept and points at the new one.
        """
        self.rollback()
        self.db.behind.clear()
        self.db.unwritten.clear()
        self.behind_marker = None
        self.behind_commits = 0
        self.staged = 0
        self.flush_at = BEHIND_WRITES
        self.base.close()
        # moved aside first: a kill while its files are deleted leaves no half database
        _discard(self.path)
        self.base = self._open()
        self.db.base = self.base
        if self.bulk:
            self.base.set_options({"disable_auto_compactions": "true"})

    def close(self) -> None:
        self.flush()
        self.base.close()


DISCARDED = ".discarded"
"""Suffix of a database directory being removed (``_discard``): not a partition's."""


def _discard(path: Path) -> None:
    """Remove the database at ``path``: renamed in one step, then its files deleted."""
    if not path.exists():
        return
    aside = path.with_name(path.name + DISCARDED)
    shutil.rmtree(aside, ignore_errors=True)
    path.rename(aside)
    shutil.rmtree(aside, ignore_errors=True)


def _drop_discarded(path: Path) -> None:
    """Finish a ``_discard`` that a kill interrupted."""
    aside = path.with_name(path.name + DISCARDED)
    if aside.exists():
        shutil.rmtree(aside, ignore_errors=True)


def _unreadable(error: Exception, path: Path) -> bool:
    """Whether opening ``path`` failed on the files a crash leaves (a manifest gone, a
    corrupt file), not on a lock another open holds."""
    text = str(error)
    return (text.startswith(("Corruption:", "IO error: No such file"))
            and "While lock file" not in text and path.exists())


def _entries(it: Any) -> Iterator[tuple[bytes, bytes]]:
    while it.valid():
        k = it.key()
        if k != MARKER_KEY:
            yield k, it.value()
        it.next()


# -- changelog records ---------------------------------------------------------------


@dataclass
class ChangelogRecord:
    """One batch (or one snapshot part) of one engine partition: metadata and state
    writes.  The batch's output rows travel in the same transaction, not in the record.

    ``prev`` is the offset of the changelog record this one continued from (a chain:
    a record whose ``prev`` is not the last applied offset was written by a stale
    writer and is ignored on replay).  A transaction may hold more than one record of a
    partition (a snapshot part, then the batch): each names the transaction (``w``, a
    token its writer drew) and its place in it (``n``), and all carry the ``prev`` of
    the first, whose offset none of them can know when it is written.
    """

    prev: int
    meta: dict[str, Any] = field(default_factory=dict)
    writes: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    w: str = ""
    n: int = 0

    @property
    def snapshot(self) -> dict[str, int] | None:
        """``{"id", "part", "last", "bytes"}`` if this record is a snapshot part (earlier
        changelogs: ``parts`` instead of ``last``)."""
        return self.meta.get("snapshot")

    def encode(self) -> bytes:
        head = json.dumps({"prev": self.prev, "w": self.w, "n": self.n, "meta": self.meta}
                          if self.w else {"prev": self.prev, "meta": self.meta},
                          separators=(",", ":")).encode()
        writes = self.writes
        n = len(writes)
        keys = [k for k, _ in writes]
        values = [v for _, v in writes]
        # the lengths in one pack call, the keys and values as they are: a restore reads
        # them back without a step per write in Python
        lens = struct.pack(f">{2 * n + 1}I", n, *map(len, keys),
                           *[_DELETED if v is None else len(v) for v in values])
        return b"".join([_MAGIC, _U32.pack(len(head)), head, lens, *keys,
                         *[v for v in values if v is not None]])

    @classmethod
    def decode(cls, data: bytes) -> ChangelogRecord:
        rec, at = cls.decode_head(data)
        rec.writes = list(_writes(data, at))
        return rec

    @classmethod
    def decode_head(cls, data: bytes) -> tuple[ChangelogRecord, int]:
        """The record without its writes, and where they start in ``data`` (a restore
        hands them to ``PartitionStore.apply_encoded`` without building a list)."""
        if data[:4] != _MAGIC and data[:4] != _MAGIC_V1:
            raise ValueError("not a kepl changelog record")
        (n,) = _U32.unpack_from(data, 4)
        head = json.loads(data[8:8 + n])
        return cls(head["prev"], head["meta"], w=head.get("w", ""),
                   n=head.get("n", 0)), 8 + n


def _record_entries(data: bytes, i: int) -> tuple[list[bytes], list[bytes | None]]:
    """The keys and values (None: deleted) of a record of the current layout, from the
    count of its writes at ``i``."""
    (n,) = _U32.unpack_from(data, i)
    lens = struct.unpack_from(f">{2 * n}I", data, i + 4)
    ends = list(accumulate(lens[:n], initial=i + 4 + 8 * n))
    keys = [data[a:b] for a, b in zip(ends, islice(ends, 1, None))]
    values: list[bytes | None] = []
    add = values.append
    at = ends[-1]
    for vl in islice(lens, n, None):
        if vl == _DELETED:
            add(None)
        else:
            add(data[at:at + vl])
            at += vl
    return keys, values


def _writes(data: bytes, i: int) -> Iterator[tuple[bytes, bytes | None]]:
    """The writes of an encoded record, from their count at ``i``."""
    if data[:4] == _MAGIC:
        return zip(*_record_entries(data, i))
    return iter(_v1_writes(data, i).items())


def _batch(data: bytes, i: int) -> WriteBatch:
    """The writes of an encoded record, from their count at ``i``, as a write batch."""
    wb = WriteBatch(raw_mode=True)
    put, delete = wb.put, wb.delete
    for k, v in _writes(data, i):
        if v is None:
            delete(k)
        else:
            put(k, v)
    return wb


def _sorted_batch(data: bytes, i: int) -> WriteBatch:
    """``_batch`` with the writes in key order.  A batch record lists its keys in the
    order the batch first wrote them (a keyed context's keys at random); RocksDB's
    skiplist memtable inserts keys in order in about half the time (each insert starts
    where the previous one ended), which pays for the sort (10^6-key restore: 3.6 s of
    inserts -> 1.9 s).  Snapshot parts are in key order already and go through
    ``_batch``.  A key is written at most once per record; were it twice, the last
    write wins here as in the batch."""
    writes = (dict(zip(*_record_entries(data, i))) if data[:4] == _MAGIC
              else _v1_writes(data, i))
    wb = WriteBatch(raw_mode=True)
    put, delete = wb.put, wb.delete
    for k in sorted(writes):
        v = writes[k]
        if v is None:
            delete(k)
        else:
            put(k, v)
    return wb


def _v1_writes(data: bytes, i: int) -> dict[bytes, bytes | None]:
    """The writes of a record of the earlier layout (``_MAGIC_V1``), by key (a record
    writes a key once)."""
    unpack = _U32.unpack_from
    (count,) = unpack(data, i)
    i += 4
    writes: dict[bytes, bytes | None] = {}
    for _ in range(count):
        (kl,) = unpack(data, i)
        j = i + 4 + kl
        (vl,) = unpack(data, j)
        if vl == _DELETED:
            writes[data[i + 4:j]] = None
            i = j + 4
        else:
            i = j + 4 + vl
            writes[data[j - kl:j]] = data[j + 4:i]
    return writes


def entry_size(key: bytes, value: bytes | None) -> int:
    """Bytes a state entry takes in an encoded record (snapshot part sizing)."""
    return 8 + len(key) + (0 if value is None else len(value))

"""Shared machinery of the data windows: spec base, view base, persisted row logs.

Every window keeps its rows in an in-memory mirror (read on the hot path) and writes
O(1) keys per event to its state namespace, so a fresh instance built over the same
namespace restores the window exactly (checkpoint/restore).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.state import MemoryNamespace

# --------------------------------------------------------------------------- emissions


class ForcedEmit(tuple):
    """An emission that must reach the result set even with both streams empty.

    Esper ref. 14.3.5/14.3.7: FORCE_UPDATE (and START_EAGER) post an empty result set for an
    interval without data; a plain ``([], [])`` means "nothing happened".
    """

    __slots__ = ()


def forced_empty() -> Emit:
    """A fresh empty emission that must still be posted (FORCE_UPDATE)."""
    return ForcedEmit(([], []))


def must_post(emit: Emit) -> bool:
    """Whether the result set must run for this emission (rows or a forced update)."""
    return bool(emit[0] or emit[1]) or isinstance(emit, ForcedEmit)


# --------------------------------------------------------------------------- row refs


class RowRefs:
    """How a view persists a row: inline (the default) or as a reference into a table."""

    __slots__ = ()

    def dump(self, row: Row) -> Any:
        """The JSON-shaped data stored in place of ``row``."""
        return row

    def load(self, data: Any) -> Row:
        """The row for stored ``data`` (inverse of ``dump``)."""
        return data


INLINE = RowRefs()


@dataclass(frozen=True)
class BuildEnv:
    """Extra build inputs composites hand to their sub-views (beyond the View protocol).

    ``refs``: how rows are persisted (a composite shares one row table among its
    sub-views, so restored sub-views hold the very same row objects);
    ``start_ms``: creation time of the view (START_EAGER, firsttime, Apama batch grid);
    ``group_props``: group-by values a derived view adds to its rows under #groupwin.
    """

    refs: RowRefs = INLINE
    start_ms: int | None = None
    group_props: tuple[tuple[str, Any], ...] = ()


DEFAULT_ENV = BuildEnv()


def start_time(env: BuildEnv | None, ctx: PartitionCtx) -> int:
    """The view's creation time: given by the composite, else the partition clock."""
    if env is not None and env.start_ms is not None:
        return env.start_ms
    return ctx.now_ms


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Deferred:
    """A window parameter evaluated when a partition's view is built.

    Esper ref. 14.1: 'The system evaluates expression parameters for data windows at the time of
    context partition instantiation' (variables, context properties).
    """

    expr: Expr
    text: str
    kind: str  # "time" (seconds -> ms), "count" (int >= 1), "value" (as is)

    def resolve(self, ctx: PartitionCtx) -> Any:
        """Evaluate against the partition context and check the value."""
        value = self.expr({}, ctx)
        return check_value(value, self.kind, self.text)


MAX_MS = (1 << 63) - 1
"""The longest time span in milliseconds (Esper keeps time in a Java long)."""


def in_ms_range(ms: float) -> bool:
    """Whether a number of milliseconds is finite and fits a Java long."""
    return not (isinstance(ms, float) and not math.isfinite(ms)) and abs(ms) <= MAX_MS


def check_value(value: Any, kind: str, text: str) -> Any:
    """Convert/validate a parameter value of the given kind."""
    if kind == "time":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"parameter '{text}' must be a time period or number of seconds")
        if not in_ms_range(value * 1000):
            raise ValueError(f"parameter '{text}' is out of range")
        return int(round(value * 1000))
    if kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"parameter '{text}' must be a positive integer, got {value!r}")
        return value
    return value


def resolve(value: Any, ctx: PartitionCtx) -> Any:
    """A spec field's value at build time (Deferred parameters get evaluated)."""
    return value.resolve(ctx) if isinstance(value, Deferred) else value


def const_expr(value: Any) -> Expr:
    """An expression that always returns ``value``."""
    return lambda _row, _ctx: value


# --------------------------------------------------------------------------- keys


def freeze(value: Any) -> Any:
    """A hashable form of a key value (JSON lists come back where tuples went in)."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    return value


def key_of(exprs: tuple[Expr, ...], row: Row, ctx: PartitionCtx) -> Any:
    """The (composite) key of a row: one value, or a list for several expressions."""
    if len(exprs) == 1:
        return exprs[0](row, ctx)
    return [e(row, ctx) for e in exprs]


def timestamped(ts: Expr, rows: Rows, ctx: PartitionCtx) -> list[tuple[Row, Any]]:
    """Each row with its timestamp expression's value, leaving out rows where it is null.

    Esper ref. 14.3.4, 14.3.6, 14.3.21, 14.3.22 (ext_timed, ext_timed_batch, time_order,
    timetolive) do not say what a null timestamp does; Esper 9's views unbox it to a long,
    which fails, so the event never enters the window and nothing is posted for it
    (compared through the oracle, scenarios window_null_timestamp_*).  These windows drop
    such an event the same way.
    """
    out: list[tuple[Row, Any]] = []
    for row in rows:
        value = ts(row, ctx)
        if value is not None:
            out.append((row, value))
    return out


# --------------------------------------------------------------------------- spec and view bases


class WindowSpec:
    """Base of every window spec: a printable, validated description that builds views."""

    name: str = ""
    params_text: tuple[str, ...] = ()
    is_batch: bool = False
    is_derived: bool = False
    is_asymmetric: bool = False  # firstX windows may decline an arriving event
    combinable: bool = True  # may sit in retain-intersection/union
    oldest_first: bool = False
    """Rows leave in the order they entered (length, time, batches, keep-all, first-N):
    an order-based aggregate can take out the oldest equal value (``first``, ``last``)."""

    def build(self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None) -> Any:
        """Make a view instance over ``state`` (restoring whatever it already holds)."""
        raise NotImplementedError

    def describe(self) -> str:
        """Esper-style text of the window, e.g. ``length(10)``."""
        return f"{self.name}({', '.join(self.params_text)})"


class WindowView:
    """Base of every view: no timers, nothing on the clock, FIFO-style prev over contents."""

    __slots__ = ()

    is_batch = False

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Take rows from upstream; return what this view posts downstream."""
        raise NotImplementedError

    def on_time(self, now_ms: int) -> Emit:
        """The clock reached a due time asked for by ``next_timer``."""
        return [], []

    fires_apart = False
    """Whether ``on_time_apart`` may give several updates (``#groupwin``)."""

    def on_stop(self) -> Iterable[Emit]:
        """What the view posts, update by update, when its context partition ends."""
        return ()

    def posts_on_stop(self) -> bool:
        """Whether ``on_stop`` has anything to post."""
        return False

    def on_time_apart(self, now_ms: int) -> Iterable[Emit]:
        """``on_time`` as the updates the view posts one after another: one here."""
        return (self.on_time(now_ms),)

    def next_timer(self) -> int | None:
        """The earliest time at which ``on_time`` must be called, or None."""
        return None

    def on_variables_changed(self, now_ms: int) -> Emit:
        """A variable changed: only expiry-expression windows react (Esper ref. 14.3.12)."""
        return [], []

    def contents(self) -> list[Row]:
        """Current window contents, oldest first."""
        raise NotImplementedError

    def posted(self) -> list[Row]:
        """The rows this view has posted on its insert stream and not yet taken back: what
        a consumer that mirrors the view's streams (a join's index, a subquery's window)
        holds, and so what it is rebuilt from after a restore.  The contents, but for a
        batch window (its iterator shows the batch being collected)."""
        return list(self.contents())

    def count(self, row: Row | None = None) -> int:
        """Number of rows in the window (prevcount)."""
        return len(self.contents())

    def prev(self, i: int, row: Row | None = None) -> Row | None:
        """The i-th row before ``row`` (0 = ``row``; without a row, the newest), None
        when out of range."""
        rows = self.contents()
        at = relative_index(rows, row)
        return rows[at - i] if 0 <= i <= at else None

    def prevtail(self, i: int, row: Row | None = None) -> Row | None:
        """The i-th oldest row (0 = oldest), None when out of range."""
        rows = self.contents()
        return rows[i] if 0 <= i < len(rows) else None

    def prevwindow(self, row: Row | None = None) -> list[Row]:
        """Every row prev can reach, in prev's order: newest first, or the window's own
        order (a sorted window's sort order); Esper ref. "Single-row functions",
        prevwindow."""
        n = self.count(row)
        tail = self.prevtail
        return [r for r in (tail(j, row) for j in range(n - 1, -1, -1)) if r is not None]


def relative_index(rows: Sequence[Row], row: Row | None, n: int | None = None) -> int:
    """Index of ``row`` in the first ``n`` (default all) of ``rows`` searched from the
    newest end (the event prev is relative to is nearly always the newest); the newest
    without a row, -1 if absent.  Rows restored from a checkpoint are equal copies, not
    the same objects: without an identical row the newest equal one counts."""
    size = len(rows) if n is None else n
    last = size - 1
    if row is None or last < 0 or rows[last] is row:
        return last
    equal = -1
    for k, r in enumerate(islice(rows, size)):
        if r is row:
            return k
        if r == row:
            equal = k
    return equal


# --------------------------------------------------------------------------- persisted logs


def find_row(rows: Iterable[Row], row: Row) -> int:
    """Index of ``row`` by identity, else by equality (restored copies), else -1."""
    for i, r in enumerate(rows):
        if r is row:
            return i
    for i, r in enumerate(rows):
        if r == row:
            return i
    return -1


_NO_STAMPS: deque[Any] = deque(maxlen=0)
"""The stamps of every unstamped log: always empty (a deque of length 0 keeps nothing),
so that a log without stamps allocates no third deque."""


class RowLog:
    """Rows in arrival order, one key per row: put(seq) on append, delete(seq) on removal.

    With ``stamped`` each row carries an int stamp (arrival time, event timestamp).
    The mirror (deques) is loaded from the namespace once, at build time.  Sequence
    numbers stay implicit (``next_seq - len``, ...) while rows leave oldest first; an
    arbitrary removal materialises them.  Over a memory namespace with inline rows the
    log is the state itself: it writes nothing and the namespace reads the log when it
    is checkpointed (one copy of each row, fewer objects touched per event).
    """

    __slots__ = ("ns", "refs", "_seqs", "rows", "stamps", "next_seq", "stamped", "_own",
                 "_inline")

    def __init__(self, ns: StateNamespace, refs: RowRefs, stamped: bool = False) -> None:
        self.ns = ns
        self.refs = refs
        self.stamped = stamped
        self.rows: deque[Row] = deque()
        self.stamps: deque[Any] = deque() if stamped else _NO_STAMPS
        seqs: list[int] = []
        load = refs.load
        for key, value in ns.items():
            seqs.append(key)
            if stamped:
                self.stamps.append(value[0])
                self.rows.append(load(value[1]))
            else:
                self.rows.append(load(value))
        self.next_seq = seqs[-1] + 1 if seqs else 0
        contiguous = not seqs or seqs[-1] - seqs[0] == len(seqs) - 1
        self._seqs: deque[int] | None = None if contiguous else deque(seqs)
        self._inline = type(refs) is RowRefs
        """Rows are stored as they are (``RowRefs.dump`` is the identity)."""
        self._own = type(ns) is MemoryNamespace and self._inline
        if self._own:
            ns.own(self)  # type: ignore[union-attr]

    @property
    def seqs(self) -> deque[int] | range:
        """Sequence number of each row, oldest first."""
        if self._seqs is not None:
            return self._seqs
        return range(self.next_seq - len(self.rows), self.next_seq)

    def entries(self) -> list[tuple[int, Any]]:
        """What the namespace would hold: (seq, row) or (seq, [stamp, row]), oldest first."""
        if self.stamped:
            return [(q, [t, r]) for q, t, r in zip(self.seqs, self.stamps, self.rows)]
        return list(zip(self.seqs, self.rows))

    def _explicit(self) -> deque[int]:
        seqs = self._seqs
        if seqs is None:
            seqs = self._seqs = deque(self.seqs)
        return seqs

    def skip_to(self, seq: int) -> None:
        """Number the next row ``seq`` or later (rows held keep their numbers)."""
        if seq > self.next_seq:
            if self.rows:
                self._explicit()
            self.next_seq = seq

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def append(self, row: Row, stamp: Any = None) -> int:
        """Add a row at the newest end; returns its sequence number."""
        seq = self.next_seq
        self.next_seq = seq + 1
        if self._seqs is not None:
            self._seqs.append(seq)
        self.rows.append(row)
        if self.stamped:
            self.stamps.append(stamp)
            if not self._own:
                self.ns.put_new(seq, [stamp, row if self._inline else self.refs.dump(row)])
        elif not self._own:
            self.ns.put_new(seq, row if self._inline else self.refs.dump(row))
        return seq

    def popleft(self) -> Row:
        """Remove and return the oldest row."""
        seqs = self._seqs
        seq = self.next_seq - len(self.rows) if seqs is None else seqs.popleft()
        if not self._own:
            self.ns.delete(seq)
        if self.stamped:
            self.stamps.popleft()
        return self.rows.popleft()

    def pop_many(self, n: int) -> list[Row]:
        """Remove the ``n`` oldest rows, oldest first."""
        if n == 1:
            return [self.popleft()]
        return [self.popleft() for _ in range(n)]

    def remove_at(self, index: int) -> Row:
        """Remove the row at ``index`` (arbitrary removal: upstream remove stream)."""
        seqs = self._explicit()
        seq = seqs[index]
        row = self.rows[index]
        del seqs[index]
        del self.rows[index]
        if self.stamped:
            del self.stamps[index]
        if not self._own:
            self.ns.delete(seq)
        return row

    def remove_row(self, row: Row) -> Row | None:
        """Remove ``row`` (by identity, else equality); the stored row, or None if absent."""
        i = find_row(self.rows, row)
        return None if i < 0 else self.remove_at(i)

    def clear(self) -> list[Row]:
        """Remove everything; returns the rows oldest first."""
        out = list(self.rows)
        if not self._own:
            for seq in self.seqs:
                self.ns.delete(seq)
        self._seqs = None
        self.rows.clear()
        self.stamps.clear()
        return out


class BatchLog:
    """The previous batch followed by the current batch in one RowLog.

    Esper ref. 14.2: batch windows retain the current and the last batch.  The boundary (the
    first sequence number of the current batch) lives under ``meta_key`` in ``meta_ns``,
    written once per batch release.
    """

    __slots__ = ("log", "boundary", "n_last", "meta_ns", "meta_key")

    def __init__(
        self,
        ns: StateNamespace,
        refs: RowRefs,
        meta_ns: StateNamespace,
        meta_key: str,
        stamped: bool = False,
    ) -> None:
        self.log = RowLog(ns, refs, stamped)
        self.meta_ns = meta_ns
        self.meta_key = meta_key
        self.boundary: int = meta_ns.get(meta_key, 0)
        # an emptied log restarts numbering from the boundary, not from 0
        self.log.skip_to(self.boundary)
        self.n_last = sum(1 for s in self.log.seqs if s < self.boundary)

    def current(self) -> list[Row]:
        """Rows of the batch being collected, oldest first."""
        return list(islice(self.log.rows, self.n_last, None))

    def last(self) -> list[Row]:
        """Rows of the previously released batch, oldest first."""
        return list(islice(self.log.rows, 0, self.n_last))

    def current_count(self) -> int:
        """Number of rows in the current batch."""
        return len(self.log) - self.n_last

    def add(self, row: Row, stamp: Any = None) -> None:
        """Add a row to the current batch."""
        self.log.append(row, stamp)

    def release(self, keep: int = 0, merge: bool = False) -> Emit:
        """Current batch becomes the last batch: returns (released, previous batch).

        ``keep`` trailing rows of the current batch stay in the next batch
        (expr_batch with include_triggering_event false).  With ``merge`` the previous
        batch is not dropped but joined with the released one (a second release within
        one update, whose remove stream is the batch before the update).
        """
        old = [] if merge else self.log.pop_many(self.n_last)
        total = len(self.log)
        released = list(islice(self.log.rows, self.n_last if merge else 0, total - keep))
        self.n_last = total - keep
        self.boundary = self.log.seqs[self.n_last] if keep else self.log.next_seq
        self.meta_ns.put(self.meta_key, self.boundary)
        return released, old

    def unrelease(self, released: Rows, previous: Rows) -> None:
        """Undo ``release()`` (which returned ``released, previous``): the released rows
        are the current batch again, the previous batch the last one."""
        log = self.log
        log.clear()
        for row in previous:
            log.append(row)
        for row in released:
            log.append(row)
        self.n_last = len(previous)
        self.boundary = log.next_seq - len(released)
        self.meta_ns.put(self.meta_key, self.boundary)

    def remove_row(self, row: Row) -> tuple[Row | None, bool]:
        """Remove a row from either batch: (stored row or None, was it in the last batch)."""
        i = find_row(self.log.rows, row)
        if i < 0:
            return None, False
        in_last = i < self.n_last
        if in_last:
            self.n_last -= 1
        return self.log.remove_at(i), in_last


def remove_from_batches(batches: BatchLog, old: Rows) -> Rows:
    """Apply an upstream remove stream to a batch window.

    Rows still in the current (unposted) batch leave silently; rows of the last, already
    posted, batch are posted on the remove stream now (and not again at the next release).
    """
    posted: Rows = []
    for row in old:
        stored, in_last = batches.remove_row(row)
        if stored is not None and in_last:
            posted.append(stored)
    return posted


def remove_from_log(log: RowLog, old: Rows) -> Rows:
    """Apply an upstream remove stream to a FIFO window; the removed rows are posted."""
    posted: Rows = []
    for row in old:
        stored = log.remove_row(row)
        if stored is not None:
            posted.append(stored)
    return posted


def next_grid(now: int, reference: int, period: int) -> int:
    """The first point of ``reference + k*period`` strictly after ``now`` (Esper ref. 14.3.5)."""
    return reference + ((now - reference) // period + 1) * period

"""The plan of a join: its streams, the indexes kept on them, and for an event of each
stream the lookups that find the rows of the other streams it joins (Esper ref. 2, "event
indexes"; Esper reference "Joining Event Streams").

The planner emits these specs; ``operators.joins.join.Join`` runs one in a context
partition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from operators.base import Expr, PartitionCtx, Row, StateNamespace, View, ViewSpec
from operators.joins.index import hashable

ViewBuilder = Callable[[ViewSpec, StateNamespace, PartitionCtx], View]


@dataclass(frozen=True)
class JoinStream:
    """One stream of the from clause: its events are ``row[name]`` in a join row."""

    type_name: str
    name: str
    """The alias, else the type name."""
    filter: Expr | None = None
    view: ViewSpec | None = None
    unidirectional: bool = False
    filter_text: str = field(default="", compare=False)
    outer: bool = False
    """An event of this stream that joins nothing still gives a row, the other streams
    null (the outer side of a left, right or full outer join)."""
    table: bool = False
    """The stream is a table (``type_name``): passive, its rows are read as they are at
    each lookup (by primary key where the where clause gives it) and never trigger."""
    named_window: bool = False
    """The stream is a named window (``type_name``): its rows enter and leave with the
    window's insert and remove stream, and it starts from the window's rows."""
    prior: Any = None
    """The prior(n, x) calls on this stream (``operators.prior.PriorSpec``)."""

    def describe(self) -> str:
        text = self.type_name + (f"({self.filter_text})" if self.filter is not None else "")
        if self.view is not None:
            text += f" {self.view.describe()}"
        if self.named_window:
            text += " (named window)"
        if self.table:
            text += " (table)"
        if self.unidirectional:
            text += " unidirectional"
        text += f" as {self.name}"
        return text + " (outer: kept without a match)" if self.outer else text


@dataclass(frozen=True)
class IndexDef:
    """A hash index on one stream: its events bucketed by the key expressions, which are
    compiled against the event of that stream."""

    stream: int
    key: tuple[Expr, ...]
    text: tuple[str, ...] = field(default=(), compare=False)
    sorted: bool = False
    """A sorted index on the one key (relational-operator lookups, ``Step.bounds``)."""

    def key_fn(self, ctx: PartitionCtx, nulls_match: bool = False) -> Callable[[Row], Any]:
        if self.sorted:
            e = self.key[0]
            return lambda row: e(row, ctx)
        return key_reader(self.key, ctx, nulls_match)


@dataclass(frozen=True)
class Step:
    """One lookup of a path: the rows of ``stream`` that join the partial row so far,
    through hash index ``index`` (the lookup expressions read the partial row) or, with
    ``index`` None, by a full scan of the stream (a nested loop)."""

    stream: int
    index: int | None = None
    lookup: tuple[Expr, ...] = ()
    text: tuple[str, ...] = field(default=(), compare=False)
    primary_key: bool = False
    """A table stream's row found by its primary key (``lookup`` in key order)."""
    optional: bool = False
    """Outer joins: without a match the partial row goes on with this stream null."""
    sources: tuple[str, ...] = ()
    """Outer joins: the streams the lookup reads; one of them null finds nothing."""
    bounds: tuple[tuple[str, Expr], ...] = ()
    """A sorted index's lookup: (operator, value) pairs, each true of the keys found
    (``key > value`` ...); the values read the partial row."""


@dataclass(frozen=True)
class JoinSpec:
    """Streams, indexes and one lookup path per stream (``paths[i]``: what an event of
    stream ``i`` looks up, in order)."""

    streams: tuple[JoinStream, ...]
    indexes: tuple[IndexDef, ...]
    paths: tuple[tuple[Step, ...], ...]
    nulls_match: bool = False
    """Null keys meet in the indexes: an outer join's on clause, whose equalities Esper
    looks up in its index without evaluating them (a null key finds the rows whose key
    is null); a where clause's equalities are evaluated, and null equals nothing."""

    def types(self) -> frozenset[str]:
        """Event types whose events the join reads (a named window's rows come apart)."""
        return frozenset(s.type_name for s in self.streams
                         if not (s.named_window or s.table))

    def window_stream(self) -> int | None:
        """The position of the named-window stream, if any."""
        return next((i for i, s in enumerate(self.streams) if s.named_window), None)

    @property
    def unidirectional(self) -> bool:
        """Whether one stream alone triggers the join."""
        return any(s.unidirectional for s in self.streams)

    def views(self) -> list[ViewSpec]:
        return [s.view for s in self.streams if s.view is not None]

    def describe(self) -> list[str]:
        """The join plan for ``kepl explain``: streams, then each stream's lookups."""
        out = ["join " + ", ".join(s.describe() for s in self.streams)]
        names = [s.name for s in self.streams]
        for i, path in enumerate(self.paths):
            if not path:
                continue
            how = []
            for st in path:
                if st.primary_key:
                    keys = ", ".join(st.text)
                    how.append(f"{names[st.stream]} by primary key ({keys})")
                elif st.index is None:
                    how.append(f"{names[st.stream]} by full scan (nested loop)")
                elif st.bounds:
                    idx = self.indexes[st.index]
                    keys = " and ".join(f"{idx.text[0]} {op} {v}"
                                        for (op, _), v in zip(st.bounds, st.text))
                    how.append(f"{names[st.stream]} by sorted index on ({keys})")
                else:
                    idx = self.indexes[st.index]
                    keys = ", ".join(f"{k} = {v}" for k, v in zip(idx.text, st.text))
                    how.append(f"{names[st.stream]} by hash index on ({keys})")
                if st.optional:
                    how[-1] += " or null"
            out.append(f"  event of {names[i]}: lookup " + ", then ".join(how))
        return out


NULL_KEY = ("\x00null",)
"""The key value null takes where nulls match each other (outer-join on clauses)."""


def key_reader(exprs: tuple[Expr, ...], ctx: PartitionCtx,
               nulls_match: bool = False) -> Callable[[Row], Any]:
    """A function giving the hashable key of a row: None when a part is null (it
    matches nothing), or with ``nulls_match`` a key under which nulls meet."""
    null = NULL_KEY if nulls_match else None
    if len(exprs) == 1:
        e = exprs[0]

        def one(row: Row) -> Any:
            v = e(row, ctx)
            return null if v is None else hashable(v)
        return one

    def many(row: Row) -> Any:
        parts = []
        for e in exprs:
            v = e(row, ctx)
            if v is None:
                if null is None:
                    return None
                parts.append(null)
            else:
                parts.append(hashable(v))
        return tuple(parts)
    return many


def bounds_reader(bounds: tuple[tuple[str, Expr], ...],
                  ctx: PartitionCtx) -> Callable[[Row], Any]:
    """A function giving the range a partial row looks up (``index.Bounds``): the
    tightest of the bounds, None when a value is null or NaN (nothing is found)."""

    def read(row: Row) -> Any:
        lo: Any = None
        hi: Any = None
        lo_in = hi_in = True
        for op, e in bounds:
            v = e(row, ctx)
            if v is None or v != v:
                return None
            if op in (">", ">="):
                if lo is None or v > lo or (v == lo and op == ">"):
                    lo, lo_in = v, op == ">="
            elif hi is None or v < hi or (v == hi and op == "<"):
                hi, hi_in = v, op == "<="
        return lo, lo_in, hi, hi_in
    return read

"""Result sets: turn window insert/remove rows into output rows (Esper ref. 2.12).

Five kinds, as Esper distinguishes them:
- ``simple``: no aggregation, one output row per event;
- ``agg_all``: fully aggregated, ungrouped — one row per update, old row = prior values;
- ``agg_rows``: aggregated, ungrouped, with event properties — one row per event;
- ``grouped``: fully aggregated and grouped — one row per group touched;
- ``grouped_rows``: aggregated and grouped with other properties — one row per event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, NamedTuple

from operators.aggregates import (
    SORTED,
    Aggregator,
    RowSwapper,
    RowUpdater,
    fuse_updaters,
    results_reader,
    row_updater,
    swap_updater,
)
from operators.bags import BAGS, BagNamespace
from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.json_text import array_text
from operators.state import MemoryNamespace, RocksNamespace
from operators.windows.java_order import (
    INITIAL_CAPACITY,
    hashmap_order,
    multikey_hash,
    spread,
)

SIMPLE, AGG_ALL, AGG_ROWS, GROUPED, GROUPED_ROWS = (
    "simple", "agg_all", "agg_rows", "grouped", "grouped_rows")

_CODES_KEPT = 1 << 16
"""How many group keys' hash codes a result set keeps before starting over."""
_NO_GONE: frozenset[str] = frozenset()
"""The dropped groups of a result set that does not count its groups' events (shared)."""

SORT_KEY = "\x00order"
"""Prefix of the hidden columns holding order-by keys; no EPL name can start with it."""


def sort_key_reader(name: str) -> Expr:
    """An order-by key read from the hidden column ``name`` of an output row."""
    def read(row: Row, ctx: PartitionCtx) -> Any:
        return row.get(name)
    return read


@dataclass(frozen=True)
class AggregateDef:
    """One aggregate call of the statement: its aggregator and the value it reads."""

    text: str
    aggregator: Aggregator
    value: Expr | None = None
    filter: Expr | None = None


@dataclass(frozen=True)
class SelectColumn:
    """An output column: name and compiled expression (``None`` expr = the whole row)."""

    name: str
    expr: Expr | None


@dataclass(frozen=True)
class ResultSetSpec:
    """Validated result-set settings of a statement."""

    kind: str
    columns: tuple[SelectColumn, ...]
    aggregates: tuple[AggregateDef, ...] = ()
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    wildcard: bool = False
    order_by: tuple[tuple[Expr, bool], ...] = ()
    limit: int | None = None
    offset: int = 0
    group_texts: tuple[str, ...] = field(default=(), compare=False)
    table: str | None = None
    """``into table``: aggregation state lives in this table's rows (Esper ref. 4.7)."""
    table_columns: tuple[str, ...] = ()
    """``into table``: the table column each aggregate maintains, by aggregate index."""
    sort_columns: tuple[tuple[str, Expr], ...] = ()
    """Hidden columns (name, expression) computing order-by keys at projection time, when
    the event and the aggregates are at hand; ``ResultSet.order`` drops them."""
    hidden_keys: bool = False
    """Rows carry NUL-prefixed keys (prior values) that a wildcard must not select."""
    group_types: tuple[str, ...] = field(default=(), compare=False)
    """The Java type Esper boxes each group-by value in (``int``, ``long``, ``double``,
    ``string``, ...; empty: unknown, decided by the value): its hash code orders groups."""
    join: bool = False
    """The statement joins streams: Esper's join path lists the groups of every update in
    hash order (no one-in-one-out shortcut)."""

    def build(self, state: StateNamespace, ctx: PartitionCtx,
              want_old: bool = True) -> ResultSet:
        return _FAST.get(self.kind, ResultSet)(self, state, ctx, want_old)

    @cached_property
    def hot(self) -> HotParts:
        """The per-event functions of this result set, built once per statement and
        shared by its context partitions (they take the partition context as argument)."""
        aggs = self.aggregates
        enter = fuse_updaters([row_updater(a.aggregator, i, a.value, a.filter, True)
                               for i, a in enumerate(aggs)])
        leave = fuse_updaters([row_updater(a.aggregator, i, a.value, a.filter, False)
                               for i, a in enumerate(aggs)])
        return HotParts(
            enter, leave, swap_updater(enter, leave),
            results_reader([a.aggregator for a in aggs]),
            _group_of_one(self.group_by[0]) if len(self.group_by) == 1 else None)

    @cached_property
    def plain_rows(self) -> bool:
        """Whether building a row only reads values (each column an aggregate, a context
        property or an event property; no having, no order-by key): building one and not
        using it has no effect, so it need not be built."""
        return (self.having is None and not self.sort_columns and not self.wildcard
                and bool(self.columns) and all(c.expr is not None for c in self.columns)
                and _aggregates_projector(tuple((c.name, c.expr) for c in self.columns),
                                          len(self.aggregates)) is not None)

    @cached_property
    def projector(self) -> Callable[[Row, PartitionCtx], Row]:
        """The select-clause projection ``(row, ctx) -> output row``, built once per
        statement and shared by its context partitions."""
        base = self._select_projector()
        hidden = self.sort_columns
        if not hidden:
            return base

        def project_sorted(row: Row, ctx: PartitionCtx) -> Row:
            out = dict(base(row, ctx))
            for name, expr in hidden:
                out[name] = expr(row, ctx)
            return out
        return project_sorted

    def _select_projector(self) -> Callable[[Row, PartitionCtx], Row]:
        cols = self.columns
        if self.wildcard and self.hidden_keys:
            def project_visible(row: Row, ctx: PartitionCtx) -> Row:
                out = {k: v for k, v in row.items() if k[:1] != "\x00"}
                for c in cols:
                    out[c.name] = c.expr(row, ctx) if c.expr is not None else row
                return out
            return project_visible
        if self.wildcard and not cols:
            return _identity
        if self.wildcard:
            def project_wild(row: Row, ctx: PartitionCtx) -> Row:
                out = dict(row)
                for c in cols:
                    out[c.name] = c.expr(row, ctx) if c.expr is not None else row
                return out
            return project_wild
        if any(c.expr is None for c in cols):
            def project_rows(row: Row, ctx: PartitionCtx) -> Row:
                return {c.name: (c.expr(row, ctx) if c.expr is not None else row) for c in cols}
            return project_rows
        pairs = tuple((c.name, c.expr) for c in cols)
        general = self._pairs_projector(pairs)
        fast = _aggregates_projector(pairs, len(self.aggregates))
        return fast if fast is not None else general

    @staticmethod
    def _pairs_projector(pairs: tuple[tuple[str, Any], ...]) -> Callable[[Row, PartitionCtx], Row]:
        """Each column's expression evaluated in turn; an event property is read from the
        row itself (``row.get``, what its expression does) without calling the expression."""
        props = tuple(getattr(e, "property_name", None) for _, e in pairs)
        if len(pairs) > 3 and None not in props:
            names = tuple(n for n, _ in pairs)
            return lambda row, ctx: dict(zip(names, map(row.get, props)))
        if len(pairs) > 3 and any(p is not None for p in props):
            cols = tuple((n, p, e) for (n, e), p in zip(pairs, props))

            def project_reads(row: Row, ctx: PartitionCtx) -> Row:
                get = row.get
                return {n: e(row, ctx) if p is None else get(p) for n, p, e in cols}
            return project_reads
        if len(pairs) == 2:
            (n0, e0), (n1, e1) = pairs
            return lambda row, ctx: {n0: e0(row, ctx), n1: e1(row, ctx)}
        if len(pairs) == 3:
            (n0, e0), (n1, e1), (n2, e2) = pairs
            return lambda row, ctx: {n0: e0(row, ctx), n1: e1(row, ctx), n2: e2(row, ctx)}

        def project(row: Row, ctx: PartitionCtx) -> Row:
            return {name: expr(row, ctx) for name, expr in pairs}
        return project

    def describe(self) -> str:
        parts = [f"resultset[{self.kind}]", "cols=" + ",".join(
            ["*"] * self.wildcard + [c.name for c in self.columns])]
        if self.aggregates:
            parts.append("aggs=" + ",".join(a.text for a in self.aggregates))
        if self.group_texts:
            parts.append("group_by=" + ",".join(self.group_texts))
        if self.having is not None:
            parts.append("having")
        if self.table is not None:
            parts.append(f"into_table={self.table}")
        return " ".join(parts)


def _identity(row: Row, ctx: PartitionCtx) -> Row:
    """The projection of ``select *``: the row itself."""
    return row


def _aggregates_projector(pairs: tuple[tuple[str, Any], ...], n_aggs: int
                          ) -> Callable[[Row, PartitionCtx], Row] | None:
    """The projection of a select clause whose columns are aggregates, context properties
    and event properties only (``select count(*), sum(x)``; in a keyed context ``select
    key, count(*), sum(x), y``), reading ``ctx.aggs`` and the properties directly instead
    of calling each column's expression (an aggregate reads null without aggregation values
    at hand, as its expression does); None for any other select clause."""
    if not pairs:
        return None
    keys: list[str] = []
    props: list[str] = []
    for _, e in pairs:
        if getattr(e, "aggregate_index", None) is not None:
            continue
        key = getattr(e, "context_property", None)
        if key is not None:
            if key not in keys:
                keys.append(key)
            continue
        prop = getattr(e, "property_name", None)
        if prop is None:
            return None
        if prop not in props:
            props.append(prop)
    cols: list[tuple[str, int]] = []
    for name, e in pairs:
        i = getattr(e, "aggregate_index", None)
        if i is None:
            key = getattr(e, "context_property", None)
            # the values follow the aggregates: context properties, then event properties
            i = (n_aggs + keys.index(key) if key is not None
                 else n_aggs + len(keys) + props.index(e.property_name))
        cols.append((name, i))
    if not n_aggs and not keys:
        return _properties_projector(tuple((name, props[j]) for name, j in cols))
    values = _projection_values(tuple(keys), tuple(props), n_aggs)
    nones = [None] * n_aggs
    # the commonest cases read without another call: aggregates alone (``extra`` False),
    # with one context property (``k0``, a keyed context's key), or with that and one
    # event property (``kp``)
    k0 = keys[0] if n_aggs and len(keys) == 1 and not props else None
    kp = (keys[0], props[0]) if n_aggs and len(keys) == 1 and len(props) == 1 else None
    extra = k0 is None and kp is None and (not n_aggs or bool(keys) or bool(props))
    if len(cols) == 1:
        (n0, j0), = cols

        def one(row: Row, ctx: PartitionCtx) -> Row:
            a = ctx.aggs or nones
            if k0 is not None:
                a = [*a, ctx.props.get(k0)]
            elif kp is not None:
                a = [*a, ctx.props.get(kp[0]), row.get(kp[1])]
            elif extra:
                a = values(a, row, ctx)
            return {n0: a[j0]}
        return one
    if len(cols) == 2:
        (n0, j0), (n1, j1) = cols

        def two(row: Row, ctx: PartitionCtx) -> Row:
            a = ctx.aggs or nones
            if k0 is not None:
                a = [*a, ctx.props.get(k0)]
            elif kp is not None:
                a = [*a, ctx.props.get(kp[0]), row.get(kp[1])]
            elif extra:
                a = values(a, row, ctx)
            return {n0: a[j0], n1: a[j1]}
        return two
    if len(cols) == 3:
        (n0, j0), (n1, j1), (n2, j2) = cols

        def three(row: Row, ctx: PartitionCtx) -> Row:
            a = ctx.aggs or nones
            if k0 is not None:
                a = [*a, ctx.props.get(k0)]
            elif kp is not None:
                a = [*a, ctx.props.get(kp[0]), row.get(kp[1])]
            elif extra:
                a = values(a, row, ctx)
            return {n0: a[j0], n1: a[j1], n2: a[j2]}
        return three
    if len(cols) == 4:
        (n0, j0), (n1, j1), (n2, j2), (n3, j3) = cols

        def four(row: Row, ctx: PartitionCtx) -> Row:
            a = ctx.aggs or nones
            if k0 is not None:
                a = [*a, ctx.props.get(k0)]
            elif kp is not None:
                a = [*a, ctx.props.get(kp[0]), row.get(kp[1])]
            elif extra:
                a = values(a, row, ctx)
            return {n0: a[j0], n1: a[j1], n2: a[j2], n3: a[j3]}
        return four
    cols_t = tuple(cols)

    def many(row: Row, ctx: PartitionCtx) -> Row:
        a = values(ctx.aggs or nones, row, ctx)
        return {n: a[j] for n, j in cols_t}
    return many


def _properties_projector(named: tuple[tuple[str, str], ...]
                          ) -> Callable[[Row, PartitionCtx], Row]:
    """The projection of event properties alone (``select a, b as c``): each column read
    from the row by name, as its expression would read it."""
    if len(named) == 1:
        (n0, p0), = named

        def properties(row: Row, ctx: PartitionCtx) -> Row:
            return {n0: row.get(p0)}
    elif len(named) == 2:
        (n0, p0), (n1, p1) = named

        def properties(row: Row, ctx: PartitionCtx) -> Row:
            return {n0: row.get(p0), n1: row.get(p1)}
    elif len(named) == 3:
        (n0, p0), (n1, p1), (n2, p2) = named

        def properties(row: Row, ctx: PartitionCtx) -> Row:
            return {n0: row.get(p0), n1: row.get(p1), n2: row.get(p2)}
    elif len(named) == 4:
        (n0, p0), (n1, p1), (n2, p2), (n3, p3) = named

        def properties(row: Row, ctx: PartitionCtx) -> Row:
            return {n0: row.get(p0), n1: row.get(p1), n2: row.get(p2), n3: row.get(p3)}
    else:
        def properties(row: Row, ctx: PartitionCtx) -> Row:
            return {n: row.get(p) for n, p in named}
    return properties


def _projection_values(keys: tuple[str, ...], props: tuple[str, ...], n_aggs: int
                       ) -> Callable[[list, Row, PartitionCtx], list]:
    """What ``_aggregates_projector`` indexes: the aggregation values ``a`` (none without
    aggregates: whatever ``ctx.aggs`` holds then is not this statement's), then the context
    properties ``keys``, then the event properties ``props`` (read as their expressions
    read them: ``ctx.props.get``, ``row.get``)."""
    if n_aggs == 0:
        if len(keys) + len(props) == 1:
            if keys:
                k0, = keys
                return lambda a, row, ctx: [ctx.props.get(k0)]
            p0, = props
            return lambda a, row, ctx: [row.get(p0)]
        return lambda a, row, ctx: [*[ctx.props.get(k) for k in keys],
                                    *[row.get(p) for p in props]]
    if not keys and not props:
        return lambda a, row, ctx: a
    if len(keys) == 1 and not props:
        k0, = keys
        return lambda a, row, ctx: [*a, ctx.props.get(k0)]
    if not keys and len(props) == 1:
        p0, = props
        return lambda a, row, ctx: [*a, row.get(p0)]
    if len(keys) == 1 and len(props) == 1:
        k0, = keys
        p0, = props
        return lambda a, row, ctx: [*a, ctx.props.get(k0), row.get(p0)]
    return lambda a, row, ctx: [*a, *[ctx.props.get(k) for k in keys],
                                *[row.get(p) for p in props]]


class HotParts(NamedTuple):
    """What a result set runs per event (see ``ResultSetSpec.hot``)."""

    enter_row: RowUpdater
    leave_row: RowUpdater
    swap_rows: RowSwapper
    """One row entering and then one leaving (``step`` with an expired row)."""
    read: Callable[[list], list]
    group_of_one: Callable[[Row, PartitionCtx], str] | None
    """The group key of a row for a single group-by expression."""


def _group_of_one(expr: Expr) -> Callable[[Row, PartitionCtx], str]:
    prop = getattr(expr, "property_name", None)
    if prop is not None:
        def group_of_property(row: Row, ctx: PartitionCtx) -> str:
            # expr(row, ctx), inlined: an event property
            v = row.get(prop)
            t = type(v)
            if t is str and not v.startswith("\x00"):
                return v
            if t is int:
                return f"\x00[{v}]"  # group_key((v,)), inlined
            return group_key((v,))
        return group_of_property

    def group_of_one(row: Row, ctx: PartitionCtx) -> str:
        v = expr(row, ctx)
        t = type(v)
        if t is str and not v.startswith("\x00"):
            return v
        if t is int:
            return f"\x00[{v}]"
        return group_key((v,))
    return group_of_one


@dataclass
class GroupedUpdate:
    """One update of a grouped result set: its rows and, per group, what changed.

    ``before``: each touched group's row before the update (fully aggregated grouped,
    when old rows are wanted); ``after``: its row after; ``keys_new``/``keys_old``: the
    group of each entering/leaving event; ``rows_new``/``rows_old``: each event's rows
    (aggregated grouped with event properties); ``passed``: with a ``passes`` test, the
    groups whose event passed it, in order, each with its remove row at that event (and
    ``after``, ``new`` only for these groups).
    """

    before: dict[str, Rows]
    keys_new: list[str]
    keys_old: list[str]
    after: dict[str, Rows] = field(default_factory=dict)
    rows_new: list[Rows] = field(default_factory=list)
    rows_old: list[Rows] = field(default_factory=list)
    new: Rows = field(default_factory=list)
    old: Rows = field(default_factory=list)
    passed: dict[str, Rows] = field(default_factory=dict)


def group_values(key: str) -> list:
    """The group-by values a group key stands for (inverse of ``group_key``)."""
    if key.startswith("\x00"):
        return list(json.loads(key[1:]))
    return [key]


def group_key(values: tuple) -> str:
    """State key of a group: a lone string value as is, anything else as tagged JSON."""
    if len(values) == 1 and type(values[0]) is str and not values[0].startswith("\x00"):
        return values[0]
    return "\x00" + array_text(values, str)


class ResultSet:
    """Aggregation state and projection of one context partition."""

    __slots__ = ("spec", "want_old", "state", "ctx", "aggs", "groups", "next_seq", "_projector",
                 "_enter_row", "_leave_row", "_read", "_rewrite", "_one", "_one_rec", "_having",
                 "_all", "_swap_rows", "hash_pairs", "hash_capacity", "_codes", "_counted",
                 "_gone", "quiet", "_put_one")

    refcounted = True
    """Whether groups are reference-counted (a table's rows are not)."""

    def __init__(self, spec: ResultSetSpec, state: StateNamespace, ctx: PartitionCtx,
                 want_old: bool = True) -> None:
        self.spec = spec
        self.want_old = want_old
        """False when the statement delivers only the insert stream: old rows are not built."""
        bags = tuple(i for i, a in enumerate(spec.aggregates)
                     if isinstance(a.aggregator, SORTED))
        if bags and type(state) is RocksNamespace:
            # min/max/median: one entry per distinct value, not the bag in every write
            state = BagNamespace(state, bags, {i: spec.aggregates[i].aggregator.bag
                                               for i in bags})
        self.state = state
        self.ctx = ctx
        self.aggs = spec.aggregates
        self.groups: dict[str, list] = {}
        loaded = list(state.items())
        # a record is [aggregation states, representative row, first-seen sequence]; groups
        # keep first-seen order across restores (output all/last list them in that order)
        try:
            seqs = [v[2] for _, v in loaded]
        except IndexError:  # a record without its sequence comes first
            seqs = [v[2] if len(v) > 2 else -1 for _, v in loaded]
        # the indexes sorted by sequence (stable: ties keep key order), no Python key
        # function per group (a restore loads 10^6)
        self.groups.update(map(loaded.__getitem__,
                               sorted(range(len(loaded)), key=seqs.__getitem__)))
        self.next_seq = max(seqs, default=-1) + 1
        self._counted = self.refcounted and spec.kind in (GROUPED, GROUPED_ROWS)
        """Whether a group record holds, at index 3, how many of its events are in (Esper
        counts them and drops a group whose count falls to zero), None once dropped."""
        gone = {k for k, v in loaded if len(v) > 3 and v[3] is not None and v[3] <= 0}
        self._gone: set[str] = (gone if gone or self._counted
                                else _NO_GONE)  # type: ignore[assignment]
        """Groups whose count fell to zero, dropped at the next event entering a group."""
        one = self.groups.get("")
        self._one_rec: list | None = one
        self._one: list | None = None if one is None else one[0]
        """The aggregation states of the one group of an ungrouped result set (the hot
        path reaches them without a dict lookup and a record)."""
        self._projector = spec.projector
        hot = spec.hot
        self._enter_row = hot.enter_row
        self._leave_row = hot.leave_row
        self._swap_rows = hot.swap_rows
        self._read = hot.read
        # a memory namespace stores the record object itself: rewriting it is a no-op
        self._rewrite = type(state) is not MemoryNamespace
        self._having = spec.having
        self._all = spec.kind == AGG_ALL
        self.hash_pairs = spec.join
        """Groups of an update of one event in and one out also go in hash order (Esper's
        join and buffered-output paths have no shortcut for it)."""
        self.hash_capacity: int | None = None
        """The table size of a hash map kept across updates (Esper's buffered default
        output empties one map per update, its table staying grown), or None: a fresh
        map per update."""
        self._codes: dict[str, int] | None = None
        """Java hash code (spread, ``HashMap.hash``) of each group key met in a
        multi-group update, computed once."""
        putter = getattr(state, "putter", None)
        self._put_one = putter("") if putter is not None else partial(state.put, "")
        """``state.put("", rec)``: the record of an ungrouped result set, written per event."""
        self.quiet = (spec.kind == GROUPED and not want_old and spec.plain_rows
                      and type(self) is _GroupedResultSet)
        """Whether ``touch_groups`` may stand for ``grouped`` (see there)."""

    # -- aggregation -------------------------------------------------------
    def _record(self, key: str, row: Row | None) -> list:
        rec = self.groups.get(key)
        if rec is None:
            rec = [[a.aggregator.initial() for a in self.aggs], row, self.next_seq]
            if self._counted:
                rec.append(None)
            self.next_seq += 1
            self.groups[key] = rec
            if key == "":
                self._one_rec = rec
                self._one = rec[0]
        return rec

    def _reclaim(self) -> None:
        """Drop the groups whose events have all left: their aggregation starts afresh.

        Esper's grouped aggregation service counts each group's events in and out and
        removes a group whose count reaches zero, at the next event entering any group (its
        ``removedKeys``); until then the group reads as it stood.  The count goes by the
        events that reached the aggregation, so a ``where`` that lets an event in but not
        out (or out but not in) leaves state behind that this drops (Esper ref. 2.12 with
        the reclaim notes of 14.3.15: groups without hints are reclaimed by count)."""
        groups = self.groups
        put = self.state.put
        for k in self._gone:
            rec = groups.get(k)
            if rec is None:
                continue
            states = rec[0]
            for i, a in enumerate(self.aggs):
                st = states[i]
                if isinstance(st, BAGS):
                    # emptied in place so that a store keeping it per value deletes them
                    if st.changes is not None:
                        st.changes.update(st)
                    st.clear()
                else:
                    states[i] = a.aggregator.initial()
            rec[3] = None
            put(k, rec)
        self._gone.clear()

    def _count(self, rec: list, k: str, delta: int) -> None:
        """One event of group ``k`` in (``delta`` 1) or out (-1), see ``_reclaim``."""
        if len(rec) > 3:
            n = (rec[3] or 0) + delta
            rec[3] = n
            if n <= 0:
                self._gone.add(k)

    def _apply(self, rec: list, row: Row, entering: bool) -> None:
        (self._enter_row if entering else self._leave_row)(rec[0], row, self.ctx)

    def _apply_rows(self, rec: list, rows: Rows, entering: bool) -> None:
        """``_apply`` for a batch of rows (one call per update, not per row)."""
        states = rec[0]
        ctx = self.ctx
        update = self._enter_row if entering else self._leave_row
        for row in rows:
            update(states, row, ctx)

    def _results(self, rec: list) -> list:
        return self._read(rec[0])

    def _group_of(self, row: Row) -> str:
        ctx = self.ctx
        group_by = self.spec.group_by
        if len(group_by) == 1:
            v = group_by[0](row, ctx)
            if type(v) is str and not v.startswith("\x00"):
                return v
            return group_key((v,))
        return group_key(tuple(g(row, ctx) for g in group_by))

    def _hashed(self, new: Rows, old: Rows) -> bool:
        """Whether the groups an update touches go in hash order: Esper builds the rows of
        a row-per-group update over a ``java.util.HashMap`` of its group keys, except for
        one event in and one out without a remove stream (new group's row, then the old
        group's)."""
        return (self.hash_pairs or self.want_old
                or len(new) != 1 or len(old) != 1)

    def hash_order(self, keys: list[str], fresh: bool = False) -> list[str]:
        """Group keys (distinct, in the order they were put) in the order Esper's hash map
        iterates them (Esper ref. 2.12 output one row per group: the rows of one update
        come in the group keys' hash order); ``fresh``: a new hash set of its own."""
        known = self._codes
        if known is None:
            known = self._codes = {}
        elif len(known) > _CODES_KEPT:
            known.clear()
        get = known.get
        codes = [get(k) for k in keys]
        if None in codes:
            types = self.spec.group_types
            for i, k in enumerate(keys):
                if codes[i] is None:
                    codes[i] = known[k] = spread(multikey_hash(group_values(k), types))
        cap = None if fresh else self.hash_capacity
        if cap is None and len(codes) == 2:  # a fresh table of 16 buckets
            return keys if codes[0] & 15 <= codes[1] & 15 else [keys[1], keys[0]]
        order, grown = hashmap_order(codes, cap or INITIAL_CAPACITY, spread_already=True)
        if cap is not None and not fresh:
            self.hash_capacity = grown
        return [keys[i] for i in order]

    # -- projection --------------------------------------------------------
    def _project(self, row: Row) -> Row:
        return self._projector(row, self.ctx)

    def _rows(self, rows: Iterable[Row], aggs: list | None, is_new: bool = True) -> Rows:
        """Project ``rows`` (``is_new`` False: remove-stream rows, see
        ``PartitionCtx.is_new``)."""
        ctx = self.ctx
        ctx.aggs = aggs
        having = self.spec.having
        project = self._projector
        if not is_new:
            ctx.is_new = False
            try:
                return self._rows(rows, aggs)
            finally:
                ctx.is_new = True
        if having is None:
            return [project(r, ctx) for r in rows]
        return [project(r, ctx) for r in rows if having(r, ctx)]

    def _row_for(self, rec: list, is_new: bool = True) -> Rows:
        ctx = self.ctx
        if not is_new:
            ctx.is_new = False
            try:
                return self._row_for(rec)
            finally:
                ctx.is_new = True
        ctx.aggs = self._results(rec)
        row = rec[1] if rec[1] is not None else {}
        having = self.spec.having
        if having is not None and not having(row, ctx):
            return []
        return [self._project(row)]

    def clear_aggregates(self) -> None:
        """Forget every group and aggregation state: a unidirectional join aggregates
        the join rows of each triggering event alone (Esper ref. 2.12, output for
        unidirectional joins: one row per event; Esper clears its aggregation service
        before each join result)."""
        drop = getattr(self.state, "drop_records", None)
        if drop is not None:
            # a stored namespace holds the records of ``groups`` and nothing else: deleting
            # those is not a scan of its range, which holds the deletes of every trigger
            # since the batch began (a scan per trigger is quadratic in the batch)
            drop(self.groups)
        else:
            self.state.clear()
        self.groups.clear()
        self._one_rec = None
        self._one = None

    # -- entry points ------------------------------------------------------
    def _begin(self) -> None:
        """Called at each entry point; a table-backed result set refreshes its view."""

    def process(self, new: Rows, old: Rows) -> Emit:
        """Apply one update and return (new rows, old rows)."""
        self._begin()
        kind = self.spec.kind
        want_old = self.want_old
        if kind == SIMPLE:
            return self._rows(new, None), (self._rows(old, None, False) if want_old else [])
        if kind in (AGG_ALL, AGG_ROWS):
            rec = self._record("", None)
            before = self._row_for(rec, False) if kind == AGG_ALL and want_old else []
            if new:
                self._apply_rows(rec, new, True)
            if old:
                self._apply_rows(rec, old, False)
            self.state.put("", rec)
            if kind == AGG_ALL:
                return self._row_for(rec), before
            aggs = self._results(rec)
            return self._rows(new, aggs), (self._rows(old, aggs, False) if want_old else [])
        g = self.grouped(new, old)
        return g.new, g.old

    @property
    def bare(self) -> bool:
        """``select *`` without aggregation or having: ``step`` posts the arriving row
        itself (``_step_simple``)."""
        return (self.spec.kind == SIMPLE and self._projector is _identity
                and self._having is None)

    def step(self, new: Row, old: Row | None) -> Rows:
        """The insert stream of one update in which ``new`` enters and ``old`` (unless
        None) leaves: what ``process([new], [old])`` gives as new rows."""
        return self.process([new], [] if old is None else [old])[0]

    # -- fast paths: ``process`` for one kind, same rows as the general path --------
    def _update(self, states: list, new: Rows, old: Rows) -> None:
        """Enter ``new``, then take ``old`` out, on one group's states."""
        ctx = self.ctx
        if len(new) == 1:
            self._enter_row(states, new[0], ctx)
        elif new:
            update = self._enter_row
            for row in new:
                update(states, row, ctx)
        if len(old) == 1:
            self._leave_row(states, old[0], ctx)
        elif old:
            update = self._leave_row
            for row in old:
                update(states, row, ctx)

    def _process_agg_all(self, new: Rows, old: Rows) -> Emit:
        """``process`` of a fully aggregated ungrouped result set."""
        states = self._one
        created = states is None
        if states is None:
            states = self._record("", None)[0]
        before = (self._row_for(self._one_rec, False)  # type: ignore[arg-type]
                  if self.want_old else [])
        self._update(states, new, old)
        if created or self._rewrite:
            self._put_one(self._one_rec)
        ctx = self.ctx
        ctx.aggs = self._read(states)
        having = self.spec.having
        row: Row = {}
        if having is not None and not having(row, ctx):
            return [], before
        return [self._projector(row, ctx)], before

    def _step_agg(self, new: Row, old: Row | None) -> Rows:
        """``step`` of an aggregated ungrouped result set (``_process_agg_all`` and
        ``_process_agg_rows`` for one row in, at most one out, insert stream only)."""
        states = self._one
        ctx = self.ctx
        if states is None:
            states = self._record("", None)[0]
            self._enter_row(states, new, ctx)
            if old is not None:
                self._leave_row(states, old, ctx)
            self._put_one(self._one_rec)
        else:
            if old is None:
                self._enter_row(states, new, ctx)
            else:
                self._swap_rows(states, new, old, ctx)
            if self._rewrite:
                self._put_one(self._one_rec)
        ctx.aggs = self._read(states)
        row = {} if self._all else new
        having = self._having
        if having is None or having(row, ctx):
            return [self._projector(row, ctx)]
        return []

    def pushed(self, events: Iterable[Row], push: Callable[[Row], Row | None],
               now_ms: int) -> Iterator[Rows]:
        """``step(event, push(event))`` for each of ``events`` in turn, lazily (a
        pipeline over a length window: ``push`` gives the row the event expires).  An
        aggregated ungrouped result set without having does ``_step_agg``'s work here, in
        one loop; the rows are the same."""
        ctx = self.ctx
        step = self.step
        if type(self).step is not ResultSet._step_agg or self._having is not None:
            for event in events:
                ctx.now_ms = now_ms
                yield step(event, push(event))
            return
        enter, swap, read, project = (self._enter_row, self._swap_rows, self._read,
                                      self._projector)
        rewrite, every = self._rewrite, self._all
        for event in events:
            ctx.now_ms = now_ms
            old = push(event)
            states = self._one
            if states is None:  # the first event makes the record
                yield step(event, old)
                continue
            if old is None:
                enter(states, event, ctx)
            else:
                swap(states, event, old, ctx)
            if rewrite:
                self._put_one(self._one_rec)
            ctx.aggs = read(states)
            yield [project({} if every else event, ctx)]

    def _step_simple(self, new: Row, old: Row | None) -> Rows:
        """``step`` without aggregation: the arriving row, projected."""
        ctx = self.ctx
        ctx.aggs = None
        having = self._having
        if having is not None and not having(new, ctx):
            return []
        project = self._projector
        return [new] if project is _identity else [project(new, ctx)]

    def _step_grouped(self, new: Row, old: Row | None) -> Rows:
        """``step`` of a fully aggregated grouped result set (one event in, none out,
        insert stream only: ``_process_grouped``'s first path, inlined)."""
        if old is not None or self.want_old:
            return self._process_grouped([new], [] if old is None else [old])[0]
        if self._gone:
            self._reclaim()
        ctx = self.ctx
        one = self.spec.hot.group_of_one
        k = self._group_of(new) if one is None else one(new, ctx)
        rec = self.groups.get(k)
        if rec is None:
            rec = self._record(k, new)
            self._enter_row(rec[0], new, ctx)
            if self._counted:
                self._count(rec, k, 1)
            self.state.put(k, rec)
        else:
            rec[1] = new
            self._enter_row(rec[0], new, ctx)
            if self._counted and len(rec) > 3:
                # self._count(rec, k, 1), inlined
                n = (rec[3] or 0) + 1
                rec[3] = n
                if n <= 0:
                    self._gone.add(k)
            if self._rewrite:
                self.state.put(k, rec)
        ctx.aggs = self._read(rec[0])
        having = self._having
        if having is not None and not having(new, ctx):
            return []
        return [self._projector(new, ctx)]

    def _process_agg_rows(self, new: Rows, old: Rows) -> Emit:
        """``process`` of an aggregated ungrouped result set with event properties."""
        states = self._one
        created = states is None
        if states is None:
            states = self._record("", None)[0]
        self._update(states, new, old)
        if created or self._rewrite:
            self._put_one(self._one_rec)
        ctx = self.ctx
        ctx.aggs = self._read(states)
        project = self._projector
        having = self.spec.having
        if having is None:
            if len(new) == 1 and not self.want_old:
                return [project(new[0], ctx)], []
            return ([project(r, ctx) for r in new],
                    self._rows(old, ctx.aggs, False) if self.want_old else [])
        return ([project(r, ctx) for r in new if having(r, ctx)],
                self._rows(old, ctx.aggs, False) if self.want_old else [])

    def _process_grouped(self, new: Rows, old: Rows) -> Emit:
        """``process`` of a fully aggregated grouped result set.

        A group's row before the update is taken when the group is first touched, before
        any row of the update reaches it, so this matches ``grouped`` step for step."""
        want_old = self.want_old
        groups = self.groups
        ctx = self.ctx
        one = self.spec.hot.group_of_one
        counted = self._counted
        if len(new) == 1 and not old and not want_old:
            if self._gone:
                self._reclaim()
            row = new[0]
            k = self._group_of(row) if one is None else one(row, ctx)
            rec = groups.get(k)
            if rec is None:
                rec = self._record(k, row)
                self._enter_row(rec[0], row, ctx)
                if counted:
                    self._count(rec, k, 1)
                self.state.put(k, rec)
            else:
                rec[1] = row
                self._enter_row(rec[0], row, ctx)
                if counted:
                    self._count(rec, k, 1)
                if self._rewrite:
                    self.state.put(k, rec)
            return self._row_for(rec), []
        group_of = self._group_of if one is None else lambda row: one(row, ctx)
        touched: dict[str, Rows] = {}
        recs: dict[str, list] = {}
        keys_new = [group_of(r) for r in new]
        keys_old = [group_of(r) for r in old]
        for keys, rows in ((keys_new, new), (keys_old, old)):
            for k, r in zip(keys, rows):
                if k not in touched:
                    touched[k] = self._before(k, r) if want_old else []
        if new and self._gone:
            self._reclaim()
        enter = self._enter_row
        for r, k in zip(new, keys_new):
            rec = recs.get(k)
            if rec is None:
                rec = recs[k] = self._record(k, r)
            rec[1] = r
            enter(rec[0], r, ctx)
            if counted:
                self._count(rec, k, 1)
        leave = self._leave_row
        for r, k in zip(old, keys_old):
            rec = recs.get(k)
            if rec is None:
                rec = recs[k] = self._record(k, r)
            leave(rec[0], r, ctx)
            if counted:
                self._count(rec, k, -1)
        put = self.state.put
        out_new: Rows = []
        out_old: Rows = []
        keys = touched
        if len(touched) > 1 and (want_old or self.hash_pairs or len(new) != 1
                                 or len(old) != 1):  # ``_hashed``, inlined
            keys = self.hash_order(list(touched))
        for k in keys:
            rec = groups[k]
            put(k, rec)
            out_new.extend(self._row_for(rec))
            out_old.extend(touched[k])
        return out_new, out_old

    def grouped(self, new: Rows, old: Rows,
                passes: Callable[[str, bool], bool] | None = None) -> GroupedUpdate:
        """Apply one update to a grouped result set, keeping what output policies need.

        ``passes(group, entering)`` is asked for each event, entering ones first, just
        before the event is aggregated: a group's first passing event records the group's
        remove row as it stands then, with that event's properties (Esper's row-per-group
        ``output first`` helper builds it between one event's aggregation and the next)."""
        if passes is not None:
            return self._grouped_passing(new, old, passes)
        self._begin()
        kind = self.spec.kind
        want_old = self.want_old
        touched: dict[str, Rows] = {}
        keys_new = []
        keys_old = []
        before_wanted = want_old and kind == GROUPED
        for r in new:
            k = self._group_of(r)
            keys_new.append(k)
            if k not in touched:
                touched[k] = self._before(k, r) if before_wanted else []
        for r in old:
            k = self._group_of(r)
            keys_old.append(k)
            if k not in touched:
                touched[k] = self._before(k, r) if before_wanted else []
        counted = self._counted
        if new and self._gone:
            self._reclaim()
        for r, k in zip(new, keys_new):
            rec = self._record(k, r)
            rec[1] = r
            self._apply(rec, r, True)
            if counted:
                self._count(rec, k, 1)
        for r, k in zip(old, keys_old):
            rec = self._record(k, r)
            self._apply(rec, r, False)
            if counted:
                self._count(rec, k, -1)
        for k in touched:
            self.state.put(k, self.groups[k])
        out = GroupedUpdate(touched, keys_new, keys_old)
        if kind == GROUPED:
            keys = (self.hash_order(list(touched))
                    if len(touched) > 1 and self._hashed(new, old) else touched)
            for k in keys:
                rows = self._row_for(self.groups[k])
                out.after[k] = rows
                out.new.extend(rows)
                out.old.extend(touched[k])
            return out
        for r, k in zip(new, keys_new):
            rows = self._rows((r,), self._results(self.groups[k]))
            out.rows_new.append(rows)
            out.new.extend(rows)
        for r, k in zip(old if want_old else (), keys_old):
            rows = self._rows((r,), self._results(self.groups[k]), False)
            out.rows_old.append(rows)
            out.old.extend(rows)
        return out

    def _grouped_passing(self, new: Rows, old: Rows,
                         passes: Callable[[str, bool], bool]) -> GroupedUpdate:
        """``grouped`` with a ``passes`` test (fully aggregated grouped statements)."""
        self._begin()
        keys_new = [self._group_of(r) for r in new]
        keys_old = [self._group_of(r) for r in old]
        touched = dict.fromkeys(keys_new + keys_old, [])
        out = GroupedUpdate(touched, keys_new, keys_old)
        passed = out.passed
        reps: dict[str, Row] = {}
        counted = self._counted
        reclaim = bool(new and self._gone)
        for entering, rows, keys in ((True, new, keys_new), (False, old, keys_old)):
            for r, k in zip(rows, keys):
                if passes(k, entering):
                    reps[k] = r
                    if k not in passed:
                        rec = self.groups.get(k)
                        states = (rec[0] if rec is not None
                                  else [a.aggregator.initial() for a in self.aggs])
                        passed[k] = self._row_for([states, r], False)
                if reclaim:
                    # Esper's grouped aggregation drops its emptied groups as the first
                    # event enters (see _reclaim)
                    self._reclaim()
                    reclaim = False
                rec = self._record(k, r)
                if entering:
                    rec[1] = r
                self._apply(rec, r, entering)
                if counted:
                    self._count(rec, k, 1 if entering else -1)
        for k in touched:
            self.state.put(k, self.groups[k])
        for k in passed:
            # the insert row too takes its properties from the group's last passing event
            rows_after = self._row_for([self.groups[k][0], reps[k]])
            out.after[k] = rows_after
            out.new.extend(rows_after)
        return out

    def touch_groups(self, new: Rows, old: Rows) -> Iterable[str]:
        """``grouped(new, old)`` of a ``quiet`` result set for a caller that reads only
        which groups the update touched (an output-last/all collector): the same
        aggregation and state, without building the groups' rows, which only read values
        and are built again at output time.  Returns the groups in the order ``grouped``
        lists them in ``before``.  One row in: ``ctx.aggs`` as ``grouped`` leaves it;
        otherwise as it was (the caller reads none: ``_Groups.quiet_many``)."""
        ctx = self.ctx
        one = self.spec.hot.group_of_one
        counted = self._counted
        if len(new) == 1 and not old:
            row = new[0]
            k = self._group_of(row) if one is None else one(row, ctx)
            if self._gone:
                self._reclaim()
            rec = self.groups.get(k)
            if rec is None:
                rec = self._record(k, row)
            rec[1] = row
            states = rec[0]
            self._enter_row(states, row, ctx)
            if counted and len(rec) > 3:
                # self._count(rec, k, 1), inlined
                n = (rec[3] or 0) + 1
                rec[3] = n
                if n <= 0:
                    self._gone.add(k)
            self.state.put(k, rec)
            ctx.aggs = self._read(states)
            return (k,)
        if not new and len(old) == 1:
            # one row leaving (a time window's expiry): the general path for it
            row = old[0]
            k = self._group_of(row) if one is None else one(row, ctx)
            rec = self._record(k, row)
            self._leave_row(rec[0], row, ctx)
            if counted:
                self._count(rec, k, -1)
            self.state.put(k, rec)
            return (k,)
        group_of = self._group_of if one is None else (lambda r: one(r, ctx))
        keys_new = [group_of(r) for r in new]
        keys_old = [group_of(r) for r in old]
        if new and self._gone:
            self._reclaim()
        record = self._record
        enter = self._enter_row
        for r, k in zip(new, keys_new):
            rec = record(k, r)
            rec[1] = r
            enter(rec[0], r, ctx)
            if counted:
                self._count(rec, k, 1)
        leave = self._leave_row
        for r, k in zip(old, keys_old):
            rec = record(k, r)
            leave(rec[0], r, ctx)
            if counted:
                self._count(rec, k, -1)
        touched = dict.fromkeys(keys_new + keys_old)
        put = self.state.put
        groups = self.groups
        for k in touched:
            put(k, groups[k])
        return touched

    def _before(self, key: str, row: Row) -> Rows:
        """A group's row before an update; a group not seen yet has empty aggregates
        (Esper posts e.g. ``sum`` null / ``count`` 0 on the remove stream for it)."""
        rec = self.groups.get(key)
        if rec is None:
            rec = [[a.aggregator.initial() for a in self.aggs], row]
        return self._row_for(rec, False)

    # -- reads for output policies (Esper ref. 2.10 output rate limiting) ---------
    def current_rows(self, is_new: bool = True) -> Rows:
        """The fully aggregated row as it stands now (having applied), as an insert or
        (``is_new`` False) a remove row."""
        self._begin()
        return self._row_for(self._record("", None), is_new)

    def group_keys(self) -> list[str]:
        """Every group seen so far, in first-seen order (groups are never forgotten)."""
        self._begin()
        return list(self.groups)

    def group_seq(self, key: str) -> int:
        """A group's first-seen position (groups are listed in that order)."""
        rec = self.groups.get(key)
        return rec[2] if rec is not None and len(rec) > 2 else -1

    def group_rows(self, key: str) -> Rows:
        """A group's row as it stands now: aggregates of the group, its last event's
        properties (grouped kinds), having applied."""
        self._begin()
        rec = self.groups.get(key)
        if rec is None:
            return []
        if self.spec.kind == GROUPED:
            return self._row_for(rec)
        return self._rows((rec[1],), self._results(rec)) if rec[1] is not None else []

    def groups_rows(self, keys: Iterable[str]) -> Rows:
        """``group_rows`` of each of ``keys`` in turn, as one list."""
        self._begin()
        if self.spec.kind != GROUPED:
            return [r for k in keys for r in self.group_rows(k)]
        ctx = self.ctx
        read = self._read
        project = self._projector
        having = self.spec.having
        groups = self.groups
        out: Rows = []
        for k in keys:
            rec = groups.get(k)
            if rec is None:
                continue
            # self._row_for(rec), inlined
            ctx.aggs = read(rec[0])
            row = rec[1] if rec[1] is not None else {}
            if having is None or having(row, ctx):
                out.append(project(row, ctx))
        return out

    def snapshot(self, contents: Iterable[Row] | None, hashed: bool = False) -> Rows:
        """Rows describing the current state (``output snapshot``, iteration).

        ``contents`` is the data window's rows, or None for a stream without a window.  A
        fully aggregated grouped statement lists the groups present in the window (Esper's
        row-per-group iterator), or every group seen when there is no window; ``hashed``
        (the rows of a join, an on-select, a query): in their hash order, as Esper's join
        iterator and its processing of a set of rows list them.
        """
        self._begin()
        kind = self.spec.kind
        rows = list(contents) if contents is not None else []
        if kind == SIMPLE:
            return self._rows(rows, None)
        if kind in (AGG_ALL, AGG_ROWS):
            # before the first update the aggregation reads as fresh; the record is made
            # by the update, which keeps it in the state (made here, a memory state
            # missed it)
            one = self.groups.get("") or self._unheld(None)  # type: ignore[arg-type]
            if kind == AGG_ALL:
                return self._row_for(one)
            return self._rows(rows, self._results(one))
        if kind == GROUPED:
            out: Rows = []
            if contents is None:
                for rec in self.groups.values():
                    out.extend(self._row_for(rec))
                return out
            seen: dict[str, Row] = {}
            one = self.spec.hot.group_of_one
            if one is None:
                for r in rows:
                    seen.setdefault(self._group_of(r), r)
            else:
                ctx = self.ctx
                for r in rows:
                    seen.setdefault(one(r, ctx), r)
            keys = self.hash_order(list(seen)) if (hashed or self.spec.join) and len(
                seen) > 1 else seen
            for k in keys:
                rec = self.groups.get(k) or self._unheld(seen[k])
                out.extend(self._row_for(rec))
            return out
        out = []
        for r in rows:
            rec = self.groups.get(self._group_of(r)) or self._unheld(r)
            out.extend(self._rows((r,), self._results(rec)))
        return out

    def _unheld(self, row: Row) -> list:
        """A record with empty aggregates for a group the window holds rows of but whose
        aggregation has none yet (a batch window's rows being collected): Esper's
        iterator reads such a group as fresh (``count`` 0, ``sum`` null)."""
        return [[a.aggregator.initial() for a in self.aggs], row]

    def _first_of(self, rows: Rows) -> int:
        """The row ``order by x limit 1`` keeps without ``group by``: Esper scans for the
        least key instead of sorting, and takes its current pick for none while that
        pick's key is null, so any later row replaces a null key
        (``OrderByProcessorImpl.determineLocalMinMax``; grouped rows are sorted)."""
        expr, desc = self.spec.order_by[0]
        prop = getattr(expr, "property_name", None)
        ctx = self.ctx
        pick, least = 0, None
        for i, r in enumerate(rows):
            v = r.get(prop) if prop is not None else expr(r, ctx)
            if least is None or (_compare(least, v) < 0 if desc else _compare(least, v) > 0):
                pick, least = i, v
        return pick

    def order(self, rows: Rows) -> Rows:
        """Apply order by / limit to a batch of output rows."""
        spec = self.spec
        if (spec.limit == 1 and not spec.offset and len(spec.order_by) == 1
                and len(rows) > 1 and spec.kind not in (GROUPED, GROUPED_ROWS)):
            rows = [rows[self._first_of(rows)]]
        elif spec.order_by and len(rows) > 1:
            ctx = self.ctx
            for expr, desc in reversed(spec.order_by):
                prop = getattr(expr, "property_name", None)
                if prop is not None:
                    values = [r.get(prop) for r in rows]
                else:
                    values = [expr(r, ctx) for r in rows]
                if None in values:
                    values = [_sort_key(v) for v in values]
                # a stable sort by each key from the last: ties keep the earlier keys' order
                order = sorted(range(len(rows)), key=values.__getitem__, reverse=desc)
                rows = [rows[i] for i in order]
        if spec.limit is not None:
            rows = rows[spec.offset: spec.offset + spec.limit]
        if spec.sort_columns:
            rows = [{k: v for k, v in r.items() if not k.startswith(SORT_KEY)} for r in rows]
        return rows


def _compare(a: Any, b: Any) -> int:
    """Order of two sort keys, null before any value."""
    ka, kb = _sort_key(a), _sort_key(b)
    return (ka > kb) - (ka < kb)


def _sort_key(v: Any) -> tuple:
    """Null sorts before any value: first ascending, last descending (as Esper orders)."""
    return (v is not None, v if v is not None else 0)


class _SimpleResultSet(ResultSet):
    """A result set without aggregation (fast ``step``)."""

    __slots__ = ()

    step = ResultSet._step_simple


class _AggAllResultSet(ResultSet):
    """A fully aggregated ungrouped result set: ``process`` takes its fast path."""

    __slots__ = ()

    process = ResultSet._process_agg_all
    step = ResultSet._step_agg


class _AggRowsResultSet(ResultSet):
    """An aggregated ungrouped result set with event properties (fast ``process``)."""

    __slots__ = ()

    process = ResultSet._process_agg_rows
    step = ResultSet._step_agg


class _GroupedResultSet(ResultSet):
    """A fully aggregated grouped result set (fast ``process``)."""

    __slots__ = ()

    process = ResultSet._process_grouped
    step = ResultSet._step_grouped


_FAST: dict[str, type[ResultSet]] = {
    SIMPLE: _SimpleResultSet, AGG_ALL: _AggAllResultSet, AGG_ROWS: _AggRowsResultSet,
    GROUPED: _GroupedResultSet}
"""The result-set class of each kind with a specialised ``process``."""

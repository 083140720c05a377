"""A running subquery of one context partition: its window, the index mirroring it, and
the rows a lookup from the enclosing statement finds (Esper reference "Subqueries").

The index is an in-memory mirror of the window (the window's state is the state); it is
rebuilt from the window's contents when the partition is built, as a join's is.  The
window takes the view's insert and remove stream, so a batch window's subquery sees the
last released batch, as Esper's does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from operators.base import PartitionCtx, Row, Rows, StateNamespace
from operators.joins.index import HashIndex, ScanIndex, hashable


class Subquery:
    """Window, index and aggregation of one subquery in one context partition."""

    __slots__ = ("spec", "ctx", "view", "index", "states", "state")

    def __init__(self, spec: Any, state: StateNamespace, ctx: PartitionCtx,
                 build_view: Any) -> None:
        """``spec``: the SubquerySpec (operators.subquery.spec); ``build_view`` builds its
        data window as a pipeline builds its own."""
        self.spec = spec
        self.ctx = ctx
        self.view = (build_view(spec.view, state.child("view"), ctx)
                     if spec.view is not None else None)
        self.index: HashIndex | ScanIndex | None = None
        self.states: list[Any] | None = None
        self.state: StateNamespace | None = None
        if spec.source == "table":
            return
        if spec.keys:
            keys = spec.keys
            nulls_meet = spec.nulls_meet
            if len(keys) == 1:
                k0 = keys[0]
                if nulls_meet:
                    self.index = HashIndex(lambda r: _null_meets(hashable(k0(r, ctx))))
                else:
                    self.index = HashIndex(lambda r: hashable(k0(r, ctx)))
            else:
                self.index = HashIndex(
                    lambda r: _tuple_key([k(r, ctx) for k in keys], nulls=nulls_meet))
        else:
            self.index = ScanIndex()
        if spec.incremental():
            # kept in the state: a stream without a window has no rows to rebuild them from
            self.state = state
            saved = state.get("aggs")
            if saved is not None:
                self.states = list(saved)
                return
            self.states = [a.aggregator.initial() for a in spec.aggregates]
        if self.view is not None:
            self._update(_posted_rows(self.view), [])

    # -- window changes --------------------------------------------------------
    def on_event(self, event: Row, now_ms: int) -> None:
        """An event of the subquery's stream: filter, then into the window."""
        f = self.spec.filter
        if f is not None and not f(event, self.ctx):
            return
        if self.view is None:
            self._update([event], [])  # no window: aggregates take every event
            return
        new, old = self.view.on_events([event], [], now_ms)
        if new or old:
            self._update(new, old)

    def on_rows(self, new: Rows, old: Rows) -> None:
        """Insert and remove stream of the named window the subquery reads."""
        f = self.spec.filter
        if f is not None:
            ctx = self.ctx
            new = [r for r in new if f(r, ctx)]
            old = [r for r in old if f(r, ctx)]
        self._update(new, old)

    def prime(self, rows: Rows) -> None:
        """Start from a named window's current rows."""
        self.on_rows(list(rows), [])

    def on_time(self, now_ms: int) -> None:
        view = self.view
        if view is None:
            return
        t = view.next_timer()
        if t is not None and t <= now_ms:
            new, old = view.on_time(now_ms)
            if new or old:
                self._update(new, old)

    def next_timer(self) -> int | None:
        view = self.view
        return view.next_timer() if view is not None else None

    def _update(self, new: Iterable[Row], old: Iterable[Row]) -> None:
        new, old = list(new), list(old)
        if new and old:
            # a row that enters and leaves in one update (below a full sorted window) is
            # never held
            both = {id(r) for r in new} & {id(r) for r in old}
            if both:
                new = [r for r in new if id(r) not in both]
                old = [r for r in old if id(r) not in both]
        if self.states is not None:
            self._aggregate(list(new), list(old))
            assert self.state is not None
            self.state.put("aggs", self.states)
            return
        index = self.index
        assert index is not None
        f = self.spec.index_filter
        if f is not None:
            ctx = self.ctx
            new = [r for r in new if f((r, None), ctx)]
            old = [r for r in old if f((r, None), ctx)]
        for r in old:
            index.remove(r)
        for r in new:
            index.add(r)

    def _aggregate(self, new: Rows, old: Rows) -> None:
        spec = self.spec
        ctx = self.ctx
        w = spec.where
        states = self.states
        assert states is not None
        for rows, entering in ((old, False), (new, True)):
            for r in rows:
                pair = (r, None)
                if w is not None and not w(pair, ctx):
                    continue
                for i, a in enumerate(spec.aggregates):
                    if a.filter is not None and not a.filter(pair, ctx):
                        continue
                    v = a.value(pair, ctx) if a.value is not None else r
                    agg = a.aggregator
                    if getattr(agg, "by_event", False):
                        # the window evicts out of arrival order: the entry of that event
                        states[i] = (agg.enter_row(states[i], v, r) if entering
                                     else agg.leave_row(states[i], v, r))
                    else:
                        states[i] = (agg.enter(states[i], v) if entering
                                     else agg.leave(states[i], v))

    # -- lookups ---------------------------------------------------------------
    def candidates(self, outer: Any, ctx: PartitionCtx) -> Rows:
        """The rows the index gives for an enclosing row (before the where clause)."""
        spec = self.spec
        if spec.source == "table":
            return self._table_rows(outer, ctx)
        index = self.index
        if isinstance(index, HashIndex):
            look = spec.lookup
            if len(look) == 1:
                v = look[0](outer, ctx)
                if v is None:
                    return index.get(NULL_KEY) if spec.nulls_meet else []
                return index.get(hashable(v))
            k = _tuple_key([e(outer, ctx) for e in look], nulls=spec.nulls_meet)
            return [] if k is None else index.get(k)
        assert index is not None
        return index.all()

    def _table_rows(self, outer: Any, ctx: PartitionCtx) -> Rows:
        table = ctx.tables.get(self.spec.type_name)
        if table is None:
            return []
        if self.spec.table_keys:
            vals = [k(outer, ctx) for k in self.spec.table_keys]
            if any(v is None for v in vals):
                return []
            rec = table.lookup(vals)
            return [table.row(rec)] if rec is not None else []
        return table.rows()

    def rows(self, outer: Any, ctx: PartitionCtx) -> Rows:
        """The subquery stream's rows that an enclosing row selects."""
        cands = self.candidates(outer, ctx)
        w = self.spec.where
        if w is None or not cands:
            return cands
        return [r for r in cands if w((r, outer), ctx)]

    def values(self, outer: Any, ctx: PartitionCtx, dedupe: bool = True) -> list[Any]:
        """The subquery's result rows for an enclosing row: one value each (the column,
        a row of several columns, or the event for ``select *``).  ``dedupe``: apply
        ``select distinct`` (Esper counts a scalar subquery's rows before it does)."""
        spec = self.spec
        if spec.aggregates or spec.group_by:
            out = self._aggregated(outer, ctx)
        else:
            out = [self._project((r, outer), ctx) for r in self.rows(outer, ctx)]
        if dedupe and spec.distinct and len(out) > 1:
            seen: list[Any] = []
            for v in out:
                if v not in seen:
                    seen.append(v)
            out = seen
        return out

    def exists(self, outer: Any, ctx: PartitionCtx) -> bool:
        """Whether the subquery has a result row (Esper: exists)."""
        if self.spec.aggregates or self.spec.group_by or self.spec.having is not None:
            return bool(self.values(outer, ctx))
        return bool(self.rows(outer, ctx))

    def _project(self, pair: tuple[Any, Any], ctx: PartitionCtx) -> Any:
        spec = self.spec
        cols = spec.columns
        if len(cols) == 1:
            c = cols[0]
            return pair[0] if c is None else c(pair, ctx)
        return {n: (pair[0] if c is None else c(pair, ctx)) for n, c in zip(spec.names, cols)}

    def _aggregated(self, outer: Any, ctx: PartitionCtx) -> list[Any]:
        spec = self.spec
        if self.states is not None:
            groups: list[tuple[Any, list[Any]]] = [
                (None, [a.aggregator.result(s) for a, s in zip(spec.aggregates, self.states)])]
        else:
            groups = self._fold(self.rows(outer, ctx), outer, ctx)
        out: list[Any] = []
        saved = ctx.aggs
        try:
            for first, results in groups:
                ctx.aggs = results
                pair = (first, outer)
                if spec.having is not None and not spec.having(pair, ctx):
                    continue
                out.append(self._project(pair, ctx))
        finally:
            ctx.aggs = saved
        return out

    def _fold(self, rows: Rows, outer: Any, ctx: PartitionCtx
              ) -> list[tuple[Any, list[Any]]]:
        """Aggregate the found rows: one group without group by (an empty one too), else
        one per group-by value in order of first appearance."""
        spec = self.spec
        aggs = spec.aggregates
        groups: dict[Any, tuple[Any, list[Any]]] = {}
        if not spec.group_by:
            groups[None] = (rows[0] if rows else None,
                            [a.aggregator.initial() for a in aggs])
        for r in rows:
            pair = (r, outer)
            if spec.group_by:
                key = _tuple_key([g(pair, ctx) for g in spec.group_by], nulls=True)
                g = groups.get(key)
                if g is None:
                    g = groups[key] = (r, [a.aggregator.initial() for a in aggs])
            else:
                g = groups[None]
            states = g[1]
            for i, a in enumerate(aggs):
                if a.filter is not None and not a.filter(pair, ctx):
                    continue
                v = a.value(pair, ctx) if a.value is not None else r
                states[i] = a.aggregator.enter(states[i], v)
        return [(first, [a.aggregator.result(s) for a, s in zip(aggs, states)])
                for first, states in groups.values()]


def _posted_rows(view: Any) -> Rows:
    """The rows a window has posted and not taken back: its contents, but a batch
    window's last released batch (the one its subquery sees), also inside a chain,
    a grouped window or an intersection."""
    return view.posted()


NULL_KEY = ("<null>",)
"""The index key of a row whose key is null, in an index where nulls meet."""


def _null_meets(key: Any) -> Any:
    return NULL_KEY if key is None else key


def _tuple_key(values: list[Any], nulls: bool = False) -> Any:
    """A composite key (None when a part is null and nulls do not meet)."""
    if not nulls and any(v is None for v in values):
        return None
    return tuple(hashable(v) for v in values)

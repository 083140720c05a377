"""A running join of one context partition: events enter their stream's data window,
the window's insert and remove rows update the stream's indexes and are looked up
against the other streams, giving insert and remove join rows.

Esper's join composition, per dispatch (Esper reference "Joining Event Streams"; Esper
ref. 2.12: a join result set is processed by the result set like events):
1. each remove-stream event joins the other streams' windows as they are (remove rows);
2. the indexes take the window changes (entering rows in, then leaving rows out, so
   an event that enters and leaves in one dispatch is not left behind);
3. each insert-stream event joins the other streams' windows as they now are (insert
   rows).
An event of an outer stream (left, right or full outer join) that joins nothing gives
one row with the other streams null, on the insert or the remove stream alike; a row
with nulls is not taken back when a match arrives later (Esper reference 5.12.3, as
Esper runs it).  A ``unidirectional`` stream alone triggers the join: the other streams'
windows only change and their rows are never output, neither inserted nor removed.  When more than
one stream changes in one dispatch (a self-join, windows expiring at the same time) a
combination found from two sides is output once, as Esper's result sets are sets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from operators.base import Emit, PartitionCtx, Row, Rows, StateNamespace, View
from operators.joins.index import HashIndex, ScanIndex, SortedIndex, fill
from operators.joins.spec import JoinSpec, ViewBuilder, bounds_reader, key_reader


class Join:
    """Windows and indexes of a join's streams in one context partition."""

    __slots__ = ("spec", "ctx", "names", "views", "by_type", "hashes", "scans", "maint",
                 "paths", "uni", "ordered", "nw", "tabs", "priors")

    def __init__(self, spec: JoinSpec, state: StateNamespace, ctx: PartitionCtx,
                 build_view: ViewBuilder) -> None:
        self.spec = spec
        self.ctx = ctx
        streams = spec.streams
        self.names = tuple(s.name for s in streams)
        self.views: list[View | None] = [
            build_view(s.view, state.child(i), ctx) if s.view is not None else None
            for i, s in enumerate(streams)]
        ctx.windows = {n: v for n, v in zip(self.names, self.views) if v is not None}
        self.priors = [s.prior.build(state.child(f"prior{i}"), ctx)
                       if s.prior is not None else None for i, s in enumerate(streams)]
        self.tabs = {i: ctx.tables[s.type_name] for i, s in enumerate(streams) if s.table}
        """Table streams: read through the partition's table instance (Esper ref. 4.7)."""
        self.by_type: dict[str, list[int]] = {}
        for i, s in enumerate(streams):
            if not (s.named_window or s.table):
                self.by_type.setdefault(s.type_name, []).append(i)
        self.nw = spec.window_stream()
        """The named-window stream: its rows live in its scan index (primed by the
        runtime from the window's rows when the partition is built)."""
        self.hashes: list[HashIndex | SortedIndex] = [
            (SortedIndex if d.sorted else HashIndex)(d.key_fn(ctx, spec.nulls_match))
            for d in spec.indexes]
        scanned = {st.stream for path in spec.paths for st in path
                   if st.index is None and not streams[st.stream].table}
        if self.nw is not None:
            scanned.add(self.nw)
        self.scans = {j: ScanIndex() for j in sorted(scanned)}
        self.maint: list[list[HashIndex | SortedIndex | ScanIndex]] = [[] for _ in streams]
        for d, ix in zip(spec.indexes, self.hashes):
            self.maint[d.stream].append(ix)
        for j, ix in self.scans.items():
            self.maint[j].append(ix)
        for j, ixs in enumerate(self.maint):
            view = self.views[j]
            if view is not None:
                # the index mirrors the window's streams: what it posted, not its
                # iterator (a batch window's batch being collected is not joined yet)
                rows = view.posted()
                for ix in ixs:
                    fill(ix, rows)
        self.paths = [self._path_fn(i) for i in range(len(streams))]
        uni = [i for i, s in enumerate(streams) if s.unidirectional]
        self.uni: int | None = uni[0] if uni else None
        self.ordered = [self._in_order(i) for i in range(len(streams))]

    # -- lookups -------------------------------------------------------------
    def _path_fn(self, i: int) -> list[tuple[str, Callable[[Row], list[Row]] | None,
                                             Callable[[Row], Any] | None]]:
        """For each step of stream ``i``'s path: the stream name, the candidate rows of a
        partial row (hash or sorted index lookup) or None with a full scan."""
        out: list[Any] = []
        for st in self.spec.paths[i]:
            name = self.names[st.stream]
            if st.index is None:
                out.append((name, None, None))
            elif st.bounds:
                out.append((name, self.hashes[st.index].get, bounds_reader(st.bounds, self.ctx)))
            else:
                out.append((name, self.hashes[st.index].get,
                            key_reader(st.lookup, self.ctx, self.spec.nulls_match)))
        return out

    def _table_rows(self, tab: Any, step: Any, row: Row) -> Rows:
        """A table's rows for a partial row: the one with the looked-up primary key, or
        every row (the where clause then decides)."""
        if not step.primary_key:
            return tab.rows()
        ctx = self.ctx
        vals = [e(row, ctx) for e in step.lookup]
        if any(v is None for v in vals):
            return []
        rec = tab.lookup(vals)
        return [tab.row(rec)] if rec is not None else []

    def _outer_step(self, step: Any, name: str, get: Any, key: Any, rows: Rows) -> Rows:
        """One lookup of an outer join: nothing is found from a null stream, and an
        optional stream without a match is bound to null (Esper reference 5.12.3)."""
        out: Rows = []
        for r in rows:
            if any(r.get(s) is None for s in step.sources):
                cands: Rows = []
            elif get is None:
                cands = self.scans[step.stream].rows
            else:
                cands = get(key(r))
            for c in cands:
                nr = r.copy()
                nr[name] = c
                out.append(nr)
            if not cands and step.optional:
                nr = r.copy()
                nr[name] = None
                out.append(nr)
        return out

    def _in_order(self, i: int) -> bool:
        """Whether rows built from stream ``i`` have their streams in from-clause order."""
        seq = [i, *(st.stream for st in self.spec.paths[i])]
        return seq == sorted(seq)

    def lookup(self, i: int, event: Row) -> Rows:
        """The join rows of one event of stream ``i`` with the other streams as they are."""
        rows: Rows = [{self.names[i]: event}]
        for step, (name, get, key) in zip(self.spec.paths[i], self.paths[i]):
            out: Rows = []
            tab = self.tabs.get(step.stream) if self.tabs else None
            if step.optional or step.sources:
                out = self._outer_step(step, name, get, key, rows)
            elif tab is not None:
                for r in rows:
                    for c in self._table_rows(tab, step, r):
                        nr = r.copy()
                        nr[name] = c
                        out.append(nr)
            elif get is None:
                cands = self.scans[step.stream].rows
                for r in rows:
                    for c in cands:
                        nr = r.copy()
                        nr[name] = c
                        out.append(nr)
            else:
                assert key is not None
                for r in rows:
                    for c in get(key(r)):
                        nr = r.copy()
                        nr[name] = c
                        out.append(nr)
            rows = out
            if not rows:
                return rows
        if not self.ordered[i]:
            names = self.names
            rows = [{n: r[n] for n in names} for r in rows]
        return rows

    # -- changes -------------------------------------------------------------
    def on_event(self, type_name: str, event: Row, now_ms: int) -> Emit:
        """An event of one of the join's types: through each of its streams' filter and
        window (a self-join feeds every stream of the type), then one composition."""
        streams = self.by_type.get(type_name)
        if not streams:
            return [], []
        ctx = self.ctx
        changed: list[tuple[int, Rows, Rows]] = []
        for i in streams:
            s = self.spec.streams[i]
            if s.filter is not None and not s.filter(event, ctx):
                continue
            prior = self.priors[i]
            ev = event if prior is None else prior.stamp(event)
            view = self.views[i]
            if view is None:
                changed.append((i, [ev], []))
                continue
            new, old = view.on_events([ev], [], now_ms)
            if new or old:
                changed.append((i, list(new), list(old)))
        return self.compose(changed) if changed else ([], [])

    def on_window_rows(self, new: Rows, old: Rows) -> Emit:
        """Insert and remove stream of the named window the join reads."""
        i = self.nw
        if i is None:
            return [], []
        f = self.spec.streams[i].filter
        if f is not None:
            ctx = self.ctx
            new = [r for r in new if f(r, ctx)]
            old = [r for r in old if f(r, ctx)]
        if not new and not old:
            return [], []
        return self.compose([(i, list(new), list(old))])

    def prime(self, rows: Rows) -> None:
        """Start from the named window's current rows, posting nothing (Esper ref. 2)."""
        i = self.nw
        if i is None:
            return
        f = self.spec.streams[i].filter
        for r in rows:
            if f is None or f(r, self.ctx):
                for ix in self.maint[i]:
                    ix.add(r)

    def on_time(self, now_ms: int) -> Emit:
        """Windows due at ``now_ms`` expire or flush, all in one composition."""
        changed: list[tuple[int, Rows, Rows]] = []
        for i, view in enumerate(self.views):
            if view is None:
                continue
            t = view.next_timer()
            if t is not None and t <= now_ms:
                new, old = view.on_time(now_ms)
                if new or old:
                    changed.append((i, list(new), list(old)))
        return self.compose(changed) if changed else ([], [])

    def on_variables_changed(self, now_ms: int) -> Emit:
        """Expiry-expression windows re-check after a variable change (Esper ref. 14.3.12)."""
        changed: list[tuple[int, Rows, Rows]] = []
        for i, view in enumerate(self.views):
            if view is not None:
                new, old = view.on_variables_changed(now_ms)  # type: ignore[attr-defined]
                if new or old:
                    changed.append((i, list(new), list(old)))
        return self.compose(changed) if changed else ([], [])

    def arm(self, now_ms: int, type_name: str) -> None:
        """Arm the windows of the streams of ``type_name`` (``Pipeline.arm``)."""
        for i in self.by_type.get(type_name, ()):
            arm = getattr(self.views[i], "arm", None)
            if arm is not None:
                arm(now_ms)

    def next_timer(self) -> int | None:
        due: int | None = None
        for view in self.views:
            if view is not None:
                t = view.next_timer()
                if t is not None and (due is None or t < due):
                    due = t
        return due

    def compose(self, changed: list[tuple[int, Rows, Rows]]) -> Emit:
        """Join rows of the window changes of one dispatch (module docstring, 1-3)."""
        uni = self.uni
        old_rows: Rows = []
        if uni is None:
            for i, _, old in changed:
                for ev in old:
                    old_rows.extend(self.lookup(i, ev))
        maint = self.maint
        for i, new, old in changed:
            for ix in maint[i]:
                # entering rows first: an event a window takes and evicts at once (a
                # #sort window's worst) is in both lists and must leave the index too
                for ev in new:
                    ix.add(ev)
                for ev in old:
                    ix.remove(ev)
        new_rows: Rows = []
        for i, new, _ in changed:
            if uni is not None and i != uni:
                continue
            for ev in new:
                new_rows.extend(self.lookup(i, ev))
        if len(changed) > 1:
            names = self.names
            new_rows = _distinct(new_rows, names)
            old_rows = _distinct(old_rows, names)
        return new_rows, old_rows

    # -- iteration -----------------------------------------------------------
    def contents(self) -> Iterable[Row]:
        """Every join row of the windows' current contents (output snapshot,
        iteration): each row of the first stream looked up against the others."""
        out: Rows = []
        for ev in self._rows(0):
            out.extend(self.lookup(0, ev))
        for j, s in enumerate(self.spec.streams[1:], 1):
            if s.outer:
                # the rows of an outer stream joining nothing
                for ev in self._rows(j):
                    rows = self.lookup(j, ev)
                    if len(rows) == 1 and all(v is None for n, v in rows[0].items()
                                              if n != s.name):
                        out.extend(rows)
        return out

    def _rows(self, i: int) -> Iterable[Row]:
        """The current rows of stream ``i`` (none for a unidirectional stream): what its
        window posted, as in the indexes (a batch window's released batch; Esper's join
        snapshot does not see the batch being collected)."""
        view = self.views[i]
        if view is not None:
            return view.posted()
        if i in self.tabs:
            return self.tabs[i].rows()
        return list(self.scans[i].rows) if i == self.nw else []

    def windows(self) -> list[View]:
        return [v for v in self.views if v is not None]


def _distinct(rows: Rows, names: tuple[str, ...]) -> Rows:
    """Rows with the same events (the same objects) kept once, first one first.  Events
    are told apart by identity, not value: two equal events are two rows, as in Esper.
    A self-join rebuilt from its state holds each event once per window, as distinct
    objects, so there a pair found from both sides in one dispatch may come twice."""
    seen: set[tuple[int, ...]] = set()
    out: Rows = []
    for r in rows:
        k = tuple(id(r.get(n)) for n in names)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out

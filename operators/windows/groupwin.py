"""Grouped data window (Esper ref. 14.3.15): a separate sub-view chain per group key."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.chain import combine, finish
from operators.windows.common import DEFAULT_ENV, BuildEnv, WindowSpec, WindowView, freeze, key_of
from operators.windows.java_order import bucket


class GroupWinView(WindowView):
    """Group key -> sub-view (state child per group id); a heap of the groups' timers.

    Esper ref. 14.3.15: groups are never reclaimed (no reclaim hints), so a group's view lives
    as long as the statement.  Per event: one key evaluation, one dict lookup, the
    sub-view's own O(1) work and a heap push only when that group's timer moved.
    """

    def __init__(
        self,
        keys: tuple[Expr, ...],
        key_names: tuple[str, ...],
        sub: Any,
        state: StateNamespace,
        ctx: PartitionCtx,
        env: BuildEnv,
    ) -> None:
        self.keys = keys
        self.key_names = key_names
        self.sub = sub
        self.state = state
        self.ctx = ctx
        self.env = env
        self.group_ns = state.child("g")
        self.views: dict[int, Any] = {}
        self.dues: dict[int, int | None] = {}
        self.heap: list[tuple[int, int]] = []
        self.is_batch = bool(getattr(sub, "is_batch", False))
        self.aggregates_each_post = getattr(sub, "name", "") == "time_interval"
        """A partitioned timeInterval window: each partition's pane trigger is aggregated
        alone (SPL timeInterval: 'If a timeInterval window is partitioned, each of its window
        panes is partitioned')."""
        self.entries: dict[Any, tuple[int, Any]] = {}
        """Frozen group key -> (group id, sub-view)."""
        self.timed = False
        """Whether the sub-views can have timers (else there is nothing to track)."""
        self._env: BuildEnv | None = None
        last = -1
        for gid, key in self.group_ns.items():
            self._open(gid, key, ctx.now_ms)
            last = gid
        self.next_gid = last + 1

    def _open(self, gid: int, key: Any, now_ms: int) -> Any:
        props: tuple[tuple[str, Any], ...] = ()
        if self.sub.is_derived:
            # Esper adds the group-by values to the rows a grouped derived window posts.
            values = [key] if len(self.keys) == 1 else list(key)
            props = tuple(zip(self.key_names, values, strict=True))
        env = self._env
        if props or env is None or env.start_ms != now_ms:
            env = BuildEnv(refs=self.env.refs, start_ms=now_ms, group_props=props)
            if not props:
                self._env = env
        view = self.sub.build(self.state.child(gid), self.ctx, env)
        self.views[gid] = view
        self.entries[freeze(key)] = (gid, view)
        if not self.timed and getattr(type(view), "next_timer", None) is not (
                WindowView.next_timer):
            self.timed = True
        self._track(gid, view)
        return view

    def _track(self, gid: int, view: Any) -> None:
        due = view.next_timer()
        if self.dues.get(gid) != due:
            self.dues[gid] = due
            if due is not None:
                heapq.heappush(self.heap, (due, gid))

    def _view_for(self, row: Row, now_ms: int, create: bool) -> tuple[int, Any] | None:
        key = key_of(self.keys, row, self.ctx)
        entry = self.entries.get(freeze(key))
        if entry is not None:
            return entry
        if not create:
            return None
        return self._create(key, now_ms)

    def _create(self, key: Any, now_ms: int) -> tuple[int, Any]:
        """A new group: its id is recorded in the state, its sub-view built."""
        gid = self.next_gid
        self.next_gid = gid + 1
        self.group_ns.put(gid, key)
        return gid, self._open(gid, key, now_ms)

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Route each row to its group's sub-view; concatenate what they post."""
        if len(new) == 1 and not old:
            keys = self.keys
            if len(keys) == 1:
                key = keys[0](new[0], self.ctx)
            else:
                key = key_of(keys, new[0], self.ctx)
            entry = self.entries.get(key if type(key) is str else freeze(key))
            if entry is None:
                entry = self._create(key, now_ms)
            view = entry[1]
            out = view.on_events(new, old, now_ms)
            if self.timed:
                self._track(entry[0], view)
            return out
        order: list[int] = []
        batches: dict[int, tuple[Rows, Rows]] = {}
        for rows, index, create in ((new, 0, True), (old, 1, False)):
            for row in rows:
                found = self._view_for(row, now_ms, create)
                if found is None:
                    continue
                gid = found[0]
                if gid not in batches:
                    batches[gid] = ([], [])
                    order.append(gid)
                batches[gid][index].append(row)
        acc: tuple[Rows, Rows, bool] = ([], [], False)
        for gid in order:
            view = self.views[gid]
            acc = combine(acc, view.on_events(batches[gid][0], batches[gid][1], now_ms))
            self._track(gid, view)
        return finish(acc)

    fires_apart = True

    def on_time(self, now_ms: int) -> Emit:
        """Fire the groups whose timer is due, in (due, group) order, as one update."""
        acc: tuple[Rows, Rows, bool] = ([], [], False)
        for emit in self.on_time_apart(now_ms):
            acc = combine(acc, emit)
        return finish(acc)

    def on_time_apart(self, now_ms: int) -> Iterator[Emit]:
        """Each due group's firing as an update of its own, in (due, group) order: in Esper
        every group's sub-view schedules its own callback (in the order the groups were
        made), and each posts to the statement on its own (Esper ref. 14.3.15), the
        groups after it still holding their rows (lazily: a snapshot taken as one group
        posts sees the others as they are)."""
        heap = self.heap
        fired: list[int] = []
        while heap and heap[0][0] <= now_ms:
            due, gid = heapq.heappop(heap)
            if self.dues.get(gid) == due and gid not in fired:
                fired.append(gid)
        for gid in fired:
            view = self.views[gid]
            self.dues[gid] = None
            if view.fires_apart:  # a sub-view posting update by update (its panes)
                emits = list(view.on_time_apart(now_ms))
                self._track(gid, view)
                yield from emits
                continue
            emit = view.on_time(now_ms)
            self._track(gid, view)
            yield emit

    def on_variables_changed(self, now_ms: int) -> Emit:
        """Every group re-evaluates (expiry-expression windows)."""
        acc: tuple[Rows, Rows, bool] = ([], [], False)
        for gid, view in self.views.items():
            acc = combine(acc, view.on_variables_changed(now_ms))
            self._track(gid, view)
        return finish(acc)

    def next_timer(self) -> int | None:
        """The earliest live entry of the timer heap (stale entries are dropped)."""
        heap = self.heap
        while heap and self.dues.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _group(self, row: Row | None) -> Any:
        if row is None:
            return None
        found = self._view_for(row, 0, False)
        return found[1] if found else None

    def _stop_rows(self) -> list[tuple[int, Any, Row]]:
        """(group id, frozen key, row) of each group whose derived window had the group
        key added to its rows and posted one, in the hash order of the keys."""
        if not self.sub.is_derived:
            return []
        n = len(self.entries)
        out = []
        for _, gid, key, view in sorted(((bucket(k, n), gid, k, view)
                                         for k, (gid, view) in self.entries.items()),
                                        key=lambda e: (e[0], e[1])):
            stages = getattr(view, "stages", None)
            derived = stages[-1] if stages else view
            last = getattr(derived, "last_row", None)
            if last is not None and getattr(derived, "group_props", None):
                out.append((gid, key, last))
        return out

    def posts_on_stop(self) -> bool:
        return bool(self._stop_rows())

    def on_stop(self) -> Iterator[Emit]:
        """The context partition ends: a group whose derived window had the group key
        added to its rows takes back the row it posted last, one update per group in the
        hash order of the keys, and then leaves the window (Esper's property-adding view
        of a grouped derived window posts, as it stops, the rows it posted and did not
        see removed; a snapshot it triggers sees the groups not stopped yet; Esper ref.
        14.3.15)."""
        for gid, key, row in self._stop_rows():
            yield [], [row]
            self.views.pop(gid, None)
            self.entries.pop(key, None)

    def replay_order(self) -> list[Row]:
        """The groups in the order Esper iterates its hash map of them (the bucket of the
        group key, then creation), each group's rows in its own order (a match_recognize
        replays the window in it)."""
        n = len(self.entries)
        out: list[Row] = []
        for _, _, view in sorted(((bucket(k, n), gid, view)
                                  for k, (gid, view) in self.entries.items()),
                                 key=lambda e: (e[0], e[1])):
            out.extend(getattr(view, "replay_order", view.contents)())
        return out

    def contents(self) -> list[Row]:
        """All groups' contents, group by group in creation order."""
        out: list[Row] = []
        for view in self.views.values():
            out.extend(view.contents())
        return out

    def contents_releasing(self, released: Rows) -> list[Row]:
        """``contents`` while one group's batch window posts ``released``: that group's
        contents are the batch it posts (Esper's batch views clear it only after posting
        it, Esper ref. 14.3.4)."""
        found = self._view_for(released[0], 0, False) if released else None
        gid = found[0] if found is not None else None
        out: list[Row] = []
        for g, view in self.views.items():
            seen = g == gid and getattr(view, "releases_before_clearing", False)
            out.extend(released if seen else view.contents())
        return out

    def posted(self) -> list[Row]:
        """What the groups' sub-views have posted, group by group in creation order."""
        out: list[Row] = []
        for view in self.views.values():
            out.extend(view.posted())
        return out

    def count(self, row: Row | None = None) -> int:
        """Rows of the row's group (Esper's prev functions work per group), else all rows."""
        view = self._group(row)
        if view is not None:
            return view.count(row)
        return 0 if row is not None else sum(v.count() for v in self.views.values())

    def prev(self, i: int, row: Row | None = None) -> Row | None:
        """prev within the group of ``row``."""
        view = self._group(row)
        if view is not None:
            return view.prev(i, row)
        return None if row is not None else super().prev(i)

    def prevtail(self, i: int, row: Row | None = None) -> Row | None:
        """prevtail within the group of ``row``."""
        view = self._group(row)
        if view is not None:
            return view.prevtail(i, row)
        return None if row is not None else super().prevtail(i)


@dataclass(frozen=True)
class GroupWinSpec(WindowSpec):
    """``groupwin(expr, ...)`` followed by the sub-view chain it applies per group."""

    keys: tuple[Expr, ...] = ()
    key_names: tuple[str, ...] = ()
    sub: Any = None
    name: str = "groupwin"
    params_text: tuple[str, ...] = ()
    combinable: bool = False

    @property
    def is_derived(self) -> bool:  # type: ignore[override]
        """Grouped derived windows post derived rows."""
        return self.sub is not None and self.sub.is_derived

    @property
    def is_batch(self) -> bool:  # type: ignore[override]
        """Grouped batch windows post batches."""
        return self.sub is not None and self.sub.is_batch

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> GroupWinView:
        """A grouped view; every group already in ``state`` is rebuilt."""
        if self.sub is None:
            raise ValueError("groupwin must be followed by at least one window")
        return GroupWinView(self.keys, self.key_names, self.sub, state, ctx, env or DEFAULT_ENV)

    def describe(self) -> str:
        """``groupwin(keys)`` and the grouped windows."""
        inner = self.sub.describe() if self.sub is not None else ""
        inner = inner if inner.startswith("#") or not inner else "#" + inner
        return f"{self.name}({', '.join(self.params_text)}){inner}"


@dataclass(frozen=True)
class MergeSpec(WindowSpec):
    """``merge(...)``: ends a groupwin declaration (Esper ref. 14.3.15); builds nothing itself."""

    name: str = "merge"
    params_text: tuple[str, ...] = ()
    combinable: bool = False

    def build(self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None) -> Any:
        """merge is a marker consumed when the chain is composed."""
        raise ValueError("merge may only follow a groupwin declaration")

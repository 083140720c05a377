"""Output strategies: what a limited statement posts when its condition fires (Esper
ref. 5.7 Output rate limiting, and its appendix on output by statement kind).

The result-set kind decides what ``all``, ``last`` and ``first`` mean: a fully aggregated
grouped statement posts one row per group for ``last`` (groups updated in the interval)
and for ``all`` (every group ever seen, its events all expired or not); ``first`` of a
grouped statement is decided per group.  For ``all``, ``last`` and ``first`` aggregation
state is updated at each event (Esper's non-buffered output helpers), so the strategy
never needs an interval's events again; the default keeps the interval's updates and runs
them at output time.  Each collector writes O(1) keys per event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from operators.base import Emit, Row, Rows, StateNamespace
from operators.output.conditions import Trigger
from operators.resultset import AGG_ALL, GROUPED, GROUPED_ROWS, SIMPLE, ResultSet
from operators.windows.java_order import INITIAL_CAPACITY


class Strategy:
    """Collects an interval's rows and builds its output (the default: every row of every
    update, in order)."""

    releases = True
    """False for ``first``: its rows go out at once, the condition only ends intervals."""
    idle_row = True
    """A fully aggregated statement posts its current row in an interval without
    updates (Esper's RowForAll output; ``snapshot`` posts the window instead)."""
    resets_unidirectional = True
    """Whether a unidirectional join's aggregation starts afresh at each update on this
    path: Esper clears it before each join result, but its unordered output-last/all
    helpers aggregate across the interval's updates."""
    fresh = False
    """A unidirectional join aggregating, where the strategy itself must know: the
    buffered default aggregates each update afresh, a snapshot has no rows."""

    def __init__(self, trigger: Trigger, state: StateNamespace, rs: ResultSet,
                 contents: Callable[[], Iterable[Row] | None], stream_kind: str) -> None:
        self.trigger = trigger
        self.state = state
        self.rs = rs
        self.contents = contents
        self.irstream = rs.want_old
        self.stream_kind = stream_kind
        self.load()

    def load(self) -> None:
        """Read the collectors from the state."""
        self.buffer: list[tuple[int, Rows, Rows]] = sorted(
            (k[1], v[0], v[1]) for k, v in self.state.items()
            if isinstance(k, tuple) and k and k[0] == "update")

    def collect(self, new: Rows, old: Rows) -> None:
        """Run the result set for one update and keep what the output will need."""
        self.push(*self.rs.process(new, old))

    def push(self, new: Rows, old: Rows) -> None:
        """Keep one update's rows for the interval's output (one key per update)."""
        seq = self.trigger.seq()
        self.buffer.append((seq, new, old))
        self.state.put(("update", seq), [new, old])

    def rows(self) -> Emit:
        """The rows of the interval."""
        new: Rows = []
        old: Rows = []
        for _, n, o in self.buffer:
            new.extend(n)
            old.extend(o)
        return new, old

    def holds(self) -> bool:
        """Whether anything was collected this interval."""
        return bool(self.buffer)

    def standing(self) -> bool:
        """Whether an output with nothing collected still posts rows."""
        return False

    def clear(self) -> None:
        """Forget the interval's collectors."""
        for seq, _, _ in self.buffer:
            self.state.delete(("update", seq))
        self.buffer = []

    def first(self, new: Rows, old: Rows, now_ms: int, after_ok: bool) -> Emit:
        raise NotImplementedError


def _quiet_many(strategy: Strategy) -> bool:
    """Whether an update of several rows may go through ``ResultSet.touch_groups``: the
    result set's rows are not needed at once, and the output clause evaluates no
    expression that could read the aggregation values of the last row built."""
    spec = strategy.trigger.spec
    return strategy.rs.quiet and (
        spec.when is None and spec.terminated_and is None and not spec.then_set
        and not spec.terminated_set and spec.every_expr is None
        and spec.every_events_expr is None)


class Snapshot(Strategy):
    """``snapshot``: the window's rows through the result set, no remove stream."""

    idle_row = False

    def load(self) -> None:
        super().load()
        self.quiet_many = _quiet_many(self)

    def collect(self, new: Rows, old: Rows) -> None:
        # the rows are built from the window at output time: an update only aggregates
        rs = self.rs
        if rs.quiet and (self.quiet_many or (len(new) == 1 and not old)):
            rs.touch_groups(new, old)
        else:
            rs.process(new, old)

    def rows(self) -> Emit:
        if self.fresh and self.rs.spec.kind == AGG_ALL:
            # a unidirectional join has no rows to iterate, and Esper's fully aggregated
            # iterator over it gives no row either
            return [], []
        return list(self.rs.snapshot(self.contents())), []

    def standing(self) -> bool:
        rows = self.contents()
        return rows is None or next(iter(rows), None) is not None


class LastRow(Strategy):
    """``last`` without groups: the last insert and remove row of the interval; fully
    aggregated, the current row and the first remove rows (the state before)."""

    @property
    def resets_unidirectional(self) -> bool:  # type: ignore[override]
        # Esper's row-per-event output-last helper runs the join result (which clears);
        # the fully aggregated one only applies the aggregation
        return self.rs.spec.kind != AGG_ALL

    def load(self) -> None:
        super().load()
        self.kept: dict[str, Rows] = {k: v for k, v in self.state.items()
                                      if k in ("last_insert", "last_remove", "first_remove")}

    def collect(self, new: Rows, old: Rows) -> None:
        rn, ro = self.rs.process(new, old)
        if self.rs.spec.kind == AGG_ALL:
            self._keep("last_insert", rn)
            if ro and "first_remove" not in self.kept:
                self._keep("first_remove", ro)
        else:
            if rn:
                self._keep("last_insert", rn[-1:])
            if ro:
                self._keep("last_remove", ro[-1:])

    def _keep(self, key: str, rows: Rows) -> None:
        self.kept[key] = rows
        self.state.put(key, rows)

    def rows(self) -> Emit:
        if self.rs.spec.kind != AGG_ALL:
            return list(self.kept.get("last_insert", [])), list(self.kept.get("last_remove", []))
        old = list(self.kept.get("first_remove", []))
        if not old and self.irstream:
            # Esper RowForAll output-last helper: when no state before an update of the
            # interval passed having, the remove row is the current row (having applied)
            old = self.rs.current_rows(False)
        # the insert row is built at output time, as that helper does: a subquery or
        # variable of the select clause reads its value then
        return self.rs.current_rows(), old

    def holds(self) -> bool:
        return bool(self.kept)

    def clear(self) -> None:
        for k in self.kept:
            self.state.delete(k)
        self.kept = {}


class Buffered(Strategy):
    """The default (and ``all`` without aggregation): the interval's updates are kept and
    run through the result set when the condition fires, so aggregation, ``having`` and a
    subquery, variable or ``current_timestamp`` in the select clause are evaluated at
    output time (Esper's buffered output view, used for every output clause but ``first``,
    ``snapshot`` and an unordered ``all``/``last``)."""

    def collect(self, new: Rows, old: Rows) -> None:
        self.push(list(new), list(old))

    resets_unidirectional = False

    def rows(self) -> Emit:
        new: Rows = []
        old: Rows = []
        rs = self.rs
        # fully aggregated grouped: Esper builds each update's rows over one hash map of
        # its groups, emptied between the updates of one output (its grown table stays
        # grown), with no shortcut for one event in and one out
        rs.hash_pairs = True
        rs.hash_capacity = INITIAL_CAPACITY
        try:
            for _, n, o in self.buffer:
                if self.fresh:
                    rs.clear_aggregates()
                rn, ro = rs.process(n, o)
                new.extend(rn)
                old.extend(ro)
        finally:
            rs.hash_pairs = rs.spec.join
            rs.hash_capacity = None
        return new, old


class SimpleLast(LastRow):
    """``last`` without aggregation: the last event of each stream that passed having is
    kept and its row built at output time (Esper's simple output-last helper)."""

    def collect(self, new: Rows, old: Rows) -> None:
        having = self.rs.spec.having is not None
        for e in new:
            if not having or self.rs.process([e], [])[0]:
                self._keep("last_insert", [e])
        for e in old:
            if not having or self.rs.process([], [e])[1]:
                self._keep("last_remove", [e])

    def rows(self) -> Emit:
        new, old = super().rows()
        return self.rs.process(new, old)


class AllRow(Strategy):
    """``all`` fully aggregated: the rows of every update; a stream none of whose rows
    passed having in the interval posts the current row instead (Esper RowForAll
    output-all helper, having applied)."""

    resets_unidirectional = False

    def rows(self) -> Emit:
        new, old = super().rows()
        if not new:
            new = self.rs.current_rows()
        if not old and self.irstream:
            old = self.rs.current_rows(False)
        return new, old


class _Groups(Strategy):
    """A record per group touched in the interval, ``[seq, ...]`` (one key per group)."""

    resets_unidirectional = False

    def load(self) -> None:
        super().load()
        self.quiet_many = _quiet_many(self)
        self.touched: dict[str, list] = {k[1]: v for k, v in self.state.items()
                                         if isinstance(k, tuple) and k and k[0] == "group"}

    def touch(self, key: str, value: list) -> None:
        self.touched[key] = value
        self.state.put(("group", key), value)

    def in_touch_order(self) -> list[str]:
        return sorted(self.touched, key=lambda k: self.touched[k][0])

    def holds(self) -> bool:
        return bool(self.touched)

    def clear(self) -> None:
        for k in self.touched:
            self.state.delete(("group", k))
        self.touched = {}


class GroupedLast(_Groups):
    """``last``, fully aggregated grouped: each group updated in the interval, its
    current row, and its row before the interval as the remove stream."""

    def collect(self, new: Rows, old: Rows) -> None:
        if self.rs.quiet and (self.quiet_many or (len(new) == 1 and not old)):
            # no remove stream: a group's record is [seq, []]
            touched = self.touched
            for k in self.rs.touch_groups(new, old):
                if k not in touched:
                    self.touch(k, [self.trigger.seq(), []])
            return
        g = self.rs.grouped(new, old)
        for k, before in g.before.items():
            if k not in self.touched:
                self.touch(k, [self.trigger.seq(), before])

    def rows(self) -> Emit:
        new: Rows = []
        old: Rows = []
        keys = self.in_touch_order()
        for k in keys:
            old.extend(self.touched[k][1])
        if self.rs.spec.order_by and len(keys) > 1:
            # Esper's buffered 'last' (with order by) keeps the groups of the interval in a
            # hash map: its rows come in hash order before sorting (ties keep that order);
            # the remove rows, built as each group is first seen, in that order
            keys = self.rs.hash_order(keys)
        new.extend(self.rs.groups_rows(keys))
        return new, old


class GroupedAll(_Groups):
    """``all``, fully aggregated grouped: every group an event has entered, with its row
    before the interval as the remove stream.  A group only events leaving reached (a
    where clause let them out but not in) posts its remove-stream row in the interval it
    is touched and never an insert-stream row: Esper's output-all helper keeps the groups
    of the insert stream."""

    def load(self) -> None:
        super().load()
        self.entered = _load_entered(self.state, self.rs)
        self.pre: dict[str, Rows] = {k[1]: v for k, v in self.state.items()
                                     if isinstance(k, tuple) and k and k[0] == "pre"}
        """The remove-stream rows of the groups entered before the interval, as they stood
        at its first update (``_collect``)."""

    def collect(self, new: Rows, old: Rows) -> None:
        if self.rs.quiet and not old and (self.quiet_many or len(new) == 1):
            # no remove stream: a group's record is only ever [seq, []]; every group
            # touched is one an event entered
            touched = self.touched
            keys = list(self.rs.touch_groups(new, old))
            _enter(self.state, self.entered, keys)
            for k in keys:
                if k not in touched:
                    self.touch(k, [self.trigger.seq(), []])
            return
        if self.irstream and self.rs.spec.having is not None and len(new) + len(old) > 1:
            # the remove-stream row is tried before each event's aggregation (Esper's
            # output-all helper), so the next event of the update may find one passing
            for r in new:
                self._collect([r], [])
            for r in old:
                self._collect([], [r])
            return
        self._collect(new, old)

    def _collect(self, new: Rows, old: Rows) -> None:
        g = self.rs.grouped(new, old)
        if self.irstream and not self.touched and not self.pre:
            # the interval's first update: the groups entered so far post the rows they
            # hold now first (``_place``), built now: a subquery or variable they read
            # is as it is at this update (Esper's output-all helper builds them once)
            self.state.put("entered_before", len(self.entered))
            for k in self.entered:
                if k not in g.before:
                    rows = self.pre[k] = self.rs.group_rows(k)
                    self.state.put(("pre", k), rows)
        _enter(self.state, self.entered, g.keys_new)
        for k, before in g.before.items():
            rec = self.touched.get(k)
            if rec is None:
                before = self.pre.pop(k, before)
                self.state.delete(("pre", k))
                self.touch(k, [self.trigger.seq(), before, self._place(k, before, True)])
            elif not rec[1] and before:
                # Esper's output-all helper keeps trying a group's remove-stream row until
                # one passes having (RowPerGroupOutputAllHelperImpl)
                self.touch(k, [rec[0], before, self._place(k, before, False)])

    def _place(self, key: str, before: Rows, first: bool) -> list[int] | None:
        """Where a group's remove-stream row goes in the output: Esper's output-all helper
        takes, at the interval's first update, the rows of the groups entered before it
        that pass having, in the order they entered; then each other group's row as it
        first passes, in that order."""
        if not before or not self.irstream:
            return None
        n = self.entered.get(key)
        before_interval = self.state.get("entered_before")
        if before_interval is None:
            before_interval = len(self.entered)  # a state kept mid-interval without it
        if first and n is not None and n < before_interval:
            return [0, n]
        return [1, self.trigger.seq()]

    def rows(self) -> Emit:
        new: Rows = []
        old: Rows = []
        entered = self.entered
        for k in entered:
            new.extend(self.rs.group_rows(k))
        if not self.irstream:
            return new, old
        placed: list[tuple[list[int], Rows]] = []
        for k in self.rs.group_keys():
            rec = self.touched.get(k)
            if rec is None:
                if k in entered:
                    rows = self.pre[k] if k in self.pre else self.rs.group_rows(k)
                    placed.append(([0, entered[k]], rows))
            elif rec[1]:
                at = rec[2] if len(rec) > 2 and rec[2] is not None else [0, entered.get(k, 0)]
                placed.append((at, rec[1]))
        placed.sort(key=lambda p: p[0])
        for _, rows in placed:
            old.extend(rows)
        return new, old

    def standing(self) -> bool:
        return any(k in self.entered for k in self.rs.group_keys())

    def holds(self) -> bool:
        return bool(self.touched or self.pre)

    def clear(self) -> None:
        super().clear()
        for k in self.pre:
            self.state.delete(("pre", k))
        self.pre = {}


class GroupedRowsLast(_Groups):
    """``last``, aggregated grouped (a row per event): each group's latest event row,
    either stream, in the order the interval first touched the groups."""

    def collect(self, new: Rows, old: Rows) -> None:
        g = self.rs.grouped(new, old)
        for k, rows in zip(g.keys_new, g.rows_new or [[]] * len(g.keys_new)):
            rec = self.touched.get(k) or [self.trigger.seq(), [], []]
            if rows:
                rec[1] = rows[-1:]
            self.touch(k, rec)
        for k, rows in zip(g.keys_old, g.rows_old or [[]] * len(g.keys_old)):
            rec = self.touched.get(k) or [self.trigger.seq(), [], []]
            if rows:
                rec[2] = rows[-1:]
            self.touch(k, rec)

    def rows(self) -> Emit:
        new: Rows = []
        old: Rows = []
        for k in self.in_touch_order():
            new.extend(self.touched[k][1])
            old.extend(self.touched[k][2])
        return new, old


class GroupedRowsAll(Strategy):
    """``all``, aggregated grouped (Esper's output-all helper of that result set): the
    rows of the interval's events in arrival order, after each update's rows a row for
    each group events left in it (in hash order), then at output a row for every group
    with no event entering or leaving in the interval.  A group's row reads its last
    entered event with the current aggregates; a group no event ever entered (a where
    clause let its events out but not in) has none."""

    resets_unidirectional = False

    def load(self) -> None:
        super().load()
        self.entered = _load_entered(self.state, self.rs)

    def collect(self, new: Rows, old: Rows) -> None:
        rs = self.rs
        g = rs.grouped(new, old)
        _enter(self.state, self.entered, g.keys_new)
        rows_new = g.rows_new or [[] for _ in g.keys_new]
        rows_old = g.rows_old or [[] for _ in g.keys_old]
        left = list(dict.fromkeys(g.keys_old))
        if len(left) > 1:
            left = rs.hash_order(left, fresh=True)
        groups = [[k, rs.group_rows(k)] for k in left if k in self.entered]
        self.push([[k, r] for k, r in zip(g.keys_new, rows_new)] + groups,
                  [[k, r] for k, r in zip(g.keys_old, rows_old)])

    def rows(self) -> Emit:
        seen: set[str] = set()
        new: Rows = []
        old: Rows = []
        for _, n, o in self.buffer:
            for k, rows in n:
                seen.add(k)
                new.extend(rows)
            for k, rows in o:
                seen.add(k)
                old.extend(rows)
        for k in self.entered:
            if k not in seen:
                new.extend(self.rs.group_rows(k))
        return new, old

    def standing(self) -> bool:
        return any(k in self.entered for k in self.rs.group_keys())


class First(Strategy):
    """``first`` without groups: the first update of each interval goes out at once; the
    condition only ends the interval."""

    releases = False

    def first(self, new: Rows, old: Rows, now_ms: int, after_ok: bool) -> Emit:
        if not after_ok:
            # Esper's OutputProcessViewConditionFirst returns before the result set sees
            # an update while the after clause holds it back: the aggregation never takes
            # it (Esper ref. 5.7.1.1, output after)
            return [], []
        rn, ro = self.rs.process(new, old)
        out: Emit = [], []
        b = self.trigger.book
        if not b["first_posted"]:
            if not self._relevant(rn, ro):
                # Esper's OutputProcessViewConditionFirst returns before counting such an
                # update toward the condition (nor does it start a timed one)
                return out
            b["first_posted"] = True
            out = (rn, ro)
        if self.trigger.count(len(new), len(old), now_ms):
            b["first_posted"] = False
            self.trigger.interval_ended(now_ms)
        return out

    def _relevant(self, new: Rows, old: Rows) -> bool:
        """Esper's 'relevant results' check: rows in a stream the statement posts (an
        rstream statement posts only the remove stream, so only old rows are the
        first)."""
        if self.stream_kind == "rstream":
            return bool(old)
        if not self.irstream:
            return bool(new)
        return bool(new or old)


class FirstGrouped(Strategy):
    """``first``, grouped: per group a polled condition; the group's first row passes,
    then a row passes when N of its events came (counted only while its row passes
    having), when the period since its last output elapsed, or at its next crontab
    time."""

    resets_unidirectional = False

    releases = False

    def load(self) -> None:
        super().load()
        self.marks: dict[str, list] = {}
        held: dict[int, list] = {}
        for k, v in self.state.items():
            if isinstance(k, tuple) and k and k[0] == "first":
                self.marks[k[1]] = v
            elif isinstance(k, tuple) and k and k[0] == "held":
                held[k[1]] = v
        self.held: list = [held[i] for i in sorted(held)]
        """Updates the after clause held back, each under its own state key: Esper keeps
        them in its change set and runs them through the result set, each group's first
        row passing, with the first update after the clause is satisfied
        (``OutputProcessViewConditionDefault``)."""

    def first(self, new: Rows, old: Rows, now_ms: int, after_ok: bool) -> Emit:
        if not after_ok:
            self.state.put(("held", len(self.held)), [new, old])
            self.held.append([new, old])
            return [], []
        if not self.held:
            return self._first_once(new, old, now_ms)
        # one batch: the groups' rows are built once the batch is aggregated, as Esper's
        # output-first helpers build them after the change set
        for i in range(len(self.held)):
            self.state.delete(("held", i))
        updates, self.held = [*self.held, [new, old]], []
        return self._first_once([r for n, _ in updates for r in n],
                                [r for _, o in updates for r in o], now_ms)

    def _first_once(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """One update through the groups' first conditions."""
        grouped = self.rs.spec.kind == GROUPED
        if grouped and self.rs.spec.having is None:
            return self._first_rows(new, old, now_ms)
        g = self.rs.grouped(new, old)
        out_new: Rows = []
        out_old: Rows = []
        passed: set[str] = set()
        self._count(new, old)
        events: list[tuple[str, bool, Any]]
        if grouped:
            events = [(k, True, g.after.get(k, [])) for k in g.keys_new]
            events += [(k, False, g.after.get(k, [])) for k in g.keys_old]
        else:
            rows_new = g.rows_new or [[] for _ in g.keys_new]
            events = [(k, True, r) for k, r in zip(g.keys_new, rows_new)]
            rows_old = g.rows_old or [[] for _ in g.keys_old]
            events += [(k, False, r) for k, r in zip(g.keys_old, rows_old)]
        having = self.irstream and self.rs.spec.having is not None
        for k, is_new, rows in events:
            if not rows:
                continue  # the row fails having: the event does not count (Esper)
            if not self._passes(k, is_new, now_ms):
                continue
            if grouped:
                if k in passed:
                    continue
                passed.add(k)
                out_new.extend(rows)
                # Esper's row-per-group 'first' with having builds the remove row from
                # the group's state after the update, as the insert row
                out_old.extend(rows if having else g.before.get(k, []))
            else:
                # Esper's aggregated-grouped 'first' posts the rows of leaving events on
                # the insert stream too (output by statement kind, appendix samples)
                out_new.extend(rows)
        return out_new, out_old

    def _first_rows(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Fully aggregated grouped without having: each event is tested as it is
        aggregated, so a passing group's remove row holds the events aggregated before it
        in the same update (Esper's row-per-group output-first helper)."""
        self._count(new, old)
        g = self.rs.grouped(new, old, lambda k, is_new: self._passes(k, is_new, now_ms))
        if not self.irstream:
            return g.new, []
        return g.new, [r for rows in g.passed.values() for r in rows]

    def _count(self, new: Rows, old: Rows) -> None:
        b = self.trigger.book
        b["count_insert"] += len(new)
        b["count_remove"] += len(old)
        b["count_insert_total"] += len(new)
        b["count_remove_total"] += len(old)

    def _passes(self, key: str, is_new: bool, now_ms: int) -> bool:
        mark = self.marks.get(key)
        if mark is None:
            mark = [True, 0, 0, None]
        passes = self.trigger.group_passes(mark, is_new, now_ms)
        self.marks[key] = mark
        self.state.put(("first", key), mark)
        return passes


def _load_entered(state: StateNamespace, rs: ResultSet) -> dict[str, int]:
    """The groups an event has entered (``output all``), in the order they first did; a
    state kept before they were recorded counts every group it knows."""
    if not state.get("entered_kept"):
        return {k: i for i, k in enumerate(rs.group_keys())}
    found = [(k[1], v) for k, v in state.items()
             if isinstance(k, tuple) and k and k[0] == "entered"]
    # a record kept without its number (True) keeps the result set's order of the group
    found.sort(key=lambda kv: (kv[1] is True, kv[1] if kv[1] is not True
                               else rs.group_seq(kv[0])))
    return {k: i for i, (k, _) in enumerate(found)}


def _enter(state: StateNamespace, entered: dict[str, int], keys: list[str]) -> None:
    """Record the groups of an update's entering events, each with its place: Esper's
    output-all helpers list groups in the order an entering event first reached them (a
    linked map of the insert stream's groups), whatever the remove stream touched before."""
    if not state.get("entered_kept"):
        state.put("entered_kept", True)
    for k in keys:
        if k not in entered:
            n = len(entered)
            entered[k] = n
            state.put(("entered", k), n)


def make_strategy(kind: str, rs_kind: str) -> type[Strategy]:
    """The strategy of an output kind for a result-set kind."""
    grouped = rs_kind in (GROUPED, GROUPED_ROWS)
    if kind == "snapshot":
        return Snapshot
    if kind == "first":
        return FirstGrouped if grouped else First
    if kind == "default" or (kind == "all" and rs_kind == SIMPLE):
        return Buffered
    if kind == "last" and rs_kind == SIMPLE:
        return SimpleLast
    if kind == "last":
        if rs_kind == GROUPED:
            return GroupedLast
        return GroupedRowsLast if rs_kind == GROUPED_ROWS else LastRow
    if kind == "all" and grouped:
        return GroupedAll if rs_kind == GROUPED else GroupedRowsAll
    if kind == "all" and rs_kind == AGG_ALL:
        return AllRow
    return Strategy

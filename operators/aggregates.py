"""Aggregation functions maintained incrementally from insert and remove streams.

Each aggregator is a stateless object; its state is JSON-shaped data so it can live in a
state store.  ``enter`` adds a value, ``leave`` takes one back out (Esper ref. 2.5: remove-stream
events leave the aggregation), ``result`` reads the current value.  Both return the new
state, which callers store back: container states are mutated in place, a counter's state
is the number itself (one object less per group on the hot path).
"""

from __future__ import annotations

import math
import zlib
from bisect import bisect_left, insort
from collections.abc import Callable
from typing import Any

import orjson

from operators.bags import ExtremeBag, SortedBag
from operators.json_text import scalar_text


class Aggregator:
    """Base of all aggregators; ``name`` is the EPL function name."""

    name = ""

    def initial(self) -> Any:
        raise NotImplementedError

    def enter(self, state: Any, value: Any) -> Any:
        raise NotImplementedError

    def leave(self, state: Any, value: Any) -> Any:
        raise NotImplementedError

    def result(self, state: Any) -> Any:
        raise NotImplementedError


class CountStar(Aggregator):
    """count(*): events in the window, nulls included (the state is the count itself)."""

    name = "count"

    def initial(self) -> Any:
        return 0

    def enter(self, state: Any, value: Any) -> Any:
        return state + 1

    def leave(self, state: Any, value: Any) -> Any:
        # Esper's counters never go below zero: a row leaving that never entered (a where
        # clause whose subquery or variable changed meanwhile) takes nothing away
        return state - 1 if state > 0 else state

    def result(self, state: Any) -> Any:
        return state


class Count(CountStar):
    """count(x): non-null values of x."""

    def enter(self, state: Any, value: Any) -> Any:
        return state if value is None else state + 1

    def leave(self, state: Any, value: Any) -> Any:
        return state if value is None or state <= 0 else state - 1


class TableCountStar(CountStar):
    """count(*) kept in a table column: a row deleted from the table and made again by an
    event leaving counts below zero (Esper's table leave decrements without the floor)."""

    def leave(self, state: Any, value: Any) -> Any:
        return state - 1


class TableCount(Count):
    """count(x) kept in a table column (see ``TableCountStar``)."""

    def leave(self, state: Any, value: Any) -> Any:
        return state if value is None else state - 1


class _Wrapping(Aggregator):
    """An aggregator that keeps another's state and answers through it."""

    def __init__(self, inner: Aggregator) -> None:
        self.inner = inner
        self.name = inner.name

    def initial(self) -> Any:
        return self.inner.initial()

    def enter(self, state: Any, value: Any) -> Any:
        return self.inner.enter(state, value)

    def leave(self, state: Any, value: Any) -> Any:
        return self.inner.leave(state, value)

    def result(self, state: Any) -> Any:
        return self.inner.result(state)


class EmptyAsNaN(_Wrapping):
    """An aggregate that gives NaN where it would give null for an empty window (Apama's
    ``min``, ``max`` and ``avg`` over floats)."""

    def result(self, state: Any) -> Any:
        value = self.inner.result(state)
        return float("nan") if value is None else value


def table_aggregator(agg: Aggregator) -> Aggregator:
    """The aggregator an ``into table`` statement keeps a column with."""
    t = type(agg)
    if t is CountStar:
        return TableCountStar()
    if t is Count:
        return TableCount()
    return agg


class Filtered(_Wrapping):
    """An aggregator taking only the values whose event passed the aggregation's filter
    (Esper ref. 10.2: ``count(*, v > 2)``, ``sum(v, filter: k = 'a')``), for callers that
    hand an aggregator a value and no event (``#expr`` windows, match_recognize measures):
    its value is the pair ``(passed, value)`` that ``fold_filter``'s value expression
    gives.  The state is the inner aggregator's, unchanged."""

    def enter(self, state: Any, value: Any) -> Any:
        return self.inner.enter(state, value[1]) if value[0] else state

    def leave(self, state: Any, value: Any) -> Any:
        return self.inner.leave(state, value[1]) if value[0] else state


def fold_filter(agg: Aggregator, value: Callable[[Any, Any], Any] | None,
                filt: Callable[[Any, Any], Any] | None
                ) -> tuple[Aggregator, Callable[[Any, Any], Any] | None]:
    """``(aggregator, value expression)`` with the filter folded in (``Filtered``), for
    callers that take no filter; as given when there is none.  A null filter value is
    false (Esper skips the event)."""
    if filt is None:
        return agg, value
    if value is None:
        def passed_row(r: Any, c: Any) -> Any:
            return (bool(filt(r, c)), r)
        return Filtered(agg), passed_row

    def passed_value(r: Any, c: Any) -> Any:
        return (bool(filt(r, c)), value(r, c))
    return Filtered(agg), passed_value


def _dkey(value: Any) -> str:
    return scalar_text(value, sort_keys=True)


class Distinct(Aggregator):
    """Wraps an aggregator so that each distinct value counts once (``count(distinct x)``)."""

    def __init__(self, inner: Aggregator) -> None:
        self.inner = inner
        self.name = inner.name

    def initial(self) -> Any:
        return [{}, self.inner.initial()]

    def enter(self, state: Any, value: Any) -> Any:
        if value is None:
            return state
        k = _dkey(value)
        seen = state[0]
        n = seen.get(k, 0)
        seen[k] = n + 1
        if n == 0:
            state[1] = self.inner.enter(state[1], value)
        return state

    def leave(self, state: Any, value: Any) -> Any:
        if value is None:
            return state
        k = _dkey(value)
        seen = state[0]
        n = seen.get(k, 0)
        if n <= 1:
            seen.pop(k, None)
            # a value never entered leaves the aggregate too: Esper's RefCountedSet
            # answers "removed" for a key it does not hold (an output first held back
            # by after never aggregated the events its window later removes)
            state[1] = self.inner.leave(state[1], value)
        else:
            seen[k] = n - 1
        return state

    def result(self, state: Any) -> Any:
        return self.inner.result(state[1])


class Sum(Aggregator):
    """sum(x): null when no non-null value is present (Esper)."""

    name = "sum"

    def __init__(self, empty: Any = None) -> None:
        self.empty = empty

    def initial(self) -> Any:
        return [0, 0]

    def enter(self, state: Any, value: Any) -> Any:
        if value is not None:
            state[0] += value
            state[1] += 1
        return state

    def leave(self, state: Any, value: Any) -> Any:
        if value is not None:
            if state[1] <= 1:
                # the last value leaving empties the sum, whatever the value (Esper: a
                # row leaving that never entered cannot drive it below empty)
                state[0] = 0
                state[1] = 0
            else:
                state[0] -= value
                state[1] -= 1
        return state

    def result(self, state: Any) -> Any:
        return state[0] if state[1] else self.empty


class Avg(Sum):
    """avg(x): mean of the non-null values, null when none."""

    name = "avg"

    def result(self, state: Any) -> Any:
        return state[0] / state[1] if state[1] else None


class _Sorted(Aggregator):
    """Values kept so that extremes and medians survive removal: a plain sorted list
    while small (C-speed inserts), a bag (``bag``) from ``BAG_FROM`` values on, so that
    the cost per value stays O(log n) in a large window."""

    def initial(self) -> Any:
        return []

    def bag(self, values: Any) -> Any:
        """The large-window state holding ``values``."""
        return SortedBag(values)

    def enter(self, state: Any, value: Any) -> Any:
        if value is not None:
            if type(state) is list:
                if len(state) < BAG_FROM:
                    insort(state, value)
                    return state
                state = self.bag(state)
            state.add(value)
            if state.changes is not None:
                state.changes.add(value)
        return state

    def leave(self, state: Any, value: Any) -> Any:
        if value is not None:
            if type(state) is list:
                i = bisect_left(state, value)
                if i < len(state) and state[i] == value:
                    del state[i]
                return state
            state.discard(value)
            if state.changes is not None:
                state.changes.add(value)
        return state


BAG_FROM = 1024
"""Size at which a sorted list becomes a ``SortedBag`` (and stays one)."""

SORTED = (_Sorted,)
"""Aggregators whose large state is a bag (stored per value by ``BagNamespace``)."""


class Min(_Sorted):
    name = "min"

    def bag(self, values: Any) -> Any:
        return ExtremeBag(values)

    def result(self, state: Any) -> Any:
        if type(state) is list:
            return state[0] if state else None
        return state.extreme()


class Max(_Sorted):
    name = "max"

    def bag(self, values: Any) -> Any:
        return ExtremeBag(values, greatest=True)

    def result(self, state: Any) -> Any:
        if type(state) is list:
            return state[-1] if state else None
        return state.extreme()


class Median(_Sorted):
    name = "median"

    def result(self, state: Any) -> Any:
        n = len(state)
        if n == 0:
            return None
        mid = n // 2
        return float(state[mid]) if n % 2 else (state[mid - 1] + state[mid]) / 2.0


class Stddev(Aggregator):
    """Sample standard deviation; null for fewer than two values."""

    name = "stddev"

    def initial(self) -> Any:
        return [0, 0.0, 0.0]

    def enter(self, state: Any, value: Any) -> Any:
        if value is not None:
            state[0] += 1
            state[1] += value
            state[2] += value * value
        return state

    def leave(self, state: Any, value: Any) -> Any:
        if value is not None:
            if state[0] <= 1:
                state[0] = 0
                state[1] = state[2] = 0.0
            else:
                state[0] -= 1
                state[1] -= value
                state[2] -= value * value
        return state

    def result(self, state: Any) -> Any:
        n, s, sq = state
        if n < 2:
            return None
        var = (sq - s * s / n) / (n - 1)
        return math.sqrt(var) if var > 0 else 0.0


class Avedev(_Sorted):
    """Mean absolute deviation from the mean."""

    name = "avedev"

    def result(self, state: Any) -> Any:
        if not state:
            return None
        mean = sum(state) / len(state)
        return sum(abs(v - mean) for v in state) / len(state)


class _Ordered(Aggregator):
    """Values in the order their events entered, for first/last/nth/window.

    A value leaves with its event: ``leave_row`` takes out the entry of that event (a
    fingerprint of the row tells equal values of different events apart), so a window
    that evicts out of arrival order (``#groupwin``, ``#unique``) removes the right one;
    ``leave`` (no row at hand) takes the oldest equal value.  State: ``{"v": values,
    "f": fingerprints}`` (a plain list of values is read as values without them).
    """

    def __init__(self, by_event: bool = False) -> None:
        self.by_event = by_event
        """The window evicts out of arrival order: entries carry their event's
        fingerprint (else a plain list of values, the oldest equal value leaving)."""

    def initial(self) -> Any:
        return {"v": [], "f": []} if self.by_event else []

    def values(self, state: Any) -> list:
        return state if type(state) is list else state["v"]

    def enter(self, state: Any, value: Any) -> Any:
        if type(state) is list:
            state.append(value)
            return state
        return self.enter_row(state, value, None)

    def leave(self, state: Any, value: Any) -> Any:
        if type(state) is list:
            try:
                state.remove(value)
            except ValueError:
                pass
            return state
        return self.leave_row(state, value, None)

    def enter_row(self, state: Any, value: Any, row: Any) -> Any:
        if type(state) is list:
            state = {"v": state, "f": [None] * len(state)}
        state["v"].append(value)
        state["f"].append(None if row is None else fingerprint(row))
        return state

    def leave_row(self, state: Any, value: Any, row: Any) -> Any:
        if type(state) is list:
            state = {"v": state, "f": [None] * len(state)}
        values, prints = state["v"], state["f"]
        at = -1
        if row is not None:
            fp = fingerprint(row)
            at = next((i for i, f in enumerate(prints) if f == fp and values[i] == value), -1)
            if at < 0:
                # an event that never entered (held back by 'output after') leaves nothing,
                # as Esper removes by event; an entry without a print takes it (older state)
                at = next((i for i, v in enumerate(values)
                           if v == value and prints[i] is None), -1)
        else:  # no event at hand: the oldest equal value
            at = next((i for i, v in enumerate(values) if v == value), -1)
        if at >= 0:
            del values[at]
            del prints[at]
        return state


def fingerprint(row: Any) -> int:
    """A stable content hash of a row (equal in every process, unlike ``hash``)."""
    try:
        return zlib.crc32(orjson.dumps(row, option=orjson.OPT_SORT_KEYS))
    except TypeError:
        return zlib.crc32(repr(row).encode())


class First(_Ordered):
    """first(x) / first(x, i): the value of the i-th oldest event (0 = the oldest)."""

    name = "first"

    def __init__(self, by_event: bool = False, index: int = 0) -> None:
        super().__init__(by_event)
        self.index = index

    def result(self, state: Any) -> Any:
        v = self.values(state)
        return v[self.index] if self.index < len(v) else None


class Last(_Ordered):
    """last(x) / last(x, i): the value of the i-th newest event (0 = the newest)."""

    name = "last"

    def __init__(self, by_event: bool = False, index: int = 0) -> None:
        super().__init__(by_event)
        self.index = index

    def result(self, state: Any) -> Any:
        v = self.values(state)
        return v[-1 - self.index] if self.index < len(v) else None


class Window(_Ordered):
    """window(*) / window(x): every value currently in the window, oldest first."""

    name = "window"

    def result(self, state: Any) -> Any:
        v = self.values(state)
        return list(v) if v else None


class Nth(_Ordered):
    """nth(x, n): the value n values before the newest (0 = newest).

    Null values neither enter nor leave: like Esper's other value aggregations, nth
    counts only non-null values, so over ``[2.5, null]`` ``nth(x, 1)`` is null (first,
    last and window keep nulls: they read events)."""

    name = "nth"

    def __init__(self, n: int, by_event: bool = False) -> None:
        super().__init__(by_event)
        self.n = n

    def enter(self, state: Any, value: Any) -> Any:
        return state if value is None else super().enter(state, value)

    def leave(self, state: Any, value: Any) -> Any:
        return state if value is None else super().leave(state, value)

    def enter_row(self, state: Any, value: Any, row: Any) -> Any:
        return state if value is None else super().enter_row(state, value, row)

    def leave_row(self, state: Any, value: Any, row: Any) -> Any:
        return state if value is None else super().leave_row(state, value, row)

    def result(self, state: Any) -> Any:
        v = self.values(state)
        return v[-1 - self.n] if self.n < len(v) else None


class Leaving(Aggregator):
    """leaving(): true once any event has left the window."""

    name = "leaving"

    def initial(self) -> Any:
        return [False]

    def enter(self, state: Any, value: Any) -> Any:
        return state

    def leave(self, state: Any, value: Any) -> Any:
        state[0] = True
        return state

    def result(self, state: Any) -> Any:
        return state[0]


class CountEver(CountStar):
    """countever(*): events ever entered; removal does not count down."""

    name = "countever"

    def leave(self, state: Any, value: Any) -> Any:
        return state


class CountEverValues(CountEver):
    """countever(x): non-null values of x ever entered (Esper ref. 10.2.4 countever: with
    an expression it ignores nulls, as count(x) does; removal does not count down)."""

    def enter(self, state: Any, value: Any) -> Any:
        return state if value is None else state + 1


AGGREGATE_NAMES = frozenset(
    {"count", "sum", "avg", "min", "max", "median", "stddev", "avedev", "first", "last",
     "window", "nth", "leaving", "countever"}
)


def make_aggregator(name: str, *, star: bool = False, distinct: bool = False,
                    extra: tuple[Any, ...] = (), by_event: bool = False) -> Aggregator:
    """The aggregator for an EPL aggregate call; ValueError for an unknown name.
    ``by_event``: rows may leave out of arrival order (see ``_Ordered``)."""
    lname = name.lower()
    agg: Aggregator
    if lname == "count":
        agg = CountStar() if star else Count()
    elif lname == "countever":
        agg = CountEver() if star else CountEverValues()
    elif lname == "sum":
        agg = Sum()
    elif lname == "avg":
        agg = Avg()
    elif lname == "min":
        agg = Min()
    elif lname == "max":
        agg = Max()
    elif lname == "median":
        agg = Median()
    elif lname == "stddev":
        agg = Stddev()
    elif lname == "avedev":
        agg = Avedev()
    elif lname == "first":
        agg = First(by_event, int(extra[0]) if extra else 0)
    elif lname == "last":
        agg = Last(by_event, int(extra[0]) if extra else 0)
    elif lname == "window":
        agg = Window(by_event)
    elif lname == "nth":
        agg = Nth(int(extra[0]) if extra else 0, by_event)
    elif lname == "leaving":
        agg = Leaving()
    else:
        raise ValueError(f"unknown aggregation function '{name}'")
    return Distinct(agg) if distinct else agg


# -- per-row updaters used by the result sets' hot path ---------------------------------

RowUpdater = Callable[[list, Any, Any], None]
"""``update(states, row, ctx)``: applies one row to a group's aggregation states (a list,
one state per aggregate).  Updaters hold no partition state, so a statement's partitions
share them."""


def row_updater(agg: Aggregator, i: int, value: Callable[[Any, Any], Any] | None,
                filt: Callable[[Any, Any], Any] | None, entering: bool) -> RowUpdater:
    """What ``states[i] = enter/leave(states[i], value(row))`` does for one row, as one call.

    The counters and sums most statements use are inlined (they mutate their state in
    place, as their ``enter``/``leave`` do); any other aggregator, and any filtered one,
    goes through its own methods.
    """
    t = type(agg)
    if filt is None:
        if value is None and (t is CountStar or t is CountEver):
            if not entering and t is CountEver:
                def keep(states: list, row: Any, ctx: Any) -> None:
                    return None
                return keep
            if entering:
                def count_rows(states: list, row: Any, ctx: Any) -> None:
                    states[i] += 1
                count_rows.counts = (i, 1)  # type: ignore[attr-defined]
                return count_rows

            def uncount_rows(states: list, row: Any, ctx: Any) -> None:
                if states[i] > 0:  # never below zero (CountStar.leave)
                    states[i] -= 1
            uncount_rows.counts = (i, -1)  # type: ignore[attr-defined]
            return uncount_rows
        if value is not None and t is Count:
            if entering:
                def count_values(states: list, row: Any, ctx: Any) -> None:
                    if value(row, ctx) is not None:
                        states[i] += 1
                return count_values

            def uncount_values(states: list, row: Any, ctx: Any) -> None:
                if states[i] > 0 and value(row, ctx) is not None:
                    states[i] -= 1
            return uncount_values
        if value is not None and (t is Sum or t is Avg):
            if entering:
                def sum_enter(states: list, row: Any, ctx: Any) -> None:
                    v = value(row, ctx)
                    if v is not None:
                        s = states[i]
                        s[0] += v
                        s[1] += 1
                sum_enter.sums = (i, value, True)  # type: ignore[attr-defined]
                return sum_enter

            def sum_leave(states: list, row: Any, ctx: Any) -> None:
                v = value(row, ctx)
                if v is not None:
                    s = states[i]
                    if s[1] <= 1:  # the last value leaving empties it (Sum.leave)
                        s[0] = 0
                        s[1] = 0
                    else:
                        s[0] -= v
                        s[1] -= 1
            sum_leave.sums = (i, value, False)  # type: ignore[attr-defined]
            return sum_leave
    if isinstance(agg, _Ordered) and agg.by_event:
        by_row = agg.enter_row if entering else agg.leave_row

        def ordered(states: list, row: Any, ctx: Any) -> None:
            if filt is not None and not filt(row, ctx):
                return
            states[i] = by_row(states[i], value(row, ctx) if value is not None else row, row)
        return ordered
    fn = agg.enter if entering else agg.leave

    def generic(states: list, row: Any, ctx: Any) -> None:
        if filt is not None and not filt(row, ctx):
            return
        states[i] = fn(states[i], value(row, ctx) if value is not None else row)
    return generic


def fuse_updaters(updaters: list[RowUpdater]) -> RowUpdater:
    """One updater applying each of ``updaters`` in order (one call per row); a count(*)
    and a sum or avg, the commonest pair, as one function with the two inlined."""
    if len(updaters) == 1:
        return updaters[0]
    if len(updaters) == 2:
        fused = _count_and_sum(updaters)
        if fused is not None:
            return fused
        a, b = updaters

        def both(states: list, row: Any, ctx: Any) -> None:
            a(states, row, ctx)
            b(states, row, ctx)
        return both
    ups = tuple(updaters)

    def each(states: list, row: Any, ctx: Any) -> None:
        for u in ups:
            u(states, row, ctx)
    return each


def _count_and_sum(updaters: list[RowUpdater]) -> RowUpdater | None:
    """``count_rows`` and ``sum_enter`` or ``sum_leave`` of ``row_updater`` in one
    function (either order: the two touch different states), or None for another pair."""
    a, b = updaters
    if hasattr(b, "counts"):
        a, b = b, a
    counts = getattr(a, "counts", None)
    sums = getattr(b, "sums", None)
    if counts is None or sums is None:
        return None
    ic, step = counts
    isum, value, entering = sums
    prop = getattr(value, "property_name", None)
    if prop is not None:
        return _count_and_sum_property(ic, step, isum, prop, entering)
    if entering:
        def count_sum_enter(states: list, row: Any, ctx: Any) -> None:
            states[ic] += step
            v = value(row, ctx)
            if v is not None:
                s = states[isum]
                s[0] += v
                s[1] += 1
        return count_sum_enter

    def count_sum_leave(states: list, row: Any, ctx: Any) -> None:
        if states[ic] > 0:  # never below zero (CountStar.leave)
            states[ic] -= 1
        v = value(row, ctx)
        if v is not None:
            s = states[isum]
            if s[1] <= 1:  # the last value leaving empties it (Sum.leave)
                s[0] = 0
                s[1] = 0
            else:
                s[0] -= v
                s[1] -= 1
    return count_sum_leave


def _count_and_sum_property(ic: int, step: int, isum: int, prop: str,
                            entering: bool) -> RowUpdater:
    """``_count_and_sum`` of a sum over an event property, read here (one call less)."""
    if entering:
        def count_sum_enter(states: list, row: Any, ctx: Any) -> None:
            states[ic] += step
            v = row.get(prop)
            if v is not None:
                s = states[isum]
                s[0] += v
                s[1] += 1
        count_sum_enter.count_sum = (ic, step, isum, prop)  # type: ignore[attr-defined]
        return count_sum_enter

    def count_sum_leave(states: list, row: Any, ctx: Any) -> None:
        if states[ic] > 0:  # never below zero (CountStar.leave)
            states[ic] -= 1
        v = row.get(prop)
        if v is not None:
            s = states[isum]
            if s[1] <= 1:  # the last value leaving empties it (Sum.leave)
                s[0] = 0
                s[1] = 0
            else:
                s[0] -= v
                s[1] -= 1
    count_sum_leave.count_sum = (ic, step, isum, prop)  # type: ignore[attr-defined]
    return count_sum_leave


RowSwapper = Callable[[list, Any, Any, Any], None]
"""``swap(states, new, old, ctx)``: ``new`` enters, then ``old`` leaves (a length window's
update once it is full), as one call."""


def swap_updater(enter: RowUpdater, leave: RowUpdater) -> RowSwapper:
    """``enter(states, new, ctx)`` then ``leave(states, old, ctx)`` as one function; for a
    count(*) and a sum over a property the two inlined: the count is unchanged and the
    sum takes the same additions and subtractions in the same order."""
    a = getattr(enter, "count_sum", None)
    b = getattr(leave, "count_sum", None)
    if a is None or b is None or a[0] != b[0] or a[2:] != b[2:] or a[1] != -b[1]:
        def swap(states: list, new: Any, old: Any, ctx: Any) -> None:
            enter(states, new, ctx)
            leave(states, old, ctx)
        return swap
    isum, prop = a[2], a[3]

    def count_sum_swap(states: list, new: Any, old: Any, ctx: Any) -> None:
        s = states[isum]
        v = new.get(prop)
        if v is not None:
            s[0] += v
            s[1] += 1
        v = old.get(prop)
        if v is not None:
            if s[1] <= 1:  # the last value leaving empties it (Sum.leave)
                s[0] = 0
                s[1] = 0
            else:
                s[0] -= v
                s[1] -= 1
    return count_sum_swap


def results_reader(aggs: list[Aggregator]) -> Callable[[list], list]:
    """A function giving every aggregate's current value from a group's states."""
    fns = tuple(a.result for a in aggs)
    kinds = tuple(type(a) for a in aggs)
    if kinds in ((CountStar, Sum), (Count, Sum)) and aggs[1].empty is None:  # type: ignore[attr-defined]
        def count_sum(states: list) -> list:
            s = states[1]
            return [states[0], s[0] if s[1] else None]
        return count_sum
    if kinds in ((Sum, CountStar), (Sum, Count)) and aggs[0].empty is None:  # type: ignore[attr-defined]
        def sum_count(states: list) -> list:
            s = states[0]
            return [s[0] if s[1] else None, states[1]]
        return sum_count
    if len(fns) == 1:
        f0 = fns[0]
        return lambda states: [f0(states[0])]
    if len(fns) == 2:
        f0, f1 = fns
        return lambda states: [f0(states[0]), f1(states[1])]
    return lambda states: [f(s) for f, s in zip(fns, states)]

"""Aggregation functions maintained incrementally from insert and remove streams.

Each aggregator is a stateless object; its state is JSON-shaped data so it can live in a
state store.  ``enter`` adds a value, ``leave`` takes one back out (002 §2.5: remove-stream
events leave the aggregation), ``result`` reads the current value.  States are mutated in
place and returned, so callers may keep the returned object.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left, insort
from typing import Any


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
    """count(*): events in the window, nulls included."""

    name = "count"

    def initial(self) -> Any:
        return [0]

    def enter(self, state: Any, value: Any) -> Any:
        state[0] += 1
        return state

    def leave(self, state: Any, value: Any) -> Any:
        state[0] -= 1
        return state

    def result(self, state: Any) -> Any:
        return state[0]


class Count(CountStar):
    """count(x): non-null values of x."""

    def enter(self, state: Any, value: Any) -> Any:
        if value is not None:
            state[0] += 1
        return state

    def leave(self, state: Any, value: Any) -> Any:
        if value is not None:
            state[0] -= 1
        return state


def _dkey(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


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
            if n == 1:
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
            state[0] -= value
            state[1] -= 1
            if state[1] == 0:
                state[0] = 0
        return state

    def result(self, state: Any) -> Any:
        return state[0] if state[1] else self.empty


class Avg(Sum):
    """avg(x): mean of the non-null values, null when none."""

    name = "avg"

    def result(self, state: Any) -> Any:
        return state[0] / state[1] if state[1] else None


class _Sorted(Aggregator):
    """Values kept sorted so that extremes and medians survive removal."""

    def initial(self) -> Any:
        return []

    def enter(self, state: Any, value: Any) -> Any:
        if value is not None:
            insort(state, value)
        return state

    def leave(self, state: Any, value: Any) -> Any:
        if value is not None:
            i = bisect_left(state, value)
            if i < len(state) and state[i] == value:
                del state[i]
        return state


class Min(_Sorted):
    name = "min"

    def result(self, state: Any) -> Any:
        return state[0] if state else None


class Max(_Sorted):
    name = "max"

    def result(self, state: Any) -> Any:
        return state[-1] if state else None


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
            state[0] -= 1
            state[1] -= value
            state[2] -= value * value
            if state[0] == 0:
                state[1] = state[2] = 0.0
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
    """Values in arrival order, for first/last/nth/window."""

    def initial(self) -> Any:
        return []

    def enter(self, state: Any, value: Any) -> Any:
        state.append(value)
        return state

    def leave(self, state: Any, value: Any) -> Any:
        try:
            state.remove(value)
        except ValueError:
            pass
        return state


class First(_Ordered):
    name = "first"

    def result(self, state: Any) -> Any:
        return state[0] if state else None


class Last(_Ordered):
    name = "last"

    def result(self, state: Any) -> Any:
        return state[-1] if state else None


class Window(_Ordered):
    """window(*) / window(x): every value currently in the window, oldest first."""

    name = "window"

    def result(self, state: Any) -> Any:
        return list(state) if state else None


class Nth(_Ordered):
    """nth(x, n): the value n events before the newest (0 = newest)."""

    name = "nth"

    def __init__(self, n: int) -> None:
        self.n = n

    def result(self, state: Any) -> Any:
        return state[-1 - self.n] if self.n < len(state) else None


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


AGGREGATE_NAMES = frozenset(
    {"count", "sum", "avg", "min", "max", "median", "stddev", "avedev", "first", "last",
     "window", "nth", "leaving", "countever"}
)


def make_aggregator(name: str, *, star: bool = False, distinct: bool = False,
                    extra: tuple[Any, ...] = ()) -> Aggregator:
    """The aggregator for an EPL aggregate call; ValueError for an unknown name."""
    lname = name.lower()
    agg: Aggregator
    if lname == "count":
        agg = CountStar() if star else Count()
    elif lname == "countever":
        agg = CountEver()
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
        agg = First()
    elif lname == "last":
        agg = Last()
    elif lname == "window":
        agg = Window()
    elif lname == "nth":
        agg = Nth(int(extra[0]) if extra else 0)
    elif lname == "leaving":
        agg = Leaving()
    else:
        raise ValueError(f"unknown aggregation function '{name}'")
    return Distinct(agg) if distinct else agg

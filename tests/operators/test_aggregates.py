"""Aggregators: exact values, and enter/leave symmetry under random sequences."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.aggregates import make_aggregator

NAMES = ["count", "sum", "avg", "min", "max", "median", "stddev", "avedev", "first", "last",
         "window", "leaving", "countever"]

values = st.lists(st.one_of(st.none(), st.integers(-1000, 1000)), max_size=30)


def run(name: str, enter: list, leave: list = (), **kw: object) -> object:
    agg = make_aggregator(name, **kw)
    s = agg.initial()
    for v in enter:
        s = agg.enter(s, v)
    for v in leave:
        s = agg.leave(s, v)
    return agg.result(s)


def test_exact_values() -> None:
    assert run("count", [1, None, 3], star=True) == 3
    assert run("count", [1, None, 3]) == 2
    assert run("sum", [500.0, 100.0, 150.0]) == 750.0
    assert run("sum", []) is None
    assert run("sum", [None]) is None
    assert run("avg", [1, 2, 3, 4]) == 2.5
    assert run("min", [5, 3, 9], [3]) == 5
    assert run("max", [5, 3, 9], [9]) == 5
    assert run("median", [5, 1, 9, 7]) == 6.0
    assert run("stddev", [2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(2.138089935299395)
    assert run("stddev", [3]) is None
    assert run("avedev", [1, 2, 3, 4]) == 1.0
    assert run("first", [4, 5, 6], [4]) == 5
    assert run("last", [4, 5, 6]) == 6
    assert run("window", [4, 5, 6], [4]) == [5, 6]
    assert run("nth", [4, 5, 6], extra=(1,)) == 5
    assert run("nth", [2.5, None], extra=(1,)) is None
    assert run("nth", [4, None, 6], extra=(1,)) == 4
    assert run("nth", [4, None, 6], [4, None], extra=(0,)) == 6
    assert run("last", [2.5, None]) is None
    assert run("window", [2.5, None]) == [2.5, None]
    assert run("leaving", [1]) is False
    assert run("leaving", [1], [1]) is True
    assert run("countever", [1, 2], [1], star=True) == 2
    assert run("count", [1, 1, 2, None], distinct=True) == 2
    assert run("sum", [1, 1, 2], [1], distinct=True) == 3
    assert run("sum", [1, 1, 2], [1, 1], distinct=True) == 2


@pytest.mark.parametrize("name", [n for n in NAMES if n not in ("leaving", "countever")])
@settings(max_examples=60, deadline=None)
@given(base=values, extra=values)
def test_enter_then_leave_returns_to_previous_state(name: str, base: list, extra: list) -> None:
    """Aggregating a sequence then removing it again gives back the earlier result."""
    agg = make_aggregator(name)
    s = agg.initial()
    for v in base:
        s = agg.enter(s, v)
    before = json.dumps(agg.result(s))
    for v in extra:
        s = agg.enter(s, v)
    for v in extra:
        s = agg.leave(s, v)
    after = agg.result(s)
    if isinstance(after, float):
        assert after == pytest.approx(json.loads(before), abs=1e-6)
    elif name in ("first", "last", "window"):
        # order-based aggregates: leaving removes the first equal value, so compare contents
        assert sorted(map(str, agg.values(s))) == sorted(map(str, base))
    else:
        assert json.dumps(after) == before


@settings(max_examples=80, deadline=None)
@given(seq=st.lists(st.integers(-50, 50), min_size=1, max_size=40),
       window=st.integers(1, 8))
def test_min_max_stay_right_under_sliding_removal(seq: list, window: int) -> None:
    """min/max over a sliding length window equal a recomputation from scratch."""
    mn, mx = make_aggregator("min"), make_aggregator("max")
    smin, smax = mn.initial(), mx.initial()
    for i, v in enumerate(seq):
        smin, smax = mn.enter(smin, v), mx.enter(smax, v)
        if i >= window:
            gone = seq[i - window]
            smin, smax = mn.leave(smin, gone), mx.leave(smax, gone)
        live = seq[max(0, i - window + 1): i + 1]
        assert mn.result(smin) == min(live)
        assert mx.result(smax) == max(live)


def test_first_last_window_take_out_the_event_that_leaves() -> None:
    """Equal values of different events: the entry of the leaving event goes (a window
    that evicts out of arrival order, e.g. ``#groupwin(k)#length(1)``), as Esper's
    linear access state removes the event itself."""
    first, last, window = (make_aggregator(n, by_event=True)
                           for n in ("first", "last", "window"))
    rows = [{"k": "c", "v": 4}, {"k": "a", "v": 5}, {"k": "b", "v": 4}]
    states = [a.initial() for a in (first, last, window)]
    for r in rows:
        states = [a.enter_row(s, r["v"], r) for a, s in zip((first, last, window), states)]
    b3 = {"k": "b", "v": 3}
    states = [a.enter_row(s, 3, b3) for a, s in zip((first, last, window), states)]
    states = [a.leave_row(s, 4, rows[2]) for a, s in zip((first, last, window), states)]
    assert [a.result(s) for a, s in zip((first, last, window), states)] == [4, 3, [4, 5, 3]]
    # without the row, the oldest equal value goes
    assert first.result(first.leave(states[0], 4)) == 5


def test_first_and_last_with_an_index() -> None:
    from operators.aggregates import make_aggregator

    first, last = make_aggregator("first", extra=(1,)), make_aggregator("last", extra=(2,))
    s1, s2 = first.initial(), last.initial()
    for v in (5, 1, 3):
        s1, s2 = first.enter(s1, v), last.enter(s2, v)
    assert (first.result(s1), last.result(s2)) == (1, 5)
    s1, s2 = first.leave(s1, 5), last.leave(s2, 5)
    assert (first.result(s1), last.result(s2)) == (3, None)


def test_a_value_leaving_that_never_entered_takes_nothing_below_empty() -> None:
    # Esper's counters and sums never go below empty: a row that passes the where clause
    # only when it leaves (a subquery or variable changed meanwhile) takes nothing away
    assert run("count", [], [3], star=True) == 0
    assert run("count", [], [3]) == 0
    assert run("count", [1], [1, 2], star=True) == 0
    assert run("sum", [], [3]) is None
    assert run("sum", [5], [3]) is None  # the last value leaving empties the sum
    assert run("sum", [5, 2], [3]) == 4
    assert run("avg", [4.0], [1.0, 2.0]) is None
    assert run("stddev", [2], [5]) is None
    assert run("sum", [5], [3, None, 1]) is None


def test_countever_of_a_value_counts_its_non_null_values() -> None:
    """Esper ref. 10.2.4: countever(x) counts non-null values, countever(*) every event;
    neither counts down."""
    assert run("countever", [1, None, 3], [1]) == 2
    assert run("countever", [1, None, 3], [1], star=True) == 3
    assert run("countever", [None, None]) == 0


def test_a_filtered_aggregate_takes_only_the_rows_its_filter_passes() -> None:
    """Esper ref. 10.2 filter: the generic row updaters skip an event whose filter is false
    or null, entering and leaving alike; the state stays the aggregator's own."""
    from operators.aggregates import row_updater

    rows = [{"v": 1, "k": "a"}, {"v": 2, "k": "b"}, {"v": 4, "k": None}, {"v": 8, "k": "a"}]
    value = lambda r, c: r["v"]  # noqa: E731
    filt = lambda r, c: None if r["k"] is None else r["k"] == "a"  # noqa: E731
    for name, star, want, after_leave in (("count", True, 2, 1), ("sum", False, 9, 8),
                                          ("countever", True, 2, 2)):
        agg = make_aggregator(name, star=star)
        enter = row_updater(agg, 0, None if star else value, filt, True)
        leave = row_updater(agg, 0, None if star else value, filt, False)
        states = [agg.initial()]
        for r in rows:
            enter(states, r, None)
        assert agg.result(states[0]) == want, name
        for r in rows[:3]:
            leave(states, r, None)
        assert agg.result(states[0]) == after_leave, name
        assert json.loads(json.dumps(states)) == states  # JSON-shaped, as before


def test_fold_filter_wraps_an_aggregator_for_callers_without_a_filter() -> None:
    """``fold_filter`` (``#expr`` windows, match_recognize measures): the value becomes
    the pair (passed, value), the state the inner aggregator's."""
    from operators.aggregates import Filtered, fold_filter

    base = make_aggregator("sum")
    assert fold_filter(base, None, None) == (base, None)
    agg, value = fold_filter(base, lambda r, c: r["v"], lambda r, c: r["v"] > 2)
    assert isinstance(agg, Filtered) and agg.name == "sum" and value is not None
    s = agg.initial()
    for r in ({"v": 1}, {"v": 3}, {"v": 5}):
        s = agg.enter(s, value(r, None))
    assert agg.result(s) == 8 and s == base.enter(base.enter(base.initial(), 3), 5)
    s = agg.leave(s, value({"v": 1}, None))
    s = agg.leave(s, value({"v": 3}, None))
    assert agg.result(s) == 5
    # no value expression: the row itself (count(*, b))
    star, row_value = fold_filter(make_aggregator("count", star=True), None,
                                  lambda r, c: r.get("b"))
    assert row_value is not None
    assert star.result(star.enter(star.initial(), row_value({"b": None}, None))) == 0

"""Crontab schedules: exact next firing instants in epoch ms (UTC unless stated)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.patterns.crontab import CronSpec, DayOp

MIN = 60_000
HOUR = 3_600_000
DAY = 86_400_000


def ms(*args: int) -> int:
    """Epoch ms of a UTC wall-clock time."""
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)


def firings(spec: CronSpec, start: int, n: int, tz: str = "UTC") -> list[int]:
    """The next ``n`` firing instants after ``start``."""
    out = []
    for _ in range(n):
        start = spec.next_after(start, tz)
        out.append(start)
    return out


def test_nine_am_daily() -> None:
    """(0, 9, *, *, *): 09:00:00 UTC each day; never at the start instant itself."""
    nine = CronSpec.parse([0, 9, "*", "*", "*"])
    assert firings(nine, 0, 3) == [9 * HOUR, DAY + 9 * HOUR, 2 * DAY + 9 * HOUR]
    assert nine.next_after(9 * HOUR) == DAY + 9 * HOUR
    assert nine.next_after(9 * HOUR - 1) == 9 * HOUR
    assert nine.next_after(9 * HOUR + 500) == DAY + 9 * HOUR  # mid-second after 09:00
    assert nine.matches(9 * HOUR) and not nine.matches(9 * HOUR + 1000)
    assert not nine.matches(9 * HOUR + 1)


def test_context_nine_to_five_times() -> None:
    """The instants context_crontab_nine_to_five relies on."""
    start = CronSpec.parse([0, 9, "*", "*", "*"])
    end = CronSpec.parse([0, 17, "*", "*", "*"])
    assert start.next_after(0) == 32_400_000
    assert end.next_after(32_400_000) == 61_200_000
    assert start.next_after(61_200_000) == 118_800_000


def test_every_minute_and_seconds_field() -> None:
    """Minute-level specs fire at second 0; a 6th field fires at its seconds."""
    every_min = CronSpec.parse(["*", "*", "*", "*", "*"])
    assert firings(every_min, 0, 2) == [MIN, 2 * MIN]
    assert every_min.next_after(MIN + 30_000) == 2 * MIN
    secs = CronSpec.parse(["*", "*", "*", "*", "*", "*/20"])
    assert firings(secs, 0, 4) == [20_000, 40_000, 60_000, 80_000]
    every_sec = CronSpec.parse(["*", "*", "*", "*", "*", "*"])
    assert every_sec.has_seconds and firings(every_sec, 500, 2) == [1000, 2000]


def test_lists_ranges_and_steps() -> None:
    """``[..]``/``a,b`` lists, ``a-b``/``a:b`` ranges, ``*/n``, ``a-b/n`` and ``a/n`` steps."""
    assert CronSpec.parse(["*/15", 0, "*", "*", "*"]).minutes == (0, 15, 30, 45)
    assert CronSpec.parse(["1-10/2", 0, "*", "*", "*"]).minutes == (1, 3, 5, 7, 9)
    assert CronSpec.parse(["50/3", 0, "*", "*", "*"]).minutes == (50, 53, 56, 59)
    assert CronSpec.parse([0, "8:17", "*", "*", "*"]).hours == tuple(range(8, 18))
    assert CronSpec.parse([0, "8-10", "*", "*", "*"]).hours == (8, 9, 10)
    assert CronSpec.parse([0, "[1, 5]", "*", "*", "*"]).hours == (1, 5)
    assert CronSpec.parse([0, "5,1", "*", "*", "*"]).hours == (1, 5)
    assert CronSpec.parse([0, [1, "3-4"], "*", "*", "*"]).hours == (1, 3, 4)
    # Esper ref. 2, patterns in brief: "every five minutes past the hour"
    five_past = CronSpec.parse([5, "*", "*", "*", "*"])
    assert firings(five_past, 0, 2) == [5 * MIN, HOUR + 5 * MIN]


def test_day_of_week_zero_is_sunday() -> None:
    """1970-01-01 was a Thursday; day-of-week 0 is Sunday (Jan 4th)."""
    sunday = CronSpec.parse([0, 0, "*", "*", 0])
    assert sunday.next_after(0) == ms(1970, 1, 4)
    weekdays = CronSpec.parse(["*/15", "8:17", "*", "*", "[1, 2, 3, 4, 5]"])
    assert weekdays.next_after(ms(1970, 1, 2, 17, 45)) == ms(1970, 1, 5, 8, 0)


def test_day_of_month_or_day_of_week() -> None:
    """Both restricted: a day matches when either does; a full range counts as ``*``."""
    both = CronSpec.parse([0, 0, 15, "*", 1])  # the 15th, or any Monday
    assert firings(both, 0, 4) == [ms(1970, 1, 5), ms(1970, 1, 12), ms(1970, 1, 15),
                                    ms(1970, 1, 19)]
    full_week = CronSpec.parse([0, 0, 15, "*", "0-6"])
    assert full_week.days_of_week is None
    assert full_week.next_after(0) == ms(1970, 1, 15)


def test_months_and_leap_day() -> None:
    """Month restriction and a Feb 29 schedule (next one in 1972)."""
    march = CronSpec.parse([0, 0, 1, 3, "*"])
    assert march.next_after(0) == ms(1970, 3, 1)
    leap = CronSpec.parse([0, 0, 29, 2, "*"])
    assert leap.next_after(0) == ms(1972, 2, 29)
    assert leap.next_after(ms(1972, 2, 29)) == ms(1976, 2, 29)


def test_special_day_operators() -> None:
    """``last``, ``lastweekday``, ``N weekday`` (day of month) and ``N last`` (day of week)."""
    last = CronSpec.parse([0, 0, "last", "*", "*"])
    assert last.dom_op == DayOp("last")
    assert firings(last, 0, 3) == [ms(1970, 1, 31), ms(1970, 2, 28), ms(1970, 3, 31)]
    # Jan 1970 ends on Saturday the 31st: last weekday is Friday the 30th
    lw = CronSpec.parse([0, 0, "lastweekday", "*", "*"])
    assert firings(lw, 0, 2) == [ms(1970, 1, 30), ms(1970, 2, 27)]
    # Feb 1970: the 15th is a Sunday -> Monday 16th; Mar 1970: the 1st is a Sunday -> 2nd
    wd = CronSpec.parse([0, 0, "15 weekday", "*", "*"])
    assert firings(wd, 0, 3) == [ms(1970, 1, 15), ms(1970, 2, 16), ms(1970, 3, 16)]
    first_wd = CronSpec.parse([0, 0, "1 weekday", "*", "*"])
    assert first_wd.next_after(ms(1970, 2, 2)) == ms(1970, 3, 2)
    last_friday = CronSpec.parse([0, 0, "*", "*", "5 last"])
    assert firings(last_friday, 0, 2) == [ms(1970, 1, 30), ms(1970, 2, 27)]
    saturday = CronSpec.parse([0, 0, "*", "*", "last"])
    assert saturday.next_after(0) == ms(1970, 1, 3)


def test_time_zone() -> None:
    """Wall-clock fields read in the given zone; a 7th parameter overrides the caller's."""
    nine = CronSpec.parse([0, 9, "*", "*", "*"])
    assert nine.next_after(0, "America/New_York") == 14 * HOUR  # EST = UTC-5
    assert nine.next_after(ms(1970, 7, 1), "America/New_York") == ms(1970, 7, 1, 13)  # EDT
    tokyo = CronSpec.parse([0, 9, "*", "*", "*", 0, "Asia/Tokyo"])
    assert tokyo.next_after(0, "UTC") == DAY  # 09:00 JST on Jan 2nd = 00:00Z
    # Spring forward 1970-04-26 in New York: 02:30 does not exist and maps to 03:30 EDT
    gap = CronSpec.parse([30, 2, "*", "*", "*"])
    assert gap.next_after(ms(1970, 4, 26, 5), "America/New_York") == ms(1970, 4, 26, 7, 30)


@pytest.mark.parametrize("fields", [
    [60, "*", "*", "*", "*"], [0, 24, "*", "*", "*"], [0, 0, 0, "*", "*"],
    [0, 0, "*", 13, "*"], [0, 0, "*", "*", 7], [0, 0, "*", "*", "*", 60],
    ["x", "*", "*", "*", "*"], ["5-1", "*", "*", "*", "*"], ["*/0", "*", "*", "*", "*"],
    [0, 0, "*", "*"], [0, 0, 30, 2, "*"],
])
def test_invalid_specs_raise(fields: list) -> None:
    """Out-of-range values, bad syntax, wrong arity and impossible dates are rejected."""
    with pytest.raises(ValueError):
        CronSpec.parse(fields)


def _field(lo: int, hi: int) -> st.SearchStrategy[str]:
    """A random crontab field (never a full range, so both tools read '*' alike)."""
    num = st.integers(lo, hi)
    # (croniter reads a one-value range such as '0-0' as '*': generate proper ranges only)
    rng = st.tuples(num, num).filter(lambda p: p[0] != p[1]).map(
        lambda p: f"{min(p)}-{max(p)}")
    step = st.tuples(st.integers(lo, hi - 1), st.integers(2, 7)).map(
        lambda p: f"{p[0]}-{hi}/{p[1]}")
    lst = st.lists(num, min_size=1, max_size=3).map(lambda xs: ",".join(map(str, xs)))
    return st.one_of(st.just("*"), num.map(str), rng, step, lst)


@settings(max_examples=150, deadline=None)
@given(
    minute=_field(0, 59), hour=_field(0, 23), dom=_field(1, 28), month=_field(1, 12),
    dow=_field(0, 6), start=st.integers(0, 4 * 365 * DAY),
)
def test_agrees_with_croniter(minute: str, hour: str, dom: str, month: str, dow: str,
                              start: int) -> None:
    """Cross-check against croniter (same dom/dow OR rule, 0 = Sunday) on random specs."""
    fields = [minute, hour, dom, month, dow]
    spec = CronSpec.parse(fields)
    if spec.days_of_week is None and dow != "*" or spec.days_of_month is None and dom != "*":
        return  # a list that happens to cover the whole range: kepl/Esper read it as '*'
    it = croniter(" ".join(fields), datetime.fromtimestamp(start / 1000, UTC))
    expected = int(it.get_next(datetime).timestamp() * 1000)
    assert spec.next_after(start) == expected

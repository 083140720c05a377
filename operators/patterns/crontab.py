"""Esper crontab schedules: ``(minute, hour, day-of-month, month, day-of-week[, second[, tz]])``.

Used by ``timer:at`` and by crontab context conditions (Esper ref. 4.2.7.4, which refers to the
reference's "Crontab (timer:at)" section).  Field syntax accepted per field: ``*``, a
number, a list (``[1, 5]`` or ``1,5``), a range (``1-5`` or Esper's ``1:5``), a step
(``*/5``, ``1-10/2``, ``3/15``); in day-of-month also ``last``, ``lastweekday`` and
``N weekday``; in day-of-week also ``last`` (Saturday) and ``N last`` (the month's last
weekday N).  Day-of-week 0 is Sunday, as in Esper.

Semantics follow the reference product's schedule computation:

* a spec without a seconds field fires at second 0 of each matching minute;
* when both day-of-month and day-of-week are restricted a day matches if *either* does
  (a field listing its whole range counts as ``*``);
* the next occurrence is strictly after the given instant, so a schedule never fires at
  the instant it starts (Esper behaviour, "``timer:at`` does not fire at the deploy
  instant").  kepl fires at whole seconds; the reference product's habit of carrying the
  start time's milliseconds into the result is not copied.

Times are epoch milliseconds; wall-clock fields are read in the given time zone (UTC by
default).  A local time skipped by a DST change maps forward like a lenient calendar does.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

_MINUTES = (0, 59)
_HOURS = (0, 23)
_DOM = (1, 31)
_MONTHS = (1, 12)
_DOW = (0, 6)
_SECONDS = (0, 59)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_SEARCH_DAYS = 366 * 12
"""How far ahead to look before declaring a schedule impossible (covers Feb 29 gaps)."""


@dataclass(frozen=True)
class DayOp:
    """A special day operator: ``last`` / ``lastweekday`` / ``N weekday`` / ``N last``."""

    kind: str  # last | lastweekday | weekday
    day: int | None = None
    week: bool = False
    """True when given in the day-of-week field (``last`` = Saturday, ``N last``)."""

    def fits(self, d: date) -> bool:
        """Whether day ``d`` is selected by this operator."""
        dim = calendar.monthrange(d.year, d.month)[1]
        dow = _esper_dow(d)
        if self.kind == "last":
            if not self.week:
                return d.day == dim
            if self.day is None:
                return dow == 6
            return dow == self.day and d.day > dim - 7
        if self.kind == "lastweekday":
            if not 1 <= dow <= 5:
                return False
            return d.day == dim or (d.day >= dim - 2 and dow == 5)
        # weekday: the weekday nearest to day N, never leaving the month
        if not 1 <= dow <= 5:
            return False
        return self.day is None or d.day == _nearest_weekday(self.day, d.year, d.month)


def _esper_dow(d: date) -> int:
    """Day of week with 0 = Sunday (Python's weekday() has 0 = Monday)."""
    return (d.weekday() + 1) % 7


def _nearest_weekday(day: int, year: int, month: int) -> int:
    """Day of month of the Mon-Fri day nearest to ``day`` within the same month."""
    dim = calendar.monthrange(year, month)[1]
    target = min(day, dim)
    dow = _esper_dow(date(year, month, target))
    if dow == 6:  # Saturday: Friday before, unless that leaves the month
        return target - 1 if target > 1 else target + 2
    if dow == 0:  # Sunday: Monday after, unless that leaves the month
        return target + 1 if target < dim else target - 2
    return target


def _parse_item(item: Any, lo: int, hi: int, name: str) -> list[int]:
    """Values of one list item: a number, ``*``, a range or a step."""
    if isinstance(item, bool):
        raise ValueError(f"crontab {name}: invalid value {item!r}")
    if isinstance(item, int):
        values = [item]
    else:
        text = str(item).strip().replace(" ", "")
        step = 1
        if "/" in text:
            text, step_text = text.split("/", 1)
            step = _int(step_text, name)
            if step <= 0:
                raise ValueError(f"crontab {name}: step must be positive in {item!r}")
            if text not in ("*",) and "-" not in text and ":" not in text:
                text = f"{text}-{hi}"  # 'N/step' runs from N to the end of the range
        if text == "*":
            start, end = lo, hi
        elif "-" in text[1:] or ":" in text:
            sep = ":" if ":" in text else "-"
            a, b = text.split(sep, 1) if sep == ":" else _split_range(text)
            start, end = _int(a, name), _int(b, name)
            if start > end:
                raise ValueError(f"crontab {name}: empty range {item!r}")
        else:
            start = end = _int(text, name)
        values = list(range(start, end + 1, step))
    for v in values:
        if not lo <= v <= hi:
            raise ValueError(f"crontab {name}: value {v} outside {lo}-{hi}")
    return values


def _split_range(text: str) -> tuple[str, str]:
    """Split ``a-b`` at the range dash (not a leading minus sign)."""
    i = text.index("-", 1)
    return text[:i], text[i + 1 :]


def _int(text: str, name: str) -> int:
    """A field number, with a clear error."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"crontab {name}: not a number: {text!r}") from None


def _items(value: Any) -> list[Any]:
    """Split a field value into list items (``[1, 2]``, ``'1,2'``, ``'[1,2]'`` or one item)."""
    if isinstance(value, list | tuple):
        return [x for v in value for x in _items(v)]
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        return [p for p in (s.strip() for s in text.split(",")) if p]
    return [value]


def _day_op(value: Any, week: bool) -> DayOp | None:
    """The special day operator a day field holds, if any."""
    if not isinstance(value, str):
        return None
    words = value.strip().lower().split()
    if words == ["last"]:
        return DayOp("last", None, week)
    if words == ["lastweekday"] and not week:
        return DayOp("lastweekday", None, week)
    if len(words) == 2 and words[1] == "last" and week:
        day = _int(words[0], "day of week")
        if not 0 <= day <= 6:
            raise ValueError(f"crontab day of week: {day} outside 0-6")
        return DayOp("last", day, week)
    if len(words) == 2 and words[1] == "weekday" and not week:
        day = _int(words[0], "day of month")
        if not 1 <= day <= 31:
            raise ValueError(f"crontab day of month: {day} outside 1-31")
        return DayOp("weekday", day, week)
    return None


def _field(value: Any, bounds: tuple[int, int], name: str) -> tuple[int, ...]:
    """The sorted values a field selects."""
    if value is None:
        value = "*"
    out: set[int] = set()
    for item in _items(value):
        out.update(_parse_item(item, bounds[0], bounds[1], name))
    if not out:
        raise ValueError(f"crontab {name}: no values in {value!r}")
    return tuple(sorted(out))


def _wild(values: tuple[int, ...], bounds: tuple[int, int]) -> tuple[int, ...] | None:
    """None when a day field covers its whole range (the reference treats that as ``*``)."""
    return None if len(values) == bounds[1] - bounds[0] + 1 else values


@lru_cache(maxsize=64)
def _zone(name: str) -> tzinfo:
    """The tzinfo for a zone name (UTC fast path)."""
    return UTC if name.upper() in ("UTC", "Z", "GMT") else ZoneInfo(name)


@dataclass(frozen=True)
class CronSpec:
    """A parsed crontab schedule; ``next_after`` gives its next firing instant."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days_of_month: tuple[int, ...] | None
    """None: any day of month (``*``)."""
    months: tuple[int, ...]
    days_of_week: tuple[int, ...] | None
    """None: any day of week (``*``); 0 = Sunday."""
    seconds: tuple[int, ...] = (0,)
    has_seconds: bool = False
    dom_op: DayOp | None = None
    dow_op: DayOp | None = None
    tz: str | None = None
    """Time zone given as the crontab's 7th parameter; overrides the caller's."""
    text: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.tz is not None:
            _zone(self.tz)  # fail early on an unknown zone
        if self._search(-1, "UTC") is None:
            raise ValueError(f"crontab ({self.text}) never fires")

    @classmethod
    def parse(cls, fields: Sequence[Any]) -> CronSpec:
        """Parse 5 to 7 field values (numbers, strings or lists of them)."""
        fields = list(fields)
        if not 5 <= len(fields) <= 7:
            raise ValueError(f"crontab needs 5 to 7 parameters, got {len(fields)}")
        dom_op = _day_op(fields[2], week=False)
        dow_op = _day_op(fields[4], week=True)
        dom = None if dom_op else _wild(_field(fields[2], _DOM, "day of month"), _DOM)
        dow = None if dow_op else _wild(_field(fields[4], _DOW, "day of week"), _DOW)
        has_seconds = len(fields) >= 6
        seconds = _field(fields[5], _SECONDS, "seconds") if has_seconds else (0,)
        tz = str(fields[6]) if len(fields) == 7 and fields[6] is not None else None
        return cls(
            minutes=_field(fields[0], _MINUTES, "minutes"),
            hours=_field(fields[1], _HOURS, "hours"),
            days_of_month=dom,
            months=_field(fields[3], _MONTHS, "month"),
            days_of_week=dow,
            seconds=seconds,
            has_seconds=has_seconds,
            dom_op=dom_op,
            dow_op=dow_op,
            tz=tz,
            text=", ".join(_show(f) for f in fields),
        )

    def day_matches(self, d: date) -> bool:
        """Whether the schedule fires at some time on local day ``d``."""
        if d.month not in self.months:
            return False
        # A day operator replaces the plain day sets (day-of-month operator first).
        op = self.dom_op or self.dow_op
        if op is not None:
            return op.fits(d)
        dom, dow = self.days_of_month, self.days_of_week
        if dom is None and dow is None:
            return True
        if dow is None:
            return d.day in dom  # type: ignore[operator]
        if dom is None:
            return _esper_dow(d) in dow
        return d.day in dom or _esper_dow(d) in dow

    def _next_time_of_day(self, after: int) -> int | None:
        """The first firing second-of-day strictly after ``after`` (-1: from midnight)."""
        hours, minutes, seconds = self.hours, self.minutes, self.seconds
        if after < 0:
            return hours[0] * 3600 + minutes[0] * 60 + seconds[0]
        ah, rest = divmod(after, 3600)
        am, asec = divmod(rest, 60)
        for h in hours[bisect_left(hours, ah):]:
            if h > ah:
                return h * 3600 + minutes[0] * 60 + seconds[0]
            for m in minutes[bisect_left(minutes, am):]:
                if m > am:
                    return h * 3600 + m * 60 + seconds[0]
                i = bisect_right(seconds, asec)
                if i < len(seconds):
                    return h * 3600 + m * 60 + seconds[i]
        return None

    def _search(self, ms: int, tz: str) -> int | None:
        """The first firing instant strictly after ``ms``, or None within the horizon."""
        zone = _zone(self.tz or tz)
        secs = ms // 1000
        if zone is UTC:
            days, sod = divmod(secs, 86400)
            day = date.fromordinal(_EPOCH_ORDINAL + days)
        else:
            local = datetime.fromtimestamp(secs, zone)
            day = local.date()
            sod = local.hour * 3600 + local.minute * 60 + local.second
        after = sod
        for _ in range(_SEARCH_DAYS):
            if day.month not in self.months:
                # skip the rest of the month
                nxt = date(day.year + (day.month == 12), day.month % 12 + 1, 1)
                day, after = nxt, -1
                continue
            if self.day_matches(day):
                while (tod := self._next_time_of_day(after)) is not None:
                    inst = self._instant(day, tod, zone)
                    if inst > ms:
                        return inst
                    after = tod  # only across a DST fold: keep looking later that day
            day, after = day + timedelta(days=1), -1
        return None

    @staticmethod
    def _instant(day: date, tod: int, zone: tzinfo) -> int:
        """Epoch ms of local wall-clock time ``tod`` seconds into ``day``."""
        if zone is UTC:
            return ((day.toordinal() - _EPOCH_ORDINAL) * 86400 + tod) * 1000
        h, rest = divmod(tod, 3600)
        m, s = divmod(rest, 60)
        wall = datetime(day.year, day.month, day.day, h, m, s, tzinfo=zone)
        return int(wall.timestamp()) * 1000

    def next_after(self, ms: int, tz: str = "UTC") -> int:
        """The first instant strictly after ``ms`` (epoch ms) at which the schedule fires."""
        nxt = self._search(ms, tz)
        if nxt is None:
            raise ValueError(f"crontab ({self.text}) has no occurrence after {ms}")
        return nxt

    def next_from(self, ms: int, tz: str = "UTC") -> int:
        """The next firing as Esper schedules it from ``ms`` (``ScheduleComputeHelper
        .computeNextOccurance``): the first instant after the whole second that holds
        ``ms``, at ``ms``'s millisecond within its second (Esper keeps the milliseconds
        of the time it computes from: armed at 1.5 s, ``*/3`` seconds fires at 3.5 s,
        6.5 s, ...)."""
        frac = ms % 1000
        return self.next_after(ms - frac, tz) + frac

    def matches(self, ms: int, tz: str = "UTC") -> bool:
        """Whether ``ms`` is exactly a firing instant of the schedule."""
        return self._search(ms - 1, tz) == ms


def _show(value: Any) -> str:
    """A field value as EPL-like text (for describe)."""
    if value is None:
        return "*"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)

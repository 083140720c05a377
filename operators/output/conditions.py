"""Output conditions: when a limited statement posts (Esper ref. 5.7.1 Output clause
options; Esper's OutputCondition kinds).

``Trigger`` holds what every condition shares: the counts behind the built-in properties,
the ``after`` clause and ``then set`` assignments.  One ``Condition`` says when an
interval ends: every N events (``EveryEvents``), every period (``EveryPeriod``), at a
crontab time (``AtCrontab``) or when an expression holds (``When``); ``when terminated``
alone has no condition (``Condition`` itself never fires).  Grouped ``output first``
polls the same condition per group (``group_passes``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from operators.base import PartitionCtx, StateNamespace
from operators.output.book import KEY, Book
from operators.output.spec import Assignment, OutputSpec

GroupMark = list[Any]
"""Grouped ``output first`` per group: [first, new count, old count, time marker]."""


class Condition:
    """No periodic or event-driven end of an interval (``when terminated`` only)."""

    def arm(self, trigger: Trigger, now_ms: int) -> int | None:
        """The first due time, armed by the first update (None: not timed)."""
        return None

    def on_update(self, trigger: Trigger, n_new: int, n_old: int, now_ms: int) -> bool:
        """Count one update; True when the interval ends with it."""
        return False

    def next_due(self, trigger: Trigger, due: int) -> int | None:
        """The due time after ``due`` (a timed condition re-arms from its due time)."""
        return None

    def skip(self, trigger: Trigger, due: int, limit: int) -> tuple[int, int | None]:
        """The last firing before ``limit`` (``due`` being one) and the next due time."""
        return due, None

    def group_passes(self, trigger: Trigger, mark: GroupMark, is_new: bool,
                     now_ms: int) -> bool:
        """Whether a group's row passes now (grouped ``output first``)."""
        return False


class EveryEvents(Condition):
    """``every N events``: new and old events counted apart, either reaching N."""

    def on_update(self, trigger: Trigger, n_new: int, n_old: int, now_ms: int) -> bool:
        rate = trigger.every_events()
        if rate is None:
            return False
        b = trigger.book
        b["pending_insert"] += n_new
        b["pending_remove"] += n_old
        if b["pending_insert"] >= rate or b["pending_remove"] >= rate:
            b["pending_insert"] = b["pending_remove"] = 0
            return True
        return False

    def group_passes(self, trigger: Trigger, mark: GroupMark, is_new: bool,
                     now_ms: int) -> bool:
        rate = trigger.every_events()
        if rate is None:
            return False
        mark[1 if is_new else 2] += 1
        if mark[0] or mark[1] >= rate or mark[2] >= rate:
            mark[1] = mark[2] = 0
            return True
        return False


class EveryPeriod(Condition):
    """``every <period>``: timed from the first update, then from each due time."""

    def arm(self, trigger: Trigger, now_ms: int) -> int | None:
        every = trigger.every_ms()
        return now_ms + every if every is not None else None

    def next_due(self, trigger: Trigger, due: int) -> int | None:
        every = trigger.every_ms()
        return due + every if every is not None else None

    def skip(self, trigger: Trigger, due: int, limit: int) -> tuple[int, int | None]:
        every = trigger.every_ms()
        if every is None:
            return due, None
        last = due + (limit - 1 - due) // every * every
        return last, last + every

    def group_passes(self, trigger: Trigger, mark: GroupMark, is_new: bool,
                     now_ms: int) -> bool:
        every = trigger.every_ms()
        if every is None:
            return False
        if mark[3] is None or now_ms - mark[3] >= every:
            mark[3] = now_ms
            return True
        return False


class AtCrontab(Condition):
    """``at (crontab)``: armed by the first update."""

    def __init__(self, at: Any) -> None:
        self.at = at

    def arm(self, trigger: Trigger, now_ms: int) -> int | None:
        return self.at.next_from(now_ms)

    def next_due(self, trigger: Trigger, due: int) -> int | None:
        return self.at.next_from(due)

    def skip(self, trigger: Trigger, due: int, limit: int) -> tuple[int, int | None]:
        # the firings keep the milliseconds of the first (``CronSpec.next_from``)
        frac = due % 1000
        last = _last_firing_before(self.at, due - frac, limit - frac) + frac
        return last, self.at.next_from(last)

    def group_passes(self, trigger: Trigger, mark: GroupMark, is_new: bool,
                     now_ms: int) -> bool:
        if mark[3] is None or now_ms >= mark[3]:
            mark[3] = self.at.next_from(now_ms)
            return True
        return False


class When(Condition):
    """``when <expr> [then set ...]``: checked at each update (and when a variable it
    reads changes, see ``OutputLimiter.on_variables_changed``)."""

    def on_update(self, trigger: Trigger, n_new: int, n_old: int, now_ms: int) -> bool:
        return trigger.when_holds(now_ms)

    def group_passes(self, trigger: Trigger, mark: GroupMark, is_new: bool,
                     now_ms: int) -> bool:
        return trigger.when_holds(now_ms)


def make_condition(spec: OutputSpec) -> Condition:
    """The condition of an output clause (one trigger at most, besides ``terminated``)."""
    if spec.every_events is not None or spec.every_events_expr is not None:
        return EveryEvents()
    if spec.every_ms is not None or spec.every_expr is not None:
        return EveryPeriod()
    if spec.at is not None:
        return AtCrontab(spec.at)
    if spec.when is not None:
        return When()
    return Condition()


class Trigger:
    """The condition of one context partition with its counts, ``after`` clause and
    assignments; the book is its state."""

    def __init__(self, spec: OutputSpec, ctx: PartitionCtx, state: StateNamespace,
                 book: Book) -> None:
        self.spec = spec
        self.ctx = ctx
        self.state = state
        self.book = book
        self.condition = make_condition(spec)
        putter = getattr(state, "putter", None)
        self._put_book = putter(KEY) if putter is not None else partial(state.put, KEY)
        """``state.put(KEY, book)`` (written at each update), the key encoded once."""
        self._timed_only = type(self.condition).on_update is Condition.on_update
        """The condition never ends an interval at an update (a period or crontab)."""

    def save(self) -> None:
        """Persist the book (one key)."""
        self._put_book(self.book)

    def seq(self) -> int:
        """The next sequence number of the interval's collectors."""
        self.book["seq"] += 1
        return int(self.book["seq"])

    # -- parameters read when needed (a variable may give them) -------------------
    def every_events(self) -> int | None:
        spec = self.spec
        if spec.every_events_expr is not None:
            v = spec.every_events_expr({}, self.ctx)
            return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
        return spec.every_events

    def every_ms(self) -> int | None:
        spec = self.spec
        if spec.every_expr is not None:
            v = spec.every_expr({}, self.ctx)
            if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
                return int(round(v * 1000))
            return None
        return spec.every_ms

    # -- expressions ---------------------------------------------------------------
    def builtins(self, now_ms: int) -> dict[str, Any]:
        """The built-in properties an output expression reads (Esper ref. 5.7.1.1)."""
        out = self.ctx.output
        b = self.book
        out["count_insert"] = b["count_insert"]
        out["count_remove"] = b["count_remove"]
        out["count_insert_total"] = b["count_insert_total"]
        out["count_remove_total"] = b["count_remove_total"]
        out["last_output_timestamp"] = b["last_output"]
        out["current_timestamp"] = now_ms
        return out

    def assign(self, assignments: tuple[Assignment, ...], now_ms: int) -> None:
        """Run ``then set`` assignments (they may read the built-in properties)."""
        if not assignments:
            return
        self.builtins(now_ms)
        variables = self.ctx.variables
        for a in assignments:
            variables[a.variable] = a.expr({}, self.ctx)
        # Esper's output condition does not hear the changes its own assignments make
        self.own_writes = {v: variables.get(v) for v in self.spec.variables}

    own_writes: dict[str, Any] | None = None
    """The variables the when-expression reads as this condition's last assignments left
    them, until the change they made is heard (``heard_own_writes``)."""

    def heard_own_writes(self) -> bool:
        """Whether the variable change being heard is this condition's own assignment."""
        own, self.own_writes = self.own_writes, None
        if own is None:
            return False
        variables = self.ctx.variables
        return all(variables.get(v) == value for v, value in own.items())

    def when_holds(self, now_ms: int) -> bool:
        """The when-expression holds now (its ``then set`` has run)."""
        assert self.spec.when is not None
        self.builtins(now_ms)
        if not truth(self.spec.when({}, self.ctx)):
            return False
        self.assign(self.spec.then_set, now_ms)
        return True

    # -- the after clause ----------------------------------------------------------
    def after_ok(self, n_new: int, now_ms: int) -> bool:
        """Esper's after-state: satisfied once the period passed or more than N events
        came."""
        b = self.book
        if b["after_done"]:
            return True
        spec = self.spec
        if spec.after_ms is not None:
            if now_ms < b["started"] + spec.after_ms:
                return False
        elif spec.after_events is not None:
            b["after_seen"] += n_new
            if b["after_seen"] <= spec.after_events:
                return False
        b["after_done"] = True
        return True

    # -- counting and time ---------------------------------------------------------
    def count(self, n_new: int, n_old: int, now_ms: int) -> bool:
        """Count one update toward the condition; True when the interval ends now."""
        b = self.book
        b["count_insert"] += n_new
        b["count_remove"] += n_old
        b["count_insert_total"] += n_new
        b["count_remove_total"] += n_old
        if b["due"] is None:
            b["due"] = self.condition.arm(self, now_ms)
        if self._timed_only:
            return False
        return self.condition.on_update(self, n_new, n_old, now_ms)

    def interval_ended(self, now_ms: int) -> None:
        """An output went out (or, for ``first``, the interval closed) at ``now_ms``."""
        b = self.book
        b["count_insert"] = b["count_remove"] = 0
        b["last_output"] = now_ms

    def due(self) -> int | None:
        return self.book["due"]

    def reschedule(self, due: int) -> None:
        """The output due at ``due`` fires: arm the next one from it."""
        self.book["due"] = self.condition.next_due(self, due)

    def skip(self, limit: int) -> int | None:
        """Jump every firing due before ``limit``; the time of the last one (None: none
        was due)."""
        due = self.book["due"]
        if due is None or due >= limit:
            return None
        last, self.book["due"] = self.condition.skip(self, due, limit)
        return last

    def group_passes(self, mark: GroupMark, is_new: bool, now_ms: int) -> bool:
        passes = self.condition.group_passes(self, mark, is_new, now_ms)
        if passes:
            mark[0] = False
        return passes


def _last_firing_before(cron: Any, first: int, limit: int) -> int:
    """The last crontab instant before ``limit``, ``first`` being one (>= ``first``): look
    back over a doubling window, so the cost does not grow with the jump."""
    w = 1000
    while limit - w > first:
        t = cron.next_after(limit - w - 1)
        if t < limit:
            break
        w *= 2
    else:
        t = first
    while True:
        n = cron.next_after(t)
        if n >= limit:
            return t
        t = n


def truth(v: Any) -> bool:
    """Esper's boolean test: null counts as false."""
    return v is not None and bool(v)

"""Context conditions (Esper ref. 4.2.7): filter, pattern, crontab, ``after`` period, ``@now``.

A condition spec builds an armed instance when its context needs it (a start condition
while no partition runs, an end condition per partition).  An instance says when it
fires: on an event, on a clock move, or at once.  It fires with the tagged events that
made it true, which become ``context.<tag>.*`` properties.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from operators.base import Expr, PartitionCtx, Row, StateNamespace
from operators.patterns.crontab import CronSpec

Fired = dict[str, Any]
"""Tag name to event, for a condition that became true (empty dict: fired untagged)."""


class CondInstance:
    """An armed condition."""

    inclusive = True
    """Whether the event that fired the condition counts toward the partition it starts."""

    def fires_now(self) -> Fired | None:
        """A condition true at the instant it is armed (``@now``)."""
        return None

    def on_event(self, type_name: str, event: Row, now_ms: int) -> Fired | None:
        return None

    def on_time(self, now_ms: int) -> Fired | None:
        return None

    def next_timer(self) -> int | None:
        return None

    def planned_end(self) -> int | None:
        """When this condition, armed as an end condition, will end its partition, if the
        clock alone decides that (a time period or crontab); else None (``context.endTime``)."""
        return None

    def types(self) -> frozenset[str]:
        return frozenset()

    def dump(self) -> dict[str, Any]:
        """What must be saved to re-arm this instance after a restore."""
        return {}


@dataclass(frozen=True)
class CondFilterSpec:
    """``TypeName(filter) as alias``: fires on the first matching event."""

    type_name: str
    predicate: Expr | None = None
    alias: str | None = None
    text: str = field(default="", compare=False)

    def arm(self, state: StateNamespace, ctx: PartitionCtx, now_ms: int,
            tags: dict[str, Any], saved: dict | None = None) -> CondInstance:
        return _FilterInstance(self, ctx, tags)

    def describe(self) -> str:
        return self.text or self.type_name

    def types(self) -> frozenset[str]:
        return frozenset({self.type_name})


class _FilterInstance(CondInstance):
    def __init__(self, spec: CondFilterSpec, ctx: PartitionCtx, tags: dict[str, Any]) -> None:
        self.spec = spec
        self.ctx = ctx
        self.tags = tags

    def on_event(self, type_name: str, event: Row, now_ms: int) -> Fired | None:
        s = self.spec
        if type_name != s.type_name:
            return None
        if s.predicate is not None and not s.predicate((event, self.tags), self.ctx):
            return None
        # the event itself also as the unnamed current event: a distinct(...) of an
        # initiating filter reads its properties unqualified (Esper ref. 4.2.6)
        return {s.alias: event, "\x00event": event} if s.alias else {"\x00event": event}

    def types(self) -> frozenset[str]:
        return frozenset({self.spec.type_name})


@dataclass(frozen=True)
class CondPatternSpec:
    """``pattern [...] [@inclusive]``: fires on the pattern's first match."""

    pattern: Any  # operators.patterns.spec.PatternSpec
    inclusive: bool = False
    text: str = field(default="", compare=False)

    def arm(self, state: StateNamespace, ctx: PartitionCtx, now_ms: int,
            tags: dict[str, Any], saved: dict | None = None) -> CondInstance:
        if saved is None:
            state.clear()
        return _PatternInstance(self, state, ctx, now_ms, tags)

    def describe(self) -> str:
        return f"pattern [{self.text}]" + (" @inclusive" if self.inclusive else "")

    def types(self) -> frozenset[str]:
        return self.pattern.types()


class _PatternInstance(CondInstance):
    def __init__(self, spec: CondPatternSpec, state: StateNamespace, ctx: PartitionCtx,
                 now_ms: int, tags: dict[str, Any]) -> None:
        self.inclusive = spec.inclusive
        self.matcher = spec.pattern.build(state, ctx, start_ms=now_ms, tags=dict(tags))

    def on_event(self, type_name: str, event: Row, now_ms: int) -> Fired | None:
        matches = self.matcher.on_event(type_name, event, now_ms)
        return dict(matches[0]) if matches else None

    def on_time(self, now_ms: int) -> Fired | None:
        matches = self.matcher.on_time(now_ms)
        return dict(matches[0]) if matches else None

    def next_timer(self) -> int | None:
        return self.matcher.next_timer()


@dataclass(frozen=True)
class CondCrontabSpec:
    """``(minute, hour, day, month, weekday[, second])``: fires at the next matching time."""

    cron: CronSpec
    text: str = field(default="", compare=False)

    def arm(self, state: StateNamespace, ctx: PartitionCtx, now_ms: int,
            tags: dict[str, Any], saved: dict | None = None) -> CondInstance:
        if saved is not None:
            return _AtInstance(saved.get("due"))
        return _AtInstance(self.cron.next_from(now_ms))

    def describe(self) -> str:
        return self.text or "crontab"

    def types(self) -> frozenset[str]:
        return frozenset()


@dataclass(frozen=True)
class CondAfterSpec:
    """``after <time period>``: fires that long after being armed."""

    ms: int

    def arm(self, state: StateNamespace, ctx: PartitionCtx, now_ms: int,
            tags: dict[str, Any], saved: dict | None = None) -> CondInstance:
        if saved is not None:
            return _AtInstance(saved.get("due"))
        return _AtInstance(now_ms + self.ms)

    def describe(self) -> str:
        return f"after {self.ms} ms"

    def types(self) -> frozenset[str]:
        return frozenset()


class _AtInstance(CondInstance):
    def __init__(self, due: int | None) -> None:
        self.due: int | None = due

    def dump(self) -> dict[str, Any]:
        return {"due": self.due}

    def on_time(self, now_ms: int) -> Fired | None:
        if self.due is not None and now_ms >= self.due:
            self.due = None
            return {}
        return None

    def next_timer(self) -> int | None:
        return self.due

    def planned_end(self) -> int | None:
        return self.due


@dataclass(frozen=True)
class CondNeverSpec:
    """No end condition given: the partition lives until the runtime stops."""

    def arm(self, state: StateNamespace, ctx: PartitionCtx, now_ms: int,
            tags: dict[str, Any], saved: dict | None = None) -> CondInstance:
        return CondInstance()

    def describe(self) -> str:
        return "never"

    def types(self) -> frozenset[str]:
        return frozenset()


@dataclass(frozen=True)
class CondNowSpec:
    """``@now``: true at the instant it is armed."""

    def arm(self, state: StateNamespace, ctx: PartitionCtx, now_ms: int,
            tags: dict[str, Any], saved: dict | None = None) -> CondInstance:
        return _NowInstance()

    def describe(self) -> str:
        return "@now"

    def types(self) -> frozenset[str]:
        return frozenset()


class _NowInstance(CondInstance):
    def fires_now(self) -> Fired | None:
        return {}


@dataclass(frozen=True)
class CondNowAndSpec:
    """``@now and <condition>``: fires once at arming, then whenever the condition does."""

    cond: Any

    def arm(self, state: StateNamespace, ctx: PartitionCtx, now_ms: int,
            tags: dict[str, Any], saved: dict | None = None) -> CondInstance:
        return _NowAndInstance(self.cond.arm(state, ctx, now_ms, tags, saved))

    def describe(self) -> str:
        return "@now and " + self.cond.describe()

    def types(self) -> frozenset[str]:
        return self.cond.types()


class _NowAndInstance(CondInstance):
    def __init__(self, inner: CondInstance) -> None:
        self.inner = inner
        self.inclusive = inner.inclusive

    def fires_now(self) -> Fired | None:
        return {}

    def on_event(self, type_name: str, event: Row, now_ms: int) -> Fired | None:
        return self.inner.on_event(type_name, event, now_ms)

    def on_time(self, now_ms: int) -> Fired | None:
        return self.inner.on_time(now_ms)

    def next_timer(self) -> int | None:
        return self.inner.next_timer()

    def planned_end(self) -> int | None:
        return self.inner.planned_end()

    def dump(self) -> dict[str, Any]:
        return self.inner.dump()

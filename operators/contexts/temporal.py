"""Temporal contexts: non-overlapping ``start/end`` and overlapping ``initiated/terminated``.

Esper ref. 4.2.5/4.2.6: a non-overlapping context has at most one partition; its start
condition is observed only while no partition exists and its end condition only while
one does.  An overlapping context starts a partition each time the initiating condition
fires, each with its own terminating condition, correlated through ``as`` tags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from operators.base import PartitionCtx, Row, StateNamespace
from operators.contexts.conditions import (
    CondAfterSpec,
    CondCrontabSpec,
    CondInstance,
    CondNowAndSpec,
    CondNowSpec,
    CondPatternSpec,
    Fired,
)
from operators.contexts.managers import Change, Manager, Pid
from operators.patterns.spec import Every, TimerInterval

Timed = list[tuple[int, Change]]
"""Partition changes of an idle clock jump, each at its own time."""


def _tags(fired: Fired) -> dict[str, Any]:
    return {k: v for k, v in fired.items() if not k.startswith("\x00")}


def _after_ms(cond: Any) -> int | None:
    """The period of an ``after`` condition, else None."""
    return cond.ms if isinstance(cond, CondAfterSpec) else None


def _periodic_ms(cond: Any) -> int | None:
    """P for ``pattern [every timer:interval(P)]`` (optionally ``@now and``): a condition
    that, with no events, fires every P ms from when it was armed; else None."""
    if isinstance(cond, CondNowAndSpec):
        cond = cond.cond
    if not isinstance(cond, CondPatternSpec):
        return None
    root = cond.pattern.root
    if isinstance(root, Every) and isinstance(root.child, TimerInterval) and root.child.ms > 0:
        return int(root.child.ms)
    return None


def _builtin(name: str, pid: int, start_ms: int, end: CondInstance,
             tags: dict[str, Any]) -> dict[str, Any]:
    """Built-in properties of a temporal partition (Esper ref. 4.2.6.2): ``endTime`` is the planned
    end, known only when the end condition is a time period or a crontab; an end by event or
    pattern leaves it null, also once the partition has ended (properties are fixed when the
    partition is allocated, as in Esper)."""
    return {"name": name, "id": pid, "startTime": start_ms, "endTime": end.planned_end(),
            **tags}


def _crontab_inside(start: CondCrontabSpec, end: Any, now_ms: int) -> bool:
    """Whether ``now_ms`` falls between a start and the following end firing (notes:
    a crontab context deployed inside its window starts at once)."""
    if not isinstance(end, CondCrontabSpec):
        return False
    horizon = now_ms - 8 * 86_400_000
    last_start = last_end = None
    t = horizon
    while True:
        t = start.cron.next_after(t)
        if t > now_ms:
            break
        last_start = t
    t = horizon
    while True:
        t = end.cron.next_after(t)
        if t > now_ms:
            break
        last_end = t
    return last_start is not None and (last_end is None or last_end < last_start) \
        and last_start != now_ms


@dataclass(frozen=True)
class NonOverlappingSpec:
    """``start <cond> end <cond>``."""

    name: str
    start: Any
    end: Any

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> NonOverlappingManager:
        return NonOverlappingManager(self, state, ctx)

    def describe(self) -> str:
        return f"non-overlapping start {self.start.describe()} end {self.end.describe()}"

    def types(self) -> frozenset[str]:
        return self.start.types() | self.end.types()


class NonOverlappingManager(Manager):
    """At most one partition; start armed while none runs, end armed while one does."""

    has_end_condition = True
    """Partitions end on conditions (``@Priority`` may order statements first)."""

    def __init__(self, spec: NonOverlappingSpec, state: StateNamespace,
                 ctx: PartitionCtx) -> None:
        self.spec = spec
        self.name = spec.name
        self.state = state
        self.ctx = ctx
        self.active: int | None = None
        self.next_id = 0
        self.cond: CondInstance | None = None
        self.pprops: dict[str, Any] = {}
        self.tags: dict[str, Any] = {}
        self.restored = False
        meta = state.get("meta")
        if meta is not None:
            # a rebuilt runtime: re-arm the saved condition, do not deploy again
            self.restored = True
            self.active, self.next_id, self.pprops, self.tags = (
                meta["active"], meta["next"], meta["props"], meta["tags"])
            if meta["phase"] == "start":
                self.cond = self.spec.start.arm(self.state.child("start"), ctx,
                                                meta["at"], {}, meta["cond"])
            elif meta["phase"] == "end":
                self.cond = self.spec.end.arm(self.state.child("end"), ctx, meta["at"],
                                              self.tags, meta["cond"])
        self.armed_at = meta["at"] if meta is not None else 0

    def _save(self) -> None:
        """One key for the manager: which condition is armed and the partition's props."""
        phase = None if self.cond is None else ("end" if self.active is not None else "start")
        self.state.put("meta", {
            "active": self.active, "next": self.next_id, "props": self.pprops,
            "tags": self.tags, "phase": phase, "at": self.armed_at,
            "cond": self.cond.dump() if self.cond is not None else None})

    def _arm_start(self, now_ms: int) -> list[Change]:
        self.armed_at = now_ms
        self.cond = self.spec.start.arm(self.state.child("start"), self.ctx, now_ms, {})
        fired = self.cond.fires_now()
        if fired is not None:
            return self._start(fired, now_ms)
        self._save()
        return []

    def _start(self, fired: Fired, now_ms: int, exclude: bool = False) -> list[Change]:
        pid = self.next_id
        self.next_id += 1
        self.active = pid
        tags = _tags(fired)
        self.tags = tags
        self.state.child("start").clear()
        self.armed_at = now_ms
        self.cond = self.spec.end.arm(self.state.child("end"), self.ctx, now_ms, tags)
        self.pprops = _builtin(self.name, pid, now_ms, self.cond, tags)
        self._save()
        return [Change("start", pid, exclude)]

    def _end(self, now_ms: int) -> list[Change]:
        pid = self.active
        self.active = None
        self.state.child("end").clear()
        return [Change("end", pid), *self._arm_start(now_ms)]

    def deploy(self, now_ms: int) -> list[Change]:
        if self.restored:
            return []
        start = self.spec.start
        if isinstance(start, CondCrontabSpec) and _crontab_inside(start, self.spec.end, now_ms):
            return self._start({}, now_ms)
        return self._arm_start(now_ms)

    def on_event(self, type_name: str, event: Row, now_ms: int) -> list[Change]:
        if self.cond is None:
            return []
        fired = self.cond.on_event(type_name, event, now_ms)
        if fired is None:
            return []
        if self.active is None:
            return self._start(fired, now_ms, exclude=not self.cond.inclusive)
        self.pprops.update(_tags(fired))
        return self._end(now_ms)

    def on_time(self, now_ms: int) -> list[Change]:
        if self.cond is None:
            return []
        fired = self.cond.on_time(now_ms)
        if fired is None:
            self._save()
            return []
        if self.active is None:
            return self._start(fired, now_ms)
        self.pprops.update(_tags(fired))
        return self._end(now_ms)

    def next_timer(self) -> int | None:
        return self.cond.next_timer() if self.cond is not None else None

    def can_skip(self) -> bool:
        """Whether ``skip_to`` can jump this context's timers: ``start @now`` or ``start
        after X`` with ``end after Y`` (the partitions follow each other every X + Y)."""
        start = self.spec.start
        end_ms = _after_ms(self.spec.end)
        return (end_ms is not None and end_ms > 0
                and (isinstance(start, CondNowSpec) or _after_ms(start) is not None))

    def skip_to(self, limit: int) -> Timed:
        """Every start and end due before ``limit`` at once, for an idle runtime whose
        partitions see nothing: the partition live now ends, those that would start and
        end before ``limit`` only take their ids, the one live at ``limit`` starts (at
        its own start time).  Same state as ``on_time`` at each due time."""
        x = _after_ms(self.spec.start) or 0
        y = _after_ms(self.spec.end) or 0
        out: Timed = []
        if self.active is not None:
            e = self.next_timer()
            if e is None or e >= limit:
                return out
            out.append((e, Change("end", self.active)))
            self.active = None
            self.state.child("end").clear()
            self.armed_at = e
            self.cond = self.spec.start.arm(self.state.child("start"), self.ctx, e, {})
            s0 = e + x
        else:
            due = self.next_timer()
            if due is None:
                return out
            s0 = due
        if s0 >= limit:
            self._save()
            return out
        j = (limit - 1 - s0) // (x + y)  # the last start before limit
        s_j = s0 + j * (x + y)
        self.next_id += j
        if s_j + y < limit:  # that one ended too; the start condition is armed again
            self.next_id += 1
            self.armed_at = s_j + y
            self.cond = self.spec.start.arm(self.state.child("start"), self.ctx, s_j + y, {})
            self._save()
            return out
        return out + [(s_j, ch) for ch in self._start({}, s_j)]

    def route(self, type_name: str, event: Row, now_ms: int) -> list[Pid]:
        return [self.active] if self.active is not None else []

    def props(self, pid: Pid) -> dict[str, Any]:
        return self.pprops

    def live(self) -> list[Pid]:
        return [self.active] if self.active is not None else []


@dataclass(frozen=True)
class OverlappingSpec:
    """``initiated by <cond> terminated by <cond>``."""

    name: str
    initiated: Any
    terminated: Any
    distinct: tuple = ()

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> OverlappingManager:
        return OverlappingManager(self, state, ctx)

    def describe(self) -> str:
        return (f"overlapping initiated {self.initiated.describe()} "
                f"terminated {self.terminated.describe()}")

    def types(self) -> frozenset[str]:
        return self.initiated.types() | self.terminated.types()


class OverlappingManager(Manager):
    """A partition per initiation, each ended by its own terminating condition."""

    has_end_condition = True
    """Partitions end on conditions (``@Priority`` may order statements first)."""

    def __init__(self, spec: OverlappingSpec, state: StateNamespace,
                 ctx: PartitionCtx) -> None:
        self.spec = spec
        self.name = spec.name
        self.state = state
        self.ctx = ctx
        self.next_id = 0
        self.init: CondInstance | None = None
        self.parts: dict[int, tuple[CondInstance, dict[str, Any]]] = {}
        self.distinct_seen: dict[str, int] = {}
        self.restored = False
        meta = state.get("meta")
        if meta is not None:
            self.restored = True
            self.next_id = meta["next"]
            self.distinct_seen = meta["distinct"]
            self.init = spec.initiated.arm(state.child("init"), ctx, meta["at"], {},
                                           meta["init"])
            for k, rec in sorted(((k, v) for k, v in state.items() if k != "meta"),
                                 key=lambda kv: kv[0][1]):
                pid = k[1]
                cond = spec.terminated.arm(state.child(("t", pid)), ctx, rec["at"],
                                           rec["tags"], rec["cond"])
                self.parts[pid] = (cond, rec["props"])
        self.init_at = meta["at"] if meta is not None else 0

    def _save_meta(self) -> None:
        self.state.put("meta", {"next": self.next_id, "distinct": self.distinct_seen,
                                "at": self.init_at,
                                "init": self.init.dump() if self.init is not None else None})

    def _save_part(self, pid: int, at: int, tags: dict[str, Any]) -> None:
        cond, props = self.parts[pid]
        self.state.put(("p", pid), {"props": props, "tags": tags, "at": at,
                                    "cond": cond.dump()})

    def deploy(self, now_ms: int) -> list[Change]:
        if self.restored:
            return []
        self.init_at = now_ms
        self.init = self.spec.initiated.arm(self.state.child("init"), self.ctx, now_ms, {})
        fired = self.init.fires_now()
        changes = self._start(fired, now_ms) if fired is not None else []
        self._save_meta()
        return changes

    def _start(self, fired: Fired, now_ms: int, exclude: bool = False) -> list[Change]:
        tags = _tags(fired)
        if self.spec.distinct:
            key = repr([d((fired.get("\x00event"), tags), self.ctx) for d in self.spec.distinct])
            if key in self.distinct_seen:
                return []
        else:
            key = None
        pid = self.next_id
        self.next_id += 1
        cond = self.spec.terminated.arm(self.state.child(("t", pid)), self.ctx, now_ms, tags)
        props = _builtin(self.name, pid, now_ms, cond, tags)
        if key is not None:
            self.distinct_seen[key] = pid
            props["\x00distinct"] = key
        self.parts[pid] = (cond, props)
        self._save_part(pid, now_ms, tags)
        self._save_meta()
        return [Change("start", pid, exclude)]

    def _end(self, pid: int, now_ms: int) -> Change:
        cond, props = self.parts.pop(pid)
        self.state.child(("t", pid)).clear()
        self.state.delete(("p", pid))
        key = props.get("\x00distinct")
        if key is not None:
            self.distinct_seen.pop(key, None)
        return Change("end", pid)

    def on_event(self, type_name: str, event: Row, now_ms: int) -> list[Change]:
        changes: list[Change] = []
        for pid, (cond, props) in list(self.parts.items()):
            fired = cond.on_event(type_name, event, now_ms)
            if fired is not None:
                props.update(_tags(fired))
                changes.append(self._end(pid, now_ms))
        if self.init is not None:
            fired = self.init.on_event(type_name, event, now_ms)
            if fired is not None:
                changes += self._start(fired, now_ms, exclude=not self.init.inclusive)
        if changes:
            self._save_meta()
        return changes

    def on_time(self, now_ms: int) -> list[Change]:
        changes: list[Change] = []
        for pid, (cond, _) in list(self.parts.items()):
            t = cond.next_timer()
            if t is not None and t <= now_ms and cond.on_time(now_ms) is not None:
                changes.append(self._end(pid, now_ms))
        if self.init is not None:
            t = self.init.next_timer()
            if t is not None and t <= now_ms:
                fired = self.init.on_time(now_ms)
                if fired is not None:
                    changes += self._start(fired, now_ms)
        self._save_meta()
        return changes

    def next_timer(self) -> int | None:
        due = [c.next_timer() for c, _ in self.parts.values()]
        if self.init is not None:
            due.append(self.init.next_timer())
        due2 = [d for d in due if d is not None]
        return min(due2) if due2 else None

    def can_skip(self) -> bool:
        """Whether ``skip_to`` can jump this context's timers: ``terminated after D`` with
        ``initiated by pattern [every timer:interval(P)]`` (or ``after X``), not distinct."""
        init = self.spec.initiated
        end_ms = _after_ms(self.spec.terminated)
        return (end_ms is not None and end_ms > 0 and not self.spec.distinct
                and (_periodic_ms(init) is not None or _after_ms(init) is not None))

    def skip_to(self, limit: int) -> Timed:
        """Every initiation and termination due before ``limit`` at once, for an idle
        runtime whose partitions see nothing: live partitions end at their due times,
        partitions initiated and terminated before ``limit`` only take their ids, those
        still live at ``limit`` start at their own initiation times."""
        d = _after_ms(self.spec.terminated) or 0
        steps: list[tuple[int, int, int]] = []  # (time, 0 end | 1 start, pid or index)
        for pid, (cond, _) in self.parts.items():
            t = cond.next_timer()
            if t is not None and t < limit:
                steps.append((t, 0, pid))
        a = self.init.next_timer() if self.init is not None else None
        period = _periodic_ms(self.spec.initiated)
        n = 0
        if a is not None and a < limit:
            n = 1 if period is None else (limit - 1 - a) // period + 1
            step = period or 0
            first_live = 0 if step == 0 else max(0, -((a + d - limit) // step))
            steps += [(a + j * step, 1, j) for j in range(first_live, n)]
        steps.sort(key=lambda s: (s[0], s[1]))
        base = self.next_id
        out: Timed = []
        for t, kind, ref in steps:
            if kind == 0:
                out.append((t, self._end(ref, t)))
            else:
                self.next_id = base + ref
                out += [(t, ch) for ch in self._start({}, t)]
        if n:
            self.next_id = base + n
            assert a is not None
            if period is None:
                self.init.on_time(a)  # type: ignore[union-attr]  # fires once
            else:
                last = a + (n - 1) * period
                self.init_at = last
                self.init = self.spec.initiated.arm(self.state.child("init"), self.ctx, last, {})
        self._save_meta()
        return out

    def route(self, type_name: str, event: Row, now_ms: int) -> list[Pid]:
        return list(self.parts)

    def props(self, pid: Pid) -> dict[str, Any]:
        part = self.parts.get(pid)
        return part[1] if part is not None else {"name": self.name, "id": pid}

    def live(self) -> list[Pid]:
        return list(self.parts)


__all__ = ["NonOverlappingSpec", "OverlappingSpec", "CondNowSpec"]

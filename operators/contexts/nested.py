"""Nested contexts (000 §4.3): the outer context controls the lifecycle of the inner one.

Each outer partition owns its own inner manager, created when the outer partition starts
and dropped (with every inner partition) when it ends, so a keyed context nested in a
temporal one holds no state outside the temporal partition.  Partition ids are tuples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from operators.base import PartitionCtx, Row, StateNamespace
from operators.contexts.managers import Change, Manager, Pid


@dataclass(frozen=True)
class NestedSpec:
    """``create context X context A ..., context B ...``."""

    name: str
    outer: Any
    inner: Any

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> NestedManager:
        return NestedManager(self, state, ctx)

    def describe(self) -> str:
        return f"nested [{self.outer.name}: {self.outer.describe()}] > " \
               f"[{self.inner.name}: {self.inner.describe()}]"

    def types(self) -> frozenset[str]:
        return self.outer.types() | self.inner.types()


class NestedManager(Manager):
    """Outer partitions each hold an inner manager."""

    @property
    def has_end_condition(self) -> bool:
        """Partitions end on conditions of a temporal context at some level."""
        return _nested_ends(self.spec)

    def __init__(self, spec: NestedSpec, state: StateNamespace, ctx: PartitionCtx) -> None:
        self.spec = spec
        self.name = spec.name
        self.state = state
        self.ctx = ctx
        self.outer = spec.outer.build(state.child("outer"), ctx)
        self.inner: dict[Pid, Manager] = {}
        for opid in self.outer.live():
            # rebuilt runtime: every live outer partition gets its inner manager back
            self.inner[opid] = spec.inner.build(state.child(("inner", _enc(opid))), ctx)

    def _apply_outer(self, changes: list[Change], now_ms: int) -> list[Change]:
        out: list[Change] = []
        for ch in changes:
            if ch.kind == "end":
                inner = self.inner.pop(ch.pid, None)
                if inner is not None:
                    out += [Change("end", (ch.pid, p)) for p in inner.live()]
                self.state.child(("inner", _enc(ch.pid))).clear()
            else:
                inner = self.spec.inner.build(
                    self.state.child(("inner", _enc(ch.pid))), self.ctx)
                self.inner[ch.pid] = inner
                out += [Change(c.kind, (ch.pid, c.pid), c.exclude)
                        for c in inner.deploy(now_ms)]
        return out

    def deploy(self, now_ms: int) -> list[Change]:
        return self._apply_outer(self.outer.deploy(now_ms), now_ms)

    def on_event(self, type_name: str, event: Row, now_ms: int) -> list[Change]:
        out = self._apply_outer(self.outer.on_event(type_name, event, now_ms), now_ms)
        for opid, inner in self.inner.items():
            out += [Change(c.kind, (opid, c.pid), c.exclude)
                    for c in inner.on_event(type_name, event, now_ms)]
        return out

    def on_time(self, now_ms: int) -> list[Change]:
        out: list[Change] = []
        t = self.outer.next_timer()
        if t is not None and t <= now_ms:
            out += self._apply_outer(self.outer.on_time(now_ms), now_ms)
        for opid, inner in self.inner.items():
            t = inner.next_timer()
            if t is not None and t <= now_ms:
                out += [Change(c.kind, (opid, c.pid), c.exclude)
                        for c in inner.on_time(now_ms)]
        return out

    def next_timer(self) -> int | None:
        due = [self.outer.next_timer(), *(m.next_timer() for m in self.inner.values())]
        due2 = [d for d in due if d is not None]
        return min(due2) if due2 else None

    def route(self, type_name: str, event: Row, now_ms: int) -> list[Pid]:
        out: list[Pid] = []
        for opid in self.outer.route(type_name, event, now_ms):
            inner = self.inner.get(opid)
            if inner is not None:
                out += [(opid, p) for p in inner.route(type_name, event, now_ms)]
        return out

    def props(self, pid: Pid) -> dict[str, Any]:
        opid, ipid = pid
        outer = self.outer.props(opid)
        inner_mgr = self.inner.get(opid)
        inner = inner_mgr.props(ipid) if inner_mgr is not None else {}
        return {**outer, **inner, "name": self.name, "id": pid,
                self.spec.outer.name: outer, self.spec.inner.name: inner}

    def live(self) -> list[Pid]:
        return [(o, i) for o, m in self.inner.items() for i in m.live()]


def _enc(pid: Pid) -> Any:
    return repr(pid) if isinstance(pid, tuple) else pid


def _nested_ends(spec: NestedSpec) -> bool:
    """Whether a nested spec has a temporal context at any level."""
    from operators.contexts.temporal import NonOverlappingSpec, OverlappingSpec

    return any(isinstance(x, NonOverlappingSpec | OverlappingSpec)
               or (isinstance(x, NestedSpec) and _nested_ends(x))
               for x in (spec.outer, spec.inner))

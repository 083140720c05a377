"""The stream's memory for ``prior(n, x)``: the last events that arrived, whatever the
data window keeps (Esper ref. "Single-row functions", prior).

Each arriving event (after the stream's filter) gets, under one hidden key per prior
call, the value of that call: x of the n-th event before it.  The state is the list of
the last ``depth`` events, newest first, so per-event cost is bounded by the largest n.
"""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Expr, PartitionCtx, Row, StateNamespace


@dataclass(frozen=True)
class PriorSpec:
    """The prior calls of one statement: (hidden key, n, x) with x None for the event."""

    items: tuple[tuple[str, int, Expr | None], ...]

    @property
    def depth(self) -> int:
        """How many earlier events the stream must remember."""
        return max((n for _, n, _ in self.items), default=0)

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> Prior:
        return Prior(self, state, ctx)

    def describe(self) -> str:
        return f"prior(depth={self.depth})"


class Prior:
    """One context partition's recent events."""

    __slots__ = ("items", "depth", "state", "ctx", "recent")

    def __init__(self, spec: PriorSpec, state: StateNamespace, ctx: PartitionCtx) -> None:
        self.items = spec.items
        self.depth = spec.depth
        self.state = state
        self.ctx = ctx
        self.recent: list[Row] = list(state.get("recent") or ())

    def stamp(self, event: Row) -> Row:
        """A copy of ``event`` carrying its prior values; remembers the event."""
        out = dict(event)
        recent = self.recent
        ctx = self.ctx
        for key, n, value in self.items:
            src = event if n == 0 else (recent[n - 1] if n <= len(recent) else None)
            if src is None:
                out[key] = None
            else:
                out[key] = dict(src) if value is None else value(src, ctx)
        if self.depth:
            self.recent = [event, *recent[:self.depth - 1]]
            self.state.put("recent", self.recent)
        return out


@dataclass(frozen=True)
class MatchPriorSpec:
    """The prior calls of a pattern statement: (hidden key, n, x, tag); x is read from
    the event of ``tag`` in the n-th match before the current one."""

    items: tuple[tuple[str, int, Expr | None, str], ...]

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> MatchPrior:
        return MatchPrior(self, state, ctx)


class MatchPrior:
    """One context partition's recent pattern matches."""

    __slots__ = ("items", "depth", "state", "ctx", "recent")

    def __init__(self, spec: MatchPriorSpec, state: StateNamespace,
                 ctx: PartitionCtx) -> None:
        self.items = spec.items
        self.depth = max((n for _, n, _, _ in spec.items), default=0)
        self.state = state
        self.ctx = ctx
        self.recent: list[Row] = list(state.get("recent") or ())

    def stamp(self, match: Row) -> Row:
        """A copy of ``match`` whose tagged events carry their prior values."""
        out = dict(match)
        recent = self.recent
        for key, n, value, tag in self.items:
            src = match if n == 0 else (recent[n - 1] if n <= len(recent) else None)
            ev = None if src is None else src.get(tag)
            v = None if ev is None else (dict(ev) if value is None else value(ev, self.ctx))
            own = out.get(tag)
            if own is not None:
                out[tag] = {**own, key: v}
        if self.depth:
            self.recent = [match, *recent[:self.depth - 1]]
            self.state.put("recent", self.recent)
        return out

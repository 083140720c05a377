"""Aggregations inside an expiry expression (Esper ref. 14.3.12/14.3.13), kept in state."""

from __future__ import annotations

from typing import Any

from operators.base import PartitionCtx, Row, StateNamespace


class ExpiryAggregates:
    """The aggregates named by ``#expr``/``#expr_batch``: entered and left with the window.

    ``specs`` holds ``(key, aggregator, value_expr)``; the aggregator follows
    operators.aggregates (initial/enter/leave/result, JSON-shaped state).  All states
    are written under one key, once per update.
    """

    def __init__(self, specs: tuple, state: StateNamespace, ctx: PartitionCtx) -> None:
        self.specs = specs
        self.state = state
        self.ctx = ctx
        stored = state.get("aggs") if specs else None
        self.states: list[Any] = (
            stored if stored is not None else [a.initial() for _, a, _ in specs]
        )
        self.dirty = False

    def _value(self, value_expr: Any, row: Row) -> Any:
        return value_expr(row, self.ctx) if value_expr is not None else None

    def enter(self, row: Row) -> None:
        """A row entered the window."""
        for i, (_, agg, value_expr) in enumerate(self.specs):
            self.states[i] = agg.enter(self.states[i], self._value(value_expr, row))
        self.dirty = bool(self.specs)

    def leave(self, row: Row) -> None:
        """A row left the window."""
        for i, (_, agg, value_expr) in enumerate(self.specs):
            self.states[i] = agg.leave(self.states[i], self._value(value_expr, row))
        self.dirty = bool(self.specs)

    def reset(self) -> None:
        """Back to the initial state (window emptied, batch posted)."""
        self.states = [a.initial() for _, a, _ in self.specs]
        self.dirty = bool(self.specs)

    def results(self, env: dict[str, Any]) -> None:
        """Add each aggregate's current result to the expression's env row."""
        for (key, agg, _), st in zip(self.specs, self.states, strict=True):
            env[key] = agg.result(st)

    def save(self) -> None:
        """Persist the states if they changed since the last save."""
        if self.dirty:
            self.state.put("aggs", self.states)
            self.dirty = False

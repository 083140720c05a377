"""Expiry-expression window (Esper 14.3.12): removes oldest events while the expression is false."""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, Expr, PartitionCtx, Rows, StateNamespace
from operators.windows.common import DEFAULT_ENV, BuildEnv, RowRefs, WindowSpec
from operators.windows.expiry_aggregates import ExpiryAggregates
from operators.windows.fifo import FifoWindow


class ExpiryExprWindow(FifoWindow):
    """Rows with their arrival time; the expression is checked from the oldest row on."""

    def __init__(
        self, expr: Expr, aggregates: tuple, state: StateNamespace, refs: RowRefs, ctx: PartitionCtx
    ) -> None:
        super().__init__(state, refs, stamped=True)
        self.expr = expr
        self.ctx = ctx
        self.aggs = ExpiryAggregates(aggregates, state, ctx)
        self._recheck_ns = state.child("recheck")
        self._recheck: int | None = self._recheck_ns.get("at")
        """When a variable change's re-check is due (see ``on_variables_changed``)."""

    def _passes(self, expired_count: int) -> bool:
        """Evaluate the expression for the oldest row; null counts as false."""
        log = self.log
        oldest = log.rows[0]
        env = dict(oldest)  # the expression may name the checked event's properties directly
        env["current_count"] = len(log.rows)
        env["expired_count"] = expired_count
        env["newest_event"] = log.rows[-1]
        env["oldest_event"] = oldest
        env["newest_timestamp"] = log.stamps[-1]
        env["oldest_timestamp"] = log.stamps[0]
        env["view_reference"] = self
        self.aggs.results(env)
        return bool(self.expr(env, self.ctx))

    def _expire(self, out: Rows) -> Rows:
        """Remove oldest rows while the expression is false (it may remove the arrival)."""
        log = self.log
        expired = 0
        while log.rows:
            if self._passes(expired):
                break
            row = log.popleft()
            self.aggs.leave(row)
            out.append(row)
            expired += 1
            if not log.rows:
                self.aggs.reset()
        self.aggs.save()
        return out

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Add arrivals (stamped with runtime time), apply upstream removals, then expire."""
        out_old: Rows = []
        for row in new:
            self.log.append(row, now_ms)
            self.aggs.enter(row)
        for row in old:
            stored = self.log.remove_row(row)
            if stored is not None:
                self.aggs.leave(stored)
                out_old.append(stored)
        return new, self._expire(out_old)

    def on_variables_changed(self, now_ms: int) -> Emit:
        """Esper ref. 14.3.12: a variable change re-applies the expression from the oldest
        event, at the next clock move (Esper schedules the re-check for the current time;
        an event coming first checks the expression as it arrives)."""
        if self._recheck is None:
            self._recheck = now_ms
            self._recheck_ns.put("at", now_ms)
        return [], []

    def next_timer(self) -> int | None:
        return self._recheck

    def on_time(self, now_ms: int) -> Emit:
        if self._recheck is None or now_ms < self._recheck:
            return [], []
        self._recheck = None
        self._recheck_ns.delete("at")
        return [], self._expire([])


@dataclass(frozen=True)
class ExpiryExprSpec(WindowSpec):
    """``expr(expiry expression)``: ``expr(env, ctx)`` over the built-in properties."""

    expr: Expr
    aggregates: tuple = ()
    name: str = "expr"
    params_text: tuple[str, ...] = ()

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> ExpiryExprWindow:
        """An expiry-expression window over ``state``."""
        return ExpiryExprWindow(self.expr, self.aggregates, state, (env or DEFAULT_ENV).refs, ctx)

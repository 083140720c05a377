"""Expiry-expression batch window (Esper 14.3.13): posts the batch when the expression is true."""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.batch import BatchWindow
from operators.windows.common import DEFAULT_ENV, BuildEnv, RowRefs, WindowSpec
from operators.windows.expiry_aggregates import ExpiryAggregates


class ExpiryExprBatchWindow(BatchWindow):
    """Collects rows; the expression is checked for each arriving row (and on removals)."""

    def __init__(
        self,
        expr: Expr,
        include_trigger: bool,
        aggregates: tuple,
        state: StateNamespace,
        refs: RowRefs,
        ctx: PartitionCtx,
    ) -> None:
        super().__init__(state, refs, stamped=True)
        self.expr = expr
        self.include_trigger = include_trigger
        self.ctx = ctx
        self.aggs = ExpiryAggregates(aggregates, state, ctx)

    def _fires(self, arriving: Row | None) -> bool:
        """Evaluate with the arriving row's properties (none when checking after a removal)."""
        b = self.batches
        log = b.log
        n = b.current_count()
        env = dict(arriving) if arriving is not None else {}
        env["current_count"] = n
        env["expired_count"] = 0
        if n:
            env["oldest_event"] = log.rows[b.n_last]
            env["newest_event"] = log.rows[-1]
            env["oldest_timestamp"] = log.stamps[b.n_last]
            env["newest_timestamp"] = log.stamps[-1]
        else:
            env["oldest_event"] = env["newest_event"] = None
            env["oldest_timestamp"] = env["newest_timestamp"] = None
        env["view_reference"] = self
        self.aggs.results(env)
        return bool(self.expr(env, self.ctx))

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Add arrivals one by one until the expression fires, then post the batch."""
        b = self.batches
        removed: Rows = []
        fire = False
        in_batch = -1  # rows of the current batch that go out (-1: all of them)
        if old:
            for row in old:
                stored, in_last = b.remove_row(row)
                if stored is None:
                    continue
                if in_last:
                    removed.append(stored)
                else:
                    self.aggs.leave(stored)
            fire = self._fires(None)
        for row in new:
            b.add(row, now_ms)
            self.aggs.enter(row)
            if not fire:
                fire = self._fires(row)
                if fire and not self.include_trigger:
                    # Esper 14.3.13: include_triggering_event false: trigger goes to the next batch.
                    in_batch = b.current_count() - 1
        if not fire:
            self.aggs.save()
            return [], removed
        keep = 0 if in_batch < 0 else b.current_count() - in_batch
        released, previous = b.release(keep)
        self.aggs.reset()
        for row in b.current():
            self.aggs.enter(row)
        self.aggs.save()
        old_out = removed + previous
        if released or old_out:
            return released, old_out
        return [], []


@dataclass(frozen=True)
class ExpiryExprBatchSpec(WindowSpec):
    """``expr_batch(expiry expression [, include_triggering_event])``."""

    expr: Expr
    include_trigger: bool = True
    aggregates: tuple = ()
    name: str = "expr_batch"
    params_text: tuple[str, ...] = ()
    is_batch: bool = True

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> ExpiryExprBatchWindow:
        """An expiry-expression batch window over ``state``."""
        return ExpiryExprBatchWindow(
            self.expr, self.include_trigger, self.aggregates, state, (env or DEFAULT_ENV).refs, ctx
        )

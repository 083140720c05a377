"""Externally-timed batch window (Esper ref. 14.3.6): tumbles by an event timestamp."""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, Expr, PartitionCtx, Rows, StateNamespace
from operators.windows.batch import BatchWindow
from operators.windows.common import (
    DEFAULT_ENV,
    BuildEnv,
    Deferred,
    RowRefs,
    WindowSpec,
    remove_from_batches,
    resolve,
    timestamped,
)


class ExtTimedBatchWindow(BatchWindow):
    """Batches [start, start + period) by timestamp; an arrival beyond the end releases."""

    releases_before_clearing = False
    """Esper's ext_timed_batch starts the next batch with the arriving event before it
    posts the one it releases: a snapshot then sees the new batch."""

    def __init__(
        self,
        ts: Expr,
        period: int,
        reference: int | None,
        state: StateNamespace,
        refs: RowRefs,
        ctx: PartitionCtx,
    ) -> None:
        super().__init__(state, refs)
        self.ts = ts
        self.period = period
        self.reference = reference
        self.ctx = ctx
        self.end: int | None = state.get("end")

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Only arrivals move this window, never runtime time (window_ext_timed_batch)."""
        batches = self.batches
        removed = remove_from_batches(batches, old) if old else []
        released: Rows = []
        previous: Rows = []
        released_any = False
        end = self.end
        period = self.period
        # an event whose timestamp is null never enters the batch (see ``timestamped``)
        for row, ts in timestamped(self.ts, new, self.ctx):
            if end is None:
                # Esper 14.3.6: the first event's timestamp is the reference point unless given.
                ref = ts if self.reference is None else self.reference
                end = ref + ((ts - ref) // period + 1) * period
            elif ts >= end:
                got, prior = batches.release(merge=released_any)
                released.extend(got)
                if not released_any:
                    previous = prior
                released_any = True
                # As Esper does: empty intervals skipped over are not posted.
                end = end + ((ts - end) // period + 1) * period
            batches.add(row)
        if end != self.end:
            self.end = end
            self.state.put("end", end)
        if released_any:
            return released, removed + previous
        return [], removed


@dataclass(frozen=True)
class ExtTimedBatchSpec(WindowSpec):
    """``ext_timed_batch(timestamp_expression, period [, reference point])``."""

    ts: Expr
    period: int | Deferred
    reference: int | None = None
    name: str = "ext_timed_batch"
    params_text: tuple[str, ...] = ()
    is_batch: bool = True

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> ExtTimedBatchWindow:
        """An externally-timed batch window over ``state``."""
        return ExtTimedBatchWindow(
            self.ts,
            resolve(self.period, ctx),
            self.reference,
            state,
            (env or DEFAULT_ENV).refs,
            ctx,
        )

"""Externally-timed window (Esper ref. 14.3.4): slides by an event timestamp, never by the clock."""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, Expr, PartitionCtx, Rows, StateNamespace
from operators.windows.common import (
    DEFAULT_ENV,
    BuildEnv,
    Deferred,
    RowRefs,
    WindowSpec,
    remove_from_log,
    resolve,
    timestamped,
)
from operators.windows.fifo import FifoWindow


class ExtTimedWindow(FifoWindow):
    """Rows stamped with their timestamp expression; arrivals expire the old tail."""

    def __init__(
        self, ts: Expr, period: int, state: StateNamespace, refs: RowRefs, ctx: PartitionCtx
    ) -> None:
        super().__init__(state, refs, stamped=True)
        self.ts = ts
        self.period = period
        self.ctx = ctx

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Add rows, then remove tail-first while newest - oldest >= period.

        Esper ref. 14.3.4 says 'larger than the period'; an exact difference of one period is
        treated like the time window (an event leaves exactly one period later).  An event
        whose timestamp is null never enters (see ``timestamped``).
        """
        log = self.log
        expired = remove_from_log(log, old) if old else []
        if not new:
            return new, expired
        entering = timestamped(self.ts, new, self.ctx)
        if not entering:
            return [], expired
        for row, ts in entering:
            log.append(row, ts)
        limit = entering[-1][1] - self.period
        stamps = log.stamps
        while stamps and stamps[0] <= limit:
            expired.append(log.popleft())
        if len(entering) == len(new):
            return new, expired
        return [row for row, _ in entering], expired


@dataclass(frozen=True)
class ExtTimedSpec(WindowSpec):
    """``ext_timed(timestamp_expression, period)``."""

    ts: Expr
    period: int | Deferred
    name: str = "ext_timed"
    params_text: tuple[str, ...] = ()

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> ExtTimedWindow:
        """An externally-timed window over ``state``."""
        return ExtTimedWindow(
            self.ts, resolve(self.period, ctx), state, (env or DEFAULT_ENV).refs, ctx
        )

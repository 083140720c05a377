"""Time-accumulating window (001 §14.3.8): everything expires after ``period`` of quiet."""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, PartitionCtx, Rows, StateNamespace
from operators.windows.common import (
    DEFAULT_ENV,
    BuildEnv,
    Deferred,
    RowRefs,
    WindowSpec,
    remove_from_log,
    resolve,
)
from operators.windows.fifo import FifoWindow


class TimeAccumWindow(FifoWindow):
    """Posts arrivals at once; all rows leave together ``period`` after the last arrival."""

    in_place_update = True

    def __init__(self, period: int, state: StateNamespace, refs: RowRefs) -> None:
        super().__init__(state, refs, stamped=True)
        self.period = period

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Append with the arrival time; each arrival pushes the expiry out."""
        removed = remove_from_log(self.log, old) if old else []
        for row in new:
            self.log.append(row, now_ms)
        return new, removed

    def on_time(self, now_ms: int) -> Emit:
        """No arrival for ``period``: the whole window leaves, oldest first."""
        due = self.next_timer()
        if due is None or now_ms < due:
            return [], []
        return [], self.log.clear()

    def next_timer(self) -> int | None:
        """Newest arrival + period (the newest stamp is the last arrival's time)."""
        stamps = self.log.stamps
        return stamps[-1] + self.period if stamps else None


@dataclass(frozen=True)
class TimeAccumSpec(WindowSpec):
    """``time_accum(period)``."""

    oldest_first = True

    period: int | Deferred
    name: str = "time_accum"
    params_text: tuple[str, ...] = ()

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> TimeAccumWindow:
        """A time-accumulating window over ``state``."""
        return TimeAccumWindow(resolve(self.period, ctx), state, (env or DEFAULT_ENV).refs)

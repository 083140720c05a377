"""Time-accumulating window (Esper ref. 14.3.8): everything expires after ``period`` of quiet."""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, PartitionCtx, StateNamespace
from operators.windows.common import DEFAULT_ENV, BuildEnv, resolve
from operators.windows.time import TimeSpec, TimeWindow


class TimeAccumWindow(TimeWindow):
    """A time window whose rows all leave together ``period`` after the last arrival
    (each arrival pushes the expiry out)."""

    posts_before_clearing = True
    """Esper ref. 14.3.8 time-accumulating window: Esper's view posts the flushed rows as
    the remove stream and only then clears, so an output snapshot taken in that update
    still lists them."""

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
class TimeAccumSpec(TimeSpec):
    """``time_accum(period)``."""

    name: str = "time_accum"

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> TimeAccumWindow:
        """A time-accumulating window over ``state``."""
        return TimeAccumWindow(resolve(self.period, ctx), state, (env or DEFAULT_ENV).refs)

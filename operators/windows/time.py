"""Sliding time window (Esper ref. 14.3.3): rows expire ``period`` after their arrival."""

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


class TimeWindow(FifoWindow):
    """Rows stamped with their arrival time; an expiry timer at the oldest stamp + period."""


    def __init__(self, period: int, state: StateNamespace, refs: RowRefs) -> None:
        super().__init__(state, refs, stamped=True)
        self.period = period

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Arriving rows are posted at once (Esper ref. 2.4: W1 enters at t+4s)."""
        removed = remove_from_log(self, old) if old else []
        if len(new) == 1 and self._seqs is None:
            # RowLog.append(row, now_ms), inlined: rows numbered implicitly
            row = new[0]
            seq = self.next_seq
            self.next_seq = seq + 1
            self.rows.append(row)
            self.stamps.append(now_ms)
            if not self._own:
                self.ns.put_new(seq, [now_ms, row if self._inline else self.refs.dump(row)])
            return new, removed
        append = self.append
        for row in new:
            append(row, now_ms)
        return new, removed

    def on_time(self, now_ms: int) -> Emit:
        """Expire every row whose arrival + period <= now, together, as Esper fires them."""
        stamps = self.stamps
        limit = now_ms - self.period
        expired = []
        if self._seqs is None:
            # RowLog.popleft for each, inlined: rows numbered implicitly, oldest first
            rows = self.rows
            first = self.next_seq - len(rows)
            while stamps and stamps[0] <= limit:
                stamps.popleft()
                expired.append(rows.popleft())
            if not self._own:
                delete = self.ns.delete
                for seq in range(first, first + len(expired)):
                    delete(seq)
            return [], expired
        while stamps and stamps[0] <= limit:
            expired.append(self.popleft())
        return [], expired

    def next_timer(self) -> int | None:
        """Oldest arrival + period (Esper ref. 2.4: W1 arriving at t+4s leaves at t+8s)."""
        stamps = self.log.stamps
        return stamps[0] + self.period if stamps else None


@dataclass(frozen=True)
class TimeSpec(WindowSpec):
    """``time(period)``."""

    oldest_first = True

    period: int | Deferred
    name: str = "time"
    params_text: tuple[str, ...] = ()

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> TimeWindow:
        """A time window over ``state``."""
        return TimeWindow(resolve(self.period, ctx), state, (env or DEFAULT_ENV).refs)

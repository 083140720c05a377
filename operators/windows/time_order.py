"""Time-order window (Esper ref. 14.3.21) and time-to-live window (Esper ref. 14.3.22, period 0)."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.common import (
    DEFAULT_ENV,
    BuildEnv,
    Deferred,
    RowRefs,
    WindowSpec,
    WindowView,
    resolve,
    timestamped,
)


class TimeOrderWindow(WindowView):
    """Holds each event until runtime time reaches its timestamp + period; releases in ts order."""

    def __init__(
        self, ts: Expr, period: int, state: StateNamespace, refs: RowRefs, ctx: PartitionCtx
    ) -> None:
        self.ts = ts
        self.period = period
        self.ctx = ctx
        self.refs = refs
        self.ns = state.child("rows")
        self.heap: list[tuple[int, int, Row]] = []
        last = -1
        for seq, (ts_value, data) in self.ns.items():
            self.heap.append((ts_value, seq, refs.load(data)))
            last = seq
        heapq.heapify(self.heap)
        self.next_seq = last + 1

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Every arrival is on the insert stream; one already past the tail time leaves at once.

        Esper ref. 14.3.21: an event 'older than the tail-time' (ts + period <= now) is released
        immediately; Esper ref. 14.3.22: timetolive releases when ts <= now.  An event whose
        timestamp is null never enters and is posted on neither stream (see ``timestamped``).
        """
        out_old: Rows = []
        if old:
            self._remove(old, out_old)
        if not new:
            return new, out_old
        heap = self.heap
        entering = timestamped(self.ts, new, self.ctx)
        for row, ts in entering:
            if ts + self.period <= now_ms:
                out_old.append(row)
                continue
            seq = self.next_seq
            self.next_seq = seq + 1
            heapq.heappush(heap, (ts, seq, row))
            self.ns.put(seq, [ts, self.refs.dump(row)])
        if len(entering) == len(new):
            return new, out_old
        return [row for row, _ in entering], out_old

    def _remove(self, old: Rows, out: Rows) -> None:
        for row in old:
            idx = next((i for i, e in enumerate(self.heap) if e[2] is row), -1)
            if idx < 0:
                idx = next((i for i, e in enumerate(self.heap) if e[2] == row), -1)
            if idx >= 0:
                entry = self.heap.pop(idx)
                heapq.heapify(self.heap)
                self.ns.delete(entry[1])
                out.append(entry[2])

    def on_time(self, now_ms: int) -> Emit:
        """Release every held event with ts + period <= now, oldest timestamp first."""
        heap = self.heap
        limit = now_ms - self.period
        out: Rows = []
        while heap and heap[0][0] <= limit:
            ts, seq, row = heapq.heappop(heap)
            self.ns.delete(seq)
            out.append(row)
        return [], out

    def next_timer(self) -> int | None:
        """Smallest timestamp + period."""
        return self.heap[0][0] + self.period if self.heap else None

    def contents(self) -> list[Row]:
        """Held events in timestamp order."""
        return [e[2] for e in sorted(self.heap, key=lambda e: (e[0], e[1]))]

    def count(self, row: Row | None = None) -> int:
        """Number of held events."""
        return len(self.heap)

    def prev(self, i: int, row: Row | None = None) -> Row | None:
        """The i-th held event in timestamp order, oldest first: Esper reads a time-order
        window by index in its sort order, as a sorted window (not relative to the
        event)."""
        if not 0 <= i < len(self.heap):
            return None
        return heapq.nsmallest(i + 1, self.heap)[-1][2]

    def prevtail(self, i: int, row: Row | None = None) -> Row | None:
        """The i-th held event from the newest timestamp."""
        if not 0 <= i < len(self.heap):
            return None
        return heapq.nlargest(i + 1, self.heap)[-1][2]


@dataclass(frozen=True)
class TimeOrderSpec(WindowSpec):
    """``time_order(timestamp expression, period)``; ``timetolive(ts)`` is period 0."""

    ts: Expr
    period: int | Deferred
    name: str = "time_order"
    params_text: tuple[str, ...] = ()

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> TimeOrderWindow:
        """A time-order window over ``state``."""
        return TimeOrderWindow(
            self.ts, resolve(self.period, ctx), state, (env or DEFAULT_ENV).refs, ctx
        )

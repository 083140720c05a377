"""SPL timeInterval window panes (IBM Streams SPL), driven by the runtime clock as the watermark.

Panes are ``[offset + k*period, offset + k*period + interval)`` (SPL timeInterval:
left-closed, right-open).  A tuple enters every pane its event time falls in.  A pane triggers when
the watermark reaches its end, again on a later clock move if tuples arrived since, and
closes once the watermark is beyond end + discardAge (conformance spl_* notes).  A
trigger posts the pane's tuples with ``pane_start``/``pane_end`` as new rows, never old.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.common import BuildEnv, Deferred, WindowSpec, WindowView, resolve


class Pane:
    """One pane: its tuples (seq, row) and lifecycle flags."""

    __slots__ = ("rows", "triggered", "dirty", "mark")

    def __init__(self, triggered: bool, dirty: bool, mark: int) -> None:
        self.rows: list[tuple[int, Row]] = []
        self.triggered = triggered
        self.dirty = dirty
        self.mark = mark  # creation time (untriggered) or first insertion since the last trigger


class TimeIntervalView(WindowView):
    """Open panes by index k; a heap of the panes' next due times (trigger or close)."""

    def __init__(
        self,
        ts: Expr,
        interval: int,
        period: int,
        discard: int,
        offset: int,
        state: StateNamespace,
        ctx: PartitionCtx,
    ) -> None:
        self.ts = ts
        self.interval = interval
        self.period = period
        self.discard = discard
        self.offset = offset
        self.ctx = ctx
        self.rows_ns = state.child("r")
        self.meta_ns = state.child("p")
        self.panes: dict[int, Pane] = {}
        for k, (triggered, dirty, mark) in self.meta_ns.items():
            self.panes[k] = Pane(triggered, dirty, mark)
        last = -1
        for (k, seq), row in self.rows_ns.items():
            self.panes[k].rows.append((seq, row))
            last = max(last, seq)
        for pane in self.panes.values():
            pane.rows.sort(key=lambda e: e[0])
        self.next_seq = last + 1
        self.heap = [(self._due(k, p), k) for k, p in self.panes.items()]
        heapq.heapify(self.heap)

    def _bounds(self, k: int) -> tuple[int, int]:
        start = self.offset + k * self.period
        return start, start + self.interval

    def _due(self, k: int, pane: Pane) -> int:
        """When the pane next needs the clock: trigger, re-trigger, or close."""
        end = self._bounds(k)[1]
        if not pane.triggered:
            # SPL timeInterval: a pane triggers when the watermark becomes >= its end; a
            # pane created after that (late tuples only) triggers on the next watermark.
            return max(end, pane.mark + 1)
        if pane.dirty:
            # SPL timeInterval: 'triggers again on receiving a watermark if tuples have been
            # inserted since'.
            return pane.mark + 1
        # IBM Streams SPL timeInterval: closed once the watermark is beyond end + discardAge.
        return end + self.discard + 1

    def _save(self, k: int, pane: Pane) -> None:
        self.meta_ns.put(k, [pane.triggered, pane.dirty, pane.mark])
        heapq.heappush(self.heap, (self._due(k, pane), k))

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Insert each tuple into its open panes; closed panes ignore it.  Posts nothing."""
        period, interval = self.period, self.interval
        for row in new:
            ts = self.ts(row, self.ctx)
            if ts is None:
                continue
            rel = ts - self.offset
            for k in range((rel - interval) // period + 1, rel // period + 1):
                end = self.offset + k * period + interval
                if now_ms > end + self.discard:
                    continue  # closed: 'later tuples for it are ignored'
                pane = self.panes.get(k)
                if pane is None:
                    pane = self.panes[k] = Pane(False, False, now_ms)
                    self._save(k, pane)
                elif pane.triggered and not pane.dirty:
                    pane.dirty = True
                    pane.mark = now_ms
                    self._save(k, pane)
                seq = self.next_seq
                self.next_seq = seq + 1
                self.rows_ns.put((k, seq), row)
                pane.rows.append((seq, row))
        return [], []

    def _close(self, k: int) -> None:
        pane = self.panes.pop(k)
        for seq, _ in pane.rows:
            self.rows_ns.delete((k, seq))
        self.meta_ns.delete(k)

    fires_apart = True
    aggregates_each_post = True
    """Each pane's trigger is an update of its own, aggregated over that pane's tuples
    alone (as an SPL Aggregate operator computes over the triggering pane)."""

    def on_time(self, now_ms: int) -> Emit:
        """Every due pane's trigger in one update (see ``on_time_apart``)."""
        out: Rows = []
        for new, _ in self.on_time_apart(now_ms):
            out.extend(new)
        return out, []

    def on_time_apart(self, now_ms: int) -> Iterable[Emit]:
        """Trigger due panes in pane-end order (then insertion order), one update each;
        close aged panes."""
        heap = self.heap
        due_panes: set[int] = set()
        while heap and heap[0][0] <= now_ms:
            due, k = heapq.heappop(heap)
            pane = self.panes.get(k)
            if pane is not None and self._due(k, pane) == due:
                due_panes.add(k)
        posts: list[Emit] = []
        for k in sorted(due_panes):
            pane = self.panes[k]
            if pane.triggered and not pane.dirty:
                self._close(k)
                continue
            start, end = self._bounds(k)
            posts.append(([{**row, "pane_start": start, "pane_end": end}
                           for _, row in pane.rows], []))
            pane.triggered = True
            pane.dirty = False
            if end + self.discard < now_ms:
                self._close(k)  # triggered on the very watermark that also closes it
            else:
                self._save(k, pane)
        return posts

    def next_timer(self) -> int | None:
        """The earliest live due time (stale heap entries are dropped)."""
        heap = self.heap
        while heap:
            due, k = heap[0]
            pane = self.panes.get(k)
            if pane is not None and self._due(k, pane) == due:
                return due
            heapq.heappop(heap)
        return None

    def contents(self) -> list[Row]:
        """Distinct tuples of the open panes in arrival order."""
        seen: dict[int, Row] = {}
        for pane in self.panes.values():
            for seq, row in pane.rows:
                seen[seq] = row
        return [seen[s] for s in sorted(seen)]


@dataclass(frozen=True)
class TimeIntervalSpec(WindowSpec):
    """``time_interval(ts, intervalDuration, creationPeriod, discardAge [, intervalOffset])``."""

    ts: Expr = None  # type: ignore[assignment]
    interval: int | Deferred = 0
    period: int | Deferred = 0
    discard: int | Deferred = 0
    offset: int | Deferred = 0
    name: str = "time_interval"
    params_text: tuple[str, ...] = ()
    combinable: bool = False

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> TimeIntervalView:
        """Panes over ``state``; every open pane is restored."""
        period = resolve(self.period, ctx)
        if period <= 0 or resolve(self.interval, ctx) <= 0:
            raise ValueError("time_interval needs a positive interval duration and creation period")
        return TimeIntervalView(
            self.ts,
            resolve(self.interval, ctx),
            period,
            resolve(self.discard, ctx),
            resolve(self.offset, ctx),
            state,
            ctx,
        )

"""Apama batched windows (Apama, "Defining batched windows"): ``within D every P
[retain N]`` and ``retain N every M``; and the windows they batch (``within D [retain N]``,
``retain N``), whose content changes at each item: it enters as it arrives and leaves D
after its arrival or N items later.

Window contents change only at batch points: every P ms from the query's creation for
``within ... every``, every M arrivals for ``retain N every M``.  Item lifetimes count
from arrival; an item arriving exactly at a batch point enters at once (conformance
apama_batched_*).  A post is the lot by which the content changed: entering items as
new rows, leaving items as old rows, oldest first.
"""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.common import (
    DEFAULT_ENV,
    BuildEnv,
    Deferred,
    RowLog,
    WindowSpec,
    WindowView,
    resolve,
    start_time,
)

RUNS_ON = "content change"
"""Apama batched windows: 'The correlator executes the query only when the window content
changes'."""


def apama_query_must_run(emit: Emit) -> bool:
    """Whether a stream query over a batched window executes for this emission.

    Apama batched windows: if no items arrived in or expired from the window since the
    previous update, the content is unchanged and the query does not execute; arrivals
    between batch points do not run it either (they are not yet in the window).
    """
    return bool(emit[0] or emit[1])


class ApamaBatchedWindow(WindowView):
    """A pending log (arrived, not yet in the window) and the window log, both stamped."""

    def __init__(
        self,
        within: int | None,
        every: int | None,
        retain: int | None,
        start_ms: int,
        state: StateNamespace,
        ctx: PartitionCtx,
    ) -> None:
        self.within = within
        self.every = every
        self.retain = retain
        self.pending = RowLog(state.child("pending"), DEFAULT_ENV.refs, stamped=True)
        self.window = RowLog(state.child("window"), DEFAULT_ENV.refs, stamped=True)
        start = state.get("start")
        if start is None:
            start = start_ms  # Apama batched windows: batch points count from the query's creation
            state.put("start", start)
        self.start = start

    # -- batch points
    def _after(self, t: int) -> int:
        """The first batch point strictly after t."""
        return self.start + ((t - self.start) // self.every + 1) * self.every

    def _at_or_after(self, t: int) -> int:
        """The first batch point at or after t."""
        return self.start - ((self.start - t) // self.every) * self.every

    def _trim(self, entering: Rows, leaving: Rows) -> None:
        """``retain N``: the oldest items beyond N leave (those that just entered never show)."""
        if self.retain is None:
            return
        while len(self.window) > self.retain:
            row = self.window.popleft()
            for i, r in enumerate(entering):
                if r is row:
                    del entering[i]
                    break
            else:
                leaving.append(row)

    def _lot(self, entering: Rows, leaving: Rows) -> Emit:
        return (entering, leaving) if entering or leaving else ([], [])

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Arrivals wait for the next batch point (or the M-th arrival); none run the query."""
        entering: Rows = []
        leaving: Rows = []
        if self.every is None:  # not batched: each item enters as it arrives
            for row in new:
                self.window.append(row, now_ms)
                entering.append(row)
            self._trim(entering, leaving)
            return self._lot(entering, leaving)
        if self.within is None:
            for row in new:
                self.pending.append(row, now_ms)
                if len(self.pending) >= self.every:
                    for r in self.pending.clear():
                        self.window.append(r, now_ms)
                        entering.append(r)
                    self._trim(entering, leaving)
            return self._lot(entering, leaving)
        at_point = (now_ms - self.start) % self.every == 0
        for row in new:
            if at_point:
                self.window.append(row, now_ms)
                entering.append(row)
            else:
                self.pending.append(row, now_ms)
        self._trim(entering, leaving)
        return self._lot(entering, leaving)

    def on_time(self, now_ms: int) -> Emit:
        """A batch point: expired items leave, pending live items enter, retain trims."""
        if self.within is None:
            return [], []
        if self.every is None:  # not batched: items leave D after their arrival
            leaving: Rows = []
            limit = now_ms - self.within
            while self.window.stamps and self.window.stamps[0] <= limit:
                leaving.append(self.window.popleft())
            return self._lot([], leaving)
        entering: Rows = []
        leaving: Rows = []
        window, pending = self.window, self.pending
        limit = now_ms - self.within
        while window.stamps and window.stamps[0] <= limit:
            leaving.append(window.popleft())
        while pending.stamps:
            arrived = pending.stamps[0]
            row = pending.popleft()
            if arrived > limit:
                window.append(row, arrived)
                entering.append(row)
            # else: Apama batched windows, 'some items can never enter the window' --
            # expired before the batch
        self._trim(entering, leaving)
        return self._lot(entering, leaving)

    def next_timer(self) -> int | None:
        """The first batch point at which the content changes (an entry or an expiry)."""
        if self.within is None:
            return None
        if self.every is None:
            return self.window.stamps[0] + self.within if self.window.stamps else None
        dues = []
        if self.pending.stamps:
            dues.append(self._after(self.pending.stamps[0]))
        if self.window.stamps:
            dues.append(self._at_or_after(self.window.stamps[0] + self.within))
        return min(dues) if dues else None

    def contents(self) -> list[Row]:
        """Items in the window, oldest first."""
        return list(self.window.rows)


@dataclass(frozen=True)
class ApamaBatchedSpec(WindowSpec):
    """``within D every P [retain N]`` (``within``/``every`` in ms) or ``retain N every M``."""

    within: int | Deferred | None = None
    every: int | Deferred | None = 1
    retain: int | Deferred | None = None
    name: str = "apama_batched"
    params_text: tuple[str, ...] = ()
    combinable: bool = False

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> ApamaBatchedWindow:
        """A batched window over ``state``; batch points start at its creation."""
        return ApamaBatchedWindow(
            resolve(self.within, ctx),
            resolve(self.every, ctx),
            resolve(self.retain, ctx),
            start_time(env, ctx),
            state,
            ctx,
        )

    def describe(self) -> str:
        """The Apama window clause."""
        within, every, retain = self.params_text or ("", "", "")
        parts = [f"within {within}" if within else "", f"every {every}" if every else "",
                 f"retain {retain}" if retain else ""]
        if not within:  # 'retain N every M'
            parts = parts[2:] + parts[1:2]
        return " ".join(p for p in parts if p)

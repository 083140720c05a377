"""Time-length combination batch window (Esper ref. 14.3.7): release on ``size`` or ``period``."""

from __future__ import annotations

from dataclasses import dataclass, field

from operators.base import Emit, PartitionCtx, Rows, StateNamespace
from operators.windows.batch import BatchWindow
from operators.windows.common import (
    DEFAULT_ENV,
    BuildEnv,
    Deferred,
    RowRefs,
    WindowSpec,
    forced_empty,
    remove_from_batches,
    resolve,
    start_time,
)
from operators.windows.flow_control import FlowControl


class TimeLengthBatchWindow(BatchWindow):
    """Releases when ``size`` rows collected or ``period`` passed, whichever comes first."""

    def __init__(
        self,
        period: int,
        size: int,
        flow: FlowControl,
        start_ms: int,
        state: StateNamespace,
        refs: RowRefs,
    ) -> None:
        super().__init__(state, refs)
        self.period = period
        self.size = size
        self.force = flow.force
        due = state.get("due", -1)
        if due == -1:
            due = start_ms + period if flow.start_eager else None
            state.put("due", due)
        self.due: int | None = due

    def _set_due(self, due: int | None) -> None:
        self.due = due
        self.state.put("due", due)

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Collect; a full batch releases at once and restarts the interval."""
        batches = self.batches
        self._release = None
        removed = remove_from_batches(batches, old) if old else []
        if not new:
            return [], removed
        for row in new:
            batches.add(row)
        if batches.current_count() < self.size:
            if self.due is None:
                self._set_due(now_ms + self.period)
            return [], removed
        return self._send(now_ms, removed)

    def _send(self, now_ms: int, removed: Rows) -> Emit:
        released, previous = self._release_batch()
        # conformance window_time_length_batch: a release (by count or by time) restarts
        # the interval, and a timer stays while this or the last batch held rows.
        keep = bool(released or previous) or self.force
        self._set_due(now_ms + self.period if keep else None)
        old = removed + previous if removed else previous
        if released or old:
            return released, old
        return forced_empty() if self.force else ([], [])

    def on_time(self, now_ms: int) -> Emit:
        """The interval passed: release whatever was collected."""
        self._release = None
        if self.due is None or now_ms < self.due:
            return [], []
        return self._send(now_ms, [])

    def next_timer(self) -> int | None:
        """End of the running interval."""
        return self.due

    def _undone(self) -> None:
        # Esper's view drops its timer before the child update and sets the next one
        # after it: a failed release leaves none until the next event
        self._set_due(None)


@dataclass(frozen=True)
class TimeLengthBatchSpec(WindowSpec):
    """``time_length_batch(period, size [, "flow control"])``."""

    oldest_first = True

    period: int | Deferred
    size: int | Deferred
    flow: FlowControl = field(default_factory=FlowControl)
    name: str = "time_length_batch"
    params_text: tuple[str, ...] = ()
    is_batch: bool = True

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> TimeLengthBatchWindow:
        """A time-length batch window over ``state``."""
        env = env or DEFAULT_ENV
        return TimeLengthBatchWindow(
            resolve(self.period, ctx),
            resolve(self.size, ctx),
            self.flow,
            start_time(env, ctx),
            state,
            env.refs,
        )

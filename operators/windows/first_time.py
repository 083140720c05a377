"""First-time window (Esper ref. 14.3.11): keeps events arriving within ``period`` of its start."""

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
    start_time,
)
from operators.windows.fifo import FifoWindow


class FirstTimeWindow(FifoWindow):
    """Accepts arrivals while now < start + period; nothing ever expires."""


    def __init__(self, period: int, start_ms: int, state: StateNamespace, refs: RowRefs) -> None:
        super().__init__(state, refs)
        start = state.get("start")
        if start is None:
            # The interval starts at window creation (conformance window_firstlength_firsttime).
            start = start_ms
            state.put("start", start)
        self.end = start + period

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Accept while the interval is open (closed at exactly start + period)."""
        removed = remove_from_log(self.log, old) if old else []
        if now_ms >= self.end or not new:
            return [], removed
        for row in new:
            self.log.append(row)
        return new, removed


@dataclass(frozen=True)
class FirstTimeSpec(WindowSpec):
    """``firsttime(period)``."""

    oldest_first = True

    period: int | Deferred
    name: str = "firsttime"
    params_text: tuple[str, ...] = ()
    is_asymmetric: bool = True

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> FirstTimeWindow:
        """A first-time window over ``state``, started now (or at ``env.start_ms``)."""
        env = env or DEFAULT_ENV
        return FirstTimeWindow(resolve(self.period, ctx), start_time(env, ctx), state, env.refs)

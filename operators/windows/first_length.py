"""First-length window (Esper ref. 14.3.10) and first-event window (Esper ref. 14.3.17, size 1)."""

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


class FirstLengthWindow(FifoWindow):
    """Keeps the first ``size`` rows and disregards later ones; nothing ever expires."""


    def __init__(self, size: int, state: StateNamespace, refs: RowRefs) -> None:
        super().__init__(state, refs)
        self.size = size

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Accept arrivals while there is room, then apply the rows removed upstream: as
        in Esper's first-length view, an update's new row finds no room in a full window
        before its old row leaves (Esper ref. 14.3.10)."""
        accepted: Rows = []
        for row in new:
            if len(self.log.rows) < self.size:
                self.log.append(row)
                accepted.append(row)
        removed = remove_from_log(self.log, old) if old else []
        return accepted, removed


@dataclass(frozen=True)
class FirstLengthSpec(WindowSpec):
    """``firstlength(size)``; ``firstevent`` is the same with size 1."""

    oldest_first = True

    size: int | Deferred
    name: str = "firstlength"
    params_text: tuple[str, ...] = ()
    is_asymmetric: bool = True

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> FirstLengthWindow:
        """A first-length window over ``state``."""
        return FirstLengthWindow(resolve(self.size, ctx), state, (env or DEFAULT_ENV).refs)

"""Keep-all window (Esper ref. 14.3.9 Keep-All Window): retains every event, no expiry policy."""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, PartitionCtx, Rows, StateNamespace
from operators.windows.common import DEFAULT_ENV, BuildEnv, RowRefs, WindowSpec, remove_from_log
from operators.windows.fifo import FifoWindow


class KeepAllWindow(FifoWindow):
    """Posts arriving rows; rows leave only through an upstream remove stream."""


    def __init__(self, state: StateNamespace, refs: RowRefs) -> None:
        super().__init__(state, refs)

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Append everything; remove what upstream removes."""
        removed = remove_from_log(self.log, old) if old else []
        for row in new:
            self.log.append(row)
        return new, removed


@dataclass(frozen=True)
class KeepAllSpec(WindowSpec):
    """``keepall``."""

    oldest_first = True

    name: str = "keepall"
    params_text: tuple[str, ...] = ()

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> KeepAllWindow:
        """A keep-all window over ``state``."""
        return KeepAllWindow(state, (env or DEFAULT_ENV).refs)

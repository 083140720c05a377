"""Length batch window (Esper ref. 14.3.2): releases a batch once ``size`` events collected."""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, PartitionCtx, Rows, StateNamespace
from operators.windows.batch import BatchWindow
from operators.windows.common import (
    DEFAULT_ENV,
    BuildEnv,
    Deferred,
    RowRefs,
    WindowSpec,
    remove_from_batches,
    resolve,
)


class LengthBatchWindow(BatchWindow):
    """Batch as insert stream, previous batch as remove stream (conformance window_length_batch)."""

    def __init__(self, size: int, state: StateNamespace, refs: RowRefs) -> None:
        super().__init__(state, refs)
        self.size = size

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Add all arrivals; release when the current batch holds at least ``size`` rows."""
        batches = self.batches
        self._release = None
        removed = remove_from_batches(batches, old) if old else []
        for row in new:
            batches.add(row)
        if batches.current_count() < self.size:
            return [], removed
        released, previous = self._release_batch()
        return released, removed + previous


@dataclass(frozen=True)
class LengthBatchSpec(WindowSpec):
    """``length_batch(size)``."""

    oldest_first = True

    size: int | Deferred
    name: str = "length_batch"
    params_text: tuple[str, ...] = ()
    is_batch: bool = True

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> LengthBatchWindow:
        """A length batch window over ``state``."""
        return LengthBatchWindow(resolve(self.size, ctx), state, (env or DEFAULT_ENV).refs)

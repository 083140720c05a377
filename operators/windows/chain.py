"""A chain of views: each stage's streams feed the next (e.g. ``#length(3)#uni(x)``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from operators.base import Emit, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.common import BuildEnv, ForcedEmit, WindowSpec, WindowView, forced_empty


def combine(into: tuple[Rows, Rows, bool], emit: Emit) -> tuple[Rows, Rows, bool]:
    """Append one emission to an accumulated (new, old, forced)."""
    new, old, forced = into
    if emit[0]:
        new.extend(emit[0])
    if emit[1]:
        old.extend(emit[1])
    return new, old, forced or isinstance(emit, ForcedEmit)


def finish(acc: tuple[Rows, Rows, bool]) -> Emit:
    """The accumulated emission; a forced empty one when only forced updates happened."""
    new, old, forced = acc
    if not new and not old and forced:
        return forced_empty()
    return new, old


class ChainView(WindowView):
    """Stages in order; timers of any stage feed the stages after it."""

    def __init__(self, stages: list[Any], derived: list[bool] | None = None) -> None:
        self.stages = stages
        flags = derived or [False] * len(stages)
        data = [s for s, d in zip(stages, flags) if not d]
        self.data_stage = data[-1] if data else stages[-1]
        self.is_batch = any(getattr(s, "is_batch", False) for s in stages)

    def _propagate(self, start: int, emit: Emit, now_ms: int) -> Emit:
        for stage in self.stages[start:]:
            if not (emit[0] or emit[1]):
                return emit
            emit = stage.on_events(emit[0], emit[1], now_ms)
        return emit

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Feed the first stage, then each next stage with what the previous posted."""
        return self._propagate(0, (new, old), now_ms)

    def on_time(self, now_ms: int) -> Emit:
        """Fire due stages in order; their output runs through the rest of the chain."""
        acc: tuple[Rows, Rows, bool] = ([], [], False)
        for i, stage in enumerate(self.stages):
            due = stage.next_timer()
            if due is not None and due <= now_ms:
                acc = combine(acc, self._propagate(i + 1, stage.on_time(now_ms), now_ms))
        return finish(acc)

    def on_variables_changed(self, now_ms: int) -> Emit:
        """Let every stage re-evaluate; outputs run downstream."""
        acc: tuple[Rows, Rows, bool] = ([], [], False)
        for i, stage in enumerate(self.stages):
            acc = combine(acc, self._propagate(i + 1, stage.on_variables_changed(now_ms), now_ms))
        return finish(acc)

    def next_timer(self) -> int | None:
        """The earliest timer of any stage."""
        dues = [d for d in (s.next_timer() for s in self.stages) if d is not None]
        return min(dues) if dues else None

    def contents(self) -> list[Row]:
        """What the last stage holds (a derived stage: its statistics row)."""
        return self.stages[-1].contents()

    def posted(self) -> list[Row]:
        """What the last stage has posted (the chain posts what its last stage posts)."""
        return self.stages[-1].posted()

    def count(self, row: Row | None = None) -> int:
        """Rows of the last data window stage."""
        return self.data_stage.count(row)

    def prev(self, i: int, row: Row | None = None) -> Row | None:
        """prev against the last data window stage."""
        return self.data_stage.prev(i, row)

    def prevtail(self, i: int, row: Row | None = None) -> Row | None:
        """prevtail against the last data window stage."""
        return self.data_stage.prevtail(i, row)


@dataclass(frozen=True)
class ChainSpec(WindowSpec):
    """Stages applied one after the other; stage i keeps its state in child i."""

    stages: tuple[Any, ...] = ()
    name: str = "chain"

    @property
    def oldest_first(self) -> bool:  # type: ignore[override]
        """One stage alone decides; a chain of several may evict as any of them does."""
        return len(self.stages) == 1 and self.stages[0].oldest_first

    @property
    def is_derived(self) -> bool:  # type: ignore[override]
        """A chain ending in a derived window posts derived rows."""
        return bool(self.stages) and self.stages[-1].is_derived

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> ChainView:
        """Build every stage over its own child namespace."""
        views = [spec.build(state.child(i), ctx, env) for i, spec in enumerate(self.stages)]
        return ChainView(views, [spec.is_derived for spec in self.stages])

    def describe(self) -> str:
        """Stages as written, e.g. ``#length(3)#uni(price)``."""
        return "".join("#" + s.describe() for s in self.stages)

"""retain-union: an event stays while any of the data windows retains it (Esper 5.4.4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from operators.base import Emit, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.chain import combine, finish
from operators.windows.common import BuildEnv, WindowSpec, WindowView, start_time
from operators.windows.shared_rows import SharedRows


class UnionView(WindowView):
    """A reference count per row: the number of windows holding it; at zero it leaves."""

    def __init__(self, views: list[Any], table: SharedRows) -> None:
        self.views = views
        self.table = table

    def _release(self, emit: Emit, out_old: Rows) -> None:
        """Rows a window removed lose one reference; posted when none is left."""
        table = self.table
        for row in emit[1]:
            seq = table.find_exact(row)
            if seq is None:
                continue
            left = table.tags[seq] - 1
            if left <= 0:
                out_old.append(table.drop(seq))
            else:
                table.set_tag(seq, left)

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Upstream removals leave every window; arrivals are counted per accepting window."""
        table = self.table
        out_old = table.remove_upstream(old, self.views, now_ms, lambda tag: True)
        if not new:
            return [], out_old
        n = len(self.views)
        seqs = [table.register(row, n) for row in new]
        emits = [view.on_events(new, [], now_ms) for view in self.views]
        out_new: Rows = []
        for row, seq in zip(new, seqs, strict=True):
            holders = sum(1 for e in emits if any(r is row for r in e[0]))
            if holders == 0:
                table.drop(seq)  # no window accepted it (firstlength full, ...)
                continue
            if holders != n:
                table.set_tag(seq, holders)
            out_new.append(row)
        for emit in emits:
            self._release(emit, out_old)
        return out_new, out_old

    def on_time(self, now_ms: int) -> Emit:
        """Due windows expire rows; a row leaves the union when its last holder drops it."""
        acc: tuple[Rows, Rows, bool] = ([], [], False)
        for view in self.views:
            due = view.next_timer()
            if due is not None and due <= now_ms:
                out_old: Rows = []
                self._release(view.on_time(now_ms), out_old)
                acc = combine(acc, ([], out_old))
        return finish(acc)

    def on_variables_changed(self, now_ms: int) -> Emit:
        """Expiry-expression windows may remove rows."""
        out_old: Rows = []
        for view in self.views:
            self._release(view.on_variables_changed(now_ms), out_old)
        return [], out_old

    def next_timer(self) -> int | None:
        """The earliest timer of any window."""
        dues = [d for d in (v.next_timer() for v in self.views) if d is not None]
        return min(dues) if dues else None

    def contents(self) -> list[Row]:
        """Rows held by any window, in arrival order."""
        return list(self.table.rows.values())


@dataclass(frozen=True)
class UnionSpec(WindowSpec):
    """Several data windows in retain-union."""

    windows: tuple[Any, ...] = ()
    name: str = "union"

    def __post_init__(self) -> None:
        for w in self.windows:
            if w.is_batch:
                raise ValueError(f"batch window '{w.name}' cannot be used in retain-union")
            if not w.combinable:
                raise ValueError(f"window '{w.name}' cannot be combined with other data windows")

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> UnionView:
        """Load the shared row table, then build each window over child i sharing it."""
        table = SharedRows(state.child("t"))
        sub_env = BuildEnv(refs=table, start_ms=start_time(env, ctx))
        return UnionView(
            [w.build(state.child(i), ctx, sub_env) for i, w in enumerate(self.windows)], table
        )

    def describe(self) -> str:
        """The windows as written, marked retain-union."""
        return "".join("#" + w.describe() for w in self.windows) + " retain-union"

"""retain-intersection (Esper's default for several data windows on one stream).

An event is in the intersection while every window retains it: when any window removes
an event, it is removed from all the others and posted on the remove stream.  Windows
that may decline an arrival (firstlength, firsttime, firstunique, firstevent) make an
arrival count only if all accepted it.  With one batch window among them, the batch
window's releases are the insert stream (Esper's intersection with a batch window).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from operators.base import Emit, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.chain import combine, finish
from operators.windows.common import BuildEnv, ForcedEmit, WindowSpec, WindowView, start_time
from operators.windows.shared_rows import SharedRows

LIVE, PENDING = 1, 0


class IntersectionView(WindowView):
    """Sub-views over one shared row table; the table tags rows live or pending (batch)."""

    def __init__(self, views: list[Any], table: SharedRows, batch_index: int | None) -> None:
        self.views = views
        self.table = table
        self.batch_index = batch_index
        self.is_batch = batch_index is not None
        self.driver = views[batch_index if batch_index is not None else 0]

    def _remove_elsewhere(self, row: Row, skip: set[int], now_ms: int) -> None:
        for i, view in enumerate(self.views):
            if i not in skip:
                view.on_events([], [row], now_ms)

    def _settle(self, emits: list[Emit], arrived: Rows, now_ms: int, out_old: Rows) -> Emit:
        """Turn the sub-views' emissions into the intersection's emission."""
        table = self.table
        forced = any(isinstance(e, ForcedEmit) for e in emits)
        if self.batch_index is not None:
            candidates = list(emits[self.batch_index][0])
        else:
            candidates = list(arrived)
        # arrivals some (asymmetric) window declined never enter the intersection
        if arrived:
            takers = [{id(r) for r in e[0]} for i, e in enumerate(emits) if i != self.batch_index]
            for row in arrived:
                refused = [i for i, t in enumerate(takers) if id(row) not in t]
                if refused:
                    seq = table.find_exact(row)
                    if seq is not None:
                        table.drop(seq)
                    self._remove_elsewhere(row, set(), now_ms)
                    candidates = [r for r in candidates if r is not row]
        cand_ids = {id(r) for r in candidates}
        out_new = candidates
        seen: set[int] = set()
        for emit in emits:
            for row in emit[1]:
                if id(row) in seen:
                    continue
                seen.add(id(row))
                seq = table.find_exact(row)
                if seq is None:
                    continue
                holders = {j for j, e in enumerate(emits) if any(r is row for r in e[1])}
                self._remove_elsewhere(row, holders, now_ms)
                if table.tags[seq] == LIVE or id(row) in cand_ids:
                    out_old.append(row)
                table.drop(seq)
        if self.batch_index is not None:
            for row in out_new:
                seq = table.find_exact(row)
                if seq is not None:
                    table.set_tag(seq, LIVE)
        if not out_new and not out_old and forced:
            return ForcedEmit(([], []))
        return out_new, out_old

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Upstream removals leave every window; arrivals go to every window."""
        table = self.table
        out_old = table.remove_upstream(old, self.views, now_ms, lambda tag: tag == LIVE)
        if not new:
            return [], out_old
        tag = PENDING if self.batch_index is not None else LIVE
        for row in new:
            table.register(row, tag)
        emits = [view.on_events(new, [], now_ms) for view in self.views]
        return self._settle(emits, new, now_ms, out_old)

    def on_time(self, now_ms: int) -> Emit:
        """Each due sub-view fires; its removals leave the other windows too."""
        acc: tuple[Rows, Rows, bool] = ([], [], False)
        for i, view in enumerate(self.views):
            due = view.next_timer()
            if due is not None and due <= now_ms:
                emits: list[Emit] = [([], [])] * len(self.views)
                emits[i] = view.on_time(now_ms)
                acc = combine(acc, self._settle(emits, [], now_ms, []))
        return finish(acc)

    def on_variables_changed(self, now_ms: int) -> Emit:
        """Expiry-expression windows may remove rows."""
        emits = [view.on_variables_changed(now_ms) for view in self.views]
        return self._settle(emits, [], now_ms, [])

    def next_timer(self) -> int | None:
        """The earliest timer of any window."""
        dues = [d for d in (v.next_timer() for v in self.views) if d is not None]
        return min(dues) if dues else None

    def contents(self) -> list[Row]:
        """The first window's (or the batch window's) contents."""
        return self.driver.contents()

    def posted(self) -> list[Row]:
        """What the driving window has posted (with a batch window, its released rows
        still retained by every window)."""
        return self.driver.posted()

    def count(self, row: Row | None = None) -> int:
        """Rows of the driving window."""
        return self.driver.count(row)

    def prev(self, i: int, row: Row | None = None) -> Row | None:
        """prev against the driving window."""
        return self.driver.prev(i, row)

    def prevtail(self, i: int, row: Row | None = None) -> Row | None:
        """prevtail against the driving window."""
        return self.driver.prevtail(i, row)


@dataclass(frozen=True)
class IntersectionSpec(WindowSpec):
    """Several data windows in retain-intersection."""

    windows: tuple[Any, ...] = ()
    name: str = "intersection"

    def __post_init__(self) -> None:
        batches = [w for w in self.windows if w.is_batch]
        if len(batches) > 1:
            raise ValueError("retain-intersection allows at most one batch window")
        for w in self.windows:
            if not w.combinable:
                raise ValueError(f"window '{w.name}' cannot be combined with other data windows")

    @property
    def is_batch(self) -> bool:  # type: ignore[override]
        """A batch window inside makes the intersection post batches."""
        return any(w.is_batch for w in self.windows)

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> IntersectionView:
        """Load the shared row table, then build each window over child i sharing it."""
        table = SharedRows(state.child("t"))
        sub_env = BuildEnv(refs=table, start_ms=start_time(env, ctx))
        views = [w.build(state.child(i), ctx, sub_env) for i, w in enumerate(self.windows)]
        batch = next((i for i, w in enumerate(self.windows) if w.is_batch), None)
        return IntersectionView(views, table, batch)

    def describe(self) -> str:
        """The windows as written."""
        return "".join("#" + w.describe() for w in self.windows)

"""Ranked window (Esper 14.3.20): the latest event per unique key, top ``size`` by sort order."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.common import (
    BuildEnv,
    Deferred,
    RowRefs,
    WindowSpec,
    freeze,
    key_of,
)
from operators.windows.sort import SortWindow, sorted_window_args


class RankWindow(SortWindow):
    """Sorted rows, one per unique key.

    As Esper does: rank keeps arrival order among ties (tie-break ``seq``) and evicts
    the oldest of the lowest-ranked tie group.  A state entry starts with the unique key.
    """

    TIE = 1

    def __init__(
        self,
        unique: tuple[Expr, ...],
        size: int,
        exprs: tuple[Expr, ...],
        descending: tuple[bool, ...],
        state: StateNamespace,
        refs: RowRefs,
        ctx: PartitionCtx,
    ) -> None:
        self.unique = unique
        self.by_key: dict[object, tuple] = {}
        self.ukeys: dict[int, object] = {}  # seq -> frozen unique key
        super().__init__(size, exprs, descending, state, refs, ctx)

    def _restored(self, seq: int, stored: list, key: tuple) -> None:
        fk = freeze(stored[0])
        self.by_key[fk] = key
        self.ukeys[seq] = fk

    def _remove_index(self, i: int) -> Row:
        key = self.keys[i]
        row = super()._remove_index(i)
        fk = self.ukeys.pop(key[-1])
        if self.by_key.get(fk) == key:
            del self.by_key[fk]
        return row

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Replace the row of the same key, insert in order, evict beyond ``size``."""
        out_old: Rows = []
        for row in old:
            fk = freeze(key_of(self.unique, row, self.ctx))
            key = self.by_key.get(fk)
            if key is not None:
                i = bisect_left(self.keys, key)
                if self.rows[i] is row or self.rows[i] == row:
                    out_old.append(self._remove_index(i))
        keys = self.keys
        for row in new:
            ukey = key_of(self.unique, row, self.ctx)
            fk = freeze(ukey)
            held = self.by_key.get(fk)
            if held is not None:
                out_old.append(self._remove_index(bisect_left(keys, held)))
            seq, key = self._insert(row, (ukey,))
            self.by_key[fk] = key
            self.ukeys[seq] = fk
            if len(keys) > self.size:
                lowest = keys[-1][:-1]
                out_old.append(self._remove_index(bisect_left(keys, lowest)))
        return new, out_old


@dataclass(frozen=True)
class RankSpec(WindowSpec):
    """``rank(unique expr, ..., size, criteria [asc|desc], ...)``."""

    unique: tuple[Expr, ...]
    size: int | Deferred
    exprs: tuple[Expr, ...]
    descending: tuple[bool, ...]
    name: str = "rank"
    params_text: tuple[str, ...] = ()

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> RankWindow:
        """A ranked window over ``state``."""
        return RankWindow(self.unique, *sorted_window_args(self, state, ctx, env))

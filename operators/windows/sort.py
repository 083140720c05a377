"""Sorted window (Esper ref. 14.3.19): the top ``size`` events by the sort criteria."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.common import (
    DEFAULT_ENV,
    BuildEnv,
    Deferred,
    RowRefs,
    WindowSpec,
    WindowView,
    find_row,
    resolve,
)
from operators.windows.sort_keys import sort_prefix, sort_values


class SortWindow(WindowView):
    """Rows in sort order; an arrival beyond ``size`` evicts the last-sorted row.

    As Esper does: among equal sort keys the newest comes first and the oldest is
    evicted, hence the tie-break ``-seq`` (``TIE``).  Each row's state entry, by arrival
    number, ends with its sort values and the row.
    """

    TIE = -1
    """Sign of the arrival number that breaks ties between equal sort values."""

    def __init__(
        self,
        size: int,
        exprs: tuple[Expr, ...],
        descending: tuple[bool, ...],
        state: StateNamespace,
        refs: RowRefs,
        ctx: PartitionCtx,
    ) -> None:
        self.size = size
        self.exprs = exprs
        self.descending = descending
        self.ctx = ctx
        self.refs = refs
        self.ns = state.child("rows")
        pairs = []
        last = -1
        for seq, stored in self.ns.items():
            key = self._key(stored[-2], seq)
            pairs.append((key, refs.load(stored[-1])))
            self._restored(seq, stored, key)
            last = seq
        pairs.sort(key=lambda p: p[0])
        self.keys: list[tuple] = [k for k, _ in pairs]
        self.rows: list[Row] = [r for _, r in pairs]
        self.next_seq = last + 1

    def _restored(self, seq: int, stored: list, key: tuple) -> None:
        """One row read back from state (a subclass indexes it)."""

    def _key(self, values: list, seq: int) -> tuple:
        return (*sort_prefix(values, self.descending), self.TIE * seq)

    def _insert(self, row: Row, prefix: tuple = ()) -> tuple[int, tuple]:
        """Put ``row`` in sort order and in state (``prefix`` first in its entry); its
        arrival number and sort key."""
        values = sort_values(self.exprs, row, self.ctx)
        seq = self.next_seq
        self.next_seq = seq + 1
        key = self._key(values, seq)
        i = bisect_left(self.keys, key)
        self.keys.insert(i, key)
        self.rows.insert(i, row)
        self.ns.put(seq, [*prefix, values, self.refs.dump(row)])
        return seq, key

    def _remove_index(self, i: int) -> Row:
        key = self.keys.pop(i)
        self.ns.delete(self.TIE * key[-1])
        return self.rows.pop(i)

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Insert in order; a row sorting below a full window enters and leaves at once."""
        out_old: Rows = []
        for row in old:
            i = find_row(self.rows, row)
            if i >= 0:
                out_old.append(self._remove_index(i))
        for row in new:
            self._insert(row)
            if len(self.keys) > self.size:
                out_old.append(self._remove_index(len(self.keys) - 1))
        return new, out_old

    def contents(self) -> list[Row]:
        """Rows in sort order (the window's iteration order)."""
        return list(self.rows)

    def count(self, row: Row | None = None) -> int:
        """Number of rows held."""
        return len(self.rows)

    def prev(self, i: int, row: Row | None = None) -> Row | None:
        """The i-th row in sort order (Esper's prev on a sorted window follows sort order)."""
        return self.rows[i] if 0 <= i < len(self.rows) else None

    def prevtail(self, i: int, row: Row | None = None) -> Row | None:
        """The i-th row from the end of the sort order."""
        return self.rows[-1 - i] if 0 <= i < len(self.rows) else None


@dataclass(frozen=True)
class SortSpec(WindowSpec):
    """``sort(size, criteria [asc|desc], ...)``."""

    size: int | Deferred
    exprs: tuple[Expr, ...]
    descending: tuple[bool, ...]
    name: str = "sort"
    params_text: tuple[str, ...] = ()

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> SortWindow:
        """A sorted window over ``state``."""
        return SortWindow(*sorted_window_args(self, state, ctx, env))


def sorted_window_args(spec: Any, state: StateNamespace, ctx: PartitionCtx,
                       env: BuildEnv | None) -> tuple[Any, ...]:
    """A sort or rank spec's window arguments: size, criteria, directions, state, row
    references, context."""
    return (resolve(spec.size, ctx), spec.exprs, spec.descending, state,
            (env or DEFAULT_ENV).refs, ctx)

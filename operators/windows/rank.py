"""Ranked window (Esper 14.3.20): the latest event per unique key, top ``size`` by sort order."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.common import (
    DEFAULT_ENV,
    BuildEnv,
    Deferred,
    RowRefs,
    WindowSpec,
    freeze,
    key_of,
    resolve,
)
from operators.windows.sort import SortWindow
from operators.windows.sort_keys import sort_prefix, sort_values


class RankWindow(SortWindow):
    """Sorted rows, one per unique key.

    As Esper does: rank keeps arrival order among ties (tie-break ``seq``) and evicts
    the oldest of the lowest-ranked tie group.
    """

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
        self.size = size
        self.unique = unique
        self.exprs = exprs
        self.descending = descending
        self.ctx = ctx
        self.refs = refs
        self.ns = state.child("rows")
        self.by_key: dict[object, tuple] = {}
        entries = []
        last = -1
        for seq, (ukey, values, data) in self.ns.items():
            key = (*sort_prefix(values, descending), seq)
            row = refs.load(data)
            entries.append((key, row))
            self.by_key[freeze(ukey)] = key
            last = seq
        entries.sort(key=lambda p: p[0])
        self.keys = [k for k, _ in entries]
        self.rows = [r for _, r in entries]
        self.ukeys = {k[-1]: None for k in self.keys}  # seq -> frozen unique key, filled below
        for fk, key in self.by_key.items():
            self.ukeys[key[-1]] = fk
        self.next_seq = last + 1

    def _remove_index(self, i: int) -> Row:
        key = self.keys.pop(i)
        seq = key[-1]
        self.ns.delete(seq)
        fk = self.ukeys.pop(seq)
        if self.by_key.get(fk) == key:
            del self.by_key[fk]
        return self.rows.pop(i)

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
        keys, rows = self.keys, self.rows
        for row in new:
            ukey = key_of(self.unique, row, self.ctx)
            fk = freeze(ukey)
            held = self.by_key.get(fk)
            if held is not None:
                out_old.append(self._remove_index(bisect_left(keys, held)))
            values = sort_values(self.exprs, row, self.ctx)
            seq = self.next_seq
            self.next_seq = seq + 1
            key = (*sort_prefix(values, self.descending), seq)
            i = bisect_left(keys, key)
            keys.insert(i, key)
            rows.insert(i, row)
            self.by_key[fk] = key
            self.ukeys[seq] = fk
            self.ns.put(seq, [ukey, values, self.refs.dump(row)])
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
        return RankWindow(
            self.unique,
            resolve(self.size, ctx),
            self.exprs,
            self.descending,
            state,
            (env or DEFAULT_ENV).refs,
            ctx,
        )

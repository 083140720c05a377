"""Unique window (Esper ref. 14.3.14 Unique Window): the most recent event per unique key."""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.common import (
    DEFAULT_ENV,
    BuildEnv,
    RowRefs,
    WindowSpec,
    WindowView,
    freeze,
    key_of,
)
from operators.windows.intersection import IntersectionView
from operators.windows.java_order import bucket


class KeyedRows(WindowView):
    """Rows indexed by a unique key, in arrival order; one state key per held row."""

    def __init__(
        self, keys: tuple[Expr, ...], state: StateNamespace, refs: RowRefs, ctx: PartitionCtx
    ) -> None:
        self.keys = keys
        self.ctx = ctx
        self.refs = refs
        self.ns = state.child("rows")
        self.by_key: dict[object, tuple[int, Row, int]] = {}
        """key -> (the held row's sequence number, the row, the sequence number at which
        the key entered: a replaced row keeps its key's place, as in a hash map)."""
        last = -1
        for seq, entry in self.ns.items():
            key, data = entry[0], entry[1]
            self.by_key[freeze(key)] = (seq, refs.load(data),
                                        entry[2] if len(entry) > 2 else seq)
            last = seq
        self.next_seq = last + 1

    def _put(self, key: object, fkey: object, row: Row, entered: int | None = None) -> None:
        seq = self.next_seq
        self.next_seq = seq + 1
        if entered is None:  # a new key: it enters with this row
            entered = seq
            self.ns.put(seq, [key, self.refs.dump(row)])
        else:
            self.ns.put(seq, [key, self.refs.dump(row), entered])
        self.by_key[fkey] = (seq, row, entered)

    def _remove_old(self, old: Rows, out: Rows) -> None:
        """Upstream removals: drop the held row of that key if it is the removed one (a
        row that ``out`` already holds, replaced in this update, is gone: the held row of
        its key is its replacement, however alike the two are)."""
        gone = {id(r) for r in out}
        for row in old:
            if id(row) in gone:
                continue
            fkey = freeze(key_of(self.keys, row, self.ctx))
            held = self.by_key.get(fkey)
            if held is not None and (held[1] is row or held[1] == row):
                del self.by_key[fkey]
                self.ns.delete(held[0])
                out.append(held[1])

    def contents(self) -> list[Row]:
        """Held rows in arrival order (Esper ref. 14 leaves the order open; arrival order
        chosen)."""
        return [entry[1] for entry in self.by_key.values()]

    def replay_order(self) -> list[Row]:
        """Held rows in the order Esper iterates its hash map of them: by bucket, then
        by arrival within a bucket (match_recognize replays the window in it)."""
        n = len(self.by_key)
        held = sorted(((bucket(k, n), entered), row)
                      for k, (_, row, entered) in self.by_key.items())
        return [row for _, row in held]

    def count(self, row: Row | None = None) -> int:
        """Number of distinct keys held."""
        return len(self.by_key)


def iteration(view: WindowView) -> list[Row]:
    """A window's rows in the order Esper's iterator gives them: a hash map's for
    ``#unique`` and ``#firstunique``, arrival order for the others.  An intersection
    iterates its first window (Esper's ``IntersectDefaultView.iterator``)."""
    if isinstance(view, IntersectionView) and not view.is_batch:
        view = view.driver
    return view.replay_order() if isinstance(view, KeyedRows) else list(view.contents())


class UniqueWindow(KeyedRows):
    """A new event replaces the held event of its key, which goes on the remove stream."""

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Replace per key; the replaced row is posted in the same update (window_unique)."""
        out_old: Rows = []
        by_key = self.by_key
        for row in new:
            key = key_of(self.keys, row, self.ctx)
            fkey = freeze(key)
            held = by_key.pop(fkey, None)
            if held is not None:
                self.ns.delete(held[0])
                out_old.append(held[1])
                # Esper's HashMap.put over a held key keeps the key's place
                self._put(key, fkey, row, held[2])
            else:
                self._put(key, fkey, row)
        if old:
            self._remove_old(old, out_old)
        return new, out_old


@dataclass(frozen=True)
class UniqueSpec(WindowSpec):
    """``unique(expression [, expression ...])``."""

    keys: tuple[Expr, ...]
    name: str = "unique"
    params_text: tuple[str, ...] = ()

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> UniqueWindow:
        """A unique window over ``state``."""
        return UniqueWindow(self.keys, state, (env or DEFAULT_ENV).refs, ctx)

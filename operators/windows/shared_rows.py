"""The row table of a retain-intersection/union: one stored copy shared by its sub-views."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from operators.base import Row, Rows, StateNamespace, View
from operators.windows.common import RowRefs


class SharedRows(RowRefs):
    """seq -> [row, tag] in state; sub-views store the seq in place of the row.

    Restored sub-views therefore hold the very same row objects as the composite, so
    removal by identity keeps working across checkpoint/restore.  ``tag`` is the
    composite's per-row datum (live flag or reference count), written only on change.
    """

    def __init__(self, ns: StateNamespace) -> None:
        self.ns = ns
        self.rows: dict[int, Row] = {}
        self.tags: dict[int, Any] = {}
        self.seq_of: dict[int, int] = {}
        last = -1
        for seq, (row, tag) in ns.items():
            self.rows[seq] = row
            self.tags[seq] = tag
            self.seq_of[id(row)] = seq
            last = seq
        self.next_seq = last + 1

    def dump(self, row: Row) -> Any:
        """The seq of a registered row."""
        return self.seq_of[id(row)]

    def load(self, data: Any) -> Row:
        """The row of a seq."""
        return self.rows[data]

    def register(self, row: Row, tag: Any) -> int:
        """A row enters the composite."""
        seq = self.next_seq
        self.next_seq = seq + 1
        self.rows[seq] = row
        self.tags[seq] = tag
        self.seq_of[id(row)] = seq
        self.ns.put(seq, [row, tag])
        return seq

    def find(self, row: Row) -> int | None:
        """The seq of ``row`` by identity, else by equality (rows from elsewhere)."""
        seq = self.seq_of.get(id(row))
        if seq is not None and self.rows.get(seq) is row:
            return seq
        for s, r in self.rows.items():
            if r == row:
                return s
        return None

    def find_exact(self, row: Row) -> int | None:
        """The seq of ``row`` by identity only (rows posted by the sub-views)."""
        seq = self.seq_of.get(id(row))
        return seq if seq is not None and self.rows.get(seq) is row else None

    def set_tag(self, seq: int, tag: Any) -> None:
        """Change a row's tag."""
        self.tags[seq] = tag
        self.ns.put(seq, [self.rows[seq], tag])

    def drop(self, seq: int) -> Row:
        """A row leaves the composite."""
        row = self.rows.pop(seq)
        del self.tags[seq]
        if self.seq_of.get(id(row)) == seq:
            del self.seq_of[id(row)]
        self.ns.delete(seq)
        return row

    def remove_upstream(self, old: Rows, views: Sequence[View], now_ms: int,
                        posted: Callable[[Any], bool]) -> Rows:
        """Rows removed upstream leave every sub-view and the composite; those whose
        tag ``posted`` accepts go on the composite's remove stream."""
        out: Rows = []
        for row in old:
            seq = self.find(row)
            if seq is None:
                continue
            stored = self.rows[seq]
            for view in views:
                view.on_events([], [stored], now_ms)
            if posted(self.tags[seq]):
                out.append(stored)
            self.drop(seq)
        return out

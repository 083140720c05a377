"""Base of the windows that hold rows in arrival order (length, time, keepall, first*)."""

from __future__ import annotations

from operators.base import Row, StateNamespace
from operators.windows.common import (
    RowLog,
    RowRefs,
    WindowView,
    relative_index,
)


class FifoWindow(RowLog, WindowView):
    """A view whose contents are one RowLog in arrival order.

    The view is its row log (one object per context partition, not two: with many
    partitions each object a partition's event touches is a likely cache miss)."""

    __slots__ = ()

    def __init__(self, state: StateNamespace, refs: RowRefs, stamped: bool = False) -> None:
        RowLog.__init__(self, state.child("rows"), refs, stamped)

    @property
    def log(self) -> RowLog:
        """The row log of this view (the view itself)."""
        return self

    def contents(self) -> list[Row]:
        """Rows oldest first."""
        return list(self.log.rows)

    def count(self, row: Row | None = None) -> int:
        """Number of rows held."""
        return len(self.log.rows)

    def prev(self, i: int, row: Row | None = None) -> Row | None:
        """The i-th row before ``row`` (0 = ``row`` itself; without a row, the newest).

        Esper ref. "Single-row functions", prev: the index is relative to the event
        being evaluated; it is the newest one but for several events in one update."""
        rows = self.log.rows
        at = relative_index(rows, row)
        return rows[at - i] if 0 <= i <= at else None

    def prevtail(self, i: int, row: Row | None = None) -> Row | None:
        """The i-th oldest row (0 = oldest)."""
        rows = self.log.rows
        return rows[i] if 0 <= i < len(rows) else None

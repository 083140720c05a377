"""Base of the tumbling (batch) windows: a current and a last batch (Esper ref. 14.2)."""

from __future__ import annotations

from itertools import islice
from typing import Any

from operators.base import Row, Rows, StateNamespace
from operators.windows.common import BatchLog, RowRefs, WindowView, relative_index


class BatchWindow(WindowView):
    """Holds the batch being collected and the last released batch."""

    is_batch = True

    releases_before_clearing = True
    """Esper's batch view posts the batch it releases before it lets it go, so an output
    snapshot taken as it posts sees that batch (length, time, time_length batches)."""

    def __init__(self, state: StateNamespace, refs: RowRefs, stamped: bool = False) -> None:
        self.state = state
        self.batches = BatchLog(state.child("rows"), refs, state, "boundary", stamped)
        self._positions: tuple[Any, dict[int, int]] = (None, {})
        """Index of each row of the last released batch by identity, for prev (derived
        from the rows, rebuilt once per batch: not state)."""
        self._release: tuple[Rows, Rows] | None = None
        """What this update released and dropped, for ``undo_release`` (not state: it
        lasts one update)."""

    def _release_batch(self) -> tuple[Rows, Rows]:
        """Release the current batch (remembered for ``undo_release``)."""
        self._release = self.batches.release()
        return self._release

    def undo_release(self) -> bool:
        """The view after this window failed on the batch it released (Esper 9's
        match-recognize view, see MatchRecognizer.failed): Esper's batch views start a new
        batch and schedule their next flush only once the child returned, so the released
        rows stay the batch being collected and the batch before stays the last one
        (posted again as the remove stream at the next release).  Whether it did."""
        if self._release is None:
            return False
        released, previous = self._release
        self._release = None
        self.batches.unrelease(released, previous)
        self._undone()
        return True

    def _undone(self) -> None:
        """After ``undo_release``: the window's timer as Esper leaves it (none)."""

    def contents(self) -> list[Row]:
        """The batch being collected (what Esper's iterator returns for a batch window)."""
        return self.batches.current()

    def posted(self) -> list[Row]:
        """The last released batch: a batch window posts a batch when it releases it and
        takes it back at the next release (Esper ref. 14.2); the batch being collected
        is not posted yet."""
        return self.batches.last()

    def count(self, row: Row | None = None) -> int:
        """Rows of the last released batch (the rows prev/prevcount see)."""
        return self.batches.n_last

    def prev(self, i: int, row: Row | None = None) -> Row | None:
        """The i-th row before ``row`` in the last released batch (the posted insert
        stream); Esper's prev is relative to the event, so the first of a batch has no
        prev(1)."""
        rows = self.batches.log.rows
        n = self.batches.n_last
        if row is None or n == 0 or rows[n - 1] is row:
            at = n - 1
        else:
            key = (self.batches.boundary, n, id(rows[0]))
            if self._positions[0] != key:
                self._positions = (key, {id(r): k for k, r in enumerate(islice(rows, n))})
            found = self._positions[1].get(id(row))
            at = found if found is not None else relative_index(rows, row, n)
        return rows[at - i] if 0 <= i <= at else None

    def prevtail(self, i: int, row: Row | None = None) -> Row | None:
        """The i-th oldest row of the last released batch."""
        return self.batches.log.rows[i] if 0 <= i < self.batches.n_last else None

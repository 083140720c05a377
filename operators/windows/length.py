"""Length window (Esper 14.3.1) and last-event window (Esper 14.3.16, a length window of 1)."""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.common import (
    DEFAULT_ENV,
    BuildEnv,
    Deferred,
    RowRefs,
    WindowSpec,
    remove_from_log,
    resolve,
)
from operators.windows.fifo import FifoWindow


class LengthWindow(FifoWindow):
    """Keeps the last ``size`` rows; the oldest leave on the remove stream as new ones enter."""

    __slots__ = ("size",)

    def __init__(self, size: int, state: StateNamespace, refs: RowRefs) -> None:
        super().__init__(state, refs)
        self.size = size

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Append, then expire the oldest beyond ``size`` (Esper ref. 2.3: W1 leaves on W6)."""
        expired: Rows = remove_from_log(self, old) if old else []
        if len(new) == 1:
            self.append(new[0])
        else:
            for row in new:
                self.append(row)
        excess = len(self.rows) - self.size
        if excess == 1:
            expired.append(self.popleft())
        elif excess > 0:
            expired.extend(self.pop_many(excess))
        return new, expired

    def push(self, row: Row) -> Row | None:
        """``on_events([row], [])`` for one arriving row: the row it expires, or None
        (the window never holds more than ``size`` rows after an update, so at most one)."""
        rows = self.rows
        if self._seqs is None and not self.stamped:
            # RowLog.append and popleft, inlined: rows numbered implicitly, oldest first
            seq = self.next_seq
            self.next_seq = seq + 1
            rows.append(row)
            if self._own:  # the log is its own state
                return rows.popleft() if len(rows) > self.size else None
            ns = self.ns
            ns.put_new(seq, row if self._inline else self.refs.dump(row))
            if len(rows) > self.size:
                ns.delete(seq + 1 - len(rows))
                return rows.popleft()
            return None
        self.append(row)
        if len(rows) > self.size:
            return self.popleft()
        return None


@dataclass(frozen=True)
class LengthSpec(WindowSpec):
    """``length(size)``; ``lastevent`` is the same with size 1."""

    oldest_first = True

    size: int | Deferred
    name: str = "length"
    params_text: tuple[str, ...] = ()

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> LengthWindow:
        """A length window over ``state``."""
        return LengthWindow(resolve(self.size, ctx), state, (env or DEFAULT_ENV).refs)

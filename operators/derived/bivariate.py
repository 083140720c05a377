"""Accumulator of two data series shared by linest and correl (Esper ref. 14.4.3, 14.4.4)."""

from __future__ import annotations

from typing import Any

from operators.base import Row
from operators.derived.base import DerivedView, number


class BivariateView(DerivedView):
    """Sums n, x, x², y, y², xy over pairs where both values are non-null."""

    def initial(self) -> list[Any]:
        """[n, sumX, sumXSq, sumY, sumYSq, sumXY]."""
        return [0, 0.0, 0.0, 0.0, 0.0, 0.0]

    def _pair(self, row: Row) -> tuple[float, float] | None:
        x = number(self.values[0](row, self.ctx))
        y = number(self.values[1](row, self.ctx))
        return None if x is None or y is None else (x, y)

    def enter(self, row: Row) -> None:
        """Add a pair."""
        p = self._pair(row)
        if p is not None:
            x, y = p
            a = self.acc
            a[0] += 1
            a[1] += x
            a[2] += x * x
            a[3] += y
            a[4] += y * y
            a[5] += x * y

    def leave(self, row: Row) -> None:
        """Remove a pair (back to exact zeros when none is left)."""
        p = self._pair(row)
        if p is not None:
            x, y = p
            a = self.acc
            a[0] -= 1
            if a[0] <= 0:
                a[:] = self.initial()
                return
            a[1] -= x
            a[2] -= x * x
            a[3] -= y
            a[4] -= y * y
            a[5] -= x * y

"""Weighted average derived-value window (Esper ref. 14.4.5)."""

from __future__ import annotations

from typing import Any

from operators.base import Row
from operators.derived.base import NAN, DerivedView, number


class WeightedAverageView(DerivedView):
    """average = sum(value * weight) / sum(weight); NaN while the weights sum to zero."""

    def initial(self) -> list[Any]:
        """[n, sum of value*weight, sum of weights]."""
        return [0, 0.0, 0.0]

    def _pair(self, row: Row) -> tuple[float, float] | None:
        x = number(self.values[0](row, self.ctx))
        w = number(self.values[1](row, self.ctx))
        return None if x is None or w is None else (x, w)

    def enter(self, row: Row) -> None:
        """Add a weighted value."""
        p = self._pair(row)
        if p is not None:
            a = self.acc
            a[0] += 1
            a[1] += p[0] * p[1]
            a[2] += p[1]

    def leave(self, row: Row) -> None:
        """Remove a weighted value (exact zeros when none is left)."""
        p = self._pair(row)
        if p is not None:
            a = self.acc
            a[0] -= 1
            if a[0] <= 0:
                a[:] = self.initial()
                return
            a[1] -= p[0] * p[1]
            a[2] -= p[1]

    def stats(self) -> dict[str, Any]:
        """{average}."""
        _, sxw, sw = self.acc
        return {"average": sxw / sw if sw != 0 else NAN}

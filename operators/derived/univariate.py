"""Univariate statistics derived-value window (Esper ref. 14.4.2)."""

from __future__ import annotations

import math
from typing import Any

from operators.base import Row
from operators.derived.base import NAN, DerivedView, number


def moments(n: int, s: float, sq: float) -> tuple[float, float, float, float]:
    """(average, sample variance, sample stddev, population stddev); NaN where undefined."""
    if n == 0:
        return NAN, NAN, NAN, NAN
    ss = max(sq - s * s / n, 0.0)
    pop = math.sqrt(ss / n)
    if n < 2:
        return s / n, NAN, NAN, pop
    var = ss / (n - 1)
    return s / n, var, math.sqrt(var), pop


class UnivariateView(DerivedView):
    """datapoints, total, average, variance (sample), stddev (sample), stddevpa (population).

    Names and definitions of the derived properties follow Esper 9 (Esper ref. 14.4.2;
    conformance window_uni).  Null values are not data points.
    """

    def initial(self) -> list[Any]:
        """[n, sum, sum of squares]."""
        return [0, 0.0, 0.0]

    def enter(self, row: Row) -> None:
        """Add a data point."""
        x = number(self.values[0](row, self.ctx))
        if x is not None:
            a = self.acc
            a[0] += 1
            a[1] += x
            a[2] += x * x

    def leave(self, row: Row) -> None:
        """Remove a data point (back to exact zeros when none is left)."""
        x = number(self.values[0](row, self.ctx))
        if x is not None:
            a = self.acc
            a[0] -= 1
            if a[0] <= 0:
                a[:] = self.initial()
            else:
                a[1] -= x
                a[2] -= x * x

    def stats(self) -> dict[str, Any]:
        """The six univariate properties."""
        n, s, sq = self.acc
        avg, var, sd, sdp = moments(n, s, sq)
        return {
            "datapoints": n,
            "total": s,
            "average": avg,
            "variance": var,
            "stddev": sd,
            "stddevpa": sdp,
        }

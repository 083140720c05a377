"""Correlation derived-value window ``correl`` (Esper ref. 14.4.4)."""

from __future__ import annotations

import math
from typing import Any

from operators.derived.base import NAN
from operators.derived.bivariate import BivariateView


class CorrelationView(BivariateView):
    """Pearson correlation of the two series; NaN without points or without spread."""

    def stats(self) -> dict[str, Any]:
        """{correlation}."""
        n, sx, sxx, sy, syy, sxy = self.acc
        if n == 0:
            return {"correlation": NAN}
        ssx = sxx - sx * sx / n
        ssy = syy - sy * sy / n
        denom = math.sqrt(max(ssx, 0.0) * max(ssy, 0.0))
        if denom == 0:
            return {"correlation": NAN}
        return {"correlation": (sxy - sx * sy / n) / denom}

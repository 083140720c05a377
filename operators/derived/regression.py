"""Regression derived-value window ``linest`` (Esper ref. 14.4.3)."""

from __future__ import annotations

from typing import Any

from operators.derived.base import NAN
from operators.derived.bivariate import BivariateView
from operators.derived.univariate import moments


class RegressionView(BivariateView):
    """Slope, y-intercept and the per-series statistics (property names as the product has them)."""

    def stats(self) -> dict[str, Any]:
        """The linest properties; NaN where undefined (no points, no x spread)."""
        n, sx, sxx, sy, syy, sxy = self.acc
        x_avg, x_var, x_sd, x_sdp = moments(n, sx, sxx)
        y_avg, y_var, y_sd, y_sdp = moments(n, sy, syy)
        slope = NAN
        if n:
            ssx = sxx - sx * sx / n
            if ssx != 0:
                slope = (sxy - sx * sy / n) / ssx
        intercept = y_avg - slope * x_avg if slope == slope else NAN
        return {
            "slope": slope,
            "YIntercept": intercept,
            "XAverage": x_avg,
            "XStandardDeviationPop": x_sdp,
            "XStandardDeviationSample": x_sd,
            "XSum": sx,
            "XVariance": x_var,
            "YAverage": y_avg,
            "YStandardDeviationPop": y_sdp,
            "YStandardDeviationSample": y_sd,
            "YSum": sy,
            "YVariance": y_var,
            "dataPoints": n,
            "n": n,
            "sumX": sx,
            "sumXSq": sxx,
            "sumXY": sxy,
            "sumY": sy,
            "sumYSq": syy,
        }

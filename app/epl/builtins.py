"""Built-in single-row functions by their lower-case name (their implementations)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs, "round": lambda x, n=0: round(x, int(n)), "floor": math.floor,
    "ceil": math.ceil, "sqrt": math.sqrt, "exp": math.exp, "ln": math.log,
    "log": math.log10, "pow": math.pow, "sign": lambda x: (x > 0) - (x < 0),
    "max": lambda *a: max(a), "min": lambda *a: min(a),
    "lower": lambda s: s.lower(), "upper": lambda s: s.upper(),
    "length": lambda s: len(s), "trim": lambda s: s.strip(),
    "substring": lambda s, a, b=None: s[int(a):] if b is None else s[int(a):int(b)],
    "concat": lambda *a: "".join(str(x) for x in a), "tostring": str,
    "startswith": lambda s, p: s.startswith(p), "endswith": lambda s, p: s.endswith(p),
    "contains": lambda s, p: p in s,
}

"""Values as Java gives them where EPL converts: text (``||``, ``cast(x, string)``) and
the numeric casts, whose narrowing wraps or saturates as Java's primitive conversions do
(Esper ref. 10.1, cast; Java Language Specification 5.1.3)."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

_INT_TEXT = re.compile(r"[+-]?[0-9]+")


def java_text(v: Any) -> str:
    """``String.valueOf(v)``: ``true``/``false``, a double as ``Double.toString`` writes it."""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is float:
        return java_double_text(v)
    return str(v)


def java_double_text(d: float) -> str:
    """``Double.toString``: plain decimals from 10^-3 up to 10^7, else ``d.dddE±n``; the
    shortest digits that read back as ``d``."""
    if d != d:
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    a = abs(d)
    sign = "-" if d < 0 else ""
    if 1e-3 <= a < 1e7:
        text = repr(a)
        return sign + (text if "." in text else text + ".0")
    _, digits, exponent = Decimal(repr(a)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) + int(exponent) - 1
    return f"{sign}{text[0]}.{text[1:] or '0'}E{power}"


def _wrap(n: int, bits: int) -> int:
    """Two's-complement narrowing of an integer to ``bits``."""
    half = 1 << (bits - 1)
    return ((n + half) % (1 << bits)) - half


def _saturate(d: float, bits: int) -> int:
    """Java's double to int/long: NaN is 0, toward zero, clamped to the range."""
    if d != d:
        return 0
    hi = (1 << (bits - 1)) - 1
    if d >= hi:
        return hi
    if d <= -hi - 1:
        return -hi - 1
    return int(d)


def _integral(bits: int, narrow: int | None = None) -> Any:
    """A cast to a Java integral type of ``bits``; ``narrow``: a short or byte, which Java
    reaches from a double through an int."""
    def cast(v: Any) -> Any:
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            return _wrap(v, narrow or bits)
        if isinstance(v, float):
            n = _saturate(v, bits)
            return _wrap(n, narrow) if narrow else n
        if isinstance(v, str):
            # Integer.parseInt / Long.parseLong: digits only, within range; Esper drops the
            # event where the parse throws, kepl gives null (docs/epl.md, Deviations)
            if not _INT_TEXT.fullmatch(v):
                return None
            n = int(v)
            return n if _wrap(n, narrow or bits) == n else None
        return None
    return cast


def _to_double(v: Any) -> Any:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        text = v.strip()
        if re.fullmatch(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
                        r"[dDfF]?)", text) is None:
            return None
        text = text.rstrip("dDfF").replace("Infinity", "inf")
        return float(text)
    return None


def _to_boolean(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    return None


CASTS: dict[str, Any] = {
    "int": _integral(32), "integer": _integral(32), "long": _integral(64),
    "short": _integral(32, 16), "byte": _integral(32, 8),
    "double": _to_double, "float": _to_double, "bigdecimal": _to_double,
    "string": java_text, "boolean": _to_boolean,
}
"""``cast(x, type)`` by type name: null where Java's conversion would throw."""

"""JSON text of key values exactly as ``json.dumps`` writes it, without the encoder's
per-call set-up for the common scalars.

Group keys, context keys and distinct-value keys are stored as this text (state, changelog),
so it must not change: a scalar takes the same text ``json.dumps`` gives it (``", "`` between
items, ASCII escapes, ``NaN``/``Infinity``), anything else goes to ``json.dumps`` itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Any

_INF = float("inf")


def _float_text(v: float) -> str:
    if v != v:
        return "NaN"
    if v == _INF:
        return "Infinity"
    if v == -_INF:
        return "-Infinity"
    return float.__repr__(v)


_SCALAR: dict[type, Callable[[Any], str]] = {
    str: encode_basestring_ascii,
    int: int.__repr__,
    float: _float_text,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
}


def array_text(values: tuple | list, default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps(values, default=default)`` of a tuple or list."""
    if len(values) == 1:
        v = values[0]
        if type(v) is int:
            return f"[{v}]"
        f = _SCALAR.get(type(v))
        if f is not None:
            return "[" + f(v) + "]"
        return json.dumps(values, default=default)
    parts = []
    for v in values:
        f = _SCALAR.get(type(v))
        if f is None:
            return json.dumps(values, default=default)
        parts.append(f(v))
    return "[" + ", ".join(parts) + "]"


def scalar_text(value: Any, sort_keys: bool = False) -> str:
    """``json.dumps(value, sort_keys=sort_keys)``."""
    f = _SCALAR.get(type(value))
    if f is not None:
        return f(value)
    return json.dumps(value, sort_keys=sort_keys)

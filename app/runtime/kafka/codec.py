"""The bytes of the data plane: events in, bundles between stages, rows out.

One codec (orjson) for every record the worker reads or writes, so that an event is
decoded once and a row encoded once.  orjson writes NaN and infinities as ``null``;
a row holding one is written with the standard library instead, which keeps them
(``NaN``, ``Infinity``), as the embedded runtime and ``kepl tail`` print them.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: bytes) -> Any:
    """Parse JSON; what orjson refuses goes through the standard library, which also
    takes ``NaN`` and ``Infinity`` and words its errors as the embedded runtime does."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(value: Any) -> bytes:
    """Compact JSON of a row, an event or a control value."""
    out = orjson.dumps(value, default=str)
    if b"null" in out and _non_finite(value):
        return json.dumps(value, default=str, separators=(",", ":")).encode()
    return out


_INF = float("inf")


def _non_finite(value: Any) -> bool:
    """Whether a value holds NaN or an infinity (where orjson wrote ``null``)."""
    t = type(value)
    if t is float:
        return value != value or value == _INF or value == -_INF
    if t is dict:
        value = value.values()
    elif t is not list and t is not tuple:
        return False  # other objects are written as their str() by ``default``
    for v in value:
        t = type(v)
        if t is float:
            if v != v or v == _INF or v == -_INF:
                return True
        elif (t is dict or t is list or t is tuple) and _non_finite(v):
            return True
    return False


def bundle(entries: list[list[Any]]) -> bytes:
    """A repartition record: entries ``[kind, type, upstream, offset, ts, seq, value]``
    in routing order.  No NaN check: events are routed only after their type accepted
    them, and a type takes no non-finite double (``catalog.event_coercer``)."""
    return orjson.dumps(entries, default=str)

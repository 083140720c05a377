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


def _non_finite(value: Any) -> bool:
    r = repr(value)  # NaN and infinities print as nan/inf (a string may match: no harm)
    return "nan" in r or "inf" in r


def bundle(entries: list[list[Any]]) -> bytes:
    """A repartition record: entries ``[kind, type, upstream, offset, ts, seq, value]``
    in routing order (one record per stage batch and partition)."""
    return dumps(entries)

"""The bytes of the data plane: events in, bundles between stages, rows out.

One codec (orjson) for every record the worker reads or writes, so that an event is
decoded once and a row encoded once.  Output rows are strict JSON (``encode_row``).
Internal values (progress, lane cursors) that hold NaN or an infinity are written with
the standard library, which keeps them (``NaN``, ``Infinity``).
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: bytes) -> Any:
    """Parse JSON; what orjson refuses goes through the standard library, which also
    takes ``NaN`` and ``Infinity`` and words its errors as the embedded runtime does.

    A string holding a lone surrogate (``"\\ud800"``, valid JSON but no Unicode text)
    is refused with ``ValueError``: it could be read but never written out again."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        value = json.loads(data)
    bad = _lone_surrogate(value)
    if bad is not None:
        raise NotText(f"string {bad} holds a lone surrogate (not Unicode text)")
    return value


class NotText(ValueError):
    """Valid JSON holding a string that is not Unicode text (a lone surrogate)."""


def _lone_surrogate(value: Any) -> str | None:
    """The first string (or key) in ``value`` that cannot be encoded as UTF-8, shortened
    for a message, else None.  Iterative: the value may be nested deeply."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str:
            try:
                v.encode()
            except UnicodeEncodeError:
                return ascii(v[:40])
        elif t is dict:
            stack.extend(v.keys())
            stack.extend(v.values())
        elif t is list:
            stack.extend(v)
    return None


NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def encode_row(row: Any) -> tuple[bytes, bytes | None]:
    """An output row as strict JSON (RFC 8259), and the ``kepl.nonfinite`` header value
    if it held a non-finite double (else None).

    Such a double (NaN, an infinity) is written as the string ``"NaN"``, ``"Infinity"``
    or ``"-Infinity"``, as Jackson writes them and Spark's JSON reader takes them for a
    double column; the header lists the row's fields that held one (a JSON array), so
    that kepl's readers turn exactly those back into numbers (``decode_row``).

    What orjson cannot write (an integer beyond 64 bits, a lone surrogate) is written by
    the standard library instead (digits; a ``\\ud800`` escape): a row never fails."""
    try:
        out = orjson.dumps(row, default=str)
    except TypeError:
        return _encode_row_slow(row)
    if out.find(b"null") >= 0 and _non_finite(row):
        if type(row) is dict:
            fields = [k for k, v in row.items() if _non_finite(v)]
            fixed = {k: _as_strings(v) if k in fields else v for k, v in row.items()}
            return orjson.dumps(fixed, default=str), orjson.dumps(fields)
        return orjson.dumps(_as_strings(row), default=str), b"true"
    return out, None


def _encode_row_slow(row: Any) -> tuple[bytes, bytes | None]:
    fields: Any = None
    if _non_finite(row):
        if type(row) is dict:
            fields = [k for k, v in row.items() if _non_finite(v)]
        else:
            fields = True
        row = _as_strings(row)
    data = json.dumps(row, default=str, separators=(",", ":")).encode()
    return data, (None if fields is None else json.dumps(fields).encode())


def decode_row(data: bytes, nonfinite: bytes | None = None) -> Any:
    """A row written by ``encode_row`` (``nonfinite``: its ``kepl.nonfinite`` header)."""
    row = orjson.loads(data)
    if nonfinite is None:
        return row
    fields = orjson.loads(nonfinite)
    if fields is True or type(row) is not dict:
        return _as_numbers(row)
    for k in fields:
        if k in row:
            row[k] = _as_numbers(row[k])
    return row


def _as_strings(value: Any) -> Any:
    t = type(value)
    if t is float and (value != value or value in (_INF, -_INF)):
        return "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"
    if t is dict:
        return {k: _as_strings(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [_as_strings(v) for v in value]
    return value


def _as_numbers(value: Any) -> Any:
    if type(value) is str:
        return NON_FINITE.get(value, value)
    if type(value) is dict:
        return {k: _as_numbers(v) for k, v in value.items()}
    if type(value) is list:
        return [_as_numbers(v) for v in value]
    return value


def dumps(value: Any) -> bytes:
    """Compact JSON of a row, an event or a control value (the standard library writes
    what orjson cannot: integers beyond 64 bits, lone surrogates, NaN)."""
    try:
        out = orjson.dumps(value, default=str)
    except TypeError:
        return json.dumps(value, default=str, separators=(",", ":")).encode()
    if out.find(b"null") >= 0 and _non_finite(value):
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
    try:
        return orjson.dumps(entries, default=str)
    except TypeError:  # an untyped property holding an integer beyond 64 bits
        return json.dumps(entries, default=str, separators=(",", ":")).encode()

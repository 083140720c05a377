"""The order in which Esper iterates a window kept in a Java ``HashMap`` (``#unique``):
by the bucket of each key's Java hash code, so that a replay over the window (a
match_recognize after an out-of-sequence remove) steps its events as Esper does."""

from __future__ import annotations

import math
import struct
from typing import Any

INITIAL_CAPACITY = 16
LOAD_FACTOR = 0.75


def _int32(h: int) -> int:
    h &= 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_hash(value: Any) -> int:
    """``hashCode()`` of the Java object a kepl value is in Esper (a long for an int,
    a Double for a float, a String, a Boolean; a multi-key combines with 31)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        v = value & 0xFFFFFFFFFFFFFFFF
        return _int32(v ^ (v >> 32))
    if isinstance(value, float):
        if math.isnan(value):
            bits = 0x7FF8000000000000
        else:
            bits = struct.unpack(">q", struct.pack(">d", value))[0] & 0xFFFFFFFFFFFFFFFF
        return _int32(bits ^ (bits >> 32))
    if isinstance(value, str):
        h = 0
        for unit in struct.unpack(f"<{len(value.encode('utf-16-le')) // 2}H",
                                  value.encode("utf-16-le")):
            h = (31 * h + unit) & 0xFFFFFFFF
        return _int32(h)
    if isinstance(value, tuple | list):
        if len(value) == 1:
            return java_hash(value[0])
        h = 0
        for i, v in enumerate(value):
            h = java_hash(v) if i == 0 else (31 * h + java_hash(v)) & 0xFFFFFFFF
        return _int32(h)
    return _int32(hash(value))


def bucket(value: Any, size: int) -> int:
    """The bucket of a key in a ``HashMap`` that holds ``size`` keys (grown from 16,
    doubling past 3/4 full)."""
    capacity = INITIAL_CAPACITY
    while size > capacity * LOAD_FACTOR:
        capacity *= 2
    h = java_hash(value) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)

"""The order in which Esper iterates a window kept in a Java ``HashMap`` (``#unique``):
by the bucket of each key's Java hash code, so that a replay over the window (a
match_recognize after an out-of-sequence remove) steps its events as Esper does."""

from __future__ import annotations

import math
import struct
from collections import Counter
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
    if isinstance(value, dict):
        # java.util.AbstractMap: the sum of each entry's key hash xor value hash
        return _int32(sum(java_hash(k) ^ java_hash(v) for k, v in value.items()))
    return java_hash(str(value))  # deterministic (Python's own hash of text is salted)


def bucket(value: Any, size: int) -> int:
    """The bucket of a key in a ``HashMap`` that holds ``size`` keys (grown from 16,
    doubling past 3/4 full)."""
    capacity = INITIAL_CAPACITY
    while size > capacity * LOAD_FACTOR:
        capacity *= 2
    h = java_hash(value) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


TREEIFY_THRESHOLD = 8
MIN_TREEIFY_CAPACITY = 64


def boxed_hash(value: Any, box: str) -> int:
    """``hashCode()`` of ``value`` boxed as the Java type ``box`` (``int``: an Integer,
    its own value; ``float``: a Float; ``long``, ``double``, ``string``, ``boolean``;
    empty: decided by the value, as ``java_hash``)."""
    if value is None:
        return 0
    if box == "int" and type(value) is int:
        return _int32(value)
    if box == "double" and isinstance(value, int | float) and not isinstance(value, bool):
        return java_hash(float(value))
    if box == "float" and isinstance(value, int | float) and not isinstance(value, bool):
        try:
            bits = struct.unpack(">i", struct.pack(">f", float(value)))[0]
        except OverflowError:
            return java_hash(float(value))
        return 0x7FC00000 if math.isnan(value) else bits
    return java_hash(value)


def multikey_hash(values: tuple | list, boxes: tuple[str, ...]) -> int:
    """``hashCode()`` of Esper's group key: the boxed value of a single expression, else
    its multi-key (each value's hash code folded as ``31 * h + hash``)."""
    if len(values) == 1:
        return boxed_hash(values[0], boxes[0] if boxes else "")
    h = 0
    for i, v in enumerate(values):
        code = boxed_hash(v, boxes[i] if i < len(boxes) else "")
        h = code if i == 0 else (31 * h + code) & 0xFFFFFFFF
    return _int32(h)


def spread(code: int) -> int:
    """``HashMap.hash``: a hash code with its high half folded into the low one (the
    bucket is its low bits), as an unsigned 32-bit value."""
    h = code & 0xFFFFFFFF
    return h ^ (h >> 16)


def hashmap_order(hashes: list[int], capacity: int = INITIAL_CAPACITY,
                  spread_already: bool = False) -> tuple[list[int], int]:
    """The order a ``java.util.HashMap`` iterates distinct keys put in the given order
    (given by their hash codes, or by their ``spread`` ones), and the table size it ends
    with.

    Iteration goes bucket by bucket, ``(h ^ (h >>> 16)) & (capacity - 1)``, and in put
    order within a bucket (a resize splits buckets keeping that order).  The table starts
    at ``capacity`` and doubles when the map grows past 3/4 full, or when a ninth key
    lands in one bucket of a table below 64 buckets (instead of making the bucket a
    tree)."""
    spreads = hashes if spread_already else [spread(h) for h in hashes]
    n = len(spreads)
    cap = capacity
    if n > TREEIFY_THRESHOLD or n > cap * LOAD_FACTOR:
        cap = _grown(spreads, cap)
    mask = cap - 1
    if n == 2:
        return ([0, 1] if spreads[0] & mask <= spreads[1] & mask else [1, 0]), cap
    buckets = [s & mask for s in spreads]
    return sorted(range(n), key=buckets.__getitem__), cap  # stable: put order in a bucket


def _grown(spread: list[int], cap: int) -> int:
    """The table size after putting keys of these spread hashes into a table of ``cap``
    buckets (``hashmap_order``)."""
    n = len(spread)
    final = cap
    while n > final * LOAD_FACTOR:
        final *= 2
    # a crowded bucket grows a table below 64 buckets earlier, never past 64; when no
    # bucket of the first table gets nine keys, none of a larger one does either
    if final >= MIN_TREEIFY_CAPACITY or max(Counter(s & (cap - 1) for s in spread).values()
                                            ) <= TREEIFY_THRESHOLD:
        return final
    counts: dict[int, int] = {}
    for size, s in enumerate(spread, 1):
        b = s & (cap - 1)
        held = counts.get(b, 0)
        counts[b] = held + 1
        grow = held >= TREEIFY_THRESHOLD and cap < MIN_TREEIFY_CAPACITY
        if grow:
            cap *= 2
        if size > cap * LOAD_FACTOR:
            cap *= 2
            grow = True
        if grow:
            counts = {}
            for t in spread[:size]:
                counts[t & (cap - 1)] = counts.get(t & (cap - 1), 0) + 1
    return cap

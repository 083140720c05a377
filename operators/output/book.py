"""The bookkeeping an output limiter keeps between outputs, as one state entry.

The entry ``"trigger"`` holds the counts and times of the output condition (``Book``);
the output strategies keep what they collect under keys of their own (``("update", n)``,
``("group", key)``, ``("first", key)``, ``"last_insert"``, ``"last_remove"``,
``"first_remove"``).  ``STATE_VERSION`` 2 is this layout; state of version 1 (the entry
``"meta"`` with short names) is upgraded in place when a limiter first reads it.
"""

from __future__ import annotations

from typing import Any

from operators.base import StateNamespace

STATE_VERSION = 2
KEY = "trigger"

_V1_KEY = "meta"
_V1_NAMES = {"start": "started", "last_out": "last_output", "ci": "count_insert",
             "cr": "count_remove", "cit": "count_insert_total", "crt": "count_remove_total",
             "n_new": "pending_insert", "n_old": "pending_remove", "due": "due",
             "after_seen": "after_seen", "after_ok": "after_done",
             "witnessed": "first_posted", "updates": "updates", "seq": "seq"}
_V1_ROWS = {"ln": "last_insert", "lo": "last_remove", "fo": "first_remove"}
_V1_TAGS = {"b": "update", "g": "group", "f": "first"}

Book = dict[str, Any]
"""``started`` (when the partition started: ``after`` and ``last_output_timestamp``
count from there), ``last_output``, ``count_insert``/``count_remove`` (this interval)
and their ``_total``s, ``pending_insert``/``pending_remove`` (toward ``every N
events``), ``due`` (the next periodic or crontab output), ``after_seen``/``after_done``
(the after clause), ``first_posted`` (``output first``: this interval's row went out),
``updates`` (updates collected this interval), ``seq`` (orders the collected entries)."""


def fresh_book(now_ms: int, after_done: bool) -> Book:
    return {"version": STATE_VERSION, "started": now_ms, "last_output": now_ms,
            "count_insert": 0, "count_remove": 0, "count_insert_total": 0,
            "count_remove_total": 0, "pending_insert": 0, "pending_remove": 0, "due": None,
            "after_seen": 0, "after_done": after_done, "first_posted": False,
            "updates": 0, "seq": 0}


def load_book(state: StateNamespace, now_ms: int, after_done: bool, keep: bool) -> Book:
    """The partition's book: stored (upgraded from version 1 if need be), else a fresh
    one, stored at once when ``keep`` (created when the partition starts)."""
    book = state.get(KEY)
    if book is not None:
        return book
    old = state.get(_V1_KEY)
    if old is not None:
        return _upgrade_v1(state, old)
    book = fresh_book(now_ms, after_done)
    if keep:
        state.put(KEY, book)
    return book


def _upgrade_v1(state: StateNamespace, old: dict[str, Any]) -> Book:
    book: Book = {"version": STATE_VERSION}
    book.update({_V1_NAMES[k]: v for k, v in old.items() if k in _V1_NAMES})
    moves: list[tuple[Any, Any, Any]] = []
    for k, v in state.items():
        if isinstance(k, tuple) and k and k[0] in _V1_TAGS:
            moves.append((k, (_V1_TAGS[k[0]], *k[1:]), v))
        elif k in _V1_ROWS:
            moves.append((k, _V1_ROWS[k], v))
    for k, new_key, v in moves:
        state.delete(k)
        state.put(new_key, v)
    state.delete(_V1_KEY)
    state.put(KEY, book)
    return book

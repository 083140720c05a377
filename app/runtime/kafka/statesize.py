"""Bytes of state per statement in an engine partition's local database, for the
``kepl_state_bytes`` metric: counted by one scan, then kept up to date from the writes
of each committed batch (one multi-get of the keys written, never a rescan).

A statement's state lives under the key prefix of ``Engine``'s namespace
``("s", statement, context partition)``; tables, variables and context bookkeeping
are not a statement's and are not counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from operators.state import encode_key_part

_PREFIX = encode_key_part("s") + b"\x03"


def statement_of(key: bytes) -> str | None:
    """The statement whose state ``key`` belongs to (None: not a statement's)."""
    if not key.startswith(_PREFIX):
        return None
    start = len(_PREFIX)
    end = key.find(b"\x00\x00", start)
    if end < 0:
        return None
    return key[start:end].replace(b"\x00\xff", b"\x00").decode(errors="replace")


class StateSizes:
    """Key and value bytes per statement."""

    def __init__(self) -> None:
        self.bytes: dict[str, int] = {}

    @classmethod
    def scan(cls, items: Iterable[tuple[bytes, bytes]]) -> StateSizes:
        sizes = cls()
        b = sizes.bytes
        for k, v in items:
            stmt = statement_of(k)
            if stmt is not None:
                b[stmt] = b.get(stmt, 0) + len(k) + len(v)
        return sizes

    def apply(self, base: Any, writes: list[tuple[bytes, bytes | None]]) -> None:
        """Account a batch's ``writes`` before they go into ``base`` (a rocksdict
        database: its current values are the ones they replace)."""
        mine = [(k, v, stmt) for k, v in writes if (stmt := statement_of(k)) is not None]
        if not mine:
            return
        olds = base.get([k for k, _, _ in mine])
        b = self.bytes
        for (k, v, stmt), old in zip(mine, olds):
            delta = (0 if v is None else len(k) + len(v)) - (0 if old is None
                                                           else len(k) + len(old))
            b[stmt] = b.get(stmt, 0) + delta

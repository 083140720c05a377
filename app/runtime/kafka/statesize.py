"""Bytes of state per statement in an engine partition's local database, for the
``kepl_state_bytes`` metric: counted by a scan that reads at most ``SCAN_STEP`` keys per
checkpoint (a large state never holds the loop up), and kept up to date from the writes
of each committed batch (one multi-get of the keys written, never a rescan).

The scan and the batches never count a key twice: a batch's write is accounted only
below the scan's cursor (keys the scan already read); above it, the scan reads the key's
value as it is when it gets there.  A statement's state lives under the key prefix of
``Engine``'s namespace ``("s", statement, context partition)``; tables, variables and
context bookkeeping are not a statement's and are not counted.
"""

from __future__ import annotations

from typing import Any

from operators.state import encode_key_part

_PREFIX = encode_key_part("s") + b"\x03"
_END = encode_key_part("s") + b"\x04"
SCAN_STEP = 10_000


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
    """Key and value bytes per statement; ``cursor``: where the scan goes on (None: the
    whole state was read)."""

    def __init__(self) -> None:
        self.bytes: dict[str, int] = {}
        self.cursor: bytes | None = _PREFIX
        self.ahead = 0
        """Keys put above the cursor since the last step: the next step reads that many
        more, so a scan always gains on the keys batches add ahead of it."""

    @property
    def complete(self) -> bool:
        return self.cursor is None

    def step(self, base: Any, limit: int = SCAN_STEP) -> None:
        """Read up to ``limit`` (plus the keys put ahead of it since) more keys of the
        statements' state in ``base`` (a rocksdict database, raw mode) as they are now."""
        if self.cursor is None:
            return
        it = base.iter()
        it.seek(self.cursor)
        b = self.bytes
        limit, self.ahead = limit + self.ahead, 0
        for _ in range(limit):
            if not it.valid() or it.key() >= _END:
                self.cursor = None
                return
            k = it.key()
            stmt = statement_of(k)
            if stmt is not None:
                b[stmt] = b.get(stmt, 0) + len(k) + len(it.value())
            it.next()
        self.cursor = it.key() if it.valid() and it.key() < _END else None

    def apply(self, base: Any, writes: list[tuple[bytes, bytes | None]]) -> None:
        """Account a batch's ``writes`` before they go into ``base``: its current
        values are the ones they replace."""
        cursor = self.cursor
        mine = []
        for k, v in writes:
            stmt = statement_of(k)
            if stmt is None:
                continue
            if cursor is None or k < cursor:
                mine.append((k, v, stmt))
            elif v is not None:
                self.ahead += 1
        if not mine:
            return
        olds = base.get([k for k, _, _ in mine])
        b = self.bytes
        for (k, v, stmt), old in zip(mine, olds):
            delta = (0 if v is None else len(k) + len(v)) - (0 if old is None
                                                           else len(k) + len(old))
            b[stmt] = b.get(stmt, 0) + delta

"""The row log under every FIFO window: implicit sequence numbers, and a memory namespace
that the log owns (it writes nothing; checkpoints read the log)."""

from __future__ import annotations

import random
from pathlib import Path

from operators.state import MemoryStore, RocksStore
from operators.windows.common import INLINE, RowLog


def _apply(log: RowLog, rnd: random.Random, step: int) -> None:
    roll = rnd.random()
    if roll < 0.55 or not len(log):
        log.append({"n": step}, step * 10)
    elif roll < 0.8:
        log.popleft()
    else:
        log.remove_at(rnd.randrange(len(log)))


def test_memory_log_reads_like_a_rocksdb_log(tmp_path: Path) -> None:
    """Random appends, pops, removals and in-place replacements: the owned memory
    namespace shows exactly the keys and values the RocksDB namespace holds, and a log
    rebuilt over either holds the same rows with the same sequence numbers."""
    mem = MemoryStore()
    rocks = RocksStore(tmp_path / "db")
    a = RowLog(mem.namespace("w"), INLINE, stamped=True)
    b = RowLog(rocks.namespace("w"), INLINE, stamped=True)
    rnd_a, rnd_b = random.Random(5), random.Random(5)
    for step in range(600):
        _apply(a, rnd_a, step)
        _apply(b, rnd_b, step)
        if step % 50 == 0:
            assert list(mem.namespace("w").items()) == list(rocks.namespace("w").items())
    assert mem.namespace("w").data == {}  # the log is the state: nothing copied
    restored = MemoryStore.restore(mem.checkpoint())
    again = RowLog(restored.namespace("w"), INLINE, stamped=True)
    reopened = RowLog(rocks.namespace("w"), INLINE, stamped=True)
    for log in (again, reopened):
        assert list(log.rows) == list(a.rows)
        assert list(log.seqs) == list(a.seqs)
        assert list(log.stamps) == list(a.stamps)
    assert list(b.seqs) == list(a.seqs)
    rocks.close()


def test_sequence_numbers_stay_implicit_while_rows_leave_oldest_first() -> None:
    store = MemoryStore()
    log = RowLog(store.namespace("w"), INLINE)
    for i in range(5):
        log.append({"n": i})
    log.popleft()
    assert list(log.seqs) == [1, 2, 3, 4]
    assert list(store.namespace("w").items()) == [(1, {"n": 1}), (2, {"n": 2}),
                                                  (3, {"n": 3}), (4, {"n": 4})]
    log.remove_at(1)  # an arbitrary removal: numbers are kept explicitly from now on
    log.append({"n": 5})
    assert list(log.seqs) == [1, 3, 4, 5]
    rebuilt = RowLog(store.namespace("w"), INLINE)
    assert list(rebuilt.seqs) == [1, 3, 4, 5]
    assert rebuilt.next_seq == 6
    assert store.key_count() == 4
    store.namespace("w").clear()
    assert store.key_count() == 0

"""The worker loop's latency trace (``KEPL_LATENCY_TRACE``), without a broker."""

from __future__ import annotations

import io
from typing import Any

from app.runtime.kafka.loop import (
    CONSUME_BATCH,
    LIVE_BATCH,
    LIVE_LAG_MS,
    Worker,
    live,
    next_live_batch,
)


class _Msg:
    def __init__(self, partition: int, ts: int) -> None:
        self._p, self._ts = partition, ts

    def partition(self) -> int:
        return self._p

    def timestamp(self) -> tuple[int, int]:
        return (1, self._ts) if self._ts >= 0 else (0, -1)


def test_a_traced_batch_says_its_size_and_the_newest_timestamp_per_partition(
        monkeypatch: Any) -> None:
    worker = object.__new__(Worker)
    worker.trace = io.StringIO()
    monkeypatch.setattr("app.runtime.kafka.loop.time.time", lambda: 12.5)
    worker._trace_batch([_Msg(2, 700), _Msg(0, 500), _Msg(2, 650), _Msg(0, 900)], 12.25)
    assert worker.trace.getvalue() == "b 12.2500 12.5000 4 0:900 2:700\n"


def test_a_batch_is_live_while_its_last_record_is_fresh() -> None:
    now_s = 1000.0
    fresh, stale = 1_000_000 - LIVE_LAG_MS + 1, 1_000_000 - LIVE_LAG_MS
    assert live([_Msg(0, stale), _Msg(1, fresh)], now_s)
    assert not live([_Msg(1, fresh), _Msg(0, stale)], now_s)
    assert not live([_Msg(0, -1)], now_s)  # no timestamp: a backlog's pacing


def _paced(live_input: bool) -> Worker:
    worker = object.__new__(Worker)
    worker.interval_s, worker.caught_up_s, worker.live_behind_s = 0.1, 0.02, 0.03
    worker.since_commit = 2000
    worker.live = live_input
    worker._barrier_due = lambda: False  # type: ignore[method-assign]
    return worker


def test_live_input_checkpoints_after_each_batch_a_backlog_per_interval() -> None:
    backlog, live_input = _paced(False), _paced(True)
    # a full batch of a backlog: the next batch before the checkpoint, up to the interval
    assert not backlog._checkpoint_due(False, 0.05)
    assert backlog._checkpoint_due(False, 0.1)
    assert backlog._checkpoint_due(True, 0.05)
    # live input: a full batch checkpoints too, once caught_up_s passed
    assert live_input._checkpoint_due(False, 0.05)
    assert not live_input._checkpoint_due(False, 0.01)
    # live input whose batch came back full at the largest size: behind, a checkpoint
    # each live_behind_s, not after every batch
    assert not live_input._checkpoint_due(False, 0.025, behind=True)
    assert live_input._checkpoint_due(False, 0.03, behind=True)
    # a backlog's full batch keeps the interval
    assert not backlog._checkpoint_due(False, 0.05, behind=True)


def test_a_full_live_batch_doubles_the_next_up_to_the_backlog_batch() -> None:
    sizes = [LIVE_BATCH]
    for _ in range(4):  # records keep waiting: each batch comes back full
        sizes.append(next_live_batch(sizes[-1], sizes[-1]))
    assert sizes == [500, 1000, 2000, 2000, 2000]
    assert CONSUME_BATCH == 2000
    # half full: kept; under a quarter: halved, never below LIVE_BATCH
    assert next_live_batch(2000, 1000) == 2000
    assert next_live_batch(2000, 499) == 1000
    assert next_live_batch(1000, 10) == 500
    assert next_live_batch(500, 1) == 500

"""The worker loop's latency trace (``KEPL_LATENCY_TRACE``), without a broker."""

from __future__ import annotations

import io
from typing import Any

from app.runtime.kafka.loop import Worker


class _Msg:
    def __init__(self, partition: int, ts: int) -> None:
        self._p, self._ts = partition, ts

    def partition(self) -> int:
        return self._p

    def timestamp(self) -> tuple[int, int]:
        return 1, self._ts


def test_a_traced_batch_says_its_size_and_the_newest_timestamp_per_partition(
        monkeypatch: Any) -> None:
    worker = object.__new__(Worker)
    worker.trace = io.StringIO()
    monkeypatch.setattr("app.runtime.kafka.loop.time.time", lambda: 12.5)
    worker._trace_batch([_Msg(2, 700), _Msg(0, 500), _Msg(2, 650), _Msg(0, 900)], 12.25)
    assert worker.trace.getvalue() == "b 12.2500 12.5000 4 0:900 2:700\n"

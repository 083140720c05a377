"""Source records deleted before the app read them (retention, DeleteRecords, a
truncated topic): found at assignment (a committed offset below the log start) or as a
gap in the offsets read, counted once (stats, the cursor's metadata, metrics) and, by
the app's ``on_lost_input`` policy, logged or fatal (exit ``EXIT_LOST_INPUT``).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from app.runtime.kafka.health import Metrics
from app.runtime.kafka.inputs import Inputs

log = logging.getLogger("kepl.worker")

EXIT_LOST_INPUT = 4


class LostInput:
    """Asks the broker where a source partition's log starts and says what was lost."""

    def __init__(self, consumer: Any, inputs: Inputs, stats: dict[str, int],
                 metrics: Metrics | None, policy: str) -> None:
        """``policy``: the app's ``on_lost_input`` (``stop`` ends the worker)."""
        self.consumer = consumer
        self.inputs = inputs
        self.stats = stats
        self.metrics = metrics
        self.policy = policy

    def gap(self, key: tuple[str, int], expected: int, off: int) -> None:
        """The next record read lies past the one expected: offsets a transaction marker
        or an aborted transaction took, or records deleted before they were read."""
        from confluent_kafka import TopicPartition

        try:
            low, _ = self.consumer.get_watermark_offsets(
                TopicPartition(key[0], key[1]), timeout=1.0, cached=True)
        except Exception:  # noqa: BLE001 - unknown yet: the next gap asks again
            return
        if expected < low:
            self.lost(key, expected, min(low, off))

    def log_start(self, key: tuple[str, int]) -> int | None:
        """The first offset still in a partition's log (None if the broker did not say)."""
        from confluent_kafka import TopicPartition

        try:
            low, _ = self.consumer.get_watermark_offsets(
                TopicPartition(key[0], key[1]), timeout=5.0, cached=False)
        except Exception:  # noqa: BLE001 - then a gap in the offsets read tells
            return None
        return low

    def lost(self, key: tuple[str, int], expected: int, start: int) -> None:
        """Records ``expected``..``start - 1`` of a source partition were deleted before
        this app read them: say so once, count them, and go on from ``start`` unless the
        app's policy stops the worker."""
        lost = start - expected
        self.stats["lost"] = self.stats.get("lost", 0) + lost
        inp = self.inputs.get(key)
        if inp is not None and inp.cursor is not None:
            inp.cursor.lost += lost
        if self.metrics is not None:
            self.metrics.add_lost(f"{key[0]}[{key[1]}]", lost)
        where = f"{key[0]}[{key[1]}]"
        if self.policy == "stop":
            log.critical("input lost: %s offsets %d..%d (%d record(s)) were deleted before "
                         "they were read; on_lost_input: stop", where, expected, start - 1,
                         lost)
            sys.stderr.flush()
            os._exit(EXIT_LOST_INPUT)
        log.error("input lost: %s offsets %d..%d (%d record(s)) were deleted before they "
                  "were read (retention or DeleteRecords); continuing from offset %d",
                  where, expected, start - 1, lost, start)

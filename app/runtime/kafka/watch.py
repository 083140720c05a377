"""What a worker says when it does not move: stalls, input lag, dead letters in bulk."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from app.runtime.kafka.health import Health, Metrics
from app.runtime.kafka.inputs import Inputs

log = logging.getLogger("kepl.worker")

DEAD_LOG_PER_S = 5
LAG_EVERY_S = 5.0


class DeadLetterLog:
    """One warning per dead letter, at most ``DEAD_LOG_PER_S`` a second; the rest are
    counted and summed up in the next line."""

    def __init__(self, dlq_topic: str) -> None:
        self.dlq_topic = dlq_topic
        self.window = 0.0
        self.lines = self.quiet = 0

    def say(self, where: str, reason: str) -> None:
        """A dead letter from ``where`` (``topic/partition/offset``), or with ``where``
        empty only the sum of the quiet ones."""
        now = time.monotonic()
        if now - self.window >= 1.0:
            if self.quiet:
                log.warning("%d more dead letter(s) to %s in the last second",
                            self.quiet, self.dlq_topic)
            self.window, self.lines, self.quiet = now, 0, 0
        if not where:
            return
        if self.lines < DEAD_LOG_PER_S:
            self.lines += 1
            log.warning("dead letter %s to %s: %s", where, self.dlq_topic, reason)
        else:
            self.quiet += 1

    def tick(self, now: float) -> None:
        if self.quiet and now - self.window >= 1.0:
            self.say("", "")


class StallWatch:
    """Says so when nothing moves: an engine partition whose oldest waiting record was not
    released for ``stall_s`` (a watermark missing from an upstream), or input lag while
    nothing was consumed for that long; refreshes the lag and waiting-records metrics."""

    def __init__(self, consumer: Any, inputs: Inputs, parts: Callable[[], dict],
                 health: Health, metrics: Metrics | None, stall_s: float) -> None:
        self.consumer = consumer
        self.inputs = inputs
        self.parts = parts
        self.health = health
        self.metrics = metrics
        self.stall_s = stall_s
        self.waits: dict[tuple[str, int], tuple[tuple[str, int], float]] = {}
        self.last_lag = 0.0
        self.last_stall_log = 0.0

    def tick(self, now: float, last_consumed: float) -> None:
        stalls: list[str] = []
        held = 0
        for key, part in self.parts().items():
            w = part.waiting()
            if w is None:
                self.waits.pop(key, None)
                continue
            held += w.records
            sig = (w.upstream, w.offset)
            seen = self.waits.get(key)
            if seen is None or seen[0] != sig:
                self.waits[key] = (sig, now)
            elif now - seen[1] >= self.stall_s:
                stalls.append(f"engine partition {key[0]}[{key[1]}]: {w.describe()}, "
                              f"for {now - seen[1]:.0f} s (watermarks come from "
                              f"`kepl clock`)")
        lags: dict[tuple[str, int], int] | None = None
        idle = now - last_consumed
        if idle >= self.stall_s or (self.metrics is not None
                                    and now - self.last_lag >= LAG_EVERY_S):
            lags = self.lags()
            self.last_lag = now
            if idle >= self.stall_s:
                behind = {k: n for k, n in lags.items() if n > 0}
                if behind:
                    where = ", ".join(f"{t}[{p}] {n}" for (t, p), n in sorted(behind.items()))
                    stalls.append(f"input lag ({where}) but nothing consumed for "
                                  f"{idle:.0f} s")
        if self.metrics is not None:
            self.metrics.waiting.set(held)
            self.metrics.stalled.set(1 if stalls else 0)
            if lags is not None:
                self.metrics.set_lag(lags)
        text = "; ".join(stalls)
        if text and (not self.health.stalled or now - self.last_stall_log >= self.stall_s):
            log.warning("no progress: %s", text)
            self.last_stall_log = now
        elif not text and self.health.stalled:
            log.warning("progress again")
        self.health.stalled = text

    def lags(self) -> dict[tuple[str, int], int]:
        """Records between the read position and the end of each assigned partition."""
        from confluent_kafka import TopicPartition

        out: dict[tuple[str, int], int] = {}
        try:
            assigned = self.consumer.position(self.consumer.assignment())
        except Exception:  # noqa: BLE001 - mid-rebalance: try next time
            return out
        for tp in assigned:
            key = (tp.topic, tp.partition)
            try:
                low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(tp.topic, tp.partition), timeout=1.0, cached=False)
            except Exception:  # noqa: BLE001 - a metadata hiccup: try next time
                continue
            inp = self.inputs.get(key)
            committed = inp.committed if inp is not None else None
            pos = tp.offset if tp.offset >= 0 else (committed if committed is not None
                                                    else low)
            out[key] = max(0, high - pos)
        return out

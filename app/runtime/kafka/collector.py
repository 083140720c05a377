"""The cyclic garbage collector between checkpoints.

After every checkpoint the objects alive are frozen out of the cyclic collector, so its
collections scan only what the last ~100 ms allocated (a full collection over a worker's
state took 40-300 ms here, and found nothing: the state holds no cycles).  Within a
checkpoint no collection runs either: the young generation's threshold is raised from
700 to ``YOUNG_THRESHOLD`` objects, and each checkpoint collects the young generation
once, before it freezes.  A checkpoint's input records and output rows stay alive until
it commits, so at 700 every one of them was traversed once or twice by collections that
found nothing; at the checkpoint they are gone, and only the state they left is
traversed.  A full collection still runs every ``KEPL_GC_FULL_S`` seconds (default 600),
for cyclic garbage among frozen objects.  Every ``KEPL_TRIM_S`` seconds (default 30) free
C heap pages go back to the kernel (``memory.trim``), so that the resident size follows
what is held.
"""

from __future__ import annotations

import gc
import logging
import os
import time

from app.runtime.kafka import memory

log = logging.getLogger("kepl.worker")

GC_FULL_ENV = "KEPL_GC_FULL_S"
DEFAULT_GC_FULL_S = 600.0
TRIM_ENV = "KEPL_TRIM_S"
DEFAULT_TRIM_S = 30.0
YOUNG_THRESHOLD = 100_000
"""Net new container objects that start a young collection between checkpoints (a
checkpoint of 6,000 events of a keyed statement leaves about 24,000 alive until it
commits)."""


class Collector:
    """Freezes after each checkpoint; a full collection now and then (module docstring)."""

    def __init__(self, full_s: float | None = None, trim_s: float | None = None) -> None:
        """``full_s``: seconds between full collections (None: ``KEPL_GC_FULL_S``);
        ``trim_s``: between heap trims (None: ``KEPL_TRIM_S``; 0: never)."""
        self.full_s = _seconds(full_s, GC_FULL_ENV, DEFAULT_GC_FULL_S)
        self.trim_s = _seconds(trim_s, TRIM_ENV, DEFAULT_TRIM_S)
        self.last_full = self.last_trim = time.monotonic()
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, older, oldest)

    def checkpointed(self, now: float) -> None:
        """A checkpoint just committed (``now``: the monotonic time)."""
        if now - self.last_full >= self.full_s:
            gc.unfreeze()
            found = gc.collect()
            self.last_full = time.monotonic()
            log.info("full garbage collection: %d object(s) in %.3f s", found,
                     self.last_full - now)
        if self.trim_s and now - self.last_trim >= self.trim_s:
            memory.trim()
            self.last_trim = time.monotonic()
        gc.collect(0)
        gc.freeze()


def _seconds(given: float | None, env: str, default: float) -> float:
    if given is not None:
        return given
    text = os.environ.get(env, "").strip()
    return float(text) if text else default

"""The cyclic garbage collector between checkpoints.

After every checkpoint the objects alive are frozen out of the cyclic collector, so its
collections scan only what the last ~100 ms allocated (a full collection over a worker's
state took 40-300 ms here, and found nothing: the state holds no cycles).  A full
collection still runs every ``KEPL_GC_FULL_S`` seconds (default 600), for cyclic garbage
among frozen objects.
"""

from __future__ import annotations

import gc
import logging
import os
import time

log = logging.getLogger("kepl.worker")

GC_FULL_ENV = "KEPL_GC_FULL_S"
DEFAULT_GC_FULL_S = 600.0


class Collector:
    """Freezes after each checkpoint; a full collection now and then (module docstring)."""

    def __init__(self, full_s: float | None = None) -> None:
        """``full_s``: seconds between full collections (None: ``KEPL_GC_FULL_S``)."""
        if full_s is None:
            given = os.environ.get(GC_FULL_ENV, "").strip()
            full_s = float(given) if given else DEFAULT_GC_FULL_S
        self.full_s = full_s
        self.last_full = time.monotonic()

    def checkpointed(self, now: float) -> None:
        """A checkpoint just committed (``now``: the monotonic time)."""
        if now - self.last_full >= self.full_s:
            gc.unfreeze()
            found = gc.collect()
            self.last_full = time.monotonic()
            log.info("full garbage collection: %d object(s) in %.3f s", found,
                     self.last_full - now)
        gc.freeze()

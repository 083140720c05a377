"""The progress line of a ``kepl spark`` job, on a terminal's stderr: Spark starting (the
JVM and the connector's resolution), then the running stages' tasks, from Spark's status
tracker, refreshed by a thread twice a second.  In a pipe or a file it shows nothing
(``app.cli.progress.Progress``)."""

from __future__ import annotations

import threading
import time
from typing import Any

from app.cli.progress import Progress

TICK_S = 0.5


class SparkProgress:
    """``with SparkProgress("read") as p: ...; p.running(spark); ...``"""

    def __init__(self, command: str, enabled: bool | None = None) -> None:
        self.command = command
        self.spark: Any = None
        self.t0 = time.monotonic()
        self.progress = Progress(self.line, interval=TICK_S, enabled=enabled)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def running(self, spark: Any) -> None:
        """Spark is up: from now on the line shows its stages."""
        self.spark = spark

    def line(self, final: bool) -> str:
        took = time.monotonic() - self.t0
        head = f"kepl spark {self.command}:"
        if final:
            return f"{head} done in {took:.1f} s"
        if self.spark is None:
            return f"{head} starting Spark ({took:.0f} s)"
        return f"{head} {stages(self.spark)} ({took:.0f} s)"

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self.progress.tick()
            except Exception:  # noqa: BLE001 - a status read while Spark stops
                return

    def __enter__(self) -> SparkProgress:
        if self.progress.enabled:
            self._thread = threading.Thread(target=self._run, name="kepl-spark-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.progress.close()


def stages(spark: Any) -> str:
    """'stage 3: 45/200 tasks' for the running stages (or 'working' between them)."""
    tracker = spark.sparkContext.statusTracker()
    parts = []
    for sid in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(sid)
        if info is not None:
            parts.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks")
    return ", ".join(parts) if parts else "working"

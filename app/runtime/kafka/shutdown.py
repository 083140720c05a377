"""A worker process's shutdown: SIGTERM and SIGINT stop it within a bound, in any state."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Any, Protocol

log = logging.getLogger("kepl.worker")

EXIT_SHUTDOWN_TIMEOUT = 5
SHUTDOWN_ENV = "KEPL_SHUTDOWN_TIMEOUT_S"
DEFAULT_SHUTDOWN_S = 10.0
"""After SIGTERM/SIGINT a worker commits and leaves within this long, or exits without
the last commit (the next worker reads from the one before); a second signal exits at
once."""


class Stoppable(Protocol):
    stopping: bool


class Interrupted(Exception):
    """A stop was requested while a long step (a restore) ran: leave it unfinished."""


class ShutdownWatch:
    """Bounds a worker process's shutdown.  The first SIGTERM/SIGINT asks the loop to stop
    (before a loop runs, the process exits at once: nothing to commit); if the process is
    still here ``KEPL_SHUTDOWN_TIMEOUT_S`` later (a commit or a close waiting on an
    unreachable broker), or at a second signal, it exits.

    A thread woken through ``signal.set_wakeup_fd`` watches, because Python runs a signal
    handler only once the main thread is back from a blocking client call."""

    def __init__(self) -> None:
        self.worker: Stoppable | None = None
        self.installed = False

    def install(self) -> None:
        """Take SIGTERM and SIGINT (main thread only; elsewhere they are the embedding
        program's).  Idempotent."""
        import socket
        import threading

        if self.installed or threading.current_thread() is not threading.main_thread():
            return
        given = os.environ.get(SHUTDOWN_ENV, "").strip()
        self.timeout_s = float(given) if given else DEFAULT_SHUTDOWN_S
        r, w = socket.socketpair()
        w.setblocking(False)
        self._sockets = (r, w)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _ignore)  # the thread acts; this only wakes it
        signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch, args=(r,), name="kepl-shutdown",
                         daemon=True).start()
        self.installed = True

    def _watch(self, r: Any) -> None:
        import select

        signals = 0
        deadline = None
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([r], [], [], wait)
            if ready:
                got = r.recv(64)
                if not got:
                    return
                # the wakeup fd carries every signal Python handles (an alarm, say)
                stops = sum(1 for b in got if b in (signal.SIGTERM, signal.SIGINT))
                if not stops:
                    continue
                signals += stops
                worker = self.worker
                if worker is None:
                    log.warning("stopped before the consumer loop started")
                    sys.stderr.flush()
                    os._exit(0)
                worker.stopping = True
                if deadline is None:
                    deadline = time.monotonic() + self.timeout_s
            if signals >= 2:
                log.warning("second signal: exiting now, without the last commit")
            elif deadline is not None and time.monotonic() >= deadline:
                log.warning("shutdown took longer than %.0f s: exiting without the last "
                            "commit (the next worker continues from the one before)",
                            self.timeout_s)
            else:
                continue
            sys.stderr.flush()
            os._exit(EXIT_SHUTDOWN_TIMEOUT)


def _ignore(*_: Any) -> None:
    pass


SHUTDOWN = ShutdownWatch()
"""The process's one shutdown watch: ``python -m app.runtime.kafka.worker`` installs it
first thing, ``Worker.run`` attaches to it."""



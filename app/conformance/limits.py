"""Scenario files run under a per-scenario time limit, so one hung scenario cannot stop a run.

Mechanism: each file runs in a long-lived worker process (``fork``) that the parent
feeds one path at a time and waits on with a timeout.  A scenario past its limit gets
the worker killed (SIGKILL ends it even inside a C call or a loop that swallows
exceptions), is reported as FAIL "time limit" and a fresh worker takes the next file.
One worker for many files keeps the import cost to once per hang, not once per file.
Signals alone (SIGALRM) only interrupt Python bytecode in the main thread and leave a
half-run engine behind; they are the fallback where ``fork`` does not exist, and with
neither (or a limit of 0) files run in-process without a limit.  Processes a scenario
starts end with the worker that starts them (``app.runtime.kafka.children``), so a kill
leaves none behind.
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from types import FrameType
from typing import Any

from app.conformance.runner import Outcome, load_scenario, run_file

Runner = Callable[[dict], str | None]


def _serve(conn: Connection, parent_end: Connection, runner: Runner) -> None:
    """Worker loop: a path in, its Outcome out, until the parent closes the pipe."""
    parent_end.close()  # else the parent's close would never reach us as EOF
    while True:
        try:
            path = conn.recv()
        except EOFError:
            return
        conn.send(run_file(Path(path), runner))


def _name(path: Path) -> str:
    """The scenario's name for a report the worker could not give (file stem if unreadable)."""
    try:
        return str(load_scenario(path)["name"])
    except Exception:  # noqa: BLE001 - the worker would have reported the bad file
        return path.stem


class _TimeLimit(BaseException):
    """Raised by SIGALRM in the in-process fallback; a BaseException so that the
    engine's and run_file's ``except Exception`` do not swallow it."""


class LimitedRunner:
    """Runs scenario files one at a time, each within ``limit_s`` seconds (0: no limit)."""

    def __init__(self, runner: Runner, limit_s: float) -> None:
        self.runner = runner
        self.limit_s = limit_s
        self.mode = self._choose_mode()
        self._proc: Any = None
        self._conn: Connection | None = None

    def _choose_mode(self) -> str:
        if self.limit_s <= 0:
            return "inline"
        if "fork" in multiprocessing.get_all_start_methods():
            return "worker"
        if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
            return "alarm"
        return "inline"

    def __enter__(self) -> LimitedRunner:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:  # Ctrl-C or a failure: do not wait for the scenario
            self._kill()
        self.close()

    def run(self, path: Path) -> Outcome:
        """The outcome of one file; a file over its limit is FAIL "time limit"."""
        if self.mode == "worker":
            return self._run_worker(path)
        if self.mode == "alarm":
            return self._run_alarm(path)
        return run_file(path, self.runner)

    def _timed_out(self, path: Path) -> Outcome:
        return Outcome(_name(path), False, f"time limit: not finished within {self.limit_s:g} s",
                       str(path))

    # -- worker process ------------------------------------------------------
    def _start(self) -> Connection:
        if self._conn is None:
            ctx = multiprocessing.get_context("fork")
            parent, child = ctx.Pipe()
            self._proc = ctx.Process(target=_serve, args=(child, parent, self.runner), daemon=True)
            self._proc.start()
            child.close()
            self._conn = parent
        return self._conn

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join()
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def _run_worker(self, path: Path) -> Outcome:
        conn = self._start()
        try:
            conn.send(str(path))
            if conn.poll(self.limit_s):
                out: Outcome = conn.recv()
                return out
        except (EOFError, OSError):
            self._kill()
            return Outcome(_name(path), False, "engine error: the worker process died",
                           str(path))
        self._kill()
        return self._timed_out(path)

    def close(self) -> None:
        """Stop the worker (it would also end with the parent: it is a daemon)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            self._proc.join(timeout=5)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join()
            self._proc = None

    # -- SIGALRM fallback ----------------------------------------------------
    def _run_alarm(self, path: Path) -> Outcome:
        def on_alarm(signum: int, frame: FrameType | None) -> None:
            raise _TimeLimit

        previous = signal.signal(signal.SIGALRM, on_alarm)
        try:
            signal.setitimer(signal.ITIMER_REAL, self.limit_s)
            try:
                return run_file(path, self.runner)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _TimeLimit:
            return self._timed_out(path)
        finally:
            signal.signal(signal.SIGALRM, previous)

"""Worker subprocesses that end with the process that started them.

A command that starts workers (``kepl scenario run --kafka``, ``kepl demo``, the test
harness) stops them itself on the way out; ``die_with_parent`` covers the ways out that
run no clean-up: SIGKILL of the starter (``--time-limit`` kills a scenario that hangs),
a crash.  On Linux the child asks the kernel for a signal when its parent dies
(``prctl(PR_SET_PDEATHSIG)``, set between fork and exec, kept across exec); elsewhere it
is a no-op.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1

_libc = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - no libc to ask
        _libc = None


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child gets ``sig`` when the thread
    that starts it (this one) ends; None where the platform cannot do it."""
    if _libc is None:
        return None
    parent = os.getpid()
    prctl = _libc.prctl

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request was made
            os.kill(os.getpid(), sig)

    return preexec

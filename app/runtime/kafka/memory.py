"""The C heap of a worker process: few malloc arenas, free pages handed back.

A worker's librdkafka and RocksDB threads each get a glibc malloc arena by default (up
to 8 per core); memory freed in one arena stays mapped, so a burst (a consumer queue
full under lag, a large snapshot) leaves the resident size high for good.  The worker
caps the arenas at two and returns free pages to the kernel now and then
(``malloc_trim``), so its RSS follows what it holds.  Outside glibc both are no-ops.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("kepl.worker")

_M_ARENA_MAX = -8  # mallopt parameter number, glibc malloc.h
ARENAS = 2


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt, libc.malloc_trim  # noqa: B018 - glibc only
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas (call before the client and database threads start);
    False where the C library is not glibc."""
    return _LIBC is not None and bool(_LIBC.mallopt(_M_ARENA_MAX, arenas))


def trim() -> bool:
    """Hand free heap pages back to the kernel; True when some were."""
    return _LIBC is not None and bool(_LIBC.malloc_trim(0))

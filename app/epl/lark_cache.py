"""The LALR tables of a lark grammar, built once and kept in the user's cache directory.

Building the tables of the EPL grammar costs about half a second of CPU; loading them
costs a few milliseconds, so every ``kepl`` command after the first starts fast. The
file name carries a hash of the grammar, the options, lark's and Python's version: a
changed grammar gets new tables, never stale ones. Without a writable cache directory
the tables are built in memory as before.
"""

from __future__ import annotations

import gc
import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lark import Lark
from lark import __version__ as LARK_VERSION


def _without_gc(build: Callable[[], Lark]) -> Lark:
    """``build()`` with the cyclic collector paused: loading creates some 30,000 objects
    that live as long as the process, and collections in the middle of it find nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return build()
    finally:
        if enabled:
            gc.enable()


def cache_dir() -> Path:
    """``$KEPL_CACHE_DIR``, else ``$XDG_CACHE_HOME/kepl``, else ``~/.cache/kepl``."""
    if os.environ.get("KEPL_CACHE_DIR"):
        return Path(os.environ["KEPL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kepl"


def cached_lark(name: str, grammar: str, **options: Any) -> Lark:
    """``Lark(grammar, **options)`` (LALR), its tables read from or written to the cache.

    A new cache file is written under a temporary name and renamed into place, so
    concurrent first runs never read a half-written file."""
    hashed = {k: v for k, v in options.items() if k not in ("postlex", "transformer")}
    key = f"{grammar}\0{sorted(hashed.items())!r}\0{LARK_VERSION}\0{sys.version_info[:2]}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    path = cache_dir() / f"{name}-{digest}.lark"
    if path.is_file():
        return _without_gc(lambda: Lark(grammar, cache=str(path), **options))
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Lark(grammar, **options)
    parser = Lark(grammar, cache=str(tmp), **options)
    try:
        os.replace(tmp, path)
    except OSError:  # the directory is not writable: lark could not save the tables
        tmp.unlink(missing_ok=True)
    return parser

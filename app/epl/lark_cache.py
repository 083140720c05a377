"""A lark LALR parser, built once and kept, pickled, in the user's cache directory.

Building the parser of the EPL grammar costs about half a second of CPU.  lark's own
cache keeps the tables but rebuilds every rule, terminal, lexer and tree-builder object
from them at each start (some 60 ms); the whole parser object, pickled, loads in a
third of that.  Modules and the parser's Shift/Reduce markers (compared by identity)
are pickled by name.  The file name carries a hash of the grammar, the options, lark's
and Python's version: a changed grammar gets a new parser, never a stale one.  Without
a writable cache directory, or when a file cannot be read back, the parser is built in
memory as before.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib
import io
import os
import pickle
import sys
import types
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
    """``Lark(grammar, **options)`` (LALR), read from or written to the cache.

    A new cache file is written under a temporary name and renamed into place, so
    concurrent first runs never read a half-written file."""
    hashed = {k: v for k, v in options.items() if k not in ("postlex", "transformer")}
    key = (f"{grammar}\0{sorted(hashed.items())!r}\0{LARK_VERSION}\0{sys.version_info[:2]}"
           "\0pickled, from lark's cache")
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    path = cache_dir() / f"{name}-{digest}.lark"
    if path.is_file():
        try:
            return _without_gc(lambda: _Unpickler(io.BytesIO(path.read_bytes())).load())
        except Exception:  # noqa: BLE001 - an unreadable file: build the parser anew
            pass
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Lark(grammar, **options)
    # Built through lark's own table cache: that turns the grammar's names into plain
    # strings (a freshly built parser keys its tables by lark Tokens, whose Python-level
    # __eq__ makes every table lookup slower, some 15% of parsing).
    built = Lark(grammar, cache=str(tmp), **options)
    if not tmp.is_file():  # lark could not write its cache
        return built
    parser = Lark(grammar, cache=str(tmp), **options)
    try:
        with open(tmp, "wb") as f:
            _Pickler(f, protocol=pickle.HIGHEST_PROTOCOL).dump(parser)
        os.replace(tmp, path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        # not writable, or not picklable: the parser lives in memory only
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return parser


def _markers() -> dict[str, object]:
    """The objects lark compares by identity, which a pickle must not copy."""
    from lark.parsers.lalr_analysis import Reduce, Shift

    return {"Shift": Shift, "Reduce": Reduce}


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> tuple[str, str] | None:
        if isinstance(obj, types.ModuleType):
            return ("module", obj.__name__)
        for marker, value in _MARKERS.items():
            if obj is value:
                return ("marker", marker)
        return None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: tuple[str, str]) -> Any:
        kind, name = pid
        if kind == "module":
            return importlib.import_module(name)
        return _MARKERS[name]


_MARKERS = _markers()

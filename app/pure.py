"""Loads a module's .py source instead of its compiled extension (``make compile``) when
``KEPL_PURE`` is set or the source is newer than the extension, so the source stays the truth."""

from __future__ import annotations

import os
import sys
import warnings
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from importlib.util import spec_from_file_location

PACKAGES = ("app.", "operators.")


class SourceFirst:
    """A meta path finder for kepl's own modules: it answers only when the source must win."""

    @staticmethod
    def find_spec(name: str, path: list[str] | None = None,
                  target: object = None) -> ModuleSpec | None:
        if path is None or not name.startswith(PACKAGES):
            return None
        tail = name.rpartition(".")[2]
        for entry in path:
            source = os.path.join(entry, tail + ".py")
            try:
                source_mtime = os.stat(source).st_mtime
            except OSError:
                continue
            if not os.environ.get("KEPL_PURE"):
                try:
                    built = os.stat(os.path.join(entry, tail + EXTENSION_SUFFIXES[0])).st_mtime
                except OSError:
                    return None
                if built >= source_mtime:
                    return None
                warnings.warn(f"{source} is newer than its compiled extension: running the "
                              "source (make compile rebuilds it)", stacklevel=2)
            return spec_from_file_location(name, source)
        return None


def install() -> None:
    """Puts the finder first on ``sys.meta_path`` (once)."""
    if not any(f is SourceFirst for f in sys.meta_path):
        sys.meta_path.insert(0, SourceFirst)

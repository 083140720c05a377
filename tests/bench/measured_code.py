"""Which checkout of kepl a benchmark measures: the directory its workers run from and
the commit there.

The editable install maps ``app`` to the checkout it was made from, whatever the current
directory: a run started in another worktree measures that worktree's code only with
``PYTHONPATH`` pointing at it, so each run says which code it timed."""

from __future__ import annotations

import subprocess

from app.runtime.kafka.runner import REPO_ROOT


def describe() -> str:
    """``<directory> at <commit>`` (``+ uncommitted changes`` where the tree differs)."""
    try:
        rev = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return str(REPO_ROOT)
    if not rev:
        return str(REPO_ROOT)
    return f"{REPO_ROOT} at {rev}{' + uncommitted changes' if dirty else ''}"

"""A one-line progress display on stderr for long-running commands.

Shown only when stderr is a terminal: the line is rewritten in place (``\\r``) at most
every ``interval`` seconds, cleared before a row goes to stdout (which may be the same
terminal), and left as a closing summary.  Anywhere else (a pipe, a file, CI logs) it
writes nothing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Any

CLEAR = "\r\x1b[K"


class Progress:
    """The progress line of one command; ``render(final)`` says what it holds."""

    def __init__(self, render: Callable[[bool], str], stream: IO[str] | None = None,
                 interval: float = 0.1, enabled: bool | None = None) -> None:
        self.render = render
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.interval = interval
        self.start = time.monotonic()
        self._next = 0.0
        self._shown = False

    def tick(self) -> None:
        """Redraw the line if ``interval`` passed since the last time (cheap otherwise)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.interval
        self.stream.write(CLEAR + self.render(False))
        self.stream.flush()
        self._shown = True

    def out(self, text: str, out: IO[str] | None = None) -> None:
        """Print one line on stdout, clearing the progress line first."""
        if self._shown:
            self.stream.write(CLEAR)
            self.stream.flush()
            self._shown = False
        print(text, file=out if out is not None else sys.stdout, flush=True)

    def close(self) -> None:
        """Leave the closing summary (``render(True)``) on its own line."""
        if not self.enabled:
            return
        self.stream.write(CLEAR + self.render(True) + "\n")
        self.stream.flush()
        self._shown = False

    def rate(self, n: int) -> float:
        """n per second since the start."""
        return n / max(time.monotonic() - self.start, 1e-9)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

"""Processing time per statement, sampled: one event in ``every`` goes through the
statements' steps with a clock read around each step, and counts ``every`` times, so the
events that are not sampled pay one counter decrement (``Engine._run_steps``)."""

from __future__ import annotations

SAMPLE_EVERY = 32
"""One event (or batch) in this many is timed per statement."""


class StatementTiming:
    """Estimated seconds per statement since ``take`` was last called."""

    __slots__ = ("countdown", "every", "seconds")

    def __init__(self, every: int = SAMPLE_EVERY) -> None:
        self.every = every
        self.countdown = 1  # the first event is timed, then one in every
        self.seconds: dict[str, float] = {}

    def add(self, statement: str, seconds: float) -> None:
        """A sampled step of ``statement`` took ``seconds``: it stands for ``every``."""
        self.seconds[statement] = self.seconds.get(statement, 0.0) + seconds * self.every

    def take(self) -> dict[str, float]:
        """The estimates so far, reset."""
        out, self.seconds = self.seconds, {}
        return out

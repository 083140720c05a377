"""``kepl status --watch``: the status table refreshed in place, with rates.

Each refresh takes a status (``ops.app_status``) and compares it with the ones before:
events in per second from the input offsets the workers committed, rows out per second
from the output topics' end offsets (per statement), and the lag's trend over the last
``TREND_SAMPLES`` refreshes.  On a terminal each frame replaces the previous one; in a
pipe or a file the frames follow each other.  Ctrl-C stops it cleanly.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

TREND_SAMPLES = 5
HOME_CLEAR = "\x1b[H\x1b[2J"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


@dataclass(frozen=True)
class Sample:
    """The counters of one status, at monotonic time ``t``."""

    t: float
    consumed: int
    """Input offsets committed, summed over the input partitions."""
    produced: dict[str, int]
    """Output topic end offsets per statement."""
    lag: int

    @classmethod
    def of(cls, st: dict[str, Any], t: float) -> Sample:
        consumed = sum(d["committed"] or 0 for d in st["lag"]
                       if d["topic"] in _inputs(st))
        outputs = {d["topic"] for d in st["topics"] if d["role"] == "output"}
        produced = {o["statement"]: o["end"] for o in st.get("outputs", [])
                    if o["topic"] in outputs}
        return cls(t, consumed, produced, st["total_lag"])


def _inputs(st: dict[str, Any]) -> set[str]:
    return {d["topic"] for d in st["topics"] if d["role"] == "input"}


@dataclass(frozen=True)
class Rates:
    """Per second, between two samples (the lag trend over a few)."""

    seconds: float
    events: float
    rows: dict[str, float]
    lag: float
    """Lag change per second: > 0 the workers fall behind, < 0 they catch up."""

    @property
    def rows_total(self) -> float:
        return sum(self.rows.values())

    @classmethod
    def between(cls, samples: list[Sample]) -> Rates | None:
        """Rates of the last two samples, the lag's over all of them (None: one sample)."""
        if len(samples) < 2:
            return None
        a, b = samples[-2], samples[-1]
        dt = max(b.t - a.t, 1e-9)
        rows = {s: max(0, n - a.produced.get(s, 0)) / dt for s, n in b.produced.items()}
        first = samples[0]
        lag = (b.lag - first.lag) / max(b.t - first.t, 1e-9)
        # offsets only go forward; a reset or a recreated topic restarts them
        return cls(dt, max(0, b.consumed - a.consumed) / dt, rows, lag)


def trend(lag_per_s: float) -> str:
    if lag_per_s > 0.5:
        return "growing"
    if lag_per_s < -0.5:
        return "shrinking"
    return "steady"


def render_rates(rates: Rates | None, lag: int) -> list[str]:
    """The rate lines above the status table."""
    if rates is None:
        return ["rates: from the next refresh on", f"  lag        {lag}"]
    lines = [f"rates over the last {rates.seconds:.1f} s:",
             f"  events in  {rates.events:.1f}/s",
             f"  rows out   {rates.rows_total:.1f}/s"]
    width = max((len(s) for s in rates.rows), default=0)
    lines += [f"    {s:<{width}}  {r:.1f}/s" for s, r in sorted(rates.rows.items())]
    lines.append(f"  lag        {lag} ({rates.lag:+.1f}/s, {trend(rates.lag)})")
    return lines


def frame(st: dict[str, Any], rates: Rates | None, header: str,
          render_status: Callable[[dict[str, Any]], list[str]]) -> list[str]:
    return [header, *render_rates(rates, st["total_lag"]), "", *render_status(st)]


def watch(fetch: Callable[[], dict[str, Any]],
          render_status: Callable[[dict[str, Any]], list[str]],
          interval: float, count: int | None = None, out: IO[str] | None = None,
          clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep,
          wall: Callable[[], str] = lambda: time.strftime("%H:%M:%S")) -> int:
    """Refresh every ``interval`` seconds (``count`` times, or until Ctrl-C)."""
    out = out if out is not None else sys.stdout
    tty = bool(getattr(out, "isatty", None) and out.isatty())
    samples: deque[Sample] = deque(maxlen=TREND_SAMPLES)
    n = 0
    next_at = clock()
    if tty:
        out.write(HIDE_CURSOR)
    try:
        while count is None or n < count:
            if n:
                sleep(max(0.0, next_at - clock()))
            next_at = clock() + interval
            st = fetch()
            samples.append(Sample.of(st, clock()))
            n += 1
            stop = "" if count is not None else ", Ctrl-C stops"
            header = (f"kepl status --watch: {st['app']} every {interval:g} s, {wall()}, "
                      f"refresh {n}{stop}")
            text = "\n".join(frame(st, Rates.between(list(samples)), header, render_status))
            if tty:
                out.write(HOME_CLEAR + text + "\n")
            else:
                out.write(("\n" if n > 1 else "") + text + "\n")
            out.flush()
    except KeyboardInterrupt:
        out.write("\n")
    finally:
        if tty:
            out.write(SHOW_CURSOR)
            out.flush()
    return 0

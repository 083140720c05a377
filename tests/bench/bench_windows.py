"""Benchmark of the data windows on MemoryStore (a script, not a test).

Prints events/s for ``#length(1000)``, the per-event cost ratio of ``#length(100000)``
to ``#length(10)`` (should stay near 1: per-event work does not grow with the window),
and events/s for ``#groupwin(symbol)#length(10)`` over 10,000 symbols.

    .venv/bin/python tests/bench/bench_windows.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from operators.base import PartitionCtx  # noqa: E402
from operators.state import MemoryStore  # noqa: E402
from operators.windows.registry import WindowParam, make_view_chain, make_view_spec  # noqa: E402


def _symbol(row: dict, ctx: PartitionCtx) -> Any:
    return row["symbol"]


def length(n: int) -> Any:
    """``#length(n)``."""
    return make_view_spec("length", [WindowParam(str(n), n)])


def grouped_length(n: int) -> Any:
    """``#groupwin(symbol)#length(n)``."""
    return make_view_chain(
        [
            make_view_spec("groupwin", [WindowParam("symbol", is_constant=False, expr=_symbol)]),
            length(n),
        ]
    )


def per_event_seconds(spec: Any, events: list[dict], warmup: list[dict]) -> float:
    """Seconds per event for ``events`` after ``warmup`` filled the window."""
    view = spec.build(MemoryStore().namespace("bench"), PartitionCtx())
    on_events = view.on_events
    for i, row in enumerate(warmup):
        on_events([row], [], i)
    start = time.perf_counter()
    for i, row in enumerate(events):
        on_events([row], [], i)
    return (time.perf_counter() - start) / len(events)


def rows(n: int, symbols: int = 100) -> list[dict]:
    """Distinct event rows cycling through ``symbols`` symbols."""
    return [{"symbol": f"S{i % symbols}", "price": float(i % 97), "seq": i} for i in range(n)]


def main() -> None:
    """Run the three measurements and print them."""
    n = 200_000
    events = rows(n)
    cost = per_event_seconds(length(1000), events, rows(2000))
    print(f"#length(1000): {1 / cost:,.0f} events/s ({cost * 1e6:.2f} us/event)")

    small = min(per_event_seconds(length(10), events, rows(20)) for _ in range(3))
    big = min(per_event_seconds(length(100_000), events, rows(100_000)) for _ in range(3))
    print(
        f"#length(100000) vs #length(10): {big * 1e6:.2f} / {small * 1e6:.2f} us/event, "
        f"ratio {big / small:.2f}"
    )

    grouped = rows(n, symbols=10_000)
    cost = per_event_seconds(grouped_length(10), grouped, rows(100_000, symbols=10_000))
    label = "#groupwin(symbol)#length(10), 10,000 symbols"
    print(f"{label}: {1 / cost:,.0f} events/s ({cost * 1e6:.2f} us/event)")


if __name__ == "__main__":
    main()

"""Join lookups at scale (prints figures, not a test).

Per-event cost of an A event joining B#keepall, with B's window at 10 rows and at 10^4
rows (each A event matches one B row): through the hash index the planner builds on
``a.k = b.k`` the cost follows the number of matches, not the window's size (ratio near
1); through a nested loop (a condition with no equality between the streams) it grows
with the window.  The engine step alone, with the in-memory store of embedded mode.

Run: .venv/bin/python tests/bench/bench_join.py
"""

from __future__ import annotations

import gc
import random
import time

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine

SCHEMAS = {"A": {"k": "string", "v": "int"}, "B": {"k": "string", "w": "int"}}
INDEXED = "a.k = b.k"
LOOP = "(a.k = b.k or a.v < 0)"


def per_event_us(condition: str, b_rows: int, n: int) -> float:
    """Microseconds per A event once B's window holds ``b_rows`` rows."""
    engine = Engine()
    rows = [0]
    engine.listeners.append(lambda s, new, old, p: rows.__setitem__(0, rows[0] + len(new)))
    epl = (f"select a.v as v, b.w as w from A#length(100) as a, B#keepall as b "
           f"where {condition}")
    engine.deploy(plan_statement(Catalog.from_schemas(SCHEMAS), epl, "j"))
    for i in range(b_rows):
        engine.send("B", {"k": f"k{i}", "w": i})
    rnd = random.Random(5)
    events = [{"k": f"k{rnd.randrange(b_rows)}", "v": i} for i in range(n)]
    for e in events[:100]:  # fill A's window: later events also remove rows
        engine.send("A", e)
    gc.collect()
    rows[0] = 0
    t0 = time.perf_counter()
    for e in events:
        engine.send("A", e)
    elapsed = time.perf_counter() - t0
    assert rows[0] == n, f"each A event should join one B row ({rows[0]} rows)"
    return elapsed / n * 1e6


def main() -> None:
    for label, cond, n_small, n_big in (("hash index", INDEXED, 20_000, 20_000),
                                        ("nested loop", LOOP, 5_000, 100)):
        small = per_event_us(cond, 10, n_small)
        big = per_event_us(cond, 10_000, n_big)
        print(f"{label:11} where {cond:22} B at 10 rows: {small:8.1f} µs/event   "
              f"B at 10^4 rows: {big:9.1f} µs/event   ratio {big / small:7.2f}")


if __name__ == "__main__":
    main()

"""match_recognize throughput (prints figures, not a test).

Events per second through the engine for row patterns with and without partition by,
and over a length window of 10 and of 1000 rows: a window's size does not change the
per-event cost (the matched events are kept one key each, partial matches per partition).
Over a window that removes out of arrival order (``#unique``, ``#sort``) a remove of a
matched event other than the oldest steps the whole window again, as Esper does: those
cost the window's size per such remove (fewer events are sent through them).
The engine step alone, with the in-memory store of embedded mode.

Run: .venv/bin/python tests/bench/bench_match_recognize.py
"""

from __future__ import annotations

import random
import time

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine

SCHEMAS = {"T": {"id": "string", "k": "string", "v": "long"}}
DEFINE = "define A as A.v > 12, B as B.v <= 12, C as C.v > 12"
CASES = {
    "A B+ C, partition by k (100 keys)":
        "select * from T match_recognize (partition by k measures A.id as a, avg(B.v) as av, "
        f"C.id as c pattern (A B+ C) {DEFINE})",
    "A B* C": "select * from T match_recognize (measures A.id as a, count(B.v) as n, "
              f"C.id as c pattern (A B* C) {DEFINE})",
    "A B* C over #length(10)":
        "select * from T#length(10) match_recognize (measures A.id as a, count(B.v) as n, "
        f"C.id as c pattern (A B* C) {DEFINE})",
    "A B* C over #length(1000)":
        "select * from T#length(1000) match_recognize (measures A.id as a, count(B.v) as n, "
        f"C.id as c pattern (A B* C) {DEFINE})",
}
OUT_OF_ORDER = {
    "A B* C over #unique(k) (10 keys)":
        "select * from T#unique(k) match_recognize (measures A.id as a, count(B.v) as n, "
        f"C.id as c pattern (A B* C) {DEFINE})",
    "A B* C over #unique(k) (100 keys)":
        "select * from T#unique(k) match_recognize (measures A.id as a, count(B.v) as n, "
        f"C.id as c pattern (A B* C) {DEFINE})",
    "A B* C over #sort(10, v)":
        "select * from T#sort(10, v) match_recognize (measures A.id as a, count(B.v) as n, "
        f"C.id as c pattern (A B* C) {DEFINE})",
    "A B* C over #sort(100, v)":
        "select * from T#sort(100, v) match_recognize (measures A.id as a, count(B.v) as n, "
        f"C.id as c pattern (A B* C) {DEFINE})",
}


def events_per_second(epl: str, n: int, keys: int = 100) -> tuple[float, int]:
    engine = Engine()
    rows = [0]
    engine.listeners.append(lambda s, new, old, p: rows.__setitem__(0, rows[0] + len(new)))
    engine.deploy(plan_statement(Catalog.from_schemas(SCHEMAS), epl, "q"))
    rnd = random.Random(1)
    events = [{"id": f"e{i}", "k": f"k{rnd.randrange(keys)}", "v": rnd.randint(0, 20)}
              for i in range(n)]
    start = time.perf_counter()
    for e in events:
        engine.send("T", e)
    return n / (time.perf_counter() - start), rows[0]


def main() -> None:
    for name, epl in CASES.items():
        rate, matches = events_per_second(epl, 50_000)
        print(f"{name:36s} {rate:10,.0f} events/s  {matches} matches")
    for name, epl in OUT_OF_ORDER.items():
        rate, matches = events_per_second(epl, 5_000, 10 if "10 keys" in name else 100)
        print(f"{name:36s} {rate:10,.0f} events/s  {matches} matches")


if __name__ == "__main__":
    main()

"""The embedded engine's per-event cost through ``Engine.send_batch`` for the stateful
statements of the Kafka jobs (prints figures, not a test).

For each statement: CPU µs per event (best of ``--repeat``), and with ``--profile`` the
Python calls per event and the top functions (cProfile), once every window is full and
every key has its partition (the first half of the events warms up).  The clock moves by
``--tick`` ms every ``--tick-every`` events, as watermarks would.

Run: .venv/bin/python -m tests.bench.bench_send_batch [--events 100000] [--batch 1000]
[--only PREFIXES] [--profile] [--repeat 3]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import random
import time

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine

SCHEMA = {"Withdrawal": {"account": "string", "amount": "double", "sent": "long"}}
ACCOUNTS = 1000
KEYED = "create context ByAccount partition by account from Withdrawal"
HASHED = ("create context ByHash coalesce by consistent_hash_crc32(account) from Withdrawal "
          "granularity 16")
STATEMENTS: dict[str, tuple[str, ...]] = {
    "keyed #length(100) count/sum": (
        KEYED, "context ByAccount select account, count(*) as cnt, sum(amount) as total, "
               "sent from Withdrawal#length(100)"),
    "hash context (16) group by": (
        HASHED, "context ByHash select account, count(*) as cnt, sum(amount) as total "
                "from Withdrawal group by account"),
    "#time(10 sec) group by, output last every 1 sec": (
        "select account, count(*) as cnt, sum(amount) as total from Withdrawal#time(10 sec) "
        "group by account output last every 1 sec",),
}
"""The statements of ``bench_worker_path``'s jobs, by label."""


def events(n: int) -> list[dict]:
    rnd = random.Random(1)
    return [{"account": f"A{rnd.randrange(ACCOUNTS)}", "amount": float(i % 400), "sent": 0}
            for i in range(n)]


def engine(statements: tuple[str, ...], sink: list[int]) -> Engine:
    catalog = Catalog.from_schemas(SCHEMA)
    eng = Engine()
    for i, epl in enumerate(statements):
        eng.deploy(plan_statement(catalog, epl, f"s{i}"))

    def listen(stmt: str, new: list, old: list, pid: object) -> None:
        sink[0] += len(new)

    eng.listeners.append(listen)
    return eng


def drive(eng: Engine, evs: list[dict], batch: int, tick_every: int, tick: int,
          start: int) -> None:
    """``send_batch`` in batches of ``batch`` that end where the clock moves."""
    now = eng.now_ms
    i = 0
    n = len(evs)
    while i < n:
        j = min(n, i + batch, (start + i) // tick_every * tick_every + tick_every - start)
        eng.send_batch("Withdrawal", evs[i:j])
        i = j
        if (start + i) % tick_every == 0:
            now += tick
            eng.advance_time(now)


def run(label: str, statements: tuple[str, ...], n: int, batch: int, tick_every: int,
        tick: int, profile: bool, top: int) -> tuple[float, int]:
    """CPU µs per event over the second half of ``n`` events, and the rows delivered."""
    evs = events(n)
    half = n // 2
    sink = [0]
    eng = engine(statements, sink)
    drive(eng, evs[:half], batch, tick_every, tick, 0)
    sink[0] = 0
    gc.collect()
    prof = cProfile.Profile() if profile else None
    c0 = time.process_time()
    if prof is not None:
        prof.enable()
    drive(eng, evs[half:], batch, tick_every, tick, half)
    if prof is not None:
        prof.disable()
    cpu = time.process_time() - c0
    if prof is not None:
        st = pstats.Stats(prof)
        stats = st.stats  # type: ignore[attr-defined]
        calls = sum(v[1] for v in stats.values())
        own = sum(v[1] for k, v in stats.items() if k[0] != "~")
        print(f"{label}: calls per event {calls / (n - half):.2f} "
              f"({own / (n - half):.2f} of Python functions)")
        st.sort_stats("tottime").print_stats(top)
    return cpu / (n - half) * 1e6, sink[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--tick-every", type=int, default=100,
                    help="events between clock moves (100 events per 100 ms: 1k ev/s, so "
                         "that a 10 s window is full and expiring after the warm-up)")
    ap.add_argument("--tick", type=int, default=100, help="ms per clock move")
    ap.add_argument("--only", default="", help="comma-separated label prefixes")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for label, stmts in STATEMENTS.items():
        if args.only and not any(label.startswith(p) for p in args.only.split(",")):
            continue
        if args.profile:
            run(label, stmts, args.events, args.batch, args.tick_every, args.tick, True,
                args.top)
            continue
        results = [run(label, stmts, args.events, args.batch, args.tick_every, args.tick,
                       False, 0) for _ in range(args.repeat)]
        print(f"{label:50s} {min(r for r, _ in results):>7.2f} µs/event  "
              f"rows {results[0][1]:,}", flush=True)


if __name__ == "__main__":
    main()

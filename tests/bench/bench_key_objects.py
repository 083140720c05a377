"""What one context partition (a key) costs in memory, objects and build time (issue 25).

Run: .venv/bin/python -m tests.bench.bench_key_objects [--keys 20000] [--types]

For a keyed context ``#length(100)`` count/sum, a keyed context ``#time(10 sec)``
count/sum and a hash context count/sum, it adds ``--keys`` new keys (one event each) to
an engine that already holds 2,000, over the store of Kafka mode (RocksDB behind the
per-batch overlay, committed every 2,000 events) and the in-memory store of embedded mode,
and prints per key:

- the Python heap it adds (tracemalloc; RocksDB's own memory is not counted) and the
  objects the cyclic collector tracks (``--types``: by type, and the lines that allocate);
- the time to build its pipeline (``Engine._pipeline``), the collector off and on.

The hash context gets at most ``HASH_KEYS`` new buckets: embedded, its manager rewrites
its whole bucket list as each new bucket starts (a cost that grows with the buckets held,
outside the pipeline), which would dominate the run.
"""

from __future__ import annotations

import argparse
import collections
import gc
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.store import PartitionStore

SCHEMAS = {"T": {"symbol": "string", "amount": "double"}}
KEYED = "create context BySymbol partition by symbol from T"
HASHED = ("create context ByHash coalesce by consistent_hash_crc32(symbol) from T "
          "granularity 1000000")
CASES: dict[str, list[str]] = {
    "keyed #length(100) count/sum": [
        KEYED, "context BySymbol select symbol, count(*) as cnt, sum(amount) as total "
               "from T#length(100)"],
    "keyed #time(10 sec) count/sum": [
        KEYED, "context BySymbol select symbol, count(*) as cnt, sum(amount) as total "
               "from T#time(10 sec)"],
    "hash count/sum": [
        HASHED, "context ByHash select count(*) as cnt, sum(amount) as total from T"],
}
HASH_KEYS = 5000
"""New buckets measured for the hash context (see the module's docstring)."""
WARM = 2000
"""Keys held before the measured ones (the engine's first allocations are not counted)."""
COMMIT = 2000
"""Events per committed batch over the RocksDB store (a worker's consume batch)."""


class _Timed:
    """``Engine._pipeline`` timing the builds of new partitions (``method``)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.orig = Engine._pipeline

    def method(self) -> Any:
        orig, times = self.orig, self.times

        def _pipeline(engine: Engine, st: Any, pid: Any) -> Any:
            if pid in st.pipelines:
                return orig(engine, st, pid)
            t0 = time.perf_counter()
            p = orig(engine, st, pid)
            times.append(time.perf_counter() - t0)
            return p
        return _pipeline


def _engine(label: str, rocks: bool) -> tuple[Engine, PartitionStore | None]:
    store = PartitionStore(tempfile.mkdtemp(prefix="kepl-keyobj-") + "/db") if rocks else None
    catalog = Catalog.from_schemas(SCHEMAS)
    engine = Engine(store=store)
    for i, epl in enumerate(CASES[label]):
        engine.deploy(plan_statement(catalog, epl, f"s{i}"))
    return engine, store


def _close(store: PartitionStore | None) -> None:
    if store is not None:
        store.close()
        shutil.rmtree(Path(store.path).parent)


def _feed(engine: Engine, store: PartitionStore | None, lo: int, hi: int) -> None:
    """One event for each key of ``lo`` .. ``hi - 1``."""
    for k in range(lo, hi):
        engine.send("T", {"symbol": f"S{k}", "amount": 1.0})
        if store is not None and k % COMMIT == COMMIT - 1:
            store.commit(k, store.batch_writes())
    if store is not None:
        store.commit(hi, store.batch_writes())


def memory(label: str, rocks: bool, keys: int, types: bool) -> tuple[float, float]:
    """Traced bytes and gc-tracked objects per new key."""
    engine, store = _engine(label, rocks)
    _feed(engine, store, 0, WARM)
    gc.collect()
    before = {id(o) for o in gc.get_objects()}
    tracemalloc.start()
    s0 = tracemalloc.take_snapshot()
    gc.disable()
    _feed(engine, store, WARM, WARM + keys)
    gc.enable()
    gc.collect()
    s1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    size = sum(d.size_diff for d in s1.compare_to(s0, "filename"))
    new = [o for o in gc.get_objects() if id(o) not in before]
    if types:
        count = collections.Counter(type(o).__name__ for o in new)
        print("      objects: " + ", ".join(f"{t} {c / keys:.1f}"
                                          for t, c in count.most_common() if c >= keys / 2))
        for st in s1.compare_to(s0, "lineno")[:40]:
            if st.size_diff > keys * 16:
                print(f"      {st.size_diff / keys:6.0f} B {st.count_diff / keys:4.1f} blocks "
                      f"{st.traceback[0]}")
    n_new = len(new)
    del new, before
    _close(store)
    return size / keys, n_new / keys


def build_us(label: str, rocks: bool, keys: int, collector: bool) -> float:
    """Mean µs to build a new key's pipeline."""
    timed = _Timed()
    Engine._pipeline = timed.method()  # type: ignore[method-assign]
    try:
        engine, store = _engine(label, rocks)
        _feed(engine, store, 0, WARM)
        gc.collect()
        if not collector:
            gc.disable()
        timed.times.clear()
        _feed(engine, store, WARM, WARM + keys)
    finally:
        gc.enable()
        Engine._pipeline = timed.orig  # type: ignore[method-assign]
    _close(store)
    return sum(timed.times) / len(timed.times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=20_000, help="new keys measured")
    ap.add_argument("--types", action="store_true",
                    help="list the objects by type and the lines that allocate")
    args = ap.parse_args()
    print(f"{args.keys:,} new keys after {WARM:,}; per key:")
    for label in CASES:
        keys = min(args.keys, HASH_KEYS) if label.startswith("hash") else args.keys
        for rocks in (True, False):
            size, objects = memory(label, rocks, keys, args.types)
            off = build_us(label, rocks, keys, False)
            on = build_us(label, rocks, keys, True)
            print(f"  {label:30} {'RocksDB' if rocks else 'memory':7}: {size:6,.0f} B, "
                  f"{objects:4.1f} gc objects, build {off:5.1f} us (collector on {on:5.1f})")


if __name__ == "__main__":
    main()

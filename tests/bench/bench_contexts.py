"""Context partitions at scale (prints figures, not a test).

- keyed context: per-event cost with 100,000 keys vs 1,000 keys (target: within 25%);
- ended partitions leave no state: RocksDB keys before and after an overlapping context's
  partitions terminate.

Run: .venv/bin/python tests/bench/bench_contexts.py
"""

from __future__ import annotations

import random
import tempfile
import time

from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from operators.state import RocksStore

SCHEMAS = {"BankTxn": {"custId": "string", "account": "string", "amount": "double"},
           "Start": {"id": "string"}, "Stop": {"id": "string"}}


def keyed_rate(keys: int, n: int) -> float:
    catalog = Catalog.from_schemas(SCHEMAS)
    engine = Engine()
    for i, epl in enumerate([
        "create context ByCust partition by custId from BankTxn",
        "context ByCust select custId, count(*) as cnt, sum(amount) as total "
        "from BankTxn#length(10)",
    ]):
        engine.deploy(catalog.plan(epl, f"s{i}"))
    rnd = random.Random(3)
    events = [{"custId": f"C{rnd.randrange(keys)}", "account": "A", "amount": 1.0}
              for _ in range(n)]
    for k in range(keys):  # allocate every partition before timing
        engine.send("BankTxn", {"custId": f"C{k}", "account": "A", "amount": 1.0})
    t0 = time.perf_counter()
    for e in events:
        engine.send("BankTxn", e)
    return n / (time.perf_counter() - t0)


def ended_partitions_state() -> tuple[int, int, int]:
    """Keys in RocksDB: before, with 1,000 live partitions, after they all ended."""
    with tempfile.TemporaryDirectory() as d:
        store = RocksStore(d)
        catalog = Catalog.from_schemas(SCHEMAS)
        engine = Engine(store=store)
        for i, epl in enumerate([
            "create context PerId initiated by Start as s terminated by Stop(id = s.id)",
            "context PerId select count(*) as cnt from BankTxn#length(5)",
        ]):
            engine.deploy(catalog.plan(epl, f"s{i}"))
        before = store.key_count()
        for i in range(1000):
            engine.send("Start", {"id": str(i)})
        for i in range(50):
            engine.send("BankTxn", {"custId": "c", "account": "a", "amount": float(i)})
        live = store.key_count()
        for i in range(1000):
            engine.send("Stop", {"id": str(i)})
        after = store.key_count()
        store.close()
        return before, live, after


def main() -> None:
    n = 200_000
    # alternate the two sizes, best of 3 each: a burst of other load skews neither
    small = large = 0.0
    for _ in range(3):
        small = max(small, keyed_rate(1_000, n))
        large = max(large, keyed_rate(100_000, n))
    print(f"keyed context, 1,000 keys:     {small:>10,.0f} ev/s ({1e6 / small:.2f} us/event)")
    print(f"keyed context, 100,000 keys:   {large:>10,.0f} ev/s ({1e6 / large:.2f} us/event)")
    print(f"per-event cost ratio 100k/1k keys: {small / large:.3f} (target <= 1.25)")
    before, live, after = ended_partitions_state()
    print(f"RocksDB keys: before {before}, 1,000 live partitions {live}, after all ended {after}")


if __name__ == "__main__":
    main()

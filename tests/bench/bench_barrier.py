"""A watermark barrier's round trip on Kafka, per statement kind (prints figures, not a test).

What ``kepl scenario run --kafka`` pays before every ``expect`` step: the runner flushes
the events sent so far, publishes a watermark into every source partition
(``Clock.publish``) and waits until every engine partition and lane reports it on the
progress topic (``Progress.wait``), then reads the output topics to their end
(``RowReader.read_available``).  Each step here sends a few events, moves the time one
second on and does exactly that; the table prints p50/p99 of

- ``publish``: producer flush and watermark write, acknowledged;
- ``barrier``: watermark published -> its progress record visible to the runner;
- ``read``: output topics read to their end;
- ``step``: the three together (one ``expect`` step of a scenario).

Kinds: a lane (stateless, runs in place), a direct group (one source partition, no
repartition hop), a routed group (a hash context: its own repartition topic of two
partitions) and a join of two ``#time_batch`` windows.

``--scenarios`` times ``kepl scenario run --kafka``'s runner instead, on one scenario per
kind of 92 ``expect`` steps (four events and one second each), its expectations
recorded from the embedded engine first (both modes give the same output; each step
has rows for every kind).

Run: .venv/bin/python tests/bench/bench_barrier.py [--steps N] [--kind NAME] [--scenarios]
(``KAFKA_BOOTSTRAP_SERVERS`` when set, else the local broker, started when needed.)
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from app.conformance.runner import Collected, replay
from app.epl.planner import plan_statement
from app.kafka import local_broker
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import RowReader
from app.runtime.kafka.runner import KafkaApp, run_scenario_kafka

SCHEMAS = {"Bid": {"symbol": "string", "price": "double"},
           "Ask": {"symbol": "string", "price": "double"}}
SYMBOLS = ("A", "B", "C", "D")

KINDS: dict[str, dict[str, Any]] = {
    "lane": {"statements": ["select * from Bid"]},
    "direct group": {"statements": [
        "select symbol, count(*) as n, sum(price) as total from Bid#time(10 sec) "
        "group by symbol output snapshot every 1 events"]},
    "routed group": {"statements": [
        "create context ByHash coalesce by consistent_hash_crc32(symbol) from Bid "
        "granularity 2",
        "context ByHash select symbol, count(*) as n from Bid#length(10) group by symbol"]},
    "join": {"statements": [
        "select b.symbol as symbol, b.price as bid, a.price as ask "
        "from Bid#time_batch(2 sec) as b, Ask#time_batch(2 sec) as a "
        "where b.symbol = a.symbol"]},
}


def bootstrap() -> str:
    return os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or local_broker.start().bootstrap


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def run_kind(name: str, spec: dict[str, Any], server: str, steps: int
             ) -> dict[str, list[float]]:
    app = f"bench-barrier-{name.replace(' ', '-')}-{time.monotonic_ns() % 10**8}"
    config = AppConfig.from_dict({
        "app": app, "schemas": SCHEMAS,
        "topics": {t: f"kepl.{app}.in.{t}" for t in SCHEMAS},
        "statements": [{"name": f"s{i}", "epl": e} for i, e in enumerate(spec["statements"])],
        **({"context_partitions": spec["context_partitions"]}
           if "context_partitions" in spec else {}),
    })
    kapp = KafkaApp(config, server, start=True)
    outs = sorted({t for t, _ in kapp.topology.output_topics().values()})
    reader = RowReader(server, outs)
    times: dict[str, list[float]] = {"publish": [], "barrier": [], "read": [], "step": []}
    try:
        kapp.settle(120)  # the worker is up and owns its partitions
        reader.read_available()
        for i in range(steps + 5):
            for j, sym in enumerate(SYMBOLS):
                kapp.send("Bid", {"symbol": sym, "price": float(i + j)})
                kapp.send("Ask", {"symbol": sym, "price": float(i + j + 1)})
            t0 = time.perf_counter()
            wid = kapp.advance(kapp.now + 1000)
            t1 = time.perf_counter()
            kapp.progress.wait(kapp.keys, wid, 60, kapp.worker.alive)
            t2 = time.perf_counter()
            reader.read_available()
            t3 = time.perf_counter()
            if i >= 5:  # the first steps warm the worker up
                times["publish"].append(t1 - t0)
                times["barrier"].append(t2 - t1)
                times["read"].append(t3 - t2)
                times["step"].append(t3 - t0)
    finally:
        reader.close()
        kapp.close(graceful=False)
        kapp.delete_topics()
    return times


def scenario(name: str, spec: dict[str, Any], steps: int) -> dict[str, Any]:
    """A scenario of ``steps`` expect steps for one kind, expectations recorded from the
    embedded engine."""
    doc: dict[str, Any] = {
        "name": f"bench-{name.replace(' ', '-')}", "schemas": SCHEMAS,
        "statements": [{"name": f"s{i}", "epl": e} for i, e in enumerate(spec["statements"])],
        "steps": []}
    for i in range(steps):
        for j, sym in enumerate(SYMBOLS[:2]):
            for k, type_name in enumerate(("Bid", "Ask")):
                doc["steps"].append({"send": type_name,
                                     "event": {"symbol": sym, "price": float(i + j + k)}})
        doc["steps"] += [{"time": (i + 1) * 1000}, {"expect": {}}]
    catalog = Catalog.from_schemas(SCHEMAS)
    engine = Engine()
    names = []
    for st in doc["statements"]:
        plan = plan_statement(catalog, st["epl"], st["name"])
        engine.deploy(plan)
        names.append(plan.name)
    collected = {n: Collected() for n in names}
    seen: list[dict[str, Any]] = []

    def listen(stmt: str, new: list[Any], old: list[Any], pid: Any) -> None:
        collected[stmt].new.extend(new)
        collected[stmt].old.extend(old)

    def settle() -> None:
        seen.append({n: {"new": list(c.new), "old": list(c.old)} for n, c in collected.items()
                     if n in engine.statements})

    engine.listeners.append(listen)
    replay(doc, engine.advance_time, lambda t, e: engine.send(t, e), collected, catalog,
           lambda: engine.now_ms, settle)
    expects = iter(seen)
    for step in doc["steps"]:
        if "expect" in step:
            step["expect"] = next(expects)
    return doc


def run_scenarios(kinds: list[str], server: str, steps: int) -> None:
    print(f"scenarios of {steps} expect steps, {steps * 4} events, with --kafka")
    for name in kinds:
        doc = scenario(name, KINDS[name], steps)
        t0 = time.perf_counter()
        diff = run_scenario_kafka(doc, server)
        took = time.perf_counter() - t0
        print(f"{name:<14} {took:6.1f} s  {'PASS' if diff is None else 'FAIL ' + diff}",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--kind", action="append", choices=sorted(KINDS),
                    help="only this kind (repeatable)")
    ap.add_argument("--scenarios", action="store_true",
                    help="time whole scenarios through the --kafka runner instead")
    args = ap.parse_args()
    server = bootstrap()
    if args.scenarios:
        run_scenarios(args.kind or list(KINDS), server, 92)
        return
    print(f"{args.steps} steps per kind on {server}; milliseconds, p50 / p99")
    print(f"{'kind':<14} {'publish':>13} {'barrier':>13} {'read':>13} {'step':>13}")
    for name in args.kind or list(KINDS):
        times = run_kind(name, KINDS[name], server, args.steps)
        cells = [f"{pct(v, 0.5) * 1000:6.1f}/{pct(v, 0.99) * 1000:6.1f}"
                 for v in times.values()]
        print(f"{name:<14} " + " ".join(f"{c:>13}" for c in cells), flush=True)


if __name__ == "__main__":
    main()

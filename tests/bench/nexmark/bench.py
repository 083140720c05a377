"""Nexmark in EPL, embedded: events/s per query on one core beside Esper 9 in-process.

Run: .venv/bin/python -m tests.bench.nexmark.bench [--events N] [--queries q0,q1]
[--no-esper] [--check N]
Both sides get the same seeded stream (generator.py) and the same statements
(queries.py); the runtime clock follows each event's ``dateTime`` (advanced before the
events of a new millisecond), and the time is CPU seconds of the sending process.
``--check N`` first runs the first N events of each query through the Esper oracle
(tests/oracle/oracle.py, a scenario written to a temporary folder, Esper's rows recorded
into it) and compares kepl's rows with Esper's.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from tests.bench.nexmark.generator import SCHEMAS, generate
from tests.bench.nexmark.queries import QUERIES

Stream = list[tuple[str, dict]]


def kepl_rate(statements: tuple[str, ...], stream: Stream) -> tuple[float, int]:
    """Events per CPU second through ``Engine.send``, and the rows of the last statement."""
    catalog = Catalog.from_schemas(SCHEMAS)
    engine = Engine()
    names = [f"s{i}" for i in range(len(statements))]
    for name, epl in zip(names, statements):
        engine.deploy(plan_statement(catalog, epl, name))
    last = names[-1]
    sink = [0]

    def listen(stmt: str, new: list, old: list, pid: object) -> None:
        if stmt == last:
            sink[0] += len(new)

    engine.listeners.append(listen)
    send, advance = engine.send, engine.advance_time
    gc.collect()
    now = -1
    t0 = time.process_time()
    for type_name, event in stream:
        if event["dateTime"] != now:
            now = event["dateTime"]
            advance(now)
        send(type_name, event)
    return len(stream) / (time.process_time() - t0), sink[0]


def esper_stream(stream: Stream) -> list[dict]:
    """The stream as EsperBench reads it: a ``@time`` entry before each new millisecond,
    each event tagged with its type."""
    out: list[dict] = []
    now = -1
    for type_name, event in stream:
        if event["dateTime"] != now:
            now = event["dateTime"]
            out.append({"@time": now})
        out.append({"@type": type_name, **event})
    return out


def check(n: int, names: set[str]) -> bool:
    """kepl's rows agree with Esper's for the first ``n`` events of each query."""
    stream = list(generate(n))
    with tempfile.TemporaryDirectory() as tmp:
        for name, _what, statements in QUERIES:
            if name not in names:
                continue
            steps: list[dict] = []
            now = -1
            for type_name, event in stream:
                if event["dateTime"] != now:
                    now = event["dateTime"]
                    steps.append({"time": now})
                steps.append({"send": type_name, "event": event})
            # the last window's rows: one more batch interval of clock
            steps.append({"time": now + 20_000})
            steps.append({"expect": {f"s{i}": {"new": [], "old": []}
                                     for i in range(len(statements))}})
            doc = {"name": f"nexmark_{name}", "source": "Nexmark benchmark, " + name,
                   "schemas": SCHEMAS,
                   "statements": [{"name": f"s{i}", "epl": epl}
                                  for i, epl in enumerate(statements)],
                   "steps": steps}
            # YAML is a superset of JSON: the scenario loader reads this file as it is
            Path(tmp, f"nexmark_{name}.yaml").write_text(json.dumps(doc))
        proc = subprocess.run([sys.executable, "-m", "tests.oracle.oracle", "--record",
                               "--brief", tmp], capture_output=True, text=True, check=False)
    print(proc.stdout.strip())
    if proc.returncode:
        print(proc.stderr.strip()[-2000:])
    return proc.returncode == 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--queries", default=",".join(q for q, _, _ in QUERIES))
    ap.add_argument("--no-esper", action="store_true", help="leave Esper 9 out")
    ap.add_argument("--check", type=int, default=2_000,
                    help="events of the oracle comparison (0: none)")
    args = ap.parse_args()
    names = set(args.queries.split(","))
    ok = True
    if args.check:
        print(f"Rows of {args.check:,} events, kepl against the Esper 9 oracle:")
        ok = check(args.check, names)
    stream = list(generate(args.events))
    picked = [(q, what, stmts) for q, what, stmts in QUERIES if q in names]
    results = []
    for _q, _what, stmts in picked:
        runs = [kepl_rate(stmts, stream) for _ in range(3)]
        results.append((max(r for r, _ in runs), runs[0][1]))
    esper: list[float | str]
    why = None
    if not args.no_esper:
        from tests.oracle.bench import EsperCase, esper_rates, unavailable
        why = unavailable()
    else:
        why = "--no-esper"
    if why is None:
        tagged = esper_stream(stream)
        esper = esper_rates(SCHEMAS, [EsperCase(stmts, "", tagged) for _, _, stmts in picked],
                            repeat=5)
    else:
        esper = [f"skipped: {why}"] * len(picked)
    print(f"\nNexmark embedded, one core ({args.events:,} events, Person/Auction/Bid 1:3:46, "
          f"events per CPU second; kepl best of 3, Esper 9 best of 5 runs in one JVM):")
    print(f"{'query':6s} {'':56s} {'rows':>8s} {'kepl ev/s':>12s} {'Esper ev/s':>12s} "
          f"{'ratio':>7s}")
    for (q, what, _), (rate, rows), e in zip(picked, results, esper):
        tail = (f"   {e}" if isinstance(e, str)
                else f" {e:>12,.0f} {rate / e:>7.3f}")
        print(f"{q:6s} {what:56s} {rows:>8,} {rate:>12,.0f}{tail}")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()

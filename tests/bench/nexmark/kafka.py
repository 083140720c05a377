"""Nexmark in EPL on Kafka: drain rate per query with 1 and 2 workers, exactly-once.

Run: .venv/bin/python -m tests.bench.nexmark.kafka [--events N] [--quick] [--queries q0,q5]
[--workers 1,2] [--check N]
The seeded stream of generator.py goes to one source topic per event type (Person,
Auction, Bid; ``PARTITIONS`` partitions each, events spread over them in turn); only the
types a query reads are produced and counted (``input``: q3 and q8 read no bids).
``rows``: the committed rows of all the query's statements. The app
takes its time from the events (``event_time`` on ``dateTime``): every event runs at its
own time, as the embedded run advances the clock before each event, and a watermark
follows every ``TICK`` events. Drains are measured as in bench_kafka.py: the workers hold
their partitions, are stopped while the backlog is produced, and are timed from their
restart until the progress topic reports the closing watermark (20 s after the last
event, the batch windows' last rows included). ``raw`` is confluent-kafka's
``consume(1000)`` and JSON decoding of the same events from the same three topics.
Beside each drain: the CPU seconds of the workers and of the broker per 10,000 events,
the busiest worker's part of the workers' CPU (bench_kafka.py), and events per CPU second
of the workers (what Nexmark publishes per core for Flink: docs/testing.md). The
2-vs-1 table gives the drain rates' ratio and the bound the workers' CPU sets when each
worker has a core of its own: one worker's CPU seconds over the busiest of two workers'
(on a shared 2-core machine the drain rate also measures who else runs).
A statement that can be split by its group key (a join: its join key) gets
``statement_partitions`` (``SPLIT``) when the app's layout allows it.
``--check N`` first runs the first N events of each query with 1 and 2 workers and
compares the committed rows (``read_committed``) with the embedded run's: the same
multiset of (statement, insert/remove, time, row).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog, NotSupported
from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig, ConfigError
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.topology import (
    Topology,
    consumed_types,
    ensure_topics,
    forwarded_streams,
    split_of,
    split_schemas,
)
from app.runtime.rows import RowNumbering
from tests.bench.measured_code import describe
from tests.bench.nexmark.generator import SCHEMAS, generate
from tests.bench.nexmark.queries import QUERIES

# bench_kafka.py is a script (it imports its sibling ``charts`` by that name)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_kafka import Run, add_broker_option, bootstrap, hosted  # noqa: E402

PARTITIONS = 4
"""Source partitions of each event type's topic: two per worker with 2 workers."""
TICK = 5_000
"""Events between two watermarks."""
TAIL_MS = 20_000
"""Clock after the last event: the last #time_batch and #time windows close."""
SPLIT = 4
"""Engine partitions of a statement that can be split by its group key."""
Stream = list[tuple[str, dict]]


def split_names(statements: tuple[str, ...]) -> list[str]:
    """The statements of a query that can be split by group or join key
    (``statement_partitions``), with the statements inserting into the streams they
    read (split with them, if they can be: ``config`` tries); a statement whose
    ``insert into`` another split statement reads through its repartition topic
    (``forwarded_streams``) splits by its own key."""
    catalog = Catalog.from_schemas(SCHEMAS)
    plans = [plan_statement(catalog, epl, f"s{i}") for i, epl in enumerate(statements)]
    statements_doc = [{"name": p.name, "epl": e} for p, e in zip(plans, statements)]
    doc = AppConfig.from_dict({"app": "names", "schemas": SCHEMAS,
                               "statements": statements_doc})
    schemas = split_schemas(catalog, doc, plans)
    forwarded: dict[str, str] = {}
    for _ in range(len(plans) + 1):
        splits = {p.name: split_of(p, plans, schemas, p.insert_into in forwarded)
                  for p in plans}
        all_split = AppConfig.from_dict({
            "app": "names", "schemas": SCHEMAS, "statements": statements_doc,
            "statement_partitions": {n: SPLIT for n, s in splits.items()
                                     if not isinstance(s, str)}})
        found = forwarded_streams(all_split, plans, splits)
        if found == forwarded:
            break
        forwarded = found
    split = [p for p in plans if not isinstance(splits[p.name], str)]
    read = set().union(*(consumed_types(p) for p in split)) - set(SCHEMAS) - set(forwarded)
    feeding = [p for p in plans if p.insert_into in read and p not in split]
    return [p.name for p in plans if p in split or p in feeding]


def read_types(statements: tuple[str, ...]) -> set[str]:
    """The event types a query reads: only their topics are produced and counted (q3 and
    q8 read no bids, which on Kafka stay in a topic their workers never fetch)."""
    return {t for t in SCHEMAS if any(re.search(rf"\b{t}\b", e) for e in statements)}


def config(query: str, statements: tuple[str, ...]) -> AppConfig:
    """An exactly-once app of one Nexmark query, time from the events' ``dateTime``."""
    app = f"nexmark-{query}-{uuid.uuid4().hex[:8]}"
    doc = {"app": app, "schemas": SCHEMAS,
           "topics": {t: f"{app}.{t.lower()}" for t in SCHEMAS},
           "partitions": PARTITIONS, "processing_guarantee": "exactly_once",
           "event_time": {"property": {t: "dateTime" for t in SCHEMAS}},
           "statement_partitions": {s: SPLIT for s in split_names(statements)},
           "statements": [{"name": f"s{i}", "epl": e} for i, e in enumerate(statements)]}
    try:
        Topology.plan(AppConfig.from_dict(doc))
    except (NotSupported, ConfigError):
        # a split statement that reads another's insert into, whose statement cannot be
        # split with it: the app's layout refuses it
        doc["statement_partitions"] = {}
    return AppConfig.from_dict(doc)


def produce(bs: str, topics: dict[str, str], stream: Stream,
            watermark: Callable[[int], None] | None = None) -> int:
    """The stream into its topics, round robin over each topic's partitions; after every
    ``TICK`` events ``watermark(t)`` at the last event's time. Returns the closing time."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "log_level": 3})
    sent: Counter[str] = Counter()
    last = 0
    for i, (type_name, event) in enumerate(stream):
        value = orjson.dumps(event)
        part = sent[type_name] % PARTITIONS
        sent[type_name] += 1
        while True:
            try:
                p.produce(topics[type_name], value, partition=part)
                break
            except BufferError:
                p.poll(0.05)
        last = event["dateTime"]
        if watermark is not None and i % TICK == TICK - 1:
            p.flush(60)
            watermark(last)
    p.flush(60)
    return last + TAIL_MS


def raw_rate(bs: str, stream: Stream) -> float:
    """confluent-kafka alone over the same three topics: consume(1000) + JSON decode."""
    prefix = f"nexmark-raw-{uuid.uuid4().hex[:8]}"
    topics = {t: f"{prefix}.{t.lower()}" for t in SCHEMAS}
    ensure_topics(bs, {t: (PARTITIONS, {}) for t in topics.values()})
    produce(bs, topics, stream)
    c = Consumer({"bootstrap.servers": bs, "group.id": f"raw-{uuid.uuid4().hex}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "fetch.max.bytes": 64 << 20, "log_level": 3})
    c.subscribe(list(topics.values()))
    per_topic: Counter[str] = Counter()
    seen, t0 = 0, 0.0
    while seen < len(stream):
        msgs = c.consume(1000, 1.0)
        if msgs and not t0:
            t0 = time.perf_counter()
        for m in msgs:
            if m.error() is None:
                json.loads(m.value())
                per_topic[m.topic()] += 1
                seen += 1
    rate = len(stream) / (time.perf_counter() - t0)
    c.close()
    _delete(bs, list(topics.values()))
    return rate


def _delete(bs: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bs, "log_level": 0})
    for fut in admin.delete_topics(topics, operation_timeout=10).values():
        try:
            fut.result()
        except Exception:  # noqa: BLE001 - clean-up only
            pass


def _norm(stmt: str, stream: str, time_ms: int | None, row: Any) -> tuple:
    return stmt, stream, time_ms, orjson.dumps(row, option=orjson.OPT_SORT_KEYS)


def _lanes(topology: Topology) -> set[str]:
    """Stateless statements: on Kafka they do not wait for time (docs/operations.md,
    "Event time from the events"), so their rows' time is not compared."""
    return {p.name for p in topology.lanes}


def embedded_rows(cfg: AppConfig, stream: Stream) -> Counter[tuple]:
    """The rows the embedded Engine gives (clock to each event's time, then the tail)."""
    topology = Topology.plan(cfg)
    engine = Engine()
    for p in topology.plans:
        engine.deploy(p)
    numbering = RowNumbering(engine, topology)
    out: Counter[tuple] = Counter()
    published = set(topology.output_topics())
    lanes = _lanes(topology)

    def listen(stmt: str, new: list, old: list, pid: Any) -> None:
        if stmt in published:
            for r in numbering.rows(stmt, new, old, pid):
                t = None if stmt in lanes else r["time"]
                out[_norm(stmt, r["stream"], t, orjson.loads(orjson.dumps(r["row"])))] += 1

    engine.listeners.append(listen)
    now = -1
    for type_name, event in stream:
        if event["dateTime"] != now:
            now = event["dateTime"]
            engine.advance_time(now)
        engine.send(type_name, event)
    engine.advance_time(now + TAIL_MS)
    return out


def kafka_rows(run: Run) -> Counter[tuple]:
    topics = sorted({t for t, _ in run.kapp.topology.output_topics().values()})
    lanes = _lanes(run.kapp.topology)
    return Counter(_norm(r.statement, r.stream, None if r.statement in lanes else r.time_ms,
                         r.row)
                   for r in read_rows(run.kapp.bootstrap, topics))


def run_query(bs: str, cfg: AppConfig, workers: int, stream: Stream) -> Run:
    """A drained run of one query (closed by the caller)."""
    run = Run(bs, {}, "exactly_once", workers, config=cfg)
    try:
        topics = {t: cfg.topic_of(t) for t in SCHEMAS}
        run.rate = run.drain_rate(len(stream), timed=True, produce=lambda: produce(
            bs, topics, stream, run.kapp.advance))
    except BaseException:
        run.close()
        raise
    return run


def check(bs: str, n: int, picked: list, counts: list[int]) -> bool:
    """Committed rows of the first ``n`` events equal the embedded rows, per worker count."""
    stream = list(generate(n))
    ok = True
    for q, _what, stmts in picked:
        types = read_types(stmts)
        mine = [(t, e) for t, e in stream if t in types]
        for workers in counts:
            cfg = config(q, stmts)
            want = embedded_rows(cfg, mine)
            run = run_query(bs, cfg, workers, mine)
            try:
                got = kafka_rows(run)
            finally:
                run.close()
            same = got == want
            ok &= same
            diff = "" if same else (f": {sum((want - got).values())} missing, "
                                    f"{sum((got - want).values())} extra")
            print(f"{q:4s} {workers} worker(s): {sum(want.values()):>7,} rows embedded, "
                  f"{sum(got.values()):>7,} committed, {'same' if same else 'DIFFERENT'}"
                  f"{diff}", flush=True)
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true",
                    help="20,000 events, a 2,000-event check")
    ap.add_argument("--queries", default=",".join(q for q, _, _ in QUERIES))
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--check", type=int, default=None,
                    help="events of the rows check against embedded (0: none; default "
                         "5,000, 2,000 with --quick)")
    add_broker_option(ap)
    args = ap.parse_args()
    n = 20_000 if args.quick else args.events
    n_check = args.check if args.check is not None else (2_000 if args.quick else 5_000)
    names = set(args.queries.split(","))
    picked = [(q, what, stmts) for q, what, stmts in QUERIES if q in names]
    counts = [int(w) for w in args.workers.split(",")]
    bs = bootstrap(args.fresh_broker)
    topics, partitions = hosted(bs)
    print(f"broker {bs} hosts {topics:,} topics, {partitions:,} partitions", flush=True)
    print(f"code: {describe()}", flush=True)
    print(f"Nexmark on Kafka: {n:,} events (Person/Auction/Bid 1:3:46), {PARTITIONS} "
          f"partitions per event type, exactly-once, broker {bs}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}\n", flush=True)
    ok = True
    if n_check:
        print(f"Committed rows of {n_check:,} events against the embedded run:", flush=True)
        ok = check(bs, n_check, picked, counts)
    stream = list(generate(n))
    raw = raw_rate(bs, stream)
    print(f"\n{'raw: confluent-kafka consume(1000) + JSON, 3 topics':<64} {raw:>9,.0f} ev/s",
          flush=True)
    print(f"\n{'query':5s} {'':44s} {'split':>5s} {'input':>7s} {'workers':>7s} {'rows':>8s} "
          f"{'ev/s':>9s} "
          f"{'x raw':>6s} {'cpu s/10k ev: workers':>22s} {'broker':>7s} {'busiest':>8s} "
          f"{'ev/worker cpu s':>15s}",
          flush=True)
    rates: dict[tuple[str, int], float] = {}
    cpus: dict[tuple[str, int], tuple[float, float]] = {}
    for q, what, stmts in picked:
        mine = [(t, e) for t, e in stream if t in read_types(stmts)]
        for workers in counts:
            cfg = config(q, stmts)
            run = run_query(bs, cfg, workers, mine)
            try:
                rows = sum(kafka_rows(run).values())
            finally:
                run.close()
            rates[(q, workers)] = run.rate
            cpus[(q, workers)] = (run.cpu[0], run.share)
            wcpu, bcpu, _dt = run.cpu
            split = ",".join(cfg.statement_partitions) or "-"
            m = len(mine)
            print(f"{q:5s} {what[:44]:44s} {split:>5s} {m:>7,} {workers:>7} {rows:>8,} "
                  f"{run.rate:>9,.0f} {run.rate / raw:>6.2f} {wcpu / m * 1e4:>22.2f} "
                  f"{bcpu / m * 1e4:>7.2f} {run.share:>8.2f} "
                  f"{m / wcpu if wcpu else float('nan'):>15,.0f}", flush=True)
    if 1 in counts and 2 in counts:
        # what the workers' CPU alone allows: one worker's CPU over the busiest of two
        print(f"\n{'query':5s} {'2 workers / 1 worker: drain rate':>33s} "
              f"{'CPU bound (a core per worker)':>30s}")
        for q, _what, _stmts in picked:
            (c1, _), (c2, share2) = cpus[(q, 1)], cpus[(q, 2)]
            bound = c1 / (c2 * share2) if c2 else float("nan")
            print(f"{q:5s} {rates[(q, 2)] / rates[(q, 1)]:>33.2f} {bound:>30.2f}")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()

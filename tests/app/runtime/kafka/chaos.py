"""Chaos run: workers killed with SIGKILL at random while an app streams, then the raw
output topics compared with the embedded run of the same steps.

The app has a keyed context on its own three engine partitions (``#length``,
``#time_batch``, ``#time`` with ``output snapshot every``), a hash context read in place
from the source partitions (a direct group), an aggregate without a context (one engine
partition waiting on the watermarks of three source partitions), a stateless filter
(lanes), and a statement split by account whose ``insert into`` a statement split by
another key reads through its repartition topic (its ``output last every``, armed by its
first update, arms its other partitions through the same topic). Events are keyed by
account, each in source partition ``crc32(account) mod 3`` (librdkafka's default
partitioner), with a watermark every ``per_tick`` events.
``workers`` workers run in one consumer group; a random one is killed every
``min_gap_s``–``max_gap_s`` seconds and started again; once (``broker_restart``) the
broker itself is stopped and started.  ``pauses`` workers are instead frozen (SIGSTOP)
for ``pause_s``, longer than the session timeout, so the group gives their partitions
to another worker and they wake up as zombies: a zombie must not write anything that
counts (its transaction is fenced or aborted), and either rejoins or exits with the
fenced exit code, after which it is started again as a supervisor would.

Pass: every row of the embedded run is on the output topics exactly once, read raw
(``read_committed``, no deduplication by ``kepl.id``), in the same order within each
context partition, and nothing else is there.

``make chaos`` runs the long version (50 kills, a broker restart, 20,000 events);
``test_chaos.py`` a short one in the default suite.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.clock import Clock
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import decode_row
from app.runtime.kafka.recovery import offsets
from app.runtime.kafka.router import H_SEQ
from app.runtime.kafka.runner import Progress, WorkerProcess
from app.runtime.kafka.topology import Topology, ensure_topics

ACCOUNTS = 24
SOURCE_PARTITIONS = 3

STATEMENTS = [
    {"name": "ctx", "epl": "create context ByAccount partition by account from Withdrawal"},
    {"name": "last5", "epl": "context ByAccount select account, count(*) as cnt, "
                             "sum(amount) as total from Withdrawal#length(5)"},
    {"name": "batch", "epl": "context ByAccount select account, sum(amount) as total "
                             "from Withdrawal#time_batch(3 sec)"},
    {"name": "snap", "epl": "context ByAccount select account, count(*) as cnt, "
                            "max(amount) as top from Withdrawal#time(10 sec) "
                            "output snapshot every 5 sec"},
    {"name": "all10", "epl": "select count(*) as cnt, sum(amount) as total "
                             "from Withdrawal#length(10)"},
    {"name": "big", "epl": "select account, amount from Withdrawal(amount > 90)"},
    {"name": "inplace", "epl": "create context InPlace coalesce by "
                               "consistent_hash_crc32(account) from Withdrawal "
                               f"granularity {SOURCE_PARTITIONS} preallocate"},
    {"name": "per_bucket", "epl": "context InPlace select account, count(*) as cnt, "
                                  "sum(amount) as total from Withdrawal#length(4) "
                                  "group by account"},
    {"name": "spent", "epl": "insert into Spent select account, count(*) as cnt, "
                             "sum(amount) as total from Withdrawal group by account"},
    {"name": "per_count", "epl": "select cnt, count(*) as accounts, sum(total) as spent "
                                 "from Spent group by cnt output last every 2 sec"},
]
UNORDERED = {"big"}
"""Lanes run per source partition: their rows are compared as a multiset."""


def app_config(name: str) -> AppConfig:
    return AppConfig.from_dict({
        "app": name,
        "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "partitions": SOURCE_PARTITIONS,
        "context_partitions": {"ByAccount": 3, "InPlace": "source"},
        # split by account; the counts read through their repartition topic, by count
        "statement_partitions": {"spent": 3, "per_count": 2},
        "statements": STATEMENTS,
    })


def steps(n_events: int, per_tick: int, seed: int) -> list[tuple[str, Any]]:
    """("send", event) and ("time", ms) steps: one watermark per ``per_tick`` events."""
    rnd = random.Random(seed)
    t = 1000
    out: list[tuple[str, Any]] = [("time", t)]
    for i in range(n_events):
        out.append(("send", {"account": f"A{rnd.randrange(ACCOUNTS)}",
                             "amount": float(rnd.randrange(1, 101))}))
        if i % per_tick == per_tick - 1:
            t += 1000
            out.append(("time", t))
    return out


Key = tuple[str, str, str]
"""(statement, stream, context partition key) of a row."""


def _key(stmt: str, stream: str, row: dict[str, Any]) -> Key:
    if stmt == "per_count":
        return stmt, stream, str(row["cnt"])
    return stmt, stream, str(row.get("account", "")) if stmt != "all10" else ""


def embedded_rows(config: AppConfig, plan: list[tuple[str, Any]]) -> dict[Key, list[Any]]:
    """The rows of the embedded runtime over the same steps, per key in order."""
    catalog = Catalog.from_schemas(config.schemas)
    engine = Engine()
    for s in config.statements:
        engine.deploy(plan_statement(catalog, s.epl, s.name))
    out: dict[Key, list[Any]] = {}

    def listen(stmt: str, new: list, old: list, _pid: Any) -> None:
        for stream, rows in (("insert", new), ("remove", old)):
            for r in rows:
                out.setdefault(_key(stmt, stream, r), []).append(dict(r))

    engine.listeners.append(listen)
    for kind, arg in plan:
        if kind == "send":
            engine.send("Withdrawal", arg)
        else:
            engine.advance_time(arg)
    return out


@dataclass
class Outcome:
    """What a chaos run found; ``ok`` when nothing was lost, repeated or different."""

    events: int
    watermarks: int
    kills: int
    broker_restarts: int
    pauses: int
    fenced_exits: int
    expected: int
    read: int
    lost: int
    duplicated: int
    mismatched: int
    wall_s: float
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.mismatched)

    def summary(self) -> str:
        return (f"chaos: {self.events} events, {self.watermarks} watermarks, "
                f"{self.kills} kills, {self.broker_restarts} broker restart(s), "
                f"{self.pauses} zombie pause(s) ({self.fenced_exits} fenced exit(s)); "
                f"rows expected {self.expected}, read raw {self.read}: lost {self.lost}, "
                f"duplicated {self.duplicated}, mismatched {self.mismatched}; "
                f"{self.wall_s:.1f} s")


def read_raw(bootstrap: str, topics: list[str]) -> list[Any]:
    """Every committed output record to the end of each topic, without deduplication."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    conf = {"bootstrap.servers": bootstrap, "group.id": f"chaos-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "log_level": 3}
    consumer = Consumer(conf)
    try:
        md = consumer.list_topics(timeout=30)
        tps = [TopicPartition(t, p, OFFSET_BEGINNING) for t in topics
               for p in sorted(md.topics[t].partitions)]
        ends = {}
        for tp in tps:
            # the last stable offset: read_committed readers stop there
            # (asked again while a leader moves: a replicated cluster under faults)
            _, high = offsets(consumer, TopicPartition(tp.topic, tp.partition))
            ends[(tp.topic, tp.partition)] = high
        consumer.assign(tps)
        rows = []
        deadline = time.monotonic() + 120
        done = {k for k, v in ends.items() if v == 0}
        while len(done) < len(ends):
            if time.monotonic() > deadline:
                raise TimeoutError("output topics did not deliver up to their end offsets")
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    rows.append(decode_row(m))
            for tp in consumer.position(tps):
                if tp.offset >= ends[(tp.topic, tp.partition)]:
                    done.add((tp.topic, tp.partition))
        return rows
    finally:
        consumer.close()


def compare(expected: dict[Key, list[Any]], raw: list[Any]) -> tuple[int, int, int, list[str]]:
    """(lost, duplicated, mismatched, first problems) of raw rows against the embedded."""
    ids: dict[str, int] = {}
    for r in raw:
        ids[r.id] = ids.get(r.id, 0) + 1
    duplicated = sum(n - 1 for n in ids.values())
    got: dict[Key, list[Any]] = {}
    for r in raw:
        got.setdefault(_key(r.statement, r.stream, r.row), []).append(r.row)
    lost = mismatched = 0
    problems: list[str] = []
    for key in sorted(set(expected) | set(got)):
        want, have = expected.get(key, []), got.get(key, [])
        if key[0] in UNORDERED:
            dump = lambda rows: sorted(json.dumps(x, sort_keys=True) for x in rows)  # noqa: E731
            want_s, have_s = dump(want), dump(have)
            common = sum(min(want_s.count(x), have_s.count(x)) for x in set(want_s))
        else:
            common = 0
            while (common < min(len(want), len(have))
                   and want[common] == have[common]):
                common += 1
        lost += max(0, len(want) - len(have))
        diff = max(len(want), len(have)) - common - abs(len(want) - len(have))
        mismatched += diff
        extra = max(0, len(have) - len(want))
        if (diff or len(want) != len(have)) and len(problems) < 5:
            problems.append(f"{key}: expected {len(want)} rows, read {len(have)}, "
                            f"first difference at {common}"
                            + (f", {extra} extra" if extra else ""))
    return lost, duplicated, mismatched, problems


class Chaos:
    """One chaos run over a broker (see the module docstring)."""

    def __init__(self, bootstrap: str, *, events: int, kills: int, workers: int = 2,
                 per_tick: int = 100, min_gap_s: float = 0.5, max_gap_s: float = 3.0,
                 restart_broker: Callable[[], None] | None = None, seed: int = 7,
                 pauses: int = 0, pause_s: float = 14.0, lose_state: float = 0.0,
                 log: Callable[[str], None] = print, config: AppConfig | None = None
                 ) -> None:
        """``lose_state``: the share of kills after which the worker's data directory is
        deleted too (it comes back on a new machine and restores from the changelog);
        ``config``: another app than ``app_config`` (its rows keyed by ``_key`` too)."""
        self.bootstrap = bootstrap
        self.lose_state = lose_state
        self.state_losses = 0
        self.n_events = events
        self.kills_wanted = kills
        self.per_tick = per_tick
        self.gaps = (min_gap_s, max_gap_s)
        self.restart_broker = restart_broker
        self.rnd = random.Random(seed)
        self.seed = seed
        self.log = log
        self.config = config or app_config(f"chaos-{uuid.uuid4().hex[:8]}")
        self.topology = Topology.plan(self.config)
        self.workdir = Path(tempfile.mkdtemp(prefix="kepl-chaos-"))
        self.workers = []
        for i in range(workers):
            d = self.workdir / f"w{i}"
            d.mkdir()
            self.workers.append(WorkerProcess(self.config, bootstrap, d))
        self.kills = 0
        self.broker_restarts = 0
        self.pauses_wanted = pauses
        self.pause_s = pause_s
        self.pauses = 0
        self.fenced_exits = 0
        self.sent_all = threading.Event()
        self.failure: BaseException | None = None
        self.now = 0

    def run(self, timeout_s: float = 900) -> Outcome:
        t0 = time.monotonic()
        plan = steps(self.n_events, self.per_tick, self.seed)
        ensure_topics(self.bootstrap, self.topology.topic_specs())
        for w in self.workers:
            w.start()
        producer = threading.Thread(target=self._produce, args=(plan,), daemon=True)
        producer.start()
        try:
            self._kill_loop(t0 + timeout_s)
            producer.join(max(1.0, t0 + timeout_s - time.monotonic()))
            if self.failure is not None:
                raise self.failure
            if producer.is_alive():
                raise TimeoutError("the producer did not finish in time")
            self._revive()
            self._settle(max(60.0, t0 + timeout_s - time.monotonic()))
            expected = embedded_rows(self.config, plan)
            topics = sorted({t for t, _ in self.topology.output_topics().values()})
            raw = read_raw(self.bootstrap, topics)
            lost, duplicated, mismatched, problems = compare(expected, raw)
            return Outcome(self.n_events, sum(1 for k, _ in plan if k == "time"),
                           self.kills, self.broker_restarts, self.pauses,
                           self.fenced_exits,
                           sum(len(v) for v in expected.values()), len(raw), lost,
                           duplicated, mismatched, time.monotonic() - t0, problems)
        finally:
            for w in self.workers:
                w.kill()

    def _produce(self, plan: list[tuple[str, Any]]) -> None:
        """Send the steps at a steady pace, records stamped with the runtime time."""
        from confluent_kafka import Producer

        try:
            producer = Producer({"bootstrap.servers": self.bootstrap,
                                 "enable.idempotence": True, "linger.ms": 5,
                                 "log_level": 0})
            clock = Clock(self.bootstrap, self.config)
            topic = self.config.topic_of("Withdrawal")
            now, seq = 0, 0
            ticks = max(1, sum(1 for k, _ in plan if k == "time"))
            pause = self.kills_wanted * sum(self.gaps) / 2 / ticks
            for kind, arg in plan:
                if kind == "send":
                    seq += 1
                    kwargs: dict[str, Any] = {"timestamp": now} if now > 0 else {}
                    key = arg["account"].encode()
                    while True:
                        try:
                            # the partition librdkafka's default partitioner gives the key
                            producer.produce(topic, json.dumps(arg).encode(), key=key,
                                             partition=zlib.crc32(key) % SOURCE_PARTITIONS,
                                             headers=[(H_SEQ, str(seq).encode())], **kwargs)
                            break
                        except BufferError:
                            producer.poll(0.05)
                else:
                    # watermarks go after every event before them (the barrier's meaning)
                    if producer.flush(120) != 0:
                        raise RuntimeError("events not delivered within 120 s")
                    now = arg
                    clock.publish(arg)
                    time.sleep(pause)
            if producer.flush(120) != 0:
                raise RuntimeError("events not delivered within 120 s")
            self.now = now
            clock.close()
        except BaseException as e:  # noqa: BLE001 - reported by run()
            self.failure = e
        finally:
            self.sent_all.set()

    def _revive(self) -> None:
        """Start workers that exited on their own (a fenced zombie), as a supervisor."""
        from app.runtime.kafka.loop import EXIT_FENCED

        for w in self.workers:
            if w.proc is not None and w.proc.poll() is not None:
                if w.proc.returncode == EXIT_FENCED:
                    self.fenced_exits += 1
                w.start()

    def _pause(self) -> None:
        """Freeze a worker past the session timeout while the others go on."""
        import signal

        w = self.rnd.choice(self.workers)
        assert w.proc is not None
        w.proc.send_signal(signal.SIGSTOP)
        self.log(f"chaos: worker frozen for {self.pause_s:.0f} s")
        time.sleep(self.pause_s)
        w.proc.send_signal(signal.SIGCONT)
        self.pauses += 1
        time.sleep(3.0)
        self._revive()

    def _kill_loop(self, deadline: float) -> None:
        restart_at = self.kills_wanted // 2 if self.restart_broker else -1
        pause_at = {max(1, (i + 1) * self.kills_wanted // (self.pauses_wanted + 1))
                    for i in range(self.pauses_wanted)}
        while self.kills < self.kills_wanted and time.monotonic() < deadline:
            time.sleep(self.rnd.uniform(*self.gaps))
            if self.failure is not None:
                return
            self._revive()
            if self.kills in pause_at:
                pause_at.discard(self.kills)
                self._pause()
            w = self.rnd.choice(self.workers)
            w.kill()
            self.kills += 1
            if self.lose_state and self.rnd.random() < self.lose_state:
                shutil.rmtree(w.data_dir, ignore_errors=True)
                self.state_losses += 1
            if self.kills == restart_at and self.restart_broker is not None:
                self.log("chaos: restarting the broker")
                self.restart_broker()
                self.broker_restarts += 1
            time.sleep(self.rnd.uniform(0.0, 0.5))
            w.start()
            if self.kills % 10 == 0:
                self.log(f"chaos: {self.kills} kills")

    def _settle(self, timeout_s: float) -> None:
        """A final watermark, then wait until every engine partition applied it."""
        clock = Clock(self.bootstrap, self.config)
        progress = Progress(self.bootstrap, self.config.progress_topic)
        try:
            wid = clock.publish(self.now)
            progress.wait(self.topology.progress_keys(), wid, timeout_s,
                          lambda: all(w.alive() for w in self.workers))
        except (TimeoutError, RuntimeError) as e:
            tails = "\n".join(f"--- worker {i} ---\n{w.log_tail(30)}"
                              for i, w in enumerate(self.workers))
            raise RuntimeError(f"{e}\n{tails}") from None
        finally:
            progress.close()
            clock.close()

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


def local_broker_restarter(data_dir: Path) -> Callable[[], None]:
    """Stop and start the project's local broker of ``data_dir`` (same port)."""
    from app.kafka import local_broker

    def restart() -> None:
        info = local_broker.stop(data_dir=data_dir, timeout_s=30)
        local_broker.start(port=info.port, data_dir=data_dir, wait_s=90)

    return restart


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--events", type=int, default=20_000)
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--broker-data-dir", default=None,
                   help="restart this local broker once mid-run (default: the broker "
                        "`kepl kafka start --port PORT` runs for a local --bootstrap)")
    p.add_argument("--no-broker-restart", action="store_true")
    p.add_argument("--pauses", type=int, default=2,
                   help="workers frozen past the session timeout (zombies)")
    p.add_argument("--lose-state", type=float, default=0.0,
                   help="share of kills that also delete the worker's data directory")
    args = p.parse_args(argv)
    restart = None
    if not args.no_broker_restart:
        from app.kafka import local_broker

        host, _, port = args.bootstrap.rpartition(":")
        data_dir = (Path(args.broker_data_dir) if args.broker_data_dir
                    else local_broker.default_data_dir(int(port))
                    if host in ("127.0.0.1", "localhost") else None)
        if data_dir is not None:
            restart = local_broker_restarter(data_dir)
    chaos = Chaos(args.bootstrap, events=args.events, kills=args.kills,
                  workers=args.workers, seed=args.seed, restart_broker=restart,
                  pauses=args.pauses, lose_state=args.lose_state)
    try:
        outcome = chaos.run()
    finally:
        chaos.close()
    print(outcome.summary())
    if chaos.state_losses:
        print(f"data directories deleted: {chaos.state_losses}")
    for line in outcome.problems:
        print("  " + line)
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Chaos on a replicated cluster: brokers killed with SIGKILL under a streaming app, then
the raw output compared with the embedded run of the same steps.

A local 3-node KRaft cluster (``app.kafka.local_cluster``) runs an app with replication
factor 3 and ``min.insync.replicas`` 2: a keyed context on its own engine partitions
(``#length``, ``#time_batch``, ``#time`` with ``output snapshot every``), a hash context
(``#time`` grouped, ``output last every``), an aggregate without a context and a
stateless filter.  While events stream (``chaos.Chaos``'s producer, a watermark every
``per_tick`` events), the node leading a partition of the input, an output, a changelog
or the transaction state is killed with ``kill -9`` and started again, in turn; once
every node is restarted in turn (a rolling restart, SIGTERM: controlled shutdown); once
a node stays down longer than the transaction timeout; and the workers are scaled from
1 to 3 and back to 1.  A reader follows the output topics (``read_committed``) and
notes when rows arrive: the longest pause in the output, and the pause after each
worker join and leave (the rebalance).

Pass: the raw output equals the embedded run (0 lost, 0 duplicated, 0 different), the
workers' logs hold no traceback, and one line per broker loss and one per recovery.

``make chaos-cluster`` runs the long version; ``test_cluster.py`` one short kill.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.kafka import local_cluster
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.runner import WorkerProcess
from app.runtime.kafka.topology import ensure_topics
from tests.app.runtime.kafka.chaos import (
    SOURCE_PARTITIONS,
    STATEMENTS,
    Chaos,
    compare,
    embedded_rows,
    read_raw,
    steps,
)

CLUSTER_STATEMENTS = [
    *STATEMENTS,
    {"name": "hctx", "epl": "create context ByBucket coalesce by "
                            "consistent_hash_crc32(account) from Withdrawal "
                            "granularity 4 preallocate"},
    {"name": "hlast", "epl": "context ByBucket select account, sum(amount) as total "
                             "from Withdrawal#time(5 sec) group by account "
                             "output last every 2 sec"},
]
SCALE_SETTLE_S = 25.0
"""Seconds after a join or leave when the run has no broker faults (``--rebalances``)."""
TXN_TIMEOUT_S = 10.0
"""The workers' ``transaction.timeout.ms`` (``checkpoint.producer_config``)."""


def cluster_app(name: str, statements: list[dict[str, str]] | None = None) -> AppConfig:
    return AppConfig.from_dict({
        "app": name,
        "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "partitions": SOURCE_PARTITIONS,
        "context_partitions": {"ByAccount": 3},
        "replication_factor": 3,
        "min_insync_replicas": 2,
        "statements": statements or CLUSTER_STATEMENTS,
    })


@dataclass
class ClusterOutcome:
    """What a cluster chaos run found."""

    events: int
    kills: dict[str, int]
    rolling: int
    outages: int
    expected: int
    read: int
    lost: int
    duplicated: int
    mismatched: int
    longest_pause_s: float
    longest_pause_why: str
    rebalance_pauses: list[tuple[str, float]]
    broker_lines: dict[str, int]
    tracebacks: int
    wall_s: float
    problems: list[str] = field(default_factory=list)
    exits: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.mismatched or self.tracebacks)

    def summary(self) -> str:
        kills = ", ".join(f"{k} {n}" for k, n in self.kills.items())
        lines = [
            f"chaos-cluster: {self.events} events; {sum(self.kills.values())} broker kills "
            f"({kills}), {self.rolling} rolling restart(s), {self.outages} outage(s) "
            f"longer than the {TXN_TIMEOUT_S:.0f} s transaction timeout",
            f"rows expected {self.expected}, read raw {self.read}: lost {self.lost}, "
            f"duplicated {self.duplicated}, mismatched {self.mismatched}",
            f"longest output pause {self.longest_pause_s:.1f} s ({self.longest_pause_why})",
            *(f"rebalance: {what}: output pause {s:.1f} s"
              for what, s in self.rebalance_pauses),
            f"worker logs (each worker says it once): {self.broker_lines.get('lost', 0)} "
            f"broker-lost line(s), {self.broker_lines.get('back', 0)} broker-back line(s), "
            f"{self.tracebacks} traceback(s); {self.wall_s:.0f} s",
            *(f"worker exit: {e}" for e in self.exits),
        ]
        return "\n".join(lines)


class OutputWatch:
    """Follows the output topics (read_committed) and notes when rows arrive."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.arrivals: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap,
                      "group.id": f"watch-{uuid.uuid4().hex[:6]}",
                      "enable.auto.commit": False, "isolation.level": "read_committed",
                      "fetch.wait.max.ms": 50, "log_level": 0})
        md = c.list_topics(timeout=30)
        c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in self.topics
                  for p in md.topics[t].partitions])
        try:
            while not self.stop.is_set():
                msgs = c.consume(1000, 0.1)
                if any(m.error() is None for m in msgs):
                    self.arrivals.append(time.monotonic())
        finally:
            c.close()

    def pause_after(self, t: float, window_s: float = 30.0) -> float:
        """The longest gap between arrivals that ends within ``window_s`` after ``t``
        (the pause a rebalance at ``t`` caused)."""
        after = [a for a in self.arrivals if a > t]
        times = [a for a in self.arrivals if a <= t][-1:] + [
            a for a in after if a <= t + window_s] + after[:1]
        return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)

    def longest(self) -> tuple[float, float, float]:
        """(pause, start, end) of the longest gap between arrivals."""
        best = (0.0, 0.0, 0.0)
        for a, b in zip(self.arrivals, self.arrivals[1:], strict=False):
            if b - a > best[0]:
                best = (b - a, a, b)
        return best


class ClusterChaos(Chaos):
    """One chaos run over a local cluster (module docstring)."""

    def __init__(self, cluster: local_cluster.ClusterInfo, *, events: int, kills: int,
                 rolling: bool = True, outage: bool = True, scale: bool = True,
                 per_tick: int = 100, seed: int = 7, down_s: tuple[float, float] = (2, 5),
                 config: AppConfig | None = None, log: Any = print,
                 keep_logs: Path | None = None) -> None:
        """``keep_logs``: copy the workers' logs there at the end."""
        config = config or cluster_app(f"cc-{uuid.uuid4().hex[:8]}")
        self.keep_logs = keep_logs
        super().__init__(cluster.bootstrap, events=events, kills=0, workers=3,
                         per_tick=per_tick, seed=seed, log=log, config=config)
        self.cluster = cluster
        self.broker_kills_wanted = kills
        self.rolling = rolling
        self.outage = outage
        self.scale = scale
        self.down_s = down_s
        self.active = 1
        self.kills_by: dict[str, int] = {}
        self.exits: list[str] = []
        self.rollings = 0
        self.outages = 0
        self.events_log: list[tuple[float, str]] = []
        self.scale_marks: list[tuple[float, str]] = []
        # the producer spreads the steps over the disruptions (Chaos._produce's pace)
        per_kill = sum(down_s) / 2 + 8
        total = max(kills * per_kill + (40 if rolling else 0) + (25 if outage else 0),
                    (4 * SCALE_SETTLE_S if scale and not kills else 0))
        self.kills_wanted = 1
        self.gaps = (total, total)

    # -- actions -----------------------------------------------------------------
    def _mark(self, what: str) -> None:
        self.events_log.append((time.monotonic(), what))
        self.log(f"chaos-cluster: {what}")

    def _heal(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if local_cluster.in_sync(self.bootstrap):
                    return
            except Exception:  # noqa: BLE001 - metadata while a node comes up
                pass
            time.sleep(0.5)
        raise TimeoutError("the cluster did not get every replica back in sync")

    def _kind_topics(self, kind: str) -> list[str]:
        c = self.config
        if kind == "input":
            return c.source_topics
        if kind == "output":
            return sorted({t for t, _ in self.topology.output_topics().values()})
        if kind == "changelog":
            return [c.changelog_topic(g.name) for g in self.topology.active_groups()]
        return ["__transaction_state"]

    def _kill_leader(self, kind: str, down_s: float) -> None:
        lead = local_cluster.leaders(self.bootstrap, self._kind_topics(kind))
        nodes = sorted({n for n in lead.values() if n > 0})
        node = self.rnd.choice(nodes)
        where = sorted(f"{t}[{p}]" for (t, p), n in lead.items() if n == node)
        self._mark(f"kill -9 node {node}, leader of {len(where)} {kind} partition(s) "
                   f"(e.g. {where[0]}), down {down_s:.0f} s")
        local_cluster.kill_node(node, data_dir=self.cluster.data_dir)
        time.sleep(down_s)
        local_cluster.start_node(node, data_dir=self.cluster.data_dir)
        self._mark(f"node {node} back")
        self._heal()

    def _rolling_restart(self) -> None:
        for n in self.cluster.nodes:
            self._mark(f"rolling restart: node {n.node_id}")
            local_cluster.stop_node(n.node_id, data_dir=self.cluster.data_dir)
            local_cluster.start_node(n.node_id, data_dir=self.cluster.data_dir)
            self._heal()
        self.rollings += 1

    def _scale(self, n: int) -> None:
        what = f"workers {self.active} -> {n}"
        t = time.monotonic()
        if n > self.active:
            for w in self.workers[self.active:n]:
                w.start()
        else:
            for w in self.workers[n:self.active]:
                w.stop(30)
        self.active = n
        self.scale_marks.append((t, what))
        self._mark(what)

    def _plan(self) -> list[tuple[str, Any]]:
        if not self.broker_kills_wanted and self.scale:  # rebalances alone
            return [("scale", 2), ("scale", 3), ("scale", 2), ("scale", 1)]
        kinds = ["input", "output", "changelog", "transaction state"]
        acts: list[tuple[str, Any]] = [("kill", kinds[i % len(kinds)])
                                       for i in range(self.broker_kills_wanted)]
        n = len(acts)
        if self.scale:
            acts.insert(max(1, n // 4), ("scale", 3))
            acts.insert(max(2, 3 * n // 4) + 1, ("scale", 1))
        if self.rolling:
            acts.insert(len(acts) // 2, ("rolling", None))
        if self.outage:
            acts.insert(2 * len(acts) // 3, ("outage", None))
        return acts

    def _kill_loop(self, deadline: float) -> None:
        # the faults hit a worker that runs: its first rows are out
        while not self.watch.arrivals and time.monotonic() < deadline:
            time.sleep(0.2)
        for act, arg in self._plan():
            if self.failure is not None or time.monotonic() > deadline:
                return
            time.sleep(self.rnd.uniform(1.0, 3.0))
            self._revive()
            if act == "kill":
                self._kill_leader(arg, self.rnd.uniform(*self.down_s))
                self.kills_by[arg] = self.kills_by.get(arg, 0) + 1
            elif act == "rolling":
                self._rolling_restart()
            elif act == "outage":
                self._kill_leader("transaction state", TXN_TIMEOUT_S + 5)
                self.outages += 1
            else:
                self._scale(arg)
                if not self.broker_kills_wanted:  # rebalances alone: let each one settle
                    time.sleep(SCALE_SETTLE_S)

    def _revive(self) -> None:
        """Start an active worker that exited on its own (as a supervisor would)."""
        for w in self.workers[:self.active]:
            if w.proc is not None and w.proc.poll() is not None:
                last = (w.log_tail(1) or "").strip()
                self.exits.append(f"exit {w.proc.returncode}: {last}")
                self._mark(f"worker exited ({w.proc.returncode}: {last}); started again")
                w.start()

    # -- the run -----------------------------------------------------------------
    def run(self, timeout_s: float = 1800) -> ClusterOutcome:  # type: ignore[override]
        t0 = time.monotonic()
        plan = steps(self.n_events, self.per_tick, self.seed)
        ensure_topics(self.bootstrap, self.topology.topic_specs())
        topics = sorted({t for t, _ in self.topology.output_topics().values()})
        watch = self.watch = OutputWatch(self.bootstrap, topics)
        watch.thread.start()
        self.workers[0].start()
        producer = threading.Thread(target=self._produce, args=(plan,), daemon=True)
        producer.start()
        workers_all = self.workers
        try:
            self._kill_loop(t0 + timeout_s)
            producer.join(max(1.0, t0 + timeout_s - time.monotonic()))
            if self.failure is not None:
                raise self.failure
            if producer.is_alive():
                raise TimeoutError("the producer did not finish in time")
            self._revive()
            self.workers = workers_all[:self.active]
            self._settle(max(60.0, t0 + timeout_s - time.monotonic()))
            time.sleep(1.0)
            watch.stop.set()
            watch.thread.join(10)
            expected = embedded_rows(self.config, plan)
            raw = read_raw(self.bootstrap, topics)
            lost, duplicated, mismatched, problems = compare(expected, raw)
            pause, start, end = watch.longest()
            why = self._why(start, end)
            lines, tracebacks = self._log_lines(workers_all)
            if self.keep_logs is not None:
                self.keep_logs.mkdir(parents=True, exist_ok=True)
                for i, w in enumerate(workers_all):
                    if w.log_path.exists():
                        shutil.copy(w.log_path, self.keep_logs / f"worker-{i}.log")
            return ClusterOutcome(
                self.n_events, dict(self.kills_by), self.rollings, self.outages,
                sum(len(v) for v in expected.values()), len(raw), lost, duplicated,
                mismatched, pause, why,
                [(what, watch.pause_after(t)) for t, what in self.scale_marks],
                lines, tracebacks, time.monotonic() - t0, problems, list(self.exits))
        finally:
            watch.stop.set()
            for w in workers_all:
                w.kill()

    def _why(self, start: float, end: float) -> str:
        """The disruptions from shortly before the pause to its end."""
        during = [(t, what) for t, what in self.events_log if start - 10 <= t <= end]
        if not during:
            return "no disruption during it"
        return "; ".join(f"{t - start:+.1f} s: {what}" for t, what in during)

    @staticmethod
    def _log_lines(workers: list[WorkerProcess]) -> tuple[dict[str, int], int]:
        lines = {"lost": 0, "back": 0}
        tracebacks = 0
        for w in workers:
            try:
                text = w.log_path.read_text(errors="replace")
            except OSError:
                continue
            tracebacks += text.count("Traceback")
            lines["lost"] += len(re.findall(r"broker \d+ \(\S+\) lost", text))
            lines["back"] += len(re.findall(r"broker \d+ \(\S+\) back", text))
        return lines, tracebacks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=local_cluster.DEFAULT_PORT,
                   help="first port of the local cluster (kepl kafka start --nodes 3)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--events", type=int, default=12_000)
    p.add_argument("--kills", type=int, default=12)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--rebalances", action="store_true",
                   help="no broker faults: scale the workers 1 -> 2 -> 3 -> 2 -> 1, "
                        "25 s apart, and print the output pause of each join and leave")
    p.add_argument("--keep-logs", default=None, metavar="DIR",
                   help="copy the workers' logs into DIR")
    args = p.parse_args(argv)
    info = local_cluster.status(args.port, Path(args.data_dir) if args.data_dir else None)
    if not info.running:
        print(f"chaos-cluster: the cluster at {info.data_dir} is not running "
              "(kepl kafka start --nodes 3)", file=sys.stderr)
        return 2
    quiet = args.rebalances
    chaos = ClusterChaos(info, events=args.events, kills=0 if quiet else args.kills,
                         rolling=not quiet, outage=not quiet,
                         seed=args.seed, down_s=(2, 6),
                         keep_logs=Path(args.keep_logs) if args.keep_logs else None)
    try:
        outcome = chaos.run()
    finally:
        chaos.close()
    print(outcome.summary())
    for line in outcome.problems:
        print("  " + line)
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())

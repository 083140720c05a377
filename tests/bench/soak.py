"""Soak run: a keyed app on Kafka for a long time at half its drain rate, watched for
memory growth and consumer lag (``make soak``; prints figures, exits 1 on failure).

Set-up: the bench's ``keyed count/sum #length(100)`` job (1,000 accounts, 4 source
partitions, keyed context on 4 engine partitions) plus a ``#time(30 sec)`` group-by with
``output last every 5 sec`` (timers), exactly-once, 2 worker processes, snapshots on
(``KEPL_SNAPSHOT_MIN_BYTES`` 256 KiB, so that changelogs are snapshotted and truncated
during the run). Time comes from the events: an ``event_time`` section (record timestamp,
``delay_ms`` 200, ``idle_ms`` 5000) and ``kepl clock --from-events`` (``EventClock``) in
its own process; producers publish no watermark.

The rate is half the drain rate that ``bench_kafka.Run`` measures for the same job with
2 workers (``--rate`` gives it instead). Every ``--every`` seconds the run samples each
worker's RSS (/proc), the consumer lag (source end offsets less the group's committed
offsets, summed over partitions) and the p99 of produce-to-row-visible latency of the
rows read (``read_committed``) in that interval; the table is printed as it goes and
drawn as a PNG (``--png``).

Pass rule (printed with the verdict), with warm-up W = max(60 s, 10 % of the run):
  - RSS: for each worker, the mean of the last 3 samples is less than 1.10 times the mean
    of the first 3 samples after W;
  - lag: no sample after W exceeds 10 seconds of input (rate x 10 events);
  - both workers are alive at the end.

Run: .venv/bin/python tests/bench/soak.py [--minutes 30] [--every 10] [--rate EV_S]
[--png docs/img/soak.png]
(``KAFKA_BOOTSTRAP_SERVERS`` when set, else the local broker, started when needed.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from bench_kafka import (
    ACCOUNTS,
    JOBS,
    PARTITIONS,
    SCHEMAS,
    Run,
    add_broker_option,
    bootstrap,
    event,
    hosted,
)
from charts import DEFAULT_DIR, _pyplot
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from app.runtime.kafka import client
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.runner import REPO_ROOT, KafkaApp, WorkerProcess

JOB = "keyed count/sum #length(100)"
STATEMENTS = [*JOBS[JOB]["statements"],
              "select account, count(*) as cnt, sum(amount) as total "
              "from Withdrawal#time(30 sec) group by account output last every 5 sec"]
SNAPSHOT_ENV = {"KEPL_SNAPSHOT_MIN_BYTES": str(256 * 1024)}
EVENT_TIME = {"delay_ms": 200, "idle_ms": 5000}
RSS_GROWTH = 0.10
LAG_SECONDS = 10.0
CLOCK = """
import sys, yaml
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.event_clock import EventClock
c = EventClock(sys.argv[2], AppConfig.from_dict(yaml.safe_load(open(sys.argv[1]))))
try:
    c.run()
finally:
    c.close()
"""


def app_config() -> AppConfig:
    name = f"soak-{uuid.uuid4().hex[:8]}"
    return AppConfig.from_dict({
        "app": name, "schemas": SCHEMAS, "topics": {"Withdrawal": f"{name}.withdrawal"},
        "partitions": PARTITIONS, "processing_guarantee": "exactly_once",
        "context_partitions": JOBS[JOB]["context_partitions"],
        "event_time": EVENT_TIME, "late_events": "process",
        "statements": [{"name": f"s{i}", "epl": e} for i, e in enumerate(STATEMENTS)]})


def rss_mib(pid: int) -> float:
    """Resident set size of a process in MiB (NaN once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class Soak:
    """The app, its 2 workers, the event-time clock, a producer and a latency reader."""

    def __init__(self, bs: str, workers: int = 2) -> None:
        self.config = app_config()
        self.kapp = KafkaApp(self.config, bs)
        self.workers = [self.kapp.worker] + [
            WorkerProcess(self.config, bs, self._dir(i)) for i in range(1, workers)]
        for w in self.workers:
            w.start(env=SNAPSHOT_ENV)
        for attempt in range(10):  # a broker that just started: coordinator loading
            try:
                Run._wait_members(self, bs, workers)  # type: ignore[arg-type]
                break
            except KafkaException:
                if attempt == 9:
                    raise
                time.sleep(2)
        self.clock = subprocess.Popen(
            [sys.executable, "-c", CLOCK, str(self.workers[0].config_path), bs],
            cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
            stdout=open(self.kapp.workdir / "clock.log", "wb"), stderr=subprocess.STDOUT)
        self.source = [TopicPartition(self.config.topic_of("Withdrawal"), p)
                       for p in range(PARTITIONS)]
        self.group = Consumer(client.conf({
            "bootstrap.servers": bs, "group.id": f"kepl.{self.config.app}",
            "enable.auto.commit": False, "log_level": 3}))
        self.latencies: list[tuple[float, float]] = []  # (seen at, ms)
        self.rows = 0
        self.stop = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _dir(self, i: int) -> Path:
        d = self.kapp.workdir / f"w{i}"
        d.mkdir()
        return d

    def _read(self) -> None:
        """Produce-to-visible latency of every row that carries ``sent`` (the keyed job)."""
        topics = sorted({t for t, _ in self.kapp.topology.output_topics().values()})
        c = Consumer({"bootstrap.servers": self.kapp.bootstrap, "log_level": 3,
                      "group.id": f"soak-{uuid.uuid4().hex}", "auto.offset.reset": "latest",
                      "enable.auto.commit": False, "isolation.level": "read_committed",
                      "fetch.wait.max.ms": 5})
        parts = {t: n for t, n in self.kapp.topology.output_topics().values()}
        c.assign([TopicPartition(t, p, -1) for t in topics for p in range(parts[t])])
        while not self.stop.is_set():
            for m in c.consume(1000, 0.05):
                if m.error() is not None:
                    continue
                self.rows += 1
                sent = orjson.loads(m.value()).get("sent")
                if sent:
                    now = time.time() * 1000
                    self.latencies.append((now, now - sent))
        c.close()

    def lag(self) -> int:
        """Source end offsets less the group's committed offsets (events not yet taken)."""
        committed = self.group.committed(self.source, timeout=10)
        total = 0
        for tp in committed:
            _, high = self.group.get_watermark_offsets(tp, timeout=10)
            total += high - max(tp.offset, 0)
        return total

    def snapshots(self) -> list[str]:
        """Changelog partitions whose log starts after 0: a snapshot truncated them."""
        out = []
        for t, (n, _) in self.kapp.topology.topic_specs().items():
            if ".changelog." not in t:
                continue
            for p in range(n):
                low, high = self.group.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                out.append(f"{t}[{p}]: offsets {low}..{high}")
        return out

    def close(self) -> None:
        self.stop.set()
        self.reader.join(5)
        self.clock.send_signal(signal.SIGKILL)
        self.clock.wait()
        for w in self.workers[1:]:
            w.kill()
        self.group.close()
        workdir = self.kapp.workdir
        self.kapp.close(graceful=False)
        self.kapp.delete_topics()
        shutil.rmtree(workdir, ignore_errors=True)


def measure_rate(bs: str, n: int) -> float:
    """The job's drain rate with 2 workers (``bench_kafka.Run``, no event time)."""
    run = Run(bs, {"statements": STATEMENTS,
                   "context_partitions": JOBS[JOB]["context_partitions"]},
              "exactly_once", 2)
    try:
        return run.drain_rate(n, timed=False)
    finally:
        run.close()


def p99(values: list[float]) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))]


def soak(bs: str, rate: float, seconds: float, every: float, warmup: float
         ) -> tuple[list[dict[str, Any]], Soak]:
    """Produce at ``rate`` for ``seconds``, one sample per ``every`` seconds."""
    s = Soak(bs)
    samples: list[dict[str, Any]] = []
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "log_level": 3})
    topic = s.config.topic_of("Withdrawal")
    print(f"{'t s':>6} {'rss w0 MiB':>10} {'rss w1 MiB':>10} {'lag ev':>8} {'p99 ms':>8} "
          f"{'rows':>7} {'load1':>6}", flush=True)
    t0 = time.perf_counter()
    i = 0
    next_sample = every
    taken = 0
    try:
        while (el := time.perf_counter() - t0) < seconds:
            due = int(el * rate)
            while i < due:
                now = int(time.time() * 1000)
                key, value = event(i, now)
                try:
                    p.produce(topic, value, key=key, timestamp=now)
                except BufferError:
                    p.poll(0.05)
                    continue
                i += 1
            p.poll(0)
            if el >= next_sample:
                next_sample += every
                cut = time.time() * 1000 - every * 1000
                lats = s.latencies[taken:]
                taken = len(s.latencies)
                row = {"t": el, "rss": [rss_mib(w.proc.pid) for w in s.workers
                                        if w.proc is not None],
                       "lag": s.lag(), "p99": p99([ms for at, ms in lats if at >= cut]),
                       "rows": len(lats), "load": os.getloadavg()[0],
                       "alive": all(w.alive() for w in s.workers)}
                samples.append(row)
                print(f"{el:>6.0f} {row['rss'][0]:>10.1f} {row['rss'][1]:>10.1f} "
                      f"{row['lag']:>8} {row['p99']:>8.0f} {row['rows']:>7} "
                      f"{row['load']:>6.2f}" + ("" if row["alive"] else "  worker died"),
                      flush=True)
            time.sleep(0.002)
        p.flush(30)
    except BaseException:
        s.close()
        raise
    return samples, s


def verdict(samples: list[dict[str, Any]], rate: float, warmup: float
            ) -> tuple[bool, list[str]]:
    """The pass rule of the module docstring, with one line per check."""
    after = [r for r in samples if r["t"] >= warmup]
    lines = []
    ok = len(after) >= 6
    if not ok:
        lines.append(f"FAIL: only {len(after)} samples after warm-up (6 needed)")
        return ok, lines
    for k in range(len(after[0]["rss"])):
        base = statistics.mean(r["rss"][k] for r in after[:3])
        end = statistics.mean(r["rss"][k] for r in after[-3:])
        growth = end / base - 1
        good = growth < RSS_GROWTH
        ok &= good
        lines.append(f"{'ok' if good else 'FAIL'}: worker {k} RSS {base:.1f} -> {end:.1f} MiB "
                     f"({growth:+.1%}; rule < {RSS_GROWTH:+.0%}, mean of the first 3 "
                     f"samples after warm-up -> mean of the last 3)")
    bound = rate * LAG_SECONDS
    worst = max(r["lag"] for r in after)
    good = worst <= bound
    ok &= good
    lines.append(f"{'ok' if good else 'FAIL'}: lag after warm-up at most {worst:,} events "
                 f"(rule <= {LAG_SECONDS:.0f} s of input = {bound:,.0f} events); "
                 f"mean {statistics.mean(r['lag'] for r in after):,.0f}")
    alive = samples[-1]["alive"]
    ok &= alive
    lines.append(f"{'ok' if alive else 'FAIL'}: both workers alive at the end")
    return ok, lines


def plot(path: Path, samples: list[dict[str, Any]], rate: float, warmup: float,
         title: str) -> None:
    plt = _pyplot()
    if plt is None:
        return
    ts = [r["t"] / 60 for r in samples]
    fig, axes = plt.subplots(3, 1, figsize=(8, 7), dpi=72, sharex=True)
    for k in range(len(samples[0]["rss"])):
        axes[0].plot(ts, [r["rss"][k] for r in samples], label=f"worker {k}")
    axes[0].set_ylabel("RSS MiB")
    axes[0].legend(fontsize=8)
    axes[1].plot(ts, [r["lag"] for r in samples], color="#dd8452")
    axes[1].axhline(rate * LAG_SECONDS, color="#c44e52", ls=":", lw=1,
                    label=f"bound ({LAG_SECONDS:.0f} s of input)")
    axes[1].set_ylabel("consumer lag (events)")
    axes[1].legend(fontsize=8)
    axes[2].plot(ts, [r["p99"] for r in samples], color="#55a868")
    axes[2].set_ylabel("p99 latency ms")
    axes[2].set_xlabel("minutes")
    for ax in axes:
        ax.axvline(warmup / 60, color="#555555", ls="--", lw=1)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[0].set_title(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    print(f"chart: {path}", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="events/s (default: half the measured drain rate)")
    ap.add_argument("--drain-events", type=int, default=60_000,
                    help="backlog of the drain-rate measurement")
    ap.add_argument("--png", default=str(DEFAULT_DIR / "soak.png"), help="'' for none")
    add_broker_option(ap)
    args = ap.parse_args()
    bs = bootstrap(args.fresh_broker)
    topics, partitions = hosted(bs)
    print(f"broker {bs} hosts {topics:,} topics, {partitions:,} partitions", flush=True)
    seconds = args.minutes * 60
    warmup = max(60.0, 0.1 * seconds)
    print(f"soak: broker {bs}, {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rate = args.rate
    if not rate:
        drain = measure_rate(bs, args.drain_events)
        rate = drain / 2
        print(f"drain rate (2 workers, {args.drain_events:,} events): {drain:,.0f} ev/s; "
              f"soak at half: {rate:,.0f} ev/s", flush=True)
    print(f"soak: {args.minutes:g} min at {rate:,.0f} ev/s, 2 workers, {ACCOUNTS} keys, "
          f"event time (delay {EVENT_TIME['delay_ms']} ms), snapshots from "
          f"{SNAPSHOT_ENV['KEPL_SNAPSHOT_MIN_BYTES']} B, sample every {args.every:g} s, "
          f"warm-up {warmup:.0f} s", flush=True)
    samples, s = soak(bs, rate, seconds, args.every, warmup)
    try:
        logs = [w.log_tail(200) for w in s.workers]
        snaps = s.snapshots()
        rows = s.rows
    finally:
        s.close()
    ok, lines = verdict(samples, rate, warmup)
    print(f"rows read {rows:,}; changelogs at the end:")
    for line in snaps:
        print("  " + line)
    tracebacks = sum(log.count("Traceback") for log in logs)
    print(f"worker log tracebacks: {tracebacks}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for line in lines:
        print(line)
    print("soak: PASS" if ok else "soak: FAIL")
    if args.png and samples:
        plot(Path(args.png), samples, rate, warmup,
             f"kepl soak: {args.minutes:g} min at {rate:,.0f} ev/s, 2 workers, "
             f"event time, exactly-once")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

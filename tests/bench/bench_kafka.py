"""The Kafka data plane, end to end on one broker (prints figures and ratios, not a test).

Every row of the table drains the same kind of backlog: N JSON events (1,000 accounts,
keyed by account) in a source topic of 4 partitions, on the broker this machine runs.

- ``raw``: confluent-kafka ``consume(1000)``, JSON decode, count and sum per key: what
  the client library alone reads (the ratios' denominator).  It is read again right
  before each job: the ``x raw now`` column divides by that reading, so that a machine
  whose speed moves from minute to minute moves both sides of the ratio.
- ``faust``: a minimal faust-streaming agent doing the same job (``faust_agent.py``).
- kepl jobs with 1 and 2 workers, exactly-once and at-least-once: the workers start, take
  their partitions and restore, are stopped (SIGSTOP) while the backlog is produced, and
  are timed from SIGCONT until the progress topic reports the closing watermark.

Each drain also prints the CPU seconds the workers and the broker spent per 10,000
events (from /proc): on a 2-core machine that runs the broker too, what a second worker
can add is bounded by the core the broker and the first worker leave idle.  The last
column but one is the busiest worker's part of the workers' CPU seconds (0.50 with two
workers sharing the work evenly, 1.00 when one does it all): with idle cores, two workers
run at most 1/part times one, whatever else the machine is doing during the run.  The
last is how busy the busiest worker's main thread was over the drain (its CPU seconds over
the drain's seconds): under 1.00 it waited for something (input, a commit, the cores).

Then, for jobs whose rows do not wait on time, latency at half the measured rate: events
carry their send time, a ``read_committed`` reader takes the time a row becomes visible.

Run: .venv/bin/python tests/bench/bench_kafka.py [--events N] [--quick] [--jobs PREFIXES]
[--workers 1,2] [--no-faust] [--no-latency] [--charts DIR] [--fresh-broker]
(the tables also as PNG charts, ``bench-kafka-throughput.png`` and
``bench-kafka-latency.png`` in docs/img unless ``--charts ''``)
(``KAFKA_BOOTSTRAP_SERVERS`` when set, else the local broker, started when needed;
``--fresh-broker``: a local broker of the run's own, with an empty data dir, which ``make
bench-kafka`` uses: a broker holding thousands of other partitions costs more per event.)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import orjson
from charts import DEFAULT_DIR, bars
from confluent_kafka import Consumer, Producer, TopicPartition
from measured_code import describe

from app.kafka import local_broker
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.loop import TRACE_ENV
from app.runtime.kafka.runner import KafkaApp, WorkerProcess
from app.runtime.kafka.topology import ensure_topics

PARTITIONS = 4
ACCOUNTS = 1000
SCHEMAS = {"Withdrawal": {"account": "string", "amount": "double", "sent": "long"}}
KEYED = "create context ByAccount partition by account from Withdrawal"
HASHED = ("create context ByHash coalesce by consistent_hash_crc32(account) from Withdrawal "
          "granularity 16")
HASHED_SOURCE = ("create context ByHash coalesce by consistent_hash_crc32(account) from "
                 f"Withdrawal granularity {PARTITIONS} preallocate")
"""Read in place: the producer's default partitioner (CRC32 of the account) already puts
bucket b in source partition b."""

JOBS: dict[str, dict[str, Any]] = {
    "filter": {"statements": ["select * from Withdrawal(amount >= 200)"], "latency": True},
    "keyed count/sum #length(100)": {
        "statements": [KEYED, "context ByAccount select account, count(*) as cnt, "
                              "sum(amount) as total, sent "
                              "from Withdrawal#length(100)"],
        "context_partitions": {"ByAccount": 4}, "latency": True, "watermarks_ms": 50},
    "keyed, source-partitioned": {
        "statements": [KEYED, "context ByAccount select account, count(*) as cnt, "
                              "sum(amount) as total, sent "
                              "from Withdrawal#length(100)"],
        "context_partitions": {"ByAccount": "source"}, "latency": True},
    "#time(10 sec) output every 1 sec": {
        "statements": ["select account, count(*) as cnt, sum(amount) as total "
                       "from Withdrawal#time(10 sec) group by account "
                       "output last every 1 sec"], "latency": False},
    "split #time(10 sec) every 1 sec": {
        "statements": ["select account, count(*) as cnt, sum(amount) as total "
                       "from Withdrawal#time(10 sec) group by account "
                       "output last every 1 sec"],
        "statement_partitions": {"s0": 4}, "latency": False},
    "hash context (16) count/sum": {
        "statements": [HASHED, "context ByHash select account, count(*) as cnt, "
                               "sum(amount) as total from Withdrawal group by account"],
        "latency": False},
    "hash context (4), source": {
        "statements": [HASHED_SOURCE, "context ByHash select account, count(*) as cnt, "
                                      "sum(amount) as total from Withdrawal group by account"],
        "context_partitions": {"ByHash": "source"}, "latency": False},
}


def job_prefixes(given: str) -> list[str]:
    """``--jobs``: prefixes split on ``;`` when it holds one (job names hold commas),
    else on ``,``."""
    return [j for j in (given.split(";") if ";" in given else given.split(",")) if j]


_OWN_BROKERS: dict[str, Path] = {}
"""bootstrap -> data dir of a broker this run started for itself (``--fresh-broker``)."""


def bootstrap(fresh: bool = False) -> str:
    """``KAFKA_BOOTSTRAP_SERVERS``; else, with ``fresh``, a local broker of this run's own
    (a free port pair, an empty data dir, stopped and removed at exit); else the project's
    local broker, started when needed."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        return external
    if not fresh:
        return local_broker.start().bootstrap
    import atexit
    import shutil

    data_dir = Path(tempfile.mkdtemp(prefix="kepl-bench-broker-"))
    info = local_broker.start(port=local_broker.free_port_pair(), data_dir=data_dir,
                              wait_s=90, die_with_parent=True)

    def gone() -> None:
        local_broker.stop(data_dir=data_dir, timeout_s=30)
        shutil.rmtree(data_dir, ignore_errors=True)

    atexit.register(gone)
    _OWN_BROKERS[info.bootstrap] = data_dir
    return info.bootstrap


def add_broker_option(ap: argparse.ArgumentParser) -> None:
    """``--fresh-broker`` for a Kafka benchmark (``bootstrap``)."""
    ap.add_argument("--fresh-broker", action="store_true",
                    help="without KAFKA_BOOTSTRAP_SERVERS: a local broker of this run's "
                         "own, empty, instead of the project's shared one")


CROWDED_PARTITIONS = 200
"""Partitions of other topics on the broker above which the bench warns: a broker that
hosts thousands of them spends about twice the CPU per event on the same jobs
(docs/testing.md, "What the broker holds")."""


def hosted(bs: str) -> tuple[int, int]:
    """Topics and partitions the broker hosts, its internal topics left out."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bs, "log_level": 3}).list_topics(timeout=30)
    topics = [t for name, t in md.topics.items() if not name.startswith("__")]
    return len(topics), sum(len(t.partitions) for t in topics)


def cpu_seconds(pid: int | None, stat: str = "") -> float:
    """User + system CPU seconds of a process so far (0 if unknown); ``stat``: another
    /proc stat file of it (a thread's)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(stat or f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main_thread_cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a process's main thread so far (0 if unknown)."""
    return 0.0 if pid is None else cpu_seconds(pid, f"/proc/{pid}/task/{pid}/stat")


def broker_pid(bs: str) -> int | None:
    """The local broker's process id when ``bs`` is a broker this machine started."""
    host, _, port = bs.rpartition(":")
    if host not in ("127.0.0.1", "localhost"):
        return None
    data_dir = _OWN_BROKERS.get(bs) or local_broker.default_data_dir(int(port))
    return local_broker._read_pid(data_dir)


QUIET_CORES = 0.15
"""The broker counts as idle below this CPU use (cores, over a second)."""
QUIET_WAIT_S = 90.0


def wait_quiet(bs: str) -> tuple[float, float]:
    """Until the broker has been idle for two seconds running (at most ``QUIET_WAIT_S``):
    (seconds waited, its CPU use in cores over the last second).  A latency run measures
    the job alone: what earlier runs leave the broker doing (deleting their topics'
    files, which it does a minute after the delete, cleaning compacted logs, expiring
    the transactions and group members of killed workers) would otherwise be in it."""
    pid = broker_pid(bs)
    if pid is None:
        return 0.0, float("nan")
    t0 = time.monotonic()
    calm = 0
    while True:
        c0 = cpu_seconds(pid)
        time.sleep(1.0)
        use = cpu_seconds(pid) - c0
        calm = calm + 1 if use < QUIET_CORES else 0
        waited = time.monotonic() - t0
        if calm >= 2 or waited >= QUIET_WAIT_S:
            return waited, use


def delete_topic(bs: str, topic: str) -> None:
    """Best effort: drop a topic the benchmark made (they would pile up on the broker)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bs, "log_level": 0})
    for fut in admin.delete_topics([topic], operation_timeout=10).values():
        try:
            fut.result()
        except Exception:  # noqa: BLE001 - clean-up only
            pass


def event(i: int, sent_ms: int) -> tuple[bytes, bytes]:
    account = b"A%d" % ((i * 7919) % ACCOUNTS)
    return account, b'{"account":"%s","amount":%d.0,"sent":%d}' % (account, i % 400, sent_ms)


def produce_backlog(bs: str, topic: str, n: int, tick: Any = None) -> None:
    """``n`` events keyed by account; ``tick(i)`` after every 10,000 (watermarks)."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "log_level": 3})
    for i in range(n):
        key, value = event(i, 0)
        while True:
            try:
                p.produce(topic, value, key=key, timestamp=1 + i // 20)
                break
            except BufferError:
                p.poll(0.05)
        if tick is not None and i % 10_000 == 9_999:
            p.flush(60)
            tick(i)
    p.flush(60)


# -- baselines ---------------------------------------------------------------------


def raw_rate(bs: str, topic: str, n: int) -> float:
    """confluent-kafka alone: consume(1000), JSON, count/sum per key."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"raw-{uuid.uuid4().hex}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "fetch.max.bytes": 64 << 20, "log_level": 3})
    c.subscribe([topic])
    counts: dict[str, list[float]] = {}
    seen = 0
    t0 = 0.0
    while seen < n:
        msgs = c.consume(1000, 1.0)
        if msgs and not t0:
            t0 = time.perf_counter()
        for m in msgs:
            if m.error() is not None:
                continue
            e = json.loads(m.value())
            s = counts.setdefault(e["account"], [0, 0.0])
            s[0] += 1
            s[1] += e["amount"]
            seen += 1
    elapsed = time.perf_counter() - t0
    c.close()
    return n / elapsed


def faust_rate(bs: str, topic: str, n: int) -> float | None:
    """The faust agent's rate, or None (and why, on stderr) when it did not finish."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        env = {**os.environ, "BENCH_BOOTSTRAP": bs, "BENCH_TOPIC": topic,
               "BENCH_EVENTS": str(n), "BENCH_RESULT": str(result), "BENCH_DIR": tmp}
        with open(Path(tmp) / "faust.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("faust_agent.py")), "worker",
                 "-l", "info"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
            try:
                proc.wait(max(120, n // 2000))
            except subprocess.TimeoutExpired:
                pass
            finally:
                proc.kill()
        if not result.exists():
            tail = (Path(tmp) / "faust.log").read_text(errors="replace").splitlines()[-15:]
            print("faust agent did not finish; its log ends:\n  " + "\n  ".join(tail),
                  file=sys.stderr)
            return None
        got = json.loads(result.read_text())
        return got["events"] / got["seconds"]


# -- kepl --------------------------------------------------------------------------


def app_config(job: dict[str, Any], guarantee: str) -> AppConfig:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    return AppConfig.from_dict({
        "app": name, "schemas": SCHEMAS, "topics": {"Withdrawal": f"{name}.withdrawal"},
        "partitions": PARTITIONS, "processing_guarantee": guarantee,
        "context_partitions": job.get("context_partitions", {}),
        "statement_partitions": job.get("statement_partitions", {}),
        "statements": [{"name": f"s{i}", "epl": e} for i, e in enumerate(job["statements"])]})


class Run:
    """An app with ``workers`` workers, ready (partitions taken) when constructed."""

    def __init__(self, bs: str, job: dict[str, Any], guarantee: str, workers: int,
                 config: AppConfig | None = None) -> None:
        """``config``: another app than ``job``'s (the Nexmark benchmark's)."""
        self.config = config or app_config(job, guarantee)
        self.kapp = KafkaApp(self.config, bs)
        self.workers = [self.kapp.worker] + [
            WorkerProcess(self.config, bs, self._dir(i)) for i in range(1, workers)]
        for w in self.workers:
            w.start()
        self.kapp.settle(timeout_s=120)
        self._wait_members(bs, workers)
        self.kapp.settle(timeout_s=120)

    def _wait_members(self, bs: str, n: int) -> None:
        """Until the group is stable with ``n`` members that each hold partitions."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bs, "log_level": 3})
        group = f"kepl.{self.config.app}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            d = admin.describe_consumer_groups([group])[group].result(10)
            if (str(d.state).endswith("STABLE") and len(d.members) == n
                    and all(m.assignment.topic_partitions for m in d.members)):
                return
            time.sleep(0.2)
        raise RuntimeError(f"group {group} did not become stable with {n} members")

    def _dir(self, i: int) -> Path:
        d = self.kapp.workdir / f"w{i}"
        d.mkdir()
        return d

    def signal(self, sig: int) -> None:
        for w in self.workers:
            assert w.proc is not None
            os.kill(w.proc.pid, sig)

    def drain_rate(self, n: int, timed: bool, produce: Any = None) -> float:
        """Events/s through the stopped workers' backlog of ``n`` events (``self.cpu``:
        CPU seconds of the workers and of the broker while they drained it).
        ``produce()``: another backlog (published watermarks included), returning the
        closing watermark's time."""
        self.signal(signal.SIGSTOP)
        t = [0]

        def tick(i: int) -> None:
            if timed:
                t[0] += 1000
                self.kapp.advance(t[0])

        try:
            if produce is not None:
                t[0] = produce() - 1000
            else:
                produce_backlog(self.kapp.bootstrap, self.config.topic_of("Withdrawal"), n,
                                tick)
        finally:
            self.signal(signal.SIGCONT)
        pids = [w.proc.pid for w in self.workers if w.proc is not None]
        bpid = broker_pid(self.kapp.bootstrap)
        w0 = [cpu_seconds(p) for p in pids]
        m0 = [main_thread_cpu_seconds(p) for p in pids]
        c0 = sum(w0), cpu_seconds(bpid)
        t0 = time.perf_counter()
        self.kapp.now = t[0] + 1000
        self.kapp.settle(timeout_s=600)
        dt = time.perf_counter() - t0
        w1 = [cpu_seconds(p) for p in pids]
        m1 = [main_thread_cpu_seconds(p) for p in pids]
        c1 = sum(w1), cpu_seconds(bpid)
        self.cpu = (c1[0] - c0[0], c1[1] - c0[1], dt)
        spent = [b - a for a, b in zip(w0, w1)]
        # the busiest worker's part of the workers' CPU: with idle cores, n workers run
        # at most 1/share times one (a load-independent view of how the work spreads)
        self.share = max(spent) / sum(spent) if sum(spent) > 0 else 1.0
        self.main_busy = max((b - a for a, b in zip(m0, m1)), default=0.0) / dt
        return n / dt

    def latency(self, rate: float, seconds: float, watermarks_ms: int = 0
                ) -> tuple[float, float, int]:
        """(p50 ms, p99 ms, rows) at ``rate`` events/s, after 2 s of warm-up at that rate
        (``watermarks_ms``: a watermark that often, for statements whose rows wait)."""
        topics = [self.config.output_topic(s) for s in self.kapp.topology.output_topics()]
        lat: list[float] = []
        samples: list[tuple[float, float, float, int]] = []
        trace = os.environ.get(TRACE_ENV)
        if trace:
            Path(trace).write_text("")
        stop = threading.Event()
        wpid = self.workers[0].proc.pid if self.workers[0].proc is not None else None
        bpid = broker_pid(self.kapp.bootstrap)
        # the reader's long poll returns as soon as a commit makes rows visible; a short
        # one (5 ms) only adds empty fetches, which cost the broker about 0.1 core
        reader = Consumer({"bootstrap.servers": self.kapp.bootstrap,
                           "group.id": f"lat-{uuid.uuid4().hex}", "log_level": 3,
                           "auto.offset.reset": "latest", "enable.auto.commit": False,
                           "isolation.level": "read_committed", "fetch.wait.max.ms": 100})
        reader.assign([TopicPartition(t, p, -1) for t in topics for p in range(16)
                       if p < self._partitions(t)])

        def read() -> None:
            while not stop.is_set():
                for m in reader.consume(1000, 0.002):
                    if m.error() is None:
                        now = time.time() * 1000
                        row = orjson.loads(m.value())
                        sent = row.get("sent")
                        if sent and sent >= measure_from:
                            lat.append(now - sent)
                            if trace:
                                # the event's source partition: librdkafka's default
                                # partitioner, CRC32 of the key
                                samples.append((sent, m.timestamp()[1], now, zlib.crc32(
                                    row["account"].encode()) % PARTITIONS))

        measure_from = time.time() * 1000 + 2000 + 1000
        th = threading.Thread(target=read)
        th.start()
        time.sleep(1.0)
        # the client's default linger (5 ms): 1 ms multiplied the produce requests
        p = Producer({"bootstrap.servers": self.kapp.bootstrap, "linger.ms": 5,
                      "log_level": 3})
        topic = self.config.topic_of("Withdrawal")
        c0 = cpu_seconds(wpid), cpu_seconds(bpid)
        t0 = time.perf_counter()
        i = 0
        ticks = 0
        while (el := time.perf_counter() - t0) < seconds + 2.0:
            if watermarks_ms and el * 1000 >= (ticks + 1) * watermarks_ms:
                ticks += 1
                p.flush(10)
                self.kapp.clock.publish(ticks * watermarks_ms)
            due = int(el * rate)
            while i < due:
                key, value = event(i, int(time.time() * 1000))
                p.produce(topic, value, key=key)
                i += 1
            p.poll(0)
            time.sleep(0.002)
        p.flush(30)
        time.sleep(1.0)
        dt = time.perf_counter() - t0
        # the worker's and the broker's CPU (cores) over the run, and the machine's load
        self.usage = ((cpu_seconds(wpid) - c0[0]) / dt, (cpu_seconds(bpid) - c0[1]) / dt,
                      os.getloadavg()[0])
        stop.set()
        th.join()
        reader.close()
        if trace:
            self.breakdown = breakdown(samples, Path(trace))
        # the median latency of the first and the last tenth of the rows as they came: a
        # worker that does not keep up with the rate shows the second growing
        tenth = max(1, len(lat) // 10)
        self.trend = ((statistics.median(lat[:tenth]), statistics.median(lat[-tenth:]))
                      if lat else (float("nan"), float("nan")))
        lat.sort()
        if not lat:
            return float("nan"), float("nan"), 0
        return (statistics.median(lat), lat[min(len(lat) - 1, int(0.99 * len(lat)))],
                len(lat))

    def _partitions(self, topic: str) -> int:
        return next(n for t, n in self.kapp.topology.output_topics().values() if t == topic)

    def close(self) -> None:
        for w in self.workers[1:]:
            w.kill()
        self.kapp.close(graceful=False)
        self.kapp.delete_topics()


STAGES = ("sent>consumed", "handle", ">ckpt start", "seal+produce", "send offsets",
          "commit txn", "commit>visible")


def breakdown(samples: list[tuple[float, float, float, int]], trace: Path
              ) -> dict[str, list[float]]:
    """Each row's latency in stages (ms, ``STAGES``), from the reader's (sent, row
    timestamp, visible) and the worker's trace: a row's event is taken as consumed in the
    first batch holding a record of its partition stamped at or after its send time, and
    its checkpoint is the one during which the row was produced.  Returns p50 and p99
    bands (the mean of each stage over the rows at 45-55 % and 98.5-99.5 % of latency),
    and the checkpoints' steps."""
    import bisect

    batches: list[tuple[float, float, dict[int, int], int]] = []
    ckpts: list[tuple[float, ...]] = []
    for line in trace.read_text().splitlines():
        f = line.split()
        if f[0] == "b":
            batches.append((float(f[1]) * 1000, float(f[2]) * 1000,
                            {int(p): int(ts) for p, ts in (kv.split(":") for kv in f[4:])},
                            int(f[3])))
        elif f[0] == "c":
            marks = dict(kv.split("=") for kv in f[3:])
            ckpts.append((float(f[1]) * 1000, float(marks["produced"]) * 1000,
                          float(marks["offsets"]) * 1000, float(marks["committed"]) * 1000,
                          float(marks["local"]) * 1000, float(f[2]) * 1000,
                          float(marks.get("snapshot", marks["local"])) * 1000))
    rows = []
    # per input partition: the batches holding it, with the newest timestamp so far
    newest: dict[int, tuple[list[int], list[int]]] = {}
    for i, b in enumerate(batches):
        for p, ts in b[2].items():
            stamps, at = newest.setdefault(p, ([], []))
            stamps.append(max(ts, stamps[-1]) if stamps else ts)
            at.append(i)
    starts = [c[0] for c in ckpts]
    for sent, stamp, seen, part in samples:
        stamps, at = newest.get(part, ([], []))
        k = bisect.bisect_left(stamps, sent)
        j = bisect.bisect_right(starts, stamp) - 1
        if k >= len(stamps) or j < 0:
            continue
        t_in, t_out, _, _ = batches[at[k]]
        start, produced, offsets, committed = ckpts[j][:4]
        rows.append((seen - sent, [t_in - sent, t_out - t_in, start - t_out,
                                   produced - start, offsets - produced,
                                   committed - offsets, seen - committed]))
    rows.sort(key=lambda r: r[0])
    out: dict[str, list[float]] = {}
    for name, lo, top in (("p50", 0.45, 0.55), ("p99", 0.985, 0.995)):
        band = rows[int(lo * len(rows)):max(int(lo * len(rows)) + 1, int(top * len(rows)))]
        if band:
            out[name] = [statistics.mean(r[1][k] for r in band) for k in range(len(STAGES))]
    steps = {"ckpt total": (0, 5), "ckpt seal+produce": (0, 1), "ckpt send offsets": (1, 2),
             "ckpt commit txn": (2, 3), "ckpt local writes": (3, 6),
             "ckpt snapshot start": (6, 4)}
    for label, (a, b) in steps.items():
        d = sorted(c[b] - c[a] for c in ckpts)
        if d:
            out[f"{label} p50/p99"] = [d[len(d) // 2], d[int(0.99 * (len(d) - 1))]]
    gaps = sorted(b[0] - a[5] for a, b in zip(ckpts, ckpts[1:]))
    if gaps:
        out["between ckpts p50/p99"] = [gaps[len(gaps) // 2],
                                        gaps[int(0.99 * (len(gaps) - 1))]]
    sizes = sorted(b[3] for b in batches)
    if sizes:
        out["batch p50/p99"] = [sizes[len(sizes) // 2], sizes[int(0.99 * (len(sizes) - 1))]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--quick", action="store_true", help="1 worker, exactly-once only")
    ap.add_argument("--jobs", default="",
                    help="comma- (or semicolon-) separated job name prefixes")
    ap.add_argument("--workers", default="",
                    help="comma-separated worker counts (default 1,2; 1 with --quick)")
    ap.add_argument("--no-faust", action="store_true", help="skip the faust agent")
    ap.add_argument("--no-latency", action="store_true", help="skip the latency runs")
    ap.add_argument("--latency-only", action="store_true",
                    help="skip the drain runs (latency at 2k, 10k and 20k ev/s)")
    ap.add_argument("--half-rate", type=float, default=0.0,
                    help="with --latency-only: the rate taken for half the drain rate")
    ap.add_argument("--rates", default="2000,10000,half",
                    help="latency rates, comma-separated (ev/s; 'half': half the drain rate)")
    ap.add_argument("--charts", default=str(DEFAULT_DIR),
                    help="directory of the PNG charts (default docs/img; '' for none)")
    add_broker_option(ap)
    args = ap.parse_args()
    n = args.events
    bs = bootstrap(args.fresh_broker)
    topics, partitions = hosted(bs)
    print(f"kepl Kafka data plane: {n:,} events, {PARTITIONS} source partitions, "
          f"{ACCOUNTS} keys, broker {bs} ({'its own, ' if bs in _OWN_BROKERS else ''}"
          f"hosting {topics:,} topics, {partitions:,} partitions), "
          f"{os.cpu_count()} cores", flush=True)
    print(f"  code: {describe()}", flush=True)
    if partitions > CROWDED_PARTITIONS:
        print(f"  note: the broker hosts {partitions:,} partitions of other topics; a "
              "crowded broker costs more CPU per event and these figures drop with it "
              "(--fresh-broker runs on one of the bench's own)", flush=True)
    print(flush=True)

    base = f"bench-base-{uuid.uuid4().hex[:8]}"
    # the backlog is stamped near time 0: no time retention, or the broker deletes it
    ensure_topics(bs, {base: (PARTITIONS, {"retention.ms": "-1"})})
    produce_backlog(bs, base, n)
    if bs in _OWN_BROKERS:
        raw_rate(bs, base, n)  # a new broker's first reads run before its JIT warmed up
    raw = raw_rate(bs, base, n)
    rows: list[tuple[str, float]] = [("confluent-kafka consume(1000) + JSON + count/sum", raw)]
    print(f"{rows[0][0]:<58} {raw:>9,.0f} ev/s  1.00x raw", flush=True)
    fa = None if args.no_faust else faust_rate(bs, base, n)
    if args.no_faust:
        pass
    elif fa is None:
        print(f"{'faust-streaming agent, take(1000), same job':<58} did not finish")
    else:
        print(f"{'faust-streaming agent, take(1000), same job':<58} {fa:>9,.0f} ev/s  "
              f"{fa / raw:.2f}x raw", flush=True)

    print(f"\n{'kepl job':<34} {'guarantee':<14} {'workers':>7} {'ev/s':>9} {'x raw':>6} "
          f"{'x raw now':>9} {'x faust':>7} {'cpu s/10k ev: workers':>22} {'broker':>7} "
          f"{'cores busy':>10} {'busiest worker':>14} {'main thread':>11}",
          flush=True)
    best: dict[str, float] = {}
    drains: dict[tuple[str, str, int], float] = {}
    cpus: dict[tuple[str, str, int], tuple[float, float]] = {}
    brokers: dict[tuple[str, str, int], float] = {}
    for name, job in JOBS.items():
        if args.latency_only:
            break
        if args.jobs and not any(name.startswith(j) for j in job_prefixes(args.jobs)):
            continue
        raw_now = raw_rate(bs, base, n)
        for guarantee in ("exactly_once",) if args.quick else ("exactly_once",
                                                               "at_least_once"):
            counts = ([int(w) for w in args.workers.split(",")] if args.workers
                      else [1] if args.quick else [1, 2])
            for workers in counts:
                run = Run(bs, job, guarantee, workers)
                try:
                    rate = run.drain_rate(n, timed=not job["latency"])
                finally:
                    run.close()
                if workers == 1 and guarantee == "exactly_once":
                    best[name] = rate
                drains[(name, guarantee, workers)] = rate
                cpus[(name, guarantee, workers)] = (run.cpu[0], run.share)
                brokers[(name, guarantee, workers)] = run.cpu[1]
                vs_faust = f"{rate / fa:>7.2f}" if fa else f"{'-':>7}"
                wcpu, bcpu, dt = run.cpu
                print(f"{name:<34} {guarantee:<14} {workers:>7} {rate:>9,.0f} "
                      f"{rate / raw:>6.2f} {rate / raw_now:>9.2f} {vs_faust} "
                      f"{wcpu / n * 1e4:>22.2f} "
                      f"{bcpu / n * 1e4:>7.2f} {(wcpu + bcpu) / dt:>10.2f} "
                      f"{run.share:>14.2f} {run.main_busy:>11.2f}", flush=True)

    # 2 vs 1 worker: the drain rates; what the workers' CPU allows when each has a core
    # (one worker's CPU seconds over the busiest of two workers'); and the most two
    # workers can drain here, where they and the broker share os.cpu_count() cores
    scaling = [(k[0], k[1], drains[(k[0], k[1], 2)] / r,
                cpus[k][0] / (cpus[(k[0], k[1], 2)][0] * cpus[(k[0], k[1], 2)][1]),
                shared_ceiling(n, cpus[(k[0], k[1], 2)][0], brokers[(k[0], k[1], 2)]) / r)
               for k, r in drains.items() if k[2] == 1 and (k[0], k[1], 2) in drains]
    delete_topic(bs, base)
    if scaling:
        print(f"\n{'2 workers / 1 worker':<34} {'guarantee':<14} {'drain rate':>10} "
              f"{'CPU bound (a core per worker)':>30} {'ceiling, broker on these cores':>31}")
        for name, guarantee, ratio, bound, ceiling in scaling:
            print(f"{name:<34} {guarantee:<14} {ratio:>10.2f} {bound:>30.2f} "
                  f"{ceiling:>31.2f}", flush=True)
    if args.charts and drains:
        throughput_chart(Path(args.charts), n, raw, fa, drains)
    halves: dict[str, tuple[float, float]] = {}
    """Job -> (rate, p99 ms) of its latency run at half its drain rate."""
    if not args.no_latency:
        latency_runs(args, bs, best, halves)
    print_targets({k[0]: r / raw for k, r in drains.items()
                   if k[1:] == ("exactly_once", 1) and k[0] != "filter"},
                  [(name, ratio, ceiling) for name, guarantee, ratio, _, ceiling in scaling
                   if guarantee == "exactly_once"],
                  {name: v for name, v in halves.items()
                   if name.startswith("keyed") and not JOBS[name].get("watermarks_ms")})


ONE_WORKER_TARGET = 0.5
TWO_WORKER_TARGET = 1.7
P99_TARGET_MS = 100.0


def print_targets(one: dict[str, float], two: list[tuple[str, float, float]],
                  p99: dict[str, tuple[float, float]]) -> None:
    """The issue's targets for the Kafka data plane beside this run's figures: stateful
    jobs >= 0.5x raw with one exactly-once worker, every job >= 1.7x with two workers
    (with the ceiling the broker leaves on these cores), keyed rows that wait on no
    watermark p99 < 100 ms at half the drain rate."""
    if not (one or two or p99):
        return

    def verdict(ok: bool) -> str:
        return "met" if ok else "not met"

    print("\nTargets (issue 25, \"Stateful statements at the client's speed\"):")
    if one:
        print(f"  one worker >= {ONE_WORKER_TARGET}x raw, exactly-once:")
        for name, ratio in one.items():
            print(f"    {name:<34} {ratio:>6.2f}  {verdict(ratio >= ONE_WORKER_TARGET)}")
    if two:
        print(f"  two workers >= {TWO_WORKER_TARGET}x one, exactly-once (the ceiling the "
              "broker leaves on these cores beside):")
        for name, ratio, ceiling in two:
            print(f"    {name:<34} {ratio:>6.2f}  (ceiling {ceiling:.2f})  "
                  f"{verdict(ratio >= TWO_WORKER_TARGET)}")
    if p99:
        print(f"  p99 < {P99_TARGET_MS:.0f} ms at half the drain rate, keyed rows that wait "
              "on no watermark:")
        for name, (rate, ms) in p99.items():
            print(f"    {name:<34} {rate:>9,.0f} ev/s  p99 {ms:>7.1f} ms  "
                  f"{verdict(ms < P99_TARGET_MS)}")


def latency_runs(args: argparse.Namespace, bs: str, best: dict[str, float],
                 halves: dict[str, tuple[float, float]]) -> None:
    """Row latency of the jobs that have it, one exactly-once worker (``--rates``)."""
    print(f"\n{'latency (exactly-once, 1 worker)':<34} {'rate':>9} {'p50 ms':>8} "
          f"{'p99 ms':>8} {'rows':>7}", flush=True)
    latencies: list[tuple[str, float, float, float]] = []
    for name, job in JOBS.items():
        if not job["latency"] or (args.jobs and name not in best and not (
                args.latency_only and any(name.startswith(j)
                                          for j in job_prefixes(args.jobs)))):
            continue
        waited, idle = wait_quiet(bs)
        print(f"  (broker idle at {idle:.2f} cores after {waited:.0f} s)", flush=True)
        run = Run(bs, job, "exactly_once", 1)
        try:
            # 2k and 10k ev/s, and half the drain rate (the bench's own producer and
            # reader then share the 2 cores with the worker and the broker)
            half = best.get(name, args.half_rate * 2 or 20000.0) / 2
            for given in args.rates.split(","):
                rate = half if given == "half" else float(given)
                p50, p99, got = run.latency(rate, 5.0, job.get("watermarks_ms", 0))
                latencies.append((name, rate, p50, p99))
                if given == "half":
                    halves[name] = (rate, p99)
                wm = (f"  (watermark every {job['watermarks_ms']} ms)"
                      if job.get("watermarks_ms") else "")
                print(f"{name:<34} {rate:>9,.0f} {p50:>8.1f} {p99:>8.1f} {got:>7}{wm}",
                      flush=True)
                wcpu, bcpu, load = run.usage
                first, last = run.trend
                behind = (" (fell behind: rows waited longer and longer, so this rate is "
                          "past what the worker sustains beside the bench's producer and "
                          "reader)" if last > 2 * first + 50 else "")
                print(f"    cores busy: worker {wcpu:.2f}, broker {bcpu:.2f}; "
                      f"load average {load:.1f}; median of the first / last tenth of the "
                      f"rows {first:.1f} / {last:.1f} ms{behind}")
                for band, values in getattr(run, "breakdown", {}).items():
                    if band in ("p50", "p99"):
                        print(f"    {band} stages: " + ", ".join(
                            f"{st} {v:.1f}" for st, v in zip(STAGES, values)))
                    else:
                        print(f"    {band}: " + " / ".join(f"{v:.1f}" for v in values))
        finally:
            run.close()
    if args.charts and latencies:
        bars(Path(args.charts) / "bench-kafka-latency.png",
             "Produce to row visible (exactly-once, 1 worker)",
             [f"{name}, {rate:,.0f} ev/s" for name, rate, _, _ in latencies],
             {"p50": [p50 for _, _, p50, _ in latencies],
              "p99": [p99 for _, _, _, p99 in latencies]}, "ms")


def shared_ceiling(n: int, workers_cpu: float, broker_cpu: float) -> float:
    """Events/s when every core of this machine runs the workers or the broker, at the CPU
    seconds they spent on ``n`` events (the bench's own processes left out)."""
    spent = workers_cpu + broker_cpu
    return (os.cpu_count() or 1) * n / spent if spent > 0 else float("inf")


def throughput_chart(where: Path, n: int, raw: float, faust: float | None,
                     drains: dict[tuple[str, str, int], float]) -> None:
    """Drain rate per job and worker count (exactly-once; at-least-once when that is all
    that ran), against the raw client and the faust agent."""
    jobs = list(dict.fromkeys(name for name, _, _ in drains))
    nan = float("nan")
    labels = ["confluent-kafka consume + JSON (raw)", "faust-streaming agent", *jobs]
    series = {}
    for workers in sorted({w for _, _, w in drains}):
        series[f"{workers} worker{'s' if workers > 1 else ''}"] = [
            raw if workers == 1 else nan, (faust or nan) if workers == 1 else nan,
            *[drains.get((j, "exactly_once", workers), nan) for j in jobs]]
    bars(where / "bench-kafka-throughput.png",
         f"Kafka drain rate, exactly-once ({n:,} events, 4 partitions)", labels, series,
         "events/s", note="raw and faust: one consumer, no guarantee")


if __name__ == "__main__":
    main()

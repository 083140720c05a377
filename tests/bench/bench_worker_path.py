"""The worker's own cost per record, without a broker (prints figures, not a test).

A real ``loop.Worker`` of the jobs of ``bench_kafka.py`` owns every partition; its
consumer, producer and changelog are in memory: consumed records are built once up front
(each consume batch in runs of one partition's records, as librdkafka's fetches give them),
what the worker produces (rows, changelog records, repartition bundles) is kept, and
bundles are consumed back on the next step as a worker owning the repartition topic
would.  Each step is ``Worker.handle`` of one consume batch followed by a checkpoint
(``Worker.commit``), as a draining worker does.  Prints µs per source event, and with
``--profile`` the Python calls per event and the top functions (cProfile).

Run: .venv/bin/python -m tests.bench.bench_worker_path [--events 100000] [--batch 2000]
[--jobs PREFIXES] [--watermark-every 10000] [--profile] [--repeat 3] [--accounts 1000]
[--snapshots] [--callers PATTERN]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

from app.runtime.kafka import loop
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import SnapshotPolicy
from app.runtime.kafka.router import H_CONTROL
from app.runtime.kafka.topology import Topology
from tests.app.runtime.kafka.fakes import TruncLog

args_sort: list[Any] = ["tottime", 25, ""]
SOURCE_PARTITIONS = 4
ACCOUNTS = [1000]
"""Distinct keys of the stream (``--accounts``)."""
SCHEMAS = {"Withdrawal": {"account": "string", "amount": "double", "sent": "long"}}
KEYED = "create context ByAccount partition by account from Withdrawal"
HASHED = ("create context ByHash coalesce by consistent_hash_crc32(account) from Withdrawal "
          "granularity 16")
KEYED_SELECT = ("context ByAccount select account, count(*) as cnt, sum(amount) as total, "
                "sent from Withdrawal#length(100)")
JOBS: dict[str, dict[str, Any]] = {
    "lane, a row per event": {"statements": ["select account, amount from Withdrawal"]},
    "keyed routed (4)": {"statements": [KEYED, KEYED_SELECT],
                                     "context_partitions": {"ByAccount": 4}},
    "keyed source-partitioned": {"statements": [KEYED, KEYED_SELECT],
                                  "context_partitions": {"ByAccount": "source"}},
    "#time output every": {
        "statements": ["select account, count(*) as cnt, sum(amount) as total "
                       "from Withdrawal#time(10 sec) group by account "
                       "output last every 1 sec"]},
    "split #time output every": {
        "statements": ["select account, count(*) as cnt, sum(amount) as total "
                       "from Withdrawal#time(10 sec) group by account "
                       "output last every 1 sec"],
        "statement_partitions": {"s0": 4}},
    "hash context (16)": {
        "statements": [HASHED, "context ByHash select account, count(*) as cnt, "
                               "sum(amount) as total from Withdrawal group by account"]},
    "keyed source, event time": {"statements": [KEYED, KEYED_SELECT],
                                 "context_partitions": {"ByAccount": "source"},
                                 "event_time": {}},
    "#time output every, event time": {
        "statements": ["select account, count(*) as cnt, sum(amount) as total "
                       "from Withdrawal#time(10 sec) group by account "
                       "output last every 1 sec"],
        "event_time": {}},
}
"""A job with ``event_time`` takes each event's time from its record timestamp and each
watermark just behind the newest of them: an engine partition holds its events until the
next watermark."""


class Msg:
    """A consumed record, answering as confluent-kafka's ``Message``."""

    __slots__ = ("_topic", "_p", "_off", "_value", "_key", "_ts", "_headers")

    def __init__(self, topic: str, p: int, off: int, value: bytes, key: bytes | None,
                 ts: int, headers: Any = None) -> None:
        self._topic, self._p, self._off, self._value = topic, p, off, value
        self._key, self._ts, self._headers = key, ts, headers

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._off

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def headers(self) -> Any:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return 1, self._ts


class Delivered:
    __slots__ = ("_off",)

    def __init__(self, off: int) -> None:
        self._off = off

    def offset(self) -> int:
        return self._off


class Sink:
    """The worker's producer in memory: a transaction's records land at commit; the
    changelog records get offsets, repartition bundles are kept for consuming back."""

    exactly_once = True

    def __init__(self, changelogs: dict[tuple[str, int], TruncLog], repartition: set[str]
                 ) -> None:
        self.open = False
        self.errors: list[str] = []
        self.pending: list[tuple[str, bytes, int, Any]] = []
        self.changelogs = changelogs
        self.repartition = repartition
        self.bundles: list[tuple[str, int, bytes]] = []
        self.rows = 0

    def produce(self, topic: str, value: bytes, partition: int, headers: Any = None,
                key: bytes | None = None, on_delivery: Any = None) -> None:
        self.open = True
        self.pending.append((topic, value, partition, on_delivery))

    def poll(self) -> None:
        pass

    def rows_landed(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def offer_offsets(self, offsets: list[Any], consumer: Any) -> None:
        pass

    def commit(self, offsets: list[Any], consumer: Any) -> None:
        for topic, value, p, cb in self.pending:
            if cb is not None:
                log = self.changelogs.setdefault((topic, p), TruncLog())
                cb(None, Delivered(log.append(value)))
            elif topic in self.repartition:
                self.bundles.append((topic, p, value))
            else:
                self.rows += 1
        self.pending = []
        self.open = False

    def abort(self) -> None:
        self.pending = []
        self.open = False

    def close(self) -> None:
        pass


class Changelogs:
    """``ChangelogLog`` over the sink's in-memory changelog partitions."""

    def __init__(self, logs: dict[tuple[str, int], TruncLog]) -> None:
        self.logs = logs

    def _log(self, topic: str, p: int) -> TruncLog:
        return self.logs.setdefault((topic, p), TruncLog())

    def start(self, topic: str, p: int) -> int:
        return self._log(topic, p).low

    def end(self, topic: str, p: int) -> int:
        return self._log(topic, p).high

    def read(self, topic: str, p: int, start: int) -> Any:
        return self._log(topic, p).read(topic, p, start)

    def delete_before(self, topic: str, p: int, offset: int) -> None:
        self._log(topic, p).delete_before(offset)


class TP:
    def __init__(self, topic: str, partition: int, offset: int = -1001,
                 metadata: Any = None) -> None:
        self.topic, self.partition, self.offset, self.metadata = (topic, partition, offset,
                                                                  metadata)


class Consumer:
    """Only what the worker asks outside ``consume``: committed offsets (none)."""

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def committed(self, tps: list[Any], timeout: float = 0) -> list[Any]:
        return [TP(tp.topic, tp.partition) for tp in tps]

    def consumer_group_metadata(self) -> None:
        return None

    def close(self) -> None:
        pass


class Harness:
    """A worker of one job owning all of its partitions."""

    def __init__(self, job: dict[str, Any], workdir: Path, snapshots: bool = False) -> None:
        """``snapshots``: the worker writes snapshots by the default policy (a
        ``kepl worker``'s), else none."""
        self.config = AppConfig.from_dict({
            "app": "wp", "schemas": SCHEMAS, "topics": {"Withdrawal": "wp.withdrawal"},
            "partitions": SOURCE_PARTITIONS, "processing_guarantee": "exactly_once",
            "context_partitions": job.get("context_partitions", {}),
            "statement_partitions": job.get("statement_partitions", {}),
            **({"event_time": job["event_time"]} if "event_time" in job else {}),
            "statements": [{"name": f"s{i}", "epl": e}
                           for i, e in enumerate(job["statements"])]})
        self.event_time = "event_time" in job
        self.sent = 0
        self.topic = self.config.topic_of("Withdrawal")
        topology = Topology.plan(self.config, {self.topic: SOURCE_PARTITIONS})
        self.logs: dict[tuple[str, int], TruncLog] = {}
        repartition = {t for t, (_, _) in topology.topic_specs().items()
                       if ".repartition." in t}
        self.sink = Sink(self.logs, repartition)
        with mock.patch("confluent_kafka.Consumer", Consumer), \
                mock.patch.object(loop, "make_output", lambda *a: self.sink), \
                mock.patch.object(loop, "KafkaChangelog", lambda bs: Changelogs(self.logs)), \
                mock.patch.object(loop, "LostInput"):
            self.worker = loop.Worker(self.config, topology, "none:1", workdir, "wp-1",
                                      SnapshotPolicy() if snapshots else None)
        tps = [TP(self.topic, p) for p in range(SOURCE_PARTITIONS)]
        specs = topology.topic_specs()
        for t in repartition:
            tps += [TP(t, q) for q in range(specs[t][0])]
        self.worker.assignment.assign(Consumer(), tps, lambda: None)
        self.rp_offsets: dict[tuple[str, int], int] = {}
        self.t = 0

    def batches(self, n: int, batch: int, every: int, start: int = 0) -> list[list[Msg]]:
        """``n`` events of bench_kafka's stream, round-robin over the source partitions,
        with a watermark into each every ``every`` events, in consume batches of
        ``batch``; offsets from ``start``."""
        offs = [start] * SOURCE_PARTITIONS
        msgs = []
        # event time runs on from the events before (else each call restarts at 1 ms)
        base = self.sent if self.event_time else 0
        self.sent += n
        for i in range(n):
            if i % every == every - 1:
                # event time: the newest event's time less 1 ms (the next events wait)
                self.t = (base + i) // 20 if self.event_time else self.t + 1000
                value = b'{"t":%d,"id":"w%d"}' % (self.t, self.t)
                for p in range(SOURCE_PARTITIONS):
                    msgs.append(Msg(self.topic, p, offs[p], value, None, self.t,
                                    [(H_CONTROL, b"watermark")]))
                    offs[p] += 1
            account = b"A%d" % ((i * 7919) % ACCOUNTS[0])
            p = i % SOURCE_PARTITIONS
            value = b'{"account":"%s","amount":%d.0,"sent":%d}' % (account, i % 400, 0)
            msgs.append(Msg(self.topic, p, offs[p], value, account, 1 + (base + i) // 20))
            offs[p] += 1
        # a consume batch holds runs of one partition's records, as librdkafka's fetches
        # hand them over (a batch of 2,000 from 4 partitions: one or two runs)
        return [sorted(msgs[i:i + batch], key=Msg.partition)
                for i in range(0, len(msgs), batch)]

    def step(self, msgs: list[Msg]) -> None:
        """One consume batch (with the bundles the last checkpoint produced) and a
        checkpoint."""
        back = []
        for topic, p, value in self.sink.bundles:
            off = self.rp_offsets.get((topic, p), 0)
            self.rp_offsets[(topic, p)] = off + 1
            back.append(Msg(topic, p, off, value, None, 0))
        self.sink.bundles = []
        w = self.worker
        w.handle(back + msgs)
        w.commit()

    def finish(self) -> None:
        """Consume the last bundles and commit."""
        self.step([])
        while self.sink.bundles:
            self.step([])


def run_job(name: str, job: dict[str, Any], n: int, batch: int, every: int,
            profile: bool, snapshots: bool = False) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        h = Harness(job, Path(tmp), snapshots)
        # every key has its context partition before the timed events (7919 is prime)
        size = max(n // 10, ACCOUNTS[0])
        warm = h.batches(size, batch, min(every, size))
        for b in warm:
            h.step(b)
        h.finish()
        start = sum(len(b) for b in warm)  # past every partition's last offset
        batches = h.batches(n, batch, every, start)
        gc.collect()
        prof = cProfile.Profile() if profile else None
        t0 = time.perf_counter()
        c0 = time.process_time()
        if prof is not None:
            prof.enable()
        for b in batches:
            h.step(b)
        h.finish()
        if prof is not None:
            prof.disable()
        cpu = time.process_time() - c0
        wall = time.perf_counter() - t0
        events = n
        print(f"{name:<36} {events:>8,} ev  {cpu / events * 1e6:>7.2f} µs/ev cpu  "
              f"{wall / events * 1e6:>7.2f} µs/ev wall  rows {h.sink.rows:,}", flush=True)
        if prof is not None:
            st = pstats.Stats(prof)
            stats = st.stats  # type: ignore[attr-defined]
            calls = sum(v[1] for v in stats.values())
            own = sum(v[1] for k, v in stats.items() if k[0] != "~")
            print(f"  calls per event: {calls / events:.1f} ({own / events:.1f} of Python "
                  "functions, the rest built-ins)")
            st.sort_stats(args_sort[0]).print_stats(args_sort[1])
            if args_sort[2]:
                st.print_callers(args_sort[2])
        h.worker.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=loop.CONSUME_BATCH)
    ap.add_argument("--jobs", default="")
    ap.add_argument("--watermark-every", type=int, default=10_000,
                    help="a watermark into every source partition per this many events")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--snapshots", action="store_true",
                    help="snapshots by the default policy, as a kepl worker writes them")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--accounts", type=int, default=ACCOUNTS[0],
                    help="distinct keys (the warm-up gives each its context partition)")
    ap.add_argument("--sort", default="tottime", help="cProfile order (with --profile)")
    ap.add_argument("--callers", default="",
                    help="with --profile, the callers of the functions this pattern matches")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    args_sort[:] = [args.sort, args.top, args.callers]
    ACCOUNTS[0] = args.accounts
    for _ in range(args.repeat):
        for name, job in JOBS.items():
            if args.jobs and not any(name.startswith(j) for j in args.jobs.split(",")):
                continue
            run_job(name, job, args.events, args.batch, args.watermark_every,
                    args.profile, args.snapshots)


if __name__ == "__main__":
    main()

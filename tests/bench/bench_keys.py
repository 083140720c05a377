"""Key-count scaling, state size and restore speed of an engine partition (issue 25).

Run: .venv/bin/python -m tests.bench.bench_keys [--keys 1000000] [--small 1000]
[--events 50000] [--batch 500] [--no-esper]

Each statement runs in an ``EnginePartition`` over its RocksDB store, the Kafka engine's
state path without a broker: a batch of events is applied, sealed into a changelog record,
appended to an in-memory changelog (``TruncLog``, the broker-free log of the checkpoint
tests) and committed to the local database.  It prints:

- per-event cost of a keyed context ``#length(100)`` count/sum, a keyed context
  ``#time(10 sec)`` count/sum and a ``group by`` count/sum (no context) once ``--small``
  and ``--keys`` keys are held, and the ratio (target: within 25%).  The timed events do
  the same work at both sizes: each enters a window that is not full (no removal at
  either size), and a time window has been filled for a whole span, so each event also
  expires about one.  The two sizes are held at once and timed in alternating rounds
  (``measure``).  The cost is the median batch's (the mean is printed beside it).
  Beside it, Esper 9's cost for the same statements and keys in-process through the
  oracle's build (``tests/oracle/bench.py``; left out with a reason where Java is
  absent), which says what the memory of this machine costs an engine at 10^6 keys;
- state bytes per key and per windowed event (the committed database's entries);
- restore of the ``--keys`` partition into an empty directory, in a process of its own
  as a restarted worker restores (the changelog handed over in a file), from the
  changelog alone and from a snapshot (parts written, the records before them deleted),
  in keys/s (goal >= 100k keys/s), the compaction work the restore leaves behind
  (level-0 files and RocksDB's estimate of the bytes pending compaction), and the memory
  the restored partition holds.

Each batch ends as a worker's checkpoint does, with its garbage collector step
(``collector.Collector``).  Times are CPU seconds of the process (RocksDB's background
threads included), so that a loaded machine moves them less than wall-clock time; the
wall-clock rate is printed beside the restore rates.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from app.runtime.kafka.collector import Collector
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import EnginePartition, InRecord, SnapshotPolicy
from app.runtime.kafka.topology import Group, Topology
from tests.app.runtime.kafka.fakes import UP, TruncLog

SCHEMA = {"T": {"symbol": "string", "amount": "double"}}
WINDOW = 100
SPAN_S = 10
MS_PER_EVENT = {f"keyed context, time({SPAN_S} sec) count/sum": 0.1}
"""Event time per event of a timed statement (10,000 events a second: a 10 s window
holds 100,000 events, 100 per key at 10^3 keys); a barrier at each batch's end moves
the time, so windows expire as they fill."""
STATEMENTS: dict[str, list[dict[str, str]]] = {
    f"keyed context, length({WINDOW}) count/sum": [
        {"name": "ctx", "epl": "create context BySymbol partition by symbol from T"},
        {"name": "k", "epl": "context BySymbol select symbol, count(*) as cnt, "
                             f"sum(amount) as total from T#length({WINDOW})"}],
    f"keyed context, time({SPAN_S} sec) count/sum": [
        {"name": "ctx", "epl": "create context BySymbol partition by symbol from T"},
        {"name": "k", "epl": "context BySymbol select symbol, count(*) as cnt, "
                             f"sum(amount) as total from T#time({SPAN_S} sec)"}],
    "group by count/sum, no context": [
        {"name": "g", "epl": "select symbol, count(*) as cnt, sum(amount) as total "
                             "from T group by symbol"}],
}
"""(label, statements) of the measured applications."""


def _clock() -> float:
    """CPU seconds of this process, every thread (RocksDB flushes and compactions too)."""
    return time.process_time()


def group(statements: list[dict[str, str]]) -> Group:
    config = AppConfig.from_dict({"app": "bench", "schemas": SCHEMA,
                                  "statements": statements})
    return Topology.plan(config).groups["main"]


class Run:
    """One engine partition fed in batches, each batch committed through the changelog."""

    def __init__(self, grp: Group, path: Path, batch: int, ms_per_event: float = 0.0
                 ) -> None:
        self.log = TruncLog()
        self.ms_per_event = ms_per_event
        self.events = 0
        self.grp = grp
        self.batch = batch
        self.path = path
        self.part = EnginePartition(grp, 0, path, [UP], "changelog", None)
        self.part.restore(self.log)
        self.collector = Collector()
        """The worker's garbage collector regime: what a checkpoint leaves is frozen out
        of later collections (without it, full collections over the held keys' objects
        made each new key cost about twice as much at 2·10^5 keys)."""
        self.offset = 0
        self.changelog_bytes = 0
        self.left = (0, 0)
        """Level-0 files and bytes pending compaction the last restore left."""
        self.batch_us: list[float] = []
        """CPU µs per event of each batch of the last ``feed``."""

    def feed(self, keys: list[int]) -> float:
        """Apply one event per key (in batches); returns the seconds taken."""
        rnd = random.Random(len(keys) + self.offset)
        part = self.part
        t0 = _clock()
        self.batch_us = []
        for i in range(0, len(keys), self.batch):
            b0 = _clock()
            recs = []
            for k in keys[i:i + self.batch]:
                recs.append(InRecord("event", UP, self.offset, "T", 0, self.offset,
                                     {"symbol": f"S{k}", "amount": float(rnd.randrange(400))}))
                self.offset += 1
                self.events += 1
            if self.ms_per_event:
                t = int(self.events * self.ms_per_event)
                recs.append(InRecord("barrier", UP, self.offset, payload={
                    "t": t, "id": str(self.offset)}))
                self.offset += 1
            part.run(recs)
            rec = part.seal()
            if rec is None:
                continue
            value = rec.encode()
            self.changelog_bytes += len(value)
            part.committed(self.log.append(value), len(value))
            self.collector.checkpointed(time.monotonic())
            self.batch_us.append((_clock() - b0) / len(keys[i:i + self.batch]) * 1e6)
        return _clock() - t0

    def state_bytes(self) -> int:
        return sum(len(k) + len(v) for k, v in self.part.store.state_items())

    def snapshot(self) -> int:
        """Write a whole snapshot to the changelog and delete the records before it;
        returns the snapshot's bytes."""
        part = self.part
        part.start_snapshot()
        first = None
        size = 0
        while first is None:
            value = part.snapshot_part().encode()
            size += len(value)
            first = part.snapshot_part_committed(self.log.append(value))
        self.log.delete_before(first)
        return size

    def restore_into(self, path: Path) -> tuple[float, float]:
        """CPU and wall seconds to rebuild the partition in the empty directory ``path``
        from the changelog.  The partition it rebuilds is closed and removed first, as a
        restarted worker holds none of it; the rebuilt one takes its place."""
        self._drop()
        w0 = time.perf_counter()
        t0 = _clock()
        fresh = EnginePartition(self.grp, 0, path, [UP], "changelog", SnapshotPolicy())
        fresh.restore(self.log)
        dt = _clock() - t0
        wall = time.perf_counter() - w0
        db = fresh.store.base
        self.left = (int(db.property_value("rocksdb.num-files-at-level0")),
                     int(db.property_value("rocksdb.estimate-pending-compaction-bytes")))
        self.part, self.path = fresh, path
        return dt, wall

    def restore_memory(self, path: Path) -> tuple[int, int]:
        """Python heap bytes a restore allocates at its peak and the restored partition
        still holds (traced: RocksDB's own memory is not counted); as ``restore_into``,
        the rebuilt partition takes the place of the one before."""
        self._drop()
        tracemalloc.start()
        fresh = EnginePartition(self.grp, 0, path, [UP], "changelog", SnapshotPolicy())
        fresh.restore(self.log)
        gc.collect()
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        self.part, self.path = fresh, path
        return peak, held

    def _drop(self) -> None:
        """Close and remove the partition, its objects collected: only the changelog is
        left."""
        self.close()
        del self.part
        gc.collect()

    def close(self) -> None:
        self.part.close()
        shutil.rmtree(self.path, ignore_errors=True)


ROUNDS = 10
"""Rounds of timed events, the two sizes alternating (see ``measure``)."""


def _filled(label: str, statements: list[dict[str, str]], keys: int, batch: int,
            tmp: Path) -> tuple[Run, float, int]:
    """A partition holding ``keys`` keys (one event each; a time window for a whole
    span), the CPU seconds the fill took and its events."""
    run = Run(group(statements), tmp / f"db-{keys}", batch, MS_PER_EVENT.get(label, 0.0))
    fill = fill_keys(label, keys)
    return run, run.feed(fill), len(fill)


def fill_keys(label: str, keys: int) -> list[int]:
    """The keys of the events that fill a partition before it is timed: the same work per
    timed event at both sizes.  A length window gets one event per key (full windows at
    10^3 keys only would time a removal there alone); a time window is filled for a whole
    span, so expiries are timed at both sizes."""
    fill = list(range(keys))
    random.Random(2).shuffle(fill)
    ms = MS_PER_EVENT.get(label, 0.0)
    if ms:
        fill = fill * -(-int(SPAN_S * 1000 / ms) // keys)
    return fill


def probe_keys(sizes: tuple[int, ...], events: int) -> list[list[int]]:
    """The timed events' keys at each size, drawn at random over its keys."""
    rnd = random.Random(3)
    return [[rnd.randrange(keys) for _ in range(events)] for keys in sizes]


ESPER_WARM = 25_000
"""Events at least before Esper's timed ones (its statements are compiled to new classes
in each run, which the JIT compiles as they warm); at 10^3 keys a length window then
holds 25 events, and about 50 more by the end of the timed events: still none removed."""


def esper_costs(label: str, statements: list[dict[str, str]], sizes: tuple[int, int],
                events: int, batch: int) -> list[tuple[float, float]] | str:
    """Esper 9's CPU µs per event for the same statements at each key count, and the
    collectors' µs of it, filled and probed with the same keys (``fill_keys``,
    ``probe_keys``) and, for a time window, the same clock (a tick after each ``batch``
    events); or why it was not measured."""
    from tests.oracle.bench import EsperCase, esper_runs, unavailable

    why = unavailable()
    if why is not None:
        return why
    ms = MS_PER_EVENT.get(label, 0.0)
    cases = []
    for keys, probes in zip(sizes, probe_keys(sizes, events), strict=True):
        fill = fill_keys(label, keys)
        if len(fill) < ESPER_WARM:
            fill = fill * -(-ESPER_WARM // len(fill))
        stream: list[dict] = []
        for i, k in enumerate(fill + probes):
            event: dict = {"symbol": f"S{k}", "amount": float(k % 400)}
            if ms:
                event["@type"] = "T"
            stream.append(event)
            if ms and (i + 1) % batch == 0:
                stream.append({"@time": int((i + 1) * ms)})
        cut = len(fill) + (len(fill) // batch if ms else 0)
        # a run at 10^6 keys takes minutes (Esper allocates its context partitions at
        # about 5,000 a second): one run there, ten at 10^3 keys, and the median of each
        cases.append(EsperCase(tuple(st["epl"] for st in statements), "" if ms else "T",
                               stream[cut:], tuple(stream[:cut]),
                               repeat=max(1, min(10, 200_000 // keys))))
    out = []
    for run in esper_runs(SCHEMA, cases, heap="8g"):
        if isinstance(run, str):
            return run
        out.append((1e6 / statistics.median(run["rates"]),
                    statistics.median(run["gc"]) / events * 1e6))
    return out


def measure(label: str, statements: list[dict[str, str]], sizes: tuple[int, int],
            events: int, batch: int, tmp: Path, restore: bool, memory: bool = True
            ) -> list[dict[str, float]]:
    """Fill a partition of each of the two ``sizes`` (key counts), then time ``events``
    events over random keys of each, in ``ROUNDS`` rounds that alternate the sizes, so
    that both see the same machine (a shared machine's speed moved the figures of
    separate runs by half).  The first batch of each round is not counted: it finds
    the small partition's state out of the cache, where the other size's round left it.
    The restores are of the larger partition."""
    filled = [_filled(label, statements, keys, batch, tmp) for keys in sizes]
    probes = probe_keys(sizes, events)
    gc.collect()
    step = -(-events // ROUNDS)
    timed: list[list[float]] = [[] for _ in sizes]
    seconds = [0.0 for _ in sizes]
    for i in range(0, events, step):
        for n, (run, _, _) in enumerate(filled):
            seconds[n] += run.feed(probes[n][i:i + step])
            timed[n].extend(run.batch_us[1:])
    outs = []
    for n, (run, fill_s, fill_len) in enumerate(filled):
        keys = sizes[n]
        ms = MS_PER_EVENT.get(label, 0.0)
        total_events = fill_len + events
        held = (min(total_events, keys * WINDOW) if "length" in label
                else min(total_events, int(SPAN_S * 1000 / ms)) if ms else 0)
        state = run.state_bytes()
        # the median batch: a batch that another process or a RocksDB flush slowed down
        # does not move it (the mean of 50,000 events moved by a third from run to run)
        outs.append({"keys": keys, "us": statistics.median(timed[n]),
                     "mean_us": seconds[n] / events * 1e6,
                     "fill_us": fill_s / fill_len * 1e6,
                     "state": state, "per_key": state / keys,
                     "per_event": state / held if held else 0.0,
                     "changelog_per_event": run.changelog_bytes / total_events})
    small, large = filled[0][0], filled[1][0]
    small.close()
    large.close()
    if restore:
        saved = tmp / "changelog.bin"
        with saved.open("wb") as f:
            for offset in range(large.log.low, large.log.high):
                value = large.log.records[offset]
                f.write(len(value).to_bytes(8, "little") + value)
        del filled, small, large
        gc.collect()
        outs[1].update(restores_apart(label, saved, tmp / "restores", memory))
        saved.unlink()
    return outs


def restores_apart(label: str, saved: Path, tmp: Path, memory: bool) -> dict[str, Any]:
    """``restores`` in a process of its own, as a restarted worker restores: the filled
    partitions' objects and heap of this process do not weigh on it (in this process the
    keyed ``#time`` changelog restore took about a fifth more CPU)."""
    cmd = [sys.executable, "-m", "tests.bench.bench_keys", "--restore-from", str(saved),
           "--label", label, "--tmp", str(tmp)] + ([] if memory else ["--no-memory"])
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    if proc.returncode != 0:
        raise SystemExit(f"bench_keys: the restore process failed: {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return result


def restores(label: str, saved: Path, tmp: Path, memory: bool) -> dict[str, Any]:
    """Restore a partition of ``label`` from the changelog saved at ``saved`` (length-
    prefixed records), write a snapshot from it, restore from the snapshot, and (with
    ``memory``) once more traced."""
    run = Run(group(STATEMENTS[label]), tmp / "empty", 500)
    log = run.log
    data = saved.read_bytes()
    at = 0
    while at < len(data):
        n = int.from_bytes(data[at:at + 8], "little")
        log.append(data[at + 8:at + 8 + n])
        at += 8 + n
    del data
    out: dict[str, Any] = {}
    out["restore_changelog_s"], out["restore_changelog_wall"] = run.restore_into(tmp / "r1")
    out["restore_changelog_left"] = run.left
    out["snapshot_bytes"] = run.snapshot()
    out["restore_snapshot_s"], out["restore_snapshot_wall"] = run.restore_into(tmp / "r2")
    out["restore_snapshot_left"] = run.left
    if memory:
        out["restore_peak"], out["restore_held"] = run.restore_memory(tmp / "r3")
    run.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000, help="the large key count")
    ap.add_argument("--small", type=int, default=1000, help="the small key count")
    ap.add_argument("--events", type=int, default=50_000, help="events timed per size")
    ap.add_argument("--batch", type=int, default=500, help="events per committed batch")
    ap.add_argument("--no-restore", action="store_true",
                    help="skip the restores (minutes at 10^6 keys): per-event cost only")
    ap.add_argument("--no-memory", action="store_true",
                    help="skip the traced restore that measures its memory")
    ap.add_argument("--no-esper", action="store_true",
                    help="leave out Esper 9 at the same key counts (minutes at 10^6 keys)")
    ap.add_argument("--only", default="",
                    help="the statements whose label starts with this (e.g. 'keyed context, time')")
    ap.add_argument("--restore-from", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--label", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.restore_from is not None:
        print(json.dumps(restores(args.label, args.restore_from, args.tmp,
                                  not args.no_memory)))
        return
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"{os.getloadavg()[2]:.2f}; {os.cpu_count()} cores; RocksDB-backed engine "
          f"partition, batches of {args.batch}, {args.events:,} events timed per size; "
          "CPU time of the process")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for label, statements in STATEMENTS.items():
            if not label.startswith(args.only):
                continue
            small, large = measure(label, statements, (args.small, args.keys), args.events,
                                   args.batch, tmp, not args.no_restore, not args.no_memory)
            ratio = large["us"] / small["us"]
            print(f"\n{label}")
            for r in (small, large):
                per_event = (f", {r['per_event']:,.0f} B per windowed event"
                             if r["per_event"] else "")
                print(f"  {r['keys']:>9,} keys: {r['us']:6.1f} us/event, median batch "
                      f"(mean {r['mean_us']:.1f}; fill {r['fill_us']:.1f} us/event); "
                      f"state {r['state'] / 1e6:,.1f} MB = {r['per_key']:,.0f} B per key"
                      f"{per_event}; changelog {r['changelog_per_event']:,.0f} B per event")
            verdict = "meets" if ratio <= 1.25 else "MISSES"
            print(f"  cost ratio {args.keys:,} / {args.small:,} keys: {ratio:.2f}x "
                  f"({verdict} the target <= 1.25x)")
            esper = ("--no-esper" if args.no_esper else
                     esper_costs(label, statements, (args.small, args.keys), args.events,
                                 args.batch))
            if isinstance(esper, str):
                print(f"  Esper 9: not measured ({esper})")
            else:
                (small_us, small_gc), (large_us, large_gc) = esper
                print(f"  Esper 9, the same events in-process (CPU of the sending thread "
                      f"and the collectors, median run): {args.small:,} keys "
                      f"{small_us:.2f} us/event (collectors {small_gc:.2f}), "
                      f"{args.keys:,} keys {large_us:.2f} us/event (collectors "
                      f"{large_gc:.2f}), ratio {large_us / small_us:.2f}x")
            keys = args.keys
            for how in ("changelog", "snapshot") if not args.no_restore else ():
                s = large[f"restore_{how}_s"]
                rate = keys / s
                verdict = "meets" if rate >= 100_000 else "MISSES"
                extra = (f", snapshot {large['snapshot_bytes'] / 1e6:,.1f} MB"
                         if how == "snapshot" else "")
                wall = large[f"restore_{how}_wall"]
                print(f"  restore {keys:,} keys from the {how}: {s:.2f} s = "
                      f"{rate:,.0f} keys/s (wall {keys / wall:,.0f} keys/s){extra} "
                      f"({verdict} the goal >= 100k keys/s); left to compact: "
                      f"{large[f'restore_{how}_left'][0]} level-0 files, "
                      f"{large[f'restore_{how}_left'][1] / 1e6:,.1f} MB")
            if "restore_held" in large:
                print(f"  memory of the restore from the snapshot (Python heap): peak "
                      f"{large['restore_peak'] / 1e6:,.0f} MB, the restored partition "
                      f"holds {large['restore_held'] / 1e6:,.0f} MB = "
                      f"{large['restore_held'] / keys:,.0f} B per key")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"\npeak resident memory of the run {peak / 1e9:.1f} GB; load average "
          f"{os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()

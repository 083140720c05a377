"""The worker's consumer loop: one consumer, one producer, one thread.

An event's trip through a worker (ARCHITECTURE.md, The Kafka runtime's rooms)::

    consume(N) ─► source record ─┬─► lanes (stateless statements, in place)
                                 ├─► direct engine partitions (partition p of the source)
                                 └─► routing ─► repartition topic ─► engine partitions
    every commit interval: checkpoint (``checkpoint.Checkpoint``): rows, changelog
    records, repartition bundles, progress and input offsets in one transaction, then
    each engine partition's RocksDB batch with its changelog offset

``Worker.run`` batch-consumes with confluent-kafka (``consume(num_messages=N)``, every
message's ``error()`` checked), decodes each source record once, and hands it to the
rooms that want it.  Engine partitions keep waiting events in memory; the offset
committed for an input partition is the oldest record still waited on (``hold``), so
a restarted worker reads those again.  Lanes and routing remember the last offset they
handled in the committed offset's metadata (``LaneCursor``) and skip what they did.

Assignment is eager ``range``: partition p of co-partitioned topics (a direct group's
source topics) lands on the same worker.  On assignment a worker restores the engine
partitions it gained (``EnginePartition.restore``: local RocksDB, then the changelog
tail); on revocation it commits first; on a lost assignment it aborts.  Static group
membership and a transactional id both derive from the data directory: a worker
restarted after a crash takes its partitions back at once and fences its previous self.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.runtime.kafka import client, codec
from app.runtime.kafka.checkpoint import KAFKA_LOG, Checkpoint, Fenced, Rewind
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.health import DEFAULT_STALL_S, STALL_ENV, Health, Metrics, serve
from app.runtime.kafka.lanes import Lane, LaneCursor
from app.runtime.kafka.partition import EnginePartition, InRecord, Poisoned, SnapshotPolicy
from app.runtime.kafka.recovery import KafkaChangelog
from app.runtime.kafka.router import (
    H_CONTROL,
    H_ERROR,
    H_ID,
    H_NONFINITE,
    H_SEQ,
    H_SOURCE,
    H_STREAM,
    H_TIME,
    H_TYPE,
    KNOWN_HEADERS,
    Entry,
    Routing,
    barrier_entry,
    dead_letter_headers,
    decode_bundle,
    decode_seq,
    decode_watermark,
    encode_bundles,
)
from app.runtime.kafka.topology import LANES, STATEMENT_KINDS, Group, Topology

log = logging.getLogger("kepl.worker")

CRASH_HOOK_ENV = "KEPL_TEST_CRASH"
"""Fault injection for crash tests: ``point:n`` SIGKILLs the worker at ``point`` of the
n-th checkpoint that writes changelog records (``before_flush``: before the transaction
commits; ``after_flush``: after it committed, before the local databases are written),
or ``mid_snapshot`` (the n-th transaction of snapshot parts that is not the last of its
snapshot is sent, before it commits)."""
COMMIT_INTERVAL_ENV = "KEPL_COMMIT_INTERVAL_MS"
DEFAULT_COMMIT_INTERVAL_MS = 100
"""A checkpoint at least this often while input keeps coming (Kafka Streams' EOS value)."""
CAUGHT_UP_COMMIT_MS = 20
"""Once a consume call drained what was there, a checkpoint after this long already:
rows become visible soon at moderate load, and a backlog still commits per interval."""
CONSUME_BATCH = 2000
CONSUME_TIMEOUT_S = 0.01
MAX_CHECKPOINT_RECORDS = 50_000
"""Input records per checkpoint at most (bounds a changelog record)."""
EXIT_FENCED = 3
EXIT_LOST_INPUT = 4
EXIT_SHUTDOWN_TIMEOUT = 5
SHUTDOWN_ENV = "KEPL_SHUTDOWN_TIMEOUT_S"
DEFAULT_SHUTDOWN_S = 10.0
"""After SIGTERM/SIGINT a worker commits and leaves within this long, or exits without
the last commit (the next worker reads from the one before); a second signal exits at
once."""
GC_FULL_ENV = "KEPL_GC_FULL_S"
DEFAULT_GC_FULL_S = 600.0
"""After every checkpoint the objects alive are frozen out of the cyclic collector, so
its collections scan only what the last ~100 ms allocated (a full collection over a
worker's state took 40-300 ms here, and found nothing: the state holds no cycles).  A
full collection still runs this often, for cyclic garbage among frozen objects."""
WATCH_EVERY_S = 1.0
DEAD_LOG_PER_S = 5
LAG_EVERY_S = 5.0
CRASH_EXIT_CODE = 70

_W = b"watermark"
_FATAL = -150  # librdkafka RD_KAFKA_RESP_ERR__FATAL (static member fenced, and the like)
_REMOVE = (H_STREAM, b"remove")


def _tp(name: str) -> tuple[str, int]:
    topic, _, p = name.rpartition(":")
    return topic, int(p)


class Interrupted(Exception):
    """A stop was requested while a long step (a restore) ran: leave it unfinished."""


class ShutdownWatch:
    """Bounds a worker process's shutdown.  The first SIGTERM/SIGINT asks the loop to stop
    (before a loop runs, the process exits at once: nothing to commit); if the process is
    still here ``KEPL_SHUTDOWN_TIMEOUT_S`` later (a commit or a close waiting on an
    unreachable broker), or at a second signal, it exits.

    A thread woken through ``signal.set_wakeup_fd`` watches, because Python runs a signal
    handler only once the main thread is back from a blocking client call."""

    def __init__(self) -> None:
        self.worker: Worker | None = None
        self.installed = False

    def install(self) -> None:
        """Take SIGTERM and SIGINT (main thread only; elsewhere they are the embedding
        program's).  Idempotent."""
        import socket
        import threading

        if self.installed or threading.current_thread() is not threading.main_thread():
            return
        given = os.environ.get(SHUTDOWN_ENV, "").strip()
        self.timeout_s = float(given) if given else DEFAULT_SHUTDOWN_S
        r, w = socket.socketpair()
        w.setblocking(False)
        self._sockets = (r, w)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _ignore)  # the thread acts; this only wakes it
        signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch, args=(r,), name="kepl-shutdown",
                         daemon=True).start()
        self.installed = True

    def _watch(self, r: Any) -> None:
        import select

        signals = 0
        deadline = None
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([r], [], [], wait)
            if ready:
                got = r.recv(64)
                if not got:
                    return
                signals += len(got)
                worker = self.worker
                if worker is None:
                    log.warning("stopped before the consumer loop started")
                    sys.stderr.flush()
                    os._exit(0)
                worker.stopping = True
                if deadline is None:
                    deadline = time.monotonic() + self.timeout_s
            if signals >= 2:
                log.warning("second signal: exiting now, without the last commit")
            elif deadline is not None and time.monotonic() >= deadline:
                log.warning("shutdown took longer than %.0f s: exiting without the last "
                            "commit (the next worker continues from the one before)",
                            self.timeout_s)
            else:
                continue
            sys.stderr.flush()
            os._exit(EXIT_SHUTDOWN_TIMEOUT)


def _ignore(*_: Any) -> None:
    pass


SHUTDOWN = ShutdownWatch()
"""The process's one shutdown watch: ``python -m app.runtime.kafka.worker`` installs it
first thing, ``Worker.run`` attaches to it."""


class Worker:
    """A consumer-group member of one app (see module docstring)."""

    def __init__(self, config: AppConfig, topology: Topology, bootstrap: str,
                 data_dir: Path, identity: str,
                 snapshots: SnapshotPolicy | None = None,
                 metrics_port: int | None = None) -> None:
        """``metrics_port``: serve /metrics, /healthz and /readyz there (None: off)."""
        from confluent_kafka import Consumer

        self.config = config
        self.topology = topology
        self.catalog = topology.catalog
        self.bootstrap = bootstrap
        self.data_dir = Path(data_dir)
        self.snapshots = snapshots
        self.changelog = KafkaChangelog(bootstrap)
        interval = os.environ.get(COMMIT_INTERVAL_ENV, "").strip()
        self.interval_s = (int(interval) if interval else DEFAULT_COMMIT_INTERVAL_MS) / 1000
        self.caught_up_s = min(self.interval_s, CAUGHT_UP_COMMIT_MS / 1000)
        eos = config.processing_guarantee == "exactly_once"
        self.checkpoint = Checkpoint(bootstrap, identity if eos else None)
        self.consumer = Consumer(client.conf({
            "bootstrap.servers": bootstrap,
            "group.id": f"kepl.{config.app}",
            "group.instance.id": identity,
            "partition.assignment.strategy": "range",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 1_000,
            "max.poll.interval.ms": 300_000,
            "fetch.wait.max.ms": 20,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "queued.max.messages.kbytes": 262_144,
            "log_level": 3,
            "logger": KAFKA_LOG,
        }))
        cfg = config
        self.out_topics = {s: cfg.output_topic(s) for g in topology.active_groups()
                           for s in g.statements}
        self.out_topics.update({p.name: cfg.output_topic(p.name) for p in topology.lanes})
        self.out_parts = {s: n for s, (_, n) in topology.output_topics().items()}
        self.row_meta = {s: (self.out_topics[s], self.out_parts[s], s.encode())
                         for s in self.out_topics}
        self.routed = topology.routed_groups()
        self.repartition = {cfg.repartition_topic(g.name): g for g in self.routed}
        self.direct = [g for g in topology.active_groups() if g.direct]
        self.sources = set(cfg.source_topics)
        self.all_upstreams = topology.source_upstreams()
        self.routing = Routing(topology)
        declarations = [p for p in topology.plans
                        if p.kind not in STATEMENT_KINDS and p.kind != "context"
                        and p.context is None]
        self.lane_plans: dict[str, list[Any]] = {}
        for p in topology.lanes:
            topic = cfg.topic_of(p.pipeline.stream.type_name)
            self.lane_plans.setdefault(topic, list(declarations)).append(p)
        self.routes = {t: self.routing.routes(t) for t in cfg.source_topics}
        self.upstream_names: dict[tuple[str, int], str] = {}
        self.direct_of: dict[str, list[Group]] = {
            t: [g for g in self.direct if t in g.topics] for t in cfg.source_topics}
        # state of the current assignment
        self.cursors: dict[tuple[str, int], LaneCursor] = {}
        self.committed_cursors: dict[tuple[str, int], LaneCursor] = {}
        self.lanes: dict[tuple[str, int], Lane] = {}
        self.parts: dict[tuple[str, int], EnginePartition] = {}
        self.positions: dict[tuple[str, int], int] = {}
        self.committed: dict[tuple[str, int], int] = {}
        self.bundles: dict[tuple[str, int], list[Entry]] = {}
        self.pending: dict[tuple[str, int], list[InRecord]] = {}
        self.progress_due: set[tuple[str, int]] = set()
        self.poison: dict[tuple[str, int], str] = {}
        """(upstream, offset) -> reason: source records that failed inside a statement of
        an engine partition fed directly; every room skips them (``_poisoned``)."""
        self.lane_progress: set[tuple[str, int]] = set()
        self.stopping = False
        self.since_commit = 0
        self.last_commit = time.monotonic()
        hook = os.environ.get(CRASH_HOOK_ENV, "")
        self._crash_at = (hook.split(":")[0], int(hook.split(":")[1])) if ":" in hook else None
        self._crash_count = 0
        self._callback_error: BaseException | None = None
        self.stats = {"events": 0, "checkpoints": 0, "dead": 0, "changelog_bytes": 0}
        self.rows_out: dict[str, int] = {}
        self.health = Health()
        self.metrics_port = metrics_port
        self.metrics = Metrics(config.app) if metrics_port is not None else None
        self.http: Any = None
        stall = os.environ.get(STALL_ENV, "").strip()
        self.stall_s = float(stall) if stall else DEFAULT_STALL_S
        self._waits: dict[tuple[str, int], tuple[tuple[str, int], float]] = {}
        self._last_watch = self._last_consumed = time.monotonic()
        self._last_lag = 0.0
        self._last_stall_log = 0.0
        gc_full = os.environ.get(GC_FULL_ENV, "").strip()
        self.gc_full_s = float(gc_full) if gc_full else DEFAULT_GC_FULL_S
        self._last_full_gc = time.monotonic()
        self._dead_window = 0.0
        self._dead_lines = self._dead_quiet = 0

    # -- life cycle ------------------------------------------------------------------
    def run(self) -> None:
        """Consume until SIGTERM/SIGINT; checkpoint on the way out."""
        topics = sorted(self.sources | set(self.repartition))
        self.consumer.subscribe(topics, on_assign=self._guarded(self._on_assign),
                                on_revoke=self._guarded(self._on_revoke),
                                on_lost=self._guarded(self._on_lost))
        SHUTDOWN.install()
        SHUTDOWN.worker = self
        if self.metrics is not None and self.metrics_port is not None:
            self.http = serve(self.metrics_port, self.health, self.metrics)
            log.info("metrics and probes on port %d (/metrics, /healthz, /readyz)",
                     self.http.server_address[1])
        try:
            while not self.stopping:
                self.step()
            self.commit()
        except Interrupted:
            log.warning("stopped while restoring: the next worker restores again")
        except Fenced as e:
            log.critical("worker stops: %s (another worker owns its partitions now)", e)
            sys.stderr.flush()
            os._exit(EXIT_FENCED)
        finally:
            self.close()

    def _guarded(self, callback: Callable[[Any, list[Any]], None]
                 ) -> Callable[[Any, list[Any]], None]:
        """A rebalance callback whose exception surfaces after ``consume`` returns
        (librdkafka calls it from inside ``consume``, where it cannot propagate)."""
        def run(consumer: Any, tps: list[Any]) -> None:
            try:
                callback(consumer, tps)
            except BaseException as e:  # noqa: BLE001 - re-raised by step()
                self._callback_error = e
        return run

    def close(self) -> None:
        if self.http is not None:
            self.http.shutdown()
        try:
            self.consumer.close()
        except Exception:  # noqa: BLE001 - going down
            pass
        self.checkpoint.close()
        for part in self.parts.values():
            part.discard()
            part.close()
        self.parts.clear()

    def step(self) -> None:
        """One consume batch, then a checkpoint when one is due."""
        msgs = self.consumer.consume(CONSUME_BATCH, CONSUME_TIMEOUT_S)
        if self._callback_error is not None:
            err, self._callback_error = self._callback_error, None
            raise err
        now = time.monotonic()
        self.health.last_loop = now
        if msgs:
            self._last_consumed = now
            self.handle(msgs)
        if now - self._last_watch >= WATCH_EVERY_S:
            self._watch(now)
        self.checkpoint.poll()
        if not (self.checkpoint.open or self.progress_due or self.lane_progress
                or self._dirty_offsets()):
            return
        elapsed = time.monotonic() - self.last_commit
        if (elapsed >= self.interval_s or self.since_commit >= MAX_CHECKPOINT_RECORDS
                or (len(msgs) < CONSUME_BATCH and elapsed >= self.caught_up_s)):
            self.commit()

    def _dirty_offsets(self) -> bool:
        return any(self.positions.get(k) != self.committed.get(k) for k in self.positions)

    # -- records -------------------------------------------------------------------
    def handle(self, msgs: list[Any]) -> None:
        """Dispatch one consume batch to the rooms."""
        sources = self.sources
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.fatal() or err.code() == _FATAL:
                    raise Fenced(f"consumer: {err.str()}")
                log.warning("consumer: %s", err.str())
                continue
            topic = m.topic()
            if topic in sources:
                self._source(m, topic)
            else:
                self._repartitioned(m, topic)
        self.since_commit += len(msgs)
        self._flush_stage()

    def _flush_stage(self) -> None:
        """Hand batched records to the engine partitions, bundles to the producer."""
        try:
            for key, recs in self.pending.items():
                part = self.parts.get(key)
                if part is not None:
                    part.run(recs)
        except Poisoned as e:
            self._poisoned(e)
            return
        self.pending.clear()
        for (topic, p), entries in self.bundles.items():
            for value in encode_bundles(entries):
                self.checkpoint.produce(topic, value, p)
        self.bundles.clear()

    def _source(self, m: Any, topic: str) -> None:
        p = m.partition()
        off = m.offset()
        key = (topic, p)
        expected = self.positions.get(key)
        self.positions[key] = off + 1
        cur = self.cursors.get(key)
        if cur is None:  # not (yet) ours
            return
        if expected is not None and off > expected:
            self._gap(key, expected, off)
        fresh = off > cur.applied
        upstream = self.upstream_names.get(key) or self.upstream_names.setdefault(
            key, f"{topic}:{p}")
        if self.poison and (upstream, off) in self.poison:
            # it failed inside a statement: every room skips it (see ``_poisoned``)
            if fresh:
                self._dead_letter(m, self.poison[(upstream, off)])
                cur.applied = off
            return
        control = type_hdr = seq = None
        headers = m.headers()
        if headers:
            bad = None
            for k, v in headers:
                if k == H_CONTROL:
                    control = v if v is not None else b""
                elif k == H_TYPE:
                    type_hdr = v
                elif k == H_SEQ:
                    seq = v
                elif k.startswith("kepl.") and k not in KNOWN_HEADERS:
                    bad = f"unknown header {k!r} (kepl.* headers are kepl's own)"
            if bad is None and control is not None and control != _W:
                bad = (f"unknown {H_CONTROL} {control[:40].decode(errors='replace')!r} "
                       "(known: watermark)")
            if bad is None and seq is not None:
                try:
                    seq = decode_seq(seq)
                except ValueError as e:
                    bad = str(e)
            if bad is not None:
                if fresh:
                    self._dead_letter(m, bad)
                    cur.applied = off
                return
        if control == _W:
            self._barrier(m, topic, p, upstream, off, fresh, cur)
            return
        direct = self.direct_of[topic]
        if not fresh and not direct:
            return
        try:
            type_name, event = self.routing.decode(topic, type_hdr, m.value())
            targets = (self.routing.targets(topic, type_name, event)
                       if fresh and self.routes[topic] else None)
        except Exception as e:  # noqa: BLE001 - anything a record can trigger is a dead letter
            if fresh:
                self._dead_letter(m, str(e) or type(e).__name__)
                cur.applied = off
            return
        self.stats["events"] += 1
        if fresh:
            lane = self.lanes.get(key)
            if lane is not None and type_name in lane.types:
                try:
                    lane.send(type_name, event)
                except Exception as e:  # noqa: BLE001 - a statement failing on one event
                    # nothing of it went anywhere yet: the lane emits all rows or none
                    self._dead_letter(m, f"engine error: {type(e).__name__}: {e}")
                    cur.applied = off
                    return
            if targets:
                self.routing.forward(self.bundles, cur, topic, type_name, event, upstream,
                                     off, m.timestamp()[1], seq, targets)
            cur.applied = off
        for g in direct:
            if type_name in g.types:
                self.pending.setdefault((g.name, p), []).append(
                    InRecord("event", upstream, off, type_name, m.timestamp()[1],
                             seq, event, b"", upstream, off))

    def _barrier(self, m: Any, topic: str, p: int, upstream: str, off: int, fresh: bool,
                 cur: LaneCursor) -> None:
        try:
            t, wid = decode_watermark(m.value())
        except ValueError as e:
            if fresh:
                self._dead_letter(m, str(e))
                cur.applied = off
            return
        payload = {"t": t, "id": wid}
        if fresh:
            lane = self.lanes.get((topic, p))
            if lane is not None:
                lane.advance(t, wid)
                self.lane_progress.add((topic, p))
            else:
                cur.now, cur.barrier = max(cur.now, t), wid
            if self.routing.barrier_targets:
                entry = barrier_entry(upstream, off, t, wid)
                for target in self.routing.barrier_targets:
                    self.bundles.setdefault(target, []).append(entry)
            cur.applied = off
        for g in self.direct_of[topic]:
            self.pending.setdefault((g.name, p), []).append(
                InRecord("barrier", upstream, off, "", 0, None, payload, b"", upstream, off))

    def _repartitioned(self, m: Any, topic: str) -> None:
        g = self.repartition.get(topic)
        if g is None:
            return
        p = m.partition()
        off = m.offset()
        self.positions[(topic, p)] = off + 1
        self.pending.setdefault((g.name, p), []).extend(
            decode_bundle(m.value(), f"{topic}:{p}", off))

    def _poisoned(self, e: Poisoned) -> None:
        """A source record failed inside a statement of a direct engine partition, after
        lanes, routing and other partitions took it: back to the last commit, and from
        there on every room skips it and it goes to the dead-letter topic instead, so
        no statement keeps any of its effect."""
        self.poison[(e.record.upstream, e.record.offset)] = e.reason
        log.warning("%s offset %d failed in a statement (%s): rewinding to the last commit "
                    "to dead-letter it", e.record.upstream, e.record.offset, e.reason)
        self.rewind()

    def _gap(self, key: tuple[str, int], expected: int, off: int) -> None:
        """The next record read lies past the one expected: offsets a transaction marker
        or an aborted transaction took, or records deleted before they were read."""
        from confluent_kafka import TopicPartition

        try:
            low, _ = self.consumer.get_watermark_offsets(
                TopicPartition(key[0], key[1]), timeout=1.0, cached=True)
        except Exception:  # noqa: BLE001 - unknown yet: the next gap asks again
            return
        if expected < low:
            self._lost_input(key, expected, min(low, off))

    def _log_start(self, key: tuple[str, int]) -> int | None:
        """The first offset still in a partition's log (None if the broker did not say)."""
        from confluent_kafka import TopicPartition

        try:
            low, _ = self.consumer.get_watermark_offsets(
                TopicPartition(key[0], key[1]), timeout=5.0, cached=False)
        except Exception:  # noqa: BLE001 - then a gap in the offsets read tells
            return None
        return low

    def _lost_input(self, key: tuple[str, int], expected: int, start: int) -> None:
        """Records ``expected``..``start - 1`` of a source partition were deleted (retention,
        DeleteRecords, a truncated topic) before this app read them: say so once, count
        them, and go on from ``start`` unless the app's policy stops the worker."""
        lost = start - expected
        self.stats["lost"] = self.stats.get("lost", 0) + lost
        cur = self.cursors.get(key)
        if cur is not None:
            cur.lost += lost
        if self.metrics is not None:
            self.metrics.add_lost(f"{key[0]}[{key[1]}]", lost)
        where = f"{key[0]}[{key[1]}]"
        if self.config.on_lost_input == "stop":
            log.critical("input lost: %s offsets %d..%d (%d record(s)) were deleted before "
                         "they were read; on_lost_input: stop", where, expected, start - 1,
                         lost)
            sys.stderr.flush()
            os._exit(EXIT_LOST_INPUT)
        log.error("input lost: %s offsets %d..%d (%d record(s)) were deleted before they "
                  "were read (retention or DeleteRecords); continuing from offset %d",
                  where, expected, start - 1, lost, start)

    def _dead_letter(self, m: Any, reason: str) -> None:
        self.stats["dead"] += 1
        self._dead_log(f"{m.topic()}/{m.partition()}/{m.offset()}", reason)
        headers = dead_letter_headers(m.headers(), reason, m.topic(), m.partition(),
                                      m.offset())
        self.checkpoint.produce(self.config.dlq_topic, m.value() or b"", 0, headers)

    def _dead_log(self, where: str, reason: str) -> None:
        """One warning per dead letter, at most ``DEAD_LOG_PER_S`` a second; the rest are
        counted and summed up in the next line."""
        now = time.monotonic()
        if now - self._dead_window >= 1.0:
            if self._dead_quiet:
                log.warning("%d more dead letter(s) to %s in the last second",
                            self._dead_quiet, self.config.dlq_topic)
            self._dead_window, self._dead_lines, self._dead_quiet = now, 0, 0
        if not where:
            return
        if self._dead_lines < DEAD_LOG_PER_S:
            self._dead_lines += 1
            log.warning("dead letter %s to %s: %s", where, self.config.dlq_topic, reason)
        else:
            self._dead_quiet += 1

    # -- output --------------------------------------------------------------------
    def _row(self, stmt: str, stream: str, cp: str, now: int, seq: int, row: Any,
             p: int) -> None:
        """One output record: the row as JSON, keyed by its context partition; headers
        ``kepl.id`` (statement/partition/sequence), ``kepl.time``, and ``kepl.stream``
        on a remove row only (each header costs about as much as the rest of the
        record's produce call)."""
        topic, parts, stmtb = self.row_meta[stmt]
        rows_out = self.rows_out
        rows_out[stmt] = rows_out.get(stmt, 0) + 1
        cpb = cp.encode()
        data, nonfinite = codec.encode_row(row)
        headers = [(H_ID, b"%s/%s/%d" % (stmtb, cpb, seq)), (H_TIME, b"%d" % now)]
        if stream != "insert":
            headers.append(_REMOVE)
        if nonfinite is not None:
            headers.append((H_NONFINITE, nonfinite))
        self.checkpoint.produce(topic, data, p % parts, headers, cpb)

    # -- checkpoint ------------------------------------------------------------------
    def commit(self) -> None:
        """Seal every engine partition, produce its records, commit the transaction with
        the input offsets, then write the local databases."""
        t0 = time.monotonic()
        try:
            self._commit()
        except Rewind as e:
            log.warning("checkpoint aborted (%s): rewinding to the last commit", e)
            self.rewind()
            return
        now = time.monotonic()
        if now - self._last_full_gc >= self.gc_full_s:
            gc.unfreeze()
            found = gc.collect()
            self._last_full_gc = time.monotonic()
            log.info("full garbage collection: %d object(s) in %.3f s", found,
                     self._last_full_gc - now)
        gc.freeze()
        m = self.metrics
        if m is not None:
            m.checkpoint_s.observe(now - t0)
            m.add("events", self.stats["events"])
            m.add("dead", self.stats["dead"])
            m.add("checkpoints", self.stats["checkpoints"])
            m.add("changelog_bytes", self.stats["changelog_bytes"])
            m.add_rows(self.rows_out)

    # -- watching ------------------------------------------------------------------
    def _watch(self, now: float) -> None:
        """Say so when nothing moves: an engine partition whose oldest waiting record
        was not released for ``stall_s`` (a watermark missing from an upstream), or
        input lag while nothing was consumed for that long.  Also refreshes the lag and
        waiting-records metrics."""
        self._last_watch = now
        if self._dead_quiet and now - self._dead_window >= 1.0:
            self._dead_log("", "")  # sums up the quiet ones
        stalls: list[str] = []
        held = 0
        for key, part in self.parts.items():
            w = part.waiting()
            if w is None:
                self._waits.pop(key, None)
                continue
            held += w.records
            sig = (w.upstream, w.offset)
            seen = self._waits.get(key)
            if seen is None or seen[0] != sig:
                self._waits[key] = (sig, now)
            elif now - seen[1] >= self.stall_s:
                stalls.append(f"engine partition {key[0]}[{key[1]}]: {w.describe()}, "
                              f"for {now - seen[1]:.0f} s (watermarks come from "
                              f"`kepl clock`)")
        lags: dict[tuple[str, int], int] | None = None
        idle = now - self._last_consumed
        if idle >= self.stall_s or (self.metrics is not None
                                    and now - self._last_lag >= LAG_EVERY_S):
            lags = self._lags()
            self._last_lag = now
            if idle >= self.stall_s:
                behind = {k: n for k, n in lags.items() if n > 0}
                if behind:
                    where = ", ".join(f"{t}[{p}] {n}" for (t, p), n in sorted(behind.items()))
                    stalls.append(f"input lag ({where}) but nothing consumed for "
                                  f"{idle:.0f} s")
        if self.metrics is not None:
            self.metrics.waiting.set(held)
            self.metrics.stalled.set(1 if stalls else 0)
            if lags is not None:
                self.metrics.set_lag(lags)
        text = "; ".join(stalls)
        if text and (not self.health.stalled or now - self._last_stall_log >= self.stall_s):
            log.warning("no progress: %s", text)
            self._last_stall_log = now
        elif not text and self.health.stalled:
            log.warning("progress again")
        self.health.stalled = text

    def _lags(self) -> dict[tuple[str, int], int]:
        """Records between the read position and the end of each assigned partition."""
        from confluent_kafka import TopicPartition

        out: dict[tuple[str, int], int] = {}
        try:
            assigned = self.consumer.position(self.consumer.assignment())
        except Exception:  # noqa: BLE001 - mid-rebalance: try next time
            return out
        for tp in assigned:
            key = (tp.topic, tp.partition)
            try:
                low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(tp.topic, tp.partition), timeout=1.0, cached=False)
            except Exception:  # noqa: BLE001 - a metadata hiccup: try next time
                continue
            pos = tp.offset if tp.offset >= 0 else self.committed.get(key, low)
            out[key] = max(0, high - pos)
        return out

    def _commit(self) -> None:
        from confluent_kafka import TopicPartition

        cp = self.checkpoint
        cl_offsets: dict[tuple[str, int], int] = {}
        sealed: list[tuple[tuple[str, int], EnginePartition]] = []
        for key, part in self.parts.items():
            rec = part.seal()
            for d in part.dead:
                self.stats["dead"] += 1
                self._dead_log(f"{d.record.upstream.replace(':', '/')}/{d.record.offset}",
                               d.reason)
                cp.produce(self.config.dlq_topic, d.record.raw or codec.dumps(d.record.payload),
                           0, [(H_ERROR, d.reason.encode()),
                               (H_SOURCE, d.record.upstream.replace(":", "/").encode()
                                + f"/{d.record.offset}".encode())])
            if rec is None:
                continue
            p = part.partition
            for stmt, stream, cpt, t, seq, row in part.outputs:
                self._row(stmt, stream, cpt, t, seq, row, p)
            if not cp.exactly_once:
                cp.flush()  # at-least-once: rows land before the record that applies them

            def done(err: Any, msg: Any, key: tuple[str, int] = key) -> None:
                if err is None:
                    cl_offsets[key] = msg.offset()
                else:
                    cp.errors.append(str(err))

            data = rec.encode()
            self.stats["changelog_bytes"] += len(data)
            cp.produce(self.config.changelog_topic(key[0]), data, p, on_delivery=done)
            sealed.append((key, part))
            if part.barrier is not None and part.barrier != part.progress:
                self._progress(f"{key[0]}/{p}", part.barrier)
        for key in self.lane_progress:
            cur = self.cursors.get(key)
            if cur is not None:
                self._progress(f"{LANES}/{key[0]}:{key[1]}", (cur.now, cur.barrier))
        offsets = self._offsets(TopicPartition)
        # a transaction that writes anything carries input offsets: the broker checks the
        # group generation with them, so a worker that lost its partitions (a zombie)
        # cannot commit rows or changelog records its successor also writes
        fence = offsets or (self._committed_offsets() if cp.open else [])
        if sealed:
            self._crash_hook("before_flush")
        cp.commit(fence, self.consumer)
        if sealed:
            self._crash_hook("after_flush")
        for tp in offsets:
            self.committed[(tp.topic, tp.partition)] = tp.offset
        for key, cur in self.cursors.items():
            self.committed_cursors[key] = cur.copy()
        self.lane_progress.clear()
        for key, part in sealed:
            part.committed(cl_offsets[key])
        sealed_keys = {k for k, _ in sealed}
        for key, part in self.parts.items():
            if key not in sealed_keys:
                part.committed_unchanged()
        self.since_commit = 0
        self.last_commit = time.monotonic()
        self.stats["checkpoints"] += 1
        for _key, part in sealed:
            if part.snapshot_due():
                part.start_snapshot()
        writing = [(k, part) for k, part in self.parts.items() if part.writing is not None]
        if writing:
            self._snapshot_parts(writing)

    def _progress(self, key: str, barrier: tuple[int, str]) -> None:
        t, wid = barrier
        self.checkpoint.produce(self.config.progress_topic,
                                codec.dumps({"key": key, "t": t, "id": wid}), 0,
                                key=key.encode())

    def _offsets(self, TopicPartition: Any) -> list[Any]:
        """Input offsets to commit: the read position, or the oldest record an engine
        partition still waits on; source partitions carry their cursor as metadata."""
        holds: dict[str, int] = {}
        for part in self.parts.values():
            for via, off in part.hold().items():
                if off < holds.get(via, off + 1):
                    holds[via] = off
        out = []
        for key, pos in self.positions.items():
            held = holds.get(f"{key[0]}:{key[1]}")
            off = pos if held is None else min(pos, held)
            cur = self.cursors.get(key)
            if cur is None and key[0] in self.sources:
                continue  # revoked meanwhile
            meta = cur.metadata() if cur is not None else None
            if self.committed.get(key) == off and (
                    cur is None or self.committed_cursors.get(key) == cur):
                continue
            out.append(TopicPartition(key[0], key[1], off, metadata=meta)
                       if meta is not None else TopicPartition(key[0], key[1], off))
        return out

    def _snapshot_parts(self, writing: list[tuple[tuple[str, int], EnginePartition]]
                        ) -> None:
        """Write the next part of each snapshot being written, in one transaction; a
        snapshot whose last part is in truncates its changelog up to its first part."""
        cp = self.checkpoint
        t0 = time.monotonic()
        got: dict[tuple[str, int], int] = {}
        more = False
        for key, part in writing:
            rec = part.snapshot_part()
            more = more or not rec.snapshot["last"]

            def done(err: Any, msg: Any, key: tuple[str, int] = key) -> None:
                if err is None:
                    got[key] = msg.offset()
                else:
                    cp.errors.append(str(err))

            cp.produce(self.config.changelog_topic(key[0]), rec.encode(), part.partition,
                       on_delivery=done)
        if more:
            cp.flush()
            self._crash_hook("mid_snapshot")
        # the input offsets just committed, sent again: the broker checks the group
        # generation, so a worker that lost its partitions (a zombie) cannot commit parts
        # into a changelog its successor now writes
        cp.commit(self._committed_offsets(), self.consumer)
        for key, part in writing:
            first = part.snapshot_part_committed(got[key])
            if first is None:
                continue
            topic = self.config.changelog_topic(key[0])
            self.changelog.delete_before(topic, part.partition, first)
            log.info("snapshot of %s[%d]: %d bytes at %d..%d (last part %.3f s)",
                     topic, part.partition, part.snapshot_bytes, first, part.cl_offset,
                     time.monotonic() - t0)

    def _committed_offsets(self) -> list[Any]:
        """The committed input offsets (with their cursor metadata) of the partitions this
        worker holds."""
        from confluent_kafka import TopicPartition

        out = []
        for key in self.positions:
            off = self.committed.get(key)
            if off is None:
                continue
            cur = self.committed_cursors.get(key)
            meta = cur.metadata() if cur is not None else None
            out.append(TopicPartition(key[0], key[1], off, metadata=meta)
                       if meta is not None else TopicPartition(key[0], key[1], off))
        return out

    def rewind(self) -> None:
        """Back to the last commit: engine partitions from their databases, cursors from
        the committed metadata, the consumer to the committed offsets."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self.checkpoint.abort()
        self.pending.clear()
        self.bundles.clear()
        self.lane_progress.clear()
        for part in self.parts.values():
            part.discard()
            part.load()
        for key in list(self.cursors):
            cur = self.committed_cursors.get(key, LaneCursor()).copy()
            self.cursors[key] = cur
            if key in self.lanes:
                self._open_lane(key, cur)
        seeks = []
        for key in list(self.positions):
            off = self.committed.get(key)
            if off is None:  # nothing committed yet: read the partition from its start
                del self.positions[key]
                seeks.append(TopicPartition(key[0], key[1], OFFSET_BEGINNING))
                continue
            self.positions[key] = off
            seeks.append(TopicPartition(key[0], key[1], off))
        for tp in seeks:
            try:
                self.consumer.seek(tp)
            except Exception as e:  # noqa: BLE001 - then the restart recovers
                raise Fenced(f"cannot rewind {tp.topic}[{tp.partition}]: {e}") from None

    def _crash_hook(self, point: str) -> None:
        if self._crash_at is None or self._crash_at[0] != point:
            return
        self._crash_count += 1
        if self._crash_count >= self._crash_at[1]:
            log.warning("%s=%s: killing the worker at %s", CRASH_HOOK_ENV,
                        os.environ.get(CRASH_HOOK_ENV), point)
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    # -- assignment ------------------------------------------------------------------
    def _on_assign(self, consumer: Any, tps: list[Any]) -> None:
        t0 = time.monotonic()
        sources = [tp for tp in tps if tp.topic in self.sources]
        committed = consumer.committed(sources, timeout=60) if sources else []
        for tp in committed:
            key = (tp.topic, tp.partition)
            cur = LaneCursor.from_metadata(tp.metadata if tp.offset >= 0 else None)
            self.cursors[key] = cur
            self.committed_cursors[key] = cur.copy()
            if tp.offset >= 0:
                self.committed[key] = self.positions[key] = tp.offset
                low = self._log_start(key)
                if low is not None and tp.offset < low:
                    # the consumer resets to the log start by itself (auto.offset.reset)
                    self.positions[key] = low
                    self._lost_input(key, tp.offset, low)
            if tp.topic in self.lane_plans:
                self._open_lane(key, cur)
        opened: dict[tuple[str, int], Group] = {}
        for tp in tps:
            if tp.topic in self.sources:
                for g in self.direct_of[tp.topic]:
                    opened[(g.name, tp.partition)] = g
            elif tp.topic in self.repartition:
                opened[(self.repartition[tp.topic].name, tp.partition)] = \
                    self.repartition[tp.topic]
        for key in sorted(opened):
            if key not in self.parts:
                self.parts[key] = self._restore(opened[key], key[1])
        self.health.assigned = True
        log.info("assigned %d partition(s), %d engine partition(s) ready in %.3f s",
                 len(tps), len(opened), time.monotonic() - t0)

    def _alive(self) -> None:
        """The loop is busy, not stuck (``/healthz``): a restore calls this per record
        (and stops it when the worker was asked to stop)."""
        self.health.last_loop = time.monotonic()
        if self.stopping:
            raise Interrupted("stop requested")

    def _open_lane(self, key: tuple[str, int], cur: LaneCursor) -> None:
        self.lanes[key] = Lane(self.lane_plans[key[0]], key[1], cur,
                               self._row)

    def _restore(self, g: Group, p: int) -> EnginePartition:
        t0 = time.monotonic()
        part = EnginePartition(g, p, self.data_dir / g.name / str(p),
                               g.upstreams(p, self.all_upstreams),
                               self.config.changelog_topic(g.name), self.snapshots,
                               adjacent=not self.checkpoint.exactly_once)
        part.escalate = g.direct
        part.restore(self.changelog, self._alive)
        part.progress = part.barrier  # already on the progress topic with its state
        if self.metrics is not None:
            self.metrics.restore_s.observe(time.monotonic() - t0)
        log.info("restored %s[%d] in %.3f s (changelog at %d)", g.name, p,
                 time.monotonic() - t0, part.cl_offset)
        return part

    def _on_revoke(self, consumer: Any, tps: list[Any]) -> None:
        if tps:
            self._flush_stage()
            self.commit()
        self._drop(tps)

    def _on_lost(self, consumer: Any, tps: list[Any]) -> None:
        log.warning("assignment lost (%d partitions): aborting the open checkpoint", len(tps))
        self.checkpoint.abort()
        self.pending.clear()
        self.bundles.clear()
        for part in self.parts.values():
            part.discard()
            part.load()
        self._drop(tps)

    def _drop(self, tps: list[Any]) -> None:
        for tp in tps:
            key = (tp.topic, tp.partition)
            self.positions.pop(key, None)
            self.committed.pop(key, None)
            self.cursors.pop(key, None)
            self.committed_cursors.pop(key, None)
            self.lanes.pop(key, None)
            groups = (self.direct_of.get(tp.topic, []) if tp.topic in self.sources
                      else [self.repartition[tp.topic]] if tp.topic in self.repartition
                      else [])
            for g in groups:
                part = self.parts.pop((g.name, tp.partition), None)
                if part is not None:
                    part.discard()
                    part.close()

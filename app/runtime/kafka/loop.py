"""The worker's consumer loop: one consumer, one producer, one thread.

An event's trip through a worker (docs/architecture.md, "An event's path on Kafka")::

    consume(N) ─► source record ─┬─► lanes (stateless statements, in place)
                                 ├─► direct engine partitions (partition p of the source)
                                 └─► routing ─► repartition topic ─► engine partitions
    every commit interval: checkpoint (``checkpoint.CheckpointRound``): rows, changelog
    records, repartition bundles, progress and input offsets in one transaction, then
    each engine partition's RocksDB batch with its changelog offset

``Worker`` keeps consume, dispatch and rebalance: it batch-consumes with confluent-kafka
(every message's ``error()`` checked), decodes and validates each source record once,
and hands it to the rooms that want it.  Engine partitions keep waiting events in
memory; the offset committed for an input partition is the oldest record still waited
on, so a restarted worker reads those again.  Lanes and routing remember the last offset
they handled in the committed offset's metadata (``LaneCursor``) and skip what they did.
Each assigned input partition is one ``inputs.Input``; the checkpoint's steps are
``checkpoint.CheckpointRound``; stalls and dead letters are said by ``watch``; the
shutdown is bounded by ``shutdown``.

Assignment is eager ``range``: partition p of co-partitioned topics (a direct group's
source topics) lands on the same worker.  On assignment a worker restores the engine
partitions it gained (``EnginePartition.restore``: local RocksDB, then the changelog
tail); on revocation it commits first; on a lost assignment it aborts.  Static group
membership and a transactional id both derive from the data directory: a worker
restarted after a crash takes its partitions back at once and fences its previous self.
What it does is observable through ``WorkerHooks``.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.runtime.kafka import brokers, client, codec
from app.runtime.kafka.checkpoint import (
    KAFKA_LOG,
    CheckpointRound,
    Fenced,
    Rewind,
    Seam,
    make_output,
)
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.health import DEFAULT_STALL_S, STALL_ENV, Health, Metrics, serve
from app.runtime.kafka.inputs import Input, Inputs
from app.runtime.kafka.lanes import Lane, LaneCursor
from app.runtime.kafka.partition import EnginePartition, InRecord, Poisoned, SnapshotPolicy
from app.runtime.kafka.reader import drain
from app.runtime.kafka.recovery import KafkaChangelog
from app.runtime.kafka.router import (
    H_CONTROL,
    H_ID,
    H_NONFINITE,
    H_SEQ,
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
from app.runtime.kafka.shutdown import SHUTDOWN, Interrupted
from app.runtime.kafka.topology import LANES, STATEMENT_KINDS, Group, Topology
from app.runtime.kafka.watch import DeadLetterLog, StallWatch

log = logging.getLogger("kepl.worker")

CRASH_HOOK_ENV = "KEPL_TEST_CRASH"
"""Crash tests: ``point:n`` (``checkpoint.POINTS``) SIGKILLs the worker the n-th time a
checkpoint reaches ``point``; read by the worker's entry point, which hands the loop a
``checkpoint.CrashSeam``."""
COMMIT_INTERVAL_ENV = "KEPL_COMMIT_INTERVAL_MS"
DEFAULT_COMMIT_INTERVAL_MS = 100
"""A checkpoint at least this often while input keeps coming (Kafka Streams' EOS value)."""
CAUGHT_UP_COMMIT_MS = 20
"""Once a consume call drained what was there, a checkpoint after this long already:
rows become visible soon at moderate load, and a backlog still commits per interval.
A drained batch that applied or forwarded a barrier commits at once (``_barrier_due``)."""
CONSUME_BATCH = 2000
CONSUME_TIMEOUT_S = 0.01
"""An idle loop's wait for records; the first record ends it (``reader.drain``: a batch
is what is there then, so a record waits for no timeout before it is handled)."""
MAX_CHECKPOINT_RECORDS = 50_000
"""Input records per checkpoint at most (bounds a changelog record)."""
EXIT_FENCED = 3
EXIT_LOST_INPUT = 4
GC_FULL_ENV = "KEPL_GC_FULL_S"
DEFAULT_GC_FULL_S = 600.0
"""After every checkpoint the objects alive are frozen out of the cyclic collector, so
its collections scan only what the last ~100 ms allocated (a full collection over a
worker's state took 40-300 ms here, and found nothing: the state holds no cycles).  A
full collection still runs this often, for cyclic garbage among frozen objects."""
WATCH_EVERY_S = 1.0

_W = b"watermark"
_FATAL = -150  # librdkafka RD_KAFKA_RESP_ERR__FATAL (static member fenced, and the like)
_REMOVE = (H_STREAM, b"remove")


class WorkerHooks:
    """What a worker tells an observer (``kepl worker`` announces it); no-ops here."""

    def assigned(self, worker: Worker, tps: list[Any], seconds: float) -> None:
        pass

    def revoked(self, worker: Worker, tps: list[Any]) -> None:
        pass

    def restored(self, worker: Worker, part: EnginePartition, seconds: float) -> None:
        pass


class Worker:
    """A consumer-group member of one app (see module docstring)."""

    def __init__(self, config: AppConfig, topology: Topology, bootstrap: str,
                 data_dir: Path, identity: str,
                 snapshots: SnapshotPolicy | None = None,
                 metrics_port: int | None = None, hooks: WorkerHooks | None = None,
                 seam: Seam | None = None) -> None:
        """``metrics_port``: serve /metrics, /healthz and /readyz there (None: off);
        ``seam``: fault injection into checkpoints (tests)."""
        from confluent_kafka import Consumer

        self.config = config
        self.topology = topology
        self.data_dir = Path(data_dir)
        self.snapshots = snapshots
        self.hooks = hooks or WorkerHooks()
        self.changelog = KafkaChangelog(bootstrap)
        interval = os.environ.get(COMMIT_INTERVAL_ENV, "").strip()
        self.interval_s = (int(interval) if interval else DEFAULT_COMMIT_INTERVAL_MS) / 1000
        self.caught_up_s = min(self.interval_s, CAUGHT_UP_COMMIT_MS / 1000)
        self.out = make_output(bootstrap, identity, config.processing_guarantee)
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
            **brokers.WATCH.settings(),
        }))
        cfg = config
        out_topics = {s: cfg.output_topic(s) for g in topology.active_groups()
                      for s in g.statements}
        out_topics.update({p.name: cfg.output_topic(p.name) for p in topology.lanes})
        out_parts = {s: n for s, (_, n) in topology.output_topics().items()}
        self.row_meta = {s: (out_topics[s], out_parts[s], s.encode()) for s in out_topics}
        self.repartition = {cfg.repartition_topic(g.name): g for g in topology.routed_groups()}
        direct = [g for g in topology.active_groups() if g.direct]
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
            t: [g for g in direct if t in g.topics] for t in cfg.source_topics}
        # the current assignment
        self.inputs = Inputs()
        self.parts: dict[tuple[str, int], EnginePartition] = {}
        self.bundles: dict[tuple[str, int], list[Entry]] = {}
        self.pending: dict[tuple[str, int], list[InRecord]] = {}
        self.poison: dict[tuple[str, int], str] = {}
        """(upstream, offset) -> reason: source records that failed inside a statement of
        an engine partition fed directly; every room skips them (``_poisoned``)."""
        self.lane_progress: set[tuple[str, int]] = set()
        self.stopping = False
        self.since_commit = 0
        self.last_commit = time.monotonic()
        self._callback_error: BaseException | None = None
        self.stats = {"events": 0, "checkpoints": 0, "dead": 0, "changelog_bytes": 0}
        self.rows_out: dict[str, int] = {}
        self.health = Health()
        self.metrics_port = metrics_port
        self.metrics = Metrics(config.app) if metrics_port is not None else None
        self.http: Any = None
        self.dead_log = DeadLetterLog(config.dlq_topic)
        self.round = CheckpointRound(self.out, config, self.changelog, self._rows_of,
                                     self.dead_log.say, seam)
        stall = os.environ.get(STALL_ENV, "").strip()
        self.stalls = StallWatch(self.consumer, self.inputs, lambda: self.parts, self.health,
                                 self.metrics, float(stall) if stall else DEFAULT_STALL_S)
        self._last_watch = self._last_consumed = time.monotonic()
        gc_full = os.environ.get(GC_FULL_ENV, "").strip()
        self.gc_full_s = float(gc_full) if gc_full else DEFAULT_GC_FULL_S
        self._last_full_gc = time.monotonic()

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
        self.out.close()
        for part in self.parts.values():
            part.discard()
            part.close()
        self.parts.clear()

    def step(self) -> None:
        """One consume batch, then a checkpoint when one is due."""
        msgs = drain(self.consumer, CONSUME_TIMEOUT_S, CONSUME_BATCH)
        if self._callback_error is not None:
            err, self._callback_error = self._callback_error, None
            raise err
        now = time.monotonic()
        self.health.last_loop = now
        if msgs:
            self._last_consumed = now
            self.handle(msgs)
        if now - self._last_watch >= WATCH_EVERY_S:
            self._last_watch = now
            self.dead_log.tick(now)
            self.stalls.tick(now, self._last_consumed)
        self.out.poll()
        if not (self.out.open or self.lane_progress or self.inputs.dirty()):
            return
        elapsed = time.monotonic() - self.last_commit
        if (elapsed >= self.interval_s or self.since_commit >= MAX_CHECKPOINT_RECORDS
                or (len(msgs) < CONSUME_BATCH
                    and (elapsed >= self.caught_up_s or self._barrier_due()))):
            self.commit()

    def _barrier_due(self) -> bool:
        """A barrier waits for this checkpoint: one a lane or an engine partition applied
        (its progress record goes in it), or one routed to a repartition topic (the
        engine partitions there see it once it commits).  Someone waits on a barrier, as
        on a row: it commits as soon as the input is drained."""
        if self.lane_progress or any(part.barrier != part.progress
                                     for part in self.parts.values()):
            return True
        if not self.routing.barrier_targets:
            return False
        return any(inp.cursor is not None and inp.committed_cursor is not None
                   and inp.cursor.barrier != inp.committed_cursor.barrier
                   for inp in self.inputs)

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
                self.out.produce(topic, value, p)
        self.bundles.clear()

    def _source(self, m: Any, topic: str) -> None:
        p = m.partition()
        off = m.offset()
        key = (topic, p)
        inp = self.inputs.get(key)
        if inp is None or inp.cursor is None:  # not (yet) ours
            return
        expected = inp.position
        inp.position = off + 1
        cur = inp.cursor
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
            lane = inp.lane
            if lane is not None and type_name in lane.types:
                try:
                    lane.send(type_name, event)
                except Fenced:  # the producer's, not the event's: no dead letter
                    raise
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
                    InRecord("event", upstream, off, type_name=type_name,
                             ts=m.timestamp()[1], seq=seq, payload=event, via=upstream,
                             via_offset=off))

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
            inp = self.inputs.get((topic, p))
            lane = inp.lane if inp is not None else None
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
                InRecord("barrier", upstream, off, payload=payload, via=upstream,
                         via_offset=off))

    def _repartitioned(self, m: Any, topic: str) -> None:
        g = self.repartition.get(topic)
        if g is None:
            return
        p = m.partition()
        off = m.offset()
        inp = self.inputs.get((topic, p))
        if inp is None:
            return
        inp.position = off + 1
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
        inp = self.inputs.get(key)
        if inp is not None and inp.cursor is not None:
            inp.cursor.lost += lost
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
        self.dead_log.say(f"{m.topic()}/{m.partition()}/{m.offset()}", reason)
        headers = dead_letter_headers(m.headers(), reason, m.topic(), m.partition(),
                                      m.offset())
        self.out.produce(self.config.dlq_topic, m.value() or b"", 0, headers)

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
        self.out.produce(topic, data, p % parts, headers, cpb)

    def _rows_of(self, part: EnginePartition) -> None:
        """Produce an engine partition's output rows (the checkpoint's step 2)."""
        p = part.partition
        for r in part.outputs:
            self._row(r.statement, r.stream, r.context_partition, r.time, r.seq, r.row, p)

    # -- checkpoint ------------------------------------------------------------------
    def commit(self) -> None:
        """One checkpoint (``CheckpointRound``); an aborted one rewinds to the last."""
        t0 = time.monotonic()
        lanes = [(f"{LANES}/{inp.topic}:{inp.partition}", (inp.cursor.now, inp.cursor.barrier))
                 for key in self.lane_progress
                 if (inp := self.inputs.get(key)) is not None and inp.cursor is not None]
        try:
            done = self.round.run(self.parts, lanes, self.inputs, self.consumer)
        except Rewind as e:
            log.warning("checkpoint aborted (%s): rewinding to the last commit", e)
            self.rewind()
            return
        self.lane_progress.clear()
        self.since_commit = 0
        self.last_commit = time.monotonic()
        stats = self.stats
        stats["checkpoints"] += 1
        stats["dead"] += done.dead
        stats["changelog_bytes"] += done.changelog_bytes
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
            m.add("events", stats["events"])
            m.add("dead", stats["dead"])
            m.add("checkpoints", stats["checkpoints"])
            m.add("changelog_bytes", stats["changelog_bytes"])
            m.add_rows(self.rows_out)

    def rewind(self) -> None:
        """Back to the last commit: engine partitions from their databases, cursors from
        the committed metadata, the consumer to the committed offsets (to the start of a
        partition where nothing was committed yet)."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self.out.abort()
        self.pending.clear()
        self.bundles.clear()
        self.lane_progress.clear()
        for part in self.parts.values():
            part.discard()
            part.load()
        seeks = []
        for inp in self.inputs:
            read = inp.position is not None
            inp.rewind()
            if inp.lane is not None and inp.cursor is not None:
                self._open_lane(inp, inp.cursor)
            if not read:
                continue
            seeks.append(TopicPartition(inp.topic, inp.partition,
                                        OFFSET_BEGINNING if inp.committed is None
                                        else inp.committed))
        for tp in seeks:
            try:
                self.consumer.seek(tp)
            except Exception as e:  # noqa: BLE001 - then the restart recovers
                raise Fenced(f"cannot rewind {tp.topic}[{tp.partition}]: {e}") from None

    # -- assignment ------------------------------------------------------------------
    def _on_assign(self, consumer: Any, tps: list[Any]) -> None:
        t0 = time.monotonic()
        sources = [tp for tp in tps if tp.topic in self.sources]
        committed = consumer.committed(sources, timeout=60) if sources else []
        for tp in committed:
            key = (tp.topic, tp.partition)
            cur = LaneCursor.from_metadata(tp.metadata if tp.offset >= 0 else None)
            inp = self.inputs.add(Input(tp.topic, tp.partition, True, cursor=cur,
                                        committed_cursor=cur.copy()))
            if tp.offset >= 0:
                inp.committed = inp.position = tp.offset
                low = self._log_start(key)
                if low is not None and tp.offset < low:
                    # the consumer resets to the log start by itself (auto.offset.reset)
                    inp.position = low
                    self._lost_input(key, tp.offset, low)
            if tp.topic in self.lane_plans:
                self._open_lane(inp, cur)
        opened: dict[tuple[str, int], Group] = {}
        for tp in tps:
            if tp.topic in self.sources:
                for g in self.direct_of[tp.topic]:
                    opened[(g.name, tp.partition)] = g
            elif tp.topic in self.repartition:
                self.inputs.add(Input(tp.topic, tp.partition, False))
                opened[(self.repartition[tp.topic].name, tp.partition)] = \
                    self.repartition[tp.topic]
        for key in sorted(opened):
            if key not in self.parts:
                self.parts[key] = self._restore(opened[key], key[1])
        self.health.assigned = True
        seconds = time.monotonic() - t0
        log.info("assigned %d partition(s), %d engine partition(s) ready in %.3f s",
                 len(tps), len(opened), seconds)
        self.hooks.assigned(self, tps, seconds)

    def _alive(self) -> None:
        """The loop is busy, not stuck (``/healthz``): a restore calls this per record
        (and stops it when the worker was asked to stop)."""
        self.health.last_loop = time.monotonic()
        if self.stopping:
            raise Interrupted("stop requested")

    def _open_lane(self, inp: Input, cur: LaneCursor) -> None:
        inp.lane = Lane(self.lane_plans[inp.topic], inp.partition, cur, self._row)

    def _restore(self, g: Group, p: int) -> EnginePartition:
        t0 = time.monotonic()
        part = EnginePartition(g, p, self.data_dir / g.name / str(p),
                               g.upstreams(p, self.all_upstreams),
                               self.config.changelog_topic(g.name), self.snapshots,
                               adjacent=not self.out.exactly_once)
        part.escalate = g.direct
        part.restore(self.changelog, self._alive)
        part.progress = part.barrier  # already on the progress topic with its state
        seconds = time.monotonic() - t0
        if self.metrics is not None:
            self.metrics.restore_s.observe(seconds)
        log.info("restored %s[%d] in %.3f s (changelog at %d)", g.name, p, seconds,
                 part.cl_offset)
        self.hooks.restored(self, part, seconds)
        return part

    def _on_revoke(self, consumer: Any, tps: list[Any]) -> None:
        if tps:
            self._flush_stage()
            self.commit()
        self._drop(tps)
        self.hooks.revoked(self, tps)

    def _on_lost(self, consumer: Any, tps: list[Any]) -> None:
        log.warning("assignment lost (%d partitions): aborting the open checkpoint", len(tps))
        self.out.abort()
        self.pending.clear()
        self.bundles.clear()
        for part in self.parts.values():
            part.discard()
            part.load()
        self._drop(tps)

    def _drop(self, tps: list[Any]) -> None:
        for tp in tps:
            self.inputs.drop((tp.topic, tp.partition))
            groups = (self.direct_of.get(tp.topic, []) if tp.topic in self.sources
                      else [self.repartition[tp.topic]] if tp.topic in self.repartition
                      else [])
            for g in groups:
                part = self.parts.pop((g.name, tp.partition), None)
                if part is not None:
                    part.discard()
                    part.close()

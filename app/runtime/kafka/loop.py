"""The worker's consumer loop: one consumer, one producer, one thread.

An event's trip through a worker (docs/architecture.md, "An event's path on Kafka")::

    consume(N) ─► intake ─┬─► lanes (stateless statements, in place)
                          ├─► direct engine partitions (partition p of the source)
                          └─► routing ─► repartition topic ─► intake ─► engine partitions
    every commit interval: checkpoint (``checkpoint.CheckpointRound``): rows
    (``rows.RowWriter``), changelog records, repartition bundles, progress and input
    offsets in one transaction, then each engine partition's RocksDB batch with its
    changelog offset

``Worker`` keeps consume, dispatch and rebalance: it batch-consumes with confluent-kafka
(every message's ``error()`` checked) and hands each record to ``intake.Intake``, which
validates and decodes it once and stages it for the rooms that want it (dead letters and
poison records are its business too).  Engine partitions keep waiting events in memory;
the offset committed for an input partition is the oldest record still waited on, so a
restarted worker reads those again.  Lanes and routing remember the last offset they
handled in the committed offset's metadata (``LaneCursor``) and skip what they did.
Which topic feeds which room is ``wiring.Wiring``; the inputs and engine partitions of
the current assignment are opened and closed by ``assignment.Assignment``; records
deleted before they were read are ``lost_input``'s; stalls and dead letters are said by
``watch``; the garbage collector is paced by ``collector``; the shutdown is bounded by
``shutdown``.

Assignment is eager ``range``: partition p of co-partitioned topics (a direct group's
source topics) lands on the same worker.  On assignment a worker restores the engine
partitions it gained (``EnginePartition.restore``: local RocksDB, then the changelog
tail); on revocation it commits first; on a lost assignment it aborts.  Static group
membership and a transactional id both derive from the data directory: a worker
restarted after a crash takes its partitions back at once and fences its previous self.
What it does is observable through ``WorkerHooks``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.runtime.kafka import brokers, client
from app.runtime.kafka.assignment import Assignment
from app.runtime.kafka.checkpoint import (
    KAFKA_LOG,
    CheckpointRound,
    Fenced,
    Rewind,
    Seam,
    make_output,
)
from app.runtime.kafka.collector import Collector
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.health import (
    DEFAULT_STALL_S,
    STALL_ENV,
    Health,
    Metrics,
    note_rebalance,
    record_exit,
    serve,
)
from app.runtime.kafka.inputs import Inputs
from app.runtime.kafka.intake import Intake
from app.runtime.kafka.lost_input import LostInput
from app.runtime.kafka.partition import EnginePartition, SnapshotPolicy
from app.runtime.kafka.reader import drain
from app.runtime.kafka.rebuild import KafkaRetainedInput
from app.runtime.kafka.recovery import KafkaChangelog
from app.runtime.kafka.refusals import consumer_refused
from app.runtime.kafka.rows import RowWriter
from app.runtime.kafka.shutdown import SHUTDOWN, Interrupted
from app.runtime.kafka.topology import LANES, Topology
from app.runtime.kafka.watch import DeadLetterLog, StallWatch
from app.runtime.kafka.wiring import Wiring

log = logging.getLogger("kepl.worker")

COMMIT_INTERVAL_ENV = "KEPL_COMMIT_INTERVAL_MS"
DEFAULT_COMMIT_INTERVAL_MS = 100
"""A checkpoint at least this often while input keeps coming (Kafka Streams' EOS value)."""
CAUGHT_UP_ENV = "KEPL_CAUGHT_UP_MS"
CAUGHT_UP_COMMIT_MS = 20
"""Once a consume call drained what was there, a checkpoint after this long already:
rows become visible soon at moderate load, and a backlog still commits per interval.
A drained batch that applied or forwarded a barrier commits at once (``_barrier_due``).
``KEPL_CAUGHT_UP_MS`` sets it (measured: 0, back-to-back transactions, loads the broker
and raises latency at half the drain rate; docs/testing.md)."""
LIVE_BEHIND_ENV = "KEPL_LIVE_BEHIND_MS"
LIVE_BEHIND_MS = 30
"""Live input whose consume batch came back full at the largest size: a checkpoint this
long after the last, not after every batch (each would cost more than its batch and the
lag would grow) nor at the backlog's interval (a row would wait up to 100 ms for it).
Should the lag still grow past ``LIVE_LAG_MS`` the input is no longer live and the
backlog's pacing takes over until it drains.  ``KEPL_LIVE_BEHIND_MS`` sets it."""
CONSUME_BATCH = 2000
LIVE_BATCH = 500
"""The first consume batch while the input is live (``LIVE_LAG_MS``): a checkpoint
follows each batch handled, so that the rows of events that came during a checkpoint
wait for the handling of about the next 25 ms of events, not for 2,000 events and
another batch.  A full batch doubles the next one (``next_live_batch``)."""
LIVE_LAG_MS = 250
"""Input is live while a batch's last record was stamped (CreateTime) less than this
before it was consumed; an older stamp (a backlog, or records stamped with event time)
keeps the throughput pacing: batches of ``CONSUME_BATCH``, a checkpoint per
``KEPL_COMMIT_INTERVAL_MS`` until a batch drains what was there."""
CONSUME_TIMEOUT_S = 0.01
"""An idle loop's wait for records; the first record ends it (``reader.drain``: a batch
is what is there then, so a record waits for no timeout before it is handled)."""
MAX_CHECKPOINT_RECORDS = 50_000
"""Input records per checkpoint at most (bounds a changelog record)."""
EXIT_FENCED = 3
TRACE_ENV = "KEPL_LATENCY_TRACE"
"""A file: each consume batch and checkpoint appended as a line of wall-clock times
(``tests/bench/bench_kafka.py --trace`` breaks a row's latency down with it).  Written a
line at a time: a worker the bench kills keeps its trace."""
WATCH_EVERY_S = 1.0

_FATAL = -150  # librdkafka RD_KAFKA_RESP_ERR__FATAL (static member fenced, and the like)


def fatal_kafka_error(e: BaseException) -> str | None:
    """What a Kafka client's fatal error says (None for any other exception): raised by
    a call the checkpoint does not wrap (a produce, a rebalance callback), it means the
    same as ``Fenced``: this client may never write again."""
    from confluent_kafka import KafkaError, KafkaException

    if not isinstance(e, KafkaException) or not e.args:
        return None
    err = e.args[0]
    if not isinstance(err, KafkaError) or not _fatal(err):
        return None
    return f"kafka client: {err.str()}"


def _fatal(err: Any) -> bool:
    """Whether a client error means the client may never write again."""
    return bool(err.fatal()) or err.code() == _FATAL


def live(msgs: list[Any], now_s: float) -> bool:
    """Whether a batch consumed at ``now_s`` is live input: its last record was stamped
    less than ``LIVE_LAG_MS`` before (a record without a timestamp is not)."""
    kind, ts = msgs[-1].timestamp()
    return kind != 0 and now_s * 1000 - ts < LIVE_LAG_MS


def next_live_batch(most: int, got: int) -> int:
    """The next live consume batch after one of ``got`` records at most ``most``: a full
    batch means records were waiting, so the next takes twice as many (up to
    ``CONSUME_BATCH``: a checkpoint per batch costs less per record); a batch under a
    quarter full halves it again (down to ``LIVE_BATCH``)."""
    if got >= most:
        return min(most * 2, CONSUME_BATCH)
    if got * 4 < most:
        return max(most // 2, LIVE_BATCH)
    return most


def consumer_config(bootstrap: str, app: str, identity: str) -> dict[str, Any]:
    """The worker's consumer: static member ``identity`` of group ``kepl.<app>``, eager
    ``range`` assignment, offsets committed by the checkpoint only, read_committed."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"kepl.{app}",
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
        "queued.max.messages.kbytes": 65_536,
        "log_level": 3,
        "logger": KAFKA_LOG,
        **brokers.WATCH.settings(),
    }


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
        self.hooks = hooks or WorkerHooks()
        interval = os.environ.get(COMMIT_INTERVAL_ENV, "").strip()
        self.interval_s = (int(interval) if interval else DEFAULT_COMMIT_INTERVAL_MS) / 1000
        caught_up = os.environ.get(CAUGHT_UP_ENV, "").strip()
        self.caught_up_s = min(self.interval_s,
                               (int(caught_up) if caught_up else CAUGHT_UP_COMMIT_MS) / 1000)
        behind = os.environ.get(LIVE_BEHIND_ENV, "").strip()
        self.live_behind_s = min(self.interval_s,
                                 (int(behind) if behind else LIVE_BEHIND_MS) / 1000)
        self.out = make_output(bootstrap, identity, config.processing_guarantee)
        self.consumer = Consumer(
            client.consumer_conf(consumer_config(bootstrap, config.app, identity)))
        self.wiring = Wiring(config, topology)
        self.inputs = Inputs()
        self.parts: dict[tuple[str, int], EnginePartition] = {}
        self.stats = {"events": 0, "checkpoints": 0, "dead": 0, "changelog_bytes": 0}
        self.health = Health()
        self.metrics_port = metrics_port
        self.metrics = Metrics(config.app, data_dir) if metrics_port is not None else None
        self.http: Any = None
        changelog = KafkaChangelog(bootstrap)
        self.dead_log = DeadLetterLog(config.dlq_topic)
        self.rows = RowWriter(self.out, config, topology)
        lost = LostInput(self.consumer, self.inputs, self.stats, self.metrics,
                         config.on_lost_input)
        self.intake = Intake(topology, self.wiring, self.inputs, self.parts, self.out,
                             config.dlq_topic, self.dead_log, lost, self.stats)
        self.assignment = Assignment(
            config, self.wiring, self.inputs, self.parts, changelog, Path(data_dir),
            snapshots, self.out.exactly_once, self.rows, lost, self.metrics,
            lambda part, seconds: self.hooks.restored(self, part, seconds))
        self.assignment.retained = KafkaRetainedInput(bootstrap, topology,
                                                      self.intake.routing)
        self.round = CheckpointRound(self.out, config, changelog, self.rows.of_partition,
                                     self.dead_log.say, seam)
        stall = os.environ.get(STALL_ENV, "").strip()
        self.stalls = StallWatch(self.consumer, self.inputs, lambda: self.parts, self.health,
                                 self.metrics, float(stall) if stall else DEFAULT_STALL_S)
        self.collector = Collector()
        self.stopping = False
        self.loaded_changes = False
        """An engine partition changed as it loaded (a new version's reset or rebuild):
        a checkpoint is due even before any input comes."""
        self.since_commit = 0
        self.live = False
        """The last batch's records were fresh (``LIVE_LAG_MS``)."""
        self.live_batch = LIVE_BATCH
        """The consume batch while live (``next_live_batch``)."""
        self.last_commit = self._last_watch = self._last_consumed = time.monotonic()
        self._callback_error: BaseException | None = None
        trace = os.environ.get(TRACE_ENV, "").strip()
        self.trace = open(trace, "a", buffering=1) if trace else None  # noqa: SIM115 - closed in close()

    # -- life cycle ------------------------------------------------------------------
    def run(self) -> None:
        """Consume until SIGTERM/SIGINT; checkpoint on the way out."""
        self.consumer.subscribe(self.wiring.topics(), on_assign=self._guarded(self._on_assign),
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
            self._exit_fenced(str(e))
        except Exception as e:
            reason = fatal_kafka_error(e)
            if reason is None:
                raise
            self._exit_fenced(self.out.fatal_reason() or reason)
        finally:
            self.close()

    def _exit_fenced(self, reason: str) -> None:
        """Stop at once, in one line: another incarnation owns the partitions now."""
        log.critical("worker stops: %s (another worker owns its partitions now)", reason)
        record_exit(self.data_dir, EXIT_FENCED)
        sys.stderr.flush()
        os._exit(EXIT_FENCED)

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
        self.assignment.close()
        if self.trace is not None:
            self.trace.close()

    def step(self) -> None:
        """One consume batch, then a checkpoint when one is due."""
        most = self.live_batch if self.live else CONSUME_BATCH
        msgs = drain(self.consumer, CONSUME_TIMEOUT_S, most)
        if self._callback_error is not None:
            err, self._callback_error = self._callback_error, None
            raise err
        now = time.monotonic()
        self.health.last_loop = now
        if msgs:
            self._last_consumed = now
            t_in = time.time()
            self.live = live(msgs, t_in)
            if self.live:
                self.live_batch = next_live_batch(self.live_batch, len(msgs))
            self.handle(msgs)
            if self.trace is not None:
                self._trace_batch(msgs, t_in)
        if now - self._last_watch >= WATCH_EVERY_S:
            self._last_watch = now
            self.dead_log.tick(now)
            self.stalls.tick(now, self._last_consumed)
        self.out.poll()
        if not (self.out.open or self.intake.lane_progress or self.inputs.dirty()
                or self.loaded_changes):
            return
        if self._checkpoint_due(len(msgs) < most, time.monotonic() - self.last_commit,
                                len(msgs) >= CONSUME_BATCH):
            self.commit()

    def _checkpoint_due(self, drained: bool, elapsed: float, behind: bool = False) -> bool:
        """Whether to checkpoint now, ``elapsed`` seconds after the last one: each
        interval, or at the record bound; sooner (``caught_up_s``, or at once for a
        barrier) once a batch drained what was there or while the input is live, unless
        a full batch of the largest size says the worker fell behind: a checkpoint per
        batch would then cost more than the batch and the lag would grow, so live input
        then checkpoints each ``live_behind_s``."""
        if elapsed >= self.interval_s or self.since_commit >= MAX_CHECKPOINT_RECORDS:
            return True
        if drained or (self.live and not behind):
            return elapsed >= self.caught_up_s or self._barrier_due()
        return self.live and elapsed >= self.live_behind_s

    def _trace_batch(self, msgs: list[Any], t_in: float) -> None:
        """A trace line: when the batch came and was handled, its size, and the newest
        record timestamp per input partition in it."""
        newest: dict[int, int] = {}
        for m in msgs:
            p, ts = m.partition(), m.timestamp()[1]
            if ts > newest.get(p, -1):
                newest[p] = ts
        parts = " ".join(f"{p}:{ts}" for p, ts in sorted(newest.items()))
        assert self.trace is not None
        self.trace.write(f"b {t_in:.4f} {time.time():.4f} {len(msgs)} {parts}\n")

    def _barrier_due(self) -> bool:
        """A barrier waits for this checkpoint: one a lane or an engine partition applied
        (its progress record goes in it), or one routed to a repartition topic (the
        engine partitions there see it once it commits).  Someone waits on a barrier, as
        on a row: it commits as soon as the input is drained."""
        if self.intake.lane_progress or any(part.barrier != part.progress
                                            for part in self.parts.values()):
            return True
        if not self.intake.routing.barrier_targets:
            return False
        return any(inp.cursor is not None and inp.committed_cursor is not None
                   and inp.cursor.barrier != inp.committed_cursor.barrier
                   for inp in self.inputs)

    # -- records -------------------------------------------------------------------
    def handle(self, msgs: list[Any]) -> None:
        """Dispatch one consume batch to the intake (source or repartition records)."""
        sources = self.wiring.sources
        source_run, repartitioned = self.intake.source_run, self.intake.repartitioned
        i, n = 0, len(msgs)
        while i < n:
            m = msgs[i]
            err = m.error()
            if err is not None:
                denied = consumer_refused(err.code(), m.topic(), self.config.app)
                if denied is not None:
                    raise denied
                if _fatal(err):
                    raise Fenced(f"consumer: {err.str()}")
                log.warning("consumer: %s", err.str())
                i += 1
                continue
            topic = m.topic()
            if topic in sources:
                i = source_run(msgs, i, topic)
            else:
                repartitioned(m, topic)
                i += 1
        self.since_commit += len(msgs)
        self._hand_over()

    def _hand_over(self) -> None:
        """Staged records to the engine partitions; a poison record rewinds (``intake``)."""
        if not self.intake.hand_over():
            self.rewind()

    # -- checkpoint ------------------------------------------------------------------
    def commit(self) -> None:
        """One checkpoint (``CheckpointRound``); an aborted one rewinds to the last."""
        t0 = time.monotonic()
        w0 = time.time()
        lane_progress = self.intake.lane_progress
        lanes = [(f"{LANES}/{inp.topic}:{inp.partition}", (inp.cursor.now, inp.cursor.barrier))
                 for key in lane_progress
                 if (inp := self.inputs.get(key)) is not None and inp.cursor is not None]
        try:
            done = self.round.run(self.parts, lanes, self.inputs, self.consumer)
        except Rewind as e:
            log.warning("checkpoint aborted (%s): rewinding to the last commit", e)
            self.rewind()
            return
        lane_progress.clear()
        self.loaded_changes = False
        self.since_commit = 0
        self.last_commit = time.monotonic()
        stats = self.stats
        stats["checkpoints"] += 1
        stats["dead"] += done.dead
        stats["changelog_bytes"] += done.changelog_bytes
        now = time.monotonic()
        if self.trace is not None:
            marks = " ".join(f"{k}={v:.4f}" for k, v in self.round.marks.items())
            self.trace.write(f"c {w0:.4f} {time.time():.4f} {marks}\n")
        self.collector.checkpointed(now)
        if self.metrics is not None:
            self.metrics.checkpointed(now - t0, stats, self.rows.counts)
            self.metrics.observe_parts(self)

    def rewind(self) -> None:
        """Back to the last commit: engine partitions from their databases, cursors from
        the committed metadata, the consumer to the committed offsets (to the start of a
        partition where nothing was committed yet)."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self.out.abort()
        self.intake.discard()
        self.intake.lane_progress.clear()
        self.assignment.reload()
        seeks = []
        for inp in self.inputs:
            read = inp.position is not None
            inp.rewind()
            if inp.lane is not None and inp.cursor is not None:
                self.assignment.open_lane(inp, inp.cursor)
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

    # -- rebalance -------------------------------------------------------------------
    def _on_assign(self, consumer: Any, tps: list[Any]) -> None:
        t0 = time.monotonic()
        opened = self.assignment.assign(consumer, tps, self._alive)
        self.loaded_changes |= any(part.touched for part in self.parts.values())
        self.health.assigned = True
        note_rebalance(self.metrics, "assigned", len(tps))
        seconds = time.monotonic() - t0
        log.info("assigned %d partition(s), %d engine partition(s) ready in %.3f s",
                 len(tps), opened, seconds)
        self.hooks.assigned(self, tps, seconds)

    def _alive(self) -> None:
        """The loop is busy, not stuck (``/healthz``): a restore calls this per record
        (and stops it when the worker was asked to stop)."""
        self.health.last_loop = time.monotonic()
        if self.stopping:
            raise Interrupted("stop requested")

    def _on_revoke(self, consumer: Any, tps: list[Any]) -> None:
        if tps:
            self._hand_over()
            self.commit()
        self.assignment.drop(tps)
        note_rebalance(self.metrics, "revoked", 0)
        self.hooks.revoked(self, tps)

    def _on_lost(self, consumer: Any, tps: list[Any]) -> None:
        log.warning("assignment lost (%d partitions): aborting the open checkpoint", len(tps))
        self.out.abort()
        self.intake.discard()
        self.assignment.reload()
        self.assignment.drop(tps)
        note_rebalance(self.metrics, "lost", 0)

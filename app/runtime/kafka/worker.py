"""The Kafka-mode worker: a faust app that runs the embedded Engine per Kafka partition.

Topology (ARCHITECTURE.md, Partitioning / Time and the watermark barrier)::

    source topics ──router agent──► kepl.<app>.repartition.<group> ──engine agent──► outputs
         ▲  (JSON, coerce_event;         (events + in-band barriers,      (one Engine per
     clock  bad records → DLQ)            tagged with their upstream)      partition)

What a router batch sends to one repartition partition travels as one *bundle* record
(``router.bundle``), so the engine hop costs one Kafka/faust message per batch and
partition rather than one per event.

The engine agent moves an Engine's clock only on barriers (time arrives in the stream),
and once a batch is durable it publishes the last barrier it applied per partition to
``kepl.<app>.progress`` (key ``group/partition``): "everything before watermark id X is
processed and its outputs are written", which is what the scenario runner waits for.

Crash safety: determinism plus idempotence, not Kafka transactions.  faust's
``exactly_once`` is not trustworthy (faust-streaming #323, #440, #517, #177); faust
tables write one changelog record per key, so a crash can leave half a batch; and a
transactional confluent-kafka producer cannot commit the offsets of faust's aiokafka
consumer (``send_offsets_to_transaction`` wants a confluent consumer's group metadata).
So the worker keeps its own state:

1. each engine partition's state is a RocksDB database (``PartitionStore``) whose writes
   are held in an overlay during a batch of input records (``take_events``);
2. after the batch, ONE changelog record per touched partition holds the batch's state
   writes (last value per key), the applied source offsets, and the batch's output rows;
   the output rows and the changelog record are produced together and flushed;
3. only after the broker acknowledged them does the local database commit the overlay
   together with the changelog offset (one ``WriteBatch``) — and only after the batch
   returns does faust ack (then commit) the input offsets.

A kill -9 at any point therefore leaves: input offsets at or behind the state (records
at or below the applied offsets are skipped on re-reading), a local database at a
changelog record boundary (it replays only the records after its marker; without a
local database the whole changelog partition), and output rows possibly written twice —
always with the same ``kepl.id`` (statement/context-partition/sequence), since the replay
is deterministic; ``reader.read_rows`` drops the repeats.  After a restore the outputs of
the last changelog record are published again, covering a crash between the two.  A
batch is atomic because it is one record, so no transaction is needed.  Each changelog
record names the record it continues (``prev``); a writer whose record does not land
right after it (another worker wrote the partition: a zombie) exits, and replay ignores
records that break the chain.

Snapshots keep the changelog bounded (``partition`` module docstring): after a batch,
a partition whose changelog grew past its ``SnapshotPolicy`` threshold writes its whole
state as snapshot parts, waits for their acknowledgement, moves its local marker past
them, and asks the broker to delete the records before the first part (``DeleteRecords``,
asynchronous; a failure only delays the truncation).  A replacement worker without local
state then loads the snapshot and replays the records after it.  Thresholds come from
``KEPL_SNAPSHOT_MIN_BYTES`` (floor, default 1 MiB), ``KEPL_SNAPSHOT_FACTOR`` (default 4)
and ``KEPL_SNAPSHOT_PART_BYTES`` (default 8 MiB); a floor of ``off`` writes none.

Process model: crash-only.  An agent that fails makes the process exit; its state is in
RocksDB and Kafka, and a restarted worker (static group membership: the same data dir
takes its partitions back at once) continues exactly.

Start: ``run_worker(config, bootstrap, data_dir)`` or
``python -m app.runtime.kafka.worker --config app.yaml --bootstrap host:port --data-dir DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.runtime.kafka.clock import publish_watermark
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import EnginePartition, InRecord, SnapshotPolicy
from app.runtime.kafka.router import (
    H_ERROR,
    H_ID,
    H_KIND,
    H_OFFSET,
    H_PARTITION,
    H_SEQ,
    H_SOURCE,
    H_STATEMENT,
    H_STREAM,
    H_TIME,
    H_TS,
    H_TYPE,
    H_UPSTREAM,
    OutRecord,
    Router,
    SourceRecord,
    bundle,
    headers_dict,
)
from app.runtime.kafka.store import ChangelogRecord
from app.runtime.kafka.topology import Group, Topology, ensure_topics, source_partitions

__all__ = ["build_app", "create_topics", "main", "publish_watermark", "run_worker"]

log = logging.getLogger("kepl.worker")

CRASH_HOOK_ENV = "KEPL_TEST_CRASH"
"""Fault injection for crash tests: ``point:n`` SIGKILLs the worker at ``point``
(``before_flush`` | ``after_flush`` of the n-th durable engine batch, ``mid_snapshot``:
the first part of the n-th snapshot of more than one part is durable, the others not)."""

SNAPSHOT_MIN_BYTES_ENV = "KEPL_SNAPSHOT_MIN_BYTES"
SNAPSHOT_FACTOR_ENV = "KEPL_SNAPSHOT_FACTOR"
SNAPSHOT_PART_BYTES_ENV = "KEPL_SNAPSHOT_PART_BYTES"

ROUTER_BATCH = 2000
"""Source records per router batch (one bundle per repartition partition and batch)."""
ENGINE_BATCH = 2000
"""Repartition records (bundles) per engine batch; also the most events one changelog
record covers."""
BATCH_WITHIN_S = 0.05
CRASH_EXIT_CODE = 70


# -- Kafka I/O (confluent-kafka: fast produce, simple changelog reads) ---------------


class Producer:
    """A confluent-kafka producer with delivery tracking; ``flush`` raises on any failure."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer as _P

        self._p = _P({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,  # ordered, no duplicates from internal retries
            "acks": "all",
            "linger.ms": 1,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "message.max.bytes": 64 * 1024 * 1024,
            "log_level": 3,
        })
        self.errors: list[str] = []

    def _check(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def produce(self, topic: str, value: bytes, partition: int | None = None,
                headers: list[tuple[str, bytes]] | None = None, key: bytes | None = None,
                on_delivery: Any = None) -> None:
        kwargs: dict[str, Any] = {"on_delivery": on_delivery or self._check}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                self._p.produce(topic, value, key, headers=headers, **kwargs)
                return
            except BufferError:
                self._p.poll(0.05)

    def send(self, out: OutRecord) -> None:
        self.produce(out.topic, out.value, out.partition, out.headers, out.key)

    def poll(self) -> None:
        self._p.poll(0)

    def flush(self) -> None:
        """Wait until everything produced is acknowledged (or failed: raise)."""
        while self._p.flush(10) > 0:
            log.warning("producer flush still waiting for the broker")
        if self.errors:
            errs, self.errors = self.errors, []
            raise RuntimeError(f"produce failed: {errs[0]} (+{len(errs) - 1} more)")

    async def flush_async(self) -> None:
        await asyncio.to_thread(self.flush)


def snapshot_policy_from_env(env: dict[str, str] | None = None) -> SnapshotPolicy | None:
    """The worker's ``SnapshotPolicy`` from ``KEPL_SNAPSHOT_*`` (None: snapshots off)."""
    env = dict(os.environ if env is None else env)
    default = SnapshotPolicy()
    floor = env.get(SNAPSHOT_MIN_BYTES_ENV, "").strip()
    if floor.lower() == "off":
        return None
    return SnapshotPolicy(
        floor=int(floor) if floor else default.floor,
        factor=float(env.get(SNAPSHOT_FACTOR_ENV) or default.factor),
        part_bytes=int(env.get(SNAPSHOT_PART_BYTES_ENV) or default.part_bytes))


class KafkaChangelog:
    """``ChangelogLog`` over the broker: watermarks, reads of a partition, truncation."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._admin: Any = None

    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": "kepl-restore",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed", "log_level": 3,
                         "fetch.max.bytes": 64 * 1024 * 1024,
                         # records deleted under a read must fail it, never skip ahead
                         "auto.offset.reset": "error"})

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(low, high): the first retained offset and the next offset to be written."""
        from confluent_kafka import TopicPartition

        c = self._consumer()
        try:
            low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            return int(low), int(high)
        finally:
            c.close()

    def start(self, topic: str, partition: int) -> int:
        return self.watermarks(topic, partition)[0]

    def end(self, topic: str, partition: int) -> int:
        return self.watermarks(topic, partition)[1]

    def delete_before(self, topic: str, partition: int, offset: int) -> None:
        """Ask the broker to delete the records before ``offset``; returns at once.

        Best effort: a failure is logged and only leaves the records longer (the next
        snapshot deletes them).
        """
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})

        def done(fut: Any) -> None:
            try:
                fut.result()
            except Exception as e:  # noqa: BLE001 - best effort, see docstring
                log.warning("deleting %s[%d] before %d failed: %s", topic, partition,
                            offset, e)

        try:
            futures = self._admin.delete_records([TopicPartition(topic, partition, offset)],
                                                 request_timeout=30, operation_timeout=30)
        except Exception as e:  # noqa: BLE001 - best effort, see docstring
            log.warning("deleting %s[%d] before %d failed: %s", topic, partition, offset, e)
            return
        for fut in futures.values():
            fut.add_done_callback(done)

    def read(self, topic: str, partition: int, start: int) -> Iterator[tuple[int, bytes]]:
        from confluent_kafka import KafkaError, TopicPartition

        c = self._consumer()
        try:
            tp = TopicPartition(topic, partition)
            low, high = c.get_watermark_offsets(tp, timeout=30)
            start = max(start, low)
            if start >= high:
                return
            c.assign([TopicPartition(topic, partition, start)])
            nxt = start
            while nxt < high:
                # ask for exactly what is left: consume() waits for the count or the timeout
                for m in c.consume(min(1000, high - nxt), 5.0):
                    if m.error() is not None:
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            return
                        raise RuntimeError(f"reading {topic}[{partition}]: {m.error()}")
                    nxt = m.offset() + 1
                    yield m.offset(), m.value()
        finally:
            c.close()


# -- the engine side of one group ----------------------------------------------------


def decode_in(message: Any) -> list[InRecord]:
    """A repartition-topic message (faust's) as ``InRecord``s."""
    return decode_repartition(headers_dict(message.headers), message.value)


def decode_repartition(h: dict[str, bytes], value: bytes) -> list[InRecord]:
    """The records of one repartition-topic message: a bundle's entries in order
    (``router.bundle``), or a single event or barrier."""
    kind = h.get(H_KIND, b"event").decode()
    if kind == "bundle":
        return [InRecord(k, up, off, t, ts, seq, payload)
                for k, t, up, off, ts, seq, payload in json.loads(value)]
    seq = h.get(H_SEQ)
    return [InRecord(
        kind=kind,
        upstream=h[H_UPSTREAM].decode(),
        offset=int(h[H_OFFSET]),
        type_name=h.get(H_TYPE, b"").decode(),
        ts=int(h.get(H_TS, b"0")),
        seq=int(seq) if seq is not None else None,
        payload=json.loads(value),
        raw=value,
    )]


class GroupRunner:
    """Engine partitions of one group in this worker, and the batch commit protocol."""

    def __init__(self, topology: Topology, group: Group, bootstrap: str, data_dir: Path,
                 upstreams: list[str], producer: Producer) -> None:
        cfg = topology.config
        self.group = group
        self.topic = cfg.repartition_topic(group.name)
        self.changelog_topic = cfg.changelog_topic(group.name)
        self.progress_topic = cfg.progress_topic
        self.dlq_topic = cfg.dlq_topic
        self.outputs = {s: cfg.output_topic(s) for s in group.statements}
        self.data_dir = data_dir / group.name
        self.upstreams = upstreams
        self.producer = producer
        self.changelog = KafkaChangelog(bootstrap)
        self.snapshots = snapshot_policy_from_env()
        self.parts: dict[int, EnginePartition] = {}
        self.lock = asyncio.Lock()
        hook = os.environ.get(CRASH_HOOK_ENV, "")
        self._crash_at = (hook.split(":")[0], int(hook.split(":")[1])) if ":" in hook else None
        self._batches = 0

    def _crash_hook(self, point: str) -> None:
        if self._crash_at is None or self._crash_at[0] != point:
            return
        self._batches += 1
        if self._batches >= self._crash_at[1]:
            log.warning("%s=%s: killing the worker at %s", CRASH_HOOK_ENV,
                        os.environ.get(CRASH_HOOK_ENV), point)
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    async def open(self, p: int) -> EnginePartition:
        """Restore partition ``p`` (local database + changelog tail) and re-publish the
        outputs of its last changelog record."""
        t0 = time.monotonic()
        part = EnginePartition(self.group, p, self.data_dir / str(p), self.upstreams,
                               self.changelog_topic, self.snapshots)
        last = await asyncio.to_thread(part.restore, self.changelog)
        if last is not None and last.outputs:
            self._send_outputs(p, last)
        if part.barrier is not None:  # the restored state may be all a waiting reader needs
            part.progress = part.barrier
            self._send_progress(part)
        await self.producer.flush_async()
        self.parts[p] = part
        log.info("restored %s[%d] in %.3f s (changelog at %d)", self.topic, p,
                 time.monotonic() - t0, part.cl_offset)
        return part

    def _send_outputs(self, p: int, rec: ChangelogRecord) -> None:
        for stmt, stream, cp, t, seq, row in rec.outputs:
            headers = [(H_STATEMENT, stmt.encode()), (H_STREAM, stream.encode()),
                       (H_PARTITION, cp.encode()), (H_TIME, str(t).encode()),
                       (H_ID, f"{stmt}/{cp}/{seq}".encode())]
            value = json.dumps(row, default=str, separators=(",", ":")).encode()
            self.producer.produce(self.outputs[stmt], value, p, headers, cp.encode())

    async def process(self, by_partition: dict[int, list[InRecord]]) -> None:
        """Apply one batch and make it durable (see module docstring, steps 1-3)."""
        async with self.lock:
            sealed: list[tuple[EnginePartition, ChangelogRecord]] = []
            for p in sorted(by_partition):
                part = self.parts.get(p) or await self.open(p)
                part.run(by_partition[p])
                rec = part.seal()
                if rec is not None:
                    sealed.append((part, rec))
            if not sealed:
                return
            offsets: dict[int, int] = {}
            sizes: dict[int, int] = {}
            for part, rec in sealed:
                self._send_outputs(part.partition, rec)
                for d in part.dead:
                    log.warning("dead letter from %s[%d]: %s at %s/%d", self.topic,
                                part.partition, d.reason, d.record.upstream, d.record.offset)
                    raw = d.record.raw or json.dumps(d.record.payload).encode()
                    self.producer.produce(self.dlq_topic, raw, 0, [
                        (H_ERROR, d.reason.encode()),
                        (H_SOURCE, d.record.upstream.replace(":", "/").encode()
                         + f"/{d.record.offset}".encode())])

                def done(err: Any, msg: Any, p: int = part.partition) -> None:
                    if err is None:
                        offsets[p] = msg.offset()
                    else:
                        self.producer.errors.append(str(err))

                value = rec.encode()
                sizes[part.partition] = len(value)
                self.producer.produce(self.changelog_topic, value, part.partition,
                                      on_delivery=done)
            self._crash_hook("before_flush")
            await self.producer.flush_async()
            self._crash_hook("after_flush")
            announce = [part for part, _ in sealed
                        if part.committed(offsets[part.partition], sizes[part.partition])]
            for part in announce:
                self._send_progress(part)
            if announce:  # durable before faust may commit the batch's input offsets
                await self.producer.flush_async()
            due = [part for part, _ in sealed if part.snapshot_due()]
            if due:
                await self._snapshot(due)

    async def _snapshot(self, parts: list[EnginePartition]) -> None:
        """Write the partitions' snapshots; once durable, truncate their changelogs."""
        t0 = time.monotonic()
        offsets: dict[int, list[int]] = {part.partition: [] for part in parts}
        counts = await asyncio.to_thread(self._produce_snapshots, parts, offsets)
        await self.producer.flush_async()
        for part in parts:
            first = part.snapshot_committed(sorted(offsets[part.partition]))
            self.changelog.delete_before(self.changelog_topic, part.partition, first)
            log.info("snapshot of %s[%d]: %d bytes in %d part(s) at %d..%d (%.3f s)",
                     self.topic, part.partition, part.snapshot_bytes,
                     counts[part.partition], first, part.cl_offset, time.monotonic() - t0)

    def _produce_snapshots(self, parts: list[EnginePartition],
                           offsets: dict[int, list[int]]) -> dict[int, int]:
        """Produce every part (in a thread: a large state takes a while to encode)."""
        counts: dict[int, int] = {}
        for part in parts:
            p = part.partition

            def done(err: Any, msg: Any, p: int = p) -> None:
                if err is None:
                    offsets[p].append(msg.offset())
                else:
                    self.producer.errors.append(str(err))

            n = 0
            for rec in part.snapshot_records():
                if n == 1 and self._crash_at is not None \
                        and self._crash_at[0] == "mid_snapshot":
                    self.producer.flush()
                    self._crash_hook("mid_snapshot")
                self.producer.produce(self.changelog_topic, rec.encode(), p,
                                      on_delivery=done)
                n += 1
            counts[p] = n
        return counts

    def _send_progress(self, part: EnginePartition) -> None:
        """Tell readers the last barrier this partition made durable."""
        if part.progress is None:
            return
        t, wid = part.progress
        value = json.dumps({"group": self.group.name, "partition": part.partition,
                            "t": t, "id": wid}).encode()
        self.producer.produce(self.progress_topic, value, 0,
                              key=f"{self.group.name}/{part.partition}".encode())

    async def drop(self, partitions: set[int]) -> None:
        """Partitions were revoked: forget their engines (another worker restores them)."""
        async with self.lock:
            for p in partitions:
                part = self.parts.pop(p, None)
                if part is not None:
                    part.discard()
                    part.close()

    def close(self) -> None:
        for part in self.parts.values():
            part.discard()
            part.close()
        self.parts.clear()


# -- the faust app ---------------------------------------------------------------------


def _crash(what: str) -> None:
    """Crash-only: an agent that fails leaves the process (its state is on disk/Kafka)."""
    log.critical("%s failed; the worker exits and recovers on restart\n%s", what,
                 traceback.format_exc())
    sys.stderr.flush()
    os._exit(CRASH_EXIT_CODE)


FETCH_MAX_WAIT_MS = 20


def _short_fetch_wait() -> None:
    """faust hard-codes ``fetch_max_wait_ms=1500`` for its aiokafka consumer.  A fetch
    long-poll then stalls partitions that get data while it is in flight (the repartition
    topic right after the router wrote to it) for up to 1.5 s.  Shorten it, in this
    process only, before the consumer starts."""
    from faust.transport.drivers import aiokafka as driver

    cls = driver.AIOKafkaConsumerThread
    if getattr(cls, "_kepl_patched", False):
        return
    original = cls._create_worker_consumer

    def create(self: Any, transport: Any) -> Any:
        consumer = original(self, transport)
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS
        return consumer

    cls._create_worker_consumer = create
    cls._kepl_patched = True


def _table_manager() -> type:
    """faust's TableManager sleeps 1 s before starting recovery "to let tables register";
    kepl declares no faust tables, so it starts at once (a third of the start-up time)."""
    from faust.tables import TableManager

    class NoTablesManager(TableManager):  # type: ignore[misc]
        async def on_start(self) -> None:
            if not self.should_stop:
                await self._update_channels()
                await self.recovery.start()

    return NoTablesManager


def instance_id(config: AppConfig, data_dir: Path) -> str:
    """A stable consumer-group instance id: the worker's identity is its state directory."""
    import hashlib
    import socket

    key = f"{socket.gethostname()}:{Path(data_dir).resolve()}"
    return f"kepl.{config.app}.{hashlib.sha1(key.encode()).hexdigest()[:12]}"


def build_app(config: AppConfig, bootstrap: str, data_dir: Path,
              topology: Topology | None = None) -> Any:
    """Create the topics and the faust app with its router and engine agents."""
    import faust

    _short_fetch_wait()
    topology = topology or Topology.plan(config)
    ensure_topics(bootstrap, topology.topic_specs())
    upstreams = [f"{t}:{p}" for t, p in source_partitions(bootstrap, config.source_topics)]
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    app = faust.App(
        f"kepl.{config.app}",
        broker=f"kafka://{bootstrap}",
        store="memory://",  # engine state is ours (PartitionStore), not faust tables
        datadir=str(data_dir / "faust"),
        autodiscover=False,
        web_enabled=False,
        topic_replication_factor=1,
        topic_partitions=1,
        topic_allow_declare=True,  # faust declares its own assignor topic
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        # Static membership: a worker restarted after a crash (same data dir) takes its
        # partitions back at once instead of waiting for the dead member's session to
        # time out (10 s).
        consumer_group_instance_id=instance_id(config, data_dir),
        broker_commit_interval=0.5,
        broker_session_timeout=10.0,
        broker_heartbeat_interval=1.0,
        broker_rebalance_timeout=10.0,
        stream_recovery_delay=0.0,
        stream_wait_empty=False,
        producer_acks=-1,
        processing_guarantee="at_least_once",
        value_serializer="raw",
        key_serializer="raw",
        TableManager=_table_manager(),
    )
    producer = Producer(bootstrap)
    router = Router(topology)
    repartition_topics = set(router.repartition.values())

    def topic(*names: str) -> Any:
        return app.topic(*names, value_type=bytes, key_type=bytes, value_serializer="raw",
                         key_serializer="raw", internal=False, allow_empty=True)

    @app.agent(topic(*config.source_topics), name="kepl.router")
    async def route(stream: Any) -> None:
        try:
            async for events in stream.take_events(ROUTER_BATCH, within=BATCH_WITHIN_S):
                outs: list[OutRecord] = []
                for ev in events:
                    m = ev.message
                    rec = SourceRecord(m.topic, m.partition, m.offset,
                                       int(round((m.timestamp or 0) * 1000)),
                                       headers_dict(m.headers), m.value)
                    outs += router.route(rec)
                for out in bundle(outs, repartition_topics):
                    producer.send(out)
                await producer.flush_async()  # forwarded before faust may commit the input
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - crash-only (see _crash)
            _crash("router agent")

    runners: list[GroupRunner] = []
    for g in topology.active_groups():
        runner = GroupRunner(topology, g, bootstrap, data_dir, upstreams, Producer(bootstrap))
        runners.append(runner)

        async def engine_agent(stream: Any, runner: GroupRunner = runner) -> None:
            try:
                async for events in stream.take_events(ENGINE_BATCH, within=BATCH_WITHIN_S):
                    assigned = {tp.partition for tp in app.consumer.assignment()
                                if tp.topic == runner.topic}
                    by_partition: dict[int, list[InRecord]] = {}
                    size = 0
                    for ev in events:
                        m = ev.message
                        if m.partition not in assigned:
                            continue
                        recs = decode_in(m)
                        by_partition.setdefault(m.partition, []).extend(recs)
                        size += len(recs)
                        if size >= ENGINE_BATCH:  # bounds a changelog record
                            await runner.process(by_partition)
                            by_partition, size = {}, 0
                    if by_partition:
                        await runner.process(by_partition)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - crash-only (see _crash)
                _crash(f"engine agent {runner.group.name}")
            finally:
                runner.close()

        app.agent(topic(runner.topic), name=f"kepl.engine.{g.name}")(engine_agent)

    @app.on_partitions_revoked.connect
    async def on_revoked(*args: Any, revoked: Any = None, **kwargs: Any) -> None:
        tps = revoked if revoked is not None else (args[-1] if args else set())
        for r in runners:
            await r.drop({tp.partition for tp in tps if tp.topic == r.topic})

    @app.task
    async def install_dump() -> None:
        """SIGUSR1 logs the consumer's view and every task's stack (stall diagnostics)."""
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, _dump_state, app)

    app.kepl_runners = runners  # for tests and introspection
    return app


def _dump_state(app: Any) -> None:
    """Log the consumer's positions and every task's stack (``kill -USR1 <worker>``)."""
    lines = [f"kepl worker state dump: rebalancing={app.rebalancing}"]
    try:
        c = app.consumer
        lines.append(f"assignment={sorted(map(tuple, c.assignment()))}")
        active = getattr(c, "_active_partitions", None) or []
        paused = getattr(c, "_paused_partitions", None) or []
        lines.append(f"faust active={sorted(map(tuple, active))} "
                     f"paused={sorted(map(tuple, paused))} flow_active={c.flow_active}")
        inner = c._thread._consumer
        for tp in sorted(inner.assignment()):
            st = inner._subscription.subscription.assignment.state_value(tp)
            lines.append(f"  {tp}: position={getattr(st, '_position', '?')} "
                         f"highwater={c.highwater(tp)} "
                         f"paused={getattr(st, 'paused', '?')} "
                         f"awaiting_reset={getattr(st, 'awaiting_reset', '?')}")
    except Exception as e:  # noqa: BLE001 - diagnostics only
        lines.append(f"(consumer state unavailable: {e!r})")
    for task in asyncio.all_tasks():
        frames = task.get_stack(limit=3)
        where = " <- ".join(f"{f.f_code.co_filename.rsplit('/', 2)[-1]}:{f.f_lineno}"
                            for f in frames)
        lines.append(f"task {task.get_name()}: {where}")
    log.warning("\n".join(lines))


def create_topics(config: AppConfig, bootstrap: str) -> list[str]:
    """Create every topic the app needs (``kepl deploy``); one line per topic."""
    specs = Topology.plan(config).topic_specs()
    ensure_topics(bootstrap, specs)
    return [f"{name} ({parts} partition{'s' if parts != 1 else ''})"
            for name, (parts, _) in sorted(specs.items())]


def run_worker(config: AppConfig, bootstrap: str, data_dir: Path,
               loglevel: str = "warning") -> None:
    """Run a worker until it is stopped (SIGTERM/SIGINT); blocks."""
    import faust

    app = build_app(config, bootstrap, Path(data_dir))
    worker = faust.Worker(app, loglevel=loglevel, quiet=True, redirect_stdouts=False)
    worker.spinner = None  # no terminal spinner in logs
    worker.execute_from_commandline()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m app.runtime.kafka.worker",
                                 description="Run a kepl Kafka-mode worker.")
    ap.add_argument("--config", required=True, help="app YAML: {app, schemas, topics, statements}")
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS",
                                                          "127.0.0.1:9092"))
    ap.add_argument("--data-dir", required=True, help="directory for the RocksDB state")
    ap.add_argument("--loglevel", default="warning")
    args = ap.parse_args(argv)
    logging.basicConfig(level=args.loglevel.upper(), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    run_worker(AppConfig.from_file(args.config), args.bootstrap, Path(args.data_dir),
               args.loglevel)
    return 0


if __name__ == "__main__":
    sys.exit(main())

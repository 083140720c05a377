"""The Kafka-mode worker: start-up, identity and settings around the consumer loop.

``run_worker(config, bootstrap, data_dir)`` (or ``python -m app.runtime.kafka.worker
--config app.yaml --bootstrap host:port --data-dir DIR``) creates the app's topics,
plans its layout against the source topics as the broker has them, and runs the
consumer loop (``loop.Worker``) until SIGTERM/SIGINT.

The data plane is confluent-kafka throughout: batch consume, one transactional producer
per process, one transaction per checkpoint (``checkpoint``), RocksDB state per engine
partition restored from its changelog (``partition``, ``recovery``).  faust-streaming
was the first host of this loop; measured on this machine its agent path reads about
0.04x of what confluent-kafka's batch consume reads, its confluent driver has no
transactions, topic creation or co-partitioning assignor, and its aiokafka consumer
cannot commit offsets inside a confluent-kafka transaction, so it does not carry the hot
path (README, "Kafka data plane").

Process model: crash-only.  Whatever fails leaves the process; its state is in RocksDB
and Kafka, and a restarted worker (same data dir: same group instance id and
transactional id) fences its previous incarnation and continues exactly.

Snapshots keep the changelog bounded (``partition`` module docstring); thresholds come
from ``KEPL_SNAPSHOT_MIN_BYTES`` (floor, default 1 MiB, ``off`` writes none),
``KEPL_SNAPSHOT_FACTOR`` (default 4) and ``KEPL_SNAPSHOT_PART_BYTES`` (default 256 KiB; one
part is written per checkpoint).
The checkpoint interval is ``KEPL_COMMIT_INTERVAL_MS`` (default 100).  A worker that
holds records or has input lag without progress for ``KEPL_STALL_WARN_S`` (default 30)
says what it waits for and reports unready (``health``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.epl.errors import EplError
from app.runtime.catalog import NotSupported
from app.runtime.kafka import brokers, client, deployments, memory
from app.runtime.kafka.checkpoint import CrashSeam
from app.runtime.kafka.clock import publish_watermark
from app.runtime.kafka.config import AppConfig, ConfigError
from app.runtime.kafka.loop import Worker, WorkerHooks
from app.runtime.kafka.partition import EnginePartition, SnapshotPolicy
from app.runtime.kafka.recovery import KafkaChangelog
from app.runtime.kafka.refusals import NotAuthorized
from app.runtime.kafka.shutdown import SHUTDOWN
from app.runtime.kafka.topology import Topology, ensure_topics, source_partitions

__all__ = ["CRASH_HOOK_ENV", "Announcer", "KafkaChangelog", "build_worker",
           "create_topics", "main", "publish_watermark", "run_worker"]

log = logging.getLogger("kepl.worker")

SNAPSHOT_MIN_BYTES_ENV = "KEPL_SNAPSHOT_MIN_BYTES"
SNAPSHOT_FACTOR_ENV = "KEPL_SNAPSHOT_FACTOR"
SNAPSHOT_PART_BYTES_ENV = "KEPL_SNAPSHOT_PART_BYTES"


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


INSTANCE_ID_ENV = "KEPL_INSTANCE_ID"


def instance_id(config: AppConfig, data_dir: Path) -> str:
    """A stable consumer-group instance id (also the transactional id): ``KEPL_INSTANCE_ID``
    if set (a StatefulSet pod name), else derived from the host and the state directory."""
    import hashlib
    import socket

    given = os.environ.get(INSTANCE_ID_ENV, "").strip()
    if given:
        return f"kepl.{config.app}.{given}"

    key = f"{socket.gethostname()}:{Path(data_dir).resolve()}"
    return f"kepl.{config.app}.{hashlib.sha1(key.encode()).hexdigest()[:12]}"


def build_worker(config: AppConfig, bootstrap: str, data_dir: Path,
                 metrics_port: int | None = None) -> Worker:
    """Create the topics, plan the layout on the broker's source partitions, and build
    the consumer loop (``metrics_port``: serve metrics and probes there)."""
    client.configure(config.kafka)
    topology = plan_on_broker(config, bootstrap)
    deployments.apply_resets(topology, deployments.check(topology, bootstrap))
    ensure_topics(bootstrap, topology.topic_specs())
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    return Worker(config, topology, bootstrap, data_dir, instance_id(config, data_dir),
                  snapshot_policy_from_env(), metrics_port, seam=crash_seam_from_env())


def plan_on_broker(config: AppConfig, bootstrap: str) -> Topology:
    """The app's layout over its source topics as the broker has them (missing ones are
    created with the file's ``partitions``)."""
    declared = Topology.plan(config).topic_specs()
    ensure_topics(bootstrap, {t: declared[t] for t in config.source_topics})
    counts: dict[str, int] = {}
    for t, _ in source_partitions(bootstrap, config.source_topics):
        counts[t] = counts.get(t, 0) + 1
    return Topology.plan(config, counts)


def create_topics(config: AppConfig, bootstrap: str) -> list[str]:
    """Create every topic the app needs (``kepl deploy``); one line per topic."""
    specs = plan_on_broker(config, bootstrap).topic_specs()
    ensure_topics(bootstrap, specs)
    return [f"{name} ({parts} partition{'s' if parts != 1 else ''})"
            for name, (parts, _) in sorted(specs.items())]


class Announcer(WorkerHooks):
    """Says what a worker does in a few lines (``kepl worker``): its partitions after each
    rebalance, the restore time of each engine partition and where its metrics are
    served.  Only rebalances announce."""

    def __init__(self, announce: Callable[[str], None], port_told: bool) -> None:
        self.announce = announce
        self.port_told = port_told

    def assigned(self, worker: Worker, tps: list[Any], seconds: float) -> None:
        if worker.http is not None and not self.port_told:
            self.port_told = True
            self.announce(f"metrics and probes on port {worker.http.server_address[1]} "
                          "(/metrics, /healthz, /readyz)")
        names = ", ".join(f"{tp.topic}[{tp.partition}]"
                          for tp in sorted(tps, key=lambda tp: (tp.topic, tp.partition)))
        self.announce(f"assigned {len(tps)} partition(s){': ' + names if names else ''} "
                      f"(ready in {seconds:.3f} s)")

    def revoked(self, worker: Worker, tps: list[Any]) -> None:
        if tps:
            self.announce(f"revoked {len(tps)} partition(s)")

    def restored(self, worker: Worker, part: EnginePartition, seconds: float) -> None:
        self.announce(f"restored {part.group.name}[{part.partition}] in {seconds:.3f} s "
                      f"(changelog at {part.cl_offset})")
        if part.rebuilt:
            self.announce(part.rebuilt)


CRASH_HOOK_ENV = "KEPL_TEST_CRASH"
"""Crash tests: ``point:n`` (``checkpoint.POINTS``) SIGKILLs the worker the n-th time a
checkpoint reaches ``point``; read here, at the entry point, never in the loop."""


def crash_seam_from_env() -> CrashSeam | None:
    """Crash tests: ``KEPL_TEST_CRASH=point:n`` (``checkpoint.POINTS``) makes the worker
    kill itself there; read once, here at the entry point."""
    spec = os.environ.get(CRASH_HOOK_ENV, "").strip()
    return CrashSeam(spec) if spec else None


def run_worker(config: AppConfig, bootstrap: str, data_dir: Path,
               loglevel: str = "warning", metrics_port: int | None = None,
               announce: Callable[[str], None] | None = None) -> None:
    """Run a worker until it is stopped (SIGTERM/SIGINT); blocks.  ``announce``: a
    start-up banner, rebalances, restores and a closing line go there."""
    SHUTDOWN.install()  # a signal while the broker is awaited exits at once
    memory.limit_arenas()  # before the client and database threads start
    brokers.install()
    client.configure(config.kafka)
    if announce is None:
        worker = build_worker(config, bootstrap, Path(data_dir), metrics_port)
        watch = deployments.VersionWatch(worker.topology, bootstrap, worker)
        worker.run()
        watch.finish()
        return
    topology = plan_on_broker(config, bootstrap)
    deployments.apply_resets(topology, deployments.check(topology, bootstrap))
    ensure_topics(bootstrap, topology.topic_specs())
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    identity = instance_id(config, data_dir)
    metrics = ("off" if metrics_port is None else
               "any free port" if metrics_port == 0 else f"port {metrics_port}")
    announce(f"app {config.app}, bootstrap {bootstrap}, consumer group kepl.{config.app}, "
             f"instance {identity}, state {data_dir}, metrics {metrics}")
    worker = Worker(config, topology, bootstrap, data_dir, identity,
                    snapshot_policy_from_env(), metrics_port,
                    hooks=Announcer(announce, port_told=metrics_port != 0),
                    seam=crash_seam_from_env())
    watch = deployments.VersionWatch(topology, bootstrap, worker)
    t0 = time.monotonic()
    worker.run()
    s = worker.stats
    announce(f"stopped after {time.monotonic() - t0:.1f} s: {s['events']} event(s), "
             f"{s['checkpoints']} checkpoint(s), {s['dead']} dead letter(s)")
    watch.finish()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m app.runtime.kafka.worker",
                                 description="Run a kepl Kafka-mode worker.")
    ap.add_argument("--config", required=True, help="app YAML: {app, schemas, topics, statements}")
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS",
                                                          "127.0.0.1:9092"))
    ap.add_argument("--data-dir", required=True, help="directory for the RocksDB state")
    ap.add_argument("--loglevel", default="warning")
    ap.add_argument("--metrics-port", type=int, default=None,
                    help="serve /metrics, /healthz and /readyz on this port (0: any free)")
    ap.add_argument("--kafka-config", default=None,
                    help="librdkafka properties file for every Kafka client (security)")
    args = ap.parse_args(argv)
    SHUTDOWN.install()
    if args.kafka_config:
        os.environ[client.CONFIG_FILE_ENV] = args.kafka_config
    logging.basicConfig(level=args.loglevel.upper(), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        config = AppConfig.from_file(args.config)
        Topology.plan(config)
    except ConfigError as e:
        print(f"kepl: worker: {e}", file=sys.stderr)
        return 2
    except (EplError, NotSupported) as e:
        what = f"line {e.line}:{e.column} of its text: {e.message}" \
            if isinstance(e, EplError) else f"not supported yet: {e}"
        print(f"kepl: worker: {args.config}: a statement is invalid: {what} (kepl check "
              "lists every error of a statement file)", file=sys.stderr)
        return 2
    try:
        client.configure(config.kafka)
        client.probe(args.bootstrap, "worker")
    except (client.BrokerUnavailable, client.ClientConfigError) as e:
        print(f"kepl: {e}", file=sys.stderr)
        return 1
    try:
        run_worker(config, args.bootstrap, Path(args.data_dir),
                   args.loglevel, args.metrics_port)
    except deployments.OtherVersion as e:
        print(f"kepl: {e}", file=sys.stderr)
        return deployments.EXIT_OTHER_VERSION
    except NotAuthorized as e:
        print(f"kepl: worker: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

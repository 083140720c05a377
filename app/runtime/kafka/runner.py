"""``kepl scenario run --kafka``: a conformance scenario against a real broker.

Same contract as ``app.conformance.runner.run_scenario_embedded`` (the first difference,
or None) and the same step driver (``replay``).  Per scenario: fresh topic names (the app
is named after the scenario plus a random suffix), a worker subprocess
(``python -m app.runtime.kafka.worker``), sends produced to the type's topic with the
runtime time as record timestamp and a ``kepl.seq`` header (production order), ``time``
steps published as watermarks.  Before an ``expect`` the runner publishes a watermark at
the current time and waits until every engine partition reports it on the progress
topic; by then the partition's outputs are durable, so reading the output topics to
their end gives everything produced so far.  Rows are compared per statement in order
within a context partition and as a multiset across partitions.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from app.conformance.runner import Collected, replay, rows_equal, scenario_functions
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.kafka import client
from app.runtime.kafka.children import die_with_parent
from app.runtime.kafka.clock import Clock
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.mr_routing import mr_route_in
from app.runtime.kafka.reader import FETCH_WAIT_MS, OutputRow, RowReader, drain
from app.runtime.kafka.router import H_SEQ
from app.runtime.kafka.topology import Topology, ensure_topics
from app.runtime.kafka.worker import CRASH_HOOK_ENV

REPO_ROOT = Path(__file__).resolve().parents[3]
SETTLE_TIMEOUT_S = 60.0


class WorkerProcess:
    """A worker subprocess with its config file, data dir and log."""

    def __init__(self, config: AppConfig, bootstrap: str, workdir: Path,
                 loglevel: str | None = None) -> None:
        self.config_path = workdir / "app.yaml"
        self.config_path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
        self.data_dir = workdir / "data"
        self.log_path = workdir / "worker.log"
        self.bootstrap = bootstrap
        self.loglevel = loglevel or os.environ.get("KEPL_WORKER_LOGLEVEL", "warning")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str] | None = None, args: list[str] | None = None
              ) -> None:
        """Start the subprocess (``env``: extra environment variables; ``args``: extra
        worker arguments).  It is killed when the thread that starts it ends, however
        that happens (a ``--time-limit`` kill of the scenario runner included)."""
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app.runtime.kafka.worker",
                 "--config", str(self.config_path), "--bootstrap", self.bootstrap,
                 "--data-dir", str(self.data_dir), "--loglevel", self.loglevel,
                 *(args or [])],
                cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                preexec_fn=die_with_parent(signal.SIGKILL))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9 (crash tests)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout_s: float = 15.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Progress:
    """Follows ``kepl.<app>.progress``: the last barrier each engine partition applied."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer(client.consumer_conf({"bootstrap.servers": bootstrap,
                                                       "group.id": "kepl-progress",
                                                       "enable.auto.commit": False,
                                                       "fetch.wait.max.ms": FETCH_WAIT_MS,
                                                       "log_level": 3}))
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self.latest: dict[str, str] = {}

    def wait(self, keys: list[str], wid: str, timeout_s: float,
             alive: Any = None) -> None:
        """Block until every key (``group/partition``) reports watermark ``wid``."""
        deadline = time.monotonic() + timeout_s
        while any(self.latest.get(k) != wid for k in keys):
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers did not reach watermark {wid} in {timeout_s} s")
            if alive is not None and not alive():
                raise RuntimeError("the worker exited")
            for m in drain(self.consumer, 0.05):
                if m.error() is None and m.key() is not None:
                    self.latest[m.key().decode()] = json.loads(m.value())["id"]

    def close(self) -> None:
        self.consumer.close()


class KafkaApp:
    """An app under test: topics, a worker, a producer, a clock, readers (tests reuse it)."""

    def __init__(self, config: AppConfig, bootstrap: str, workdir: Path | None = None,
                 start: bool = False) -> None:
        """Plan, create the topics; ``start`` starts the worker first (it overlaps)."""
        from confluent_kafka import Producer

        self.config = config
        self.bootstrap = bootstrap
        client.configure(config.kafka)
        self.topology = Topology.plan(config)
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"kepl-{config.app}-"))
        self.worker = WorkerProcess(config, bootstrap, self.workdir)
        # records carry runtime time (scenarios: 1970) as timestamp: keep them
        specs = self.topology.topic_specs()
        # source topics first (the worker would create them with default retention),
        # then the worker's start-up overlaps with creating the rest (both create)
        ensure_topics(bootstrap, {t: specs[t] for t in config.source_topics})
        if start:
            self.worker.start()
        ensure_topics(bootstrap, specs)
        self.producer = Producer(client.conf({"bootstrap.servers": bootstrap,
                                              "enable.idempotence": True,
                                              "linger.ms": 1, "log_level": 3}))
        self.clock = Clock(bootstrap, config)
        self.progress = Progress(bootstrap, config.progress_topic)
        self.keys = self.topology.progress_keys()
        self.seq = 0
        self.now = 0
        self.restarts = 0

    def send(self, type_name: str, event: dict[str, Any] | bytes,
             timestamp_ms: int | None = None, partition: int | None = None) -> None:
        """Produce one event (or raw bytes) to its type's topic (``partition``: that
        source partition, else the producer's choice)."""
        self.seq += 1
        value = event if isinstance(event, bytes) else json.dumps(event).encode()
        ts = self.now if timestamp_ms is None else timestamp_ms
        kwargs: dict[str, Any] = {"timestamp": ts} if ts > 0 else {}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                self.producer.produce(self.config.topic_of(type_name), value,
                                      headers=[(H_SEQ, str(self.seq).encode())], **kwargs)
                break
            except BufferError:
                self.producer.poll(0.05)

    def advance(self, t_ms: int) -> str:
        """Publish a watermark at ``t_ms`` (after every send so far)."""
        self.producer.flush(30)
        self.now = t_ms
        return self.clock.publish(t_ms)

    def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Wait until the workers processed everything sent so far.

        A worker that died is started again while ``self.restarts`` allows (crash tests).
        """
        wid = self.advance(self.now)
        while True:
            try:
                self.progress.wait(self.keys, wid, timeout_s, self.worker.alive)
                return
            except RuntimeError:
                if self.worker.alive() or self.restarts <= 0:
                    raise RuntimeError(f"the worker exited; worker log:\n"
                                       f"{self.worker.log_tail()}") from None
                self.restarts -= 1
                self.worker.start()
            except TimeoutError as e:
                raise RuntimeError(f"{e}; worker log:\n{self.worker.log_tail()}") from None

    def close(self, graceful: bool = True) -> None:
        """Stop the worker (``graceful=False``: kill it, for throw-away apps)."""
        if graceful:
            self.worker.stop()
        else:
            self.worker.kill()
        self.progress.close()
        self.clock.close()
        self.producer.flush(10)
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def delete_topics(self) -> None:
        """Best effort: drop the app's topics (scenario topics are single-use)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(client.conf({"bootstrap.servers": self.bootstrap,
                                         "log_level": 0}))
        topics = list(self.topology.topic_specs())
        for fut in admin.delete_topics(topics, operation_timeout=10).values():
            try:
                fut.result()
            except Exception:  # noqa: BLE001 - clean-up only
                pass


MR_PARTITIONS = 2
"""Engine partitions a scenario's match_recognize statements are spread over when their
partition by allows it (``mr_routing``), so that ``--kafka`` runs exercise the routing."""


def scenario_config(doc: dict[str, Any], source_partitions: int = 1) -> AppConfig:
    """An app config for a scenario, with unique topic names; each match_recognize
    statement that can be routed by its partition by gets ``MR_PARTITIONS``."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", str(doc.get("name", "scenario")))[:80]
    app = f"{base}-{uuid.uuid4().hex[:8]}"
    statements = [{"name": s.get("name") or f"s{i}", "epl": str(s["epl"])}
                  for i, s in enumerate(doc["statements"])]
    # event types declared by 'create schema' need a source topic too
    catalog = Catalog.from_schemas(doc.get("schemas") or {},
                                   functions=scenario_functions(doc))
    plans = [plan_statement(catalog, s["epl"], s["name"]) for s in statements]
    schemas = catalog.schemas
    routed = {p.name: MR_PARTITIONS for p in plans
              if p.pipeline is not None and p.pipeline.match_recognize is not None
              and mr_route_in(p, plans, schemas)[0] is not None}
    return AppConfig.from_dict({
        "app": app,
        "schemas": schemas,
        "topics": {t: f"kepl.{app}.in.{re.sub(r'[^A-Za-z0-9._-]', '_', t)}" for t in schemas},
        "statements": statements,
        "partitions": source_partitions,
        **({"context_partitions": routed} if routed else {}),
        **({"functions": doc["functions"]} if doc.get("functions") else {}),
    })


def arrange(expected: list[Any], rows: list[OutputRow]) -> list[dict[str, Any]]:
    """Actual rows in the expected order where only the interleaving of context
    partitions differs (order inside each partition is kept)."""
    lanes: dict[str, list[OutputRow]] = {}
    for r in rows:
        lanes.setdefault(r.context_partition, []).append(r)
    if len(lanes) <= 1:
        return [r.row for r in rows]
    heads = {k: 0 for k in lanes}
    out: list[dict[str, Any]] = []
    for e in expected:
        for k, lane in lanes.items():
            i = heads[k]
            if i < len(lane) and isinstance(e, dict) and rows_equal(e, lane[i].row):
                out.append(lane[i].row)
                heads[k] = i + 1
                break
        else:
            break
    for k, lane in lanes.items():
        out.extend(r.row for r in lane[heads[k]:])
    return out


def run_scenario_kafka(doc: dict[str, Any], bootstrap: str, crash_at: str | None = None,
                       workers: int = 1, source_partitions: int = 1) -> str | None:
    """Run one scenario through a Kafka-mode worker; the first difference, or None.

    ``crash_at`` (``before_flush:n`` / ``after_flush:n``) kills the worker at its n-th
    batch and starts it again: the outcome must not change (crash tests).
    ``workers``: worker processes in the consumer group (only the first is restarted);
    ``source_partitions``: partitions of each source topic, the sends spread over them
    in turn (their events merge at each watermark).
    """
    config = scenario_config(doc, source_partitions)
    kapp = KafkaApp(config, bootstrap)
    kapp.worker.start(env={CRASH_HOOK_ENV: crash_at} if crash_at else None)
    kapp.restarts = 1 if crash_at else 0
    extra: list[WorkerProcess] = []
    for i in range(1, workers):
        workdir = kapp.workdir / f"worker{i}"
        workdir.mkdir()
        extra.append(WorkerProcess(config, bootstrap, workdir))
        extra[-1].start()
    names = [p.name for p in kapp.topology.plans]
    collected: dict[str, Collected] = {n: Collected() for n in names}
    out_topics = sorted({t for t, _ in kapp.topology.output_topics().values()})
    expects = [s.get("expect") or {} for s in doc["steps"]
               if isinstance(s, dict) and "expect" in s]
    settled = 0
    reader: RowReader | None = None
    try:
        reader = RowReader(bootstrap, out_topics) if out_topics else None

        def settle() -> None:
            nonlocal settled
            kapp.settle()
            rows = reader.read_available() if reader is not None else []
            exp = expects[settled] if settled < len(expects) else {}
            settled += 1
            for stmt, c in collected.items():
                mine = [r for r in rows if r.statement == stmt]
                want = exp.get(stmt) if isinstance(exp, dict) else None
                want = want if isinstance(want, dict) else {}
                c.new[:] = arrange(want.get("new") or [],
                                   [r for r in mine if r.stream == "insert"])
                c.old[:] = arrange(want.get("old") or [],
                                   [r for r in mine if r.stream == "remove"])

        def send(type_name: str, event: dict[str, Any]) -> None:
            kapp.send(type_name, event, partition=kapp.seq % source_partitions)

        return replay(doc, kapp.advance, send, collected, kapp.topology.catalog,
                      lambda: kapp.now, settle)
    finally:
        if reader is not None:
            reader.close()
        for w in extra:
            w.kill()
        kapp.close(graceful=False)
        kapp.delete_topics()

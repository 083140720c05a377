"""A worker's health, readiness and Prometheus metrics, served over HTTP.

``/healthz``: the consumer loop turned within ``LIVE_S`` (a wedged loop fails it, so
Kubernetes restarts the pod).  ``/readyz``: partitions are assigned and restored and
nothing is stalled (see ``Stalls``).  ``/metrics``: the Prometheus exposition of the
worker's registry.  The loop updates the figures once per checkpoint, never per event.
``METRICS`` names every series a worker exports (the Helm chart's dashboard and alerts
query only these, tests/helm checks it); docs/monitoring.md says what
each one means.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from app.runtime.kafka.eventtime import LATE
from app.runtime.kafka.statesize import StateSizes

LIVE_S = 30.0
STALL_ENV = "KEPL_STALL_WARN_S"
DEFAULT_STALL_S = 30.0
"""Seconds the oldest waiting record may stay unreleased before the worker says so."""
LAST_EXIT = "last-exit"
"""File in the data directory holding the exit code of a worker that stopped itself
(3: fenced); the next worker on that directory exports it and removes it."""

METRICS: dict[str, str] = {
    "kepl_events_in": "counter",
    "kepl_rows_out": "counter",
    "kepl_dead_letters": "counter",
    "kepl_checkpoints": "counter",
    "kepl_checkpoint_seconds": "histogram",
    "kepl_changelog_bytes": "counter",
    "kepl_restore_seconds": "histogram",
    "kepl_consumer_lag": "gauge",
    "kepl_waiting_records": "gauge",
    "kepl_stalled": "gauge",
    "kepl_input_lost": "counter",
    "kepl_processing_seconds": "counter",
    "kepl_statement_processing_seconds": "counter",
    "kepl_statement_info": "gauge",
    "kepl_state_bytes": "gauge",
    "kepl_rebalances": "counter",
    "kepl_assigned_partitions": "gauge",
    "kepl_previous_exit_code": "gauge",
    "kepl_late_events": "gauge",
}
"""Every metric family of a worker and its Prometheus type."""

_SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",),
             "histogram": ("_bucket", "_sum", "_count", "_created")}


def series_names() -> set[str]:
    """The sample names a scrape of a worker can hold (``kepl_rows_out_total``, ...)."""
    return {name + suffix for name, kind in METRICS.items() for suffix in _SUFFIXES[kind]}


@dataclass
class Health:
    """What the probes answer; written by the loop thread, read by the HTTP thread."""

    last_loop: float = field(default_factory=time.monotonic)
    assigned: bool = False
    stalled: str = ""
    """Why the worker is not making progress (empty when it is)."""

    def live(self) -> bool:
        return time.monotonic() - self.last_loop < LIVE_S

    def ready(self) -> tuple[bool, str]:
        if not self.assigned:
            return False, "no partitions assigned yet"
        if self.stalled:
            return False, self.stalled
        return True, "ready"


class Metrics:
    """The worker's Prometheus figures, on a registry of its own."""

    def __init__(self, app: str, data_dir: Path | None = None) -> None:
        """``data_dir``: the worker's state directory, where a previous worker that
        stopped itself left its exit code (``LAST_EXIT``)."""
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r, lbl = self.registry, {"app": app}
        self.events = Counter("kepl_events_in", "Source events decoded", registry=r,
                              labelnames=["app"]).labels(**lbl)
        self.rows = Counter("kepl_rows_out", "Output rows produced, per statement",
                            ["app", "statement"], registry=r)
        self.dead = Counter("kepl_dead_letters", "Records sent to the dead-letter topic",
                            registry=r, labelnames=["app"]).labels(**lbl)
        self.checkpoints = Counter("kepl_checkpoints", "Committed checkpoints", registry=r,
                                   labelnames=["app"]).labels(**lbl)
        self.checkpoint_s = Histogram(
            "kepl_checkpoint_seconds", "Time to seal and commit one checkpoint", ["app"],
            registry=r, buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10)
        ).labels(**lbl)
        self.changelog_bytes = Counter("kepl_changelog_bytes", "Changelog bytes written",
                                       registry=r, labelnames=["app"]).labels(**lbl)
        self.restore_s = Histogram("kepl_restore_seconds", "Restore time per engine partition",
                                   ["app"], registry=r,
                                   buckets=(.01, .05, .1, .5, 1, 5, 10, 30, 60)).labels(**lbl)
        self.lag = Gauge("kepl_consumer_lag", "Records behind the end of an input partition",
                         ["app", "topic", "partition"], registry=r)
        self.waiting = Gauge("kepl_waiting_records",
                             "Records held in memory until a watermark releases them",
                             registry=r, labelnames=["app"]).labels(**lbl)
        self.stalled = Gauge("kepl_stalled", "1 while the worker reports a stall",
                             registry=r, labelnames=["app"]).labels(**lbl)
        late = Gauge("kepl_late_events", "Events older than the runtime time a watermark "
                     "had reached (event_time apps), by late_events policy, since the "
                     "worker started", ["app", "policy"], registry=r)
        for policy in LATE:
            late.labels(app=app, policy=policy).set_function(
                lambda policy=policy: LATE[policy])
        self.lost = Counter("kepl_input_lost", "Source records deleted before they were read "
                            "(retention, DeleteRecords)", ["app", "partition"], registry=r)
        self.busy = Counter("kepl_processing_seconds", "Time spent running records "
                            "through the statements, per statement group",
                            ["app", "group"], registry=r)
        self.stmt_busy = Counter(
            "kepl_statement_processing_seconds", "Time spent running events through one "
            "statement, estimated from one event in 32 timed per statement (events that "
            "start or end context partitions, timers and inserted events are not "
            "included)", ["app", "statement"], registry=r)
        self.info = Gauge("kepl_statement_info", "1 for each statement and the group "
                          "that runs it (groups share engine partitions)",
                          ["app", "statement", "group"], registry=r)
        self.state = Gauge("kepl_state_bytes", "Bytes of a statement's state in the local "
                           "databases of the engine partitions this worker holds",
                           ["app", "statement"], registry=r)
        self.rebalances = Counter("kepl_rebalances", "Partition assignments, revocations "
                                  "and lost assignments", ["app", "kind"], registry=r)
        self.assigned = Gauge("kepl_assigned_partitions", "Input partitions assigned to "
                              "this worker", registry=r, labelnames=["app"]).labels(**lbl)
        self.previous_exit = Gauge(
            "kepl_previous_exit_code", "Exit code of the previous worker on this data "
            "directory when it stopped itself (3: fenced by a newer worker), else 0",
            registry=r, labelnames=["app"]).labels(**lbl)
        self.previous_exit.set(take_exit(data_dir) if data_dir is not None else 0)
        for kind in ("assigned", "revoked", "lost"):
            self.rebalances.labels(app, kind)
        self.app = app
        self._lags: set[tuple[str, int]] = set()
        self._last: dict[str, float] = {}
        self._stated: set[str] = set()
        self._infos: set[tuple[str, str]] = set()

    def declare(self, groups: dict[str, list[str]]) -> None:
        """The statements of each group (``kepl_statement_info``)."""
        for group, statements in groups.items():
            for stmt in statements:
                self.info.labels(self.app, stmt, group).set(1)
                self._infos.add((stmt, group))

    def add(self, name: str, total: float) -> None:
        """Move counter ``name`` to the running ``total`` kept by the loop."""
        delta = total - self._last.get(name, 0)
        if delta > 0:
            getattr(self, name).inc(delta)
        self._last[name] = total

    def add_rows(self, per_statement: dict[str, int]) -> None:
        for stmt, total in per_statement.items():
            key = f"rows:{stmt}"
            delta = total - self._last.get(key, 0)
            if delta > 0:
                self.rows.labels(self.app, stmt).inc(delta)
            self._last[key] = total

    def checkpointed(self, seconds: float, stats: dict[str, int],
                     rows: dict[str, int]) -> None:
        """A checkpoint took ``seconds``; the loop's running totals are now ``stats``
        (events, dead, checkpoints, changelog_bytes) and ``rows`` per statement."""
        self.checkpoint_s.observe(seconds)
        for name in ("events", "dead", "checkpoints", "changelog_bytes"):
            self.add(name, stats[name])
        self.add_rows(rows)

    def add_lost(self, partition: str, n: int) -> None:
        """``n`` records of source ``partition`` (``topic[p]``) were lost."""
        self.lost.labels(self.app, partition).inc(n)

    def set_lag(self, lags: dict[tuple[str, int], int]) -> None:
        for key in self._lags - set(lags):
            self.lag.remove(self.app, key[0], str(key[1]))
        for (topic, p), n in lags.items():
            self.lag.labels(self.app, topic, str(p)).set(n)
        self._lags = set(lags)

    def observe_parts(self, worker: Any) -> None:
        """After a checkpoint: processing time and state bytes of the worker's engine
        partitions and lanes (``worker``: a ``loop.Worker``)."""
        if not self._infos:
            self.declare(statement_groups(worker))
        sizes: dict[str, int] = {}
        for part in worker.parts.values():
            self._took(part.group.name, part)
            if part.sizes is None:  # a scan over the first checkpoints, then each batch
                part.sizes = StateSizes()
            if not part.sizes.complete:
                part.sizes.step(part.store.flushed())
            for stmt, n in part.sizes.bytes.items():
                sizes[stmt] = sizes.get(stmt, 0) + n
        for inp in worker.inputs:
            if inp.lane is not None:
                self._took(lane_group(inp.topic), inp.lane)
        for stmt in self._stated - set(sizes):
            self.state.labels(self.app, stmt).set(0)
        for stmt, n in sizes.items():
            self.state.labels(self.app, stmt).set(n)
        self._stated |= set(sizes)

    def _took(self, group: str, runner: Any) -> None:
        if runner.busy_s > 0:
            self.busy.labels(self.app, group).inc(runner.busy_s)
            runner.busy_s = 0.0
        timing = getattr(getattr(runner, "engine", None), "timing", None)
        if timing is not None:  # set where the metrics are on (``assignment``)
            for stmt, seconds in timing.take().items():
                if stmt:
                    self.stmt_busy.labels(self.app, stmt).inc(seconds)

    def rebalanced(self, kind: str, assigned: int) -> None:
        self.rebalances.labels(self.app, kind).inc()
        self.assigned.set(assigned)

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


def lane_group(topic: str) -> str:
    """The group name of the stateless statements reading ``topic`` (its lanes)."""
    return f"lanes:{topic}"


def statement_groups(worker: Any) -> dict[str, list[str]]:
    """Group name -> its statements: engine groups, and each source topic's lanes."""
    out = {g.name: list(g.statements) for g in worker.topology.active_groups()}
    for p in worker.topology.lanes:
        topic = worker.config.topic_of(p.pipeline.stream.type_name)
        out.setdefault(lane_group(topic), []).append(p.name)
    return out


def note_rebalance(metrics: Metrics | None, kind: str, assigned: int) -> None:
    """Count an assignment, revocation or lost assignment (no-op without metrics)."""
    if metrics is not None:
        metrics.rebalanced(kind, assigned)


def record_exit(data_dir: Path, code: int) -> None:
    """Leave ``code`` for the next worker on ``data_dir`` (``kepl_previous_exit_code``)."""
    try:
        (Path(data_dir) / LAST_EXIT).write_text(f"{code}\n")
    except OSError:
        pass


def take_exit(data_dir: Path) -> int:
    """The code ``record_exit`` left in ``data_dir`` (0: none), removing it."""
    path = Path(data_dir) / LAST_EXIT
    try:
        code = int(path.read_text().strip() or 0)
        path.unlink()
    except (OSError, ValueError):
        return 0
    return code


class _Handler(BaseHTTPRequestHandler):
    health: Health
    metrics: Metrics

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            from prometheus_client import CONTENT_TYPE_LATEST

            self._send(200, self.metrics.exposition(), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            ok = self.health.live()
            self._send(200 if ok else 503, b"ok\n" if ok else b"consumer loop stuck\n")
        elif path == "/readyz":
            ok, why = self.health.ready()
            self._send(200 if ok else 503, why.encode() + b"\n")
        else:
            self._send(404, b"not found: /metrics, /healthz, /readyz\n")

    def _send(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8"
              ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet probes
        pass


def serve(port: int, health: Health, metrics: Metrics, host: str = "0.0.0.0"
          ) -> ThreadingHTTPServer:
    """Serve the three endpoints on ``port`` from a daemon thread (0: any free port)."""
    handler = type("Handler", (_Handler,), {"health": health, "metrics": metrics})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="kepl-http", daemon=True).start()
    return server

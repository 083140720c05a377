"""A worker's health, readiness and Prometheus metrics, served over HTTP.

``/healthz``: the consumer loop turned within ``LIVE_S`` (a wedged loop fails it, so
Kubernetes restarts the pod).  ``/readyz``: partitions are assigned and restored and
nothing is stalled (see ``Stalls``).  ``/metrics``: the Prometheus exposition of the
worker's registry.  The loop updates the figures once per checkpoint, never per event.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from app.runtime.kafka.eventtime import LATE

LIVE_S = 30.0
STALL_ENV = "KEPL_STALL_WARN_S"
DEFAULT_STALL_S = 30.0
"""Seconds the oldest waiting record may stay unreleased before the worker says so."""


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

    def __init__(self, app: str) -> None:
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
        self.app = app
        self._lags: set[tuple[str, int]] = set()
        self._last: dict[str, float] = {}

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

    def add_lost(self, partition: str, n: int) -> None:
        """``n`` records of source ``partition`` (``topic[p]``) were lost."""
        self.lost.labels(self.app, partition).inc(n)

    def set_lag(self, lags: dict[tuple[str, int], int]) -> None:
        for key in self._lags - set(lags):
            self.lag.remove(self.app, key[0], str(key[1]))
        for (topic, p), n in lags.items():
            self.lag.labels(self.app, topic, str(p)).set(n)
        self._lags = set(lags)

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


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

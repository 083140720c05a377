"""Broker loss and recovery, one log line each.

On a replicated cluster a broker that dies makes every client of the worker log its own
connection failures (each retry, each coordinator, the consumer and the producer) and
makes consumes return transport errors.  ``BrokerWatch`` reads the clients'
statistics (``statistics.interval.ms``: each broker's connection state) and logs one
line when a broker that was up has no connection any more (``broker N (host:port)
lost``) and one when it is up again (``broker N (host:port) back after S s``: a client
connected to it, or it accepts connections again);
``QuietFailures`` drops the per-connection failure lines it replaces.  A broker counts
as up while any client of the worker has a connection to it.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from typing import Any

log = logging.getLogger("kepl.brokers")

STATS_INTERVAL_MS = 1000
PROBE_S = 1.0
_FAILURE_MARKS = ("Connect to ", "Connection refused", "Disconnected", "brokers are down",
                  "Connection reset", "timed out: disconnect", "Broker transport failure",
                  "Broker: Not leader", "Local: Broker transport failure",
                  "Local: All broker connections are down")


class BrokerWatch:
    """Connection state of every broker, as the clients' statistics report it."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._up: dict[str, dict[int, bool]] = {}  # client -> node id -> connected
        self._names: dict[int, str] = {}
        self._lost: dict[int, float] = {}  # node id -> when it was lost
        self._seen_up: set[int] = set()
        self._probe: threading.Thread | None = None
        self.losses = 0
        self.recoveries = 0

    def settings(self) -> dict[str, Any]:
        """Client settings that feed this watch."""
        # metadata every 10 s (default 5 min): a broker that came back is known soon
        return {"statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": self.on_stats,
                "topic.metadata.refresh.interval.ms": 10_000}

    def on_stats(self, text: str) -> None:
        """A client's statistics (JSON): note each broker's state, log transitions."""
        try:
            stats = json.loads(text)
        except ValueError:
            return
        client = str(stats.get("name", ""))
        states: dict[int, bool] = {}
        for b in (stats.get("brokers") or {}).values():
            node = int(b.get("nodeid", -1))
            if node < 0:  # bootstrap and coordinator aliases of a real broker
                continue
            states[node] = b.get("state") == "UP"
            self._names[node] = str(b.get("nodename", ""))
        with self._lock:
            self._up[client] = states
            self._review()

    def _review(self) -> None:
        nodes = {n for s in self._up.values() for n in s}
        for n in sorted(nodes):
            if any(s.get(n, False) for s in self._up.values()):
                self._seen_up.add(n)
                self._back(n)
            elif n in self._seen_up and n not in self._lost:
                self._lost[n] = self.clock()
                self.losses += 1
                log.warning("broker %d (%s) lost: no connection; its partitions move to "
                            "other replicas", n, self._names.get(n, "?"))
                self._start_probe()

    def _back(self, n: int) -> None:
        since = self._lost.pop(n, None)
        if since is not None:
            self.recoveries += 1
            # lost again only once a client was connected to it again
            self._seen_up.discard(n)
            log.warning("broker %d (%s) back after %.1f s", n, self._names.get(n, "?"),
                        self.clock() - since)

    def _start_probe(self) -> None:
        """A client reconnects to a broker only when it needs it (its leaders moved
        away): a thread tries a TCP connection to each lost broker every second."""
        if self._probe is None or not self._probe.is_alive():
            self._probe = threading.Thread(target=self._probing, name="kepl-broker-probe",
                                           daemon=True)
            self._probe.start()

    def _probing(self) -> None:
        while True:
            time.sleep(PROBE_S)
            with self._lock:
                lost = {n: self._names.get(n, "") for n in self._lost}
            if not lost:
                return
            for n, name in lost.items():
                if _listens(name):
                    with self._lock:
                        self._back(n)


def _listens(name: str) -> bool:
    host, _, port = name.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_S):
            return True
    except (OSError, ValueError):
        return False


class QuietFailures(logging.Filter):
    """Drops the clients' connection-failure lines (``BrokerWatch`` says it once)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.CRITICAL:
            return True
        msg = record.getMessage()
        return not any(mark in msg for mark in _FAILURE_MARKS)


WATCH = BrokerWatch()
"""The worker process's one watch (its consumer and producer feed it)."""


def install() -> None:
    """Quiet the per-connection failure lines of the worker's clients and its consumer
    errors (``kepl.kafka`` and ``kepl.worker``): ``WATCH`` reports loss and recovery."""
    quiet = QuietFailures()
    for name in ("kepl.kafka", "kepl.worker", "kepl.checkpoint"):
        logging.getLogger(name).addFilter(quiet)

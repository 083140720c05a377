"""Kafka mode end to end (prints figures, not a test): events/s through router and engine.

Produces N events to a fresh app's source topic, publishes a watermark after them and
waits until the worker reports it processed everything (progress topic), for a filter
statement and for ``count(*)``/``sum`` over ``#length(1000)``.  Uses
``KAFKA_BOOTSTRAP_SERVERS`` when set, else the local broker (started if needed).

Run: .venv/bin/python tests/bench/bench_kafka.py [N]
"""

from __future__ import annotations

import os
import sys
import time
import uuid

from app.kafka import local_broker
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import RowReader
from app.runtime.kafka.runner import KafkaApp

STATEMENTS = {
    "filter": "select * from Withdrawal(amount >= 200)",
    "length_agg": "select count(*) as cnt, sum(amount) as total from Withdrawal#length(1000)",
}


def bootstrap() -> str:
    env = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if env:
        return env
    return local_broker.start().bootstrap


def run(bs: str, name: str, epl: str, n: int) -> tuple[float, float, int]:
    """(seconds from first send to all processed, worker start-up seconds, rows)."""
    app = f"bench-{name}-{uuid.uuid4().hex[:6]}"
    config = AppConfig.from_dict({
        "app": app, "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
        "topics": {"Withdrawal": f"{app}.withdrawal"},
        "statements": [{"name": name, "epl": epl}]})
    t0 = time.perf_counter()
    kapp = KafkaApp(config, bs, start=True)
    kapp.settle(timeout_s=120)
    started = time.perf_counter() - t0
    reader = RowReader(bs, [config.output_topic(name)])
    try:
        t1 = time.perf_counter()
        for i in range(n):
            kapp.send("Withdrawal", {"account": f"A{i % 100}", "amount": float(i % 400)})
        kapp.settle(timeout_s=600)
        elapsed = time.perf_counter() - t1
        rows = len(reader.read_available())
        return elapsed, started, rows
    finally:
        reader.close()
        kapp.close(graceful=False)
        kapp.delete_topics()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    bs = bootstrap()
    for name, epl in STATEMENTS.items():
        elapsed, started, rows = run(bs, name, epl, n)
        print(f"{name:<11} {n:,} events in {elapsed:.2f} s: {n / elapsed:>9,.0f} ev/s "
              f"end to end ({rows:,} output rows; worker ready in {started:.1f} s)")


if __name__ == "__main__":
    main()

"""Back-to-back Kafka transactions and the producer's retry backoff (prints figures, not a test).

A worker under load begins a checkpoint's transaction right after the last one committed.
The coordinator may still be writing that one's markers and answers the new
transaction's first request with CONCURRENT_TRANSACTIONS; librdkafka retries it after
``retry.backoff.ms``.  This runs transactions the way a checkpoint does (rows produced,
input offsets sent, commit), each begun as soon as the last returned, with librdkafka's
default backoff (100 ms) and with the worker's (``checkpoint.producer_config``), and
prints the distribution of a transaction's wall time and how many took over 90 ms.

Run: .venv/bin/python -m tests.bench.bench_txn_backoff [--transactions 150] [--records 200]
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from app.kafka import local_broker
from app.runtime.kafka.checkpoint import producer_config

PARTITIONS = 4
LIBRDKAFKA_DEFAULT_MS = 100


def transaction_ms(bs: str, topic: str, consumer: Consumer, backoff_ms: int, n: int,
                   records: int) -> list[float]:
    """Wall milliseconds of ``n`` back-to-back transactions of ``records`` records each."""
    conf = producer_config(bs, f"bench-txn-{uuid.uuid4().hex[:8]}")
    conf.pop("logger", None)
    conf["retry.backoff.ms"] = backoff_ms
    p = Producer(conf)
    p.init_transactions(30)
    value = b'{"account":"A1","cnt":12,"total":345.5}'
    out = []
    for i in range(n):
        t = time.perf_counter()
        p.begin_transaction()
        for j in range(records):
            p.produce(topic, value, None, j % PARTITIONS,
                      headers=[("kepl.id", b"s0/A1/%d" % (i * records + j))])
        p.send_offsets_to_transaction(
            [TopicPartition(topic, k, i + 1) for k in range(PARTITIONS)],
            consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        out.append((time.perf_counter() - t) * 1000)
    p.flush(5)
    return out


def _at(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transactions", type=int, default=150)
    ap.add_argument("--records", type=int, default=200)
    args = ap.parse_args()
    bs = os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or local_broker.start().bootstrap
    topic = f"bench-txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs, "log_level": 3})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
    consumer = Consumer({"bootstrap.servers": bs, "group.id": f"{topic}.g",
                         "enable.auto.commit": False, "log_level": 3})
    worker_ms = producer_config(bs, "x")["retry.backoff.ms"]
    print(f"{args.transactions} back-to-back transactions of {args.records} records, "
          f"broker {bs}")
    try:
        for backoff in (LIBRDKAFKA_DEFAULT_MS, worker_ms) * 2:
            d = sorted(transaction_ms(bs, topic, consumer, backoff, args.transactions,
                                      args.records))
            label = "librdkafka default" if backoff == LIBRDKAFKA_DEFAULT_MS else "worker"
            print(f"  retry.backoff.ms {backoff:3d} ({label:18s}) ms per transaction: "
                  f"p50 {_at(d, 0.5):6.1f}  p90 {_at(d, 0.9):6.1f}  p99 {_at(d, 0.99):6.1f}  "
                  f"max {d[-1]:6.1f}; over 90 ms: {sum(x > 90 for x in d)}")
    finally:
        consumer.close()
        admin.delete_topics([topic])


if __name__ == "__main__":
    main()

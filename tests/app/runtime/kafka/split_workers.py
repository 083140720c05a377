"""A split statement on the broker with two workers: its rows, per key, as committed."""

from __future__ import annotations

import random
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.runner import KafkaApp, WorkerProcess
from tests.app.runtime.kafka.test_partitioning import _wait_for_members


def two_worker_rows(bootstrap: str, config: AppConfig, steps: list[Any],
                    send_of: Callable[[Any], tuple[str, dict[str, Any], int]]
                    ) -> dict[str, dict[str, list[tuple]]]:
    """Statement of ``statement_partitions`` -> key -> (stream, row, time, id) committed
    by two workers replaying ``steps`` (ints: the clock; other steps: ``send_of(step)``
    gives (type, event, source partition)).  Checks that the workers share every engine
    partition of the first split statement and that each row sits in partition
    ``crc32(key) mod N`` of its output topic."""
    kapp = KafkaApp(config, bootstrap)
    tmp = Path(tempfile.mkdtemp(prefix=f"kepl-{config.app}-"))
    (tmp / "w1").mkdir()
    other = WorkerProcess(config, bootstrap, tmp / "w1")
    first, n_first = next(iter(config.statement_partitions.items()))
    try:
        kapp.worker.start()
        other.start()
        _wait_for_members(bootstrap, f"kepl.{config.app}",
                          config.repartition_topic(first), 2)
        for step in steps:
            if isinstance(step, int):
                kapp.advance(step)
            else:
                type_name, event, partition = send_of(step)
                kapp.send(type_name, event, partition=partition)
        kapp.settle()
        assert other.alive(), other.log_tail()
        owned = [{d.name for d in (w.data_dir / first).glob("*")}
                 for w in (kapp.worker, other)]
        assert all(owned) and set().union(*owned) == {str(p) for p in range(n_first)}
        out: dict[str, dict[str, list[tuple]]] = {}
        for stmt, n in config.statement_partitions.items():
            got = out[stmt] = {}
            for r in read_rows(bootstrap, config.output_topic(stmt)):
                assert r.partition == zlib.crc32(r.context_partition.encode()) % n
                got.setdefault(r.context_partition, []).append(
                    (r.stream, r.row, r.time_ms, r.id))
        return out
    finally:
        other.kill()
        kapp.close(graceful=False)
        kapp.delete_topics()


def login_payment_app(name: str, statements: dict[str, tuple[str, int]]) -> AppConfig:
    """An app of ``Login`` (``user``, ``ip``) and ``Payment`` (``payer``, ``amount``) over
    two source partitions each; ``statements``: name -> (EPL, N) of each split one."""
    return AppConfig.from_dict({
        "app": name,
        "schemas": {"Login": {"user": "string", "ip": "string"},
                    "Payment": {"payer": "string", "amount": "double"}},
        "topics": {"Login": f"{name}.login", "Payment": f"{name}.payment"},
        "partitions": 2,
        "statement_partitions": {s: n for s, (_, n) in statements.items()},
        "statements": [{"name": s, "epl": epl} for s, (epl, _) in statements.items()]})


def login_payment_steps(seed: int) -> list[Any]:
    """Clock moves (ms) and (type, event, source partition) of ``login_payment_app``
    over 7 users."""
    rnd = random.Random(seed)
    steps: list[Any] = [1000]
    t = 1000
    for _ in range(12):
        for _ in range(rnd.randrange(3, 9)):
            user = f"U{rnd.randrange(7)}"
            if rnd.random() < 0.4:
                steps.append(("Login", {"user": user, "ip": rnd.choice(["x", "y"])},
                              rnd.randrange(2)))
            else:
                steps.append(("Payment", {"payer": user, "amount": float(rnd.randrange(30))},
                              rnd.randrange(2)))
        t += rnd.choice([300, 800, 1000, 2600])
        steps.append(t)
    steps.append(t + 10_000)
    return steps

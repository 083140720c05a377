"""A Kafka client's fatal error ends the worker as fenced (exit 3, one line), wherever it
surfaces: the calls the checkpoint wraps raise ``Fenced`` themselves, a produce or a
rebalance callback raises the client's own exception."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException

from app.runtime.kafka.loop import EXIT_FENCED, fatal_kafka_error


def test_a_fatal_client_error_reads_as_fenced_and_nothing_else_does() -> None:
    fenced = KafkaException(KafkaError(KafkaError._FENCED, "producer fenced", fatal=True))
    assert fatal_kafka_error(fenced) == "kafka client: producer fenced"
    static = KafkaException(KafkaError(KafkaError._FATAL, "static member fenced"))
    assert fatal_kafka_error(static) == "kafka client: static member fenced"
    transient = KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
    assert fatal_kafka_error(transient) is None
    assert fatal_kafka_error(KafkaException("no error object")) is None
    assert fatal_kafka_error(ValueError("bad")) is None


_RUN = textwrap.dedent("""
    import logging, sys
    from pathlib import Path
    from types import SimpleNamespace
    from confluent_kafka import KafkaError, KafkaException
    from app.runtime.kafka.loop import Worker

    logging.basicConfig(level="WARNING", stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    w = object.__new__(Worker)
    nothing = lambda *a, **k: None
    w.consumer = SimpleNamespace(subscribe=nothing, close=nothing)
    w.wiring = SimpleNamespace(topics=lambda: ["t"])
    w.metrics = w.metrics_port = w.http = w.trace = None
    w.stopping = False
    w.data_dir = Path(sys.argv[1])
    learnt = sys.argv[3] if len(sys.argv) > 3 else None
    w.out = w.assignment = SimpleNamespace(close=nothing, fatal_reason=lambda: learnt)
    def step():
        raise KafkaException(KafkaError(KafkaError._FENCED, sys.argv[2], fatal=True))
    w.step = step
    w.run()
    """)


def test_a_fatal_error_raised_by_a_client_call_exits_fenced_in_one_line(
        tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _RUN, str(tmp_path), "producer fenced"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == EXIT_FENCED, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].split(" ", 2)[2] == (
        "kepl.worker CRITICAL worker stops: kafka client: producer fenced "
        "(another worker owns its partitions now)")
    assert (tmp_path / "last-exit").read_text() == f"{EXIT_FENCED}\n"


def test_a_produce_that_raced_the_call_that_learnt_the_fence_says_that_calls_reason(
        tmp_path: Path) -> None:
    """A produce raised while the transaction's offsets were being sent on their own
    thread, which learnt the fence: the line gives that call's reason, not the produce's
    bare "Fatal error"."""
    proc = subprocess.run([sys.executable, "-c", _RUN, str(tmp_path),
                           "Unable to produce message: Local: Fatal error",
                           "send_offsets_to_transaction: producer fenced"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == EXIT_FENCED, proc.stderr
    assert proc.stderr.splitlines()[-1].split(" ", 2)[2] == (
        "kepl.worker CRITICAL worker stops: send_offsets_to_transaction: producer fenced "
        "(another worker owns its partitions now)")

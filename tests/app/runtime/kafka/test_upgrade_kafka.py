"""Upgrading a running app on the real broker while events flow (``kepl deploy``).

Version 1 runs ``keep`` (a window count and sum), ``avg`` (an average over a length
window) and ``gone`` (a filter).  Version 2 keeps ``keep`` as it is, changes ``avg``'s
window (rebuilt from now), removes ``gone`` and adds ``big``.  ``kepl deploy`` records
version 2 while the version-1 worker runs; that worker commits and leaves by itself, and
one on version 2 starts, while the producer goes on: ``keep``'s raw output continues with no
gap and no repeat; ``avg`` continues its row ids with the rows its new text gives from
the first record version 2 read; ``gone`` stops; ``big`` starts at that record.  A
worker still on version 1 refuses to start once version 2 is recorded.  A second run
rebuilds ``avg`` from-earliest: its output after the upgrade is its new text's over all
the input, as an embedded engine gives it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli.main import main
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.deployments import EXIT_OTHER_VERSION
from app.runtime.kafka.reader import RowReader
from app.runtime.kafka.runner import REPO_ROOT, KafkaApp, WorkerProcess

N_EVENTS = 3000


def amount(i: int) -> float:
    return float(i % 97 + 1)


def account(i: int) -> str:
    return f"A{i % 7}"


def app_doc(name: str, statements: list[dict[str, str]]) -> dict[str, Any]:
    return {"app": name,
            "schemas": {"Withdrawal": {"account": "string", "amount": "double"}},
            "topics": {"Withdrawal": f"{name}.withdrawal"}, "statements": statements}


KEEP = {"name": "keep", "epl": "select count(*) as cnt, sum(amount) as total "
                               "from Withdrawal#length(5)"}
GONE = {"name": "gone", "epl": "select account from Withdrawal where amount > 50"}
AVG_1 = {"name": "avg", "epl": "select avg(amount) as a from Withdrawal#length(3)"}
AVG_2 = {"name": "avg", "epl": "select avg(amount) as a from Withdrawal#length(2)"}
BIG = {"name": "big", "epl": "select account, amount from Withdrawal where amount > 90"}


def windowed(first: int, last: int, size: int) -> list[list[float]]:
    """The length window after each event from ``first`` to ``last - 1``, empty at
    ``first``."""
    w: deque[float] = deque(maxlen=size)
    out = []
    for i in range(first, last):
        w.append(amount(i))
        out.append(list(w))
    return out


def embedded(epl: str, n: int) -> list[dict[str, Any]]:
    """The rows of ``epl`` run embedded over events 0..n-1."""
    engine = Engine()
    engine.deploy(plan_statement(Catalog.from_schemas(app_doc("e", [])["schemas"]), epl, "x"))
    out: list[dict[str, Any]] = []
    engine.listeners.append(lambda name, new, old, pid: out.extend(dict(r) for r in new))
    for i in range(n):
        engine.send("Withdrawal", {"account": account(i), "amount": amount(i)})
    return out


def deploy(path: Path, bootstrap: str, *extra: str) -> int:
    return main(["deploy", str(path), "--bootstrap", bootstrap, *extra])


def wait_rows(reader: RowReader, at_least: int, timeout_s: float = 60) -> None:
    seen, deadline = 0, time.monotonic() + timeout_s
    while seen < at_least:
        assert time.monotonic() < deadline, "the worker produced no output"
        seen += len(reader.read_available())
        time.sleep(0.05)


@pytest.mark.kafka
def test_upgrade_while_events_flow(kafka_bootstrap: str, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    name = f"upgrade-{uuid.uuid4().hex[:8]}"
    v1 = app_doc(name, [KEEP, AVG_1, GONE])
    v2 = app_doc(name, [KEEP, AVG_2, BIG])
    f1, f2 = tmp_path / "v1.yaml", tmp_path / "v2.yaml"
    f1.write_text(yaml.safe_dump(v1, sort_keys=False))
    f2.write_text(yaml.safe_dump(v2, sort_keys=False))
    c1, c2 = AppConfig.from_dict(v1), AppConfig.from_dict(v2)
    (tmp_path / "work").mkdir()

    assert deploy(f1, kafka_bootstrap) == 0
    assert f"app {name}: version 1 recorded" in capsys.readouterr().out
    kapp = KafkaApp(c1, kafka_bootstrap, tmp_path / "work", start=True)
    topics = {s: c2.output_topic(s) if s == "big" else c1.output_topic(s)
              for s in ("keep", "avg", "gone", "big")}
    readers = {s: RowReader(kafka_bootstrap, [topics[s]]) for s in ("keep", "avg", "gone")}
    counting = RowReader(kafka_bootstrap, [topics["keep"]])
    stopping = threading.Event()
    producer = threading.Thread(target=lambda: None)
    try:
        def stream() -> None:
            for i in range(N_EVENTS):
                if stopping.is_set():
                    return
                kapp.send("Withdrawal", {"account": account(i), "amount": amount(i)})
                if i % 10 == 9:  # about 200 events/s: the stream outlasts the upgrade
                    kapp.producer.flush(10)
                    time.sleep(0.05)
            kapp.producer.flush(10)

        producer = threading.Thread(target=stream)
        producer.start()
        wait_rows(counting, 300)

        assert deploy(f2, kafka_bootstrap, "--plan") == 2  # refused: avg needs a choice
        plan = capsys.readouterr().out
        assert plan.splitlines() == [
            f"app {name}: version 1 runs; {f2} would be version 2:",
            "  keep  unchanged: keeps its state and row ids",
            "  avg   changed, stateful: needs --rebuild",
            "  big   added: starts with empty state from the current input offsets",
            "  gone  removed: stops; its state and output topic are kept "
            "(--delete-removed deletes them)",
            "refused: avg: changed and keeps state: say how to rebuild it (--rebuild "
            "avg=from-now: start empty; --rebuild avg=from-earliest: replay its retained "
            "input)"]
        assert deploy(f2, kafka_bootstrap) == 2  # nothing recorded
        assert capsys.readouterr().out.splitlines()[1:] == plan.splitlines()[1:]
        assert deploy(f2, kafka_bootstrap, "--plan", "--rebuild", "avg=from-now") == 0
        served = capsys.readouterr().out
        print(served, file=sys.stderr)
        assert "refused" not in served
        assert deploy(f2, kafka_bootstrap, "--rebuild", "avg=from-now") == 0
        applied = capsys.readouterr().out
        assert "  avg   changed, stateful: rebuild from-now: starts with empty state at " \
               "the next record, row ids continue" in applied
        assert f"app {name}: version 2 recorded" in applied
        # the running version-1 worker sees version 2 recorded, commits and leaves
        assert kapp.worker.proc is not None
        assert kapp.worker.proc.wait(60) == EXIT_OTHER_VERSION
        assert kapp.worker.log_tail(1) == (
            f"kepl: worker: app {name} now runs version 2, which this worker's statement "
            "file is not: stopped after its last commit (workers of the new version take "
            "its partitions)")

        stale = subprocess.run(
            [sys.executable, "-m", "app.runtime.kafka.worker", "--config",
             str(kapp.worker.config_path), "--bootstrap", kafka_bootstrap,
             "--data-dir", str(kapp.worker.data_dir)],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
        assert stale.returncode == EXIT_OTHER_VERSION
        assert stale.stderr.strip().splitlines()[-1] == (
            f"kepl: worker: app {name} runs version 2, and this statement file differs "
            "from it: kepl deploy FILE --plan shows how, kepl deploy FILE records it as "
            "the next version")

        before = {s: r.read_available() for s, r in readers.items()}
        upgraded_at = len(before["keep"])  # events version 1 processed
        assert upgraded_at < N_EVENTS, "the stream ended before the upgrade"
        kapp.worker = WorkerProcess(c2, kafka_bootstrap, tmp_path / "work")
        kapp.worker.start()
        producer.join()
        kapp.settle(timeout_s=120)
        readers["big"] = RowReader(kafka_bootstrap, [topics["big"]])
        rows = {s: before.get(s, []) + r.read_available() for s, r in readers.items()}
        dups = {s: r.duplicates for s, r in readers.items()}
    finally:
        stopping.set()
        if producer.is_alive():
            producer.join()
        for r in readers.values():
            r.close()
        counting.close()
        kapp.close()

    assert dups == {"keep": 0, "avg": 0, "gone": 0, "big": 0}
    assert [r.id for r in rows["keep"]] == [f"keep/0/{i}" for i in range(1, N_EVENTS + 1)]
    assert [r.row for r in rows["keep"]] == [
        {"cnt": len(w), "total": sum(w)} for w in windowed(0, N_EVENTS, 5)]
    assert [r.id for r in rows["avg"]] == [f"avg/0/{i}" for i in range(1, N_EVENTS + 1)]
    assert [r.row["a"] for r in rows["avg"]] == (
        [sum(w) / len(w) for w in windowed(0, upgraded_at, 3)]
        + [sum(w) / len(w) for w in windowed(upgraded_at, N_EVENTS, 2)])
    assert [r.row for r in rows["gone"]] == [
        {"account": account(i)} for i in range(upgraded_at) if amount(i) > 50]
    assert [r.row for r in rows["big"]] == [
        {"account": account(i), "amount": amount(i)}
        for i in range(upgraded_at, N_EVENTS) if amount(i) > 90]


@pytest.mark.kafka
def test_delete_removed_deletes_the_output_topic(kafka_bootstrap: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from app.runtime.kafka.ops import Broker

    name = f"upgrade-{uuid.uuid4().hex[:8]}"
    f1, f2 = tmp_path / "v1.yaml", tmp_path / "v2.yaml"
    f1.write_text(yaml.safe_dump(app_doc(name, [KEEP, GONE]), sort_keys=False))
    f2.write_text(yaml.safe_dump(app_doc(name, [KEEP]), sort_keys=False))
    assert deploy(f1, kafka_bootstrap) == 0
    gone = f"kepl.{name}.out.gone"
    assert gone in Broker(kafka_bootstrap).topics
    capsys.readouterr()
    assert deploy(f2, kafka_bootstrap, "--delete-removed") == 0
    assert capsys.readouterr().out.splitlines()[:3] == [
        f"app {name}: version 1 -> 2:",
        "  keep  unchanged: keeps its state and row ids",
        "  gone  removed: stops; its state and output topic are deleted"]
    deadline = time.monotonic() + 30
    while gone in Broker(kafka_bootstrap).topics:
        assert time.monotonic() < deadline, f"{gone} was not deleted"
        time.sleep(0.2)
    assert deploy(f2, kafka_bootstrap, "--plan") == 0
    assert capsys.readouterr().out == f"app {name}: version 2 runs; {f2} is the same\n"


@pytest.mark.kafka
@pytest.mark.parametrize("partitions", [1, 2], ids=["direct", "repartitioned"])
def test_rebuild_from_earliest_while_events_flow(kafka_bootstrap: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 partitions: int) -> None:
    """``avg`` changes its window and is rebuilt from-earliest while events flow: after
    the upgrade its output is what its new text gives over all the input (the replay of
    what version 1 had read, then the live records), written once, its ids after
    version 1's; ``keep`` goes on with no gap and no repeat.  With one source partition
    the engine partition reads it directly; with two it reads the repartition topic,
    the two merged at each watermark (sent every ten events), and the replay merges
    them the same way."""
    name = f"rebuild-{uuid.uuid4().hex[:8]}"
    v1 = {**app_doc(name, [KEEP, AVG_1]), "partitions": partitions}
    v2 = {**app_doc(name, [KEEP, AVG_2]), "partitions": partitions}
    f1, f2 = tmp_path / "v1.yaml", tmp_path / "v2.yaml"
    f1.write_text(yaml.safe_dump(v1, sort_keys=False))
    f2.write_text(yaml.safe_dump(v2, sort_keys=False))
    c1, c2 = AppConfig.from_dict(v1), AppConfig.from_dict(v2)
    (tmp_path / "work").mkdir()

    assert deploy(f1, kafka_bootstrap) == 0
    kapp = KafkaApp(c1, kafka_bootstrap, tmp_path / "work", start=True)
    readers = {s: RowReader(kafka_bootstrap, [c1.output_topic(s)]) for s in ("keep", "avg")}
    counting = RowReader(kafka_bootstrap, [c1.output_topic("keep")])
    stopping = threading.Event()
    producer = threading.Thread(target=lambda: None)
    try:
        def stream() -> None:
            for i in range(N_EVENTS):
                if stopping.is_set():
                    return
                kapp.send("Withdrawal", {"account": account(i), "amount": amount(i)},
                          partition=i % partitions)
                if i % 10 == 9:
                    if partitions > 1:
                        kapp.advance(0)  # flushes, then a watermark into each partition
                    kapp.producer.flush(10)
                    time.sleep(0.05)
            kapp.producer.flush(10)

        producer = threading.Thread(target=stream)
        producer.start()
        wait_rows(counting, 300)
        capsys.readouterr()
        assert deploy(f2, kafka_bootstrap, "--plan", "--rebuild", "avg=from-earliest") == 0
        plan = capsys.readouterr().out
        print(plan, file=sys.stderr)
        assert plan.splitlines()[1:] == [
            "  keep  unchanged: keeps its state and row ids",
            "  avg   changed, stateful: rebuild from-earliest: replays its retained input "
            "into fresh state, alone, when each engine partition first loads; the rows "
            "its new text gives are written once, row ids continue"]
        assert deploy(f2, kafka_bootstrap, "--rebuild", "avg=from-earliest") == 0
        assert f"app {name}: version 2 recorded" in capsys.readouterr().out
        assert kapp.worker.proc is not None
        assert kapp.worker.proc.wait(60) == EXIT_OTHER_VERSION

        before = {s: r.read_available() for s, r in readers.items()}
        upgraded_at = len(before["keep"])  # events version 1 processed
        assert upgraded_at < N_EVENTS, "the stream ended before the upgrade"
        assert len(before["avg"]) == upgraded_at
        kapp.worker = WorkerProcess(c2, kafka_bootstrap, tmp_path / "work", "info")
        kapp.worker.start()
        producer.join()
        kapp.settle(timeout_s=120)
        rows = {s: before[s] + r.read_available() for s, r in readers.items()}
        capsys.readouterr()
        assert main(["status", str(f2), "--bootstrap", kafka_bootstrap]) == 0
        shown = capsys.readouterr().out.splitlines()
        dups = {s: r.duplicates for s, r in readers.items()}
        log = kapp.worker.log_tail(2000)
    finally:
        stopping.set()
        if producer.is_alive():
            producer.join()
        for r in readers.values():
            r.close()
        counting.close()
        kapp.close()

    assert dups == {"keep": 0, "avg": 0}
    assert [r.id for r in rows["keep"]] == [f"keep/0/{i}" for i in range(1, N_EVENTS + 1)]
    assert [r.row for r in rows["keep"]] == [
        {"cnt": len(w), "total": sum(w)} for w in windowed(0, N_EVENTS, 5)]
    # version 1's rows, then the new text over all the input, ids continuing: the same
    # rows an embedded engine gives running avg's new text over every event
    assert [r.row for r in rows["avg"][upgraded_at:]] == embedded(AVG_2["epl"], N_EVENTS)
    assert [r.id for r in rows["avg"]] == [
        f"avg/0/{i}" for i in range(1, upgraded_at + N_EVENTS + 1)]
    assert [r.row["a"] for r in rows["avg"]] == (
        [sum(w) / len(w) for w in windowed(0, upgraded_at, 3)]
        + [sum(w) / len(w) for w in windowed(0, N_EVENTS, 2)])
    assert re.search(rf"rebuilt avg in main\[0\] from its retained input: \d+ records, "
                     rf"{upgraded_at} rows", log), log
    assert shown[1] == (f"version: 2 runs (kepl.{name}.deployments); this file is that "
                        "version")
    assert re.fullmatch(rf"changelog kepl\.{name}\.changelog\.main\[0\]: offsets \d+\.\.\d+, "
                        r"no snapshot, version 2", shown[-1]), "\n".join(shown)


@pytest.mark.kafka
def test_from_earliest_is_refused_once_retention_cut_the_input(
        kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    name = f"rebuild-{uuid.uuid4().hex[:8]}"
    f1, f2 = tmp_path / "v1.yaml", tmp_path / "v2.yaml"
    f1.write_text(yaml.safe_dump(app_doc(name, [KEEP, AVG_1]), sort_keys=False))
    f2.write_text(yaml.safe_dump(app_doc(name, [KEEP, AVG_2]), sort_keys=False))
    assert deploy(f1, kafka_bootstrap) == 0
    source = f"{name}.withdrawal"
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    for _ in range(10):
        p.produce(source, b'{"account": "A", "amount": 1.0}')
    assert p.flush(30) == 0
    capsys.readouterr()
    assert deploy(f2, kafka_bootstrap, "--plan", "--rebuild", "avg=from-earliest") == 0
    assert not any(ln.startswith("refused") for ln in capsys.readouterr().out.splitlines())
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for fut in admin.delete_records([TopicPartition(source, 0, 5)]).values():
        fut.result()
    assert deploy(f2, kafka_bootstrap, "--plan", "--rebuild", "avg=from-earliest") == 2
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"refused: avg: --rebuild from-earliest cannot serve it: {source}[0] starts at "
        "offset 5 (its earlier records were deleted by retention or DeleteRecords), so its "
        "retained input is not all of its input (use from-now, or kepl reset)")


@pytest.mark.kafka
def test_a_rebuild_is_written_before_any_new_input(kafka_bootstrap: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A new version's first load changes the partition (the replayed rows, the version
    stamp): the worker checkpoints it without waiting for another record."""
    name = f"rebuild-{uuid.uuid4().hex[:8]}"
    v1, v2 = app_doc(name, [KEEP, AVG_1]), app_doc(name, [KEEP, AVG_2])
    f1, f2 = tmp_path / "v1.yaml", tmp_path / "v2.yaml"
    f1.write_text(yaml.safe_dump(v1, sort_keys=False))
    f2.write_text(yaml.safe_dump(v2, sort_keys=False))
    c1, c2 = AppConfig.from_dict(v1), AppConfig.from_dict(v2)
    (tmp_path / "work").mkdir()
    assert deploy(f1, kafka_bootstrap) == 0
    kapp = KafkaApp(c1, kafka_bootstrap, tmp_path / "work", start=True)
    reader = RowReader(kafka_bootstrap, [c1.output_topic("avg")])
    try:
        for i in range(20):
            kapp.send("Withdrawal", {"account": account(i), "amount": amount(i)})
        kapp.settle()
        assert deploy(f2, kafka_bootstrap, "--rebuild", "avg=from-earliest") == 0
        assert kapp.worker.proc is not None
        assert kapp.worker.proc.wait(60) == EXIT_OTHER_VERSION
        kapp.worker = WorkerProcess(c2, kafka_bootstrap, tmp_path / "work")
        kapp.worker.start()
        rows: list[Any] = []
        deadline = time.monotonic() + 60
        while len(rows) < 40 and time.monotonic() < deadline:
            rows += reader.read_available(timeout_s=1)
    finally:
        reader.close()
        kapp.close()
    assert [r.id for r in rows] == [f"avg/0/{i}" for i in range(1, 41)]
    assert [r.row["a"] for r in rows[20:]] == [
        sum(w) / len(w) for w in windowed(0, 20, 2)]

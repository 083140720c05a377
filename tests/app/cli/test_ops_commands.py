"""Operating a deployed app from the command line: ``kepl status`` (lag as
``kafka-consumer-groups --describe`` shows it), ``undeploy``, ``reset``, ``tail`` and the
worker's banner, against the real broker."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli.kafka_commands import demo_file
from app.cli.main import main
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.ops import Broker, group_id
from app.runtime.kafka.worker import instance_id
from app.statements import load_statement_file

ROOT = Path(__file__).resolve().parents[3]
BANK = ROOT / "examples" / "bank.yaml"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
"""What ``kafka-consumer-groups`` runs (deploy/kafka/bin), here from the broker's jars."""
BANNER_WAIT_S = 60.0


def kepl(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run one kepl command in-process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def app(kafka_bootstrap: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A fresh copy of the bank app (own app name and source topic): (name, file); its
    topics and group are deleted afterwards."""
    name = f"ops{uuid.uuid4().hex[:8]}"
    f = tmp_path / f"{name}.yaml"
    f.write_text(BANK.read_text().replace("app: bank", f"app: {name}")
                 .replace("Withdrawal: withdrawals", f"Withdrawal: {name}-withdrawals"))
    yield name, f
    broker = Broker(kafka_bootstrap)
    mine = [t for t in broker.topics if t.startswith((f"kepl.{name}.", f"{name}-"))]
    if mine:
        for fut in broker.admin.delete_topics(mine, operation_timeout=10).values():
            try:
                fut.result()
            except Exception:  # noqa: BLE001 - clean-up only
                pass
    try:
        broker.admin.delete_consumer_groups([f"kepl.{name}"], request_timeout=10)[
            f"kepl.{name}"].result()
    except Exception:  # noqa: BLE001 - clean-up only (no group, or already gone)
        pass


class Worker:
    """``kepl worker FILE`` as a subprocess, its stderr collected."""

    def __init__(self, file: Path, bootstrap: str, data_dir: Path, *args: str) -> None:
        self.err = data_dir.parent / f"{data_dir.name}.stderr"
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app.cli.main", "worker", str(file), "--bootstrap",
                 bootstrap, "--data-dir", str(data_dir), *args],
                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)

    def lines(self) -> list[str]:
        return self.err.read_text().splitlines()

    def wait_for(self, prefix: str) -> str:
        deadline = time.monotonic() + BANNER_WAIT_S
        while time.monotonic() < deadline:
            for line in self.lines():
                if line.startswith(prefix):
                    return line
            assert self.proc.poll() is None, "\n".join(self.lines())
            time.sleep(0.2)
        raise AssertionError(f"no line {prefix!r}:\n" + "\n".join(self.lines()))

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


def status(capsys: pytest.CaptureFixture[str], f: Path, bootstrap: str) -> dict:
    code, out, err = kepl(capsys, "status", str(f), "--json", "--bootstrap", bootstrap)
    assert (code, err) == (0, "")
    return json.loads(out)


def wait_status(capsys: pytest.CaptureFixture[str], f: Path, bootstrap: str,
                done: object, timeout_s: float = 60.0) -> dict:
    """Poll ``kepl status --json`` until ``done(status)``."""
    deadline = time.monotonic() + timeout_s
    while True:
        st = status(capsys, f, bootstrap)
        if done(st):  # type: ignore[operator]
            return st
        assert time.monotonic() < deadline, json.dumps(st, indent=1)
        time.sleep(0.5)


def send(capsys: pytest.CaptureFixture[str], f: Path, bootstrap: str, *events: str) -> None:
    code, out, _ = kepl(capsys, "send", str(f), "Withdrawal", *events, "--bootstrap",
                        bootstrap)
    assert code == 0, out


def consumer_groups_describe(bootstrap: str, group: str) -> list[list[str]]:
    """The partition rows of ``kafka-consumer-groups --describe --group GROUP``."""
    from app.kafka import local_broker

    java = local_broker.java_bin()
    cp = local_broker.classpath(local_broker.ensure_jars())
    out = subprocess.run([str(java), "-cp", cp, CONSUMER_GROUPS, "--bootstrap-server",
                          bootstrap, "--describe", "--group", group],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return [ln.split() for ln in out.splitlines() if ln.startswith(group + " ")]


EVENTS = ['{"account": "A1", "amount": 500}', '{"account": "A2", "amount": 50}',
          '{"account": "A3", "amount": 250}', '{"account": "A4", "amount": 10}']


@pytest.mark.kafka
def test_status_shows_the_lag_of_a_stopped_worker_and_its_catching_up(
        kafka_bootstrap: str, app: tuple[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name, f = app
    b = kafka_bootstrap
    src = f"{name}-withdrawals"
    assert kepl(capsys, "deploy", str(f), "--bootstrap", b)[0] == 0
    send(capsys, f, b, *EVENTS)

    # no worker yet: every event is lag (a worker starts at the first offset)
    code, out, err = kepl(capsys, "status", str(f), "--bootstrap", b)
    assert (code, err) == (0, "")
    width = len(f"kepl.{name}.out.large_withdrawals") + 2
    topics = [("input", src), ("changelog", f"kepl.{name}.changelog.main"),
              ("output", f"kepl.{name}.out.large_withdrawals"),
              ("output", f"kepl.{name}.out.last_five"), ("dlq", f"kepl.{name}.dlq"),
              ("watermark", f"kepl.{name}.watermarks"), ("progress", f"kepl.{name}.progress")]
    head = [f"app {name} at {b}",
            f"version: 1 runs (kepl.{name}.deployments); this file is that version",
            "statements:",
            f"  large_withdrawals -> kepl.{name}.out.large_withdrawals",
            f"  last_five -> kepl.{name}.out.last_five", "topics:",
            *[f"  {role:<12}{t:<{width}}1 partition" for role, t in topics]]
    pad = " " * (len(src) - len("TOPIC"))
    assert out.splitlines() == [
        *head,
        f"consumer group kepl.{name}: does not exist (no worker joined yet)",
        "lag (end offset - committed offset):",
        f"  TOPIC{pad}  PARTITION  COMMITTED  END  LAG",
        f"  {src}  0          -          4    4",
        "  total lag 4",
        f"last watermark: none (kepl.{name}.watermarks)",
        f"dead letters: 0 (kepl.{name}.dlq)",
        f"changelog kepl.{name}.changelog.main[0]: offsets 0..0, no snapshot",
    ]

    # a worker with metrics: its banner, its partitions, lag 0
    data = tmp_path / "data"
    worker = Worker(f, b, data, "--metrics-port", "0")
    try:
        identity = instance_id(AppConfig.from_file(f), data)
        assert worker.wait_for("kepl worker: app ") == (
            f"kepl worker: app {name}, bootstrap {b}, consumer group kepl.{name}, instance "
            f"{identity}, state {data}, metrics any free port")
        assigned = worker.wait_for("kepl worker: assigned ")
        assert re.fullmatch(rf"kepl worker: assigned 1 partition\(s\): {src}\[0\] "
                            r"\(ready in \d+\.\d{3} s\)", assigned), assigned
        lines = worker.lines()
        assert any(re.fullmatch(r"kepl worker: restored main\[0\] in \d+\.\d{3} s "
                                r"\(changelog at -1\)", ln) for ln in lines), lines
        port = int(worker.wait_for("kepl worker: metrics and probes on port ").split()[7])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as r:
            assert r.status == 200
        assert kepl(capsys, "clock", str(f), "1000", "--bootstrap", b)[0] == 0
        st = wait_status(capsys, f, b, lambda s: s["total_lag"] == 0 and s["group"]["members"])
        assert st["lag"] == [{"topic": src, "partition": 0, "committed": 5, "end": 5,
                              "lag": 0, "lost": 0}]
        assert st["watermark"] == {"topic": f"kepl.{name}.watermarks", "last": 1000}
        member = st["group"]["members"][0]
        assert member["instance_id"] == identity
        assert member["partitions"] == [f"{src}[0]"]
        assert st["version"] == {"recorded": 1, "topic": f"kepl.{name}.deployments",
                                 "file_is_recorded": True, "others": []}
        code, out, _ = kepl(capsys, "status", str(f), "--bootstrap", b,
                            "--data-dir", str(data))
        lines = out.splitlines()
        assert lines[len(head):len(head) + 6] == [
            f"consumer group kepl.{name}: stable, 1 member(s)",
            f"  {identity} ({member['client_id']} on {member['host']}): {src}[0]",
            "lag (end offset - committed offset):",
            f"  TOPIC{pad}  PARTITION  COMMITTED  END  LAG",
            f"  {src}  0          5          5    0",
            "  total lag 0"]
        assert lines[len(head) + 6:len(head) + 8] == [
            f"last watermark: 1000 (kepl.{name}.watermarks)",
            f"dead letters: 0 (kepl.{name}.dlq)"]
        assert re.fullmatch(rf"  {data}/main/0 \(\d+ bytes\)", lines[-1]), lines
        assert lines[-2] == "state dirs:"
        # the same figures as Kafka's own tool
        assert consumer_groups_describe(b, f"kepl.{name}") == [
            [f"kepl.{name}", src, "0", "5", "5", "0", *member["member_id"].split(),
             member["host"], member["client_id"]]]
        # refused while the worker runs: one line, exit 1
        for cmd in ("undeploy", "reset"):
            assert kepl(capsys, cmd, str(f), "--yes", "--bootstrap", b) == (1, "", (
                f"kepl: {cmd}: consumer group kepl.{name} has 1 active member(s) "
                f"({identity}): stop the app's workers first (a stopped worker leaves the "
                "group after its 10 s session timeout)\n"))
    finally:
        assert worker.stop() == 0
    assert re.fullmatch(r"kepl worker: stopped after \d+\.\d s: 4 event\(s\), \d+ "
                        r"checkpoint\(s\), 0 dead letter\(s\)", worker.lines()[-1])

    # stopped: what arrives now is lag, as kafka-consumer-groups counts it
    send(capsys, f, b, *EVENTS[:3])
    st = wait_status(capsys, f, b, lambda s: not s["group"]["members"], 30)
    assert st["lag"] == [{"topic": src, "partition": 0, "committed": 5, "end": 8, "lag": 3,
                          "lost": 0}]
    assert st["group"]["state"] == "empty"
    assert consumer_groups_describe(b, f"kepl.{name}") == [
        [f"kepl.{name}", src, "0", "5", "8", "3", "-", "-", "-"]]

    # started again: lag back to 0
    worker = Worker(f, b, data)
    try:
        worker.wait_for("kepl worker: assigned ")
        st = wait_status(capsys, f, b, lambda s: s["total_lag"] == 0)
        assert st["lag"][0]["committed"] == 8
    finally:
        assert worker.stop() == 0

    # undeploy: said first (exit 2), then done
    wait_status(capsys, f, b, lambda s: not s["group"]["members"], 30)
    internal = [f"kepl.{name}.changelog.main", f"kepl.{name}.out.large_withdrawals",
                f"kepl.{name}.out.last_five", f"kepl.{name}.dlq", f"kepl.{name}.watermarks",
                f"kepl.{name}.progress", f"kepl.{name}.deployments"]
    argv = ("undeploy", str(f), "--delete-state", "--data-dir", str(data), "--bootstrap", b)
    assert kepl(capsys, *argv) == (2, "\n".join([
        "undeploy would:", *[f"  delete topic {t}" for t in internal],
        f"  delete consumer group kepl.{name}", f"  delete state directory {data}"]) + "\n",
        "kepl: undeploy: nothing done; add --yes to do it\n")
    assert data.exists()
    assert kepl(capsys, *argv, "--yes") == (0, "\n".join([
        *[f"deleted topic {t}" for t in internal], f"deleted consumer group kepl.{name}",
        f"deleted state directory {data}"]) + "\n", "")
    assert not data.exists()
    broker = Broker(b)
    assert src in broker.topics
    assert not set(internal) & set(broker.topics)
    assert broker.group(group_id(AppConfig.from_file(f))) == ("dead", [])


def rows(capsys: pytest.CaptureFixture[str], f: Path, b: str, *args: str) -> list[dict]:
    code, out, err = kepl(capsys, "tail", str(f), *args, "--no-follow", "--bootstrap", b)
    assert (code, err) == (0, "")
    return [json.loads(ln) for ln in out.splitlines()]


@pytest.mark.kafka
def test_reset_replays_the_inputs_into_fresh_state_and_tail_prints_each_row_once(
        kafka_bootstrap: str, app: tuple[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka import Producer

    name, f = app
    b = kafka_bootstrap
    assert kepl(capsys, "deploy", str(f), "--bootstrap", b)[0] == 0
    send(capsys, f, b, *EVENTS[:2])
    data = tmp_path / "data"
    worker = Worker(f, b, data)
    try:
        wait_status(capsys, f, b, lambda s: s["total_lag"] == 0 and s["lag"][0]["committed"])
    finally:
        assert worker.stop() == 0
    large = {"statement": "large_withdrawals", "stream": "insert", "context_partition": "0",
             "time": 0, "id": "large_withdrawals/0/1",
             "row": {"account": "A1", "amount": 500.0}}
    first = rows(capsys, f, b)
    assert first[0] == large
    assert [r["id"] for r in first] == [
        "large_withdrawals/0/1", "last_five/0/1", "last_five/0/2", "last_five/0/3",
        "last_five/0/4"]
    assert rows(capsys, f, b, "--statement", "large_withdrawals") == [large]
    assert rows(capsys, f, b, "large_withdrawals") == [large]
    assert rows(capsys, f, b, "--from-end") == []
    assert kepl(capsys, "tail", str(f), "--statement", "nope", "--no-follow",
                "--bootstrap", b) == (2, "", f"kepl: {f}: no statement named 'nope'\n")
    # a repeat (same row id, as a crash may leave) is printed once
    p = Producer({"bootstrap.servers": b})
    p.produce(f"kepl.{name}.out.large_withdrawals", b'{"account": "A1", "amount": 500.0}',
              headers=[("kepl.statement", b"large_withdrawals"), ("kepl.stream", b"insert"),
                       ("kepl.context_partition", b"0"), ("kepl.time", b"0"),
                       ("kepl.id", b"large_withdrawals/0/1")])
    p.flush(10)
    assert rows(capsys, f, b, "--statement", "large_withdrawals") == [large]

    wait_status(capsys, f, b, lambda s: not s["group"]["members"], 30)
    derived = [f"kepl.{name}.changelog.main", f"kepl.{name}.out.large_withdrawals",
               f"kepl.{name}.out.last_five", f"kepl.{name}.dlq", f"kepl.{name}.progress"]
    argv = ("reset", str(f), "--data-dir", str(data), "--bootstrap", b)
    assert kepl(capsys, *argv) == (2, "\n".join([
        "reset would:", f"  delete consumer group kepl.{name} (its committed offsets)",
        *[f"  delete and recreate topic {t}" for t in derived],
        f"  delete state directory {data}"]) + "\n",
        "kepl: reset: nothing done; add --yes to do it\n")
    assert kepl(capsys, *argv, "--yes") == (0, "\n".join([
        f"deleted consumer group kepl.{name} (its committed offsets)",
        *[f"recreated topic {t} (1 partition)" for t in derived],
        f"deleted state directory {data}"]) + "\n", "")
    st = status(capsys, f, b)
    assert st["lag"] == [{"topic": f"{name}-withdrawals", "partition": 0, "committed": None,
                          "end": 2, "lag": 2, "lost": 0}]
    assert rows(capsys, f, b) == []
    # the next worker reads the inputs again into fresh state: the same rows
    worker = Worker(f, b, data)
    try:
        wait_status(capsys, f, b, lambda s: s["total_lag"] == 0 and s["lag"][0]["committed"])
    finally:
        assert worker.stop() == 0
    assert rows(capsys, f, b) == first


@pytest.mark.kafka
def test_tail_follow_says_when_the_broker_goes_and_comes_back(tmp_path: Path) -> None:
    """One line per broker state change on stderr, no librdkafka log lines; rows before
    and after the outage on stdout.  A broker of its own: the shared one stays up."""
    from confluent_kafka import Producer

    from app.kafka import local_broker

    data_dir = tmp_path / "broker"
    info = local_broker.start(port=local_broker.free_port_pair(), data_dir=data_dir,
                              wait_s=90, die_with_parent=True)
    b = info.bootstrap
    tail = None
    try:
        name = f"tail{uuid.uuid4().hex[:6]}"
        f = tmp_path / f"{name}.yaml"
        f.write_text(BANK.read_text().replace("app: bank", f"app: {name}"))
        assert main(["deploy", str(f), "--bootstrap", b]) == 0
        topic = f"kepl.{name}.out.large_withdrawals"
        p = Producer({"bootstrap.servers": b, "log_level": 0})

        def row(seq: int) -> str:
            p.produce(topic, b'{"account": "A1", "amount": 500.0}',
                      headers=[("kepl.statement", b"large_withdrawals"),
                               ("kepl.stream", b"insert"), ("kepl.context_partition", b"0"),
                               ("kepl.time", b"0"), ("kepl.id", f"large_withdrawals/0/{seq}")])
            p.flush(30)
            return json.dumps({"statement": "large_withdrawals", "stream": "insert",
                               "context_partition": "0", "time": 0,
                               "id": f"large_withdrawals/0/{seq}",
                               "row": {"account": "A1", "amount": 500.0}})

        first = row(1)
        err_path = tmp_path / "tail.err"
        with open(err_path, "wb") as err:
            tail = subprocess.Popen(
                [sys.executable, "-m", "app.cli.main", "tail", str(f), "--bootstrap", b],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert tail.stdout is not None
        assert tail.stdout.readline().rstrip("\n") == first

        def stderr_has(n: int) -> list[str]:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                lines = err_path.read_text().splitlines()
                if len(lines) >= n:
                    return lines
                time.sleep(0.2)
            return err_path.read_text().splitlines()

        local_broker.stop(data_dir=data_dir, timeout_s=30)
        assert stderr_has(1) == [f"kepl: tail: broker {b} unreachable, retrying"]
        time.sleep(3)  # librdkafka keeps retrying: still one line
        local_broker.start(port=info.port, data_dir=data_dir, wait_s=90, die_with_parent=True)
        assert stderr_has(2) == [f"kepl: tail: broker {b} unreachable, retrying",
                                 f"kepl: tail: connected to {b}"]
        second = row(2)
        assert tail.stdout.readline().rstrip("\n") == second
        tail.send_signal(signal.SIGINT)
        assert tail.wait(30) == 130
        assert err_path.read_text().splitlines() == [
            f"kepl: tail: broker {b} unreachable, retrying", f"kepl: tail: connected to {b}"]
    finally:
        if tail is not None and tail.poll() is None:
            tail.kill()
        local_broker.stop(data_dir=data_dir, timeout_s=30)


def test_the_demo_runs_an_app_of_its_own(tmp_path: Path) -> None:
    """``kepl demo`` never feeds nor reads the app of the README's steps."""
    demo = AppConfig.from_file(demo_file(load_statement_file(BANK), tmp_path))
    bank = AppConfig.from_file(BANK)
    assert (demo.app, demo.source_topics) == ("bank-demo", ["bank-demo.withdrawals"])
    assert [demo.output_topic(s.name) for s in demo.statements] == [
        "kepl.bank-demo.out.large_withdrawals", "kepl.bank-demo.out.last_five"]
    assert demo.statements == bank.statements


def test_the_demo_leaves_a_broker_that_was_already_running(tmp_path: Path) -> None:
    """``kepl demo`` stops the local broker it started, never one that was up before it."""
    from app.kafka import local_broker

    port = local_broker.free_port_pair()
    local_broker.start(port=port, wait_s=90, die_with_parent=True)
    try:
        root = Path(__file__).resolve().parents[3]
        demo = subprocess.Popen(
            [sys.executable, "-m", "app.cli.main", "demo", "--port", str(port)],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONPATH": str(root)})
        assert demo.stdout is not None
        # Ctrl-C after 90 s at the latest: a demo that shows no row must not hang the test
        deadline = threading.Timer(90, demo.send_signal, [signal.SIGINT])
        deadline.start()
        lines = []
        for line in demo.stdout:  # until the first output row
            lines.append(line.rstrip("\n"))
            if line.startswith("{"):
                break
        deadline.cancel()
        demo.send_signal(signal.SIGINT)
        rest, _ = demo.communicate(timeout=60)
        lines += rest.splitlines()
        assert any(line.startswith('{"statement": ') for line in lines), lines
        bootstrap = f"127.0.0.1:{port}"
        assert f"kepl demo: broker up ({bootstrap}, already running); creating topics" in lines
        assert lines[-1] == (f"kepl demo: the broker at {bootstrap} was running before the "
                             "demo; it goes on (kepl kafka stop stops it)")
        assert demo.returncode == 0
        assert local_broker.status(port=port).running
    finally:
        local_broker.stop(port=port)
        shutil.rmtree(local_broker.default_data_dir(port), ignore_errors=True)

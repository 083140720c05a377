"""``kepl scenario run --kafka`` owns its worker processes: a scenario stopped by the time
limit, or a run stopped by Ctrl-C, leaves none running (on the real broker; Linux, as it
reads /proc)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[4]
STEPS = 40_000  # a step is a watermark's round trip (3-5 ms, measured: 4,000 steps fit in the
# 20 s limit on a quiet machine): far more than the time limit lets through
LIMIT_S = 20


def workers_of(app: str) -> list[int]:
    """Pids of live worker processes whose command line names the app."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"app.runtime.kafka.worker" in cmd and app.encode() in cmd and state != "Z":
            out.append(int(d.name))
    return out


def long_scenario(tmp_path: Path) -> tuple[Path, str]:
    name = f"owned-{uuid.uuid4().hex[:8]}"
    steps: list[dict] = []
    for i in range(STEPS):
        steps += [{"send": "Bid", "event": {"symbol": "A", "price": float(i)}},
                  {"expect": {"s": "none"}}]
    doc = {"name": name, "schemas": {"Bid": {"symbol": "string", "price": "double"}},
           "statements": [{"name": "s", "epl": "select * from Bid(price < 0)"}],
           "steps": steps}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path, name


def start_run(path: Path, bootstrap: str, limit_s: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "scenario", "run", "--kafka", "--bootstrap",
         bootstrap, "--time-limit", str(limit_s), str(path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})


def wait_for(cond: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_a_timed_out_scenario_leaves_no_worker(kafka_bootstrap: str, tmp_path: Path) -> None:
    path, name = long_scenario(tmp_path)
    run = start_run(path, kafka_bootstrap, LIMIT_S)
    try:
        assert wait_for(lambda: workers_of(name), LIMIT_S), "the worker never started"
        out, _ = run.communicate(timeout=LIMIT_S + 60)
    finally:
        run.kill()
    assert f"FAIL {name}: time limit" in out, out
    assert run.returncode == 1
    assert wait_for(lambda: not workers_of(name), 5), f"workers left: {workers_of(name)}"


def test_ctrl_c_leaves_no_worker(kafka_bootstrap: str, tmp_path: Path) -> None:
    path, name = long_scenario(tmp_path)
    run = start_run(path, kafka_bootstrap, 60)
    try:
        assert wait_for(lambda: workers_of(name), LIMIT_S), "the worker never started"
        run.send_signal(signal.SIGINT)  # to the command only, not to its process group
        # the worker stops within its bound (10 s), then the command cleans up on a broker
        # that may be busy with other tests: 30 s once ran out while the suite ran
        run.communicate(timeout=60)
    finally:
        run.kill()
    assert wait_for(lambda: not workers_of(name), 5), f"workers left: {workers_of(name)}"

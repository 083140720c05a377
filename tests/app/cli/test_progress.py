"""The progress line of ``kepl run --events FILE``: on a terminal stderr only."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
BANK = ROOT / "examples" / "bank.yaml"
STEPS = ROOT / "examples" / "bank-events.jsonl"
CLEAR = "\r\x1b[K"


def test_no_progress_text_when_stderr_is_not_a_terminal(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(BANK), "--events", str(STEPS)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert [json.loads(line)["id"] for line in out.splitlines()][:3] == [
        "large_withdrawals/0/1", "last_five/0/1", "last_five/0/2"]


def test_no_progress_text_in_a_pipe() -> None:
    proc = subprocess.run([sys.executable, "-m", "app.cli.main", "run", str(BANK),
                           "--events", str(STEPS)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert len(proc.stdout.splitlines()) == 15


def test_progress_line_on_a_terminal() -> None:
    """stderr on a pseudo-terminal: frames rewritten in place, then the summary."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "run", str(BANK),
                                 "--events", str(STEPS)], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=slave, text=True)
        os.close(slave)
        out, _ = proc.communicate(timeout=60)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    err = b"".join(chunks).decode().replace("\r\n", "\n")
    assert proc.returncode == 0
    assert len(out.splitlines()) == 15  # rows go to stdout as they are
    frames = err.split(CLEAR)
    assert frames[0] == ""
    # the first frame is drawn on the first step, the summary stays on its line
    assert frames[1] == "kepl run: 0 events, 0 rows, 0 rows/s, lag 97% of the steps"
    assert frames[-1] == "kepl run: 6 events, 15 rows, done\n"
    for frame in frames[2:-1]:
        assert frame == "" or re.fullmatch(
            r"kepl run: \d+ events, \d+ rows, \d+ rows/s, lag \d+% of the steps", frame), frame


def test_scenario_run_writes_no_progress_in_a_pipe(tmp_path: Path) -> None:
    f = tmp_path / "one.yaml"
    f.write_text("name: one\nstatements:\n  - create schema E(a int)\n"
                 "  - name: s\n    epl: select a from E\n"
                 "steps:\n  - send: E\n    event: {a: 1}\n    expect: {s: [{a: 1}]}\n")
    proc = subprocess.run([sys.executable, "-m", "app.cli.main", "scenario", "run", str(f)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.stderr == ""
    assert proc.stdout.splitlines()[-1].endswith("(1 file)")

"""A statement file kepl cannot use stops ``kepl run``, ``deploy``, ``worker`` and the
worker module with one line on stderr saying what is wrong and where (exit 2), never a
traceback; ``partitions`` is the one name of the source partitions everywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.cli.check import check_paths
from app.runtime.kafka.config import AppConfig, ConfigError

ROOT = Path(__file__).resolve().parents[3]
# no broker listens here: each command must stop at the file, before it probes a broker
NOWHERE = "127.0.0.1:1"

BAD_EPL = """\
app: bad
schemas:
  W: {account: string}
statements:
  - name: big
    epl: select * from Wx
"""
BIG_INT = "app: bad\npartitions: " + "9" * 4301 + "\nstatements: []\n"
BAD_DATE = "app: bad\nstatements:\n  - epl: 2001-02-30\n"

CASES = [
    (BAD_EPL, "{f}:6:24: statement 'big': unknown event type 'Wx' (did you mean 'W'?)"),
    (BIG_INT, "{f}: not valid YAML at line 2, column 13: an integer of 4301 digits is too "
              "long to read (at most 4300 digits)"),
    (BAD_DATE, "{f}: not valid YAML at line 3, column 10: cannot read this timestamp: day "
               "is out of range for month"),
]


def _kepl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("content", "line"), CASES, ids=["epl", "big-int", "date"])
@pytest.mark.parametrize("command", ["run", "deploy", "worker"])
def test_one_line_for_a_bad_file(tmp_path: Path, command: str, content: str,
                                 line: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(content)
    args = ["--events", "/dev/null"] if command == "run" else ["--bootstrap", NOWHERE]
    proc = _kepl(command, str(f), *args)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", "kepl: " + line.format(f=f) + "\n")


README_BAD = """\
app: bank
schemas:
  Withdrawal: {account: string, amount: double}
statements:
  - name: big
    epl: select * from Withdrawl(amount >= 200)
  - name: per_account
    epl: |
      select account, sum(amount) as total
        from Withdrawal
        group by acount
  - name: last
    epl: select * from Withdrawal#length(5)
    output_topik: last-five
"""


@pytest.mark.parametrize("command", ["run", "deploy", "worker"])
def test_shape_errors_point_at_the_first_error(tmp_path: Path, command: str) -> None:
    """The README's bad.yaml: its unknown key is a shape error the loader finds first,
    but the line names the file's first error at its place, as kepl check lists it."""
    f = tmp_path / "bad.yaml"
    f.write_text(README_BAD)
    args = ["--events", "/dev/null"] if command == "run" else ["--bootstrap", NOWHERE]
    proc = _kepl(command, str(f), *args)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", f"kepl: {f}:6:24: statement 'big': unknown event type 'Withdrawl' (did you "
               f"mean 'Withdrawal'?); 2 more: kepl check {f} lists them\n")


def test_worker_module_one_line(tmp_path: Path) -> None:
    """``python -m app.runtime.kafka.worker --config``: the same files, one line each."""
    expected = [
        "kepl: worker: {f}: a statement is invalid: line 1:15 of its text: unknown event "
        "type 'Wx' (kepl check lists every error of a statement file)",
        "kepl: worker: " + CASES[1][1],
        "kepl: worker: " + CASES[2][1],
        "kepl: worker: {f}: cannot read: No such file or directory",
    ]
    for (content, _), want in zip([*CASES, ("", "")], expected, strict=True):
        f = tmp_path / "app.yaml"
        f.unlink(missing_ok=True)
        if content:
            f.write_text(content)
        proc = subprocess.run([sys.executable, "-m", "app.runtime.kafka.worker", "--config",
                               str(f), "--data-dir", str(tmp_path / "d"), "--bootstrap",
                               NOWHERE], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert (proc.returncode, proc.stderr) == (2, want.format(f=f) + "\n")


# -- one name for the source partitions -------------------------------------------------
DOC = {"app": "p", "schemas": {"W": {"a": "string"}},
       "statements": [{"name": "s", "epl": "select * from W"}]}


def test_partitions_is_the_one_name(tmp_path: Path) -> None:
    """``kepl check`` and the worker's config agree: ``partitions`` is read, and
    ``source_partitions`` is refused by both."""
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({**DOC, "partitions": 3}))
    assert check_paths([str(good)]) == ([], 0)
    config = AppConfig.from_dict({**DOC, "partitions": 3})
    assert config.source_partitions == 3
    assert config.to_dict()["partitions"] == 3
    assert "source_partitions" not in config.to_dict()
    assert AppConfig.from_dict(config.to_dict()) == config

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**DOC, "source_partitions": 3}, sort_keys=False))
    lines, failures = check_paths([str(bad)])
    assert failures == 1
    assert "unknown key 'source_partitions'" in lines[0]
    with pytest.raises(ConfigError) as e:
        AppConfig.from_dict({**DOC, "source_partitions": 3})
    assert str(e.value) == ("unknown key 'source_partitions': the partitions of the source "
                            "topics are 'partitions'")

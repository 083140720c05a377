"""Exit codes (0 success, 1 runtime failure, 2 usage or validation error), ``--version``,
help for every argument, and a reader that closes the output early."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from app.cli.main import EXIT_CODES, build_parser, main

ROOT = Path(__file__).resolve().parents[3]
BANK = ROOT / "examples" / "bank.yaml"


def _steps(tmp_path: Path, *steps: dict) -> str:
    f = tmp_path / "steps.jsonl"
    f.write_text("".join(json.dumps(s) + "\n" for s in steps))
    return str(f)


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"kepl {version}\n"


def test_help_ends_with_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert capsys.readouterr().out.endswith("\n\n" + EXIT_CODES)
    assert EXIT_CODES.splitlines()[1:5] == [
        "  0    success",
        "  1    runtime failure: no broker answers, the app is not deployed, events or",
        "       watermarks not delivered, steps or events rejected (run), scenarios failed,",
        "       undeploy or reset refused while the app's workers run"]


def _parsers(parser: argparse.ArgumentParser, name: str = "kepl"
             ) -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                out += _parsers(sub, f"{name} {sub_name}")
    return out


def test_every_positional_argument_has_help() -> None:
    missing = [f"{name} {a.dest}" for name, p in _parsers(build_parser()) for a in p._actions
               if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
               and not a.help]
    assert missing == []


def test_run_exits_1_naming_each_rejected_step(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    steps = _steps(tmp_path, {"time": 10}, {"time": 5},
                   {"send": "Withdrawal", "event": {"account": "A", "amount": "x"}},
                   {"send": "Withdrawal", "event": {"account": "A", "amount": 300}})
    assert main(["run", str(BANK), "--events", steps]) == 1
    out, err = capsys.readouterr()
    assert [(r["stream"], r["row"]) for r in map(json.loads, out.splitlines())] == [
        ("insert", {"account": "A", "amount": 300.0}), ("insert", {"cnt": 1, "total": 300.0}),
        ("remove", {"cnt": 0, "total": None})]
    assert err == (f"kepl: {steps}:2: time cannot move backwards (5 < 10)\n"
                   f"kepl: {steps}:3: Withdrawal.amount must be a double, got 'x'\n"
                   "kepl: run: 2 step(s) rejected\n")


def test_run_with_every_step_accepted_exits_0(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    steps = _steps(tmp_path, {"time": 10},
                   {"send": "Withdrawal", "event": {"account": "A", "amount": 30}})
    assert main(["run", str(BANK), "--events", steps]) == 0
    assert capsys.readouterr().err == ""


def test_run_of_an_invalid_statement_file_exits_2(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BANK.read_text().replace("Withdrawal(amount >= 200)", "Nothing"))
    assert main(["run", str(bad), "--events", _steps(tmp_path)]) == 2
    assert "Nothing" in capsys.readouterr().err


def test_clock_without_a_time_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["clock", str(BANK), "--bootstrap", "127.0.0.1:1"]) == 2
    assert capsys.readouterr().err == (
        "kepl: clock: give a time in ms, --wall or --from-events\n")


def test_clock_from_events_needs_an_event_time_section(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["clock", str(BANK), "--from-events", "--bootstrap", "127.0.0.1:1"]) == 2
    assert capsys.readouterr().err == (
        f"kepl: clock: {BANK} has no 'event_time' section "
        "(event_time: {delay_ms: ..., idle_ms: ...})\n")


def test_a_reader_closing_the_pipe_early_stops_run_quietly(tmp_path: Path) -> None:
    steps = _steps(tmp_path, *[{"send": "Withdrawal", "event": {"account": "A", "amount": 500}}
                               for _ in range(5000)])
    proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "run", str(BANK),
                             "--events", steps], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read()
    assert proc.wait(60) == 141
    assert json.loads(first)["statement"] == "large_withdrawals"
    assert err == b""


def test_spark_with_the_broker_down_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # before any Spark session: its Kafka source would wait minutes for the broker
    assert main(["spark", "read", "--topic", "t", "--bootstrap", "127.0.0.1:1"]) == 1
    assert capsys.readouterr().err == (
        "kepl: spark: no Kafka broker answers at 127.0.0.1:1: Local: Broker transport "
        "failure (is the broker up? kepl kafka start)\n")

"""Kafka commands fail in one line naming the broker and what to run: a broker that does
not answer, an app that is not deployed, a watermark that goes backwards."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from app.cli import kafka_commands
from app.cli.main import main
from app.runtime.kafka.clock import last_watermark

BANK = Path(__file__).resolve().parents[3] / "examples" / "bank.yaml"
SCENARIO = Path(__file__).resolve().parents[3] / "examples" / "bank-scenario.yaml"
DOWN = "127.0.0.1:1"
NO_BROKER = ("no Kafka broker answers at 127.0.0.1:1: Local: Broker transport failure "
             "(is the broker up? kepl kafka start)")


@pytest.fixture
def short_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_commands, "PROBE_TIMEOUT_S", 1.0)


@pytest.mark.parametrize("argv", [
    ["deploy", str(BANK)],
    ["worker", str(BANK)],
    ["clock", str(BANK), "5"],
    ["tail", str(BANK)],
    ["query", "--kafka", "--file", str(BANK), "--iterate", "last_five"],
    ["scenario", "run", "--kafka", str(SCENARIO)],
])
def test_a_broker_that_does_not_answer_is_one_line_exit_1(
        argv: list[str], short_probe: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--bootstrap", DOWN]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"kepl: {argv[0]}: {NO_BROKER}\n")


def test_a_watermark_the_broker_does_not_take_is_one_line_exit_1(
        short_probe: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # the broker goes away after the checks: publishing itself fails
    monkeypatch.setattr(kafka_commands, "require_deployed", lambda *a: None)
    monkeypatch.setattr("app.runtime.kafka.clock.last_watermark", lambda *a: None)
    assert main(["clock", str(BANK), "5", "--bootstrap", DOWN, "--timeout", "1"]) == 1
    assert capsys.readouterr().err == (
        "kepl: clock: watermark 5 not delivered at 127.0.0.1:1: Failed to get metadata: "
        "Local: Broker transport failure (is the broker up? kepl kafka start)\n")


def _app(tmp_path: Path) -> tuple[str, Path]:
    """A fresh copy of the bank app (own app name and source topic): (name, file)."""
    name = f"cli{uuid.uuid4().hex[:8]}"
    f = tmp_path / f"{name}.yaml"
    f.write_text(BANK.read_text().replace("app: bank", f"app: {name}")
                 .replace("Withdrawal: withdrawals", f"Withdrawal: {name}-withdrawals"))
    return name, f


@pytest.mark.kafka
@pytest.mark.parametrize("argv", [["clock", "{f}", "5"], ["tail", "{f}"],
                                  ["query", "--kafka", "--file", "{f}", "--iterate", "x"]])
def test_an_app_not_deployed_is_one_line_exit_1(
        argv: list[str], kafka_bootstrap: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name, f = _app(tmp_path)
    assert main([a.format(f=f) for a in argv] + ["--bootstrap", kafka_bootstrap]) == 1
    assert capsys.readouterr() == ("", (
        f"kepl: {argv[0]}: app {name} is not deployed at {kafka_bootstrap}: topic "
        f"{name}-withdrawals (and 6 more) does not exist (kepl deploy {f})\n"))


@pytest.mark.kafka
def test_a_watermark_that_goes_backwards_is_refused_exit_2(
        kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, f = _app(tmp_path)
    def clock(t: int) -> int:
        return main(["clock", str(f), str(t), "--bootstrap", kafka_bootstrap])

    assert main(["deploy", str(f), "--bootstrap", kafka_bootstrap]) == 0
    capsys.readouterr()
    assert clock(1000) == 0
    assert clock(1000) == 0  # the same time again is no step back
    assert capsys.readouterr() == ("watermark 1000 published\nwatermark 1000 published\n", "")
    assert clock(999) == 2
    assert capsys.readouterr() == ("", (
        f"kepl: clock: time cannot move backwards (999 < 1000, the last watermark on "
        f"kepl.{name}.watermarks)\n"))
    assert clock(2000) == 0
    assert last_watermark(kafka_bootstrap, f"kepl.{name}.watermarks") == 2000


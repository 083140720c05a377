"""``kepl send`` checks every event as a worker would, before producing any."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import main

BANK = Path(__file__).resolve().parents[3] / "examples" / "bank.yaml"


@pytest.mark.parametrize(("event", "reason"), [
    ('{"account": "W1", "amount": NaN}', "Withdrawal.amount must be a finite double, got nan"),
    ('{"account": "W1", "amount": 1e999}', "Withdrawal.amount must be a finite double, got inf"),
    ('{"account": "W1", "amount": "x"}', "Withdrawal.amount must be a double, got 'x'"),
    ('{"account": "W1"', "not JSON: Expecting ',' delimiter: line 1 column 17 (char 16)"),
    ("[1]", "an event of Withdrawal must be a JSON object"),
])
def test_an_invalid_event_stops_the_command_before_anything_is_sent(
        event: str, reason: str, capsys: pytest.CaptureFixture[str]) -> None:
    # the bootstrap names no broker: nothing may be produced before the check
    code = main(["send", str(BANK), "Withdrawal", '{"account": "W1", "amount": 500}', event,
                 "--bootstrap", "127.0.0.1:1"])
    assert code == 2
    assert capsys.readouterr().err == f"kepl: send: event 2 not sent (nothing was): {reason}\n"

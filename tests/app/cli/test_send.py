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


def test_a_broker_that_does_not_answer_is_reported_not_sent(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["send", str(BANK), "Withdrawal", '{"account": "W1", "amount": 500}',
                 "--bootstrap", "127.0.0.1:1", "--timeout", "1"])
    assert code == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "kepl: send: 1 of 1 event(s) not delivered to withdrawals at 127.0.0.1:1: Local: "
        "Message timed out (is the broker up? kepl kafka start; is the app deployed? "
        f"kepl deploy {BANK})\n")


@pytest.mark.kafka
def test_sent_events_are_on_the_topic(kafka_bootstrap: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    topic = f"send-{uuid.uuid4().hex[:8]}"
    app = tmp_path / "app.yaml"
    app.write_text(BANK.read_text().replace("Withdrawal: withdrawals", f"Withdrawal: {topic}"))
    events = ['{"account": "W1", "amount": 500}', '{"account": "W2", "amount": 5}']
    assert main(["send", str(app), "Withdrawal", *events, "--bootstrap", kafka_bootstrap]) == 0
    assert capsys.readouterr().out == f"sent 2 event(s) to {topic}\n"
    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"t-{topic}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = [m.value().decode() for m in c.consume(2, 10)]
    c.close()
    assert got == events

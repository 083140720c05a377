"""``kepl status`` right after a first deploy: a broker whose group coordinator is still
loading answers COORDINATOR_LOAD_IN_PROGRESS for a few seconds; status asks again with
a short pause, and after its retry budget says in one line what failed (exit 1)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from app.cli.main import main
from app.runtime.kafka import ops
from app.runtime.kafka.ops import BrokerError, Retrying

ROOT = Path(__file__).resolve().parents[3]
BANK = ROOT / "examples" / "bank.yaml"


def _failure(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


class Clock:
    """A fake monotonic clock that ``sleep`` moves."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def sleep(self, s: float) -> None:
        self.pauses.append(s)
        self.now += s


def _flaky(failures: int, code: int = KafkaError.COORDINATOR_LOAD_IN_PROGRESS
           ) -> Callable[[], str]:
    calls = {"n": 0}

    def request() -> str:
        calls["n"] += 1
        if calls["n"] <= failures:
            raise _failure(code)
        return "answer"

    return request


def test_transient_errors_are_asked_again() -> None:
    clock = Clock()
    retry = Retrying(5.0, clock.sleep, lambda: clock.now)
    assert retry("describe consumer group g", _flaky(5)) == "answer"
    assert clock.pauses == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert retry.retries == 5


@pytest.mark.parametrize("name", ["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
                                  "LEADER_NOT_AVAILABLE", "_TIMED_OUT", "_TRANSPORT"])
def test_each_transient_error(name: str) -> None:
    clock = Clock()
    assert Retrying(5.0, clock.sleep, lambda: clock.now)(
        "x", _flaky(2, getattr(KafkaError, name))) == "answer"


def test_retries_are_bounded_then_one_line() -> None:
    clock = Clock()
    retry = Retrying(3.0, clock.sleep, lambda: clock.now)
    with pytest.raises(BrokerError) as e:
        retry("describe consumer group kepl.bank", _flaky(10**6))
    assert clock.now <= 3.0
    loading = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS).str()
    assert str(e.value) == (
        f"describe consumer group kepl.bank: {loading} (still after retrying for 3 s)")
    # the budget is per status run: a later request does not start a new one
    clock.now = 3.0
    with pytest.raises(BrokerError):
        retry("list committed offsets of kepl.bank", _flaky(1))


def test_other_errors_are_not_retried() -> None:
    clock = Clock()
    with pytest.raises(BrokerError) as e:
        Retrying(5.0, clock.sleep, lambda: clock.now)(
            "x", _flaky(1, KafkaError.GROUP_AUTHORIZATION_FAILED))
    assert clock.pauses == []
    assert str(e.value) == f"x: {KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED).str()}"


class LoadingCoordinator:
    """An admin client whose group coordinator answers COORDINATOR_LOAD_IN_PROGRESS to
    its first ``failures`` group descriptions, as a new broker's does."""

    failures = 0
    asked = 0

    def __init__(self, admin: Any) -> None:
        self.admin = admin

    def __getattr__(self, name: str) -> Any:
        return getattr(self.admin, name)

    def describe_consumer_groups(self, group_ids: list[str], **kwargs: Any) -> dict:
        cls = type(self)
        cls.asked += 1
        if cls.asked <= cls.failures:
            out: dict[str, Future] = {}
            for g in group_ids:
                f: Future = Future()
                f.set_exception(_failure(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
                out[g] = f
            return out
        return self.admin.describe_consumer_groups(group_ids, **kwargs)


@pytest.mark.kafka
def test_status_waits_for_a_loading_coordinator(
        kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"st{uuid.uuid4().hex[:8]}"
    f = tmp_path / f"{name}.yaml"
    f.write_text(BANK.read_text().replace("app: bank", f"app: {name}")
                 .replace("Withdrawal: withdrawals", f"Withdrawal: {name}-withdrawals"))
    assert main(["deploy", str(f), "--bootstrap", kafka_bootstrap]) == 0
    setup = ops.Broker.__post_init__

    def loading(broker: ops.Broker) -> None:
        setup(broker)
        broker.admin = LoadingCoordinator(broker.admin)

    monkeypatch.setattr(ops.Broker, "__post_init__", loading)

    LoadingCoordinator.failures, LoadingCoordinator.asked = 3, 0
    capsys.readouterr()
    assert main(["status", str(f), "--json", "--bootstrap", kafka_bootstrap]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["group"] == {"id": f"kepl.{name}", "state": "dead", "members": []}
    # 3 refusals, then the broker's answer (on a session's new broker its coordinator
    # may really be loading: more asks)
    assert err == ""
    assert LoadingCoordinator.asked >= 4

    monkeypatch.setattr(ops, "RETRY_S", 2.0)
    LoadingCoordinator.failures, LoadingCoordinator.asked = 10**6, 0
    assert main(["status", str(f), "--json", "--bootstrap", kafka_bootstrap]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"kepl: status: describe consumer group kepl.{name}: "
                   f"{KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS).str()} (still after "
                   f"retrying for 2 s) (at {kafka_bootstrap})\n")

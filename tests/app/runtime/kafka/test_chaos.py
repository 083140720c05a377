"""The chaos run, short: two workers killed with SIGKILL at random ≥ 10 times while an
app streams (and the broker restarted once where the session owns it); the raw output
topics must hold the embedded run's rows exactly once.  ``make chaos`` runs the long
version (``chaos.py``)."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from tests.app.runtime.kafka.chaos import Chaos, compare, embedded_rows, steps

KILLS = int(os.environ.get("KEPL_CHAOS_KILLS", "10"))
EVENTS = int(os.environ.get("KEPL_CHAOS_EVENTS", "6000"))


def test_compare_finds_lost_repeated_and_changed_rows() -> None:
    from app.runtime.kafka.reader import OutputRow

    def row(stmt: str, seq: int, r: dict) -> OutputRow:
        return OutputRow(stmt, "insert", "A1", 0, f"{stmt}/A1/{seq}", r, "t", 0, seq)

    expected = {("last5", "insert", "A1"): [{"account": "A1", "cnt": 1},
                                             {"account": "A1", "cnt": 2}]}
    ok = [row("last5", 1, {"account": "A1", "cnt": 1}),
          row("last5", 2, {"account": "A1", "cnt": 2})]
    assert compare(expected, ok)[:3] == (0, 0, 0)
    assert compare(expected, ok[:1])[:3] == (1, 0, 0)
    assert compare(expected, ok + ok[1:])[:3] == (0, 1, 0)
    changed = [ok[0], row("last5", 2, {"account": "A1", "cnt": 3})]
    assert compare(expected, changed)[:3] == (0, 0, 1)


def test_the_embedded_reference_has_rows_of_every_statement() -> None:
    from tests.app.runtime.kafka.chaos import app_config

    rows = embedded_rows(app_config("x"), steps(600, 100, seed=1))
    assert {k[0] for k in rows} == {"last5", "batch", "snap", "all10", "big", "per_bucket",
                                    "spent", "per_count"}
    assert sum(len(v) for k, v in rows.items() if k[0] == "last5") == 600


@pytest.mark.kafka
@pytest.mark.timeout(600)
@pytest.mark.parametrize("workers,kills,events,gaps,broker,pauses", [
    (2, KILLS, EVENTS, (0.5, 2.5), True, 0),
    # the crash loop of a single worker that once stopped making progress: 28 kills,
    # 20,000 events, 201 watermarks
    (1, 28, 20_000, (0.3, 1.5), False, 0),
    # a worker frozen past its session timeout wakes up as a zombie
    (2, 2, 6000, (0.5, 1.5), False, 1),
], ids=["two-workers", "one-worker-28-kills", "zombie"])
def test_random_kills_lose_and_repeat_nothing(
        kafka_bootstrap: str, kafka_broker_restart: Callable[[], None] | None,
        workers: int, kills: int, events: int, gaps: tuple[float, float],
        broker: bool, pauses: int) -> None:
    chaos = Chaos(kafka_bootstrap, events=events, kills=kills, workers=workers,
                  min_gap_s=gaps[0], max_gap_s=gaps[1], seed=11, pauses=pauses,
                  restart_broker=kafka_broker_restart if broker else None)
    try:
        outcome = chaos.run(timeout_s=480)
    finally:
        chaos.close()
    print(outcome.summary())
    assert outcome.kills == kills
    assert outcome.pauses == pauses
    assert outcome.expected > events
    assert (outcome.lost, outcome.duplicated, outcome.mismatched) == (0, 0, 0), \
        outcome.problems
    assert outcome.read == outcome.expected

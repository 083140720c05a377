"""``kepl status --watch``: rates from successive statuses, frames in a pipe and on a
terminal, Ctrl-C; and a couple of refreshes of a real app."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest

from app.cli.status_watch import (
    HIDE_CURSOR,
    HOME_CLEAR,
    SHOW_CURSOR,
    Rates,
    Sample,
    render_rates,
    watch,
)
from app.runtime.kafka.clock import last_watermark
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.ops import app_status, render_status
from tests.app.cli.test_ops_commands import EVENTS, Worker, kepl, send
from tests.app.cli.test_ops_commands import app as app  # noqa: F401 - the fixture


def status(committed: int | None, end: int, rows: dict[str, int]) -> dict:
    """The part of an ``app_status`` document the watch reads."""
    lag = end - (committed or 0)
    return {
        "app": "shop",
        "topics": [{"role": "input", "topic": "orders", "partitions": 1},
                   {"role": "repartition", "topic": "kepl.shop.repartition.g", "partitions": 1},
                   *[{"role": "output", "topic": f"kepl.shop.out.{s}", "partitions": 1}
                     for s in rows]],
        "outputs": [{"statement": s, "topic": f"kepl.shop.out.{s}", "end": n}
                    for s, n in rows.items()]
        + [{"statement": "decl", "topic": "kepl.shop.out.decl", "end": 0}],
        "lag": [{"topic": "orders", "partition": 0, "committed": committed, "end": end,
                 "lag": lag, "lost": 0},
                {"topic": "kepl.shop.repartition.g", "partition": 0, "committed": 900,
                 "end": 900, "lag": 0, "lost": 0}],
        "total_lag": lag,
    }


def test_rates_between_samples_and_the_lag_trend() -> None:
    a = Sample.of(status(None, 100, {"big": 0, "all": 0}), 10.0)
    assert (a.consumed, a.produced, a.lag) == (0, {"big": 0, "all": 0}, 100)
    assert Rates.between([a]) is None
    b = Sample.of(status(40, 160, {"big": 4, "all": 40}), 12.0)
    r = Rates.between([a, b])
    assert (r.seconds, r.events, r.rows, r.lag) == (2.0, 20.0, {"big": 2.0, "all": 20.0}, 10.0)
    c = Sample.of(status(200, 200, {"big": 10, "all": 200}), 14.0)
    r = Rates.between([a, b, c])
    assert (r.events, r.rows_total, r.lag) == (80.0, 83.0, -25.0)  # lag over all 3
    # offsets that went back (a reset app) count as no progress, not as negative rates
    d = Sample.of(status(0, 0, {"big": 0, "all": 0}), 15.0)
    assert Rates.between([c, d]).events == 0 and Rates.between([c, d]).rows_total == 0


def test_rate_lines() -> None:
    assert render_rates(None, 7) == ["rates: from the next refresh on", "  lag        7"]
    r = Rates(2.0, 20.0, {"big": 2.0, "everything": 20.0}, 0.25)
    assert render_rates(r, 12) == [
        "rates over the last 2.0 s:",
        "  events in  20.0/s",
        "  rows out   22.0/s",
        "    big         2.0/s",
        "    everything  20.0/s",
        "  lag        12 (+0.2/s, steady)",
    ]
    assert render_rates(Rates(1.0, 0, {}, 3.0), 5)[-1] == "  lag        5 (+3.0/s, growing)"
    assert render_rates(Rates(1.0, 0, {}, -3.0), 5)[-1] == "  lag        5 (-3.0/s, shrinking)"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def fake_fetch(clock: Clock, docs: list[dict]) -> object:
    it = iter(docs)

    def fetch() -> dict:
        clock.now += 0.5  # a status takes a while: the next refresh still starts on time
        return next(it)
    return fetch


def test_frames_in_a_pipe_follow_each_other() -> None:
    clock = Clock()
    out = io.StringIO()
    docs = [status(0, 10, {"big": 0}), status(10, 30, {"big": 5})]
    assert watch(fake_fetch(clock, docs), lambda st: [f"table of {st['app']}"], 2.0, 2,
                 out, clock, clock.sleep, lambda: "12:00:00") == 0
    assert clock.slept == [1.5]
    assert out.getvalue() == (
        "kepl status --watch: shop every 2 s, 12:00:00, refresh 1\n"
        "rates: from the next refresh on\n"
        "  lag        10\n"
        "\n"
        "table of shop\n"
        "\n"
        "kepl status --watch: shop every 2 s, 12:00:00, refresh 2\n"
        "rates over the last 2.0 s:\n"
        "  events in  5.0/s\n"
        "  rows out   2.5/s\n"
        "    big  2.5/s\n"
        "  lag        20 (+5.0/s, growing)\n"
        "\n"
        "table of shop\n")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_each_frame_replaces_the_last_until_ctrl_c() -> None:
    clock = Clock()
    out = Terminal()
    docs = [status(0, 10, {"big": 0})] * 3

    def sleep(s: float) -> None:
        if len(clock.slept) == 2:  # Ctrl-C while waiting for the fourth refresh
            raise KeyboardInterrupt
        clock.sleep(s)

    assert watch(fake_fetch(clock, docs), lambda st: ["table"], 1.0, None, out, clock,
                 sleep, lambda: "12:00:00") == 0
    text = out.getvalue()
    assert text.startswith(HIDE_CURSOR + HOME_CLEAR + "kepl status --watch: shop every 1 s, "
                           "12:00:00, refresh 1, Ctrl-C stops\n")
    assert text.count(HOME_CLEAR) == 3
    assert text.endswith("table\n\n" + SHOW_CURSOR)


@pytest.mark.kafka
def test_watch_a_real_app_for_a_couple_of_refreshes(
        kafka_bootstrap: str, app: tuple[str, Path], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    name, f = app
    b = kafka_bootstrap
    assert kepl(capsys, "deploy", str(f), "--bootstrap", b)[0] == 0
    send(capsys, f, b, *EVENTS)
    code, out, err = kepl(capsys, "status", str(f), "--watch", "--count", "2",
                          "--interval", "0.5", "--bootstrap", b)
    assert (code, err) == (0, "")
    frames = out.split(f"kepl status --watch: {name} every 0.5 s, ")
    assert len(frames) == 3 and frames[0] == ""
    assert re.match(r"\d\d:\d\d:\d\d, refresh 1\nrates: from the next refresh on\n"
                    r"  lag        4\n\napp ", frames[1]), frames[1]
    second = frames[2].splitlines()
    assert second[1:7] == [second[1], "  events in  0.0/s", "  rows out   0.0/s",
                           "    large_withdrawals  0.0/s", "    last_five          0.0/s",
                           "  lag        4 (+0.0/s, steady)"]
    assert re.fullmatch(r"rates over the last 0\.\d s:", second[1])
    assert "  total lag 4" in second

    # a worker catches up between two refreshes: events in, rows out, the lag shrinks
    config = AppConfig.from_file(f)
    worker = Worker(f, b, tmp_path / "data")
    seen: list[dict] = []

    def fetch() -> dict:
        seen.append(app_status(config, b, last_watermark))
        return seen[-1]

    def caught_up(_: float) -> None:
        assert kepl(capsys, "clock", str(f), "1000", "--bootstrap", b)[0] == 0
        deadline = time.monotonic() + 60
        while app_status(config, b, last_watermark)["total_lag"]:
            assert time.monotonic() < deadline, worker.lines()
            time.sleep(0.3)

    try:
        text = io.StringIO()
        assert watch(fetch, render_status, 0.5, 2, text, sleep=caught_up) == 0
    finally:
        assert worker.stop() == 0
    first, last = (Sample.of(st, t) for st, t in zip(seen, (0.0, 1.0)))
    assert (first.consumed, first.lag, last.consumed, last.lag) == (0, 4, 5, 0)  # + watermark
    # exactly-once output: each transaction's commit marker takes an offset too
    assert last.produced["large_withdrawals"] >= 2 and last.produced["last_five"] >= 4
    lines = text.getvalue().splitlines()
    lag_lines = [ln for ln in lines if ln.startswith("  lag ")]
    assert lag_lines[0] == "  lag        4"
    assert re.fullmatch(r"  lag        0 \(-\d+\.\d/s, shrinking\)", lag_lines[1])

"""The progress line of a ``kepl spark`` job: starting, then the running stages' tasks,
drawn on a terminal only."""

from __future__ import annotations

import io
from types import SimpleNamespace

from app.analytics.progress import SparkProgress, stages


def fake_spark(active: dict[int, tuple[int, int]]) -> SimpleNamespace:
    """A session whose status tracker reports ``active``: stage -> (done, tasks)."""
    tracker = SimpleNamespace(
        getActiveStageIds=lambda: list(active),
        getStageInfo=lambda sid: SimpleNamespace(numCompletedTasks=active[sid][0],
                                                 numTasks=active[sid][1]))
    return SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: tracker))


def test_the_line_says_what_spark_does() -> None:
    p = SparkProgress("read", enabled=False)
    assert p.line(False).startswith("kepl spark read: starting Spark (")
    p.running(fake_spark({4: (45, 200), 3: (2, 2)}))
    assert p.line(False).startswith("kepl spark read: stage 3: 2/2 tasks, stage 4: 45/200 "
                                    "tasks (")
    p.running(fake_spark({}))
    assert p.line(False).startswith("kepl spark read: working (")
    assert p.line(True).startswith("kepl spark read: done in ")
    assert stages(fake_spark({7: (0, 8)})) == "stage 7: 0/8 tasks"


def test_nothing_is_drawn_outside_a_terminal() -> None:
    stream = io.StringIO()
    with SparkProgress("summary") as p:
        p.progress.stream = stream
        p.progress.tick()
        p.progress.out("a row")
    assert stream.getvalue() == ""
    assert p._thread is None

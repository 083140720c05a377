"""Temporal contexts: ``context.startTime``/``endTime`` (Esper ref. 4.2.6.2), endTime being the
planned end when the end condition is a time period or a crontab, else null."""

from __future__ import annotations

from operators.base import PartitionCtx
from operators.contexts.conditions import (
    CondAfterSpec,
    CondCrontabSpec,
    CondFilterSpec,
    CondNowAndSpec,
    CondNowSpec,
)
from operators.contexts.managers import Change
from operators.contexts.temporal import NonOverlappingSpec, OverlappingSpec
from operators.patterns.crontab import CronSpec
from operators.state import MemoryNamespace


def props(spec, *steps):  # noqa: ANN001, ANN002, ANN201
    """Build the manager, deploy at 0, apply (time | (type, event, time)) steps."""
    m = spec.build(MemoryNamespace(), PartitionCtx())
    m.deploy(0)
    for s in steps:
        if isinstance(s, int):
            m.on_time(s)
        else:
            m.on_event(*s)
    return m, {pid: dict(m.props(pid)) for pid in m.live()}


def test_start_after_end_after_plans_the_end() -> None:
    spec = NonOverlappingSpec("A", CondAfterSpec(1000), CondAfterSpec(2000))
    m, live = props(spec, 1000)
    assert live == {0: {"name": "A", "id": 0, "startTime": 1000, "endTime": 3000}}
    m.on_time(3000)
    m.on_time(4000)
    assert m.props(1) == {"name": "A", "id": 1, "startTime": 4000, "endTime": 6000}


def test_now_start_and_crontab_end() -> None:
    spec = NonOverlappingSpec("N", CondNowSpec(), CondAfterSpec(15 * 60_000))
    _, live = props(spec)
    assert live[0]["startTime"] == 0 and live[0]["endTime"] == 900_000
    cron = CondCrontabSpec(CronSpec.parse([3, 0, "*", "*", "*"]))
    spec = NonOverlappingSpec("C", CondCrontabSpec(CronSpec.parse([1, 0, "*", "*", "*"])), cron)
    _, live = props(spec, 60_000)
    assert (live[0]["startTime"], live[0]["endTime"]) == (60_000, 180_000)


def test_end_by_event_leaves_end_time_null_also_after_the_end() -> None:
    spec = NonOverlappingSpec("F", CondFilterSpec("S"), CondFilterSpec("E"))
    m, live = props(spec, ("S", {}, 500))
    assert live[0]["endTime"] is None
    assert m.on_event("E", {}, 700) == [Change("end", 0)]
    assert m.props(0)["endTime"] is None


def test_overlapping_terminated_after_each_partition_its_own_end() -> None:
    spec = OverlappingSpec("O", CondNowAndSpec(CondAfterSpec(1000)), CondAfterSpec(5000))
    _, live = props(spec, 1000)
    assert [(p["id"], p["startTime"], p["endTime"]) for p in live.values()] == [
        (0, 0, 5000), (1, 1000, 6000)]


def test_restored_manager_keeps_the_planned_end() -> None:
    spec = NonOverlappingSpec("A", CondAfterSpec(1000), CondAfterSpec(2000))
    ns = MemoryNamespace()
    m = spec.build(ns, PartitionCtx())
    m.deploy(0)
    m.on_time(1000)
    again = spec.build(ns, PartitionCtx())
    assert again.props(0)["endTime"] == 3000
    assert again.next_timer() == 3000

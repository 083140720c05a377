"""Idle clock jumps: the engine skips periodic firings that provably do nothing, and the
output is exactly that of firing every timer at its own due time (FORMAT.md clock rule)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine

SCHEMAS = {"W": {"k": "string", "v": "long"}, "S": {"k": "string"}}

GROUPS: dict[str, list[str]] = {
    "output_every": [
        "select k, v from W output every 1 sec",
        "select k, v from W output last every 1500 msec",
        "select k, v from W output first every 700 msec",
        "select k, v from W output all every 2 sec",
        "select k, count(*) as c from W#time(3 sec) group by k output all every 1 sec",
        "select k, count(*) as c from W#time(3 sec) group by k output last every 1 sec",
        "select k, v from W#time(2 sec) output snapshot every 1 sec",
        "select k, v from W#length(2) output snapshot every 1 sec",
        "select k, sum(v) as s from W#time(2 sec) group by k output snapshot every 1 sec",
        "select k, v from W output at (*, *, *, *, *, */3)",
        "select k, v from W output every 1 sec and when terminated",
    ],
    "aggregated_every": [
        "select count(*) as c from W#time(2 sec) output every 1 sec",
        "select k, v from W output last every 1 sec",
    ],
    "non_overlapping": [
        "create context A start after 1 sec end after 2 sec",
        "context A select context.id as id, context.startTime as st, context.endTime as et,"
        " count(*) as c from W",
        "context A select k, v from W output every 500 msec",
        "create context N start @now end after 3 sec",
        "context N select context.id as id, context.startTime as st, v from W",
    ],
    "non_overlapping_terminated": [
        "create context A start after 1 sec end after 2 sec",
        "context A select context.id as id, count(*) as c from W output snapshot when terminated",
    ],
    "overlapping": [
        "create context O initiated by pattern [every timer:interval(1 sec)]"
        " terminated after 3500 msec",
        "context O select context.id as id, context.startTime as st, context.endTime as et, v"
        " from W",
        "context O select k, v from W output last every 1 sec and when terminated",
        "create context Q initiated by @now and pattern [every timer:interval(700 msec)]"
        " terminated after 2 sec",
        "context Q select context.id as id, context.startTime as st, v from W",
        "create context X initiated by after 1 sec terminated after 2 sec",
        "context X select context.id as id, v from W",
    ],
    "patterns": [
        "select a.v as av from pattern [every a=W -> timer:interval(2 sec)]",
        "select * from pattern [every timer:interval(1500 msec) and not S]",
        "select w from pattern [every (w=W until timer:interval(1 sec))]",
        "select w[0].v as v0 from pattern [every ([2:] w=W until s=S) "
        "where timer:within(2 sec)]",
        "select k, v from W#time_batch(1 sec)",
    ],
}

STEPS: list[Any] = [
    ("W", {"k": "a", "v": 1}), 1200, ("W", {"k": "b", "v": 2}), ("S", {"k": "x"}), 2500,
    ("W", {"k": "a", "v": 3}), 60_000, ("W", {"k": "c", "v": 4}), 61_234,
    ("W", {"k": "a", "v": 5}), 900_000, ("W", {"k": "b", "v": 6}), 1_000_000, 1_000_001,
    ("W", {"k": "a", "v": 7}), 3_600_000,
]


def run(stmts: list[str], skip: bool, steps: list[Any] = STEPS) -> list[tuple]:
    """Every listener call, with the clock at which it happened."""
    catalog = Catalog.from_schemas(SCHEMAS)
    engine = Engine()
    engine.skip_idle = skip
    log: list[tuple] = []
    engine.listeners.append(
        lambda s, n, o, pid: log.append((engine.now_ms, s, pid, list(n), list(o))))
    for i, epl in enumerate(stmts):
        engine.deploy(plan_statement(catalog, epl, f"s{i}"))
    for step in steps:
        if isinstance(step, int):
            engine.advance_time(step)
            log.append(("time", step))
        else:
            engine.send(*step)
    return log


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_skipping_gives_the_same_output(group: str) -> None:
    stmts = GROUPS[group]
    assert run(stmts, skip=True) == run(stmts, skip=False)


def test_equivalent_with_the_jump_cut_into_steps() -> None:
    stmts = GROUPS["overlapping"] + GROUPS["non_overlapping"]
    cut = list(STEPS)
    cut[6:6] = [5_000, 17_777, 33_333]
    whole = [e for e in run(stmts, skip=True) if e[0] != "time"]
    assert whole == [e for e in run(stmts, skip=True, steps=cut) if e[0] != "time"]
    assert whole == [e for e in run(stmts, skip=False, steps=cut) if e[0] != "time"]


JUMP = 1_000_000_000_000  # 2001-09-09


@pytest.mark.parametrize("group", ["output_every", "non_overlapping", "overlapping"])
def test_first_step_at_an_epoch_time_is_fast(group: str) -> None:
    # not idle: 'output all' of a grouped statement posts every group each period, a
    # snapshot of a window that keeps its rows posts them each period
    stmts = [s for s in GROUPS[group]
             if "group by k output all" not in s and "#length(2)" not in s]
    steps = [("W", {"k": "a", "v": 1}), JUMP, ("W", {"k": "b", "v": 2}), JUMP + 10_000]
    t0 = time.perf_counter()
    log = run(stmts, skip=True, steps=steps)
    assert time.perf_counter() - t0 < 2.0
    assert log[-1] == ("time", JUMP + 10_000)


def test_epoch_jump_context_ids_and_times() -> None:
    stmts = GROUPS["non_overlapping"][:2] + GROUPS["overlapping"][:2]
    log = run(stmts, skip=True, steps=[JUMP + 500, ("W", {"k": "a", "v": 1})])
    # A: partitions [1000 + 3000 i, 3000 + 3000 i); the one live at JUMP + 500 started at
    # JUMP - 1000 (i = JUMP / 3000 - 1 ... ids count every partition since 0)
    i = (JUMP + 500 - 1000) // 3000
    assert log[1] == (JUMP + 500, "s1", i, [{"id": i, "st": 1000 + 3000 * i,
                                            "et": 3000 + 3000 * i, "c": 1}], [])
    # O: initiated at 1000 j (j >= 1), each living 3500 ms: ids j - 1; the one started at
    # 1000 (j - 3) ended at JUMP + 500 exactly, live are j - 2 .. j
    j = (JUMP + 500) // 1000
    rows = [r for e in log[2:] for r in e[3]]
    assert rows == [{"id": m - 1, "st": 1000 * m, "et": 1000 * m + 3500, "v": 1}
                    for m in range(j - 2, j + 1)]


def test_a_look_for_an_idle_stretch_reads_one_timer_when_the_next_firing_outputs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A keyed #time window arms a timer per key; while the next one expires events,
    nothing can be skipped, and looking costs one timer, not one per key (here the
    timers' due times fall in the order they were armed, the worst case for a scan)."""
    catalog = Catalog.from_schemas(SCHEMAS)
    engine = Engine()
    engine.deploy(plan_statement(catalog, "create context ByK partition by k from W", "c"))
    engine.deploy(plan_statement(
        catalog, "context ByK select k, count(*) as c from W#time(1 sec)", "s"))
    for i in range(400):
        engine.send("W", {"k": f"K{i}", "v": i})
    for i in reversed(range(400)):
        engine.advance_time(500 + 399 - i)
        engine.send("W", {"k": f"K{i}", "v": i})
    engine.advance_time(1000)  # re-armed in key order, due 1899 (K0) down to 1500 (K399)
    rows: list[tuple[Any, ...]] = []
    engine.listeners.append(lambda st, new, old, pid: rows.extend(
        (r["k"], r["c"]) for r in new))
    looked: list[Any] = []
    quiet_until = Engine._quiet_until
    monkeypatch.setattr(Engine, "_quiet_until",
                        lambda self, key, due, limit: looked.append(key) or quiet_until(
                            self, key, due, limit))
    engine.advance_time(5000)
    assert sorted(rows) == sorted((f"K{i}", 0) for i in range(400))
    assert looked and len(looked) <= 400 // 32 + 1  # one per look (every 32+ firings)

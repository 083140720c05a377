"""Runs of events go to the engine in batches (``Engine.send_batch``); an event that
fails in a batch is dead-lettered and every other event counts, exactly as when each
event is sent on its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.topology import Group, Topology
from tests.app.runtime.kafka.fakes import UP, TruncLog

HERE = Path(__file__).parent


def group() -> Group:
    config = AppConfig.from_dict({
        "app": "batches",
        "schemas": {"W": {"account": "string", "amount": "double"}},
        "functions": {"checked": {"import": "raising_functions:checked",
                                  "params": ["double"], "returns": "double"}},
        "statements": [
            {"name": "ctx", "epl": "create context ByAccount partition by account from W"},
            {"name": "s", "epl": "context ByAccount select account, count(*) as n, "
                                 "sum(checked(amount)) as total from W#length(3)"}]},
        HERE)
    return Topology.plan(config).groups["main"]


def event(offset: int, account: str, amount: float) -> InRecord:
    return InRecord("event", UP, offset, "W", 0, None, {"account": account, "amount": amount},
                    b"", UP, offset)


def barrier(offset: int, t: int) -> InRecord:
    return InRecord("barrier", UP, offset, payload={"t": t, "id": f"w{t}"}, via=UP,
                    via_offset=offset)


def rows(part: EnginePartition) -> list[tuple[str, str, int, object]]:
    return [(r.stream, r.context_partition, r.seq, r.row) for r in part.outputs]


def test_a_failing_event_in_a_batch_is_dead_lettered_and_the_rest_count(
        tmp_path: Path) -> None:
    # a negative amount raises; a watermark in between (offset 4)
    amounts = [5.0, 7.0, -1.0, 3.0, None, 4.0, -2.0, 6.0]
    batch = [barrier(i, 1000) if a is None else event(i, "AB"[i % 2], a)
             for i, a in enumerate(amounts)]
    part = EnginePartition(group(), 0, tmp_path / "batch", [UP], "changelog", None)
    part.restore(TruncLog())
    part.run(batch)
    # the same records one at a time, the failing ones left out
    one = EnginePartition(group(), 0, tmp_path / "one", [UP], "changelog", None)
    one.restore(TruncLog())
    for r in batch:
        if r.kind == "barrier" or r.payload["amount"] >= 0:
            one.run([r])
    assert rows(part) == rows(one) and len(rows(part)) == 5
    why = "engine error: UserFunctionError: function checked raised ValueError: negative amount"
    assert [(d.record.offset, d.reason) for d in part.dead] == [(2, why), (6, why)]
    assert part.poison == {(UP, 2), (UP, 6)}
    assert part.engine is not None and one.engine is not None
    assert part.engine.now_ms == one.engine.now_ms == 1000
    assert part.store.batch_writes() == one.store.batch_writes()
    # the partition goes on batching after the replay
    part.run([event(8, "A", 1.0), event(9, "B", 2.0)])
    one.run([event(8, "A", 1.0), event(9, "B", 2.0)])
    assert rows(part) == rows(one)
    part.close()
    one.close()


# -- event time: the held events of one time and type go as one batch ------------------

HELD_STATEMENTS = {
    "keyed": "context ByAccount select account, count(*) as n, "
             "sum(checked(amount)) as total from W#length(3)",
    "window": "select irstream account, amount from W#time(2 sec)",
    "batch": "select account, sum(amount) as total from W#time_batch(1 sec) group by account",
    "pattern": "select a.account as a, b.account as b from pattern "
               "[every a=W -> (b=W(account = a.account) or timer:interval(1 sec))]",
    "every": "select count(*) as n from W output last every 1500 msec",
    "length": "select count(*) as n, sum(amount) as total from W#length(3)",
}


def held_group(late: str | None = None) -> Group:
    config = AppConfig.from_dict({
        "app": "held",
        "schemas": {"W": {"account": "string", "amount": "double", "at": "long"}},
        "event_time": {"property": {"W": "at"}},
        **({"late_events": late} if late else {}),
        "functions": {"checked": {"import": "raising_functions:checked",
                                  "params": ["double"], "returns": "double"}},
        "statements": [
            {"name": "ctx", "epl": "create context ByAccount partition by account from W"},
            *({"name": n, "epl": e} for n, e in HELD_STATEMENTS.items())]},
        HERE)
    return Topology.plan(config).groups["main"]


def held_records(seed: int) -> list[InRecord]:
    """Events several to a millisecond, out of order within a watermark's reach, a
    watermark every 25 events just behind the newest; amounts below 0 raise."""
    import random

    rnd = random.Random(seed)
    out: list[InRecord] = []
    t = 1000
    for i in range(300):
        if i % 25 == 24:
            out.append(barrier(len(out), t - 1))
        t += rnd.choice([0, 0, 0, 1, 7, 300])
        amount = -1.0 if rnd.random() < 0.03 else float(rnd.randrange(40))
        out.append(InRecord("event", UP, len(out), "W", 0, None,
                            {"account": "ABC"[rnd.randrange(3)], "amount": amount,
                             "at": t - rnd.choice([0, 0, 5])}, b"", UP, len(out)))
    out.append(barrier(len(out), t + 5000))
    return out


def held_rows(part: EnginePartition) -> list[tuple]:
    return [(r.statement, r.stream, r.context_partition, r.time, r.seq, r.row)
            for r in part.outputs]


def run_held(tmp: Path, records: list[InRecord], batch: int, late: str | None = None,
             one_by_one: bool = False, ups: list[str] | None = None) -> EnginePartition:
    """``one_by_one``: every record through ``_handle`` and ``_event`` (what the
    partition does while a record of the checkpoint is poisoned), not in runs."""
    part = EnginePartition(held_group(late), 0, tmp, ups or [UP], "changelog", None)
    part.restore(TruncLog())
    if one_by_one:
        part.poison.add(("elsewhere", -1))
    for i in range(0, len(records), batch):
        part.run(records[i:i + batch])
    return part


def spread(records: list[InRecord], ups: list[str], rnd: Any) -> list[InRecord]:
    """The records over ``ups`` (each its own offsets): an event on one of them, a
    barrier on each (an epoch ends when every upstream closed it)."""
    offsets = dict.fromkeys(ups, 0)
    out: list[InRecord] = []
    for r in records:
        for up in ([rnd.choice(ups)] if r.kind == "event" else ups):
            out.append(r._replace(upstream=up, via=up, offset=offsets[up],
                                  via_offset=offsets[up]))
            offsets[up] += 1
    return out


@pytest.mark.parametrize("upstreams", [1, 2])
@pytest.mark.parametrize("late", ["process", "dead-letter"])
def test_held_records_in_a_run_as_one_at_a_time(tmp_path: Path, late: str,
                                                 upstreams: int) -> None:
    """The records of one upstream, or an epoch merged from several, are held as
    ``_handle`` holds each: late events (behind a watermark) and records read again
    included (no event fails: a poisoned record sends the rest of the checkpoint
    through ``_handle`` anyway)."""
    import random

    rnd = random.Random(5)
    ups = [UP, "src:1"][:upstreams]
    records = spread(held_records(seed=3), ups, rnd)
    again = [r for r in records if r.kind == "event" and rnd.random() < 0.05]
    mixed: list[InRecord] = []
    for r in records:
        if r.kind == "event":
            at = r.payload["at"] - (rnd.randrange(2000) if rnd.random() < 0.1 else 0)
            r = r._replace(payload={**r.payload, "at": at,  # up to 2 s behind: late
                                    "amount": abs(r.payload["amount"])})
        mixed.append(r)
        if again and rnd.random() < 0.05:  # read again after a rewind
            mixed.append(again.pop(0))
    run = run_held(tmp_path / "run", mixed, 40, late, ups=ups)
    each = run_held(tmp_path / "each", mixed, 40, late, ups=ups, one_by_one=True)
    assert run.late == each.late > 10
    assert held_rows(run) == held_rows(each) and len(held_rows(run)) > 200
    assert [(d.record.offset, d.reason) for d in run.dead] == \
        [(d.record.offset, d.reason) for d in each.dead]
    assert run.store.batch_writes() == each.store.batch_writes()
    run.close()
    each.close()


def test_held_events_of_one_time_go_as_a_batch_with_the_rows_of_one_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.runtime.engine import Engine

    records = held_records(seed=7)
    batches: list[int] = []
    real = Engine.send_batch_at

    def counting(self: Engine, type_name: str, events: list) -> bool:
        batches.append(len(events))
        return real(self, type_name, events)

    monkeypatch.setattr(Engine, "send_batch_at", counting)
    part = run_held(tmp_path / "runs", records, 40)
    assert len(batches) > 20 and max(batches) > 2
    # the exact path: every held event on its own (a replay forced by a batch that
    # reports a timer due now, which no statement here arms)
    monkeypatch.setattr(Engine, "send_batch_at",
                        lambda self, t, events: (real(self, t, events), False)[1])
    exact = run_held(tmp_path / "exact", records, 40)
    assert held_rows(part) == held_rows(exact)
    assert {r[0] for r in held_rows(part)} == set(HELD_STATEMENTS)
    assert [(d.record.offset, d.reason) for d in part.dead] == \
        [(d.record.offset, d.reason) for d in exact.dead]
    # each failing event once, though later runs of the checkpoint replayed it
    assert sorted(d.record.offset for d in part.dead) == [
        r.offset for r in records if r.kind == "event" and r.payload["amount"] < 0]
    assert len(part.dead) > 3
    assert part.store.batch_writes() == exact.store.batch_writes()
    part.close()
    exact.close()


def merged_group() -> Group:
    config = AppConfig.from_dict({
        "app": "merged",
        "schemas": {"W": {"account": "string", "amount": "double", "at": "long"},
                    "V": {"account": "string"}},
        "statements": [
            {"name": "ctx", "epl": "create context ByAccount partition by account from W"},
            *({"name": n, "epl": e} for n, e in HELD_STATEMENTS.items()
              if n not in ("keyed", "pattern")),
            {"name": "v", "epl": "select irstream account from V#length(2)"}]},
        HERE)
    return Topology.plan(config).groups["main"]


def test_an_epochs_events_of_one_type_join_the_run_as_one_at_a_time(tmp_path: Path
                                                                     ) -> None:
    """An epoch merged from two upstreams, its records all events of one type, joins the
    pending run in one step; an epoch with another type or a touch goes record by
    record.  Both give the rows, the applied offsets and the state writes of
    ``_event`` for each record."""
    import random

    rnd = random.Random(11)
    ups = [UP, "src:1"]
    records = [r for r in held_records(seed=4) if r.kind == "barrier"
               or r.payload["amount"] >= 0]
    for i in range(len(records) - 1, 0, -1):  # a V now and then: a mixed epoch
        if records[i].kind == "event" and rnd.random() < 0.02:
            records.insert(i, records[i]._replace(type_name="V", payload={"account": "v"}))
    records = spread(records, ups, rnd)

    def run(name: str, one_by_one: bool) -> EnginePartition:
        part = EnginePartition(merged_group(), 0, tmp_path / name, ups, "changelog", None)
        part.restore(TruncLog())
        if one_by_one:
            part.poison.add(("elsewhere", -1))
        for i in range(0, len(records), 40):
            part.run(records[i:i + 40])
        return part

    fast, each = run("fast", False), run("each", True)
    assert held_rows(fast) == held_rows(each)
    assert {r[0] for r in held_rows(fast)} == {"window", "batch", "every", "length", "v"}
    assert fast.applied == each.applied == {UP: max(r.offset for r in records
                                                     if r.upstream == UP),
                                            "src:1": max(r.offset for r in records
                                                         if r.upstream == "src:1")}
    assert fast.store.batch_writes() == each.store.batch_writes()
    fast.close()
    each.close()

"""``Engine.send_batch`` delivers a run of events as ``send`` does one at a time: the same
listener calls (statement, rows, partition) in the same order, the same timers after the
batch, and the same state (checkpoints equal byte for byte).  Both are checked against
the engine's general path (``_process`` for every event, no statement steps)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine

SCHEMAS = {"T": {"k": "string", "v": "int", "x": "double"}, "U": {"k": "string", "v": "int"}}

KEYED = "create context K partition by k from T"
DEPLOYMENTS = {
    "filter": ["select * from T(v >= 5)"],
    "length count/sum": ["select count(*) as n, sum(x) as s from T#length(3)"],
    "length count/sum with a property": [
        "select k, count(*) as n, sum(x) as s from T#length(3)"],
    "length count/sum with having": [
        "select count(*) as n, avg(x) as a from T#length(4) having count(x) > 1"],
    "keyed length count/sum": [KEYED, "context K select k, count(*) as n, sum(x) as s "
                                      "from T#length(2)"],
    "keyed context id, two statements": [
        KEYED, "context K select context.id as id, count(*) as n from T",
        "context K select irstream k, v from T(v > 3)#length(1)"],
    "keyed on two key properties": [
        "create context K2 partition by k and v from T",
        "context K2 select context.key1 as a, context.key2 as b, count(*) as n from T"],
    "hash context": [
        "create context H coalesce by consistent_hash_crc32(k) from T granularity 4",
        "context H select k, sum(v) as total from T group by k"],
    "hash context over a nullable double, two statements": [
        "create context HX coalesce by consistent_hash_crc32(x) from T granularity 3",
        "context HX select x, count(*) as n from T group by x",
        "context HX select irstream k, sum(v) as total from T#length(2) group by k"],
    "hash context, preallocated": [
        "create context HP coalesce by consistent_hash_crc32(k) from T granularity 4 "
        "preallocate",
        "context HP select context.id as id, k, count(*) as n, v from T#length(3)"],
    "hash context by hash_code": [
        "create context HC coalesce by hash_code(k) from T granularity 3",
        "context HC select k, count(*) as n from T group by k"],
    "category context": [
        "create context C group v < 5 as low, group v >= 3 as high from T",
        "context C select context.label as label, count(*) as n from T"],
    "time window and output": [
        "select k, count(*) as n from T#time(2 sec) group by k output every 1 sec"],
    "time window, output last and all by group": [
        "select k, count(*) as n, sum(x) as s from T#time(2 sec) group by k "
        "output last every 1 sec",
        "select k, count(*) as n from T#time(1 sec) group by k output all every 2 events",
        "select irstream k, count(*) as n from T#time(2 sec) group by k "
        "output last every 1 sec"],
    # one statement of a time-only output, several rows of groups at once
    "filtered time window, output snapshot": [
        "select k, count(*) as n, sum(x) as s from T(v > 2)#time(2 sec) group by k "
        "output snapshot every 1 sec"],
    "time window, output all": [
        "select k, sum(v) as s from T#time(1 sec) group by k output all every 2 sec"],
    "no window, output last": [
        "select k, count(*) as n from T group by k output last every 1 sec"],
    "time window, output after some events, last": [
        "select k, count(*) as n from T#time(3 sec) group by k "
        "output after 5 events last every 1 sec"],
    "time window, output last, ordered": [
        "select k, count(*) as n from T#time(2 sec) group by k "
        "output last every 1 sec order by n desc"],
    "insert into a stream read by another statement": [
        "insert into Big select k, v from T(v > 6)",
        "select k, count(*) as n from Big#length(2)"],
    "variable set by an on-statement, read by a filter": [
        "create variable int lim = 5",
        "on T(v = 9) set lim = 2",
        "select k, v from T(v > lim)"],
    "initiated context (events start partitions)": [
        "create context I initiated by T(v > 7) terminated after 3 sec",
        "context I select context.id as id, count(*) as n from T"],
    "named window changed by an on-delete, read by a subquery and a consumer": [
        "create window W#keepall as U",
        "insert into W select k, v from T(v < 3)",
        "on T(v > 6) as t delete from W as w where w.k = t.k",
        "select t.k as k, (select count(*) from W) as n from T as t",
        "select count(*) as n from W"],
    "keyed context with a terminating condition": [
        "create context KT partition by k from T terminated by U",
        "context KT select k, count(*) as n from T"],
}


class _NoSteps(dict):
    """An engine's step cache that never has steps: every event takes ``_process``."""

    def get(self, key: Any, default: Any = None) -> Any:
        return None


def _engine(epl: list[str], log: list[tuple], general: bool = False) -> Engine:
    catalog = Catalog.from_schemas(SCHEMAS)
    engine = Engine()
    if general:
        engine._steps = _NoSteps()
    for i, text in enumerate(epl):
        engine.deploy(plan_statement(catalog, text, f"s{i}"))
    engine.listeners.append(lambda name, new, old, pid: log.append((name, pid, new, old)))
    return engine


def _events(seed: int, n: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    return [{"k": rnd.choice("abcde"), "v": rnd.randrange(10), "x": rnd.choice([None, 1.5, 4.0])}
            for _ in range(n)]


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_send_batch_is_send_for_each_event(name: str) -> None:
    general: list[tuple] = []
    one: list[tuple] = []
    batched: list[tuple] = []
    g = _engine(DEPLOYMENTS[name], general, general=True)
    a = _engine(DEPLOYMENTS[name], one)
    b = _engine(DEPLOYMENTS[name], batched)
    evs = _events(1, 300)
    rnd = random.Random(2)
    i = 0
    now = 0
    while i < len(evs):
        size = rnd.choice([1, 2, 7, 40])
        for e in evs[i:i + size]:
            g.send("T", e)
            a.send("T", e)
        b.send_batch("T", evs[i:i + size])
        i += size
        if rnd.random() < 0.3:
            now += rnd.choice([300, 1000, 2500])
            for engine in (g, a, b):
                engine.advance_time(now)
        if rnd.random() < 0.1:
            for engine in (g, a):
                engine.send("U", {"k": "a", "v": 1})
            b.send_batch("U", [{"k": "a", "v": 1}])
        assert one == general, i
        assert batched == general, i
        assert a.next_timer() == g.next_timer() == b.next_timer()
    assert general, "the deployment posted nothing: the comparison would prove nothing"
    assert a.store.checkpoint() == g.store.checkpoint()
    assert b.store.checkpoint() == g.store.checkpoint()


def test_keyed_count_sum_rows() -> None:
    """The rows themselves, for the keyed shape the batch path serves directly."""
    log: list[tuple] = []
    engine = _engine(DEPLOYMENTS["keyed length count/sum"], log)
    engine.send_batch("T", [{"k": "a", "v": 1, "x": 1.5}, {"k": "b", "v": 1, "x": 4.0},
                            {"k": "a", "v": 1, "x": None}, {"k": "a", "v": 1, "x": 4.0}])
    assert log == [("s1", 0, [{"k": "a", "n": 1, "s": 1.5}], []),
                   ("s1", 1, [{"k": "b", "n": 1, "s": 4.0}], []),
                   ("s1", 0, [{"k": "a", "n": 2, "s": 1.5}], []),
                   ("s1", 0, [{"k": "a", "n": 2, "s": 4.0}], [])]


def test_listener_sending_during_a_batch() -> None:
    """An event a listener sends waits until the event being processed is done, as with
    ``send``."""
    log: list[tuple] = []
    engine = _engine(["select v from T", "select v from U"], log)

    def echo(name: str, new: list, old: list, pid: Any) -> None:
        if name == "s0":
            engine.send("U", {"k": "u", "v": new[0]["v"] * 10})

    engine.listeners.insert(0, echo)
    engine.send_batch("T", [{"k": "a", "v": 1}, {"k": "a", "v": 2}])
    assert [(n, r) for n, _, r, _ in log] == [
        ("s0", [{"v": 1}]), ("s1", [{"v": 10}]), ("s0", [{"v": 2}]), ("s1", [{"v": 20}])]


def test_deploy_after_a_batch_takes_part_in_the_next() -> None:
    log: list[tuple] = []
    engine = _engine(["select v from T"], log)
    engine.send_batch("T", [{"k": "a", "v": 1}])
    engine.deploy(plan_statement(Catalog.from_schemas(SCHEMAS), "select k from T", "late"))
    engine.send_batch("T", [{"k": "b", "v": 2}])
    assert [(n, r) for n, _, r, _ in log] == [
        ("s0", [{"v": 1}]), ("s0", [{"v": 2}]), ("late", [{"k": "b"}])]


@pytest.mark.parametrize("epl", ["select count(*) as n, sum(v) as s from T#length(2)",
                                 "select * from T(v > 0)",
                                 "select k, v from T"])
def test_listener_sending_the_same_type_during_a_batch(epl: str) -> None:
    """A listener's event of the batch's own type enters the statement between the
    batch's events, as with ``send`` one at a time."""
    def run(general: bool, batched: bool) -> list[tuple]:
        log: list[tuple] = []
        engine = _engine([epl], log, general)
        sent = [0]

        def echo(name: str, new: list, old: list, pid: Any) -> None:
            if sent[0] < 3:
                sent[0] += 1
                engine.send("T", {"k": "echo", "v": 100 + sent[0], "x": 1.0})

        engine.listeners.insert(0, echo)
        evs = _events(5, 6)
        if batched:
            engine.send_batch("T", evs)
        else:
            for e in evs:
                engine.send("T", e)
        return log

    want = run(True, False)
    assert len(want) > 6
    assert run(False, False) == want
    assert run(False, True) == want


def test_listeners_replaced_between_batches() -> None:
    """The steps read the engine's listeners when they post, not when they were built."""
    first: list[tuple] = []
    engine = _engine(["select v from T"], first)
    engine.send_batch("T", [{"k": "a", "v": 1}])
    second: list[tuple] = []
    engine.listeners = [lambda name, new, old, pid: second.append((name, new))]
    engine.send_batch("T", [{"k": "a", "v": 2}])
    engine.send("T", {"k": "a", "v": 3})
    assert [r for _, _, r, _ in first] == [[{"v": 1}]]
    assert second == [("s0", [{"v": 2}]), ("s0", [{"v": 3}])]


@pytest.mark.parametrize("name", ["hash context", "hash context, preallocated"])
def test_a_hash_contexts_remembered_buckets_fill_and_start_again(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five keys against room for three: the step's bucket cache clears as it goes, and
    every row is still the general path's."""
    from app.runtime import engine as engine_module

    monkeypatch.setattr(engine_module, "BUCKET_CACHE", 3)
    test_send_batch_is_send_for_each_event(name)

"""Statements split by group key: N engine partitions give the rows of one.

The split is composed as the Kafka runtime composes it (``topology``, ``router``,
``partition``): each of N Engines deploys the statement's group, an event goes to the
Engine of ``crc32(group key text) mod N``, the statement's first update arms the timed
output of the other Engines (the router's touch), and rows are numbered per group.  Per
step the N Engines must post the same multiset of rows as one Engine, each group's rows
in the same order with the same ids.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig, ConfigError
from app.runtime.kafka.topology import Topology, split_of
from tests.app.runtime.split_rows import (
    assert_split_matches,
    split_app,
    step_rows,
)

SCHEMAS = {"W": {"account": "string", "amount": "double", "n": "int"}}

SPLITTABLE = {
    "time_last": "select account, count(*) as cnt, sum(amount) as total from W#time(10 sec) "
                 "group by account output last every 1 sec",
    "time_all_ir": "select irstream account, count(*) as cnt from W#time(2 sec) "
                   "group by account output all every 700 msec",
    "first": "select account, sum(amount) as total from W#time(3 sec) group by account "
             "output first every 1 sec",
    "unique": "select irstream account, n, sum(amount) as total from W#unique(account) "
              "group by account",
    "groupwin_where": "select account, avg(amount) as a from W#groupwin(account)#length(3) "
                      "where amount > 20 group by account output last every 500 msec",
    "time_batch_ref": "select account, count(*) as cnt from W#time_batch(1 sec, 0L) "
                      "group by account",
    # the reference point is the first arrival: the router tells every Engine of it
    "time_batch_first": "select irstream account, count(*) as cnt from W#time_batch(1 sec) "
                        "where amount > 40 group by account",
    "time_batch_forced": "select account, sum(amount) as total "
                         "from W#time_batch(700 msec, 'FORCE_UPDATE') group by account",
    "time_batch_eager": "select account, count(*) as cnt "
                        "from W#time_batch(1 sec, 'START_EAGER') group by account",
    # the window's key bare, the group by qualified by the stream's alias
    "groupwin_qualified": "select w.account, avg(w.amount) as a from "
                          "W#groupwin(account)#length(3) as w group by w.account",
    "unique_qualified": "select irstream w.account, sum(w.amount) as total "
                        "from W#unique(account) as w group by w.account",
    # properties qualified by the event type's name (Esper ref. 5.4), with or without alias
    "type_qualified": "select W.account, count(*) as cnt from W#time(3 sec) "
                      "group by W.account output last every 1 sec",
    "type_qualified_window": "select irstream account, sum(amount) as total "
                             "from W#unique(W.account) as w group by w.account",
    "keepall_having": "select account, n, count(*) as cnt from W#keepall group by account "
                      "having count(*) > 2",
    "filtered": "select account, max(amount) as top from W(amount > 30)#time(3 sec) "
                "group by account output last every 2 sec",
    "firstunique": "select account, count(*) as cnt from W#firstunique(account, n) "
                   "group by account output every 1 sec",
    "two_keys": "select account, n, sum(amount) as total from W#time(4 sec) "
                "group by account, n output last every 1 sec",
    "wildcard": "select * from W#time(2 sec) group by account output all every 1 sec",
    "aliased": "select w.account as who, count(*) as cnt from W#time(5 sec) as w "
               "group by w.account output last every 1500 msec",
    "crontab": "select account, count(*) as cnt from W#time(90 sec) group by account "
               "output last at (*/1, *, *, *, *)",
    "snapshot": "select account, count(*) as cnt, sum(amount) as total from W#time(3 sec) "
                "group by account output snapshot every 1 sec",
    "snapshot_keepall_having": "select account, n, count(*) as cnt from W#keepall "
                               "group by account having count(*) > 2 "
                               "output snapshot every 700 msec",
    "snapshot_unique_where": "select account, avg(amount) as a from W#unique(account, n) "
                             "where amount > 15 group by account output snapshot every 2 sec",
    "snapshot_rows": "select account, amount, count(*) as cnt from W#time(2 sec) "
                     "group by account output snapshot every 1 sec",
    "snapshot_crontab": "select account, count(*) as cnt from W#time(90 sec) "
                        "group by account output snapshot at (*/1, *, *, *, *)",
    # no group by: split by the keys of a window that keeps each key's events apart
    "unique_rows": "select irstream account, n, amount from W#unique(account)",
    "unique_two_where": "select account, n, amount from W#unique(account, n) "
                        "where amount > 10",
    "groupwin_sort": "select irstream account, amount "
                     "from W#groupwin(account)#sort(3, amount desc)",
    "groupwin_time_batch": "select irstream * from W#groupwin(account)#time_batch(1 sec)",
    "firstunique_rows": "select account, n, amount from W#firstunique(account, n)",
    "unique_type_qualified": "select irstream account, n, amount from W#unique(W.account)",
}


def _app(name: str, epl: str, n: int) -> AppConfig:
    return split_app(name, epl, n, SCHEMAS)


def _steps(seed: int, count: int = 400) -> list[Any]:
    """Clock moves (ints) and events, over 12 accounts, some clock jumps long enough for
    windows to empty and crontab minutes to pass."""
    rnd = random.Random(seed)
    out: list[Any] = []
    t = 0
    for _ in range(count):
        if rnd.random() < 0.3:
            t += rnd.choice([1, 100, 250, 400, 999, 1000, 1500, 7000, 65_000])
            out.append(t)
        out.append({"account": f"A{rnd.randrange(12)}", "amount": float(rnd.randrange(60)),
                    "n": rnd.randrange(3)})
    out.append(t + 200_000)
    return out


def _one(topology: Topology, steps: list[Any]) -> list[list[dict[str, Any]]]:
    """One Engine: the rows of each step."""
    name = next(iter(topology.config.statement_partitions))
    return step_rows(topology, name, steps, False, lambda s: ("W", s))


def _split(topology: Topology, name: str, steps: list[Any]) -> list[list[dict[str, Any]]]:
    """The group's N Engines, composed as the router and engine partitions do."""
    return step_rows(topology, name, steps, True, lambda s: ("W", s))


@pytest.mark.parametrize("name", sorted(SPLITTABLE))
@pytest.mark.parametrize("n", [1, 2, 5])
def test_split_gives_the_rows_of_one_engine(name: str, n: int) -> None:
    topology = Topology.plan(_app(name, SPLITTABLE[name], n))
    assert topology.groups[name].split is not None
    assert_split_matches(topology, name, _steps(seed=len(name) * 31 + n), lambda s: ("W", s))


def test_timed_output_needs_the_arming_touch() -> None:
    """Without the touch an Engine whose groups come late fires at other times: the
    differential test can fail, and the touch is what makes it pass."""
    name = "time_last"
    topology = Topology.plan(_app(name, SPLITTABLE[name], 2))
    g = topology.groups[name]
    first = {"account": "A0", "amount": 1.0, "n": 0}
    other = next(f"A{i}" for i in range(1, 50)
                 if g.partition_of("W", {"account": f"A{i}"}) != g.partition_of("W", first))
    steps = [100, first, 1500, {"account": other, "amount": 2.0, "n": 0}, 3000]
    one = [r["time"] for rows in _one(topology, steps) for r in rows]
    assert one == [1100, 2100]  # A0's row, then the other account's: 1 s from 100
    g.split = type(g.split)(**{**g.split.__dict__, "arms": False})
    unarmed = [r["time"] for rows in _split(topology, name, steps) for r in rows]
    assert unarmed == [1100, 2500]


REFUSED = {
    "select account, count(*) as c from W#length(10) group by account":
        "#length holds events of all groups together",
    "select account, count(*) as c from W#time(1 sec) group by account order by c":
        "order by / limit order rows across groups",
    "select count(*) as c from W#time(1 sec) group by account":
        "a group-by expression is not a select column",
    "select account, count(*) as c from W#time(1 sec) group by account "
    "output snapshot every 1 sec order by c": "order by",
    "select account, count(*) as c from W group by account output every 5 events":
        "output every N events counts the events of all groups",
    "select account, count(*) as c from W#time_batch(1 sec) group by account "
    "output every 1 sec": "#time_batch posts at batch ends",
    "select account, count(*) as c from W#time_batch(1 sec, 0L) group by account "
    "output every 1 sec": "#time_batch posts at batch ends",
    "select account, prev(1, amount) as p from W#time(1 sec) group by account":
        "prev() reads the window across groups",
    "select account, count(*) as c from W#unique(n) group by account":
        "#unique's keys do not include the group key",
    "select account, count(*) as c from W#ext_timed(n, 1 sec) group by account":
        "#ext_timed holds events of all groups together",
    "select account, count(*) as c from W#time(1 sec) group by account "
    "output after 2 sec every 1 sec": "output after counts over all groups",
    "select account, count(*) as c from W#time(1 sec)": "no group by",
    "select distinct account, count(*) as c from W#time(1 sec) group by account":
        "select distinct",
    "select amount from W#unique(account)": "a window key is not a select column",
    "select count(*) as c from W#unique(account)": "no group by: its aggregates",
    "select account, amount from W#unique(account) output every 1 sec":
        "no group by: output limiting",
    "select amount * 2 as a from W#unique(amount * 2)":
        "#unique's keys are not all properties",
    "select account, amount from W#length(5)": "no group by or keyed window",
}


def test_an_aggregate_grouped_apart_is_refused_when_planned() -> None:
    """``sum(x, group_by: k)`` (Esper's grouping of one aggregation apart from the
    statement) is refused by the planner, not run as a plain sum."""
    catalog = Catalog.from_schemas(SCHEMAS)
    with pytest.raises(Exception, match="group_by"):
        plan_statement(catalog, "select account, count(*) as c, sum(amount, group_by: n) "
                       "as s from W#time(1 sec) group by account", "s")


@pytest.mark.parametrize("epl", sorted(REFUSED))
def test_rules_say_why_not(epl: str) -> None:
    catalog = Catalog.from_schemas(SCHEMAS)
    plan = plan_statement(catalog, epl, "s")
    why = split_of(plan, [plan])
    assert isinstance(why, str) and why.startswith(REFUSED[epl]), why
    with pytest.raises(ConfigError, match="cannot be split by its group key: " +
                       REFUSED[epl][:20].replace("(", r"\(").replace(")", r"\)")):
        Topology.plan(_app("s", epl, 2))


def test_config_names_a_statement() -> None:
    with pytest.raises(ConfigError, match="no statement named 'nope'"):
        Topology.plan(AppConfig.from_dict({
            "app": "x", "schemas": SCHEMAS, "statement_partitions": {"nope": 2},
            "statements": [{"name": "s", "epl": "select * from W"}]}))
    with pytest.raises(ConfigError, match="statement_partitions.s"):
        AppConfig.from_dict({"app": "x", "schemas": SCHEMAS, "statement_partitions": {"s": 0},
                             "statements": [{"name": "s", "epl": "select * from W"}]})


def test_split_group_is_routed_with_its_own_topics() -> None:
    name = "time_last"
    topology = Topology.plan(_app(name, SPLITTABLE[name], 4))
    g = topology.groups[name]
    assert not g.direct and g.partitions == 4 and g.arms
    assert [p.name for p in topology.groups["main"].plans] == []
    specs = topology.topic_specs()
    assert specs[topology.config.repartition_topic(name)][0] == 4
    assert specs[topology.config.changelog_topic(name)][0] == 4
    assert topology.output_topics()[name][1] == 4


def test_arm_output_arms_a_timed_output_once() -> None:
    """``Engine.arm_output``: the due time of the first update at that clock; arming again,
    or an update after it, keeps it (a restarted router's touch changes nothing)."""
    plan = plan_statement(Catalog.from_schemas(SCHEMAS), SPLITTABLE["time_last"], "s")
    engine = Engine()
    engine.deploy(plan)
    engine.advance_time(100)
    assert engine.next_timer() is None
    engine.arm_output("s")
    assert engine.next_timer() == 1100
    engine.advance_time(400)
    engine.arm_output("s")
    engine.send("W", {"account": "A", "amount": 1.0, "n": 0})
    assert engine.next_timer() == 1100
    rows: list[tuple] = []
    engine.listeners.append(lambda s, new, old, pid: rows.append((engine.now_ms, new)))
    engine.advance_time(2500)
    assert rows == [(1100, [{"account": "A", "cnt": 1, "total": 1.0}])]

"""Statements with subqueries correlated on a property of their event, split by it: N
engine partitions give the rows of one.

Composed as the Kafka runtime composes a split (``topology``, ``partition``): each of N
Engines deploys the statement, the outer stream's events go to the Engine of
``crc32(key text) mod N`` and each subquery stream's events by their correlated
property, rows are numbered per key.  Per step the N Engines must post the same multiset
of rows as one Engine, each key's rows in the same order with the same ids: a correlated
subquery reads only its key's rows (Esper ref. 5.11), and its window keeps each key's
events apart.
"""

from __future__ import annotations

import pytest

from app.epl.planner import plan_statement
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.topology import Topology, split_of
from tests.app.runtime.split_rows import (
    TWO_TYPES,
    assert_split_matches,
    differs_when_split,
    refusal,
    split_app,
    two_type_steps,
)

SCHEMAS = TWO_TYPES

SPLITTABLE = {
    "avg_time": "select w.account, w.amount, (select avg(x.v) from X#time(2 sec) as x "
                "where x.acct = w.account) as mean from W as w",
    "same_type": "select account, amount, (select count(*) from W#time(3 sec) as y "
                 "where y.account = w.account) as recent from W as w",
    "exists_unique": "select w.account, w.n from W as w where exists "
                     "(select * from X#unique(acct) as x where x.acct = w.account and x.v > 2)",
    "in_keepall": "select w.account, w.n from W as w where w.n in "
                  "(select x.v from X#keepall as x where x.acct = w.account)",
    "all_time": "select w.account, w.amount from W(amount > 5) as w where w.amount > all "
                "(select x.v * 5 from X#time(1500 msec) as x where x.acct = w.account)",
    "groupwin_filter": "select w.account, (select max(x.v) from X(v > 0)#groupwin(acct)"
                       "#length(2) as x where w.account = x.acct and x.v <= w.n + 2) as top "
                       "from W as w",
    "outer_window": "select irstream w.account, w.amount, (select sum(x.v) from "
                    "X#time(1 sec) as x where x.acct = w.account) as s from W#time(2 sec) as w",
    "two": "select w.account, (select count(*) from X#time(1 sec) as x "
           "where x.acct = w.account) as xs, (select avg(y.amount) from W#time(4 sec) as y "
           "where y.account = w.account) as mean from W as w where w.n != 1",
}


def _app(name: str, epl: str, n: int) -> AppConfig:
    return split_app(name, epl, n, SCHEMAS)


@pytest.mark.parametrize("name", sorted(SPLITTABLE))
@pytest.mark.parametrize("n", [1, 2, 5])
def test_split_gives_the_rows_of_one_engine(name: str, n: int) -> None:
    topology = Topology.plan(_app(name, SPLITTABLE[name], n))
    split = topology.groups[name].split
    assert split is not None and split.kind == "subquery"
    assert_split_matches(topology, name, two_type_steps(len(name) * 13 + n), lambda s: s)


GROUPED = {
    "grouped_avg": "select w.account, count(*) as c, sum(w.amount) as s from W#time(2 sec) "
                   "as w where w.amount > (select avg(x.v) * 5 from X#time(3 sec) as x "
                   "where x.acct = w.account) group by w.account",
    "grouped_exists": "select account, count(*) as c from W#keepall as w where exists "
                      "(select * from X#unique(acct) as x where x.acct = w.account "
                      "and x.v > 1) group by account",
    "grouped_irstream": "select irstream account, max(w.amount) as top from "
                        "W#groupwin(account)#length(3) as w where w.n not in (select x.v "
                        "from X#time(1 sec) as x where x.acct = w.account) group by account",
    # a timed output armed by the first event that passes the filter and the where clause
    "grouped_output_last": "select w.account, count(*) as c, (select avg(x.v) from "
                           "X#time(3 sec) as x where x.acct = w.account) as mean "
                           "from W(amount > 10)#time(2 sec) as w where w.n != 1 "
                           "group by w.account output last every 700 msec",
    "grouped_snapshot": "select account, sum(w.amount) as s, (select count(*) from "
                        "W#time(1 sec) as y where y.account = w.account) as recent "
                        "from W#keepall as w group by account output snapshot every 1 sec",
    "grouped_output_all": "select account, max(w.amount) as top, (select max(x.v) "
                          "from X#unique(acct) as x where x.acct = w.account) as xv "
                          "from W#time(1500 msec) as w group by account "
                          "output all every 1 sec",
}
"""Grouped by the property the subqueries correlate on: split by that group key."""


@pytest.mark.parametrize("name", sorted(GROUPED))
@pytest.mark.parametrize("n", [1, 2, 5])
def test_grouped_by_the_correlated_key_splits_by_it(name: str, n: int) -> None:
    topology = Topology.plan(_app(name, GROUPED[name], n))
    split = topology.groups[name].split
    # the outer stream routes unfiltered: a subquery may read the events it drops
    assert split is not None and split.kind == "group" and split.filter is None
    assert_split_matches(topology, name, two_type_steps(len(name) * 11 + n), lambda s: s)


REFUSED = {
    "select w.account, w.n, count(*) from W#time(1 sec) as w where exists (select * from "
    "X#time(1 sec) as x where x.acct = w.account) group by w.account, w.n":
        "a grouped statement with a subquery splits by one group-by property alone",
    "select w.n, count(*) from W#time(1 sec) as w where exists (select * from "
    "X#time(1 sec) as x where x.acct = w.account) group by w.n":
        "the subqueries correlate on account, not on the group key n",
    "select w.account, count(*) from W#time(1 sec) as w where exists (select * from "
    "X#time(1 sec) as x where x.acct = w.account) group by w.account output last every "
    "1 sec": "output limiting is armed where the where clause holds",
    "select w.account, count(*), (select count(*) from X#time(1 sec) as x where x.acct = "
    "w.account) from W#time(1 sec) as w group by w.account output every 3 events":
        "output every N events counts the events of all groups",
    "select w.account, count(*), (select count(*) from X#time(1 sec) as x where x.acct = "
    "w.account) from W#time_batch(1 sec) as w group by w.account output every 1 sec":
        "#time_batch",
    "select w.account from W as w where w.amount > (select avg(x.v) from X#time(1 sec) "
    "as x)": "the subquery on X is not correlated",
    "select w.n from W as w where w.amount > (select avg(x.v) from X#time(1 sec) "
    "as x where x.acct = w.n)": "the correlated properties are not all of one type",
    "select w.account from W as w where exists (select * from X#length(3) as x "
    "where x.acct = w.account)": "the subquery on X: #length holds events of all keys",
    "select w.account from W as w where exists (select * from X#lastevent as x "
    "where x.acct = w.account)": "the subquery on X: #lastevent holds events of all keys",
    "select w.account, count(*) from W#time(1 sec) as w where exists (select * from "
    "X#time(1 sec) as x where x.acct = w.account)": "a statement with a subquery aggregates",
    "select w.n from W as w where exists (select * from X#time(1 sec) as x "
    "where x.acct = w.account)": "the outer account is not a select column",
    "select w.account from W as w where exists (select * from X#time(1 sec) as x "
    "where x.acct = w.account) and exists (select * from X#time(1 sec) as y "
    "where y.v = w.n)": "the subqueries correlate on different properties",
    "select w.account, (select count(*) from W#time(1 sec) as y where y.n = w.n) as c "
    "from W as w where exists (select * from X#time(1 sec) as x where x.acct = w.account)":
        "the subqueries correlate on different properties",
    "select w.account from W#length(5) as w where exists (select * from X#time(1 sec) "
    "as x where x.acct = w.account)": "#length holds events of all keys",
    "select w.account from W as w where exists (select * from X#time(1 sec) as x "
    "where x.acct = w.account) output every 1 sec": "output limiting collects",
    "select irstream account, max(w.amount) as top, (select max(x.v) from X#unique(acct) "
    "as x where x.acct = w.account) as xv from W#time(1500 msec) as w group by account "
    "output all every 1 sec": "output all with the remove stream builds every group's row",
}


@pytest.mark.parametrize("epl", sorted(REFUSED))
def test_rules_say_why_not(epl: str) -> None:
    why = refusal(epl, SCHEMAS)
    assert why.startswith(REFUSED[epl]), why


def test_an_uncorrelated_subquery_differs_when_split() -> None:
    """A subquery over all keys' events, routed as a correlated one is, gives N Engines
    other rows than one: the correlation is what the split rests on."""
    topology = Topology.plan(_app("s", SPLITTABLE["avg_time"], 3))
    plan = plan_statement(topology.catalog, "select w.account, w.amount, (select avg(x.v) "
                          "from X#time(2 sec) as x) as mean from W as w", "s")
    assert isinstance(split_of(plan, [plan], SCHEMAS), str)
    topology.plans[:] = [plan]
    topology.groups["s"].plans[:] = [plan]
    assert differs_when_split(topology, "s", two_type_steps(5), lambda s: s)

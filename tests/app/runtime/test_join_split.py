"""Joins split by their join key: N engine partitions give the rows of one.

Composed as the Kafka runtime composes a split (``topology``, ``partition``): each of N
Engines deploys the statement, an event of either stream goes to the Engine of
``crc32(join key text) mod N``, rows are numbered per key.  Per step the N Engines must
post the same multiset of rows as one Engine, each key's rows in the same order with the
same ids (Esper ref. 5.12: a row joins events whose key properties are equal, so no row
needs events of two keys).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.kafka.config import AppConfig, ConfigError
from app.runtime.kafka.topology import Topology, split_of
from tests.app.runtime.split_rows import (
    assert_split_matches,
    split_app,
)

SCHEMAS = {
    "A": {"id": "long", "seller": "long", "category": "int", "price": "double",
          "code": "string"},
    "P": {"id": "long", "name": "string", "state": "string", "score": "double",
          "code": "string", "small": "int"},
}

SPLITTABLE = {
    "keepall": "select P.name as name, A.id as id, A.seller as seller "
               "from A(category = 1)#keepall as A, P(state in ('OR', 'CA'))#keepall as P "
               "where A.seller = P.id",
    "time_irstream": "select irstream a.seller, a.price, p.name from A#time(2 sec) as a, "
                     "P#time(3 sec) as p where a.seller = p.id and a.price > p.score",
    "type_qualified": "select P.id as person, a.price from A#time(5 sec) as a, "
                      "P#unique(P.id) as p where P.id = A.seller",
    "unique": "select p.id as person, a.id, a.price from A#time(5 sec) as a, "
              "P#unique(id) as p where p.id = a.seller",
    "unidirectional": "select a.seller, p.name, p.state from A as a unidirectional, "
                      "P#keepall as p where a.seller = p.id",
    "on_clause": "select a.code, a.price, p.name from A#time(4 sec) as a inner join "
                 "P#time(4 sec) as p on a.code = p.code",
    "time_batch_ref": "select irstream a.seller, p.name from A#time_batch(1 sec, 0L) as a, "
                      "P#keepall as p where a.seller = p.id",
    # each stream's batches on the grid of its own first arrival (q8, new users)
    "time_batches": "select p.id as id, p.name, a.price from P#time_batch(1 sec) as p, "
                    "A#time_batch(700 msec) as a where p.id = a.seller",
    "groupwin": "select a.seller, a.price, p.name from A#groupwin(seller)#length(2) as a, "
                "P#keepall as p where a.seller = p.id",
    "int_long": "select a.seller, p.name from A#keepall as a, P#time(2 sec) as p "
                "where a.seller = p.small",
    # rows without a partner carry the preserved side's key (Esper ref. 5.12.3)
    "left_outer": "select irstream a.seller, a.price, p.name from A#time(2 sec) as a "
                  "left outer join P#time(3 sec) as p on a.seller = p.id",
    "right_outer": "select p.id as person, p.name, a.price from A#time(3 sec) as a "
                   "right outer join P#unique(id) as p on a.seller = p.id",
    "left_outer_grouped": "select a.seller, count(*) as n, max(p.score) as top "
                          "from A#time(2 sec) as a left outer join P#keepall as p "
                          "on a.seller = p.id group by a.seller",
    "grouped": "select a.seller, count(*) as n, sum(a.price) as total from A#time(3 sec) "
               "as a, P#keepall as p where a.seller = p.id group by a.seller",
    "grouped_other_side": "select irstream p.id as person, avg(a.price) as mean "
                          "from A#groupwin(seller)#length(3) as a, P#unique(id) as p "
                          "where p.id = a.seller group by p.id having count(*) > 1",
}


def _app(name: str, epl: str, n: int) -> AppConfig:
    return split_app(name, epl, n, SCHEMAS)


def _steps(seed: int, count: int = 500) -> list[Any]:
    """Clock moves (ints) and events of both types over 10 keys, some clock jumps long
    enough for windows to empty."""
    rnd = random.Random(seed)
    out: list[Any] = []
    t = 0
    ids = 0
    for _ in range(count):
        if rnd.random() < 0.25:
            t += rnd.choice([1, 100, 250, 400, 999, 1000, 1500, 7000])
            out.append(t)
        key = rnd.randrange(10)
        if rnd.random() < 0.4:
            out.append(("P", {"id": key, "name": f"N{rnd.randrange(5)}",
                              "state": rnd.choice(["OR", "CA", "WA"]),
                              "score": float(rnd.randrange(50)), "code": f"c{key}",
                              "small": key}))
        else:
            ids += 1
            out.append(("A", {"id": ids, "seller": key, "category": rnd.randrange(2),
                              "price": float(rnd.randrange(60)), "code": f"c{key}"}))
    out.append(t + 60_000)
    return out


@pytest.mark.parametrize("name", sorted(SPLITTABLE))
@pytest.mark.parametrize("n", [1, 2, 5])
def test_split_join_gives_the_rows_of_one_engine(name: str, n: int) -> None:
    topology = Topology.plan(_app(name, SPLITTABLE[name], n))
    g = topology.groups[name]
    # only a #time_batch without a reference point is armed by the router's touch
    assert g.split is not None and g.split.kind == "join" and g.arms == (name == "time_batches")
    assert g.types == {"A", "P"}
    assert_split_matches(topology, name, _steps(seed=len(name) * 17 + n), lambda s: s,
                         min_keys=4)


def test_both_streams_route_by_their_own_key_property() -> None:
    topology = Topology.plan(_app("s", SPLITTABLE["keepall"], 4))
    g = topology.groups["s"]
    assert g.split.describe() == "A.seller = P.id"
    used = set()
    for k in range(20):
        a = g.partition_of("A", {"id": 99, "seller": k, "category": 1, "price": 1.0,
                                 "code": "x"})
        p = g.partition_of("P", {"id": k, "name": "n", "state": "OR", "score": 0.0,
                                 "code": "y", "small": 0})
        assert a == p
        used.add(a)
    assert used == {0, 1, 2, 3}
    # each stream's filter drops its events before they are routed
    assert g.partition_of("A", {"id": 1, "seller": 3, "category": 0, "price": 1.0,
                                "code": "x"}) is None
    assert g.partition_of("P", {"id": 3, "name": "n", "state": "WA", "score": 0.0,
                                "code": "y", "small": 0}) is None


REFUSED = {
    "select a.seller, p.name from A#keepall as a full outer join P#keepall as p "
    "on a.seller = p.id": "a full outer join posts rows with either side missing",
    "select p.id, p.name from A#keepall as a left outer join P#keepall as p "
    "on a.seller = p.id": "the preserved side's join key (a.seller) is not a select column",
    "select p.id, count(*) from A#keepall as a left outer join P#keepall as p "
    "on a.seller = p.id group by p.id": "a join's group by must be its join key alone",
    "select a.seller, p.name from A#length(5) as a, P#keepall as p where a.seller = p.id":
        "stream a: #length holds events of all keys together",
    "select a.seller, p.name from A#keepall as a, P#unique(name) as p where a.seller = p.id":
        "stream p: #unique's keys do not include the join key",
    "select a.seller, p.name from A#time_batch(1 sec) as a, P#keepall as p "
    "where a.seller = p.id output every 2 sec": "output limiting collects the rows",
    "select p.name from A#keepall as a, P#keepall as p where a.seller = p.id":
        "the join key is not a select column",
    "select a.seller, p.name from A#keepall as a, P#keepall as p where a.price = p.score":
        "the join key's properties are double and double",
    "select a.seller, p.name from A#keepall as a, P#keepall as p where a.seller = p.name":
        "the join key's properties are long and string",
    "select a.seller, p.name from A#keepall as a, P#keepall as p where a.price > p.score":
        "no equality of a property of each stream",
    "select count(*) as c from A#keepall as a, P#keepall as p where a.seller = p.id":
        "aggregates over a join without a group by on its join key",
    "select p.name, count(*) as c from A#keepall as a, P#keepall as p "
    "where a.seller = p.id group by p.name": "a join's group by must be its join key alone",
    "select count(*) as c from A#keepall as a, P#keepall as p "
    "where a.seller = p.id group by a.seller": "a group-by expression is not a select column",
    "select a.seller, p.name from A#keepall as a, P#keepall as p where a.seller = p.id "
    "output every 1 sec": "output limiting collects the rows of all keys",
    "select a.seller, p.name from A#keepall as a, P#keepall as p where a.seller = p.id "
    "order by p.name": "order by / limit order rows across groups",
    "select a.seller, b.seller as other from A#keepall as a, A#keepall as b "
    "where a.seller = b.id": "a self-join would route one event by two keys",
}


@pytest.mark.parametrize("epl", sorted(REFUSED))
def test_join_rules_say_why_not(epl: str) -> None:
    plan = plan_statement(Catalog.from_schemas(SCHEMAS), epl, "s")
    why = split_of(plan, [plan], SCHEMAS)
    assert isinstance(why, str) and why.startswith(REFUSED[epl]), why
    with pytest.raises(ConfigError, match="cannot be split by its join key: "):
        Topology.plan(_app("s", epl, 2))

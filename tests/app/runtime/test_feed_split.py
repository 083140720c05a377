"""A split statement reading another statement's ``insert into`` stream splits with it:
the feeding statement's events route by the property its rows carry into the reader's
key, so each key's stream events are made in the engine partition that reads them.

The N Engines of the group, composed as the runtime composes them, give per step the
multiset of rows of one Engine, each key's rows of each statement in the same order with
the same ids (Nexmark q9: closed auctions joined with their bids)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.runtime.kafka.config import AppConfig, ConfigError
from app.runtime.kafka.topology import Topology
from tests.app.runtime.split_rows import by_key, multiset, step_rows

SCHEMAS = {
    "Auction": {"id": "long", "seller": "long", "reserve": "long"},
    "Bid": {"auction": "long", "bidder": "long", "price": "long"},
}
CLOSED = ("insert rstream into Closed select id, seller, reserve "
          "from Auction#time(2 sec)")
BIG = "insert into Big select auction, bidder, price from Bid(price > 20)"

CHAINS = {
    # a unidirectional join of the closed auctions with their bids, grouped by its key
    "winning": (CLOSED, "select C.id as auction, C.seller as seller, B.bidder as bidder, "
                        "B.price as price from Closed as C unidirectional, "
                        "Bid#time(3 sec) as B where B.auction = C.id "
                        "and B.price >= C.reserve group by C.id "
                        "having B.price = max(B.price)"),
    # an inner join, both sides windowed, the stream fed by an irstream #keepall
    "joined": ("insert irstream into Closed select id, seller, reserve "
               "from Auction(reserve > 5)#time(1500 msec)",
               "select irstream C.id as auction, B.price as price from Closed#keepall as C, "
               "Bid#time(2 sec) as B where C.id = B.auction"),
    # grouped by the stream's property, fed without a window
    "grouped": (BIG, "select auction, count(*) as n, max(price) as top "
                     "from Big#time(3 sec) group by auction"),
    # split by a window key
    "unique": (BIG, "select irstream auction, bidder, price from Big#unique(auction)"),
}


def _app(name: str, n: int, feeder_n: int | None = None) -> AppConfig:
    feed, read = CHAINS[name]
    return AppConfig.from_dict({
        "app": "feed", "schemas": SCHEMAS, "partitions": 2,
        "statement_partitions": {"feed": n if feeder_n is None else feeder_n, "read": n},
        "statements": [{"name": "feed", "epl": feed}, {"name": "read", "epl": read}]})


def _steps(seed: int, count: int = 500) -> list[Any]:
    """Clock moves (ints), auctions over increasing ids and bids on the last 12."""
    rnd = random.Random(seed)
    out: list[Any] = []
    t, ids = 0, 0
    for _ in range(count):
        if rnd.random() < 0.25:
            t += rnd.choice([1, 100, 250, 400, 999, 1000, 1500, 4000])
            out.append(t)
        if ids == 0 or rnd.random() < 0.3:
            ids += 1
            out.append(("Auction", {"id": ids, "seller": rnd.randrange(5),
                                    "reserve": rnd.randrange(30)}))
        else:
            out.append(("Bid", {"auction": max(1, ids - rnd.randrange(12)),
                                "bidder": rnd.randrange(20), "price": rnd.randrange(60)}))
    out.append(t + 60_000)
    return out


@pytest.mark.parametrize("name", sorted(CHAINS))
@pytest.mark.parametrize("n", [1, 2, 5])
def test_a_fed_split_gives_the_rows_of_one_engine(name: str, n: int) -> None:
    topology = Topology.plan(_app(name, n))
    g = topology.groups["read"]
    assert [p.name for p in g.plans if p.kind == "query"] == ["feed", "read"]
    assert g.split is not None and [f.statement for f in g.split.feeders] == ["feed"]
    assert g.types == {"Auction"} | ({"Bid"} if name in ("winning", "joined") else set()) \
        if CHAINS[name][0] != BIG else g.types == {"Bid"}
    steps = _steps(seed=len(name) * 13 + n)
    one = step_rows(topology, "read", steps, False, lambda s: s)
    split = step_rows(topology, "read", steps, True, lambda s: s)
    made = [r for rows in one for r in rows]
    assert sum(r["statement"] == "read" for r in made) > 20
    assert sum(r["statement"] == "feed" for r in made) > 20
    for i, (a, b) in enumerate(zip(one, split, strict=True)):
        assert multiset(b) == multiset(a), f"step {i}: {steps[i]}"
        assert by_key(b) == by_key(a), f"step {i}: {steps[i]}"
    for stmt in ("feed", "read"):
        keys = by_key([r for r in made if r["statement"] == stmt])
        assert len(keys) > 3
        for key, lane in keys.items():
            assert [i for *_, i in lane] == [f"{stmt}/{key}/{k}"
                                            for k in range(1, len(lane) + 1)]


REFUSED = {
    ("insert into Big select auction, price from Bid#length(3)",
     "select auction, count(*) as n from Big group by auction"):
        "#length posts rows of other events",
    ("insert into Big select bidder as auction, price from Bid",
     "select auction, count(*) as n from Big group by auction"):
        "",
    ("insert into Big select auction * 2 as auction, price from Bid",
     "select auction, count(*) as n from Big group by auction"):
        "its column auction is not a property of its event",
    ("insert into Big select auction, price from Bid",
     "select auction, count(*) as n from Big group by auction output every 1 sec"):
        "its output or #time_batch is armed by its first update",
    ("insert into Big select bidder as auction, price from Bid",
     "select g.auction, b.price from Big#keepall as g, Bid#keepall as b "
     "where g.auction = b.auction"):
        "Bid is routed by another key already",
}


@pytest.mark.parametrize("pair", sorted(REFUSED))
def test_a_feeder_that_cannot_split_says_why(pair: tuple[str, str]) -> None:
    feed, read = pair
    config = AppConfig.from_dict({
        "app": "feed", "schemas": SCHEMAS, "statement_partitions": {"feed": 3, "read": 3},
        "statements": [{"name": "feed", "epl": feed}, {"name": "read", "epl": read}]})
    why = REFUSED[pair]
    if not why:  # another property carried into the key: routed by that one, it splits
        g = Topology.plan(config).groups["read"]
        assert g.split is not None and g.split.feeders[0].text == "Bid.bidder"
        return
    with pytest.raises(ConfigError) as e:
        Topology.plan(config)
    # a reader of Big alone whose output its first update does not arm would read it
    # through its repartition topic, from a feeding statement split on its own: which
    # this one cannot be either
    assert str(e.value).startswith((
        "statement_partitions: statement 'read' reads Big, which statement 'feed' inserts "
        "into: " + why,
        "statement_partitions: statement 'feed' cannot be split by its group key: no group "
        "by or keyed window (#unique, #firstunique, #groupwin); nor with 'read', which "
        "reads Big: " + why)), str(e.value)


def test_a_feeder_split_by_its_own_key_forwards_to_the_reader() -> None:
    """A feeding statement that groups over all its events cannot split with its reader,
    but splits by its own group key; the reader reads its stream through its repartition
    topic."""
    config = AppConfig.from_dict({
        "app": "feed", "schemas": SCHEMAS, "statement_partitions": {"feed": 3, "read": 2},
        "statements": [
            {"name": "feed", "epl": "insert into Big select auction, count(*) as n "
                                    "from Bid#time(1 sec) group by auction"},
            {"name": "read", "epl": "select auction, sum(n) as s from Big group by auction"}]})
    topo = Topology.plan(config)
    assert topo.groups["feed"].forwards == {"Big": ["read"]}
    assert topo.groups["read"].fed_by == [("feed", 3)]


def test_the_feeder_must_be_split_with_the_same_partitions() -> None:
    with pytest.raises(ConfigError, match="name 'feed' in statement_partitions with 4 "
                                          "partitions too"):
        Topology.plan(_app("grouped", 4, feeder_n=2))
    config = AppConfig.from_dict({
        "app": "feed", "schemas": SCHEMAS, "statement_partitions": {"read": 3},
        "statements": [{"name": "feed", "epl": BIG},
                       {"name": "read", "epl": CHAINS["grouped"][1]}]})
    # not named: it stays in main, which forwards Big to the reader's partitions
    topo = Topology.plan(config)
    assert topo.groups["main"].forwards == {"Big": ["read"]}
    assert topo.groups["read"].split is not None and not topo.groups["read"].split.feeders

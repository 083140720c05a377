"""A split statement reading a stream that statements of another engine group insert
into, through the real routing stage and engine partitions, without a broker.

The feeding group's engine partitions forward each inserted event to the repartition
partition of its key in the reader's group, stamped with their engine's time, and each
watermark they complete after it; the reader merges its upstreams' epochs and runs each
event at its time, events of one time in one engine's order of their inserts (by the
input event that set each off).  Every statement's rows, times and ids equal those one
Engine numbers for the same statement file, whatever order the records arrive in
(Nexmark q4: the closed auctions' winning prices, averaged per category), but where two
partitions' timers insert events of one group at one time.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.lanes import LaneCursor
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.router import Routing, barrier_entry, decode_bundle, encode_bundles
from app.runtime.kafka.topology import Topology
from app.runtime.kafka.wiring import Wiring
from tests.app.runtime.split_rows import embedded_rows

SCHEMAS = {
    "Auction": {"id": "long", "category": "long", "reserve": "long"},
    "Bid": {"auction": "long", "bidder": "long", "price": "long"},
}
CLOSED = ("insert rstream into Closed select id, category, reserve "
          "from Auction#time(2 sec)")
WINNING = ("insert into Winning select C.id as auction, C.category as category, "
           "(select max(B.price) from Bid#time(3 sec) as B where B.auction = C.id "
           "and B.price >= C.reserve) as price from Closed as C")
BIG = "insert into Big select auction, bidder, price from Bid(price > 20)"

CHAINS: dict[str, tuple[tuple[str, str], ...]] = {
    # Nexmark q4: closed auctions (split by id) averaged per category (split by it)
    "q4": (("closed", CLOSED), ("winning", WINNING),
           ("average", "select category, avg(price) as avg_price, count(*) as n "
                       "from Winning(price is not null) group by category")),
    # the reader's own time window expires the forwarded events at their times
    "windowed": (("closed", CLOSED), ("winning", WINNING),
                 ("recent", "select irstream category, count(*) as n, max(price) as top "
                            "from Winning#time(5 sec) group by category")),
    # one stream, two readers split by two other keys
    "two_readers": (("per_pair", "insert into Pair select bidder, auction, count(*) as n, "
                                 "sum(price) as total from Bid group by bidder, auction"),
                    ("by_auction", "select auction, count(*) as c, max(n) as m "
                                   "from Pair group by auction"),
                    ("by_bidder", "select bidder, count(*) as c, sum(total) as s "
                                  "from Pair group by bidder")),
    # the reader's timed output, armed by its first update in whichever partition
    "output_last": (("closed", CLOSED), ("winning", WINNING),
                    ("last_avg", "select category, avg(price) as avg_price "
                                 "from Winning(price is not null) group by category "
                                 "output last every 1500 msec")),
    # its #time_batch, whose reference point is the first arrival
    "batch": (("big", BIG),
              ("per_batch", "select irstream bidder, count(*) as n, sum(price) as total "
                            "from Big#time_batch(2 sec) group by bidder")),
    # each bid sets off an insert: many of one time, from every feeding partition
    "ties": (("per_pair", "insert into Pair select bidder, auction, count(*) as n, "
                          "sum(price) as total from Bid group by bidder, auction"),
             ("per_auction", "select auction, count(*) as c, max(n) as m, "
                             "sum(total) as s from Pair group by auction")),
    # two hops: the pairs' counts per auction, then the auctions per count
    "two_hops": (("per_pair", "insert into Pair select bidder, auction, count(*) as n "
                              "from Bid group by bidder, auction"),
                 ("per_auction", "insert into Top select auction, count(*) as c, "
                                 "max(n) as m from Pair group by auction"),
                 ("per_count", "select c, count(*) as auctions, sum(m) as s "
                               "from Top group by c")),
    # fed by main (one engine partition), the reader split by another key
    "main": (("big", BIG),
             ("per_bidder", "select bidder, count(*) as n, sum(price) as total "
                            "from Big#time(2 sec) group by bidder")),
}
SPLITS = {"q4": {"closed": 3, "winning": 3, "average": 2},
          "windowed": {"closed": 2, "winning": 2, "recent": 3},
          "ties": {"per_pair": 3, "per_auction": 2},
          "two_hops": {"per_pair": 3, "per_auction": 2, "per_count": 3},
          "output_last": {"closed": 2, "winning": 2, "last_avg": 3},
          "two_readers": {"per_pair": 3, "by_auction": 2, "by_bidder": 3},
          "batch": {"per_batch": 3},
          "main": {"per_bidder": 3}}
READER = {"q4": "average", "windowed": "recent", "ties": "per_auction",
          "two_hops": "per_count", "output_last": "last_avg", "batch": "per_batch",
          "two_readers": "by_bidder",
          "main": "per_bidder"}
SOURCES = 2


def config(name: str, event_time: bool = False) -> AppConfig:
    """The chain's app; ``event_time``: its time from the records' timestamps (the
    feeding partitions hold their events until a watermark reaches them)."""
    return AppConfig.from_dict({
        "app": "fwd", "schemas": SCHEMAS, "partitions": SOURCES,
        "topics": {"Auction": "auction", "Bid": "bid"},
        "statement_partitions": SPLITS[name],
        **({"event_time": {"delay_ms": 0}} if event_time else {}),
        "statements": [{"name": n, "epl": e} for n, e in CHAINS[name]]})


def workload(seed: int, count: int = 300) -> list[Any]:
    """Clock moves (ints) and ``(source partition, type, event)``: auctions over
    increasing ids, each at a time of its own (their expiries never tie), and bids on
    the last ten."""
    rnd = random.Random(seed)
    out: list[Any] = []
    t, ids = 1000, 0
    for _ in range(count):
        if ids == 0 or rnd.random() < 0.2:
            t += rnd.choice([1, 7, 130, 700])
            out.append(t)
            ids += 1
            out.append((rnd.randrange(SOURCES), "Auction",
                        {"id": ids, "category": rnd.randrange(4),
                         "reserve": rnd.randrange(30)}))
        else:
            if rnd.random() < 0.2:
                t += rnd.choice([1, 250, 900])
                out.append(t)
            out.append((rnd.randrange(SOURCES), "Bid",
                        {"auction": max(1, ids - rnd.randrange(10)),
                         "bidder": rnd.randrange(6), "price": rnd.randrange(60)}))
    out.append(t + 20_000)
    return out


def route(topo: Topology, steps: list[Any], rnd: random.Random
          ) -> dict[tuple[str, int], dict[str, list[InRecord]]]:
    """Every source partition routed in batches: (group, partition) -> upstream ->
    records."""
    routing = Routing(topo)
    ups = topo.source_upstreams()
    lanes: dict[str, list[Any]] = {u: [] for u in ups}
    now, seq = 0, 0
    for step in steps:
        if isinstance(step, int):
            now = step
            for lane in lanes.values():
                lane.append(("barrier", now))
        else:
            seq += 1
            s, type_name, event = step
            topic = topo.config.topic_of(type_name)
            lanes[f"{topic}:{s}"].append(("event", type_name, event, seq, now))
    group_of = {topo.config.repartition_topic(g.name): g.name for g in topo.routed_groups()}
    out: dict[tuple[str, int], dict[str, list[InRecord]]] = {}
    for up, records in lanes.items():
        cur = LaneCursor()
        topic = up.split(":")[0]
        for off in range(0, len(records), 4):
            bundles: dict = {}
            for o in range(off, min(len(records), off + 4)):
                r = records[o]
                if r[0] == "barrier":
                    for target in routing.barrier_targets:
                        bundles.setdefault(target, []).append(
                            barrier_entry(up, o, r[1], f"w{r[1]}"))
                else:
                    routing.forward(bundles, cur, topic, r[1], r[2], up, o, r[4], r[3])
            for (rt, q), entries in bundles.items():
                for value in encode_bundles(entries):
                    out.setdefault((group_of[rt], q), {}).setdefault(up, []).extend(
                        decode_bundle(value))
    return out


def run_group(tmp: Path, topo: Topology, name: str,
              inputs: dict[str, list[InRecord]], ups: list[str], q: int,
              rnd: random.Random, rows: dict[str, dict[str, list[tuple]]]
              ) -> dict[tuple[str, int], list[InRecord]]:
    """Engine partition ``q`` of group ``name`` fed its upstreams in a random arrival
    order; its rows into ``rows``; returns what it forwarded, by repartition partition."""
    part = EnginePartition(topo.groups[name], q, tmp / name / str(q), ups, "changelog")
    part.forward_to = Wiring(topo.config, topo).forward_to.get(name, {})
    part.load()
    heads = dict.fromkeys(ups, 0)
    forwarded: dict[tuple[str, int], list[InRecord]] = {}
    while any(heads[u] < len(inputs.get(u, [])) for u in ups):
        u = rnd.choice([u for u in ups if heads[u] < len(inputs.get(u, []))])
        n = rnd.randint(1, 3)
        part.run(inputs[u][heads[u]:heads[u] + n])
        heads[u] += n
        if rnd.random() < 0.3:  # a checkpoint: what it forwarded goes out
            _take(part, forwarded)
    _take(part, forwarded)
    for stmt, stream, cp, t, seq, row, _c in part.outputs:
        rows.setdefault(stmt, {}).setdefault(cp, []).append(
            (stream, row, t, f"{stmt}/{cp}/{seq}"))
    part.close()
    return forwarded


def _take(part: EnginePartition, into: dict[tuple[str, int], list[InRecord]]) -> None:
    for (topic, q), entries in part.forwards.items():
        for value in encode_bundles(entries):
            into.setdefault((topic, q), []).extend(decode_bundle(value))
    part.forwards = {}


def run_all(tmp: Path, topo: Topology, steps: list[Any], rnd: random.Random
            ) -> dict[str, dict[str, list[tuple]]]:
    """Each group over its routed input and what the groups before it forwarded, a
    group after those feeding it: statement -> context partition -> rows."""
    routed = route(topo, steps, rnd)
    group_of = {topo.config.repartition_topic(g.name): g.name for g in topo.routed_groups()}
    rows: dict[str, dict[str, list[tuple]]] = {}
    done: set[str] = set()
    todo = topo.active_groups()
    while todo:
        g = next(g for g in todo if all(f in done for f, _ in g.fed_by))
        todo.remove(g)
        for q in range(g.partitions):
            ups = g.upstreams(q, topo.source_upstreams())
            out = run_group(tmp, topo, g.name, routed.get((g.name, q), {}), ups, q, rnd, rows)
            for (topic, r), records in out.items():
                for rec in records:
                    routed.setdefault((group_of[topic], r), {}).setdefault(
                        rec.upstream, []).append(rec)
        done.add(g.name)
    return rows


def test_the_reader_is_fed_by_the_other_groups_engine_partitions() -> None:
    topo = Topology.plan(config("q4"))
    average, winning = topo.groups["average"], topo.groups["winning"]
    assert [p.name for p in winning.plans] == ["closed", "winning"]
    assert winning.forwards == {"Winning": ["average"]}
    assert average.fed_by == [("winning", 3)]
    assert average.upstreams(0, topo.source_upstreams()) == [
        "winning/0", "winning/1", "winning/2"]
    assert average.types == {"Winning"}
    routing = Routing(topo)
    rt = topo.config.repartition_topic("average")
    assert (rt, 0) not in routing.barrier_targets
    assert (topo.config.repartition_topic("winning"), 0) in routing.barrier_targets
    two = Topology.plan(config("two_readers"))
    assert two.groups["per_pair"].forwards == {"Pair": ["by_auction", "by_bidder"]}
    main = Topology.plan(config("main"))
    assert main.groups["main"].forwards == {"Big": ["per_bidder"]}
    assert main.groups["per_bidder"].fed_by == [("main", 1)]


@pytest.mark.parametrize("event_time", [False, True], ids=["clock", "event-time"])
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_forwarded_rows_are_those_of_one_engine(tmp_path: Path, name: str,
                                                event_time: bool) -> None:
    topo = Topology.plan(config(name, event_time))
    for seed in range(3):
        steps = workload(seed)
        want = embedded_rows(topo, steps, lambda s: (s[1], s[2]))
        assert sum(len(r) for r in want[READER[name]].values()) >= 20
        got = run_all(tmp_path / str(seed), topo, steps, random.Random(seed))
        assert got == want, seed


def test_a_timers_events_of_one_time_from_two_partitions_take_partition_order(
        tmp_path: Path) -> None:
    """Auctions of one time closing in two partitions of the feeding group (one timer
    each): the reader takes their events in partition order, not one engine's (the
    order the auctions came in), the same for every arrival order."""
    topo = Topology.plan(config("q4"))
    steps: list[Any] = [1000]
    for i in range(1, 13):
        steps.append((i % SOURCES, "Auction", {"id": i, "category": 1, "reserve": 0}))
        steps.append((i % SOURCES, "Bid", {"auction": i, "bidder": 1, "price": 10 * i}))
    steps += [2000, 9000]
    runs = [run_all(tmp_path / str(seed), topo, steps, random.Random(seed))
            for seed in range(4)]
    assert [len(r["average"]["[1]"]) for r in runs] == [12] * 4
    assert all(r == runs[0] for r in runs)
    want = embedded_rows(topo, steps, lambda s: (s[1], s[2]))
    assert runs[0]["winning"] == want["winning"]
    assert runs[0]["average"] != want["average"]

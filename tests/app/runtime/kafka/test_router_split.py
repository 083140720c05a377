"""A statement split by group key through the real routing stage and engine partitions,
without a broker.

Source partitions are routed by ``Routing.forward`` in batches, by routers that now and
then restart (forget their cursor and forward the last records again, touches included);
each engine partition is fed its upstreams in a random arrival order.  Every group's rows,
times and ids equal those the embedded Engine numbers for the same statement file, and the
timed output of a partition whose groups come late fires at the times one Engine fires.
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
from tests.app.runtime.split_rows import embedded_rows

PARTITIONS = 4
STATEMENTS = {
    "last": "select k, count(*) as n, sum(v) as total from T#time(2 sec) where v > 2 "
            "group by k output last every 700 msec",
    "first": "select irstream k, sum(v) as total from T#unique(k) group by k "
             "output first every 1 sec",
    "top": "select irstream k, v from T#groupwin(k)#sort(2, v desc)",
    "snap": "select k, count(*) as n, sum(v) as total from T#time(2 sec) where v > 1 "
            "group by k output snapshot every 700 msec",
    # the reference point is the first arrival, the where clause aside
    "batch": "select irstream k, count(*) as n, sum(v) as total from T#time_batch(1 sec) "
             "where v > 5 group by k",
}


def config(name: str, sources: int, event_time: bool = False) -> AppConfig:
    return AppConfig.from_dict({
        "app": "unit", "schemas": {"T": {"k": "string", "v": "int"}},
        "topics": {"T": "t"}, "partitions": sources,
        "statement_partitions": {name: PARTITIONS},
        **({"event_time": {"delay_ms": 0}} if event_time else {}),
        "statements": [{"name": name, "epl": STATEMENTS[name]}]})


def workload(seed: int, sources: int) -> list[Any]:
    """Sends ``(source partition, key, v)`` and clock moves (int ms); the first events
    come at 1,300 ms, so that the periodic output's phase is theirs."""
    rnd = random.Random(seed)
    steps: list[Any] = [1300]
    t = 1300
    for _ in range(7):
        for _ in range(rnd.randrange(2, 9)):
            steps.append((rnd.randrange(sources), f"K{rnd.randrange(10)}", rnd.randrange(8)))
        t += rnd.choice([200, 500, 1000, 2500])
        steps.append(t)
    steps.append(t + 5000)
    return steps


def route_all(topo: Topology, name: str, steps: list[Any], rnd: random.Random
              ) -> dict[int, dict[str, list[InRecord]]]:
    """Each source partition routed on its own by a router that restarts now and then:
    partition -> upstream -> records."""
    routing = Routing(topo)
    rt = topo.config.repartition_topic(name)
    lanes: dict[str, list[Any]] = {u: [] for u in topo.source_upstreams()}
    now, seq = 0, 0
    for step in steps:
        if isinstance(step, int):
            now = step
            for lane in lanes.values():
                lane.append(("barrier", now))
        else:
            seq += 1
            s, k, v = step[:3]
            ts = step[3] if len(step) > 3 else now  # event time: its own
            lanes[f"t:{s}"].append(("event", {"k": k, "v": v}, ts, seq))
    out: dict[int, dict[str, list[InRecord]]] = {
        q: {u: [] for u in lanes} for q in range(PARTITIONS)}
    for up, records in lanes.items():
        cur = LaneCursor()
        off = 0
        while off < len(records):
            bundles: dict = {}
            end = min(len(records), off + rnd.randint(1, 5))
            for o in range(off, end):
                r = records[o]
                if r[0] == "barrier":
                    for q in range(PARTITIONS):
                        bundles.setdefault((rt, q), []).append(
                            barrier_entry(up, o, r[1], f"w{r[1]}"))
                else:
                    routing.forward(bundles, cur, "t", "T", r[1], up, o, r[2], r[3])
            for (_, q), entries in bundles.items():
                for value in encode_bundles(entries):
                    out[q][up] += decode_bundle(value)
            if rnd.random() < 0.3:  # a restart: from a little before, cursor forgotten
                cur = LaneCursor()
                off = max(0, end - rnd.randint(0, 3))
            else:
                off = end
    return out


def run_partitions(tmp: Path, topo: Topology, name: str,
                   routed: dict[int, dict[str, list[InRecord]]], rnd: random.Random
                   ) -> dict[str, list[tuple]]:
    """Every engine partition fed its upstreams in some arrival order: group -> rows."""
    group = topo.groups[name]
    ups = topo.source_upstreams()
    rows: dict[str, list[tuple]] = {}
    for q in range(PARTITIONS):
        part = EnginePartition(group, q, tmp / str(q), ups, "changelog")
        part.load()
        heads = dict.fromkeys(ups, 0)
        lanes = routed[q]
        while any(heads[u] < len(lanes[u]) for u in ups):
            u = rnd.choice([u for u in ups if heads[u] < len(lanes[u])])
            n = rnd.randint(1, 3)
            part.run(lanes[u][heads[u]:heads[u] + n])
            heads[u] += n
        for stmt, stream, cp, t, seq, row, _c in part.outputs:
            rows.setdefault(cp, []).append((stream, row, t, f"{stmt}/{cp}/{seq}"))
        part.close()
    return rows


@pytest.mark.parametrize("name", sorted(STATEMENTS))
@pytest.mark.parametrize("sources", [1, 3])
def test_split_rows_through_router_and_partitions(tmp_path: Path, name: str,
                                                  sources: int) -> None:
    topo = Topology.plan(config(name, sources))
    for seed in range(3):
        steps = workload(seed, sources)
        want = embedded_rows(topo, steps, lambda s: ("T", {"k": s[1], "v": s[2]}))[name]
        assert len(want) >= 5
        rnd = random.Random(seed)
        got = run_partitions(tmp_path / f"{seed}", topo, name,
                             route_all(topo, name, steps, rnd), rnd)
        assert got == want, seed


def test_a_time_batch_ends_on_the_grid_of_the_first_arrival(tmp_path: Path) -> None:
    """The first event fails the where clause and the next goes to another partition:
    that partition's batches still end on the grid of the first arrival (1,300 ms),
    as one Engine's do, not of its own first event (1,800 ms)."""
    topo = Topology.plan(config("batch", 1))
    route = topo.groups["batch"].partition_fn("T")
    assert route({"k": "K1", "v": 1}) != route({"k": "K4", "v": 7})
    steps = [1300, (0, "K1", 1), 1800, (0, "K4", 7), 2100, (0, "K4", 6), 2700,
             (0, "K1", 7), 3500, 6000]
    want = embedded_rows(topo, steps, lambda s: ("T", {"k": s[1], "v": s[2]}))["batch"]
    assert {cp: [(stream, t) for stream, _row, t, _id in rows]
            for cp, rows in want.items()} == {
        "K4": [("insert", 2300), ("remove", 2300), ("insert", 3300), ("remove", 3300)],
        "K1": [("insert", 3300), ("remove", 3300), ("insert", 4300), ("remove", 4300)]}
    rnd = random.Random(0)
    got = run_partitions(tmp_path, topo, "batch", route_all(topo, "batch", steps, rnd), rnd)
    assert got == want


def timed_workload(seed: int, sources: int) -> list[Any]:
    """Event time: events ``(source, key, v, time)`` ahead of the watermarks (ints),
    each watermark the time of the last event before it."""
    rnd = random.Random(seed)
    steps: list[Any] = [1000]
    t = 1000
    for _ in range(8):
        for _ in range(rnd.randrange(1, 6)):
            t += rnd.choice([0, 50, 300, 700])
            steps.append((rnd.randrange(sources), f"K{rnd.randrange(10)}", rnd.randrange(8), t))
        steps.append(t)
    steps.append(t + 5000)
    return steps


@pytest.mark.parametrize("name", ["batch", "last"])
@pytest.mark.parametrize("sources", [1, 3])
def test_event_time_arms_every_partition_at_the_first_events_time(
        tmp_path: Path, name: str, sources: int) -> None:
    """In event time the arming event runs at its own time, after the watermark that
    released it: the other partitions arm at that time, not at the engine's time when
    the touch came (one Engine moved to each event's time before it)."""
    topo = Topology.plan(config(name, sources, event_time=True))
    for seed in range(4):
        steps = timed_workload(seed, sources)
        moved: list[Any] = []
        for step in steps:
            moved += [step[3], step[:3]] if isinstance(step, tuple) else [step]
        want = embedded_rows(topo, moved, lambda s: ("T", {"k": s[1], "v": s[2]}))[name]
        assert sum(map(len, want.values())) >= 6
        rnd = random.Random(seed)
        got = run_partitions(tmp_path / f"{seed}", topo, name,
                             route_all(topo, name, steps, rnd), rnd)
        assert got == want, seed

"""The routing stage of a hash context numbered by first use, without a broker.

``Routing.forward`` sends a bucket's first event from a source partition to its engine
partition and a touch to the partitions that have had no event from there yet; engine
partitions fed those bundles, in any arrival order and with routers that forget what they
sent (a restart), give every row the ``context.id`` of one embedded Engine.
"""

from __future__ import annotations

import random
import zlib
from pathlib import Path
from typing import Any

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.lanes import LaneCursor
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.router import Routing, barrier_entry, decode_bundle, encode_bundles
from app.runtime.kafka.topology import Topology

GRANULARITY = 8
KEYS = ["E1", "E2", "E3", "E4", "E5", "E6", "E7", "E8", "A", "B", "C", "D"]


def config(preallocate: bool = False, sources: int = 3) -> AppConfig:
    pre = " preallocate" if preallocate else ""
    return AppConfig.from_dict({
        "app": "unit", "schemas": {"T": {"k": "string", "v": "int"}},
        "topics": {"T": "t"}, "partitions": sources,
        "statements": [
            {"name": "ctx", "epl": "create context H coalesce by consistent_hash_crc32(k) "
                                   f"from T granularity {GRANULARITY}{pre}"},
            {"name": "s0", "epl": "context H select context.id as c0, k, sum(v) as total "
                                  "from T group by k"}]})


def bucket(k: str) -> int:
    return zlib.crc32(k.encode()) % GRANULARITY


def kinds_to(bundles: dict, partition: int) -> list[tuple[str, Any]]:
    return [(e[0], e[6] if e[0] == "touch" else e[6].get("k"))
            for e in bundles.get(("kepl.unit.repartition.H", partition), [])]


def test_first_event_of_a_bucket_touches_the_partitions_not_yet_used() -> None:
    cfg = config()
    routing = Routing(Topology.plan(cfg))
    rt = cfg.repartition_topic("H")
    assert rt == "kepl.unit.repartition.H"
    cur = LaneCursor()
    bundles: dict = {}
    b1, b2 = bucket("E1"), bucket("E2")
    assert b1 != b2
    for off, k in enumerate(["E1", "E2", "E1"]):
        routing.forward(bundles, cur, "t", "T", {"k": k, "v": 1}, "t:0", off, 0, off + 1)
    assert kinds_to(bundles, b1) == [("event", "E1"), ("event", "E1")]
    # E2's partition had the touch of E1's bucket before its own first event
    assert kinds_to(bundles, b2) == [("touch", b1), ("event", "E2")]
    other = next(q for q in range(GRANULARITY) if q not in (b1, b2))
    assert kinds_to(bundles, other) == [("touch", b1), ("touch", b2)]
    assert cur.used == {rt: frozenset({b1, b2})}
    # a committed cursor remembers it; its copy is independent
    kept = cur.copy()
    bundles.clear()
    routing.forward(bundles, cur, "t", "T", {"k": "E3", "v": 1}, "t:0", 3, 0, 4)
    assert set(kept.used[rt]) == {b1, b2}
    assert kinds_to(bundles, b1) == [] and kinds_to(bundles, b2) == []


def test_preallocated_context_sends_no_touches() -> None:
    cfg = config(preallocate=True)
    routing = Routing(Topology.plan(cfg))
    cur = LaneCursor()
    bundles: dict = {}
    routing.forward(bundles, cur, "t", "T", {"k": "E1", "v": 1}, "t:0", 0, 0, 1)
    assert list(bundles) == [(cfg.repartition_topic("H"), bucket("E1"))]
    assert cur.used == {}


def workload(seed: int, sources: int, epochs: int = 4, per_epoch: int = 9
             ) -> list[Any]:
    """Sends ``(source partition, key, v)`` and clock moves (int ms), in send order."""
    rnd = random.Random(seed)
    steps: list[Any] = [1000]
    for e in range(epochs):
        for _ in range(per_epoch):
            steps.append((rnd.randrange(sources), rnd.choice(KEYS), rnd.randint(1, 9)))
        steps.append(1000 * (e + 2))
    return steps


def route_all(cfg: AppConfig, steps: list[Any], rnd: random.Random, restarts: float = 0.3,
              backwards: bool = False) -> dict[int, dict[str, list[InRecord]]]:
    """Each source partition routed on its own, in batches, by a router that now and then
    restarts (forgets its cursor and forwards the last records again): partition ->
    upstream -> records.  ``backwards``: record timestamps go back within an epoch."""
    topo = Topology.plan(cfg)
    routing = Routing(topo)
    rt = cfg.repartition_topic("H")
    sources = topo.source_counts["t"]
    lanes: dict[str, list[Any]] = {f"t:{s}": [] for s in range(sources)}
    now, seq = 0, 0
    for step in steps:
        if isinstance(step, int):
            now = step
            for lane in lanes.values():
                lane.append(("barrier", now))
        else:
            seq += 1
            s, k, v = step
            ts = now - (seq * 7919) % 1000 if backwards else now
            lanes[f"t:{s}"].append(("event", {"k": k, "v": v}, ts, seq))
    out: dict[int, dict[str, list[InRecord]]] = {
        q: {u: [] for u in lanes} for q in range(GRANULARITY)}
    for up, records in lanes.items():
        cur = LaneCursor()
        off = 0
        while off < len(records):
            bundles: dict = {}
            end = min(len(records), off + rnd.randint(1, 5))
            for o in range(off, end):
                r = records[o]
                if r[0] == "barrier":
                    for q in range(GRANULARITY):
                        bundles.setdefault((rt, q), []).append(
                            barrier_entry(up, o, r[1], f"w{r[1]}"))
                else:
                    routing.forward(bundles, cur, "t", "T", r[1], up, o, r[2], r[3])
            for (_, q), entries in bundles.items():
                for value in encode_bundles(entries):
                    out[q][up] += decode_bundle(value)
            if rnd.random() < restarts:  # a restart: from a little before, cursor forgotten
                cur = LaneCursor()
                off = max(0, end - rnd.randint(0, 3))
            else:
                off = end
    return out


def run_partitions(tmp: Path, cfg: AppConfig, routed: dict[int, dict[str, list[InRecord]]],
                   rnd: random.Random) -> dict[str, list[dict[str, Any]]]:
    """Every engine partition fed its upstreams in some arrival order: bucket -> rows."""
    topo = Topology.plan(cfg)
    group = topo.groups["H"]
    ups = topo.source_upstreams()
    rows: dict[str, list[dict[str, Any]]] = {}
    for q in range(GRANULARITY):
        part = EnginePartition(group, q, tmp / str(q), ups, "changelog")
        part.load()
        heads = {u: 0 for u in ups}
        lanes = routed[q]
        while any(heads[u] < len(lanes[u]) for u in ups):
            u = rnd.choice([u for u in ups if heads[u] < len(lanes[u])])
            n = rnd.randint(1, 3)
            part.run(lanes[u][heads[u]:heads[u] + n])
            heads[u] += n
        for stmt, stream, cp, _t, _seq, row, _c in part.outputs:
            assert (stmt, stream, cp) == ("s0", "insert", str(q))
            rows.setdefault(cp, []).append(row)
        part.close()
    return rows


def embedded(cfg: AppConfig, steps: list[Any]) -> dict[str, list[dict[str, Any]]]:
    catalog = Catalog.from_schemas(cfg.schemas)
    engine = Engine()
    for s in cfg.statements:
        engine.deploy(plan_statement(catalog, s.epl, s.name))
    rows: dict[str, list[dict[str, Any]]] = {}
    engine.listeners.append(lambda stmt, new, old, pid: [
        rows.setdefault(str(bucket(r["k"])), []).append(r) for r in new])
    for step in steps:
        if isinstance(step, int):
            engine.advance_time(step)
        else:
            engine.send("T", {"k": step[1], "v": step[2]})
    return rows


def test_context_ids_follow_first_use_across_engine_partitions(tmp_path: Path) -> None:
    for sources in (1, 3):
        cfg = config(sources=sources)
        steps = workload(seed=sources, sources=sources)
        want = embedded(cfg, steps)
        ids = {r["c0"] for lane in want.values() for r in lane}
        assert len(ids) >= 6 and ids == set(range(len(ids)))
        for trial in range(4):
            rnd = random.Random(trial)
            got = run_partitions(tmp_path / f"{sources}-{trial}", cfg,
                                 route_all(cfg, steps, rnd), rnd)
            assert got == want, (sources, trial)


def test_ids_do_not_depend_on_restarts_when_timestamps_go_backwards(tmp_path: Path) -> None:
    """The merge key then orders no upstream: a restarted router's extra touches must
    move neither an id nor an event."""
    cfg = config(sources=3)
    steps = workload(seed=9, sources=3)
    reference = run_partitions(tmp_path / "ref", cfg,
                               route_all(cfg, steps, random.Random(0), 0.0, True),
                               random.Random(0))
    assert len({r["c0"] for lane in reference.values() for r in lane}) >= 6
    for trial in range(4):
        rnd = random.Random(trial + 1)
        got = run_partitions(tmp_path / str(trial), cfg,
                             route_all(cfg, steps, rnd, 0.5, True), rnd)
        assert got == reference, trial


def test_a_router_of_one_type_bundles_what_forward_bundles() -> None:
    # a keyed context or a split statement on one property (the one-call router), on
    # two properties or filtered, and a hash context numbered by first use (forward
    # itself): the same bundles, a split statement's arming touches included
    def keyed(by: str) -> AppConfig:
        return AppConfig.from_dict({
            "app": "unit", "schemas": {"T": {"k": "string", "n": "int", "v": "int"}},
            "topics": {"T": "t"}, "partitions": 2, "context_partitions": {"K": 4},
            "statements": [
                {"name": "ctx", "epl": f"create context K partition by {by} from T"},
                {"name": "s0", "epl": "context K select count(*) as c from T"}]})

    events = [{"k": k, "n": n, "v": 1} for k, n in
              [("E1", 1), ("E2", 2), (None, 3), ("E1", None), ("\x00x", 4), ("E9", 1)]]
    def split(by: str, where: str = "") -> AppConfig:
        return AppConfig.from_dict({
            "app": "unit", "schemas": {"T": {"k": "string", "n": "int", "v": "int"}},
            "topics": {"T": "t"}, "partitions": 2, "statement_partitions": {"s0": 4},
            "statements": [{"name": "s0", "epl": f"select {by}, count(*) as c from T{where} "
                                                 f"group by {by} output last every 1 sec"}]})

    for cfg, hashed in ((keyed("k"), False), (keyed("n"), False), (keyed("k, n"), False),
                        (config(), True), (config(True), True), (split("k"), False),
                        (split("n", "(v > 0)"), False),
                        (split("k, n"), False)):
        one, run = Routing(Topology.plan(cfg)), Routing(Topology.plan(cfg))
        by_forward: dict = {}
        by_router: dict = {}
        cur1, cur2 = LaneCursor(), LaneCursor()
        route = run.router("t", "T")
        for off, ev in enumerate(events):
            if hashed:
                ev = {"k": ev["k"] or "E0", "v": 1}
            one.forward(by_forward, cur1, "t", "T", ev, "t:0", off, 100 + off, None)
            route(by_router, cur2, ev, "t:0", off, 100 + off)
        assert by_router == by_forward
        assert sum(len(v) for v in by_router.values()) >= len(events)


def test_a_routers_bucket_cache_lasts_from_one_run_to_the_next(monkeypatch: Any) -> None:
    from operators.contexts.managers import HashSpec

    cfg = config()
    routing = Routing(Topology.plan(cfg))
    asked: list[Any] = []
    real = HashSpec.partition_of

    def counted(self: HashSpec, type_name: str, event: Any, ctx: Any) -> Any:
        asked.append(event["k"])
        return real(self, type_name, event, ctx)

    monkeypatch.setattr(HashSpec, "partition_of", counted)
    cur, bundles = LaneCursor(), {}
    for run, keys in enumerate((["E1", "E2", "E1"], ["E2", "E1", "E3"])):
        route = routing.router("t", "T")  # as each run of a source partition asks for it
        for off, k in enumerate(keys):
            route(bundles, cur, {"k": k, "v": 1}, "t:0", run * 10 + off, 0)
    assert asked == ["E1", "E2", "E3"]
    assert [k for _, k in kinds_to(bundles, bucket("E1")) if _ == "event"] == ["E1"] * 3

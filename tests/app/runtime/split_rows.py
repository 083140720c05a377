"""Rows of split statements as the tests compare them: numbered as a worker numbers them
(``RowNumbering``), per step, per key (``context_partition``), or as a multiset."""

from __future__ import annotations

import json
import random
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.topology import Topology
from app.runtime.rows import RowNumbering


class Collector:
    """Rows of an Engine numbered as a worker numbers them, taken step by step."""

    def __init__(self, engine: Engine, topology: Topology) -> None:
        self.numbering = RowNumbering(engine, topology)
        self.rows: list[dict[str, Any]] = []
        engine.listeners.append(self._on)

    def _on(self, stmt: str, new: list, old: list, pid: Any) -> None:
        self.rows += self.numbering.rows(stmt, new, old, pid)

    def take(self) -> list[dict[str, Any]]:
        out, self.rows = self.rows, []
        return out


def by_key(rows: list[dict[str, Any]]) -> dict[str, list[tuple]]:
    """(stream, row as sorted JSON, time, id) of each context partition, in order."""
    out: dict[str, list[tuple]] = {}
    for r in rows:
        out.setdefault(r["context_partition"], []).append(
            (r["stream"], json.dumps(r["row"], sort_keys=True), r["time"], r["id"]))
    return out


def multiset(rows: list[dict[str, Any]]) -> Counter:
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


def embedded_rows(topology: Topology, steps: list[Any],
                  event_of: Callable[[Any], tuple[str, dict[str, Any]]]
                  ) -> dict[str, dict[str, list[tuple]]]:
    """Statement -> context partition -> (stream, row, time, id) of one Engine running
    the app's statements over ``steps`` (ints move the clock; ``event_of(step)`` gives
    the (type, event) of any other step)."""
    engine = Engine()
    for p in topology.plans:
        engine.deploy(p)
    rows = Collector(engine, topology)
    out: dict[str, dict[str, list[tuple]]] = {}
    for step in steps:
        if isinstance(step, int):
            engine.advance_time(step)
        else:
            engine.send(*event_of(step))
        for r in rows.take():
            out.setdefault(r["statement"], {}).setdefault(r["context_partition"], []).append(
                (r["stream"], r["row"], r["time"], r["id"]))
    return out


def step_rows(topology: Topology, name: str, steps: list[Any], split: bool,
              event_of: Callable[[Any], tuple[str, dict[str, Any]]]
              ) -> list[list[dict[str, Any]]]:
    """The numbered rows of each step, of one Engine (``split`` False) or of the split
    group ``name``'s N Engines composed as the router and the engine partitions do: an
    event to the Engine of ``crc32(key text) mod N``, and the statement's first update
    arming the timed output of the others (the router's touch, in the same epoch; a
    join's streams arm their windows apart, by the first event of each type)."""
    g = topology.groups[name]
    engines = [Engine() for _ in range(g.partitions if split else 1)]
    for e in engines:
        for p in (g.plans if split else topology.plans):
            e.deploy(p)
    rows = [Collector(e, topology) for e in engines]
    armed: set[str] = set()
    out = []
    for step in steps:
        if isinstance(step, int):
            for e in engines:
                e.advance_time(step)
        else:
            type_name, event = event_of(step)
            q = g.partition_of(type_name, event) if split else 0
            if q is not None:
                if split:
                    text = g.split.key_of_event(event, g._ctx, type_name)
                    assert q == zlib.crc32(text.encode()) % len(engines)
                    if g.arms and type_name not in armed and g.split.arms_with(
                            event, g._ctx, type_name):
                        armed.add(type_name)
                        for r, e in enumerate(engines):
                            if r != q:
                                e.arm_output(name, type_name)
                engines[q].send(type_name, event)
        out.append([r for c in rows for r in c.take()])
    return out


def split_app(name: str, epl: str, n: int, schemas: dict[str, dict[str, str]]) -> AppConfig:
    """An app of one statement ``name`` split over ``n`` engine partitions."""
    return AppConfig.from_dict({"app": "split", "schemas": schemas, "partitions": 3,
                                "statement_partitions": {name: n},
                                "statements": [{"name": name, "epl": epl}]})


def assert_split_matches(topology: Topology, name: str, steps: list[Any],
                         event_of: Callable[[Any], tuple[str, dict[str, Any]]],
                         min_keys: int = 2) -> None:
    """The split group ``name``'s N Engines against one over ``steps``: per step the same
    multiset of rows, each key's rows in the same order with the same ids, and each key's
    ids numbered from 1 (rows of ``min_keys`` keys or more, more than 20 in all)."""
    one = step_rows(topology, name, steps, False, event_of)
    got = step_rows(topology, name, steps, True, event_of)
    assert sum(map(len, one)) > 20
    for i, (a, b) in enumerate(zip(one, got, strict=True)):
        assert multiset(b) == multiset(a), f"step {i}: {steps[i]}"
        assert by_key(b) == by_key(a), f"step {i}: {steps[i]}"
    keys = by_key([r for rows in one for r in rows])
    assert len(keys) >= min_keys
    for key, lane in keys.items():
        assert [i for *_, i in lane] == [f"{name}/{key}/{k}" for k in range(1, len(lane) + 1)]


def differs_when_split(topology: Topology, name: str, steps: list[Any],
                       event_of: Callable[[Any], tuple[str, dict[str, Any]]]) -> bool:
    """Whether the split group's N Engines give other rows than one at some step."""
    one = step_rows(topology, name, steps, False, event_of)
    got = step_rows(topology, name, steps, True, event_of)
    return any(multiset(a) != multiset(b) for a, b in zip(one, got, strict=True))


TWO_TYPES = {
    "W": {"account": "string", "amount": "double", "n": "int"},
    "X": {"acct": "string", "v": "int"},
}
"""Two event types keyed by a string of other names (``account``, ``acct``)."""


def two_type_steps(seed: int, count: int = 500) -> list[Any]:
    """Clock moves (ints) and ``(type, event)`` of ``TWO_TYPES`` over 9 keys, some gaps
    long enough for windows to empty and timers to fire."""
    rnd = random.Random(seed)
    out: list[Any] = []
    t = 0
    for _ in range(count):
        if rnd.random() < 0.25:
            t += rnd.choice([1, 100, 250, 400, 999, 1000, 1600, 5000])
            out.append(t)
        key = f"K{rnd.randrange(9)}"
        if rnd.random() < 0.5:
            out.append(("W", {"account": key, "amount": float(rnd.randrange(40)),
                              "n": rnd.randrange(4)}))
        else:
            out.append(("X", {"acct": key, "v": rnd.randrange(5)}))
    out.append(t + 60_000)
    return out


def refusal(epl: str, schemas: dict[str, dict[str, str]]) -> str:
    """Why statement ``epl`` cannot be split (fails when it can)."""
    from app.epl.planner import plan_statement
    from app.runtime.catalog import Catalog
    from app.runtime.kafka.topology import split_of

    plan = plan_statement(Catalog.from_schemas(schemas), epl, "s")
    why = split_of(plan, [plan], schemas)
    assert isinstance(why, str), f"{epl} splits"
    return why

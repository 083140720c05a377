"""Rows of split statements as the tests compare them: numbered as a worker numbers them
(``RowNumbering``), per step, per key (``context_partition``), or as a multiset."""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

from app.runtime.engine import Engine
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
                    if g.arms and type_name not in armed and g.split.arms_with(event, g._ctx):
                        armed.add(type_name)
                        for r, e in enumerate(engines):
                            if r != q:
                                e.arm_output(name, type_name)
                engines[q].send(type_name, event)
        out.append([r for c in rows for r in c.take()])
    return out

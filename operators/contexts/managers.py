"""Context managers: which context partitions exist and where an event goes (000 §4.2).

A manager is a pure state machine like every operator.  The runtime asks it, for each
event, for lifecycle changes first (partitions ending, then starting) and then for the
partitions the event is routed to; clock moves can also end and start partitions.
Partition ids are ints (nested contexts: tuples); ``props(pid)`` gives ``context.*``.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from operators.base import Expr, PartitionCtx, Row, StateNamespace

Pid = Any


@dataclass(frozen=True)
class Change:
    """A partition starting or ending; ``exclude`` keeps the firing event out of it."""

    kind: str  # start | end
    pid: Pid
    exclude: bool = False


class Manager:
    """Base of all context managers."""

    name: str = ""

    def deploy(self, now_ms: int) -> list[Change]:
        """The context is created at ``now_ms`` (``@now``, preallocate, crontab inside)."""
        return []

    def on_event(self, type_name: str, event: Row, now_ms: int) -> list[Change]:
        return []

    def route(self, type_name: str, event: Row, now_ms: int) -> list[Pid]:
        return []

    def on_time(self, now_ms: int) -> list[Change]:
        return []

    def next_timer(self) -> int | None:
        return None

    def props(self, pid: Pid) -> dict[str, Any]:
        return {"name": self.name, "id": pid}

    def live(self) -> list[Pid]:
        """Partitions currently alive, in creation order."""
        return []


# -- keyed ------------------------------------------------------------------

@dataclass(frozen=True)
class KeyedItem:
    """``p1 and p2 from Type(filter)`` of a keyed context."""

    type_name: str
    keys: tuple[Expr, ...]
    filter: Expr | None = None
    key_texts: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class KeyedSpec:
    """``partition by`` (000 §4.2.2)."""

    name: str
    items: tuple[KeyedItem, ...]

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> KeyedManager:
        return KeyedManager(self, state, ctx)

    def describe(self) -> str:
        return "keyed by " + ", ".join(
            f"{'+'.join(i.key_texts)} from {i.type_name}" for i in self.items)

    def types(self) -> frozenset[str]:
        return frozenset(i.type_name for i in self.items)


class KeyedManager(Manager):
    """One partition per distinct key value; allocated on first use (ids sequential)."""

    def __init__(self, spec: KeyedSpec, state: StateNamespace, ctx: PartitionCtx) -> None:
        self.spec = spec
        self.name = spec.name
        self.ctx = ctx
        self.state = state
        self.by_type = {i.type_name: i for i in spec.items}
        self.pids: dict[Any, int] = {}
        self.keys: dict[int, list] = {}
        for k, v in state.items():
            if isinstance(k, str):
                continue
            self.pids[_hashable(v[1])] = v[0]
            self.keys[v[0]] = v[1]
        self.next_id = state.get("next", 0)

    def key_of(self, type_name: str, event: Row) -> list | None:
        item = self.by_type.get(type_name)
        if item is None:
            return None
        ctx = self.ctx
        if item.filter is not None and not item.filter(event, ctx):
            return None
        return [k(event, ctx) for k in item.keys]

    def route(self, type_name: str, event: Row, now_ms: int) -> list[Pid]:
        key = self.key_of(type_name, event)
        if key is None:
            return []
        hk = key[0] if len(key) == 1 and isinstance(key[0], str) else _hashable(key)
        pid = self.pids.get(hk)
        if pid is None:
            pid = self.next_id
            self.next_id += 1
            self.pids[hk] = pid
            self.keys[pid] = key
            self.state.put(("k", json.dumps(key)), [pid, key])
            self.state.put("next", self.next_id)
        return [pid]

    def props(self, pid: Pid) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "id": pid}
        for i, v in enumerate(self.keys.get(pid, ()), 1):
            out[f"key{i}"] = v
        return out

    def live(self) -> list[Pid]:
        return sorted(self.keys)

    def key(self, pid: Pid) -> list | None:
        """The key values of a partition (None if it was never allocated)."""
        return self.keys.get(pid)


def key_text(key: list) -> str:
    """The text that identifies a keyed partition: the manager's own key identity."""
    return _hashable(key)


def _hashable(key: list) -> Any:
    """In-memory map key of a context key (a lone string is used as is)."""
    if len(key) == 1 and isinstance(key[0], str):
        return key[0]
    return json.dumps(key)


# -- hash -------------------------------------------------------------------

def java_hash_code(value: Any) -> int:
    """Java's ``hashCode`` of a string or integer (000 §4.2.3 ``hash_code``)."""
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        return (value ^ (value >> 32)) & 0xFFFFFFFF if not -(1 << 31) <= value < (1 << 31) \
            else value
    h = 0
    for ch in str(value):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def crc32_of(value: Any) -> int:
    """CRC-32 of the value's string bytes (000 §4.2.3 ``consistent_hash_crc32``)."""
    return zlib.crc32(str(value).encode())


@dataclass(frozen=True)
class HashItem:
    """``consistent_hash_crc32(expr) from Type(filter)``."""

    type_name: str
    function: str
    expr: Expr
    filter: Expr | None = None


@dataclass(frozen=True)
class HashSpec:
    """``coalesce by ... granularity N [preallocate]`` (000 §4.2.3)."""

    name: str
    items: tuple[HashItem, ...]
    granularity: int
    preallocate: bool = False
    owned: int | None = None
    """Kafka mode: the one bucket this engine partition holds (its Kafka partition).
    Its context partition id is then the bucket, preallocated or not (ARCHITECTURE.md:
    context partition id = Kafka partition), and ``preallocate`` allocates only it."""

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> HashManager:
        return HashManager(self, state, ctx)

    def describe(self) -> str:
        return (f"hash granularity {self.granularity}"
                + (" preallocate" if self.preallocate else "") + " over "
                + ", ".join(f"{i.function} from {i.type_name}" for i in self.items))

    def types(self) -> frozenset[str]:
        return frozenset(i.type_name for i in self.items)

    def partition_of(self, type_name: str, event: Row, ctx: PartitionCtx) -> int | None:
        """The context partition id, which is also the Kafka partition of the record."""
        for item in self.items:
            if item.type_name != type_name:
                continue
            if item.filter is not None and not item.filter(event, ctx):
                return None
            v = item.expr(event, ctx)
            h = crc32_of(v) if item.function.lower() == "consistent_hash_crc32" \
                else java_hash_code(v)
            return h % self.granularity
        return None


class HashManager(Manager):
    """Partition per hash bucket; ids are the buckets when preallocated, else sequential
    in allocation order (reference product behaviour)."""

    def __init__(self, spec: HashSpec, state: StateNamespace, ctx: PartitionCtx) -> None:
        self.spec = spec
        self.name = spec.name
        self.ctx = ctx
        self.state = state
        self.ids: dict[int, int] = {int(b): i for b, i in (state.get("ids") or [])}

    def _save(self) -> None:
        self.state.put("ids", sorted(self.ids.items()))

    def deploy(self, now_ms: int) -> list[Change]:
        if self.spec.preallocate and not self.ids:
            owned = self.spec.owned
            buckets = range(self.spec.granularity) if owned is None else [owned]
            self.ids = {b: b for b in buckets}
            self._save()
            return [Change("start", p) for p in buckets]
        return []

    def route(self, type_name: str, event: Row, now_ms: int) -> list[Pid]:
        bucket = self.spec.partition_of(type_name, event, self.ctx)
        if bucket is None:
            return []
        pid = self.ids.get(bucket)
        if pid is None:
            pid = bucket if self.spec.owned is not None else len(self.ids)
            self.ids[bucket] = pid
            self._save()
        return [pid]

    def live(self) -> list[Pid]:
        return sorted(self.ids.values())


# -- category ---------------------------------------------------------------

@dataclass(frozen=True)
class CategorySpec:
    """``group <expr> as label, ... from Type(filter)`` (000 §4.2.4)."""

    name: str
    type_name: str
    groups: tuple[tuple[str, Expr], ...]
    filter: Expr | None = None

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> CategoryManager:
        return CategoryManager(self, ctx)

    def describe(self) -> str:
        return f"category over {self.type_name}: " + ", ".join(g[0] for g in self.groups)

    def types(self) -> frozenset[str]:
        return frozenset({self.type_name})


class CategoryManager(Manager):
    """Every category exists from the start; an event may fall into several."""

    def __init__(self, spec: CategorySpec, ctx: PartitionCtx) -> None:
        self.spec = spec
        self.name = spec.name
        self.ctx = ctx

    def route(self, type_name: str, event: Row, now_ms: int) -> list[Pid]:
        s = self.spec
        if type_name != s.type_name:
            return []
        ctx = self.ctx
        if s.filter is not None and not s.filter(event, ctx):
            return []
        return [i for i, (_, pred) in enumerate(s.groups) if pred(event, ctx)]

    def props(self, pid: Pid) -> dict[str, Any]:
        return {"name": self.name, "id": pid, "label": self.spec.groups[pid][0]}

    def live(self) -> list[Pid]:
        return list(range(len(self.spec.groups)))

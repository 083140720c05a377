"""Context managers: which context partitions exist and where an event goes (Esper ref. 4.2).

A manager is a pure state machine like every operator.  The runtime asks it, for each
event, for lifecycle changes first (partitions ending, then starting) and then for the
partitions the event is routed to; clock moves can also end and start partitions.
Partition ids are ints (nested contexts: tuples); ``props(pid)`` gives ``context.*``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from operators.base import Expr, PartitionCtx, Row, StateNamespace
from operators.json_text import array_text

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
    loaded_next: int | None = None
    """The first partition id allocated since the manager read its state (ids only
    grow), where the manager numbers its partitions so; None where it does not."""

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

    def new_since_load(self, pid: Pid) -> bool:
        """Whether ``pid`` was allocated since this manager read its state, so that no
        state of it can be stored (False where that is not known)."""
        first = self.loaded_next
        return first is not None and type(pid) is int and pid >= first


# -- keyed ------------------------------------------------------------------

@dataclass(frozen=True)
class KeyedItem:
    """``p1 and p2 from Type(filter) [as alias]`` of a keyed context."""

    type_name: str
    keys: tuple[Expr, ...]
    filter: Expr | None = None
    key_texts: tuple[str, ...] = field(default=(), compare=False)
    alias: str | None = None


@dataclass(frozen=True)
class KeyedSpec:
    """``partition by ... [initiated by ...] [terminated by ...]`` (Esper ref. 4.2.2).

    ``initiated``: filter conditions (``CondFilterSpec``) of which one must match an event
    for its key's partition to start; ``terminated``: the condition that ends one key's
    partition (Esper's keyed segmented context with initiation and termination)."""

    name: str
    items: tuple[KeyedItem, ...]
    initiated: tuple[Any, ...] = ()
    terminated: Any = None

    @property
    def lifecycle(self) -> bool:
        """Partitions start on conditions, end, or carry their starting event."""
        return bool(self.initiated) or self.terminated is not None or any(
            i.alias for i in self.items)

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> Manager:
        if self.lifecycle:
            return KeyedLifecycleManager(self, state, ctx)
        return KeyedManager(self, state, ctx)

    def describe(self) -> str:
        out = "keyed by " + ", ".join(
            f"{'+'.join(i.key_texts)} from {i.type_name}" for i in self.items)
        if self.initiated:
            out += " initiated by " + ", ".join(c.describe() for c in self.initiated)
        if self.terminated is not None:
            out += " terminated by " + self.terminated.describe()
        return out

    def types(self) -> frozenset[str]:
        out = frozenset(i.type_name for i in self.items)
        if self.terminated is not None:
            out |= self.terminated.types()
        return out

    def unkeyed_types(self) -> frozenset[str]:
        """Event types of the terminating condition not listed in ``partition by``: such
        an event ends the partitions of every key."""
        if self.terminated is None:
            return frozenset()
        return self.terminated.types() - frozenset(i.type_name for i in self.items)

    def aliases(self) -> tuple[str, ...]:
        """Names of the starting event (``context.<name>``), in declaration order."""
        names = [i.alias for i in self.items if i.alias]
        names += [c.alias for c in self.initiated if c.alias]
        return tuple(names)


class KeyedManager(Manager):
    """One partition per distinct key value; allocated on first use (ids sequential)."""

    on_new: Any = None
    """Called with a partition's id as its key allocates it (the runtime starts the
    statements that must run from the partition's start)."""

    def __init__(self, spec: KeyedSpec, state: StateNamespace, ctx: PartitionCtx) -> None:
        self.spec = spec
        self.name = spec.name
        self.ctx = ctx
        self.state = state
        self.by_type = {i.type_name: i for i in spec.items}
        self.pids: dict[Any, int] = {}
        self.keys: dict[int, list] = {}
        values = getattr(state, "values", None)
        # [pid, key] of each key (not "next": the id the next key gets); comprehensions,
        # a restore reads 10^6 of them
        entries = [v for v in (values() if values is not None
                               else (v for _, v in state.items())) if type(v) is list]
        self.keys = dict(entries)
        self.pids = {k[0] if len(k) == 1 and type(k[0]) is str else _hashable(k): pid
                     for pid, k in entries}
        self.next_id = state.get("next", 0)
        self.loaded_next = self.next_id

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
            self.state.put(("k", array_text(key)), [pid, key])
            self.state.put("next", self.next_id)
            if self.on_new is not None:
                self.on_new(pid)
        return [pid]

    def props(self, pid: Pid) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "id": pid}
        for i, v in enumerate(self.keys.get(pid, ()), 1):
            out[f"key{i}"] = v
        return out

    def live(self) -> list[Pid]:
        n = self.next_id
        if len(self.keys) == n:  # ids 0..n-1, each once: no sort (a restore of 10^6 keys)
            return list(range(n))
        return sorted(self.keys)

    def key(self, pid: Pid) -> list | None:
        """The key values of a partition (None if it was never allocated)."""
        return self.keys.get(pid)


class KeyedLifecycleManager(Manager):
    """Keyed partitions that start on an initiating filter (or any event of their key)
    and end on a terminating condition, each key at most one partition at a time.

    Esper's keyed segmented context with initiation and termination: the terminating
    condition is armed per partition when it starts, so the starting event never ends
    it; its filters of an event type listed in ``partition by`` match only events of the
    partition's key (computed without the item's filter), those of other types end every
    key's partition.  The event that ends a partition neither counts in it nor starts a
    new one; the next event of the key does.  The starting event is ``context.<alias>``.
    """

    def __init__(self, spec: KeyedSpec, state: StateNamespace, ctx: PartitionCtx) -> None:
        self.spec = spec
        self.name = spec.name
        self.ctx = ctx
        self.state = state
        self.by_type = {i.type_name: i for i in spec.items}
        self.has_end_condition = spec.terminated is not None or bool(spec.initiated)
        """Partitions start or end on conditions (``@Priority`` may order statements first)."""
        self.term = spec.terminated
        if self.term is None:
            from operators.contexts.conditions import CondNeverSpec

            self.term = CondNeverSpec()
        self.pids: dict[Any, int] = {}
        self.keys: dict[int, list] = {}
        self.conds: dict[int, Any] = {}
        self.pprops: dict[int, dict[str, Any]] = {}
        self.ended: dict[int, list] = {}
        """Keys of the partitions the last lifecycle call ended (rows flushed at their end
        still name their key)."""
        self.next_id = state.get("next", 0)
        for k, rec in sorted(((k, v) for k, v in state.items() if k != "next"),
                             key=lambda kv: kv[0][1]):
            pid = k[1]
            key = rec["key"]
            self.pids[_hashable(key)] = pid
            self.keys[pid] = key
            self.pprops[pid] = rec["props"]
            self.conds[pid] = self.term.arm(state.child(("t", pid)), ctx, rec["at"],
                                            rec["tags"], rec["cond"])

    def _key(self, item: KeyedItem, event: Row) -> list:
        return [k(event, self.ctx) for k in item.keys]

    def _save(self, pid: int, at: int, tags: dict[str, Any]) -> None:
        self.state.put(("p", pid), {"key": self.keys[pid], "props": self.pprops[pid],
                                    "tags": tags, "at": at, "cond": self.conds[pid].dump()})

    def _end(self, pid: int) -> Change:
        key = self.keys.pop(pid)
        self.pids.pop(_hashable(key), None)
        self.conds.pop(pid)
        self.pprops.pop(pid)
        self.ended[pid] = key
        self.state.child(("t", pid)).clear()
        self.state.delete(("p", pid))
        return Change("end", pid)

    def _start(self, key: list, alias: str | None, event: Row, now_ms: int) -> Change:
        pid = self.next_id
        self.next_id += 1
        self.state.put("next", self.next_id)
        tags: dict[str, Any] = dict.fromkeys(self.spec.aliases())
        if alias:
            tags[alias] = event
        self.pids[_hashable(key)] = pid
        self.keys[pid] = key
        self.pprops[pid] = {"name": self.name, "id": pid,
                            **{f"key{i}": v for i, v in enumerate(key, 1)}, **tags}
        self.conds[pid] = self.term.arm(self.state.child(("t", pid)), self.ctx, now_ms, tags)
        self._save(pid, now_ms, tags)
        return Change("start", pid)

    def _initiator(self, type_name: str, event: Row) -> tuple[bool, str | None]:
        """Whether the event may start its key's partition, and the name it gets."""
        item = self.by_type[type_name]
        if not self.spec.initiated:
            if item.filter is not None and not item.filter(event, self.ctx):
                return False, None
            return True, item.alias
        for cond in self.spec.initiated:
            if cond.type_name != type_name:
                continue
            if cond.predicate is None or cond.predicate((event, {}), self.ctx):
                return True, cond.alias
        return False, None

    def on_event(self, type_name: str, event: Row, now_ms: int) -> list[Change]:
        self.ended.clear()
        changes: list[Change] = []
        item = self.by_type.get(type_name)
        key = self._key(item, event) if item is not None else None
        hk = _hashable(key) if key is not None else None
        if self.conds and type_name in self.term.types():
            if item is not None:  # correlated: only the partition of the event's key
                pid = self.pids.get(hk)
                targets = [pid] if pid is not None else []
            else:
                targets = list(self.conds)
            for pid in targets:
                if self.conds[pid].on_event(type_name, event, now_ms) is not None:
                    changes.append(self._end(pid))
                    if item is not None:
                        return changes  # the ending event starts no partition
        if item is not None and hk not in self.pids:
            ok, alias = self._initiator(type_name, event)
            if ok:
                changes.append(self._start(key, alias, event, now_ms))
        return changes

    def on_time(self, now_ms: int) -> list[Change]:
        self.ended.clear()
        changes: list[Change] = []
        for pid, cond in list(self.conds.items()):
            t = cond.next_timer()
            if t is not None and t <= now_ms and cond.on_time(now_ms) is not None:
                changes.append(self._end(pid))
        return changes

    def next_timer(self) -> int | None:
        due = [d for d in (c.next_timer() for c in self.conds.values()) if d is not None]
        return min(due) if due else None

    def route(self, type_name: str, event: Row, now_ms: int) -> list[Pid]:
        item = self.by_type.get(type_name)
        if item is None:
            return []
        if item.filter is not None and not item.filter(event, self.ctx):
            return []
        pid = self.pids.get(_hashable(self._key(item, event)))
        return [pid] if pid is not None else []

    def props(self, pid: Pid) -> dict[str, Any]:
        return self.pprops.get(pid) or {"name": self.name, "id": pid}

    def live(self) -> list[Pid]:
        return sorted(self.keys)

    def key(self, pid: Pid) -> list | None:
        """The key values of a partition, live or just ended (None if unknown)."""
        key = self.keys.get(pid)
        return key if key is not None else self.ended.get(pid)


def key_text(key: list) -> str:
    """The text that identifies a keyed partition: the manager's own key identity."""
    return _hashable(key)


def _hashable(key: list) -> Any:
    """In-memory map key of a context key (a lone string is used as is)."""
    if len(key) == 1 and isinstance(key[0], str):
        return key[0]
    return array_text(key)


# -- hash -------------------------------------------------------------------

def java_hash_code(value: Any) -> int:
    """Java's ``hashCode`` of a string or integer (Esper ref. 4.2.3 ``hash_code``)."""
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(1 << 31) <= value < (1 << 31):
            return value
        h = (value ^ ((value & 0xFFFFFFFFFFFFFFFF) >> 32)) & 0xFFFFFFFF  # Long.hashCode
        return h - (1 << 32) if h >= (1 << 31) else h
    h = 0
    data = str(value).encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):  # Java hashes UTF-16 code units
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def crc32_of(value: Any) -> int:
    """CRC-32 of the value's string bytes (Esper ref. 4.2.3 ``consistent_hash_crc32``)."""
    return zlib.crc32(str(value).encode())


@dataclass(frozen=True)
class HashItem:
    """``consistent_hash_crc32(expr) from Type(filter)``."""

    type_name: str
    function: str
    expr: Expr
    filter: Expr | None = None
    user: bool = False
    """``expr`` is a user single-row function's call whose integer result is the hash
    code (Esper ref. 4.2.3 hash segmented context: the hash function may be a plug-in
    single-row function)."""


@dataclass(frozen=True)
class HashSpec:
    """``coalesce by ... granularity N [preallocate]`` (Esper ref. 4.2.3 Hash Segmented Context)."""

    name: str
    items: tuple[HashItem, ...]
    granularity: int
    preallocate: bool = False
    owned: int | None = None
    """Kafka mode: the one bucket this engine partition holds (its Kafka partition).
    With ``preallocate`` its context partition id is the bucket and only it is
    allocated; without, its id is its rank in the order of first use of all buckets,
    which the engine partition learns from the routing stage (``HashManager.first_use``)."""

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
            if v is None:  # the reference product puts a null into bucket 0
                return 0
            if item.user:
                # the returned number's Java intValue() is the hash code
                h = ((int(v) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
            elif item.function.lower() == "consistent_hash_crc32":
                h = crc32_of(v)
            else:
                h = java_hash_code(v)
            # Java's remainder keeps the sign of a negative hash code; the reference
            # product then takes its absolute value.
            return abs(h) % self.granularity
        return None


class WrongBucket(ValueError):
    """An event reached the engine partition of a bucket other than its own (Kafka mode:
    a hash context read from source partitions that are not partitioned by its hash)."""


def wrong_bucket(spec: HashSpec, type_name: str, bucket: int, partition: int) -> str:
    """Why an event of ``bucket`` does not belong to the engine partition of bucket
    ``partition`` (what its dead letter says)."""
    return (f"hash context '{spec.name}': this {type_name} event is in bucket {bucket} but "
            f"came to the engine partition of bucket {partition}; a source topic read in "
            "place must put bucket b in partition b (record key = the hashed value, "
            f"librdkafka's default partitioner, {spec.granularity} partitions)")


class HashManager(Manager):
    """Partition per hash bucket; ids are the buckets when preallocated, else sequential
    in order of first use (reference product behaviour).

    Kafka mode (``spec.owned``): the manager holds one bucket's partition.  Without
    ``preallocate`` its id counts the buckets used before it anywhere; the engine
    partition calls ``first_use`` with every bucket's first use in the merged event order
    (the routing stage sends it to every engine partition of the context), so all engine
    partitions number alike and as one embedded Engine does."""

    def __init__(self, spec: HashSpec, state: StateNamespace, ctx: PartitionCtx) -> None:
        self.spec = spec
        self.name = spec.name
        self.ctx = ctx
        self.state = state
        self.ids: dict[int, int] = {int(b): i for b, i in (state.get("ids") or [])}
        self.loaded_next = max(self.ids.values(), default=-1) + 1
        """Above the ids the state held: an id allocated since is the count of ids then
        (or a bucket, all preallocated at once into an empty state), an id from this
        one on is new."""
        here = state.get("here")
        if here is None and spec.owned in self.ids:
            here = [spec.owned]  # a state written before the ids followed first use
        self.here: set[int] = {int(b) for b in (here or [])}
        """Kafka, by first use: the buckets whose partitions this engine holds (``ids``
        also numbers buckets held elsewhere)."""

    @property
    def by_first_use(self) -> bool:
        """Kafka mode without preallocate: ids come from ``first_use``."""
        return self.spec.owned is not None and not self.spec.preallocate

    @property
    def numbered(self) -> bool:
        """Whether the owned bucket has its id (later first uses cannot change it)."""
        return self.spec.owned in self.ids

    def _save(self) -> None:
        self.state.put("ids", sorted(self.ids.items()))

    def first_use(self, buckets: Iterable[int]) -> None:
        """Buckets in the order of their first use (known ones are passed over), up to
        the owned bucket; once it has its id nothing changes any more."""
        owned = self.spec.owned
        if owned in self.ids:
            return
        size = len(self.ids)
        for b in buckets:
            if b not in self.ids:
                self.ids[b] = len(self.ids)
            if b == owned:
                break
        if len(self.ids) != size:
            self._save()
            self.state.put("here", sorted(self.here))  # also says: not an older state

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
        owned = self.spec.owned
        if owned is not None and bucket != owned:
            raise WrongBucket(wrong_bucket(self.spec, type_name, bucket, owned))
        pid = self.ids.get(bucket)
        if pid is None:
            pid = bucket if self.spec.preallocate else len(self.ids)
            self.ids[bucket] = pid
            self._save()
        if self.by_first_use and bucket not in self.here:
            self.here.add(bucket)
            self.state.put("here", sorted(self.here))
        return [pid]

    def live(self) -> list[Pid]:
        if self.by_first_use:
            return sorted(self.ids[b] for b in self.here)
        return sorted(self.ids.values())


# -- category ---------------------------------------------------------------

@dataclass(frozen=True)
class CategorySpec:
    """``group <expr> as label, ... from Type(filter)`` (Esper ref. 4.2.4)."""

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

    def categories(self, event: Row) -> list[Pid]:
        """The categories whose predicate an event of any type satisfies."""
        ctx = self.ctx
        return [i for i, (_, pred) in enumerate(self.spec.groups) if pred(event, ctx)]

    def props(self, pid: Pid) -> dict[str, Any]:
        return {"name": self.name, "id": pid, "label": self.spec.groups[pid][0]}

    def live(self) -> list[Pid]:
        return list(range(len(self.spec.groups)))

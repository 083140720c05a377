"""Nested contexts (Esper ref. 4.3): the outer context controls the lifecycle of the inner one.

Each outer partition owns its own inner manager, created when the outer partition starts
and dropped (with every inner partition) when it ends, so a keyed context nested in a
temporal one holds no state outside the temporal partition.  Partition ids are tuples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from operators.base import PartitionCtx, Row, StateNamespace
from operators.contexts.managers import (
    CategorySpec,
    Change,
    HashManager,
    HashSpec,
    KeyedLifecycleManager,
    KeyedManager,
    KeyedSpec,
    Manager,
    Pid,
)
from operators.contexts.temporal import NonOverlappingSpec
from operators.windows.java_order import INITIAL_CAPACITY, LOAD_FACTOR, hashmap_order, java_hash


@dataclass(frozen=True)
class NestedSpec:
    """``create context X context A ..., context B ...``."""

    name: str
    outer: Any
    inner: Any

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> NestedManager:
        return NestedManager(self, state, ctx)

    def describe(self) -> str:
        return f"nested [{self.outer.name}: {self.outer.describe()}] > " \
               f"[{self.inner.name}: {self.inner.describe()}]"

    def types(self) -> frozenset[str]:
        return self.outer.types() | self.inner.types()


class NestedManager(Manager):
    """Outer partitions each hold an inner manager.

    An outer partition starts when its outer context says so: a change of a temporal
    context, or the first event of a key of a keyed or hash context (which allocates on
    routing), or the deployment for a category context (every category exists from the
    start).  The inner manager is then deployed at once (``@now``, preallocate), and the
    event that started the outer partition is offered to it like any later event: it may
    initiate an inner partition and counts in the inner partitions it is routed to, except
    in an inner category context, which, as in Esper, does not see that event.

    ``context.id`` (and the inner context's ``id``) number the nested partitions over the
    whole nested context in allocation order, as Esper does (Esper ref. 4.3 Context Nesting)."""

    @property
    def has_end_condition(self) -> bool:
        """Partitions end on conditions of a temporal context at some level."""
        return _nested_ends(self.spec)

    def __init__(self, spec: NestedSpec, state: StateNamespace, ctx: PartitionCtx) -> None:
        self.spec = spec
        self.name = spec.name
        self.state = state
        self.ctx = ctx
        self.outer = spec.outer.build(state.child("outer"), ctx)
        self.inner: dict[Pid, Manager] = {}
        self._fresh: set[Pid] = set()
        """Outer partitions the current event started."""
        self._born: set[Pid] = set()
        """Inner partitions the current event started (``route``)."""
        self._keyed_inner = isinstance(spec.inner, KeyedSpec)
        self._mapped_inner = self._keyed_inner or (isinstance(spec.inner, HashSpec)
                                                   and not spec.inner.preallocate)
        """Esper keeps the inner partitions in one map over all outer partitions."""
        self._inner_category = isinstance(spec.inner, CategorySpec)
        self._segmented = isinstance(spec.outer, KeyedSpec | HashSpec | CategorySpec)
        self._outer_types = (frozenset(i.type_name for i in spec.outer.items)
                             if isinstance(spec.outer, KeyedSpec) else spec.outer.types())
        """Event types the segmented outer context assigns to partitions (a keyed
        context's terminating types not listed in partition by reach every partition)."""
        self.seq: dict[Pid, int] = {}
        self.next_seq: int = state.get("next", 0)
        self.key_table: int = state.get("ktable", INITIAL_CAPACITY)
        """Buckets of the map Esper keeps an inner keyed context's partitions in, over
        every outer partition (it grows and never shrinks): ``_map_order``."""
        for k, v in state.items():
            if isinstance(k, list | tuple) and k and k[0] == "n":
                self.seq[_tup(v[0])] = v[1]
        self._moves = isinstance(spec.inner, NonOverlappingSpec)
        """An inner non-overlapping context's outer partitions are offered events in the
        order their inner context last started or ended (``_moved``)."""
        self.stamp: int = state.get("stamp", 0)
        stamps: dict[Any, int] = {}
        for k, v in state.items():
            if isinstance(k, list | tuple) and k and k[0] == "o":
                stamps[k[1]] = v
        for opid in sorted(self.outer.live(), key=lambda o: stamps.get(_enc(o), -1)):
            # an outer partition that exists when the manager is built: a rebuilt runtime,
            # or a category (deployed with its inner manager in ``deploy``)
            self.inner[opid] = spec.inner.build(state.child(("inner", _enc(opid))), ctx)
        self.inner_live = (sum(len(m.live()) for m in self.inner.values())
                           if self._mapped_inner else 0)
        """Inner partitions live over every outer partition (keyed or hash inner)."""

    def _wrap(self, opid: Pid, changes: list[Change]) -> list[Change]:
        """Inner changes as nested ones; numbers the partitions that start."""
        out = [Change(c.kind, (opid, c.pid), c.exclude) for c in changes]
        for c in out:
            if c.kind == "start":
                self._number(c.pid)
                self._born.add(c.pid)
            else:
                self._unnumber(c.pid)
        if out and self._moves:
            self._moved(opid)
        if out and self._mapped_inner:
            self.inner_live += sum(1 if c.kind == "start" else -1 for c in out)
            self._grow_table()
        return out

    def _grow_table(self) -> None:
        """Esper's map of the inner partitions doubles past 3/4 full (``key_table``)."""
        table = self.key_table
        while self.inner_live > table * LOAD_FACTOR:
            table *= 2
        if table != self.key_table:
            self.key_table = table
            self.state.put("ktable", table)

    def _moved(self, opid: Pid) -> None:
        """An outer partition's inner non-overlapping context started or ended: Esper
        registers its next condition's filter anew, behind those of the other outer
        partitions, and its filter service offers an event to them in that order (so
        the partitions a start event begins are numbered in it)."""
        if opid in self.inner:
            self.inner[opid] = self.inner.pop(opid)
        self.stamp += 1
        self.state.put("stamp", self.stamp)
        self.state.put(("o", _enc(opid)), self.stamp)

    def end_order(self, path: tuple[int, ...] | None) -> list[Pid]:
        """Every live partition, in the order Esper ends them when the partition above
        this context, at ``path``, ends: its own partitions in ``_map_order``, each
        followed by its inner ones (depth first, as Esper deactivates its controllers)."""
        out: list[Pid] = []
        for opid in _map_order(self.outer, path, self.key_table):
            inner = self.inner.get(opid)
            if inner is not None:
                sub = path + (opid,) if path is not None and isinstance(opid, int) else None
                out += [(opid, p) for p in _end_order(inner, sub, self.key_table)]
        return out

    def _number(self, pid: Pid) -> int:
        n = self.seq.get(pid)
        if n is None:
            n = self.seq[pid] = self.next_seq
            self.next_seq += 1
            self.state.put("next", self.next_seq)
            self.state.put(("n", _enc(pid)), [pid, n])
        return n

    def context_id(self, pid: Pid) -> int | None:
        """``context.id`` of a live nested partition (Esper's agent instance id), None
        for one not numbered."""
        return self.seq.get(pid)

    def _unnumber(self, pid: Pid) -> None:
        if self.seq.pop(pid, None) is not None:
            self.state.delete(("n", _enc(pid)))

    def _start_outer(self, opid: Pid, now_ms: int) -> list[Change]:
        inner = self.spec.inner.build(self.state.child(("inner", _enc(opid))), self.ctx)
        self.inner[opid] = inner
        if self._moves:
            self._moved(opid)  # its start condition is armed now, behind the others
        return self._deploy_inner(opid, inner, now_ms)

    def _deploy_inner(self, opid: Pid, inner: Manager, now_ms: int) -> list[Change]:
        out = self._wrap(opid, inner.deploy(now_ms))
        if self._inner_category:
            for ipid in inner.live():  # every category exists from the start
                self._number((opid, ipid))
                # started with its outer partition: one that no event reaches still
                # posts its rows when it ends (Esper ref. 4.5, output when terminated)
                out.append(Change("start", (opid, ipid)))
        return out

    def _apply_outer(self, changes: list[Change], now_ms: int) -> list[Change]:
        out: list[Change] = []
        for ch in changes:
            if ch.kind == "end":
                inner = self.inner.pop(ch.pid, None)
                if inner is not None:
                    path = (ch.pid,) if isinstance(ch.pid, int) else None
                    ends = [Change("end", (ch.pid, p))
                            for p in _end_order(inner, path, self.key_table)]
                    out += ends
                    self.inner_live -= len(ends)
                    for c in ends:
                        self._unnumber(c.pid)
                self.state.child(("inner", _enc(ch.pid))).clear()
                self.state.delete(("o", _enc(ch.pid)))
            else:
                out += self._start_outer(ch.pid, now_ms)
                self._fresh.add(ch.pid)
        return out

    def deploy(self, now_ms: int) -> list[Change]:
        out: list[Change] = []
        for opid, inner in list(self.inner.items()):
            # built with the manager: a category's partitions (a restored inner manager
            # ignores this, as every restored manager does)
            out += self._deploy_inner(opid, inner, now_ms)
        return out + self._apply_outer(self.outer.deploy(now_ms), now_ms)

    def on_event(self, type_name: str, event: Row, now_ms: int) -> list[Change]:
        self._fresh.clear()
        self._born.clear()
        out = self._apply_outer(self.outer.on_event(type_name, event, now_ms), now_ms)
        routed = self.outer.route(type_name, event, now_ms)
        for opid in routed:
            if opid not in self.inner:  # a key's (or bucket's) first event
                out += self._start_outer(opid, now_ms)
                self._fresh.add(opid)
        # an event the segmented outer context assigns goes to its partitions' inner
        # contexts only: their conditions' filters are narrowed to the outer partition
        # as the statements' are (Esper ref. 4.3 Context Nesting)
        only = set(routed) if self._segmented and type_name in self._outer_types else None
        for opid, inner in list(self.inner.items()):
            if (opid in self._fresh and self._inner_category) or (
                    only is not None and opid not in only):
                continue
            out += self._wrap(opid, inner.on_event(type_name, event, now_ms))
        return out

    def on_time(self, now_ms: int) -> list[Change]:
        self._fresh.clear()
        out: list[Change] = []
        t = self.outer.next_timer()
        if t is not None and t <= now_ms:
            out += self._apply_outer(self.outer.on_time(now_ms), now_ms)
        due: list[tuple[Pid, Change]] = []
        for opid, inner in list(self.inner.items()):
            t = inner.next_timer()
            if t is not None and t <= now_ms:
                due += [(opid, c) for c in inner.on_time(now_ms)]
        if len(due) > 1:
            # inner partitions that end at one time end in context.id order over all
            # outer partitions (Esper fires the schedule in the order it was set), before
            # any that start then
            seq = self.seq
            due.sort(key=lambda oc: (0, seq.get((oc[0], oc[1].pid), 0)) if oc[1].kind == "end"
                     else (1, 0))
        for opid, c in due:
            out += self._wrap(opid, [c])
        return out

    def next_timer(self) -> int | None:
        due = [self.outer.next_timer(), *(m.next_timer() for m in self.inner.values())]
        due2 = [d for d in due if d is not None]
        return min(due2) if due2 else None

    def route(self, type_name: str, event: Row, now_ms: int) -> list[Pid]:
        born: list[Pid] = []
        out: list[Pid] = []
        allocated = 0
        for opid in self.outer.route(type_name, event, now_ms):
            inner = self.inner.get(opid)
            if inner is None or (opid in self._fresh and self._inner_category):
                continue
            first_new = getattr(inner, "next_id", None) if self._keyed_inner else None
            for p in inner.route(type_name, event, now_ms):
                pid = (opid, p)
                if first_new is not None and p >= first_new:
                    born.append(pid)
                    allocated += 1
                elif pid in self._born:
                    born.append(pid)
                else:
                    out.append(pid)
        if allocated and self._mapped_inner:
            self.inner_live += allocated  # a keyed inner context allocates as it routes
            self._grow_table()
        # a key's partition that this event allocates takes it as it is allocated, before
        # the filter service hands it to the partitions that were there (Esper ref. 4.3:
        # each outer partition has its own keyed controller)
        return born + out if born else out

    def props(self, pid: Pid) -> dict[str, Any]:
        opid, ipid = pid
        outer = self.outer.props(opid)
        inner_mgr = self.inner.get(opid)
        inner = dict(inner_mgr.props(ipid)) if inner_mgr is not None else {}
        n = self._number(pid) if inner_mgr is not None else pid
        inner["id"] = n
        return {**outer, **inner, "name": self.name, "id": n,
                self.spec.outer.name: outer, self.spec.inner.name: inner}

    def live(self) -> list[Pid]:
        return [(o, i) for o, m in self.inner.items() for i in m.live()]


def _end_order(manager: Manager, path: tuple[int, ...] | None, table: int) -> list[Pid]:
    """The live partitions of an inner ``manager`` in the order they end with the outer
    partition at ``path`` (``NestedManager.end_order``)."""
    if isinstance(manager, NestedManager):
        return manager.end_order(path)
    return _map_order(manager, path, table)


def _map_order(manager: Manager, path: tuple[int, ...] | None, table: int) -> list[Pid]:
    """A context's live partitions under the outer partition at ``path``, in the order
    Esper ends them.

    Esper keeps a nested keyed context's partitions in one ``HashMap`` keyed by the
    outer partition's path and the key, and ends them in its iteration order: by bucket
    of ``31 * hash(path) + key.hashCode()``, a path's hash folding its partition numbers
    by 31 (Esper ref. 4.3 Context Nesting; ``ContextControllerKeyedSvcLevelAny
    .deactivate``); a hash context without preallocate likewise, its hash bucket for the
    key.  Other contexts end in the order their partitions started."""
    live = manager.live()
    if path is None or len(live) < 2:
        return live
    if isinstance(manager, KeyedManager | KeyedLifecycleManager):
        keys = manager.keys
        codes = [java_hash(keys.get(p)) for p in live]  # type: ignore[arg-type]
    elif isinstance(manager, HashManager) and not manager.spec.preallocate:
        bucket = {p: b for b, p in manager.ids.items()}
        codes = [bucket[p] for p in live]  # type: ignore[index]
    else:
        return live
    h = 0
    for i, n in enumerate(path):
        h = n if i == 0 else 31 * h + n
    hashes = [(31 * h + code) & 0xFFFFFFFF for code in codes]
    order, _ = hashmap_order(hashes, table)
    return [live[i] for i in order]


def _enc(pid: Pid) -> Any:
    return repr(pid) if isinstance(pid, tuple) else pid


def _tup(v: Any) -> Any:
    """A partition id read back from state (JSON gives lists for tuples)."""
    return tuple(_tup(x) for x in v) if isinstance(v, list | tuple) else v


def _nested_ends(spec: NestedSpec) -> bool:
    """Whether a nested spec has a temporal context at any level."""
    from operators.contexts.temporal import NonOverlappingSpec, OverlappingSpec

    return any(isinstance(x, NonOverlappingSpec | OverlappingSpec)
               or (isinstance(x, NestedSpec) and _nested_ends(x))
               for x in (spec.outer, spec.inner))

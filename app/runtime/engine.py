"""The runtime core shared by embedded and Kafka mode.

An ``Engine`` holds deployed statements, context managers and one pipeline per
(statement, context partition).  Events arrive with ``send``; time moves with
``advance_time``, which fires every due timer at its own due time in a deterministic
order (due time, then statements before contexts, then deploy/creation order).  The
engine never reads the wall clock; the caller (a test, the scenario runner, a Kafka
agent driven by watermarks) owns time.
"""

from __future__ import annotations

import heapq
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from time import perf_counter
from typing import Any
from zlib import crc32

from app.runtime.plan import OnDemandPlan, StatementPlan
from app.runtime.timing import StatementTiming
from operators.base import PartitionCtx, Row, Rows
from operators.contexts.managers import (
    CategoryManager,
    Change,
    HashManager,
    KeyedManager,
    Manager,
)
from operators.contexts.nested import NestedManager
from operators.pipeline import Pipeline
from operators.state import MemoryNamespace, MemoryStore
from operators.table import GlobalTables, Table, TableSpec
from operators.user_functions import failures_as_null
from operators.variables import VariableDecl, VariableScope, VariableStore
from operators.windows.unique import iteration

log = logging.getLogger("kepl.engine")

_SKIP_CHECK = 32
"""Firings within one clock move before the engine first looks for an idle stretch."""
_SKIP_MAX = 1 << 16
"""Longest back-off between looks when nothing could be skipped."""

_SEGMENT = object()
"""Marks the end of one statement run among the variable writes (see _post_variable_writes)."""


def _merge(writes: list[Any]) -> list[tuple[Any, str, Any, Any]]:
    """One statement run's variable writes, a variable written twice once (the value
    before the run, the last one written), in the order first written."""
    run: dict[tuple[Any, str], list] = {}
    for tag, name, old, new in writes:
        if (tag, name) in run:
            run[(tag, name)][1] = new
        else:
            run[(tag, name)] = [old, new]
    return [(tag, name, old, new) for (tag, name), (old, new) in run.items()]


Listener = Callable[[str, Rows, Rows, Any], None]
"""Called as listener(statement name, new rows, old rows, context partition id)."""


@dataclass
class _Stmt:
    plan: StatementPlan
    index: int
    pipelines: dict[Any, Pipeline] = field(default_factory=dict)
    key0: tuple = ()
    """Timer key of the partition-0 pipeline (statements without a context)."""
    sub_types: frozenset = frozenset()
    """Event types only its subqueries read (not its from clause or trigger)."""
    deferred: dict[Any, int] | None = None
    """Context partitions live when the statement was deployed (a restore), in order,
    whose pipelines are built at their first use or first due timer instead (see
    ``_defers``), each with the build number an up-front build gives it (its timer
    priority)."""
    timers: Any = None
    """The stored index of its partitions' pending timers (pid -> due time), for a
    context statement that may be deferred though timed (see ``_timer_index``)."""

    def __post_init__(self) -> None:
        self.key0 = ("p", self.plan.name, 0)


@dataclass
class _Ctx:
    name: str
    index: int
    manager: Manager
    priority: int = 0
    statements: list[_Stmt] = field(default_factory=list)
    from_start: list[_Stmt] = field(default_factory=list)
    """Statements that run from a keyed partition's start, whichever type allocates it:
    a pattern (its timers count from there, as Esper starts it with the partition)."""


def _inert(manager: Manager) -> bool:
    """Whether a context's partitions never start or end on an event or the clock (keyed
    without conditions, hash, category: partitions come into being as events are routed)."""
    cls = type(manager)
    return cls.on_event is Manager.on_event and cls.next_timer is Manager.next_timer


_FIXED_PROPS = (KeyedManager, HashManager, CategoryManager)
"""Context managers whose partition properties do not depend on when they are asked."""


BUCKET_CACHE = 65_536
"""Bound of the string values whose hash bucket ``_hash_bucket`` remembers."""


def _hash_bucket(manager: Any, type_name: str) -> Callable[[Row], int | None] | None:
    """The bucket of an event of ``type_name`` in a hash context (``HashSpec.partition_of``
    for one unfiltered built-in hash of the type, None for a null value; a string value's
    bucket remembered, bounded by ``BUCKET_CACHE``), or None where that does not apply."""
    if type(manager) is not HashManager:
        return None
    items = [i for i in manager.spec.items if i.type_name == type_name]
    if len(items) != 1 or items[0].filter is not None or items[0].user:
        return None
    expr = items[0].expr
    mctx = manager.ctx
    granularity = manager.spec.granularity
    if items[0].function.lower() != "consistent_hash_crc32":
        return None
    prop = getattr(expr, "property_name", None)
    if prop is not None:
        buckets: dict[str, int] = {}

        def crc32_of_property(e: Row) -> int | None:
            v = e.get(prop)  # expr(e, mctx), inlined: an event property
            if type(v) is str:
                b = buckets.get(v)
                if b is None:
                    if len(buckets) >= BUCKET_CACHE:
                        buckets.clear()
                    b = buckets[v] = crc32(v.encode()) % granularity
                return b
            if v is None:
                return None
            return crc32(str(v).encode()) % granularity
        return crc32_of_property

    def crc32_bucket(e: Row) -> int | None:
        v = expr(e, mctx)
        if v is None:
            return None
        return crc32(v.encode() if type(v) is str else str(v).encode()) % granularity
    return crc32_bucket


class Engine:
    """Deployed statements of one runtime (one Kafka partition, or the embedded runtime)."""

    lazy = True
    """Whether a restore may defer building context partitions (``_defers``); False
    builds every one at deploy (the reference the lazy restore is tested against)."""

    def __init__(self, store: Any = None, now_ms: int = 0) -> None:
        self.store = store if store is not None else MemoryStore()
        self.now_ms = now_ms
        self.statements: dict[str, _Stmt] = {}
        self.order: list[_Stmt] = []
        self.contexts: dict[str, _Ctx] = {}
        self.by_type: dict[str, list[_Stmt]] = {}
        self._var_changes: list[str] = []
        self._var_change_tags: list[Any] = []
        """Whose value each change is: (None, 0) global, (context, pid) a partition's."""
        self._var_writes: list[Any] = []
        self._var_posts: dict[tuple[str | None, str], str] = {}
        """(context, variable) -> the name of the statement that declared it."""
        self.var_store = VariableStore(self.store.namespace("v", "global"), self._var_changes,
                                       self._var_writes, (None, 0), self._var_change_tags)
        self.variables = VariableScope(self.var_store)
        """Global variables as expressions see them (Esper ref. 4.8 Context and Variables)."""
        self._ctx_var_decls: dict[str, list[VariableDecl]] = {}
        self._ctx_vars: dict[tuple[str, Any], VariableStore] = {}
        self.table_specs: dict[str, TableSpec] = {}
        self._tables: dict[tuple[str, Any], Table] = {}
        self.listeners: list[Listener] = []
        self._heap: list[tuple[int, tuple, Any]] = []
        self._due: dict[Any, int] = {}
        self.earliest_armed: int | None = None
        """The earliest due time of a timer armed since a caller set this to None
        (``send_batch_at``)."""
        self._prio: dict[Any, tuple] = {}
        self._seq = 0
        self._queue: deque[tuple[str, Row]] = deque()
        self.exports: frozenset[str] = frozenset()
        """Streams whose inserted events also go to ``on_export`` (Kafka: statements of
        another engine group read them, fed through their repartition topic)."""
        self.on_export: Callable[[str, Row, int], None] | None = None
        self._held: list[tuple[str, Rows, Rows, list[tuple[_Stmt, Any, Any, bool]]]] = []
        """Named-window changes not yet handed to their consumers (``_window_changed``)."""
        self._before_change: tuple[str, Any, Rows, Rows] | None = None
        """(window, partition, new, old) of the change a same-context consumer is being
        created for: it starts from the window's rows before it (``_prime``)."""
        self._busy = False
        self._excluded: set[tuple[str, Any]] = set()
        self.windows: dict[str, _Stmt] = {}
        self.consumers: dict[str, list[_Stmt]] = {}
        self.sub_readers: dict[str, list[_Stmt]] = {}
        """Per named window: statements whose subqueries read it (Esper "Subqueries")."""
        self._early: dict[str, list[_Stmt]] = {}
        """Per event type: statements that see an event before their context's
        partitions start or end on it (``@Priority`` above the context's)."""
        self._seen: set[tuple[str, Any]] = set()
        self.skip_idle = True
        """Jump idle periodic timers in bulk on long clock moves (output is the same)."""
        self._fresh_quiet: dict[str, bool] = {}
        self._steps: dict[str, tuple[Callable[[Row, int], None], ...] | None] = {}
        """Per event type: one step per statement that reads it, or None when an event
        of the type may start or end a context partition (see ``_fast_steps``)."""
        self._unread: dict[str, tuple[KeyedManager, ...]] = {}
        """Per event type: the keyed contexts that list it though none of their
        statements reads it (see ``_unread_keyed``)."""
        self.timing: StatementTiming | None = None
        """Sampled processing time per statement (None: not measured; ``timing``)."""

    # -- deployment ---------------------------------------------------------
    def deploy(self, plan: StatementPlan) -> None:
        """Add a statement (a context declaration, a schema, or a query)."""
        self._steps.clear()
        self._unread.clear()
        if plan.kind == "variable":
            decl = plan.var_decl or VariableDecl(plan.variable or plan.name, "object",
                                                 plan.initial)
            self._var_posts[(plan.context, decl.name)] = plan.name
            if plan.context is not None:
                # Esper ref. 4.8: a context variable has one value per context partition
                self._ctx_var_decls.setdefault(plan.context, []).append(decl)
                for (cname, _pid), store in self._ctx_vars.items():
                    if cname == plan.context:
                        store.declare(decl)
            else:
                self.var_store.declare(decl)
            return
        if plan.table is not None:
            self.table_specs.setdefault(plan.table.name, plan.table)
        if plan.kind == "table":
            return
        if plan.kind == "context":
            mgr = plan.context_spec.build(
                self.store.namespace("c", plan.context_spec.name), self._root_ctx())
            c = _Ctx(plan.context_spec.name, len(self.contexts), mgr, plan.priority)
            self.contexts[c.name] = c
            self._apply(c, mgr.deploy(self.now_ms))
            # A context's timers fire before the timers its statements' partitions set for
            # the same instant (the context is deployed first, and the reference product
            # fires same-time schedules in deployment order): a partition ending at T
            # takes no window flush or output due at T with it (Esper ref. 4.2.5).
            self._arm(("c", c.name), mgr.next_timer, (-1, c.index))
            return
        if plan.kind not in ("query", "window", "on"):
            return
        st = _Stmt(plan, len(self.order))
        subs = plan.subqueries if plan.kind == "on" else (
            plan.pipeline if plan.kind == "query" else None)
        if subs is not None:
            main = ({plan.action.trigger_type} if plan.kind == "on"
                    else set(plan.pipeline.main_types()))
            st.sub_types = frozenset(subs.subquery_types() - main)
        self.statements[plan.name] = st
        self.order.append(st)
        if plan.kind == "on":
            self._listen(plan.action.trigger_type, st)
            if plan.subqueries is not None:
                self._deploy_on_subqueries(st)
            return
        if plan.kind == "window":
            self.windows[plan.window] = st
        if plan.kind == "query" and plan.window is not None:
            self.consumers.setdefault(plan.window, []).append(st)
            if plan.pipeline.join is not None:
                # a join with a named window reads the events of its other streams too
                for t in plan.pipeline.types():
                    self._listen(t, st)
            else:
                for t in plan.pipeline.subquery_types():
                    self._listen(t, st)
        else:
            for t in plan.pipeline.types():
                self._listen(t, st)
        if plan.kind == "query":
            for w in plan.pipeline.subquery_windows():
                self.sub_readers.setdefault(w, []).append(st)
        if plan.context is None:
            self._pipeline(st, 0)
        else:
            c = self.contexts[plan.context]
            c.statements.append(st)
            self._starts_with_partition(c, st)
            if plan.priority > c.priority and getattr(c.manager, "has_end_condition", False):
                types = [plan.action.trigger_type] if plan.kind == "on" else (
                    [] if plan.kind == "query" and plan.window is not None
                    else plan.pipeline.types())
                for t in types:
                    self._early.setdefault(t, []).append(st)
            live = c.manager.live()
            timed = self._timer_index(st)
            if live and self.lazy and self._defers(st, timed):
                base = self._seq
                st.deferred = dict(zip(live, range(base + 1, base + 1 + len(live))))
                self._seq = base + len(live)
                if timed:
                    self._load_timers(st)
            else:
                for pid in live:
                    self._pipeline(st, pid)
            if st.timers is not None and not timed:  # complete from here on
                st.timers.child("on").put("on", True)

    def _starts_with_partition(self, c: _Ctx, st: _Stmt) -> None:
        """A pattern of a keyed context starts as its partition is allocated."""
        plan = st.plan
        if (plan.kind == "query" and plan.pipeline.pattern is not None
                and type(c.manager) is KeyedManager):
            c.from_start.append(st)
            c.manager.on_new = partial(self._partition_born, c)  # type: ignore[attr-defined]

    def _partition_born(self, c: _Ctx, pid: Any) -> None:
        """A keyed partition was allocated: its patterns start now (Esper allocates a
        partition's statements together, whichever listed type's event allocated it)."""
        for st in c.from_start:
            if pid not in st.pipelines:
                self._pipeline(st, pid)

    def _defers(self, st: _Stmt, timed: bool = False) -> bool:
        """Whether the pipelines of a statement's live partitions may wait for their first
        use (a restore of many keys then builds none up front).  Only where building later
        is the same as building now: a query of a stream (no named window to prime from,
        no subquery of one) whose pipeline never has a timer (nothing is due before its
        next event) or whose pending timers are in the stored index (``timed``: each
        partition is built when its timer is due), and that sees no variable (a window's
        parameters are fixed at build), in a context whose partition properties are fixed
        (keyed, hash, category: a nested context numbers its partitions as their
        properties are first asked).  Its state waits in the store meanwhile."""
        if timed:
            return True
        plan = st.plan
        if (plan.kind != "query" or plan.window is not None
                or type(self.contexts[plan.context or ""].manager) not in _FIXED_PROPS
                or plan.pipeline.subquery_windows() or len(self.variables)
                or plan.context in self._ctx_var_decls):
            return False
        ns = MemoryNamespace()
        try:
            probe = plan.pipeline.build(ns, PartitionCtx(variables=self.variables,
                                                         now_ms=self.now_ms))
        except Exception:  # noqa: BLE001 - a probe that cannot build is not deferred
            return False
        # state written at build (a #firsttime window's start) ties the pipeline to its
        # creation time: it is built when its partition starts
        return not probe.timed and ns.key_count() == 0

    def _timer_index(self, st: _Stmt) -> bool:
        """Give a timed statement that could otherwise be deferred its index of pending
        timers (``st.timers``, kept by ``_arm``); True if the stored index is complete
        (written since the statement's first partition: its restore may be lazy)."""
        plan = st.plan
        if (plan.kind != "query" or plan.window is not None
                or type(self.contexts[plan.context or ""].manager) not in _FIXED_PROPS
                or plan.pipeline.subquery_windows() or len(self.variables)
                or plan.context in self._ctx_var_decls):
            return False
        ns = MemoryNamespace()
        try:
            probe = plan.pipeline.build(ns, PartitionCtx(variables=self.variables,
                                                         now_ms=self.now_ms))
        except Exception:  # noqa: BLE001 - a probe that cannot build is not indexed
            return False
        if not probe.timed or any(True for _ in ns.items()):
            return False
        st.timers = self.store.namespace("s", plan.name, "timers")
        return st.timers.child("on").get("on", False)

    def _load_timers(self, st: _Stmt) -> None:
        """Arm the stored due times of a deferred statement's partitions: each pipeline
        is built when its timer comes up (``_fire_until``), with the priority an up-front
        build gives it."""
        deferred = st.deferred
        assert deferred is not None
        name = st.plan.name
        for pid, due in st.timers.items():
            seq = deferred.get(pid)
            if seq is None:
                continue
            key = ("p", name, pid)
            prio = (0, st.index, self._timer_order(st, pid, seq))
            self._prio[key] = prio
            self._due[key] = due
            heapq.heappush(self._heap, (due, prio, key))
            if self.earliest_armed is None or due < self.earliest_armed:
                self.earliest_armed = due

    def _timer_order(self, st: _Stmt, pid: Any, seq: int) -> int:
        """Where a partition's timers come among the statement's timers due at the same
        time: the reference product runs them by agent instance, whose id is a keyed
        context's partition id (``context.id``, in the order keys first came, by any type
        the context lists) or a nested context's (allocation order over its levels);
        otherwise the order the pipelines were built in."""
        if st.plan.context is None:
            return seq
        manager = self.contexts[st.plan.context].manager
        if type(manager) is KeyedManager:
            return pid
        if type(manager) is NestedManager:
            # the nested context's ``context.id``: allocation order over all levels
            n = manager.context_id(pid)
            return seq if n is None else n
        return seq

    def _built(self, st: _Stmt, pid: Any) -> Pipeline | None:
        """The pipeline of a partition, built now if it was deferred."""
        p = st.pipelines.get(pid)
        if p is None and st.deferred is not None and pid in st.deferred:
            p = self._pipeline(st, pid)
        return p

    def _undefer(self, st: _Stmt) -> None:
        """Build every deferred pipeline of a statement, its partitions in the order an
        eager restore gives them (the deployed ones first, then those started since)."""
        deferred = st.deferred
        if deferred is None:
            return
        built = st.pipelines
        rest = dict(built)
        built.clear()  # the same dict: event steps hold it
        for pid in list(deferred):
            p = rest.pop(pid, None)
            if p is None:
                self._pipeline(st, pid)  # with the build number ``deferred`` holds
            else:
                built[pid] = p
        built.update(rest)
        st.deferred = None

    def _listen(self, type_name: str, st: _Stmt) -> None:
        """``st`` takes events of ``type_name``, after the statements of its ``@Priority``
        or higher and before those of a lower one (Esper's prioritized execution: an
        event goes to the statements it matches highest priority first, else in the
        order they were deployed)."""
        sts = self.by_type.setdefault(type_name, [])
        at = len(sts)
        while at > 0 and sts[at - 1].plan.priority < st.plan.priority:
            at -= 1
        sts.insert(at, st)

    def _deploy_on_subqueries(self, st: _Stmt) -> None:
        """An on-statement with subqueries: their streams' events and named windows' rows
        reach its partitions' subquery host (operators.subquery.host)."""
        plan = st.plan
        for t in sorted(plan.subqueries.subquery_types() - {plan.action.trigger_type}):
            self._listen(t, st)
        for w in plan.subqueries.subquery_windows():
            self.sub_readers.setdefault(w, []).append(st)
        if plan.context is None:
            self._pipeline(st, 0)
        else:
            c = self.contexts[plan.context]
            c.statements.append(st)
            for pid in c.manager.live():
                self._pipeline(st, pid)

    def _root_ctx(self) -> PartitionCtx:
        # context conditions may read the tables that have no context (Esper ref. 4.7)
        return PartitionCtx(variables=self.variables, now_ms=self.now_ms,
                            tables=GlobalTables(self.table_specs, self._table))  # type: ignore[arg-type]

    # -- variables and tables --------------------------------------------------
    def _scope(self, context: str | None, pid: Any) -> VariableScope:
        """What ``ctx.variables`` is for a statement of ``context`` in partition ``pid``."""
        if context is None or context not in self._ctx_var_decls:
            return self.variables
        key = (context, pid)
        store = self._ctx_vars.get(key)
        if store is None:
            store = VariableStore(self.store.namespace("v", context, repr(pid)),
                                  self._var_changes, self._var_writes, (context, pid),
                                  self._var_change_tags)
            for decl in self._ctx_var_decls[context]:
                store.declare(decl)
            self._ctx_vars[key] = store
        return VariableScope(self.var_store, store)

    def _table(self, name: str, pid: Any) -> Table:
        """The instance of a table for a context partition (one per partition, Esper ref. 4.7)."""
        spec = self.table_specs[name]
        tpid = pid if spec.context is not None else 0
        key = (name, tpid)
        t = self._tables.get(key)
        if t is None:
            t = spec.build(self.store.namespace("t", name, repr(tpid)))
            self._tables[key] = t
        return t

    def _ctx(self, st: _Stmt, pid: Any) -> PartitionCtx:
        props: dict[str, Any] = {}
        if st.plan.context is not None:
            props = self.contexts[st.plan.context].manager.props(pid)
        ctx = PartitionCtx(props=props, variables=self._scope(st.plan.context, pid),
                           now_ms=self.now_ms)
        for name in st.plan.tables:
            ctx.tables[name] = self._table(name, pid)
        return ctx

    def _pipeline(self, st: _Stmt, pid: Any) -> Pipeline:
        p = st.pipelines.get(pid)
        if p is None:
            ctx = self._ctx(st, pid)
            ns = self.store.namespace("s", st.plan.name, repr(pid))
            spec = st.plan.subqueries if st.plan.kind == "on" else st.plan.pipeline
            unread = getattr(ns, "unread", None)
            if (unread is not None and st.plan.context is not None
                    and self.contexts[st.plan.context].manager.new_since_load(pid)):
                settle = unread()  # a new key's operators have no state to read
                try:
                    p = spec.build(ns, ctx)
                finally:
                    settle()
            else:
                p = spec.build(ns, ctx)
            st.pipelines[pid] = p
            seq = st.deferred.get(pid) if st.deferred is not None else None
            if seq is None:
                self._seq += 1
                seq = self._seq
            if getattr(p, "timed", True):
                self._arm(("p", st.plan.name, pid), p.next_timer,
                          (0, st.index, self._timer_order(st, pid, seq)))
            main = st.plan.kind == "query" and st.plan.window is not None
            subs = st.plan.kind in ("query", "on") and spec.subquery_windows()
            # a consumer rebuilt from its state mirrors what its windows posted since it
            # started; only a new one starts from their iterators (Esper ref. "Named
            # Windows and Tables": a new consumer iterates the window)
            posted = bool(main or subs) and p.rebuilt_consumer()
            if main:
                window = st.plan.window
                p.read_window(lambda: self._window_rows(window, st.plan.context, pid))
                # a consumer of its own partition's window started with it (as subqueries
                # below): it holds what the window posted, whenever it is built
                own = (st.plan.context is not None and window in self.windows
                       and self.windows[window].plan.context == st.plan.context)
                self._prime(st, pid, p, posted or own)
            if subs:
                for w in spec.subquery_windows():
                    # a subquery of the window's own context partition started with it
                    # (Esper allocates a partition's statements together), so it holds
                    # what the window posted, whenever it is built
                    own = (st.plan.context is not None and w in self.windows
                           and self.windows[w].plan.context == st.plan.context)
                    p.on_subquery_rows(
                        w, self._window_rows(w, st.plan.context, pid, posted or own),
                        [], prime=True)
        return p

    def _window_rows(self, window: str, context: str | None, pid: Any,
                     posted: bool = False) -> Rows:
        """The current rows of a named window as a partition of ``context`` reads them
        (``posted``: the rows its data window posted, see ``View.posted``)."""
        wst = self.windows.get(window)
        rows: Rows = []
        if wst is None:
            return rows
        for wpid in self._window_pids(window, context, pid):
            wp = wst.pipelines.get(wpid)
            if wp is not None and wp.view is not None:
                rows.extend(wp.view.posted() if posted else iteration(wp.view))
        return rows

    def _window_pids(self, window: str, consumer_ctx: str | None, pid: Any) -> list[Any]:
        """Partitions of a named window a consumer partition reads (Esper ref. 4.6)."""
        wst = self.windows.get(window)
        if wst is None:
            return []
        if wst.plan.context is None:
            return [0]
        if wst.plan.context == consumer_ctx:
            return [pid]
        return list(wst.pipelines)

    def _prime(self, st: _Stmt, pid: Any, p: Pipeline, posted: bool = False) -> None:
        """A new consumer starts from the named window's current rows (Esper ref. 2); a
        rebuilt one from the rows the window posted (``_window_rows``)."""
        window = st.plan.window
        if window is not None and window in self.windows:
            rows = self._window_rows(window, st.plan.context, pid, posted)
            before = self._before_change
            if before is not None and before[:2] == (window, pid):
                added = {id(r) for r in before[2]}
                rows = [r for r in rows if id(r) not in added] + list(before[3])
            p.prime(rows, self.now_ms)

    def _notify_variables(self) -> None:
        """Variables changed: views and output conditions that read them react
        (Esper ref. 14.3.12 ``#expr`` windows, Esper ref. 5.7.1.1 ``output when``)."""
        held = self._held_run()
        thens: list[list[Any]] = []
        reads: frozenset[str] | set[str] = frozenset()
        if self._var_writes:
            self._post_variable_writes()
        rounds = 0
        while self._var_changes and rounds < 100:
            rounds += 1
            names = set(self._var_changes)
            self._var_changes.clear()
            tags = set(self._var_change_tags)
            self._var_change_tags.clear()
            every = (None, 0) in tags  # a global variable: every partition hears it
            now = self.now_ms
            for st in list(self.order):
                if st.plan.pipeline is None or not st.plan.pipeline.reacts_to_variables(names):
                    continue
                self._undefer(st)
                ctx_name = st.plan.context
                if ctx_name is not None and ctx_name in self.contexts:
                    # Esper allocates a partition's statements together: a statement no
                    # event of the partition reached yet hears the change as well
                    for pid in list(self.contexts[ctx_name].manager.live()):
                        if pid not in st.pipelines and (every or (ctx_name, pid) in tags):
                            self._pipeline(st, pid)
                for pid, p in list(st.pipelines.items()):
                    if not (every or ctx_name is None or (ctx_name, pid) in tags):
                        continue  # another partition's context variable
                    mark = len(self._var_writes)
                    new, old = p.on_variables_changed(now)
                    if held is not None and len(self._var_writes) > mark:
                        thens.append(self._var_writes[mark:])
                        reads = reads or st.plan.pipeline.output.variables
                        del self._var_writes[mark:]
                    self._emit(st, pid, new, old)
                    self._arm(("p", st.plan.name, pid), p.next_timer)
            if held is not None:
                if thens:
                    self._post_reentrant(held, thens, reads)
                else:
                    self._post_run(held)
                held = None
            if self._var_writes:
                self._post_variable_writes()
        if held is not None:
            self._post_run(held)

    def _held_run(self) -> list[tuple[Any, str, Any, Any]] | None:
        """The pending writes, taken back to be posted as Esper commits them, when they are
        one statement run's and an output condition with ``then set`` reads one of them
        (``_post_reentrant``); else None, and they post as usual."""
        pending = self._var_writes
        writes = [w for w in pending if w is not _SEGMENT]
        ends = sum(1 for w in pending if w is _SEGMENT)
        if not writes or ends > 1 or (ends == 1 and pending[-1] is not _SEGMENT):
            return None  # the writes of several runs
        names = {w[1] for w in writes}
        for st in self.order:
            out = st.plan.pipeline.output if st.plan.pipeline is not None else None
            if out is not None and out.then_set and out.when is not None \
                    and out.variables & names:
                self._var_writes.clear()
                return self._merged_run(writes)
        return None

    def _merged_run(self, writes: list[Any]) -> list[tuple[Any, str, Any, Any]]:
        """One run's writes (``_merge``) in Esper's commit order: by variable number, the
        order of declaration."""
        number = {key: i for i, key in enumerate(self._var_posts)}
        return sorted(_merge(writes), key=lambda w: number.get((w[0][0], w[1]), len(number)))

    def _post_run(self, run: list[tuple[Any, str, Any, Any]]) -> None:
        for tag, name, old, new in run:
            self._post_variable(tag, name, old, new)

    def _post_reentrant(self, run: list[tuple[Any, str, Any, Any]], thens: list[list[Any]],
                        reads: frozenset[str] | set[str]) -> None:
        """Post a run's writes and the ``then set`` of the output conditions they made
        true, as Esper 9 does. Its commit posts variable by variable, by number, each
        with its callbacks; a condition the first variable it reads makes true commits
        its assignments at once over the same uncommitted writes, so that commit posts
        every variable of the run again, and a condition it makes true in turn nests
        another (each level: from the committed value to the value written); each
        level, once the nested one returns, posts the variables after that one."""
        number = {key: i for i, key in enumerate(self._var_posts)}

        def order(key: tuple[Any, str]) -> int:
            return number.get((key[0][0], key[1]), len(number))

        cur = {(tag, name): old for tag, name, old, _new in run}
        written = {(tag, name): new for tag, name, _old, new in run}
        at = next(((tag, name) for tag, name, _o, _n in run if name in reads), None)
        sets = [self._merged_run([w for w in then if w is not _SEGMENT]) for then in thens]
        if at is None:  # no write of the run made a condition true: each posts on its own
            for writes in (run, *sets):
                self._post_run(writes)
            return

        def commit(level: int) -> None:
            if level:
                for tag, name, old, new in sets[level - 1]:
                    cur.setdefault((tag, name), old)
                    written[(tag, name)] = new
            for key in sorted(written, key=order):
                self._post_variable(key[0], key[1], cur[key], written[key])
                cur[key] = written[key]
                if key == at and level < len(sets):
                    commit(level + 1)
        commit(0)

    def _post_variable(self, tag: Any, name: str, old: Any, new: Any) -> None:
        """One row to the statement that declared the variable (its listeners)."""
        context, pid = tag
        stmt = self._var_posts.get((context, name))
        if stmt is not None:
            for listener in self.listeners:
                listener(stmt, [{name: new}], [{name: old}], pid)

    def _post_variable_writes(self) -> None:
        """Each statement run that writes a variable posts a row to the variable's
        statement: the new value on the insert stream, the value before the run on the
        remove stream, the column named after the variable (Esper: listeners of a
        create-variable statement; the writes of one run commit together, so
        ``set a = a * 2, a = a + 1`` posts once)."""
        writes = list(self._var_writes)
        self._var_writes.clear()
        start = 0
        for end, w in enumerate((*writes, _SEGMENT)):
            if w is _SEGMENT:
                self._post_run(_merge(writes[start:end]))
                start = end + 1

    # -- timers -------------------------------------------------------------
    def _arm(self, key: Any, next_timer: Callable[[], int | None],
             prio: tuple | None = None) -> None:
        if prio is not None:
            self._prio[key] = prio
        due = next_timer()
        if self._due.get(key) != due:
            self._set_due(key, due)

    def _set_due(self, key: Any, due: int | None) -> None:
        """``key``'s timer is due at ``due`` (None: not at all), where it was not."""
        if due is None:
            del self._due[key]
            self._index_timer(key, None)
            return
        self._due[key] = due
        heapq.heappush(self._heap, (due, self._prio[key], key))
        self._index_timer(key, due)
        if self.earliest_armed is None or due < self.earliest_armed:
            self.earliest_armed = due

    def _index_timer(self, key: tuple, due: int | None) -> None:
        """Keep a partition's due time in its statement's stored timer index."""
        if key[0] != "p":
            return
        timers = self.statements[key[1]].timers
        if timers is not None:
            if due is None:
                timers.delete(key[2])
            else:
                timers.put(key[2], due)

    def next_timer(self) -> int | None:
        """The earliest due time of anything deployed (for runners that step time)."""
        while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def advance_time(self, to_ms: int) -> None:
        """Move the clock to ``to_ms``, firing each due timer at its own due time.

        A long move does not replay idle periodic timers one by one: every so many
        firings the engine looks for an idle stretch (``_skip_quiet``) and jumps it."""
        if to_ms < self.now_ms:
            raise ValueError(f"time cannot move backwards ({to_ms} < {self.now_ms})")
        if to_ms == self.now_ms:
            # Esper's advanceTimeSpan moves only forward: a timer set for the current time
            # (an output condition a variable made true) waits for the clock to move on
            return
        top = self.next_timer()
        if top is None or top > to_ms:
            self.now_ms = to_ms  # nothing due: what ``_fire_until`` does then
            return
        with failures_as_null() as failures:
            self._fire_until(to_ms)
        for failure in failures:  # no event to dead-letter: the value was null
            log.warning("timer at %d: %s (null instead)", self.now_ms, failure)

    def _fire_until(self, to_ms: int) -> None:
        """The timers of ``advance_time``."""
        budget, fired = _SKIP_CHECK, 0
        follow = False  # the timers fired at now_ms set off something still to follow
        while True:
            top = self.next_timer()
            if follow and top != self.now_ms:
                # Esper runs every timer due at one time first, then what they set off
                # (named-window changes to consumers, inserted events: ``_follow``)
                follow = False
                self._drain()
                continue
            if top is None or top > to_ms:
                break
            if fired >= budget and self.skip_idle and not follow:
                fired = 0
                budget = _SKIP_CHECK if self._skip_quiet(to_ms + 1) else min(
                    budget * 2, _SKIP_MAX)
                continue
            due, prio, key = heapq.heappop(self._heap)
            if self._due.get(key) != due:
                continue
            fired += 1
            del self._due[key]
            self.now_ms = due
            if key[0] == "c":
                c = self.contexts[key[1]]
                self._apply(c, c.manager.on_time(due))
                self._arm(key, c.manager.next_timer, prio)
            else:
                st = self.statements[key[1]]
                p = st.pipelines.get(key[2])
                if p is None:
                    if st.deferred is not None and key[2] in st.deferred:
                        # built from its state when its timer is due; the build arms the
                        # same (due, priority), fired next in heap order
                        self._pipeline(st, key[2])
                        if key not in self._due:
                            self._index_timer(key, None)
                    continue
                new, old = p.on_time(due)
                self._emit(st, key[2], new, old)
                self._arm(key, p.next_timer, prio)
                if key not in self._due:
                    self._index_timer(key, None)
            self._notify_variables()
            follow = bool(self._queue or self._held)
        self.now_ms = to_ms

    # -- idle clock jumps ------------------------------------------------------
    def _skip_quiet(self, limit: int) -> bool:
        """Jump every timer due before the first firing that may do something (or
        ``limit``) in closed form; True if anything was skipped.

        Between now and that horizon no event arrives and no timer outputs, inserts or
        sets a variable, so each holder can be moved on by itself: idle periodic output
        (``OutputLimiter.skip_to``) and temporal contexts whose partitions stay empty
        and silent (``skip_to`` of the manager: ids and the partitions live at the
        horizon as if every start and end had fired).  FORMAT.md clock rule: the output
        is that of firing each timer at its own due time."""
        top = self.next_timer()
        if top is None or top >= limit:
            return False
        if self._quiet_until(self._heap[0][2], top, limit) <= top:
            # the next firing does something, so the scan below could skip nothing: one
            # look instead of one per pending timer (a keyed #time window has one per key)
            return False
        horizon = limit
        for key, due in list(self._due.items()):
            if due < horizon:
                horizon = min(horizon, self._quiet_until(key, due, limit))
        if horizon <= top:
            return False
        for key, due in list(self._due.items()):
            if key[0] == "p" and due < horizon:
                p = self._built(self.statements[key[1]], key[2])
                if p is not None:
                    p.skip_to(horizon)
                    self._arm(key, p.next_timer)
        for key, due in list(self._due.items()):
            if key[0] == "c" and due < horizon:
                c = self.contexts[key[1]]
                for t, change in c.manager.skip_to(horizon):
                    self.now_ms = max(self.now_ms, t)
                    self._apply(c, [change])
                self._arm(key, c.manager.next_timer)
        return True

    def _quiet_until(self, key: Any, due: int, limit: int) -> int:
        """Until when the holder of timer ``key`` (due at ``due``) stays idle, at most
        ``limit`` (``_skip_quiet``)."""
        if key[0] == "c":
            return limit if self._context_quiet(self.contexts[key[1]]) else due
        p = self._built(self.statements[key[1]], key[2])
        return p.quiet_until(limit) if p is not None else limit

    def _context_quiet(self, c: _Ctx) -> bool:
        """Whether a context's starts and ends can be jumped: its manager can, every live
        partition ends silently, and a new partition of each statement has no timer and
        ends silently."""
        can_skip = getattr(c.manager, "can_skip", None)
        if can_skip is None or not can_skip():
            return False
        for st in c.statements:
            if not self._statement_fresh_quiet(st):
                return False
            self._undefer(st)
            if not all(p.terminate_quiet() for p in st.pipelines.values()):
                return False
        return True

    def _statement_fresh_quiet(self, st: _Stmt) -> bool:
        """Whether a new partition of a statement, seeing no input, outputs nothing in its
        whole life: no timer when built, nothing at its end (built once as a probe)."""
        quiet = self._fresh_quiet.get(st.plan.name)
        if quiet is None:
            quiet = False
            if st.plan.kind == "query" and st.plan.window is None:
                try:
                    probe = st.plan.pipeline.build(
                        MemoryNamespace(), PartitionCtx(variables=self.variables,
                                                        now_ms=self.now_ms))
                    quiet = probe.next_timer() is None and probe.terminate_quiet()
                except Exception:  # noqa: BLE001 - a probe that cannot build is not quiet
                    quiet = False
            self._fresh_quiet[st.plan.name] = quiet
        return quiet

    # -- events -------------------------------------------------------------
    def send(self, type_name: str, event: Row) -> None:
        """Deliver one event at the current time (and whatever it inserts into streams)."""
        if self._busy:
            self._queue.append((type_name, event))
            return
        steps = self._steps.get(type_name, self)
        if steps is self:
            steps = self._fast_steps(type_name)
        if steps is not None:
            self._run_steps(steps, (event,), False)
            return
        self._busy = True
        try:
            self._process(type_name, event)
            self._notify_variables()
            self._follow()
        finally:
            self._busy = False

    def send_batch(self, type_name: str, events: Iterable[Row]) -> None:
        """Deliver events of one type at the current time, in order: the same rows, the
        same listener calls in the same order, as ``send`` for each in turn; the engine's
        per-event dispatch is paid once for the batch where no event of the type can
        start or end a context partition."""
        if self._busy:
            self._queue.extend((type_name, e) for e in events)
            return
        steps = self._steps.get(type_name, self)
        if steps is self:
            steps = self._fast_steps(type_name)
        if steps is None:
            for e in events:
                self.send(type_name, e)
            return
        self._run_steps(steps, events)

    def send_batch_at(self, type_name: str, events: list[Row]) -> bool:
        """``send_batch`` of events that each come right after a clock move to the
        current time (held events of one event time): the same as a ``send`` each only
        if no timer came due meanwhile, which a move between two of them would have
        fired.  Returns False when the batch armed a timer due at or before now: the
        caller runs the events again one at a time from a state it kept."""
        self.earliest_armed = None
        self.send_batch(type_name, events)
        armed = self.earliest_armed
        return armed is None or armed > self.now_ms

    def _run_steps(self, steps: tuple[Callable[[Row, int], None], ...],
                   events: Iterable[Row], batch: bool = True) -> None:
        """Each event through each statement's step (``_process`` without the context
        lifecycle, which the steps' event type cannot touch), then what it set off.  A
        ``batch`` for one statement without a context goes through its ``run`` (the
        pipeline steps through the events itself)."""
        timing = self.timing
        if timing is not None:
            timing.countdown -= 1
            if timing.countdown <= 0:
                timing.countdown = timing.every
                self._run_steps_timed(steps, events, batch, timing)
                return
        self._busy = True
        try:
            self._excluded.clear()
            queue = self._queue
            var_changes = self._var_changes
            var_writes = self._var_writes
            held = self._held
            now = self.now_ms
            if len(steps) == 1:
                step = steps[0]
                run = getattr(step, "run", None) if batch else None
                if run is not None:
                    run(events, now)
                    return
                for e in events:
                    step(e, now)
                    if queue or var_changes or var_writes or held:
                        self._settle()
                return
            for e in events:
                for step in steps:
                    step(e, now)
                if queue or var_changes or var_writes or held:
                    self._settle()
        finally:
            self._busy = False

    def _run_steps_timed(self, steps: tuple[Callable[[Row, int], None], ...],
                         events: Iterable[Row], batch: bool, timing: StatementTiming) -> None:
        """``_run_steps`` with each statement's step timed (a sample, ``timing``): the
        same calls in the same order."""
        self._busy = True
        try:
            self._excluded.clear()
            now = self.now_ms
            names = [getattr(step, "statement", "") for step in steps]
            run = getattr(steps[0], "run", None) if batch and len(steps) == 1 else None
            if run is not None:
                t0 = perf_counter()
                run(events, now)
                timing.add(names[0], perf_counter() - t0)
                return
            for e in events:
                for step, name in zip(steps, names, strict=True):
                    t0 = perf_counter()
                    step(e, now)
                    timing.add(name, perf_counter() - t0)
                if self._queue or self._var_changes or self._var_writes or self._held:
                    self._settle()
        finally:
            self._busy = False

    def _settle(self) -> None:
        """After an event: variable writes post and react, inserted events follow (as
        ``send`` does after each event)."""
        self._notify_variables()
        self._follow()

    def _follow(self) -> None:
        """What an event or the timers due at one time set off, in Esper's order: the
        named-window changes reach their consumers, then each inserted event is processed
        (and the window changes it made reach theirs)."""
        while self._held or self._queue:
            if self._held:
                self._dispatch_windows()
            else:
                type_name, event = self._queue.popleft()
                if type_name in self.exports:
                    self.on_export(type_name, event, self.now_ms)  # type: ignore[misc]
                self._process(type_name, event)
            self._notify_variables()

    def _fast_steps(self, type_name: str) -> tuple[Callable[[Row, int], None], ...] | None:
        """The statement steps of ``type_name`` (cached until the next deploy), or None
        when its events need the whole of ``_process``: a context whose partitions start
        or end on events or on the clock (its ``on_event`` may change them), or a
        statement seeing events before its context does (``@Priority``)."""
        steps: tuple[Callable[[Row, int], None], ...] | None = None
        if not self._early.get(type_name) and all(
                _inert(c.manager) for c in self.contexts.values()) and not any(
                st.plan.drop for st in self.by_type.get(type_name, ())):
            steps = tuple(self._named_step(st, type_name)
                          for st in self.by_type.get(type_name, ()))
            steps = tuple(partial(m.route, type_name)
                          for m in self._unread_keyed(type_name)) + steps
        self._steps[type_name] = steps
        return steps

    def _unread_keyed(self, type_name: str) -> tuple[KeyedManager, ...]:
        """The keyed contexts that list ``type_name`` though none of their statements
        reads it.  Its event still allocates its key's partition there (Esper ref. 4.2.2
        Keyed Segmented Context: a partition per key value of any listed type), which
        numbers it (``context.id``) before keys that come later."""
        found = self._unread.get(type_name)
        if found is None:
            read = {st.plan.context for st in self.by_type.get(type_name, ())}
            found = tuple(c.manager for c in self.contexts.values()
                          if type(c.manager) is KeyedManager and c.name not in read
                          and type_name in c.manager.by_type)  # type: ignore[attr-defined]
            self._unread[type_name] = found
        return found  # type: ignore[return-value]

    def _named_step(self, st: _Stmt, type_name: str) -> Callable[[Row, int], None]:
        """``_step``, tagged with its statement's name (``_run_steps_timed``)."""
        step = self._step(st, type_name)
        step.statement = st.plan.name  # type: ignore[attr-defined]
        return step

    def _step(self, st: _Stmt, type_name: str) -> Callable[[Row, int], None]:
        """One statement's part of ``_process`` for an event of ``type_name``, as one
        function: routing, the partition's pipeline, listeners and timers."""
        plan = st.plan
        name = plan.name
        pipelines = st.pipelines
        var_writes = self._var_writes
        plain = (plan.kind == "query" and plan.window is None and plan.select_stream is None
                 and plan.insert_into is None)
        queue = self._queue
        var_changes = self._var_changes
        settle = self._settle
        emit = self._emit
        arm = self._arm
        build = self._pipeline

        def deliver(pid: Any, e: Row, now: int) -> None:
            p = pipelines.get(pid) or build(st, pid)
            new, old = p.on_event(type_name, e, now)
            if new or old:
                if plain and not var_writes:
                    for listener in self.listeners:
                        listener(name, new, old, pid)
                else:
                    emit(st, pid, new, old)
            if p.timed:
                arm(("p", name, pid), p.next_timer)

        if plan.kind != "query" or plan.window is not None:
            return lambda e, now: self._to_statement(st, type_name, e, now, {}, None)
        if plan.context is None:
            key0 = st.key0
            due_of = self._due.get
            set_due = self._set_due

            def single(e: Row, now: int) -> None:
                # deliver(0, e, now), inlined: the commonest statement, one call less
                p = pipelines.get(0) or build(st, 0)
                new, old = p.on_event(type_name, e, now)
                if new or old:
                    if plain and not var_writes:
                        for listener in self.listeners:
                            listener(name, new, old, 0)
                    else:
                        emit(st, 0, new, old)
                if p.timed:
                    # arm(key0, p.next_timer), inlined
                    due = p.next_timer()
                    if due_of(key0) != due:
                        set_due(key0, due)

            def run(events: Iterable[Row], now: int) -> None:
                # single() for each event, the pipeline stepping through them itself
                p = pipelines.get(0) or build(st, 0)
                each = getattr(p, "each", None)
                if each is None or not plain:
                    on_run = getattr(p, "on_run", None)
                    if on_run is not None and plain and not (queue or var_changes
                                                             or var_writes):
                        events = list(events)
                        if on_run(events, now):
                            if p.timed:
                                arm(key0, p.next_timer)
                            return
                    for e in events:
                        single(e, now)
                        if queue or var_changes or var_writes:
                            settle()
                    return
                for new in each(events, now):
                    if new:
                        if not var_writes:
                            for listener in self.listeners:
                                listener(name, new, [], 0)
                        else:
                            emit(st, 0, new, [])
                    if queue or var_changes or var_writes:
                        settle()
                if p.timed:
                    arm(key0, p.next_timer)
            single.run = run  # type: ignore[attr-defined]
            return single
        manager = self.contexts[plan.context].manager
        if type_name in st.sub_types and isinstance(manager, CategoryManager):
            return lambda e, now: self._to_statement(st, type_name, e, now, {}, None)
        item = getattr(manager, "by_type", {}).get(type_name)
        if (type(manager) is KeyedManager and item is not None and item.filter is None
                and len(item.keys) == 1):
            # a key of one string value names its partition as it is (KeyedManager.route)
            pids = manager.pids
            key = item.keys[0]
            mctx = manager.ctx
            route = manager.route

            kprop = getattr(key, "property_name", None)

            def keyed(e: Row, now: int) -> None:
                # key(e, mctx), inlined for an event property
                k = e.get(kprop) if kprop is not None else key(e, mctx)
                pid = pids.get(k) if type(k) is str else None
                if pid is None:
                    for pid in route(type_name, e, now):
                        deliver(pid, e, now)
                    return
                # deliver(pid, e, now), inlined
                p = pipelines.get(pid) or build(st, pid)
                new, old = p.on_event(type_name, e, now)
                if new or old:
                    if plain and not var_writes:
                        for listener in self.listeners:
                            listener(name, new, old, pid)
                    else:
                        emit(st, pid, new, old)
                if p.timed:
                    arm(("p", name, pid), p.next_timer)
            return keyed
        hashed = _hash_bucket(manager, type_name)
        if hashed is not None:
            route = manager.route
            hmanager: HashManager = manager  # type: ignore[assignment]
            here = hmanager.here
            first_use = hmanager.by_first_use

            def hashed_step(e: Row, now: int) -> None:
                b = hashed(e)
                pid = hmanager.ids.get(b) if b is not None else None
                if pid is None or (first_use and b not in here):
                    # a bucket's first event: ``route`` numbers it
                    for pid in route(type_name, e, now):
                        deliver(pid, e, now)
                    return
                # deliver(pid, e, now), inlined
                p = pipelines.get(pid) or build(st, pid)
                new, old = p.on_event(type_name, e, now)
                if new or old:
                    if plain and not var_writes:
                        for listener in self.listeners:
                            listener(name, new, old, pid)
                    else:
                        emit(st, pid, new, old)
                if p.timed:
                    arm(("p", name, pid), p.next_timer)
            return hashed_step
        route = manager.route

        def routed(e: Row, now: int) -> None:
            for pid in route(type_name, e, now):
                deliver(pid, e, now)
        return routed

    def _drain(self) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            self._follow()
        finally:
            self._busy = False

    def _process(self, type_name: str, event: Row) -> None:
        now = self.now_ms
        self._excluded.clear()
        early = self._early.get(type_name)
        if early:
            self._seen.clear()
            for st in early:
                # partitions as they are before this event starts or ends any
                c = self.contexts[st.plan.context or ""]
                for pid in c.manager.route(type_name, event, now):
                    self._seen.add((st.plan.name, pid))
                    self._deliver(st, pid, type_name, event, now)
        started: dict[str, list[Any]] = {}
        for m in self._unread_keyed(type_name):
            m.route(type_name, event, now)
        for c in self.contexts.values():
            changes = c.manager.on_event(type_name, event, now)
            if changes:
                self._apply(c, changes)
                starts = [ch.pid for ch in changes if ch.kind == "start"]
                if starts:
                    started[c.name] = starts
            self._arm(("c", c.name), c.manager.next_timer)
        for st in self.by_type.get(type_name, ()):
            if st.plan.context is None and st.plan.kind != "on":
                # the common case: one partition for the statement's lifetime
                p = st.pipelines.get(0) or self._pipeline(st, 0)
                new, old = p.on_event(type_name, event, now)
                if new or old:
                    self._emit(st, 0, new, old)
                self._arm(st.key0, p.next_timer)
            else:
                self._to_statement(st, type_name, event, now, started, early)
            if st.plan.drop and self._dropped(st, type_name, event):
                break

    def _dropped(self, st: _Stmt, type_name: str, event: Row) -> bool:
        """Whether a ``@Drop`` statement took the event: its stream filter (and, without a
        data window, its where clause, which Esper plans into the filter) let it in."""
        spec = st.plan.pipeline
        stream = spec.stream if spec is not None else None
        p = next(iter(st.pipelines.values()), None)
        if stream is None or stream.type_name != type_name or p is None:
            return False
        ctx = p.ctx
        if stream.filter is not None and not stream.filter(event, ctx):
            return False
        return stream.view is not None or spec.where is None or bool(spec.where(event, ctx))

    def _to_statement(self, st: _Stmt, type_name: str, event: Row, now: int,
                      started: dict[str, list[Any]], early: list[_Stmt] | None) -> None:
        """An event into the context partitions of a statement it is routed to."""
        ctx_name = st.plan.context
        if ctx_name is None:
            pids: list[Any] = [0]
        else:
            c = self.contexts[ctx_name]
            # a named window's rows are routed as events of its underlying type (Esper ref. 4.6)
            rtype = (st.plan.event_type or type_name) if st.plan.kind == "window" else type_name
            pids = c.manager.route(rtype, event, now)
            if (type_name in st.sub_types and isinstance(c.manager, CategoryManager)
                    and type_name != c.manager.spec.type_name):
                # Esper ref. 4.2.4: a category's predicate applies to every stream of the
                # statement, as Esper adds it to each filter: a subquery's too
                pids = c.manager.categories(event)
            new_pids = started.get(ctx_name)
            if new_pids and len(pids) > 1:
                # the partitions this event started see it first, then the others in
                # creation order (Esper hands a new partition its starting event as it
                # allocates it)
                first = [p for p in new_pids if p in pids]
                pids = first + [p for p in pids if p not in first]
        for pid in pids:
            if (ctx_name, pid) in self._excluded:
                continue
            if early and (st.plan.name, pid) in self._seen:
                continue
            self._deliver(st, pid, type_name, event, now)

    def arm_output(self, statement: str, type_name: str = "") -> None:
        """A statement split by group key over several engines had its first update (or
        event of ``type_name``) in another one: arm its timed output (or ``#time_batch``)
        now, as that arrival did there."""
        st = self.statements[statement]
        p = st.pipelines.get(0) or self._pipeline(st, 0)
        p.arm(self.now_ms, type_name)
        self._arm(st.key0, p.next_timer)

    def _deliver(self, st: _Stmt, pid: Any, type_name: str, event: Row, now: int) -> None:
        """One event into one context partition of a statement."""
        if st.plan.kind == "on":
            ctx = None
            if st.plan.subqueries is not None:
                host = self._pipeline(st, pid)
                host.on_event(type_name, event, now)
                self._arm(("p", st.plan.name, pid), host.next_timer)
                ctx = host.ctx
                if type_name != st.plan.action.trigger_type:
                    return
            self._on_action(st, pid, event, ctx)
            return
        p = self._pipeline(st, pid)
        new, old = p.on_event(type_name, event, now)
        if new or old:
            self._emit(st, pid, new, old)
        self._arm(("p", st.plan.name, pid), p.next_timer)

    def _apply(self, c: _Ctx, changes: list[Change]) -> None:
        """Context partitions end (flushing ``when terminated`` output) or start."""
        now = self.now_ms
        for ch in changes:
            if ch.kind == "end":
                # every statement's output when terminated first, then the partition goes:
                # a named window's consumer still iterates the partition's window; Esper
                # stops a partition's statements newest first
                for st in reversed(c.statements):
                    if st.deferred is not None and ch.pid in st.deferred:
                        if ch.pid not in st.pipelines:
                            self._pipeline(st, ch.pid)
                        del st.deferred[ch.pid]  # its pipeline ends as built from its state
                    p = st.pipelines.get(ch.pid)
                    if p is None:
                        continue
                    if self._due.pop(("p", st.plan.name, ch.pid), None) is not None:
                        self._index_timer(("p", st.plan.name, ch.pid), None)
                    self._prio.pop(("p", st.plan.name, ch.pid), None)
                    new, old = p.terminate(now)
                    self._emit(st, ch.pid, new, old)
                for st in c.statements:
                    st.pipelines.pop(ch.pid, None)
                self._end_partition_state(c.name, ch.pid)
            else:
                if ch.exclude:
                    self._excluded.add((c.name, ch.pid))
                for st in c.statements:
                    self._pipeline(st, ch.pid)

    def _end_partition_state(self, context: str, pid: Any) -> None:
        """A partition ended: its tables and context variables go with it (Esper ref. 4.7/4.8)."""
        for name, spec in self.table_specs.items():
            if spec.context == context:
                self._table(name, pid).clear()
                self._tables.pop((name, pid), None)
        self._ctx_vars.pop((context, pid), None)
        if context in self._ctx_var_decls:
            self.store.namespace("v", context, repr(pid)).clear()

    def _on_action(self, st: _Stmt, pid: Any, event: Row,
                   ctx: PartitionCtx | None = None) -> None:
        """Run an on-statement for its triggering event (Esper ref. 2, named windows; 4.6/4.7);
        ``ctx``: its subquery host's context, when it has subqueries."""
        action = st.plan.action
        now = self.now_ms
        if ctx is None:
            ctx = self._ctx(st, pid)
        else:
            ctx.now_ms = now
        if not action.matches(event, ctx):
            return
        if action.kind == "set":
            self._emit(st, pid, [action.run_set(event, ctx)], [])
            return
        if action.target == "table":
            table = self._table(action.window, pid)
            res = action.run(event, table.rows(), ctx)
            for r in res.deleted:
                table.delete_row(r)
            for o, n in res.updated:
                table.update_row(o, n)
            inserted = [table.insert_row(r)[0] for r in res.inserted]
            if action.kind == "merge":
                # the statement posts inserted rows as the table holds them (empty
                # aggregation columns included)
                res.new = inserted + [n for _, n in res.updated]
        else:
            wst = self.windows[action.window]
            wp = self._pipeline(wst, pid)
            # a lookup by key or range finds rows in the order they entered the window
            # (Esper's index), a scan in the window's iteration order
            rows = ([] if wp.view is None else list(wp.view.contents()) if action.indexed
                    else iteration(wp.view))
            res = action.run(event, rows, ctx)
            if res.changes:
                # Esper ref. 6.6 on-update: the window takes the updated rows as new events
                # and the rows before as removed ones, so a row updated becomes the newest
                if action.kind == "merge":
                    gone, come = res.merged_old, res.merged_new
                else:
                    gone = res.deleted + [o for o, _ in res.updated]
                    come = res.inserted + [n for _, n in res.updated]
                new, old = wp.change(gone, come, now)
                self._emit(wst, pid, new, old)
                self._arm(("p", wst.plan.name, pid), wp.next_timer)
        for stream, row in res.routed:
            self._queue.append((stream, row))
        if res.new or res.old:
            self._emit(st, pid, res.new, res.old)

    def _emit(self, st: _Stmt, pid: Any, new: Rows, old: Rows) -> None:
        writes = self._var_writes
        if writes and writes[-1] is not _SEGMENT:
            writes.append(_SEGMENT)  # the variable writes of one statement run end here
        if not new and not old:
            return
        if st.plan.select_stream is None:
            for listener in self.listeners:
                listener(st.plan.name, new, old, pid)
        else:
            ln, lo = st.plan.listened(new, old)
            if ln or lo:
                for listener in self.listeners:
                    listener(st.plan.name, ln, lo, pid)
        if st.plan.kind == "window":
            self._window_changed(st, pid, new, old)
        target = st.plan.insert_into
        if target is not None:
            for r in st.plan.routed(new, old):
                self._queue.append((target, r))

    def _window_changed(self, st: _Stmt, pid: Any, new: Rows, old: Rows) -> None:
        """Hold a named window's insert and remove stream for the consumers it has now
        (statements selecting from it, subqueries reading it) until the event or the
        timers that changed it are done (``_follow``): Esper dispatches a named window's
        changes to its consumers only then, so a statement that the same event or a timer
        due at the same time runs still sees the window as it was."""
        window = st.plan.window or ""
        to: list[tuple[_Stmt, Any, Any, bool]] = []
        for rst in self.sub_readers.get(window, ()):
            for rpid in self._reader_pids(rst, st.plan.context, pid):
                rp = rst.pipelines.get(rpid)
                if rp is not None:
                    to.append((rst, rpid, rp, True))
        for cst in self.consumers.get(window, ()):
            cctx = cst.plan.context
            if cctx is None:
                cpids: list[Any] = [0]
            elif cctx == st.plan.context:
                cpids = [pid]  # same context: the partition's own window (Esper ref. 4.6)
                if pid not in cst.pipelines:
                    # Esper allocates a partition's statements together: the consumer
                    # started with the window, before this change, which it is then sent
                    self._before_change = (window, pid, new, old)
            else:
                cpids = list(self.contexts[cctx].manager.live())
            try:
                for cpid in cpids:
                    to.append((cst, cpid, self._pipeline(cst, cpid), False))
            finally:
                self._before_change = None
        if to:
            self._held.append((window, new, old, to))

    def _dispatch_windows(self) -> None:
        """Hand the held named-window changes to their consumers, in the order they were
        made; a consumer that more than one change reaches takes them as one update (Esper
        merges the changes dispatched to one consumer at the same time)."""
        held = list(self._held)
        self._held.clear()
        merged: dict[tuple[str, Any, str, bool], list[Any]] = {}
        for window, new, old, to in held:
            for cst, cpid, p, sub in to:
                key = (cst.plan.name, cpid, window, sub)
                got = merged.get(key)
                if got is None:
                    merged[key] = [cst, cpid, p, sub, window, list(new), list(old)]
                else:
                    got[5].extend(new)
                    got[6].extend(old)
        now = self.now_ms
        for cst, cpid, p, sub, window, new, old in merged.values():
            if cst.pipelines.get(cpid) is not p:
                continue  # the partition ended meanwhile
            if sub:
                p.on_subquery_rows(window, new, old)
                continue
            n, o = p.on_rows(new, old, now)
            self._emit(cst, cpid, n, o)
            self._arm(("p", cst.plan.name, cpid), p.next_timer)

    def _reader_pids(self, reader: _Stmt, window_ctx: str | None, pid: Any) -> list[Any]:
        """Partitions of a statement that see a change of a named window's partition
        ``pid`` (the same partition in the same context, Esper ref. 4.6)."""
        cctx = reader.plan.context
        if cctx is None:
            return [0]
        if cctx == window_ctx:
            return [pid]
        return list(reader.pipelines)

    # -- queries ------------------------------------------------------------
    def query(self, plan: OnDemandPlan,
              select: Callable[[dict[str, Any]], bool] | None = None) -> Rows:
        """An on-demand select over a named window's or a table's current rows.

        Each context partition is queried on its own, in partition order; order by and
        limit apply within a partition (Esper ref. 4.9 on-demand queries).  ``select`` picks
        partitions by their context properties (``app.runtime.selector``)."""
        sources: list[tuple[Any, Rows, str | None]] = []
        if plan.kind == "window":
            wst = self.windows.get(plan.source)
            if wst is not None:
                for pid, wp in wst.pipelines.items():
                    rows = list(wp.view.contents()) if wp.view is not None else []
                    sources.append((pid, rows, wst.plan.context))
        else:
            spec = self.table_specs.get(plan.source)
            if spec is not None:
                if spec.context is None:
                    pids: list[Any] = [0]
                elif spec.context in self.contexts:
                    pids = list(self.contexts[spec.context].manager.live())
                else:
                    pids = []
                for pid in pids:
                    sources.append((pid, self._table(plan.source, pid).rows(), spec.context))
        out: Rows = []
        for pid, rows, context in sources:
            props = self.partition_props(context, pid)
            if select is not None and not select(props):
                continue
            ctx = PartitionCtx(props=props, variables=self._scope(context, pid),
                               now_ms=self.now_ms)
            for f in (plan.filter, plan.where):
                if f is not None:
                    rows = [r for r in rows if f(r, ctx)]
            rs = plan.resultset.build(MemoryNamespace(), ctx, want_old=False)
            if rows:
                rs.process(list(rows), [])
            part = rs.snapshot(rows, hashed=True)
            if plan.distinct:
                from operators.pipeline import distinct_rows

                part = distinct_rows(part)
            out.extend(rs.order(part))
        return out

    def partition_props(self, context: str | None, pid: Any) -> dict[str, Any]:
        """Built-in context properties of a partition ({} without a context)."""
        if context is None or context not in self.contexts:
            return {}
        return self.contexts[context].manager.props(pid)

    def iterate(self, statement: str,
                select: Callable[[dict[str, Any]], bool] | None = None) -> Rows:
        """Current rows of a statement: every context partition in turn, or those that
        ``select`` picks by their context properties (Esper ref. 4.9 statement iteration)."""
        st = self.statements[statement]
        self._undefer(st)
        out: Rows = []
        for pid, p in st.pipelines.items():
            if select is None or select(self.partition_props(st.plan.context, pid)):
                out.extend(p.iterate())
        return out

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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.runtime.plan import StatementPlan
from operators.base import PartitionCtx, Row, Rows
from operators.contexts.managers import Change, Manager
from operators.pipeline import Pipeline
from operators.state import MemoryStore

Listener = Callable[[str, Rows, Rows, Any], None]
"""Called as listener(statement name, new rows, old rows, context partition id)."""


@dataclass
class _Stmt:
    plan: StatementPlan
    index: int
    pipelines: dict[Any, Pipeline] = field(default_factory=dict)


@dataclass
class _Ctx:
    name: str
    index: int
    manager: Manager
    statements: list[_Stmt] = field(default_factory=list)


class Engine:
    """Deployed statements of one runtime (one Kafka partition, or the embedded runtime)."""

    def __init__(self, store: Any = None, now_ms: int = 0) -> None:
        self.store = store if store is not None else MemoryStore()
        self.now_ms = now_ms
        self.statements: dict[str, _Stmt] = {}
        self.order: list[_Stmt] = []
        self.contexts: dict[str, _Ctx] = {}
        self.by_type: dict[str, list[_Stmt]] = {}
        self.variables: dict[str, Any] = {}
        self.listeners: list[Listener] = []
        self._heap: list[tuple[int, tuple, Any]] = []
        self._due: dict[Any, int] = {}
        self._prio: dict[Any, tuple] = {}
        self._seq = 0
        self._queue: deque[tuple[str, Row]] = deque()
        self._busy = False
        self._excluded: set[tuple[str, Any]] = set()
        self.windows: dict[str, _Stmt] = {}
        self.consumers: dict[str, list[_Stmt]] = {}

    # -- deployment ---------------------------------------------------------
    def deploy(self, plan: StatementPlan) -> None:
        """Add a statement (a context declaration, a schema, or a query)."""
        if plan.kind == "variable":
            self.variables[plan.variable or plan.name] = plan.initial
            return
        if plan.kind == "context":
            mgr = plan.context_spec.build(
                self.store.namespace("c", plan.context_spec.name), self._root_ctx())
            c = _Ctx(plan.context_spec.name, len(self.contexts), mgr)
            self.contexts[c.name] = c
            self._apply(c, mgr.deploy(self.now_ms))
            self._arm(("c", c.name), mgr.next_timer, (1, c.index))
            return
        if plan.kind not in ("query", "window", "on"):
            return
        st = _Stmt(plan, len(self.order))
        self.statements[plan.name] = st
        self.order.append(st)
        if plan.kind == "on":
            self.by_type.setdefault(plan.action.trigger_type, []).append(st)
            return
        if plan.kind == "window":
            self.windows[plan.window] = st
        if plan.kind == "query" and plan.window is not None:
            self.consumers.setdefault(plan.window, []).append(st)
        else:
            for t in plan.pipeline.types():
                self.by_type.setdefault(t, []).append(st)
        if plan.context is None:
            self._pipeline(st, 0)
        else:
            c = self.contexts[plan.context]
            c.statements.append(st)
            for pid in c.manager.live():
                self._pipeline(st, pid)

    def _root_ctx(self) -> PartitionCtx:
        return PartitionCtx(variables=self.variables, now_ms=self.now_ms)

    def _pipeline(self, st: _Stmt, pid: Any) -> Pipeline:
        p = st.pipelines.get(pid)
        if p is None:
            props: dict[str, Any] = {}
            if st.plan.context is not None:
                props = self.contexts[st.plan.context].manager.props(pid)
            ctx = PartitionCtx(props=props, variables=self.variables, now_ms=self.now_ms)
            ns = self.store.namespace("s", st.plan.name, repr(pid))
            p = st.plan.pipeline.build(ns, ctx)
            st.pipelines[pid] = p
            self._seq += 1
            p_key = ("p", st.plan.name, pid)
            self._arm(p_key, p.next_timer, (0, st.index, self._seq))
        return p

    # -- timers -------------------------------------------------------------
    def _arm(self, key: Any, next_timer: Callable[[], int | None],
             prio: tuple | None = None) -> None:
        if prio is None:
            prio = self._prio[key]
        else:
            self._prio[key] = prio
        due = next_timer()
        if due is None:
            self._due.pop(key, None)
            return
        if self._due.get(key) == due:
            return
        self._due[key] = due
        heapq.heappush(self._heap, (due, prio, key))

    def next_timer(self) -> int | None:
        """The earliest due time of anything deployed (for runners that step time)."""
        while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def advance_time(self, to_ms: int) -> None:
        """Move the clock to ``to_ms``, firing each due timer at its own due time."""
        if to_ms < self.now_ms:
            raise ValueError(f"time cannot move backwards ({to_ms} < {self.now_ms})")
        while self._heap and self._heap[0][0] <= to_ms:
            due, prio, key = heapq.heappop(self._heap)
            if self._due.get(key) != due:
                continue
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
                    continue
                new, old = p.on_time(due)
                self._emit(st, key[2], new, old)
                self._arm(key, p.next_timer, prio)
            self._drain()
        self.now_ms = to_ms

    # -- events -------------------------------------------------------------
    def send(self, type_name: str, event: Row) -> None:
        """Deliver one event at the current time (and whatever it inserts into streams)."""
        self._queue.append((type_name, event))
        self._drain()

    def _drain(self) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            while self._queue:
                self._process(*self._queue.popleft())
        finally:
            self._busy = False

    def _process(self, type_name: str, event: Row) -> None:
        now = self.now_ms
        self._excluded.clear()
        for c in self.contexts.values():
            changes = c.manager.on_event(type_name, event, now)
            if changes:
                self._apply(c, changes)
            self._arm(("c", c.name), c.manager.next_timer)
        for st in self.by_type.get(type_name, ()):
            ctx_name = st.plan.context
            if ctx_name is None:
                pids: list[Any] = [0]
            else:
                c = self.contexts[ctx_name]
                pids = c.manager.route(type_name, event, now)
            for pid in pids:
                if (ctx_name, pid) in self._excluded:
                    continue
                if st.plan.kind == "on":
                    self._on_action(st, pid, event)
                    continue
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
                for st in c.statements:
                    p = st.pipelines.pop(ch.pid, None)
                    if p is None:
                        continue
                    self._due.pop(("p", st.plan.name, ch.pid), None)
                    self._prio.pop(("p", st.plan.name, ch.pid), None)
                    new, old = p.terminate(now)
                    self._emit(st, ch.pid, new, old)
            else:
                if ch.exclude:
                    self._excluded.add((c.name, ch.pid))
                for st in c.statements:
                    self._pipeline(st, ch.pid)

    def _on_action(self, st: _Stmt, pid: Any, event: Row) -> None:
        """Run an on-statement for its triggering event (002 named windows)."""
        action = st.plan.action
        now = self.now_ms
        ctx = PartitionCtx(variables=self.variables, now_ms=now)
        if not action.matches(event, ctx):
            return
        if action.kind == "set":
            action.run_set(event, ctx)
            return
        wst = self.windows[action.window]
        wp = self._pipeline(wst, pid)
        rows = action.selected(event, list(wp.view.contents()) if wp.view else [], ctx)
        out = action.project(event, rows, ctx)
        if action.kind == "delete" or action.and_delete:
            new, old = wp.remove(rows, now)
            self._emit(wst, pid, new, old)
            self._arm(("p", wst.plan.name, pid), wp.next_timer)
        if out:
            self._emit(st, pid, out, [])

    def _emit(self, st: _Stmt, pid: Any, new: Rows, old: Rows) -> None:
        if not new and not old:
            return
        for listener in self.listeners:
            listener(st.plan.name, new, old, pid)
        if st.plan.kind == "window":
            now = self.now_ms
            for cst in self.consumers.get(st.plan.window, ()):
                cpid = pid if cst.plan.context is not None else 0
                p = self._pipeline(cst, cpid)
                n, o = p.on_rows(new, old, now)
                self._emit(cst, cpid, n, o)
                self._arm(("p", cst.plan.name, cpid), p.next_timer)
        target = st.plan.insert_into
        if target is not None:
            rows = old if st.plan.insert_stream == "rstream" else new
            for r in rows:
                self._queue.append((target, r))

    # -- queries ------------------------------------------------------------
    def iterate(self, statement: str, pid: Any = None) -> Rows:
        """Current rows of a statement (all partitions, or one)."""
        st = self.statements[statement]
        out: Rows = []
        for p_id, p in st.pipelines.items():
            if pid is None or p_id == pid:
                out.extend(p.iterate())
        return out

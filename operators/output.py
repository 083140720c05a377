"""Output rate limiting (002 §2.10, 000 §4.7): when result rows reach the listener.

Triggers: every N events, every time period (timed from the first arrival), ``when``
expression, ``when terminated``.  Kinds: default/all (every row), first, last, snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from operators.base import Emit, Expr, PartitionCtx, Rows, StateNamespace


@dataclass(frozen=True)
class Assignment:
    """``then set variable = expr``."""

    variable: str
    expr: Expr


@dataclass(frozen=True)
class OutputSpec:
    """The validated output clause."""

    kind: str = "all"  # all | first | last | snapshot
    every_events: int | None = None
    every_ms: int | None = None
    when: Expr | None = None
    when_terminated: bool = False
    terminated_and: Expr | None = None
    then_set: tuple[Assignment, ...] = ()
    limited: bool = False  # False: no output clause, rows pass through

    def describe(self) -> str:
        if not self.limited:
            return "output[immediate]"
        parts = [f"output[{self.kind}"]
        if self.every_events is not None:
            parts.append(f" every {self.every_events} events")
        if self.every_ms is not None:
            parts.append(f" every {self.every_ms} ms")
        if self.when is not None:
            parts.append(" when <expr>")
        if self.when_terminated:
            parts.append(" when terminated")
        return "".join(parts) + "]"

    def build(self, state: StateNamespace, ctx: PartitionCtx,
              snapshot: Callable[[], Rows], always_row: bool) -> OutputLimiter:
        return OutputLimiter(self, state, ctx, snapshot, always_row)


class OutputLimiter:
    """Buffers result rows and releases them when the output condition holds."""

    def __init__(self, spec: OutputSpec, state: StateNamespace, ctx: PartitionCtx,
                 snapshot: Callable[[], Rows], always_row: bool) -> None:
        self.spec = spec
        self.state = state
        self.ctx = ctx
        self.snapshot = snapshot
        self.always_row = always_row
        meta = state.get("meta") or [None, 0, 0, 0, None, 0, False]
        # due time, seq, count_insert, count_remove, last output time, event count, first-done
        self.due, self.seq, self.count_insert, self.count_remove, self.last_out, \
            self.events, self.first_done = meta
        self.buffer: list[tuple[int, Rows, Rows]] = []
        for k, v in state.items():
            if isinstance(k, list | tuple) and k and k[0] == "b":
                self.buffer.append((k[1], v[0], v[1]))
        self.buffer.sort(key=lambda e: e[0])

    def _save(self) -> None:
        self.state.put("meta", [self.due, self.seq, self.count_insert, self.count_remove,
                                self.last_out, self.events, self.first_done])

    def _push(self, new: Rows, old: Rows) -> None:
        self.seq += 1
        self.buffer.append((self.seq, new, old))
        self.state.put(("b", self.seq), [new, old])
        self.count_insert += len(new)
        self.count_remove += len(old)

    def _release(self, now_ms: int) -> Emit:
        kind = self.spec.kind
        if kind == "snapshot":
            out_new, out_old = list(self.snapshot()), []
        else:
            out_new, out_old = [], []
            for _, n, o in self.buffer:
                out_new.extend(n)
                out_old.extend(o)
            if kind == "last":
                out_new = out_new[-1:]
                out_old = out_old[-1:]
            if not out_new and not out_old and self.always_row and kind != "first":
                out_new = list(self.snapshot())
        for seq, _, _ in self.buffer:
            self.state.delete(("b", seq))
        self.buffer = []
        self.count_insert = 0
        self.count_remove = 0
        self.events = 0
        self.first_done = False
        self.last_out = now_ms
        self._then_set()
        self._save()
        return out_new, out_old

    def _then_set(self) -> None:
        for a in self.spec.then_set:
            self.ctx.variables[a.variable] = a.expr({}, self.ctx)

    def _builtins(self, now_ms: int) -> dict[str, Any]:
        out = self.ctx.output
        out["count_insert"] = self.count_insert
        out["count_remove"] = self.count_remove
        out["count_insert_total"] = self.count_insert
        out["count_remove_total"] = self.count_remove
        out["last_output_timestamp"] = self.last_out
        out["current_timestamp"] = now_ms
        return out

    def on_result(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Rows produced by the result set for one update."""
        spec = self.spec
        if not spec.limited:
            return new, old
        if not new and not old and not self.always_row:
            return [], []
        if spec.kind == "first" and not spec.when_terminated:
            if spec.every_ms is not None and self.due is None:
                self.due = now_ms + spec.every_ms
            if not self.first_done and (new or old):
                self.first_done = True
                self._save()
                return new, old
            self.events += len(new)
            if spec.every_events is not None and self.events >= spec.every_events:
                self.events = 0
                self.first_done = False
            self._save()
            return [], []
        self._push(new, old)
        if spec.every_ms is not None and self.due is None:
            self.due = now_ms + spec.every_ms
        if spec.every_events is not None:
            self.events += max(len(new), len(old))
            if self.events >= spec.every_events:
                return self._release(now_ms)
        if spec.when is not None:
            self._builtins(now_ms)
            if spec.when({}, self.ctx):
                return self._release(now_ms)
        self._save()
        return [], []

    def next_timer(self) -> int | None:
        return self.due

    def on_time(self, now_ms: int) -> Emit:
        """A periodic output is due: release and re-arm from the due time."""
        if self.due is None or now_ms < self.due:
            return [], []
        self.due += self.spec.every_ms  # type: ignore[operator]
        if self.spec.kind == "first":
            self.first_done = False
            self._save()
            return [], []
        return self._release(now_ms)

    def on_terminate(self, now_ms: int) -> Emit:
        """The context partition ends: ``when terminated`` releases what is due."""
        spec = self.spec
        if not spec.when_terminated:
            return [], []
        if spec.terminated_and is not None:
            self._builtins(now_ms)
            if not spec.terminated_and({}, self.ctx):
                return [], []
        return self._release(now_ms)

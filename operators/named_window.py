"""On-demand actions against a named window (002 named windows, 000 §4.6).

A named window is an ordinary pipeline whose insert and remove streams feed the
statements that select from it.  On-actions (``on Trigger delete|select ... from W``)
look at the window's current rows together with the triggering event; a row they see is
the union of the window row and the trigger, plus each under its alias, so
``lw.account = ww.account`` and unqualified names both resolve.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from operators.base import Emit, Expr, PartitionCtx, Row, Rows
from operators.output import Assignment


@dataclass(frozen=True)
class OnActionSpec:
    """``on Trigger[(filter)] [as t] delete|select|set ...``."""

    kind: str  # delete | select | set | update
    trigger_type: str
    trigger_filter: Expr | None = None
    trigger_alias: str | None = None
    window: str | None = None
    window_alias: str | None = None
    where: Expr | None = None
    columns: tuple[tuple[str, Expr], ...] = ()
    wildcard: bool = False
    assignments: tuple[Assignment, ...] = ()
    and_delete: bool = False
    text: str = field(default="", compare=False)

    def describe(self) -> list[str]:
        out = [f"on {self.trigger_type}"]
        if self.window:
            out.append(f"{self.kind} from named window {self.window}")
        else:
            out.append(f"{self.kind} variables " + ", ".join(
                a.variable for a in self.assignments))
        return out

    def types(self) -> frozenset[str]:
        return frozenset({self.trigger_type})

    def matches(self, event: Row, ctx: PartitionCtx) -> bool:
        f = self.trigger_filter
        return f is None or bool(f(event, ctx))

    def combined(self, trigger: Row, row: Row) -> Row:
        """The row on-action expressions see."""
        out = {**trigger, **row}
        if self.trigger_alias:
            out[self.trigger_alias] = trigger
        if self.window:
            out[self.window] = row
        if self.window_alias:
            out[self.window_alias] = row
        if not self.trigger_alias:
            out[self.trigger_type] = trigger
        return out

    def selected(self, trigger: Row, rows: list[Row], ctx: PartitionCtx) -> list[Row]:
        """Window rows the action applies to (those passing ``where``)."""
        w = self.where
        if w is None:
            return list(rows)
        return [r for r in rows if w(self.combined(trigger, r), ctx)]

    def project(self, trigger: Row, rows: Rows, ctx: PartitionCtx) -> Rows:
        """Output rows of an on-select (or the deleted rows of an on-delete)."""
        if self.kind == "delete" or (self.wildcard and not self.columns):
            return list(rows)
        out = []
        for r in rows:
            env = self.combined(trigger, r)
            row = dict(r) if self.wildcard else {}
            for name, expr in self.columns:
                row[name] = expr(env, ctx)
            out.append(row)
        return out

    def run_set(self, trigger: Row, ctx: PartitionCtx) -> None:
        """``on T set var = expr``: assignments see the triggering event."""
        env = {**trigger}
        if self.trigger_alias:
            env[self.trigger_alias] = trigger
        for a in self.assignments:
            ctx.variables[a.variable] = a.expr(env, ctx)


def remove_from(pipeline: Any, rows: Rows, now_ms: int) -> Emit:
    """Take rows out of a named window's data window; returns the window's emission."""
    if not rows or pipeline.view is None:
        return [], []
    return pipeline.remove(rows, now_ms)

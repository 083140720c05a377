"""On-actions against a named window or a table (Esper ref. 2, named windows; 4.6/4.7).

``on Trigger[(filter)] [as t] <action>``: the action sees the target's current rows
together with the triggering event; a row it sees is the union of the target row and the
trigger, plus each under its alias (and under the window/table name), so
``lw.account = ww.account`` and unqualified names both resolve.  Actions:

* ``delete from W [where]`` — matching rows leave (posted as the statement's rows);
* ``select [and delete] ... from W [where]`` — matching rows are projected (optionally
  aggregated) and, with ``and delete``, leave;
* ``update W set c = expr, ... [where]`` — each matching row is replaced by an updated
  copy; assignments apply in order to the copy, so a later one sees the earlier ones
  (Esper's update helper); ``initial.c`` reads the row as it was;
* ``merge W [where] when [not] matched [and cond] then ...`` — Esper's on-merge: with no
  matching row the first applicable ``when not matched`` clause runs; otherwise, per
  matching row, the first applicable ``when matched`` clause runs; a clause runs each of
  its actions whose own ``where`` holds (Esper ref. 2, the on-merge walk-through);
* ``set var = expr, ...`` — variables.

The spec computes what changes (``ActionResult``); the runtime applies it to the window
(whose consumers then see the remove and insert streams) or to the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from operators.base import Emit, Expr, PartitionCtx, Row, Rows
from operators.output import Assignment


@dataclass(frozen=True)
class MergeActionSpec:
    """One ``then`` action of an on-merge clause."""

    kind: str  # update | delete | insert
    where: Expr | None = None
    assignments: tuple[Assignment, ...] = ()
    columns: tuple[tuple[str, Expr], ...] = ()
    wildcard: bool = False
    into: str | None = None


@dataclass(frozen=True)
class MergeClauseSpec:
    """``when [not] matched [and cond] then action ...``; ``always`` for a bare
    ``insert select`` item, which inserts for every trigger (Esper ref. 2: 'on Withdrawal
    merge WithdrawalWindow insert select *' inserts each event)."""

    matched: bool
    condition: Expr | None
    actions: tuple[MergeActionSpec, ...]
    always: bool = False


@dataclass
class ActionResult:
    """What one triggering event does: rows the statement posts and changes to the target."""

    new: Rows = field(default_factory=list)
    old: Rows = field(default_factory=list)
    inserted: Rows = field(default_factory=list)
    deleted: Rows = field(default_factory=list)
    updated: list[tuple[Row, Row]] = field(default_factory=list)
    routed: list[tuple[str, Row]] = field(default_factory=list)
    merged_new: Rows = field(default_factory=list)
    merged_old: Rows = field(default_factory=list)
    """An on-merge's rows entering and leaving the target, in the order its actions ran."""

    @property
    def changes(self) -> bool:
        """Whether the target changes."""
        return bool(self.inserted or self.deleted or self.updated)


@dataclass(frozen=True)
class OnActionSpec:
    """``on Trigger[(filter)] [as t] delete|select|update|merge|set ...``."""

    kind: str  # delete | select | set | update | merge
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
    target: str = "window"  # window | table
    clauses: tuple[MergeClauseSpec, ...] = ()
    resultset: Any = None
    """on-select with aggregation: the ResultSetSpec over the matching rows."""
    distinct: bool = False
    target_props: tuple[str, ...] = ()
    """Columns of the target (rows inserted by on-merge get every one of them)."""
    range_keys: tuple[str, ...] = ()
    """Target properties the where clause compares in a range: matches come in ascending
    order of the first (Esper's sorted index, see ``range_keys`` in the planner)."""
    indexed: bool = False
    """The where clause keys the lookup (an equality or a range with the trigger): the
    matches come in the order they entered the target, not in its iteration order."""
    joined: bool = False
    """An on-select's bare ``*``: each row joins the target row and the trigger, under
    their aliases (``stream_0`` and ``stream_1`` without), as Esper 9 posts it."""

    def describe(self) -> list[str]:
        """The action for ``kepl explain``."""
        out = [f"on {self.trigger_type}"]
        if self.window:
            out.append(f"{self.kind} {self.target} {self.window}")
        else:
            out.append(f"{self.kind} variables " + ", ".join(
                a.variable for a in self.assignments))
        return out

    def types(self) -> frozenset[str]:
        """Event types that trigger the action."""
        return frozenset({self.trigger_type})

    def matches(self, event: Row, ctx: PartitionCtx) -> bool:
        """Whether the triggering event passes the trigger filter."""
        f = self.trigger_filter
        return f is None or bool(f(event, ctx))

    def combined(self, trigger: Row, row: Row) -> Row:
        """The row on-action expressions see."""
        out = {**trigger, **row}
        if self.trigger_alias:
            out[self.trigger_alias] = trigger
        else:
            out[self.trigger_type] = trigger
        if self.window:
            out[self.window] = row
        if self.window_alias:
            out[self.window_alias] = row
        return out

    def _trigger_env(self, trigger: Row) -> Row:
        """The row expressions see when no target row is involved."""
        env = dict(trigger)
        if self.trigger_alias:
            env[self.trigger_alias] = trigger
        env[self.trigger_type] = trigger
        return env

    def selected(self, trigger: Row, rows: list[Row], ctx: PartitionCtx) -> list[Row]:
        """Target rows the action applies to (those passing ``where``)."""
        w = self.where
        if w is None:
            return list(rows)
        out = [r for r in rows if _true(w(self.combined(trigger, r), ctx))]
        if self.range_keys and len(out) > 1:
            key = self.range_keys[0]
            out.sort(key=lambda r: r[key])  # stable: arrival order among equal values
        return out

    def project(self, trigger: Row, rows: Rows, ctx: PartitionCtx) -> Rows:
        """Output rows of an on-select (or the deleted rows of an on-delete)."""
        if self.kind == "delete" or (self.wildcard and not self.columns
                                     and self.resultset is None and not self.joined):
            return list(rows)
        envs = [self.combined(trigger, r) for r in rows]
        if self.resultset is not None:
            from operators.state import MemoryNamespace

            # a fresh result set per trigger (Esper clears it): an aggregating on-select
            # posts its row even when nothing matches (count 0)
            rs = self.resultset.build(MemoryNamespace(), ctx, want_old=False)
            if envs:
                rs.process(envs, [])
            rows_out = rs.snapshot(envs, hashed=True)
            if self.distinct:
                from operators.pipeline import distinct_rows

                rows_out = distinct_rows(rows_out)
            return rs.order(rows_out)
        out = []
        if self.joined:
            wkey = self.window_alias or "stream_0"
            tkey = self.trigger_alias or "stream_1"
        for r, env in zip(rows, envs):
            if self.joined:
                row = {wkey: r, tkey: trigger}
            else:
                row = dict(r) if self.wildcard else {}
            for name, expr in self.columns:
                row[name] = expr(env, ctx)
            out.append(row)
        return out

    def run_set(self, trigger: Row, ctx: PartitionCtx) -> Row:
        """``on T set var = expr``: assignments see the triggering event, apply in order.

        Returns the statement's output row: each variable assigned, by name, with its
        value after all the assignments (Esper posts it for every triggering event)."""
        env = self._trigger_env(trigger)
        for a in self.assignments:
            ctx.variables[a.variable] = a.expr(env, ctx)
        return {a.variable: ctx.variables.get(a.variable) for a in self.assignments}

    # -- the actions ---------------------------------------------------------
    def run(self, trigger: Row, rows: Rows, ctx: PartitionCtx) -> ActionResult:
        """What the triggering event does to the target's current ``rows``."""
        kind = self.kind
        res = ActionResult()
        if kind == "merge":
            return self._merge(trigger, rows, ctx)
        matched = self.selected(trigger, rows, ctx)
        if kind == "delete":
            res.deleted = matched
            res.new = list(matched)
        elif kind == "select":
            res.new = self.project(trigger, matched, ctx)
            if self.and_delete:
                res.deleted = matched
        elif kind == "update":
            for r in matched:
                res.updated.append((r, self._updated(trigger, r, self.assignments, ctx)))
            res.new = [n for _, n in res.updated]
            res.old = [o for o, _ in res.updated]
        return res

    def _updated(self, trigger: Row, row: Row, assignments: tuple[Assignment, ...],
                 ctx: PartitionCtx) -> Row:
        """An updated copy of ``row``: assignments apply in order to the copy."""
        copy = dict(row)
        for a in assignments:
            env = self.combined(trigger, copy)
            env["initial"] = row
            copy[a.variable] = a.expr(env, ctx)
        return copy

    def _merge(self, trigger: Row, rows: Rows, ctx: PartitionCtx) -> ActionResult:
        """Esper ref. 2, on-merge for one trigger: unconditional inserts, then matched/unmatched."""
        res = ActionResult()
        env = self._trigger_env(trigger)
        for clause in self.clauses:
            if clause.always:
                self._apply_actions(clause, trigger, None, env, ctx, res)
        if all(c.always for c in self.clauses):
            res.new = list(res.inserted)
            return res
        matched = self.selected(trigger, rows, ctx)
        if not matched:
            env = self._trigger_env(trigger)
            for clause in self.clauses:
                if clause.matched or clause.always:
                    continue
                if clause.condition is not None and not _true(clause.condition(env, ctx)):
                    continue
                self._apply_actions(clause, trigger, None, env, ctx, res)
                break
        else:
            for row in matched:
                env = self.combined(trigger, row)
                for clause in self.clauses:
                    if not clause.matched or clause.always:
                        continue
                    if clause.condition is not None and not _true(clause.condition(env, ctx)):
                        continue
                    self._apply_actions(clause, trigger, row, env, ctx, res)
                    break
        # Esper ref. 6.8 on-merge: the statement posts each row's change in the order the
        # matched rows (and their actions) ran, as the window takes them
        res.new, res.old = res.merged_new, res.merged_old
        return res

    def _apply_actions(self, clause: MergeClauseSpec, trigger: Row, row: Row | None,
                       env: Row, ctx: PartitionCtx, res: ActionResult) -> None:
        """Run a clause's actions whose own where holds, in order."""
        current = row
        for act in clause.actions:
            if act.where is not None and not _true(act.where(env, ctx)):
                continue
            if act.kind == "delete" and current is not None:
                res.deleted.append(current)
                res.merged_old.append(current)
                current = None
            elif act.kind == "update" and current is not None:
                new = self._updated(trigger, current, act.assignments, ctx)
                res.updated.append((current, new))
                res.merged_old.append(current)
                res.merged_new.append(new)
                current = new
            elif act.kind == "insert":
                out = self._insert_row(act, env, trigger, ctx)
                if act.into is not None:
                    res.routed.append((act.into, out))
                else:
                    res.inserted.append(out)
                    res.merged_new.append(out)

    def _insert_row(self, act: MergeActionSpec, env: Row, trigger: Row,
                    ctx: PartitionCtx) -> Row:
        """The row a merge insert produces: ``select *`` copies the trigger."""
        row: Row = {}
        if act.wildcard:
            row.update(trigger)
        for name, expr in act.columns:
            row[name] = expr(env, ctx)
        if act.into is None and self.target_props:
            row = {p: row.get(p) for p in self.target_props}
        return row


def _true(v: Any) -> bool:
    """Esper's boolean test: null counts as false."""
    return v is not None and bool(v)


def remove_from(pipeline: Any, rows: Rows, now_ms: int) -> Emit:
    """Take rows out of a named window's data window; returns the window's emission."""
    if not rows or pipeline.view is None:
        return [], []
    return pipeline.remove(rows, now_ms)

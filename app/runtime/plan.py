"""What the planner hands to a runtime for one statement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from operators.pipeline import PipelineSpec


@dataclass(frozen=True)
class StatementPlan:
    """A deployable statement: a query pipeline, a context, a schema or a variable."""

    name: str
    kind: str  # query | context | schema | variable | window | table
    epl: str = ""
    pipeline: PipelineSpec | None = None
    context: str | None = None
    context_spec: Any = None
    insert_into: str | None = None
    insert_stream: str = "istream"
    select_stream: str | None = None
    """Set when the pipeline posts both streams only because ``insert into`` routes one
    the select clause does not deliver: the stream (istream | rstream) listeners get."""
    schema: dict[str, str] = field(default_factory=dict)
    initial: Any = None
    columns: tuple[str, ...] = ()
    window: str | None = None
    """kind 'window': the named window it holds; kind 'query': the window it reads."""
    variable: str | None = None
    """kind 'variable': the variable's name."""
    action: Any = None
    """kind 'on': the OnActionSpec."""
    table: Any = None
    """kind 'table': the TableSpec; an 'into table' query or a table on-action: the table
    it uses (so a runtime that received only this plan can still place the table)."""
    tables: tuple[str, ...] = ()
    """kind 'query' / 'on': the table the statement aggregates into or acts on, first,
    then the tables its expressions read (``T[key].column``, Esper ref. 4.7 Context and Tables)."""
    var_decl: Any = None
    """kind 'variable': the VariableDecl."""
    event_type: str | None = None
    """kind 'window': the window's underlying event type (context routing, Esper ref. 4.6)."""
    subqueries: Any = None
    """kind 'on': the SubqueryHostSpec of its expressions' subqueries (None: none)."""
    priority: int = 0
    """``@Priority(n)``: with an event that ends a context partition and that a statement
    of the context also reads, the higher priority goes first (Esper ref. 4.2.3 note);
    statements an event matches take it highest priority first."""
    drop: bool = False
    """``@Drop``: an event this statement's filter takes goes to no statement of lower
    priority (Esper's prioritized execution)."""

    def listened(self, new: list, old: list) -> tuple[list, list]:
        """What listeners get of a pipeline's output: the select clause's stream, the
        remove stream posted as new rows for ``select rstream`` (Esper)."""
        if self.select_stream == "rstream":
            return old, []
        if self.select_stream == "istream":
            return new, []
        return new, old

    def routed(self, new: list, old: list) -> list:
        """The rows ``insert [istream|rstream|irstream] into`` routes, insert stream first.

        The insert-into stream selector alone picks them from the statement's insert and
        remove streams, whatever the select clause delivers to listeners (Esper: ``insert
        rstream into`` routes the remove stream of a plain ``select``)."""
        if self.insert_stream == "rstream":
            return old
        if self.insert_stream == "irstream":
            return new + old
        if self.insert_stream == "none":
            return []
        return new

    def explain(self) -> list[str]:
        """Human-readable plan lines for ``kepl explain``."""
        lines = [f"statement {self.name} ({self.kind})"]
        if self.kind == "context" and self.context_spec is not None:
            lines.append(f"  context {self.context_spec.name}: {self.context_spec.describe()}")
        if self.context is not None:
            lines.append(f"  context partition by: {self.context}")
        if self.priority:
            lines.append(f"  priority: {self.priority}")
        if self.window is not None:
            lines.append(f"  named window: {self.window}")
        if self.action is not None:
            lines += [f"  -> {s}" for s in self.action.describe()]
        if self.subqueries is not None:
            lines += [f"  -> {s}" for s in self.subqueries.describe()]
        if self.table is not None:
            lines.append(f"  {self.table.describe()}")
        if self.var_decl is not None:
            d = self.var_decl
            lines.append(f"  {'constant' if d.constant else 'variable'} {d.type_name} {d.name}"
                         f" = {d.coerce(d.initial)!r}")
        if self.pipeline is not None:
            lines += [f"  -> {s}" for s in self.pipeline.describe()]
        if self.insert_into is not None:
            lines.append(f"  -> insert {self.insert_stream} into {self.insert_into}")
        return lines


@dataclass(frozen=True)
class OnDemandPlan:
    """A fire-and-forget select over a named window or a table (``kepl query``)."""

    source: str
    kind: str  # window | table
    resultset: Any
    where: Any = None
    filter: Any = None
    distinct: bool = False
    columns: tuple[str, ...] = ()

"""The planner: AST → StatementPlan (operator specs, context partitioning, topics).

Every decision about which operators a statement needs is taken here, once, so the
runtimes only build and run what the plan says.  Constructs that have no operator yet
raise NotSupported with the construct's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from app.epl import ast
from app.epl.declared import check_body, inline
from app.epl.errors import EplError, verr
from app.epl.expr import (
    NotSupportedExpr,
    TableEnv,
    constant_value,
)
from app.epl.functions import using
from app.epl.parser import parse_statement
from app.epl.planning.base import column_name, construct_name
from app.epl.planning.contexts import ContextPlanning, provided
from app.epl.planning.named_windows import NamedWindowPlanning
from app.epl.planning.results import ResultPlanning
from app.epl.planning.select import SelectPlanning
from app.epl.planning.subqueries import subquery_numbers
from app.epl.planning.tables import TablePlanning
from app.epl.prev import window_calls
from app.runtime.catalog import Catalog, NotSupported
from app.runtime.plan import OnDemandPlan, StatementPlan


class Planner(SelectPlanning, NamedWindowPlanning, TablePlanning, ResultPlanning,
              ContextPlanning):
    """Plans statements against a catalog, registering declarations as it goes."""

    def plan_text(self, epl: str, name: str) -> StatementPlan:
        return self._planned(epl, lambda node: self.plan(node, name, epl))

    def _planned(self, epl: str, plan: Any) -> Any:
        """Parse ``epl`` and plan it; errors carry the source, unsupported expressions
        become NotSupported."""
        node = parse_statement(epl)
        self.source = epl
        try:
            with using(self.catalog.functions):
                return plan(self._inlined(node))
        except NotSupportedExpr as e:
            raise NotSupported(str(e)) from None
        except EplError as e:
            if e.source is None:
                e.source = epl
            raise

    def _inlined(self, node: ast.Statement) -> ast.Statement:
        """The statement with its own and the shared declared expressions inlined."""
        local: tuple = ()
        if isinstance(node, ast.Declared):
            local, node = node.expressions, node.statement
        if isinstance(node, ast.CreateExpression):
            return node
        return inline(node, local, self.catalog.expressions,
                      frozenset(self.catalog.variables))

    def plan(self, node: ast.Statement, name: str, epl: str = "") -> StatementPlan:
        plan = self._plan(node, name, epl)
        priority = self._priority(node)
        if priority:
            plan = replace(plan, priority=priority)
        if any(a.name.lower() == "drop" for a in getattr(node, "annotations", ())):
            plan = replace(plan, drop=True)
        return plan

    def _priority(self, node: ast.Statement) -> int:
        """The ``@Priority(n)`` annotation's value (0 without one)."""
        for a in getattr(node, "annotations", ()):
            if a.name.lower() != "priority":
                continue
            try:
                value = constant_value(a.args[0]) if len(a.args) == 1 else None
            except ValueError:
                value = None
            if not isinstance(value, int) or isinstance(value, bool):
                raise verr("@Priority takes one integer, as in @Priority(1)", a)
            return value
        return 0

    def _plan(self, node: ast.Statement, name: str, epl: str = "") -> StatementPlan:
        self._check_context_variables(node)
        self._check_context_properties(node)
        self.tenv = TableEnv(self.catalog.tables, getattr(node, "context", None))
        self.subquery_numbers = subquery_numbers(node)
        plan = self._plan_kind(node, name, epl)
        if self.tenv.used and plan.kind in ("query", "on"):
            # read-accessed tables: the runtime hands their instances to the statement
            extra = tuple(sorted(self.tenv.used - set(plan.tables)))
            plan = replace(plan, tables=plan.tables + extra)
        return plan

    def _plan_kind(self, node: ast.Statement, name: str, epl: str) -> StatementPlan:
        if not isinstance(node, (ast.SelectStatement, ast.CreateContext, ast.CreateSchema)):
            for call in window_calls(node):
                raise NotSupported(f"{call.name}() outside a select statement (kepl runs "
                                   "it on one event stream)")
        plan = _STATEMENT_PLANNERS.get(type(node))
        if plan is None:
            raise NotSupported(construct_name(node))
        if isinstance(node, ast.SelectStatement):
            node = self._to_schema(_insert_columns(node))
        return plan(self, node, name, epl)

    def _to_schema(self, node: ast.SelectStatement) -> ast.SelectStatement:
        """``insert into X select ...`` where X is a declared event type: the rows are X's
        events, its properties the select does not name null (Esper ref. 5, insert
        into: the select clause populates the properties of the declared type)."""
        into = node.insert_into
        fields = self.catalog.schemas.get(into.name) if into is not None else None
        if not fields or not all(isinstance(i, ast.SelectItem) for i in node.select_items):
            return node
        named = {column_name(i) for i in node.select_items}
        missing = [f for f in fields if f not in named]
        if not missing or not named <= set(fields):
            return node
        pos = into.pos
        return replace(node, select_items=node.select_items + tuple(
            ast.SelectItem(ast.Literal(None, "null", pos=pos), f, pos=pos) for f in missing))

    def create_schema(self, node: ast.CreateSchema, name: str, epl: str) -> StatementPlan:
        """Register an event type declared in EPL."""
        self.catalog.schemas[node.name] = {f: str(t) for f, t in node.fields}
        return StatementPlan(name, "schema", epl, schema=self.catalog.schemas[node.name])

    def create_context(self, node: ast.CreateContext, name: str, epl: str) -> StatementPlan:
        """Register a context declaration."""
        spec = self.context_spec(node.name, node.spec)
        self.catalog.contexts[node.name] = spec
        self.catalog.context_names[node.name] = provided(node.spec)
        return StatementPlan(name, "context", epl, context_spec=spec)

    def create_expression(self, node: ast.CreateExpression, name: str, epl: str) -> StatementPlan:
        """Register a shared declared expression (once per name, as Esper)."""
        decl = node.decl
        if decl.name in self.catalog.expressions:
            raise verr(f"expression '{decl.name}' has already been declared", node,
                       hint="give it another name, or declare it in the statement that "
                       "uses it")
        check_body(decl, frozenset(self.catalog.variables)
                   | frozenset(n for n, d in self.catalog.expressions.items() if d.alias))
        self.catalog.expressions[decl.name] = decl
        return StatementPlan(name, "expression", epl)


def _insert_columns(node: ast.SelectStatement) -> ast.SelectStatement:
    """``insert into X (a, b) select ...``: the select items take the listed names, in
    order (Esper ref. 5, insert into: the column list names the inserted properties)."""
    into = node.insert_into
    if into is None or not into.columns:
        return node
    items = node.select_items
    if any(not isinstance(i, ast.SelectItem) for i in items) or len(items) != len(
            into.columns):
        raise verr(f"the column list of 'insert into {into.name}' names "
                   f"{len(into.columns)} properties, the select clause has {len(items)} "
                   "expressions", into, hint="list one name per select expression, and no "
                   "wildcard")
    return replace(node, select_items=tuple(
        replace(i, alias=c) for i, c in zip(items, into.columns)))


_STATEMENT_PLANNERS: dict[type[ast.Node], Callable[..., StatementPlan]] = {
    ast.CreateSchema: Planner.create_schema,
    ast.CreateContext: Planner.create_context,
    ast.CreateExpression: Planner.create_expression,
    ast.CreateVariable: Planner.create_variable,
    ast.CreateTable: Planner.create_table,
    ast.SelectStatement: Planner.query,
    ast.CreateWindow: Planner.create_window,
    ast.OnStatement: Planner.on_statement,
    ast.ApamaQuery: Planner.apama,
}
"""The planning method of each statement class (called with the planner, the node,
the statement's name and its text)."""


def plan_statement(catalog: Catalog, epl: str, name: str) -> StatementPlan:
    """Parse, validate and plan one statement, registering what it declares."""
    return Planner(catalog).plan_text(epl, name)


def plan_query(catalog: Catalog, epl: str) -> OnDemandPlan:
    """Plan an on-demand (fire-and-forget) select over a named window or a table."""
    return Planner(catalog).plan_on_demand_text(epl)

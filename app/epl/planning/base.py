"""What every section of the planner shares: the catalog it plans against, the
statement's source and table environment, name checks, and small helpers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from app.epl import ast
from app.epl.errors import EplValidationError, did_you_mean, verr
from app.epl.expr import (
    Scope,
    TableEnv,
    compile_expr,
    is_table_name,
    names_in,
    text_of,
)
from app.epl.parser import source_text
from app.epl.properties import path_error
from app.runtime.catalog import Catalog
from operators.base import PartitionCtx

WHITESPACE = re.compile(r"\s+")


class PlannerBase:
    """The planner's shared state and checks."""

    catalog: Catalog
    source: str
    tenv: TableEnv

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.source = ""
        self.tenv = TableEnv({})
        """Tables the statement being planned may read, and those it reads (Esper ref. 4.7)."""
        self.subquery_numbers: dict[int, int] = {}
        """The statement's subqueries numbered as written (their column names)."""

    def _type_names(self) -> list[str]:
        return [*self.catalog.schemas, *self.catalog.streams]

    def _require_type(self, type_name: str, node: ast.Node) -> dict[str, str]:
        props = self.catalog.type_props(type_name)
        if props is None:
            raise verr(f"unknown event type '{type_name}'", node,
                                     hint=did_you_mean(type_name, self._type_names()))
        return props

    def _check_names(self, node: ast.SelectStatement, props: dict[str, str], scope: Scope,
                     type_name: str) -> None:
        """Unknown properties are errors with a hint (strict validation)."""
        if all(t == "any" for t in props.values()):
            return
        exprs: list[Any] = []
        for item in node.select_items:
            if isinstance(item, ast.SelectItem):
                exprs.append(item.expr)
        src = node.from_[0]
        for e in (src.filter, node.where, node.having, *(node.group_by or ())):
            if e is not None:
                exprs.append(e)
        self.check_expr_names(exprs, props, scope, type_name)

    def check_expr_names(self, exprs: list[Any], props: dict[str, str], scope: Scope,
                         type_name: str) -> None:
        """Each name the expressions read is a property path of the type (or a context
        property, a variable, a table or the stream's own name), else a positioned error."""
        for e in exprs:
            for n in names_in(e):
                parts = n.parts
                if parts[0] == "context" or parts[0] in scope.variables:
                    continue
                if len(parts) > 1 and is_table_name(parts[0], scope):
                    continue
                if parts[0] in scope.aliases:
                    parts = parts[1:]
                    if not parts:
                        continue
                problem = path_error(parts, props, self.catalog.type_props, type_name)
                if problem is not None:
                    raise self._path_err(n, len(n.parts) - len(parts), problem)

    def _check_tag_names(self, node: ast.SelectStatement, pattern: Any) -> None:
        """Properties of pattern tags (``a.price``) must be properties of the tag's type."""
        from operators.patterns.spec import Filter

        tag_types = {n.tag: n.type_name for n in pattern.plan.nodes
                     if isinstance(n, Filter) and n.tag}
        exprs = [item.expr for item in node.select_items
                 if isinstance(item, ast.SelectItem)]
        exprs += [e for e in (node.where, node.having, *(node.group_by or ())) if e is not None]
        for e in exprs:
            for n in names_in(e):
                t = tag_types.get(n.parts[0])
                props = self.catalog.type_props(t) if t is not None else None
                if props is None or len(n.parts) < 2:
                    continue
                problem = path_error(n.parts[1:], props, self.catalog.type_props, t)
                if problem is not None:
                    raise self._path_err(n, 1, problem)

    def _path_err(self, n: ast.Node, skipped: int, problem: tuple[int, str, str | None]
                  ) -> EplValidationError:
        """A property-path error pointing at the part in error when the name is written
        plainly (``a.b.c``), else at the name."""
        index, message, hint = problem
        err = verr(message, n, hint=hint)
        k = skipped + index
        if err.column is not None and source_text(self.source, n.pos) == ".".join(n.parts):
            err.column += len(".".join(n.parts[:k])) + (1 if k else 0)
        return err



def column_name(item: Any, source: str = "", subqueries: dict[int, int] | None = None
                ) -> str:
    """Alias, else the expression text as written without whitespace (FORMAT.md: Rows);
    a subquery in it is written as Esper names it (planning.subqueries.column_text)."""
    if item.alias:
        return str(item.alias)
    if subqueries:
        from app.epl.planning.subqueries import column_text

        text = column_text(item.expr, source, subqueries)
        if text is not None:
            return text
    written = source_text(source, item.expr.pos) if source else ""
    return WHITESPACE.sub("", written or text_of(item.expr))


def stream_names(alias: str | None, type_name: str, props: Any) -> frozenset[str]:
    """The names that qualify a stream's properties: its alias and its event type's name
    (Esper ref. 5.4, the from clause: ``select W.account from W`` and ``from W as w``
    both read ``W.account``), unless the type has a property of that name, which wins."""
    names = {alias} if alias else set()
    if type_name not in (props or ()):
        names.add(type_name)
    return frozenset(names)


def norm_type(t: str) -> str:
    return {"int": "long", "integer": "long", "short": "long", "byte": "long",
            "float": "double"}.get(t.lower(), t.lower())


def _chain(view: Any) -> Iterator[Any]:
    """Every view spec of a view chain (stages, a #groupwin's sub-view, combined windows)."""
    stack = [view]
    while stack:
        v = stack.pop()
        if v is None:
            continue
        yield v
        for f in ("stages", "sub", "windows"):
            sub = getattr(v, f, None)
            if isinstance(sub, tuple):
                stack.extend(sub)
            elif sub is not None:
                stack.append(sub)


def derived_props(view: Any) -> dict[str, str]:
    """Properties a derived-value window adds to the stream (Esper ref. 14.4: size, uni, ...)."""
    from operators.derived.base import DerivedSpec
    from operators.state import MemoryNamespace

    out: dict[str, str] = {}
    for v in _chain(view):
        if isinstance(v, DerivedSpec):
            inst = v.build(MemoryNamespace(), PartitionCtx())
            out.update({k: "any" for k in inst.stats()})
            out.update({name: "any" for name, _ in v.extras})
            if v.wildcard:
                out.update({name: "any" for name in v.wildcard_names})
        elif getattr(v, "is_derived", False) and getattr(v, "key_names", None):
            # a grouped derived window's rows carry the group's key (Esper ref. 14.3.15)
            out.update({name: "any" for name in v.key_names})
    return out


def pane_props(view: Any) -> dict[str, str]:
    """``pane_start`` and ``pane_end``, which a ``#time_interval`` window adds to each row
    it posts (SPL timeInterval: the triggering pane's interval), when the view chain holds
    one."""
    if any(getattr(v, "name", "") == "time_interval" for v in _chain(view)):
        return {"pane_start": "long", "pane_end": "long"}
    return {}


def refers_to_event(node: ast.Node, scope: Scope) -> bool:
    """Whether an expression reads event properties (not only context/variables/tables)."""
    for n in names_in(node):
        head = n.parts[0]
        if head == "context" or head in scope.variables:
            continue
        if len(n.parts) > 1 and is_table_name(head, scope):
            continue
        parts = n.parts[1:] if head in scope.aliases and len(n.parts) > 1 else n.parts
        if ".".join(parts) in scope.partition_keys:
            continue  # the context partition's key (``k``, or ``a.k`` of a join's stream)
        return True
    return False


def is_grouped(node: ast.Node, group_texts: tuple[str, ...], scope: Scope) -> bool:
    """Whether a non-aggregated select expression is one of the group-by expressions; a
    table access counts as grouped when its keys are (its value is one per group)."""
    if WHITESPACE.sub("", text_of(node)) in group_texts:
        return True
    if isinstance(node, ast.TableAccess):
        return all(is_grouped(k, group_texts, scope) or not refers_to_event(k, scope)
                   for k in node.keys)
    return False


def period_seconds(tp: Any, scope: Scope) -> Any:
    """A time period whose amounts are variables, as an expression giving seconds."""
    parts = [(compile_expr(amount, scope), ast.UNIT_MS[unit] / 1000.0)
             for amount, unit in tp.parts]

    def seconds(row: Any, ctx: Any) -> Any:
        total = 0.0
        for fn, factor in parts:
            v = fn(row, ctx)
            if v is None:
                return None
            total += v * factor
        return total
    return seconds


def target_name(t: str | ast.Node) -> str:
    if isinstance(t, str):
        return t
    return ".".join(t.parts) if hasattr(t, "parts") else str(t)


def construct_name(node: ast.Node) -> str:
    """The words of a node's class name, for messages ('create index')."""
    return re.sub(r"(?<!^)(?=[A-Z])", " ", type(node).__name__).lower()

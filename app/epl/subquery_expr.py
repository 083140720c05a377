"""Closures for the expressions that hold a subquery (Esper reference "Subqueries"):
its value, ``exists``, ``[not] in`` and ``any``/``some``/``all`` comparisons.

Each reads the running subquery of the partition (``ctx.subqueries[i]``), which the
planner registered through ``scope.subqueries``.  Nulls follow Esper's three-valued
rules: an empty subquery makes ``in`` false, ``not in`` true, ``any`` false and ``all``
true; otherwise a null operand, or no decision but a null row value, gives null (a
relational ``any`` only when no row value is non-null).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.epl import ast
from app.epl.errors import EplValidationError
from operators.base import Expr, PartitionCtx

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda x, y: bool(x == y), "!=": lambda x, y: bool(x != y),
    "<": lambda x, y: bool(x < y), "<=": lambda x, y: bool(x <= y),
    ">": lambda x, y: bool(x > y), ">=": lambda x, y: bool(x >= y),
}


def _refuse(node: ast.Node) -> EplValidationError:
    pos = node.pos
    return EplValidationError("a subquery cannot be used here", pos.line or None,
                              pos.column or None, None,
                              "subqueries stand in the select, where and having clauses "
                              "and in stream filters of a select statement")


def compile_subquery(node: ast.Subquery | ast.Exists | ast.InSubquery | ast.Quantified,
                     scope: Any, compile_expr: Callable[[Any, Any], Expr]) -> Expr:
    """The closure of a Subquery, Exists, InSubquery or Quantified node."""
    env = scope.subqueries
    if env is None:
        raise _refuse(node)
    want_one = isinstance(node, ast.InSubquery | ast.Quantified)
    i = env.plan(node.query, scope, one_column=want_one, exists=isinstance(node, ast.Exists))
    if isinstance(node, ast.Subquery):
        names = env.specs[i].names
        # Esper: a subquery giving no row or more than one has the value null; a
        # multi-column one then gives a row of nulls
        empty = {n: None for n in names} if len(names) > 1 else None

        def value(r: Any, c: PartitionCtx) -> Any:
            vals = c.subqueries[i].values(r, c, False)
            if len(vals) == 1:
                return vals[0]
            return dict(empty) if empty is not None else None
        return value
    if isinstance(node, ast.Exists):
        return lambda r, c: c.subqueries[i].exists(r, c)
    left = compile_expr(node.expr, scope)
    if isinstance(node, ast.InSubquery):
        # Esper: 'in' is '= any', 'not in' is '!= all' (nulls and empty results alike)
        cmp, want_all = (_COMPARE["!="], True) if node.negated else (_COMPARE["="], False)
    else:
        cmp, want_all = _COMPARE[node.op], node.quantifier == "all"
    # Esper: a relational 'any' (<, <=, >, >=) is null only when every row value is null;
    # once one is not, it is false when none compares true ('=' and '!=' stay null on a
    # null row value, as 'all' does)
    null_only_all_null = not want_all and not isinstance(node, ast.InSubquery) \
        and node.op in ("<", "<=", ">", ">=")

    def quantified(r: Any, c: PartitionCtx) -> Any:
        vals = c.subqueries[i].values(r, c)
        if not vals:
            return want_all
        v = left(r, c)
        if v is None:
            return None
        has_null = False
        has_value = False
        for x in vals:
            if x is None:
                has_null = True
            else:
                has_value = True
                if cmp(v, x) != want_all:
                    return not want_all
        if null_only_all_null:
            return None if not has_value else False
        return None if has_null else want_all
    return quantified

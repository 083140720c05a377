"""What a statement assigns and which names it reads: the routing and grouping of
statements on Kafka (``topology``, ``mr_routing``) keep a variable's writers and readers
together."""

from __future__ import annotations

from typing import Any

from app.runtime.plan import StatementPlan


def assigned_variables(p: StatementPlan) -> set[str]:
    """Variables a statement assigns: ``on ... set``, ``output ... then set``."""
    out: set[str] = set()
    if p.kind == "on" and p.action is not None and p.action.kind == "set":
        out |= {a.variable for a in p.action.assignments}
    if p.pipeline is not None:
        spec = p.pipeline.output
        out |= {a.variable for a in (*spec.then_set, *spec.terminated_set)}
    return out


def names_read(p: StatementPlan) -> set[str]:
    """First identifiers of every name in a statement's text (candidate variable reads)."""
    from app.epl import ast
    from app.epl.parser import parse_statement

    out: set[str] = set()
    stack: list[Any] = [parse_statement(p.epl)]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            out.add(node.parts[0])
        if isinstance(node, tuple | list):
            stack.extend(node)
        elif hasattr(node, "__dataclass_fields__"):
            stack.extend(getattr(node, f) for f in node.__dataclass_fields__ if f != "pos")
    return out

"""Iterative traversals of the AST, safe for arbitrarily long operator chains.

``a + b + ... + z`` parses into a left-deep chain of ``Binary`` nodes as deep as it is
long; walking it with recursion would exceed Python's recursion limit long before the
statement is unreasonable.  Walkers here use explicit stacks; ``spine`` turns a chain into
a flat list for the compiler and the printer; ``too_deep`` bounds every other kind of
nesting (parentheses, calls, case, patterns), which the recursive parts of the compiler
still follow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.epl import ast

MAX_DEPTH = 100
"""Deepest nesting accepted (a chain of one operator level counts once, see too_deep)."""

LONG_CHAIN = 8
"""Chains longer than this are compiled and counted flat; shorter ones nest as written."""


def is_node(value: Any) -> bool:
    """Whether value is an AST node (a dataclass of app.epl.ast)."""
    return hasattr(value, "__dataclass_fields__") and not isinstance(value, ast.Pos)


def children(node: ast.Node | None) -> list[ast.Node]:
    """The AST nodes directly under node (fields, tuples and tuples of tuples)."""
    out: list[Any] = []
    if not is_node(node):
        return out
    for f in node.__dataclass_fields__:
        if f == "pos":
            continue
        v = getattr(node, f)
        if is_node(v):
            out.append(v)
        elif isinstance(v, tuple):
            for x in v:
                if is_node(x):
                    out.append(x)
                elif isinstance(x, tuple):
                    out += [y for y in x if is_node(y)]
    return out


def iter_nodes(node: ast.Node | None) -> Iterator[ast.Node]:
    """Every node under (and including) node, parents before children, in source order.

    A subquery's select is yielded but not entered: its names and aggregates belong to
    the subquery, not to the expression around it (Esper reference "Subqueries")."""
    stack = [node]
    while stack:
        n = stack.pop()
        if not is_node(n):
            continue
        yield n
        if not isinstance(n, ast.SubSelect):
            stack.extend(reversed(children(n)))


def spine(node: ast.Node) -> tuple[ast.Node, list[ast.Binary]]:
    """A left-deep ``Binary`` chain as (first operand, [Binary nodes, innermost first]).

    ``((a + b) - c) * d`` gives ``(a, [a + b, (a + b) - c, ... * d])``: evaluation folds
    each node's operator and right operand into the value so far, left to right."""
    links = []
    while isinstance(node, ast.Binary):
        links.append(node)
        node = node.left
    links.reverse()
    return node, links


def chain_length(node: ast.Node) -> int:
    """How many Binary nodes the left spine of node holds."""
    n = 0
    while isinstance(node, ast.Binary):
        n += 1
        node = node.left
    return n


def too_deep(root: ast.Node, limit: int = MAX_DEPTH) -> ast.Node | None:
    """The first node nested deeper than limit, else None.

    A long left-deep chain (``1 + 1 + ... + 1``) counts as one level: it is compiled
    and printed as a loop.  Short chains count each link, as they are compiled nested."""
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return node
        if isinstance(node, ast.Binary) and chain_length(node) > LONG_CHAIN:
            first, links = spine(node)
            stack.append((first, depth + 1))
            stack.extend((link.right, depth + 1) for link in links)
            continue
        stack.extend((c, depth + 1) for c in children(node))
    return None


def same(a: Any, b: Any) -> bool:
    """Structural equality of two ASTs (positions ignored), without recursion."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if is_node(x) or is_node(y):
            if type(x) is not type(y):
                return False
            for f in x.__dataclass_fields__:
                if f != "pos":
                    stack.append((getattr(x, f), getattr(y, f)))
        elif isinstance(x, tuple) or isinstance(y, tuple):
            if not (isinstance(x, tuple) and isinstance(y, tuple)) or len(x) != len(y):
                return False
            stack.extend(zip(x, y))
        elif x != y:
            return False
    return True


def conjuncts(expr: ast.Node | None) -> list[ast.Node]:
    """The operands of a chain of ``and`` (an expression alone is its one operand; None
    has none), left to right."""
    out: list[Any] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.Binary) and e.op == "and":
            stack += [e.right, e.left]
        elif e is not None:
            out.append(e)
    return out

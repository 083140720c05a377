"""Declared expressions inlined into a statement's AST (Esper reference, "Expression
declarations").

``expression twice {x => x * 2} select twice(v) from T`` plans as ``select v * 2 from
T``: each call is replaced by the declaration's body with the parameters replaced by the
call's arguments, so nothing is evaluated from text and the compiler sees ordinary
nodes.  A parameter bound to a stream alias (or to ``*``, the event) may be followed by a
property (``x.price``).  ``expression name alias for {body}`` is used as a plain name.
A declaration before the statement hides a shared one of the same name (``create
expression``).  As in Esper, the body of a declaration with parameters reads events
only through its parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from app.epl import ast
from app.epl.errors import verr
from app.epl.walk import is_node, iter_nodes

MAX_NESTING = 32
"""Deepest chain of declared expressions calling each other (a cycle stops here)."""


def uses_any(node: ast.Node, names: Mapping[str, ast.ExpressionDecl]) -> bool:
    """Whether ``node`` calls or names one of the declared expressions."""
    for n in iter_nodes(node):
        if isinstance(n, ast.Call) and n.name in names:
            return True
        if isinstance(n, ast.Name) and len(n.parts) == 1 and n.parts[0] in names:
            return True
    return False


def inline(node: ast.Statement, local: tuple[ast.ExpressionDecl, ...],
           shared: Mapping[str, ast.ExpressionDecl], globals_: frozenset[str]) -> ast.Statement:
    """``node`` with every call of a declared expression replaced by its body.

    ``globals_`` are names a body may read besides its parameters (variables)."""
    decls = {**shared, **{d.name: d for d in local}}
    if not decls or not uses_any(node, decls):
        return node
    own = frozenset(d.name for d in local)
    try:
        return _Inliner(decls, own, globals_).visit(node, 0)
    except RecursionError:
        raise verr("statement too deeply nested to inline its declared expressions",
                   node) from None


def check_body(decl: ast.ExpressionDecl, globals_: frozenset[str], at: Any = None) -> None:
    """A body with parameters reads only its parameters, variables and context
    properties (Esper refuses other names: "not valid in any stream"); the error points
    at ``at`` when given (a shared declaration's body is in another text)."""
    if decl.alias:
        return
    allowed = set(decl.params) | globals_ | {"context"}
    for n in iter_nodes(decl.body):
        if isinstance(n, ast.Name) and n.parts[0] not in allowed:
            hint = (f"pass it as a parameter: expression {decl.name} "
                    f"{{({', '.join((*decl.params, n.parts[0]))}) => ...}}")
            raise verr(f"'{'.'.join(n.parts)}' in the body of expression '{decl.name}' "
                       "is not one of its parameters", at or n, hint=hint)


class _Inliner:
    """One inlining pass over a statement."""

    def __init__(self, decls: dict[str, ast.ExpressionDecl], own: frozenset[str],
                 globals_: frozenset[str]) -> None:
        self.decls = decls
        self.own = own
        self.globals = globals_ | frozenset(n for n, d in decls.items() if d.alias)

    def visit(self, node: ast.Node, depth: int) -> Any:
        if isinstance(node, ast.Call) and node.name in self.decls:
            return self._call(node, depth)
        if (isinstance(node, ast.Name) and len(node.parts) == 1
                and node.parts[0] in self.decls):
            return self._alias(node, depth)
        return self._children(node, depth)

    def _children(self, node: ast.Node, depth: int) -> Any:
        changes = {}
        for f in node.__dataclass_fields__:
            if f == "pos":
                continue
            v = getattr(node, f)
            nv = self._value(v, depth)
            if nv is not v:
                changes[f] = nv
        return replace(node, **changes) if changes else node

    def _value(self, v: Any, depth: int) -> Any:
        if is_node(v):
            return self.visit(v, depth)
        if isinstance(v, tuple):
            out = tuple(self._value(x, depth) for x in v)
            return v if all(a is b for a, b in zip(out, v)) else out
        return v

    def _decl(self, node: ast.Call | ast.Name, depth: int) -> ast.ExpressionDecl:
        decl = self.decls[node.name if isinstance(node, ast.Call) else node.parts[0]]
        if depth >= MAX_NESTING:
            raise verr(f"expression '{decl.name}' calls itself (directly or through "
                       "another declared expression)", node)
        return decl

    def _alias(self, node: ast.Name, depth: int) -> Any:
        decl = self._decl(node, depth)
        if not decl.alias:
            raise verr(f"expression '{decl.name}' is called with parentheses", node,
                       hint=f"write {decl.name}({', '.join(decl.params)})")
        return self._placed(decl, decl.body, node, depth)

    def _call(self, node: ast.Call, depth: int) -> Any:
        decl = self._decl(node, depth)
        if decl.alias:
            raise verr(f"'{decl.name}' is an expression alias, used without parentheses",
                       node, hint=f"write {decl.name}")
        args = tuple(self.visit(a, depth) for a in node.args)
        if node.star and not args:
            args = (ast.Star(),)
        if len(args) != len(decl.params):
            raise verr(f"expression '{decl.name}' takes {len(decl.params)} parameter(s), "
                       f"{len(args)} given", node,
                       hint=f"declared as {decl.name}({', '.join(decl.params)})")
        check_body(decl, self.globals, None if decl.name in self.own else node)
        body = _bind(decl, args, node)
        return self._placed(decl, body, node, depth)

    def _placed(self, decl: ast.ExpressionDecl, body: Any, at: Any, depth: int) -> Any:
        """The body inlined in its turn, at the call's position (so that an unnamed
        column is named after the call as written, and errors point at the call; a
        shared declaration's own positions are in another statement's text)."""
        if decl.name not in self.own:
            body = _moved(body, at.pos)
        out = self.visit(body, depth + 1)
        return replace(out, pos=at.pos) if is_node(out) else out


def _bind(decl: ast.ExpressionDecl, args: tuple[Any, ...], call: Any) -> Any:
    """The body with each parameter replaced by its argument."""
    if not decl.params:
        return decl.body
    values = dict(zip(decl.params, args))

    def sub(n: Any) -> Any:
        if isinstance(n, ast.Name) and n.parts[0] in values:
            arg = values[n.parts[0]]
            rest = n.parts[1:]
            if not rest:
                return arg
            if isinstance(arg, ast.Star):
                return ast.Name(rest, pos=n.pos)
            if isinstance(arg, ast.Name):
                return ast.Name(arg.parts + rest, pos=n.pos)
            raise verr(f"'{'.'.join(n.parts)}' in expression '{decl.name}' needs an event "
                       f"for parameter '{n.parts[0]}'", call,
                       hint="pass a stream alias or *")
        if not is_node(n):
            return n
        return _rebuild(n, sub)
    return sub(decl.body)


def _moved(node: ast.Node, pos: ast.Pos) -> Any:
    """``node`` with every position set to ``pos``."""
    def move(n: Any) -> Any:
        if not is_node(n):
            return n
        return replace(_rebuild(n, move), pos=pos)
    return move(node)


def _rebuild(node: ast.Node, fn: Any) -> Any:
    """``node`` with ``fn`` applied to its child nodes (in tuples too)."""
    def value(v: Any) -> Any:
        if is_node(v):
            return fn(v)
        if isinstance(v, tuple):
            return tuple(value(x) for x in v)
        return v
    changes = {f: value(getattr(node, f)) for f in node.__dataclass_fields__ if f != "pos"}
    return replace(node, **changes)

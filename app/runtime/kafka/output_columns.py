"""The columns of a statement's output rows and their kepl types, from its select
clause: what an Avro, JSON Schema or Protobuf output is registered with when the
statement file gives no ``schema`` for it.

A column's type is that of its expression when it is evident (``functions.kind_of``:
properties, literals, arithmetic, casts, user functions), with the aggregates' result
types of Esper ref. 10.2.1 Aggregation Functions (``count`` long, ``avg`` double,
``sum``/``min``/``max``/``first``/``last`` the argument's).  A column whose type is not
evident is an error that asks for the ``schema`` to be given.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from app.epl import ast
from app.epl.functions import _NUMERIC, _widen, kind_of
from app.epl.parser import parse_statement
from app.epl.planning.base import column_name

_SAME = ("sum", "min", "max", "first", "last", "fmin", "fmax", "minever", "maxever",
         "firstever", "lastever")
_OUT = {"int": "int", "long": "long", "double": "double", "number": "double",
        "string": "string", "boolean": "boolean"}


class NotEvident(ValueError):
    """A column whose type the select clause does not show."""


def select_columns(epl: str, schemas: dict[str, dict[str, str]]) -> dict[str, str]:
    """Column name -> kepl type of the rows a select statement outputs."""
    node = parse_statement(epl)
    if not isinstance(node, ast.SelectStatement):
        raise NotEvident("the statement is not a select statement")
    props: dict[str, str] = {}
    aliases: set[str] = set()
    streams: list[dict[str, str]] = []
    for src in node.from_:
        if not isinstance(src, ast.FilterStream) or src.type_name not in schemas:
            raise NotEvident("its from clause reads more than event types of 'schemas'")
        p = {k: str(v) for k, v in schemas[src.type_name].items()}
        streams.append(p)
        for k, v in p.items():
            props.setdefault(k, v)
        if src.alias:
            aliases.add(src.alias)
    scope = SimpleNamespace(tags=(), aliases=aliases, variables=(),
                            tables=SimpleNamespace(props=props))
    out: dict[str, str] = {}
    for item in node.select_items:
        if isinstance(item, ast.Wildcard):
            if len(streams) != 1:
                raise NotEvident("'*' over a join has no flat row schema")
            out.update(streams[0])
            continue
        name = column_name(item, epl)
        kind = _kind(item.expr, scope)
        t = _OUT.get(kind or "")
        if t is None:
            raise NotEvident(f"the type of column '{name}' is not evident")
        out[name] = t
    return out


def _kind(node: Any, scope: Any) -> str | None:
    """``kind_of`` that also knows the aggregates, inside arithmetic too."""
    if isinstance(node, ast.Call):
        name = node.name.lower()
        if name == "count":
            return "long"
        if name == "avg":
            return "double"
        if name in _SAME and len(node.args) == 1:
            k = _kind(node.args[0], scope)
            return "long" if name == "sum" and k == "int" else k
    if isinstance(node, ast.Binary) and node.op in ("+", "-", "*", "/", "%"):
        a, b = _kind(node.left, scope), _kind(node.right, scope)
        if node.op == "+" and "string" in (a, b):
            return "string"
        if node.op == "/":
            return "double" if a in _NUMERIC and b in _NUMERIC else None
        return _widen(a, b)
    if isinstance(node, ast.Unary) and node.op == "-":
        return _kind(node.operand, scope)
    return kind_of(node, scope)

"""The Java type Esper gives an expression's value, where it shows: the group key's hash
code (an ``int`` property is an Integer, a ``long`` one a Long, differing for negative
values) decides the order of the groups of one update."""

from __future__ import annotations

from app.epl import ast

_BOXES = {"int": "int", "integer": "int", "short": "int", "byte": "int", "long": "long",
          "double": "double", "float": "float", "string": "string", "boolean": "boolean",
          "bool": "boolean"}
"""Schema and literal type names -> the box hashing a value of the type alike (a Short
and a Byte hash as their int value)."""

_NUMERIC = ("int", "long", "float", "double")


def java_box(node: ast.Node, types: dict[str, str]) -> str:
    """The Java box of ``node``'s value (``int``, ``long``, ``double``, ``float``,
    ``string``, ``boolean``), or ``""`` when it is not known here (the value decides).

    ``types``: property type by name as written (``p``, ``s.p``)."""
    if isinstance(node, ast.Name):
        return _BOXES.get(types.get(".".join(node.parts), "").lower(), "")
    if isinstance(node, ast.Literal):
        return _BOXES.get(node.type, "")
    if isinstance(node, ast.Cast):
        return _BOXES.get(node.type_name.lower(), "")
    if isinstance(node, ast.Unary):
        if node.op == "-":
            return java_box(node.operand, types)
        return "boolean" if node.op == "not" else ""
    if isinstance(node, ast.Binary):
        return _binary_box(node, types)
    if isinstance(node, ast.Between | ast.InList | ast.InRange | ast.Like | ast.Regexp
                  | ast.IsNull | ast.IsSame | ast.Exists):
        return "boolean"
    return ""


def _binary_box(node: ast.Binary, types: dict[str, str]) -> str:
    """Esper's arithmetic coercion: the same type stays, a double (or a float with an
    integer) gives a double, else a long if either is one, else an int; division gives a
    double; ``||`` a string; comparisons and logic a boolean."""
    op = node.op
    if op == "||":
        return "string"
    if op in ("and", "or", "=", "!=", "<", "<=", ">", ">=", "is", "is not"):
        return "boolean"
    left, right = java_box(node.left, types), java_box(node.right, types)
    if op == "+" and "string" in (left, right):
        return "string"
    if left not in _NUMERIC or right not in _NUMERIC:
        return ""
    if op == "/":
        return "double"
    if left == right:
        return left
    if "double" in (left, right) or "float" in (left, right):
        return "double"
    return "long" if "long" in (left, right) else "int"


def qualified_types(props: dict[str, str], *heads: str | None) -> dict[str, str]:
    """A stream's property types by each name they can be written with (``p``, and
    ``T.p`` for each of ``heads``: its type name, its alias)."""
    out = dict(props)
    for head in heads:
        if head:
            out.update({f"{head}.{p}": t for p, t in props.items()})
    return out

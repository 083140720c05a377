"""What the tree builder's rule sections share: the carrier objects rules hand to
their parents, child-list helpers, and positions and errors of tree nodes."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Any

from lark import Token, Transformer_NonRecursive, Tree

from app.epl import ast as A
from app.epl.errors import EplSyntaxError


@dataclasses.dataclass(frozen=True, slots=True)
class Alias:
    """Stream alias while building (tells an alias apart from a type name)."""

    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class Flag:
    """A keyword flag while building (unidirectional, primary key, ...)."""

    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class Wrapped:
    """A tagged intermediate value while building (filter, args, clause pieces)."""

    tag: str
    value: Any


@dataclasses.dataclass(frozen=True, slots=True)
class ViewName:
    """Namespace and name of a data window while building."""

    namespace: str | None
    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class At:
    """``@word`` (now / inclusive) while building, with its position for errors."""

    word: str
    pos: A.Pos


UNITS = {
    "year": "year", "years": "year",
    "month": "month", "months": "month",
    "week": "week", "weeks": "week",
    "day": "day", "days": "day",
    "hour": "hour", "hours": "hour",
    "minute": "minute", "minutes": "minute", "min": "minute",
    "second": "second", "seconds": "second", "sec": "second",
    "millisecond": "millisecond", "milliseconds": "millisecond", "msec": "millisecond",
    "microsecond": "microsecond", "microseconds": "microsecond", "usec": "microsecond",
}


ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}


ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)


OBSERVERS = ("timer:interval", "timer:at")


GUARDS = ("timer:within", "timer:withinmax")


def unescape(body: str) -> str:
    """Resolve backslash escapes of a string literal body (\\n, \\', \\uXXXX, ...)."""

    def repl(match: re.Match[str]) -> str:
        esc = match.group(1)
        if len(esc) == 5 and esc[0] == "u":
            return chr(int(esc[1:], 16))
        return ESCAPES.get(esc, esc)

    return ESCAPE_RE.sub(repl, body)


def present(children: Iterable[Any]) -> list[Any]:
    """Children without maybe_placeholders' None and without punctuation tokens."""
    return [c for c in children if c is not None and not isinstance(c, Token)]


def first_of(children: Iterable[Any], kind: type | tuple[type, ...]) -> Any:
    """First child of the given type, or None."""
    for child in children:
        if isinstance(child, kind):
            return child
    return None


def all_of(children: Iterable[Any], kind: type | tuple[type, ...]) -> tuple[Any, ...]:
    """All children of the given type, in order."""
    return tuple(c for c in children if isinstance(c, kind))


def wrapped(children: Iterable[Any], tag: str) -> Any:
    """Value of the first Wrapped child with this tag, else None."""
    for child in children:
        if isinstance(child, Wrapped) and child.tag == tag:
            return child.value
    return None


def flag(children: Iterable[Any], name: str) -> bool:
    """True when a Flag of this name is among the children."""
    return any(isinstance(c, Flag) and c.name == name for c in children)


def alias_of(children: Iterable[Any]) -> str | None:
    """The stream alias among the children, if any."""
    found = first_of(children, Alias)
    return found.name if found else None


def and_all(exprs: Sequence[A.Node], pos: A.Pos) -> A.Node | None:
    """Fold a comma filter list into left-associative 'and' (Esper ref. 4.2.7.1 filter lists)."""
    if not exprs:
        return None
    result = exprs[0]
    for expr in exprs[1:]:
        result = A.Binary("and", result, expr, pos=pos)
    return result


@dataclasses.dataclass(frozen=True, slots=True)
class StarArg:
    """'*' call argument while building."""

    pos: A.Pos


@dataclasses.dataclass(frozen=True, slots=True)
class DistinctArg:
    """'distinct expr' call argument while building."""

    expr: A.Node
    pos: A.Pos



class BuilderBase(Transformer_NonRecursive):
    """lark tree -> app.epl.ast plumbing: calls ``r_<rule>(children, pos)`` per rule."""

    def __init__(self, text: str) -> None:
        """Keep the source for error messages raised while building."""
        super().__init__(visit_tokens=False)
        self._text = text

    def _call_userfunc(self, tree: Tree, new_children: list[Any] | None = None) -> Any:
        """Call the rule method with (children, pos) so each node gets its span."""
        children = new_children if new_children is not None else tree.children
        name = tree.data
        rule = name.value if isinstance(name, Token) else name
        func = getattr(self, "r_" + rule, None)
        if func is None:
            raise EplSyntaxError(f"unsupported construct '{rule}'", *self._at(tree), self._text)
        return func(children, self._pos(tree))

    @staticmethod
    def _pos(tree: Tree) -> A.Pos:
        """Pos of a tree from lark's propagated meta."""
        meta = tree.meta
        if getattr(meta, "empty", True):
            return A.NOPOS
        return A.Pos(meta.line, meta.column, meta.end_line, meta.end_column)

    @staticmethod
    def _at(tree: Tree) -> tuple[int, int]:
        """Line and column of a tree, for errors."""
        meta = tree.meta
        if getattr(meta, "empty", True):
            return 1, 1
        return meta.line, meta.column

    def _error(self, message: str, pos: A.Pos, hint: str | None = None) -> EplSyntaxError:
        """An EplSyntaxError at pos."""
        return EplSyntaxError(message, pos.line or 1, pos.column or 1, self._text, hint)

    def r_ident(self, c: list[Any], pos: A.Pos) -> str:
        """Identifier text; back-quotes removed."""
        tok = c[0]
        if tok.type == "BQNAME":
            return str(tok.value)[1:-1]
        return str(tok.value)

"""The arguments of an aggregation call: the values it aggregates and its filter.

An aggregation function takes only the events its filter is true for (entering and
leaving alike; a null filter value counts as false).  Esper 9 accepts the filter in two
forms (Esper ref. 10.2 aggregation functions):

* as the last positional argument of the value aggregations, ``count(*, v > 2)``,
  ``sum(v, k = 'a')``, ``countever(v, b)`` (10.2.1 ``[, filter_expression]``);
* as the named parameter ``filter:`` of every built-in aggregation, ``count(*, filter:
  v > 2)``, ``first(v, 1, filter: b)``, ``leaving(filter: b)`` (10.2.2/10.2.4).

Where Esper refuses an argument list, so does kepl, with Esper's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.epl import ast
from app.epl.errors import verr
from app.epl.functions import kind_of
from app.epl.printer import to_epl as text_of

FILTER_LAST = frozenset({"count", "countever", "sum", "avg", "median", "stddev", "avedev"})
"""Aggregations whose second positional argument is a filter: Esper ref. 10.2.1
``count([distinct] expression [, filter_expression])`` and the like; countever of 10.2.4
too.  (``min``/``max`` of two arguments are the single-row functions, Esper ref. 10.1:
the aggregation's filter is named, ``min(v, filter: b)``.)"""

NUMERIC = frozenset({"sum", "avg", "median", "stddev", "avedev"})
"""Aggregations of numbers: a named filter alone is no value for them (Esper makes the
filter the value and refuses a boolean)."""

INDEXED = frozenset({"first", "last", "nth"})
"""Event aggregations whose second positional argument is an index (Esper ref. 10.2.2):
their filter is named only."""


@dataclass(frozen=True)
class AggregateArgs:
    """An aggregation call's value arguments (the filter taken out) and its filter."""

    args: tuple[ast.Node, ...]
    filter: ast.Node | None = None


def positional_args(node: ast.Call) -> tuple[ast.Node, ...]:
    """The arguments of a call that are not named (``name: expr``): what tells the
    single-row ``min(a, b)`` from the aggregation ``min(a, filter: b)`` (Esper counts
    positional arguments only)."""
    return tuple(a for a in node.args if not isinstance(a, ast.NamedArg))


def aggregate_args(node: ast.Call, scope: Any, user: bool = False) -> AggregateArgs:
    """Split an aggregation call into value arguments and filter, checked as Esper
    checks them; ``user``: a user aggregation function (its filter is named only, and
    its positional arguments are its own business)."""
    name = node.name.lower()
    args = positional_args(node)
    named = _named_filter(node, scope)
    if user:
        return AggregateArgs(args, named)
    if name == "countever" and node.distinct:
        # Esper ref. 10.2.4: countever counts events (or non-null values) ever entered
        raise verr("aggregation function 'countever' does not allow distinct", node,
                   hint=f"write countever({text_of(args[0]) if args else '*'})")
    if name == "leaving":
        if args:
            raise verr("the 'leaving' function expects no parameters", node,
                       hint="write leaving(), or leaving(filter: condition) to watch only "
                            "the events a condition holds for")
        return AggregateArgs((), named)
    if name in FILTER_LAST:
        return _value_and_filter(node, name, args, named, scope)
    if name in ("min", "max"):
        if len(args) > 1:  # only with distinct: without, the single-row function
            raise verr("the distinct keyword is not valid in per-row min and max functions "
                       "with multiple sub-expressions", node,
                       hint=f"to filter the aggregation, write {name}(distinct "
                            f"{text_of(args[0])}, filter: {text_of(args[1])})")
        # a lone named filter is the value as well, as for count (Esper)
        return AggregateArgs(args or ((named,) if named is not None else ()), named)
    if name == "window" and len(args) > 1:
        raise verr("the 'window' aggregation function does not accept an index "
                   "expression; use 'first' or 'last' instead", args[1],
                   hint=f"to filter, write window({text_of(args[0])}, filter: "
                        f"{text_of(args[1])})")
    if name == "nth" and len(args) != 2:
        raise verr("the nth aggregation function requires two parameters, an expression "
                   "returning aggregation values and a numeric index constant", node,
                   hint="write nth(value, index), and filter with nth(value, index, "
                        "filter: condition)")
    if name in INDEXED and len(args) > 2:
        raise verr(f"the '{name}' aggregation function takes a value and an index",
                   args[2], hint=f"to filter, write {name}({text_of(args[0])}, "
                                 f"{text_of(args[1])}, filter: {text_of(args[2])})")
    return AggregateArgs(args, named)


def _value_and_filter(node: ast.Call, name: str, args: tuple[ast.Node, ...],
                      named: ast.Node | None, scope: Any) -> AggregateArgs:
    """``f(value [, filter])`` or ``f(value, filter: expr)`` of the value aggregations."""
    if named is not None:
        if len(args) > 1:
            raise verr("only a single filter expression can be provided", args[1],
                       hint=f"combine the conditions: filter: ({text_of(args[1])}) and "
                            f"({text_of(named)})")
        if not args:
            if name in NUMERIC:
                raise verr(f"aggregation function '{name}' needs a value to aggregate "
                           "besides its filter", node,
                           hint=f"write {name}(value, filter: {text_of(named)})")
            # Esper makes a lone named filter the value as well: count(filter: b) counts
            # the events b is true for, as count(*, b) does
            return AggregateArgs((named,), named)
        return AggregateArgs(args, named)
    if len(args) > 2 or (not args and name not in ("count", "countever")):
        raise verr(f"the '{name}' function expects at least 1 and up to 2 parameters",
                   node, hint=f"write {name}(value) or {name}(value, filter)")
    if len(args) < 2:
        return AggregateArgs(args)
    filt = args[1]
    kind = kind_of(filt, scope)
    if kind is not None and kind != "boolean":
        raise verr(f"invalid filter expression parameter to the aggregation function "
                   f"'{name}': it is expected to return a boolean value but returns "
                   f"{kind}", filt, hint="the second parameter filters the events the "
                                         "aggregation takes, as in "
                                         f"{name}({text_of(args[0])}, {text_of(filt)} > 0)")
    return AggregateArgs(args[:1], filt)


def _named_filter(node: ast.Call, scope: Any) -> ast.Node | None:
    """The ``filter:`` named parameter of a call, or None: one at most, and boolean when
    its type is evident (Esper: "Filter named parameter requires a single expression
    returning a boolean-typed value")."""
    found: ast.Node | None = None
    for a in node.args:
        if not isinstance(a, ast.NamedArg):
            continue
        pname = a.name.lower()
        if pname == "filter":
            if found is not None:
                raise verr("only a single filter expression can be provided", a,
                           hint="combine the conditions with 'and'")
            found = a.value
        elif pname != "group_by":
            raise verr(f"invalid named parameter '{a.name}'", a,
                       hint="did you mean 'group_by' or 'filter'?")
    if found is not None:
        kind = kind_of(found, scope)
        if kind is not None and kind != "boolean":
            raise verr("the filter named parameter requires an expression returning a "
                       f"boolean value; '{text_of(found)}' is {kind}", found,
                       hint=f"write filter: {text_of(found)} > 0, or another condition")
    return found


def check_min_max_row(node: ast.Call, scope: Any) -> None:
    """Refuse a boolean argument of the single-row ``min``/``max`` (Esper: "Implicit
    conversion from datatype 'Boolean' to numeric is not allowed"): ``min(v, k = 'a')``
    is no filtered aggregation (Esper ref. 10.1 min and max of several values; the
    filtered aggregation is written with ``filter:``, Esper ref. 10.2)."""
    name = node.name.lower()
    args = positional_args(node)
    for a in args:
        if kind_of(a, scope) == "boolean":
            raise verr(f"{name}() of several values compares numbers; '{text_of(a)}' is a "
                       "boolean", a, hint=f"to aggregate {text_of(args[0])} over the events "
                                          f"a condition holds for, write {name}("
                                          f"{text_of(args[0])}, filter: {text_of(a)})")


def declares_filter(call: ast.Call) -> bool:
    """Whether a table column's aggregation declares a filter: a ``boolean`` type after
    the value's, as ``count(*, boolean)`` or ``sum(int, boolean)`` (Esper ref. 4.7
    tables: a column declares the aggregation its 'into table' statements maintain,
    the filter included)."""
    args = positional_args(call)
    last = args[-1] if len(args) == 2 else None
    return (call.name.lower() in FILTER_LAST and isinstance(last, ast.Name)
            and tuple(p.lower() for p in last.parts) == ("boolean",))


def has_filter(call: ast.Call) -> bool:
    """Whether an aggregation call of a statement gives a filter (positional or named)."""
    if any(isinstance(a, ast.NamedArg) and a.name.lower() == "filter" for a in call.args):
        return True
    return call.name.lower() in FILTER_LAST and len(positional_args(call)) == 2

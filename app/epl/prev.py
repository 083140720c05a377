"""The functions that read other events of the stream: ``prev``, ``prevtail``,
``prevwindow``, ``prevcount`` (the data window) and ``prior`` (the stream itself).

Esper ref. "Single-row functions": prev(n, x) is x of the n-th event before the current
one in the data window (prev(x) means prev(1, x)), in the window's own order for sorted
and ranked windows; prevtail(n, x) counts from the other end (prevtail(x) means
prevtail(0, x), the oldest); prevwindow(x) lists x of every event prev can reach, newest
first; prevcount(x) counts them.  All four are evaluated on insert-stream events and give
null on the remove stream.  prior(n, x) is x of the n-th event before the current one in
the stream, regardless of any data window; n is a constant.  The planner gives every
prior call a key: the stream stamps each arriving event with the values under those keys
(``operators.prior``), so the value travels with the event, also onto the remove stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.epl import ast
from app.epl.errors import verr
from app.epl.printer import to_epl
from app.epl.walk import iter_nodes
from operators.base import Expr, PartitionCtx

PRIOR_KEY = "\x00prior:"
"""Prefix of the hidden event keys holding prior values (NUL-prefixed keys never reach
the output)."""


Compile = Callable[[Any, Any], Expr]
"""``app.epl.expr.compile_expr``, passed in: the compiler imports this module."""


def _target(node: ast.Call, scope: Any, compile_expr: Compile) -> Expr | None:
    """The expression read from the other event; None for ``*`` (the event itself)."""
    arg = node.args[-1]
    if isinstance(arg, ast.Star):
        return None
    if isinstance(arg, ast.Name) and len(arg.parts) == 1 and arg.parts[0] in scope.aliases:
        return None  # the stream's name or alias: the event itself, as for '*'
    aliases = scope.aliases
    if scope.kind == "tags":
        aliases = frozenset({join_stream(node, scope.tags)})
    event_scope = type(scope)("event", aliases, variables=scope.variables,
                              tables=scope.tables)
    return compile_expr(arg, event_scope)


def join_stream(node: ast.Call, streams: frozenset[str]) -> str:
    """The one stream of a join whose window a prev function reads (its expression's
    properties are qualified with the stream's name by then)."""
    arg = node.args[-1] if node.args else None
    heads = {n.parts[0] for n in iter_nodes(arg) if isinstance(n, ast.Name)} & streams
    if len(heads) != 1:
        raise verr(f"{node.name} in a join reads the window of one stream", node,
                   hint="name one stream's properties, e.g. prev(1, s.price)")
    return heads.pop()


def compile_prev(node: ast.Call, name: str, scope: Any, compile_expr: Compile) -> Expr:
    """One of the prev functions as a closure over the partition's window."""
    args = node.args
    if node.star and not args:
        args = (ast.Star(),)
        node = ast.Call(node.name, args, pos=node.pos)
    if name in ("prev", "prevtail"):
        if len(args) not in (1, 2):
            raise verr(f"{name} takes an optional index and an expression", node,
                       hint=f"write {name}(1, price) or {name}(price)")
    elif len(args) != 1:
        raise verr(f"{name} takes one expression", node, hint=f"write {name}(price)")
    inner = _target(node, scope, compile_expr)

    def read(row: Any, c: PartitionCtx) -> Any:
        return row if inner is None else inner(row, c)

    if scope.kind == "tags":  # a join: the named stream's window
        stream = join_stream(node, scope.tags)

        def window(r: Any, c: PartitionCtx) -> Any:
            return c.windows.get(stream) if r.get(stream) is not None else None

        def event(r: Any) -> Any:
            # Esper counts from the newest event of the window in a join, not from the
            # row's event (which need not be the newest: the other stream triggered)
            return None
    else:
        def window(r: Any, c: PartitionCtx) -> Any:
            return c.window

        def event(r: Any) -> Any:
            return r

    if name == "prevcount":
        def prevcount(r: Any, c: PartitionCtx) -> Any:
            w = window(r, c)
            return w.count(event(r)) if w is not None and c.is_new else None
        return prevcount
    if name == "prevwindow":
        def prevwindow(r: Any, c: PartitionCtx) -> Any:
            w = window(r, c)
            if w is None or not c.is_new:
                return None
            rows = w.prevwindow(event(r))
            return [read(x, c) for x in rows] if rows else None
        return prevwindow
    tail = name == "prevtail"
    if len(args) == 1:
        fixed = 0 if tail else 1

        def index(r: Any, c: PartitionCtx) -> Any:
            return fixed
    else:
        index = compile_expr(args[0], scope)

    def prev(r: Any, c: PartitionCtx) -> Any:
        w = window(r, c)
        if w is None or not c.is_new:
            return None
        i = index(r, c)
        if type(i) is not int:
            if not isinstance(i, (int, float)) or isinstance(i, bool) or i != int(i):
                return None
            i = int(i)
        ev = event(r)
        found = w.prevtail(i, ev) if tail else w.prev(i, ev)
        return None if found is None else read(found, c)
    return prev


def prior_index(node: ast.Call) -> int:
    """The constant n of ``prior(n, x)``; a positioned error otherwise."""
    if len(node.args) != 2 or node.star:
        raise verr("prior takes an index and an expression", node,
                   hint="write prior(1, price)")
    n = node.args[0].value if isinstance(node.args[0], ast.Literal) else None
    if type(n) is not int or n < 0:
        raise verr("the index of prior must be a constant non-negative integer",
                   node.args[0], hint="write prior(1, price)")
    return n


def prior_key(node: ast.Call) -> str:
    """The hidden event key holding the value of one prior call."""
    return PRIOR_KEY + to_epl(node)


def compile_prior(node: ast.Call, scope: Any) -> Expr:
    """``prior(n, x)``: the value the stream stamped on the event (see module doc)."""
    prior_index(node)
    key = prior_key(node)
    if scope.kind == "tags":  # a join: the value on the named stream's event
        stream = join_stream(node, scope.tags)

        def joined(r: Any, c: PartitionCtx) -> Any:
            ev = r.get(stream)
            return None if ev is None else ev.get(key)
        return joined

    def prior(r: Any, c: PartitionCtx) -> Any:
        return r.get(key)
    return prior


def prior_calls(*nodes: Any) -> list[Any]:
    """Every ``prior(...)`` call under ``nodes``, in source order."""
    out = []
    for node in nodes:
        if node is None:
            continue
        for n in iter_nodes(node):
            if isinstance(n, ast.Call) and n.name.lower() == "prior":
                out.append(n)
    return out


def window_calls(*nodes: Any) -> list[Any]:
    """Every prev-function or prior call under ``nodes``."""
    names = ("prev", "prevtail", "prevwindow", "prevcount", "prior")
    out = []
    for node in nodes:
        if node is None:
            continue
        out += [n for n in iter_nodes(node)
                if isinstance(n, ast.Call) and n.name.lower() in names]
    return out


def prior_items(calls: list[Any], scope: Any, compile_expr: Compile
                ) -> tuple[tuple[str, int, Expr | None], ...]:
    """(key, n, value expression) of each distinct prior call, for ``operators.prior``."""
    seen: dict[str, tuple[str, int, Expr | None]] = {}
    for call in calls:
        n = prior_index(call)
        key = prior_key(call)
        if key not in seen:
            seen[key] = (key, n, _target(call, scope, compile_expr))
    return tuple(seen.values())


PREV_WINDOWS = frozenset({
    "length", "length_batch", "time", "time_batch", "ext_timed", "ext_timed_batch",
    "time_length_batch", "time_accum", "keepall", "sort", "rank", "time_order", "expr",
    "expr_batch"})
"""The data windows Esper's prev functions can read (not unique, first-*, lastevent,
nor an intersection or union of windows; groupwin of one of these)."""


def retains_previous(view: Any) -> bool:
    """Whether the window chain keeps the events the prev functions read."""
    name = getattr(view, "name", None)
    if name == "groupwin":
        return retains_previous(view.sub)
    if name == "chain":
        return any(retains_previous(s) for s in view.stages)
    return name in PREV_WINDOWS


def check_prev_window(node: ast.SelectStatement, view: Any, aggregated: bool = False) -> None:
    """A prev function needs a data window that retains previous events (as Esper), and
    stays out of the where and having clauses of an ``aggregated`` statement."""
    calls = [c for c in window_calls(*node.select_items, node.where, node.having,
                                     *(node.order_by or ()))
             if c.name.lower() != "prior"]
    if calls and not retains_previous(view):
        raise verr(f"{calls[0].name} needs a data window that retains previous events",
                   calls[0], hint="add one such as #length(10), #time(1 min), #keepall, "
                   "#sort or #rank (not #unique, #firstlength or an intersection)")
    if aggregated:
        # Esper ref. 10.1 previous: prev has no remove-stream data for an aggregation
        # to take back, so Esper refuses it where the aggregated rows are filtered
        misplaced = [c for c in window_calls(node.where, node.having)
                     if c.name.lower() != "prior"]
        if misplaced:
            raise verr(f"{misplaced[0].name} cannot stand in the where or having clause of "
                       "a statement with aggregations", misplaced[0],
                       hint="use the first, last, window or count aggregation functions "
                       "instead")


def prior_tagged_items(calls: list[Any], scope: Any, compile_expr: Compile
                       ) -> tuple[tuple[str, int, Expr | None, str], ...]:
    """(key, n, value expression, tag) of each distinct prior call of a pattern
    statement: x is read from the tagged event of the n-th earlier match."""
    tags = {prior_key(c): join_stream(c, scope.tags) for c in calls}
    return tuple((key, n, value, tags[key])
                 for key, n, value in prior_items(calls, scope, compile_expr))

"""Planning of ``match_recognize (...)`` (Esper reference, chapter "EPL Reference: Match
Recognize"): the pattern, the define conditions over the stream's event type, the
measures (with aggregates over multi-row variables) and partition by, checked with
positioned errors, into a MatchRecognizeSpec."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from app.epl import ast
from app.epl.aggregate_args import FILTER_LAST, positional_args
from app.epl.errors import did_you_mean, verr
from app.epl.expr import Scope, compile_expr, constant_value, text_of, time_period_ms
from app.epl.properties import path_error
from app.epl.walk import children, is_node, iter_nodes
from app.runtime.catalog import NotSupported
from operators.aggregates import AGGREGATE_NAMES, fold_filter
from operators.match_recognize import nfa
from operators.match_recognize.spec import MatchRecognizeSpec, MeasureAggregate


def plan_match_recognize(planner: Any, mr: ast.MatchRecognize, type_name: str,
                         props: dict[str, str], alias: str | None, view: Any,
                         variables: frozenset[str],
                         named_window: bool = False) -> MatchRecognizeSpec:
    """The operator spec of one match_recognize clause over a stream of ``type_name``
    (``named_window``: the stream is a named window's, whose rows an on-action may
    delete in any order)."""
    pattern = _pattern(mr.pattern)
    compiled = nfa.compile_nfa(pattern)
    singles, multis = set(compiled.singles), set(compiled.multis)
    names = [*compiled.singles, *compiled.multis]
    var_set = frozenset(names)
    # after an out-of-sequence remove Esper 9 steps the window's events again with a
    # fresh state that has no interval schedule (it fails at the next held match) and a
    # prev() buffer positioned by event identity; kepl refuses both rather than guess
    out_of_order = named_window or (view is not None
                                    and not getattr(view, "oldest_first", True))
    if out_of_order and mr.interval is not None:
        raise NotSupported("match_recognize with interval over a named window or a data "
                           "window that removes events out of arrival order")
    catalog = planner.catalog

    def check_path(n: ast.Name, parts: tuple[str, ...], skipped: int) -> None:
        problem = path_error(parts, props, catalog.type_props, type_name)
        if problem is not None:
            raise planner._path_err(n, skipped, problem)

    # partition by: expressions over the stream's events
    ev_scope = Scope("event", frozenset({alias} if alias else ()), variables=variables,
                     tables=planner.tenv)
    partition = []
    for e in mr.partition_by:
        for n in names_outside(e):
            parts = n.parts[1:] if alias and n.parts[0] == alias and len(n.parts) > 1 \
                else n.parts
            if parts[0] == "context" or (len(parts) == 1 and parts[0] in variables):
                continue
            check_path(n, parts, len(n.parts) - len(parts))
        partition.append(compile_expr(e, ev_scope))

    # define: conditions over the variables matched so far and the current event
    def_scope = Scope("tags", var_set, var_set, variables, row_vars=var_set, tables=planner.tenv)
    visible = nfa.visibility(pattern)
    defines: dict[str, Any] = {}
    reads_groups: set[str] = set()
    prev_depth = 0
    for d in mr.defines:
        if d.name in defines:
            raise verr(f"variable '{d.name}' has already been defined", d)
        if d.name not in var_set:
            raise verr(f"variable '{d.name}' does not occur in the pattern", d,
                       did_you_mean(d.name, names))
        expr, depth = _normalise_prev(_qualify(d.expr, d.name, var_set, variables,
                                               visible.get(d.name, set())))
        prev_depth = max(prev_depth, depth)
        for n in iter_nodes(expr):
            if _is_aggregate(n):
                raise verr("an aggregate function may not appear in a define clause", n)
        for n in names_outside(expr):
            _check_var_name(n, var_set, variables, check_path, planner)
            head = n.parts[0]
            if head in multis and head != d.name and len(n.parts) > 1:
                raise verr(f"'{'.'.join(n.parts)}': variable '{head}' matches several "
                           "events", n, f"read one of them by index, as in "
                           f"{head}[0].{'.'.join(n.parts[1:])}")
        for n in iter_nodes(expr):
            if isinstance(n, ast.TableAccess) and n.table in var_set:
                if n.table in singles or n.table == d.name:
                    raise verr(f"variable '{n.table}' is one event in the condition of "
                               f"'{d.name}' and is not accessed by index", n,
                               f"write {n.table}.{n.column or '...'}")
                if len(n.keys) != 1:
                    raise verr("a multi-row variable takes one index", n)
                reads_groups.add(d.name)
        defines[d.name] = compile_expr(expr, def_scope)

    if out_of_order and prev_depth:
        raise NotSupported("prev() in match_recognize over a named window or a data "
                           "window that removes events out of arrival order")

    # measures: expressions over the match (aggregates over one multi-row variable)
    aggs: list[Any] = []
    agg_texts: dict[str, int] = {}
    value_scope = Scope("tags", var_set, var_set, variables, row_vars=var_set, tables=planner.tenv)
    m_scope = Scope("tags", var_set, var_set, variables, row_vars=var_set, aggregates=aggs,
                    agg_texts=agg_texts, agg_in_row=True, agg_value_scope=value_scope,
                    tables=planner.tenv)
    measures: list[tuple[str, Any]] = []
    agg_vars: dict[str, str] = {}
    collect = False
    for m in mr.measures:
        if m.name is None:
            raise verr("the measures clause requires that each expression uses the AS "
                       "keyword to assign a column name", m,
                       f"write '{text_of(m.expr)} as name'")
        if m.name in dict(measures):
            raise verr(f"measure '{m.name}' is defined twice", m)
        for n in iter_nodes(m.expr):
            _refuse_named_filter(n)
            if _is_aggregate(n):
                agg_vars[text_of(n)] = _aggregated_var(n, multis, var_set, variables,
                                                       check_path, planner)
                collect = True
        for n in names_outside(m.expr, skip_aggregates=True):
            _check_var_name(n, var_set, variables, check_path, planner)
            if n.parts[0] in multis:
                collect = True
                if len(n.parts) > 1:
                    raise verr(
                        f"'{'.'.join(n.parts)}': variable '{n.parts[0]}' matches several "
                        "events", n, f"read one of its events by index, as in "
                        f"{n.parts[0]}[0].{'.'.join(n.parts[1:])}, or aggregate them, as in "
                        f"avg({'.'.join(n.parts)})")
        for n in iter_nodes(m.expr):
            if isinstance(n, ast.TableAccess) and n.table in var_set:
                if n.table in singles:
                    raise verr(f"variable '{n.table}' matches one event and is not "
                               "accessed by index", n, f"write {n.table}.{n.column or '...'}")
                if len(n.keys) != 1:
                    raise verr("a multi-row variable takes one index", n)
                collect = True
        measures.append((m.name, compile_expr(m.expr, m_scope)))
    aggregates = tuple(MeasureAggregate(agg_vars[a.text],
                                        *fold_filter(a.aggregator, a.value, a.filter))
                       for a in aggs)

    interval = time_period_ms(mr.interval) if mr.interval is not None else None
    return MatchRecognizeSpec(
        pattern=pattern, defines=defines, measures=tuple(measures), aggregates=aggregates,
        partition_by=tuple(partition), all_matches=mr.all_matches, skip=mr.skip,
        interval_ms=interval, or_terminated=mr.or_terminated, prev_depth=prev_depth,
        bound=view is not None or named_window, collect=collect or bool(reads_groups),
        reads_groups=frozenset(reads_groups))


def _pattern(node: ast.Node) -> Any:
    """The AST pattern as the operator's pattern nodes."""
    def rep(r: ast.MrRepeat | None) -> Any:
        if r is None:
            return None
        if r.low is not None and r.high is not None and r.low > r.high:
            raise verr(f"invalid pattern quantifier value {r.low}, expecting a minimum of 1 "
                       f"and maximum of {r.high}", r)
        return (r.low, r.high, r.exact)

    def kind(q: str) -> tuple[str, bool]:
        return q[:1], len(q) == 2

    if isinstance(node, ast.MrAtom):
        k, rel = kind(node.quantifier)
        return nfa.Atom(node.name, k, rel, rep(node.repeat))
    if isinstance(node, ast.MrConcat):
        return nfa.Seq(tuple(_pattern(i) for i in node.items))
    if isinstance(node, ast.MrAlt):
        return nfa.Alt(tuple(_pattern(a) for a in node.alternatives))
    if isinstance(node, ast.MrPermute):
        # Esper's permutation expansion: an alternation of every order of the items,
        # orders enumerated lexicographically from the written one
        items = [_pattern(i) for i in node.items]
        return nfa.Alt(tuple(nfa.Seq(tuple(items[i] for i in order))
                             for order in itertools.permutations(range(len(items)))))
    if isinstance(node, ast.MrNested):
        k, rel = kind(node.quantifier)
        return nfa.Group(_pattern(node.child), k, rel, rep(node.repeat))
    raise verr("unexpected pattern item", node)


def names_outside(node: ast.Node, skip_aggregates: bool = False) -> list[ast.Name]:
    """Name nodes of an expression; the target of ``prev()`` counts, an aggregate's
    arguments are left out with ``skip_aggregates``."""
    out: list[ast.Name] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name):
            out.append(n)
            continue
        if skip_aggregates and _is_aggregate(n):
            continue
        if isinstance(n, ast.TableAccess):
            stack.extend(reversed(n.keys))
            continue
        stack.extend(reversed(children(n)))
    return out


def _is_aggregate(n: ast.Node) -> bool:
    """An aggregate call (``max``/``min`` of several arguments are the scalar forms)."""
    return (isinstance(n, ast.Call) and n.name.lower() in AGGREGATE_NAMES
            and not (n.name.lower() in ("max", "min") and len(positional_args(n)) > 1
                     and not n.distinct))


def _refuse_named_filter(n: ast.Node) -> None:
    """Refuse the named ``filter:`` of an aggregation in the measures clause: Esper 9
    fails to compile it ("Expression has not been validated"); the positional filter of
    count, sum, avg and the like works (Esper ref. 10.2.1)."""
    if not isinstance(n, ast.Call):
        return
    named = next((a for a in n.args
                  if isinstance(a, ast.NamedArg) and a.name.lower() == "filter"), None)
    if named is None:
        return
    args = positional_args(n)
    hint = (f"write the filter as the last argument, as in {n.name}("
            f"{text_of(args[0])}, {text_of(named.value)})"
            if len(args) == 1 and n.name.lower() in FILTER_LAST
            else "filter the events in the define clause of the variable")
    raise verr("the 'filter' named parameter is not supported in the measures clause",
               named, hint)


def _check_var_name(n: ast.Name, var_set: frozenset[str], variables: frozenset[str],
                    check_path: Any, planner: Any) -> None:
    """A name in define or measures is a pattern variable's property (``A.price``), a
    variable, or a context property."""
    head = n.parts[0]
    if head == "context" or (len(n.parts) == 1 and head in variables):
        return
    if head not in var_set:
        raise verr(f"'{'.'.join(n.parts)}' does not name a pattern variable's property", n,
                   did_you_mean(head, var_set) or
                   f"qualify it with a pattern variable, as in {sorted(var_set)[0]}."
                   f"{n.parts[-1]}")
    if len(n.parts) > 1:
        check_path(n, n.parts[1:], 1)


def _aggregated_var(call: ast.Call, multis: set[str], var_set: frozenset[str],
                    variables: frozenset[str], check_path: Any, planner: Any) -> str:
    """The one multi-row variable an aggregate of the measures clause reads."""
    found: set[str] = set()
    for arg in call.args:
        for n in names_outside(arg):
            _check_var_name(n, var_set, variables, check_path, planner)
            if n.parts[0] in multis:
                found.add(n.parts[0])
    if len(found) != 1:
        raise verr("aggregation functions in the measures clause must refer to properties "
                   "of exactly one multi-row variable", call,
                   f"aggregate a variable quantified with * or +, as in "
                   f"{call.name}({sorted(multis)[0]}.x)" if multis else
                   "quantify the variable with * or + to aggregate its events")
    return found.pop()


def _qualify(expr: ast.Node, var: str, var_set: frozenset[str], variables: frozenset[str],
             visible: set[str]) -> Any:
    """A condition's unqualified property names as the current event's (``v`` in the
    condition of A is ``A.v``) when no other variable is visible to it; else they are
    ambiguous, as in Esper, where every variable is an event of the same type."""
    def fix(n: Any) -> Any:
        if isinstance(n, ast.Name):
            head = n.parts[0]
            if head in var_set or head == "context" or (
                    len(n.parts) == 1 and head in variables):
                return n
            if visible:
                raise verr(f"property '{'.'.join(n.parts)}' is ambiguous: variables "
                           f"{', '.join(sorted({var, *visible}))} all have it", n,
                           f"qualify it, as in {var}.{'.'.join(n.parts)}")
            return dataclasses.replace(n, parts=(var, *n.parts))
        return _map_children(n, fix)
    return fix(expr)


def _map_children(n: Any, fix: Any) -> Any:
    """``n`` with ``fix`` applied to each child node (the same object when none
    changed)."""
    if not is_node(n):
        return n
    changes: dict[str, Any] = {}
    for f in n.__dataclass_fields__:
        if f == "pos":
            continue
        v = getattr(n, f)
        if is_node(v):
            nv = fix(v)
            if nv is not v:
                changes[f] = nv
        elif isinstance(v, tuple) and any(is_node(x) for x in v):
            nv = tuple(fix(x) if is_node(x) else x for x in v)
            if any(a is not b for a, b in zip(nv, v)):
                changes[f] = nv
    return dataclasses.replace(n, **changes) if changes else n


def _normalise_prev(expr: ast.Node) -> tuple[ast.Node, int]:
    """``prev()`` calls of a condition as ``prev(index, expr)`` (either argument order is
    accepted, as Esper does in define), and the depth of events they reach."""
    depth = 0

    def fix(n: Any) -> Any:
        nonlocal depth
        n = _map_children(n, fix)
        if isinstance(n, ast.Call) and n.name.lower() == "prev":
            args = n.args
            if len(args) == 1:
                index, target = 1, args[0]
            elif len(args) == 2:
                index, target = _const_int(args[0]), args[1]
                if index is None:
                    index, target = _const_int(args[1]), args[0]
                if index is None:
                    raise verr("prev() in define takes a constant index", n)
            else:
                raise verr("prev() takes an expression and an index", n)
            if index < 0:
                raise verr("prev() takes an index of 0 or more", n)
            depth = max(depth, index + 1)
            n = dataclasses.replace(
                n, args=(ast.Literal(index, "int", pos=n.pos), target))
        return n

    return fix(expr), depth


def _const_int(node: ast.Node) -> int | None:
    try:
        v = constant_value(node)
    except ValueError:
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None

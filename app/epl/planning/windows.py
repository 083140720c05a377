"""Planning of data windows: AST views → operators.windows specs."""

from __future__ import annotations

import dataclasses
from typing import Any

from app.epl import ast
from app.epl.errors import closest, verr
from app.epl.expr import Scope, compile_expr, constant_value, is_aggregate_call, text_of
from app.epl.walk import iter_nodes
from operators.aggregates import fold_filter
from operators.resultset import AggregateDef
from operators.windows.registry import WINDOWS, WindowParam, make_view_chain, make_view_spec

_EXPIRY = {"expr", "expr_batch"}


def _param(node: ast.Node, scope: Scope, window: str, index: int) -> WindowParam:
    text = text_of(node)
    _check_param(node, window, index)
    if isinstance(node, ast.TimePeriod):
        ms = node.ms()
        if ms is not None:
            return WindowParam(text, ms, True, True)
        return WindowParam(text, None, False, True, compile_expr(node, scope))
    if isinstance(node, ast.SortSpec):
        return WindowParam(text, None, False, False, compile_expr(node.expr, scope),
                           node.descending)
    if isinstance(node, ast.Star):
        return WindowParam("*", "*")
    if window in _EXPIRY and index == 0:
        aggs: list[AggregateDef] = []
        escope = Scope("env", frozenset(), variables=scope.variables, aggregates=aggs,
                       allow_aggregates=True, agg_in_row=True,
                       agg_value_scope=Scope("event", scope.aliases,
                                             variables=scope.variables))
        fn = compile_expr(node, escope)
        return WindowParam(text, None, False, False, fn, False,
                           tuple((f"$agg{i}", *fold_filter(a.aggregator, a.value, a.filter))
                                 for i, a in enumerate(aggs)))
    try:
        return WindowParam(text, constant_value(node))
    except ValueError:
        return WindowParam(text, None, False, False, compile_expr(node, scope))


def _check_param(node: ast.Node, window: str, index: int) -> None:
    """Esper ref. 14.1: no prev/prior and (outside expr windows) no aggregates as parameters."""
    for call in _calls(node):
        name = call.name.lower()
        if name in ("prev", "prevtail", "prevwindow", "prevcount", "prior"):
            raise verr(f"{name} is not allowed as a data window parameter", call)
        if is_aggregate_call(call) and not (
                window in _EXPIRY and index == 0):
            raise verr(f"aggregation function '{call.name}' is not allowed as a parameter of "
                       f"'{window}'", call, hint="only expr and expr_batch take aggregations")


def _calls(node: ast.Node | None) -> list[Any]:
    return [n for n in iter_nodes(node) if isinstance(n, ast.Call)]


def view_spec(view: ast.View, scope: Scope) -> Any:
    """One window's spec (ValueError → positioned validation error)."""
    params = [_param(p, scope, view.name, i) for i, p in enumerate(view.params)]
    try:
        return make_view_spec(view.name, params, view.namespace)
    except ValueError as e:
        hint = None
        if view.name not in WINDOWS:
            best = closest(view.name, list(WINDOWS))
            hint = f"did you mean '{best}'?" if best else None
        raise verr(str(e), view, hint=hint) from None


def plan_views(planner: Any, views: Any, scope: Scope, retain: str | None,
               props: dict[str, str] | None = None, type_name: str = "") -> Any:
    """The composed window chain of one stream (``props``: its type's properties, which
    the parameters' names must be, as in the select clause)."""
    specs = [view_spec(v, scope) for v in views]
    if props:
        from operators.derived.base import DerivedSpec

        _check_param_names(planner, views, scope, props, type_name)
        specs = [dataclasses.replace(s, wildcard_names=tuple(props))
                 if isinstance(s, DerivedSpec) and s.wildcard else s for s in specs]
    try:
        return make_view_chain(specs, union=(retain or "").lower().endswith("union"))
    except ValueError as e:
        raise verr(str(e), views[0]) from None


def _check_param_names(planner: Any, views: Any, scope: Scope, props: dict[str, str],
                       type_name: str) -> None:
    """An unknown property in a window parameter is an error at its position (Esper:
    the data window declaration fails to validate), not a null key for every event; an
    ``#expr`` window's expression reads the window's own built-in names."""
    if all(t == "any" for t in props.values()):
        return
    # a time period's names are variables, checked as it compiles
    params = [p for view in views for i, p in enumerate(view.params)
              if not (view.name in _EXPIRY and i == 0) and not isinstance(p, ast.TimePeriod)]
    planner.check_expr_names(params, props, scope, type_name)


def apama_view(node: ast.ApamaQuery) -> Any:
    """Apama batched windows: ``within D every P [retain N]`` / ``retain N every M`` as a
    batched window."""
    scope = Scope("event")
    params: list[Any] = []
    for i, p in enumerate((node.within, node.every, node.retain)):
        params.append(None if p is None else _param(p, scope, "apama_batched", i))
    try:
        return make_view_spec("apama_batched", params)
    except ValueError as e:
        given = [p for p in (node.within, node.every, node.retain) if p is not None]
        at = next((p for p in given if f"'{text_of(p)}'" in str(e)), given[0] if given else node)
        raise verr(str(e), at,
                   hint="Apama batched windows: 'within D every P' takes seconds, "
                        "'retain N every M' positive whole numbers of items") from None

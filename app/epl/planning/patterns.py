"""Planning of patterns and crontabs: AST → operators.patterns specs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.epl import ast
from app.epl.errors import did_you_mean, verr
from app.epl.expr import Scope, compile_expr, constant_value, text_of, time_period_ms
from app.runtime.catalog import NotSupported
from operators.patterns import spec as ps
from operators.patterns.crontab import CronSpec
from operators.patterns.pattern import PatternSpec


def pattern_tags(node: Any) -> list[str]:
    """Tag names of a pattern AST in order of appearance."""
    out: list[str] = []

    def visit(n: Any) -> None:
        if isinstance(n, ast.PFilter):
            if n.tag and n.tag not in out:
                out.append(n.tag)
            return
        for f in ("child", "children"):
            v = getattr(n, f, None)
            if isinstance(v, tuple):
                for c in v:
                    visit(c)
            elif v is not None:
                visit(v)

    visit(node)
    return out


def plan_pattern(planner: Any, node: Any, outer_tags: frozenset[str] = frozenset(),
                 subqueries: Any = None) -> Any:
    """A PatternSpec for a pattern AST; filters may read earlier tags and ``outer_tags``,
    and hold subqueries when ``subqueries`` (the statement's SubqueryEnv) is given."""
    tags = frozenset(pattern_tags(node)) | outer_tags
    variables = frozenset(planner.catalog.variables)
    return _Spec(_node(planner, node, tags, variables, subqueries), text_of(node))


class _Spec(PatternSpec):
    """A PatternSpec that also names its tags for the select scope."""

    def tag_names(self) -> tuple[str, ...]:
        return self.tags()


def _node(planner: Any, n: Any, tags: frozenset[str], variables: frozenset[str],
          subqueries: Any = None) -> Any:
    if isinstance(n, ast.PFilter):
        props = planner.catalog.type_props(n.type_name)
        if props is None:
            raise verr(f"unknown event type '{n.type_name}'", n,
                       hint=did_you_mean(n.type_name, planner._type_names()))
        pred = None
        if n.filter is not None:
            tenv = getattr(planner, "tenv", None)
            env = replace(tenv, props=props) if tenv is not None else None
            scope = Scope("pfilter", frozenset(), tags, variables, tables=env)
            if subqueries is not None and _has_subquery(n.filter):
                # Esper names a tagged filter's own stream by its tag: inside its
                # subqueries 'a.k' of 'a=A(...)' is the event being filtered
                own = frozenset({n.tag} if n.tag else ())
                scope = Scope("pfilter", own, tags - own, variables, tables=env,
                              subqueries=replace(subqueries, outer_props=frozenset(props),
                                                 outer_names=frozenset({n.type_name})))
            pred = compile_expr(n.filter, scope)
        return ps.Filter(n.tag, n.type_name, pred,
                         text_of(n.filter) if n.filter is not None else "")
    if isinstance(n, ast.PEvery):
        return ps.Every(_node(planner, n.child, tags, variables, subqueries))
    if isinstance(n, ast.PEveryDistinct):
        keys = tuple(compile_expr(e, Scope("pfilter", frozenset(), tags, variables,
                                           tables=getattr(planner, "tenv", None)))
                     for e in n.exprs)
        period = time_period_ms(n.period) if n.period is not None else None
        return ps.EveryDistinct(keys, period,
                                _node(planner, n.child, tags, variables, subqueries))
    if isinstance(n, ast.PFollowedBy):
        return ps.FollowedBy(tuple(_node(planner, c, tags, variables, subqueries)
                                   for c in n.children))
    if isinstance(n, ast.PAnd):
        return ps.And(tuple(_node(planner, c, tags, variables, subqueries)
                            for c in n.children))
    if isinstance(n, ast.POr):
        return ps.Or(tuple(_node(planner, c, tags, variables, subqueries)
                           for c in n.children))
    if isinstance(n, ast.PNot):
        return ps.Not(_node(planner, n.child, tags, variables, subqueries))
    if isinstance(n, ast.PTimerInterval):
        return ps.TimerInterval(time_period_ms(n.period))
    if isinstance(n, ast.PTimerAt):
        return ps.TimerAt(cron_spec(n.crontab))
    if isinstance(n, ast.PGuard):
        return ps.Within(_node(planner, n.child, tags, variables, subqueries),
                         time_period_ms(n.period))
    raise NotSupported(f"pattern {type(n).__name__}")


def _has_subquery(expr: Any) -> bool:
    from app.epl.walk import iter_nodes

    return any(isinstance(x, ast.SubSelect) for x in iter_nodes(expr))


def _cron_value(f: Any) -> Any:
    if isinstance(f, ast.CronStar):
        return "*"
    if isinstance(f, ast.CronStep):
        return f"*/{constant_value(f.step)}"
    if isinstance(f, ast.CronRange):
        return f"{constant_value(f.low)}-{constant_value(f.high)}"
    if isinstance(f, ast.CronList):
        return [_cron_value(i) for i in f.items]
    if isinstance(f, ast.CronLast):
        return "last" if f.value is None else f"{constant_value(f.value)} last"
    if isinstance(f, ast.CronWeekday):
        return f"{constant_value(f.value)} weekday"
    if isinstance(f, ast.CronLastWeekday):
        return "lastweekday"
    return constant_value(f)


def cron_spec(node: Any) -> CronSpec:
    """A CronSpec from a Crontab AST (ValueError → positioned validation error)."""
    try:
        return CronSpec.parse([_cron_value(f) for f in node.fields])
    except ValueError as e:
        raise verr(str(e), node) from None

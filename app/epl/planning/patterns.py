"""Planning of patterns and crontabs: AST → operators.patterns specs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.epl import ast
from app.epl.errors import did_you_mean, verr
from app.epl.expr import (
    Scope,
    compile_expr,
    compile_filter,
    constant_value,
    text_of,
    time_period_ms,
)
from app.epl.walk import conjuncts
from app.runtime.catalog import NotSupported
from operators.patterns import spec as ps
from operators.patterns.crontab import CronSpec
from operators.patterns.pattern import PatternSpec


def pattern_tags(node: ast.Node) -> list[str]:
    """Tag names of a pattern AST in order of appearance."""
    out: list[str] = []

    def visit(n: ast.Node) -> None:
        if isinstance(n, ast.PFilter):
            if n.tag and n.tag not in out:
                out.append(n.tag)
            return
        for f in ("child", "children", "until"):
            v = getattr(n, f, None)
            if isinstance(v, tuple):
                for c in v:
                    visit(c)
            elif v is not None:
                visit(v)

    visit(node)
    return out


def repeated_tags(node: ast.Node) -> frozenset[str]:
    """Tags inside a repeat (``[n] a=A``, ``a=A until b=B``): indexed (``a[0]``) outside it."""
    out: set[str] = set()

    def visit(n: ast.Node, inside: bool) -> None:
        if isinstance(n, ast.PFilter):
            if inside and n.tag:
                out.add(n.tag)
            return
        if isinstance(n, ast.PRepeat):
            visit(n.child, True)
            if n.until is not None:
                visit(n.until, inside)
            return
        for f in ("child", "children"):
            v = getattr(n, f, None)
            if isinstance(v, tuple):
                for c in v:
                    visit(c, inside)
            elif v is not None:
                visit(v, inside)

    visit(node, False)
    return frozenset(out)


def plan_pattern(planner: Any, node: ast.Node, outer_tags: frozenset[str] = frozenset(),
                 outer_arrays: frozenset[str] = frozenset(), subqueries: Any = None) -> Any:
    """A PatternSpec for a pattern AST; filters may read earlier tags and ``outer_tags``
    (of them ``outer_arrays`` hold lists of events), and hold subqueries when
    ``subqueries`` (the statement's SubqueryEnv) is given."""
    tags = frozenset(pattern_tags(node)) | outer_tags
    variables = frozenset(planner.catalog.variables)
    _check_tags(node)
    arrays = repeated_tags(node) | (outer_arrays - frozenset(pattern_tags(node)))
    return _Spec(_node(planner, node, tags, variables, arrays, subqueries), text_of(node))


class _Spec(PatternSpec):
    """A PatternSpec that also names its tags for the select scope."""

    def tag_names(self) -> tuple[str, ...]:
        return self.tags()

    def array_tag_names(self) -> frozenset[str]:
        """The tags a match holds as lists of events (tags inside a repeat)."""
        return frozenset(t for n in self.plan.nodes if isinstance(n, ps.Repeat)
                         for t in n.array_tags)


def tag_types(pattern: Any) -> dict[str, str]:
    """The event type each tag of a planned pattern names."""
    return {n.tag: n.type_name for n in pattern.plan.nodes
            if isinstance(n, ps.Filter) and n.tag}


def expand_tag_wildcards(planner: Any, node: ast.SelectStatement,
                         pattern: Any) -> ast.SelectStatement:
    """The statement with each ``tag.*`` of its select list expanded to the properties of
    the tag's event, each a column named as the property (Esper ref. 5.3, select clause:
    choosing event properties and events from a pattern; ``select a.*`` gives the tag's
    properties, not the tag), as the join planner expands ``stream.*``."""
    starred = [i for i in node.select_items
               if isinstance(i, ast.Wildcard) and i.stream is not None]
    if not starred:
        return node
    if len(starred) > 1:
        # Esper refuses it: each further 'tag.*' would need a column name to hold its event
        raise verr("a column name must be supplied for all but one tag if several tags are "
                   "selected with tag.*", starred[1],
                   hint="select one tag with tag.*, the other tags' properties by name")
    types = tag_types(pattern)
    arrays = pattern.array_tag_names()
    items: list[Any] = []
    for item in node.select_items:
        if not (isinstance(item, ast.Wildcard) and item.stream is not None):
            items.append(item)
            continue
        tag = item.stream
        if tag not in types:
            raise verr(f"'{tag}' is not a tag of the pattern", item,
                       hint=did_you_mean(tag, list(types)))
        if tag in arrays:
            raise NotSupported(f"'{tag}.*' of a tag inside a repeat (a list of events)")
        props = planner.catalog.type_props(types[tag])
        if props is None:
            raise NotSupported(f"'{tag}.*' of event type '{types[tag]}' without declared "
                               "properties")
        items += [ast.SelectItem(ast.Name((tag, p), pos=item.pos), p, pos=item.pos)
                  for p in props]
    return replace(node, select_items=tuple(items))


def pattern_window(planner: Any, node: ast.SelectStatement, src: ast.PatternStream,
                   scope: Scope, pattern: Any) -> Any:
    """The data window chain over a pattern's matches (``pattern [...]#length(2)``): each
    match is an event of the stream with the tags as properties (Esper ref. 5.4.2
    pattern-based event streams, 5.4.3 specifying views), so window parameters read tag
    properties (``#unique(a.k)``) in the scope of the tags."""
    from app.epl.planning.base import derived_props

    params = tuple(ast.SelectItem(p.expr if isinstance(p, ast.SortSpec) else p)
                   for v in src.views for p in v.params if not isinstance(p, ast.Star))
    # a tag's property must be one of its type's (as in the select clause)
    planner._check_tag_names(replace(node, select_items=params, where=None, having=None,
                                     group_by=()), pattern)
    view = planner.view_chain(src.views, scope, src.retain)
    if derived_props(view):
        # its rows would be the window's statistics, not matches: not planned here
        raise NotSupported("a derived-value window over a pattern")
    return view


def _check_tags(root: ast.Node) -> None:
    """A tag names events of one type; Esper ref. "Repeat": a tag inside a repeat names
    the list of its events, so no filter outside that repeat may use the same tag."""
    everywhere = _filters(root)
    types: dict[str, str] = {}
    for f in everywhere:
        if f.tag is None:
            continue
        seen = types.setdefault(f.tag, f.type_name)
        if seen != f.type_name:
            raise verr(f"tag '{f.tag}' for event type '{f.type_name}' is already declared for "
                       f"events of type '{seen}'", f,
                       hint="one tag names events of one type; give this filter another tag")
    for rep in _repeats(root):
        inner = _filters(rep.child)
        names = {f.tag for f in inner if f.tag}
        ids = {id(f) for f in inner}
        for f in everywhere:
            if f.tag in names and id(f) not in ids:
                raise verr(f"tag '{f.tag}' is used inside a repeat and cannot also appear in "
                           f"other filter expressions", f,
                           hint="a tag inside a repeat names the list of its events; "
                                "give this filter another tag")


def _repeats(n: ast.Node) -> list[ast.PRepeat]:
    """The repeat nodes of a pattern AST."""
    out = [n] if isinstance(n, ast.PRepeat) else []
    for f in ("child", "children", "until"):
        v = getattr(n, f, None)
        for c in (v if isinstance(v, tuple) else (v,)):
            if isinstance(c, ast.Node) and not isinstance(c, ast.PFilter):
                out += _repeats(c)
    return out


def _filters(n: ast.Node) -> list[ast.PFilter]:
    """The filter atoms of a pattern AST."""
    if isinstance(n, ast.PFilter):
        return [n]
    out: list[Any] = []
    for f in ("child", "children", "until"):
        v = getattr(n, f, None)
        if isinstance(v, tuple):
            for c in v:
                out += _filters(c)
        elif v is not None and isinstance(v, ast.Node):
            out += _filters(v)
    return out


def _pscope(planner: Any, tags: frozenset[str], variables: frozenset[str],
            arrays: frozenset[str], props: Any = None) -> Scope:
    """The scope of an expression inside a pattern (a filter, a bound, a guard)."""
    tenv = getattr(planner, "tenv", None)
    env = replace(tenv, props=props) if tenv is not None and props is not None else tenv
    return Scope("pfilter", frozenset(), tags, variables, tables=env, array_tags=arrays)


def _repeat(planner: Any, n: ast.PRepeat, tags: frozenset[str], variables: frozenset[str],
            arrays: frozenset[str], subqueries: Any = None) -> Any:
    """A repeat / repeat-until: bounds checked as Esper checks constant bounds."""
    exact = n.low is not None and not n.ranged
    low_c = _const_bound(n.low)
    high_c = _const_bound(n.high)
    consts = (n.low is None or low_c is not None) and (n.high is None or high_c is not None)
    tight = exact
    if consts and not exact:
        if low_c is not None and high_c is not None and low_c > high_c:
            raise verr(f"incorrect range: the lower bound {low_c} is higher than the upper "
                       f"bound {high_c}", n.low, hint="write [low:high] with low <= high")
        tight = low_c is not None and low_c == high_c
    if consts:
        zero_low = n.ranged and n.low is not None and n.high is not None
        for value, node, allow_zero in ((low_c, n.low, zero_low), (high_c, n.high, False)):
            if value is not None and (value < 0 or (value == 0 and not allow_zero)):
                raise verr("incorrect range: a bound of zero or a negative bound is not "
                           "allowed", node, hint="repeat counts start at 1, e.g. [2] or [1:3]")
    elif not exact:
        tight = True  # bounds known only at run time (Esper accepts them without until)
    if n.ranged and not tight and n.until is None:
        raise verr("a repeat with variable bounds needs an until-expression", n,
                   hint="e.g. [2:] a=A until b=B; [n] repeats exactly n times")
    # inside one repeat its own tags are single events; those of a repeat nested in it
    # are lists there too
    inner = repeated_tags_of(n.child)
    child = _node(planner, n.child, tags, variables,
                  (arrays - inner) | repeated_tags(n.child), subqueries)
    until = (_node(planner, n.until, tags, variables, arrays, subqueries)
             if n.until is not None else None)
    scope = _pscope(planner, tags, variables, arrays)
    low = compile_expr(n.low, scope) if n.low is not None else None
    high = compile_expr(n.high, scope) if n.high is not None else None
    names = tuple(dict.fromkeys(f.tag for f in _filters(n.child) if f.tag))
    text = ""
    if n.low is not None or n.high is not None:
        text = (f"[{text_of(n.low)}]" if exact else
                f"[{text_of(n.low) if n.low is not None else ''}:"
                f"{text_of(n.high) if n.high is not None else ''}]")
    return ps.Repeat(child, until, low, high, exact, names, text)


def repeated_tags_of(child: ast.Node) -> frozenset[str]:
    """Every tag of a repeated sub-expression (single events inside it)."""
    return frozenset(f.tag for f in _filters(child) if f.tag)


def _const_bound(node: ast.Node | None) -> int | None:
    """A constant repeat bound as an int, else None (also for no bound)."""
    if node is None:
        return None
    try:
        value = constant_value(node)
    except ValueError:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise verr("a repeat bound must be a number", node, hint="e.g. [2] or [1:3]")
    return int(value)


_RELATIONS = frozenset({"<", "<=", ">", ">="})


def _range_constant(expr: ast.Node | None, props: Any, tags: frozenset[str]
                    ) -> ps.PatternExpr | None:
    """For a filter that compares one event property with a property of an earlier tag
    (``b=Ev(k = a.k, v > a.v)``), the value each instance compares with (``a.v``), else
    None.  Esper indexes such a filter by that value in a sorted map (Esper ref. 15.18
    compiler filter expression analysis), so one event that passes several instances'
    filters completes them in ascending order of it; the filter's other parts may only
    be equalities or comparisons with constants, which do not order them."""
    found: list[tuple[str, str]] = []
    for c in conjuncts(expr):
        if not isinstance(c, ast.Binary) or c.op not in _RELATIONS | {"="}:
            return None
        sides = [_side(x, props, tags) for x in (c.left, c.right)]
        kinds = [kind for kind, _ in sides]
        if kinds.count("prop") != 1 or "other" in kinds:
            return None
        tagged = next((ref for kind, ref in sides if kind == "tag"), None)
        if c.op in _RELATIONS and tagged is not None:
            found.append(tagged)
    if len(found) != 1:
        return None
    tag, prop = found[0]

    def constant(arg: tuple[Any, dict[str, Any]], ctx: Any) -> Any:
        row = arg[1].get(tag)
        return row.get(prop) if isinstance(row, dict) else None

    return constant


def _side(node: ast.Node, props: Any, tags: frozenset[str]
          ) -> tuple[str, tuple[str, str] | None]:
    """What one side of a filter's comparison is: the event's property ("prop"), an
    earlier tag's property ("tag", with the tag and property), a constant ("const"), or
    anything else ("other")."""
    if isinstance(node, ast.Name):
        if len(node.parts) == 1 and node.parts[0] in props and node.parts[0] not in tags:
            return "prop", None
        if len(node.parts) == 2 and node.parts[0] in tags:
            return "tag", (node.parts[0], node.parts[1])
        return "other", None
    try:
        constant_value(node)
    except ValueError:
        return "other", None
    return "const", None


def _node(planner: Any, n: ast.Node, tags: frozenset[str], variables: frozenset[str],
          arrays: frozenset[str] = frozenset(), subqueries: Any = None) -> Any:
    if isinstance(n, ast.PFilter):
        props = planner.catalog.type_props(n.type_name)
        if props is None:
            raise verr(f"unknown event type '{n.type_name}'", n,
                       hint=did_you_mean(n.type_name, planner._type_names()))
        pred = None
        if n.filter is not None:
            scope = _pscope(planner, tags, variables, arrays, props)
            if subqueries is not None and _has_subquery(n.filter):
                # Esper names a tagged filter's own stream by its tag: inside its
                # subqueries 'a.k' of 'a=A(...)' is the event being filtered
                own = frozenset({n.tag} if n.tag else ())
                scope = replace(scope, aliases=own, tags=tags - own,
                                subqueries=replace(subqueries, outer_props=frozenset(props),
                                                   outer_names=frozenset({n.type_name})))
            pred = compile_filter(n.filter, scope)
        return ps.Filter(n.tag, n.type_name, pred,
                         text_of(n.filter) if n.filter is not None else "",
                         _range_constant(n.filter, props, tags - arrays))
    if isinstance(n, ast.PEvery):
        return ps.Every(_node(planner, n.child, tags, variables, arrays, subqueries))
    if isinstance(n, ast.PEveryDistinct):
        scope = _pscope(planner, tags, variables, arrays)
        keys = tuple(compile_expr(e, scope) for e in n.exprs)
        period = time_period_ms(n.period) if n.period is not None else None
        return ps.EveryDistinct(keys, period,
                                _node(planner, n.child, tags, variables, arrays, subqueries))
    if isinstance(n, ast.PFollowedBy):
        return ps.FollowedBy(tuple(_node(planner, c, tags, variables, arrays, subqueries)
                                   for c in n.children))
    if isinstance(n, ast.PAnd):
        return ps.And(tuple(_node(planner, c, tags, variables, arrays, subqueries)
                            for c in n.children))
    if isinstance(n, ast.POr):
        return ps.Or(tuple(_node(planner, c, tags, variables, arrays, subqueries)
                           for c in n.children))
    if isinstance(n, ast.PNot):
        return ps.Not(_node(planner, n.child, tags, variables, arrays, subqueries))
    if isinstance(n, ast.PRepeat):
        return _repeat(planner, n, tags, variables, arrays, subqueries)
    if isinstance(n, ast.PGuardWhile):
        cond = compile_expr(n.cond, _pscope(planner, tags, variables, arrays))
        return ps.WhileGuard(_node(planner, n.child, tags, variables, arrays, subqueries),
                             cond, text_of(n.cond))
    if isinstance(n, ast.PTimerInterval):
        return ps.TimerInterval(time_period_ms(n.period))
    if isinstance(n, ast.PTimerAt):
        return ps.TimerAt(cron_spec(n.crontab))
    if isinstance(n, ast.PGuard):
        count = None
        if n.max_count is not None:
            try:
                count = constant_value(n.max_count)
            except ValueError:
                count = None
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise verr("the count of timer:withinmax must be a whole number, 0 or more",
                           n.max_count, hint="e.g. where timer:withinmax(10 sec, 3)")
        return ps.Within(_node(planner, n.child, tags, variables, arrays, subqueries),
                         time_period_ms(n.period), count)
    raise NotSupported(f"pattern {type(n).__name__}")


def _has_subquery(expr: ast.Node) -> bool:
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


def cron_spec(node: ast.Crontab) -> CronSpec:
    """A CronSpec from a Crontab AST (ValueError → positioned validation error)."""
    try:
        return CronSpec.parse([_cron_value(f) for f in node.fields])
    except ValueError as e:
        raise verr(str(e), node) from None

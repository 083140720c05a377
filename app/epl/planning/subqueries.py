"""Planning of subqueries (Esper reference "Subqueries").

A subquery is planned where its expression is compiled (``Scope.subqueries``): its
stream (an event type with its data windows, else the last event only; a named window;
a table), its where clause split into hash-index equalities and a residual, and its
select list (one column, several, ``*``, aggregates with an optional group by and
having).  Names inside resolve against the subquery's stream first, then the enclosing
statement (a correlated subquery).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from app.epl import ast
from app.epl.errors import did_you_mean, verr
from app.epl.expr import (
    Scope,
    compile_expr,
    compile_filter,
    has_aggregate,
    is_inner_name,
    names_in,
    text_of,
)
from app.epl.properties import path_error
from app.epl.walk import conjuncts
from app.runtime.catalog import NotSupported
from operators.contexts.managers import HashSpec, KeyedSpec
from operators.contexts.nested import NestedSpec
from operators.subquery.spec import SubquerySpec


@dataclass
class SubqueryEnv:
    """The subqueries of one statement, in the order its expressions hold them."""

    planner: Any
    context: str | None = None
    outer_names: frozenset[str] = frozenset()
    """Type names of the enclosing stream that qualify its properties (``A.k``)."""
    outer_props: frozenset[str] = frozenset()
    """Properties of the enclosing stream(s), for unqualified outer names."""
    pattern: bool = False
    """The enclosing statement selects from a pattern: its tags are not streams a
    subquery can name (as Esper validates it)."""
    specs: list[SubquerySpec] = field(default_factory=list)

    def plan(self, node: ast.SubSelect, scope: Scope, one_column: bool = False,
             exists: bool = False) -> int:
        """Plan a subquery of an expression compiled in ``scope``; its index."""
        spec = _plan(self, node, scope, one_column, exists)
        self.specs.append(spec)
        return len(self.specs) - 1


def _and_all(parts: list[Any]) -> Any:
    out = None
    for p in parts:
        out = p if out is None else ast.Binary("and", out, p, pos=p.pos)
    return out


def _source(env: SubqueryEnv, src: Any) -> tuple[str, dict[str, str]]:
    """(stream | window | table, properties) of the subquery's from clause."""
    cat = env.planner.catalog
    name = src.type_name
    if name in cat.tables:
        table = cat.tables[name]
        if src.views:
            raise verr("a subquery over a table takes no data window", src.views[0])
        if table.context is not None and table.context != env.context:
            raise verr(f"table '{name}' is declared with context '{table.context}'; a "
                       "statement reading it must declare the same context", src,
                       hint=f"write 'context {table.context} ...'")
        env.planner.tenv.used.add(name)
        return "table", {c.name: c.type_name or "any" for c in table.columns}
    props = cat.type_props(name)
    if props is None:
        raise verr(f"unknown event type '{name}'", src,
                   hint=did_you_mean(name, env.planner._type_names()))
    if name in cat.named_windows:
        wctx = cat.named_windows[name] or None
        if wctx != env.context:
            # the window's rows live with its context's partitions (Esper ref. 4.6); on Kafka
            # another context's engine partitions would never see them
            raise verr(f"named window '{name}' is declared with context '{wctx}'; a "
                       "statement whose subquery reads it must declare the same context"
                       if wctx else f"named window '{name}' has no context; a statement "
                       "whose subquery reads it must not declare one", src,
                       hint=f"write 'context {wctx} ...'" if wctx else None)
        if src.views:
            raise verr("a subquery over a named window takes no data window", src.views[0],
                       hint="the named window's own window holds the rows")
        return "window", dict(props)
    return "stream", dict(props)


def _check_context(env: SubqueryEnv, type_name: str, src: Any) -> None:
    """In a keyed or hash context each partition's subquery window holds the events of
    its own partition: the context must list the subquery's type."""
    if env.context is None:
        return
    inner = env.planner.catalog.contexts.get(env.context)
    while isinstance(inner, NestedSpec):
        inner = inner.inner
    if isinstance(inner, KeyedSpec | HashSpec) and type_name not in inner.types():
        raise NotSupported(f"a subquery in keyed or hash context '{env.context}' over "
                           f"{type_name}, which the context does not partition (list the "
                           "type in the context declaration)")


def _plan(env: SubqueryEnv, node: ast.SubSelect, scope: Scope, one_column: bool,
          exists: bool) -> SubquerySpec:
    planner = env.planner
    src = node.stream
    source, props = _source(env, src)
    if source == "stream":
        _check_context(env, src.type_name, src)
    variables = scope.variables
    aliases = frozenset({src.alias} if src.alias else {src.type_name})
    outer = scope
    if scope.kind == "event":
        outer = dataclasses.replace(scope, aliases=scope.aliases | env.outer_names)
    inner = Scope("sub", aliases, variables=variables, tables=planner.tenv, outer=outer,
                  inner_props=frozenset(props))
    event_scope = Scope("event", aliases, variables=variables, tables=planner.tenv)
    _check_names(env, node, inner, props, src.type_name)
    filt = compile_filter(src.filter, event_scope) if src.filter is not None else None
    view = None
    if source == "stream" and src.views:
        view = planner.view_chain(src.views, event_scope, src.retain, dict(props),
                                  src.type_name)
    correlated = any(not is_inner_name(n, inner) and n.parts[0] != "context"
                     and not (len(n.parts) == 1 and n.parts[0] in variables)
                     for e in _exprs(node) for n in names_in(e))
    items = node.select_items
    star = [i for i in items if isinstance(i, ast.Wildcard)]
    if star and len(items) > 1:
        raise verr("a subquery selecting '*' selects nothing else", items[1])
    if one_column and len(items) != 1:
        raise verr("this subquery must select one column", node,
                   hint="'in', 'any', 'some' and 'all' compare with a single value")
    aggregated = bool(node.group_by) or any(
        isinstance(i, ast.SelectItem) and has_aggregate(i.expr) for i in items)
    if node.having is not None and not aggregated:
        raise verr("a subquery's having clause needs aggregation", node.having)
    aggs: list[Any] = []
    in_order = view is None or bool(getattr(view, "oldest_first", True))
    sel_scope = dataclasses.replace(inner, aggregates=aggs, agg_value_scope=inner,
                                    agg_texts={}, rows_leave_in_order=in_order
                                    ) if aggregated else inner
    columns: list[Any] = []
    names: list[str] = []
    for item in items:
        if isinstance(item, ast.Wildcard):
            if aggregated:
                raise verr("a subquery with aggregation cannot select '*'", item)
            columns.append(None)
            names.append("*")
            continue
        if aggregated:
            _check_aggregated(item.expr, node.group_by, inner)
        columns.append(compile_expr(item.expr, sel_scope))
        names.append(item.alias or text_of(item.expr).replace(" ", ""))
    having = compile_expr(node.having, sel_scope) if node.having is not None else None
    group_by = tuple(compile_expr(g, inner) for g in node.group_by)
    keys: list[Any] = []
    lookup: list[Any] = []
    key_texts: list[str] = []
    residual: list[Any] = []
    incremental = aggregated and not correlated and not node.group_by and source == "stream"
    if source == "stream" and view is None and not incremental:
        # Esper: only an uncorrelated, fully aggregated subquery may go without a data
        # window (its aggregates then take every event); others must bound the stream
        raise verr("this subquery needs a data window to limit its stream", src,
                   hint=f"declare one, as in {src.type_name}#length(10) or "
                        f"{src.type_name}#lastevent (only an uncorrelated subquery that "
                        "selects aggregates alone may go without)")
    table_keys: tuple[Any, ...] = ()
    pairs: list[tuple[Any, Any]] = []
    for c in conjuncts(node.where):
        pair = None if incremental else _index_pair(c, inner)
        if pair is None:
            residual.append(c)
        else:
            pairs.append((c, pair))
    if source == "table":
        table = planner.catalog.tables[src.type_name]
        by_col = {}
        for _, (k, v) in pairs:
            parts = k.parts[1:] if k.parts[0] in aliases else k.parts
            if isinstance(k, ast.Name) and len(parts) == 1:
                by_col.setdefault(parts[0], v)
        if table.keys and all(k in by_col for k in table.keys):
            table_keys = tuple(compile_expr(by_col[k], outer) for k in table.keys)
        residual = [c for c, _ in pairs] + residual  # the where clause decides the rest
    else:
        seen: set[str] = set()
        for c, (k, v) in pairs:
            t = text_of(k)
            if t in seen:
                residual.append(c)
                continue
            seen.add(t)
            keys.append(compile_expr(k, event_scope))
            lookup.append(compile_expr(v, outer))
            key_texts.append(t)
    entry: list[Any] = []
    if source != "table" and not incremental:
        # conditions on the subquery's event alone decide once, as a row enters the index
        entry = [c for c in residual if _entry_condition(c, inner)]
        residual = [c for c in residual if not any(c is e for e in entry)]
    where_node = _and_all(residual)
    where = compile_expr(where_node, inner) if where_node is not None else None
    entry_node = _and_all(entry)
    index_filter = compile_expr(entry_node, inner) if entry_node is not None else None
    return SubquerySpec(
        src.type_name, source, filt, view, tuple(keys), tuple(lookup), tuple(key_texts),
        where, correlated, tuple(columns), tuple(names), tuple(aggs), group_by, having,
        bool(node.distinct), table_keys, index_filter, text=_text(planner, node),
        nulls_meet=not exists and not aggs and not group_by)


_CLOCK_CALLS = frozenset({"current_timestamp", "prev", "prevtail", "prevcount",
                          "prevwindow"})


def _entry_condition(c: ast.Node, inner: Scope) -> bool:
    """Whether a where-clause condition reads the subquery's event alone, and nothing that
    changes while the event stays in the window (variables, the clock, the context)."""
    from app.epl.walk import iter_nodes

    if _side(c, inner) != "inner":
        return False
    return not any(isinstance(n, ast.Call) and n.name.lower() in _CLOCK_CALLS
                   for n in iter_nodes(c))


def _text(planner: Any, node: ast.SubSelect) -> str:
    from app.epl.parser import source_text

    written = source_text(planner.source, node.pos) if planner.source else ""
    return " ".join((written or text_of(node)).split())


def _exprs(node: ast.SubSelect) -> list[Any]:
    out = [i.expr for i in node.select_items if isinstance(i, ast.SelectItem)]
    out += [e for e in (node.where, node.having, *node.group_by) if e is not None]
    return out


def _index_pair(c: ast.Node, inner: Scope) -> tuple[Any, Any] | None:
    """``inner = outer`` (either way round): the side over the subquery's stream alone
    and the side over the enclosing row alone, else None."""
    if not (isinstance(c, ast.Binary) and c.op == "="):
        return None
    for a, b in ((c.left, c.right), (c.right, c.left)):
        if _side(a, inner) == "inner" and _side(b, inner) == "outer":
            return a, b
    return None


def _side(e: ast.Node, inner: Scope) -> str:
    """inner (reads the subquery's stream only), outer (reads no subquery property, may
    read the enclosing row), or mixed."""
    from app.epl.walk import iter_nodes

    if any(isinstance(n, ast.SubSelect) for n in iter_nodes(e)) or has_aggregate(e):
        return "mixed"
    names = names_in(e)
    ins = [is_inner_name(n, inner) for n in names]
    if ins and all(ins):
        return "inner"
    if not any(ins):
        return "outer"
    return "mixed"


def _check_aggregated(expr: ast.Node, group_by: tuple[ast.Node, ...], inner: Scope) -> None:
    """Esper: with aggregation, a subquery's selected properties are aggregated or
    grouped (the group-by expressions themselves)."""
    texts = {text_of(g) for g in group_by}
    stack = [expr]
    while stack:
        e = stack.pop()
        if text_of(e) in texts:
            continue
        if isinstance(e, ast.Call) and has_aggregate(e):
            continue
        if isinstance(e, ast.Name):
            if is_inner_name(e, inner):
                raise verr(f"'{text_of(e)}' is neither aggregated nor grouped in a "
                           "subquery with aggregation", e,
                           hint="aggregate it (as in max(...)) or group by it")
            continue
        from app.epl.walk import children

        if not isinstance(e, ast.SubSelect):
            stack.extend(children(e))


def _check_names(env: SubqueryEnv, node: ast.SubSelect, inner: Scope,
                 props: dict[str, str], type_name: str) -> None:
    """Names of the subquery are properties of its stream or of the enclosing row."""
    outer = inner.outer
    assert outer is not None
    exprs = _exprs(node)
    if node.stream.filter is not None:
        exprs.append(node.stream.filter)
    typed = not all(t == "any" for t in props.values())
    cat = env.planner.catalog
    for e in exprs:
        for n in names_in(e):
            parts = n.parts
            head = parts[0]
            if head == "context" or head in inner.variables:
                continue
            if is_inner_name(n, inner):
                rest = parts[1:] if len(parts) > 1 and head in inner.aliases else parts
                if typed:
                    problem = path_error(rest, props, cat.type_props, type_name)
                    if problem is not None:
                        raise env.planner._path_err(n, len(parts) - len(rest), problem)
                continue
            if env.pattern and head in outer.tags:
                raise verr(f"a subquery cannot read pattern tag '{head}'", n,
                           hint="a subquery names its own stream and the statement's "
                                "streams; a pattern's tags are not streams")
            if outer.kind == "tags" and head in env.outer_props and head not in outer.tags:
                raise verr(f"'{head}' of the statement's streams is ambiguous inside a "
                           "subquery", n, hint="qualify it with its stream's name or alias, "
                           f"as in <stream>.{head}")
            if (head in outer.aliases or head in outer.tags or head in env.outer_props
                    or head in outer.partition_keys or not env.outer_props
                    or (inner.tables is not None and head in inner.tables.specs)):
                continue
            raise verr(f"'{head}' is not a property of {type_name} nor of the statement's "
                       "stream", n, hint=did_you_mean(head, [*props, *env.outer_props]))


SUBQUERY_NODES = (ast.Subquery, ast.Exists, ast.InSubquery, ast.Quantified)


def subquery_numbers(statement: Any) -> dict[int, int]:
    """The number of each subquery of a statement (1, 2, ... in the order its clauses are
    written), by the identity of its SubSelect node."""
    from app.epl.walk import children

    out: dict[int, int] = {}
    stack = [statement]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.SubSelect):
            out.setdefault(id(n), len(out) + 1)
            continue
        stack.extend(reversed(children(n)))
    return out


def subquery_name(node: ast.Node, source: str, numbers: dict[int, int]) -> str:
    """How Esper names a subquery in a column name: its first selected column's alias, else
    that column's text, else (``select *``) ``subselect_N``."""
    from app.epl.parser import source_text

    items = node.query.select_items
    first = items[0] if items else None
    if isinstance(first, ast.SelectItem):
        if first.alias:
            return str(first.alias)
        written = source_text(source, first.expr.pos) if source else ""
        return "".join((written or text_of(first.expr)).split())
    return f"subselect_{numbers.get(id(node.query), 1)}"


def column_text(expr: ast.Node, source: str, numbers: dict[int, int]) -> str | None:
    """The column name of a select expression holding subqueries (Esper prints each
    subquery by its name, see ``subquery_name``), or None when it holds none."""
    from app.epl.walk import iter_nodes

    found = [n for n in iter_nodes(expr) if isinstance(n, SUBQUERY_NODES)]
    if not found:
        return None
    outer = [n for n in found if not any(m is not n and _within(n, m) for m in found)]
    if isinstance(expr, SUBQUERY_NODES) or not source:
        if isinstance(expr, SUBQUERY_NODES):
            return subquery_name(expr, source, numbers)
        return None
    start, end = _offsets(source, expr.pos)
    text = source[start:end]
    for n in sorted(outer, key=lambda n: _offsets(source, n.pos)[0], reverse=True):
        a, b = _offsets(source, n.pos)
        text = text[:a - start] + subquery_name(n, source, numbers) + text[b - start:]
    return "".join(text.split())


def _within(inner: Any, outer: Any) -> bool:
    from app.epl.walk import iter_nodes

    return any(x is inner for x in iter_nodes(outer))


def _offsets(source: str, pos: Any) -> tuple[int, int]:
    lines = source.split("\n")
    start = sum(len(line) + 1 for line in lines[: pos.line - 1]) + pos.column - 1
    end = sum(len(line) + 1 for line in lines[: pos.end_line - 1]) + pos.end_column - 1
    return start, end


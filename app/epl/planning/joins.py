"""Planning of stream-to-stream joins (``from A#w as a, B#w as b [where ...]``).

Names are resolved against the streams first: an unqualified property becomes
``stream.property`` when exactly one stream has it (else the statement is ambiguous, as
in Esper), so that every expression is compiled over join rows ``{stream: event}``.  The
where clause's equalities between streams become hash indexes; a stream with no such
equality but relational operators (``<``, ``<=``, ``>``, ``>=``) comparing one of its
properties with what is already joined gets a sorted index; other streams are scanned
(a nested loop).  Esper reference
"Joining Event Streams"; Esper ref. 2, "event indexes".
"""

from __future__ import annotations

import dataclasses
from typing import Any

from app.epl import ast
from app.epl.errors import did_you_mean, verr
from app.epl.expr import Scope, compile_expr, compile_filter, is_table_name, names_in, text_of
from app.epl.planning.base import PlannerBase, stream_names
from app.epl.planning.java_types import java_box
from app.epl.planning.subqueries import SubqueryEnv
from app.epl.properties import path_error
from app.epl.walk import conjuncts
from app.runtime.catalog import NotSupported
from app.runtime.plan import StatementPlan
from operators.contexts.managers import HashSpec, KeyedSpec
from operators.contexts.nested import NestedSpec
from operators.joins.spec import IndexDef, JoinSpec, JoinStream, Step
from operators.pipeline import PipelineSpec


def plan_join(planner: PlannerBase, node: ast.SelectStatement, name: str,
              epl: str) -> StatementPlan:
    """A select statement over two or more streams."""
    cat = planner.catalog
    variables = frozenset(cat.variables)
    streams: list[JoinStream] = []
    props: dict[str, dict[str, str]] = {}
    types: dict[str, str] = {}
    window: str | None = None
    for src in node.from_:
        if not isinstance(src, ast.FilterStream):
            raise NotSupported("joins with a pattern stream")
        named = src.type_name in cat.named_windows
        if named:
            if window is not None:
                raise NotSupported("joins of two named windows")
            if src.views:
                raise NotSupported("data windows on a named window in a join")
            window = src.type_name
        table = cat.tables.get(src.type_name)
        if table is not None:
            if src.views or src.unidirectional:
                raise NotSupported("a table in a join with a data window or unidirectional")
            if table.context != node.context:
                raise verr(f"table '{table.name}' is declared with context '{table.context}'"
                           "; a statement reading it must declare the same context"
                           if table.context else f"table '{table.name}' has no context; a "
                           "statement joining it must not declare one", src,
                           hint="Esper ref. 4.7 Context and Tables")
            planner.tenv.used.add(table.name)
        p = ({c.name: c.type_name or "any" for c in table.columns} if table is not None
             else cat.type_props(src.type_name))
        if p is None:
            raise verr(f"unknown event type '{src.type_name}'", src,
                       hint=did_you_mean(src.type_name, planner._type_names()))
        sname = src.alias or src.type_name
        if sname in props:
            raise verr(f"stream name '{sname}' is used by two streams of the join", src,
                       hint="give each stream its own name with 'as'")
        if src.unidirectional and src.views:
            # Esper: "The unidirectional keyword requires that no views are declared"
            raise verr("a unidirectional stream takes no data window", src,
                       hint="the other streams' windows hold the rows it joins")
        if not src.unidirectional and not src.views and not named and table is None:
            # Esper: "Joins require that at least one view is specified for each stream"
            raise verr(f"stream '{sname}' of the join needs a data window", src,
                       hint=f"for example {src.type_name}#keepall, or mark the stream "
                            "that triggers the join 'unidirectional'")
        props[sname] = dict(p)
        types[sname] = src.type_name
        planner.tenv.props = p
        scope = Scope("event", stream_names(src.alias, src.type_name, p),
                      variables=variables, tables=planner.tenv)
        filt = compile_filter(src.filter, scope) if src.filter is not None else None
        view = (planner.view_chain(src.views, scope, src.retain, dict(p), src.type_name)
                if src.views else None)
        streams.append(JoinStream(src.type_name, sname, filt, view, bool(src.unidirectional),
                                  text_of(src.filter) if src.filter is not None else "",
                                  named_window=named, table=table is not None))
    outer_kinds = [j.kind for j in node.joins if j.kind != "inner"]
    if outer_kinds and len(streams) == 2:
        kind = outer_kinds[0]
        streams[0] = dataclasses.replace(streams[0], outer=kind in ("left", "full"))
        streams[1] = dataclasses.replace(streams[1], outer=kind in ("right", "full"))
    if sum(s.unidirectional for s in streams) > 1 and outer_kinds != ["full"]:
        # Esper: several unidirectional streams only with a full outer join
        raise verr("only one stream of a join can be unidirectional", node.from_[1])
    if node.context is not None:
        _check_context(planner, node.context, streams, node)
    planner.tenv.props = {}
    names = frozenset(props)
    resolver = _Resolver(planner, props, types, variables)
    node = _qualified(node, resolver)
    inner_on = [j.on for j in node.joins if j.kind == "inner"]
    if inner_on and not [j for j in node.joins if j.kind != "inner"]:
        # Esper reference 5.12: an inner join's on clause is part of the where clause
        where = node.where
        for on in inner_on:
            where = on if where is None else ast.Binary("and", on, where, pos=on.pos)
        node = dataclasses.replace(node, where=where, joins=())
    _check_prev_windows(node, streams, names)
    subs = SubqueryEnv(planner, node.context,
                       outer_props=frozenset(p for pr in props.values() for p in pr))
    scope = Scope("tags", tags=names, variables=variables, tables=planner.tenv,
                  subqueries=subs)
    streams = _with_priors(node, streams, names, scope)
    agg_texts: dict[str, int] = {}
    # Esper ref. 4.2 keyed segmented context: a stream's partition property reads as the
    # partition's key in the select clause (a select of it and aggregates is fully
    # aggregated), in a join as for one stream
    keys = {f"{sname}.{prop}": key for sname, tname in types.items()
            for prop, key in (planner.partition_keys(node.context, tname).items()
                              if node.context is not None else ())}
    # join rows leave as any stream's window evicts: order-based aggregates track them
    rs = planner.result_set(node, dataclasses.replace(scope, rows_leave_in_order=False,
                                                      partition_keys=keys),
                            agg_texts=agg_texts, join=True,
                            prop_types={f"{sname}.{p}": t for sname, pr in props.items()
                                        for p, t in pr.items()})
    tables: tuple[str, ...] = ()
    if node.into_table is not None:
        if any(s.unidirectional for s in streams):
            raise NotSupported("into table from a unidirectional join")
        rs = planner._into_table(node, rs, agg_texts)
        tables = (node.into_table,)
    where = compile_expr(node.where, scope) if node.where is not None else None
    output = planner.output(node.output, scope)
    if outer_kinds:
        spec = _outer_spec(streams, node.joins, scope)
    else:
        spec = _join_spec(streams, node.where, scope, planner,
                          {f"{sname}.{p}": t for sname, pr in props.items()
                           for p, t in pr.items()})
    select_kind, insert_into, insert_stream, select_stream = planner.streams_of(node, rs)
    if select_kind == "istream" and insert_stream != "istream":
        # Esper's join result set makes remove-stream rows only for a select clause that
        # asks for them: 'insert irstream into' routes the insert stream, 'insert rstream
        # into' nothing
        insert_stream = "istream" if insert_stream == "irstream" else "none"
        select_stream = None
    pipeline = PipelineSpec(rs, output, None, None, where,
                            select_kind if select_stream is None else "irstream",
                            bool(node.distinct), join=spec, subqueries=tuple(subs.specs))
    return StatementPlan(name, "query", epl, pipeline, node.context,
                         insert_into=insert_into, insert_stream=insert_stream,
                         select_stream=select_stream,
                         columns=tuple(c.name for c in rs.columns), tables=tables,
                         window=window,
                         table=cat.tables[tables[0]] if tables else None)


def _check_context(planner: PlannerBase, context: str, streams: list[JoinStream],
                   node: ast.SelectStatement) -> None:
    """A keyed or hash context routes each event type by its own key: every stream of a
    join in such a context must be of a type the context lists (Esper ref. 4.2.2/4.2.3)."""
    inner = planner.catalog.contexts[context]
    while isinstance(inner, NestedSpec):
        inner = inner.inner
    if not isinstance(inner, KeyedSpec | HashSpec):
        return
    listed = inner.types()
    windows = planner.catalog.named_windows
    # a named window of the same context is the partition's own (Esper ref. 4.6)
    missing = sorted({s.type_name for s in streams
                      if windows.get(s.type_name) != context} - set(listed))
    if missing:
        # Esper delivers the events of an unlisted type to every partition of the
        # context; kepl routes each event by its own key (one partition, in Kafka mode
        # one engine partition), so it joins only types the context partitions
        raise NotSupported(f"a join in keyed or hash context '{context}' over "
                           f"{', '.join(missing)}, which the context does not partition "
                           "(list every joined type in the context declaration)")


class _Resolver:
    """Qualifies the names of a join statement with their stream (see module doc)."""

    def __init__(self, planner: PlannerBase, props: dict[str, dict[str, str]],
                 types: dict[str, str], variables: frozenset[str]) -> None:
        self.planner = planner
        self.props = props
        self.types = types
        self.variables = variables
        by_type: dict[str, list[str]] = {}
        for s, t in types.items():
            by_type.setdefault(t, []).append(s)
        self.type_alias = {t: ss[0] for t, ss in by_type.items()
                           if len(ss) == 1 and t not in props}
        self.columns: frozenset[str] = frozenset()
        """Output column names an order-by item may name instead of a property."""

    def __call__(self, n: ast.Name) -> ast.Name:
        parts = n.parts
        head = parts[0]
        if head == "context" or (head in self.variables and len(parts) == 1):
            return n
        stream = head if head in self.props else self.type_alias.get(head)
        if stream is not None:
            if stream != head:
                n = ast.Name((stream, *parts[1:]), pos=n.pos)
            self._check(n, stream, 1)
            return n
        if len(parts) > 1 and is_table_name(head, Scope(
                "tags", tags=frozenset(self.props), variables=self.variables,
                tables=self.planner.tenv)):
            return n
        owners = [s for s, p in self.props.items() if head in p]
        if len(owners) == 1:
            q = ast.Name((owners[0], *parts), pos=n.pos)
            self._check(q, owners[0], 1)
            return q
        if len(owners) > 1:
            raise verr(f"property '{head}' is ambiguous: streams {', '.join(owners)} "
                       "all have it", n, hint=f"qualify it, as in {owners[0]}.{head}")
        if head in self.columns and len(parts) == 1:
            return n
        known = [p for pr in self.props.values() for p in pr] + list(self.props)
        raise verr(f"'{head}' is not a property of any stream of the join", n,
                   hint=did_you_mean(head, known))

    def _check(self, n: ast.Name, stream: str, skipped: int) -> None:
        props = self.props[stream]
        rest = n.parts[skipped:]
        if not rest or all(t == "any" for t in props.values()):
            return
        cat = self.planner.catalog
        problem = path_error(rest, props, cat.type_props, self.types[stream])
        if problem is not None:
            raise self.planner._path_err(n, skipped, problem)


def _rewrite(node: ast.Node, fn: Any) -> Any:
    """``node`` with every Name replaced by ``fn(name)`` (other nodes rebuilt as needed)."""
    if isinstance(node, ast.Name):
        return fn(node)
    if isinstance(node, ast.SubSelect):
        return node  # a subquery resolves its own names (planning.subqueries)
    if isinstance(node, tuple):
        return tuple(_rewrite(x, fn) for x in node)
    if not (hasattr(node, "__dataclass_fields__") and isinstance(node, ast.Node)):
        return node
    changes = {}
    for f in dataclasses.fields(node):
        if f.name == "pos":
            continue
        v = getattr(node, f.name)
        nv = _rewrite(v, fn)
        if nv is not v:
            changes[f.name] = nv
    return dataclasses.replace(node, **changes) if changes else node


def _with_priors(node: ast.Node, streams: list[JoinStream], names: frozenset[str], scope: Scope
                 ) -> list[JoinStream]:
    """Each stream with the prior(n, x) calls on it: its events are stamped with their
    prior values as they arrive (``operators.prior``)."""
    from app.epl.prev import join_stream, prior_calls, prior_items
    from operators.prior import PriorSpec

    calls: dict[str, list[Any]] = {}
    for call in prior_calls(node):
        calls.setdefault(join_stream(call, names), []).append(call)
    out = []
    for s in streams:
        mine = calls.get(s.name)
        if mine and (s.named_window or s.table):
            raise NotSupported(f"prior() on the named window or table stream '{s.name}'")
        out.append(dataclasses.replace(s, prior=PriorSpec(prior_items(
            mine, scope, compile_expr))) if mine else s)
    return out


def _check_prev_windows(node: ast.Node, streams: list[JoinStream], names: frozenset[str]
                        ) -> None:
    """A prev function reads one stream's window, which must retain previous events
    (as on a single stream, ``app.epl.prev.check_prev_window``)."""
    from app.epl.prev import join_stream, retains_previous, window_calls

    views = {s.name: s.view for s in streams}
    for call in window_calls(*node.select_items, node.where, node.having,
                             *(node.order_by or ())):
        if call.name.lower() == "prior":
            continue
        if not retains_previous(views[join_stream(call, names)]):
            raise verr(f"{call.name} needs a data window that retains previous events",
                       call, hint="such as #length(10), #time(1 min), #keepall or #sort")


def _qualified(node: ast.Node, resolver: _Resolver) -> Any:
    """The statement with its expressions' names qualified and ``s.*`` expanded to the
    properties of stream ``s`` (Esper: the columns are named as the properties)."""
    items: list[Any] = []
    for item in node.select_items:
        if isinstance(item, ast.Wildcard) and item.stream is not None:
            stream = item.stream if item.stream in resolver.props else \
                resolver.type_alias.get(item.stream)
            if stream is None:
                raise verr(f"'{item.stream}' is not a stream of the join", item)
            items += [ast.SelectItem(ast.Name((stream, p), pos=item.pos), p, pos=item.pos)
                      for p in resolver.props[stream]]
        elif isinstance(item, ast.SelectItem):
            items.append(dataclasses.replace(item, expr=_rewrite(item.expr, resolver)))
        else:
            items.append(item)
    resolver.columns = frozenset(i.alias for i in items
                                 if isinstance(i, ast.SelectItem) and i.alias)
    return dataclasses.replace(
        node, select_items=tuple(items),
        where=_rewrite(node.where, resolver) if node.where is not None else None,
        group_by=_rewrite(tuple(node.group_by or ()), resolver),
        having=_rewrite(node.having, resolver) if node.having is not None else None,
        order_by=_rewrite(tuple(node.order_by or ()), resolver),
        joins=tuple(dataclasses.replace(j, on=_rewrite(j.on, resolver)) for j in node.joins))


def _check_on(on: Any, names: frozenset[str]) -> None:
    """Esper reference 5.12.3: the on clause of an outer join equates properties of the
    two streams (``on a.k = b.k [and a.p = b.q ...]``)."""
    for c in conjuncts(on):
        ok = (isinstance(c, ast.Binary) and c.op == "=" and isinstance(c.left, ast.Name)
              and isinstance(c.right, ast.Name))
        if ok:
            left, right = _streams_of(c.left, names), _streams_of(c.right, names)
            ok = len(left) == 1 and len(right) == 1 and left != right
        if not ok:
            raise NotSupported(f"an outer join's on clause other than properties of the "
                               f"two streams compared with '=' ({text_of(c)})")


# -- the join plan -------------------------------------------------------------

def _streams_of(expr: ast.Node, names: frozenset[str]) -> frozenset[str]:
    return frozenset(n.parts[0] for n in names_in(expr) if n.parts[0] in names)


def _equalities(where: ast.Node | None,
                names: frozenset[str]) -> list[tuple[str, Any, frozenset[str], Any]]:
    """Equalities usable as index lookups: (indexed stream, key expression over that
    stream alone, streams the other side reads, the other side)."""
    out = []
    for c in conjuncts(where):
        if not (isinstance(c, ast.Binary) and c.op == "="):
            continue
        if any(isinstance(x, ast.Call) for x in _calls(c)):
            continue
        left, right = _streams_of(c.left, names), _streams_of(c.right, names)
        for a, sa, b, sb in ((c.left, left, c.right, right), (c.right, right, c.left, left)):
            if len(sa) == 1 and sb and not (sa & sb):
                out.append((next(iter(sa)), a, sb, b))
    return out + _transitive(where, names)


def _transitive(where: ast.Node | None,
                names: frozenset[str]) -> list[tuple[str, Any, frozenset[str], Any]]:
    """Equalities implied by others between properties (``a.k = b.k and b.k = c.k`` gives
    ``a.k = c.k``), as Esper's query graph derives them: an event of ``c`` can then look
    ``a`` up first."""
    parent: dict[str, str] = {}
    node_of: dict[str, Any] = {}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    direct: set[frozenset[str]] = set()
    for c in conjuncts(where):
        if not (isinstance(c, ast.Binary) and c.op == "=" and isinstance(c.left, ast.Name)
                and isinstance(c.right, ast.Name)):
            continue
        if c.left.parts[0] not in names or c.right.parts[0] not in names:
            continue
        texts = [text_of(c.left), text_of(c.right)]
        for t, n in zip(texts, (c.left, c.right)):
            parent.setdefault(t, t)
            node_of.setdefault(t, n)
        parent[find(texts[0])] = find(texts[1])
        direct.add(frozenset(texts))
    out = []
    for x in node_of:
        for y in node_of:
            sx, sy = node_of[x].parts[0], node_of[y].parts[0]
            if sx != sy and find(x) == find(y) and frozenset((x, y)) not in direct:
                out.append((sx, node_of[x], frozenset({sy}), node_of[y]))
    return out


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NUMERIC = ("int", "long", "float", "double")


def _ranges(where: ast.Node | None, names: frozenset[str], types: dict[str, str]
            ) -> list[tuple[str, Any, str, frozenset[str], Any]]:
    """Relational operators usable as sorted-index lookups: (indexed stream, its property,
    operator as the property reads it, streams the other side reads, the other side).
    Both sides are numbers, or both strings, so that the keys sort."""
    out = []
    for c in conjuncts(where):
        if not (isinstance(c, ast.Binary) and c.op in _FLIP) or _calls(c):
            continue
        left, right = _streams_of(c.left, names), _streams_of(c.right, names)
        for a, sa, b, sb, op in ((c.left, left, c.right, right, c.op),
                                 (c.right, right, c.left, left, _FLIP[c.op])):
            if not (isinstance(a, ast.Name) and len(a.parts) == 2 and len(sa) == 1 and sb
                    and not (sa & sb)):
                continue
            ta, tb = java_box(a, types), java_box(b, types)
            if (ta in _NUMERIC and tb in _NUMERIC) or ta == tb == "string":
                out.append((a.parts[0], a, op, sb, b))
    return out


def _calls(node: ast.Node | None) -> list[Any]:
    """Aggregate-like calls are not index keys (a plain function call is fine)."""
    from app.epl.expr import has_aggregate

    return [node] if has_aggregate(node) else []


def _outer_spec(streams: list[JoinStream], joins: tuple[Any, ...], scope: Scope) -> JoinSpec:
    """The plan of an outer join (Esper reference 5.12.3): each ``join ... on`` relates its
    stream to the one earlier stream its on clause names; an event looks up along those
    relations only, in from-clause order, each lookup through a hash index on the on
    clause's equalities (null keys meet, as in Esper).  From the outer side of a left,
    right or full join the other side is optional (null without a match); from the
    other side it is required."""
    names = [s.name for s in streams]
    pos = {n: i for i, n in enumerate(names)}
    optional: dict[tuple[int, int], bool] = {}
    pairs: dict[tuple[int, int], list[tuple[Any, Any]]] = {}
    for k, j in enumerate(joins):
        s = k + 1
        _check_on(j.on, frozenset(names))
        refs = sorted(pos[n] for n in _streams_of(j.on, frozenset(names)) if n != names[s])
        if len(refs) != 1 or refs[0] > s:
            raise NotSupported(f"an on clause relating stream '{names[s]}' to other than "
                               "one earlier stream")
        p = refs[0]
        optional[(p, s)] = j.kind in ("left", "full")
        optional[(s, p)] = j.kind in ("right", "full")
        for c in conjuncts(j.on):
            a, b = (c.left, c.right) if c.left.parts[0] == names[s] else (c.right, c.left)
            pairs.setdefault((p, s), []).append((a, b))  # key on s, value from p
            pairs.setdefault((s, p), []).append((b, a))  # key on p, value from s
    indexes: list[IndexDef] = []
    index_of: dict[tuple[int, tuple[str, ...]], int] = {}
    paths: list[tuple[Step, ...]] = []
    uni = [i for i, s in enumerate(streams) if s.unidirectional]
    for i in range(len(streams)):
        if uni and i not in uni:
            paths.append(())
            continue
        bound = [i]
        todo = [j for j in range(len(streams)) if j != i]
        steps: list[Step] = []
        while todo:
            link = next(((b, j) for j in todo for b in bound if (b, j) in pairs), None)
            if link is None:
                raise NotSupported("an outer join whose streams are not all related")
            b, j = link
            todo.remove(j)
            keyed = {text_of(k): (k, v) for k, v in pairs[link]}
            ktexts = tuple(sorted(keyed))
            if (j, ktexts) not in index_of:
                escope = Scope("event", frozenset({names[j]}), variables=scope.variables,
                               tables=scope.tables)
                index_of[(j, ktexts)] = len(indexes)
                indexes.append(IndexDef(
                    j, tuple(compile_expr(keyed[t][0], escope) for t in ktexts), ktexts))
            steps.append(Step(j, index_of[(j, ktexts)],
                              tuple(compile_expr(keyed[t][1], scope) for t in ktexts),
                              tuple(text_of(keyed[t][1]) for t in ktexts),
                              optional=optional[link], sources=(names[b],)))
            bound.append(j)
        paths.append(tuple(steps))
    return JoinSpec(tuple(streams), tuple(indexes), tuple(paths), nulls_match=True)


def _table_step(pick: int, pairs: list[tuple[Any, Any]], stream: JoinStream, scope: Scope,
                planner: PlannerBase) -> Step:
    """A lookup into a table: by primary key when the equalities give every key column,
    else every row (Esper ref. 4.7 Context and Tables: a table row is found by its primary key)."""
    spec = planner.catalog.tables[stream.type_name]
    name = stream.name
    by_col = {k.parts[1]: v for k, v in pairs
              if isinstance(k, ast.Name) and len(k.parts) == 2}
    if spec.keys and all(k in by_col for k in spec.keys):
        vals = [by_col[k] for k in spec.keys]
        return Step(pick, None, tuple(compile_expr(v, scope) for v in vals),
                    tuple(f"{name}.{k} = {text_of(v)}" for k, v in zip(spec.keys, vals)),
                    primary_key=True)
    return Step(pick)


def _join_spec(streams: list[JoinStream], where: ast.Node | None, scope: Scope,
               planner: PlannerBase, types: dict[str, str]) -> JoinSpec:
    """Indexes and lookup paths.  An event of stream i joins the other streams in
    from-clause order, each through a hash index when the where clause equates it to
    streams already joined, else through a sorted index when it bounds one property of
    the stream by them (Esper's sorted event table: rows come in ascending order of the
    property), a nested loop otherwise.  With a unidirectional stream only its events
    look up (the others' windows are only looked into)."""
    names = [s.name for s in streams]
    eqs = _equalities(where, frozenset(names)) if where is not None else []
    ranges = _ranges(where, frozenset(names), types) if where is not None else []
    indexes: list[IndexDef] = []
    index_of: dict[tuple[int, tuple[str, ...]], int] = {}
    paths: list[tuple[Step, ...]] = []
    uni = [i for i, s in enumerate(streams) if s.unidirectional]
    for i in range(len(streams)):
        if (uni and i != uni[0]) or streams[i].table:
            paths.append(())  # only the unidirectional stream triggers; a table never
            continue
        bound = {names[i]}
        todo = [j for j in range(len(streams)) if j != i]
        steps: list[Step] = []
        while todo:
            pick, pairs = todo[0], []
            for j in todo:
                pairs = [(k, v) for s, k, need, v in eqs if s == names[j] and need <= bound]
                if pairs:
                    pick = j
                    break
            todo.remove(pick)
            if streams[pick].table:
                steps.append(_table_step(pick, pairs, streams[pick], scope, planner))
            elif pairs:
                seen: dict[str, Any] = {}
                for k, v in pairs:
                    seen.setdefault(text_of(k), (k, v))
                ktexts = tuple(sorted(seen))
                key = (pick, ktexts)
                if key not in index_of:
                    escope = Scope("event", frozenset({names[pick]}),
                                   variables=scope.variables, tables=scope.tables)
                    index_of[key] = len(indexes)
                    indexes.append(IndexDef(
                        pick, tuple(compile_expr(seen[t][0], escope) for t in ktexts), ktexts))
                steps.append(Step(pick, index_of[key],
                                  tuple(compile_expr(seen[t][1], scope) for t in ktexts),
                                  tuple(text_of(seen[t][1]) for t in ktexts)))
            else:
                steps.append(_sorted_step(pick, ranges, names, bound, indexes, index_of,
                                          scope))
            bound.add(names[pick])
        paths.append(tuple(steps))
    return JoinSpec(tuple(streams), tuple(indexes), tuple(paths))


def _sorted_step(pick: int, ranges: list[tuple[str, Any, str, frozenset[str], Any]],
                 names: list[str], bound: set[str], indexes: list[IndexDef],
                 index_of: dict[tuple[int, tuple[str, ...]], int], scope: Scope) -> Step:
    """A lookup of stream ``pick`` through a sorted index when the relational operators
    relating it to the streams joined so far bound one of its properties; a scan when
    there are none, or they bound several properties (Esper then keeps a composite index
    whose lookup gives the rows in no defined order)."""
    found = [(k, op, v) for s, k, op, need, v in ranges if s == names[pick] and need <= bound]
    if len({text_of(k) for k, _, _ in found}) != 1:
        return Step(pick)
    ktext = text_of(found[0][0])
    key = (pick, ("\x00sorted", ktext))
    if key not in index_of:
        escope = Scope("event", frozenset({names[pick]}), variables=scope.variables,
                       tables=scope.tables)
        index_of[key] = len(indexes)
        indexes.append(IndexDef(pick, (compile_expr(found[0][0], escope),), (ktext,),
                                sorted=True))
    return Step(pick, index_of[key], text=tuple(text_of(v) for _, _, v in found),
                bounds=tuple((op, compile_expr(v, scope)) for _, op, v in found))

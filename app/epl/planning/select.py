"""Planning of continuous select statements: the from clause (a filtered stream with
its data windows, a pattern, or a join), insert into, and Apama stream queries."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.epl import ast
from app.epl.errors import EplError, did_you_mean, verr
from app.epl.expr import (
    Scope,
    compile_expr,
    compile_filter,
    has_aggregate,
    names_in,
    text_of,
)
from app.epl.planning.base import (
    PlannerBase,
    column_name,
    construct_name,
    derived_props,
    pane_props,
    stream_names,
)
from app.epl.planning.java_types import qualified_types
from app.epl.planning.subqueries import SubqueryEnv
from app.epl.prev import (
    check_prev_window,
    prior_calls,
    prior_items,
    prior_tagged_items,
    window_calls,
)
from app.runtime.catalog import NotSupported
from app.runtime.plan import StatementPlan
from operators.aggregates import EmptyAsNaN
from operators.output import OutputSpec
from operators.pipeline import PipelineSpec, StreamSpec
from operators.prior import MatchPriorSpec, PriorSpec


class SelectPlanning(PlannerBase):
    """Plans select statements and Apama stream queries."""

    def query(self, node: ast.SelectStatement, name: str, epl: str) -> StatementPlan:
        if node.context is not None and node.context not in self.catalog.contexts:
            raise verr(f"unknown context '{node.context}'", node,
                hint=did_you_mean(node.context, self.catalog.contexts))
        if node.match_recognize is not None and (
                len(node.from_) != 1 or not isinstance(node.from_[0], ast.FilterStream)):
            raise verr("match_recognize takes exactly one event stream", node.match_recognize,
                       "select from one event type, as in 'from T#length(10) "
                       "match_recognize (...)'")
        priors = prior_calls(node)
        src = node.from_[0]
        if len(node.from_) == 1 and not isinstance(src, ast.FilterStream):
            for call in window_calls(node):
                if call.name.lower() != "prior":
                    if isinstance(src, ast.PatternStream) and src.views:
                        # Esper reads prev over a pattern's data window; kepl's prev takes
                        # a row of tags for a join's
                        raise NotSupported(f"{call.name} over a data window of a pattern")
                    raise verr(f"{call.name} needs a data window that retains previous "
                               "events", call, hint="a pattern has no data window")
        if len(node.from_) != 1:
            from app.epl.planning.joins import plan_join

            return plan_join(self, node, name, epl)
        src = node.from_[0]
        subs = SubqueryEnv(self, node.context)
        stream: StreamSpec | None = None
        pattern = None
        variables = frozenset(self.catalog.variables)
        source_window = None
        mr = None
        match_prior = None
        pattern_view = None
        if isinstance(src, ast.FilterStream):
            props = self.catalog.type_props(src.type_name)
            if src.type_name in self.catalog.named_windows:
                source_window = src.type_name
                if src.views:
                    raise NotSupported("data windows on a named window consumer")
            if props is None:
                raise verr(f"unknown event type '{src.type_name}'", src,
                    hint=did_you_mean(src.type_name, self._type_names()))
            aliases = stream_names(src.alias, src.type_name, props)
            self.tenv.props = props
            subs.outer_names = frozenset({src.type_name})
            subs.outer_props = frozenset(props)
            scope = Scope("event", aliases, variables=variables, tables=self.tenv,
                          subqueries=subs)
            misplaced = window_calls(src.filter)
            if misplaced:
                raise verr(f"{misplaced[0].name} is not allowed in a stream filter",
                           misplaced[0], hint="move the condition to the where clause")
            filt = compile_filter(src.filter, scope) if src.filter is not None else None
            view = (self.view_chain(src.views, scope, src.retain, props, src.type_name)
                    if src.views else None)
            if node.match_recognize is not None:
                ev_scope = scope
                mr, scope = self._match_recognize(node, src, props, view, variables)
                if node.where is not None and view is None and source_window is None:
                    # Esper plans the where clause of a match_recognize without a data
                    # window as a filter of its input events (it names their properties)
                    self._check_names(replace(node, select_items=(), having=None,
                                              group_by=()), props, ev_scope, src.type_name)
                    cond = compile_filter(node.where, ev_scope)
                    filt = cond if filt is None else _both(filt, cond)
                    node = replace(node, where=None)
            else:
                dprops = derived_props(view)
                if not dprops:
                    self._check_names(node, {**props, **pane_props(view)}, scope,
                                      src.type_name)
                else:
                    # Esper ref. 14.4: after a derived-value window the statement sees its
                    # properties (and the additional ones it lists), not the event's; the
                    # stream filter still reads the event
                    bare = replace(node, select_items=(), where=None, having=None,
                                   group_by=())
                    self._check_names(bare, props, scope, src.type_name)
                    try:
                        self.check_expr_names(
                            [i.expr for i in node.select_items
                             if isinstance(i, ast.SelectItem)]
                            + [e for e in (node.where, node.having, *(node.group_by or ()))
                               if e is not None],
                            dprops, scope, f"the derived-value window over {src.type_name}")
                    except EplError as e:
                        e.hint = e.hint or (
                            f"its rows hold {', '.join(dprops)}; list an event property "
                            "after the window's own parameters to carry it (Esper ref. 14.4)")
                        raise
            check_prev_window(node, view, any(
                has_aggregate(x) for x in (*node.select_items, node.having)))
            stream = StreamSpec(src.type_name, filt, view, src.alias,
                                text_of(src.filter) if src.filter is not None else "",
                                PriorSpec(prior_items(priors, scope, compile_expr))
                                if priors else None)
            if src.type_name in self.catalog.tables:
                raise NotSupported("selecting from a table in a continuous statement (use an "
                                   "on-select, or 'kepl query' for an on-demand read)")
        elif isinstance(src, ast.PatternStream):
            from app.epl.planning.patterns import (
                expand_tag_wildcards,
                pattern_window,
                plan_pattern,
            )

            pattern = plan_pattern(self, src.pattern, subqueries=subs)
            subs.pattern = True
            scope = Scope("tags", tags=frozenset(pattern.tag_names()), variables=variables,
                          tables=self.tenv, subqueries=subs,
                          array_tags=pattern.array_tag_names())
            node = expand_tag_wildcards(self, node, pattern)
            if priors:
                match_prior = MatchPriorSpec(prior_tagged_items(priors, scope, compile_expr))
            self._check_tag_names(node, pattern)
            if src.views:
                pattern_view = pattern_window(self, node, src, scope, pattern)
        else:
            raise NotSupported(construct_name(src))
        if node.context is not None:
            self._check_segmented(node.context, stream, pattern, src)
        agg_texts: dict[str, int] = {}
        rs_scope = scope
        if stream is not None and node.context is not None and not derived_props(stream.view):
            # (a derived-value window's rows are its own: its additional properties are
            # null until an event came, not the partition's key)
            keys = self.partition_keys(node.context, stream.type_name)
            if keys:
                rs_scope = replace(rs_scope, partition_keys=keys)
        if (stream is not None and (source_window is not None or (
                stream.view is not None and not stream.view.oldest_first)
                or (node.output is not None and node.output.after is not None))) or (
                pattern_view is not None and not pattern_view.oldest_first):
            # rows leave out of arrival order, or (held back by 'output after') leave
            # without having entered: first/last/window values go by event
            rs_scope = replace(rs_scope, rows_leave_in_order=False)
        rs = self.result_set(node, rs_scope, agg_texts=agg_texts,
                             prop_types=(qualified_types(props, src.type_name, src.alias)
                                         if stream is not None and mr is None else None))
        if priors:
            rs = replace(rs, hidden_keys=True)
        tables: tuple[str, ...] = ()
        if node.into_table is not None:
            rs = self._into_table(node, rs, agg_texts)
            tables = (node.into_table,)
        if node.where is None:
            where = None
        elif stream is not None and stream.view is None and source_window is None:
            # Esper plans the where clause of one stream without a data window into the
            # stream's filter (so a constant 'in' list reads as the filter's, Scope.filter_sets)
            where = compile_filter(node.where, scope)
        else:
            where = compile_expr(node.where, scope)
        output = self.output(node.output, scope)
        select_kind, insert_into, insert_stream, select_stream = self.streams_of(node, rs)
        pipeline = PipelineSpec(rs, output, stream, pattern, where,
                                select_kind if select_stream is None else "irstream",
                                bool(node.distinct), subqueries=tuple(subs.specs),
                                match_prior=match_prior, match_recognize=mr,
                                pattern_view=pattern_view)
        return StatementPlan(name, "query", epl, pipeline, node.context,
                             insert_into=insert_into, insert_stream=insert_stream,
                             select_stream=select_stream,
                             columns=tuple(c.name for c in rs.columns), window=source_window,
                             tables=tables,
                             table=self.catalog.tables[tables[0]] if tables else None)

    def _match_recognize(self, node: ast.SelectStatement, src: Any, props: dict[str, str],
                         view: Any,
                         variables: frozenset[str]) -> tuple[Any, Scope]:
        """The match_recognize spec of a statement and the scope of its select clause:
        the measures are the only properties of the rows it produces (Esper reference,
        Match Recognize: the select clause reads the measures)."""
        from app.epl.planning.match_recognize import plan_match_recognize
        from app.epl.properties import path_error

        named = src.type_name in self.catalog.named_windows
        mr = plan_match_recognize(self, node.match_recognize, src.type_name, props,
                                  src.alias, view, variables, named_window=named)
        measure_props = {name: "any" for name, _ in mr.measures}
        self.tenv.props = measure_props
        scope = Scope("event", frozenset(), variables=variables, tables=self.tenv)
        exprs = [i.expr for i in node.select_items if isinstance(i, ast.SelectItem)]
        where = node.where if view is not None or named else None
        exprs += [e for e in (where, node.having, *(node.group_by or ())) if e is not None]
        for e in exprs:
            for n in names_in(e):
                head = n.parts[0]
                if head == "context" or (len(n.parts) == 1 and head in variables):
                    continue
                problem = path_error(n.parts, measure_props, self.catalog.type_props,
                                     "the match_recognize measures")
                if problem is not None:
                    raise self._path_err(n, 0, problem)
        return mr, scope

    def streams_of(self, node: ast.SelectStatement,
                   rs: Any) -> tuple[str, str | None, str, str | None]:
        """(select kind, insert-into stream, its routed stream kind, the stream listeners
        get when it differs from the routed one) of a select; registers the insert-into
        stream's columns."""
        select_kind = (node.stream_kind or "istream").lower()
        if node.insert_into is None:
            return select_kind, None, "istream", None
        insert_into = node.insert_into.name
        insert_stream = (node.insert_into.stream_kind or "istream").lower()
        self.catalog.streams.setdefault(insert_into, {c.name: "any" for c in rs.columns})
        select_stream = None
        if select_kind != "irstream" and (insert_stream != "istream"
                                          or select_kind == "rstream"):
            # the routed stream is not the one listeners get: post both, split later
            select_stream = select_kind
        return select_kind, insert_into, insert_stream, select_stream

    def view_chain(self, views: Any, scope: Scope, retain: str | None,
                   props: dict[str, str] | None = None, type_name: str = "") -> Any:
        from app.epl.planning.windows import plan_views

        return plan_views(self, views, scope, retain, props, type_name)

    def apama(self, node: ast.ApamaQuery, name: str, epl: str) -> StatementPlan:
        from app.epl.planning.windows import apama_view

        props = self.catalog.type_props(node.stream)
        if props is None:
            raise verr(f"unknown stream '{node.stream}'", node,
                                     hint=did_you_mean(node.stream, self._type_names()))
        scope = Scope("event", frozenset(), variables=frozenset(self.catalog.variables))
        view = apama_view(node)
        sel = ast.SelectStatement(
            annotations=(), context=None, insert_into=None,
            stream_kind="rstream" if node.rstream else None,
            select_items=tuple(_apama_item(i, column_name(i, self.source))
                               if isinstance(i, ast.SelectItem) else i
                               for i in node.select_items), from_=(),
            where=None, group_by=(), having=None, output=None, order_by=(), limit=None,
            into_table=None)
        # Apama batched windows: com.apama.aggregates.sum returns 0 for an empty window;
        # min, max and the mean of an empty window are NaN (com.apama.aggregates.min: "If
        # the window is empty, returns NaN for decimals or floats")
        rs = self.result_set(sel, scope, empty_sum=0.0)
        rs = replace(rs, aggregates=tuple(
            replace(a, aggregator=EmptyAsNaN(a.aggregator))
            if a.aggregator.name in ("min", "max", "avg") else a for a in rs.aggregates))
        stream = StreamSpec(node.stream, None, view, None)
        pipeline = PipelineSpec(rs, OutputSpec(), stream, None, None,
                                "rstream" if node.rstream else "istream")
        return StatementPlan(name, "query", epl, pipeline,
                             columns=tuple(c.name for c in rs.columns))


APAMA_AGGREGATES = "com.apama.aggregates."
"""The package of Apama's built-in aggregates, which a query may name in full."""


def _apama_call(node: Any) -> Any:
    """An Apama aggregate call as kepl names it: without its package, ``mean`` as
    ``avg`` (the two are aliases)."""
    if isinstance(node, ast.Call):
        name = node.name[len(APAMA_AGGREGATES):] if node.name.startswith(
            APAMA_AGGREGATES) else node.name
        if name == "mean":
            name = "avg"
        args = tuple(_apama_call(a) for a in node.args)
        return replace(node, name=name, args=args)
    if isinstance(node, ast.Binary):
        return replace(node, left=_apama_call(node.left), right=_apama_call(node.right))
    if isinstance(node, ast.Unary):
        return replace(node, operand=_apama_call(node.operand))
    return node


def _apama_item(item: ast.SelectItem, name: str) -> ast.SelectItem:
    """A select item with its aggregates named as kepl names them, its column named as
    written (``mean(v)`` stays the column's name)."""
    expr = _apama_call(item.expr)
    return item if expr == item.expr else replace(item, expr=expr, alias=name)


def _both(a: Any, b: Any) -> Any:
    """Two filter conditions, both required (null counts as false)."""
    return lambda r, c: bool(a(r, c)) and bool(b(r, c))


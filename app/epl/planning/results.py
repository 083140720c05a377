"""Planning of the result set (select list, aggregation, group by, having, order by,
limit) and of output rate limiting (Esper ref. 5.7)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.epl import ast
from app.epl.errors import did_you_mean, verr
from app.epl.expr import (
    Scope,
    compile_expr,
    constant_value,
    has_aggregate,
    names_in,
    text_of,
    time_period_ms,
)
from app.epl.planning.base import (
    WHITESPACE,
    PlannerBase,
    column_name,
    is_grouped,
    period_seconds,
    refers_to_event,
    target_name,
)
from app.epl.planning.java_types import java_box
from operators.aggregates import Sum
from operators.output import Assignment, OutputSpec
from operators.resultset import (
    AGG_ALL,
    AGG_ROWS,
    GROUPED,
    GROUPED_ROWS,
    SIMPLE,
    SORT_KEY,
    AggregateDef,
    ResultSetSpec,
    SelectColumn,
    sort_key_reader,
)


class ResultPlanning(PlannerBase):
    """Plans result sets and output rate limiting."""

    def result_set(self, node: ast.SelectStatement, scope: Scope, empty_sum: Any = None,
                   agg_texts: dict[str, int] | None = None,
                   prop_types: dict[str, str] | None = None,
                   join: bool = False) -> ResultSetSpec:
        """The result set of a select; ``prop_types`` (property type by name as written)
        gives the Java type of each group-by value, ``join``: the statement joins."""
        aggs: list[AggregateDef] = []
        ascope = Scope(scope.kind, scope.aliases, scope.tags, scope.variables, aggs,
                       allow_aggregates=True, tables=scope.tables,
                       partition_keys=scope.partition_keys,
                       rows_leave_in_order=scope.rows_leave_in_order,
                       array_tags=scope.array_tags, subqueries=scope.subqueries)
        if agg_texts is not None:
            ascope.agg_texts = agg_texts
        columns: list[SelectColumn] = []
        wildcard = False
        plain_exprs: list[Any] = []
        for item in node.select_items:
            if isinstance(item, ast.Wildcard):
                wildcard = True
                continue
            columns.append(SelectColumn(column_name(item, self.source,
                                                    self.subquery_numbers),
                                        compile_expr(item.expr, ascope)))
            if not has_aggregate(item.expr):
                plain_exprs.append(item.expr)
        having = compile_expr(node.having, ascope) if node.having is not None else None
        group_by = tuple(compile_expr(g, scope) for g in (node.group_by or ()))
        group_texts = tuple(WHITESPACE.sub("", text_of(g)) for g in (node.group_by or ()))
        order_by, sort_columns = self._order_by(node.order_by or (), columns, ascope)
        limit = offset = None
        if node.limit is not None:
            limit = int(constant_value(node.limit.count))
            offset = int(constant_value(node.limit.offset)) if node.limit.offset else 0
        if empty_sum is not None:
            aggs[:] = [replace(a, aggregator=Sum(empty_sum))  # the filter kept
                       if type(a.aggregator) is Sum else a for a in aggs]
        if not aggs:
            kind = SIMPLE
            if group_by:
                # no aggregation: as with aggregates, one row per group when every event
                # property selected is grouped (Esper's row-per-group processor; a
                # subquery reads no property of the event), else one row per event
                refs = [e for e in plain_exprs if refers_to_event(e, scope)]
                grouped = all(is_grouped(e, group_texts, scope) for e in refs)
                kind = GROUPED if grouped and not wildcard else GROUPED_ROWS
        else:
            event_refs = [e for e in plain_exprs if refers_to_event(e, scope)]
            if wildcard:
                event_refs.append(ast.Star())
            if not group_by:
                kind = AGG_ROWS if event_refs else AGG_ALL
            else:
                grouped = all(is_grouped(e, group_texts, scope) for e in event_refs
                              if not isinstance(e, ast.Star))
                kind = GROUPED if grouped and not wildcard else GROUPED_ROWS
        group_types = tuple(java_box(g, prop_types or {}) for g in (node.group_by or ()))
        return ResultSetSpec(kind, tuple(columns), tuple(aggs), group_by, having, wildcard,
                             order_by, limit, offset or 0, group_texts,
                             sort_columns=sort_columns, group_types=group_types, join=join)

    @staticmethod
    def _order_by(items: Any, columns: list[SelectColumn], ascope: Scope
                  ) -> tuple[tuple[tuple[Any, bool], ...], tuple[tuple[str, Any], ...]]:
        """Order-by keys and the hidden columns that compute them.

        An item naming only output columns (``order by total``, an alias) reads the output
        row.  Any other item (``order by sum(px)``, a property not selected) is evaluated
        with the row, the event and the aggregates it is projected from, as Esper's
        order-by processor does, into a hidden column that ``ResultSet.order`` drops."""
        names = {c.name for c in columns}
        keys: list[tuple[Any, bool]] = []
        hidden: list[tuple[str, Any]] = []
        for o in items:
            refs = names_in(o.expr)
            if not has_aggregate(o.expr) and all(
                    len(n.parts) == 1 and n.parts[0] in names for n in refs):
                keys.append((compile_expr(o.expr, ascope), bool(o.descending)))
                continue
            name = f"{SORT_KEY}{len(hidden)}"
            hidden.append((name, compile_expr(o.expr, ascope)))
            keys.append((sort_key_reader(name), bool(o.descending)))
        return tuple(keys), tuple(hidden)

    def output(self, node: ast.OutputClause | None, scope: Scope) -> OutputSpec:
        """The output clause (Esper 2.10 output rate limiting, Esper 4.5 when terminated)."""
        if node is None:
            return OutputSpec()
        variables = frozenset(self.catalog.variables)
        oscope = Scope("output", scope.aliases, scope.tags, variables, tables=scope.tables)
        kind = (node.kind or "default").lower()
        every_events = every_ms = None
        every_events_expr = every_expr = None
        if node.every_count is not None:
            try:
                every_events = int(constant_value(node.every_count))
            except ValueError:
                self._check_output_names(node.every_count, variables)
                every_events_expr = compile_expr(node.every_count, oscope)
            if every_events is not None and every_events < 1:
                raise verr("the number of events of 'output every' must be at least 1", node)
        if node.every_time is not None:
            ms = node.every_time.ms() if isinstance(node.every_time, ast.TimePeriod) else None
            if ms is not None:
                every_ms = int(round(ms))
                if every_ms <= 0:
                    raise verr("the period of 'output every' must be positive", node)
            else:
                self._check_output_names(node.every_time, variables)
                every_expr = period_seconds(node.every_time, oscope)
        at = None
        at_text = ""
        if node.at is not None:
            from app.epl.planning.patterns import cron_spec

            at = cron_spec(node.at)
            at_text = text_of(node.at)
        after_ms = after_events = None
        if node.after is not None:
            if node.after_events:
                after_events = int(constant_value(node.after))
            else:
                after_ms = time_period_ms(node.after)
        when = None
        when_vars: frozenset[str] = frozenset()
        if node.when is not None:
            self._check_output_names(node.when, variables)
            when = compile_expr(node.when, oscope)
            when_vars = frozenset(n.parts[0] for n in names_in(node.when)
                                  if n.parts[0] in variables)
        term_and = None
        if node.terminated_and is not None:
            self._check_output_names(node.terminated_and, variables)
            term_and = compile_expr(node.terminated_and, oscope)
        assigns = tuple(self._assignment(a, oscope, node) for a in (node.then_set or ()))
        terminated = bool(node.when_terminated or node.and_when_terminated)
        # Esper ref. 4.5: 'then set' after 'when terminated' runs when the partition ends; after
        # 'when expr' it runs each time the expression triggers output
        then_set, term_set = ((), assigns) if terminated else (assigns, ())
        if node.when_set:  # 'when expr then set ... and when terminated then set ...'
            then_set = tuple(self._assignment(a, oscope, node) for a in node.when_set)
        return OutputSpec(kind, every_events, every_ms, when, terminated, term_and,
                          then_set, limited=True, at=at, at_text=at_text, after_ms=after_ms,
                          after_events=after_events, terminated_set=term_set,
                          every_events_expr=every_events_expr, every_expr=every_expr,
                          variables=when_vars)

    def _assignment(self, a: ast.Assignment, scope: Scope, node: ast.Node) -> Assignment:
        """``var = expr`` of then-set / on-set: the variable must exist and not be constant."""
        name = target_name(a.target)
        if name not in self.catalog.variables:
            raise verr(f"unknown variable '{name}'", a,
                       hint=did_you_mean(name, self.catalog.variables))
        if name in self.catalog.constants:
            raise verr(f"variable '{name}' is a constant and cannot be assigned", a)
        return Assignment(name, compile_expr(a.expr, scope))

    def _check_output_names(self, expr: ast.Node, variables: frozenset[str]) -> None:
        """Esper ref. 5.7.1.1: an output condition reads variables and built-in properties only."""
        from app.epl.expr import OUTPUT_BUILTINS

        for n in names_in(expr):
            head = n.parts[0]
            if head in variables or head in OUTPUT_BUILTINS or head == "context":
                continue
            if len(n.parts) > 1 and head in self.tenv.specs:
                continue  # a key-less table's column (Esper ref. 4.7 Context and Tables)
            raise verr(f"'{'.'.join(n.parts)}' is not a variable or a built-in property "
                       "of the output condition", n,
                       hint="use count_insert, count_remove, last_output_timestamp or a "
                            "variable")


"""The planner: AST → StatementPlan (operator specs, context partitioning, topics).

Every decision about which operators a statement needs is taken here, once, so the
runtimes only build and run what the plan says.  Constructs that have no operator yet
raise NotSupported with the construct's name.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from app.epl import ast
from app.epl.errors import EplError, EplValidationError, closest
from app.epl.expr import (
    NotSupportedExpr,
    Scope,
    TableEnv,
    compile_expr,
    constant_value,
    has_aggregate,
    is_table_name,
    names_in,
    text_of,
    time_period_ms,
)
from app.epl.parser import parse_statement, source_text
from app.epl.properties import path_error
from app.runtime.catalog import Catalog, NotSupported
from app.runtime.plan import StatementPlan
from operators.aggregates import Sum
from operators.base import PartitionCtx
from operators.contexts import conditions as cond
from operators.contexts.managers import CategorySpec, HashItem, HashSpec, KeyedItem, KeyedSpec
from operators.contexts.nested import NestedSpec
from operators.contexts.temporal import NonOverlappingSpec, OverlappingSpec
from operators.output import Assignment, OutputSpec
from operators.pipeline import PipelineSpec, StreamSpec
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
from operators.table import IntoTableSpec, TableColumn, TableSpec

_WS = re.compile(r"\s+")


def column_name(item: Any, source: str = "") -> str:
    """Alias, else the expression text as written without whitespace (FORMAT.md: Rows)."""
    if item.alias:
        return str(item.alias)
    written = source_text(source, item.expr.pos) if source else ""
    return _WS.sub("", written or text_of(item.expr))


class Planner:
    """Plans statements against a catalog, registering declarations as it goes."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.source = ""
        self.tenv = TableEnv({})
        """Tables the statement being planned may read, and those it reads (000 §4.7)."""

    # -- entry -------------------------------------------------------------
    def plan_text(self, epl: str, name: str) -> StatementPlan:
        return self._planned(epl, lambda node: self.plan(node, name, epl))

    def _planned(self, epl: str, plan: Any) -> Any:
        """Parse ``epl`` and plan it; errors carry the source, unsupported expressions
        become NotSupported."""
        node = parse_statement(epl)
        self.source = epl
        try:
            return plan(node)
        except NotSupportedExpr as e:
            raise NotSupported(str(e)) from None
        except EplError as e:
            if e.source is None:
                e.source = epl
            raise

    def plan(self, node: Any, name: str, epl: str = "") -> StatementPlan:
        plan = self._plan(node, name, epl)
        priority = self._priority(node)
        return replace(plan, priority=priority) if priority else plan

    def _priority(self, node: Any) -> int:
        """The ``@Priority(n)`` annotation's value (0 without one)."""
        for a in getattr(node, "annotations", ()):
            if a.name.lower() != "priority":
                continue
            try:
                value = constant_value(a.args[0]) if len(a.args) == 1 else None
            except ValueError:
                value = None
            if not isinstance(value, int) or isinstance(value, bool):
                raise verr("@Priority takes one integer, as in @Priority(1)", a)
            return value
        return 0

    def _plan(self, node: Any, name: str, epl: str = "") -> StatementPlan:
        kind = type(node).__name__
        self._check_context_variables(node)
        self.tenv = TableEnv(self.catalog.tables, getattr(node, "context", None))
        plan = self._plan_kind(node, kind, name, epl)
        if self.tenv.used and plan.kind in ("query", "on"):
            # read-accessed tables: the runtime hands their instances to the statement
            extra = tuple(sorted(self.tenv.used - set(plan.tables)))
            plan = replace(plan, tables=plan.tables + extra)
        return plan

    def _plan_kind(self, node: Any, kind: str, name: str, epl: str) -> StatementPlan:
        if kind == "CreateSchema":
            self.catalog.schemas[node.name] = {f: str(t) for f, t in node.fields}
            return StatementPlan(name, "schema", epl, schema=self.catalog.schemas[node.name])
        if kind == "CreateContext":
            spec = self.context_spec(node.name, node.spec)
            self.catalog.contexts[node.name] = spec
            return StatementPlan(name, "context", epl, context_spec=spec)
        if kind == "CreateVariable":
            return self.create_variable(node, name, epl)
        if kind == "CreateTable":
            return self.create_table(node, name, epl)
        if kind == "SelectStatement":
            return self.query(node, name, epl)
        if kind == "CreateWindow":
            return self.create_window(node, name, epl)
        if kind == "OnStatement":
            return self.on_statement(node, name, epl)
        if kind == "ApamaQuery":
            return self.apama(node, name, epl)
        raise NotSupported(_construct_name(kind))

    # -- variables and tables -----------------------------------------------
    def create_variable(self, node: Any, name: str, epl: str) -> StatementPlan:
        """``[context C] create [constant] variable type name [= expr]`` (000 §4.8)."""
        from operators.variables import SCALAR_TYPES, VariableDecl, VariableError

        type_name = str(node.type_name)
        base = type_name[:-2] if type_name.endswith("[]") else type_name
        if base.lower() not in SCALAR_TYPES and self.catalog.type_props(base) is None:
            raise verr(f"unknown variable type '{type_name}'", node,
                       hint="use int, long, double, float, string, boolean, short, byte, "
                            "object, an array of one of them, or an event type")
        if node.name in self.catalog.variables:
            raise verr(f"variable '{node.name}' is already declared", node)
        if node.context is not None and node.context not in self.catalog.contexts:
            raise verr(f"unknown context '{node.context}'", node,
                       hint=_did_you_mean(node.context, self.catalog.contexts))
        if node.constant and node.init is None:
            raise verr(f"constant '{node.name}' needs an initial value", node)
        init = None
        if node.init is not None:
            scope = Scope("event", variables=frozenset(self.catalog.variables))
            fn = compile_expr(node.init, scope)
            init = fn({}, PartitionCtx(variables=dict(self.catalog.variable_values)))
        decl = VariableDecl(node.name, type_name, init, bool(node.constant))
        try:
            value = decl.coerce(init)
        except VariableError as e:
            raise verr(str(e), node.init or node) from None
        self.catalog.variables[node.name] = type_name
        self.catalog.variable_values[node.name] = value
        if node.constant:
            self.catalog.constants.add(node.name)
        if node.context is not None:
            self.catalog.context_variables[node.name] = node.context
        return StatementPlan(name, "variable", epl, context=node.context, initial=value,
                             variable=node.name, var_decl=decl)

    def _check_context_variables(self, node: Any) -> None:
        """000 §4.8: context variables can only be used in statements of the same context."""
        owners = self.catalog.context_variables
        if not owners or type(node).__name__ == "CreateVariable":
            return
        context = getattr(node, "context", None)
        for n in names_in(node):
            owner = owners.get(n.parts[0])
            if owner is not None and owner != context:
                raise verr(f"variable '{n.parts[0]}' is a context variable of '{owner}'; the "
                           f"statement must declare 'context {owner}'", n,
                           hint="context variables can only be used in statements associated "
                                "to the same context (000 §4.8)")

    def create_table(self, node: Any, name: str, epl: str) -> StatementPlan:
        """``[context C] create table Name (k type primary key, c sum(double), ...)``."""
        from operators.aggregates import AGGREGATE_NAMES, make_aggregator

        if node.context is not None and node.context not in self.catalog.contexts:
            raise verr(f"unknown context '{node.context}'", node,
                       hint=_did_you_mean(node.context, self.catalog.contexts))
        if node.name in self.catalog.tables or self.catalog.type_props(node.name) is not None:
            raise verr(f"'{node.name}' is already declared", node)
        cols: list[TableColumn] = []
        seen: set[str] = set()
        for c in node.columns:
            if c.name in seen:
                raise verr(f"column '{c.name}' is declared twice", c)
            seen.add(c.name)
            if c.aggregation is not None:
                fname = c.aggregation.name.lower()
                if fname not in AGGREGATE_NAMES:
                    raise verr(f"'{c.aggregation.name}' is not an aggregation function", c,
                               hint="aggregation columns are written like 'total sum(double)'")
                agg = make_aggregator(fname, star=bool(c.aggregation.star),
                                      distinct=bool(c.aggregation.distinct))
                cols.append(TableColumn(c.name, None, False, agg, text_of(c.aggregation)))
            else:
                cols.append(TableColumn(c.name, str(c.type_name), bool(c.primary_key)))
        spec = TableSpec(node.name, tuple(cols), node.context)
        self.catalog.tables[node.name] = spec
        return StatementPlan(name, "table", epl, context=node.context, table=spec)

    def _into_table(self, node: Any, rs: ResultSetSpec, aggs_by_text: dict[str, int]
                    ) -> ResultSetSpec:
        """``into table T select agg as col ... group by keys`` (000 §4.7): each aggregate
        maintains the table column its alias names; group-by values are the primary key."""
        table = self.catalog.tables.get(node.into_table)
        if table is None:
            raise verr(f"unknown table '{node.into_table}'", node,
                       hint=_did_you_mean(node.into_table, self.catalog.tables))
        tctx = table.context
        if tctx != node.context:
            raise verr(f"table '{table.name}' is declared with context '{tctx}'; 'into table' "
                       "must declare the same context" if tctx else
                       f"table '{table.name}' has no context; 'into table' must not declare "
                       "one", node, hint="000 §4.7")
        if len(node.group_by or ()) != len(table.keys):
            raise verr(f"table '{table.name}' has {len(table.keys)} primary key column(s); "
                       f"the statement groups by {len(node.group_by or ())} expression(s)",
                       node, hint="group by the primary key, in the declared order")
        columns: list[str | None] = [None] * len(rs.aggregates)
        for item in node.select_items:
            if type(item).__name__ != "SelectItem" or not has_aggregate(item.expr):
                continue
            col_name = item.alias or column_name(item, self.source)
            col = table.aggregations.get(col_name)
            if col is None:
                raise verr(f"table '{table.name}' has no aggregation column '{col_name}'",
                           item, hint=_did_you_mean(col_name, table.aggregations))
            if type(item.expr).__name__ != "Call":
                raise verr("an 'into table' column must be a single aggregation", item)
            idx = aggs_by_text.get(text_of(item.expr))
            if idx is None:
                continue
            if type(rs.aggregates[idx].aggregator) is not type(col.aggregator):
                raise verr(f"column '{col_name}' is {col.agg_text}; the statement aggregates "
                           f"{text_of(item.expr)}", item)
            columns[idx] = col_name
        if any(c is None for c in columns):
            raise verr("every aggregation of an 'into table' statement must go to a table "
                       "column", node)
        return IntoTableSpec.of(rs, table.name, tuple(c or "" for c in columns))

    # -- queries -----------------------------------------------------------
    def query(self, node: Any, name: str, epl: str) -> StatementPlan:
        if node.context is not None and node.context not in self.catalog.contexts:
            raise verr(f"unknown context '{node.context}'", node,
                hint=_did_you_mean(node.context, self.catalog.contexts))
        if len(node.from_) != 1:
            from app.epl.joins import plan_join

            return plan_join(self, node, name, epl)
        src = node.from_[0]
        stream: StreamSpec | None = None
        pattern = None
        variables = frozenset(self.catalog.variables)
        source_window = None
        if type(src).__name__ == "FilterStream":
            props = self.catalog.type_props(src.type_name)
            if src.type_name in self.catalog.named_windows:
                source_window = src.type_name
                if src.views:
                    raise NotSupported("data windows on a named window consumer")
            if props is None:
                raise verr(f"unknown event type '{src.type_name}'", src,
                    hint=_did_you_mean(src.type_name, self._type_names()))
            aliases = frozenset({src.alias} if src.alias else set())
            self.tenv.props = props
            scope = Scope("event", aliases, variables=variables, tables=self.tenv)
            filt = compile_expr(src.filter, scope) if src.filter is not None else None
            view = self.view_chain(src.views, scope, src.retain) if src.views else None
            self._check_names(node, {**props, **_derived_props(view)}, scope, src.type_name)
            stream = StreamSpec(src.type_name, filt, view, src.alias,
                                text_of(src.filter) if src.filter is not None else "")
            if src.type_name in self.catalog.tables:
                raise NotSupported("selecting from a table in a continuous statement (use an "
                                   "on-select, or 'kepl query' for an on-demand read)")
        elif type(src).__name__ == "PatternStream":
            from app.epl.patterns import plan_pattern

            pattern = plan_pattern(self, src.pattern)
            scope = Scope("tags", tags=frozenset(pattern.tag_names()), variables=variables,
                          tables=self.tenv)
            self._check_tag_names(node, pattern)
        else:
            raise NotSupported(_construct_name(type(src).__name__))
        if node.context is not None:
            self._check_segmented(node.context, stream, pattern, src)
        agg_texts: dict[str, int] = {}
        rs = self.result_set(node, scope, agg_texts=agg_texts)
        tables: tuple[str, ...] = ()
        if node.into_table is not None:
            rs = self._into_table(node, rs, agg_texts)
            tables = (node.into_table,)
        where = compile_expr(node.where, scope) if node.where is not None else None
        output = self.output(node.output, scope)
        select_kind, insert_into, insert_stream, select_stream = self.streams_of(node, rs)
        pipeline = PipelineSpec(rs, output, stream, pattern, where,
                                select_kind if select_stream is None else "irstream",
                                bool(node.distinct))
        return StatementPlan(name, "query", epl, pipeline, node.context,
                             insert_into=insert_into, insert_stream=insert_stream,
                             select_stream=select_stream,
                             columns=tuple(c.name for c in rs.columns), window=source_window,
                             tables=tables,
                             table=self.catalog.tables[tables[0]] if tables else None)

    def streams_of(self, node: Any, rs: Any) -> tuple[str, str | None, str, str | None]:
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

    # -- named windows -----------------------------------------------------
    def create_window(self, node: Any, name: str, epl: str) -> StatementPlan:
        """002: a named window is a pipeline over events inserted into it."""
        if node.context is not None and node.context not in self.catalog.contexts:
            raise verr(f"unknown context '{node.context}'", node,
                       hint=_did_you_mean(node.context, self.catalog.contexts))
        if node.type_name is not None:
            props = self._require_type(node.type_name, node)
        else:
            props = {c: str(t) for c, t in node.columns}
        if node.insert:
            raise NotSupported("create window ... insert")
        scope = Scope("event", frozenset(), variables=frozenset(self.catalog.variables))
        self.catalog.streams[node.name] = dict(props)
        self.catalog.named_windows[node.name] = node.context or ""
        # a named window without a data window keeps every row (keep-all)
        views = node.views or (ast.View(None, "keepall"),)
        view = self.view_chain(views, scope, None)
        rs = ResultSetSpec(SIMPLE, (), wildcard=True)
        pipeline = PipelineSpec(rs, OutputSpec(), StreamSpec(node.name, None, view), None,
                                None, "irstream")
        return StatementPlan(name, "window", epl, pipeline, node.context, window=node.name,
                             event_type=node.type_name)

    def on_statement(self, node: Any, name: str, epl: str) -> StatementPlan:
        """``on Trigger ...`` against a named window, a table or variables."""
        from operators.named_window import OnActionSpec

        if node.context is not None and node.context not in self.catalog.contexts:
            raise verr(f"unknown context '{node.context}'", node,
                       hint=_did_you_mean(node.context, self.catalog.contexts))
        trig = node.trigger
        if type(trig).__name__ != "FilterStream":
            raise NotSupported("on-statements triggered by a pattern")
        self._require_type(trig.type_name, trig)
        action = node.action
        akind = type(action).__name__
        variables = frozenset(self.catalog.variables)
        self.tenv.props = self.catalog.type_props(trig.type_name) or {}
        tscope = Scope("event", frozenset({trig.alias} if trig.alias else set()),
                       variables=variables, tables=self.tenv)
        tfilter = compile_expr(trig.filter, tscope) if trig.filter is not None else None
        if akind == "OnSet":
            oscope = Scope("tags", frozenset(), frozenset(
                {trig.alias} if trig.alias else {trig.type_name}), variables, tables=self.tenv)
            assigns = tuple(self._assignment(a, oscope, node) for a in action.assignments)
            spec = OnActionSpec("set", trig.type_name, tfilter, trig.alias, assignments=assigns)
            return StatementPlan(name, "on", epl, context=node.context, action=spec)
        target_name = getattr(action, "window", None)
        if target_name in self.catalog.named_windows:
            target = "window"
            tctx = self.catalog.named_windows[target_name] or None
            props = dict(self.catalog.streams.get(target_name) or {})
        elif target_name in self.catalog.tables:
            target = "table"
            table = self.catalog.tables[target_name]
            tctx = table.context
            props = {c.name: c.type_name or "any" for c in table.columns}
        else:
            raise verr(f"unknown named window or table '{target_name}'", action,
                       hint=_did_you_mean(str(target_name), [*self.catalog.named_windows,
                                                             *self.catalog.tables]))
        if tctx != node.context:
            what = "named window" if target == "window" else "table"
            section = "000 §4.6" if target == "window" else "000 §4.7"
            raise verr(f"{what} '{target_name}' is declared with context '{tctx}'; the "
                       "on-trigger statement must declare the same context"
                       if tctx else f"{what} '{target_name}' has no context; the "
                       "on-trigger statement must not declare one", node,
                       hint=f"write 'context {tctx} on ...' ({section})" if tctx else None)
        tags = {a for a in (trig.alias, action.alias, target_name, trig.type_name, "initial")
                if a}
        cscope = Scope("tags", frozenset(), frozenset(tags), variables, tables=self.tenv)
        where = compile_expr(action.where, cscope) if action.where is not None else None
        common = dict(trigger_type=trig.type_name, trigger_filter=tfilter,
                      trigger_alias=trig.alias, window=target_name, window_alias=action.alias,
                      where=where, target=target, target_props=tuple(props))
        insert_into = insert_stream = None
        if akind == "OnDelete":
            spec = OnActionSpec("delete", **common)
        elif akind == "OnSelect":
            spec = self._on_select(action, cscope, common)
            if action.insert_into is not None:
                insert_into = action.insert_into.name
                insert_stream = "istream"
                self.catalog.streams.setdefault(
                    insert_into, {c: "any" for c, _ in spec.columns} or dict(props))
        elif akind == "OnUpdate":
            assigns = tuple(self._column_assignment(a, cscope, target_name, props, target)
                            for a in action.assignments)
            spec = OnActionSpec("update", assignments=assigns, **common)
        elif akind == "OnMerge":
            spec = OnActionSpec("merge", clauses=self._merge_clauses(
                action, cscope, target_name, props, target), **common)
        else:
            raise NotSupported(_construct_name(akind))
        return StatementPlan(name, "on", epl, context=node.context, action=spec,
                             insert_into=insert_into, insert_stream=insert_stream or "istream",
                             window=target_name if target == "window" else None,
                             tables=(target_name,) if target == "table" else (),
                             table=self.catalog.tables[target_name] if target == "table"
                             else None)

    def _on_select(self, action: Any, cscope: Scope, common: dict[str, Any]) -> Any:
        """on-select: plain projection, or a result set when it aggregates/groups/orders."""
        from operators.named_window import OnActionSpec

        cols = []
        wildcard = False
        aggregated = bool(action.group_by or action.having or action.order_by
                          or action.distinct) or any(
            type(i).__name__ != "Wildcard" and has_aggregate(i.expr)
            for i in action.select_items)
        for item in action.select_items:
            if type(item).__name__ == "Wildcard":
                wildcard = True
            elif not aggregated:
                cols.append((column_name(item, self.source), compile_expr(item.expr, cscope)))
        rs = None
        if aggregated:
            sel = ast.SelectStatement(
                select_items=action.select_items, group_by=action.group_by or (),
                having=action.having, order_by=action.order_by or (), distinct=action.distinct)
            rs = self.result_set(sel, cscope)
        return OnActionSpec("select", columns=tuple(cols), wildcard=wildcard,
                            and_delete=action.and_delete, resultset=rs,
                            distinct=bool(action.distinct), **common)

    def _column_assignment(self, a: Any, scope: Scope, target: str, props: dict[str, str],
                           kind: str) -> Assignment:
        """``col = expr`` of an update: the column must exist (and not be an aggregation)."""
        col = _target(a.target)
        if "." in col:
            head, _, rest = col.partition(".")
            col = rest if head == target or head in scope.tags else col
        if col not in props:
            raise verr(f"'{target}' has no column '{col}'", a, hint=_did_you_mean(col, props))
        if kind == "table":
            tcol = self.catalog.tables[target].column(col)
            if tcol is not None and tcol.aggregator is not None:
                raise verr(f"'{col}' is an aggregation column of table '{target}' and cannot "
                           "be assigned", a, hint="aggregate into it with 'into table'")
        return Assignment(col, compile_expr(a.expr, scope))

    def _merge_clauses(self, action: Any, cscope: Scope, target: str, props: dict[str, str],
                       kind: str) -> tuple[Any, ...]:
        """002 on-merge: ``when [not] matched [and cond] then update|delete|insert``."""
        from operators.named_window import MergeActionSpec, MergeClauseSpec

        clauses = []
        for c in action.clauses:
            always = type(c).__name__ == "MergeInsert"
            if always:
                c = ast.MergeWhen(False, None, (c,))
            actions = []
            for a in c.actions:
                akind = type(a).__name__
                where = compile_expr(a.where, cscope) if a.where is not None else None
                if akind == "MergeUpdate":
                    if not c.matched:
                        raise verr("'then update' needs a matched row (when matched)", a)
                    assigns = tuple(self._column_assignment(x, cscope, target, props, kind)
                                    for x in a.assignments)
                    actions.append(MergeActionSpec("update", where, assigns))
                elif akind == "MergeDelete":
                    if not c.matched:
                        raise verr("'then delete' needs a matched row (when matched)", a)
                    actions.append(MergeActionSpec("delete", where))
                else:
                    actions.append(self._merge_insert(a, where, cscope, props, kind, target))
            cond = compile_expr(c.condition, cscope) if c.condition is not None else None
            clauses.append(MergeClauseSpec(bool(c.matched), cond, tuple(actions), always))
        return tuple(clauses)

    def _merge_insert(self, a: Any, where: Any, cscope: Scope, props: dict[str, str],
                      kind: str, target: str) -> Any:
        """``insert [into S] [(cols)] select ...`` of an on-merge."""
        from operators.named_window import MergeActionSpec

        cols = []
        wildcard = False
        names = list(a.columns)
        items = [i for i in a.select_items if type(i).__name__ != "Wildcard"]
        wildcard = len(items) != len(a.select_items)
        if names and len(names) != len(items):
            raise verr(f"{len(names)} column names for {len(items)} selected values", a)
        for i, item in enumerate(items):
            if has_aggregate(item.expr):
                raise verr("aggregation is not allowed in an on-merge insert", item)
            cname = names[i] if names else column_name(item, self.source)
            cols.append((cname, compile_expr(item.expr, cscope)))
        if a.into is None:
            for cname, _ in cols:
                if cname not in props:
                    raise verr(f"'{target}' has no column '{cname}'", a,
                               hint=_did_you_mean(cname, props))
            if kind == "table":
                table = self.catalog.tables[target]
                for cname, _ in cols:
                    tcol = table.column(cname)
                    if tcol is not None and tcol.aggregator is not None:
                        raise verr(f"'{cname}' is an aggregation column and cannot be "
                                   "inserted", a)
        else:
            self.catalog.streams.setdefault(a.into, {c: "any" for c, _ in cols})
        return MergeActionSpec("insert", where, (), tuple(cols), wildcard, a.into)

    # -- on-demand queries -----------------------------------------------------
    def plan_on_demand_text(self, epl: str) -> Any:
        """A fire-and-forget select over a named window or table (``kepl query``)."""
        return self._planned(epl, self.plan_on_demand)

    def plan_on_demand(self, node: Any) -> Any:
        from app.runtime.plan import OnDemandPlan

        if type(node).__name__ != "SelectStatement":
            raise verr("an on-demand query is a select statement", node)
        if node.insert_into is not None or node.into_table is not None or node.output:
            raise verr("an on-demand query takes no insert into, into table or output "
                       "clause", node)
        if len(node.from_) != 1 or type(node.from_[0]).__name__ != "FilterStream":
            raise NotSupported("on-demand joins")
        src = node.from_[0]
        name = src.type_name
        if name in self.catalog.named_windows:
            kind = "window"
            props = dict(self.catalog.streams.get(name) or {})
        elif name in self.catalog.tables:
            kind = "table"
            props = {c.name: c.type_name or "any" for c in self.catalog.tables[name].columns}
        else:
            raise verr(f"'{name}' is not a named window or a table", src,
                       hint=_did_you_mean(name, [*self.catalog.named_windows,
                                                 *self.catalog.tables]))
        if src.views:
            raise verr("an on-demand query reads the window as it is: no data window", src)
        aliases = frozenset({src.alias} if src.alias else set()) | {name}
        # an on-demand query runs outside any statement: no table instance is handed to it
        self.tenv = TableEnv(self.catalog.tables, props=props,
                             refusal="an on-demand query cannot read other tables")
        scope = Scope("event", aliases, variables=frozenset(self.catalog.variables),
                      tables=self.tenv)
        self._check_names(node, props, scope, name)
        rs = self.result_set(node, scope)
        where = compile_expr(node.where, scope) if node.where is not None else None
        filt = compile_expr(src.filter, scope) if src.filter is not None else None
        return OnDemandPlan(name, kind, rs, where, filt, bool(node.distinct),
                            tuple(c.name for c in rs.columns))

    def _check_segmented(self, context: str, stream: Any, pattern: Any, src: Any) -> None:
        """000 §4.2.2/§4.2.3: a statement of a keyed or hash context must filter at least
        one event type listed in the context declaration."""
        spec = self.catalog.contexts[context]
        inner = spec
        while isinstance(inner, NestedSpec):
            inner = inner.inner
        if not isinstance(inner, KeyedSpec | HashSpec):
            return
        used = {stream.type_name} if stream is not None else set(pattern.types())
        listed = inner.types()
        if not used & listed:
            kind = "keyed" if isinstance(inner, KeyedSpec) else "hash"
            raise verr(
                f"statement refers to {kind} segmented context '{context}' but filters none "
                f"of its event types ({', '.join(sorted(listed))})", src,
                hint="select from an event type listed in the context declaration")

    def _type_names(self) -> list[str]:
        return [*self.catalog.schemas, *self.catalog.streams]

    def _check_names(self, node: Any, props: dict[str, str], scope: Scope,
                     type_name: str) -> None:
        """Unknown properties are errors with a hint (strict validation)."""
        if all(t == "any" for t in props.values()):
            return
        exprs: list[Any] = []
        for item in node.select_items:
            if type(item).__name__ == "SelectItem":
                exprs.append(item.expr)
        src = node.from_[0]
        for e in (src.filter, node.where, node.having, *(node.group_by or ())):
            if e is not None:
                exprs.append(e)
        for e in exprs:
            for n in names_in(e):
                parts = n.parts
                if parts[0] == "context" or parts[0] in scope.variables:
                    continue
                if len(parts) > 1 and is_table_name(parts[0], scope):
                    continue
                if parts[0] in scope.aliases:
                    parts = parts[1:]
                    if not parts:
                        continue
                problem = path_error(parts, props, self.catalog.type_props, type_name)
                if problem is not None:
                    raise self._path_err(n, len(n.parts) - len(parts), problem)

    def _check_tag_names(self, node: Any, pattern: Any) -> None:
        """Properties of pattern tags (``a.price``) must be properties of the tag's type."""
        from operators.patterns.spec import Filter

        tag_types = {n.tag: n.type_name for n in pattern.plan.nodes
                     if isinstance(n, Filter) and n.tag}
        exprs = [item.expr for item in node.select_items
                 if type(item).__name__ == "SelectItem"]
        exprs += [e for e in (node.where, node.having, *(node.group_by or ())) if e is not None]
        for e in exprs:
            for n in names_in(e):
                t = tag_types.get(n.parts[0])
                props = self.catalog.type_props(t) if t is not None else None
                if props is None or len(n.parts) < 2:
                    continue
                problem = path_error(n.parts[1:], props, self.catalog.type_props, t)
                if problem is not None:
                    raise self._path_err(n, 1, problem)

    def _path_err(self, n: Any, skipped: int, problem: tuple[int, str, str | None]
                  ) -> EplValidationError:
        """A property-path error pointing at the part in error when the name is written
        plainly (``a.b.c``), else at the name."""
        index, message, hint = problem
        err = verr(message, n, hint=hint)
        k = skipped + index
        if err.column is not None and source_text(self.source, n.pos) == ".".join(n.parts):
            err.column += len(".".join(n.parts[:k])) + (1 if k else 0)
        return err

    def result_set(self, node: Any, scope: Scope, empty_sum: Any = None,
                   agg_texts: dict[str, int] | None = None) -> ResultSetSpec:
        aggs: list[AggregateDef] = []
        ascope = Scope(scope.kind, scope.aliases, scope.tags, scope.variables, aggs,
                       allow_aggregates=True, tables=scope.tables)
        if agg_texts is not None:
            ascope.agg_texts = agg_texts
        columns: list[SelectColumn] = []
        wildcard = False
        plain_exprs: list[Any] = []
        for item in node.select_items:
            if type(item).__name__ == "Wildcard":
                wildcard = True
                continue
            columns.append(SelectColumn(column_name(item, self.source),
                                        compile_expr(item.expr, ascope)))
            if not has_aggregate(item.expr):
                plain_exprs.append(item.expr)
        having = compile_expr(node.having, ascope) if node.having is not None else None
        group_by = tuple(compile_expr(g, scope) for g in (node.group_by or ()))
        group_texts = tuple(_WS.sub("", text_of(g)) for g in (node.group_by or ()))
        order_by, sort_columns = self._order_by(node.order_by or (), columns, ascope)
        limit = offset = None
        if node.limit is not None:
            limit = int(constant_value(node.limit.count))
            offset = int(constant_value(node.limit.offset)) if node.limit.offset else 0
        if empty_sum is not None:
            aggs[:] = [AggregateDef(a.text, Sum(empty_sum), a.value)
                       if type(a.aggregator) is Sum else a for a in aggs]
        if not aggs:
            kind = SIMPLE
            if group_by:
                # no aggregation: one row per event, as Esper's aggregated-grouped processor
                kind = GROUPED_ROWS if plain_exprs or wildcard else GROUPED
        else:
            event_refs = [e for e in plain_exprs if _refers_to_event(e, scope)]
            if wildcard:
                event_refs.append(ast.Star())
            if not group_by:
                kind = AGG_ROWS if event_refs else AGG_ALL
            else:
                grouped = all(_is_grouped(e, group_texts, scope) for e in event_refs
                              if not isinstance(e, ast.Star))
                kind = GROUPED if grouped and not wildcard else GROUPED_ROWS
        return ResultSetSpec(kind, tuple(columns), tuple(aggs), group_by, having, wildcard,
                             order_by, limit, offset or 0, group_texts,
                             sort_columns=sort_columns)

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

    def output(self, node: Any, scope: Scope) -> OutputSpec:
        """The output clause (002 §2.10 output rate limiting, 000 §4.5 when terminated)."""
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
                every_expr = _period_seconds(node.every_time, oscope)
        at = None
        at_text = ""
        if node.at is not None:
            from app.epl.patterns import cron_spec

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
        # 000 §4.5: 'then set' after 'when terminated' runs when the partition ends; after
        # 'when expr' it runs each time the expression triggers output
        then_set, term_set = ((), assigns) if terminated else (assigns, ())
        return OutputSpec(kind, every_events, every_ms, when, terminated, term_and,
                          then_set, limited=True, at=at, at_text=at_text, after_ms=after_ms,
                          after_events=after_events, terminated_set=term_set,
                          every_events_expr=every_events_expr, every_expr=every_expr,
                          variables=when_vars)

    def _assignment(self, a: Any, scope: Scope, node: Any) -> Assignment:
        """``var = expr`` of then-set / on-set: the variable must exist and not be constant."""
        name = _target(a.target)
        if name not in self.catalog.variables:
            raise verr(f"unknown variable '{name}'", a,
                       hint=_did_you_mean(name, self.catalog.variables))
        if name in self.catalog.constants:
            raise verr(f"variable '{name}' is a constant and cannot be assigned", a)
        return Assignment(name, compile_expr(a.expr, scope))

    def _check_output_names(self, expr: Any, variables: frozenset[str]) -> None:
        """Esper §5.7.1.1: an output condition reads variables and built-in properties only."""
        from app.epl.expr import OUTPUT_BUILTINS

        for n in names_in(expr):
            head = n.parts[0]
            if head in variables or head in OUTPUT_BUILTINS or head == "context":
                continue
            if len(n.parts) > 1 and head in self.tenv.specs:
                continue  # a key-less table's column (000 §4.7)
            raise verr(f"'{'.'.join(n.parts)}' is not a variable or a built-in property "
                       "of the output condition", n,
                       hint="use count_insert, count_remove, last_output_timestamp or a "
                            "variable")

    # -- windows -----------------------------------------------------------
    def view_chain(self, views: Any, scope: Scope, retain: str | None) -> Any:
        from app.epl.views import plan_views

        return plan_views(self, views, scope, retain)

    # -- Apama -------------------------------------------------------------
    def apama(self, node: Any, name: str, epl: str) -> StatementPlan:
        from app.epl.views import apama_view

        props = self.catalog.type_props(node.stream)
        if props is None:
            raise verr(f"unknown stream '{node.stream}'", node,
                                     hint=_did_you_mean(node.stream, self._type_names()))
        scope = Scope("event", frozenset(), variables=frozenset(self.catalog.variables))
        view = apama_view(node)
        sel = ast.SelectStatement(
            annotations=(), context=None, insert_into=None,
            stream_kind="rstream" if node.rstream else None,
            select_items=node.select_items, from_=(), where=None, group_by=(),
            having=None, output=None, order_by=(), limit=None, into_table=None)
        # 003: com.apama.aggregates.sum returns 0 for an empty window
        rs = self.result_set(sel, scope, empty_sum=0.0)
        stream = StreamSpec(node.stream, None, view, None)
        pipeline = PipelineSpec(rs, OutputSpec(), stream, None, None,
                                "rstream" if node.rstream else "istream")
        return StatementPlan(name, "query", epl, pipeline,
                             columns=tuple(c.name for c in rs.columns))

    # -- contexts ----------------------------------------------------------
    def context_spec(self, name: str, spec: Any) -> Any:
        kind = type(spec).__name__
        variables = frozenset(self.catalog.variables)
        if kind == "KeyedContext":
            items = []
            seen: set[str] = set()
            key_types: list[str] | None = None
            for it in spec.items:
                if it.type_name in self.catalog.named_windows:
                    raise verr(f"'{it.type_name}' is a named window; partition by needs an "
                               "event type", it,
                               hint="partition the statements that insert into the window")
                props = self._require_type(it.type_name, it)
                if it.type_name in seen:
                    raise verr(f"event type '{it.type_name}' is listed twice in partition by", it,
                        hint="list each event type once (000 §4.2.2)")
                seen.add(it.type_name)
                scope = Scope("event", frozenset({it.alias} if it.alias else set()),
                              variables=variables, tables=self._routing_env(props))
                for p in it.props:
                    pname = text_of(p)
                    if pname not in props:
                        raise verr(f"unknown property '{pname}' of {it.type_name}", it,
                            hint=_did_you_mean(pname, props))
                types = [props.get(text_of(p), "any") for p in it.props]
                if key_types is None:
                    key_types = types
                elif len(types) != len(key_types):
                    raise verr(f"'{it.type_name}' lists {len(types)} key properties, "
                               f"the first stream {len(key_types)}", it)
                else:
                    for p, t, first in zip(it.props, types, key_types):
                        if _norm_type(t) != _norm_type(first):
                            raise verr(
                                f"type mismatch between key properties: '{text_of(p)}' of "
                                f"{it.type_name} is {t}, the first stream's key is {first}", p,
                                hint="key properties at the same position must have the "
                                     "same type (000 §4.2.2)")
                keys = tuple(compile_expr(p, scope) for p in it.props)
                filt = compile_expr(it.filter, scope) if it.filter is not None else None
                items.append(KeyedItem(it.type_name, keys, filt,
                                       tuple(text_of(p) for p in it.props), it.alias))
            init, term = self._keyed_lifecycle(spec, seen)
            return KeyedSpec(name, tuple(items), init, term)
        if kind == "HashContext":
            hitems = []
            for it in spec.items:
                hprops = self._require_type(it.type_name, it)
                scope = Scope("event", variables=variables, tables=self._routing_env(hprops))
                hitems.append(HashItem(
                    it.type_name, it.function, compile_expr(it.args[0], scope),
                    compile_expr(it.filter, scope) if it.filter is not None else None))
            return HashSpec(name, tuple(hitems), int(constant_value(spec.granularity)),
                            bool(spec.preallocate))
        if kind == "CategoryContext":
            cprops = self._require_type(spec.type_name, spec)
            scope = Scope("event", variables=variables,
                          tables=replace(self.tenv, props=cprops))
            groups = tuple((g.label, compile_expr(g.expr, scope)) for g in spec.groups)
            return CategorySpec(name, spec.type_name, groups,
                                compile_expr(spec.filter, scope) if spec.filter else None)
        if kind == "NonOverlappingContext":
            start = self.condition(spec.start, frozenset(), is_start=True)
            end = self.condition(spec.end, _tags_of(spec.start), is_start=False)
            return NonOverlappingSpec(name, start, end)
        if kind == "OverlappingContext":
            init = self.condition(spec.initiated, frozenset(), is_start=True)
            term = self.condition(spec.terminated, _tags_of(spec.initiated), is_start=False)
            distinct = ()
            if spec.distinct:
                tags = _tags_of(spec.initiated)
                dscope = Scope("pfilter", tags=tags, variables=variables)
                distinct = tuple(compile_expr(d, dscope) for d in spec.distinct)
            return OverlappingSpec(name, init, term, distinct)
        if kind == "NestedContext":
            specs = [self.context_spec(it.name, it.spec) for it in spec.contexts]
            out = specs[-1]
            for outer in reversed(specs[:-1]):
                out = NestedSpec(name, outer, out)
            return out
        raise NotSupported(_construct_name(kind))

    def _keyed_lifecycle(self, spec: Any, listed: set[str]) -> tuple[tuple[Any, ...], Any]:
        """``initiated by`` filters and the ``terminated by`` condition of a keyed context,
        validated as Esper does: initiating types are listed in ``partition by``, streams
        are named in one of the two places, each name once; the terminating condition
        may read the starting event by its name."""
        item_names = [it.alias for it in spec.items if it.alias]
        init_names = [c.alias for c in spec.initiated if c.alias]
        if item_names and init_names:
            raise verr("a keyed context names its streams in partition by or in initiated "
                       "by, not both", spec.initiated[0],
                       hint="keep the names of the initiating filters")
        seen: dict[str, str] = {}
        for name, type_name in [*((it.alias, it.type_name) for it in spec.items if it.alias),
                                *((c.alias, c.type_name) for c in spec.initiated if c.alias)]:
            if name in seen:
                raise verr(f"name '{name}' already used for type '{seen[name]}'", spec)
            seen[name] = type_name
        init = []
        for c in spec.initiated:
            if c.type_name not in listed:
                raise verr(f"initiated by '{c.type_name}': every initiating event type must "
                           "be listed in partition by", c,
                           hint=f"listed: {', '.join(sorted(listed))}")
            init.append(self.condition(c, frozenset(), is_start=True))
        term = None
        if spec.terminated is not None:
            term = self.condition(spec.terminated, frozenset(seen), is_start=False)
        return tuple(init), term

    def _routing_env(self, props: dict[str, str]) -> TableEnv:
        """Keyed and hash context items route events to partitions, in Kafka mode before
        any engine runs: they cannot read tables."""
        return TableEnv(self.catalog.tables, props=props,
                        refusal="a keyed or hash context declaration cannot read a table")

    def _require_type(self, type_name: str, node: Any) -> dict[str, str]:
        props = self.catalog.type_props(type_name)
        if props is None:
            raise verr(f"unknown event type '{type_name}'", node,
                                     hint=_did_you_mean(type_name, self._type_names()))
        return props

    def condition(self, c: Any, tags: frozenset[str], is_start: bool) -> Any:
        if c is None:
            return cond.CondNeverSpec()
        kind = type(c).__name__
        variables = frozenset(self.catalog.variables)
        if kind == "CondFilter":
            self._require_type(c.type_name, c)
            aliases = frozenset({c.alias} if c.alias else set())
            env = replace(self.tenv, props=self.catalog.type_props(c.type_name) or {})
            scope = Scope("pfilter", aliases, tags, variables, tables=env)
            pred = compile_expr(c.filter, scope) if c.filter is not None else None
            text = c.type_name + (f"({text_of(c.filter)})" if c.filter is not None else "")
            return cond.CondFilterSpec(c.type_name, pred, c.alias, text)
        if kind == "CondPattern":
            from app.epl.patterns import plan_pattern

            return cond.CondPatternSpec(plan_pattern(self, c.pattern, tags), bool(c.inclusive),
                                        text_of(c.pattern))
        if kind == "CondCrontab":
            from app.epl.patterns import cron_spec

            return cond.CondCrontabSpec(cron_spec(c.crontab), text_of(c.crontab))
        if kind == "CondAfter":
            return cond.CondAfterSpec(time_period_ms(c.period))
        if kind == "CondNow":
            return cond.CondNowSpec()
        if kind == "CondNowAnd":
            inner = self.condition(c.cond, tags, is_start)
            if isinstance(inner, cond.CondFilterSpec):
                raise verr("@now cannot be combined with a filter initiating condition", c,
                    hint="use @now with a pattern or crontab condition (000 §4.2.7)")
            return cond.CondNowAndSpec(inner)
        raise NotSupported(_construct_name(kind))


def verr(message: str, node: Any = None, hint: str | None = None) -> EplValidationError:
    """A validation error positioned at ``node``."""
    pos = getattr(node, "pos", None)
    line = pos.line if pos is not None and pos.line else None
    col = pos.column if pos is not None and pos.line else None
    return EplValidationError(message, line, col, None, hint)


def _norm_type(t: str) -> str:
    return {"int": "long", "integer": "long", "short": "long", "byte": "long",
            "float": "double"}.get(t.lower(), t.lower())


def _derived_props(view: Any) -> dict[str, str]:
    """Properties a derived-value window adds to the stream (001 §14.4: size, uni, ...)."""
    from operators.derived.base import DerivedSpec
    from operators.state import MemoryNamespace

    out: dict[str, str] = {}
    stack = [view]
    while stack:
        v = stack.pop()
        if v is None:
            continue
        if isinstance(v, DerivedSpec):
            inst = v.build(MemoryNamespace(), PartitionCtx())
            out.update({k: "any" for k in inst.stats()})
            out.update({name: "any" for name, _ in v.extras})
        for f in ("stages", "sub", "windows"):
            sub = getattr(v, f, None)
            if isinstance(sub, tuple):
                stack.extend(sub)
            elif sub is not None:
                stack.append(sub)
    return out


def _tags_of(c: Any) -> frozenset[str]:
    kind = type(c).__name__
    if kind == "CondFilter" and c.alias:
        return frozenset({c.alias})
    if kind == "CondPattern":
        from app.epl.patterns import pattern_tags

        return frozenset(pattern_tags(c.pattern))
    if kind == "CondNowAnd":
        return _tags_of(c.cond)
    return frozenset()


def _refers_to_event(node: Any, scope: Scope) -> bool:
    """Whether an expression reads event properties (not only context/variables/tables)."""
    for n in names_in(node):
        head = n.parts[0]
        if head == "context" or head in scope.variables:
            continue
        if len(n.parts) > 1 and is_table_name(head, scope):
            continue
        return True
    return False


def _is_grouped(node: Any, group_texts: tuple[str, ...], scope: Scope) -> bool:
    """Whether a non-aggregated select expression is one of the group-by expressions; a
    table access counts as grouped when its keys are (its value is one per group)."""
    if _WS.sub("", text_of(node)) in group_texts:
        return True
    if isinstance(node, ast.TableAccess):
        return all(_is_grouped(k, group_texts, scope) or not _refers_to_event(k, scope)
                   for k in node.keys)
    return False


def _period_seconds(tp: Any, scope: Scope) -> Any:
    """A time period whose amounts are variables, as an expression giving seconds."""
    parts = [(compile_expr(amount, scope), ast.UNIT_MS[unit] / 1000.0)
             for amount, unit in tp.parts]

    def seconds(row: Any, ctx: Any) -> Any:
        total = 0.0
        for fn, factor in parts:
            v = fn(row, ctx)
            if v is None:
                return None
            total += v * factor
        return total
    return seconds


def _target(t: Any) -> str:
    if isinstance(t, str):
        return t
    return ".".join(t.parts) if hasattr(t, "parts") else str(t)


def _did_you_mean(name: str, candidates: Any) -> str | None:
    best = closest(name, list(candidates))
    return f"did you mean '{best}'?" if best else None


def _construct_name(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", " ", kind).lower()

"""Planning of named windows: ``create window``, on-statements (select, delete,
update, merge, set) and on-demand queries (Esper ref. 2; Esper ref. 4.6 Context and Named
Window)."""

from __future__ import annotations

from typing import Any

from app.epl import ast
from app.epl.errors import did_you_mean, verr
from app.epl.expr import (
    Scope,
    TableEnv,
    compile_expr,
    compile_filter,
    has_aggregate,
    names_in,
)
from app.epl.planning.base import (
    PlannerBase,
    column_name,
    construct_name,
    stream_names,
    target_name,
)
from app.epl.planning.java_types import qualified_types
from app.epl.planning.subqueries import SubqueryEnv
from app.runtime.catalog import NotSupported
from app.runtime.plan import StatementPlan
from operators.output import Assignment, OutputSpec
from operators.pipeline import PipelineSpec, StreamSpec
from operators.resultset import (
    SIMPLE,
    ResultSetSpec,
)


def _conjuncts(node: ast.Node) -> list[ast.Node]:
    if isinstance(node, ast.Binary) and node.op == "and":
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def range_keys(where: ast.Node | None, target: set[str], target_props: set[str],
               trigger_props: set[str]) -> tuple[tuple[str, ...], bool]:
    """The target's properties that a range condition of an on-action's where clause
    compares with the trigger (``w.v > f.w``, ``w.v between f.a and f.b``), in order;
    none when an equality with the trigger (``w.k = f.k``) keys the lookup; and whether
    the lookup goes through an index at all (an equality or a range).

    Esper ref. 6.9 (and 24.1.3): an on-action looks its matches up in an index on such
    properties, so it finds them in the order they entered the index (a sorted one: in
    ascending order of the first range property); without one it iterates the window."""
    if where is None:
        return (), False

    def prop(n: ast.Node) -> str | None:
        if not isinstance(n, ast.Name):
            return None
        if len(n.parts) == 2 and n.parts[0] in target and n.parts[1] in target_props:
            return n.parts[1]
        if (len(n.parts) == 1 and n.parts[0] in target_props
                and n.parts[0] not in trigger_props):
            return n.parts[0]
        return None

    def free(n: ast.Node) -> bool:
        return all(prop(x) is None and not (x.parts and x.parts[0] in target)
                   for x in names_in(n))

    out: list[str] = []
    for c in _conjuncts(where):
        found = None
        if isinstance(c, ast.Binary) and c.op == "=" and (
                (prop(c.left) is not None and free(c.right))
                or (prop(c.right) is not None and free(c.left))):
            return (), True  # a hash key: Esper finds the matches by it, in arrival order
        if isinstance(c, ast.Binary) and c.op in ("<", "<=", ">", ">="):
            if prop(c.left) is not None and free(c.right):
                found = prop(c.left)
            elif prop(c.right) is not None and free(c.left):
                found = prop(c.right)
        elif (isinstance(c, ast.Between) and not c.negated and prop(c.expr) is not None
              and free(c.low) and free(c.high)):
            found = prop(c.expr)
        if found is not None and found not in out:
            out.append(found)
    return tuple(out), bool(out)


def _host(subs: SubqueryEnv) -> Any:
    """An on-statement's subqueries, which run in a host of their own (None: none)."""
    from operators.subquery.host import SubqueryHostSpec

    return SubqueryHostSpec(tuple(subs.specs)) if subs.specs else None


class NamedWindowPlanning(PlannerBase):
    """Plans named windows, on-statements and on-demand queries."""

    def create_window(self, node: ast.CreateWindow, name: str, epl: str) -> StatementPlan:
        """Esper ref. 2: a named window is a pipeline over events inserted into it."""
        if node.context is not None and node.context not in self.catalog.contexts:
            raise verr(f"unknown context '{node.context}'", node,
                       hint=did_you_mean(node.context, self.catalog.contexts))
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
        view = self.view_chain(views, scope, None, props, node.name)
        rs = ResultSetSpec(SIMPLE, (), wildcard=True)
        pipeline = PipelineSpec(rs, OutputSpec(), StreamSpec(node.name, None, view), None,
                                None, "irstream")
        return StatementPlan(name, "window", epl, pipeline, node.context, window=node.name,
                             event_type=node.type_name)

    def on_statement(self, node: ast.OnStatement, name: str, epl: str) -> StatementPlan:
        """``on Trigger ...`` against a named window, a table or variables."""
        from operators.named_window import OnActionSpec

        if node.context is not None and node.context not in self.catalog.contexts:
            raise verr(f"unknown context '{node.context}'", node,
                       hint=did_you_mean(node.context, self.catalog.contexts))
        trig = node.trigger
        if not isinstance(trig, ast.FilterStream):
            raise NotSupported("on-statements triggered by a pattern")
        self._require_type(trig.type_name, trig)
        action = node.action
        variables = frozenset(self.catalog.variables)
        self.tenv.props = self.catalog.type_props(trig.type_name) or {}
        subs = SubqueryEnv(self, node.context, outer_names=frozenset({trig.type_name}),
                           outer_props=frozenset(self.tenv.props))
        tscope = Scope("event", stream_names(trig.alias, trig.type_name, self.tenv.props),
                       variables=variables, tables=self.tenv, subqueries=subs)
        tfilter = compile_filter(trig.filter, tscope) if trig.filter is not None else None
        if isinstance(action, ast.OnSet):
            oscope = Scope("tags", frozenset(), frozenset(
                {trig.alias} if trig.alias else {trig.type_name}), variables, tables=self.tenv,
                subqueries=subs)
            assigns = tuple(self._assignment(a, oscope, node) for a in action.assignments)
            spec = OnActionSpec("set", trig.type_name, tfilter, trig.alias, assignments=assigns)
            return StatementPlan(name, "on", epl, context=node.context, action=spec,
                                 subqueries=_host(subs))
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
                       hint=did_you_mean(str(target_name), [*self.catalog.named_windows,
                                                             *self.catalog.tables]))
        if tctx != node.context:
            what = "named window" if target == "window" else "table"
            section = ("Esper ref. 4.6 Context and Named Window" if target == "window"
                       else "Esper ref. 4.7 Context and Tables")
            raise verr(f"{what} '{target_name}' is declared with context '{tctx}'; the "
                       "on-trigger statement must declare the same context"
                       if tctx else f"{what} '{target_name}' has no context; the "
                       "on-trigger statement must not declare one", node,
                       hint=f"write 'context {tctx} on ...' ({section})" if tctx else None)
        tags = {a for a in (trig.alias, action.alias, target_name, trig.type_name, "initial")
                if a}
        subs.outer_props = subs.outer_props | frozenset(props)
        cscope = Scope("tags", frozenset(), frozenset(tags), variables, tables=self.tenv,
                       subqueries=subs)
        where = compile_expr(action.where, cscope) if action.where is not None else None
        ranges, indexed = range_keys(
            action.where, {a for a in (target_name, action.alias) if a}, set(props),
            set(self.catalog.type_props(trig.type_name) or {}))
        if target == "table":
            # a table is looked up by its primary key only; other conditions filter its
            # rows in the table's own order
            ranges, indexed = (), False
        common = dict(trigger_type=trig.type_name, trigger_filter=tfilter,
                      trigger_alias=trig.alias, window=target_name, window_alias=action.alias,
                      where=where, target=target, target_props=tuple(props),
                      range_keys=ranges, indexed=indexed)
        insert_into = insert_stream = None
        if isinstance(action, ast.OnDelete):
            spec = OnActionSpec("delete", **common)
        elif isinstance(action, ast.OnSelect):
            spec = self._on_select(action, cscope, common)
            if action.insert_into is not None:
                insert_into = action.insert_into.name
                insert_stream = "istream"
                self.catalog.streams.setdefault(
                    insert_into, {c: "any" for c, _ in spec.columns} or dict(props))
        elif isinstance(action, ast.OnUpdate):
            assigns = tuple(self._column_assignment(a, cscope, target_name, props, target)
                            for a in action.assignments)
            spec = OnActionSpec("update", assignments=assigns, **common)
        elif isinstance(action, ast.OnMerge):
            spec = OnActionSpec("merge", clauses=self._merge_clauses(
                action, cscope, target_name, props, target), **common)
        else:
            raise NotSupported(construct_name(action))
        return StatementPlan(name, "on", epl, context=node.context, action=spec,
                             subqueries=_host(subs), insert_into=insert_into,
                             insert_stream=insert_stream or "istream",
                             window=target_name if target == "window" else None,
                             tables=(target_name,) if target == "table" else (),
                             table=self.catalog.tables[target_name] if target == "table"
                             else None)

    def _on_select(self, action: ast.OnSelect, cscope: Scope, common: dict[str, Any]) -> Any:
        """on-select: plain projection, or a result set when it aggregates/groups/orders."""
        from operators.named_window import OnActionSpec

        cols = []
        wildcard = False
        aggregated = bool(action.group_by or action.having or action.order_by
                          or action.distinct) or any(
            not isinstance(i, ast.Wildcard) and has_aggregate(i.expr)
            for i in action.select_items)
        for item in action.select_items:
            if isinstance(item, ast.Wildcard):
                wildcard = True
            elif not aggregated:
                cols.append((column_name(item, self.source, self.subquery_numbers),
                             compile_expr(item.expr, cscope)))
        rs = None
        if aggregated:
            sel = ast.SelectStatement(
                select_items=action.select_items, group_by=action.group_by or (),
                having=action.having, order_by=action.order_by or (), distinct=action.distinct)
            rs = self.result_set(sel, cscope)
        joined = any(isinstance(i, ast.Wildcard) and i.stream is None
                     for i in action.select_items)
        return OnActionSpec("select", columns=tuple(cols), wildcard=wildcard,
                            and_delete=action.and_delete, resultset=rs,
                            distinct=bool(action.distinct), joined=joined, **common)

    def _column_assignment(self, a: ast.Assignment, scope: Scope, target: str,
                           props: dict[str, str], kind: str) -> Assignment:
        """``col = expr`` of an update: the column must exist (and not be an aggregation)."""
        col = target_name(a.target)
        if "." in col:
            head, _, rest = col.partition(".")
            col = rest if head == target or head in scope.tags else col
        if col not in props:
            raise verr(f"'{target}' has no column '{col}'", a, hint=did_you_mean(col, props))
        if kind == "table":
            tcol = self.catalog.tables[target].column(col)
            if tcol is not None and tcol.aggregator is not None:
                raise verr(f"'{col}' is an aggregation column of table '{target}' and cannot "
                           "be assigned", a, hint="aggregate into it with 'into table'")
        return Assignment(col, compile_expr(a.expr, scope))

    def _merge_clauses(self, action: ast.OnMerge, cscope: Scope, target: str, props: dict[str, str],
                       kind: str) -> tuple[Any, ...]:
        """Esper ref. 2, on-merge: ``when [not] matched [and cond] then update|delete|insert``."""
        from operators.named_window import MergeActionSpec, MergeClauseSpec

        clauses = []
        for c in action.clauses:
            always = isinstance(c, ast.MergeInsert)
            if always:
                c = ast.MergeWhen(False, None, (c,))
            actions = []
            for a in c.actions:
                where = compile_expr(a.where, cscope) if a.where is not None else None
                if isinstance(a, ast.MergeUpdate):
                    if not c.matched:
                        raise verr("'then update' needs a matched row (when matched)", a)
                    assigns = tuple(self._column_assignment(x, cscope, target, props, kind)
                                    for x in a.assignments)
                    actions.append(MergeActionSpec("update", where, assigns))
                elif isinstance(a, ast.MergeDelete):
                    if not c.matched:
                        raise verr("'then delete' needs a matched row (when matched)", a)
                    actions.append(MergeActionSpec("delete", where))
                else:
                    actions.append(self._merge_insert(a, where, cscope, props, kind, target))
            cond = compile_expr(c.condition, cscope) if c.condition is not None else None
            clauses.append(MergeClauseSpec(bool(c.matched), cond, tuple(actions), always))
        return tuple(clauses)

    def _merge_insert(self, a: ast.MergeInsert, where: Any, cscope: Scope, props: dict[str, str],
                      kind: str, target: str) -> Any:
        """``insert [into S] [(cols)] select ...`` of an on-merge."""
        from operators.named_window import MergeActionSpec

        cols = []
        wildcard = False
        names = list(a.columns)
        items = [i for i in a.select_items if not isinstance(i, ast.Wildcard)]
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
                               hint=did_you_mean(cname, props))
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

    def plan_on_demand_text(self, epl: str) -> Any:
        """A fire-and-forget select over a named window or table (``kepl query``)."""
        return self._planned(epl, self.plan_on_demand)

    def plan_on_demand(self, node: ast.Statement) -> Any:
        from app.runtime.plan import OnDemandPlan

        if not isinstance(node, ast.SelectStatement):
            raise verr("an on-demand query is a select statement", node)
        if node.insert_into is not None or node.into_table is not None or node.output:
            raise verr("an on-demand query takes no insert into, into table or output "
                       "clause", node)
        if len(node.from_) != 1 or not isinstance(node.from_[0], ast.FilterStream):
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
                       hint=did_you_mean(name, [*self.catalog.named_windows,
                                                 *self.catalog.tables]))
        if src.views:
            raise verr("an on-demand query reads the window as it is: no data window", src)
        aliases = stream_names(src.alias, name, props)
        # an on-demand query runs outside any statement: no table instance is handed to it
        self.tenv = TableEnv(self.catalog.tables, props=props,
                             refusal="an on-demand query cannot read other tables")
        scope = Scope("event", aliases, variables=frozenset(self.catalog.variables),
                      tables=self.tenv)
        self._check_names(node, props, scope, name)
        rs = self.result_set(node, scope, prop_types=qualified_types(props, name, src.alias))
        where = compile_expr(node.where, scope) if node.where is not None else None
        filt = compile_filter(src.filter, scope) if src.filter is not None else None
        return OnDemandPlan(name, kind, rs, where, filt, bool(node.distinct),
                            tuple(c.name for c in rs.columns))


"""The planner: AST → StatementPlan (operator specs, context partitioning, topics).

Every decision about which operators a statement needs is taken here, once, so the
runtimes only build and run what the plan says.  Constructs that have no operator yet
raise NotSupported with the construct's name.
"""

from __future__ import annotations

import re
from typing import Any

from app.epl import ast
from app.epl.errors import EplError, EplValidationError, closest
from app.epl.expr import (
    NotSupportedExpr,
    Scope,
    compile_expr,
    constant_value,
    has_aggregate,
    names_in,
    text_of,
    time_period_ms,
)
from app.epl.parser import parse_statement, source_text
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
    AggregateDef,
    ResultSetSpec,
    SelectColumn,
)

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

    # -- entry -------------------------------------------------------------
    def plan_text(self, epl: str, name: str) -> StatementPlan:
        node = parse_statement(epl)
        self.source = epl
        try:
            return self.plan(node, name, epl)
        except NotSupportedExpr as e:
            raise NotSupported(str(e)) from None
        except EplError as e:
            if e.source is None:
                e.source = epl
            raise

    def plan(self, node: Any, name: str, epl: str = "") -> StatementPlan:
        kind = type(node).__name__
        if kind == "CreateSchema":
            self.catalog.schemas[node.name] = {f: str(t) for f, t in node.fields}
            return StatementPlan(name, "schema", epl, schema=self.catalog.schemas[node.name])
        if kind == "CreateContext":
            spec = self.context_spec(node.name, node.spec)
            self.catalog.contexts[node.name] = spec
            return StatementPlan(name, "context", epl, context_spec=spec)
        if kind == "CreateVariable":
            init = constant_value(node.init) if node.init is not None else None
            self.catalog.variables[node.name] = str(node.type_name)
            return StatementPlan(name, "variable", epl, initial=init, variable=node.name)
        if kind == "SelectStatement":
            return self.query(node, name, epl)
        if kind == "CreateWindow":
            return self.create_window(node, name, epl)
        if kind == "OnStatement":
            return self.on_statement(node, name, epl)
        if kind == "ApamaQuery":
            return self.apama(node, name, epl)
        raise NotSupported(_construct_name(kind))

    # -- queries -----------------------------------------------------------
    def query(self, node: Any, name: str, epl: str) -> StatementPlan:
        if node.into_table is not None:
            raise NotSupported("into table")
        if node.context is not None and node.context not in self.catalog.contexts:
            raise verr(f"unknown context '{node.context}'", node,
                hint=_did_you_mean(node.context, self.catalog.contexts))
        if len(node.from_) != 1:
            raise NotSupported("joins")
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
            scope = Scope("event", aliases, variables=variables)
            filt = compile_expr(src.filter, scope) if src.filter is not None else None
            view = self.view_chain(src.views, scope, src.retain) if src.views else None
            self._check_names(node, {**props, **_derived_props(view)}, scope, src.type_name)
            stream = StreamSpec(src.type_name, filt, view, src.alias,
                                text_of(src.filter) if src.filter is not None else "")
        elif type(src).__name__ == "PatternStream":
            from app.epl.patterns import plan_pattern

            pattern = plan_pattern(self, src.pattern)
            scope = Scope("tags", tags=frozenset(pattern.tag_names()), variables=variables)
        else:
            raise NotSupported(_construct_name(type(src).__name__))
        if node.context is not None:
            self._check_segmented(node.context, stream, pattern, src)
        rs = self.result_set(node, scope)
        where = compile_expr(node.where, scope) if node.where is not None else None
        output = self.output(node.output, scope)
        pipeline = PipelineSpec(rs, output, stream, pattern, where,
                                (node.stream_kind or "istream").lower())
        insert_into = None
        insert_stream = "istream"
        if node.insert_into is not None:
            insert_into = node.insert_into.name
            insert_stream = (node.insert_into.stream_kind or "istream").lower()
            self.catalog.streams.setdefault(insert_into, {c.name: "any" for c in rs.columns})
        return StatementPlan(name, "query", epl, pipeline, node.context,
                             insert_into=insert_into, insert_stream=insert_stream,
                             columns=tuple(c.name for c in rs.columns), window=source_window)

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
        view = self.view_chain(node.views, scope, None) if node.views else None
        rs = ResultSetSpec(SIMPLE, (), wildcard=True)
        pipeline = PipelineSpec(rs, OutputSpec(), StreamSpec(node.name, None, view), None,
                                None, "irstream")
        return StatementPlan(name, "window", epl, pipeline, node.context, window=node.name)

    def on_statement(self, node: Any, name: str, epl: str) -> StatementPlan:
        """``on Trigger ...`` against a named window or variables."""
        from operators.named_window import OnActionSpec

        trig = node.trigger
        if type(trig).__name__ != "FilterStream":
            raise NotSupported("on-statements triggered by a pattern")
        self._require_type(trig.type_name, trig)
        action = node.action
        akind = type(action).__name__
        variables = frozenset(self.catalog.variables)
        tscope = Scope("event", frozenset({trig.alias} if trig.alias else set()),
                       variables=variables)
        tfilter = compile_expr(trig.filter, tscope) if trig.filter is not None else None
        if akind == "OnSet":
            oscope = Scope("tags", frozenset(), frozenset({trig.alias} if trig.alias else set()),
                           variables)
            assigns = tuple(Assignment(_target(a.target), compile_expr(a.expr, oscope))
                            for a in action.assignments)
            for a in assigns:
                if a.variable not in self.catalog.variables:
                    raise verr(f"unknown variable '{a.variable}'", node,
                               hint=_did_you_mean(a.variable, self.catalog.variables))
            spec = OnActionSpec("set", trig.type_name, tfilter, trig.alias, assignments=assigns)
            return StatementPlan(name, "on", epl, context=node.context, action=spec)
        window = getattr(action, "window", None)
        if window not in self.catalog.named_windows:
            raise verr(f"unknown named window '{window}'", action,
                       hint=_did_you_mean(str(window), self.catalog.named_windows))
        wctx = self.catalog.named_windows[window] or None
        if wctx != node.context:
            raise verr(f"named window '{window}' is declared with context '{wctx}'; the "
                       "on-trigger statement must declare the same context"
                       if wctx else f"named window '{window}' has no context; the "
                       "on-trigger statement must not declare one", node,
                       hint=f"write 'context {wctx} on ...' (000 §4.6)" if wctx else None)
        tags = {a for a in (trig.alias, action.alias, window, trig.type_name) if a}
        cscope = Scope("tags", frozenset(), frozenset(tags), variables)
        where = compile_expr(action.where, cscope) if action.where is not None else None
        if akind == "OnDelete":
            spec = OnActionSpec("delete", trig.type_name, tfilter, trig.alias, window,
                                action.alias, where)
        elif akind == "OnSelect":
            if action.group_by or action.having or action.insert_into or action.order_by:
                raise NotSupported("on-select with group by/having/order by/insert into")
            cols = []
            wildcard = False
            for item in action.select_items:
                if type(item).__name__ == "Wildcard":
                    wildcard = True
                    continue
                if has_aggregate(item.expr):
                    raise NotSupported("aggregation in on-select")
                cols.append((column_name(item, self.source), compile_expr(item.expr, cscope)))
            spec = OnActionSpec("select", trig.type_name, tfilter, trig.alias, window,
                                action.alias, where, tuple(cols), wildcard,
                                and_delete=action.and_delete)
        else:
            raise NotSupported(_construct_name(akind))
        return StatementPlan(name, "on", epl, context=node.context, action=spec)

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
                if parts[0] in scope.aliases:
                    parts = parts[1:]
                    if not parts:
                        continue
                if parts[0] not in props:
                    raise verr(f"unknown property '{parts[0]}' of {type_name}", n,
                        hint=_did_you_mean(parts[0], props))

    def result_set(self, node: Any, scope: Scope, empty_sum: Any = None) -> ResultSetSpec:
        aggs: list[AggregateDef] = []
        ascope = Scope(scope.kind, scope.aliases, scope.tags, scope.variables, aggs,
                       allow_aggregates=True)
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
        order_by = tuple((compile_expr(o.expr, ascope), bool(o.descending))
                         for o in (node.order_by or ()))
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
                kind = GROUPED_ROWS if plain_exprs else GROUPED
        else:
            event_refs = [e for e in plain_exprs if _refers_to_event(e, scope)]
            if wildcard:
                event_refs.append(ast.Star())
            if not group_by:
                kind = AGG_ROWS if event_refs else AGG_ALL
            else:
                grouped = all(_WS.sub("", text_of(e)) in group_texts for e in event_refs
                              if not isinstance(e, ast.Star))
                kind = GROUPED if grouped and not wildcard else GROUPED_ROWS
        return ResultSetSpec(kind, tuple(columns), tuple(aggs), group_by, having, wildcard,
                             order_by, limit, offset or 0, group_texts)

    def output(self, node: Any, scope: Scope) -> OutputSpec:
        if node is None:
            return OutputSpec()
        oscope = Scope("output", scope.aliases, scope.tags,
                       frozenset(self.catalog.variables))
        kind = (node.kind or "all").lower()
        every_events = every_ms = None
        if node.every_count is not None or node.every_time is not None:
            if node.every_unit == "events" or (node.every_time is None and node.every_unit):
                every_events = int(constant_value(node.every_count))
            elif node.every_time is not None:
                every_ms = time_period_ms(node.every_time)
            else:
                every_events = int(constant_value(node.every_count))
        if node.at is not None:
            raise NotSupported("output at (crontab)")
        when = compile_expr(node.when, oscope) if node.when is not None else None
        term_and = compile_expr(node.terminated_and, oscope) \
            if node.terminated_and is not None else None
        then_set = tuple(Assignment(_target(a.target), compile_expr(a.expr, oscope))
                         for a in (node.then_set or ()))
        return OutputSpec(kind, every_events, every_ms, when,
                          bool(node.when_terminated or node.and_when_terminated), term_and,
                          then_set, limited=True)

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
                              variables=variables)
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
                                       tuple(text_of(p) for p in it.props)))
            return KeyedSpec(name, tuple(items))
        if kind == "HashContext":
            hitems = []
            for it in spec.items:
                self._require_type(it.type_name, it)
                scope = Scope("event", variables=variables)
                hitems.append(HashItem(
                    it.type_name, it.function, compile_expr(it.args[0], scope),
                    compile_expr(it.filter, scope) if it.filter is not None else None))
            return HashSpec(name, tuple(hitems), int(constant_value(spec.granularity)),
                            bool(spec.preallocate))
        if kind == "CategoryContext":
            self._require_type(spec.type_name, spec)
            scope = Scope("event", variables=variables)
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
            scope = Scope("pfilter", aliases, tags, variables)
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
    """Whether an expression reads event properties (not only context/variables)."""
    for n in names_in(node):
        head = n.parts[0]
        if head == "context" or head in scope.variables:
            continue
        return True
    return False


def _target(t: Any) -> str:
    if isinstance(t, str):
        return t
    return ".".join(t.parts) if hasattr(t, "parts") else str(t)


def _did_you_mean(name: str, candidates: Any) -> str | None:
    best = closest(name, list(candidates))
    return f"did you mean '{best}'?" if best else None


def _construct_name(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", " ", kind).lower()

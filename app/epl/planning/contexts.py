"""Planning of ``create context`` declarations: keyed, hash, category, temporal and
nested contexts, and their start/end conditions (Esper ref. 4.2 Context Declaration)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from app.epl import ast
from app.epl.errors import did_you_mean, verr
from app.epl.expr import (
    Scope,
    TableEnv,
    compile_expr,
    compile_filter,
    constant_value,
    names_in,
    text_of,
    time_period_ms,
)
from app.epl.functions import user_function
from app.epl.planning.base import (
    PlannerBase,
    construct_name,
    norm_type,
    stream_names,
)
from app.runtime.catalog import NotSupported
from operators.contexts.managers import CategorySpec, HashItem, HashSpec, KeyedItem, KeyedSpec
from operators.contexts.nested import NestedSpec

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ContextPlanning(PlannerBase):
    """Plans context declarations and their conditions."""

    def context_spec(self, name: str, spec: ast.Node) -> Any:
        variables = frozenset(self.catalog.variables)
        if isinstance(spec, ast.KeyedContext):
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
                        hint="list each event type once (Esper ref. 4.2.2 Keyed Segmented Context)")
                seen.add(it.type_name)
                scope = Scope("event", frozenset({it.alias} if it.alias else set()),
                              variables=variables, tables=self._routing_env(props))
                for p in it.props:
                    pname = text_of(p)
                    if pname not in props:
                        raise verr(f"unknown property '{pname}' of {it.type_name}", it,
                            hint=did_you_mean(pname, props))
                types = [props.get(text_of(p), "any") for p in it.props]
                if key_types is None:
                    key_types = types
                elif len(types) != len(key_types):
                    raise verr(f"'{it.type_name}' lists {len(types)} key properties, "
                               f"the first stream {len(key_types)}", it)
                else:
                    for p, t, first in zip(it.props, types, key_types):
                        if norm_type(t) != norm_type(first):
                            raise verr(
                                f"type mismatch between key properties: '{text_of(p)}' of "
                                f"{it.type_name} is {t}, the first stream's key is {first}", p,
                                hint="key properties at the same position must have the "
                                     "same type (Esper ref. 4.2.2 Keyed Segmented Context)")
                keys = tuple(compile_expr(p, scope) for p in it.props)
                filt = compile_filter(it.filter, scope) if it.filter is not None else None
                items.append(KeyedItem(it.type_name, keys, filt,
                                       tuple(text_of(p) for p in it.props), it.alias))
            init, term = self._keyed_lifecycle(spec, seen)
            return KeyedSpec(name, tuple(items), init, term)
        if isinstance(spec, ast.HashContext):
            hitems = []
            for it in spec.items:
                hprops = self._require_type(it.type_name, it)
                scope = Scope("event", variables=variables, tables=self._routing_env(hprops))
                filt = compile_filter(it.filter, scope) if it.filter is not None else None
                user = user_function(it.function)
                if user is not None:
                    hitems.append(HashItem(it.type_name, it.function,
                                           self._user_hash(user, it, scope), filt, True))
                    continue
                hitems.append(HashItem(
                    it.type_name, it.function, compile_expr(it.args[0], scope), filt))
            return HashSpec(name, tuple(hitems), int(constant_value(spec.granularity)),
                            bool(spec.preallocate))
        if isinstance(spec, ast.CategoryContext):
            cprops = self._require_type(spec.type_name, spec)
            scope = Scope("event", variables=variables,
                          tables=replace(self.tenv, props=cprops))
            groups = tuple((g.label, compile_expr(g.expr, scope)) for g in spec.groups)
            return CategorySpec(name, spec.type_name, groups,
                                compile_filter(spec.filter, scope) if spec.filter else None)
        if isinstance(spec, ast.NonOverlappingContext):
            from operators.contexts.temporal import NonOverlappingSpec

            start = self.condition(spec.start, frozenset(), is_start=True)
            end = self.condition(spec.end, tags_of(spec.start), is_start=False,
                                 arrays=arrays_of(spec.start))
            return NonOverlappingSpec(name, start, end)
        if isinstance(spec, ast.OverlappingContext):
            from operators.contexts.temporal import OverlappingSpec

            init = self.condition(spec.initiated, frozenset(), is_start=True)
            term = self.condition(spec.terminated, tags_of(spec.initiated), is_start=False,
                                  arrays=arrays_of(spec.initiated))
            distinct = ()
            if spec.distinct:
                tags = tags_of(spec.initiated)
                dscope = Scope("pfilter", tags=tags, variables=variables,
                               array_tags=arrays_of(spec.initiated))
                distinct = tuple(compile_expr(d, dscope) for d in spec.distinct)
            return OverlappingSpec(name, init, term, distinct)
        if isinstance(spec, ast.NestedContext):
            specs = [self.context_spec(it.name, it.spec) for it in spec.contexts]
            out = specs[-1]
            for outer in reversed(specs[:-1]):
                out = NestedSpec(name, outer, out)
            return out
        raise NotSupported(construct_name(spec))

    def _user_hash(self, fd: Any, item: Any, scope: Scope) -> Any:
        """A user single-row function as a hash context's hash function: its integer
        result is the hash code (Esper ref. 4.2.3 hash segmented context)."""
        if fd.aggregate or fd.returns not in ("int", "long"):
            raise verr(f"'{fd.name}' cannot be a hash function: it returns "
                       f"{'an aggregation' if fd.aggregate else fd.returns}", item,
                       hint="a hash function is a single-row function returning int or long")
        star = len(item.args) == 1 and isinstance(item.args[0], ast.Star)
        call = ast.Call(fd.name, () if star else tuple(item.args), False, star, pos=item.pos)
        return compile_expr(call, scope)

    def _keyed_lifecycle(self, spec: ast.KeyedContext,
                         listed: set[str]) -> tuple[tuple[Any, ...], Any]:
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

    def _check_context_properties(self, node: ast.Statement) -> None:
        """Each ``context.<property>`` a statement of a context reads is one the context
        provides (Esper ref. 4.2.1), else a positioned error: an unknown one would be
        null on every row."""
        context = getattr(node, "context", None)
        known = self.catalog.context_names.get(context) if context else None
        if known is None:
            return
        for n in names_in(node):
            parts = n.parts
            if parts[0] != "context" or len(parts) < 2:
                continue
            level: dict[str, Any] | None = known
            for i, part in enumerate(parts[1:], 1):
                if level is None:
                    break
                if part not in level:
                    raise self._path_err(n, 0, (
                        i, f"context property '{part}' is not a known property of "
                           f"context '{context}'", "known properties: " + ", ".join(level)))
                level = level[part]

    def partition_keys(self, context: str, type_name: str) -> dict[str, str]:
        """The partition properties of ``type_name`` in keyed context ``context`` -> the
        context key holding each one's value (``partition by k`` from T: ``k`` ->
        ``key1``).  Esper reads them in the select clause as values of the partition, not
        of the event (a select of ``k`` and aggregates is fully aggregated); only for a
        keyed context that is not nested."""
        spec = self.catalog.contexts.get(context)
        if not isinstance(spec, KeyedSpec):
            return {}
        for item in spec.items:
            if item.type_name == type_name:
                return {t: f"key{i + 1}" for i, t in enumerate(item.key_texts)
                        if IDENTIFIER.fullmatch(t)}
        return {}

    def _routing_env(self, props: dict[str, str]) -> TableEnv:
        """Keyed and hash context items route events to partitions, in Kafka mode before
        any engine runs: they cannot read tables."""
        return TableEnv(self.catalog.tables, props=props,
                        refusal="a keyed or hash context declaration cannot read a table")

    def condition(self, c: ast.Node | None, tags: frozenset[str], is_start: bool,
                  arrays: frozenset[str] = frozenset()) -> Any:
        """A context condition; ``tags`` (of them ``arrays`` hold lists of events) are
        those of the start condition, visible to a correlated end condition."""
        from operators.contexts import conditions as cond

        if c is None:
            return cond.CondNeverSpec()
        variables = frozenset(self.catalog.variables)
        if isinstance(c, ast.CondFilter):
            self._require_type(c.type_name, c)
            env = replace(self.tenv, props=self.catalog.type_props(c.type_name) or {})
            aliases = stream_names(c.alias, c.type_name, env.props)
            scope = Scope("pfilter", aliases, tags, variables, tables=env, array_tags=arrays)
            pred = compile_filter(c.filter, scope) if c.filter is not None else None
            text = c.type_name + (f"({text_of(c.filter)})" if c.filter is not None else "")
            return cond.CondFilterSpec(c.type_name, pred, c.alias, text)
        if isinstance(c, ast.CondPattern):
            from app.epl.planning.patterns import plan_pattern

            return cond.CondPatternSpec(plan_pattern(self, c.pattern, tags, arrays),
                                        bool(c.inclusive), text_of(c.pattern))
        if isinstance(c, ast.CondCrontab):
            from app.epl.planning.patterns import cron_spec

            return cond.CondCrontabSpec(cron_spec(c.crontab), text_of(c.crontab))
        if isinstance(c, ast.CondAfter):
            return cond.CondAfterSpec(time_period_ms(c.period))
        if isinstance(c, ast.CondNow):
            return cond.CondNowSpec()
        if isinstance(c, ast.CondNowAnd):
            inner = self.condition(c.cond, tags, is_start, arrays)
            if isinstance(inner, cond.CondFilterSpec):
                raise verr("@now cannot be combined with a filter initiating condition", c,
                    hint="use @now with a pattern or crontab condition (Esper ref. 4.2.7)")
            return cond.CondNowAndSpec(inner)
        raise NotSupported(construct_name(c))

    def _check_segmented(self, context: str, stream: Any, pattern: Any, src: Any) -> None:
        """Esper ref. 4.2.2/4.2.3: a statement of a keyed or hash context must filter at least
        one event type listed in the context declaration."""
        spec = self.catalog.contexts[context]
        inner = spec
        while isinstance(inner, NestedSpec):
            inner = inner.inner
        if not isinstance(inner, KeyedSpec | HashSpec):
            return
        used = {stream.type_name} if stream is not None else set(pattern.types())
        windows = self.catalog.named_windows
        if stream is not None and windows.get(stream.type_name) == context:
            # Esper ref. 4.6: the consumer of a named window declared with the same
            # context reads its own partition's window, whose type the context lists
            return
        listed = inner.types()
        if not used & listed:
            kind = "keyed" if isinstance(inner, KeyedSpec) else "hash"
            raise verr(
                f"statement refers to {kind} segmented context '{context}' but filters none "
                f"of its event types ({', '.join(sorted(listed))})", src,
                hint="select from an event type listed in the context declaration")



def arrays_of(c: ast.Node | None) -> frozenset[str]:
    """The tags of a start condition that hold lists of events (inside a repeat)."""
    if isinstance(c, ast.CondPattern):
        from app.epl.planning.patterns import repeated_tags

        return repeated_tags(c.pattern)
    if isinstance(c, ast.CondNowAnd):
        return arrays_of(c.cond)
    return frozenset()


def provided(spec: ast.Node) -> dict[str, Any]:
    """The properties a context declaration provides to its statements (Esper ref. 4.2.1
    Context-Provided Properties, 4.3.1 Built-In Nested Context Properties): ``name`` and
    ``id``; a keyed context's ``key1`` ... and, with an initiating or terminating
    condition, its streams' names; a category's ``label``; a temporal context's
    ``startTime``, ``endTime`` and its conditions' tags; a nested context's levels by name,
    each with its own."""
    out: dict[str, Any] = {"name": None, "id": None}
    if isinstance(spec, ast.KeyedContext):
        out.update((f"key{i + 1}", None) for i in range(len(spec.items[0].props)))
        if spec.initiated or spec.terminated is not None:
            out.update((i.alias, None) for i in spec.items if i.alias)
            for c in (*spec.initiated, spec.terminated):
                out.update(dict.fromkeys(tags_of(c)))
    elif isinstance(spec, ast.CategoryContext):
        out["label"] = None
    elif isinstance(spec, ast.NonOverlappingContext | ast.OverlappingContext):
        out.update(startTime=None, endTime=None)
        conds = ((spec.start, spec.end) if isinstance(spec, ast.NonOverlappingContext)
                 else (spec.initiated, spec.terminated))
        for c in conds:
            out.update(dict.fromkeys(tags_of(c)))
    elif isinstance(spec, ast.NestedContext):
        out.update((it.name, provided(it.spec)) for it in spec.contexts)
    return out


def tags_of(c: ast.Node | None) -> frozenset[str]:
    if isinstance(c, ast.CondFilter) and c.alias:
        return frozenset({c.alias})
    if isinstance(c, ast.CondPattern):
        from app.epl.planning.patterns import pattern_tags

        return frozenset(pattern_tags(c.pattern))
    if isinstance(c, ast.CondNowAnd):
        return tags_of(c.cond)
    return frozenset()

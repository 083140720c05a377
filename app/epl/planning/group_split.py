"""Whether a statement without a context can run split by its group key.

A grouped statement whose rows for one group depend on the events of that group alone
can run over N engine partitions, each holding the groups whose key hashes to it, and
give the rows one engine gives (docs/architecture.md, "Statements split by group key").
``group_split`` decides it from the statement's text and plan and says why not.

The rules, each keeping one group's window content, aggregation and output timing
independent of the other groups:

- one stream of an event type (no join, pattern, subquery, match_recognize, named window,
  table, insert into, variable read or written), a ``group by`` of expressions over it,
  each also a column of the select clause (the row's group key numbers its row ids);
- a data window whose content per group depends only on that group's events: none,
  ``#keepall``, ``#time``, ``#time_batch`` (without a reference point, its first arrival
  is one: the router tells every engine partition of it, ``arms``), ``#unique`` /
  ``#firstunique`` and ``#groupwin`` whose keys include the group key (over any window);
- no ``order by``, ``limit``, ``distinct``, ``prev``/``prior``, no aggregate with its own
  ``group_by:``;
- output: none, or ``[all|last|first|snapshot] every <period>`` / ``at (crontab)``; not
  ``every N events`` or ``when`` (counted over all groups), ``after``.  A timed ``every``
  is armed by the statement's first update (Esper ref. 5.7.1 Output clause options): the
  router tells every engine partition when that happens (``arms``), so their limiters
  fire at the same times, and the only windows allowed with it post each arriving event
  at once (not ``#time_batch``).  A snapshot posts every group's current rows (Esper ref.
  5.7.1): each engine partition posts the groups it holds at the same instants, and
  their rows together are one engine's.

A statement without a ``group by`` or aggregates whose one data window keeps each key's
events apart, ``#unique``, ``#firstunique`` or ``#groupwin`` over plain properties each also
a select column, splits the same way by that *window key* (``window_split``): an event
replaces, is dropped for, or pushes out only events of its own key (Esper ref. 14.3.14,
14.3.15, 14.3.2), so the rows of one key depend on that key's events alone.  Without a
``group by`` an output clause collects rows of every key, so it has none.

A pattern statement that begins with ``every tag=Type -> ...`` splits by the key its
events correlate on (``pattern_split``): when each later filter equates one of its
properties with the leading tag's key property (or a correlated tag's), an instance only
takes events of one key, and each type routes by its key property.

A statement over one stream whose subqueries each equate a property of their stream with
one property of the outer event splits by that property (``subquery_split``): a
correlated subquery reads only the rows of the outer event's key, and its window must
keep each key's events apart.

A statement inserting into a stream that a split statement reads splits with it
(``feed_split``, a ``Feeder`` of its split) when its rows each depend on their own event
alone (no group by, aggregate or output clause; no window but ``#keepall`` / ``#time``) and
the reader's key column on the stream is a property of its event: its events route by
that property, so each key's stream events are made where they are read.

An inner join of two streams splits the same way by its *join key* (``join_split``): an
equality of one property of each stream in the where clause (or the inner join's on),
both of one type family, so that equal values route alike.  Only events of one key
meet (Esper ref. 5.12 joins: a row joins events whose key properties are equal), so
each stream's window must keep each key's content apart as above, the statement must
not limit its output or order its rows, it aggregates only grouped by the join key
alone, and one side's key property is a select column (rows are numbered per key; in a
left or right outer join, the preserved side's, which every row carries).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from app.epl import ast
from app.epl.expr import PREV_FUNCTIONS, property_reader, text_of
from app.epl.walk import conjuncts, iter_nodes, same
from operators.base import Expr, PartitionCtx, Row
from operators.contexts.managers import key_text
from operators.resultset import GROUPED
from operators.windows.time_batch import TimeBatchSpec

IMMEDIATE = frozenset({"keepall", "time", "unique", "firstunique"})
"""Windows that post each arriving event as it arrives and whose content per group is
that group's events (``unique``/``firstunique``: when their keys include the group key)."""

KEYED_WINDOWS = frozenset({"unique", "firstunique", "groupwin"})


@dataclass(frozen=True)
class SplitRoute:
    """How the events of one more type of a split statement (a join's other stream)
    find their partition: the key expressions over its event, and its stream's filter."""

    type_name: str
    keys: tuple[Expr, ...]
    filter: Expr | None = None


@dataclass(frozen=True)
class Feeder:
    """A statement whose ``insert into`` stream a split statement reads, split with it
    (``feed_split``): its events route by the property its rows carry into the split
    statement's key, so each key's stream events are made where they are read."""

    statement: str
    stream: str
    """The ``insert into`` stream."""
    route: SplitRoute
    """Its input events: the key property and the stream's filter."""
    column: str
    """Its output column holding the key (numbers its rows)."""
    text: str
    """``Type.property`` of the key (``kepl explain``)."""


@dataclass(frozen=True)
class GroupSplit:
    """How a statement splits by group key: what routes an event, what keys a row."""

    type_name: str
    texts: tuple[str, ...]
    """The group-by expressions as written (``kepl explain``)."""
    keys: tuple[Expr, ...]
    """The group-by expressions over an event of ``type_name``."""
    columns: tuple[str, ...]
    """The output column holding each group-by value."""
    filter: Expr | None = None
    where: Expr | None = None
    arms: bool = False
    """A timed output condition armed by the first update, or a ``#time_batch`` whose
    reference point is its first arrival: the engine partitions learn of the statement's
    first update (``where`` holds) or arrival (``where`` None) from the router
    (``Engine.arm_output``)."""
    others: tuple[SplitRoute, ...] = ()
    """The routes of the other types read: a join's other stream, a pattern's or the
    subqueries' types (``type_name`` is the first stream's, the leading tag's or the
    outer stream's)."""
    kind: str = "group"
    """What the key is: the ``group`` key, a ``join``, ``window``, ``pattern`` or
    ``subquery`` key."""
    properties: tuple[tuple[str, str], ...] = ()
    """(event type, property) of each route whose key is one plain property: what a
    ``Feeder`` of that type must carry into it."""
    feeders: tuple[Feeder, ...] = ()
    """Statements split with this one, whose ``insert into`` streams it reads."""
    arm_only: SplitRoute | None = None
    """Only events of this route's type that pass its filter can arm (a statement with
    subqueries routes its own type unfiltered, and the subqueries' events update
    nothing)."""

    def describe(self) -> str:
        return ", ".join(self.texts)

    def route(self, type_name: str) -> SplitRoute | None:
        """The keys and filter of the events of ``type_name`` (None: not read)."""
        if type_name == self.type_name:
            return SplitRoute(self.type_name, self.keys, self.filter)
        found = next((r for r in self.others if r.type_name == type_name), None)
        if found is None:
            found = next((f.route for f in self.feeders if f.route.type_name == type_name),
                         None)
        return found

    def property_of(self, type_name: str) -> str | None:
        """The one plain property keying the events of ``type_name``, if so."""
        return next((p for t, p in self.properties if t == type_name), None)

    def row_key(self, statement: str) -> Callable[[Any], str]:
        """The key text of an output row of ``statement`` (this one's or a feeder's)."""
        for f in self.feeders:
            if f.statement == statement:
                column = f.column
                return lambda row: key_text([row.get(column)]) if isinstance(row, dict) else ""
        return self.key_of_row

    def key_of_event(self, event: Row, ctx: PartitionCtx,
                     type_name: str | None = None) -> str | None:
        """The key text of an event of ``type_name`` (default: the first stream's type;
        None: its stream's filter drops it, or the statement does not read the type)."""
        if type_name is None or type_name == self.type_name:
            keys, filt = self.keys, self.filter
        else:
            r = self.route(type_name)
            if r is None:
                return None
            keys, filt = r.keys, r.filter
        if filt is not None and not filt(event, ctx):
            return None
        return key_text([k(event, ctx) for k in keys])

    def arms_with(self, event: Row, ctx: PartitionCtx, type_name: str = "") -> bool:
        """Whether an event of ``type_name`` that passed the filter updates the statement
        (its where clause holds): the update that arms a timed output condition."""
        only = self.arm_only
        try:
            if only is not None and (type_name != only.type_name or (
                    only.filter is not None and not only.filter(event, ctx))):
                return False
            return self.where is None or bool(self.where(event, ctx))
        except Exception:  # noqa: BLE001 - the engine dead-letters such an event
            return False

    def key_of_row(self, row: Any) -> str:
        """The key text of an output row (its group-by columns)."""
        if not isinstance(row, dict):
            return ""
        return key_text([row.get(c) for c in self.columns])


def split_key(plan: Any) -> str:
    """What a statement would be split by: a join's ``join`` key, a pattern's ``pattern``
    key, the property an ungrouped statement's subqueries correlate on (``subquery``),
    else its ``group`` key."""
    p = plan.pipeline
    if p is not None and p.join is not None:
        return "join"
    if p is not None and p.pattern is not None:
        return "pattern"
    if p is not None and p.subqueries and not p.resultset.group_by:
        return "subquery"
    return "group"


def group_split(plan: Any, stmt: Any, variables: Iterable[str] = (),
                schemas: dict[str, dict[str, str]] | None = None,
                forwarded: bool = False) -> GroupSplit | str:
    """The split of a planned statement by its group key (a join's: by its join key), or
    why it cannot be split.

    ``stmt``: its parsed ``SelectStatement``; ``variables``: the app's variable names;
    ``schemas``: the event types' properties (a join's key types are compared);
    ``forwarded``: the statements reading its ``insert into`` are fed through their own
    repartition topic, which merges the rows of every partition in time order, so its
    insert into does not keep it whole.
    """
    if plan.kind != "query" or not isinstance(stmt, ast.SelectStatement):
        return "not a select statement"
    if forwarded:
        stmt = replace(stmt, insert_into=None)
    if plan.context is not None:
        return f"runs in context {plan.context}"
    p = plan.pipeline
    if split_key(plan) == "join":
        return join_split(plan, stmt, set(variables), schemas or {})
    if split_key(plan) == "pattern":
        return pattern_split(plan, stmt, set(variables), schemas or {})
    if p is None or p.stream is None or len(stmt.from_) != 1 or not isinstance(
            stmt.from_[0], ast.FilterStream):
        return "not one stream (a join, a pattern or a named window)"
    if plan.window is not None:
        return f"reads named window {plan.window}"
    if split_key(plan) == "subquery":
        return subquery_split(plan, stmt, set(variables), schemas or {})
    if not stmt.group_by or not p.resultset.group_by:
        return window_split(plan, stmt, set(variables))
    why = _unsupported_clause(plan, stmt, set(variables), subqueries=True)
    if why:
        return why
    if p.subqueries:
        return _grouped_with_subqueries(plan, stmt, schemas or {})
    rs = p.resultset
    s = stmt.from_[0]
    columns = _key_columns(stmt, rs, stmt.group_by, norm=_single(s))
    if isinstance(columns, str):
        return columns
    timed = _timed_output(stmt.output)
    if isinstance(timed, str):
        return timed
    why = _window_reason(s.views, stmt.group_by, timed, armed=True, src=s)
    if why:
        return why
    if _unreferenced_batch(p.stream.view):
        # its first arrival, where clause or not, sets the reference point of every part
        return GroupSplit(p.stream.type_name, tuple(rs.group_texts), tuple(rs.group_by),
                          columns, p.stream.filter, None, True)
    plain = plain_property(stmt.group_by[0], s) if len(stmt.group_by) == 1 else None
    props = ((p.stream.type_name, plain),) if plain is not None else ()
    return GroupSplit(p.stream.type_name, tuple(rs.group_texts), tuple(rs.group_by),
                      columns, p.stream.filter, p.where, timed, properties=props)


def _grouped_with_subqueries(plan: Any, stmt: ast.SelectStatement,
                             schemas: dict[str, dict[str, str]]) -> GroupSplit | str:
    """A grouped statement whose subqueries correlate on its one group-by property: each
    group's events and the subquery rows they read are of one key."""
    p = plan.pipeline
    src = stmt.from_[0]
    plain = plain_property(stmt.group_by[0], src) if len(stmt.group_by) == 1 else None
    if plain is None:
        return "a grouped statement with a subquery splits by one group-by property alone"
    timed = _timed_output(stmt.output)
    if isinstance(timed, str):
        return timed
    if timed and any(isinstance(n, SUBQUERIES) for n in iter_nodes(stmt.where)):
        return ("output limiting is armed where the where clause holds, which the router "
                "cannot tell without the subquery's rows")
    if (p.output.kind == "all" and p.resultset.kind == GROUPED
            and p.stream_kind in ("irstream", "rstream")):
        # Esper's output-all helper builds every group's remove-stream row at the
        # interval's first update, of whichever group: its subquery values with it
        return ("output all with the remove stream builds every group's row at the "
                "interval's first update, and with it the subquery's value")
    found = _subquery_routes(stmt, p, schemas)
    if isinstance(found, str):
        return found
    key, routes = found
    if key != plain:
        return f"the subqueries correlate on {key}, not on the group key {plain}"
    why = _window_reason(src.views, stmt.group_by, timed, armed=False, src=src)
    if why:
        return why
    rs = p.resultset
    columns = _key_columns(stmt, rs, stmt.group_by, norm=_single(src))
    if isinstance(columns, str):
        return columns
    others = tuple(SplitRoute(t, (property_reader(prop),)) for t, prop in sorted(routes.items())
                   if t != p.stream.type_name)
    # the outer events route unfiltered (a subquery may read those its filter drops), so
    # the arming update is an event of its type passing its filter and the where clause
    arm_only = SplitRoute(p.stream.type_name, tuple(rs.group_by), p.stream.filter)
    return GroupSplit(p.stream.type_name, tuple(rs.group_texts), tuple(rs.group_by), columns,
                      None, p.where, timed, others, properties=tuple(sorted(routes.items())),
                      arm_only=arm_only if timed else None)


def _unreferenced_batch(view: Any) -> bool:
    """A ``#time_batch`` whose reference point is its first arrival (none given, not
    ``START_EAGER``): split, the router tells every part of that arrival (``arms``)."""
    return (isinstance(view, TimeBatchSpec) and view.reference is None
            and not view.flow.start_eager)


def window_split(plan: Any, stmt: ast.SelectStatement, variables: set[str]
                 ) -> GroupSplit | str:
    """The split of a statement without a group by by the keys of its ``#unique``,
    ``#firstunique`` or ``#groupwin`` window, or why not (module docstring)."""
    p = plan.pipeline
    src = stmt.from_[0]
    views = src.views
    if not views or views[0].name.lower() not in KEYED_WINDOWS:
        return "no group by or keyed window (#unique, #firstunique, #groupwin)"
    if p.resultset.aggregates:
        return "no group by: its aggregates are over the events of all keys"
    if stmt.output is not None:
        return "no group by: output limiting collects the rows of all keys together"
    why = _unsupported_clause(plan, stmt, variables)
    if why:
        return why
    first = views[0]
    props = [plain_property(k, src) for k in first.params]
    if not props or None in props:
        return f"#{first.name}'s keys are not all properties of the event"
    why = _window_reason(views, first.params, False, "window key")
    if why:
        return why
    columns = _key_columns(stmt, p.resultset, first.params, "window key", _single(src))
    if isinstance(columns, str):
        return columns
    plain = ((p.stream.type_name, props[0]),) if len(props) == 1 and props[0] else ()
    return GroupSplit(p.stream.type_name, tuple(text_of(k) for k in first.params),
                      tuple(property_reader(n) for n in props if n is not None), columns,
                      p.stream.filter, p.where, False, (), "window", plain)


def plain_property(node: Any, src: ast.FilterStream) -> str | None:
    """The property a window key reads: ``name``, or ``alias.name`` of its stream."""
    if not isinstance(node, ast.Name):
        return None
    if len(node.parts) == 1:
        return node.parts[0]
    if len(node.parts) == 2 and node.parts[0] in (src.alias, src.type_name):
        return node.parts[1]
    return None


INTEGERS = frozenset({"byte", "short", "int", "integer", "long"})
"""Property types whose equal values have one key text (an int 7 equals a long 7)."""

KEY_FAMILIES = frozenset({"integer", "string", "boolean"})
"""Join key types split by: a double's key text would tell 0.0 from -0.0, which equal."""


def join_split(plan: Any, stmt: ast.SelectStatement, variables: set[str],
               schemas: dict[str, dict[str, str]]) -> GroupSplit | str:
    """The split of an inner join of two streams by its join key, or why not (module
    docstring)."""
    p = plan.pipeline
    streams = p.join.streams
    if len(streams) != 2 or len(stmt.from_) != 2:
        return "a join of more than two streams"
    if any(s.named_window or s.table for s in streams):
        return "joins a named window or a table"
    first, second = streams
    preserved: str | None = None
    """An outer join's side whose events post rows without a partner: its key property
    is in every row (Esper ref. 5.12.3 outer joins)."""
    outer = [j.kind for j in stmt.joins if j.kind != "inner"]
    if outer:
        if outer[0] == "full":
            return ("a full outer join posts rows with either side missing, which no one "
                    "side's key numbers")
        preserved = first.name if outer[0] == "left" else second.name
    if first.type_name == second.type_name:
        return "a self-join would route one event by two keys"
    where = [stmt.where, *(j.on for j in stmt.joins)]
    key = _join_key([c for w in where for c in conjuncts(w)], streams)
    if key is None:
        return ("no equality of a property of each stream (qualified by its stream) in "
                "the where clause: the join key")
    types = [schemas.get(s.type_name, {}).get(key[s.name], "") for s in streams]
    family = [_family(t) for t in types]
    if family[0] != family[1] or family[0] not in KEY_FAMILIES:
        return (f"the join key's properties are {types[0] or '?'} and {types[1] or '?'}: "
                "only equal types of integers, strings or booleans route equal values "
                "alike")
    rs = p.resultset
    if stmt.group_by:
        g = stmt.group_by
        sp = _stream_property(g[0], streams) if len(g) == 1 else None
        if sp is None or key.get(sp[0]) != sp[1] or preserved not in (None, sp[0]):
            return ("a join's group by must be its join key alone (an outer join's: its "
                    "preserved side's; rows are numbered per key)")
    elif rs.aggregates:
        return ("aggregates over a join without a group by on its join key combine the "
                "rows of all keys")
    if stmt.output is not None:
        return "output limiting collects the rows of all keys together"
    why = _unsupported_clause(plan, stmt, variables)
    if why:
        return why
    for src, s in zip(stmt.from_, streams):
        if not isinstance(src, ast.FilterStream):
            return "not a join of two event streams"
        why = _window_reason(src.views, (ast.Name((key[s.name],)),), False, "join key",
                             armed=True, src=src)
        if why:
            return f"stream {s.name}: {why}"
    if stmt.group_by:
        columns = _key_columns(stmt, rs, stmt.group_by, norm=_joined(streams))
        if isinstance(columns, str):
            return columns
        column: str | None = columns[0]
    else:
        column = _join_key_column(stmt, rs, streams, key, preserved)
    if column is None:
        if preserved is not None:
            return (f"the preserved side's join key ({preserved}.{key[preserved]}) is not a "
                    "select column (rows without a partner are numbered by it)")
        return "the join key is not a select column (rows are numbered per key)"
    text = f"{first.name}.{key[first.name]} = {second.name}.{key[second.name]}"
    # a #time_batch without a reference point: each stream's first arrival arms its window
    arms = any(_unreferenced_batch(s.view) for s in streams)
    return GroupSplit(first.type_name, (text,), (property_reader(key[first.name]),), (column,),
                      first.filter, None, arms,
                      (SplitRoute(second.type_name, (property_reader(key[second.name]),),
                                  second.filter),), "join",
                      ((first.type_name, key[first.name]), (second.type_name, key[second.name])))


SUBQUERIES = (ast.Subquery, ast.Exists, ast.InSubquery, ast.Quantified)
"""The expressions that hold a subquery."""


def subquery_split(plan: Any, stmt: ast.SelectStatement, variables: set[str],
                   schemas: dict[str, dict[str, str]]) -> GroupSplit | str:
    """The split of a statement over one stream whose subqueries each correlate on one
    property of its event, by that property, or why not.

    A correlated subquery's where clause equates a property of its stream with one of
    the outer event (``x.acct = w.account``): it reads only the rows of that key (Esper
    ref. 5.11 subqueries), and when its window keeps each key's events apart it gives
    the same value in the partition of that key as in one engine.  Each subquery's
    stream routes by its correlated property, the outer stream by its own."""
    p = plan.pipeline
    src = stmt.from_[0]
    if stmt.group_by or p.resultset.aggregates:
        return ("a statement with a subquery aggregates the events of all keys (a group "
                "by and a subquery are not split)")
    if stmt.output is not None:
        return "output limiting collects the rows of all keys together"
    why = _unsupported_clause(plan, stmt, variables, subqueries=True)
    if why:
        return why
    found = _subquery_routes(stmt, p, schemas)
    if isinstance(found, str):
        return found
    key, routes = found
    why = _window_reason(src.views, (ast.Name((key,)),), False, "subquery key")
    if why:
        return why
    names = [c.name for c in p.resultset.columns]
    items = stmt.select_items
    column = next((name for item, name in zip(items, names)
                   if isinstance(item, ast.SelectItem)
                   and plain_property(item.expr, src) == key), None) \
        if len(items) == len(names) else None
    if column is None:
        return f"the outer {key} is not a select column (rows are numbered per key)"
    others = tuple(SplitRoute(t, (property_reader(prop),)) for t, prop in sorted(routes.items())
                   if t != p.stream.type_name)
    return GroupSplit(p.stream.type_name, (f"{src.alias or src.type_name}.{key}",),
                      (property_reader(key),), (column,), None, p.where, False, others,
                      "subquery", tuple(sorted(routes.items())))


def _subquery_routes(stmt: ast.SelectStatement, p: Any, schemas: dict[str, dict[str, str]]
                     ) -> tuple[str, dict[str, str]] | str:
    """The outer property every subquery correlates on and the property each type read
    routes by (the outer stream's by that one), or why not."""
    src = stmt.from_[0]
    queries = [n.query for n in iter_nodes(stmt) if isinstance(n, SUBQUERIES)]
    if len(queries) != len(p.subqueries) or any(
            isinstance(n, SUBQUERIES) for q in queries for n in iter_nodes(q) if n is not q):
        return "a subquery holds another subquery"
    outer = {src.alias, src.type_name} - {None}
    routes: dict[str, str] = {}
    key: str | None = None
    for q in queries:
        sub = q.stream
        if not isinstance(sub, ast.FilterStream) or sub.type_name not in schemas:
            return "a subquery reads a named window or a table"
        pair = _correlation(q.where, sub, outer)
        if pair is None:
            return (f"the subquery on {sub.type_name} is not correlated by an equality of "
                    "one of its properties with one of the outer event")
        mine, theirs = pair
        if key is not None and theirs != key:
            return "the subqueries correlate on different properties of the outer event"
        key = theirs
        if routes.get(sub.type_name, mine) != mine:
            return f"{sub.type_name} would route by two properties"
        routes[sub.type_name] = mine
        why = _window_reason(sub.views, (ast.Name((mine,)),), False, "subquery key")
        if why:
            return f"the subquery on {sub.type_name}: {why}"
    assert key is not None
    if routes.get(p.stream.type_name, key) != key:
        return f"{p.stream.type_name} would route by two properties"
    routes[p.stream.type_name] = key
    families = {_family(schemas.get(t, {}).get(prop, "")) for t, prop in routes.items()}
    if len(families) != 1 or not families <= KEY_FAMILIES:
        return ("the correlated properties are not all of one type of integers, strings "
                "or booleans (equal values must route alike)")
    return key, routes


def _correlation(where: Any, sub: ast.FilterStream, outer: set[str]
                 ) -> tuple[str, str] | None:
    """(subquery property, outer property) of the first equality of the two in a
    subquery's where clause (a bare name is the subquery stream's)."""
    for c in conjuncts(where):
        if not isinstance(c, ast.Binary) or c.op not in ("=", "=="):
            continue
        for a, b in ((c.left, c.right), (c.right, c.left)):
            mine = plain_property(a, sub)
            if (mine is not None and isinstance(b, ast.Name) and len(b.parts) == 2
                    and b.parts[0] in outer and b.parts[0] not in (sub.alias, sub.type_name)):
                return mine, b.parts[1]
    return None


PATTERN_NODES = (ast.PFollowedBy, ast.PAnd, ast.POr, ast.PNot, ast.PEvery, ast.PGuard,
                 ast.PGuardWhile, ast.PRepeat, ast.PTimerInterval, ast.PTimerAt, ast.PFilter)
"""What a split pattern may hold after its leading ``every tag=Type``: each instance then
lives on the events of one key and on time alone."""


def pattern_split(plan: Any, stmt: ast.SelectStatement, variables: set[str],
                  schemas: dict[str, dict[str, str]]) -> GroupSplit | str:
    """The split of a pattern statement by the key its events correlate on, or why not.

    ``every a=A -> ...`` starts an instance at each ``A`` (Esper ref. 7.5.1 every); when
    each later filter holds an equality of one of its properties with the key property
    of a tag correlated so far (``B(k = a.k)``), an instance only ever takes events of its
    leading event's key, and ``not``, ``and``, ``or``, ``every``, repeat and ``until``,
    ``while``, timers and ``where timer:within`` keep it so (each instance's counts and
    timers are its own).  A leading ``every-distinct`` of the key property compares
    leading events of one key.  The events of each type route by their key property,
    and the rows are numbered per key."""
    src = stmt.from_[0] if len(stmt.from_) == 1 else None
    if not isinstance(src, ast.PatternStream):
        return "not one pattern stream"
    if src.views:
        return "a data window over the pattern holds the matches of all keys"
    if stmt.group_by or plan.pipeline.resultset.aggregates:
        return "aggregates over a pattern's matches combine the matches of all keys"
    if stmt.output is not None:
        return "output limiting collects the rows of all keys together"
    why = _unsupported_clause(plan, stmt, variables)
    if why:
        return why
    root = src.pattern
    first = root.children[0] if isinstance(root, ast.PFollowedBy) else None
    lead = (first.child if isinstance(first, (ast.PEvery, ast.PEveryDistinct)) else None)
    if not isinstance(lead, ast.PFilter) or lead.tag is None:
        return ("the pattern does not begin with every tag=Type -> ...: its instances are "
                "not one per leading event")
    keyed: dict[str, str] = {}
    """Tag -> its key property (the leading tag's once a filter correlates with it)."""
    routes: dict[str, str] = {}
    """Event type -> the property its events route by."""
    for node in root.children[1:]:
        why = _correlate(node, lead, keyed, routes)
        if why:
            return why
    if lead.tag not in keyed:
        return f"no filter correlates with {lead.tag} (an equality with {lead.tag}.property)"
    families = {_family(schemas.get(t, {}).get(prop, "")) for t, prop in routes.items()}
    if len(families) != 1 or not families <= KEY_FAMILIES:
        return ("the correlated properties are not all of one type of integers, strings "
                "or booleans (equal values must route alike)")
    key = keyed[lead.tag]
    if isinstance(first, ast.PEveryDistinct) and not any(
            isinstance(e, ast.Name) and e.parts == (lead.tag, key) for e in first.exprs):
        return (f"every-distinct's expressions do not include {lead.tag}.{key} (it would "
                "compare leading events of all keys)")
    column = _pattern_key_column(stmt, plan.pipeline.resultset, lead.tag, key)
    if column is None:
        return (f"{lead.tag}.{key} is not a select column (rows are numbered per key; "
                "the leading tag is bound in every match)")
    others = tuple(SplitRoute(t, (property_reader(prop),)) for t, prop in sorted(routes.items())
                   if t != lead.type_name)
    return GroupSplit(lead.type_name, (f"{lead.tag}.{key}",), (property_reader(key),),
                      (column,), None, None, False, others, "pattern",
                      tuple(sorted(routes.items())))


def _correlate(node: Any, lead: ast.PFilter, keyed: dict[str, str],
               routes: dict[str, str]) -> str:
    """Walk the pattern after its leading filter in order: each filter must equal one of
    its properties to a correlated tag's key; '' when all do."""
    if not isinstance(node, PATTERN_NODES):
        what = type(node).__name__.removeprefix("P").lower()
        return f"a pattern {what} is not split (its instances may span keys)"
    if isinstance(node, ast.PFilter):
        found = None
        for c in conjuncts(node.filter):
            if not isinstance(c, ast.Binary) or c.op not in ("=", "=="):
                continue
            for mine, theirs in ((c.left, c.right), (c.right, c.left)):
                if (isinstance(mine, ast.Name) and len(mine.parts) == 1
                        and isinstance(theirs, ast.Name) and len(theirs.parts) == 2):
                    tag, prop = theirs.parts
                    if tag == lead.tag and tag not in keyed:
                        keyed[tag] = prop
                        routes[lead.type_name] = prop
                    if keyed.get(tag) == prop:
                        found = mine.parts[0]
                        break
            if found is not None:
                break
        if found is None:
            if _or_mentions(node.filter, {lead.tag, *keyed}):
                return (f"{node.type_name}'s equality with a correlated tag is inside an "
                        "'or': an event may pass without it, of any key")
            return (f"{node.type_name} is not correlated with {lead.tag} (an equality of "
                    f"one of its properties with {lead.tag}.property or a correlated tag's)")
        if routes.get(node.type_name, found) != found:
            return f"{node.type_name} would route by two properties"
        routes[node.type_name] = found
        if node.tag is not None:
            keyed[node.tag] = found
        return ""
    children = getattr(node, "children", None)
    if children is None:
        children = tuple(c for c in (getattr(node, "child", None), getattr(node, "until", None))
                         if c is not None)
    for child in children:
        why = _correlate(child, lead, keyed, routes)
        if why:
            return why
    return ""


def _or_mentions(filt: Any, tags: set[str]) -> bool:
    """Whether an ``or`` in a filter reads one of ``tags``."""
    return any(isinstance(n, ast.Binary) and n.op == "or"
               and any(isinstance(m, ast.Name) and m.parts[0] in tags for m in iter_nodes(n))
               for n in iter_nodes(filt))


def _family(type_name: str) -> str:
    t = type_name.lower()
    return "integer" if t in INTEGERS else t


def _pattern_key_column(stmt: ast.SelectStatement, rs: Any, tag: str, key: str
                        ) -> str | None:
    """The select column holding ``tag.key``."""
    items = stmt.select_items
    names = [c.name for c in rs.columns]
    if len(items) != len(names):
        return None
    for item, name in zip(items, names):
        e = item.expr if isinstance(item, ast.SelectItem) else None
        if isinstance(e, ast.Name) and e.parts == (tag, key):
            return name
    return None


FEEDER_WINDOWS = frozenset({"keepall", "time"})
"""Windows whose rows for an event depend on that event alone (no aggregate, no group)."""


def feed_split(plan: Any, stmt: Any, stream: str, key: str, variables: Iterable[str] = ()
               ) -> Feeder | str:
    """How a statement inserting into ``stream`` splits with the split statement that
    reads it by ``stream``'s property ``key``, or why it cannot: its rows must each
    depend on their own event alone (no group by, aggregate, output clause or window
    but ``#keepall``/``#time``, which post and expire each event by itself, Esper ref.
    14.3.1, 14.3.3), and the ``key`` column must be a property of its event."""
    if plan.kind != "query" or not isinstance(stmt, ast.SelectStatement):
        return "not a select statement"
    if plan.context is not None:
        return f"runs in context {plan.context}"
    if plan.insert_into != stream:
        return f"does not insert into {stream}"
    p = plan.pipeline
    if p is None or p.stream is None or len(stmt.from_) != 1 or not isinstance(
            stmt.from_[0], ast.FilterStream) or plan.window is not None:
        return "not one event stream"
    if stmt.group_by or p.resultset.aggregates:
        return "it groups or aggregates over the events of all keys"
    if stmt.output is not None:
        return "output limiting collects the rows of all keys together"
    why = _unsupported_clause(plan, stmt, set(variables), feeds=True)
    if why:
        return why
    src = stmt.from_[0]
    if len(src.views) > 1 or (src.views and src.views[0].name.lower() not in FEEDER_WINDOWS):
        return (f"#{src.views[0].name} posts rows of other events (only #keepall or #time "
                "post each event's own)")
    if any(isinstance(i, ast.Wildcard) for i in stmt.select_items):
        return "a wildcard select (its key column is not named)"
    if key not in (c.name for c in p.resultset.columns):
        return f"it has no column {key}"
    prop = carried_properties(plan, stmt).get(key)
    if prop is None:
        return f"its column {key} is not a property of its event"
    return Feeder(plan.name, stream, SplitRoute(p.stream.type_name, (property_reader(prop),),
                                                p.stream.filter),
                  key, f"{p.stream.type_name}.{prop}")


def carried_properties(plan: Any, stmt: Any) -> dict[str, str]:
    """Output column -> the property of the event it carries, for each select column of a
    statement over one event stream that is a plain property (``id``, ``a.id``)."""
    p = plan.pipeline
    src = stmt.from_[0] if getattr(stmt, "from_", None) else None
    if p is None or p.stream is None or not isinstance(src, ast.FilterStream):
        return {}
    names = [c.name for c in p.resultset.columns]
    if len(names) != len(stmt.select_items):
        return {}
    out = {}
    for item, name in zip(stmt.select_items, names):
        prop = plain_property(item.expr, src) if isinstance(item, ast.SelectItem) else None
        if prop is not None:
            out[name] = prop
    return out


def _stream_property(n: Any, streams: tuple[Any, ...]) -> tuple[str, str] | None:
    """(stream name, property) of ``stream.property`` (the stream by its name or, when
    it has an alias, its type), else None."""
    if not isinstance(n, ast.Name) or len(n.parts) != 2:
        return None
    head, prop = n.parts
    for s in streams:
        if head == s.name:
            return s.name, prop
    found = [s for s in streams if head == s.type_name]
    return (found[0].name, prop) if len(found) == 1 else None


def _join_key(parts: list[Any], streams: tuple[Any, ...]) -> dict[str, str] | None:
    """Stream name -> its key property, from the first equality of one property of
    each stream."""
    for c in parts:
        if isinstance(c, ast.Binary) and c.op == "=":
            left = _stream_property(c.left, streams)
            right = _stream_property(c.right, streams)
            if left and right and left[0] != right[0]:
                return {left[0]: left[1], right[0]: right[1]}
    return None


def _join_key_column(stmt: ast.SelectStatement, rs: Any, streams: tuple[Any, ...],
                     key: dict[str, str], side: str | None = None) -> str | None:
    """The select column holding either stream's key property (``side``: that stream's
    alone)."""
    items = stmt.select_items
    names = [c.name for c in rs.columns]
    if len(items) != len(names) or any(isinstance(i, ast.Wildcard) for i in items):
        return None
    for item, name in zip(items, names):
        if isinstance(item, ast.SelectItem):
            sp = _stream_property(item.expr, streams)
            if sp is not None and key.get(sp[0]) == sp[1] and side in (None, sp[0]):
                return name
    return None


def _unsupported_clause(plan: Any, stmt: ast.SelectStatement, variables: set[str],
                        feeds: bool = False, subqueries: bool = False) -> str:
    """Why a clause mixes keys; ``feeds``: a ``Feeder`` (its insert into is read by the
    statement it splits with); ``subqueries``: correlated on the key (``subquery_split``)."""
    p = plan.pipeline
    if stmt.insert_into is not None and not feeds:
        return ("insert into feeds other statements in the order of all events (split it "
                "with a statement reading it by the same key)")
    if plan.tables or stmt.into_table is not None:
        return "uses a table"
    if (p.subqueries and not subqueries) or p.match_recognize is not None:
        return "has a subquery or match_recognize"
    if stmt.order_by or stmt.limit is not None:
        return "order by / limit order rows across groups"
    if stmt.distinct:
        return "select distinct compares rows across groups"
    for n in iter_nodes(stmt):
        if isinstance(n, ast.Call) and n.name.lower() in PREV_FUNCTIONS | {"prior"}:
            return f"{n.name}() reads the window across groups"
        if isinstance(n, ast.NamedArg) and n.name.lower() == "group_by":
            return "an aggregate has its own group_by"
        if isinstance(n, ast.Name) and n.parts[0] in variables:
            return f"reads variable {n.parts[0]} (each engine partition keeps a copy)"
    return ""


def _key_columns(stmt: ast.SelectStatement, rs: Any, keys: tuple[Any, ...],
                 key: str = "group-by expression",
                 norm: Callable[[Any], Any] | None = None) -> tuple[str, ...] | str:
    """The select column of each key expression (the row's group key); ``norm`` gives
    the form in which two expressions of one property compare equal."""
    items = stmt.select_items
    wildcard = any(isinstance(i, ast.Wildcard) for i in items)
    names = [c.name for c in rs.columns]
    out: list[str] = []
    for g in keys:
        found = None
        if not wildcard and len(items) == len(names):
            for item, name in zip(items, names):
                if isinstance(item, ast.SelectItem) and _same(item.expr, g, norm):
                    found = name
                    break
        elif wildcard:
            bare = norm(g) if norm is not None else g
            if isinstance(bare, ast.Name) and len(bare.parts) == 1:
                found = bare.parts[0]
        if found is None:
            return f"a {key} is not a select column (rows are numbered per key)"
        out.append(found)
    return tuple(out)


def _timed_output(out: ast.OutputClause | None) -> bool | str:
    """Whether the output condition is timed and armed by the first update; a reason
    when the output cannot be split."""
    if out is None:
        return False
    if out.after is not None:
        return "output after counts over all groups"
    if out.when is not None or out.when_terminated:
        return "output when evaluates over all groups"
    if out.every_count is not None and out.every_unit == "events":
        return "output every N events counts the events of all groups"
    if out.at is not None:
        # a crontab keeps the milliseconds of the time it was armed (CronSpec.next_from)
        return True
    return out.every_time is not None or out.every_count is not None


def _window_reason(views: tuple[ast.View, ...], group_by: tuple[Any, ...],
                   timed: bool, key: str = "group key", armed: bool = False,
                   src: Any = None) -> str:
    """Why a window chain mixes groups (or, with a timed output, does not post each
    event at once); '' when each group's content depends on its own events only.
    ``key``: what the group key is called in the reason; ``armed``: the router arms a
    ``#time_batch`` without a reference point (its stream's first arrival)."""
    if not views:
        return ""
    first = views[0]
    name = first.name.lower()
    if name == "groupwin":
        if not _covers(first.params, group_by, src):
            return f"#groupwin's keys do not include the {key}"
        if timed and any(v.name.lower() not in IMMEDIATE | {"length"} for v in views[1:]):
            return ("a window under #groupwin posts later than its events arrive, and a "
                    "timed output is armed by the statement's first update")
        return ""
    if len(views) > 1:
        return "a chain of data windows"
    if name in ("unique", "firstunique") and not _covers(first.params, group_by, src):
        return f"#{first.name}'s keys do not include the {key}"
    if name == "time_batch":
        referenced = len(first.params) > 1 and not (
            isinstance(first.params[1], ast.Literal) and isinstance(first.params[1].value, str))
        if not armed and not referenced:
            return ("#time_batch without a reference point starts its batches at the "
                    "statement's first event")
        if timed:
            return ("#time_batch posts at batch ends, and a timed output is armed by the "
                    "statement's first update")
        return ""
    if name not in IMMEDIATE:
        what = "groups" if key == "group key" else "keys"
        return f"#{first.name} holds events of all {what} together"
    return ""


def _covers(params: tuple[Any, ...], group_by: tuple[Any, ...], src: Any = None) -> bool:
    """Every group-by expression is one of a keyed window's key expressions (a property
    of stream ``src`` the same bare or qualified by its alias or type)."""
    norm = _single(src) if isinstance(src, ast.FilterStream) else None
    return all(any(_same(p, g, norm) for p in params) for g in group_by)


def _single(src: ast.FilterStream) -> Callable[[Any], Any]:
    """A key expression of one stream as its bare property when it is one (``account``,
    ``w.account`` and ``W.account`` are one key of ``W as w``)."""
    def norm(n: Any) -> Any:
        prop = plain_property(n, src)
        return ast.Name((prop,)) if prop is not None else n
    return norm


def _joined(streams: tuple[Any, ...]) -> Callable[[Any], Any]:
    """A key expression of a join as ``stream.property`` when it is one (by the stream's
    name or its type's)."""
    def norm(n: Any) -> Any:
        sp = _stream_property(n, streams)
        return ast.Name(sp) if sp is not None else n
    return norm


def _same(a: Any, b: Any, norm: Callable[[Any], Any] | None) -> bool:
    return same(norm(a), norm(b)) if norm is not None else same(a, b)

"""Compile expression ASTs into Python closures ``fn(row, ctx)``.

User text is never evaluated as Python: every node becomes a small closure.  A ``Scope``
says what a row is (an event, a pattern match, a pattern filter's (event, tags) pair, an
``#expr`` window environment) and collects the aggregate calls of a select clause, which
compile to reads of ``ctx.aggs`` filled by the result set.  Nulls follow SQL/Esper
three-valued logic: arithmetic and comparison with null give null.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app.epl import ast, functions
from app.epl.aggregate_args import aggregate_args, check_min_max_row, positional_args
from app.epl.builtins import FUNCTIONS
from app.epl.errors import EplValidationError, closest
from app.epl.java_values import CASTS, java_text
from app.epl.properties import nested as _nested
from app.epl.subquery_expr import compile_subquery
from app.epl.walk import LONG_CHAIN, chain_length, iter_nodes, spine
from operators.aggregates import AGGREGATE_NAMES, Distinct, make_aggregator
from operators.base import Expr, PartitionCtx
from operators.resultset import AggregateDef

OUTPUT_BUILTINS = frozenset({
    "count_insert", "count_remove", "count_insert_total", "count_remove_total",
    "last_output_timestamp", "current_timestamp"})


PREV_FUNCTIONS = frozenset({"prev", "prevtail", "prevwindow", "prevcount"})
"""Esper ref. "Single-row functions": the functions that read the data window."""


class NotSupportedExpr(Exception):
    """An expression construct the engine does not evaluate yet."""


@dataclass
class TableEnv:
    """The tables a statement's expressions may read (Esper ref. 4.7 Context and Tables tables).

    ``specs`` are the declared tables by name; ``context`` is the statement's context (a
    table declared with a context is read only by statements of that context, each
    partition reading its own instance); ``props`` the statement's event properties and
    their types (a name that is a property is never taken for a table, and key types are
    checked against them); ``used`` collects the tables read, which the plan lists so
    the runtime hands their instances to the statement.  ``refusal`` (when set) says why
    tables cannot be read where the expression stands."""

    specs: Mapping[str, Any]
    context: str | None = None
    props: Mapping[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    refusal: str = ""


@dataclass
class Scope:
    """How names resolve while compiling one expression."""

    kind: str = "event"  # event | tags | pfilter | env | output
    aliases: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    variables: frozenset[str] = frozenset()
    aggregates: list[AggregateDef] | None = None
    agg_texts: dict[str, int] = field(default_factory=dict)
    allow_aggregates: bool = False
    agg_value_scope: Scope | None = None
    agg_in_row: bool = False
    """Aggregates read their result from the row under ``$aggN`` (``#expr`` windows)."""
    tables: TableEnv | None = None
    """Tables expressions may read; None: no table is known here."""
    rows_leave_in_order: bool = True
    """Rows leave the aggregation oldest first (else first/last/window/nth track events)."""
    partition_keys: dict[str, str] = field(default_factory=dict)
    """Partition properties of a keyed context -> the ``context`` key holding their value
    (``k`` -> ``key1``): read from the partition, they are not event properties."""
    subqueries: Any = None
    """Plans the subqueries an expression holds (app.epl.planning.subqueries); None: a
    subquery cannot stand here."""
    outer: Scope | None = None
    """Inside a subquery (kind ``sub``, rows are (event, enclosing row) pairs): how the
    enclosing statement's names resolve."""
    inner_props: frozenset[str] = frozenset()
    """Inside a subquery: the properties of its stream (they win over outer names)."""
    array_tags: frozenset[str] = frozenset()
    """Pattern tags holding a list of events (tags inside a repeat): read as ``a[i]``."""
    filter_sets: bool = False
    """A stream filter (or a where clause Esper plans as one): ``in`` over constants is a
    set lookup, a null constant matching nothing (Esper's filter index, ``in`` lists)."""
    row_vars: frozenset[str] = frozenset()
    """match_recognize variables: ``B[i]`` reads the i-th row a variable matched."""


def text_of(node: ast.Node) -> str:
    """EPL text of a node (column names are expression text without whitespace)."""
    from app.epl.printer import to_epl

    return to_epl(node)


def _compile_name(node: ast.Name, scope: Scope) -> Expr:
    parts: tuple[str, ...] = tuple(node.parts)
    head = parts[0]
    rest = parts[1:]
    if scope.kind == "sub":
        return _compile_sub_name(node, scope)
    if rest and is_table_name(head, scope):
        return _compile_keyless_table(node, scope)
    if head == "context" and rest:
        key, more = rest[0], rest[1:]
        if more:
            return lambda r, c: _nested(c.props.get(key), more)
        return _context_property(key)
    if scope.kind == "output" and len(parts) == 1 and head in OUTPUT_BUILTINS:
        return lambda r, c: c.output.get(head)
    if len(parts) == 1 and head in scope.variables:
        return lambda r, c: c.variables.get(head)
    if rest and head in scope.array_tags and scope.kind in ("tags", "pfilter"):
        raise _err(f"tag '{head}' is a repeated tag (a list of events): "
                   f"'{'.'.join(parts)}' needs an index", node,
                   f"write {head}[0].{'.'.join(rest)}, or {head}.countOf()")
    if scope.kind == "tags":
        if head in scope.tags:
            if not rest:
                return lambda r, c: r.get(head)
            key = scope.partition_keys.get(f"{head}.{rest[0]}") if len(rest) == 1 else None
            if key is not None:
                return _context_property(key)
            return lambda r, c: _nested(r.get(head), rest)
        if len(scope.tags) == 0:
            return lambda r, c: _nested(r, parts)
    if scope.kind == "pfilter":
        if head in scope.tags and rest:
            return lambda r, c: _nested(r[1].get(head), rest)
        if head in scope.tags:
            # a bare tag is the tagged event (or list); a property of the filtered event
            # with that name comes first
            return lambda r, c: (r[1].get(head) if r[0] is None or head not in r[0]
                                 else r[0][head])
        if head in scope.aliases and rest:
            return lambda r, c: _nested(r[0], rest)
        if len(parts) == 1:
            return lambda r, c: r[0].get(head)
        return lambda r, c: _nested(r[0], parts)
    if scope.kind == "event" and head in scope.aliases and rest:
        parts = rest
        head = parts[0]
        rest = parts[1:]
    if head in scope.variables and not rest:
        return lambda r, c: c.variables.get(head)
    if not rest:
        key = scope.partition_keys.get(head)
        if key is not None:
            return _context_property(key)
        return _property(head)
    return lambda r, c: _nested(r, parts)


def _context_property(key: str) -> Expr:
    """The reader of a context property (``context.key1``, or a keyed context's key
    property read by name); it carries the property's name (see ``_property``)."""
    def read_context(r: Any, c: PartitionCtx) -> Any:
        return c.props.get(key)
    read_context.context_property = key  # type: ignore[attr-defined]
    return read_context


def _property(name: str) -> Expr:
    """The reader of a top-level event property; it carries the property's name, so that
    a comparison with a constant can read the property itself (one call less each time)."""
    def read(r: Any, c: PartitionCtx) -> Any:
        return r.get(name)
    read.property_name = name  # type: ignore[attr-defined]
    return read


property_reader = _property
"""``_property`` for planners outside this module (a router's key of one property)."""


def is_inner_name(node: ast.Name, scope: Scope) -> bool:
    """Whether a name inside a subquery reads the subquery's own stream: qualified by its
    name or alias, or a property of it (Esper resolves the subquery's stream first)."""
    parts = node.parts
    if len(parts) > 1 and parts[0] in scope.aliases:
        return True
    return parts[0] in scope.inner_props and parts[0] not in scope.variables


def _compile_sub_name(node: ast.Name, scope: Scope) -> Expr:
    """A name inside a subquery: the subquery's event (pair[0]) or the enclosing row
    (pair[1]); variables, context properties and tables read no row."""
    parts = tuple(node.parts)
    if is_inner_name(node, scope):
        if len(parts) > 1 and parts[0] in scope.aliases:
            parts = parts[1:]
        if len(parts) == 1:
            key = parts[0]
            return lambda r, c: r[0].get(key) if r[0] is not None else None
        return lambda r, c: _nested(r[0], parts) if r[0] is not None else None
    if scope.outer is not None and not (parts[0] == "context" or parts[0] in scope.variables):
        fn = compile_expr(node, scope.outer)
        return lambda r, c: fn(r[1], c)
    plain = Scope("event", variables=scope.variables, tables=scope.tables)
    fn = compile_expr(node, plain)
    return lambda r, c: fn(r[0], c)


def is_table_name(head: str, scope: Scope) -> bool:
    """Whether a dotted name's head is a table: a declared table that is not a stream
    alias, a pattern tag, a variable, ``context`` or an event property (Esper resolves
    stream and property names before table names)."""
    env = scope.tables
    return (env is not None and head in env.specs and head != "context"
            and head not in scope.aliases and head not in scope.tags
            and head not in scope.variables and head not in env.props)


def _table_spec(env: TableEnv | None, name: str, node: ast.Node) -> Any:
    """The spec of a table an expression reads, checked against the statement."""
    if env is None or env.refusal:
        raise _err(env.refusal if env is not None and env.refusal else
                   f"table '{name}' cannot be read here", node)
    spec = env.specs.get(name)
    if spec is None:
        raise _err(f"unknown table '{name}'", node, _did_you_mean(name, env.specs))
    if spec.context is not None and spec.context != env.context:
        raise _err(f"table '{name}' is declared with context '{spec.context}'; a statement "
                   f"reading it must declare the same context", node,
                   f"write 'context {spec.context} ...' (Esper ref. 4.7 Context and Tables)")
    env.used.add(name)
    return spec


def _table_column(spec: Any, column: str, node: ast.Node) -> Callable[[dict[str, Any]], Any]:
    """A reader of one column of a table record (key, plain or aggregation column)."""
    col = spec.column(column)
    if col is None:
        raise _err(f"table '{spec.name}' has no column '{column}'", node,
                   _did_you_mean(column, [c.name for c in spec.columns]))
    if col.key:
        idx = spec.keys.index(column)
        return lambda rec: rec["k"][idx]
    agg = col.aggregator
    if agg is not None:
        def agg_value(rec: dict[str, Any]) -> Any:
            state = rec["a"].get(column)
            return agg.result(state if state is not None else agg.initial())
        return agg_value
    return lambda rec: rec["c"].get(column)


_LITERAL_KINDS = {"int": "number", "long": "number", "double": "number",
                  "string": "string", "boolean": "boolean"}
_TYPE_KINDS = {"int": "number", "integer": "number", "long": "number", "short": "number",
               "byte": "number", "biginteger": "number", "double": "number",
               "float": "number", "bigdecimal": "number", "string": "string",
               "boolean": "boolean"}


def _key_kind(node: ast.Node, scope: Scope) -> str | None:
    """The kind (number, string, boolean) of a key expression when it is evident: a
    literal, or a property of the statement's event type."""
    if isinstance(node, ast.Literal):
        return _LITERAL_KINDS.get(node.type)
    if isinstance(node, ast.Name) and scope.tables is not None:
        parts = node.parts
        if len(parts) == 2 and parts[0] in scope.aliases:
            parts = parts[1:]
        if len(parts) == 1 and parts[0] not in scope.variables:
            t = scope.tables.props.get(parts[0])
            return _TYPE_KINDS.get(str(t).lower()) if t is not None else None
    return None


def _compile_table_access(node: ast.TableAccess, scope: Scope) -> Expr:
    """``T[k1, ..].col`` / ``T[k1, ..]``: the row with those primary-key values, after
    coercion to the key types (Esper ref. 4.7); null when there is no such row."""
    spec = _table_spec(scope.tables, node.table, node)
    keys = spec.keys
    if not keys:
        raise _err(f"table '{spec.name}' has no primary key", node,
                   f"read a key-less table's column as {spec.name}.column")
    if len(node.keys) != len(keys):
        raise _err(f"table '{spec.name}' has {len(keys)} primary key column(s) "
                   f"({', '.join(keys)}); {len(node.keys)} key expression(s) given", node,
                   "give one key expression per primary key column, in declared order")
    for k, kname, ktype in zip(node.keys, keys, spec.key_types):
        have = _key_kind(k, scope)
        want = _TYPE_KINDS.get(ktype.lower())
        if have is not None and want is not None and have != want:
            raise _err(f"key '{kname}' of table '{spec.name}' is {ktype}; the key "
                       f"expression '{text_of(k)}' is a {have}", k)
    key_fns = [compile_expr(k, scope) for k in node.keys]
    name = spec.name
    read = _table_column(spec, node.column, node) if node.column is not None else None

    def table_access(r: Any, c: PartitionCtx) -> Any:
        table = c.tables.get(name)
        if table is None:
            return None
        rec = table.lookup([k(r, c) for k in key_fns])
        if rec is None:
            return None
        return read(rec) if read is not None else table.row(rec)
    return table_access


def _compile_indexed_tag(node: ast.TableAccess, scope: Scope) -> Expr:
    """``a[i]`` / ``a[i].prop``: the i-th event of a repeated pattern tag (Esper ref.
    "Repeat": tags inside a repeat are indexed, from 0), or the i-th row a match_recognize
    variable matched (Esper ref. "Match Recognize": grouped variables are read by index);
    null past the end."""
    name = node.table
    if name not in scope.array_tags and name not in scope.row_vars:
        raise _err(f"tag '{name}' holds one event, not a list: only a tag inside a repeat "
                   f"can be indexed", node, f"write {name}.property")
    if len(node.keys) != 1:
        raise _err(f"a repeated tag takes one index, {len(node.keys)} given", node,
                   f"e.g. {name}[0]")
    index = compile_expr(node.keys[0], scope)
    column = node.column
    in_filter = scope.kind == "pfilter"

    def indexed(r: Any, c: PartitionCtx) -> Any:
        events = (r[1] if in_filter else r).get(name)
        i = index(r, c)
        if type(events) is not list or type(i) is not int or not 0 <= i < len(events):
            return None
        event = events[i]
        return event if column is None else _nested(event, (column,))
    return indexed


_TAG_METHODS = {
    "countof": len,
    "firstof": lambda events: events[0] if events else None,
    "lastof": lambda events: events[-1] if events else None,
}


def _compile_tag_method(node: ast.Call, tag: str, method: str, scope: Scope) -> Expr:
    """``a.countOf()``, ``a.firstOf()``, ``a.lastOf()`` over a repeated tag's events
    (Esper ref. enumeration methods, the forms without a lambda); null without events."""
    fn = _TAG_METHODS.get(method)
    if fn is None or node.args:
        raise _err(f"'{node.name}(...)' is not supported on the repeated tag '{tag}'", node,
                   f"supported: {tag}.countOf(), {tag}.firstOf(), {tag}.lastOf(), "
                   f"{tag}[index]")

    def tag_method(r: Any, c: PartitionCtx) -> Any:
        events = r.get(tag)
        return fn(events) if type(events) is list else None
    return tag_method


def _compile_keyless_table(node: ast.Name, scope: Scope) -> Expr:
    """``T.col`` for a table without primary keys: its single row's column."""
    spec = _table_spec(scope.tables, node.parts[0], node)
    if spec.keys:
        raise _err(f"table '{spec.name}' has primary key(s) {', '.join(spec.keys)}", node,
                   f"write {spec.name}[{', '.join(spec.keys)}].{node.parts[1]}")
    read = _table_column(spec, node.parts[1], node)
    more = tuple(node.parts[2:])
    name = spec.name

    def keyless(r: Any, c: PartitionCtx) -> Any:
        table = c.tables.get(name)
        rec = table.lookup(()) if table is not None else None
        if rec is None:
            return None
        v = read(rec)
        return _nested(v, more) if more else v
    return keyless


def _err(message: str, node: ast.Node, hint: str | None = None) -> EplValidationError:
    pos = getattr(node, "pos", None)
    line = pos.line if pos is not None and pos.line else None
    col = pos.column if pos is not None and pos.line else None
    return EplValidationError(message, line, col, None, hint)


def _did_you_mean(name: str, candidates: Any) -> str | None:
    best = closest(name, list(candidates))
    return f"did you mean '{best}'?" if best else None


def _null_safe(fn: Callable[[Any, Any], Any]) -> Callable[[Expr, Expr], Expr]:
    def make(a: Expr, b: Expr) -> Expr:
        def run(r: Any, c: PartitionCtx) -> Any:
            x = a(r, c)
            if x is None:
                return None
            y = b(r, c)
            if y is None:
                return None
            return fn(x, y)
        return run
    return make


def _div(x: Any, y: Any) -> Any:
    """``/`` always gives a double, ints too, with Java double semantics for a zero
    divisor: ±Infinity, NaN for 0/0 (Esper's default configuration: no integer division,
    division by zero not null)."""
    if y == 0:
        if x == 0 or x != x:
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


def _mod(x: Any, y: Any) -> Any:
    """``%`` as Java computes it: the result takes the dividend's sign.  A double operand
    makes it a double remainder (NaN for a zero divisor or an infinite dividend); two
    integers give an integer, and null for a zero divisor, where Esper's own evaluation
    raises an arithmetic exception and drops the event."""
    if isinstance(x, float) or isinstance(y, float):
        if y == 0 or math.isinf(x):
            return math.nan
        return math.fmod(x, y)
    if y == 0:
        return None
    r = abs(x) % abs(y)
    return -r if x < 0 else r


def _eq(x: Any, y: Any) -> bool:
    return bool(x == y)


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _div, "%": _mod,
    "||": lambda x, y: java_text(x) + java_text(y), "=": _eq, "!=": lambda x, y: x != y,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def _property_lt(name: str, y: Any) -> Expr:
    def lt(r: Any, c: PartitionCtx) -> Any:
        x = r.get(name)
        return None if x is None else x < y
    return lt


def _property_le(name: str, y: Any) -> Expr:
    def le(r: Any, c: PartitionCtx) -> Any:
        x = r.get(name)
        return None if x is None else x <= y
    return le


def _property_gt(name: str, y: Any) -> Expr:
    def gt(r: Any, c: PartitionCtx) -> Any:
        x = r.get(name)
        return None if x is None else x > y
    return gt


def _property_ge(name: str, y: Any) -> Expr:
    def ge(r: Any, c: PartitionCtx) -> Any:
        x = r.get(name)
        return None if x is None else x >= y
    return ge


_ORDERING: dict[str, Callable[[str, Any], Expr]] = {
    "<": _property_lt, "<=": _property_le, ">": _property_gt, ">=": _property_ge}
"""``property <op> constant``, the commonest filter, as one function: what
``_null_safe(op)(property, constant)`` computes."""


def _and(a: Expr, b: Expr) -> Expr:
    def run(r: Any, c: PartitionCtx) -> Any:
        x = a(r, c)
        if x is False:
            return False
        y = b(r, c)
        if y is False:
            return False
        if x is None or y is None:
            return None
        return bool(x) and bool(y)
    return run


def _or(a: Expr, b: Expr) -> Expr:
    def run(r: Any, c: PartitionCtx) -> Any:
        x = a(r, c)
        if x is True or (x is not None and x):
            return True
        y = b(r, c)
        if y is True or (y is not None and y):
            return True
        if x is None or y is None:
            return None
        return False
    return run


def _like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.S)


def _num(v: Any) -> Any:
    return v



MAX_MS = (1 << 63) - 1
"""The longest time span, in milliseconds (Esper keeps time in a Java long)."""


def time_period_ms(node: ast.TimePeriod) -> int:
    """Milliseconds of a constant TimePeriod (or a number of seconds)."""
    ms: Any = None
    if isinstance(node, ast.TimePeriod):
        ms = node.ms()
        if ms is None:
            raise _err(f"time period '{text_of(node)}' must be constant here", node,
                       "write its amounts as numbers, as in '10 sec'")
    elif (isinstance(node, ast.Literal) and isinstance(node.value, (int, float))
          and not isinstance(node.value, bool)):
        ms = node.value * 1000
    else:
        raise _err("expected a time period", node, "write a time period such as '10 sec'")
    if (isinstance(ms, float) and not math.isfinite(ms)) or abs(ms) > MAX_MS:
        raise _err(f"time period '{text_of(node)}' is out of range", node,
                   "the longest time period is about 292 million years")
    return int(round(ms))


def constant_value(node: ast.Node) -> Any:
    """The value of a literal (or negated literal), else raise."""
    if isinstance(node, ast.Literal):
        return node.value
    if isinstance(node, ast.Unary) and node.op == "-" and isinstance(node.operand, ast.Literal):
        return -node.operand.value
    if isinstance(node, ast.TimePeriod):
        return time_period_ms(node)
    raise ValueError("not a constant")


def compile_filter(node: ast.Node, scope: Scope) -> Expr:
    """Compile a stream filter: as ``compile_expr``, with the filter service's reading of
    ``in`` over constants (``Scope.filter_sets``)."""
    return compile_expr(node, replace(scope, filter_sets=True))


def compile_expr(node: ast.Node, scope: Scope) -> Expr:
    """Compile an expression AST into a closure ``fn(row, ctx)``."""
    compile_node = _COMPILERS.get(type(node))
    if compile_node is None:
        raise NotSupportedExpr(type(node).__name__)
    return compile_node(node, scope)


def _compile_literal(node: ast.Literal, scope: Scope) -> Expr:
    v = node.value
    return lambda r, c: v


def _compile_binary(node: ast.Binary, scope: Scope) -> Expr:
    if chain_length(node) > LONG_CHAIN:
        return _compile_chain(node, scope)
    a = compile_expr(node.left, scope)
    b = compile_expr(node.right, scope)
    name = getattr(a, "property_name", None)
    if (name is not None and node.op in _ORDERING and isinstance(node.right, ast.Literal)
            and node.right.value is not None):
        return _ORDERING[node.op](name, node.right.value)
    return _combiner(node.op)(a, b)


def _combiner(op: str) -> Callable[[Expr, Expr], Expr]:
    """The closure maker of a binary operator: and/or in three-valued logic, the others
    null when an operand is null."""
    if op == "and":
        return _and
    if op == "or":
        return _or
    fn = _BINARY.get(op)
    if fn is None:
        raise NotSupportedExpr(f"operator {op}")
    return _null_safe(fn)


def _compile_unary(node: ast.Unary, scope: Scope) -> Expr:
    a = compile_expr(node.operand, scope)
    if node.op == "-":
        return lambda r, c: None if (x := a(r, c)) is None else -x
    if node.op == "not":
        return lambda r, c: None if (x := a(r, c)) is None else not x
    if node.op == "+":
        return a
    raise NotSupportedExpr(f"unary {node.op}")


def _compile_between(node: ast.Between, scope: Scope) -> Expr:
    e, lo, hi = (compile_expr(x, scope) for x in (node.expr, node.low, node.high))
    neg = node.negated

    def between(r: Any, c: PartitionCtx) -> Any:
        v, a, b = e(r, c), lo(r, c), hi(r, c)
        if v is None or a is None or b is None:
            return False  # Esper's between is false, not null, on a null operand (negated too)
        if a > b:
            a, b = b, a
        return (a <= v <= b) != neg
    return between


def _compile_in_list(node: ast.InList, scope: Scope) -> Expr:
    e = compile_expr(node.expr, scope)
    neg = node.negated
    if scope.filter_sets:
        try:
            values = [constant_value(x) for x in node.items]
        except ValueError:
            values = None
        if values is not None:
            # Esper's filter service tests a constant list as a set of values: a null
            # among them matches nothing, and leaves the others' answer as it is
            consts = [x for x in values if x is not None]
            return lambda r, c: None if (v := e(r, c)) is None else (
                any(v == x for x in consts) != neg)
    items = [compile_expr(x, scope) for x in node.items]

    def in_list(r: Any, c: PartitionCtx) -> Any:
        v = e(r, c)
        if v is None:
            return None
        null = False
        for i in items:
            x = i(r, c)
            if x is None:
                null = True
            elif v == x:
                return not neg
        # as in SQL: no item equal and one of them null is unknown
        return None if null else neg
    return in_list


def _compile_like(node: ast.Like, scope: Scope) -> Expr:
    e = compile_expr(node.expr, scope)
    pat = constant_value(node.pattern)
    esc = constant_value(node.escape) if node.escape is not None else None
    rx = _like_regex(str(pat), esc)
    neg = node.negated
    return lambda r, c: None if (v := e(r, c)) is None else (
        rx.fullmatch(str(v)) is not None) != neg


def _compile_regexp(node: ast.Regexp, scope: Scope) -> Expr:
    e = compile_expr(node.expr, scope)
    rx = re.compile(str(constant_value(node.pattern)), re.S)
    neg = node.negated
    return lambda r, c: None if (v := e(r, c)) is None else (
        rx.fullmatch(str(v)) is not None) != neg


def _compile_is_same(node: ast.IsSame, scope: Scope) -> Expr:
    """``a is [not] b``: two nulls are the same, a null and a value are not."""
    a, b = compile_expr(node.left, scope), compile_expr(node.right, scope)
    neg = node.negated

    def same(r: Any, c: PartitionCtx) -> bool:
        x, y = a(r, c), b(r, c)
        equal = x is None and y is None or (x is not None and y is not None and x == y)
        return equal != neg
    return same


def _compile_is_null(node: ast.IsNull, scope: Scope) -> Expr:
    e = compile_expr(node.expr, scope)
    if node.negated:
        return lambda r, c: e(r, c) is not None
    return lambda r, c: e(r, c) is None


def _compile_case(node: ast.Case, scope: Scope) -> Expr:
    whens = [(compile_expr(w, scope), compile_expr(t, scope)) for w, t in node.whens]
    other = compile_expr(node.else_, scope) if node.else_ is not None else None
    if node.operand is not None:
        op = compile_expr(node.operand, scope)

        def case_value(r: Any, c: PartitionCtx) -> Any:
            v = op(r, c)
            for w, t in whens:
                if v == w(r, c):
                    return t(r, c)
            return other(r, c) if other is not None else None
        return case_value

    def case_when(r: Any, c: PartitionCtx) -> Any:
        for w, t in whens:
            if w(r, c):
                return t(r, c)
        return other(r, c) if other is not None else None
    return case_when


def _compile_cast(node: ast.Cast, scope: Scope) -> Expr:
    e = compile_expr(node.expr, scope)
    conv = CASTS.get(str(node.type_name).lower())
    if conv is None:
        raise NotSupportedExpr(f"cast to {node.type_name}")
    return lambda r, c: None if (v := e(r, c)) is None else conv(v)


def _compile_time_period(node: ast.TimePeriod, scope: Scope) -> Expr:
    if node.ms() is None:
        return _compile_period(node, scope)
    ms = time_period_ms(node)
    return lambda r, c: ms


def _compile_table_or_tag(node: ast.TableAccess, scope: Scope) -> Expr:
    if scope.kind in ("tags", "pfilter") and node.table in scope.tags:
        return _compile_indexed_tag(node, scope)
    return _compile_table_access(node, scope)


def _compile_star(node: ast.Star, scope: Scope) -> Expr:
    return lambda r, c: r


def _compile_subquery(node: ast.Subquery | ast.Exists | ast.InSubquery | ast.Quantified,
                      scope: Scope) -> Expr:
    if scope.kind == "sub":
        # Esper: "subquery-within-subquery is not supported"
        raise _err("a subquery cannot stand inside another subquery", node,
                   "compute the inner value in its own statement (insert into a "
                   "stream, a named window or a table) and read that")
    return compile_subquery(node, scope, compile_expr)


SEGMENT = 64
"""Operators of a long chain compiled as one segment of nested closures: the depth of
the calls at run time, whatever the chain's length."""


def _compile_chain(node: ast.Binary, scope: Scope) -> Expr:
    """A long left-deep chain (``1 + 1 + ... + 1``) with the closures of a two-operand
    expression (so the same null and short-circuit rules), built in a loop, nested at
    most ``SEGMENT`` deep: segments run one after the other, each starting from the
    value of the one before, which it reads first, before any of its own operands."""
    first, links = spine(node)
    value = compile_expr(first, scope)
    if len(links) <= SEGMENT:
        for link in links:
            right = compile_expr(link.right, scope)
            value = _combiner(link.op)(value, right)
        return value
    held: list[Any] = [None]

    def previous(r: Any, c: PartitionCtx) -> Any:
        return held[0]

    segments = []
    for i in range(0, len(links), SEGMENT):
        segment: Expr = previous
        for link in links[i:i + SEGMENT]:
            right = compile_expr(link.right, scope)
            segment = _combiner(link.op)(segment, right)
        segments.append(segment)
    start = value

    def chain(r: Any, c: PartitionCtx) -> Any:
        v = start(r, c)
        for segment in segments:
            held[0] = v
            v = segment(r, c)
        return v
    return chain


def _compile_period(node: ast.TimePeriod, scope: Scope) -> Expr:
    """A time period with variable amounts (``n sec``): milliseconds, null when a
    variable is null (Esper ref. 5.2.1 allows variables as time-period amounts)."""
    parts: list[tuple[Expr, float]] = []
    for amount, unit in node.parts:
        if isinstance(amount, ast.Name):
            name = ".".join(amount.parts)
            if len(amount.parts) != 1 or name not in scope.variables:
                raise _err(f"'{name}' in time period '{text_of(node)}' is not a variable",
                           amount, _did_you_mean(name, scope.variables)
                           or "a time-period amount is a number or a variable")
        parts.append((compile_expr(amount, scope), ast.UNIT_MS[unit]))

    def period(r: Any, c: PartitionCtx) -> Any:
        total = 0.0
        for fn, factor in parts:
            v = fn(r, c)
            if v is None:
                return None
            total += v * factor
        return total
    return period


def _compile_call(node: ast.Call, scope: Scope) -> Expr:
    name = node.name.lower()
    ufd = functions.user_function(node.name)
    if ufd is not None and not ufd.aggregate:
        return functions.compile_user_call(ufd, node, scope, compile_expr)
    if ufd is not None and not (scope.allow_aggregates or scope.aggregates is not None):
        raise _err(f"aggregation function '{node.name}' is not allowed here", node)
    if name in ("min", "max") and len(positional_args(node)) > 1 and not node.distinct:
        check_min_max_row(node, scope)
        return _compile_min_max(node, name, scope)
    if (ufd is not None or name in AGGREGATE_NAMES) and (
            scope.allow_aggregates or scope.aggregates is not None):
        if scope.aggregates is None:
            raise EplValidationError(
                f"aggregation function '{node.name}' is not allowed here",
                node.pos.line or None, node.pos.column or None)
        if any(isinstance(a, ast.NamedArg) and a.name.lower() == "group_by"
               for a in node.args):
            # Esper's grouping of one aggregation apart from the statement's
            raise NotSupportedExpr(f"{node.name}(..., group_by: ...), an aggregation grouped "
                                   "apart from the statement")
        text = text_of(node)
        idx = scope.agg_texts.get(text)
        if idx is None:
            vscope = scope.agg_value_scope or scope
            # Esper ref. 10.2: the values aggregated, and the filter (the last positional
            # argument of count/sum/avg/..., or the named 'filter:' of any aggregation)
            split = aggregate_args(node, vscope, user=ufd is not None)
            args = list(split.args)
            extra: tuple = ()
            if name in ("nth", "first", "last") and len(args) == 2:
                # Esper ref. "Aggregation functions": first(x, i), last(x, i), nth(x, i)
                try:
                    index = constant_value(args[1])
                except ValueError:
                    index = None
                if type(index) is not int or index < 0:
                    raise _err(f"the index of {name} must be a constant non-negative "
                               "integer", args[1], f"write {name}({text_of(args[0])}, 1)")
                extra = (index,)
                args = args[:1]
            value = None
            vs = Scope(vscope.kind, vscope.aliases, vscope.tags, vscope.variables,
                       tables=vscope.tables, outer=vscope.outer,
                       inner_props=vscope.inner_props, array_tags=vscope.array_tags)
            if ufd is not None:
                agg, value = functions.user_aggregator(ufd, replace(node, args=split.args),
                                                       vs, compile_expr)
                if node.distinct:
                    agg = Distinct(agg)
            else:
                if args and not node.star and not isinstance(args[0], ast.Star):
                    value = compile_expr(args[0], vs)
                star = node.star or (bool(args) and isinstance(args[0], ast.Star)) or (
                    name == "count" and not args)
                agg = make_aggregator(name, star=star, distinct=node.distinct, extra=extra,
                                      by_event=not scope.rows_leave_in_order)
            filt = compile_expr(split.filter, vs) if split.filter is not None else None
            idx = len(scope.aggregates)
            scope.aggregates.append(AggregateDef(text, agg, value, filt))
            scope.agg_texts[text] = idx
        i = idx
        if scope.agg_in_row:
            key = f"$agg{i}"
            return lambda r, c: r.get(key)
        def aggregate(r: Any, c: PartitionCtx) -> Any:
            return c.aggs[i] if c.aggs is not None else None
        aggregate.aggregate_index = i  # type: ignore[attr-defined]
        return aggregate
    if name in PREV_FUNCTIONS:
        from app.epl.prev import compile_prev

        return compile_prev(node, name, scope, compile_expr)
    if name == "prior":
        from app.epl.prev import compile_prior

        return compile_prior(node, scope)
    if name == "istream":
        if node.args:
            raise _err("istream() takes no parameters", node, "write istream()")
        return lambda r, c: c.is_new
    if name == "coalesce":
        args = [compile_expr(a, scope) for a in node.args]

        def coalesce(r: Any, c: PartitionCtx) -> Any:
            for a in args:
                v = a(r, c)
                if v is not None:
                    return v
            return None
        return coalesce
    if name in ("current_timestamp",):
        return lambda r, c: c.now_ms
    head, _, method = node.name.partition(".")
    if method and head in scope.array_tags and scope.kind in ("tags", "pfilter"):
        if scope.kind == "pfilter":
            raise _err(f"'{node.name}()' cannot be used in a pattern filter", node,
                       f"compare with {head}[index] here, or use {node.name}() in the "
                       f"select or where clause")
        return _compile_tag_method(node, head, method.lower(), scope)
    math_call = functions.compile_math_call(node, scope, compile_expr)
    if math_call is not None:
        return math_call
    fn = FUNCTIONS.get(name)
    if fn is None:
        near = functions.near_miss(node.name)
        if near is not None:
            raise _err(f"unknown function '{node.name}'", node, f"did you mean '{near}'?")
        raise NotSupportedExpr(f"function {node.name}()")
    args = [compile_expr(a, scope) for a in node.args]

    def call(r: Any, c: PartitionCtx) -> Any:
        vals = [a(r, c) for a in args]
        if any(v is None for v in vals):
            return None
        return fn(*vals)
    return call


def _compile_min_max(node: ast.Call, name: str, scope: Scope) -> Expr:
    """``min(a, b, ...)``/``max(a, b, ...)`` of several arguments: the single-row function
    (Esper ref. 10.1, min and max), null when any argument is null, in the widest
    numeric type of its arguments (a double among them makes the result a double)."""
    args = [compile_expr(a, scope) for a in node.args]
    pick = min if name == "min" else max

    def min_max(r: Any, c: PartitionCtx) -> Any:
        vals = [a(r, c) for a in args]
        if any(v is None for v in vals):
            return None
        if any(type(v) is float for v in vals):
            vals = [float(v) for v in vals]
        return pick(vals)
    return min_max


def is_aggregate_call(n: ast.Node) -> bool:
    """An aggregation call: a built-in one or a user aggregation function (``min`` and
    ``max`` of several arguments are the single-row functions, Esper ref. 10.1)."""
    if not isinstance(n, ast.Call):
        return False
    name = n.name.lower()
    if name in ("min", "max") and len(positional_args(n)) > 1 and not n.distinct:
        return False
    return name in AGGREGATE_NAMES or functions.is_user_aggregate(n.name)


def has_aggregate(node: ast.Node | None) -> bool:
    """Whether an expression contains an aggregate call."""
    return any(is_aggregate_call(n) for n in iter_nodes(node))


def names_in(node: ast.Node | None) -> list[ast.Name]:
    """Every Name node in an expression, in source order."""
    return [n for n in iter_nodes(node) if isinstance(n, ast.Name)]


_COMPILERS: dict[type[ast.Node], Callable[[Any, Scope], Expr]] = {
    ast.Literal: _compile_literal,
    ast.Name: _compile_name,
    ast.Binary: _compile_binary,
    ast.Unary: _compile_unary,
    ast.Between: _compile_between,
    ast.InList: _compile_in_list,
    ast.Like: _compile_like,
    ast.Regexp: _compile_regexp,
    ast.IsNull: _compile_is_null,
    ast.IsSame: _compile_is_same,
    ast.Case: _compile_case,
    ast.Cast: _compile_cast,
    ast.TimePeriod: _compile_time_period,
    ast.Call: _compile_call,
    ast.TableAccess: _compile_table_or_tag,
    ast.Star: _compile_star,
    ast.Subquery: _compile_subquery,
    ast.Exists: _compile_subquery,
    ast.InSubquery: _compile_subquery,
    ast.Quantified: _compile_subquery,
}
"""The compiler of each expression node class; a class not here is not supported."""

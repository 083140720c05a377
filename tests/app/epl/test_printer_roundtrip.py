"""Printer tests: exact output, and parse(to_epl(ast)) == ast for documents and random ASTs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.epl import ast as A
from app.epl.parser import (
    keywords,
    parse_expression,
    parse_module,
    parse_pattern,
    parse_statement,
)
from app.epl.printer import to_epl

DATA = Path(__file__).with_name("data") / "reference_statements.yaml"
REFERENCE: dict[str, list[dict[str, Any]]] = yaml.safe_load(DATA.read_text(encoding="utf-8"))
ROUND_TRIP = REFERENCE["statements"] + REFERENCE["invalid"] + REFERENCE["conformance"]

# nested strategies have long reprs; hypothesis warns about that, harmlessly
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --------------------------------------------------------------------- exact output


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("select count(*) as cnt, sum(amount) as total from Withdrawal#length(5)",
         "select count(*) as cnt, sum(amount) as total from Withdrawal#length(5)"),
        ("SELECT * FROM StockTickEvent.win:time(5 sec)",
         "select * from StockTickEvent.win:time(5 second)"),
        ("select * from T(id=e1.id, level <> e1.level)",
         "select * from T(id = e1.id and level != e1.level)"),
        ("context CtxEachMinute select context.id, avg(temp) from SensorEvent "
         "output snapshot every 1 minute and when terminated",
         "context CtxEachMinute select context.id, avg(temp) from SensorEvent "
         "output snapshot every 1 minute and when terminated"),
        ("create context NineToFive start (0, 9, *, *, *) end (0, 17, *, *, *)",
         "create context NineToFive start (0, 9, *, *, *) end (0, 17, *, *, *)"),
        ("create context C initiated @now and pattern [every timer:interval(1 minute)] "
         "terminated after 1 minutes",
         "create context C initiated by @now and pattern [every timer:interval(1 minute)] "
         "terminated by after 1 minute"),
        ("select * from pattern [every a=A -> (b=B or c=C) and not D]",
         "select * from pattern [every a=A -> (b=B or c=C) and not D]"),
        ("select (a + b) * c, a + b * c, -(x), not (a and b) from T",
         "select (a + b) * c, a + b * c, -x, not (a and b) from T"),
        ("from v in values within 1.5 every 1.0 select rstream v",
         "from v in values within 1.5 every 1.0 select rstream v"),
        ("on Withdrawal merge WithdrawalWindow insert select *",
         "on Withdrawal merge WithdrawalWindow insert select *"),
        ('select * from MyEvent#time_batch(10 sec, "FORCE_UPDATE, START_EAGER")',
         "select * from MyEvent#time_batch(10 second, 'FORCE_UPDATE, START_EAGER')"),
        ("create context X context A partition by a from T, context B start @now",
         "create context X context A partition by a from T, context B start @now"),
        ("create context K partition by a, b from T t, c and d from U initiated by U u "
         "terminated by T(x = u.x)",
         "create context K partition by a and b from T as t, c and d from U initiated by "
         "U as u terminated by T(x = u.x)"),
        ("create context O initiated by distinct(s0.x) S0 s0 terminated after 5 sec",
         "create context O initiated by distinct (s0.x) S0 as s0 terminated by after 5 second"),
        ("select a IS b, a is not (b + 1), a is null, a is not NULL from T",
         "select a is b, a is not b + 1, a is null, a is not null from T"),
    ],
)
def test_printed_text(text: str, printed: str) -> None:
    """Canonical output: lower-case keywords, single spaces, minimal parentheses."""
    assert to_epl(parse_statement(text)) == printed


def test_identifiers_that_would_lex_as_keywords_are_back_quoted() -> None:
    """Only names the lexer would take as keywords there are quoted (`not`, not context.id).

    'select' and 'from' are not keywords where a select item or a stream type
    stands (contextual lexer), so they stay bare and still read back.
    """
    node = A.SelectStatement(
        select_items=(A.SelectItem(A.Name(("select",))), A.SelectItem(A.Name(("not", "x"))),
                      A.SelectItem(A.Name(("context", "id"))), A.SelectItem(A.Name(("a b",)))),
        from_=(A.FilterStream("from"),))
    text = to_epl(node)
    assert text == "select select, `not`.x, context.id, `a b` from from"
    assert parse_statement(text) == node


def test_literal_printing() -> None:
    """Numbers keep their type; strings are escaped."""
    assert to_epl(A.Literal(5000, "long")) == "5000L"
    assert to_epl(A.Literal(2.0, "double")) == "2.0"
    assert to_epl(A.Literal(1e20, "double")) == "1e+20"
    assert to_epl(A.Literal("it's\n", "string")) == r"'it\'s\n'"
    assert to_epl(A.Literal(-3, "int")) == "-3"
    assert to_epl(A.Binary("-", A.Name(("a",)), A.Literal(-3, "int"))) == "a - -3"
    with pytest.raises(ValueError):
        to_epl(A.Literal(float("nan"), "double"))


def test_module_printing() -> None:
    """Statements joined by ';'."""
    stmts = parse_module("create schema A(x int); select x from A")
    module = A.Module(tuple(stmts))
    assert to_epl(module) == "create schema A (x int);\nselect x from A;"
    assert parse_module(to_epl(module)) == list(stmts)


# ------------------------------------------------------------- reference round trips


@pytest.mark.parametrize("entry", ROUND_TRIP,
                         ids=[str(k) for k in range(len(ROUND_TRIP))])
def test_reference_round_trip(entry: dict[str, Any]) -> None:
    """Every document and conformance statement prints and re-parses to the same AST."""
    first = parse_statement(entry["epl"])
    text = to_epl(first)
    again = parse_statement(text)
    assert again == first
    assert to_epl(again) == text  # printing is stable


@pytest.mark.parametrize("entry", REFERENCE["fragments"],
                         ids=[str(k) for k in range(len(REFERENCE["fragments"]))])
def test_fragment_round_trip(entry: dict[str, Any]) -> None:
    """Patterns and expressions printed inside the documents' prose."""
    if entry["kind"] == "pattern":
        node = parse_pattern(entry["text"])
        assert parse_pattern(to_epl(node)) == node
    elif entry["kind"] == "expression":
        node = parse_expression(entry["text"])
        assert parse_expression(to_epl(node)) == node


# ------------------------------------------------------------------ random ASTs


KEYWORDS = sorted(keywords() | {"context", "count", "size", "window", "last", "first"})
plain_idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
keyword_idents = st.sampled_from(KEYWORDS)
odd_idents = st.text(
    st.characters(blacklist_characters="`\n", blacklist_categories=("Cs",)),
    min_size=1, max_size=5)
idents = st.one_of(plain_idents, plain_idents, keyword_idents, odd_idents)
word_idents = st.one_of(plain_idents, keyword_idents)
type_names = st.builds(
    lambda parts, arr: ".".join(parts) + ("[]" if arr else ""),
    st.lists(word_idents, min_size=1, max_size=2), st.booleans())

numbers = st.one_of(
    st.builds(A.Literal, st.integers(-10**12, 10**12), st.just("int")),
    st.builds(A.Literal, st.integers(-10**15, 10**15), st.just("long")),
    st.builds(A.Literal, st.floats(allow_nan=False, allow_infinity=False), st.just("double")),
)
literals = st.one_of(
    numbers,
    st.builds(A.Literal, st.text(max_size=8), st.just("string")),
    st.builds(A.Literal, st.booleans(), st.just("boolean")),
    st.just(A.Literal(None, "null")),
)
names = st.builds(lambda parts: A.Name(tuple(parts)), st.lists(idents, min_size=1, max_size=3))
units = st.sampled_from(sorted(set(A.UNIT_MS)))
amounts = st.one_of(
    st.builds(A.Literal, st.integers(0, 1000), st.just("int")),
    st.builds(A.Literal, st.floats(0, 1e6, allow_nan=False), st.just("double")),
    st.builds(lambda p: A.Name((p,)), idents),
)
time_periods = st.builds(
    lambda parts: A.TimePeriod(tuple(parts)),
    st.lists(st.tuples(amounts, units), min_size=1, max_size=3))


def _call(name: str, args: list[A.Node], distinct: bool, star: bool) -> A.Call:
    """A Call the parser can produce (star alone; distinct before a plain first argument)."""
    if star:
        return A.Call(name, (), False, True)
    if len(args) == 1 and isinstance(args[0], A.Star):
        args = [A.Name(("x",))]
    if distinct and (not args or isinstance(args[0], (A.Star, A.NamedArg))):
        distinct = False
    return A.Call(name, tuple(args), distinct, False)


def _unary_minus(operand: A.Node) -> A.Node:
    """'-x' as the parser builds it (numbers are folded into the literal)."""
    if isinstance(operand, A.Literal) and operand.type in ("int", "long", "double"):
        return A.Literal(-operand.value, operand.type)  # type: ignore[operator]
    return A.Unary("-", operand)


call_names = st.one_of(
    st.builds(lambda p: ".".join(p), st.lists(word_idents, min_size=1, max_size=2)),
    st.builds(lambda a, b: f"{a}:{b}", plain_idents, plain_idents),
)


def _extend(children: st.SearchStrategy[A.Node]) -> st.SearchStrategy[A.Node]:
    """Compound expressions over smaller ones."""
    ops = st.sampled_from(["+", "-", "*", "/", "%", "||", "=", "!=", "<", "<=", ">", ">=",
                           "and", "or"])
    args = st.lists(
        st.one_of(children, children, st.just(A.Star()),
                  st.builds(A.NamedArg, idents, children)),
        max_size=3)
    return st.one_of(
        st.builds(A.Binary, ops, children, children),
        st.builds(A.Unary, st.just("not"), children),
        st.builds(_unary_minus, children),
        st.builds(A.Between, children, children, children, st.booleans()),
        st.builds(lambda e, items, neg: A.InList(e, tuple(items), neg),
                  children, st.lists(children, min_size=1, max_size=3), st.booleans()),
        st.builds(A.InRange, children, children, children, st.booleans(), st.booleans(),
                  st.booleans()),
        st.builds(A.Like, children, children, st.none() | children, st.booleans()),
        st.builds(A.Regexp, children, children, st.booleans()),
        st.builds(A.IsNull, children, st.booleans()),
        st.builds(lambda op, whens, el: A.Case(op, tuple(whens), el),
                  st.none() | children,
                  st.lists(st.tuples(children, children), min_size=1, max_size=2),
                  st.none() | children),
        st.builds(_call, call_names, args, st.booleans(), st.booleans()),
        st.builds(A.Cast, children, type_names),
        st.builds(lambda t, keys, col: A.TableAccess(t, tuple(keys), col),
                  idents, st.lists(children, min_size=1, max_size=2), st.none() | idents),
    )


expressions = st.recursive(st.one_of(literals, names, time_periods), _extend, max_leaves=12)

cron_simple = st.one_of(
    expressions,
    st.just(A.CronStar()),
    st.builds(A.CronStep, expressions),
    st.builds(A.CronRange, expressions, expressions),
    st.builds(A.CronLast, st.none() | expressions),
    st.builds(A.CronWeekday, expressions),
    st.just(A.CronLastWeekday()),
)
cron_fields = st.one_of(
    cron_simple,
    st.builds(lambda items: A.CronList(tuple(items)), st.lists(cron_simple, min_size=1,
                                                                max_size=3)))
crontabs = st.builds(lambda f: A.Crontab(tuple(f)), st.lists(cron_fields, min_size=5, max_size=7))


def _every_distinct(exprs: list[A.Node], period: A.Node | None, child: A.Node) -> A.Node:
    """every-distinct as the parser builds it (a last time period is the expiry)."""
    if period is None and len(exprs) > 1 and isinstance(exprs[-1], A.TimePeriod):
        period = exprs.pop()
    return A.PEveryDistinct(tuple(exprs), period, child)


def _repeat(kind: int, low: A.Node | None, high: A.Node | None, child: A.Node,
            until: A.Node) -> A.PRepeat:
    """The four repeat / until shapes."""
    if kind == 0:
        return A.PRepeat(child, until=until)
    if kind == 1:
        return A.PRepeat(child, low or A.Literal(2, "int"), None, False, None)
    if kind == 2:
        return A.PRepeat(child, low, high, True, None)
    return A.PRepeat(child, low, high, True, until)


pattern_atoms = st.one_of(
    st.builds(A.PFilter, st.none() | idents, idents, st.none() | expressions),
    st.builds(A.PTimerInterval, expressions),
    st.builds(A.PTimerAt, crontabs),
)


def _pattern_extend(children: st.SearchStrategy[A.Node]) -> st.SearchStrategy[A.Node]:
    """Compound patterns over smaller ones."""
    many = st.lists(children, min_size=2, max_size=3).map(tuple)
    return st.one_of(
        st.builds(A.PEvery, children),
        st.builds(A.PNot, children),
        st.builds(_every_distinct, st.lists(expressions, min_size=1, max_size=2),
                  st.none() | time_periods, children),
        st.builds(A.PGuard, children, expressions),
        st.builds(A.PGuardWhile, children, expressions),
        st.builds(_repeat, st.integers(0, 3), st.none() | expressions, st.none() | expressions,
                  children, children),
        st.builds(A.PFollowedBy, many),
        st.builds(A.PAnd, many),
        st.builds(A.POr, many),
    )


patterns = st.recursive(pattern_atoms, _pattern_extend, max_leaves=6)

views = st.builds(
    lambda ns, name, params, dot: A.View(ns, name, tuple(params),
                                         syntax="." if dot and ns else "#"),
    st.none() | idents, idents,
    st.lists(st.one_of(expressions, st.builds(A.SortSpec, expressions, st.booleans()),
                       st.just(A.Star())), max_size=3),
    st.booleans())
retains = st.sampled_from([None, "retain-union", "retain-intersection"])
streams = st.one_of(
    st.builds(lambda t, f, v, a, r, u: A.FilterStream(t, f, tuple(v), a, r, u),
              idents, st.none() | expressions, st.lists(views, max_size=2), st.none() | idents,
              retains, st.booleans()),
    st.builds(lambda p, a, v, r, u: A.PatternStream(p, a, tuple(v), r, u),
              patterns, st.none() | idents, st.lists(views, max_size=2), retains, st.booleans()),
)
select_items = st.one_of(
    st.builds(A.SelectItem, expressions, st.none() | idents),
    st.builds(A.Wildcard, st.none() | idents),
)
assignments = st.builds(A.Assignment, names, expressions)
counts = st.one_of(st.builds(A.Literal, st.integers(0, 1000), st.just("int")), names)


@st.composite
def output_clauses(draw: st.DrawFn) -> A.OutputClause:
    """Every output clause shape the grammar allows."""
    kw: dict[str, Any] = {"kind": draw(st.sampled_from([None, "all", "first", "last",
                                                         "snapshot"]))}
    if draw(st.booleans()):
        if draw(st.booleans()):
            kw.update(after=draw(time_periods))
        else:
            kw.update(after=draw(counts), after_events=True)
    trigger = draw(st.sampled_from(["none", "every_time", "every_count", "at", "when",
                                    "terminated"]))
    terminated_part = False
    if trigger == "every_time":
        kw["every_time"] = draw(time_periods)
        terminated_part = draw(st.booleans())
    elif trigger == "every_count":
        kw.update(every_count=draw(counts), every_unit="events")
        terminated_part = draw(st.booleans())
    elif trigger == "at":
        kw["at"] = draw(crontabs)
        terminated_part = draw(st.booleans())
    elif trigger == "when":
        kw["when"] = draw(expressions)
        kw["then_set"] = tuple(draw(st.lists(assignments, max_size=2)))
    elif trigger == "terminated":
        kw["when_terminated"] = True
        kw["terminated_and"] = draw(st.none() | expressions)
        kw["then_set"] = tuple(draw(st.lists(assignments, max_size=2)))
    if terminated_part:
        kw["and_when_terminated"] = True
        kw["terminated_and"] = draw(st.none() | expressions)
        kw["then_set"] = tuple(draw(st.lists(assignments, max_size=2)))
    return A.OutputClause(**kw)


annotations = st.lists(
    st.builds(lambda n, a: A.Annotation(n, tuple(a)), idents,
              st.lists(expressions, max_size=2)), max_size=2).map(tuple)
kinds = st.sampled_from([None, "istream", "rstream", "irstream"])


@st.composite
def select_statements(draw: st.DrawFn) -> A.SelectStatement:
    """Select statements with any combination of clauses."""
    target = draw(st.sampled_from(["none", "insert", "table"]))
    insert = None
    table = None
    if target == "insert":
        insert = A.InsertInto(draw(kinds), draw(idents),
                              tuple(draw(st.lists(idents, max_size=2))))
    elif target == "table":
        table = draw(idents)
    limit = None
    if draw(st.booleans()):
        limit = A.Limit(draw(expressions), draw(st.none() | expressions))
    return A.SelectStatement(
        annotations=draw(annotations),
        context=draw(st.none() | idents),
        insert_into=insert,
        into_table=table,
        stream_kind=draw(kinds),
        distinct=draw(st.booleans()),
        select_items=tuple(draw(st.lists(select_items, min_size=1, max_size=3))),
        from_=tuple(draw(st.lists(streams, min_size=1, max_size=2))),
        where=draw(st.none() | expressions),
        group_by=tuple(draw(st.lists(expressions, max_size=2))),
        having=draw(st.none() | expressions),
        output=draw(st.none() | output_clauses()),
        order_by=tuple(draw(st.lists(st.builds(A.OrderItem, expressions, st.booleans()),
                                     max_size=2))),
        limit=limit,
    )


filters = st.none() | expressions
conditions = st.one_of(
    st.builds(A.CondFilter, idents, filters, st.none() | idents),
    st.builds(A.CondPattern, patterns, st.booleans(), st.none() | idents),
    st.builds(A.CondCrontab, crontabs),
    st.builds(A.CondAfter, expressions),
)
simple_specs = st.one_of(
    st.builds(lambda items: A.KeyedContext(tuple(items)), st.lists(
        st.builds(lambda p, t, f, a: A.KeyedItem(tuple(p), t, f, a),
                  st.lists(names, min_size=1, max_size=2), idents, filters, st.none() | idents),
        min_size=1, max_size=2)),
    st.builds(lambda items, g, p: A.HashContext(tuple(items), g, p), st.lists(
        st.builds(lambda f, a, t, flt: A.HashItem(f, tuple(a), t, flt), idents,
                  st.one_of(st.lists(expressions, max_size=2), st.just([A.Star()])),
                  idents, filters), min_size=1, max_size=2), expressions, st.booleans()),
    st.builds(lambda groups, t, f: A.CategoryContext(tuple(groups), t, f), st.lists(
        st.builds(A.CategoryGroup, expressions, idents), min_size=1, max_size=2), idents, filters),
    st.builds(A.NonOverlappingContext, conditions | st.just(A.CondNow()), st.none() | conditions),
    st.builds(lambda i, t, d: A.OverlappingContext(i, t, tuple(d)),
              conditions | st.builds(A.CondNowAnd, conditions), st.none() | conditions,
              st.lists(expressions, max_size=2)),
)
context_specs = st.one_of(
    simple_specs,
    st.builds(lambda items: A.NestedContext(tuple(items)), st.lists(
        st.builds(A.NestedItem, idents, simple_specs), min_size=2, max_size=3)),
)
create_contexts = st.builds(A.CreateContext, annotations, idents, context_specs)

schema_fields = st.lists(st.tuples(idents, type_names), max_size=3).map(tuple)


@st.composite
def create_windows(draw: st.DrawFn) -> A.CreateWindow:
    """create window with a type, a select list or columns."""
    source = draw(st.sampled_from(["type", "select", "columns"]))
    kw: dict[str, Any] = {}
    if source == "type":
        kw["type_name"] = draw(idents)
    elif source == "select":
        kw["type_name"] = draw(idents)
        kw["select_items"] = tuple(draw(st.lists(select_items, min_size=1, max_size=2)))
    else:
        kw["columns"] = tuple(draw(st.lists(st.tuples(idents, type_names), min_size=1,
                                            max_size=2)))
    insert = draw(st.booleans())
    return A.CreateWindow(
        annotations=draw(annotations), context=draw(st.none() | idents), name=draw(idents),
        views=tuple(draw(st.lists(views, max_size=2))), insert=insert,
        insert_where=draw(st.none() | expressions) if insert else None, **kw)


table_columns = st.one_of(
    st.builds(A.TableColumn, idents, type_names, st.booleans(), st.none()),
    st.builds(lambda n, c: A.TableColumn(n, None, False, c), idents,
              st.builds(_call, call_names, st.lists(names, max_size=2), st.booleans(),
                        st.booleans())),
)
insert_intos = st.builds(lambda k, n, c: A.InsertInto(k, n, tuple(c)), kinds, idents,
                         st.lists(idents, max_size=2))
merge_inserts = st.builds(lambda into, cols, items, where: A.MergeInsert(
    into, tuple(cols), tuple(items), where), st.none() | idents, st.lists(idents, max_size=2),
    st.lists(select_items, min_size=1, max_size=2), st.none() | expressions)
merge_actions = st.one_of(
    st.builds(lambda a, w: A.MergeUpdate(tuple(a), w), st.lists(assignments, min_size=1,
                                                                  max_size=2),
              st.none() | expressions),
    st.builds(A.MergeDelete, st.none() | expressions),
    merge_inserts,
)
on_actions = st.one_of(
    st.builds(A.OnDelete, idents, st.none() | idents, st.none() | expressions),
    st.builds(lambda ins, d, dist, items, w, a, where, g, h, o: A.OnSelect(
        ins, d, dist, tuple(items), w, a, where, tuple(g), h, tuple(o)),
        st.none() | insert_intos.map(lambda x: A.InsertInto(None, x.name, x.columns)),
        st.booleans(), st.booleans(), st.lists(select_items, min_size=1, max_size=2), idents,
        st.none() | idents, st.none() | expressions, st.lists(expressions, max_size=1),
        st.none() | expressions,
        st.lists(st.builds(A.OrderItem, expressions, st.booleans()), max_size=1)),
    st.builds(lambda w, a, s, where: A.OnUpdate(w, a, tuple(s), where), idents,
              st.none() | idents, st.lists(assignments, min_size=1, max_size=2),
              st.none() | expressions),
    st.builds(lambda s: A.OnSet(tuple(s)), st.lists(assignments, min_size=1, max_size=2)),
    st.builds(lambda w, a, where, clauses: A.OnMerge(w, a, where, tuple(clauses)),
              idents, st.none() | idents, st.none() | expressions, st.lists(st.one_of(
                  st.builds(lambda m, c, acts: A.MergeWhen(m, c, tuple(acts)), st.booleans(),
                            st.none() | expressions,
                            st.lists(merge_actions, min_size=1, max_size=2)),
                  merge_inserts), min_size=1, max_size=2)),
)
triggers = st.one_of(
    st.builds(lambda t, f, a: A.FilterStream(t, f, (), a), idents, filters, st.none() | idents),
    st.builds(lambda p, a: A.PatternStream(p, a), patterns, st.none() | idents),
)


@st.composite
def apama_queries(draw: st.DrawFn) -> A.ApamaQuery:
    """Apama stream queries with each batched-window form (Apama batched windows)."""
    form = draw(st.sampled_from(["none", "within", "retain"]))
    within = every = retain = None
    if form == "within":
        within = draw(expressions)
        every = draw(st.none() | expressions)
        retain = draw(st.none() | expressions)
    elif form == "retain":
        retain = draw(expressions)
        every = draw(st.none() | expressions)
    return A.ApamaQuery(draw(annotations), draw(idents), draw(idents), within, every, retain,
                        draw(st.booleans()),
                        tuple(draw(st.lists(select_items, min_size=1, max_size=2))))


statements = st.one_of(
    select_statements(),
    create_contexts,
    st.builds(A.CreateSchema, annotations, idents, schema_fields),
    create_windows(),
    st.builds(lambda an, c, n, cols: A.CreateTable(an, c, n, tuple(cols)), annotations,
              st.none() | idents, idents, st.lists(table_columns, min_size=1, max_size=3)),
    st.builds(A.CreateVariable, annotations, st.none() | idents, type_names, idents,
              st.none() | expressions, st.booleans()),
    st.builds(lambda an, c, n, w, cols, u: A.CreateIndex(an, c, n, w, tuple(cols), u),
              annotations, st.none() | idents, idents, idents,
              st.lists(st.builds(A.IndexColumn, idents, st.none() | idents), min_size=1,
                       max_size=2), st.booleans()),
    st.builds(A.OnStatement, annotations, st.none() | idents, triggers, on_actions),
    apama_queries(),
)


@FAST
@given(expressions)
def test_random_expressions_round_trip(expr: A.Node) -> None:
    """parse_expression(to_epl(e)) == e for generated expressions."""
    assert parse_expression(to_epl(expr)) == expr


@FAST
@given(patterns)
def test_random_patterns_round_trip(pattern: A.Node) -> None:
    """parse_pattern(to_epl(p)) == p for generated patterns."""
    assert parse_pattern(to_epl(pattern)) == pattern


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(statements)
def test_random_statements_round_trip(statement: A.Node) -> None:
    """parse_statement(to_epl(s)) == s for every generated statement kind."""
    assert parse_statement(to_epl(statement)) == statement


@FAST
@given(st.lists(statements, max_size=3))
def test_random_modules_round_trip(stmts: list[A.Node]) -> None:
    """parse_module(to_epl(Module)) gives the statements back."""
    assert parse_module(to_epl(A.Module(tuple(stmts)))) == stmts

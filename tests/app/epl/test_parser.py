"""Parser tests: exact ASTs for targeted statements, the reference statements, speed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.epl import ast as A
from app.epl.errors import EplSyntaxError
from app.epl.parser import (
    parse_expression,
    parse_module,
    parse_pattern,
    parse_statement,
    source_text,
)

DATA = Path(__file__).with_name("data") / "reference_statements.yaml"
REFERENCE: dict[str, list[dict[str, Any]]] = yaml.safe_load(DATA.read_text(encoding="utf-8"))
CASES_DIR = Path("/work/shared/conformance/cases")


def n(*parts: str) -> A.Name:
    """Shorthand for a Name node."""
    return A.Name(parts)


def i(value: int) -> A.Literal:
    """Shorthand for an int literal."""
    return A.Literal(value, "int")


def s(value: str) -> A.Literal:
    """Shorthand for a string literal."""
    return A.Literal(value, "string")


def tp(*parts: tuple[A.Node | int, str]) -> A.TimePeriod:
    """Shorthand for a time period; ints become int literals."""
    return A.TimePeriod(tuple((i(a) if isinstance(a, int) else a, u) for a, u in parts))


def item(expr: A.Node, alias: str | None = None) -> A.SelectItem:
    """Shorthand for a select item."""
    return A.SelectItem(expr, alias)


def call(name: str, *args: A.Node, **kw: Any) -> A.Call:
    """Shorthand for a call."""
    return A.Call(name, tuple(args), **kw)


# ------------------------------------------------------------------ select statements


def test_count_sum_length_window_exact() -> None:
    """Esper ref. 2 / FORMAT.md example: every node of the statement."""
    got = parse_statement(
        "select count(*) as cnt, sum(amount) as total from Withdrawal#length(5)")
    assert got == A.SelectStatement(
        select_items=(
            item(A.Call("count", (), star=True), "cnt"),
            item(call("sum", n("amount")), "total"),
        ),
        from_=(A.FilterStream("Withdrawal", views=(A.View(None, "length", (i(5),)),)),),
    )


def test_keywords_are_case_insensitive_and_identifiers_keep_case() -> None:
    """SELECT / From / WHERE work; identifiers keep their spelling."""
    got = parse_statement("SELECT Account FROM Withdrawal WHERE Amount >= 200")
    assert got == A.SelectStatement(
        select_items=(item(n("Account")),),
        from_=(A.FilterStream("Withdrawal"),),
        where=A.Binary(">=", n("Amount"), i(200)),
    )


def test_filter_list_becomes_conjunction() -> None:
    """Esper ref. 4.2.7.1: T(a, b) is a and b; '<>' is stored as '!='."""
    got = parse_statement("select * from T(id=e1.id, level <> e1.level)")
    assert got.from_[0].filter == A.Binary(
        "and",
        A.Binary("=", n("id"), n("e1", "id")),
        A.Binary("!=", n("level"), n("e1", "level")),
    )
    assert got.select_items == (A.Wildcard(None),)


def test_stream_kinds_insert_into_and_wildcards() -> None:
    """Esper ref. 14.3.21 Time-Order Window: insert rstream into ... select rstream * ..."""
    got = parse_statement(
        "insert rstream into ArrivalTimeOrderedStream "
        "select rstream * from MyTimestampedEvent#time_order(arrival_time, 10 sec)")
    assert got.insert_into == A.InsertInto("rstream", "ArrivalTimeOrderedStream", ())
    assert got.stream_kind == "rstream"
    assert got.select_items == (A.Wildcard(None),)
    assert got.from_[0].views == (
        A.View(None, "time_order", (n("arrival_time"), tp((10, "second")))),)
    cols = parse_statement("insert into Out(a, b) select irstream s.*, x from S as s")
    assert cols.insert_into == A.InsertInto(None, "Out", ("a", "b"))
    assert cols.stream_kind == "irstream"
    assert cols.select_items == (A.Wildcard("s"), item(n("x")))
    assert cols.from_[0].alias == "s"


def test_window_spellings_have_equal_asts() -> None:
    """Esper ref. 14.1: #time, #win:time and .win:time; the spelling is not compared."""
    plain = parse_statement("select * from StockTickEvent#time(5 sec)")
    hashed = parse_statement("select * from StockTickEvent#win:time(5 sec)")
    dotted = parse_statement("select * from StockTickEvent.win:time(5 sec)")
    assert hashed == dotted
    assert hashed.from_[0].views == (A.View("win", "time", (tp((5, "second")),)),)
    assert dotted.from_[0].views[0].syntax == "."
    assert plain.from_[0].views == (A.View(None, "time", (tp((5, "second")),)),)


def test_keepall_with_and_without_parentheses() -> None:
    """Esper ref. 14.1 A Note on Data Window Name and Parameters: the four keep-all spellings."""
    texts = ["#keepall", "#keepall()", ".win:keepall()", ".win:keepall"]
    views = [parse_statement(f"select * from E{t}").from_[0].views for t in texts]
    assert views[0] == views[1] == (A.View(None, "keepall", ()),)
    assert views[2] == views[3] == (A.View("win", "keepall", ()),)


def test_window_parameters_sort_specs_strings_longs_and_star() -> None:
    """Window parameters: sort specs, flow-control strings, long literals, '*'."""
    rank = parse_statement("select * from S#rank(market, symbol, 10, price desc, qty asc)")
    assert rank.from_[0].views[0].params == (
        n("market"), n("symbol"), i(10), A.SortSpec(n("price"), True),
        A.SortSpec(n("qty"), False))
    batch = parse_statement('select * from MyEvent#time_batch(10 sec, "FORCE_UPDATE, START_EAGER")')
    assert batch.from_[0].views[0].params == (tp((10, "second")), s("FORCE_UPDATE, START_EAGER"))
    ref = parse_statement("select * from OrderSummaryEvent#time_batch(1 hour, 5000L)")
    assert ref.from_[0].views[0].params == (tp((1, "hour")), A.Literal(5000, "long"))
    uni = parse_statement("select * from S#length(10)#uni(price, symbol, *)")
    assert uni.from_[0].views[1] == A.View(None, "uni", (n("price"), n("symbol"), A.Star()))
    size = parse_statement("select * from S#time(1 min)#size(*)")
    assert size.from_[0].views[1] == A.View(None, "size", (A.Star(),))


def test_groupwin_merge_chain_and_namespaces() -> None:
    """Esper ref. 14.3.15: several windows chained; std:/ext:/stat: namespaces."""
    got = parse_statement(
        "select * from Market#groupwin(ticker)#length(1000000)\n"
        "    #weighted_avg(price, volume)#merge(ticker)")
    assert [v.name for v in got.from_[0].views] == ["groupwin", "length", "weighted_avg", "merge"]
    ns = parse_statement("select * from S.std:unique(a, b).ext:sort(3, p desc)#stat:uni(p)")
    assert [(v.namespace, v.name) for v in ns.from_[0].views] == [
        ("std", "unique"), ("ext", "sort"), ("stat", "uni")]


def test_retain_union_alias_unidirectional_and_joins() -> None:
    """from-clause options and comma joins (Esper ref. 2, statement types)."""
    got = parse_statement(
        "select * from Withdrawal unidirectional, BankInformationWindow b, "
        "S#time(10)#length(5) as x retain-union, T#a#b retain-intersection")
    f = got.from_
    assert f[0] == A.FilterStream("Withdrawal", unidirectional=True)
    assert f[1] == A.FilterStream("BankInformationWindow", alias="b")
    assert f[2].alias == "x" and f[2].retain == "retain-union"
    assert f[3].retain == "retain-intersection" and len(f[3].views) == 2


def test_pattern_stream_with_views_and_alias() -> None:
    """Esper ref. 14.4.1: pattern[...]#size; a pattern stream may have an alias."""
    got = parse_statement(
        "select size from pattern[every s=StockTickEvent -> TradeEvent(symbol=s.symbol)]#size")
    stream = got.from_[0]
    assert stream == A.PatternStream(
        A.PFollowedBy((
            A.PEvery(A.PFilter("s", "StockTickEvent")),
            A.PFilter(None, "TradeEvent", A.Binary("=", n("symbol"), n("s", "symbol"))),
        )),
        views=(A.View(None, "size", ()),),
    )
    aliased = parse_statement("select p.a from pattern [A] as p")
    assert aliased.from_[0].alias == "p"


def test_group_by_having_order_by_limit() -> None:
    """Clause order of Esper: where, group by, having, output, order by, limit."""
    got = parse_statement(
        "select symbol, sum(price) as total from S#length(10) where price > 0 "
        "group by symbol having sum(price) > 100 output every 5 events "
        "order by total desc, symbol limit 10 offset 2")
    assert got.group_by == (n("symbol"),)
    assert got.having == A.Binary(">", call("sum", n("price")), i(100))
    assert got.order_by == (A.OrderItem(n("total"), True), A.OrderItem(n("symbol"), False))
    assert got.limit == A.Limit(i(10), i(2))
    assert got.output == A.OutputClause(every_count=i(5), every_unit="events")
    comma = parse_statement("select * from S limit 2, 10")
    assert comma.limit == A.Limit(i(10), i(2))


def test_aggregates_and_special_functions() -> None:
    """Aggregates, count(distinct), window(*), prev/prior, named args, dotted calls."""
    got = parse_expression(
        "count(distinct x) + median(a) + window(*) + prev(1, price) + prior(2, price) "
        "+ prevwindow(*) + sum(amount, group_by: account) + Math.round(x) + my:fn(1)")
    terms: list[A.Node] = []
    node = got
    while isinstance(node, A.Binary):
        terms.insert(0, node.right)
        node = node.left
    terms.insert(0, node)
    assert terms == [
        A.Call("count", (n("x"),), distinct=True),
        call("median", n("a")),
        A.Call("window", (), star=True),
        call("prev", i(1), n("price")),
        call("prior", i(2), n("price")),
        A.Call("prevwindow", (), star=True),
        call("sum", n("amount"), A.NamedArg("group_by", n("account"))),
        call("Math.round", n("x")),
        call("my:fn", i(1)),
    ]


def test_context_properties_and_keyword_like_names() -> None:
    """context.te.trainId is a Name; soft keywords stay usable as property names."""
    got = parse_statement(
        "select context.id, context.te.trainId, size, last, first, window, end "
        "from S")
    assert [x.expr for x in got.select_items] == [
        n("context", "id"), n("context", "te", "trainId"), n("size"), n("last"),
        n("first"), n("window"), n("end")]
    quoted = parse_statement("select `select`, `my prop`.x from `from`")
    assert [x.expr for x in quoted.select_items] == [n("select"), n("my prop", "x")]
    assert quoted.from_[0].type_name == "from"


def test_more_aggregation_functions_and_context_wildcard() -> None:
    """first/last/leaving/nth/countever/prevtail/prevcount are plain calls; context.* works."""
    got = parse_statement(
        "select first(price), last(price), leaving(), nth(price, 1), countever(*), "
        "prevtail(price), prevcount(price), stddev(p), avedev(p), context.* from T")
    assert [x.expr if isinstance(x, A.SelectItem) else x for x in got.select_items] == [
        call("first", n("price")), call("last", n("price")), call("leaving"),
        call("nth", n("price"), i(1)), A.Call("countever", (), star=True),
        call("prevtail", n("price")), call("prevcount", n("price")), call("stddev", n("p")),
        call("avedev", n("p")), A.Wildcard("context")]


def test_comma_context_only_starts_a_nested_context_item() -> None:
    """', context' followed by 'as <keyword>' or '.id' is an ordinary select item."""
    got = parse_statement("select a, context as start, context.id from T;;")
    assert [x.expr for x in got.select_items] == [n("a"), n("context"), n("context", "id")]
    assert got.select_items[1].alias == "start"


# ------------------------------------------------------------------------ expressions


def test_expression_precedence() -> None:
    """or < and < not < = < relational < || < + < * < unary minus."""
    assert parse_expression("a or b and not c = d") == A.Binary(
        "or", n("a"), A.Binary("and", n("b"), A.Unary("not", A.Binary("=", n("c"), n("d")))))
    assert parse_expression("1 + 2 * 3 - 4") == A.Binary(
        "-", A.Binary("+", i(1), A.Binary("*", i(2), i(3))), i(4))
    assert parse_expression("a || b + 1 < c") == A.Binary(
        "<", A.Binary("||", n("a"), A.Binary("+", n("b"), i(1))), n("c"))
    assert parse_expression("-x * -3 % (2 - 1)") == A.Binary(
        "%", A.Binary("*", A.Unary("-", n("x")), i(-3)), A.Binary("-", i(2), i(1)))


def test_literals() -> None:
    """int, long, double, strings with escapes, booleans, null."""
    assert parse_expression("5") == i(5)
    assert parse_expression("5000L") == A.Literal(5000, "long")
    assert parse_expression("1.5") == A.Literal(1.5, "double")
    assert parse_expression("1e3") == A.Literal(1000.0, "double")
    assert parse_expression("2d") == A.Literal(2.0, "double")
    assert parse_expression("-2.5") == A.Literal(-2.5, "double")
    assert parse_expression(r"'it\'s'") == s("it's")
    assert parse_expression('"a\\nb"') == s("a\nb")
    assert parse_expression("TRUE") == A.Literal(True, "boolean")
    assert parse_expression("false") == A.Literal(False, "boolean")
    assert parse_expression("null") == A.Literal(None, "null")


def test_between_in_like_regexp_is_null() -> None:
    """Predicates with their negated forms."""
    assert parse_expression("temp between 65 and 85") == A.Between(n("temp"), i(65), i(85))
    assert parse_expression("a not between 1 and 2 and b") == A.Binary(
        "and", A.Between(n("a"), i(1), i(2), True), n("b"))
    assert parse_expression("x in (1, 2, 3)") == A.InList(n("x"), (i(1), i(2), i(3)))
    assert parse_expression("x not in ('a')") == A.InList(n("x"), (s("a"),), True)
    assert parse_expression("x in [1:5)") == A.InRange(n("x"), i(1), i(5), True, False)
    assert parse_expression("x not in (1:5]") == A.InRange(n("x"), i(1), i(5), False, True, True)
    assert parse_expression("name like 'A%' escape '!'") == A.Like(n("name"), s("A%"), s("!"))
    assert parse_expression("name not like 'A%'") == A.Like(n("name"), s("A%"), None, True)
    assert parse_expression("name regexp '.*x'") == A.Regexp(n("name"), s(".*x"))
    assert parse_expression("name not regexp 'x'") == A.Regexp(n("name"), s("x"), True)
    assert parse_expression("a is null") == A.IsNull(n("a"))
    assert parse_expression("a is not null") == A.IsNull(n("a"), True)


def test_case_cast_coalesce() -> None:
    """case (both forms), cast (both spellings), coalesce as a call."""
    assert parse_expression("case when a > 1 then 'x' when a > 0 then 'y' else 'z' end") == A.Case(
        None, ((A.Binary(">", n("a"), i(1)), s("x")), (A.Binary(">", n("a"), i(0)), s("y"))),
        s("z"))
    assert parse_expression("case a when 1 then 2 end") == A.Case(n("a"), ((i(1), i(2)),), None)
    assert parse_expression("cast(x, double)") == A.Cast(n("x"), "double")
    assert parse_expression("cast(x as java.lang.String)") == A.Cast(n("x"), "java.lang.String")
    assert parse_expression("coalesce(a, b, 0)") == call("coalesce", n("a"), n("b"), i(0))


def test_time_periods() -> None:
    """Esper ref. 5.2.1 time periods; units normalised; ms() when literal."""
    period = parse_expression("2 minutes 5 seconds")
    assert period == tp((2, "minute"), (5, "second"))
    assert period.ms() == 125_000
    assert parse_expression("125 sec").ms() == 125_000
    assert parse_expression("1.5 sec") == A.TimePeriod(((A.Literal(1.5, "double"), "second"),))
    assert parse_expression("10 msec").ms() == 10
    assert parse_expression("1 hour 1 min 1 usec").ms() == 3_660_000.001
    assert parse_expression("1 year").ms() == 365 * 86_400_000
    assert parse_expression("2 weeks 1 day").ms() == 15 * 86_400_000
    var = parse_expression("VAR milliseconds")
    assert var == A.TimePeriod(((n("VAR"), "millisecond"),))
    assert var.ms() is None
    units = ["year", "years", "month", "months", "week", "weeks", "day", "days", "hour", "hours",
             "minute", "minutes", "min", "second", "seconds", "sec", "millisecond",
             "milliseconds", "msec", "microsecond", "microseconds", "usec"]
    for unit in units:
        assert isinstance(parse_expression(f"3 {unit.upper()}"), A.TimePeriod)


def test_comments_and_whitespace() -> None:
    """// and /* */ comments are ignored."""
    got = parse_statement("/* head */ select a // trailing\n from /* mid */ T")
    assert got == A.SelectStatement(select_items=(item(n("a")),), from_=(A.FilterStream("T"),))


# ----------------------------------------------------------------------------- output


def test_output_clause_forms() -> None:
    """Esper ref. 5.7 and Esper ref. 4.5 Output When Context Partition Ends output clause forms."""

    def out(text: str) -> A.OutputClause:
        return parse_statement(f"select * from S output {text}").output

    assert out("last every 4 seconds") == A.OutputClause(kind="last", every_time=tp((4, "second")))
    assert out("every 5 events") == A.OutputClause(every_count=i(5), every_unit="events")
    assert out("first every 2 minutes") == A.OutputClause(
        kind="first", every_time=tp((2, "minute")))
    assert out("all every N events") == A.OutputClause(
        kind="all", every_count=n("N"), every_unit="events")
    assert out("snapshot when terminated") == A.OutputClause(kind="snapshot", when_terminated=True)
    assert out("snapshot every 1 minute and when terminated") == A.OutputClause(
        kind="snapshot", every_time=tp((1, "minute")), and_when_terminated=True)
    assert out("when terminated and count_insert >= 2") == A.OutputClause(
        when_terminated=True, terminated_and=A.Binary(">=", n("count_insert"), i(2)))
    assert out("when terminated then set myvar=3") == A.OutputClause(
        when_terminated=True, then_set=(A.Assignment(n("myvar"), i(3)),))
    assert out("when x > 1 then set a = 1, b = a + 1") == A.OutputClause(
        when=A.Binary(">", n("x"), i(1)),
        then_set=(A.Assignment(n("a"), i(1)), A.Assignment(n("b"), A.Binary("+", n("a"), i(1)))))
    assert out("at (*/5, *, *, *, *) and when terminated and x then set v = 1") == A.OutputClause(
        at=A.Crontab((A.CronStep(i(5)), A.CronStar(), A.CronStar(), A.CronStar(), A.CronStar())),
        and_when_terminated=True, terminated_and=n("x"),
        then_set=(A.Assignment(n("v"), i(1)),))
    assert out("after 10 sec snapshot every 5 events") == A.OutputClause(
        kind="snapshot", after=tp((10, "second")), every_count=i(5), every_unit="events")


# ---------------------------------------------------------------------------- patterns


def test_pattern_precedence() -> None:
    """Esper: unary > and > or > followed-by; guards bind to the atom (Esper ref. 2, patterns)."""
    got = parse_pattern("every a=A -> b=B or c=C and not D where timer:within(10 min)")
    assert got == A.PFollowedBy((
        A.PEvery(A.PFilter("a", "A")),
        A.POr((
            A.PFilter("b", "B"),
            A.PAnd((A.PFilter("c", "C"),
                    A.PNot(A.PGuard(A.PFilter(None, "D"), tp((10, "minute")))))),
        )),
    ))
    guarded = parse_pattern(
        'every StockTickEvent(symbol="IBM", price>80) where timer:within(60 seconds)')
    assert guarded == A.PEvery(A.PGuard(
        A.PFilter(None, "StockTickEvent", A.Binary(
            "and", A.Binary("=", n("symbol"), s("IBM")), A.Binary(">", n("price"), i(80)))),
        tp((60, "second"))))
    assert parse_pattern("A -> ( B or C)") == A.PFollowedBy(
        (A.PFilter(None, "A"), A.POr((A.PFilter(None, "B"), A.PFilter(None, "C")))))
    assert parse_pattern("(A -> B) -> C") == A.PFollowedBy(
        (A.PFollowedBy((A.PFilter(None, "A"), A.PFilter(None, "B"))), A.PFilter(None, "C")))


def test_pattern_observers_every_distinct_and_repeat() -> None:
    """timer:interval, timer:at, every-distinct with expiry, [n] repeat and until."""
    assert parse_pattern("every timer:interval(1 min)") == A.PEvery(
        A.PTimerInterval(tp((1, "minute"))))
    assert parse_pattern("timer:at(5, *, *, *, *)") == A.PTimerAt(
        A.Crontab((i(5), A.CronStar(), A.CronStar(), A.CronStar(), A.CronStar())))
    assert parse_pattern("every-distinct(a.id, 20 sec) a=MyInitEvent") == A.PEveryDistinct(
        (n("a", "id"),), tp((20, "second")), A.PFilter("a", "MyInitEvent"))
    assert parse_pattern("every-distinct(a.id, a.b) a=E") == A.PEveryDistinct(
        (n("a", "id"), n("a", "b")), None, A.PFilter("a", "E"))
    assert parse_pattern("[3] A") == A.PRepeat(A.PFilter(None, "A"), i(3))
    assert parse_pattern("[2:5] A until B") == A.PRepeat(
        A.PFilter(None, "A"), i(2), i(5), True, A.PFilter(None, "B"))
    assert parse_pattern("A until B") == A.PRepeat(
        A.PFilter(None, "A"), until=A.PFilter(None, "B"))
    assert parse_pattern("[:4] A") == A.PRepeat(A.PFilter(None, "A"), None, i(4), True)


def test_tag_references_in_pattern_filters() -> None:
    """b=T(id = a.id) refers to an earlier tag."""
    got = parse_pattern("every a=EventX -> every b=EventY(objectID=a.objectID)")
    assert got.children[1] == A.PEvery(
        A.PFilter("b", "EventY", A.Binary("=", n("objectID"), n("a", "objectID"))))


def test_crontab_fields() -> None:
    """Esper ref. 7.6.4 crontab field syntax: */n, a:b, [list], last, weekday, seconds, zone."""
    got = parse_pattern(
        "timer:at(*/15, 8:17, [1, 15, 20:25], 3 last, [1:5], 30, 'UTC')")
    assert got == A.PTimerAt(A.Crontab((
        A.CronStep(i(15)),
        A.CronRange(i(8), i(17)),
        A.CronList((i(1), i(15), A.CronRange(i(20), i(25)))),
        A.CronLast(i(3)),
        A.CronList((A.CronRange(i(1), i(5)),)),
        i(30),
        s("UTC"),
    )))
    other = parse_pattern("timer:at(0, 0, last, *, 5 weekday)")
    assert other.crontab.fields[2] == A.CronLast(None)
    assert other.crontab.fields[4] == A.CronWeekday(i(5))
    assert parse_pattern("timer:at(0, 0, lastweekday, *, *)").crontab.fields[2] == (
        A.CronLastWeekday())


# ---------------------------------------------------------------------------- contexts


def test_keyed_context() -> None:
    """Esper ref. 4.2.2 with several streams, 'and' key lists, filters and aliases."""
    got = parse_statement(
        "create context SegmentedByCustomer partition by custId and account "
        "from BankTxn(amount > 0) as t, loginId from LoginEvent")
    assert got == A.CreateContext((), "SegmentedByCustomer", A.KeyedContext((
        A.KeyedItem((n("custId"), n("account")), "BankTxn", A.Binary(">", n("amount"), i(0)), "t"),
        A.KeyedItem((n("loginId"),), "LoginEvent"),
    )))


def test_keyed_context_comma_keys_bare_alias_and_lifecycle() -> None:
    """Esper's keyed context grammar: keys separated by ',' as by 'and', a stream name
    without 'as', 'initiated by' filters and a 'terminated by' condition."""
    got = parse_statement(
        "create context C partition by p00, p01 from S0 s0, p10 and p11 from S1 "
        "initiated by S1(id > 0) as s1, S0 terminated by pattern [S0(id = s1.id)]")
    assert got.spec == A.KeyedContext(
        (A.KeyedItem((n("p00"), n("p01")), "S0", None, "s0"),
         A.KeyedItem((n("p10"), n("p11")), "S1")),
        (A.CondFilter("S1", A.Binary(">", n("id"), i(0)), "s1"), A.CondFilter("S0")),
        A.CondPattern(A.PFilter(None, "S0", A.Binary("=", n("id"), n("s1", "id")))))
    term = parse_statement("create context C partition by a from T terminated after 10 sec")
    assert term.spec.terminated == A.CondAfter(tp((10, "second")))
    assert term.spec.initiated == ()


def test_context_filters_named_without_as() -> None:
    """A context condition's filter may be named without 'as' (Esper's grammar)."""
    got = parse_statement(
        "create context C initiated by distinct(s0.x) S0(x > 1) s0 terminated by S1 s1")
    assert got.spec == A.OverlappingContext(
        A.CondFilter("S0", A.Binary(">", n("x"), i(1)), "s0"), A.CondFilter("S1", None, "s1"),
        (n("s0", "x"),))
    start = parse_statement("create context C start S0 s0 end S1(id = s0.id)")
    assert start.spec.start == A.CondFilter("S0", None, "s0")


def test_misspelt_keyword_read_as_a_stream_name_is_reported_there() -> None:
    """'A terminatd after ..': the misspelling parses as a name, the error points at it."""
    with pytest.raises(EplSyntaxError) as info:
        parse_statement("create context C partition by a from T terminatd after 1 sec")
    assert (info.value.line, info.value.column, info.value.hint) == (
        1, 40, "did you mean 'terminated'?")


def test_hash_context() -> None:
    """Esper ref. 4.2.3; 'as' after the name (4.6); computeHash(*) keeps the star."""
    got = parse_statement(
        "create context HashByUserCtx as coalesce by consistent_hash_crc32(userId) "
        "from ScoreCycle, hash_code(q) from U(x = 1) granularity 64")
    assert got.spec == A.HashContext((
        A.HashItem("consistent_hash_crc32", (n("userId"),), "ScoreCycle"),
        A.HashItem("hash_code", (n("q"),), "U", A.Binary("=", n("x"), i(1))),
    ), i(64), False)
    star = parse_statement(
        "create context MyHashContext coalesce by computeHash(*) from BankTxn "
        "granularity 16 preallocate")
    assert star.spec == A.HashContext(
        (A.HashItem("computeHash", (A.Star(),), "BankTxn"),), i(16), True)


def test_category_context() -> None:
    """Esper ref. 4.2.4 Category Segmented Context."""
    got = parse_statement(
        "create context CategoryByTemp group temp < 65 as cold, "
        "group by temp between 65 and 85 as normal, group temp > 85 as large from SensorEvent")
    assert got.spec == A.CategoryContext((
        A.CategoryGroup(A.Binary("<", n("temp"), i(65)), "cold"),
        A.CategoryGroup(A.Between(n("temp"), i(65), i(85)), "normal"),
        A.CategoryGroup(A.Binary(">", n("temp"), i(85)), "large"),
    ), "SensorEvent")


def test_non_overlapping_contexts() -> None:
    """Esper ref. 4.2.5 and 4.2.7: crontab, filter, pattern, after, @now conditions."""
    nine = parse_statement("create context NineToFive start (0, 9, *, *, *) end (0, 17, *, *, *)")
    star3 = (A.CronStar(), A.CronStar(), A.CronStar())
    assert nine.spec == A.NonOverlappingContext(
        A.CondCrontab(A.Crontab((i(0), i(9)) + star3)),
        A.CondCrontab(A.Crontab((i(0), i(17)) + star3)))
    power = parse_statement(
        "create context PowerOutage start PowerOutageEvent "
        "end pattern [PowerOnEvent -> timer:interval(5)]")
    assert power.spec == A.NonOverlappingContext(
        A.CondFilter("PowerOutageEvent"),
        A.CondPattern(A.PFollowedBy(
            (A.PFilter(None, "PowerOnEvent"), A.PTimerInterval(i(5))))))
    now = parse_statement("create context Batch4Seconds start @now end after 4 sec")
    assert now.spec == A.NonOverlappingContext(A.CondNow(), A.CondAfter(tp((4, "second"))))
    incl = parse_statement(
        "create context C start pattern [a=StartEventOne or b=StartEventTwo]@inclusive "
        "end pattern [EndEventOne(id=a.id) or EndEventTwo(id=b.id)]")
    assert incl.spec.start == A.CondPattern(
        A.POr((A.PFilter("a", "StartEventOne"), A.PFilter("b", "StartEventTwo"))), True)
    corr = parse_statement("create context C start MyEvent as myevent end MyEvent(id=myevent.id)")
    assert corr.spec == A.NonOverlappingContext(
        A.CondFilter("MyEvent", None, "myevent"),
        A.CondFilter("MyEvent", A.Binary("=", n("id"), n("myevent", "id"))))


def test_overlapping_contexts() -> None:
    """Esper ref. 4.2.6: initiated [by] [distinct(..)] [@now and] cond terminated [by] cond."""
    train = parse_statement(
        "create context CtxTrainEnter initiated by TrainEnterEvent as te "
        "terminated after 5 minutes")
    assert train.spec == A.OverlappingContext(
        A.CondFilter("TrainEnterEvent", None, "te"), A.CondAfter(tp((5, "minute"))))
    now = parse_statement(
        "create context CtxEachMinute initiated @now and pattern [every timer:interval(1 minute)] "
        "terminated after 1 minutes")
    assert now.spec == A.OverlappingContext(
        A.CondNowAnd(A.CondPattern(A.PEvery(A.PTimerInterval(tp((1, "minute")))))),
        A.CondAfter(tp((1, "minute"))))
    distinct = parse_statement(
        "create context C initiated by distinct(a.id, b) pattern [every a=A] terminated by B")
    assert distinct.spec == A.OverlappingContext(
        A.CondPattern(A.PEvery(A.PFilter("a", "A"))), A.CondFilter("B"), (n("a", "id"), n("b")))
    crontab = parse_statement(
        "create context MyContext initiated (*, *, *, *, *) terminated after 10 seconds")
    assert crontab.spec.initiated == A.CondCrontab(A.Crontab((A.CronStar(),) * 5))
    alone = parse_statement("create context UserSession initiated by LoginEvent as loginEvent")
    assert alone.spec == A.OverlappingContext(A.CondFilter("LoginEvent", None, "loginEvent"))


def test_nested_contexts() -> None:
    """Esper ref. 4.3 Context Nesting: the comma before 'context' ends a keyed / hash list."""
    got = parse_statement(
        "create context CtxNested context ById partition by symbol from StockTick, "
        "loginId from Login, context HashCtx coalesce by consistent_hash_crc32(tagId) "
        "from PassengerScanEvent granularity 16 preallocate, "
        "context Interval3Sec as start @now end after 3 sec")
    assert got.spec == A.NestedContext((
        A.NestedItem("ById", A.KeyedContext((
            A.KeyedItem((n("symbol"),), "StockTick"), A.KeyedItem((n("loginId"),), "Login")))),
        A.NestedItem("HashCtx", A.HashContext(
            (A.HashItem("consistent_hash_crc32", (n("tagId"),), "PassengerScanEvent"),),
            i(16), True)),
        A.NestedItem("Interval3Sec", A.NonOverlappingContext(
            A.CondNow(), A.CondAfter(tp((3, "second"))))),
    ))


def test_context_prefix_and_annotations() -> None:
    """@name('x') context C select ... (Esper ref. 2, Basic Indexes)."""
    got = parse_statement(
        "@name('B') @Priority(1) @Drop @Hint('reclaim_group_aged=10') context UserSession "
        "select count(*) from WithdrawalEvent(account = context.loginEvent.account)")
    assert got.annotations == (
        A.Annotation("name", (s("B"),)), A.Annotation("Priority", (i(1),)),
        A.Annotation("Drop", ()), A.Annotation("Hint", (s("reclaim_group_aged=10"),)))
    assert got.context == "UserSession"
    assert got.from_[0].filter == A.Binary("=", n("account"), n("context", "loginEvent", "account"))
    ctx = parse_statement("@Name('A') create context C start @now")
    assert ctx.annotations == (A.Annotation("Name", (s("A"),)),)


# --------------------------------------------------------------------- other statements


def test_create_schema_window_table_variable_index() -> None:
    """create statements of Esper ref. 4.6 Context and Named Window–4.8 and Esper ref. 2."""
    assert parse_statement(
        "create schema ScoreCycle (userId string, score long)") == A.CreateSchema(
        (), "ScoreCycle", (("userId", "string"), ("score", "long")))
    assert parse_statement("create schema P as (ids string[])") == A.CreateSchema(
        (), "P", (("ids", "string[]"),))
    win = parse_statement(
        "context NineToFive create window SpeedingEvents1Hour.win:time(30 min) as TrafficEvent")
    assert win == A.CreateWindow(
        context="NineToFive", name="SpeedingEvents1Hour",
        views=(A.View("win", "time", (tp((30, "minute")),)),), type_name="TrafficEvent")
    sel = parse_statement("create window W#keepall as select a, b from T insert where a > 1")
    assert sel == A.CreateWindow(
        name="W", views=(A.View(None, "keepall"),), type_name="T",
        select_items=(item(n("a")), item(n("b"))), insert=True,
        insert_where=A.Binary(">", n("a"), i(1)))
    cols = parse_statement("create window W#length(3) as (a string, b int)")
    assert cols.columns == (("a", "string"), ("b", "int")) and cols.type_name is None
    table = parse_statement(
        "context NineToFive create table AverageSpeedTable (carId string primary key, "
        "avgSpeed avg(double), n count(*))")
    assert table == A.CreateTable(context="NineToFive", name="AverageSpeedTable", columns=(
        A.TableColumn("carId", "string", True),
        A.TableColumn("avgSpeed", None, False, call("avg", n("double"))),
        A.TableColumn("n", None, False, A.Call("count", (), star=True)),
    ))
    var = parse_statement(
        "context ParkingLotContext create variable integer var_parkinglot_threshold = 100")
    assert var == A.CreateVariable(
        context="ParkingLotContext", type_name="integer", name="var_parkinglot_threshold",
        init=i(100))
    const = parse_statement("create constant variable string NAME")
    assert const == A.CreateVariable(type_name="string", name="NAME", constant=True)
    index = parse_statement("create unique index Idx on W (a hash, b btree, c)")
    assert index == A.CreateIndex(name="Idx", window="W", unique=True, columns=(
        A.IndexColumn("a", "hash"), A.IndexColumn("b", "btree"), A.IndexColumn("c")))


def test_into_table() -> None:
    """Esper ref. 4.7 Context and Tables: context C into table T select ..."""
    got = parse_statement(
        "context NineToFive into table AverageSpeedTable\nselect avg(speed) as avgSpeed\n"
        "from TrafficEvent\ngroup by carId")
    assert got == A.SelectStatement(
        context="NineToFive", into_table="AverageSpeedTable",
        select_items=(item(call("avg", n("speed")), "avgSpeed"),),
        from_=(A.FilterStream("TrafficEvent"),), group_by=(n("carId"),))


def test_on_statements() -> None:
    """on-merge / on-delete / on-select / on-update / on-set (Esper ref. 2; 4.6)."""
    insert_only = parse_statement("on Withdrawal merge WithdrawalWindow insert select *")
    assert insert_only == A.OnStatement((), None, A.FilterStream("Withdrawal"), A.OnMerge(
        "WithdrawalWindow", None, None, (A.MergeInsert(None, (), (A.Wildcard(None),)),)))
    merge = parse_statement(
        "on T(x > 0) as t merge into W as w where w.id = t.id "
        "when matched and w.v < t.v then update set v = t.v where t.ok then delete "
        "when not matched then insert into Other (a) select t.a where t.a is not null")
    assert merge.trigger == A.FilterStream(
        "T", A.Binary(">", n("x"), i(0)), alias="t")
    assert merge.action == A.OnMerge("W", "w", A.Binary("=", n("w", "id"), n("t", "id")), (
        A.MergeWhen(True, A.Binary("<", n("w", "v"), n("t", "v")), (
            A.MergeUpdate((A.Assignment(n("v"), n("t", "v")),), n("t", "ok")),
            A.MergeDelete(None))),
        A.MergeWhen(False, None, (
            A.MergeInsert("Other", ("a",), (item(n("t", "a")),), A.IsNull(n("t", "a"), True)),)),
    ))
    delete = parse_statement("context NineToFive on TruncateEvent delete from SpeedingEvents1Hour")
    assert delete == A.OnStatement(
        (), "NineToFive", A.FilterStream("TruncateEvent"), A.OnDelete("SpeedingEvents1Hour"))
    select = parse_statement(
        "on Q as q insert into Out select and delete distinct w.* from W as w "
        "where w.k = q.k order by w.k desc")
    assert select.action == A.OnSelect(
        A.InsertInto(None, "Out", ()), True, True, (A.Wildcard("w"),), "W", "w",
        A.Binary("=", n("w", "k"), n("q", "k")), order_by=(A.OrderItem(n("w", "k"), True),))
    update = parse_statement("on U update W as w set a = 1, b = u.b where w.k = 1")
    assert update.action == A.OnUpdate("W", "w", (
        A.Assignment(n("a"), i(1)), A.Assignment(n("b"), n("u", "b"))),
        A.Binary("=", n("w", "k"), i(1)))
    setv = parse_statement("on pattern [every timer:interval(1 sec)] set counter = counter + 1")
    assert setv.trigger == A.PatternStream(A.PEvery(A.PTimerInterval(tp((1, "second")))))
    assert setv.action == A.OnSet(
        (A.Assignment(n("counter"), A.Binary("+", n("counter"), i(1))),))


def test_apama_queries() -> None:
    """Apama batched windows: within/every/retain windows, rstream projection."""
    within = parse_statement("from v in values within 1.5 every 1.0 select rstream v")
    assert within == A.ApamaQuery(
        (), "v", "values", A.Literal(1.5, "double"), A.Literal(1.0, "double"), None, True,
        (item(n("v")),))
    assert parse_statement("from v in values retain 3 every 2 select sum(v)") == A.ApamaQuery(
        (), "v", "values", None, i(2), i(3), False, (item(call("sum", n("v"))),))
    both = parse_statement("from v in values within 1.5 every 1.0 retain 4 select v")
    assert (both.within, both.every, both.retain) == (
        A.Literal(1.5, "double"), A.Literal(1.0, "double"), i(4))


def test_spl_time_interval_is_a_plain_window() -> None:
    """SPL timeInterval windows are written as #time_interval(ts, 10 sec, 5 sec, 15 sec)
    (conformance INDEX)."""
    got = parse_statement(
        "select * from Reading#groupwin(sensor)#time_interval(ts, 10 sec, 5 sec, 15 sec)")
    assert got.from_[0].views[1] == A.View(None, "time_interval", (
        n("ts"), tp((10, "second")), tp((5, "second")), tp((15, "second"))))


# ------------------------------------------------------------------ modules, positions


def test_parse_module_splits_on_semicolons() -> None:
    """Statements end with ';'; empty statements and comments are skipped."""
    got = parse_module(
        "create schema A(x int);\n;; // c\nselect * from A;\nselect x from A#length(2)")
    assert [type(st).__name__ for st in got] == ["CreateSchema", "SelectStatement",
                                                 "SelectStatement"]
    assert parse_module("") == []
    assert parse_module("  ;; /* nothing */ ") == []
    assert parse_statement("select * from A;") == parse_statement("select * from A")


def test_positions_are_recorded_but_not_compared() -> None:
    """pos gives line/column spans; equality ignores them."""
    text = "select a.b,  count( * ) as c\nfrom T#length(5)"
    got = parse_statement(text)
    assert got.pos == A.Pos(1, 1, 2, 17)
    assert got.select_items[0].expr.pos == A.Pos(1, 8, 1, 11)
    assert source_text(text, got.select_items[1].expr.pos) == "count( * )"
    assert source_text(text, got.from_[0].pos) == "T#length(5)"
    assert got == parse_statement("select a.b, count(*) as c from T#length(5)")


# ------------------------------------------------------------------ reference statements


def _ids(section: str) -> list[str]:
    return [f"{e.get('doc', e.get('case'))}:{k}" for k, e in enumerate(REFERENCE[section])]


@pytest.mark.parametrize("entry", REFERENCE["statements"], ids=_ids("statements"))
def test_reference_statement_parses(entry: dict[str, Any]) -> None:
    """Every statement printed in the documents parses to the expected statement class."""
    got = parse_statement(entry["epl"])
    assert type(got).__name__ == entry["ast"]


@pytest.mark.parametrize("entry", REFERENCE["invalid"], ids=_ids("invalid"))
def test_documented_invalid_statements_are_well_formed(entry: dict[str, Any]) -> None:
    """Statements the documents call invalid are rejected later (validator), not here."""
    assert entry["reason"]
    assert isinstance(parse_statement(entry["epl"]), A.STATEMENT_TYPES)


@pytest.mark.parametrize("entry", REFERENCE["syntax_errors"], ids=_ids("syntax_errors"))
def test_document_non_statements_raise_syntax_errors(entry: dict[str, Any]) -> None:
    """Synopses and prose placeholders raise EplSyntaxError with a position."""
    parse = {"statement": parse_statement, "expression": parse_expression,
             "pattern": parse_pattern}[entry["kind"]]
    with pytest.raises(EplSyntaxError) as info:
        parse(entry["text"])
    assert info.value.line is not None and info.value.column is not None


@pytest.mark.parametrize("entry", REFERENCE["fragments"], ids=_ids("fragments"))
def test_document_fragments_parse(entry: dict[str, Any]) -> None:
    """Windows, patterns and expressions printed inside prose."""
    if entry["kind"] == "view":
        assert parse_statement(f"select * from E#{entry['text']}").from_[0].views
    elif entry["kind"] == "pattern":
        assert parse_pattern(entry["text"]) is not None
    else:
        assert parse_expression(entry["text"]) is not None


@pytest.mark.parametrize("entry", REFERENCE["conformance"], ids=_ids("conformance"))
def test_conformance_statement_parses(entry: dict[str, Any]) -> None:
    """Every epl: of the conformance cases parses."""
    assert isinstance(parse_statement(entry["epl"]), A.STATEMENT_TYPES)


@pytest.mark.skipif(not CASES_DIR.is_dir(), reason="shared conformance cases not present")
def test_reference_file_lists_every_conformance_statement() -> None:
    """The data file is complete with respect to the conformance cases on disk."""
    listed = {(e["case"], e["statement"], e["epl"]) for e in REFERENCE["conformance"]}
    on_disk = set()
    for path in sorted(CASES_DIR.glob("*.yaml")):
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        for st in case.get("statements", []):
            on_disk.add((path.name, st["name"], st["epl"]))
    assert on_disk <= listed


def test_every_reference_document_is_covered() -> None:
    """Each of the five documents contributes statements."""
    docs = {e["doc"] for e in REFERENCE["statements"]}
    assert docs == {"000", "001", "002", "003", "004"}
    assert len(REFERENCE["statements"]) >= 160


# ------------------------------------------------------------------------------ grammar


def test_grammar_is_lalr1_without_conflicts(caplog: pytest.LogCaptureFixture) -> None:
    """lark resolves shift/reduce conflicts silently; the grammar must have none."""
    import logging

    from lark import Lark
    from lark import logger as lark_logger

    grammar = (Path(A.__file__).with_name("grammar.lark")).read_text(encoding="utf-8")
    level = lark_logger.level
    lark_logger.setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="lark"):
            Lark(grammar, parser="lalr", lexer="contextual", debug=True,
                 maybe_placeholders=True,
                 start=["single_start", "module_start", "expr_start", "pattern_start"])
    finally:
        lark_logger.setLevel(level)
    assert not [r.getMessage() for r in caplog.records if "conflict" in r.getMessage().lower()]


# --------------------------------------------------------------------------------- speed


def test_one_lalr_parser_serves_every_statement() -> None:
    """The parser is LALR and built once per process: parsing 500 statements reuses it
    (its speed is measured by make bench-startup, not by a timed test)."""
    from app.epl.parsing.grammar import epl_lark

    texts = [e["epl"] for e in REFERENCE["statements"] + REFERENCE["conformance"]]
    batch = (texts * (500 // len(texts) + 1))[:500]
    parser = epl_lark()
    assert parser.options.parser == "lalr"
    for text in batch:
        parse_statement(text)
    assert epl_lark() is parser
    assert epl_lark.cache_info().misses == 1

"""match_recognize: the clause as parsed, and its syntax and validation errors with
their positions and hints (Esper reference, chapter "EPL Reference: Match Recognize")."""

from __future__ import annotations

import pytest

from app.epl import ast as A
from app.epl.errors import EplSyntaxError
from app.epl.parser import parse_statement
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog, NotSupported
from tests.app.epl.validation import rejects

SCHEMAS = {"T": {"id": "string", "k": "string", "v": "long"}}


def catalog() -> Catalog:
    return Catalog.from_schemas(SCHEMAS)


def test_every_part_of_the_clause_is_parsed() -> None:
    s = parse_statement(
        "select * from T#length(5) match_recognize (partition by k, v measures A.id as a, "
        "avg(B.v) as b all matches after match skip to current row "
        "pattern (A B+? (C | D)* E{2,} F{,3} G{2}) interval 5 sec or terminated "
        "define A as A.v > prev(A.v), B as B.v < 1)")
    mr = s.match_recognize
    assert isinstance(mr, A.MatchRecognize)
    assert mr.partition_by == (A.Name(("k",)), A.Name(("v",)))
    assert [m.name for m in mr.measures] == ["a", "b"]
    assert mr.all_matches and mr.skip == "to current row" and mr.or_terminated
    assert isinstance(mr.interval, A.TimePeriod) and mr.interval.ms() == 5000
    assert [d.name for d in mr.defines] == ["A", "B"]
    items = mr.pattern.items
    assert items[0] == A.MrAtom("A")
    assert items[1] == A.MrAtom("B", "+?")
    assert items[2] == A.MrNested(A.MrAlt((A.MrConcat((A.MrAtom("C"),)),
                                           A.MrConcat((A.MrAtom("D"),)))), "*")
    assert items[3].repeat == A.MrRepeat(2, None)
    assert items[4].repeat == A.MrRepeat(None, 3)
    assert items[5].repeat == A.MrRepeat(2, 2, True)


def test_permute_is_an_alternation_of_every_order() -> None:
    from operators.match_recognize import nfa

    plan = plan_statement(catalog(), "select * from T match_recognize (measures A.id as a "
                          "pattern (match_recognize_permute(A, B, C)))", "q")
    alt = plan.pipeline.match_recognize.pattern.items[0]
    orders = ["".join(i.items[0].name for i in s.items) for s in alt.alternatives]
    assert isinstance(alt, nfa.Alt)
    assert orders == ["ABC", "ACB", "BAC", "BCA", "CAB", "CBA"]


def test_defaults_skip_past_last_row_one_match_no_interval() -> None:
    mr = parse_statement("select * from T match_recognize (measures A.id as a "
                         "pattern (A B??))").match_recognize
    assert mr.skip == "past last row" and not mr.all_matches and mr.interval is None
    assert mr.pattern.items[1] == A.MrAtom("B", "??")


@pytest.mark.parametrize("epl, line, column, hint", [
    ("select * from T match_recognize (measures A.id as a\n"
     "  after match skip to last row pattern (A B))", 2, 23, "'current', 'next'"),
    ("select * from T match_recognize (measures A.id as a pattern (A B{0}))", 1, 66,
     "at least 1"),
    ("select * from T match_recognize (measures A.id as a pattern (A B{,}))", 1, 65,
     "{n,m}"),
    ("select * from T match_recognize (pattern (A B))", 1, 34, "'measures'"),
])
def test_syntax_errors_point_at_the_word(epl: str, line: int, column: int,
                                         hint: str) -> None:
    with pytest.raises(EplSyntaxError) as info:
        parse_statement(epl)
    e = info.value
    assert (e.line, e.column) == (line, column)
    assert hint in (e.hint or "")


@pytest.mark.parametrize("epl, message, column", [
    ("select * from T match_recognize (measures A.id pattern (A B))",
     "the measures clause requires that each expression uses the AS keyword", 43),
    ("select * from T match_recognize (measures A.id as a pattern (A B) "
     "define A as A.w > 1)", "unknown property 'w' of T", 81),
    ("select * from T match_recognize (measures A.id as a pattern (A B) "
     "define A as sum(A.v) > 1)", "an aggregate function may not appear in a define", 79),
    ("select * from T match_recognize (measures B.id as b pattern (A B+))",
     "'B.id': variable 'B' matches several events", 43),
    ("select * from T match_recognize (measures avg(A.v) as b pattern (A B+))",
     "aggregation functions in the measures clause must refer to properties of exactly "
     "one multi-row variable", 43),
    ("select * from T match_recognize (measures A.id as a pattern (A B) "
     "define A as A.v > 1, A as A.v < 2)", "variable 'A' has already been defined", 88),
    ("select * from T match_recognize (measures A.id as a pattern (A B) "
     "define C as C.v > 1)", "variable 'C' does not occur in the pattern", 74),
    ("select * from T match_recognize (measures A.id as a pattern (A B{3,2}))",
     "invalid pattern quantifier value 3, expecting a minimum of 1 and maximum of 2", 65),
    ("select * from T match_recognize (measures A[0].id as a pattern (A B))",
     "variable 'A' matches one event and is not accessed by index", 43),
    ("select x from T match_recognize (measures A.id as a pattern (A B))",
     "unknown property 'x' of the match_recognize measures", 8),
    ("select * from T, T match_recognize (measures A.id as a pattern (A B))",
     "match_recognize takes exactly one event stream", 20),
    ("select * from T match_recognize (measures B.id as b pattern (A+ B) "
     "define B as B.v > A.v)", "'A.v': variable 'A' matches several events", 86),
    ("select * from T match_recognize (measures B.id as b pattern (A B) "
     "define B as B.v > A[0].v)", "variable 'A' is one event in the condition of 'B'", 85),
    # without a data window the where clause filters the input events (as in Esper)
    ("select * from T match_recognize (measures A.id as a pattern (A B)) where a = 'x'",
     "unknown property 'a' of T", 74),
])
def test_validation_errors(epl: str, message: str, column: int) -> None:
    e = rejects(catalog(), epl)
    assert e.message.startswith(message)
    assert (e.line, e.column) == (1, column)


def test_with_a_data_window_the_where_clause_reads_the_measures() -> None:
    plan = plan_statement(catalog(), "select * from T#length(5) match_recognize (measures "
                          "A.id as a pattern (A B)) where a = 'x'", "q")
    assert plan.pipeline.where is not None
    e = rejects(catalog(), "select * from T#length(5) match_recognize (measures A.id as a "
                "pattern (A B)) where k = 'x'")
    assert e.message == "unknown property 'k' of the match_recognize measures"


def test_a_window_removing_out_of_order_is_planned() -> None:
    plan = plan_statement(catalog(), "select * from T#sort(3, v) match_recognize (measures "
                          "A.id as a pattern (A B))", "q")
    assert plan.pipeline.match_recognize.bound


@pytest.mark.parametrize("clause", [
    "pattern (A B) interval 5 seconds",
    "pattern (A B) define B as B.v > prev(B.v)",
])
def test_interval_or_prev_over_a_window_removing_out_of_order_is_refused(clause: str
                                                                        ) -> None:
    with pytest.raises(NotSupported, match="out of arrival order"):
        plan_statement(catalog(), "select * from T#unique(k) match_recognize (measures "
                       f"A.id as a {clause})", "q")


def test_explain_names_the_stage() -> None:
    plan = plan_statement(catalog(), "select * from T match_recognize (partition by k "
                          "measures A.id as a pattern (A B* | C) define A as A.v > 1)", "q")
    assert plan.pipeline.describe()[1] == (
        "match_recognize partition by 1 key(s) measures a after match skip past last row "
        "pattern (A B* | C) nfa 3 state(s)")


@pytest.mark.parametrize("epl", [
    "select * from T#length(5) match_recognize (partition by k, v measures A.id as a, "
    "avg(B.v) as b, B[0].id as b0 all matches after match skip to next row "
    "pattern (A B+? (C | D)* E{2,} F{,3} G{2} (H I)?{1,2}) interval 5 seconds or terminated "
    "define A as A.v > prev(A.v, 2), B as B.v < 1) where a = 'x'",
    "select a from T match_recognize (measures A.id as a pattern (A))",
    "select * from T match_recognize (measures A.id as a pattern "
    "(match_recognize_permute(A, B+, (C | D)) E))",
])
def test_printed_clause_reads_back_the_same(epl: str) -> None:
    from app.epl.printer import to_epl
    from app.epl.walk import same

    node = parse_statement(epl)
    assert same(parse_statement(to_epl(node)), node)

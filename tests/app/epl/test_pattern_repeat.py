"""Repeat, repeat-until, indexed tags and while guards (Esper ref. "Patterns", "Repeat",
"Repeat-Until", "While"): parsing, printing, planning and the errors for misuse."""

from __future__ import annotations

import pytest

from app.epl import ast as A
from app.epl.errors import EplError
from app.epl.parser import parse_pattern, parse_statement
from app.epl.planner import plan_statement
from app.epl.printer import to_epl
from operators.patterns import Every, Filter, Repeat, WhileGuard
from tests.app.epl.validation import catalog_with, rejects

SCHEMAS = {"A": {"id": "string", "v": "int"}, "B": {"id": "string"},
           "C": {"id": "string", "v": "int"}, "S": {"n": "int"}}


def i(v: int) -> A.Literal:
    return A.Literal(v, "int")


def test_range_after_every_repeats_inside_the_every() -> None:
    """Esper's grammar: 'every [2] A until B' is '(every ([2] A)) until B'."""
    a, b = A.PFilter("a", "A"), A.PFilter("b", "B")
    assert parse_pattern("every [2] a=A") == A.PEvery(A.PRepeat(a, i(2)))
    assert parse_pattern("every [2] a=A until b=B") == A.PRepeat(
        A.PEvery(A.PRepeat(a, i(2))), until=b)
    assert parse_pattern("not [2] a=A") == A.PNot(A.PRepeat(a, i(2)))
    assert parse_pattern("every-distinct(a.id) [2] a=A") == A.PEveryDistinct(
        (A.Name(("a", "id")),), None, A.PRepeat(a, i(2)))


def test_while_guard_parses_with_or_without_where() -> None:
    cond = A.Binary(">", A.Name(("b", "v")), i(1))
    want = A.PGuardWhile(A.PEvery(A.PFilter("b", "B")), cond)
    assert parse_pattern("(every b=B) while (b.v > 1)") == want
    assert parse_pattern("(every b=B) where while (b.v > 1)") == want
    # the guard binds tighter than every
    assert parse_pattern("every b=B while (b.v > 1)") == A.PEvery(
        A.PGuardWhile(A.PFilter("b", "B"), cond))


@pytest.mark.parametrize("text", [
    "select * from pattern [a=A -> (every b=B) while (b.v > a.v)]",
    "select * from pattern [every ([2] a=A) until b=B]",
    "select a[0].id, a[1] from pattern [[2:] a=A until b=B]",
])
def test_printing_round_trips(text: str) -> None:
    stmt = parse_statement(text)
    assert parse_statement(to_epl(stmt)) == stmt


def test_plan_names_the_repeated_tags() -> None:
    c = catalog_with(SCHEMAS)
    plan = plan_statement(c, "select a, b from pattern [every ([2:] a=A until b=B) "
                             "while (b.id != 'x')]", "s")
    pattern = plan.pipeline.pattern
    root = pattern.root  # the guard binds tighter than every
    assert isinstance(root, Every) and isinstance(root.child, WhileGuard)
    rep = root.child.child
    assert isinstance(rep, Repeat) and rep.array_tags == ("a",) and not rep.exact
    assert rep.child == Filter("a", "A") and rep.until == Filter("b", "B")
    assert pattern.array_tag_names() == frozenset({"a"})
    assert pattern.describe() == ("pattern [every ([2:] a=A until b=B) while "
                                  "(b.id != 'x')]")


@pytest.mark.parametrize(("pattern", "message", "column"), [
    ("[0] A", "incorrect range: a bound of zero or a negative bound is not allowed", 25),
    ("[-1] A", "incorrect range: a bound of zero or a negative bound is not allowed", 25),
    ("[0:0] A", "incorrect range: a bound of zero or a negative bound is not allowed", 27),
    ("[:0] A until B", "incorrect range: a bound of zero or a negative bound is not allowed",
     26),
    ("[0:] A until B", "incorrect range: a bound of zero or a negative bound is not allowed",
     25),
    ("[10:4] A", "incorrect range: the lower bound 10 is higher than the upper bound 4", 25),
    ("[4:6] A", "a repeat with variable bounds needs an until-expression", 24),
    ("['x'] A", "a repeat bound must be a number", 25),
    ("[1] a=A(a[0].id = 'x')",
     "tag 'a' holds one event, not a list: only a tag inside a repeat can be indexed", 32),
    ("a=A -> B(a[0].id = 'x')",
     "tag 'a' holds one event, not a list: only a tag inside a repeat can be indexed", 33),
    ("(a=A until c=B) -> c=C",
     "tag 'c' for event type 'C' is already declared for events of type 'B'", 43),
    ("((a=A until b=B) until a=A)",
     "tag 'a' is used inside a repeat and cannot also appear in other filter expressions", 47),
])
def test_misuse_is_rejected_at_its_position(pattern: str, message: str, column: int) -> None:
    """Esper's checks of constant bounds and repeated tags, positioned at the culprit."""
    e = rejects(catalog_with(SCHEMAS), f"select * from pattern [{pattern}]")
    assert (e.message, e.line, e.column) == (message, 1, column)
    assert e.hint


def test_indexing_in_select_needs_a_repeated_tag_and_one_index() -> None:
    c = catalog_with(SCHEMAS)
    e = rejects(c, "select a[0].id from pattern [a=A -> b=B]")
    assert (e.message, e.column) == (
        "tag 'a' holds one event, not a list: only a tag inside a repeat can be indexed", 8)
    e = rejects(c, "select a[0, 1] from pattern [[2] a=A]")
    assert e.message == "a repeated tag takes one index, 2 given"


def test_bounds_from_variables_and_tags_plan() -> None:
    """Bounds that are not constants are read when the repeat starts: no until needed."""
    c = catalog_with(SCHEMAS, "create variable int lo = 1", "create variable int hi = 3")
    plan_statement(c, "select * from pattern [[lo:hi] a=A]", "s1")
    plan_statement(c, "select * from pattern [s=S -> [s.n] a=A]", "s2")


def test_enumeration_methods_of_repeated_tags() -> None:
    """countOf/firstOf/lastOf read a repeated tag in select and where; a pattern filter
    refuses them (Esper evaluates them there against a single event, not the list)."""
    c = catalog_with(SCHEMAS)
    plan_statement(c, "select a.countOf(), a.firstOf(), a.lastOf() from pattern "
                      "[a=A until b=B] where a.countOf() > 1", "s1")
    e = rejects(c, "select * from pattern [a=A until b=B -> C(v = a.countOf())]")
    assert (e.message, e.column) == ("'a.countOf()' cannot be used in a pattern filter", 47)
    e = rejects(c, "select a.distinctOf() from pattern [a=A until b=B]")
    assert e.message == "'a.distinctOf(...)' is not supported on the repeated tag 'a'"


@pytest.mark.parametrize(("epl", "column"), [
    ("select a.id as x from pattern [[2] a=A]", 8),
    ("select * from pattern [[2] a=A -> c=C(v = a.v)]", 43),
])
def test_property_of_a_repeated_tag_needs_an_index(epl: str, column: int) -> None:
    """Esper: 'a' is an indexed property, so 'a.id' needs an index or an enumeration."""
    e = rejects(catalog_with(SCHEMAS), epl)
    assert e.message.startswith("tag 'a' is a repeated tag (a list of events)")
    assert e.column == column


def test_inside_the_repeat_the_tag_is_one_event() -> None:
    """Within one repeat the sub-expression sees its own tag as a single event."""
    plan_statement(catalog_with(SCHEMAS), "select a[0].id from pattern "
                   "[every [2] (a=A -> c=C(id = a.id))]", "s")


def test_until_tags_are_visible_to_later_expressions() -> None:
    """The until's tags are ordinary tags: a later filter or guard reads them."""
    c = catalog_with(SCHEMAS)
    plan = plan_statement(c, "select * from pattern [(a=A until b=B) while (b.id = 'x')]", "s")
    cond = plan.pipeline.pattern.root.cond
    assert cond((None, {"b": {"id": "x"}}), None) is True


def test_a_nested_repeat_tag_is_a_list_inside_the_outer_repeat() -> None:
    c = catalog_with(SCHEMAS)
    plan_statement(c, "select * from pattern [[2] ((a=A until b=B) -> c=C(v = a[0].v))]", "s")
    e = rejects(c, "select * from pattern [[2] ((a=A until b=B) -> c=C(v = b[0].v))]")
    assert e.message.startswith("tag 'b' holds one event")


def test_withinmax_guard_parses_plans_and_checks_its_count() -> None:
    """Esper ref. Guards, timer:withinmax(period, count)."""
    got = parse_pattern("(every a=A) where timer:withinmax(5 sec, 2)")
    assert isinstance(got, A.PGuard) and got.max_count == i(2)
    assert to_epl(parse_statement("select * from pattern [A where timer:withinmax(1 sec, 3)]")) \
        == "select * from pattern [A where timer:withinmax(1 second, 3)]"
    c = catalog_with(SCHEMAS)
    plan = plan_statement(c, "select * from pattern [A where timer:withinmax(1 sec, 3)]", "s")
    root = plan.pipeline.pattern.root
    assert (root.ms, root.max_count) == (1000, 3)
    e = rejects(c, "select * from pattern [A where timer:withinmax(1 sec, -1)]")
    assert (e.message, e.column) == (
        "the count of timer:withinmax must be a whole number, 0 or more", 55)
    with pytest.raises(EplError) as info:
        parse_statement("select * from pattern [A where timer:withinmax(1 sec)]")
    assert "timer:withinmax takes a time period and a count" in str(info.value)


def test_a_bare_tag_in_a_guard_is_the_tags_value() -> None:
    c = catalog_with(SCHEMAS)
    plan = plan_statement(c, "select * from pattern [every ((b=B until C) while "
                             "(b is null))]", "s")
    cond = plan.pipeline.pattern.root.child.cond
    assert cond((None, {"b": None}), None) is True
    assert cond((None, {"b": {"id": "x"}}), None) is False

"""Aggregation filters (Esper ref. 10.2): the positional and the named form, where Esper
accepts each, and Esper's refusals."""

from __future__ import annotations

import pytest

from app.epl.aggregate_args import aggregate_args, declares_filter, has_filter
from app.epl.parser import parse_expression
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from operators.aggregates import CountEver, CountEverValues
from tests.app.epl.validation import catalog_with, rejects

SCHEMAS = {"Ev": {"k": "string", "v": "int", "b": "boolean"}}


class _Props:
    props = SCHEMAS["Ev"]


class _Scope:
    """What ``kind_of`` reads of a scope: the event's properties."""

    tags: frozenset = frozenset()
    aliases: frozenset = frozenset()
    variables: frozenset = frozenset()
    tables = _Props()


def split(text: str) -> tuple[list[str], str | None]:
    from app.epl.printer import to_epl

    call = parse_expression(text)
    got = aggregate_args(call, _Scope())  # type: ignore[arg-type]
    return ([to_epl(a) for a in got.args],
            to_epl(got.filter) if got.filter is not None else None)


@pytest.mark.parametrize("text, args, filt", [
    ("count(*, v > 2)", ["*"], "v > 2"),
    ("count(*, filter: v > 2)", ["*"], "v > 2"),
    ("count(v, b)", ["v"], "b"),
    ("count(distinct v, filter: k = 'a')", ["v"], "k = 'a'"),
    ("sum(v, k = 'a')", ["v"], "k = 'a'"),
    ("avg(v, filter: b)", ["v"], "b"),
    ("countever(v, b)", ["v"], "b"),
    ("countever(*, filter: b)", ["*"], "b"),
    ("min(v, filter: b)", ["v"], "b"),
    ("max(distinct v, filter: b)", ["v"], "b"),
    ("first(v, 1, filter: b)", ["v", "1"], "b"),
    ("last(v, filter: b)", ["v"], "b"),
    ("window(*, filter: b)", ["*"], "b"),
    ("nth(v, 1, filter: b)", ["v", "1"], "b"),
    ("leaving(filter: b)", [], "b"),
    # Esper makes a lone named filter the value as well: count(filter: b) = count(*, b)
    ("count(filter: b)", ["b"], "b"),
    ("sum(v)", ["v"], None),
    ("sum(v, group_by: k)", ["v"], None),
])
def test_the_filter_is_split_from_the_values(text: str, args: list[str], filt: str) -> None:
    assert split(text) == (args, filt)


@pytest.mark.parametrize("text, message", [
    ("count(*, v)", "expected to return a boolean value but returns int"),
    ("sum(v, filter: v)", "requires an expression returning a boolean value"),
    ("sum(v, k = 'a', filter: b)", "only a single filter expression"),
    ("count(*, filter: b, filter: b)", "only a single filter expression"),
    ("sum(v, flter: b)", "invalid named parameter 'flter'"),
    ("sum(filter: b)", "needs a value to aggregate besides its filter"),
    ("sum(v, b, b)", "expects at least 1 and up to 2 parameters"),
    ("leaving(b)", "the 'leaving' function expects no parameters"),
    ("countever(distinct v)", "'countever' does not allow distinct"),
    ("window(v, b)", "does not accept an index expression"),
    ("nth(v, 1, b)", "requires two parameters"),
    ("first(v, 1, b)", "takes a value and an index"),
    ("min(distinct v, b)", "distinct keyword is not valid in per-row min and max"),
])
def test_esper_refusals_are_kept(text: str, message: str) -> None:
    from app.epl.errors import EplValidationError

    with pytest.raises(EplValidationError) as info:
        split(text)
    assert message in info.value.message


def test_min_and_max_of_a_value_and_a_condition_are_refused() -> None:
    """``min(v, k = 'a')`` is the single-row min of two values (Esper ref. 10.1), which
    Esper refuses for a boolean; the filtered aggregation is written with ``filter:``."""
    c = Catalog.from_schemas(SCHEMAS)
    e = rejects(c, "select min(v, k = 'a') as m from Ev")
    assert "compares numbers" in e.message
    assert e.hint is not None and "min(v, filter: k = 'a')" in e.hint
    plan_statement(c, "select min(v, filter: k = 'a') as m, max(v, v) as x from Ev", "ok")


def test_countever_of_a_value_plans_the_non_null_counter() -> None:
    c = Catalog.from_schemas(SCHEMAS)
    plan = plan_statement(c, "select countever(*) as a, countever(v) as b from Ev", "s")
    aggs = [a.aggregator for a in plan.pipeline.resultset.aggregates]
    assert [type(a) for a in aggs] == [CountEver, CountEverValues]


def test_tables_take_no_filter() -> None:
    """Esper refuses the filter in create table ("The 'group_by' and 'filter' parameter
    is not allowed in create-table statements") and an 'into table' filter for a column
    declared without one; a column declared with one (count(*, boolean)) Esper 9 does
    not maintain, so kepl takes no filtered aggregation into a table."""
    c = Catalog.from_schemas(SCHEMAS)
    e = rejects(c, "create table T (c count(*, filter: b))")
    assert "not allowed in create-table statements" in e.message
    assert e.hint is not None and "c count(*, boolean)" in e.hint
    c = catalog_with(SCHEMAS, "create table T (c count(*), s sum(int, boolean))")
    assert "cannot take a filter" in rejects(
        c, "into table T select count(*, v > 2) as c from Ev").message
    assert "cannot take a filter" in rejects(
        c, "into table T select count(*, filter: v > 2) as c from Ev").message
    e = rejects(c, "into table T select sum(v) as s from Ev")
    assert "declares a filter" in e.message
    plan_statement(c, "into table T select count(*) as c from Ev", "ok")


def test_declared_and_given_filters() -> None:
    assert declares_filter(parse_expression("count(*, boolean)"))  # type: ignore[arg-type]
    assert declares_filter(parse_expression("sum(int, boolean)"))  # type: ignore[arg-type]
    assert not declares_filter(parse_expression("sum(int)"))  # type: ignore[arg-type]
    assert has_filter(parse_expression("sum(v, b)"))  # type: ignore[arg-type]
    assert has_filter(parse_expression("first(v, filter: b)"))  # type: ignore[arg-type]
    assert not has_filter(parse_expression("first(v, 1)"))  # type: ignore[arg-type]


def test_match_recognize_measures_take_the_positional_filter_only() -> None:
    """Esper 9 fails to compile a named filter in measures; the positional one works."""
    c = Catalog.from_schemas(SCHEMAS)
    mr = ("select * from Ev match_recognize (measures {m} as m pattern (A+ B) "
          "define B as B.v > 5)")
    e = rejects(c, mr.format(m="sum(A.v, filter: A.k = 'a')"))
    assert "not supported in the measures clause" in e.message
    assert e.hint is not None and "sum(A.v, A.k = 'a')" in e.hint
    plan_statement(c, mr.format(m="sum(A.v, A.k = 'a')"), "ok")

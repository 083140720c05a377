"""Planning of a pattern statement's from and select clauses: a data window over the
pattern (Esper ref. 5.4.2, 5.4.3) and ``tag.*`` in the select list (Esper ref. 5.3)."""

from __future__ import annotations

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import NotSupported
from tests.app.epl.validation import catalog_with, rejects

SCHEMAS = {"A": {"id": "string", "k": "string", "v": "int"},
           "B": {"id": "string", "k": "string", "w": "int"}}


def _plan(epl: str) -> object:
    return plan_statement(catalog_with(SCHEMAS), epl, "s")


def test_a_window_over_the_pattern_is_planned_after_it() -> None:
    p = _plan("select count(*) as c from pattern [every a=A]#length(2)").pipeline
    assert p.pattern_view is not None and p.stream is None
    chain = p.describe()
    assert chain.index("length(2)") == chain.index("pattern [every a=A]") + 1


def test_without_a_window_the_pattern_has_none() -> None:
    p = _plan("select count(*) as c from pattern [every a=A]").pipeline
    assert p.pattern_view is None
    assert not any("length" in line for line in p.describe())


def test_a_window_parameter_reads_a_tag_property() -> None:
    view = _plan("select * from pattern [every a=A]#unique(a.k)").pipeline.pattern_view
    assert view.describe() == "unique(a.k)"


def test_an_unknown_tag_property_in_a_window_parameter_is_an_error() -> None:
    err = rejects(catalog_with(SCHEMAS), "select * from pattern [every a=A]#unique(a.zz)")
    assert "zz" in str(err)


def test_a_derived_value_window_over_a_pattern_is_not_supported() -> None:
    with pytest.raises(NotSupported):
        _plan("select * from pattern [every a=A]#size()")


def test_prev_over_a_pattern_window_is_not_supported_yet() -> None:
    with pytest.raises(NotSupported):
        _plan("select prev(1, a.id) as p from pattern [every a=A]#length(3)")


def test_prev_without_a_window_is_an_error() -> None:
    rejects(catalog_with(SCHEMAS), "select prev(1, a.id) as p from pattern [every a=A]")


def test_tag_star_gives_the_tags_properties_as_columns() -> None:
    plan = _plan("select a.*, b.w as w from pattern [every a=A -> b=B]")
    assert plan.columns == ("id", "k", "v", "w")
    assert not plan.pipeline.resultset.wildcard


def test_star_still_gives_the_tags() -> None:
    plan = _plan("select * from pattern [every a=A -> b=B]")
    assert plan.pipeline.resultset.wildcard


def test_tag_star_of_an_unknown_tag_is_an_error() -> None:
    err = rejects(catalog_with(SCHEMAS), "select z.* from pattern [every a=A]")
    assert "'z' is not a tag" in str(err)


def test_two_tag_stars_are_an_error_as_in_esper() -> None:
    rejects(catalog_with(SCHEMAS), "select a.*, b.* from pattern [every a=A -> b=B]")


def test_tag_star_of_a_repeated_tag_is_not_supported() -> None:
    with pytest.raises(NotSupported):
        _plan("select a.* from pattern [[2] a=A]")

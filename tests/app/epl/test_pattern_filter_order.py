"""Which pattern filters Esper's filter index orders by a value of each instance (Esper
ref. 15.18 compiler filter expression analysis): ``Filter.ordered_by``."""

from __future__ import annotations

import pytest

from app.epl.planner import plan_statement
from operators.patterns import Filter
from tests.app.epl.validation import catalog_with

SCHEMAS = {"Ev": {"k": "string", "v": "int", "w": "int"}}


def _second_filter(criteria: str) -> Filter:
    plan = plan_statement(catalog_with(SCHEMAS),
                          f"select * from pattern [every a=Ev -> b=Ev({criteria})]", "s")
    node = plan.pipeline.pattern.root.children[1]
    assert isinstance(node, Filter)
    return node


@pytest.mark.parametrize(("criteria", "value"), [
    ("v > a.v", 7),
    ("a.v <= v", 7),
    ("k = a.k and v < a.v", 7),
    ("v >= a.w and k = 'x' and w < 3", 9),
])
def test_one_comparison_with_a_tag_orders_by_the_tags_value(criteria: str,
                                                           value: int) -> None:
    ordered = _second_filter(criteria).ordered_by
    assert ordered is not None
    assert ordered((None, {"a": {"k": "x", "v": 7, "w": 9}}), None) == value


@pytest.mark.parametrize("criteria", [
    "k = a.k",  # an equality alone: one index entry per value
    "v > a.v and w > a.w",  # two sorted indexes, nested in an order not modelled
    "v != a.v",
    "v > a.v + 1",  # an expression of the tag, not its property
    "v > a.v or k = 'x'",
    "v > 3",
])
def test_other_criteria_keep_the_start_order(criteria: str) -> None:
    assert _second_filter(criteria).ordered_by is None

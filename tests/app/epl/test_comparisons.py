"""Ordering comparisons: ``property <op> constant`` (compiled to one function that reads
the property itself) gives what the general null-safe operator gives."""

from __future__ import annotations

import operator
from typing import Any

import pytest

from app.epl.expr import Scope, compile_expr
from app.epl.parser import parse_expression
from operators.base import PartitionCtx

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _compile(text: str) -> Any:
    return compile_expr(parse_expression(text), Scope("event"))


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("value", [None, 150, 200, 250.5, -3])
def test_property_against_constant(op: str, value: Any) -> None:
    fn = _compile(f"amount {op} 200")
    want = None if value is None else OPS[op](value, 200)
    assert fn({"amount": value}, PartitionCtx()) == want
    assert fn({}, PartitionCtx()) is None  # an absent property is null


@pytest.mark.parametrize(("text", "row", "expected"), [
    ("amount >= 200.5", {"amount": 200.5}, True),
    ("name < 'm'", {"name": "k"}, True),
    ("name < 'm'", {"name": "z"}, False),
    ("amount > null", {"amount": 3}, None),  # a null constant: the general path
    ("200 <= amount", {"amount": 200}, True),  # constant on the left: the general path
    ("amount + 1 > 2", {"amount": 2}, True),
])
def test_other_shapes(text: str, row: dict[str, Any], expected: Any) -> None:
    assert _compile(text)(row, PartitionCtx()) == expected


def test_mixed_types_raise_as_before() -> None:
    """A string property against a number fails as the general operator does."""
    with pytest.raises(TypeError):
        _compile("name > 3")({"name": "x"}, PartitionCtx())

"""Arithmetic operators as Esper evaluates them in its default configuration: ``/`` gives
a double with Java semantics for a zero divisor, ``%`` takes the dividend's sign."""

from __future__ import annotations

import math
from typing import Any

import pytest

from app.epl.expr import Scope, compile_expr
from app.epl.parser import parse_expression
from operators.base import PartitionCtx


def _eval(text: str, **row: Any) -> Any:
    return compile_expr(parse_expression(text), Scope("event"))(row, PartitionCtx())


@pytest.mark.parametrize(("text", "row", "expected"), [
    ("a / b", {"a": 7, "b": 4}, 1.75),
    ("a / b", {"a": 7, "b": 0}, math.inf),
    ("a / b", {"a": -7, "b": 0}, -math.inf),
    ("a / b", {"a": 7.5, "b": -0.0}, -math.inf),
    ("a / b", {"a": 5000000000, "b": 0}, math.inf),
    ("a % b", {"a": -7, "b": 3}, -1),
    ("a % b", {"a": 7, "b": -3}, 1),
    ("a % b", {"a": -10.5, "b": 2.5}, -0.5),
    ("a % b", {"a": 7, "b": 0}, None),
    ("a / b", {"a": None, "b": 0}, None),
    ("a % b", {"a": 1.0, "b": None}, None),
])
def test_division_and_remainder(text: str, row: dict[str, Any], expected: Any) -> None:
    got = _eval(text, **row)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(("text", "row"), [
    ("a / b", {"a": 0, "b": 0}),
    ("a / b", {"a": 0.0, "b": 0.0}),
    ("a / b", {"a": math.nan, "b": 0}),
    ("a % b", {"a": 7.5, "b": 0.0}),
    ("a % b", {"a": 7, "b": 0.0}),
    ("a % b", {"a": math.inf, "b": 2.0}),
])
def test_undefined_results_are_nan(text: str, row: dict[str, Any]) -> None:
    assert math.isnan(_eval(text, **row))

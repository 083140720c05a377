"""Long operator chains (compiled in segments) give what nested two-operand closures
give: the same value, operands read in the same order, the same short-circuits."""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.epl import ast as A
from app.epl import expr as X
from app.epl.parser import parse_expression


class Recording(dict):
    """An event that records which properties are read, in order."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.read: list[str] = []

    def get(self, key: Any, default: Any = None) -> Any:
        self.read.append(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.read.append(key)
        return super().__getitem__(key)


def nested(node: A.Node, scope: X.Scope) -> X.Expr:
    """The reference: every Binary as a two-operand closure, recursively."""
    if isinstance(node, A.Binary):
        left, right = nested(node.left, scope), nested(node.right, scope)
        return X._combiner(node.op)(left, right)
    return X.compile_expr(node, scope)


@pytest.mark.parametrize("ops", [["and"], ["or"], ["and", "or"], ["+", "-", "*"]])
@pytest.mark.parametrize("length", [X.SEGMENT - 1, X.SEGMENT + 1, 3 * X.SEGMENT + 5])
def test_a_chain_evaluates_as_nested_closures(ops: list[str], length: int) -> None:
    rnd = random.Random(length * 7 + len(ops))
    names = [f"p{i}" for i in range(length + 1)]
    text = names[0] + "".join(f" {rnd.choice(ops)} {n}" for n in names[1:])
    node = parse_expression(text)
    scope = X.Scope("event")
    chain, reference = X.compile_expr(node, scope), nested(node, scope)
    logic = ops[0] in ("and", "or")
    values: list[Any] = [True, False, None, 0, 1] if logic else [1, 2, -3, 0.5, None]
    for _ in range(200):
        weights = [1, 1, 0.02, 0.1, 1] if logic else [1, 1, 1, 1, 0.01]
        row = {n: rnd.choices(values, weights)[0] for n in names}
        a, b = Recording(row), Recording(row)
        assert chain(a, None) == reference(b, None)
        assert a.read == b.read and a.read[0] == names[0]

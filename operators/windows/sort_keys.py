"""Comparable sort keys for the sorted and ranked windows (asc/desc, nulls)."""

from __future__ import annotations

from functools import total_ordering
from typing import Any

from operators.base import Expr, PartitionCtx, Row


@total_ordering
class Desc:
    """Wraps a non-numeric value so that it sorts in descending order."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Desc) and self.v == other.v

    def __lt__(self, other: Desc) -> bool:
        return other.v < self.v

    def __hash__(self) -> int:
        return hash(self.v)


def sort_item(value: Any, descending: bool) -> tuple:
    """One criterion as a tuple that compares in C where it can.

    Esper ref. 14.3.19 is silent on nulls: a null sorts before every value ascending and
    after every value descending (null is the smallest value).
    """
    if value is None:
        return (2,) if descending else (0,)
    if descending:
        if isinstance(value, (int, float)):
            return (1, -value)
        return (1, Desc(value))
    return (1, value)


def sort_values(exprs: tuple[Expr, ...], row: Row, ctx: PartitionCtx) -> list[Any]:
    """The raw criteria values of a row (persisted so restores need no re-evaluation)."""
    return [e(row, ctx) for e in exprs]


def sort_prefix(values: list[Any], descending: tuple[bool, ...]) -> tuple:
    """The comparable key of the criteria values (without the arrival tie-break)."""
    return tuple(sort_item(v, d) for v, d in zip(values, descending, strict=True))

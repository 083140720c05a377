"""User functions the scenarios ``udf_*`` and ``context_hash_user_function`` declare in
their ``functions:`` (kepl imports this module from the scenario's directory).  Each one
mirrors an expression Esper evaluates natively, which is how their rows were checked."""

from __future__ import annotations

from typing import Any


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: s[0]*31^(n-1) + ... + s[n-1] in 32-bit arithmetic."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def compute_hash(txn: dict[str, Any]) -> int:
    """The hash of a BankTxn for ``coalesce by computeHash(*)``: its customer id's Java
    hash code (Esper's ``hash_code(custId)`` gives the same partitions)."""
    return java_string_hash(txn["custId"])


def fee(amount: float) -> float:
    """One percent of an amount (``amount * 0.01``)."""
    return amount * 0.01


def within_ms(oldest: int, newest: int, limit: int) -> bool:
    """Whether two timestamps lie at most ``limit`` ms apart (``newest - oldest <= limit``)."""
    return newest - oldest <= limit


class Spread:
    """Aggregation: the largest minus the smallest value in the aggregation (``max(x) -
    min(x)``), null when it is empty; nulls are skipped.  Its state is the attribute dict:
    a list of values, kept sorted."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def enter(self, value: float | None) -> None:
        if value is not None:
            self.values.append(value)
            self.values.sort()

    def leave(self, value: float | None) -> None:
        if value is not None:
            self.values.remove(value)

    def value(self) -> float | None:
        return self.values[-1] - self.values[0] if self.values else None


class WeightedMean:
    """Aggregation of two arguments: sum(value * weight) / sum(weight), with an explicit
    state (``get_state``/``set_state``)."""

    def __init__(self) -> None:
        self.num = 0.0
        self.den = 0.0

    def enter(self, value: float | None, weight: float | None) -> None:
        if value is not None and weight is not None:
            self.num += value * weight
            self.den += weight

    def leave(self, value: float | None, weight: float | None) -> None:
        if value is not None and weight is not None:
            self.num -= value * weight
            self.den -= weight

    def value(self) -> float | None:
        return self.num / self.den if self.den else None

    def get_state(self) -> list[float]:
        return [self.num, self.den]

    def set_state(self, state: list[float]) -> None:
        self.num, self.den = state

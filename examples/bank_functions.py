"""User functions of examples/bank-functions.yaml: plain Python, imported by kepl from
this directory (the statement file's), called by the statements by their declared names."""

from __future__ import annotations


def risk(amount: float, account: str) -> str:
    """A risk class for a withdrawal (a pure function: its answer depends on its
    arguments alone, so replays give the same rows)."""
    if amount >= 400:
        return "high"
    return "medium" if account.startswith("W1") else "low"


def account_hash(account: str) -> int:
    """The hash code that spreads accounts over the partitions of a hash context."""
    return sum(ord(ch) * 31 ** i for i, ch in enumerate(reversed(account))) & 0x7FFFFFFF


class Spread:
    """Aggregation: the largest minus the smallest amount in the aggregation.  Its state,
    the attributes, is JSON (a list of numbers), so kepl keeps it in the partition store
    and restores it after a restart."""

    def __init__(self) -> None:
        self.amounts: list[float] = []

    def enter(self, amount: float | None) -> None:
        if amount is not None:
            self.amounts.append(amount)

    def leave(self, amount: float | None) -> None:
        if amount is not None:
            self.amounts.remove(amount)

    def value(self) -> float | None:
        return max(self.amounts) - min(self.amounts) if self.amounts else None

"""User functions for the Kafka tests of user functions: each raises on one input."""

from __future__ import annotations


def checked(amount: float) -> float:
    """The amount itself; a negative amount raises."""
    if amount < 0:
        raise ValueError("negative amount")
    return amount


def bucket(account: str) -> int:
    """A hash code for a hash context: the account's length; account BAD raises."""
    if account == "BAD":
        raise KeyError(account)
    return len(account)


def capped(amount: float) -> float:
    """The amount itself; an amount over 100 raises."""
    if amount > 100:
        raise ValueError("too large")
    return amount

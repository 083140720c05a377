"""The aggregator of user aggregation functions: live instances as state, written to the
store as JSON and read back into fresh instances; user errors become UserFunctionError."""

from __future__ import annotations

from typing import Any

import pytest

from operators.state import decode_value, encode_value
from operators.user_functions import UserAggregator, UserFunctionError


class Mean:
    def __init__(self) -> None:
        self.total = 0.0
        self.n = 0

    def enter(self, v: float) -> None:
        self.total += v
        self.n += 1

    def leave(self, v: float) -> None:
        if v < 0:
            raise ValueError("cannot leave")
        self.total -= v
        self.n -= 1

    def value(self) -> float | None:
        return self.total / self.n if self.n else None


class Pairs:
    """Two arguments, an explicit state."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, Any]] = []

    def enter(self, a: Any, b: Any) -> None:
        self.seen.append((a, b))

    def leave(self, a: Any, b: Any) -> None:
        self.seen.remove((a, b))

    def value(self) -> int:
        return len(self.seen)

    def get_state(self) -> list[list[Any]]:
        return [list(p) for p in self.seen]

    def set_state(self, state: list[list[Any]]) -> None:
        self.seen = [tuple(p) for p in state]  # type: ignore[misc]


def roundtrip(state: Any) -> Any:
    return decode_value(encode_value([state]))[0]


def test_the_attribute_dict_is_the_default_state() -> None:
    agg = UserAggregator("mean", Mean)
    s = agg.enter(agg.enter(agg.initial(), 1.0), 5.0)
    assert agg.result(s) == 3.0
    stored = roundtrip(s)
    assert stored == {"$user": {"total": 6.0, "n": 2}}
    assert agg.result(stored) == 3.0
    s2 = agg.leave(stored, 1.0)
    assert agg.result(s2) == 5.0


def test_get_state_and_set_state_and_spread_arguments() -> None:
    agg = UserAggregator("pairs", Pairs, arity=2)
    s = agg.enter(agg.initial(), ("a", 1))
    s = agg.enter(s, ("b", 2))
    stored = roundtrip(s)
    assert stored == {"$user": [["a", 1], ["b", 2]]}
    assert agg.result(agg.leave(stored, ("a", 1))) == 1


def test_a_raising_method_is_a_user_function_error() -> None:
    agg = UserAggregator("mean", Mean)
    with pytest.raises(UserFunctionError, match="aggregation function mean.leave raised "
                                                "ValueError: cannot leave"):
        agg.leave(agg.initial(), -1.0)
    with pytest.raises(UserFunctionError, match="aggregation function broken: creating its "
                                                "state raised ZeroDivisionError"):
        UserAggregator("broken", lambda: 1 / 0).initial()

"""Per-event state writes stay constant whatever the window size (O(1) layout)."""

from __future__ import annotations

from typing import Any

import pytest

from operators.base import PartitionCtx
from operators.state import MemoryNamespace
from operators.windows.registry import WindowParam
from tests.operators.harness import P, SumAgg, T, W, X, chain, prop


class Counting:
    """A MemoryNamespace wrapper counting puts and deletes across its children."""

    def __init__(self, ns: MemoryNamespace, counter: list[int]) -> None:
        self.ns = ns
        self.counter = counter

    def get(self, key: Any, default: Any = None) -> Any:
        return self.ns.get(key, default)

    def put(self, key: Any, value: Any) -> None:
        self.counter[0] += 1
        self.ns.put(key, value)

    def put_new(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def delete(self, key: Any) -> None:
        self.counter[0] += 1
        self.ns.delete(key)

    def items(self):
        return self.ns.items()

    def clear(self) -> None:
        self.ns.clear()

    def child(self, name: Any) -> Counting:
        return Counting(self.ns.child(name), self.counter)


def writes_per_event(spec: Any, n: int, step_ms: int = 1) -> float:
    counter = [0]
    view = spec.build(Counting(MemoryNamespace(), counter), PartitionCtx())
    now = 0

    def run(k: int) -> None:
        nonlocal now
        for i in range(k):
            now += step_ms
            while (due := view.next_timer()) is not None and due <= now:
                view.on_time(due)
            view.on_events([{"symbol": f"S{i % 50}", "price": float(i % 7), "ts": now}], [], now)

    run(n)  # fill
    counter[0] = 0
    run(1000)
    return counter[0] / 1000


SUM = (("s", SumAgg(), prop("price")),)
SPECS = {
    "length": lambda n: W("length", P(n)),
    "time": lambda n: W("time", T(n)),
    "unique": lambda n: W("unique", X("symbol")),
    "sort": lambda n: W("sort", P(n), X("price", descending=True)),
    "groupwin_length": lambda n: chain(W("groupwin", X("symbol")), W("length", P(max(1, n // 50)))),
    "expr": lambda n: W(
        "expr",
        WindowParam(
            "count", is_constant=False, expr=lambda e, c: e["current_count"] <= n, aggregates=SUM
        ),
    ),
    "length_uni": lambda n: chain(W("length", P(n)), W("uni", X("price"))),
    "time_order": lambda n: W("time_order", X("ts"), T(n)),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_writes_do_not_grow_with_window_size(name: str) -> None:
    small = writes_per_event(SPECS[name](10), 10)
    big = writes_per_event(SPECS[name](5000), 5000)
    assert big - small <= 0.1, (small, big)
    assert big <= 5

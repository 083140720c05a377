"""Timed context statements restored lazily give the rows of an up-front restore.

A reference engine runs a seeded stream of events and clock moves over a keyed context;
after every step its store is checkpointed and restored twice, once building every
context partition at deploy (``Engine.lazy`` off) and once building each at its first
event or when its stored timer is due.  Both then run the rest of the stream: their rows
must equal each other's and the reference's at every step, in the same order.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from operators.state import MemoryStore

SCHEMAS = {"T": {"symbol": "string", "amount": "double"}}
CONTEXT = ("ctx", "create context BySymbol partition by symbol from T")
STATEMENTS = {
    "time": "context BySymbol select symbol, count(*) as cnt, sum(amount) as total "
            "from T#time(4 sec)",
    "time_batch": "context BySymbol select symbol, count(*) as cnt, sum(amount) as total "
                  "from T#time_batch(3 sec)",
    "output_every": "context BySymbol select symbol, count(*) as cnt "
                    "from T#length(3) output last every 2 sec",
    "output_snapshot": "context BySymbol select symbol, sum(amount) as total "
                       "from T#time(5 sec) output snapshot every 3 sec",
}
Step = tuple[str, Any]


def _steps(seed: int, n: int = 40) -> list[Step]:
    rnd = random.Random(seed)
    t = 0
    steps: list[Step] = []
    for _ in range(n):
        if rnd.random() < 0.4:
            t += rnd.choice([300, 1000, 1700, 2500, 6000])
            steps.append(("time", t))
        else:
            steps.append(("event", (rnd.choice("ABCDEF"), float(rnd.randrange(10)))))
    return steps


class Side:
    """An engine and the rows its listeners saw, step by step."""

    def __init__(self, statements: list[tuple[str, str]], store: MemoryStore | None = None,
                 now: int = 0, lazy: bool = True) -> None:
        catalog = Catalog.from_schemas(SCHEMAS)
        self.rows: list[tuple[str, list, list, Any]] = []
        self.engine = Engine(store=store if store is not None else MemoryStore(), now_ms=now)
        self.engine.lazy = lazy
        for name, epl in statements:
            self.engine.deploy(plan_statement(catalog, epl, name))
        self.engine.listeners.append(
            lambda s, new, old, pid: self.rows.append((s, list(new), list(old), pid)))

    def restored(self, statements: list[tuple[str, str]], lazy: bool) -> Side:
        e = self.engine
        return Side(statements, MemoryStore.restore(e.store.checkpoint()), e.now_ms, lazy)

    def step(self, step: Step) -> list[tuple[str, list, list, Any]]:
        self.rows.clear()
        kind, arg = step
        if kind == "time":
            self.engine.advance_time(arg)
        else:
            self.engine.send("T", {"symbol": arg[0], "amount": arg[1]})
        return list(self.rows)


@pytest.mark.parametrize("name", sorted(STATEMENTS))
@pytest.mark.parametrize("seed", [1, 2])
def test_lazy_restore_gives_the_rows_of_an_up_front_restore(name: str, seed: int) -> None:
    statements = [CONTEXT, (name, STATEMENTS[name])]
    steps = _steps(seed)
    ref = Side(statements)
    expected = [ref.step(s) for s in steps]
    assert any(r for r in expected)
    fired = 0
    for at in range(1, len(steps)):
        base = Side(statements)
        for s in steps[:at]:
            base.step(s)
        lazy = base.restored(statements, lazy=True)
        eager = base.restored(statements, lazy=False)
        st = lazy.engine.statements[name]
        assert eager.engine.statements[name].deferred is None
        if lazy.engine.contexts["BySymbol"].manager.live():
            assert st.deferred is not None and st.pipelines == {}
        for i, s in enumerate(steps[at:], at):
            was = len(st.pipelines)
            got = lazy.step(s)
            assert got == eager.step(s) == expected[i], (at, i, s)
            if s[0] == "time" and len(st.pipelines) > was:
                fired += 1  # a partition built by its timer, not an event
    assert fired > 0


def test_restore_each_step_of_a_restore() -> None:
    """A lazily restored engine checkpointed before its deferred partitions are built
    keeps their timers: restored again at every step, the rows are the reference's."""
    statements = [CONTEXT] + [(n, e) for n, e in sorted(STATEMENTS.items())]
    steps = _steps(7, 50)
    ref = Side(statements)
    side = Side(statements)
    for s in steps:
        side = side.restored(statements, lazy=True)
        assert side.step(s) == ref.step(s), s

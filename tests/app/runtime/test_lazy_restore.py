"""A restored engine builds a context partition's pipeline at its first use.

Each test runs the same input through an engine that is never restored and through one
rebuilt from a checkpoint of its store: the rows, the rows iteration gives, and the state
after the deferred partitions are built must be the same.  A timed statement's partition
is built when its stored timer comes due, so its timers fire at their time for keys that
see no event after the restore (test_lazy_restore_timers.py compares them step by step).
"""

from __future__ import annotations

from typing import Any

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from operators.state import MemoryStore

SCHEMAS = {"T": {"symbol": "string", "amount": "double"}}
STATEMENTS = [
    ("ctx", "create context BySymbol partition by symbol from T"),
    ("len", "context BySymbol select symbol, count(*) as cnt, sum(amount) as total "
            "from T#length(2)"),
    ("tim", "context BySymbol select symbol, count(*) as cnt from T#time(10 sec)"),
]


class Side:
    """An engine and the rows its listeners saw, as (statement, new, old, partition)."""

    def __init__(self, statements: list[tuple[str, str]], store: MemoryStore | None = None,
                 now: int = 0) -> None:
        catalog = Catalog.from_schemas(SCHEMAS)
        self.plans = [plan_statement(catalog, epl, name) for name, epl in statements]
        self.rows: list[tuple[str, list, list, Any]] = []
        self.engine = Engine(store=store if store is not None else MemoryStore(), now_ms=now)
        for plan in self.plans:
            self.engine.deploy(plan)
        self.engine.listeners.append(
            lambda s, new, old, pid: self.rows.append((s, list(new), list(old), pid)))

    def restored(self, statements: list[tuple[str, str]]) -> Side:
        e = self.engine
        return Side(statements, MemoryStore.restore(e.store.checkpoint()), e.now_ms)


def _send(sides: list[Side], symbol: str, amount: float) -> None:
    for s in sides:
        s.engine.send("T", {"symbol": symbol, "amount": amount})


def _advance(sides: list[Side], t: int) -> None:
    for s in sides:
        s.engine.advance_time(t)


def _filled(statements: list[tuple[str, str]]) -> tuple[Side, Side]:
    """A reference engine and one restored after three keys saw events."""
    ref = Side(statements)
    for i, (sym, amt) in enumerate([("A", 1.0), ("B", 2.0), ("A", 3.0), ("C", 4.0),
                                    ("B", 5.0), ("A", 6.0)]):
        _advance([ref], 1000 * (i + 1))
        _send([ref], sym, amt)
    ref.rows.clear()
    return ref, ref.restored(statements)


def test_untimed_partitions_wait_for_their_first_event() -> None:
    ref, lazy = _filled(STATEMENTS)
    st = lazy.engine.statements["len"]
    assert st.pipelines == {}
    assert list(st.deferred or {}) == [0, 1, 2]
    tim = lazy.engine.statements["tim"]  # timed: built as its timers come due
    assert tim.pipelines == {} and list(tim.deferred or {}) == [0, 1, 2]
    _advance([ref, lazy], 7000)
    _send([ref, lazy], "B", 7.0)
    assert list(st.pipelines) == [1]
    assert lazy.rows == ref.rows
    assert [r[:2] for r in lazy.rows] == [
        ("len", [{"symbol": "B", "cnt": 2, "total": 12.0}]),
        ("tim", [{"symbol": "B", "cnt": 3}])]
    _send([ref, lazy], "D", 8.0)  # a new key after the restore
    assert lazy.rows == ref.rows


def test_state_equal_after_deferred_partitions_are_built() -> None:
    ref, lazy = _filled(STATEMENTS)
    _advance([ref, lazy], 7000)
    _send([ref, lazy], "C", 9.0)
    _send([ref, lazy], "E", 1.5)
    # iteration builds the rest, in the order an engine built at once gives them
    assert lazy.engine.iterate("len") == ref.engine.iterate("len")
    st = lazy.engine.statements["len"]
    assert st.deferred is None
    assert list(st.pipelines) == list(ref.engine.statements["len"].pipelines) == [0, 1, 2, 3]
    assert lazy.engine.store.checkpoint() == ref.engine.store.checkpoint()
    for sym in "ABCE":
        _send([ref, lazy], sym, 2.0)
    assert lazy.rows == ref.rows


def test_timer_of_a_key_without_events_after_the_restore_fires_at_its_time() -> None:
    ref, lazy = _filled(STATEMENTS)
    _advance([ref, lazy], 10_999)
    assert lazy.rows == ref.rows == []
    _advance([ref, lazy], 11_000)  # A's first event (t=1000) leaves its time window
    assert lazy.rows == ref.rows == [("tim", [{"symbol": "A", "cnt": 2}], [], 0)]
    _advance([ref, lazy], 20_000)
    assert lazy.rows == ref.rows
    assert [(r[3], r[1][0]["cnt"]) for r in lazy.rows] == [
        (0, 2), (1, 1), (0, 1), (2, 0), (1, 0), (0, 0)]
    assert lazy.engine.statements["len"].pipelines == {}  # no event: still deferred


def test_restored_again_before_any_event() -> None:
    """A restore of a restore whose partitions were never built keeps their state."""
    ref, lazy = _filled(STATEMENTS)
    again = lazy.restored(STATEMENTS)
    assert again.engine.store.checkpoint() == ref.engine.store.checkpoint()
    _advance([ref, again], 7000)
    for sym in "CAB":
        _send([ref, again], sym, 3.0)
    assert again.rows == ref.rows


def test_statement_with_a_timer_waits_for_its_timer() -> None:
    statements = [STATEMENTS[0], ("out", "context BySymbol select symbol, count(*) as cnt "
                                         "from T output last every 5 sec")]
    ref, lazy = _filled(statements)
    st = lazy.engine.statements["out"]
    assert st.pipelines == {} and list(st.deferred or {}) == [0, 1, 2]
    _advance([ref, lazy], 30_000)
    assert lazy.rows == ref.rows != []
    assert sorted(st.pipelines) == [0, 1, 2]


def test_statement_reading_a_variable_is_not_deferred() -> None:
    statements = [("v", "create variable int n = 2"), STATEMENTS[0],
                  ("len", "context BySymbol select symbol, count(*) as cnt from T#length(n)")]
    ref, lazy = _filled(statements)
    st = lazy.engine.statements["len"]
    assert st.deferred is None and sorted(st.pipelines) == [0, 1, 2]
    _send([ref, lazy], "A", 1.0)
    assert lazy.rows == ref.rows

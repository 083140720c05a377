"""The view driver of the operator tests, and helpers to write window parameters.

``harness(spec)`` drives a view like the runtime does: events at the current clock,
every due timer fired at its own due time and in order.  It is parametrized over
the stores and restore modes, so every test also proves that rebuilding the view from
its state (a fresh instance over the same namespace, a MemoryStore checkpoint round
trip, a reopened RocksDB) before every step changes nothing in the output.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from operators.base import PartitionCtx, Row, Rows
from operators.state import MemoryStore, RocksStore
from operators.windows.common import must_post
from operators.windows.registry import WindowParam, make_view_chain, make_view_spec

MODES = ["memory", "memory-rebuild", "memory-checkpoint", "rocks", "rocks-reopen"]


class Harness:
    """One view under test, its store, the clock, and the restore policy."""

    def __init__(self, spec: Any, mode: str, tmp_path: Path, start_ms: int = 0) -> None:
        self.spec = spec
        self.mode = mode
        self.tmp_path = tmp_path
        self.now = start_ms
        self.ctx = PartitionCtx(now_ms=start_ms)
        self.path = tmp_path / "rocks"
        self.store: Any = RocksStore(self.path) if mode.startswith("rocks") else MemoryStore()
        self.view = spec.build(self._ns(), self.ctx)
        self.restores = 0

    def _ns(self) -> Any:
        return self.store.namespace("stmt", 0, "view")

    def restore(self) -> None:
        """Rebuild the view from its state the way this mode's store allows."""
        if self.mode == "memory-checkpoint":
            self.store = MemoryStore.restore(self.store.checkpoint())
        elif self.mode == "rocks-reopen":
            self.store.close()
            self.store = RocksStore(self.path)
        self.view = self.spec.build(self._ns(), self.ctx)
        self.restores += 1

    def _step(self) -> None:
        if self.mode not in ("memory", "rocks"):
            self.restore()

    def send(self, *rows: Row, old: Rows = ()) -> tuple[Rows, Rows]:
        """Deliver rows (and an upstream remove stream) at the current clock."""
        self._step()
        self.ctx.now_ms = self.now
        new, out_old = self.view.on_events(list(rows), list(old), self.now)
        return list(new), list(out_old)

    def advance(self, t: int) -> list[tuple[int, Rows, Rows]]:
        """Move the clock to t: fire each due timer at its own time; (due, new, old) posted."""
        assert t >= self.now, "time never moves backwards"
        out: list[tuple[int, Rows, Rows]] = []
        while True:
            self._step()
            due = self.view.next_timer()
            if due is None or due > t:
                break
            assert due >= self.now, f"timer {due} in the past (now {self.now})"
            self.now = due
            self.ctx.now_ms = due
            emit = self.view.on_time(due)
            if must_post(emit):
                out.append((due, list(emit[0]), list(emit[1])))
        self.now = t
        self.ctx.now_ms = t
        return out

    def at(self, t: int, *rows: Row) -> tuple[Rows, Rows]:
        """Advance to t (asserting no timer output), then send rows."""
        fired = self.advance(t)
        assert fired == [], f"unexpected output before {t}: {fired}"
        return self.send(*rows)

    def contents(self) -> list[Row]:
        """The view's contents."""
        return list(self.view.contents())

    def close(self) -> None:
        """Release the store."""
        if isinstance(self.store, RocksStore):
            self.store.close()


# --------------------------------------------------------------------------- param helpers


def prop(name: str) -> Callable[[Row, PartitionCtx], Any]:
    """A compiled property expression."""
    return lambda row, ctx: row.get(name)


def P(value: Any, text: str | None = None) -> WindowParam:
    """A constant parameter (a plain number for a time parameter means seconds)."""
    return WindowParam(text if text is not None else repr(value), value)


def T(ms: int, text: str | None = None) -> WindowParam:
    """A time-period parameter in ms."""
    return WindowParam(text or f"{ms} msec", ms, is_time=True)


def X(name: str, descending: bool = False) -> WindowParam:
    """A property parameter."""
    text = name + (" desc" if descending else "")
    return WindowParam(text, is_constant=False, expr=prop(name), descending=descending)


def W(name: str, *params: WindowParam, namespace: str | None = None) -> Any:
    """A window spec by name."""
    return make_view_spec(name, list(params), namespace)


def chain(*specs: Any, union: bool = False) -> Any:
    """The composed spec of several windows."""
    return make_view_chain(list(specs), union)


class SumAgg:
    """A tiny sum aggregator following operators.aggregates' protocol (for expiry tests)."""

    def initial(self) -> list[Any]:
        return [0, 0]

    def enter(self, state: list[Any], value: Any) -> list[Any]:
        if value is not None:
            state[0] += value
            state[1] += 1
        return state

    def leave(self, state: list[Any], value: Any) -> list[Any]:
        if value is not None:
            state[0] -= value
            state[1] -= 1
        return state

    def result(self, state: list[Any]) -> Any:
        return state[0] if state[1] else None

"""Runtime side of user functions: calls that turn a raise into ``UserFunctionError`` and
the aggregator that keeps a user aggregation object as aggregation state.

A user aggregation is a class (or factory) whose instances have ``enter(value)``,
``leave(value)`` and ``value()``.  The live instance is the state while the partition
runs; the store writes it as JSON through ``plain()``: the instance's ``get_state()`` if
it has one, else its attribute dict.  A state read back from the store is a fresh
instance given that JSON (``set_state(state)``, else its attributes are set from it).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from operators.aggregates import Aggregator


class UserFunctionError(Exception):
    """A user function raised, or answered a value of another type than declared; the
    event that caused it goes to the dead-letter topic."""


_TIMER_FAILURES: ContextVar[list[str] | None] = ContextVar("kepl_timer_failures",
                                                           default=None)


class TimerFailures:
    """While timers fire there is no event to dead-letter: a user function failing
    then answers null (an aggregation keeps its state) and the failure is listed in the
    list ``with`` gives (a class, not a generator: entered at every clock move)."""

    __slots__ = ("failures", "token")

    def __enter__(self) -> list[str]:
        self.failures: list[str] = []
        self.token = _TIMER_FAILURES.set(self.failures)
        return self.failures

    def __exit__(self, *exc: object) -> None:
        _TIMER_FAILURES.reset(self.token)


def failures_as_null() -> TimerFailures:
    """A ``with`` block in which user-function failures are listed, not raised."""
    return TimerFailures()


def failed(error: UserFunctionError) -> None:
    """Raise ``error``, or while timers fire note it (the caller then uses null)."""
    failures = _TIMER_FAILURES.get()
    if failures is None:
        raise error
    failures.append(str(error))


class LiveState:
    """A user aggregation instance as one aggregation state."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def plain(self) -> Any:
        """The JSON form the store writes (see module docstring)."""
        get = getattr(self.obj, "get_state", None)
        return {"$user": get() if get is not None else dict(vars(self.obj))}


class UserAggregator(Aggregator):
    """``name(args)`` of a declared aggregation function; ``arity`` above one passes the
    arguments as a tuple, spread over ``enter``/``leave``."""

    def __init__(self, name: str, factory: Callable[[], Any], arity: int = 1) -> None:
        self.name = name
        self.factory = factory
        self.spread = arity > 1

    def _new(self) -> Any:
        try:
            return self.factory()
        except Exception as e:  # noqa: BLE001 - a user error dead-letters the event
            failed(UserFunctionError(f"aggregation function {self.name}: creating its "
                                     f"state raised {type(e).__name__}: {e}"))
            return None

    def _live(self, state: Any) -> LiveState:
        if type(state) is LiveState:
            return state
        obj = self._new()
        saved = state.get("$user") if isinstance(state, dict) else None
        setter = getattr(obj, "set_state", None)
        try:
            if setter is not None:
                setter(saved)
            elif isinstance(saved, dict):
                vars(obj).update(saved)
        except Exception as e:  # noqa: BLE001
            failed(UserFunctionError(f"aggregation function {self.name}: restoring its "
                                     f"state raised {type(e).__name__}: {e}"))
        return LiveState(obj)

    def initial(self) -> Any:
        return LiveState(self._new())

    def _apply(self, method: str, state: Any, value: Any) -> Any:
        live = self._live(state)
        try:
            fn = getattr(live.obj, method)
            if self.spread:
                fn(*value)
            else:
                fn(value)
        except Exception as e:  # noqa: BLE001
            failed(UserFunctionError(f"aggregation function {self.name}.{method} raised "
                                     f"{type(e).__name__}: {e}"))
        return live

    def enter(self, state: Any, value: Any) -> Any:
        return self._apply("enter", state, value)

    def leave(self, state: Any, value: Any) -> Any:
        return self._apply("leave", state, value)

    def result(self, state: Any) -> Any:
        live = self._live(state)
        try:
            return live.obj.value()
        except Exception as e:  # noqa: BLE001
            failed(UserFunctionError(f"aggregation function {self.name}.value raised "
                                     f"{type(e).__name__}: {e}"))
            return None

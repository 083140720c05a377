"""Frozen slotted dataclasses for the AST, cheap to create at import.

``dataclasses`` compiles six methods for each frozen class (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``): for the AST's hundred-odd
classes that was most of ``kepl check``'s start-up.  Here the last five are written once,
in ``FrozenNode``, and a class's ``__init__`` is compiled at its first instance.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from typing import Any, TypeVar

_C = TypeVar("_C", bound=type)


def dataclass(*, frozen: bool, slots: bool) -> Callable[[_C], _C]:
    """This module's ``@dataclass(frozen=True, slots=True)``: a real slotted dataclass
    (``fields``, ``replace``, ``__match_args__``) whose immutability, equality, hash and
    repr come from ``FrozenNode`` and whose ``__init__`` is compiled at its first
    instantiation; ``dataclasses`` would compile six methods a class at import, most of
    the cost of importing the AST (``kepl check`` start-up)."""
    if not (frozen and slots):
        raise TypeError("AST classes are frozen and slotted")

    def make(cls: _C) -> _C:
        cls = dataclasses.dataclass(slots=True, init=False, repr=False, eq=False)(cls)
        compared = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
        shown = tuple(f.name for f in dataclasses.fields(cls) if f.repr)
        cls._compared = compared  # type: ignore[attr-defined]
        cls._shown = shown  # type: ignore[attr-defined]
        cls.__init__ = _first_init  # type: ignore[misc]
        return cls
    return make


def _first_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """Stands for a class's ``__init__`` until its first instance."""
    _make_init(type(self))
    init = type(self).__init__
    if init is _first_init:
        raise TypeError(f"{type(self).__name__} has no __init__")
    init(self, *args, **kwargs)


def _make_init(cls: type) -> None:
    """The ``__init__`` of ``cls``: parameters as ``dataclasses`` would make them
    (positional fields in order, then keyword-only ones), each field set with
    ``object.__setattr__`` as a frozen dataclass does."""
    ns: dict[str, Any] = {"_set": object.__setattr__}
    positional: list[str] = []
    keyword: list[str] = []
    names = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.default_factory is not dataclasses.MISSING:
            raise TypeError("AST fields take plain defaults")
        param = f.name
        if f.default is not dataclasses.MISSING:
            ns[f"_d_{f.name}"] = f.default
            param += f"=_d_{f.name}"
        (keyword if f.kw_only else positional).append(param)
        names.append(f.name)
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    body = "".join(f"\n    _set(self, {n!r}, {n})" for n in names) or "\n    pass"
    exec(f"def __init__({params}):{body}\n", ns)  # noqa: S102 - from the class's fields
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init


class FrozenNode:
    """Immutability, equality (compared fields, same class), hash and repr of the AST
    classes, as a frozen dataclass defines them."""

    __slots__ = ()
    _compared: tuple[str, ...]
    _shown: tuple[str, ...]

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return _values(self) == _values(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(_values(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._shown)
        return f"{self.__class__.__qualname__}({shown})"

    def __getstate__(self) -> list[Any]:
        return [getattr(self, f.name) for f in dataclasses.fields(self)]  # type: ignore[arg-type]

    def __setstate__(self, state: list[Any]) -> None:
        for f, value in zip(dataclasses.fields(self), state):  # type: ignore[arg-type]
            object.__setattr__(self, f.name, value)


def _values(node: Any) -> tuple[Any, ...]:
    return tuple([getattr(node, n) for n in node._compared])

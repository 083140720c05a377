"""What a runtime knows about its statements: event types, contexts, variables, streams.

The catalog turns EPL text into deployable plans (through the planner) while keeping
track of what earlier statements declared, so a later statement can be validated
against them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any

JSON_TYPES = {"string": str, "int": int, "long": int, "short": int, "byte": int,
              "double": float, "float": float, "boolean": bool}
INT_BITS = {"long": 64, "int": 32, "short": 16, "byte": 8}
"""Integer types are signed, of Java's widths (an event value outside is refused)."""
DEFAULT_MAX_STRING_LENGTH = 65_536
"""Characters a string property may hold unless the statement file says otherwise
(``max_string_length``: a number for every type, or per type with ``"*"`` as the rest;
0 is no limit).  A longer string would become a key, a window row and a changelog
entry; it goes to the dead-letter topic instead."""


def string_limits(value: Any) -> dict[str, int]:
    """A statement file's ``max_string_length`` (number or mapping) as type -> limit."""
    if value is None:
        return {}
    if isinstance(value, int) and not isinstance(value, bool):
        return {"*": value}
    return {str(k): int(v) for k, v in dict(value).items()}


class NotSupported(Exception):
    """A construct the engine does not run yet (reported, never a traceback)."""


class EventTypeError(Exception):
    """An event that does not fit its declared type (dead-letter material)."""


@dataclass
class Catalog:
    """Event types, contexts and variables declared so far."""

    schemas: dict[str, dict[str, str]] = field(default_factory=dict)
    contexts: dict[str, Any] = field(default_factory=dict)
    context_names: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The properties each context provides (``context.<name>``): name -> None, or for a
    nested context's level its own such map (``app.epl.planning.contexts.provided``)."""
    variables: dict[str, str] = field(default_factory=dict)
    streams: dict[str, dict[str, str]] = field(default_factory=dict)
    named_windows: dict[str, str] = field(default_factory=dict)
    constants: set[str] = field(default_factory=set)
    variable_values: dict[str, Any] = field(default_factory=dict)
    context_variables: dict[str, str] = field(default_factory=dict)
    tables: dict[str, Any] = field(default_factory=dict)
    expressions: dict[str, Any] = field(default_factory=dict)
    """Declared expressions shared by ``create expression`` (name -> ExpressionDecl)."""
    max_string_length: dict[str, int] = field(default_factory=dict)
    """Event type (or ``"*"``) -> the longest string a property may hold (0: any)."""
    functions: dict[str, Any] = field(default_factory=dict)
    """Declared user functions by name (``app.runtime.functions.FunctionDef``)."""

    @classmethod
    def from_schemas(cls, schemas: dict[str, dict[str, str]],
                     max_string_length: dict[str, int] | None = None,
                     functions: dict[str, Any] | None = None) -> Catalog:
        return cls(schemas={k: dict(v) for k, v in schemas.items()},
                   max_string_length=dict(max_string_length or {}),
                   functions=dict(functions or {}))

    def string_limit(self, type_name: str) -> int | None:
        """The longest string an event of ``type_name`` may carry (None: no limit)."""
        limits = self.max_string_length
        n = limits.get(type_name, limits.get("*", DEFAULT_MAX_STRING_LENGTH))
        return n or None

    def type_props(self, name: str) -> dict[str, str] | None:
        """Properties of an event type, an insert-into stream or a table, or None."""
        props = self.schemas.get(name) or self.streams.get(name)
        if props is None and name in self.tables:
            t = self.tables[name]
            props = {c.name: c.type_name or "any" for c in t.columns}
        return props


def coerce_event(catalog: Catalog, type_name: str, event: dict) -> dict:
    """Check an event against its type and convert numbers (``500`` for a double → 500.0).

    Missing properties are null; a value of the wrong type raises EventTypeError.
    """
    props = catalog.type_props(type_name)
    if props is None:
        raise EventTypeError(f"unknown event type '{type_name}'")
    if not isinstance(event, dict):
        raise EventTypeError(f"an event of {type_name} must be an object")
    out: dict[str, Any] = {}
    limit = catalog.string_limit(type_name)
    for p, t in props.items():
        v = event.get(p)
        if v is not None:
            v = _coerce_value(type_name, p, t, v)
            if limit is not None and type(v) is str and len(v) > limit:
                raise EventTypeError(f"{type_name}.{p} holds {len(v):,} characters, more "
                                     f"than the limit of {limit:,} (max_string_length)")
        out[p] = v
    for p in event:
        if p not in props:
            raise EventTypeError(f"{type_name} has no property '{p}'")
    return out


@dataclass(frozen=True)
class _PlainChecks:
    """What an event of one type must be to pass as it is (``event_coercer``'s fast
    path, ``event_run_check``): these properties in this order, each of its exact JSON
    type (None: a type without one), doubles finite, integers in range, texts within
    the limit (0: none)."""

    names: tuple[str, ...]
    wants: tuple[type | None, ...]
    floats: tuple[str, ...]
    ranged: tuple[tuple[str, int, int], ...]
    texts: tuple[str, ...]
    limit: int

    @classmethod
    def of(cls, catalog: Catalog, type_name: str) -> _PlainChecks:
        props = catalog.type_props(type_name)
        if props is None:
            raise EventTypeError(f"unknown event type '{type_name}'")
        names = tuple(props)
        limit = catalog.string_limit(type_name) or 0
        wants = tuple(JSON_TYPES.get(t) for t in props.values())
        bits = [INT_BITS.get(t, 64) for t in props.values()]
        return cls(names, wants,
                   tuple(p for p, w in zip(names, wants) if w is float),
                   tuple((p, -(1 << (b - 1)), 1 << (b - 1))
                         for p, w, b in zip(names, wants, bits) if w is int),
                   tuple(p for p, w in zip(names, wants) if w is str) if limit else (),
                   limit)


def event_coercer(catalog: Catalog, type_name: str) -> Callable[[dict], dict]:
    """``coerce_event`` for one type, with a fast path: an event that already has every
    property, in schema order, each of its exact JSON type and valid (a finite double,
    an integer in range), is returned as it is."""
    plain = _PlainChecks.of(catalog, type_name)
    names, wants, floats, ranged, texts, limit = (
        plain.names, plain.wants, plain.floats, plain.ranged, plain.texts, plain.limit)
    types = wants if None not in wants else None  # each property's exact type, in order
    checks = tuple((p, w) for p, w in zip(names, wants) if w is not None)

    def coerce(event: dict) -> dict:
        if type(event) is dict and tuple(event) == names:
            if types is not None:
                if tuple(map(type, event.values())) != types:
                    return coerce_event(catalog, type_name, event)
            else:
                for p, want in checks:
                    if type(event[p]) is not want:
                        return coerce_event(catalog, type_name, event)
            for p in floats:
                v = event[p]
                if v - v != 0.0:  # NaN or an infinity
                    return coerce_event(catalog, type_name, event)
            for p, lo, hi in ranged:
                if not lo <= event[p] < hi:
                    return coerce_event(catalog, type_name, event)
            for p in texts:
                if len(event[p]) > limit:
                    return coerce_event(catalog, type_name, event)
            return event
        return coerce_event(catalog, type_name, event)

    return coerce


def event_run_check(catalog: Catalog, type_name: str) -> Callable[[list], bool]:
    """Whether ``event_coercer``'s fast path takes every event of a list as it is,
    found with loops that run in C (a run of a source partition's records costs no
    Python call per event).  False says nothing of any one event: each then takes
    ``event_coercer``.  A type with a property of no exact JSON type is always False."""
    plain = _PlainChecks.of(catalog, type_name)
    if None in plain.wants:
        return lambda events: False
    wants, limit = list(plain.wants), plain.limit
    floats = [itemgetter(p) for p in plain.floats]
    ranged = [(itemgetter(p), lo, hi) for p, lo, hi in plain.ranged]
    texts = [itemgetter(p) for p in plain.texts]
    same_names = plain.names.__eq__

    def all_plain(events: list) -> bool:
        if not events or set(map(type, events)) != {dict}:
            return False
        if not all(map(same_names, map(tuple, events))):
            return False
        if list(map(type, chain.from_iterable(map(dict.values, events)))) != \
                wants * len(events):
            return False
        for get in floats:
            total = sum(map(get, events))  # NaN and infinities carry into the sum
            if total - total != 0.0:  # (a sum too large for a double: one at a time)
                return False
        for get, lo, hi in ranged:
            values = list(map(get, events))
            if min(values) < lo or max(values) >= hi:
                return False
        return all(max(map(len, map(get, events))) <= limit for get in texts)

    return all_plain


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _short(v: Any) -> str:
    """A value for an error message, at most 40 characters."""
    r = repr(v)
    return r if len(r) <= 40 else f"{r[:37]}..."


def _coerce_value(type_name: str, prop: str, t: str, v: Any) -> Any:
    want = JSON_TYPES.get(t)
    if want is None:
        return v
    if want is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise EventTypeError(f"{type_name}.{prop} must be a {t}, got {v!r}")
        try:
            f = float(v)
        except OverflowError:
            f = math.inf
        if not math.isfinite(f):
            raise EventTypeError(f"{type_name}.{prop} must be a finite {t}, got {_short(v)}")
        return f
    if want is int:
        if isinstance(v, bool) or not (isinstance(v, int) or (
                isinstance(v, float) and v.is_integer())):
            raise EventTypeError(f"{type_name}.{prop} must be a {t}, got {v!r}")
        n = int(v)
        bits = INT_BITS.get(t, 64)
        if not -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
            raise EventTypeError(f"{type_name}.{prop} is out of range for {_a(t)} {t} "
                                 f"({bits}-bit signed), got {_short(v)}")
        return n
    if want is bool:
        if not isinstance(v, bool):
            raise EventTypeError(f"{type_name}.{prop} must be a boolean, got {v!r}")
        return v
    if not isinstance(v, str):
        raise EventTypeError(f"{type_name}.{prop} must be a string, got {v!r}")
    return v

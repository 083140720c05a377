"""Property paths (``a.b.c``) resolved through the event types, never through Python objects.

At compile time a path is checked against the declared types: a nested declared type
names its properties, a map accepts any key, a scalar or an array has no properties.
At run time a path step reads a key of a map (an event, a nested event, a map value);
anything else gives null, so no attribute of a Python object is ever read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

SCALARS = frozenset({"string", "int", "integer", "long", "short", "byte", "double", "float",
                     "boolean", "bigdecimal", "biginteger", "char", "character"})
MAPS = frozenset({"map", "java.util.map", "hashmap", "java.util.hashmap"})
DYNAMIC = frozenset({"any", "object", "java.lang.object"})
"""Types whose values are only known at run time (insert-into columns, ``object``)."""


def nested(value: Any, path: tuple[str, ...]) -> Any:
    """The value at path under value: map keys only; null when a step is not a map."""
    for p in path:
        if type(value) is not dict:  # no isinstance: it would read value.__class__
            return None
        value = value.get(p)
    return value


def path_error(parts: tuple[str, ...], props: Mapping[str, str],
               type_props: Callable[[str], Mapping[str, str] | None],
               type_name: str) -> tuple[int, str, str | None] | None:
    """Why ``parts`` is not a property path of a type with these props: (index of the
    part in error, message, hint); None when it is one (or is only known at run time)."""
    from app.epl.errors import closest

    owner, current = type_name, props
    for i, p in enumerate(parts):
        if p not in current:
            best = closest(p, list(current))
            return (i, f"unknown property '{p}' of {owner}",
                    f"did you mean '{best}'?" if best else None)
        if i + 1 == len(parts):
            return None
        t = str(current[p])
        low = t.lower()
        where = ".".join(parts[: i + 1])
        if low in DYNAMIC or low in MAPS:
            return None  # map keys and run-time values: read as map keys, null otherwise
        if low.endswith("[]"):
            return (i + 1, f"'{where}' is an array ({t}) and has no property "
                    f"'{parts[i + 1]}'", None)
        if low in SCALARS:
            return (i + 1, f"'{where}' is a {low} and has no property '{parts[i + 1]}'",
                    f"'{where}' can only be read as a whole")
        sub = type_props(t)
        if sub is None:
            return (i + 1, f"'{where}' has type {t}, whose properties are unknown",
                    "declare the type with create schema")
        owner, current = t, sub
    return None

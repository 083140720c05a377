"""Whether a decoded statement file conforms to its JSON Schema, without jsonschema.

Importing jsonschema (referencing, attrs, the format checkers and every draft's
meta-schema) costs more CPU than checking a valid file; ``kepl check``, ``run`` and
``deploy`` read valid files far more often than invalid ones.  ``conforms`` answers for
the JSON Schema 2020-12 keywords the statement-file schema uses, with jsonschema's
meanings; it answers None for any other keyword, and the caller then asks jsonschema,
which also words every error of a file that does not conform.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable
from typing import Any

_NOTES = frozenset({"$schema", "$id", "title", "description", "default", "examples",
                    "$comment"})


class _Unknown(Exception):
    """The schema uses a keyword this module does not evaluate."""


def conforms(instance: Any, schema: dict[str, Any]) -> bool | None:
    """True or False as a JSON Schema 2020-12 validator decides; None when the schema
    uses a keyword this module does not know."""
    try:
        return _valid(instance, schema)
    except _Unknown:
        return None


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, bool)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": _is_number,
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
}


def _valid(v: Any, schema: Any) -> bool:
    if schema is True or schema == {}:
        return True
    if schema is False:
        return False
    for key, want in schema.items():
        if key in _NOTES:
            continue
        check = _KEYWORDS.get(key)
        if check is None:
            raise _Unknown(key)
        if not check(v, want, schema):
            return False
    return True


def _type(v: Any, want: Any, _: Any) -> bool:
    names = [want] if isinstance(want, str) else want
    for name in names:
        if name not in _TYPES:
            raise _Unknown(f"type {name}")
    return any(_TYPES[name](v) for name in names)


def _enum(v: Any, want: list[Any], _: Any) -> bool:
    if not all(isinstance(w, str) for w in want):
        raise _Unknown("enum of non-strings")  # jsonschema's equality tells bools from 0/1
    return isinstance(v, str) and v in want


def _pattern(v: Any, want: str, _: Any) -> bool:
    return not isinstance(v, str) or re.search(want, v) is not None


def _minimum(v: Any, want: Any, _: Any) -> bool:
    return not _is_number(v) or not v < want


def _maximum(v: Any, want: Any, _: Any) -> bool:
    return not _is_number(v) or not v > want


def _min_length(v: Any, want: int, _: Any) -> bool:
    return not isinstance(v, str) or len(v) >= want


def _min_items(v: Any, want: int, _: Any) -> bool:
    return not isinstance(v, list) or len(v) >= want


def _required(v: Any, want: list[str], _: Any) -> bool:
    return not isinstance(v, dict) or all(name in v for name in want)


def _properties(v: Any, want: dict[str, Any], _: Any) -> bool:
    return not isinstance(v, dict) or all(
        _valid(v[name], sub) for name, sub in want.items() if name in v)


def _additional(v: Any, want: Any, schema: dict[str, Any]) -> bool:
    if "patternProperties" in schema:
        raise _Unknown("patternProperties")
    if not isinstance(v, dict):
        return True
    known = schema.get("properties", {})
    return all(_valid(value, want) for name, value in v.items() if name not in known)


def _property_names(v: Any, want: Any, _: Any) -> bool:
    return not isinstance(v, dict) or all(_valid(name, want) for name in v)


def _items(v: Any, want: Any, schema: dict[str, Any]) -> bool:
    if "prefixItems" in schema:
        raise _Unknown("prefixItems")
    return not isinstance(v, list) or all(_valid(x, want) for x in v)


def _one_of(v: Any, want: list[Any], _: Any) -> bool:
    return sum(1 for sub in want if _valid(v, sub)) == 1


def _any_of(v: Any, want: list[Any], _: Any) -> bool:
    return any(_valid(v, sub) for sub in want)


def _not(v: Any, want: Any, _: Any) -> bool:
    return not _valid(v, want)


def _if(v: Any, want: Any, schema: dict[str, Any]) -> bool:
    """``if`` with its ``then`` and ``else`` (which alone decide nothing)."""
    branch = schema.get("then" if _valid(v, want) else "else", True)
    return _valid(v, branch)


_KEYWORDS: dict[str, Callable[[Any, Any, Any], bool]] = {
    "type": _type, "enum": _enum, "pattern": _pattern, "minimum": _minimum,
    "maximum": _maximum, "minLength": _min_length, "minItems": _min_items,
    "required": _required, "properties": _properties, "additionalProperties": _additional,
    "propertyNames": _property_names, "items": _items, "oneOf": _one_of,
    "anyOf": _any_of, "not": _not, "if": _if,
    "then": lambda v, want, schema: True, "else": lambda v, want, schema: True,
}

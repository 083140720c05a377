"""Variables (Esper 4.8, Esper 5.17): typed values shared by statements, kept in the store.

A ``VariableStore`` holds the variables of one scope: the runtime's global variables, or
the context variables of one context partition (``context C create variable ...``: one
value per partition).  Every value is one key of the store's namespace, written when the
value changes, so a rebuilt runtime (Kafka recovery) reads back the values it had.
``VariableScope`` is what expressions see as ``ctx.variables``: a partition's context
variables over the global ones.  Assignments record the change so that the runtime can
tell the views and output conditions that read variables (Esper ref. 14.3.12 ``#expr``
windows; Esper ref. 5.7.1.1 ``output when``).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from operators.base import StateNamespace

_INT_TYPES = frozenset({"int", "integer", "long", "short", "byte", "biginteger"})
_FLOAT_TYPES = frozenset({"double", "float", "bigdecimal"})
SCALAR_TYPES = _INT_TYPES | _FLOAT_TYPES | frozenset({"string", "boolean", "object"})


class VariableError(ValueError):
    """A value that does not fit a variable's declared type, or a write to a constant."""


@dataclass(frozen=True)
class VariableDecl:
    """``create [constant] variable type name [= init]``: the validated declaration."""

    name: str
    type_name: str
    initial: Any = None
    constant: bool = False

    def coerce(self, value: Any) -> Any:
        """The value as the declared type holds it (Esper assigns with widening)."""
        return coerce(self.type_name, value, self.name)


def coerce(type_name: str, value: Any, name: str = "") -> Any:
    """Convert ``value`` to a variable type; VariableError when it cannot hold it."""
    if value is None:
        return None
    t = type_name.lower()
    if t.endswith("[]"):
        if not isinstance(value, list | tuple):
            raise VariableError(f"variable '{name}' of type {type_name} needs an array, "
                                f"got {value!r}")
        inner = t[:-2]
        return [coerce(inner, v, name) for v in value]
    if t in _INT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise VariableError(f"variable '{name}' of type {type_name} cannot hold {value!r}")
        if isinstance(value, float):
            if not value.is_integer():
                raise VariableError(f"variable '{name}' of type {type_name} cannot hold "
                                    f"{value!r}")
            return int(value)
        return value
    if t in _FLOAT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise VariableError(f"variable '{name}' of type {type_name} cannot hold {value!r}")
        return float(value)
    if t == "string":
        if not isinstance(value, str):
            raise VariableError(f"variable '{name}' of type string cannot hold {value!r}")
        return value
    if t == "boolean":
        if not isinstance(value, bool):
            raise VariableError(f"variable '{name}' of type boolean cannot hold {value!r}")
        return value
    if t == "object":
        return value
    # an event type: the variable holds one event (a row)
    if not isinstance(value, dict):
        raise VariableError(f"variable '{name}' of event type {type_name} needs an event, "
                            f"got {value!r}")
    return dict(value)


class VariableStore:
    """The variables of one scope, one store key each; changes are reported to ``changed``."""

    def __init__(self, ns: StateNamespace, changed: list[str] | None = None,
                 writes: list[tuple[Any, str, Any, Any]] | None = None,
                 tag: Any = 0, changed_tags: list[Any] | None = None) -> None:
        self.ns = ns
        self.changed_tags = changed_tags
        """The ``tag`` of the store of each change (which context partition's value)."""
        self.decls: dict[str, VariableDecl] = {}
        self.values: dict[str, Any] = {}
        self.changed = changed if changed is not None else []
        self.writes = writes
        """Every assignment as (``tag``, name, old value, new value), also one that
        keeps the value: the variable's statement posts each (Esper: the listeners of a
        create-variable statement get the new and the old value of every write)."""
        self.tag = tag
        self._stored = {k: v for k, v in ns.items()}

    def declare(self, decl: VariableDecl) -> None:
        """Add a variable; a value already in the store (a restored runtime) wins."""
        self.decls[decl.name] = decl
        if decl.name in self._stored:
            self.values[decl.name] = self._stored[decl.name]
        else:
            # the initial value is not written: a key exists only once a value was set
            self.values[decl.name] = decl.coerce(decl.initial)

    def set(self, name: str, value: Any) -> None:
        """Assign (type-checked); the change is recorded for the runtime."""
        decl = self.decls[name]
        if decl.constant:
            raise VariableError(f"variable '{name}' is a constant")
        value = decl.coerce(value)
        if self.writes is not None:
            self.writes.append((self.tag, name, self.values.get(name), value))
        if self.values.get(name) != value or type(self.values.get(name)) is not type(value):
            self.values[name] = value
            self.ns.put(name, value)
        # Esper calls the variable's change callbacks at every write, also one that keeps
        # the value (an output when or #expr over it evaluates again)
        self.changed.append(name)
        if self.changed_tags is not None:
            self.changed_tags.append(self.tag)

    def clear(self) -> None:
        """Drop every value (the context partition ended)."""
        self.ns.clear()
        self.values.clear()


class VariableScope(MutableMapping):
    """``ctx.variables``: context-partition variables first, then the global ones."""

    def __init__(self, glob: VariableStore, local: VariableStore | None = None) -> None:
        self.glob = glob
        self.local = local

    def _store(self, name: str) -> VariableStore:
        """The scope that declares ``name`` (context variables first)."""
        if self.local is not None and name in self.local.decls:
            return self.local
        return self.glob

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """The value of a variable, or ``default`` when it is not declared."""
        local = self.local
        if local is not None and name in local.decls:
            return local.values.get(name, default)
        return self.glob.values.get(name, default)

    def __getitem__(self, name: str) -> Any:
        store = self._store(name)
        if name not in store.decls:
            raise KeyError(name)
        return store.values.get(name)

    def __setitem__(self, name: str, value: Any) -> None:
        store = self._store(name)
        if name not in store.decls:
            raise KeyError(name)
        store.set(name, value)

    def __delitem__(self, name: str) -> None:
        raise VariableError("variables cannot be removed")

    def __iter__(self) -> Iterator[str]:
        names = list(self.glob.decls)
        if self.local is not None:
            names += [n for n in self.local.decls if n not in self.glob.decls]
        return iter(names)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._store(name).decls

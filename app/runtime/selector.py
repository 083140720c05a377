"""Context partition selection for iteration and on-demand queries (Esper ref. 4.9).

A selector names partitions by their built-in context properties, the way Esper's
context partition selectors do (by id, by segmented key, by category label):

- ``3`` or ``id=3``: the partition whose ``context.id`` is 3;
- ``key=IBM`` / ``key=IBM,NYSE``: a keyed partition by its key values (``key1..n``);
- ``label=high``: a category partition;
- ``PROP=VALUE`` for any other property, ``Outer.PROP=VALUE`` inside a nested context.

Values compare as text.  Several selectors select the union of their partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    """A selector the command line cannot use."""


@dataclass(frozen=True)
class ContextSelector:
    """One ``PROP=VALUE`` test over a partition's context properties."""

    prop: str
    values: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> ContextSelector:
        """``3``, ``id=3``, ``key=a,b``, ``label=x``, ``Outer.key1=y``."""
        text = text.strip()
        if not text:
            raise SelectorError("empty context partition selector")
        if "=" not in text:
            return cls("id", (text,))
        prop, _, value = text.partition("=")
        prop = prop.strip()
        if not prop or not all(part.isidentifier() for part in prop.split(".")):
            raise SelectorError(f"context partition selector {text!r}: "
                                "expected PROP=VALUE, e.g. id=3, key=IBM, label=high")
        values = tuple(v.strip() for v in value.split(",")) if prop.endswith("key") \
            else (value.strip(),)
        return cls(prop, values)

    def matches(self, props: dict[str, Any]) -> bool:
        """Whether a partition with these context properties is selected."""
        *path, last = self.prop.split(".")
        scope: Any = props
        for p in path:
            scope = scope.get(p) if isinstance(scope, dict) else None
        if not isinstance(scope, dict):
            return False
        if last == "key":
            keys = [scope.get(f"key{i}") for i in range(1, len(self.values) + 1)]
            return (f"key{len(self.values) + 1}" not in scope
                    and [_text(k) for k in keys] == list(self.values))
        return last in scope and _text(scope[last]) == self.values[0]


def selector_predicate(texts: Sequence[str]) -> Callable[[dict[str, Any]], bool] | None:
    """A predicate over context properties for the union of ``texts`` (None: all)."""
    if not texts:
        return None
    sels = [ContextSelector.parse(t) for t in texts]
    return lambda props: any(s.matches(props) for s in sels)


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple | list):
        return ",".join(_text(x) for x in v)
    return str(v)

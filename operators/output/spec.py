"""The validated output clause (Esper ref. 5.7 Output rate limiting)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from operators.base import Expr

OUTPUT_KINDS = ("default", "all", "first", "last", "snapshot")


@dataclass(frozen=True)
class Assignment:
    """``then set variable = expr``."""

    variable: str
    expr: Expr


@dataclass(frozen=True)
class OutputSpec:
    """The validated output clause.

    ``kind``: default | all | first | last | snapshot; one trigger among ``every_events``
    (an int, or ``every_events_expr`` for a variable), ``every_ms`` (or ``every_expr``
    giving seconds), ``at`` (a crontab schedule with ``next_after``), ``when``;
    ``when_terminated`` adds output at partition end (``terminated_and`` guards it,
    ``terminated_set`` runs then); ``after_ms``/``after_events`` suppress output at first.
    """

    kind: str = "default"
    every_events: int | None = None
    every_ms: int | None = None
    when: Expr | None = None
    when_terminated: bool = False
    terminated_and: Expr | None = None
    then_set: tuple[Assignment, ...] = ()
    limited: bool = False  # False: no output clause, rows pass through
    at: Any = None
    at_text: str = ""
    after_ms: int | None = None
    after_events: int | None = None
    terminated_set: tuple[Assignment, ...] = ()
    every_events_expr: Expr | None = None
    every_expr: Expr | None = None
    variables: frozenset[str] = frozenset()
    """Variables the when-expression reads (a change re-evaluates it)."""

    @property
    def has_trigger(self) -> bool:
        """Whether any trigger besides ``when terminated`` is given."""
        return (self.every_events is not None or self.every_ms is not None
                or self.every_events_expr is not None or self.every_expr is not None
                or self.at is not None or self.when is not None)

    def describe(self) -> str:
        """The output stage for ``kepl explain``."""
        if not self.limited:
            return "output[immediate]"
        parts = [f"output[{'all' if self.kind == 'default' else self.kind}"]
        if self.after_ms is not None:
            parts.append(f" after {self.after_ms} ms")
        if self.after_events is not None:
            parts.append(f" after {self.after_events} events")
        if self.every_events is not None or self.every_events_expr is not None:
            parts.append(f" every {self.every_events or '<var>'} events")
        if self.every_ms is not None or self.every_expr is not None:
            parts.append(f" every {self.every_ms if self.every_ms is not None else '<var>'} ms")
        if self.at is not None:
            parts.append(f" at {self.at_text}")
        if self.when is not None:
            parts.append(" when <expr>")
        if self.when_terminated:
            parts.append(" when terminated")
        return "".join(parts) + "]"

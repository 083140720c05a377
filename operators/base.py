"""The operator contract shared by every stage of a statement's pipeline.

An operator spec is a frozen description the planner emits; ``spec.build(state, ctx)``
makes an instance for one context partition.  Instances take insert/remove rows and
clock moves and emit insert/remove rows (Esper's view contract); they never read the
wall clock and keep all state in the state namespace they were given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

Row = dict[str, Any]
"""An event or an output row: property name to value."""

Rows = list[Row]
Emit = tuple[Rows, Rows]
"""(insert stream, remove stream) produced by one step of an operator."""


def nothing() -> Emit:
    """A fresh empty emission."""
    return [], []


@dataclass(slots=True)
class PartitionCtx:
    """What expressions may read besides the row: context properties, variables, time.

    One per context partition; ``props`` holds ``context.*`` values (``id``, ``key1``,
    ``label``, ``startTime``, tagged events ...), ``variables`` is shared by the runtime.
    """

    props: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)
    now_ms: int = 0
    aggs: Any = None
    """Aggregate results of the group being projected (set by the result set)."""
    window: Any = None
    """The statement's window view, for prev/prevtail/prevwindow/prevcount."""
    windows: dict[str, Any] = field(default_factory=dict)
    """A join's window views by stream name, for the prev functions."""
    output: dict[str, Any] = field(default_factory=dict)
    """Built-in output-condition properties (count_insert, last_output_timestamp, ...)."""
    tables: dict[str, Any] = field(default_factory=dict)
    """Table instances a statement reads or aggregates into, by name (Esper ref. 4.7)."""
    subqueries: Sequence[Any] = ()
    """Running subqueries of the statement's partition, by index (Esper "Subqueries")."""
    is_new: bool = True
    """False while the result set projects remove-stream rows: istream() reads it and
    the prev functions give null there (Esper evaluates them on insert-stream events)."""


Expr = Callable[[Row, PartitionCtx], Any]
"""A compiled expression: evaluated against one row and the partition context."""


class StateNamespace(Protocol):
    """Key/value state of one operator instance (see operators.state)."""

    def get(self, key: Any, default: Any = None) -> Any: ...
    def put(self, key: Any, value: Any) -> None: ...
    def put_new(self, key: Any, value: Any) -> None: ...
    def delete(self, key: Any) -> None: ...
    def items(self) -> Iterator[tuple[Any, Any]]: ...
    def clear(self) -> None: ...


class View(Protocol):
    """A running operator instance of one context partition."""

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Take rows from upstream; return what this view posts downstream."""
        ...

    def on_time(self, now_ms: int) -> Emit:
        """The clock reached a due time asked for by ``next_timer``."""
        ...

    def next_timer(self) -> int | None:
        """The earliest time at which ``on_time`` must be called, or None."""
        ...

    def contents(self) -> Iterable[Row]:
        """Current window contents, oldest first (for snapshots, prev, iteration)."""
        ...

    def posted(self) -> list[Row]:
        """Rows posted on the insert stream and not yet taken back (what a join's index
        or a subquery mirrors): the contents, but a batch window's last released batch."""
        ...


class ViewSpec(Protocol):
    """A validated, printable description of a view; builds one instance per partition."""

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> View: ...
    def describe(self) -> str: ...

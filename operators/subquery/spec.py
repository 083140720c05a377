"""What the planner says about one subquery: its stream, window, lookup and select.

Esper reference "Subqueries": a subquery selects from one stream (with its data
window, else only the last event), a named window or a table; its where clause may read
the enclosing statement's row (a correlated subquery).  Equalities between a property of
the subquery's stream and an expression of the enclosing row become a hash index, as
joins have (operators.joins.index); anything else is a full scan of the window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from operators.base import Expr, ViewSpec
from operators.resultset import AggregateDef

Pair = tuple[Any, Any]
"""A row inside a subquery: (the subquery stream's event, the enclosing statement's row)."""


@dataclass(frozen=True)
class SubquerySpec:
    """One subquery of a statement."""

    type_name: str
    source: str = "stream"
    """stream (events into the subquery's own window) | window (a named window) | table"""
    filter: Expr | None = None
    """The stream's filter, over the event alone."""
    view: ViewSpec | None = None
    keys: tuple[Expr, ...] = ()
    """Hash-index key expressions over an event of the subquery's stream."""
    lookup: tuple[Expr, ...] = ()
    """The matching lookup values, over the enclosing row."""
    key_texts: tuple[str, ...] = field(default=(), compare=False)
    where: Expr | None = None
    """What the index does not decide, over a Pair."""
    correlated: bool = False
    columns: tuple[Expr | None, ...] = ()
    """Select expressions over a Pair (None: the event itself, ``select *``)."""
    names: tuple[str, ...] = ()
    """Column names of a multi-column select (the row a value is then)."""
    aggregates: tuple[AggregateDef, ...] = ()
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    distinct: bool = False
    table_keys: tuple[Expr, ...] = ()
    """A table's primary-key values over the enclosing row, when the where clause gives
    every key column (a table is read by key, Esper ref. 4.7); else the table is scanned."""
    index_filter: Expr | None = None
    """Where-clause conditions on the subquery's event alone (over a Pair with no
    enclosing row): decided once, as a row enters the index, not at each lookup."""
    text: str = field(default="", compare=False)
    nulls_meet: bool = False
    """Whether a null lookup key finds the rows whose key is null: Esper's subqueries that
    select rows (a value, ``in``, ``any``/``all``) look rows up in a hash index that holds
    null keys and test only the rest of the where clause; ``exists`` and aggregating
    subqueries test the whole where clause, where ``null = null`` is not true."""

    def incremental(self) -> bool:
        """Aggregates kept up to date as the window changes (an uncorrelated, ungrouped
        aggregating subquery over its own window): a lookup then costs nothing per row."""
        return (bool(self.aggregates) and not self.correlated and not self.group_by
                and self.source == "stream")

    def describe(self) -> str:
        """One line for ``kepl explain``: the stream and how a lookup finds rows."""
        src = {"stream": "stream", "window": "named window", "table": "table"}[self.source]
        win = f" {self.view.describe()}" if self.view is not None else ""
        if self.table_keys:
            how = "primary-key lookup"
        elif self.keys:
            how = f"hash index on {', '.join(self.key_texts)}"
        elif self.incremental():
            how = "aggregates kept as the window changes"
        else:
            how = "full scan"
        return f"subquery {self.text}: {src} {self.type_name}{win}, {how}"

"""The match_recognize operator's frozen description, as the planner emits it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from operators.base import Expr, PartitionCtx, StateNamespace
from operators.match_recognize.matcher import PAST_LAST_ROW, MatchRecognizer
from operators.match_recognize.nfa import Nfa, compile_nfa, render


@dataclass(frozen=True)
class MeasureAggregate:
    """An aggregate of the measures clause over one multi-row variable's events
    (``avg(B.price)``); its result is read by the measure under ``$aggN``."""

    var: str
    aggregator: Any
    value: Expr | None


@dataclass(frozen=True)
class MatchRecognizeSpec:
    """A whole ``match_recognize (...)`` clause.

    ``defines`` maps a variable to its condition over the row of matched variables
    (a variable without a condition matches any event); ``measures`` are (name,
    expression) over the match row; ``prev_depth`` is how many earlier events of the
    partition ``prev()`` in a condition may reach (0: none kept); ``bound``: a data
    window feeds the operator, so events leaving it leave partial matches."""

    pattern: object
    defines: dict[str, Expr] = field(compare=False)
    measures: tuple[tuple[str, Expr], ...] = field(compare=False)
    aggregates: tuple[MeasureAggregate, ...] = field(default=(), compare=False)
    partition_by: tuple[Expr, ...] = field(default=(), compare=False)
    all_matches: bool = False
    skip: str = PAST_LAST_ROW
    interval_ms: int | None = None
    or_terminated: bool = False
    prev_depth: int = 0
    bound: bool = False
    collect: bool = True
    """Keep each multi-row variable's events (a measure or a condition reads them)."""
    reads_groups: frozenset[str] = frozenset()
    """Variables whose condition reads other multi-row variables' events by index."""
    text: str = ""

    @cached_property
    def nfa(self) -> Nfa:
        return compile_nfa(self.pattern, self.reads_groups)

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> MatchRecognizer:
        return MatchRecognizer(self, state, ctx)

    def describe(self) -> str:
        """One line for ``kepl explain``."""
        parts = ["match_recognize"]
        if self.partition_by:
            parts.append(f"partition by {len(self.partition_by)} key(s)")
        parts.append(f"measures {', '.join(n for n, _ in self.measures)}")
        if self.all_matches:
            parts.append("all matches")
        parts.append(f"after match skip {self.skip}")
        parts.append(f"pattern ({render(self.pattern)})")
        if self.interval_ms is not None:
            parts.append(f"interval {self.interval_ms} ms"
                         + (" or terminated" if self.or_terminated else ""))
        parts.append(f"nfa {len(self.nfa.states)} state(s)")
        return " ".join(parts)

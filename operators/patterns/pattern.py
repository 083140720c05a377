"""A whole ``pattern [...]``: the spec tree, its flattened plan, and the matcher factory.

Kept apart from the node classes (``spec``) so that the matcher, which dispatches on
those classes, and the spec that builds matchers import in one direction only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from operators.base import PartitionCtx, Row, StateNamespace
from operators.patterns.matcher import PatternMatcher
from operators.patterns.spec import Filter, PatternNode, PatternPlan, flatten, render


@dataclass(frozen=True)
class PatternSpec:
    """A whole ``pattern [...]``: the MatcherSpec of a pattern statement or context condition.

    ``inclusive`` records ``@inclusive`` (Esper ref. 4.2.7.2) for the context manager; ``tz`` is
    the time zone crontab observers evaluate in (kepl's default is UTC, as Esper's runtime default).
    """

    root: PatternNode
    text: str = ""
    inclusive: bool = False
    tz: str = "UTC"

    @cached_property
    def plan(self) -> PatternPlan:
        """The flattened tree (computed once per spec)."""
        return flatten(self.root)

    def types(self) -> frozenset[str]:
        """Every event type a filter of this pattern listens to."""
        return frozenset(n.type_name for n in self.plan.nodes if isinstance(n, Filter))

    def tags(self) -> tuple[str, ...]:
        """The tag names in order of appearance (the columns of a match row)."""
        out: list[str] = []
        for n in self.plan.nodes:
            if isinstance(n, Filter) and n.tag and n.tag not in out:
                out.append(n.tag)
        return tuple(out)

    def build(self, state: StateNamespace, ctx: PartitionCtx, *, start_ms: int | None = None,
              tags: dict[str, Row] | None = None) -> PatternMatcher:
        """A matcher over ``state``: resumes the stored instances, else starts the pattern.

        A fresh pattern starts at ``start_ms`` (default ``ctx.now_ms``).  ``tags`` are
        events visible to filters from the outside (e.g. a start condition's tagged events
        for a correlated end condition, Esper ref. 4.2.7.2); they are stored with the state.
        """
        return PatternMatcher(self.plan, self.tz, state, ctx, start_ms=start_ms, tags=tags)

    def describe(self) -> str:
        """One line for ``kepl explain``: the pattern as written (or rendered)."""
        return f"pattern [{self.text or render(self.root)}]"

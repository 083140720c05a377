"""What the planner hands to a runtime for one statement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from operators.pipeline import PipelineSpec


@dataclass(frozen=True)
class StatementPlan:
    """A deployable statement: a query pipeline, a context, a schema or a variable."""

    name: str
    kind: str  # query | context | schema | variable | window | table
    epl: str = ""
    pipeline: PipelineSpec | None = None
    context: str | None = None
    context_spec: Any = None
    insert_into: str | None = None
    insert_stream: str = "istream"
    schema: dict[str, str] = field(default_factory=dict)
    initial: Any = None
    columns: tuple[str, ...] = ()
    window: str | None = None
    """kind 'window': the named window it holds; kind 'query': the window it reads."""
    variable: str | None = None
    """kind 'variable': the variable's name."""
    action: Any = None
    """kind 'on': the OnActionSpec."""

    def explain(self) -> list[str]:
        """Human-readable plan lines for ``kepl explain``."""
        lines = [f"statement {self.name} ({self.kind})"]
        if self.kind == "context" and self.context_spec is not None:
            lines.append(f"  context {self.context_spec.name}: {self.context_spec.describe()}")
        if self.context is not None:
            lines.append(f"  context partition by: {self.context}")
        if self.window is not None:
            lines.append(f"  named window: {self.window}")
        if self.action is not None:
            lines += [f"  -> {s}" for s in self.action.describe()]
        if self.pipeline is not None:
            lines += [f"  -> {s}" for s in self.pipeline.describe()]
        if self.insert_into is not None:
            lines.append(f"  -> insert {self.insert_stream} into {self.insert_into}")
        return lines

"""The subqueries of an on-statement in one context partition: an on-statement has no
pipeline, so its subqueries' windows live here, fed by the engine like a pipeline's
(Esper reference "Subqueries": on-statements may hold subqueries too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from operators.base import Emit, PartitionCtx, Row, Rows, StateNamespace


@dataclass(frozen=True)
class SubqueryHostSpec:
    """The SubquerySpecs of an on-statement's expressions, by index."""

    subqueries: tuple[Any, ...]

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> SubqueryHost:
        return SubqueryHost(self, state, ctx)

    def types(self) -> frozenset[str]:
        return self.subquery_types()

    def main_types(self) -> frozenset[str]:
        return frozenset()

    def subquery_types(self) -> frozenset[str]:
        return frozenset(sq.type_name for sq in self.subqueries if sq.source == "stream")

    def subquery_windows(self) -> frozenset[str]:
        return frozenset(sq.type_name for sq in self.subqueries if sq.source == "window")

    def reacts_to_variables(self, names: set[str] | None = None) -> bool:
        return False

    def describe(self) -> list[str]:
        return [sq.describe() for sq in self.subqueries]


class SubqueryHost:
    """Running subqueries of one on-statement partition; ``ctx`` is the context its
    action's expressions read them through."""

    def __init__(self, spec: SubqueryHostSpec, state: StateNamespace,
                 ctx: PartitionCtx) -> None:
        from operators.pipeline import Pipeline
        from operators.subquery.subquery import Subquery

        self.spec = spec
        self.ctx = ctx
        self.state = state
        self.subs = [Subquery(sq, state.child(f"sq{i}"), ctx, Pipeline._build_view)
                     for i, sq in enumerate(spec.subqueries)]
        ctx.subqueries = self.subs

    def on_event(self, type_name: str, event: Row, now_ms: int) -> Emit:
        """An event of a subquery's stream enters its window (nothing is output)."""
        self.ctx.now_ms = now_ms
        for sub in self.subs:
            if sub.spec.source == "stream" and sub.spec.type_name == type_name:
                sub.on_event(event, now_ms)
        return [], []

    def rebuilt_consumer(self) -> bool:
        """Whether these subqueries already read their named windows (rebuilt from the
        state): their indexes then mirror what the windows posted."""
        if self.state.get("read"):
            return True
        self.state.put("read", True)
        return False

    def on_subquery_rows(self, window: str, new: Rows, old: Rows, prime: bool = False
                         ) -> None:
        for sub in self.subs:
            if sub.spec.source == "window" and sub.spec.type_name == window:
                if prime:
                    sub.prime(new)
                else:
                    sub.on_rows(new, old)

    def on_time(self, now_ms: int) -> Emit:
        self.ctx.now_ms = now_ms
        for sub in self.subs:
            sub.on_time(now_ms)
        return [], []

    def next_timer(self) -> int | None:
        due: int | None = None
        for sub in self.subs:
            t = sub.next_timer()
            if t is not None and (due is None or t < due):
                due = t
        return due

    def quiet_until(self, limit: int) -> int:
        t = self.next_timer()
        return t if t is not None and t < limit else limit

    def skip_to(self, limit: int) -> None:
        """Nothing periodic to jump."""

    def terminate_quiet(self) -> bool:
        return True

    def terminate(self, now_ms: int) -> Emit:
        self.state.clear()
        return [], []

    def on_variables_changed(self, now_ms: int) -> Emit:
        return [], []

    def iterate(self) -> Rows:
        return []

"""First-unique window (Esper ref. 14.3.18): the first event per unique key, later ones ignored."""

from __future__ import annotations

from dataclasses import dataclass

from operators.base import Emit, Expr, PartitionCtx, Rows, StateNamespace
from operators.windows.common import DEFAULT_ENV, BuildEnv, WindowSpec, freeze, key_of
from operators.windows.unique import KeyedRows


class FirstUniqueWindow(KeyedRows):
    """Keeps the first row per key; a later row of a held key produces no output at all."""

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Accept rows of unseen keys; upstream removals free their key again."""
        out_old: Rows = []
        if old:
            self._remove_old(old, out_old)
        accepted: Rows = []
        for row in new:
            key = key_of(self.keys, row, self.ctx)
            fkey = freeze(key)
            if fkey not in self.by_key:
                self._put(key, fkey, row)
                accepted.append(row)
        return accepted, out_old


@dataclass(frozen=True)
class FirstUniqueSpec(WindowSpec):
    """``firstunique(expression [, expression ...])``."""

    keys: tuple[Expr, ...]
    name: str = "firstunique"
    params_text: tuple[str, ...] = ()
    is_asymmetric: bool = True

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> FirstUniqueWindow:
        """A first-unique window over ``state``."""
        return FirstUniqueWindow(self.keys, state, (env or DEFAULT_ENV).refs, ctx)

"""Base of the derived-value windows (Esper ref. 14.4): post new and prior statistics rows.

A derived window retains no events.  On an update it posts one new row with the current
statistics (plus extra properties of the last arriving event) and, as the old row, the
row it posted before -- the very same values -- or, on its first post, the statistics
before the update.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.windows.common import DEFAULT_ENV, BuildEnv, WindowSpec, WindowView

NAN = float("nan")


def number(value: Any) -> float | None:
    """A numeric data point as float; null stays null (and is not a data point)."""
    return None if value is None else float(value)


class DerivedView(WindowView):
    """Accumulator + extra properties; subclasses define the statistics."""

    post_only_on_change = False

    def __init__(
        self,
        values: tuple[Expr, ...],
        extras: tuple[tuple[str, Expr], ...],
        wildcard: bool,
        state: StateNamespace,
        ctx: PartitionCtx,
        group_props: tuple[tuple[str, Any], ...],
        wildcard_names: tuple[str, ...] = (),
    ) -> None:
        self.values = values
        self.extras = extras
        self.wildcard = wildcard
        self.wildcard_names = wildcard_names
        self.state = state
        self.ctx = ctx
        named = {name for name, _ in extras} | set(wildcard_names)
        # Esper ref. 14.4: a property named among the extra expressions (or ``*``) is read
        # from the last arriving event (null before the first), also when it is the group
        # key
        self.group_props = {k: v for k, v in group_props if k not in named}
        saved = state.get("s")
        if saved is None:
            self.acc: list[Any] = self.initial()
            self.last_values: dict[str, Any] | None = None
            self.last_row: Row | None = None
        else:
            self.acc = saved["acc"]
            self.last_values = saved["lv"]
            self.last_row = saved["row"]

    # -- to define in subclasses
    def initial(self) -> list[Any]:
        """A fresh accumulator."""
        raise NotImplementedError

    def enter(self, row: Row) -> None:
        """A row entered the data set."""
        raise NotImplementedError

    def leave(self, row: Row) -> None:
        """A row left the data set."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        """The derived properties of the current accumulator."""
        raise NotImplementedError

    # -- shared
    def _extra_values(self, row: Row) -> dict[str, Any]:
        """Esper ref. 14.4: extra expressions (and ``*``) are read from the last arriving event."""
        out: dict[str, Any] = dict(row) if self.wildcard else {}
        for name, expr in self.extras:
            out[name] = expr(row, self.ctx)
        return out

    def _row(self, values: dict[str, Any] | None) -> Row:
        row = self.stats()
        if self.extras or self.wildcard:
            if values is None:
                row.update({name: None for name, _ in self.extras})
                row.update(dict.fromkeys(self.wildcard_names))
            else:
                row.update(values)
        if self.group_props:
            row.update(self.group_props)
        return row

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Update the statistics; post (new stats, prior stats) when they are to be posted."""
        if not new and not old:
            return [], []
        first_old = self._row(self.last_values) if self.last_row is None else None
        before = self.acc[0] if self.post_only_on_change else None
        for row in new:
            self.enter(row)
        for row in old:
            self.leave(row)
        if new and (self.extras or self.wildcard):
            self.last_values = self._extra_values(new[-1])
        if self.post_only_on_change and self.acc[0] == before:
            self._save()
            return [], []
        new_row = self._row(self.last_values)
        old_row = first_old if self.last_row is None else self.last_row
        self.last_row = new_row
        self._save()
        return [new_row], [old_row]

    def _save(self) -> None:
        self.state.put("s", {"acc": self.acc, "lv": self.last_values, "row": self.last_row})

    def contents(self) -> list[Row]:
        """The current statistics row (what iterating the window returns)."""
        return [self._row(self.last_values)]


@dataclass(frozen=True)
class DerivedSpec(WindowSpec):
    """A derived-value window: value expressions, extra properties, optional ``*``."""

    values: tuple[Expr, ...] = ()
    extras: tuple[tuple[str, Expr], ...] = ()
    wildcard: bool = False
    wildcard_names: tuple[str, ...] = ()
    """The properties ``*`` stands for (the stream's type; null before the first event)."""
    name: str = ""
    params_text: tuple[str, ...] = ()
    is_derived: bool = True
    combinable: bool = False
    view_class: type = DerivedView

    def build(
        self, state: StateNamespace, ctx: PartitionCtx, env: BuildEnv | None = None
    ) -> DerivedView:
        """A derived-value view over ``state``."""
        env = env or DEFAULT_ENV
        return self.view_class(self.values, self.extras, self.wildcard, state, ctx,
                               env.group_props, self.wildcard_names)

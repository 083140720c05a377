"""Result sets: turn window insert/remove rows into output rows (002 §2.12).

Five kinds, as Esper distinguishes them:
- ``simple``: no aggregation, one output row per event;
- ``agg_all``: fully aggregated, ungrouped — one row per update, old row = prior values;
- ``agg_rows``: aggregated, ungrouped, with event properties — one row per event;
- ``grouped``: fully aggregated and grouped — one row per group touched;
- ``grouped_rows``: aggregated and grouped with other properties — one row per event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from operators.aggregates import Aggregator
from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace

SIMPLE, AGG_ALL, AGG_ROWS, GROUPED, GROUPED_ROWS = (
    "simple", "agg_all", "agg_rows", "grouped", "grouped_rows")


@dataclass(frozen=True)
class AggregateDef:
    """One aggregate call of the statement: its aggregator and the value it reads."""

    text: str
    aggregator: Aggregator
    value: Expr | None = None
    filter: Expr | None = None


@dataclass(frozen=True)
class SelectColumn:
    """An output column: name and compiled expression (``None`` expr = the whole row)."""

    name: str
    expr: Expr | None


@dataclass(frozen=True)
class ResultSetSpec:
    """Validated result-set settings of a statement."""

    kind: str
    columns: tuple[SelectColumn, ...]
    aggregates: tuple[AggregateDef, ...] = ()
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    wildcard: bool = False
    order_by: tuple[tuple[Expr, bool], ...] = ()
    limit: int | None = None
    offset: int = 0
    group_texts: tuple[str, ...] = field(default=(), compare=False)

    def build(self, state: StateNamespace, ctx: PartitionCtx,
              want_old: bool = True) -> ResultSet:
        return ResultSet(self, state, ctx, want_old)

    def describe(self) -> str:
        parts = [f"resultset[{self.kind}]", "cols=" + ",".join(
            ["*"] * self.wildcard + [c.name for c in self.columns])]
        if self.aggregates:
            parts.append("aggs=" + ",".join(a.text for a in self.aggregates))
        if self.group_texts:
            parts.append("group_by=" + ",".join(self.group_texts))
        if self.having is not None:
            parts.append("having")
        return " ".join(parts)


def _gkey(values: tuple) -> str:
    return json.dumps(values, default=str)


class ResultSet:
    """Aggregation state and projection of one context partition."""

    def __init__(self, spec: ResultSetSpec, state: StateNamespace, ctx: PartitionCtx,
                 want_old: bool = True) -> None:
        self.spec = spec
        self.want_old = want_old
        """False when the statement delivers only the insert stream: old rows are not built."""
        self.state = state
        self.ctx = ctx
        self.aggs = spec.aggregates
        self.groups: dict[str, list] = {}
        for k, v in state.items():
            self.groups[k] = v
        self._project = self._make_projector()

    # -- aggregation -------------------------------------------------------
    def _record(self, key: str, row: Row | None) -> list:
        rec = self.groups.get(key)
        if rec is None:
            rec = [[a.aggregator.initial() for a in self.aggs], row]
            self.groups[key] = rec
        return rec

    def _apply(self, rec: list, row: Row, entering: bool) -> None:
        ctx = self.ctx
        states = rec[0]
        for i, a in enumerate(self.aggs):
            if a.filter is not None and not a.filter(row, ctx):
                continue
            v = a.value(row, ctx) if a.value is not None else row
            agg = a.aggregator
            states[i] = agg.enter(states[i], v) if entering else agg.leave(states[i], v)

    def _results(self, rec: list) -> list:
        return [a.aggregator.result(s) for a, s in zip(self.aggs, rec[0])]

    def _group_of(self, row: Row) -> str:
        ctx = self.ctx
        return _gkey(tuple(g(row, ctx) for g in self.spec.group_by))

    # -- projection --------------------------------------------------------
    def _make_projector(self) -> Callable[[Row], Row]:
        cols = self.spec.columns
        ctx = self.ctx
        if self.spec.wildcard and not cols:
            return lambda row: row
        if self.spec.wildcard:
            def project_wild(row: Row) -> Row:
                out = dict(row)
                for c in cols:
                    out[c.name] = c.expr(row, ctx) if c.expr is not None else row
                return out
            return project_wild

        def project(row: Row) -> Row:
            return {c.name: (c.expr(row, ctx) if c.expr is not None else row) for c in cols}
        return project

    def _rows(self, rows: Iterable[Row], aggs: list | None) -> Rows:
        self.ctx.aggs = aggs
        having = self.spec.having
        ctx = self.ctx
        project = self._project
        if having is None:
            return [project(r) for r in rows]
        return [project(r) for r in rows if having(r, ctx)]

    def _row_for(self, rec: list) -> Rows:
        self.ctx.aggs = self._results(rec)
        row = rec[1] if rec[1] is not None else {}
        having = self.spec.having
        if having is not None and not having(row, self.ctx):
            return []
        return [self._project(row)]

    # -- entry points ------------------------------------------------------
    def process(self, new: Rows, old: Rows) -> Emit:
        """Apply one update and return (new rows, old rows)."""
        kind = self.spec.kind
        want_old = self.want_old
        if kind == SIMPLE:
            return self._rows(new, None), (self._rows(old, None) if want_old else [])
        if kind in (AGG_ALL, AGG_ROWS):
            rec = self._record("", None)
            before = self._row_for(rec) if kind == AGG_ALL and want_old else []
            for r in new:
                self._apply(rec, r, True)
            for r in old:
                self._apply(rec, r, False)
            self.state.put("", rec)
            if kind == AGG_ALL:
                return self._row_for(rec), before
            aggs = self._results(rec)
            return self._rows(new, aggs), (self._rows(old, aggs) if want_old else [])
        touched: dict[str, list] = {}
        keys_new = []
        keys_old = []
        for r in new:
            k = self._group_of(r)
            keys_new.append(k)
            if k not in touched:
                touched[k] = self._row_for(self.groups[k]) if (
                    want_old and kind == GROUPED and k in self.groups) else []
        for r in old:
            k = self._group_of(r)
            keys_old.append(k)
            if k not in touched:
                touched[k] = self._row_for(self.groups[k]) if (
                    want_old and kind == GROUPED and k in self.groups) else []
        for r, k in zip(new, keys_new):
            rec = self._record(k, r)
            rec[1] = r
            self._apply(rec, r, True)
        for r, k in zip(old, keys_old):
            rec = self._record(k, r)
            self._apply(rec, r, False)
        for k in touched:
            self.state.put(k, self.groups[k])
        if kind == GROUPED:
            out_new: Rows = []
            out_old: Rows = []
            for k, before in touched.items():
                out_new.extend(self._row_for(self.groups[k]))
                out_old.extend(before)
            return out_new, out_old
        out_new = []
        for r, k in zip(new, keys_new):
            out_new.extend(self._rows((r,), self._results(self.groups[k])))
        out_old = []
        for r, k in zip(old if want_old else (), keys_old):
            out_old.extend(self._rows((r,), self._results(self.groups[k])))
        return out_new, out_old

    def snapshot(self, contents: Iterable[Row]) -> Rows:
        """Rows describing the current state (``output snapshot``)."""
        kind = self.spec.kind
        if kind == SIMPLE:
            return self._rows(contents, None)
        if kind == AGG_ALL:
            return self._row_for(self._record("", None))
        if kind == AGG_ROWS:
            return self._rows(contents, self._results(self._record("", None)))
        if kind == GROUPED:
            out: Rows = []
            for rec in self.groups.values():
                out.extend(self._row_for(rec))
            return out
        out = []
        for r in contents:
            out.extend(self._rows((r,), self._results(self.groups[self._group_of(r)])))
        return out

    def order(self, rows: Rows) -> Rows:
        """Apply order by / limit to a batch of output rows."""
        spec = self.spec
        if spec.order_by:
            ctx = self.ctx
            for expr, desc in reversed(spec.order_by):
                rows = sorted(rows, key=lambda r, e=expr: _sort_key(e(r, ctx)), reverse=desc)
        if spec.limit is not None:
            rows = rows[spec.offset: spec.offset + spec.limit]
        return rows


def _sort_key(v: Any) -> tuple:
    return (v is None, v if v is not None else 0)

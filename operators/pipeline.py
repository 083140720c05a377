"""One statement in one context partition: stream → window → where → result set → output.

This is the single path an event takes (design principle 1); each stage is an operator
built from its spec.  The pipeline knows nothing of Kafka or of how time is supplied.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Protocol

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace, View, ViewSpec
from operators.joins.join import Join
from operators.joins.spec import JoinSpec
from operators.output import OutputLimiter, OutputSpec
from operators.output.limiter import PASS_THROUGH, PassThrough
from operators.prior import MatchPrior, MatchPriorSpec, Prior, PriorSpec
from operators.resultset import ResultSet, ResultSetSpec
from operators.state import MemoryNamespace
from operators.subquery.subquery import Subquery
from operators.windows.batch import BatchWindow
from operators.windows.common import ForcedEmit, WindowView
from operators.windows.groupwin import GroupWinView
from operators.windows.length import LengthSpec
from operators.windows.time import TimeWindow
from operators.windows.unique import iteration


class Matcher(Protocol):
    """A running pattern: events and clock moves in, matches (rows of tagged events) out."""

    def on_event(self, type_name: str, event: Row, now_ms: int) -> Rows: ...
    def on_time(self, now_ms: int) -> Rows: ...
    def next_timer(self) -> int | None: ...


class MatcherSpec(Protocol):
    def build(self, state: StateNamespace, ctx: PartitionCtx) -> Matcher: ...
    def describe(self) -> str: ...
    def types(self) -> frozenset[str]: ...


@dataclass(frozen=True)
class StreamSpec:
    """An event-type stream with its filter and data window chain."""

    type_name: str
    filter: Expr | None = None
    view: ViewSpec | None = None
    alias: str | None = None
    filter_text: str = field(default="", compare=False)
    prior: PriorSpec | None = None
    """The statement's prior(n, x) calls: arriving events are stamped with their values."""


@dataclass(frozen=True)
class PipelineSpec:
    """Everything a statement needs per context partition."""

    resultset: ResultSetSpec
    output: OutputSpec
    stream: StreamSpec | None = None
    pattern: MatcherSpec | None = None
    where: Expr | None = None
    stream_kind: str = "istream"  # istream | irstream | rstream
    distinct: bool = False
    join: JoinSpec | None = None
    """A join of several streams (``stream`` and ``pattern`` are then None)."""
    subqueries: tuple[Any, ...] = ()
    """SubquerySpecs of the statement's expressions (operators.subquery), by index."""
    match_prior: MatchPriorSpec | None = None
    """A pattern statement's prior(n, x) calls: each match is stamped with their values."""
    match_recognize: Any = None
    """A MatchRecognizeSpec: row pattern recognition over the stream after its window;
    its match rows are what the rest of the pipeline sees."""
    pattern_view: ViewSpec | None = None
    """The data window over a pattern's matches (``pattern [...]#length(2)``): each match
    is an event entering it, its insert and remove streams go on as a stream's do (Esper
    ref. 5.4.2 Pattern-based event streams: views apply to the pattern's events)."""

    def reacts_to_variables(self, names: set[str] | None = None) -> bool:
        """Whether a variable change concerns this statement: an expiry-expression window
        re-checks (Esper ref. 14.3.12), an output ``when`` reading one of ``names`` re-evaluates."""
        out = self.output
        if out.limited and out.when is not None and (names is None or out.variables & names):
            return True
        stack = [self.stream.view] if self.stream is not None else []
        stack.append(self.pattern_view)
        if self.join is not None:
            stack += self.join.views()
        stack += [sq.view for sq in self.subqueries]
        while stack:
            v = stack.pop()
            if v is None:
                continue
            if getattr(v, "name", "") in ("expr", "expr_batch"):
                return True
            for f in ("stages", "windows"):
                stack.extend(getattr(v, f, None) or ())
            stack.append(getattr(v, "sub", None))
        return False

    def types(self) -> frozenset[str]:
        """Event types this pipeline consumes (its subqueries' streams included)."""
        return self.main_types() | self.subquery_types()

    @cached_property
    def from_types(self) -> frozenset[str]:
        """``main_types()``, computed once (each context partition's pipeline holds it)."""
        return self.main_types()

    def main_types(self) -> frozenset[str]:
        """Event types of the from clause."""
        if self.stream is not None:
            return frozenset({self.stream.type_name})
        if self.join is not None:
            return self.join.types()
        return self.pattern.types() if self.pattern is not None else frozenset()

    def subquery_types(self) -> frozenset[str]:
        """Event types whose events enter a subquery's own window."""
        return frozenset(sq.type_name for sq in self.subqueries if sq.source == "stream")

    def subquery_windows(self) -> frozenset[str]:
        """Named windows a subquery reads."""
        return frozenset(sq.type_name for sq in self.subqueries if sq.source == "window")

    def build(self, state: StateNamespace, ctx: PartitionCtx) -> Pipeline:
        if (self.stream is not None and self.pattern is None and self.where is None
                and not self.subqueries and self.match_recognize is None
                and not self.output.limited and not self.distinct
                and not self.resultset.order_by and self.resultset.limit is None):
            if (self.stream_kind == "istream" and self.stream.prior is None
                    and (self.stream.view is None or isinstance(self.stream.view, LengthSpec))):
                return RowPipeline(self, state, ctx)
            return StreamPipeline(self, state, ctx)
        if (self.stream is not None and self.pattern is None and self.where is None
                and not self.subqueries and self.match_recognize is None
                and self.stream.prior is None and self.output.limited and not self.distinct
                and not self.resultset.order_by and self.resultset.limit is None):
            return LimitedPipeline(self, state, ctx)
        return Pipeline(self, state, ctx)

    def describe(self) -> list[str]:
        """The operator chain, one stage a line (for ``kepl explain``)."""
        out: list[str] = []
        if self.stream is not None:
            s = self.stream
            out.append(f"stream {s.type_name}" + (f"({s.filter_text})" if s.filter else ""))
            if s.prior is not None:
                out.append(s.prior.describe())
            if s.view is not None:
                out.append(s.view.describe())
        if self.match_recognize is not None:
            out.append(self.match_recognize.describe())
        if self.pattern is not None:
            out.append(self.pattern.describe())
            if self.pattern_view is not None:
                out.append(self.pattern_view.describe())
        if self.join is not None:
            out += self.join.describe()
        out += [sq.describe() for sq in self.subqueries]
        if self.where is not None:
            out.append("where")
        out.append(self.resultset.describe())
        out.append(self.output.describe())
        out.append(f"select {self.stream_kind}")
        return out


class Pipeline:
    """A statement's operators for one context partition."""

    __slots__ = ("spec", "ctx", "state", "type_name", "filter", "view", "matcher", "rs", "out",
                 "limited", "kind", "_shaped", "where", "_timers", "join",
                 "_fresh_aggregates", "_batch_view", "_flush_view", "_released", "subs",
                 "sub_by_type",
                 "main_types", "prior", "mr", "timed", "_timer_parts", "_window_read")

    def __init__(self, spec: PipelineSpec, state: StateNamespace, ctx: PartitionCtx) -> None:
        self.spec = spec
        self.ctx = ctx
        self.state = state
        s = spec.stream
        self.type_name = s.type_name if s is not None else None
        self.filter = s.filter if s is not None else None
        self.prior: Prior | MatchPrior | None = (
            s.prior.build(state.child("prior"), ctx) if s is not None and s.prior is not None
            else spec.match_prior.build(state.child("prior"), ctx)
            if spec.match_prior is not None else None)
        self.view: View | None = None
        if s is not None and s.view is not None:
            self.view = self._build_view(s.view, state, ctx)
        elif spec.pattern_view is not None:
            # the window over the pattern's matches: the pipeline treats it as a stream's
            # (expiry timers, output snapshots, batches released, stop)
            self.view = self._build_view(spec.pattern_view, state, ctx)
        ctx.window = self.view
        self.mr = (spec.match_recognize.build(state.child("mr"), ctx)
                   if spec.match_recognize is not None else None)
        if self.mr is not None and self.view is not None:
            self.mr.window_rows = getattr(self.view, "replay_order", self.view.contents)
            if s is not None and s.view is not None and s.view.oldest_first:
                self.mr.relink(self.view.posted())
        self.matcher: Matcher | None = (
            spec.pattern.build(state.child("pattern"), ctx) if spec.pattern is not None else None)
        self.join: Join | None = (
            Join(spec.join, state.child("join"), ctx, self._build_view)
            if spec.join is not None else None)
        self.subs: list[Subquery] = _NO_SUBS  # type: ignore[assignment]
        self.sub_by_type: dict[str, list[Any]] = _NO_SUBS_BY_TYPE  # type: ignore[assignment]
        if spec.subqueries:
            self.subs = [Subquery(sq, state.child(f"sq{i}"), ctx, self._build_view)
                         for i, sq in enumerate(spec.subqueries)]
            ctx.subqueries = self.subs
            self.sub_by_type = {}
            for sub in self.subs:
                if sub.spec.source == "stream":
                    self.sub_by_type.setdefault(sub.spec.type_name, []).append(sub)
        self.main_types = spec.from_types
        fresh = bool(spec.join is not None and spec.join.unidirectional
                     and spec.resultset.aggregates)
        # without output limiting, such fresh aggregates are cleared before the next
        # triggering event and nothing of them outlives the event: they are kept in
        # memory, not in the partition's state (clearing a stored namespace scans it,
        # each triggering event again)
        transient = fresh and not spec.output.limited
        self.rs: ResultSet = spec.resultset.build(
            MemoryNamespace(("rs",)) if transient else state.child("rs"), ctx,
            want_old=spec.stream_kind != "istream")
        # a statement without an output clause keeps nothing per partition for its output
        self.out: OutputLimiter | PassThrough = (
            OutputLimiter(spec.output, state.child("out"), ctx, self.rs, self._contents,
                          spec.stream_kind, fresh)
            if spec.output.limited else PASS_THROUGH)
        self.limited = spec.output.limited
        self.kind = spec.stream_kind
        self._shaped = bool(spec.distinct or spec.resultset.order_by
                            or spec.resultset.limit is not None)
        self.where = spec.where
        self._fresh_aggregates = fresh
        """Each event of a unidirectional join aggregates its join rows alone (Esper ref. 2.12:
        one output row per event; Esper clears the aggregation before each join
        result)."""
        view = self.view
        self._batch_view = (isinstance(view, BatchWindow) and view.releases_before_clearing
                            ) or (isinstance(view, GroupWinView) and view.is_batch)
        self._flush_view = bool(getattr(self.view, "posts_before_clearing", False))
        """A window that empties itself at once on a timer (``#time_accum``) and, as in
        Esper, forgets its rows only after posting them (only the timer's flush: a named
        window's remove stream leaves it at once)."""
        self._window_read: Callable[[], Rows] | None = None
        """A named window consumer's reader of the window's rows (``read_window``)."""
        self._released: Rows | None = None
        """The batch a batch window releases (or the rows a flushing window drops) in the
        update being processed: what an output snapshot in that update sees (Esper's view
        posts before it starts the next batch or clears, so its iterator still returns
        them)."""
        self._timers = _TIMERS_ANY
        """Which parts can have timers (the engine asks ``next_timer`` after each event)."""
        if self.matcher is None and self.join is None and self.mr is None \
                and not self.limited and not self.subs:
            view_timer = getattr(type(self.view), "next_timer", None)
            if self.view is None or view_timer is WindowView.next_timer:
                self._timers = _TIMERS_NONE
            elif view_timer is not None:
                self._timers = _TIMERS_VIEW
        self.timed = self._timers != _TIMERS_NONE
        """Whether ``next_timer`` can ever give a time (the engine asks it after each event)."""
        self._timer_parts = () if self._timers != _TIMERS_ANY else tuple(
            part.next_timer for part in (self.view, self.matcher, self.join, self.mr,
                                         self.out, *self.subs) if part is not None)
        """The ``next_timer`` of each part (the parts never change), for ``next_timer``
        (only asked when any part may have a timer)."""

    @staticmethod
    def _build_view(view: ViewSpec, state: StateNamespace, ctx: PartitionCtx) -> View:
        """Build the data window; its parameters see the variables as they were when the
        partition started (Esper ref. 14.1: parameters are evaluated at partition start), kept
        in the state so that a rebuilt partition gets the same window."""
        variables = ctx.variables
        if not variables:
            return view.build(state.child("view"), ctx)
        snap = state.get("build_vars")
        if snap is None:
            snap = {k: variables.get(k) for k in variables}
            state.put("build_vars", snap)
        ctx.variables = {**variables, **snap}
        try:
            return view.build(state.child("view"), ctx)
        finally:
            ctx.variables = variables

    def _contents(self) -> Iterable[Row] | None:
        """The rows an output snapshot sees: the data window's rows (for a join, the join
        rows of what the windows posted) that pass the where clause, as Esper's iterator
        gives them; None for a stream without a window."""
        if self.mr is not None:
            found = self.mr.snapshot(self.ctx.now_ms)
            if found is None:
                return None
            rows = found
        elif self.join is not None:
            rows = self.join.contents()
        elif self._released is not None:
            view = self.view
            # Esper: a batch window posts its batch before it lets it go, so a snapshot
            # taken as it posts sees it; over #groupwin, that group's beside the others'
            rows = (view.contents_releasing(self._released) if isinstance(view, GroupWinView)
                    else self._released)
        elif self.view is not None:
            # Esper's #unique and #firstunique keep their events in a hash map: its
            # iterator lists them in hash order of the unique key
            rows = iteration(self.view)
        elif self._window_read is not None:
            rows = self._window_read()
        else:
            return None
        w = self.where
        return [r for r in rows if w(r, self.ctx)] if w is not None else rows

    def _snapshot(self) -> Rows:
        return self.rs.snapshot(self._contents())

    def _finish(self, new: Rows, old: Rows, now_ms: int, fresh: bool = False) -> Emit:
        """Where clause, then result set and output.  ``fresh``: aggregate these rows
        alone (a unidirectional join's triggering event, see ``_fresh_aggregates``)."""
        released = new if self._batch_view and new else None
        if self.where is not None:
            ctx = self.ctx
            w = self.where
            new = [r for r in new if w(r, ctx)]
            old = [r for r in old if w(r, ctx)]
            if not new and not old:
                return [], []
        if fresh and not self.limited:
            self.rs.clear_aggregates()
        if not self.limited:
            return self._deliver(*self.rs.process(new, old))
        if released is None:
            return self._deliver(*self.out.on_update(new, old, now_ms))
        self._released = released
        try:
            return self._deliver(*self.out.on_update(new, old, now_ms))
        finally:
            self._released = None

    def _finish_matches(self, matches: Rows, now_ms: int) -> Emit:
        """Pattern matches, each its own update of the result set and output (Esper ref.
        7.1 Patterns: each match is delivered on its own, so aggregates post a row per
        match, also when one event or timer completes several).  With a data window over
        the pattern, each match enters it as one event and what the window posts is the
        update (Esper ref. 5.4.2: a pattern's matches are the events of its stream)."""
        if self.view is not None:
            return self._window_matches(matches, now_ms)
        if len(matches) == 1:
            return self._finish(matches, [], now_ms)
        out_new: Rows = []
        out_old: Rows = []
        for m in matches:
            n, o = self._finish([m], [], now_ms)
            out_new += n
            out_old += o
        return out_new, out_old

    def _window_matches(self, matches: Rows, now_ms: int) -> Emit:
        """Each match into the pattern's data window, in turn; the window's insert and
        remove streams (a batch window's release, a length window's eviction) go through
        where, result set and output, one update per match as without a window."""
        view = self.view
        assert view is not None
        out_new: Rows = []
        out_old: Rows = []
        for m in matches:
            emitted = view.on_events([m], [], now_ms)
            new, old = emitted
            if not new and not old and not isinstance(emitted, ForcedEmit):
                continue
            n, o = self._finish(new if type(new) is list else list(new),
                                old if type(old) is list else list(old), now_ms)
            out_new += n
            out_old += o
        return out_new, out_old

    def _deliver(self, new: Rows, old: Rows) -> Emit:
        """Shape one output batch: order by and limit, then distinct (Esper applies distinct
        to the rows the order-by and limit leave), each per batch; then the stream kind."""
        if self._shaped:
            if self.spec.resultset.order_by or self.spec.resultset.limit is not None:
                new = self.rs.order(new)
                old = self.rs.order(old)
            if self.spec.distinct:
                new = distinct_rows(new)
                old = distinct_rows(old)
        kind = self.kind
        if kind == "istream":
            return new, []
        if kind == "rstream":
            return old, []
        return new, old

    def on_event(self, type_name: str, event: Row, now_ms: int) -> Emit:
        """One event of a type this statement consumes."""
        self.ctx.now_ms = now_ms
        subs = self.sub_by_type.get(type_name) if self.subs else None
        if subs:
            # Esper reference "Subqueries": an event of the subquery's stream enters its
            # window before the enclosing statement evaluates the same event
            for sub in subs:
                sub.on_event(event, now_ms)
            if type_name not in self.main_types:
                return [], []
        if self.matcher is not None:
            matches = self.matcher.on_event(type_name, event, now_ms)
            if not matches:
                return [], []
            if self.prior is not None:
                matches = [self.prior.stamp(m) for m in matches]
            return self._finish_matches(matches, now_ms)
        if self.join is not None:
            new, old = self.join.on_event(type_name, event, now_ms)
            if not new and not old:
                return [], []
            return self._finish(new, old, now_ms, self._fresh_aggregates)
        f = self.filter
        if f is not None and not f(event, self.ctx):
            return [], []
        if self.prior is not None:
            event = self.prior.stamp(event)
        if self.view is None:
            if self.mr is not None:
                return self._recognize([event], [], now_ms)
            return self._finish([event], [], now_ms)
        emitted = self.view.on_events([event], [], now_ms)
        new, old = emitted
        if not new and not old and not isinstance(emitted, ForcedEmit):
            return [], []
        if self.mr is not None:
            return self._recognize(list(new), list(old), now_ms)
        return self._finish(new if type(new) is list else list(new),
                            old if type(old) is list else list(old), now_ms)

    def _recognize(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Match recognize over the window's update: its match rows (insert only) go on."""
        mr = self.mr
        matches = mr.on_events(new, old, now_ms)  # type: ignore[union-attr]
        if mr.failed:  # type: ignore[union-attr]
            undo = getattr(self.view, "undo_release", None)
            if undo is not None and undo():
                mr.kept()  # type: ignore[union-attr]
        if not matches:
            return [], []
        return self._finish(matches, [], now_ms)

    def on_rows(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """Insert and remove stream of a named window this statement selects from."""
        self.ctx.now_ms = now_ms
        if self.join is not None:
            new, old = self.join.on_window_rows(new, old)
            if not new and not old:
                return [], []
            return self._finish(new, old, now_ms)
        f = self.filter
        if f is not None:
            ctx = self.ctx
            new = [r for r in new if f(r, ctx)]
            old = [r for r in old if f(r, ctx)]
        if self.prior is not None and new:
            new = [self.prior.stamp(r) for r in new]
        if self.view is not None:
            new, old = self.view.on_events(new, old, now_ms)
        if not new and not old:
            return [], []
        if self.mr is not None:
            return self._recognize(list(new), list(old), now_ms)
        return self._finish(list(new), list(old), now_ms)

    def read_window(self, rows: Callable[[], Rows]) -> None:
        """Where a named window's consumer finds the window's rows: what an output
        snapshot iterates (Esper's consumer view iterates the window through its filter),
        and match_recognize's replay after an out-of-sequence remove."""
        if self.view is not None:
            return
        f, ctx = self.filter, self.ctx
        read = rows if f is None else lambda: [r for r in rows() if f(r, ctx)]
        self._window_read = read
        if self.mr is not None:
            self.mr.window_rows = read

    def on_subquery_rows(self, window: str, new: Rows, old: Rows, prime: bool = False
                         ) -> None:
        """Insert and remove stream (or, priming, the current rows) of a named window
        this statement's subqueries read."""
        for sub in self.subs:
            if sub.spec.source == "window" and sub.spec.type_name == window:
                if prime:
                    sub.prime(new)
                else:
                    sub.on_rows(new, old)

    def remove(self, rows: Rows, now_ms: int) -> Emit:
        """Delete rows from this pipeline's window (on-delete against a named window)."""
        return self.change(rows, [], now_ms)

    def change(self, old_rows: Rows, new_rows: Rows, now_ms: int) -> Emit:
        """Named-window change from an on-action: rows leave, rows enter (an updated row
        is the row before leaving and the updated one entering; Esper ref. 6.6)."""
        self.ctx.now_ms = now_ms
        assert self.view is not None
        new, old = self.view.on_events(list(new_rows), list(old_rows), now_ms)
        if not new and not old:
            return [], []
        return self._finish(list(new), list(old), now_ms)

    def rebuilt_consumer(self) -> bool:
        """Whether this named-window consumer already read its windows (it is rebuilt from
        its state): its join or subquery indexes then mirror what the windows posted."""
        if self.state.get("read"):
            return True
        self.state.put("read", True)
        return False

    def prime(self, rows: Rows, now_ms: int) -> None:
        """Start from a named window's current rows without posting anything (Esper ref. 2:
        a new consumer 'determines the count and sum by iterating')."""
        self.ctx.now_ms = now_ms
        if self.join is not None:
            self.join.prime(rows)  # the join's index is rebuilt with every pipeline
            return
        if self.mr is not None:
            return  # match_recognize sees the rows that arrive after it starts
        if self.state.get("primed"):
            return  # a rebuilt pipeline: its restored state already counts those rows
        self.state.put("primed", True)
        f = self.filter
        ctx = self.ctx
        if f is not None:
            rows = [r for r in rows if f(r, ctx)]
        if self.where is not None:
            rows = [r for r in rows if self.where(r, ctx)]
        if rows:
            self.rs.process(list(rows), [])

    def on_variables_changed(self, now_ms: int) -> Emit:
        """A variable changed: expiry-expression windows re-check (Esper ref. 14.3.12) and an
        output ``when`` expression is evaluated again (Esper ref. 5.7.1.1)."""
        self.ctx.now_ms = now_ms
        out_new: Rows = []
        out_old: Rows = []
        if self.view is not None or self.join is not None:
            src = self.view if self.view is not None else self.join
            new, old = src.on_variables_changed(now_ms)  # type: ignore[union-attr]
            if new or old:
                n, o = self._finish(list(new), list(old), now_ms)
                out_new += n
                out_old += o
        if self.limited:
            n, o = self._deliver(*self.out.on_variables_changed(now_ms))
            out_new += n
            out_old += o
        return out_new, out_old

    def arm(self, now_ms: int, type_name: str = "") -> None:
        """The statement's first event (of ``type_name``) or update came to another
        engine partition it is split over: arm what that arrival armed there, a timed
        output condition and a ``#time_batch``'s reference point (in a join, that of the
        streams of ``type_name``)."""
        self.out.arm(now_ms)
        arm = getattr(self.view, "arm", None)
        if arm is not None:
            arm(now_ms)
        if self.join is not None and type_name:
            self.join.arm(now_ms, type_name)

    def next_timer(self) -> int | None:
        timers = self._timers
        if timers == _TIMERS_NONE:
            return None
        if timers == _TIMERS_VIEW:
            return self.view.next_timer()  # type: ignore[union-attr]
        due: int | None = None
        for next_timer in self._timer_parts:
            t = next_timer()
            if t is not None and (due is None or t < due):
                due = t
        return due

    def quiet_until(self, limit: int) -> int:
        """The earliest time before ``limit`` at which a timer of this pipeline may do
        something; idle periodic output is no such time (it can ``skip_to``)."""
        due = limit
        for part in (self.view, self.matcher, self.join, self.mr, *self.subs):
            nt = getattr(part, "next_timer", None)
            t = nt() if nt is not None else None
            if t is not None and t < due:
                due = t
        t = self.out.next_timer()
        if t is not None and t < due and not self.out.idle():
            due = t
        return due

    def skip_to(self, limit: int) -> None:
        """Jump idle periodic output past every firing due before ``limit``."""
        self.out.skip_to(limit)

    def terminate_quiet(self) -> bool:
        """Whether ending the partition now outputs nothing and sets no variable."""
        view = self.view
        return self.out.terminate_quiet() and (view is None or not view.posts_on_stop())

    def on_time(self, now_ms: int) -> Emit:
        """Fire whatever is due at ``now_ms``: window expiry before output, as Esper does."""
        self.ctx.now_ms = now_ms
        out_new: Rows = []
        out_old: Rows = []
        view = self.view
        t = view.next_timer() if view is not None else None
        due = t is not None and t <= now_ms
        # Esper: the statement's own window fires before its subqueries' windows due at
        # the same time (a batch it releases reads the subquery's rows as they were)
        subs_after = due and t == now_ms
        subs = self.subs
        late: list[Subquery] = []
        if subs:
            od = self.out.next_timer()
            if od is not None and od <= now_ms:
                # Esper orders one statement's callbacks due at one time by when they were
                # scheduled first: a subquery's #groupwin group schedules when the group
                # came, after the output condition (made with the partition)
                late = [s for s in subs if isinstance(s.view, GroupWinView)]
                if late:
                    subs = [s for s in subs if s not in late]
        if not subs_after:
            for sub in subs:
                sub.on_time(now_ms)
        if view is not None and due and view.fires_apart:
            od = self.out.next_timer()
            if od is not None and od <= t:
                # Esper orders one statement's callbacks due at one time by when they
                # were scheduled first: the output condition's at the statement's start,
                # a #groupwin group's when the group came, so the output fires first
                n, o = self._deliver(*self.out.on_time(now_ms))
                out_new += n
                out_old += o
        if view is not None and due:
            for emitted in (view.on_time_apart(now_ms) if view.fires_apart
                            else (view.on_time(now_ms),)):
                new, old = emitted
                if self.mr is not None:
                    if new or old:
                        n, o = self._recognize(list(new), list(old), now_ms)
                        out_new += n
                        out_old += o
                        if self.mr.failed:
                            self.mr.lose_timer(now_ms)
                elif new or old or isinstance(emitted, ForcedEmit):
                    if self._flush_view and old and not new:
                        self._released = list(old)
                    try:
                        n, o = self._finish(list(new), list(old), now_ms,
                                            getattr(view, "aggregates_each_post", False))
                    finally:
                        self._released = None
                    out_new += n
                    out_old += o
        if subs_after:
            for sub in subs:
                sub.on_time(now_ms)
        join = self.join
        if join is not None:
            t = join.next_timer()
            due = self.out.next_timer()
            if t is not None and t <= now_ms and due is not None and due <= t:
                # Esper ref. 5.7 Output: in a join statement an output period due at the
                # same time as a window's expiry fires first (the expiry's rows wait for
                # the next period); over one stream the expiry comes first.
                n, o = self._deliver(*self.out.on_time(now_ms))
                out_new += n
                out_old += o
            if t is not None and t <= now_ms:
                new, old = join.on_time(now_ms)
                if new or old:
                    n, o = self._finish(new, old, now_ms)
                    out_new += n
                    out_old += o
        mr = self.mr
        if mr is not None:
            t = mr.next_timer()
            if t is not None and t <= now_ms:
                matches = mr.on_time(now_ms)
                if matches:
                    n, o = self._finish(matches, [], now_ms)
                    out_new += n
                    out_old += o
        if self.matcher is not None:
            t = self.matcher.next_timer()
            due = self.out.next_timer()
            if t is not None and t <= now_ms and due is not None and due <= t:
                # as in a join: an output period due with a pattern timer fires first
                n, o = self._deliver(*self.out.on_time(now_ms))
                out_new += n
                out_old += o
            if t is not None and t <= now_ms:
                matches = self.matcher.on_time(now_ms)
                if matches:
                    if self.prior is not None:
                        matches = [self.prior.stamp(m) for m in matches]
                    n, o = self._finish_matches(matches, now_ms)
                    out_new += n
                    out_old += o
        t = self.out.next_timer()
        if t is not None and t <= now_ms:
            n, o = self._deliver(*self.out.on_time(now_ms))
            out_new += n
            out_old += o
        for sub in late:
            sub.on_time(now_ms)
        return out_new, out_old

    def terminate(self, now_ms: int) -> Emit:
        """The context partition ends: flush ``when terminated`` output, then drop state."""
        self.ctx.now_ms = now_ms
        # Esper flushes an output clause's 'when terminated' before the views stop; what a
        # grouped derived window then posts as it stops still counts toward an output
        # condition of events (and is lost to one that only waits for the end)
        n, o = self._deliver(*self.out.on_terminate(now_ms))
        out_new, out_old = list(n), list(o)
        if self.view is not None and self.mr is None:
            for new, old in self.view.on_stop():
                n, o = self._finish(list(new), list(old), now_ms)
                out_new += n
                out_old += o
        self.state.clear()
        return out_new, out_old

    def iterate(self) -> Any:
        """Current result rows (Esper's iterator / ``kepl query``)."""
        return self._snapshot()


_NO_SUBS: tuple[Subquery, ...] = ()
_NO_SUBS_BY_TYPE: Mapping[str, list[Any]] = MappingProxyType({})
"""The subqueries of a statement without any (shared: read, never changed)."""

_TIMERS_NONE, _TIMERS_VIEW, _TIMERS_ANY = 0, 1, 2
"""No part ever sets a timer / only the data window can / look at every part."""


class StreamPipeline(Pipeline):
    """A stream statement without pattern, ``where``, output limiting, distinct, order
    by or limit: ``on_event`` runs filter, window and result set directly (the rows and
    their order are those of the general path)."""

    __slots__ = ()

    def on_event(self, type_name: str, event: Row, now_ms: int) -> Emit:
        """One event of the statement's stream."""
        ctx = self.ctx
        ctx.now_ms = now_ms
        f = self.filter
        if f is not None and not f(event, ctx):
            return [], []
        if self.prior is not None:
            event = self.prior.stamp(event)
        view = self.view
        if view is None:
            new, old = self.rs.process([event], [])
        else:
            emitted = view.on_events([event], [], now_ms)
            new, old = emitted
            if not new and not old and not isinstance(emitted, ForcedEmit):
                return [], []
            new, old = self.rs.process(new if type(new) is list else list(new),
                                       old if type(old) is list else list(old))
        kind = self.kind
        if kind == "istream":
            return new, []
        if kind == "rstream":
            return old, []
        return new, old


class LimitedPipeline(Pipeline):
    """A stream statement with output limiting and without pattern, ``where``,
    subqueries, ``prior``, distinct, order by or limit: ``on_event`` runs filter, window
    and output limiter directly (the rows and their order are those of the general
    path)."""

    __slots__ = ()

    def on_run(self, events: list[Row], now_ms: int) -> bool:
        """``on_event`` of each of ``events`` (one time) as one update of the output
        limiter, where that is the same and emits nothing: the limiter takes several
        rows as one each (``OutputLimiter.takes_rows``), over no window or a sliding
        time window (an arrival expires nothing).  The groups touched, in their order,
        and the aggregation states are those of one update per event.  False: nothing
        done (``on_event`` each)."""
        out = self.out
        view = self.view
        if (view is not None and type(view) is not TimeWindow) or not out.takes_rows():
            return False
        ctx = self.ctx
        ctx.now_ms = now_ms
        f = self.filter
        if f is not None:
            try:
                events = [e for e in events if f(e, ctx)]
            except Exception:  # noqa: BLE001 - one at a time, as on_event fails
                return False
        if not events:
            return True
        new = events if view is None else view.on_events(events, [], now_ms)[0]
        out.on_rows(new if type(new) is list else list(new), now_ms)
        return True

    def on_event(self, type_name: str, event: Row, now_ms: int) -> Emit:
        """One event of the statement's stream."""
        ctx = self.ctx
        ctx.now_ms = now_ms
        f = self.filter
        if f is not None and not f(event, ctx):
            return [], []
        view = self.view
        if view is None:
            new, old = self.out.on_update([event], [], now_ms)
        else:
            emitted = view.on_events([event], [], now_ms)
            new, old = emitted
            if not new and not old and not isinstance(emitted, ForcedEmit):
                return [], []
            new = new if type(new) is list else list(new)
            old = old if type(old) is list else list(old)
            if self._batch_view and new:
                self._released = new
                try:
                    new, old = self.out.on_update(new, old, now_ms)
                finally:
                    self._released = None
            else:
                new, old = self.out.on_update(new, old, now_ms)
        kind = self.kind
        if kind == "istream":
            return new, []
        if kind == "rstream":
            return old, []
        return new, old


class RowPipeline(StreamPipeline):
    """A ``StreamPipeline`` delivering the insert stream only, over no window or a length
    window: each event is one step of window and result set (``LengthWindow.push``,
    ``ResultSet.step``), the rows those of the general path."""

    __slots__ = ("bare",)

    def __init__(self, spec: PipelineSpec, state: StateNamespace, ctx: PartitionCtx) -> None:
        super().__init__(spec, state, ctx)
        self.bare = self.view is None and self.rs.bare
        """``select *`` of the stream, nothing else: the event is the row."""

    def on_event(self, type_name: str, event: Row, now_ms: int) -> Emit:
        """One event of the statement's stream."""
        ctx = self.ctx
        ctx.now_ms = now_ms
        f = self.filter
        if f is not None and not f(event, ctx):
            return [], []
        view = self.view
        if view is not None:
            return self.rs.step(event, view.push(event)), []  # type: ignore[attr-defined]
        if self.bare:
            return [event], []
        return self.rs.step(event, None), []

    def each(self, events: Iterable[Row], now_ms: int) -> Iterator[Rows]:
        """``on_event`` for each of ``events`` in turn, lazily: the insert-stream rows of
        one event are yielded before the next is looked at (whatever the caller does in
        between, e.g. an event a listener sends, comes first, as with ``on_event``)."""
        view = self.view
        if view is not None and self.filter is None:
            # window and result set step by step in one loop (``ResultSet.pushed``)
            return self.rs.pushed(events, view.push, now_ms)  # type: ignore[attr-defined]
        return self._each(events, now_ms)

    def _each(self, events: Iterable[Row], now_ms: int) -> Iterator[Rows]:
        ctx = self.ctx
        f = self.filter
        step = self.rs.step
        view = self.view
        push = view.push if view is not None else None  # type: ignore[attr-defined]
        bare = self.bare
        for event in events:
            ctx.now_ms = now_ms
            if f is not None and not f(event, ctx):
                yield []
            elif push is not None:
                yield step(event, push(event))
            elif bare:
                yield [event]
            else:
                yield step(event, None)


def distinct_rows(rows: Rows) -> Rows:
    """Rows with duplicates (same values) dropped, first occurrence kept (select distinct);
    the hidden order-by key columns (NUL-prefixed) take no part."""
    seen: set[str] = set()
    out: Rows = []
    for r in rows:
        k = json.dumps({c: v for c, v in r.items() if c[:1] != "\x00"}, sort_keys=True,
                       default=str)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out

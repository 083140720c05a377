"""The output limiter of one context partition: a condition (when) and a strategy (what),
composed from the output clause (Esper ref. 5.7 Output rate limiting; contexts' ``output
when terminated``, Esper ref. 4.5)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from operators.base import Emit, PartitionCtx, Row, Rows, StateNamespace
from operators.output.book import load_book
from operators.output.conditions import Trigger, truth
from operators.output.spec import OutputSpec
from operators.output.strategies import Buffered, Snapshot, make_strategy
from operators.resultset import AGG_ALL, SIMPLE, ResultSet


class PassThrough:
    """The output of a statement without an output clause: rows pass as the result set
    gives them (``Pipeline`` does not call it for them), no timer, nothing to flush or
    keep, so one instance serves every context partition of every such statement."""

    __slots__ = ()

    def arm(self, now_ms: int) -> None:
        return None

    def next_timer(self) -> int | None:
        return None

    def on_time(self, now_ms: int) -> Emit:
        return [], []

    def on_terminate(self, now_ms: int) -> Emit:
        return [], []

    def on_variables_changed(self, now_ms: int) -> Emit:
        return [], []

    def idle(self) -> bool:
        return True

    def terminate_quiet(self) -> bool:
        return True

    def skip_to(self, limit: int) -> None:
        return None


PASS_THROUGH = PassThrough()


class OutputLimiter:
    """Runs a limited statement's result set and decides what to post and when, as
    Esper's output process views do; an unlimited statement's rows pass through."""

    def __init__(self, spec: OutputSpec, state: StateNamespace, ctx: PartitionCtx,
                 rs: ResultSet, contents: Callable[[], Iterable[Row] | None],
                 stream_kind: str | None = None, fresh: bool = False) -> None:
        self.spec = spec
        self.rs = rs
        self.rs_kind = rs.spec.kind
        # created when the partition starts: 'after' and last_output_timestamp count from
        # here (Esper OutputConditionExpression / OutputProcessViewAfterState)
        book = load_book(state, ctx.now_ms,
                         spec.after_ms is None and spec.after_events is None, spec.limited)
        self.trigger = Trigger(spec, ctx, state, book)
        self.book = book
        self.strategy = make_strategy(spec.kind, self.rs_kind)(
            self.trigger, state, rs, contents,
            stream_kind or ("irstream" if rs.want_old else "istream"))
        strategy = self.strategy
        strategy.fresh = fresh and isinstance(strategy, Buffered | Snapshot)
        self.clears_fresh = fresh and not isinstance(strategy, Buffered) and (
            not spec.limited or (not spec.has_trigger and not spec.when_terminated)
            or strategy.resets_unidirectional or bool(rs.spec.order_by))
        """Clear a unidirectional join's aggregation as each update arrives (Esper's
        buffered output view clears it per update at output time instead, its unordered
        output-last/all helpers not at all)."""
        self._collects = (spec.limited and (spec.has_trigger or spec.when_terminated)
                          and strategy.releases and not self.clears_fresh)
        """``on_update`` counts and collects (the commonest limited statement's path)."""
        unordered = (spec.kind == "last" and self.rs_kind == SIMPLE) or (
            spec.kind in ("all", "last") and not rs.spec.order_by)
        self._after_drops = self.rs_kind == SIMPLE and not unordered
        """While the after clause holds output back, an update of an unaggregated,
        ungrouped statement is dropped, except under Esper's unordered output-last/all
        view, which takes every update into the next batch and only leaves it out of the
        count (``OutputProcessViewConditionLastAllUnord``; aggregated statements keep it
        in their change set either way, ``OutputProcessViewConditionDefault``)."""

    # -- entry points ----------------------------------------------------------
    def on_update(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """One update of the statement's data window (rows that passed ``where``)."""
        if self._collects:
            trigger = self.trigger
            book = self.book
            after_ok = book["after_done"] or trigger.after_ok(len(new), now_ms)
            if not after_ok and self._after_drops:
                trigger.save()
                return [], []
            book["updates"] += 1
            self.strategy.collect(new, old)
            if after_ok and trigger.count(len(new), len(old), now_ms):
                return self._release(now_ms)
            trigger.save()
            return [], []
        spec = self.spec
        if self.clears_fresh:
            self.rs.clear_aggregates()
        if not spec.limited:
            return self.rs.process(new, old)
        trigger = self.trigger
        if not spec.has_trigger and not spec.when_terminated:
            # 'output after ...' alone: rows pass once the after-condition holds
            rn, ro = self.rs.process(new, old)
            ok = trigger.after_ok(len(rn), now_ms)
            trigger.save()
            return (rn, ro) if ok else ([], [])
        after_ok = trigger.after_ok(len(new), now_ms)
        if not after_ok and self._after_drops:
            trigger.save()
            return [], []
        if not self.strategy.releases:
            out = self.strategy.first(new, old, now_ms, after_ok)
            trigger.save()
            return out
        self.book["updates"] += 1
        self.strategy.collect(new, old)
        if after_ok and trigger.count(len(new), len(old), now_ms):
            return self._release(now_ms)
        # before 'after' is satisfied aggregated statements keep the update for the next
        # batch but it does not count toward the condition (Esper's deltaSet)
        trigger.save()
        return [], []

    def takes_rows(self) -> bool:
        """Whether ``on_rows`` may stand for an update per row now: a collecting
        condition of time alone (no event count or expression ends an interval) whose
        ``after`` is done, and a collector that takes several rows of groups as it takes
        one each, reading no aggregate (``quiet_many``)."""
        return (self._collects and self.trigger._timed_only and bool(self.book["after_done"])
                and getattr(self.strategy, "quiet_many", False))

    def on_rows(self, new: Rows, now_ms: int) -> None:
        """``on_update`` of each of ``new`` in turn, as one call, where ``takes_rows``
        (``LimitedPipeline.on_run``).  The book counts every update."""
        book = self.book
        book["updates"] += len(new)
        self.strategy.collect(new, [])
        self.trigger.count(len(new), 0, now_ms)
        self.trigger.save()

    def arm(self, now_ms: int) -> None:
        """Arm a timed condition not armed yet, as a first update at ``now_ms`` would:
        the statement's first update came to another of the engine partitions it is
        split over by group key."""
        if not self.spec.limited or self.book["due"] is not None:
            return
        due = self.trigger.condition.arm(self.trigger, now_ms)
        if due is not None:
            self.book["due"] = due
            self.trigger.save()

    def next_timer(self) -> int | None:
        """When the periodic or crontab output is due, or None."""
        return self.trigger.due() if self.spec.limited else None

    def on_time(self, now_ms: int) -> Emit:
        """A periodic or crontab output is due: release and re-arm from the due time."""
        due = self.trigger.due()
        if due is None or now_ms < due:
            return [], []
        self.trigger.reschedule(due)
        if not self.strategy.releases:
            self.book["first_posted"] = False
            self.trigger.save()
            return [], []
        return self._release(now_ms)

    def on_terminate(self, now_ms: int) -> Emit:
        """The context partition ends: ``when terminated`` releases."""
        spec = self.spec
        if not spec.limited or not spec.when_terminated:
            return [], []
        ok = True
        if spec.terminated_and is not None:
            self.trigger.builtins(now_ms)
            ok = truth(spec.terminated_and({}, self.trigger.ctx))
        # Esper runs the terminated then-set whether or not the guard holds
        self.trigger.assign(spec.terminated_set, now_ms)
        if not ok or not self.strategy.releases:
            return [], []
        return self._release(now_ms)

    def on_variables_changed(self, now_ms: int) -> Emit:
        """A variable the when-expression reads changed: evaluate it now (Esper ref.
        5.7.1.1).  When it holds, its ``then set`` runs at once and the output is
        scheduled for the current time: it goes out at the next clock move (an event
        coming first may find the condition true and output before it), as Esper's
        output condition schedules a callback; a scheduled one is not scheduled again."""
        spec = self.spec
        if not spec.limited or spec.when is None or not self.book["after_done"]:
            return [], []
        if self.trigger.heard_own_writes():
            return [], []
        if self.trigger.due() is not None or not self.trigger.when_holds(now_ms):
            return [], []
        self.book["due"] = now_ms
        self.trigger.save()
        return [], []

    # -- idle clock jumps --------------------------------------------------------
    def idle(self) -> bool:
        """Whether, with no input, every coming periodic firing outputs nothing and changes
        nothing but the due time and ``last_output_timestamp`` (``skip_to`` can jump)."""
        if not self.spec.limited or self.trigger.due() is None or not self.strategy.releases:
            return True  # 'first' at its period only ends the interval (no release)
        return self._empty_release()

    def terminate_quiet(self) -> bool:
        """Whether the partition ending now posts nothing and sets no variable."""
        spec = self.spec
        if not spec.limited or not spec.when_terminated:
            return True
        return not spec.terminated_set and (not self.strategy.releases
                                            or self._empty_release())

    def skip_to(self, limit: int) -> None:
        """Every periodic firing due before ``limit`` at once, in closed form; only valid
        while ``idle()`` and no input arrives before ``limit`` (same state as firing them
        one by one: due time, last output time, 'first' interval ended)."""
        if not self.spec.limited:
            return
        last = self.trigger.skip(limit)
        if last is None:
            return
        if not self.strategy.releases:
            self.book["first_posted"] = False
        else:
            self.book["last_output"] = last
        self.trigger.save()

    # -- releasing ---------------------------------------------------------------
    def _empty_release(self) -> bool:
        """Whether releasing now would post no row: nothing collected, and the strategy
        adds no standing rows (a fully aggregated statement posts its row each interval,
        snapshot posts the window's, grouped 'all' every group's)."""
        if self.strategy.holds() or self.book["updates"]:
            return False
        if self.rs_kind == AGG_ALL:
            return False
        return not self.strategy.standing()

    def _release(self, now_ms: int) -> Emit:
        """Build the output of the interval, then reset the interval's collectors."""
        if self.rs_kind == AGG_ALL and self.book["updates"] == 0 and self.strategy.idle_row:
            # a fully aggregated statement outputs its row in an interval without changes
            # (Esper RowForAll: the current row as new, and as old with irstream)
            cur = self.rs.current_rows()
            new, old = list(cur), (list(cur) if self.rs.want_old else [])
        else:
            new, old = self.strategy.rows()
        self.strategy.clear()
        self.book["updates"] = 0
        self.trigger.interval_ended(now_ms)
        self.trigger.save()
        return new, old

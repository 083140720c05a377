"""Output rate limiting (002 §2.10, 000 §4.5): when result rows reach the listener.

A limited statement hands every update of its data window (after ``where``) to an
``OutputLimiter``, which runs the result set itself and decides what to post and when, as
Esper's output process views do:

* triggers: ``every N events`` (new and old events counted apart, either reaching N
  fires), ``every <period>`` (timed from the first update, then every period from the due
  time, for ever), ``at (crontab)`` (armed by the first update), ``when <expr>`` (checked
  at each update and when a variable changes; built-in properties ``count_insert``,
  ``count_remove``, ``count_insert_total``, ``count_remove_total``,
  ``last_output_timestamp``), ``when terminated`` (the context partition ends), optionally
  after ``output after <period | N events>``;
* kinds: default (every row of every update), ``all``, ``last``, ``first``, ``snapshot``;
  the result-set kind decides what ``all``/``last``/``first`` mean (Esper's Appendix A
  output reference): a fully aggregated grouped statement posts one row per group for
  ``last`` (groups updated in the interval) and for ``all`` (every group ever seen, its
  events all expired or not); ``first`` of a grouped statement is decided per group.

Aggregation state is updated at each event (Esper's "non-buffered" output helpers, which
its regression suite checks against the buffered ones), so the output never needs the
events of an interval again: every collector writes O(1) keys per event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from operators.base import Emit, Expr, PartitionCtx, Row, Rows, StateNamespace
from operators.resultset import AGG_ALL, GROUPED, GROUPED_ROWS, SIMPLE, ResultSet

OUTPUT_KINDS = ("default", "all", "first", "last", "snapshot")


@dataclass(frozen=True)
class Assignment:
    """``then set variable = expr``."""

    variable: str
    expr: Expr


@dataclass(frozen=True)
class OutputSpec:
    """The validated output clause.

    ``kind``: default | all | first | last | snapshot; one trigger among ``every_events``
    (an int, or ``every_events_expr`` for a variable), ``every_ms`` (or ``every_expr``
    giving seconds), ``at`` (a crontab schedule with ``next_after``), ``when``;
    ``when_terminated`` adds output at partition end (``terminated_and`` guards it,
    ``terminated_set`` runs then); ``after_ms``/``after_events`` suppress output at first.
    """

    kind: str = "default"
    every_events: int | None = None
    every_ms: int | None = None
    when: Expr | None = None
    when_terminated: bool = False
    terminated_and: Expr | None = None
    then_set: tuple[Assignment, ...] = ()
    limited: bool = False  # False: no output clause, rows pass through
    at: Any = None
    at_text: str = ""
    after_ms: int | None = None
    after_events: int | None = None
    terminated_set: tuple[Assignment, ...] = ()
    every_events_expr: Expr | None = None
    every_expr: Expr | None = None
    variables: frozenset[str] = frozenset()
    """Variables the when-expression reads (a change re-evaluates it)."""

    @property
    def has_trigger(self) -> bool:
        """Whether any trigger besides ``when terminated`` is given."""
        return (self.every_events is not None or self.every_ms is not None
                or self.every_events_expr is not None or self.every_expr is not None
                or self.at is not None or self.when is not None)

    def describe(self) -> str:
        """The output stage for ``kepl explain``."""
        if not self.limited:
            return "output[immediate]"
        parts = [f"output[{'all' if self.kind == 'default' else self.kind}"]
        if self.after_ms is not None:
            parts.append(f" after {self.after_ms} ms")
        if self.after_events is not None:
            parts.append(f" after {self.after_events} events")
        if self.every_events is not None or self.every_events_expr is not None:
            parts.append(f" every {self.every_events or '<var>'} events")
        if self.every_ms is not None or self.every_expr is not None:
            parts.append(f" every {self.every_ms if self.every_ms is not None else '<var>'} ms")
        if self.at is not None:
            parts.append(f" at {self.at_text}")
        if self.when is not None:
            parts.append(" when <expr>")
        if self.when_terminated:
            parts.append(" when terminated")
        return "".join(parts) + "]"

    def build(self, state: StateNamespace, ctx: PartitionCtx, rs: ResultSet,
              contents: Callable[[], Iterable[Row] | None],
              stream_kind: str | None = None) -> OutputLimiter:
        """An output limiter for one context partition (``stream_kind``: the select's
        istream | irstream | rstream; by default irstream when the result set keeps old
        rows)."""
        return OutputLimiter(self, state, ctx, rs, contents, stream_kind)


_META = "meta"


class OutputLimiter:
    """Collects what an output needs between outputs and releases it on the trigger."""

    def __init__(self, spec: OutputSpec, state: StateNamespace, ctx: PartitionCtx,
                 rs: ResultSet, contents: Callable[[], Iterable[Row] | None],
                 stream_kind: str | None = None) -> None:
        self.spec = spec
        self.state = state
        self.ctx = ctx
        self.rs = rs
        self.contents = contents
        self.rs_kind = rs.spec.kind
        self.irstream = rs.want_old
        self.stream_kind = stream_kind or ("irstream" if rs.want_old else "istream")
        meta = state.get(_META)
        if meta is None:
            # created when the partition starts: 'after' and last_output_timestamp count
            # from here (Esper OutputConditionExpression / OutputProcessViewAfterState)
            meta = {"start": ctx.now_ms, "last_out": ctx.now_ms, "ci": 0, "cr": 0,
                    "cit": 0, "crt": 0, "n_new": 0, "n_old": 0, "due": None,
                    "after_seen": 0, "after_ok": spec.after_ms is None
                    and spec.after_events is None, "witnessed": False, "updates": 0,
                    "seq": 0}
            if spec.limited:
                state.put(_META, meta)
        self.meta: dict[str, Any] = meta
        # interval collectors, restored from the namespace
        self.buffer: list[tuple[int, Rows, Rows]] = []
        self.touched: dict[str, list] = {}
        self.first_groups: dict[str, list] = {}
        self.last_rows: dict[str, Any] = {}
        for k, v in state.items():
            if isinstance(k, tuple) and k:
                if k[0] == "b":
                    self.buffer.append((k[1], v[0], v[1]))
                elif k[0] == "g":
                    self.touched[k[1]] = v
                elif k[0] == "f":
                    self.first_groups[k[1]] = v
            elif k in ("ln", "lo", "fo"):
                self.last_rows[k] = v
        self.buffer.sort(key=lambda e: e[0])

    # -- bookkeeping ---------------------------------------------------------
    def _save(self) -> None:
        """Persist the trigger and interval bookkeeping (one key)."""
        self.state.put(_META, self.meta)

    def _seq(self) -> int:
        """The next sequence number of the interval's collectors."""
        self.meta["seq"] += 1
        return int(self.meta["seq"])

    def _builtins(self, now_ms: int) -> dict[str, Any]:
        """Esper §5.7.1.1 built-in properties of an output expression."""
        out = self.ctx.output
        m = self.meta
        out["count_insert"] = m["ci"]
        out["count_remove"] = m["cr"]
        out["count_insert_total"] = m["cit"]
        out["count_remove_total"] = m["crt"]
        out["last_output_timestamp"] = m["last_out"]
        out["current_timestamp"] = now_ms
        return out

    def _assign(self, assignments: tuple[Assignment, ...], now_ms: int) -> None:
        """Run ``then set`` assignments (they may read the built-in properties)."""
        if not assignments:
            return
        self._builtins(now_ms)
        for a in assignments:
            self.ctx.variables[a.variable] = a.expr({}, self.ctx)

    def _every_events(self) -> int | None:
        """The event rate: a constant or, read at each update, a variable."""
        spec = self.spec
        if spec.every_events_expr is not None:
            v = spec.every_events_expr({}, self.ctx)
            return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
        return spec.every_events

    def _every_ms(self) -> int | None:
        """The period in ms: a constant or, read when scheduling, a variable."""
        spec = self.spec
        if spec.every_expr is not None:
            v = spec.every_expr({}, self.ctx)
            if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
                return int(round(v * 1000))
            return None
        return spec.every_ms

    def _arm(self, now_ms: int) -> None:
        """The first update arms a periodic trigger (notes: timing starts at the first event)."""
        if self.meta["due"] is not None:
            return
        spec = self.spec
        if spec.at is not None:
            self.meta["due"] = spec.at.next_after(now_ms)
        else:
            every = self._every_ms()
            if every is not None:
                self.meta["due"] = now_ms + every

    # -- the after clause ----------------------------------------------------
    def _after_ok(self, n_new: int, now_ms: int) -> bool:
        """Esper's after-state: satisfied once the period passed or more than N events came."""
        m = self.meta
        if m["after_ok"]:
            return True
        spec = self.spec
        if spec.after_ms is not None:
            if now_ms < m["start"] + spec.after_ms:
                return False
        elif spec.after_events is not None:
            m["after_seen"] += n_new
            if m["after_seen"] <= spec.after_events:
                return False
        m["after_ok"] = True
        return True

    # -- entry points ----------------------------------------------------------
    def on_update(self, new: Rows, old: Rows, now_ms: int) -> Emit:
        """One update of the statement's data window (rows that passed ``where``)."""
        spec = self.spec
        if not spec.limited:
            return self.rs.process(new, old)
        if not spec.has_trigger and not spec.when_terminated:
            # 'output after ...' alone: rows pass once the after-condition holds
            rn, ro = self.rs.process(new, old)
            ok = self._after_ok(len(rn), now_ms)
            self._save()
            return (rn, ro) if ok else ([], [])
        after_ok = self._after_ok(len(new), now_ms)
        if not after_ok and self.rs_kind == SIMPLE:
            self._save()
            return [], []
        if spec.kind == "first":
            return self._first(new, old, now_ms, after_ok)
        self._collect(new, old)
        if not after_ok:
            # before 'after' is satisfied aggregated statements keep the update for the
            # next batch but it does not count toward the trigger (Esper's deltaSet)
            self._save()
            return [], []
        return self._count_and_check(len(new), len(old), now_ms)

    def _count_and_check(self, n_new: int, n_old: int, now_ms: int) -> Emit:
        """Update the trigger with one update's event counts; release if it fires."""
        if self._trigger(n_new, n_old, now_ms):
            return self._release(now_ms)
        self._save()
        return [], []

    def _trigger(self, n_new: int, n_old: int, now_ms: int) -> bool:
        """Count one update toward the trigger; True when an event-driven trigger fires."""
        spec = self.spec
        m = self.meta
        m["ci"] += n_new
        m["cr"] += n_old
        m["cit"] += n_new
        m["crt"] += n_old
        self._arm(now_ms)
        rate = self._every_events()
        if rate is not None:
            m["n_new"] += n_new
            m["n_old"] += n_old
            if m["n_new"] >= rate or m["n_old"] >= rate:
                m["n_new"] = m["n_old"] = 0
                return True
        if spec.when is not None:
            self._builtins(now_ms)
            if _true(spec.when({}, self.ctx)):
                self._assign(spec.then_set, now_ms)
                return True
        return False

    def next_timer(self) -> int | None:
        """When the periodic or crontab output is due, or None."""
        return self.meta["due"] if self.spec.limited else None

    def on_time(self, now_ms: int) -> Emit:
        """A periodic or crontab output is due: release and re-arm from the due time."""
        due = self.meta["due"]
        if due is None or now_ms < due:
            return [], []
        spec = self.spec
        if spec.at is not None:
            self.meta["due"] = spec.at.next_after(due)
        else:
            every = self._every_ms()
            self.meta["due"] = due + every if every is not None else None
        if spec.kind == "first":
            self.meta["witnessed"] = False
            self._save()
            return [], []
        return self._release(now_ms)

    # -- idle clock jumps ------------------------------------------------------
    def idle(self) -> bool:
        """Whether, with no input, every coming periodic firing outputs nothing and changes
        nothing but the due time and ``last_output_timestamp`` (``skip_to`` can jump)."""
        if not self.spec.limited or self.meta["due"] is None or self.spec.kind == "first":
            return True  # 'first' at its period only ends the interval (no release)
        return self._empty_release()

    def _empty_release(self) -> bool:
        """Whether releasing now would post no row: nothing collected, and the kind adds
        no standing rows (002 §2.10: a fully aggregated statement posts its row each
        interval, snapshot posts the window's, 'all' grouped every group's)."""
        if self.buffer or self.touched or self.last_rows or self.meta["updates"]:
            return False
        kind = self.spec.kind
        rk = self.rs_kind
        if rk == AGG_ALL:
            return False
        if kind == "snapshot":
            rows = self.contents()
            return rows is not None and next(iter(rows), None) is None
        if kind == "all" and rk in (GROUPED, GROUPED_ROWS):
            return not self.rs.group_keys()
        return True

    def terminate_quiet(self) -> bool:
        """Whether the partition ending now posts nothing and sets no variable."""
        spec = self.spec
        if not spec.limited or not spec.when_terminated:
            return True
        return not spec.terminated_set and (spec.kind == "first" or self._empty_release())

    def skip_to(self, limit: int) -> None:
        """Every periodic firing due before ``limit`` at once, in closed form; only valid
        while ``idle()`` and no input arrives before ``limit`` (same state as firing them
        one by one: due time, last output time, 'first' interval ended)."""
        m = self.meta
        due = m["due"]
        if not self.spec.limited or due is None or due >= limit:
            return
        spec = self.spec
        if spec.at is not None:
            last = _last_firing_before(spec.at, due, limit)
            m["due"] = spec.at.next_after(last)
        else:
            every = self._every_ms()
            if every is None:
                last, m["due"] = due, None
            else:
                last = due + (limit - 1 - due) // every * every
                m["due"] = last + every
        if spec.kind == "first":
            m["witnessed"] = False
        else:
            m["last_out"] = last
        self._save()

    def on_terminate(self, now_ms: int) -> Emit:
        """The context partition ends: ``when terminated`` releases (000 §4.5)."""
        spec = self.spec
        if not spec.limited or not spec.when_terminated:
            return [], []
        ok = True
        if spec.terminated_and is not None:
            self._builtins(now_ms)
            ok = _true(spec.terminated_and({}, self.ctx))
        # Esper runs the terminated then-set whether or not the guard holds
        self._assign(spec.terminated_set, now_ms)
        if not ok:
            return [], []
        if spec.kind == "first":
            return [], []
        return self._release(now_ms)

    def on_variables_changed(self, now_ms: int) -> Emit:
        """A variable the when-expression reads changed: evaluate it now (Esper §5.7.1.1)."""
        spec = self.spec
        if not spec.limited or spec.when is None or not self.meta["after_ok"]:
            return [], []
        self._builtins(now_ms)
        if not _true(spec.when({}, self.ctx)):
            return [], []
        self._assign(spec.then_set, now_ms)
        if spec.kind == "first":
            self.meta["witnessed"] = False
            self._save()
            return [], []
        return self._release(now_ms)

    # -- collecting ------------------------------------------------------------
    def _collect(self, new: Rows, old: Rows) -> None:
        """Run the result set for one update and keep what the kind will need."""
        kind = self.spec.kind
        rk = self.rs_kind
        rs = self.rs
        self.meta["updates"] += 1
        if kind == "snapshot":
            rs.process(new, old)
            return
        if rk in (GROUPED, GROUPED_ROWS) and kind in ("all", "last"):
            g = rs.grouped(new, old)
            if rk == GROUPED:
                for k, before in g.before.items():
                    rec = self.touched.get(k)
                    if rec is None:
                        self._touch(k, [self._seq(), before])
                    elif kind == "all" and not rec[1] and before:
                        # Esper's output-all helper keeps trying a group's remove-stream
                        # row until one passes having (RowPerGroupOutputAllHelperImpl)
                        self._touch(k, [rec[0], before])
            elif kind == "last":
                self._last_per_group(g)
            else:
                # aggregated grouped 'all': rows kept with their group, regrouped at output
                rows_new = g.rows_new or [[] for _ in g.keys_new]
                rows_old = g.rows_old or [[] for _ in g.keys_old]
                self._push([[k, r] for k, r in zip(g.keys_new, rows_new)],
                           [[k, r] for k, r in zip(g.keys_old, rows_old)])
            return
        rn, ro = rs.process(new, old)
        if kind == "last":
            if rk == AGG_ALL:
                self._put_last("ln", rn)
                if ro and "fo" not in self.last_rows:
                    self._put_last("fo", ro)
            else:
                if rn:
                    self._put_last("ln", rn[-1:])
                if ro:
                    self._put_last("lo", ro[-1:])
            return
        self._push(rn, ro)

    def _touch(self, key: str, value: list) -> None:
        """Record a group touched in this interval (one key per group)."""
        self.touched[key] = value
        self.state.put(("g", key), value)

    def _last_per_group(self, g: Any) -> None:
        """Aggregated grouped ``last``: each group's latest event row (either stream)."""
        for k, rows in zip(g.keys_new, g.rows_new or [[]] * len(g.keys_new)):
            rec = self.touched.get(k) or [self._seq(), [], []]
            if rows:
                rec[1] = rows[-1:]
            self._touch(k, rec)
        for k, rows in zip(g.keys_old, g.rows_old or [[]] * len(g.keys_old)):
            rec = self.touched.get(k) or [self._seq(), [], []]
            if rows:
                rec[2] = rows[-1:]
            self._touch(k, rec)

    def _put_last(self, key: str, rows: Rows) -> None:
        """Keep the latest rows of one stream for ``output last`` (one key)."""
        self.last_rows[key] = rows
        self.state.put(key, rows)

    def _push(self, new: Rows, old: Rows) -> None:
        """Keep one update's rows for the interval's output (one key per update)."""
        seq = self._seq()
        self.buffer.append((seq, new, old))
        self.state.put(("b", seq), [new, old])

    # -- releasing ---------------------------------------------------------------
    def _release(self, now_ms: int) -> Emit:
        """Build the output of the interval, then reset the interval's collectors."""
        new, old = self._output()
        for seq, _, _ in self.buffer:
            self.state.delete(("b", seq))
        for k in self.touched:
            self.state.delete(("g", k))
        for k in self.last_rows:
            self.state.delete(k)
        self.buffer = []
        self.touched = {}
        self.last_rows = {}
        m = self.meta
        m["ci"] = m["cr"] = 0
        m["updates"] = 0
        m["last_out"] = now_ms
        self._save()
        return new, old

    def _output(self) -> Emit:
        """The rows of the interval, per output kind and result-set kind."""
        kind = self.spec.kind
        rk = self.rs_kind
        rs = self.rs
        irstream = self.irstream
        if kind == "snapshot":
            # 'output snapshot' posts no remove stream (notes: Results and output)
            return list(rs.snapshot(self.contents())), []
        empty = self.meta["updates"] == 0
        if rk == AGG_ALL and empty and kind != "first":
            # a fully aggregated statement outputs its row in an interval without changes
            # (Esper RowForAll: the current row as new, and as old with irstream)
            cur = rs.current_rows()
            return list(cur), (list(cur) if irstream else [])
        if kind == "last":
            # groups in the order the interval first touched them (Esper's per-interval
            # group representatives)
            touched = sorted(self.touched, key=lambda k: self.touched[k][0])
            if rk == GROUPED:
                new: Rows = []
                old: Rows = []
                for k in touched:
                    new.extend(rs.group_rows(k))
                    old.extend(self.touched[k][1])
                return new, old
            if rk == GROUPED_ROWS:
                new = []
                old = []
                for k in touched:
                    new.extend(self.touched[k][1])
                    old.extend(self.touched[k][2])
                return new, old
            if rk == AGG_ALL:
                return list(self.last_rows.get("ln", [])), list(self.last_rows.get("fo", []))
            return list(self.last_rows.get("ln", [])), list(self.last_rows.get("lo", []))
        if kind == "all" and rk == GROUPED:
            new = []
            old = []
            for k in rs.group_keys():
                cur = rs.group_rows(k)
                new.extend(cur)
                if irstream:
                    rec = self.touched.get(k)
                    old.extend(rec[1] if rec is not None else cur)
            return new, old
        if kind == "all" and rk == GROUPED_ROWS:
            return self._all_per_group()
        new = []
        old = []
        for _, n, o in self.buffer:
            new.extend(n)
            old.extend(o)
        return new, old

    def _all_per_group(self) -> Emit:
        """Aggregated grouped ``all``: the rows of the interval's events in arrival order,
        then, for every group none of whose events entered, its last event's row with the
        current aggregates (Esper Appendix A: 'all' means each event, plus each group)."""
        entered: set[str] = set()
        new: Rows = []
        old: Rows = []
        for _, n, o in self.buffer:
            for k, rows in n:
                entered.add(k)
                new.extend(rows)
            for _, rows in o:
                old.extend(rows)
        for k in self.rs.group_keys():
            if k not in entered:
                new.extend(self.rs.group_rows(k))
        return new, old

    # -- output first ------------------------------------------------------------
    def _first(self, new: Rows, old: Rows, now_ms: int, after_ok: bool) -> Emit:
        """``output first``: ungrouped, the first update of each interval is posted at once
        and the trigger only ends the interval; grouped, each group decides on its own."""
        rk = self.rs_kind
        if rk in (GROUPED, GROUPED_ROWS):
            return self._first_grouped(new, old, now_ms, after_ok)
        rn, ro = self.rs.process(new, old)
        out: Emit = [], []
        m = self.meta
        if not after_ok:
            self._save()
            return out
        if not m["witnessed"]:
            if not self._relevant(rn, ro):
                # Esper's OutputProcessViewConditionFirst returns before counting such an
                # update toward the condition (nor does it start a timed one)
                self._save()
                return out
            m["witnessed"] = True
            out = (rn, ro)
        if self._trigger(len(new), len(old), now_ms):
            # the trigger only ends the interval: the next update is posted again
            m["witnessed"] = False
            m["ci"] = m["cr"] = 0
            m["last_out"] = now_ms
        self._save()
        return out

    def _relevant(self, new: Rows, old: Rows) -> bool:
        """Esper's 'relevant results' check: rows in a stream the statement posts (an
        rstream statement posts only the remove stream, so only old rows are the first)."""
        if self.stream_kind == "rstream":
            return bool(old)
        if not self.irstream:
            return bool(new)
        return bool(new or old)

    def _first_grouped(self, new: Rows, old: Rows, now_ms: int, after_ok: bool) -> Emit:
        """Per group a polled condition: the group's first row passes, then a row passes
        when N of its events came (counted only while its row passes having), when the
        period since its last output elapsed, or at its next crontab time."""
        g = self.rs.grouped(new, old)
        if not after_ok:
            self._save()
            return [], []
        rk = self.rs_kind
        out_new: Rows = []
        out_old: Rows = []
        passed: set[str] = set()
        m = self.meta
        m["ci"] += len(new)
        m["cr"] += len(old)
        m["cit"] += len(new)
        m["crt"] += len(old)
        events: list[tuple[str, bool, Rows]] = []
        if rk == GROUPED:
            events = [(k, True, g.after.get(k, [])) for k in g.keys_new]
            events += [(k, False, g.after.get(k, [])) for k in g.keys_old]
        else:
            rows_new = g.rows_new or [[] for _ in g.keys_new]
            events = [(k, True, r) for k, r in zip(g.keys_new, rows_new)]
            rows_old = g.rows_old or [[] for _ in g.keys_old]
            events += [(k, False, r) for k, r in zip(g.keys_old, rows_old)]
        for k, is_new, rows in events:
            if not rows:
                continue  # the row fails having: the event does not count (Esper)
            if not self._group_passes(k, is_new, now_ms):
                continue
            if rk == GROUPED:
                if k in passed:
                    continue
                passed.add(k)
                out_new.extend(rows)
                out_old.extend(g.before.get(k, []))
            else:
                # Esper's aggregated-grouped 'first' posts the rows of leaving events on
                # the insert stream too (Appendix A output samples)
                out_new.extend(rows)
        self._save()
        return out_new, out_old

    def _group_passes(self, key: str, is_new: bool, now_ms: int) -> bool:
        """Esper's polled per-group condition of grouped ``output first``."""
        spec = self.spec
        st = self.first_groups.get(key)
        if st is None:
            st = [True, 0, 0, None]  # first, new count, old count, time marker
        passes = False
        rate = self._every_events()
        every = self._every_ms()
        if rate is not None:
            st[1 if is_new else 2] += 1
            if st[0] or st[1] >= rate or st[2] >= rate:
                st[1] = st[2] = 0
                passes = True
        elif every is not None:
            if st[3] is None or now_ms - st[3] >= every:
                st[3] = now_ms
                passes = True
        elif spec.at is not None:
            if st[3] is None or now_ms >= st[3]:
                st[3] = spec.at.next_after(now_ms)
                passes = True
        elif spec.when is not None:
            self._builtins(now_ms)
            if _true(spec.when({}, self.ctx)):
                self._assign(spec.then_set, now_ms)
                passes = True
        st[0] = False if passes else st[0]
        self.first_groups[key] = st
        self.state.put(("f", key), st)
        return passes


def _last_firing_before(cron: Any, first: int, limit: int) -> int:
    """The last crontab instant before ``limit``, ``first`` being one (>= ``first``): look
    back over a doubling window, so the cost does not grow with the jump."""
    w = 1000
    while limit - w > first:
        t = cron.next_after(limit - w - 1)
        if t < limit:
            break
        w *= 2
    else:
        t = first
    while True:
        n = cron.next_after(t)
        if n >= limit:
            return t
        t = n


def _true(v: Any) -> bool:
    """Esper's boolean test: null counts as false."""
    return v is not None and bool(v)


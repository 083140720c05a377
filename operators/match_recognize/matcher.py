"""The running match_recognize of one context partition: partial matches per
``partition by`` key, stepped by each event, ranked and pruned as Esper does.

Esper reference, chapter "EPL Reference: Match Recognize": every event first advances
the partial matches of its partition (in the order they were started) and then may
start a new one at each start state; a partial match whose next state is the end is a
match.  Without ``all matches``, of matches starting at the same row the one preferred by
the greedy/reluctant quantifiers wins and matches overlapping an earlier one are dropped;
``after match skip`` prunes the partial matches the output match covers.  With
``interval`` a match waits until the interval after its first row has passed (or, with
``or terminated``, until the partial match it continues cannot go further) so that a
longer match can replace it.  Output is insert-only, one row per match, in arrival order.

State (all of it plain data in the namespace): ``seq`` numbers events for ranking and
skipping (a replay renumbers them), ``eid`` identifies them (never reused);
``("p", key)`` holds a partition's partial matches and, when ``prev()`` is used, its last
events; ``("w", eid)`` the events of the data window that matched a condition
(``bound``); ``sched`` the matches an interval holds back and when they are due.

A data window that removes a matched event other than the oldest one (``#sort``,
``#unique``, ``#rank``, a named window's ``on delete`` ...) makes the matcher start over
from the window's contents (``_replay``), as Esper 9's match-recognize view does after an
out-of-sequence remove.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from operators.base import PartitionCtx, Row, Rows, StateNamespace
from operators.match_recognize.nfa import END

PAST_LAST_ROW, TO_NEXT_ROW, TO_CURRENT_ROW = "past last row", "to next row", "to current row"
"""The ``after match skip`` choices."""

Entry = dict[str, Any]
"""A partial or complete match: ``b`` first event's seq, ``t`` its time, ``s`` the
state (for a match: the state that matched last), ``ev`` the event (``[seq, row]``) in
each variable's slot, ``m`` each multi-row variable's events (or None), ``g`` greedy
counts per state, ``k`` the partition key, ``e`` the last event's seq (matches)."""


COLLECT_AT = 100
"""Partitions held before idle ones are dropped (Esper's initial collection threshold)."""


class _Prev:
    """What ``prev(expr, n)`` in a condition reads: the partition's n-th event back."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def prev(self, n: Any, event: Any = None) -> Row | None:
        if not isinstance(n, int) or n < 0 or n >= len(self.rows):
            return None
        return self.rows[-1 - n][1]


class MatchRecognizer:
    """Events (insert and remove stream of the window before it) in, match rows out;
    ``spec`` is the statement's MatchRecognizeSpec."""

    def __init__(self, spec: Any, state: StateNamespace,
                 ctx: PartitionCtx) -> None:
        self.spec = spec
        self.ns = state
        self.ctx = ctx
        nfa = spec.nfa
        self.states = nfa.states
        self.starts = [nfa.states[i] for i in nfa.starts]
        self.streams = nfa.streams
        self.n_streams = len(self.streams)
        self.singles = [(v, self.streams[v]) for v in nfa.singles]
        self.multis = [(v, self.streams[v]) for v in nfa.multis]
        self.multi_index = {self.streams[v]: i for i, v in enumerate(nfa.multis)}
        self.var_streams = list(self.streams.items())
        self.seq: int = state.get("seq", 0)
        self.eid: int = state.get("eid", self.seq)
        self.window_rows: Callable[[], Iterable[Row]] | None = None
        """The input window's contents in its iteration order (set by the pipeline)."""
        self.collect_at: int = state.get("collect_at", COLLECT_AT)
        self.parts: dict[str, dict[str, Any]] = {}
        self.matched: dict[int, Row] = {}
        for key, value in state.items():
            if isinstance(key, tuple) and key[0] == "p":
                self.parts[key[1]] = value
            elif isinstance(key, tuple) and key[0] == "w":
                self.matched[key[1]] = value
        # ids grow with arrival and an event joins the set when it arrives: id order is
        # the set's insertion order (Esper keeps it in a linked hash set)
        self.matched = dict(sorted(self.matched.items()))
        self._order: deque[int] = deque(self.matched)
        """Ids of matched events in arrival order, removed ones dropped lazily."""
        sched = state.get("sched")
        self.schedule: list[list[Any]] = sched["s"] if sched else []
        """[[first event time, [matches]], ...] sorted by time."""
        self.due: int | None = sched["d"] if sched else None
        self._by_id: dict[int, list[int]] = self._ids_by_row()
        """Matched events by the identity of their row, oldest first: a window posts a
        leaving event as the object it posted on arrival, and Esper's set of matched
        events tells events apart by identity, so an equal event that never matched is
        not one of them."""
        self._restored: dict[bytes, list[int]] = {}
        """Matched events read back from the state, by value: their rows may be copies of
        the window's, so a leaving event not found by identity is looked up here."""
        for s, row in self.matched.items():
            self._restored.setdefault(_fp(row), []).append(s)
        self._dirty: set[str] = set()
        self.failed = False
        """Whether the last update failed as Esper 9's view does (see ``_hold``): the
        data window before it then does not finish the update either."""
        self._failed_ids: list[int] = []

    def relink(self, posted: Rows) -> None:
        """Give the matched events read back from the state the identity of the window's
        rows, which are other copies of them (a restore): ``posted`` is the data window's
        posted rows, oldest first, of a window that posts every event the matcher numbers
        and takes them back oldest first (length, time, batches, keep-all, first-N).  Its
        rows are then the events numbered up to ``eid``, one each, so a matched event's id
        says which row it is, however many equal rows the window holds.  Where the rows do
        not bear that out (a failed update pending, a value that differs) the matched
        events stay told apart by value (``_find``)."""
        if not self._restored or self.ns.get("resend"):
            return
        last = len(posted) - 1 - self.eid
        linked: dict[int, Row] = {}
        for s, row in self.matched.items():
            i = last + s
            if not 0 <= i < len(posted) or posted[i] != row:
                return
            linked[s] = posted[i]
        self.matched = linked
        self._by_id = self._ids_by_row()
        self._restored = {}

    def _ids_by_row(self) -> dict[int, list[int]]:
        """``_by_id`` of the matched events as they are now."""
        by_id: dict[int, list[int]] = {}
        for s, row in self.matched.items():
            by_id.setdefault(id(row), []).append(s)
        return by_id

    # ------------------------------------------------------------------ events

    def on_events(self, new: Rows, old: Rows, now_ms: int) -> Rows:
        """One update of the stream: remove stream first, then each new event."""
        spec = self.spec
        self.failed = False
        eids = self._ids(new)
        if old and spec.bound:
            self._remove_old(old, new, now_ms, eids)
        if not new:
            self._flush()
            return []
        ends: list[Entry] = []
        terms: list[Entry] | None = None
        for row, eid in zip(new, eids):
            self.seq += 1
            if spec.partition_by and len(self.parts) >= self.collect_at:
                self._collect()
            key, part = self._enter(row, eid)
            self._dirty.add(key)
            t = self._step(part, row, now_ms, ends, key if spec.partition_by else None,
                           eid)
            if t:
                terms = t if terms is None else terms + t
        self.ns.put("seq", self.seq)
        self.ns.put("eid", self.eid)
        if not ends and (not spec.or_terminated or terms is None):
            self._flush()
            return []
        # Esper 9 ranks the matches of one first row into an immutable list when there
        # is no partition by: holding one of them for the interval then fails, and the
        # rest of the update (releases by 'or terminated', output) is lost, and so is the
        # end of the data window's update that called it (``failed``)
        frozen = (not spec.partition_by and not spec.all_matches and len(ends) > 1
                  and len({e["b"] for e in ends}) == 1)
        if not spec.all_matches:
            ends = self._rank_partitions(ends)
        if spec.interval_ms is not None:
            ends = self._hold(ends, terms, now_ms, frozen)
            if self.failed:
                self._failed_ids = eids
        elif spec.skip in (PAST_LAST_ROW, TO_NEXT_ROW):
            past = spec.skip == PAST_LAST_ROW
            for end in ends:
                part = self.parts.get(_pkey(end))
                if part is None:
                    continue
                limit = end["e"] if past else end["b"]
                part["cur"] = [c for c in part["cur"] if c["b"] > limit]
                self._dirty.add(_pkey(end))
        out: Rows = []
        for end in ends:
            out.append(self._measure(end))
            if end["k"] is None:
                continue
            key = end["k"]
            part = self.parts.get(key)
            if part is None:
                # Esper 9 drops the whole update's output when a partition that an earlier
                # match of the same update emptied (and released) has another match: its
                # runtime fails reading the released partition state
                out = []
                break
            if not part["cur"] and not spec.prev_depth and key != self._null_key:
                # Esper 9 keeps the partition of null keys apart and never releases it
                del self.parts[key]
                self._dirty.add(key)
        self._flush()
        return out

    def _enter(self, row: Row, eid: int) -> tuple[str, dict[str, Any]]:
        """The key and partition of a new event (made if new), the event joined to its
        ``prev()`` history."""
        key = self._key(row)
        part = self.parts.get(key)
        if part is None:
            part = self.parts[key] = {"cur": [], "prev": []}
        depth = self.spec.prev_depth
        if depth:
            buf = part["prev"]
            buf.append([eid, row])
            if len(buf) > depth:
                del buf[0]
        return key, part

    def kept(self) -> None:
        """The window kept the rows of the update that failed: they come again first in
        its next update, as the same events."""
        self.ns.put("resend", self._failed_ids)

    def _ids(self, new: Rows) -> list[int]:
        """The ids of an update's new events (see ``kept``)."""
        if not new:
            return []
        resend: list[int] = self.ns.get("resend") or []
        if resend:
            self.ns.delete("resend")
        eids = resend[:len(new)]
        for _ in range(len(new) - len(eids)):
            self.eid += 1
            eids.append(self.eid)
        return eids

    def _collect(self) -> None:
        """Drop the partitions without partial matches once there are many (Esper's
        partitioned state does so before an event when it holds ``collect_at`` of them,
        doubling the threshold when few go; their ``prev()`` history goes with them)."""
        idle = [k for k, p in self.parts.items() if not p["cur"]]
        for k in idle:
            del self.parts[k]
            self._dirty.add(k)
        if len(idle) < self.collect_at // 5:
            self.collect_at *= 2
            self.ns.put("collect_at", self.collect_at)

    @property
    def _null_key(self) -> str:
        """The partition key of rows whose partition by values are all null."""
        return orjson.dumps([None] * len(self.spec.partition_by)).decode()

    def _key(self, row: Row) -> str:
        pb = self.spec.partition_by
        if not pb:
            return ""
        return orjson.dumps([f(row, self.ctx) for f in pb], default=str).decode()

    def _step(self, part: dict[str, Any], row: Row, now_ms: int, ends: list[Entry],
              key: Any, eid: int, retain: bool = True) -> list[Entry] | None:
        """Advance the partition's partial matches by one event (``eid``), then try the
        start states; matches go to ``ends``; returns the partial matches the event ended
        (for ``or terminated``).  ``retain``: a matching event joins the window's set of
        matched events (not while replaying)."""
        spec = self.spec
        seq = self.seq
        event = [eid, row]
        collect = spec.collect
        nxt: list[Entry] = []
        terms: list[Entry] | None = None
        matched = False
        prev = _Prev(part["prev"]) if spec.prev_depth else None
        for cur in part["cur"]:
            st = self.states[cur["s"]]
            slots = cur["ev"]
            slots[st.stream] = event
            if self._matches(st, slots, prev, cur["m"]):
                matched = True
                nexts = st.next
                copy = len(nexts) > 1
                for nx in nexts:
                    ev, mm, g = slots, cur["m"], cur["g"]
                    if copy:
                        ev = list(slots)
                        g = list(g)
                        if collect and mm is not None:
                            mm = [None if x is None else list(x) for x in mm]
                    if collect and st.multi:
                        mm = self._add(st.stream, event, mm)
                        ev[st.stream] = None
                    if st.greedy:
                        g[st.num] += 1
                    entry = {"b": cur["b"], "t": cur["t"], "s": st.num, "ev": ev, "m": mm,
                             "g": g, "k": key}
                    if nx == END:
                        entry["e"] = seq
                        ends.append(entry)
                    else:
                        entry["s"] = nx
                        nxt.append(entry)
            elif spec.or_terminated:
                slots[st.stream] = None
                if END in st.next:
                    if terms is None:
                        terms = []
                    terms.append({"b": cur["b"], "t": cur["t"], "s": END, "ev": slots,
                                  "m": cur["m"], "g": cur["g"], "k": key})
        for st in self.starts:
            slots = [None] * self.n_streams
            slots[st.stream] = event
            if not self._matches(st, slots, prev, None):
                continue
            matched = True
            nexts = st.next
            copy = len(nexts) > 1
            for nx in nexts:
                ev = list(slots) if copy else slots
                mm = [None] * len(self.multis) if collect else None
                g = [0] * len(self.states)
                if collect and st.multi:
                    mm = self._add(st.stream, event, mm)
                    ev[st.stream] = None
                if st.greedy:
                    g[st.num] += 1
                entry = {"b": seq, "t": now_ms if spec.interval_ms is not None else 0,
                         "s": st.num, "ev": ev, "m": mm, "g": g, "k": key}
                if nx == END:
                    entry["e"] = seq
                    ends.append(entry)
                else:
                    entry["s"] = nx
                    nxt.append(entry)
        part["cur"] = nxt
        if matched and spec.bound and retain:
            # a set of events (Esper: a linked hash set): an event seen again keeps its place
            known = self.matched.get(eid)
            if known is None:
                self._order.append(eid)
            if known is not row:
                if known is not None:
                    self._unmap(known, eid)
                self._by_id.setdefault(id(row), []).append(eid)
            self.matched[eid] = row
            self.ns.put(("w", eid), row)
        return terms

    def _add(self, stream: int, event: list[Any], mm: list[Any] | None) -> list[Any]:
        if mm is None:
            mm = [None] * len(self.multis)
        i = self.multi_index[stream]
        if mm[i] is None:
            mm[i] = [event]
        else:
            mm[i].append(event)
        return mm

    def _row(self, slots: list[Any]) -> Row:
        """The row a condition sees: each variable's event in its slot."""
        return {v: slots[i][1] for v, i in self.var_streams if slots[i] is not None}

    def _matches(self, st: Any, slots: list[Any], prev: _Prev | None,
                 groups: list[Any] | None) -> bool:
        cond = self.spec.defines.get(st.var)
        if cond is None:
            return True
        ctx = self.ctx
        row = self._row(slots)
        if st.reads_groups and groups is not None:
            for j, (v, _) in enumerate(self.multis):
                if v != st.var and groups[j] is not None:
                    row[v] = [e[1] for e in groups[j]]
        if prev is None:
            return cond(row, ctx) is True
        # prev(n, B.v) in a condition reads the partition's events through the window
        # of the variable it names (a condition's row holds one event per variable)
        saved, saved_windows = ctx.window, ctx.windows
        ctx.window = prev
        ctx.windows = self._prev_windows(prev)
        try:
            return cond(row, ctx) is True
        finally:
            ctx.window, ctx.windows = saved, saved_windows

    def _prev_windows(self, prev: _Prev) -> dict[str, Any]:
        return {v: prev for v, _ in self.var_streams}

    # ----------------------------------------------------------------- ranking

    def _rank_partitions(self, ends: list[Entry]) -> list[Entry]:
        """One match per first row, none overlapping an earlier one, per partition."""
        if len(ends) <= 1:
            return ends
        if not self.spec.partition_by:
            return self._rank_by_start(ends)
        per: dict[str, list[Entry]] = {}
        for e in ends:
            per.setdefault(_pkey(e), []).append(e)
        out: list[Entry] = []
        for group in per.values():
            out += group if len(group) == 1 else self._rank_by_start(group)
        return out

    def _rank_by_start(self, ends: list[Entry]) -> list[Entry]:
        if len(ends) <= 1:
            return ends
        by_begin: dict[int, list[Entry] | None] = {}
        for e in ends:
            by_begin.setdefault(e["b"], []).append(e)  # type: ignore[union-attr]
        all_matches = self.spec.all_matches
        if len(by_begin) == 1:
            only = next(iter(by_begin.values()))
            assert only is not None
            return only if all_matches else [self._best(only)]
        ranked: list[Entry] = []
        skip = self.spec.skip
        for begin in sorted(by_begin):
            group = by_begin.pop(begin)
            if not group:
                continue
            taken = self._best(group) if len(group) > 1 else group[0]
            if all_matches and len(group) > 1:
                ranked += group
            else:
                ranked.append(taken)
            if skip in (PAST_LAST_ROW, TO_NEXT_ROW):
                limit = taken["e"] if skip == PAST_LAST_ROW else taken["b"]
                for k, rest in by_begin.items():
                    if rest:
                        by_begin[k] = [x for x in rest if x["b"] > limit]
        return ranked

    def _best(self, group: list[Entry]) -> Entry:
        """Of matches with the same first row: newest last row first, then the greedy
        counts decide (Esper's end-state ranking)."""
        group = sorted(group, key=lambda e: -e["e"])
        low = min(e["b"] for e in group)
        best: Entry | None = None
        for e in group:
            if e["b"] != low:
                continue
            if best is None or self._better(e["g"], best["g"]):
                best = e
        assert best is not None
        return best

    def _better(self, cur: list[int], best: list[int]) -> bool:
        for st in self.states:
            if st.greedy is None:
                continue
            if st.greedy:
                if cur[st.num] > best[st.num]:
                    return True
            elif cur[st.num] < best[st.num]:
                return True
        return False

    # ---------------------------------------------------------------- interval

    def _hold(self, ends: list[Entry], terms: list[Entry] | None, now_ms: int,
              frozen: bool = False) -> list[Entry]:
        """``interval``: hold matches until the interval after their first row (Esper
        schedules a match whose first row is recent enough); ``or terminated`` releases
        the held matches a partial match that cannot continue ends."""
        spec = self.spec
        interval = spec.interval_ms or 0
        keep: list[Entry] = []
        for end in ends:
            if spec.or_terminated:
                nexts = self.states[end["s"]].next
                hold = not (len(nexts) == 1 and nexts[0] == END)
            else:
                hold = True
            if hold:
                since = now_ms - end["t"]
                until = interval - since
                if self._sched_has(end["t"]) or since < until:
                    self._sched_add(until, end, now_ms)
                    if frozen:
                        self._save_sched()
                        self.failed = True
                        return []
                    continue
            keep.append(end)
        ends = keep
        if spec.or_terminated and terms:
            for term in terms:
                if _pkey(term) in self.parts or not spec.partition_by:
                    if frozen and self._release_first(term):
                        # adding the released match to the immutable list fails
                        self._save_sched()
                        self.failed = True
                        return []
                    self._release(term, ends)
            if not spec.all_matches:
                ends = self._rank_partitions(ends)
        self._save_sched()
        return ends

    def _sched_has(self, t: int) -> bool:
        return any(s[0] == t for s in self.schedule)

    def _sched_add(self, delta: int, end: Entry, now_ms: int) -> None:
        if not self.schedule:
            self.schedule.append([end["t"], [end]])
            self.due = now_ms + delta
            return
        for s in self.schedule:
            if s[0] == end["t"]:
                s[1].append(end)
                return
        self.schedule.append([end["t"], [end]])
        self.schedule.sort(key=lambda s: s[0])

    def _release_first(self, term: Entry) -> bool:
        """Take the first held match ``term`` releases out of the schedule (Esper drops
        a lone one's entry, leaves a list's, even empty); whether there was one."""
        for i, s in enumerate(self.schedule):
            if s[0] != term["t"]:
                continue
            for j, e in enumerate(s[1]):
                if self._same_events(term, e):
                    if len(s[1]) == 1:
                        del self.schedule[i]
                    else:
                        del s[1][j]
                    return True
            return False
        return False

    def _release(self, term: Entry, found: list[Entry]) -> None:
        for i, s in enumerate(self.schedule):
            if s[0] != term["t"]:
                continue
            hit = [e for e in s[1] if self._same_events(term, e)]
            if not hit:
                if not s[1]:
                    del self.schedule[i]  # the timer stays (Esper: nothing was released)
                return
            s[1] = [e for e in s[1] if not self._same_events(term, e)]
            found += hit
            if not s[1]:
                del self.schedule[i]
            if not self.schedule:
                self.due = None
            return

    def _same_events(self, term: Entry, end: Entry) -> bool:
        """Whether a held match is a prefix of the ended partial match."""
        if term["b"] != end["b"]:
            return False
        for _, stream in self.var_streams:
            if stream in self.multi_index:
                i = self.multi_index[stream]
                te = term["m"][i] if term["m"] is not None else None
                ee = end["m"][i] if end["m"] is not None else None
                if ee is not None:
                    if te is None:
                        return False
                    if any(not _same(ev, te[j]) for j, ev in enumerate(ee) if j < len(te)):
                        return False
            elif not _same(term["ev"][stream], end["ev"][stream]):
                return False
        return True

    def _save_sched(self) -> None:
        if self.schedule or self.due is not None:
            self.ns.put("sched", {"s": self.schedule, "d": self.due})
        else:
            self.ns.delete("sched")

    def next_timer(self) -> int | None:
        return self.due

    def lose_timer(self, now_ms: int) -> None:
        """The data window's timer update failed here (``failed``): Esper 9 runs the timer
        callbacks a statement has due at one time in one go, the window's first, so the
        interval's callback due now is taken off the schedule and never runs.  The held
        matches stay, and only a match held while none is re-arms it (``_sched_add``)."""
        if self.due == now_ms:
            self.due = None
            self._save_sched()

    def on_time(self, now_ms: int) -> Rows:
        """The interval of held matches passed: output the best of each first row."""
        if self.due is None or now_ms < self.due:
            return []
        self.due = None
        interval = self.spec.interval_ms or 0
        if not self.schedule:
            self._save_sched()
            return []
        due: list[Entry] = []
        while self.schedule and self.schedule[0][0] <= now_ms - interval:
            due += self.schedule.pop(0)[1]
        if self.schedule:
            self.due = self.schedule[0][0] + interval
        if not self.spec.all_matches:
            due = self._rank_partitions(due)
        self._save_sched()
        self.ctx.now_ms = now_ms
        return [self._measure(e) for e in due]

    # ---------------------------------------------------------- window removes

    def _remove_old(self, old: Rows, new: Rows, now_ms: int, eids: list[int]) -> None:
        """Events leaving the data window leave every partial match holding them; when
        no matched event is left in the window all partial matches are dropped.  What
        ``prev()`` reads is not changed: it is the partition's last events, in the window
        or not (as in Esper).  A matched event leaving before an older matched one is an
        out-of-sequence remove: the partial matches are rebuilt from the window
        (``_replay``)."""
        removed: list[tuple[int | None, Row]] = []
        first = self._first()
        out_of_sequence = False
        for row in old:
            s = self._find(row, self._restored)
            if s is not None:
                if first is not None and s != first:
                    out_of_sequence = True
                self._unmap(self.matched.pop(s), s)
                self.ns.delete(("w", s))
                first = self._first()
            removed.append((s, row))
        if len(self._order) > 2 * len(self.matched) + 64:
            live = self.matched
            self._order = deque(k for k in self._order if k in live)
        if out_of_sequence:
            self._replay(new, now_ms, eids)
            return
        spec = self.spec
        if not self.matched:
            for key, part in list(self.parts.items()):
                part["cur"] = []
                if not spec.prev_depth:
                    del self.parts[key]
                self._dirty.add(key)
        else:
            if spec.partition_by:
                # Esper 9's view marks the first n rows of the remove stream as found, n
                # being how many of them it took out of its matched-event set, and its
                # partitioned state drops the partial matches of those rows only
                found = sum(1 for s, _ in removed if s is not None)
                removed = removed[:found]
            for s, row in removed:
                if s is None:
                    continue
                key = self._key(row)
                part = self.parts.get(key)
                if part is None:
                    continue
                part["cur"] = [c for c in part["cur"] if not self._holds(c, s)]
                self._dirty.add(key)
                if not part["cur"] and not spec.prev_depth:
                    del self.parts[key]

    def _unmap(self, row: Row, s: int) -> None:
        ids = self._by_id.get(id(row))
        if ids and s in ids:
            ids.remove(s)
            if not ids:
                del self._by_id[id(row)]

    def _find(self, row: Row, restored: dict[bytes, list[int]],
              taken: set[int] | None = None) -> int | None:
        """The id of the matched event ``row`` is, if any (the oldest one not ``taken``):
        by identity, else by value among those read back from the state, taking it out
        of ``restored``."""
        matched = self.matched
        s = next((i for i in self._by_id.get(id(row), ())
                  if matched.get(i) is row and (taken is None or i not in taken)), None)
        if s is not None:
            if restored:
                fp = _fp(row)
                seqs = restored.get(fp)
                if seqs and s in seqs:
                    seqs.remove(s)
            return s
        if not restored:
            return None
        fp = _fp(row)
        seqs = restored.get(fp)
        s = None
        while seqs:
            first = seqs.pop(0)
            if first in matched:
                s = first
                break
        if seqs is not None and not seqs:
            del restored[fp]
        return s

    def _first(self) -> int | None:
        """The oldest matched event still in the window (amortised O(1))."""
        order, live = self._order, self.matched
        while order and order[0] not in live:
            order.popleft()
        return order[0] if order else None

    def _replay(self, new: Rows, now_ms: int, eids: list[int]) -> None:
        """Esper 9's match-recognize view after an out-of-sequence remove: every
        partition starts with no partial match, the window's events (the update's new
        ones included) are stepped again in the window's order, numbered from 1, and the
        matches they complete are dropped; the set of matched events stays as it was.
        An event keeps its id (so a later remove finds the partial matches holding it);
        one that never matched gets a negative one, as no remove looks for it."""
        for key, part in self.parts.items():
            part["cur"] = []
            self._dirty.add(key)
        rows = list(self.window_rows()) if self.window_rows is not None else []
        restored = {k: list(v) for k, v in self._restored.items()}
        taken: set[int] = set()
        coming = {id(r): eid for r, eid in zip(new, eids)}
        sink: list[Entry] = []
        self.seq = 0
        by_key = bool(self.spec.partition_by)
        for row in rows:
            self.seq += 1
            eid = coming.get(id(row))
            if eid is None:
                eid = self._find(row, restored, taken)
                if eid is None:
                    eid = -self.seq
                else:
                    taken.add(eid)
            key = self._key(row)
            part = self.parts.get(key)
            if part is None:
                part = self.parts[key] = {"cur": [], "prev": []}
            self._dirty.add(key)
            self._step(part, row, now_ms, sink, key if by_key else None, eid, retain=False)
        self.ns.put("seq", self.seq)
        self._flush()

    @staticmethod
    def _holds(entry: Entry, seq: int) -> bool:
        if any(ev is not None and ev[0] == seq for ev in entry["ev"]):
            return True
        mm = entry["m"]
        return bool(mm) and any(
            evs is not None and any(ev[0] == seq for ev in evs) for evs in mm)

    # ---------------------------------------------------------------- output

    def _measure(self, end: Entry) -> Row:
        """The output row of one match: each measure over the match's events."""
        comp: Row = {}
        for v, i in self.singles:
            ev = end["ev"][i]
            comp[v] = ev[1] if ev is not None else None
        mm = end["m"]
        for j, (v, _) in enumerate(self.multis):
            evs = mm[j] if mm is not None else None
            comp[v] = [e[1] for e in evs] if evs is not None else None
        ctx = self.ctx
        for n, agg in enumerate(self.spec.aggregates):
            a = agg.aggregator
            state = a.initial()
            events = comp.get(agg.var)
            if events:
                base = {v: comp[v] for v, _ in self.singles}
                fn = agg.value
                # first() and last() in measures read the first / last non-null value of
                # the variable's events, as Esper 9 runs them
                skip_nulls = a.name in ("first", "last")
                for ev in events:
                    x = fn({**base, agg.var: ev}, ctx) if fn is not None else ev
                    if x is None and skip_nulls:
                        continue
                    state = a.enter(state, x)
            comp[f"$agg{n}"] = a.result(state)
        return {name: fn(comp, ctx) for name, fn in self.spec.measures}

    def _flush(self) -> None:
        """Write back the partitions this update changed."""
        for key in self._dirty:
            part = self.parts.get(key)
            if part is None:
                self.ns.delete(("p", key))
            else:
                self.ns.put(("p", key), part)
        self._dirty.clear()

    def contents(self) -> Rows:
        return []

    def snapshot(self, now_ms: int) -> Rows | None:
        """What an output snapshot of the statement posts: the pattern run afresh over the
        events the data window holds, every match it reaches, ranked as a match of an
        update is (None without a data window).  Esper 9's match-recognize view iterates
        so: its steps skip no event that a match used, so a match posted, and its
        partial state dropped, on arrival can come back longer."""
        if self.window_rows is None:
            return None
        from operators.state import MemoryStore

        fresh = MatchRecognizer(self.spec, MemoryStore().namespace("mr"), self.ctx)
        spec = self.spec
        ends: list[Entry] = []
        for eid, row in enumerate(list(self.window_rows()), 1):
            fresh.seq += 1
            key, part = fresh._enter(row, eid)
            fresh._step(part, row, now_ms, ends, key if spec.partition_by else None, eid)
        if not spec.all_matches:
            ends = fresh._rank_partitions(ends)
        return [fresh._measure(end) for end in ends]


def _same(a: list[Any] | None, b: list[Any] | None) -> bool:
    """Whether two event references are the same event (or both absent)."""
    if a is None or b is None:
        return a is b
    return bool(a[0] == b[0])


def _pkey(entry: Entry) -> str:
    k = entry["k"]
    return "" if k is None else k


def _fp(row: Row) -> bytes:
    return orjson.dumps(row, option=orjson.OPT_SORT_KEYS, default=str)

"""The pattern state machine: a tree of live sub-expression instances per partition.

Each instance ("node") is started with the tags matched so far and reports to its parent
that it turned true (with the tags of the match, and whether it has quit) or false
(permanently).  The operators follow the reference product's pattern evaluation
(Esper ref. 2, "patterns in brief"; 4.2.7.2 for patterns as context conditions):

* ``every`` restarts its sub-expression each time it turns true or false; a restarted
  sub-expression that turns true while starting (``every (not A)``) is dropped instead of
  looping;
* ``->`` starts the next stage for every match of the previous one and quits when no
  stage instance is left;
* ``and`` combines one result of each child (all combinations when a child keeps
  reporting); ``not`` children count as true until they turn false;
* ``or`` turns true with the first child that does and then quits the others;
* ``not`` reports true as soon as it starts and turns permanently false when its
  sub-expression turns true;
* ``timer:interval`` and ``timer:within`` count from the instant their sub-expression
  starts; ``timer:at`` fires at the next crontab instant strictly after it starts;
* ``every-distinct`` drops matches whose key values were already seen (within the
  period, when one is given);
* a repeat (``[n] p``, ``[low:high] p until q``) restarts ``p`` after each result and
  collects the events of ``p``'s tags into lists; ``until`` ends it (true when the lower
  bound was reached, else false), and so does the n-th result of an exact repeat;
* ``while (cond)`` passes results while ``cond`` holds and turns false on the first
  result for which it is false.

An event reaches only the filters that were listening when it arrived, oldest first (a
filter started while the event is processed does not see it); timers due at the same
instant fire in the order they were started.  Timers are driven by ``next_timer`` /
``on_time``; a firing uses its own due time as "now", so a restarted ``every
timer:interval`` reschedules from its due time (FORMAT.md clock rule).

State: every live node is one key ``("n", id)`` holding JSON-shaped data (spec index,
parent, begin tags, and its own fields), a repeat's collected events one key each
(``("r", id, i)``); ``"meta"`` holds the id counter and status.  Only
nodes created, changed or removed by a call are written, so a matcher built over the same
namespace continues exactly where the previous one stopped.
"""

from __future__ import annotations

import heapq
import json
from typing import Any

from operators.base import PartitionCtx, Row, Rows, StateNamespace
from operators.patterns.spec import (
    And,
    Every,
    EveryDistinct,
    Filter,
    FollowedBy,
    Not,
    Or,
    PatternPlan,
    Repeat,
    TimerAt,
    TimerInterval,
    WhileGuard,
    Within,
)

Tags = dict[str, Row]


class _Node:
    """A live instance of one pattern sub-expression."""

    __slots__ = ("m", "id", "sidx", "parent", "idx", "tags", "alive")
    is_not = False

    def __init__(self, m: PatternMatcher, nid: int, sidx: int, parent: Any, idx: int,
                 tags: Tags) -> None:
        self.m = m
        self.id = nid
        self.sidx = sidx
        self.parent = parent  # a _Node, or the matcher for the root
        self.idx = idx  # position under the parent (stage of '->', operand of and/or)
        self.tags = tags
        self.alive = True

    @property
    def spec(self) -> Any:
        """The spec node this instance evaluates."""
        return self.m.plan.nodes[self.sidx]

    def child_sidx(self, i: int = 0) -> int:
        """Spec index of the i-th sub-expression."""
        return self.m.plan.children[self.sidx][i]

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Begin evaluating (register filters/timers, start children)."""
        raise NotImplementedError

    def quit(self) -> None:
        """Stop this instance and everything below it, without reporting."""
        self.drop()

    def drop(self) -> None:
        """Forget this node (its filter/timer registrations and stored record)."""
        if self.alive:
            self.alive = False
            self.m.forget(self)

    def up_true(self, tags: Tags, quitted: bool) -> None:
        """Report a result to the parent (``quitted``: this instance is finished)."""
        self.parent.child_true(self, tags, quitted)

    def up_false(self) -> None:
        """Report that this instance can never turn true again."""
        self.parent.child_false(self)

    # -- callbacks from children / clock ---------------------------------------------
    def child_true(self, child: _Node, tags: Tags, quitted: bool) -> None:
        """A child turned true with ``tags``."""
        raise NotImplementedError

    def child_false(self, child: _Node) -> None:
        """A child turned permanently false."""
        raise NotImplementedError

    def on_timer(self) -> None:
        """This node's due time was reached."""
        raise NotImplementedError

    # -- persistence -----------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        """The JSON-shaped stored form of this node."""
        parent = None if self.parent is self.m else self.parent.id
        rec = {"s": self.sidx, "p": parent, "i": self.idx, "t": self.tags}
        rec.update(self.extra())
        return rec

    def extra(self) -> dict[str, Any]:
        """Node-specific fields of the stored record."""
        return {}

    def restore(self, rec: dict[str, Any]) -> None:
        """Read node-specific fields back from a stored record."""

    def attach(self, child: _Node) -> None:
        """Re-link a restored child under this node."""
        raise NotImplementedError


class _FilterNode(_Node):
    """A filter waiting for one event; quits after matching."""

    __slots__ = ("order", "placed")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.order = self.id
        self.placed = False  # the order was handed over (a restarted filter's place)

    def start(self) -> None:
        # Dispatch follows registration: a filter started after nodes created later
        # than it (an 'or' operand after the filters its first operand started, a
        # repeat's sub-expression after its until) comes after their filters.
        if not self.placed and self.m.next_id != self.id + 1:
            self.order = self.m.next_id
            self.m.next_id += 1
        self.m.watch(self)

    def test(self, event: Row) -> bool:
        """Whether ``event`` passes the filter, given the tags matched so far."""
        pred = self.spec.predicate
        if pred is None:
            return True
        return bool(pred((event, self.m.visible(self.tags)), self.m.ctx))

    def fire(self, event: Row) -> None:
        """The filter matched: quit and report the tags plus this event."""
        tag = self.spec.tag
        tags = {**self.tags, tag: event} if tag else self.tags
        self.drop()
        self.up_true(tags, True)

    def extra(self) -> dict[str, Any]:
        return {"o": self.order} if self.order != self.id else {}

    def restore(self, rec: dict[str, Any]) -> None:
        self.order = rec.get("o", self.id)


class _OneChildNode(_Node):
    """A node over one sub-expression (``not``, ``timer:within``, ``while``): it starts,
    quits and re-links that one child; subclasses hold it in a ``kid`` slot."""

    __slots__ = ()
    kid: _Node | None

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.kid = None

    def start_child(self) -> None:
        """Spawn and start the sub-expression."""
        kid = self.kid = self.m.spawn(self.child_sidx(), self, 0, self.tags)
        kid.start()

    def quit(self) -> None:
        if self.kid is not None:
            self.kid.quit()
            self.kid = None
        self.drop()

    def attach(self, child: _Node) -> None:
        self.kid = child


class _TimedNode(_Node):
    """A node with a due time in the matcher's timer queue."""

    __slots__ = ("due",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.due: int | None = None

    def schedule(self, due: int) -> None:
        """Set and queue this node's due time."""
        self.due = due
        self.m.schedule(self)

    def extra(self) -> dict[str, Any]:
        return {"d": self.due}

    def restore(self, rec: dict[str, Any]) -> None:
        self.due = rec.get("d")


class _IntervalNode(_TimedNode):
    """``timer:interval``: true once, ``ms`` after starting (at once when ms <= 0)."""

    __slots__ = ()

    def start(self) -> None:
        ms = self.spec.ms
        if ms <= 0:  # the reference's interval observer fires synchronously for <= 0
            self.drop()
            self.up_true(self.tags, True)
            return
        self.schedule(self.m.now + ms)

    def on_timer(self) -> None:
        self.drop()
        self.up_true(self.tags, True)


class _AtNode(_TimedNode):
    """``timer:at``: true once, at the next crontab instant strictly after starting."""

    __slots__ = ()

    def start(self) -> None:
        self.schedule(self.spec.cron.next_from(self.m.now, self.m.tz))

    def on_timer(self) -> None:
        self.drop()
        self.up_true(self.tags, True)


class _WithinNode(_TimedNode, _OneChildNode):
    """``child where timer:within(ms)``: passes the child's results until the deadline;
    ``timer:withinmax(ms, n)`` also counts them and turns false at the (n+1)-th."""

    __slots__ = ("kid", "count")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.count = 0

    def start(self) -> None:
        self.start_child()
        # The deadline counts from the start; a child that already finished needs none.
        if self.alive and self.kid is not None:
            self.count = 0  # Esper starts the guard (and its count) after the child
            self.schedule(self.m.now + self.spec.ms)

    def child_true(self, child: _Node, tags: Tags, quitted: bool) -> None:
        if self.kid is not child:
            return  # already quit (the reference ignores late results too)
        if quitted:
            self.kid = None
        limit = self.spec.max_count
        if limit is not None:
            # Esper ref. "timer:withinmax": a result beyond the count ends the guard
            self.count += 1
            if self.count > limit:
                self.quit()
                self.up_false()
                return
            self.m.touch(self)
        if quitted:
            self.drop()
        self.up_true(tags, quitted)

    def child_false(self, child: _Node) -> None:
        if self.kid is not child:
            return
        self.kid = None
        if self.due is None:  # false while starting: no deadline was set
            self.drop()
        else:
            # Esper ref. "timer:within": the guard of a sub-expression that turned false
            # keeps its timer, and at the deadline reports false once more (an every
            # above it then starts one more instance)
            self.m.touch(self)
        self.up_false()

    def on_timer(self) -> None:
        self.quit()
        self.up_false()

    def extra(self) -> dict[str, Any]:
        out = super().extra()
        if self.count:
            out["n"] = self.count
        return out

    def restore(self, rec: dict[str, Any]) -> None:
        super().restore(rec)
        self.count = rec.get("n", 0)


class _NotNode(_OneChildNode):
    """``not child``: true from the start; permanently false once the child turns true."""

    __slots__ = ("kid",)
    is_not = True

    def start(self) -> None:
        self.start_child()
        if self.alive:
            self.up_true(self.tags, False)

    def child_true(self, child: _Node, tags: Tags, quitted: bool) -> None:
        # Only a sub-expression that stopped listening makes 'not' permanently false.
        if quitted and self.alive:
            self.kid = None
            self.drop()
            self.up_false()

    def child_false(self, child: _Node) -> None:
        # The negated sub-expression can no longer happen: 'not' stays true.
        if self.kid is child:
            self.kid = None


class _EveryNode(_Node):
    """``every child``: restarts the child on each result; never quits by itself."""

    __slots__ = ("kids", "probe", "probe_hit", "first", "shared")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.kids: list[_Node] = []
        self.probe: _Node | None = None
        self.probe_hit = False
        self.first: int | None = None  # id of the first child instance
        self.shared: Tags | None = None  # begin tags of later children, when they differ

    def start(self) -> None:
        self.respawn()

    def respawn(self, order: int | None = None) -> _Node | None:
        """Start a fresh child; drop it if it turns true/false while starting."""
        tags = self.tags if self.first is None or self.shared is None else self.shared
        kid = self.m.spawn(self.child_sidx(), self, 0, tags, order)
        if self.first is None:
            self.first = kid.id
            self.m.touch(self)
        self.kids.append(kid)
        saved = self.probe, self.probe_hit
        self.probe, self.probe_hit = kid, False
        kid.start()
        hit = self.probe_hit
        self.probe, self.probe_hit = saved
        if hit:
            kid.quit()
            self.kids.remove(kid)
            return None
        return kid

    def quit(self) -> None:
        for kid in self.kids:
            kid.quit()
        self.kids = []
        self.drop()

    def _remove(self, child: _Node) -> None:
        """Forget a finished child instance."""
        if child in self.kids:
            self.kids.remove(child)

    def child_true(self, child: _Node, tags: Tags, quitted: bool) -> None:
        if child is self.probe:
            self.probe_hit = True
            return
        if quitted:
            self._remove(child)
        if self.alive:
            self.restart_after(child, quitted)
        self.up_true(tags, False)

    def restart_after(self, child: _Node, quitted: bool) -> _Node | None:
        """Restart for a child's result; a filter's replacement keeps its dispatch place."""
        order = child.order if isinstance(child, _FilterNode) else None
        return self.respawn(order)

    def child_false(self, child: _Node) -> None:
        if child is self.probe:
            self.probe_hit = True
            return
        self._remove(child)
        if self.alive:
            self.respawn()

    def attach(self, child: _Node) -> None:
        self.kids.append(child)

    def add_shared(self, tags: Tags) -> None:
        """Esper's every starts its first child with the tags it began with and every
        later one with one shared copy of them; a repeat-until ended by a timer or a
        'not' writes its lists into the copy it began with (see _RepeatNode)."""
        self.shared = {**(self.shared if self.shared is not None else self.tags), **tags}
        self.m.touch(self)

    def extra(self) -> dict[str, Any]:
        out: dict[str, Any] = {"f": self.first}
        if self.shared is not None:
            out["sh"] = self.shared
        return out

    def restore(self, rec: dict[str, Any]) -> None:
        self.first = rec.get("f")
        self.shared = rec.get("sh")


class _EveryDistinctNode(_EveryNode):
    """``every-distinct(keys[, period]) child``: every, minus repeated key values.

    Like the reference, seen keys are kept per child instance and handed on to the
    child's replacement; keys expire ``period`` after they were first seen.
    """

    __slots__ = ("keys",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.keys: dict[int, dict[str, int | None]] = {}

    def start(self) -> None:
        kid = self.respawn()
        if kid is not None:
            self.keys[kid.id] = {}
            self.m.touch(self)

    def quit(self) -> None:
        self.keys = {}
        super().quit()

    def _key(self, tags: Tags) -> str:
        """The distinct-value key of a result, as canonical JSON text."""
        values = [k((None, self.m.visible(tags)), self.m.ctx) for k in self.spec.keys]
        return json.dumps(values, sort_keys=True, separators=(",", ":"), default=repr)

    def child_true(self, child: _Node, tags: Tags, quitted: bool) -> None:
        if child is self.probe:
            self.probe_hit = True
            return
        key = self._key(tags)
        seen = False
        known = self.keys.get(child.id)
        if known is not None:
            now = self.m.now
            for k, expiry in list(known.items()):  # oldest first; stop at a live one
                if expiry is None or now < expiry:
                    break
                del known[k]
            if key in known:
                seen = True
            else:
                period = self.spec.period_ms
                known[key] = None if period is None else now + period
            self.m.touch(self)
        if quitted:
            self._remove(child)
            self.keys.pop(child.id, None)
            self.m.touch(self)
        if self.alive:
            kid = self.restart_after(child, quitted)
            if kid is not None:
                self.keys[kid.id] = dict(known or {})
                self.m.touch(self)
        if not seen:
            self.up_true(tags, False)

    def child_false(self, child: _Node) -> None:
        if child is self.probe:
            self.probe_hit = True
            return
        self._remove(child)
        self.keys.pop(child.id, None)
        self.m.touch(self)
        if self.alive:
            kid = self.respawn()
            if kid is not None:
                self.keys[kid.id] = {}  # the reference starts a fresh key set here

    def extra(self) -> dict[str, Any]:
        return {**super().extra(),
                "k": [[cid, list(ks.items())] for cid, ks in self.keys.items()]}

    def restore(self, rec: dict[str, Any]) -> None:
        super().restore(rec)
        self.keys = {int(cid): {k: e for k, e in ks} for cid, ks in rec.get("k", [])}


class _FollowedByNode(_Node):
    """``c0 -> c1 -> ...``: each result of stage i starts an instance of stage i+1."""

    __slots__ = ("kids",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.kids: list[_Node] = []

    def start(self) -> None:
        self.stage(0, self.tags)

    def stage(self, i: int, tags: Tags) -> None:
        """Start an instance of stage ``i`` with the tags matched up to it."""
        kid = self.m.spawn(self.child_sidx(i), self, i, tags)
        self.kids.append(kid)
        kid.start()

    def quit(self) -> None:
        for kid in self.kids:
            kid.quit()
        self.kids = []
        self.drop()

    def child_true(self, child: _Node, tags: Tags, quitted: bool) -> None:
        if child not in self.kids:
            return  # a late result of an instance already removed
        if quitted:
            self.kids.remove(child)
        if child.idx == len(self.m.plan.children[self.sidx]) - 1:
            done = not self.kids
            if done:
                self.drop()
            self.up_true(tags, done)
        elif self.alive:
            self.stage(child.idx + 1, tags)

    def child_false(self, child: _Node) -> None:
        if child not in self.kids:
            return
        self.kids.remove(child)
        if not self.kids:
            self.drop()
            self.up_false()

    def attach(self, child: _Node) -> None:
        self.kids.append(child)


class _OperandsNode(_Node):
    """A node whose operands all run at once (``and``, ``or``): ``active[i]`` is operand
    i while it runs."""

    __slots__ = ("active",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.active: list[_Node | None] = [None] * len(self.m.plan.children[self.sidx])

    def start(self) -> None:
        # Create every operand first, then start them in order (a 'not' operand reports
        # true while starting).
        n = len(self.active)
        self.active = [self.m.spawn(self.child_sidx(i), self, i, self.tags) for i in range(n)]
        for kid in list(self.active):
            if self.alive and kid is not None and kid.alive:
                kid.start()

    def quit(self) -> None:
        for kid in self.active:
            if kid is not None:
                kid.quit()
        self.active = [None] * len(self.active)
        self.drop()

    def attach(self, child: _Node) -> None:
        self.active[child.idx] = child


class _AndNode(_OperandsNode):
    """``c0 and c1 ...``: collects each child's results; fires on every full combination."""

    __slots__ = ("events",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.events: list[list[Tags] | None] = [None] * len(self.active)

    def _add(self, i: int, tags: Tags) -> None:
        """Remember a result of operand ``i`` (a new list: stored values stay unshared)."""
        self.events[i] = [*(self.events[i] or []), tags]
        self.m.touch(self)

    def child_true(self, child: _Node, tags: Tags, quitted: bool) -> None:
        i = child.idx
        if not self.alive or self.active[i] is not child:
            return
        if quitted:
            self.active[i] = None
        others = [j for j in range(len(self.active)) if j != i]
        if any(self.events[j] is None for j in others):
            self._add(i, tags)
            return
        if any(self.active[j] is not None for j in others):
            self._add(i, tags)  # others may still report: keep this result for them
        results = [tags]
        for j in others:
            results = [{**r, **e} for r in results for e in self.events[j] or ()]
        done = not any(k is not None and not k.is_not for k in self.active)
        if done:
            self.quit()
        for r in results:
            self.up_true(r, done)

    def child_false(self, child: _Node) -> None:
        i = child.idx
        if not self.alive or self.active[i] is not child:
            return
        self.active[i] = None
        self.quit()
        self.up_false()

    def extra(self) -> dict[str, Any]:
        return {"e": list(self.events)}

    def restore(self, rec: dict[str, Any]) -> None:
        self.events = list(rec.get("e") or self.events)


class _OrNode(_OperandsNode):
    """``c0 or c1 ...``: passes results on; quits all operands when one quits."""

    __slots__ = ()

    def child_true(self, child: _Node, tags: Tags, quitted: bool) -> None:
        if quitted:
            if self.active[child.idx] is child:
                self.active[child.idx] = None
            self.quit()
        self.up_true(tags, quitted)

    def child_false(self, child: _Node) -> None:
        if self.active[child.idx] is child:
            self.active[child.idx] = None
        if self.alive and all(k is None for k in self.active):
            self.drop()
            self.up_false()


class _WhileNode(_OneChildNode):
    """``child while (cond)``: a result passes while ``cond`` is true for it.

    Esper ref. "Patterns", "While": a false condition quits the sub-expression and the
    guard turns permanently false; a null condition only drops that result.
    """

    __slots__ = ("kid",)

    def start(self) -> None:
        self.start_child()

    def child_true(self, child: _Node, tags: Tags, quitted: bool) -> None:
        if self.kid is not child:
            return  # a result after the sub-expression quit is ignored
        if quitted:
            self.kid = None
        ok = self.spec.cond((None, self.m.visible(tags)), self.m.ctx)
        if ok is True:
            if quitted:
                self.drop()
            self.up_true(tags, quitted)
        elif ok is None:
            if quitted:
                self.drop()  # gone without a result; the parent is not told
        else:
            self.quit()
            self.up_false()

    def child_false(self, child: _Node) -> None:
        if self.kid is child:
            self.kid = None
        self.drop()
        self.up_false()


class _RepeatNode(_Node):
    """``[n] p``, ``[low:high] p until q``, ``p until q``.

    Esper ref. "Patterns", "Repeat" and "Repeat-Until": the until sub-expression starts
    before the repeated one, so an event both would match ends the repeat without
    counting; ``p`` is restarted with the tags from before the repeat after each result
    while the upper bound allows; an exact repeat is true with its n-th result; ``until``
    turning true makes the repeat true when at least ``low`` results were counted, else
    permanently false.  A result carries every tag of ``p`` as the list of its events.

    The collected events are stored one key each (``("r", id, i)`` -> ``[tag, event]``),
    so a result costs one write however many events the repeat holds.
    """

    __slots__ = ("kid", "stop", "count", "arrays", "items", "low", "high")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.kid: _Node | None = None
        self.stop: _Node | None = None
        self.count = 0
        self.arrays: dict[str, list[Row]] = {}
        self.items = 0  # collected events stored under ("r", id, i)
        self.low: int | None = None
        self.high: int | None = None

    def start(self) -> None:
        spec = self.spec
        self.low, self.high = self._bounds()
        if spec.until is not None:
            self.stop = self.m.spawn(self.child_sidx(1), self, 1, self.tags)
        self.kid = self.m.spawn(self.child_sidx(0), self, 0, self.tags)
        if self.stop is not None:
            self.stop.start()
        if self.alive and self.kid is not None:
            self.kid.start()

    def _bounds(self) -> tuple[int | None, int | None]:
        """The bounds of this instance, evaluated with the tags it started with."""
        spec = self.spec
        row = (None, self.m.visible(self.tags))
        low = _bound(spec.low(row, self.m.ctx)) if spec.low is not None else None
        if spec.exact:
            return low, low
        high = _bound(spec.high(row, self.m.ctx)) if spec.high is not None else None
        if low is not None and high is not None and high < low:
            low, high = high, low
        return low, high

    @property
    def _exact(self) -> bool:
        return self.low is not None and self.low == self.high

    def quit(self) -> None:
        for kid in (self.kid, self.stop):
            if kid is not None:
                kid.quit()
        self.kid = self.stop = None
        self.drop()

    def drop(self) -> None:
        if self.alive:
            for i in range(self.items):
                self.m.state.delete(("r", self.id, i))
            self.items = 0
        super().drop()

    def _collect(self, tags: Tags) -> None:
        """Append a result's events of the repeated tags (a nested list is flattened)."""
        state = self.m.state
        for t in self.spec.array_tags:
            v = tags.get(t)
            if v is None:
                continue
            for event in v if isinstance(v, list) else (v,):
                self.arrays.setdefault(t, []).append(event)
                state.put(("r", self.id, self.items), [t, event])
                self.items += 1

    def _result(self, tags: Tags) -> Tags:
        """A result's tags with the repeated tags replaced by their lists of events."""
        return {**tags, **{t: list(v) for t, v in self.arrays.items()}}

    def child_true(self, child: _Node, tags: Tags, quitted: bool) -> None:
        if not self.alive:
            return
        if child is self.kid:
            self.count += 1
            self._collect(tags)
            self.m.touch(self)
            if quitted:
                self.kid = None
            if self._exact and self.count == self.low:
                result = self._result(tags)
                self.quit()
                self.up_true(result, True)
                return
            more = self.high is None or self.high > self.count
            if self.kid is None:
                if more:
                    kid = self.kid = self.m.spawn(self.child_sidx(0), self, 0, self.tags)
                    kid.start()
            elif not more:
                self.kid.quit()
                self.kid = None
        elif child is self.stop:
            if quitted:
                self.stop = None
            result = self._result(tags)
            if self.arrays and _reports_begin(self.m.plan, self.child_sidx(1)):
                self._share_lists()
            self.quit()
            if self.low is not None and self.count < self.low:
                self.up_false()
            else:
                self.up_true(result, True)

    def _share_lists(self) -> None:
        """Esper's repeat-until writes the lists into the tag map the until reported;
        a timer or a 'not' reports the very map the repeat began with, which, under an
        every (through guards), is the copy the every starts its later children with.
        So a later repeat that collects nothing reports the lists of this one."""
        node, parent = self, self.parent
        while isinstance(parent, _WithinNode | _WhileNode):
            node, parent = parent, parent.parent
        if isinstance(parent, _EveryNode) and parent.first != node.id:
            parent.add_shared({t: list(v) for t, v in self.arrays.items()})

    def child_false(self, child: _Node) -> None:
        if not self.alive or child not in (self.kid, self.stop):
            return
        if child is self.kid:
            self.kid = None
        else:
            self.stop = None
        self.quit()
        self.up_false()

    def extra(self) -> dict[str, Any]:
        return {"c": self.count, "n": self.items, "lo": self.low, "hi": self.high}

    def restore(self, rec: dict[str, Any]) -> None:
        self.count = rec.get("c", 0)
        self.items = rec.get("n", 0)
        self.low, self.high = rec.get("lo"), rec.get("hi")
        self.arrays = {}
        for i in range(self.items):
            tag, event = self.m.state.get(("r", self.id, i))
            self.arrays.setdefault(tag, []).append(event)

    def attach(self, child: _Node) -> None:
        if child.idx == 0:
            self.kid = child
        else:
            self.stop = child


def _reports_begin(plan: PatternPlan, sidx: int) -> bool:
    """Whether a sub-expression turns true with the tags it began with, unchanged: a
    timer or a 'not' (through every, guards, or and followed-by of such), not a filter
    (it adds its event to a copy) nor an 'and' (it merges into a new map)."""
    node = plan.nodes[sidx]
    if isinstance(node, TimerInterval | TimerAt | Not):
        return True
    if isinstance(node, Every | EveryDistinct | Within | WhileGuard | Or | FollowedBy):
        return all(_reports_begin(plan, c) for c in plan.children[sidx])
    return False


def _bound(value: Any) -> int | None:
    """A repeat bound as an int (null: no bound)."""
    return None if value is None else int(value)


_KINDS: dict[type, type[_Node]] = {
    Filter: _FilterNode,
    TimerInterval: _IntervalNode,
    TimerAt: _AtNode,
    Within: _WithinNode,
    Not: _NotNode,
    Every: _EveryNode,
    EveryDistinct: _EveryDistinctNode,
    FollowedBy: _FollowedByNode,
    And: _AndNode,
    Or: _OrNode,
    WhileGuard: _WhileNode,
    Repeat: _RepeatNode,
}


class PatternMatcher:
    """A running pattern for one partition (the ``Matcher`` protocol of the pipeline).

    ``finished`` turns true when the pattern can never match again: the root quit or
    turned false (``a=A -> b=B`` after its match, an expired ``timer:within``), or no
    filter or timer is left listening.
    """

    def __init__(self, plan: PatternPlan, tz: str, state: StateNamespace, ctx: PartitionCtx, *,
                 start_ms: int | None = None, tags: Tags | None = None) -> None:
        self.plan = plan
        self.all_tags = tuple(dict.fromkeys(
            n.tag for n in plan.nodes if isinstance(n, Filter) and n.tag))
        self.index_ordered = frozenset(
            n.type_name for n in plan.nodes if isinstance(n, Filter) and n.ordered_by)
        """Types with a filter Esper's index orders by an instance's value
        (``_dispatch_order``); the others' filters take an event in start order."""
        self.state = state
        self.ctx = ctx
        self.tz = tz
        self.nodes: dict[int, _Node] = {}
        self.filters: dict[str, dict[int, _FilterNode]] = {}
        self.timers: list[tuple[int, int]] = []  # heap of (due, node id)
        self.timed: set[int] = set()
        self.out: Rows = []
        self.dirty: set[int] = set()
        self.gone: set[int] = set()
        self.fresh: set[int] = set()  # created since the last flush (nothing stored yet)
        self.next_id = 0
        self.done = False
        self.init_tags: Tags = {}
        self.now = ctx.now_ms if start_ms is None else start_ms
        self._meta_saved: list[Any] | None = None
        self.initial_matches: Rows = []
        """Matches the pattern produced while starting (e.g. ``not A``, ``timer:interval(0)``)."""
        meta = state.get("meta")
        if meta is None:
            self.init_tags = dict(tags or {})
            self.out = self.initial_matches
            root = self.spawn(0, self, 0, {})
            root.start()
            self.flush()
        else:
            self.load(meta)

    # -- the Matcher protocol --------------------------------------------------------
    def on_event(self, type_name: str, event: Row, now_ms: int) -> Rows:
        """Offer one event to the filters listening when it arrived, oldest first."""
        listening = self.filters.get(type_name)
        if not listening:
            return []
        self.now = now_ms
        out = self.out = []
        nodes = sorted(listening.values(), key=lambda n: n.order)
        if type_name in self.index_ordered:
            nodes = self._dispatch_order(nodes)
        for node in nodes:
            if node.alive and node.test(event):
                node.fire(event)
        self.flush()
        return out

    def _dispatch_order(self, nodes: list[_FilterNode]) -> list[_FilterNode]:
        """The listening filters in the order an event reaches them: the order they
        started, except that instances of one filter Esper indexes by a value of theirs
        (``Filter.ordered_by``) come first, in ascending order of it (its sorted filter
        index; Esper ref. 15.18), followed by the filters without criteria (those at the
        index tree's root).  Beside any other filter the start order stays."""
        ranged = [n for n in nodes if n.spec.ordered_by is not None]
        if len(ranged) < 2:
            return nodes
        spec = ranged[0].spec
        if any(n.spec is not spec and n.spec.predicate is not None for n in nodes):
            return nodes
        keyed = []
        for n in ranged:
            value = spec.ordered_by((None, self.visible(n.tags)), self.ctx)
            keyed.append(((value is None, value if value is not None else 0), n))
        try:
            keyed.sort(key=lambda kv: kv[0])
        except TypeError:  # values of types that do not compare: no index order
            return nodes
        return [n for _, n in keyed] + [n for n in nodes if n.spec is not spec]

    def on_time(self, now_ms: int) -> Rows:
        """Fire every timer due at or before ``now_ms``, each at its own due time."""
        out = self.out = []
        heap = self.timers
        while heap and heap[0][0] <= now_ms:
            due, nid = heapq.heappop(heap)
            node = self.nodes.get(nid)
            if not isinstance(node, _TimedNode) or node.due != due:
                continue  # cancelled or rescheduled
            self.timed.discard(nid)
            self.now = due
            node.on_timer()
        self.now = max(self.now, now_ms)
        self.flush()
        return out

    def next_timer(self) -> int | None:
        """The earliest due time of a live timer, or None."""
        heap = self.timers
        while heap:
            due, nid = heap[0]
            node = self.nodes.get(nid)
            if isinstance(node, _TimedNode) and node.due == due and nid in self.timed:
                return due
            heapq.heappop(heap)
        return None

    @property
    def finished(self) -> bool:
        """True when this pattern will never produce another match."""
        return self.done or (not self.timed and not any(self.filters.values()))

    # -- the root's parent ------------------------------------------------------------
    def child_true(self, child: _Node, tags: Tags, quitted: bool) -> None:
        # a match row names every tag of the pattern, null when it took no part (as
        # Esper's pattern event type does: 'select *' lists them all)
        row = dict.fromkeys(self.all_tags)
        row.update(tags)
        self.out.append(row)
        if quitted:
            self.done = True

    def child_false(self, child: _Node) -> None:
        self.done = True

    # -- node bookkeeping ---------------------------------------------------------------
    def spawn(self, sidx: int, parent: Any, idx: int, tags: Tags,
              order: int | None = None) -> _Node:
        """Create (not start) a node instance of spec node ``sidx``."""
        nid = self.next_id
        self.next_id += 1
        node = _KINDS[type(self.plan.nodes[sidx])](self, nid, sidx, parent, idx, tags)
        if order is not None and isinstance(node, _FilterNode):
            node.order = order
            node.placed = True
        self.nodes[nid] = node
        self.dirty.add(nid)
        self.fresh.add(nid)
        return node

    def forget(self, node: _Node) -> None:
        """Remove a quit node from the live set, its filter/timer registrations and state."""
        nid = node.id
        self.nodes.pop(nid, None)
        self.timed.discard(nid)
        if isinstance(node, _FilterNode):
            listening = self.filters.get(node.spec.type_name)
            if listening is not None:
                listening.pop(nid, None)
        self.dirty.discard(nid)
        if nid in self.fresh:
            self.fresh.discard(nid)  # never written: nothing to delete
        else:
            self.gone.add(nid)

    def watch(self, node: _FilterNode) -> None:
        """Register a started filter for its event type."""
        self.filters.setdefault(node.spec.type_name, {})[node.id] = node

    def schedule(self, node: _TimedNode) -> None:
        """Queue a node's due time (ties fire in start order: the node id)."""
        assert node.due is not None
        heapq.heappush(self.timers, (node.due, node.id))
        self.timed.add(node.id)

    def touch(self, node: _Node) -> None:
        """Mark a live node's stored record as changed."""
        if node.alive:
            self.dirty.add(node.id)

    def visible(self, tags: Tags) -> Tags:
        """The tags a pattern expression sees: outside tags overlaid by the match's own."""
        return {**self.init_tags, **tags} if self.init_tags else tags

    # -- persistence ---------------------------------------------------------------------
    def flush(self) -> None:
        """Write the records of nodes created/changed/removed since the last flush."""
        state = self.state
        for nid in sorted(self.gone):
            state.delete(("n", nid))
        for nid in sorted(self.dirty):
            node = self.nodes.get(nid)
            if node is not None:
                state.put(("n", nid), node.record())
        self.gone.clear()
        self.dirty.clear()
        self.fresh.clear()
        meta = [self.plan.signature, self.next_id, self.done, self.init_tags]
        if meta != self._meta_saved:
            state.put("meta", meta)
            self._meta_saved = meta

    def load(self, meta: list[Any]) -> None:
        """Rebuild the live node tree from the stored records."""
        signature, self.next_id, self.done, self.init_tags = meta
        if signature != self.plan.signature:
            raise ValueError("stored pattern state belongs to a different pattern")
        self._meta_saved = list(meta)
        recs = sorted((k[1], v) for k, v in self.state.items()
                      if isinstance(k, list | tuple) and len(k) == 2 and k[0] == "n")
        for nid, rec in recs:
            parent = self if rec["p"] is None else self.nodes[rec["p"]]
            cls = _KINDS[type(self.plan.nodes[rec["s"]])]
            node = cls(self, nid, rec["s"], parent, rec["i"], rec["t"])
            node.restore(rec)
            self.nodes[nid] = node
            if parent is not self:
                parent.attach(node)
            if isinstance(node, _FilterNode):
                self.watch(node)
            elif isinstance(node, _TimedNode) and node.due is not None:
                self.schedule(node)

"""Tree building for patterns: followed-by, and/or/not, every, repeats, guards,
filters and timer observers."""

from __future__ import annotations

from typing import Any

from lark import Token

from app.epl import ast as A
from app.epl.errors import closest
from app.epl.parsing.base import (
    GUARDS,
    OBSERVERS,
    BuilderBase,
    DistinctArg,
    StarArg,
    Wrapped,
    present,
    wrapped,
)


class PatternRules(BuilderBase):
    """Rules for pattern expressions."""

    def r_pattern(self, c: list[Any], pos: A.Pos) -> A.PFollowedBy:
        """a -> b -> c."""
        return A.PFollowedBy(tuple(present(c)), pos=pos)

    def r_p_or(self, c: list[Any], pos: A.Pos) -> A.POr:
        """a or b."""
        return A.POr(tuple(present(c)), pos=pos)

    def r_p_and(self, c: list[Any], pos: A.Pos) -> A.PAnd:
        """a and b."""
        return A.PAnd(tuple(present(c)), pos=pos)

    def r_p_match_until(self, c: list[Any], pos: A.Pos) -> A.PRepeat:
        """a until b."""
        items = present(c)
        return A.PRepeat(items[0], until=items[1], pos=pos)

    def r_p_repeat(self, c: list[Any], pos: A.Pos) -> A.PRepeat:
        """[n] a / [n:m] a."""
        items = present(c)
        low, high, ranged = items[0].value
        return A.PRepeat(items[1], low, high, ranged, None, pos=pos)

    def r_p_repeat_until(self, c: list[Any], pos: A.Pos) -> A.PRepeat:
        """[n:m] a until b."""
        items = present(c)
        low, high, ranged = items[0].value
        return A.PRepeat(items[1], low, high, ranged, items[2], pos=pos)

    def r_p_range_exact(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """[n]."""
        return Wrapped("range", (present(c)[0], None, False))

    def r_p_range_bounds(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """[low:high] with either bound optional."""
        low, high = c[0], c[-1]
        return Wrapped("range", (low, high, True))

    def r_p_every(self, c: list[Any], pos: A.Pos) -> A.PEvery:
        """every p."""
        return A.PEvery(present(c)[0], pos=pos)

    def r_p_not(self, c: list[Any], pos: A.Pos) -> A.PNot:
        """not p."""
        return A.PNot(present(c)[0], pos=pos)

    def r_p_every_distinct(self, c: list[Any], pos: A.Pos) -> A.PEveryDistinct:
        """every-distinct(exprs[, period]) p; a last time period is the expiry (Esper 4.2.7.2)."""
        items = present(c)
        exprs, child = list(items[:-1]), items[-1]
        period = None
        if len(exprs) > 1 and isinstance(exprs[-1], A.TimePeriod):
            period = exprs.pop()
        return A.PEveryDistinct(tuple(exprs), period, child, pos=pos)

    def r_p_every_repeat(self, c: list[Any], pos: A.Pos) -> A.PEvery:
        """every [n] p: the repeat inside the every."""
        items = present(c)
        return A.PEvery(self._ranged(items[0], items[1], pos), pos=pos)

    def r_p_not_repeat(self, c: list[Any], pos: A.Pos) -> A.PNot:
        """not [n] p: the repeat inside the not."""
        items = present(c)
        return A.PNot(self._ranged(items[0], items[1], pos), pos=pos)

    def r_p_every_distinct_repeat(self, c: list[Any], pos: A.Pos) -> A.PEveryDistinct:
        """every-distinct(exprs[, period]) [n] p: the repeat inside the every-distinct."""
        items = present(c)
        rep = self._ranged(items[-2], items[-1], pos)
        return self.r_p_every_distinct([*items[:-2], rep], pos)

    def _ranged(self, rng: Wrapped, child: Any, pos: A.Pos) -> A.PRepeat:
        """A repeat of ``child`` over a parsed range."""
        low, high, ranged = rng.value
        child_pos = getattr(child, "pos", None) or pos
        return A.PRepeat(child, low, high, ranged, None, pos=child_pos)

    def r_p_guard_while(self, c: list[Any], pos: A.Pos) -> A.PGuardWhile:
        """p while (expr) (or p where while (expr))."""
        items = present(c)
        return A.PGuardWhile(items[0], items[-1], pos=pos)

    def r_p_guard(self, c: list[Any], pos: A.Pos) -> A.PGuard:
        """p where timer:within(period)."""
        child = c[0]
        name_tok = next(x for x in c if isinstance(x, Token) and x.type == "COLON_NAME")
        args = wrapped(present(c[1:]), "args") or ()
        name = str(name_tok.value)
        tok_pos = A.Pos(name_tok.line, name_tok.column, name_tok.end_line, name_tok.end_column)
        if name.lower() not in GUARDS:
            guess = closest(name, GUARDS)
            hint = (f"did you mean '{guess}'?" if guess else
                    "the supported guards are timer:within and timer:withinmax")
            raise self._error(f"unknown pattern guard '{name}'", tok_pos, hint)
        plain = not any(isinstance(a, (StarArg, DistinctArg, A.NamedArg)) for a in args)
        if name.lower() == "timer:withinmax":
            if len(args) != 2 or not plain:
                raise self._error("timer:withinmax takes a time period and a count", tok_pos,
                                  "e.g. where timer:withinmax(10 seconds, 3)")
            return A.PGuard(child, args[0], args[1], pos=pos)
        if len(args) != 1 or not plain:
            raise self._error("timer:within takes exactly one time period", tok_pos,
                              "e.g. where timer:within(10 seconds)")
        return A.PGuard(child, args[0], pos=pos)

    def r_p_filter_tagged(self, c: list[Any], pos: A.Pos) -> A.PFilter:
        """tag=Type[(filter)]."""
        items = present(c)
        return A.PFilter(items[0], items[1], wrapped(items, "filter"), pos=pos)

    def r_p_filter_plain(self, c: list[Any], pos: A.Pos) -> A.PFilter:
        """Type[(filter)]."""
        items = present(c)
        return A.PFilter(None, items[0], wrapped(items, "filter"), pos=pos)

    def r_p_observer(self, c: list[Any], pos: A.Pos) -> A.Node:
        """timer:interval(period) or timer:at(crontab fields)."""
        name_tok = c[0]
        name = str(name_tok.value)
        fields = present(c[1:])
        lowered = name.lower()
        if lowered == "timer:interval":
            if len(fields) != 1 or isinstance(
                fields[0], (A.CronStar, A.CronStep, A.CronRange, A.CronList, A.CronLast,
                            A.CronWeekday, A.CronLastWeekday)):
                raise self._error("timer:interval takes exactly one time period", pos,
                                  "e.g. timer:interval(5 seconds)")
            return A.PTimerInterval(fields[0], pos=pos)
        if lowered == "timer:at":
            return A.PTimerAt(self._crontab(fields, pos), pos=pos)
        guess = closest(name, OBSERVERS)
        hint = f"did you mean '{guess}'?" if guess else "supported: timer:interval, timer:at"
        raise self._error(f"unknown pattern observer '{name}'", pos, hint)

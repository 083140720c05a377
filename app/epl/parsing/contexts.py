"""Tree building for ``create context`` declarations, their start/end conditions and
crontab schedules (Esper ref. 4.2 Context Declaration)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.epl import ast as A
from app.epl.errors import closest
from app.epl.parsing.base import (
    At,
    BuilderBase,
    DistinctArg,
    Flag,
    StarArg,
    Wrapped,
    alias_of,
    all_of,
    first_of,
    flag,
    present,
    wrapped,
)


class ContextRules(BuilderBase):
    """Rules for context declarations, conditions and crontabs."""

    def r_create_context(self, c: list[Any], pos: A.Pos) -> A.CreateContext:
        """create context Name [as] spec."""
        items = present(c)
        return A.CreateContext((), items[0], items[-1], pos=pos)

    def r_keyed_spec(self, c: list[Any], pos: A.Pos) -> A.KeyedContext:
        """partition [by] items [initiated by filters] [terminated by cond] (Esper ref. 4.2.2)."""
        items = present(c)
        return A.KeyedContext(all_of(items, A.KeyedItem), wrapped(items, "initiated") or (),
                              wrapped(items, "terminated"), pos=pos)

    def r_keyed_item(self, c: list[Any], pos: A.Pos) -> A.KeyedItem:
        """p [and|, p] from Type[(filter)] [[as] alias]."""
        items = present(c)
        props = all_of(items, A.Name)
        names = [i for i in items if isinstance(i, str)]
        return A.KeyedItem(props, names[0], wrapped(items, "filter"), alias_of(items),
                           pos=pos)

    def r_keyed_init(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """initiated [by] filter [[as] alias], ... of a keyed context."""
        return Wrapped("initiated", all_of(present(c), A.CondFilter))

    def r_keyed_term(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """terminated [by] cond of a keyed context."""
        return Wrapped("terminated", present(c)[0])

    def r_hash_spec(self, c: list[Any], pos: A.Pos) -> A.HashContext:
        """coalesce [by] items granularity N [preallocate] (Esper ref. 4.2.3)."""
        items = present(c)
        hash_items = all_of(items, A.HashItem)
        granularity = next(i for i in items if isinstance(i, A.Node)
                           and not isinstance(i, A.HashItem))
        return A.HashContext(hash_items, granularity, flag(items, "preallocate"), pos=pos)

    def r_hash_item(self, c: list[Any], pos: A.Pos) -> A.HashItem:
        """func(args) from Type[(filter)]; a sole '*' argument is kept as Star."""
        items = present(c)
        names = [i for i in items if isinstance(i, str)]
        args = wrapped(items, "args") or ()
        args = tuple(A.Star(pos=a.pos) if isinstance(a, StarArg) else a for a in args)
        for arg in args:
            if isinstance(arg, DistinctArg):
                raise self._error("'distinct' is not allowed in a hash function", arg.pos)
        return A.HashItem(names[0], args, names[1], wrapped(items, "filter"), pos=pos)

    def r_preallocate_kw(self, c: list[Any], pos: A.Pos) -> Flag:
        """'preallocate'."""
        return Flag("preallocate")

    def r_category_spec(self, c: list[Any], pos: A.Pos) -> A.CategoryContext:
        """group ... as label, ... from Type[(filter)] (Esper ref. 4.2.4)."""
        items = present(c)
        return A.CategoryContext(all_of(items, A.CategoryGroup), first_of(items, str),
                                 wrapped(items, "filter"), pos=pos)

    def r_category_group(self, c: list[Any], pos: A.Pos) -> A.CategoryGroup:
        """group [by] expr as label."""
        items = present(c)
        return A.CategoryGroup(items[0], items[1], pos=pos)

    def r_nonoverlap_spec(self, c: list[Any], pos: A.Pos) -> A.NonOverlappingContext:
        """start (@now | cond) [end cond] (Esper ref. 4.2.5 Non-Overlapping Context)."""
        items = present(c)
        start = items[0]
        if isinstance(start, At):
            start = self._now(start)
        end = items[1] if len(items) > 1 else None
        return A.NonOverlappingContext(start, end, pos=pos)

    def _now(self, at: At) -> A.CondNow:
        """@now, or a syntax error with a hint for another @word."""
        if at.word.lower() != "now":
            raise self._error(f"unknown '@{at.word}' here", at.pos,
                              "write '@now' to start the context partition immediately")
        return A.CondNow(pos=at.pos)

    def r_overlap_spec(self, c: list[Any], pos: A.Pos) -> A.OverlappingContext:
        """initiated [by] [distinct (..)] [@now and] cond [terminated [by] cond] (Esper 4.2.6)."""
        items = present(c)
        distinct = wrapped(items, "distinct") or ()
        conds = [i for i in items if isinstance(i, A.Node)]
        return A.OverlappingContext(conds[0], conds[1] if len(conds) > 1 else None, distinct,
                                    pos=pos)

    def r_cond_now_and(self, c: list[Any], pos: A.Pos) -> A.CondNowAnd:
        """@now and cond."""
        items = present(c)
        self._now(items[0])
        return A.CondNowAnd(items[1], pos=pos)

    def r_distinct_exprs(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """distinct (exprs) of an overlapping context."""
        return Wrapped("distinct", tuple(present(c)))

    def r_at_word(self, c: list[Any], pos: A.Pos) -> At:
        """@word (now / inclusive)."""
        return At(present(c)[0], pos)

    def r_nested_spec(self, c: list[Any], pos: A.Pos) -> A.NestedContext:
        """context A spec, context B spec, ... (Esper ref. 4.3 Context Nesting)."""
        return A.NestedContext(all_of(present(c), A.NestedItem), pos=pos)

    def r_nested_item(self, c: list[Any], pos: A.Pos) -> A.NestedItem:
        """context Name [as] spec."""
        items = present(c)
        return A.NestedItem(items[0], items[-1], pos=pos)

    r_nested_rest = r_nested_item

    def r_cond_filter(self, c: list[Any], pos: A.Pos) -> A.CondFilter:
        """Type[(filter)] [as alias] (Esper ref. 4.2.7.1)."""
        items = present(c)
        return A.CondFilter(items[0], wrapped(items, "filter"), alias_of(items), pos=pos)

    def r_cond_pattern(self, c: list[Any], pos: A.Pos) -> A.CondPattern:
        """pattern [..] [@inclusive] [as alias] (Esper ref. 4.2.7.2)."""
        items = present(c)
        at = first_of(items, At)
        if at is not None and at.word.lower() != "inclusive":
            guess = closest(at.word, ["inclusive"])
            hint = (f"did you mean '@{guess}'?" if guess
                    else "only '@inclusive' may follow a pattern")
            raise self._error(f"unknown '@{at.word}' after a pattern", at.pos, hint)
        alias = first_of(items[1:], str)
        return A.CondPattern(items[0], at is not None, alias, pos=pos)

    def r_cond_crontab(self, c: list[Any], pos: A.Pos) -> A.CondCrontab:
        """(crontab) (Esper ref. 4.2.7.3)."""
        return A.CondCrontab(present(c)[0], pos=pos)

    def r_cond_after(self, c: list[Any], pos: A.Pos) -> A.CondAfter:
        """after period (Esper ref. 4.2.7.4)."""
        return A.CondAfter(present(c)[0], pos=pos)

    def _crontab(self, fields: Sequence[A.Node], pos: A.Pos) -> A.Crontab:
        """Crontab with 5 to 7 fields (Esper ref. 7.6.4: 5 fields, optional seconds and zone)."""
        if not 5 <= len(fields) <= 7:
            raise self._error(
                f"a crontab needs 5 to 7 fields, found {len(fields)}", pos,
                "write (minutes, hours, days of month, months, days of week[, seconds"
                "[, timezone]]), e.g. (0, 9, *, *, *)")
        return A.Crontab(tuple(fields), pos=pos)

    def r_crontab(self, c: list[Any], pos: A.Pos) -> A.Crontab:
        """(f1, f2, f3, f4, f5 [, seconds [, tz]])."""
        return self._crontab(present(c), pos)

    def r_cron_star(self, c: list[Any], pos: A.Pos) -> A.CronStar:
        """'*'."""
        return A.CronStar(pos=pos)

    def r_cron_step(self, c: list[Any], pos: A.Pos) -> A.CronStep:
        """'*/n'."""
        return A.CronStep(present(c)[0], pos=pos)

    def r_cron_range(self, c: list[Any], pos: A.Pos) -> A.CronRange:
        """'a:b'."""
        items = present(c)
        return A.CronRange(items[0], items[1], pos=pos)

    def r_cron_list(self, c: list[Any], pos: A.Pos) -> A.CronList:
        """'[a, b, ...]'."""
        return A.CronList(tuple(present(c)), pos=pos)

    def r_cron_last_of(self, c: list[Any], pos: A.Pos) -> A.CronLast:
        """'n last'."""
        return A.CronLast(present(c)[0], pos=pos)

    def r_cron_last(self, c: list[Any], pos: A.Pos) -> A.CronLast:
        """'last'."""
        return A.CronLast(None, pos=pos)

    def r_cron_weekday(self, c: list[Any], pos: A.Pos) -> A.CronWeekday:
        """'n weekday'."""
        return A.CronWeekday(present(c)[0], pos=pos)

    def r_cron_lastweekday(self, c: list[Any], pos: A.Pos) -> A.CronLastWeekday:
        """'lastweekday'."""
        return A.CronLastWeekday(pos=pos)

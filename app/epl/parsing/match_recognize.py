"""Tree building for ``match_recognize (...)``: partition by, measures, all matches,
after match skip, the row pattern, interval and define (Esper reference, chapter
"EPL Reference: Match Recognize")."""

from __future__ import annotations

from typing import Any

from lark import Token

from app.epl import ast as A
from app.epl.parsing.base import BuilderBase, Flag, Wrapped, first_of, flag, present, wrapped


class MatchRecognizeRules(BuilderBase):
    """Rules for the match_recognize clause and its row pattern."""

    def r_match_recognize(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """The clause, carried to the select statement."""
        items = present(c)
        interval = wrapped(items, "mr_interval")
        return Wrapped("match_recognize", A.MatchRecognize(
            partition_by=wrapped(items, "mr_partition") or (),
            measures=wrapped(items, "mr_measures"),
            pattern=wrapped(items, "mr_pattern"),
            defines=wrapped(items, "mr_define") or (),
            all_matches=flag(items, "all_matches"),
            skip=wrapped(items, "mr_skip") or "past last row",
            interval=interval[0] if interval else None,
            or_terminated=bool(interval and interval[1]),
            pos=pos))

    def r_mr_partition(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """partition by expr, ..."""
        return Wrapped("mr_partition", tuple(present(c)))

    def r_mr_measures(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """measures item, ..."""
        return Wrapped("mr_measures", tuple(present(c)))

    def r_mr_measure(self, c: list[Any], pos: A.Pos) -> A.MrMeasure:
        """expr [as name]."""
        expr, name = c[0], c[-1]
        return A.MrMeasure(expr, name if isinstance(name, str) else None, pos=pos)

    def r_mr_all_matches(self, c: list[Any], pos: A.Pos) -> Flag:
        """all matches."""
        return Flag("all_matches")

    def r_mr_skip(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """after match skip ..."""
        return Wrapped("mr_skip", present(c)[0])

    def r_mr_skip_to(self, c: list[Any], pos: A.Pos) -> str:
        """past last row | to next row | to current row, lower case."""
        return " ".join(str(t.value).lower() for t in c if isinstance(t, Token))

    def r_mr_pattern(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """pattern (...)."""
        return Wrapped("mr_pattern", present(c)[0])

    def r_mr_interval(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """interval period [or terminated]."""
        items = present(c)
        return Wrapped("mr_interval", (items[0], flag(items, "or_terminated")))

    def r_mr_or_terminated(self, c: list[Any], pos: A.Pos) -> Flag:
        """or terminated."""
        return Flag("or_terminated")

    def r_mr_define(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """define item, ..."""
        return Wrapped("mr_define", tuple(present(c)))

    def r_mr_define_item(self, c: list[Any], pos: A.Pos) -> A.MrDefine:
        """VAR as condition."""
        items = present(c)
        return A.MrDefine(items[0], items[1], pos=pos)

    def r_mr_alt(self, c: list[Any], pos: A.Pos) -> A.Node:
        """a | b; a single alternative is the concatenation itself."""
        items = present(c)
        return items[0] if len(items) == 1 else A.MrAlt(tuple(items), pos=pos)

    def r_mr_concat(self, c: list[Any], pos: A.Pos) -> A.MrConcat:
        """a b c."""
        return A.MrConcat(tuple(present(c)), pos=pos)

    def r_mr_atom(self, c: list[Any], pos: A.Pos) -> A.MrAtom:
        """VAR[quantifier][{repeat}]."""
        items = present(c)
        q = wrapped(items, "mr_quantifier") or ""
        return A.MrAtom(items[0], q, first_of(items, A.MrRepeat), pos=pos)

    def r_mr_nested(self, c: list[Any], pos: A.Pos) -> A.MrNested:
        """(pattern)[quantifier][{repeat}]."""
        items = present(c)
        q = wrapped(items, "mr_quantifier") or ""
        return A.MrNested(items[0], q, first_of(items, A.MrRepeat), pos=pos)

    def r_mr_permute(self, c: list[Any], pos: A.Pos) -> A.MrPermute:
        """match_recognize_permute(a, b, ...)."""
        return A.MrPermute(tuple(present(c)), pos=pos)

    def r_mr_quantifier(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """'*', '+', '?' and their reluctant forms."""
        return Wrapped("mr_quantifier", "".join(str(t.value) for t in c if t is not None))

    def r_mr_repeat_exact(self, c: list[Any], pos: A.Pos) -> A.MrRepeat:
        """{n}."""
        n = self._repeat_bound(present(c)[0])
        return A.MrRepeat(n, n, True, pos=pos)

    def r_mr_repeat_range(self, c: list[Any], pos: A.Pos) -> A.MrRepeat:
        """{n,}, {,m}, {n,m}."""
        low = self._repeat_bound(c[0]) if c[0] is not None and not isinstance(c[0], Token) \
            else None
        last = c[-1]
        high = self._repeat_bound(last) if last is not None and not isinstance(last, Token) \
            else None
        if low is None and high is None:
            raise self._error("a repeat range needs a lower or an upper bound", pos,
                              "write {n}, {n,}, {,m} or {n,m}")
        return A.MrRepeat(low, high, False, pos=pos)

    def _repeat_bound(self, lit: A.Literal) -> int:
        """A repeat bound: a positive integer (Esper: a minimum of 1)."""
        v = lit.value
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise self._error(f"invalid pattern quantifier value {v}, expecting a minimum of 1",
                              lit.pos, "write a whole number of at least 1")
        return v

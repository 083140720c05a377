"""Tree building for subqueries (Esper reference "Subqueries"): ``(select ...)``,
``exists``, ``in (select ...)`` and ``any``/``some``/``all`` comparisons."""

from __future__ import annotations

from typing import Any

from app.epl import ast as A
from app.epl.parsing.base import (
    BuilderBase,
    Wrapped,
    flag,
    present,
    wrapped,
)
from app.epl.parsing.streams import filter_stream


class SubqueryRules(BuilderBase):
    """Rules for subqueries."""

    def r_subquery(self, c: list[Any], pos: A.Pos) -> A.SubSelect:
        """( select ... ): the subselect, its position taken from the parentheses."""
        sub: A.SubSelect = present(c)[0]
        return A.SubSelect(sub.select_items, sub.stream, sub.where, sub.group_by,
                           sub.having, sub.distinct, pos=pos)

    def r_subselect(self, c: list[Any], pos: A.Pos) -> A.SubSelect:
        """select [distinct] items from stream [where] [group by] [having]."""
        items = present(c)
        stream = next(i for i in items if isinstance(i, A.FilterStream))
        return A.SubSelect(
            select_items=wrapped(items, "select_list") or (),
            stream=stream,
            where=wrapped(items, "where"),
            group_by=wrapped(items, "group_by") or (),
            having=wrapped(items, "having"),
            distinct=flag(items, "distinct"),
            pos=pos,
        )

    def r_subquery_stream(self, c: list[Any], pos: A.Pos) -> A.FilterStream:
        """Type[(filter)]#views [as alias] [retain-...]."""
        return filter_stream(present(c), pos)

    def r_quantifier(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """any | some | all (some is any)."""
        word = str(c[0].value).lower()
        return Wrapped("quantifier", "any" if word == "some" else word)

    def r_subquery_expr(self, c: list[Any], pos: A.Pos) -> A.Subquery:
        """(select ...) as a value."""
        return A.Subquery(present(c)[0], pos=pos)

    def r_exists_expr(self, c: list[Any], pos: A.Pos) -> A.Exists:
        """exists (select ...)."""
        return A.Exists(present(c)[0], pos=pos)

    def r_in_subquery(self, c: list[Any], pos: A.Pos) -> A.InSubquery:
        """x [not] in (select ...)."""
        items = present(c)
        return A.InSubquery(items[0], items[-1], flag(items, "not"), pos=pos)

    def r_quantified(self, c: list[Any], pos: A.Pos) -> A.Quantified:
        """x op any|some|all (select ...)."""
        items = present(c)
        return A.Quantified(items[0], items[1].value, items[2].value, items[3], pos=pos)

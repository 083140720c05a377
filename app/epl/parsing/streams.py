"""Tree building for from-clause streams: filters, pattern streams, aliases and data
window (view) specifications."""

from __future__ import annotations

from typing import Any

from lark import Token

from app.epl import ast as A
from app.epl.parsing.base import (
    Alias,
    BuilderBase,
    Flag,
    ViewName,
    Wrapped,
    alias_of,
    all_of,
    and_all,
    first_of,
    flag,
    present,
    wrapped,
)


class StreamRules(BuilderBase):
    """Rules for from-clause streams and data window specifications."""

    def r_stream_alias(self, c: list[Any], pos: A.Pos) -> Alias:
        """[as] alias."""
        return Alias(present(c)[0])

    def r_unidirectional_kw(self, c: list[Any], pos: A.Pos) -> Flag:
        """'unidirectional'."""
        return Flag("unidirectional")

    def r_retain_kw(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """retain-union / retain-intersection, lower-cased."""
        return Wrapped("retain", str(c[0].value).lower())

    def r_filter(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """Filter list folded into one conjunction."""
        return Wrapped("filter", and_all(present(c), pos))

    def r_filter_stream(self, c: list[Any], pos: A.Pos) -> A.FilterStream:
        """Type[(filter)]#views [as alias] [unidirectional] [retain-...]."""
        return filter_stream(present(c), pos)

    def r_pattern_stream(self, c: list[Any], pos: A.Pos) -> A.PatternStream:
        """pattern [ ... ]#views [as alias] ..."""
        items = present(c)
        return A.PatternStream(
            pattern=items[0],
            alias=alias_of(items),
            views=all_of(items, A.View),
            retain=wrapped(items, "retain"),
            unidirectional=flag(items, "unidirectional"),
            pos=pos,
        )

    def _view(self, c: list[Any], pos: A.Pos, syntax: str) -> A.View:
        """Shared body of #view and .ns:view."""
        name_part = c[0] if isinstance(c[0], (Token, ViewName)) else first_of(c, ViewName)
        if isinstance(name_part, Token):  # COLON_NAME 'ns:name' followed by '('
            ns, _, name = str(name_part.value).partition(":")
            view_name = ViewName(ns, name)
        else:
            view_name = name_part
        params = tuple(p for p in c[1:] if p is not None and not isinstance(p, Token))
        return A.View(view_name.namespace, view_name.name, params, syntax=syntax, pos=pos)

    def r_view_hash(self, c: list[Any], pos: A.Pos) -> A.View:
        """#name(params) or #ns:name(params) (Esper ref. 14.1)."""
        return self._view(c, pos, "#")

    def r_view_dot(self, c: list[Any], pos: A.Pos) -> A.View:
        """.ns:name(params), the older spelling (Esper ref. 14.1)."""
        return self._view(c, pos, ".")

    def r_view_plain(self, c: list[Any], pos: A.Pos) -> ViewName:
        """Window name without namespace."""
        return ViewName(None, present(c)[0])

    def r_view_ns(self, c: list[Any], pos: A.Pos) -> ViewName:
        """ns:name written with separate tokens (no parameters follow)."""
        items = present(c)
        return ViewName(items[0], items[1])

    def r_vp_expr(self, c: list[Any], pos: A.Pos) -> A.Node:
        """Window parameter expression."""
        return present(c)[0]

    def r_vp_sort(self, c: list[Any], pos: A.Pos) -> A.SortSpec:
        """Window sort criterion 'expr asc|desc' (Esper ref. 14.3.19 Sorted Window)."""
        items = present(c)
        return A.SortSpec(items[0], items[1].value, pos=pos)

    def r_vp_star(self, c: list[Any], pos: A.Pos) -> A.Star:
        """'*' window parameter (Esper ref. 14.4 Special Derived-Value Windows size/uni/linest)."""
        return A.Star(pos=pos)

    def r_sort_dir(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """asc / desc -> descending flag."""
        return Wrapped("desc", str(c[0].value).lower() == "desc")


def filter_stream(items: list[Any], pos: A.Pos) -> A.FilterStream:
    """A filter stream from its parts (of a statement, or of a subquery, which takes no
    ``unidirectional``)."""
    return A.FilterStream(
        type_name=items[0],
        filter=wrapped(items, "filter"),
        views=all_of(items, A.View),
        alias=alias_of(items),
        retain=wrapped(items, "retain"),
        unidirectional=flag(items, "unidirectional"),
        pos=pos,
    )

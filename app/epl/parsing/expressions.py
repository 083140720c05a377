"""Tree building for expressions: operators, names, calls, case, cast, time periods
and literals."""

from __future__ import annotations

import re
from typing import Any

from lark import Token

from app.epl import ast as A
from app.epl.parsing.base import (
    UNITS,
    BuilderBase,
    DistinctArg,
    Flag,
    StarArg,
    Wrapped,
    flag,
    present,
    unescape,
    wrapped,
)

LONG_MAX = (1 << 63) - 1



class ExpressionRules(BuilderBase):
    """Rules for expressions and literals."""

    def r_or_op(self, c: list[Any], pos: A.Pos) -> A.Binary:
        """a or b."""
        items = present(c)
        return A.Binary("or", items[0], items[1], pos=pos)

    def r_and_op(self, c: list[Any], pos: A.Pos) -> A.Binary:
        """a and b."""
        items = present(c)
        return A.Binary("and", items[0], items[1], pos=pos)

    def r_not_op(self, c: list[Any], pos: A.Pos) -> A.Unary:
        """not a."""
        return A.Unary("not", present(c)[0], pos=pos)

    def r_binop(self, c: list[Any], pos: A.Pos) -> A.Binary:
        """a <op> b for comparison and arithmetic operators."""
        items = present(c)
        return A.Binary(items[1].value, items[0], items[2], pos=pos)

    def _op(self, c: list[Any]) -> Wrapped:
        """Operator token text, with '<>' normalised to '!='."""
        text = str(c[0].value)
        return Wrapped("op", "!=" if text == "<>" else text)

    def r_eq_op(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """= != <>."""
        return self._op(c)

    def r_rel_op(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """< <= > >=."""
        return self._op(c)

    def r_add_op(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """+ -."""
        return self._op(c)

    def r_mul_op(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """* / %."""
        return self._op(c)

    def r_not_kw(self, c: list[Any], pos: A.Pos) -> Flag:
        """'not' of 'not in', 'not between', 'is not null', ..."""
        return Flag("not")

    def r_is_null(self, c: list[Any], pos: A.Pos) -> A.Node:
        """a is [not] null; a is [not] b: equality where null is a value (Esper ref. 9.1
        operators, 'is': true when both are null)."""
        items = present(c)
        negated = flag(items, "not")
        other = items[-1]
        if isinstance(other, A.Literal) and other.value is None:
            return A.IsNull(items[0], negated, pos=pos)
        return A.IsSame(items[0], other, negated, pos=pos)

    def r_in_expr(self, c: list[Any], pos: A.Pos) -> A.Node:
        """a [not] in (list) | a [not] in [low:high]."""
        items = present(c)
        negated = flag(items, "not")
        target = items[-1]
        if target.tag == "in_list":
            return A.InList(items[0], target.value, negated, pos=pos)
        low, high, low_closed, high_closed = target.value
        return A.InRange(items[0], low, high, low_closed, high_closed, negated, pos=pos)

    def r_in_target(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """(a, b) list or [a:b] / (a:b) / [a:b) / (a:b] range."""
        tokens = [str(x.value) for x in c if isinstance(x, Token)]
        exprs = tuple(present(c))
        if ":" in tokens:
            return Wrapped("in_range", (exprs[0], exprs[1], tokens[0] == "[", tokens[-1] == "]"))
        return Wrapped("in_list", exprs)

    def r_between(self, c: list[Any], pos: A.Pos) -> A.Between:
        """a [not] between low and high."""
        items = present(c)
        negated = flag(items, "not")
        exprs = [i for i in items if isinstance(i, A.Node)]
        return A.Between(exprs[0], exprs[1], exprs[2], negated, pos=pos)

    def r_like(self, c: list[Any], pos: A.Pos) -> A.Like:
        """a [not] like pattern [escape e]."""
        items = present(c)
        negated = flag(items, "not")
        exprs = [i for i in items if isinstance(i, A.Node)]
        return A.Like(exprs[0], exprs[1], exprs[2] if len(exprs) > 2 else None, negated, pos=pos)

    def r_regexp(self, c: list[Any], pos: A.Pos) -> A.Regexp:
        """a [not] regexp pattern."""
        items = present(c)
        exprs = [i for i in items if isinstance(i, A.Node)]
        return A.Regexp(exprs[0], exprs[1], flag(items, "not"), pos=pos)

    def r_concat(self, c: list[Any], pos: A.Pos) -> A.Binary:
        """a || b."""
        items = present(c)
        return A.Binary("||", items[0], items[1], pos=pos)

    def r_neg(self, c: list[Any], pos: A.Pos) -> A.Node:
        """-a; folded into the literal for numbers (see app.epl.ast docstring)."""
        operand = present(c)[0]
        if isinstance(operand, A.Literal) and operand.type in ("int", "long", "double"):
            return A.Literal(-operand.value, operand.type, pos=pos)  # type: ignore[operator]
        return A.Unary("-", operand, pos=pos)

    def r_name_ref(self, c: list[Any], pos: A.Pos) -> A.Name:
        """a.b.c."""
        return A.Name(tuple(present(c)), pos=pos)

    def r_table_access(self, c: list[Any], pos: A.Pos) -> A.TableAccess:
        """Table[k, ...] or Table[k, ...].column."""
        items = [x for x in c if not isinstance(x, Token)]
        keys = tuple(x for x in items[1:] if isinstance(x, A.Node))
        column = items[-1] if isinstance(items[-1], str) and len(items) > 1 else None
        return A.TableAccess(items[0], keys, column, pos=pos)

    def r_call(self, c: list[Any], pos: A.Pos) -> A.Call:
        """f(args), a.b.f(args), ns:f(args); count(*) and count(distinct x) flags."""
        head = c[0]
        name = str(head.value) if isinstance(head, Token) else ".".join(head.parts)
        args = list(wrapped(present(c[1:]), "args") or ())
        if len(args) == 1 and isinstance(args[0], StarArg):
            return A.Call(name, (), False, True, pos=pos)
        distinct = False
        out: list[A.Node] = []
        for index, arg in enumerate(args):
            if isinstance(arg, DistinctArg):
                if index != 0:
                    raise self._error("'distinct' may only precede the first argument", arg.pos)
                distinct = True
                out.append(arg.expr)
            elif isinstance(arg, StarArg):
                out.append(A.Star(pos=arg.pos))
            else:
                out.append(arg)
        return A.Call(name, tuple(out), distinct, False, pos=pos)

    def r_call_args(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """Argument list."""
        return Wrapped("args", tuple(present(c)))

    def r_arg_expr(self, c: list[Any], pos: A.Pos) -> A.Node:
        """Plain argument."""
        return present(c)[0]

    def r_arg_star(self, c: list[Any], pos: A.Pos) -> StarArg:
        """'*' argument."""
        return StarArg(pos)

    def r_arg_distinct(self, c: list[Any], pos: A.Pos) -> DistinctArg:
        """'distinct expr' argument."""
        return DistinctArg(present(c)[0], pos)

    def r_arg_named(self, c: list[Any], pos: A.Pos) -> A.NamedArg:
        """'name: expr' argument (Esper ref. 2: sum(amount, group_by:account))."""
        items = present(c)
        return A.NamedArg(items[0], items[1], pos=pos)

    def r_case_searched(self, c: list[Any], pos: A.Pos) -> A.Case:
        """case when c then r ... [else e] end."""
        items = present(c)
        whens = tuple(i.value for i in items if isinstance(i, Wrapped))
        rest = [i for i in items if not isinstance(i, Wrapped)]
        return A.Case(None, whens, rest[0] if rest else None, pos=pos)

    def r_case_simple(self, c: list[Any], pos: A.Pos) -> A.Case:
        """case x when v then r ... [else e] end."""
        items = present(c)
        whens = tuple(i.value for i in items if isinstance(i, Wrapped))
        rest = [i for i in items if not isinstance(i, Wrapped)]
        return A.Case(rest[0], whens, rest[1] if len(rest) > 1 else None, pos=pos)

    def r_case_when(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """when c then r."""
        items = present(c)
        return Wrapped("when", (items[0], items[1]))

    def r_cast_expr(self, c: list[Any], pos: A.Pos) -> A.Cast:
        """cast(x, type) / cast(x as type)."""
        items = present(c)
        return A.Cast(items[0], items[1].value, pos=pos)

    def r_time_period(self, c: list[Any], pos: A.Pos) -> A.TimePeriod:
        """Sequence of (amount unit) parts; a constant one must fit in a Java long of ms."""
        period = A.TimePeriod(tuple(p.value for p in present(c)), pos=pos)
        ms = period.ms()
        if ms is not None and not (ms == ms and abs(ms) <= LONG_MAX):
            raise self._error("time period is out of range", pos,
                              "the longest time period is about 292 million years")
        return period

    def r_tp_part(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """'5 sec' or 'VAR sec'."""
        amount_raw, unit = c[0], c[1]
        if isinstance(amount_raw, Token):
            amount: A.Node = self._number(amount_raw, pos)
        else:
            amount = A.Name((amount_raw,), pos=pos)
        return Wrapped("part", (amount, unit.value))

    def r_time_unit(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """Unit keyword normalised to its singular long name."""
        return Wrapped("unit", UNITS[str(c[0].value).lower()])

    def _number(self, tok: Token, pos: A.Pos) -> A.Literal:
        """Numeric literal: 5 int, 5L long, 1.5 / 1e3 / 2d double."""
        text = str(tok.value)
        suffix = text[-1].lower() if text[-1].isalpha() and text[-1].lower() in "ldf" else ""
        body = text[:-1] if suffix else text
        if suffix == "l":
            if not body.isdigit():
                raise self._error(f"'{text}' is not a valid long literal", pos)
            return A.Literal(self._integer(body, text, pos), "long", pos=pos)
        if suffix in ("d", "f") or any(ch in body for ch in ".eE"):
            value = float(body)
            if value != value or value in (float("inf"), float("-inf")):
                raise self._error(f"number '{text}' is out of range", pos,
                                  "the largest double is about 1.8e308")
            mantissa = re.split("[eE]", body)[0]
            if value == 0 and any(ch in "123456789" for ch in mantissa):
                raise self._error(f"number '{text}' is too small to be a double", pos,
                                  "the smallest positive double is about 4.9e-324")
            return A.Literal(value, "double", pos=pos)
        return A.Literal(self._integer(body, text, pos), "int", pos=pos)

    def _integer(self, body: str, text: str, pos: A.Pos) -> int:
        """An integer literal, at most a Java long (as Esper reads them)."""
        digits = body.lstrip("0")
        if len(digits) > 19 or int(body or "0") > LONG_MAX:
            shown = f"'{text}'" if len(text) <= 30 else (
                f"'{text[:12]}...{text[-4:]}' ({len(text)} digits)")
            raise self._error(f"number {shown} is out of range", pos,
                              f"the largest integer is {LONG_MAX}")
        return int(body)

    def r_number(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """Number literal."""
        return self._number(c[0], pos)

    def r_string(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """'...' or "..." with backslash escapes."""
        raw = str(c[0].value)
        return A.Literal(unescape(raw[1:-1]), "string", pos=pos)

    def r_true(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """true."""
        return A.Literal(True, "boolean", pos=pos)

    def r_false(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """false."""
        return A.Literal(False, "boolean", pos=pos)

    def r_null(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """null."""
        return A.Literal(None, "null", pos=pos)

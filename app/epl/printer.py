"""EPL printer: AST -> canonical EPL text such that parse(to_epl(ast)) == ast.

Identifiers are back-quoted when they would otherwise lex as a keyword. The
contextual lexer makes that depend on the parser state, so the printer first
quotes only words that are keywords where expressions and patterns start, then
re-parses statements, expressions and patterns and, if the result differs,
prints again quoting every word that is a keyword in some parser state that
also accepts a name (app.epl.parser.reserved_words: always correct).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable

from app.epl import ast as A
from app.epl import walk
from app.epl.errors import EplSyntaxError
from app.epl.walk import spine

__all__ = ["to_epl"]

_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Keywords that start or qualify an expression/pattern/select list, where an
# identifier may also stand: always back-quoted when used as identifiers.
_CORE_RESERVED = frozenset({
    "not", "case", "cast", "true", "false", "null", "distinct", "istream", "irstream",
    "rstream", "every", "pattern", "last", "lastweekday", "weekday",
})

# Expression precedence, loosest first (see grammar.lark, 'expressions').
_OR, _AND, _NOT, _EQ, _REL, _CONCAT, _ADD, _MUL, _UNARY, _PRIMARY = range(1, 11)
_BINARY_PREC = {
    "or": _OR, "and": _AND, "=": _EQ, "!=": _EQ, "<": _REL, "<=": _REL, ">": _REL,
    ">=": _REL, "||": _CONCAT, "+": _ADD, "-": _ADD, "*": _MUL, "/": _MUL, "%": _MUL,
}
# Pattern precedence, loosest first.
_P_FB, _P_OR, _P_AND, _P_REPEAT, _P_UNARY, _P_GUARD, _P_ATOM = range(1, 8)

_PATTERN_TYPES = (
    A.PFilter, A.PEvery, A.PEveryDistinct, A.PNot, A.PFollowedBy, A.PAnd, A.POr,
    A.PTimerInterval, A.PTimerAt, A.PGuard, A.PGuardWhile, A.PRepeat,
)


def to_epl(node: A.Node) -> str:
    """EPL text for any statement, expression, pattern or clause node."""
    text = _Printer(_CORE_RESERVED).node(node)
    check = _checker_for(node)
    if check is None:
        return text
    try:
        same = walk.same(check(text), node)
    except EplSyntaxError:
        same = False
    if same:
        return text
    return _Printer(_safe_reserved()).node(node)


@functools.cache
def _safe_reserved() -> frozenset[str]:
    """Words that may lex as a keyword where a name stands: quoting all is always safe."""
    from app.epl.parser import reserved_words

    return reserved_words() | _CORE_RESERVED | {"context"}


def _checker_for(node: A.Node) -> Callable[[str], object] | None:
    """The parse function that reads back this kind of node, if there is one."""
    from app.epl import parser

    if isinstance(node, A.STATEMENT_TYPES):
        return parser.parse_statement
    if isinstance(node, A.Module):
        return lambda text: A.Module(tuple(parser.parse_module(text)))
    if isinstance(node, _PATTERN_TYPES):
        return parser.parse_pattern
    if isinstance(node, (A.SortSpec, A.Star, A.NamedArg, A.Crontab, A.CronStar, A.CronStep,
                         A.CronRange, A.CronList, A.CronLast, A.CronWeekday,
                         A.CronLastWeekday)):
        return None
    if _is_expression(node):
        return parser.parse_expression
    return None


def _is_expression(node: A.Node) -> bool:
    """True for expression node classes."""
    return isinstance(node, (
        A.Literal, A.Name, A.Unary, A.Binary, A.Between, A.InList, A.InRange, A.Like,
        A.Regexp, A.IsNull, A.IsSame, A.Case, A.Call, A.Cast, A.TimePeriod, A.TableAccess,
        A.Subquery, A.Exists, A.InSubquery, A.Quantified,
    ))


class _Printer:
    """Stateless-but-for-quoting printer; one method per node class."""

    def __init__(self, reserved: frozenset[str]) -> None:
        """Remember which identifiers must be back-quoted."""
        self.reserved = reserved

    # -- helpers ----------------------------------------------------------------

    def node(self, node: A.Node) -> str:
        """Dispatch on the node class."""
        method = _METHODS.get(type(node))
        if method is None:
            if _is_expression(node):
                return self.expr(node)
            raise TypeError(f"cannot print {type(node).__name__}")
        return method(self, node)

    def ident(self, name: str) -> str:
        """Identifier, back-quoted if it is not a plain name or could lex as a keyword."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"cannot print identifier {name!r}")
        if _IDENT_RE.match(name) and name.lower() not in self.reserved:
            return name
        if "`" in name or "\n" in name:
            raise ValueError(f"identifier {name!r} cannot be written in EPL")
        return f"`{name}`"

    def dotted(self, text: str) -> str:
        """Dotted name (type or function); each part quoted as needed."""
        if text.endswith("[]"):
            return self.dotted(text[:-2]) + "[]"
        return ".".join(self.ident(part) for part in text.split("."))

    def join(self, items: Iterable[A.Node], sep: str = ", ") -> str:
        """Comma-separated printed nodes."""
        return sep.join(self.node(i) for i in items)

    def exprs(self, items: Iterable[A.Node]) -> str:
        """Comma-separated expressions."""
        return ", ".join(self.expr(i) for i in items)

    # -- expressions -------------------------------------------------------------

    def prec(self, node: A.Node) -> int:
        """Binding strength of an expression node."""
        if isinstance(node, A.Binary):
            return _BINARY_PREC[node.op]
        if isinstance(node, A.Unary):
            return _NOT if node.op == "not" else _UNARY
        if isinstance(node, A.IsNull | A.IsSame):
            return _EQ
        if isinstance(node, (A.Between, A.InList, A.InRange, A.Like, A.Regexp,
                             A.InSubquery)):
            return _REL
        if isinstance(node, A.Quantified):
            return _EQ if node.op in ("=", "!=") else _REL
        if isinstance(node, A.Literal) and node.type in ("int", "long", "double"):
            return _UNARY if str(self.literal(node)).startswith("-") else _PRIMARY
        return _PRIMARY

    def expr(self, node: A.Node, min_prec: int = 0) -> str:
        """Expression text, parenthesised when it binds looser than min_prec."""
        text = self.expr_raw(node)
        return f"({text})" if self.prec(node) < min_prec else text

    def expr_raw(self, node: A.Node) -> str:  # noqa: C901 - one branch per node class
        """Expression text without outer parentheses."""
        if isinstance(node, A.Literal):
            return self.literal(node)
        if isinstance(node, A.Name):
            return ".".join(self.ident(p) for p in node.parts)
        if isinstance(node, A.Binary):
            return self.binary(node)
        if isinstance(node, A.Unary):
            if node.op == "not":
                return f"not {self.expr(node.operand, _NOT)}"
            inner = self.expr(node.operand, _UNARY)
            return f"- {inner}" if inner.startswith("-") else f"-{inner}"
        if isinstance(node, A.IsNull):
            neg = " not" if node.negated else ""
            return f"{self.expr(node.expr, _EQ)} is{neg} null"
        if isinstance(node, A.IsSame):
            neg = " not" if node.negated else ""
            return f"{self.expr(node.left, _EQ)} is{neg} {self.expr(node.right, _REL)}"
        if isinstance(node, A.Between):
            neg = "not " if node.negated else ""
            return (f"{self.expr(node.expr, _CONCAT)} {neg}between "
                    f"{self.expr(node.low, _CONCAT)} and {self.expr(node.high, _CONCAT)}")
        if isinstance(node, A.InList):
            neg = "not " if node.negated else ""
            return f"{self.expr(node.expr, _CONCAT)} {neg}in ({self.exprs(node.items)})"
        if isinstance(node, A.InRange):
            neg = "not " if node.negated else ""
            left = "[" if node.low_closed else "("
            right = "]" if node.high_closed else ")"
            rng = self.range_text(node.low, node.high)
            return f"{self.expr(node.expr, _CONCAT)} {neg}in {left}{rng}{right}"
        if isinstance(node, A.Like):
            neg = "not " if node.negated else ""
            esc = f" escape {self.expr(node.escape, _CONCAT)}" if node.escape is not None else ""
            pattern = self.expr(node.pattern, _CONCAT)
            return f"{self.expr(node.expr, _CONCAT)} {neg}like {pattern}{esc}"
        if isinstance(node, A.Regexp):
            neg = "not " if node.negated else ""
            return f"{self.expr(node.expr, _CONCAT)} {neg}regexp {self.expr(node.pattern, _CONCAT)}"
        if isinstance(node, A.Case):
            parts = ["case"]
            if node.operand is not None:
                parts.append(self.expr(node.operand))
            for cond, result in node.whens:
                parts.append(f"when {self.expr(cond)} then {self.expr(result)}")
            if node.else_ is not None:
                parts.append(f"else {self.expr(node.else_)}")
            parts.append("end")
            return " ".join(parts)
        if isinstance(node, A.Call):
            return self.call(node)
        if isinstance(node, A.TableAccess):
            col = f".{self.ident(node.column)}" if node.column is not None else ""
            return f"{self.ident(node.table)}[{self.exprs(node.keys)}]{col}"
        if isinstance(node, A.Cast):
            return f"cast({self.expr(node.expr)}, {self.dotted(node.type_name)})"
        if isinstance(node, A.TimePeriod):
            return self.time_period(node)
        if isinstance(node, A.Subquery):
            return self.subselect(node.query)
        if isinstance(node, A.Exists):
            return f"exists {self.subselect(node.query)}"
        if isinstance(node, A.InSubquery):
            neg = "not " if node.negated else ""
            return f"{self.expr(node.expr, _CONCAT)} {neg}in {self.subselect(node.query)}"
        if isinstance(node, A.Quantified):
            left = _EQ if node.op in ("=", "!=") else _REL
            return (f"{self.expr(node.expr, left)} {node.op} {node.quantifier} "
                    f"{self.subselect(node.query)}")
        return self.node(node)

    def subselect(self, node: A.SubSelect) -> str:
        """``(select ... from ... [where ...] [group by ...] [having ...])``."""
        sel = "select distinct" if node.distinct else "select"
        out = [f"({sel} {self.join(node.select_items)}", f"from {self.node(node.stream)}"]
        out.extend(self.query_tail(node.where, node.group_by, node.having))
        return " ".join(out) + ")"

    def literal(self, node: A.Literal) -> str:
        """Literal text: 5, 5L, 1.5, 'text', true, null."""
        kind, value = node.type, node.value
        if kind == "int":
            return str(int(value))  # type: ignore[call-overload]
        if kind == "long":
            return f"{int(value)}L"  # type: ignore[call-overload]
        if kind == "double":
            number = float(value)  # type: ignore[arg-type]
            if number != number or number in (float("inf"), float("-inf")):
                raise ValueError(f"cannot print double {number!r}")
            text = repr(number)
            return text if any(ch in text for ch in ".eE") else text + ".0"
        if kind == "string":
            return self.string(str(value))
        if kind == "boolean":
            return "true" if value else "false"
        if kind == "null":
            return "null"
        raise ValueError(f"unknown literal type {kind!r}")

    @staticmethod
    def string(value: str) -> str:
        """Single-quoted string with backslash escapes."""
        out = (value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
               .replace("\r", "\\r").replace("\t", "\\t"))
        return f"'{out}'"

    def call(self, node: A.Call) -> str:
        """f(args), count(*), count(distinct x)."""
        if ":" in node.name:
            ns, _, name = node.name.partition(":")
            if not (_IDENT_RE.match(ns) and _IDENT_RE.match(name)):
                raise ValueError(f"cannot print function name {node.name!r}")
            head = node.name
        elif node.name.lower() == "istream" and not node.args and not node.star:
            return "istream()"  # one terminal in the grammar, never a quoted name
        else:
            head = self.dotted(node.name)
        if node.star:
            return f"{head}(*)"
        args = ", ".join(self.arg(a) for a in node.args)
        return f"{head}({'distinct ' if node.distinct else ''}{args})"

    def arg(self, node: A.Node) -> str:
        """Call argument: expression, '*' or 'name: value'."""
        if isinstance(node, A.Star):
            return "*"
        if isinstance(node, A.NamedArg):
            return f"{self.ident(node.name)}: {self.expr(node.value)}"
        return self.expr(node)

    def binary(self, node: A.Binary) -> str:
        """A left-deep operator chain, printed as a loop (chains may be thousands long):
        each operand is parenthesised where it binds looser than its operator needs."""
        first, links = spine(node)
        out = [self.expr(first, _BINARY_PREC[links[0].op])]
        opens = 0
        for i, link in enumerate(links):
            p = _BINARY_PREC[link.op]
            out.append(f" {link.op} {self.expr(link.right, p + 1)}")
            if i + 1 < len(links) and _BINARY_PREC[links[i + 1].op] > p:
                opens += 1  # a looser chain under a tighter operator: (a or b) and c
                out.append(")")
        return "(" * opens + "".join(out)

    def range_text(self, low: A.Node | None, high: A.Node | None) -> str:
        """'a:b', spaced when a bound is not a literal (so 'x:f(' never lexes as ns:f)."""
        lo = self.expr(low) if low is not None else ""
        hi = self.expr(high) if high is not None else ""
        tight = all(b is None or isinstance(b, A.Literal) for b in (low, high))
        return f"{lo}:{hi}" if tight else f"{lo} : {hi}".strip()

    def time_period(self, node: A.TimePeriod) -> str:
        """'2 minute 5 second': the normalised singular unit names stored in the AST."""
        parts = []
        for amount, unit in node.parts:
            if isinstance(amount, A.Literal) and amount.type in ("int", "long", "double"):
                if amount.value < 0:  # type: ignore[operator]
                    raise ValueError("a time period amount cannot be negative")
                parts.append(f"{self.literal(amount)} {unit}")
            elif isinstance(amount, A.Name) and len(amount.parts) == 1:
                parts.append(f"{self.ident(amount.parts[0])} {unit}")
            else:
                raise ValueError("a time period amount must be a number or a variable name")
        return " ".join(parts)

    def p_Star(self, node: A.Star) -> str:
        """'*'."""
        return "*"

    def p_NamedArg(self, node: A.NamedArg) -> str:
        """'name: value'."""
        return self.arg(node)

    def p_SortSpec(self, node: A.SortSpec) -> str:
        """'expr asc|desc'."""
        return f"{self.expr(node.expr)} {'desc' if node.descending else 'asc'}"

    # -- crontab -------------------------------------------------------------------

    def p_Crontab(self, node: A.Crontab) -> str:
        """(f1, f2, ...)."""
        return "(" + ", ".join(self.cron_field(f) for f in node.fields) + ")"

    def cron_field(self, node: A.Node) -> str:
        """One crontab field."""
        if isinstance(node, A.CronStar):
            return "*"
        if isinstance(node, A.CronStep):
            return f"*/{self.expr(node.step)}"
        if isinstance(node, A.CronRange):
            return self.range_text(node.low, node.high)
        if isinstance(node, A.CronList):
            return "[" + ", ".join(self.cron_field(f) for f in node.items) + "]"
        if isinstance(node, A.CronLast):
            return "last" if node.value is None else f"{self.expr(node.value)} last"
        if isinstance(node, A.CronWeekday):
            return f"{self.expr(node.value)} weekday"
        if isinstance(node, A.CronLastWeekday):
            return "lastweekday"
        return self.expr(node)

    p_CronStar = p_CronStep = p_CronRange = p_CronList = cron_field
    p_CronLast = p_CronWeekday = p_CronLastWeekday = cron_field

    # -- patterns ---------------------------------------------------------------------

    def pprec(self, node: A.Node) -> int:
        """Binding strength of a pattern node."""
        if isinstance(node, A.PFollowedBy):
            return _P_FB
        if isinstance(node, A.POr):
            return _P_OR
        if isinstance(node, A.PAnd):
            return _P_AND
        if isinstance(node, A.PRepeat):
            return _P_REPEAT
        if isinstance(node, (A.PEvery, A.PNot, A.PEveryDistinct)):
            return _P_UNARY
        if isinstance(node, (A.PGuard, A.PGuardWhile)):
            return _P_GUARD
        return _P_ATOM

    def pat(self, node: A.Node, min_prec: int = 0) -> str:
        """Pattern text, parenthesised when it binds looser than min_prec."""
        text = self.node(node)
        return f"({text})" if self.pprec(node) < min_prec else text

    def p_PFollowedBy(self, node: A.PFollowedBy) -> str:
        """a -> b."""
        return " -> ".join(self.pat(c, _P_FB + 1) for c in node.children)

    def p_POr(self, node: A.POr) -> str:
        """a or b."""
        return " or ".join(self.pat(c, _P_OR + 1) for c in node.children)

    def p_PAnd(self, node: A.PAnd) -> str:
        """a and b."""
        return " and ".join(self.pat(c, _P_AND + 1) for c in node.children)

    def p_PRepeat(self, node: A.PRepeat) -> str:
        """[n] p, [a:b] p, p until q."""
        out = []
        if node.ranged:
            out.append(f"[{self.range_text(node.low, node.high)}]")
        elif node.low is not None:
            out.append(f"[{self.expr(node.low)}]")
        out.append(self.pat(node.child, _P_UNARY))
        if node.until is not None:
            out.append(f"until {self.pat(node.until, _P_UNARY)}")
        return " ".join(out)

    def p_PEvery(self, node: A.PEvery) -> str:
        """every p."""
        return f"every {self.pat(node.child, _P_UNARY)}"

    def p_PNot(self, node: A.PNot) -> str:
        """not p."""
        return f"not {self.pat(node.child, _P_UNARY)}"

    def p_PEveryDistinct(self, node: A.PEveryDistinct) -> str:
        """every-distinct(exprs[, period]) p."""
        args = [self.expr(e) for e in node.exprs]
        if node.period is not None:
            args.append(self.expr(node.period))
        return f"every-distinct({', '.join(args)}) {self.pat(node.child, _P_UNARY)}"

    def p_PGuard(self, node: A.PGuard) -> str:
        """p where timer:within(period) / timer:withinmax(period, count)."""
        head = self.pat(node.child, _P_GUARD)
        if node.max_count is not None:
            return (f"{head} where timer:withinmax({self.expr(node.period)}, "
                    f"{self.expr(node.max_count)})")
        return f"{head} where timer:within({self.expr(node.period)})"

    def p_PGuardWhile(self, node: A.PGuardWhile) -> str:
        """p while (cond)."""
        return f"{self.pat(node.child, _P_GUARD)} while ({self.expr(node.cond)})"

    def p_PFilter(self, node: A.PFilter) -> str:
        """[tag=]Type[(filter)]."""
        tag = f"{self.ident(node.tag)}=" if node.tag is not None else ""
        return f"{tag}{self.ident(node.type_name)}{self.filter(node.filter)}"

    def p_PTimerInterval(self, node: A.PTimerInterval) -> str:
        """timer:interval(period)."""
        return f"timer:interval({self.expr(node.period)})"

    def p_PTimerAt(self, node: A.PTimerAt) -> str:
        """timer:at(fields)."""
        return "timer:at" + self.p_Crontab(node.crontab)

    def filter(self, expr: A.Node | None) -> str:
        """'(filter)' or ''."""
        return "" if expr is None else f"({self.expr(expr)})"

    # -- clauses ------------------------------------------------------------------------

    def p_Annotation(self, node: A.Annotation) -> str:
        """@name or @name(args)."""
        args = f"({self.exprs(node.args)})" if node.args else ""
        return f"@{self.ident(node.name)}{args}"

    def prefix(self, annotations: tuple[A.Annotation, ...], context: str | None) -> str:
        """Annotations and 'context X' before a statement."""
        parts = [self.p_Annotation(a) for a in annotations]
        if context is not None:
            parts.append(f"context {self.ident(context)}")
        return " ".join(parts) + " " if parts else ""

    def p_ExpressionDecl(self, node: A.ExpressionDecl) -> str:
        """expression name [alias for] {[(params) =>] body}."""
        alias = " alias for" if node.alias else ""
        params = f"({', '.join(node.params)}) => " if node.params else ""
        return f"expression {self.ident(node.name)}{alias} {{{params}{self.expr(node.body)}}}"

    def p_Declared(self, node: A.Declared) -> str:
        """A statement after its expression declarations."""
        return " ".join([*(self.p_ExpressionDecl(d) for d in node.expressions),
                         self.node(node.statement)])

    def p_CreateExpression(self, node: A.CreateExpression) -> str:
        """create expression ..."""
        return self.prefix(node.annotations, None) + "create " + self.p_ExpressionDecl(node.decl)

    def p_SelectItem(self, node: A.SelectItem) -> str:
        """expr [as alias]."""
        alias = f" as {self.ident(node.alias)}" if node.alias is not None else ""
        return self.expr(node.expr) + alias

    def p_Wildcard(self, node: A.Wildcard) -> str:
        """* or s.*."""
        return "*" if node.stream is None else f"{self.ident(node.stream)}.*"

    def p_InsertInto(self, node: A.InsertInto) -> str:
        """insert [kind] into Name [(cols)]."""
        kind = f"{node.stream_kind} " if node.stream_kind else ""
        cols = f"({', '.join(self.ident(c) for c in node.columns)})" if node.columns else ""
        return f"insert {kind}into {self.ident(node.name)}{cols}"

    def p_View(self, node: A.View) -> str:
        """#name(params), #ns:name(params) or .ns:name(params)."""
        params = f"({self.join(node.params)})" if node.params else ""
        name = self.ident(node.name)
        if node.namespace is not None:
            name = f"{self.ident(node.namespace)}:{name}"
            if node.syntax == ".":
                return f".{name}{params}"
        return f"#{name}{params}"

    def stream_tail(self, views: tuple[A.View, ...], alias: str | None, unidirectional: bool,
                    retain: str | None) -> str:
        """Views, alias and flags after a stream source."""
        out = "".join(self.p_View(v) for v in views)
        if alias is not None:
            out += f" as {self.ident(alias)}"
        if unidirectional:
            out += " unidirectional"
        if retain is not None:
            out += f" {retain}"
        return out

    def p_FilterStream(self, node: A.FilterStream) -> str:
        """Type[(filter)]#views [as alias] [unidirectional] [retain-...]."""
        return (self.ident(node.type_name) + self.filter(node.filter)
                + self.stream_tail(node.views, node.alias, node.unidirectional, node.retain))

    def p_PatternStream(self, node: A.PatternStream) -> str:
        """pattern [p]#views [as alias]."""
        return (f"pattern [{self.pat(node.pattern)}]"
                + self.stream_tail(node.views, node.alias, node.unidirectional, node.retain))

    def p_Assignment(self, node: A.Assignment) -> str:
        """target = expr."""
        return f"{self.expr(node.target)} = {self.expr(node.expr)}"

    def assignments(self, items: tuple[A.Assignment, ...]) -> str:
        """a = 1, b = 2."""
        return ", ".join(self.p_Assignment(a) for a in items)

    def then_set(self, items: tuple[A.Assignment, ...]) -> str:
        """' then set ...' or ''."""
        return f" then set {self.assignments(items)}" if items else ""

    def terminated(self, node: A.OutputClause) -> str:
        """'when terminated [and expr] [then set ...]'."""
        cond = f" and {self.expr(node.terminated_and)}" if node.terminated_and is not None else ""
        return f"when terminated{cond}{self.then_set(node.then_set)}"

    def p_OutputClause(self, node: A.OutputClause) -> str:
        """output [after ..] [kind] trigger (Esper ref. 5.7)."""
        out = ["output"]
        if node.after is not None:
            out.append(f"after {self.expr(node.after)}" + (" events" if node.after_events else ""))
        if node.kind:
            out.append(node.kind)
        trigger = None
        if node.every_time is not None:
            trigger = f"every {self.expr(node.every_time)}"
        elif node.every_count is not None:
            trigger = f"every {self.expr(node.every_count)} events"
        elif node.at is not None:
            trigger = "at " + self.p_Crontab(node.at)
        elif node.when is not None:
            own = node.when_set if node.and_when_terminated else node.then_set
            trigger = f"when {self.expr(node.when)}{self.then_set(own)}"
        elif node.when_terminated:
            trigger = self.terminated(node)
        if trigger is not None:
            if node.and_when_terminated and not node.when_terminated:
                trigger += " and " + self.terminated(node)
            out.append(trigger)
        return " ".join(out)

    def p_OrderItem(self, node: A.OrderItem) -> str:
        """expr [desc]."""
        return self.expr(node.expr) + (" desc" if node.descending else "")

    def p_Limit(self, node: A.Limit) -> str:
        """limit n [offset m]."""
        off = f" offset {self.expr(node.offset)}" if node.offset is not None else ""
        return f"limit {self.expr(node.count)}{off}"

    # -- statements -----------------------------------------------------------------------

    def p_SelectStatement(self, node: A.SelectStatement) -> str:
        """Full select statement."""
        out = [self.prefix(node.annotations, node.context).rstrip()]
        if node.insert_into is not None:
            out.append(self.p_InsertInto(node.insert_into))
        if node.into_table is not None:
            out.append(f"into table {self.ident(node.into_table)}")
        sel = "select"
        if node.stream_kind:
            sel += f" {node.stream_kind}"
        if node.distinct:
            sel += " distinct"
        out.append(f"{sel} {self.join(node.select_items)}")
        out.append(f"from {self.from_clause(node.from_, node.joins)}")
        if node.match_recognize is not None:
            out.append(self.p_MatchRecognize(node.match_recognize))
        out.extend(self.query_tail(node.where, node.group_by, node.having))
        if node.output is not None:
            out.append(self.p_OutputClause(node.output))
        if node.order_by:
            out.append(f"order by {self.join(node.order_by)}")
        if node.limit is not None:
            out.append(self.p_Limit(node.limit))
        return " ".join(p for p in out if p)

    def p_MatchRecognize(self, node: A.MatchRecognize) -> str:
        """match_recognize (...) with its clauses in the order of the grammar."""
        out = []
        if node.partition_by:
            out.append(f"partition by {self.exprs(node.partition_by)}")
        out.append("measures " + ", ".join(
            self.expr(m.expr) + (f" as {self.ident(m.name)}" if m.name else "")
            for m in node.measures))
        if node.all_matches:
            out.append("all matches")
        if node.skip != "past last row":
            out.append(f"after match skip {node.skip}")
        out.append(f"pattern ({self.mr_pattern(node.pattern)})")
        if node.interval is not None:
            out.append(f"interval {self.expr(node.interval)}"
                       + (" or terminated" if node.or_terminated else ""))
        if node.defines:
            out.append("define " + ", ".join(f"{self.ident(d.name)} as {self.expr(d.expr)}"
                                             for d in node.defines))
        return f"match_recognize ({' '.join(out)})"

    def mr_pattern(self, node: A.Node) -> str:
        """A row pattern: alternatives, sequences, quantified variables and groups."""
        if isinstance(node, A.MrAlt):
            return " | ".join(self.mr_pattern(a) for a in node.alternatives)
        if isinstance(node, A.MrConcat):
            return " ".join(self.mr_pattern(i) for i in node.items)
        if isinstance(node, A.MrAtom):
            return self.ident(node.name) + node.quantifier + self.mr_repeat(node.repeat)
        if isinstance(node, A.MrPermute):
            return ("match_recognize_permute("
                    + ", ".join(self.mr_pattern(i) for i in node.items) + ")")
        if isinstance(node, A.MrNested):
            return (f"({self.mr_pattern(node.child)})" + node.quantifier
                    + self.mr_repeat(node.repeat))
        raise TypeError(f"cannot print {type(node).__name__}")

    @staticmethod
    def mr_repeat(r: A.MrRepeat | None) -> str:
        if r is None:
            return ""
        if r.exact:
            return f"{{{r.low}}}"
        return "{" + ("" if r.low is None else str(r.low)) + "," + (
            "" if r.high is None else str(r.high)) + "}"

    def from_clause(self, streams: tuple[A.Node, ...], joins: tuple[A.OuterJoin, ...]) -> str:
        """Streams, comma-separated or joined with ``[kind] join ... on ...``."""
        if not joins:
            return self.join(streams)
        out = self.node(streams[0])
        for s, j in zip(streams[1:], joins):
            kind = "inner" if j.kind == "inner" else f"{j.kind} outer"
            out += f" {kind} join {self.node(s)} on {self.expr(j.on)}"
        return out

    def query_tail(self, where: A.Node | None, group_by: tuple[A.Node, ...],
                   having: A.Node | None) -> list[str]:
        """where / group by / having pieces."""
        out = []
        if where is not None:
            out.append(f"where {self.expr(where)}")
        if group_by:
            out.append(f"group by {self.exprs(group_by)}")
        if having is not None:
            out.append(f"having {self.expr(having)}")
        return out

    def fields(self, fields: tuple[tuple[str, str], ...]) -> str:
        """(name type, ...)."""
        return "(" + ", ".join(f"{self.ident(n)} {self.dotted(t)}" for n, t in fields) + ")"

    def p_CreateSchema(self, node: A.CreateSchema) -> str:
        """create schema Name (fields)."""
        return (self.prefix(node.annotations, None)
                + f"create schema {self.ident(node.name)} {self.fields(node.fields)}")

    def p_CreateWindow(self, node: A.CreateWindow) -> str:
        """create window Name#views as ..."""
        out = (self.prefix(node.annotations, node.context)
               + f"create window {self.ident(node.name)}"
               + "".join(self.p_View(v) for v in node.views))
        if node.columns:
            out += f" as {self.fields(node.columns)}"
        elif node.select_items:
            items = self.join(node.select_items)
            out += f" as select {items} from {self.ident(node.type_name or '')}"
        else:
            out += f" as {self.ident(node.type_name or '')}"
        if node.insert:
            out += " insert"
            if node.insert_where is not None:
                out += f" where {self.expr(node.insert_where)}"
        return out

    def p_TableColumn(self, node: A.TableColumn) -> str:
        """name type [primary key] | name agg(type)."""
        if node.aggregation is not None:
            return f"{self.ident(node.name)} {self.call(node.aggregation)}"
        pk = " primary key" if node.primary_key else ""
        return f"{self.ident(node.name)} {self.dotted(node.type_name or '')}{pk}"

    def p_CreateTable(self, node: A.CreateTable) -> str:
        """create table Name (columns)."""
        return (self.prefix(node.annotations, node.context)
                + f"create table {self.ident(node.name)} ({self.join(node.columns)})")

    def p_CreateVariable(self, node: A.CreateVariable) -> str:
        """create [constant] variable type name [= init]."""
        const = "constant " if node.constant else ""
        init = f" = {self.expr(node.init)}" if node.init is not None else ""
        type_name = self.dotted(node.type_name)
        return (self.prefix(node.annotations, node.context)
                + f"create {const}variable {type_name} {self.ident(node.name)}{init}")

    def p_IndexColumn(self, node: A.IndexColumn) -> str:
        """col [kind]."""
        kind = f" {self.ident(node.kind)}" if node.kind is not None else ""
        return self.ident(node.name) + kind

    def p_CreateIndex(self, node: A.CreateIndex) -> str:
        """create [unique] index Name on Window (cols)."""
        unique = "unique " if node.unique else ""
        return (self.prefix(node.annotations, node.context)
                + f"create {unique}index {self.ident(node.name)} on {self.ident(node.window)}"
                + f" ({self.join(node.columns)})")

    # -- on-statements -------------------------------------------------------------------

    def alias(self, alias: str | None) -> str:
        """' as alias' or ''."""
        return f" as {self.ident(alias)}" if alias is not None else ""

    def where(self, where: A.Node | None) -> str:
        """' where expr' or ''."""
        return f" where {self.expr(where)}" if where is not None else ""

    def p_OnStatement(self, node: A.OnStatement) -> str:
        """on trigger action."""
        trig = node.trigger
        if isinstance(trig, A.FilterStream):
            trigger = self.ident(trig.type_name) + self.filter(trig.filter) + self.alias(trig.alias)
        else:
            trigger = f"pattern [{self.pat(trig.pattern)}]" + self.alias(trig.alias)
        action = self.node(node.action)
        return self.prefix(node.annotations, node.context) + f"on {trigger} {action}"

    def p_OnDelete(self, node: A.OnDelete) -> str:
        """delete from W [as w] [where ..]."""
        window = self.ident(node.window)
        return f"delete from {window}{self.alias(node.alias)}{self.where(node.where)}"

    def p_OnSelect(self, node: A.OnSelect) -> str:
        """[insert into ..] select [and delete] [distinct] items from W ..."""
        out = []
        if node.insert_into is not None:
            out.append(self.p_InsertInto(node.insert_into))
        sel = "select"
        if node.and_delete:
            sel += " and delete"
        if node.distinct:
            sel += " distinct"
        out.append(f"{sel} {self.join(node.select_items)}")
        out.append(f"from {self.ident(node.window)}{self.alias(node.alias)}")
        out.extend(self.query_tail(node.where, node.group_by, node.having))
        if node.order_by:
            out.append(f"order by {self.join(node.order_by)}")
        return " ".join(out)

    def p_OnUpdate(self, node: A.OnUpdate) -> str:
        """update W [as w] set ... [where ..]."""
        return (f"update {self.ident(node.window)}{self.alias(node.alias)} set "
                f"{self.assignments(node.assignments)}{self.where(node.where)}")

    def p_OnSet(self, node: A.OnSet) -> str:
        """set var = expr, ..."""
        return f"set {self.assignments(node.assignments)}"

    def p_OnMerge(self, node: A.OnMerge) -> str:
        """merge W [as w] [where ..] clauses."""
        head = f"merge {self.ident(node.window)}{self.alias(node.alias)}{self.where(node.where)}"
        return " ".join([head] + [self.node(c) for c in node.clauses])

    def p_MergeWhen(self, node: A.MergeWhen) -> str:
        """when [not] matched [and cond] then action ..."""
        head = "when matched" if node.matched else "when not matched"
        if node.condition is not None:
            head += f" and {self.expr(node.condition)}"
        return " ".join([head] + [f"then {self.node(a)}" for a in node.actions])

    def p_MergeUpdate(self, node: A.MergeUpdate) -> str:
        """update set ... [where ..]."""
        return f"update set {self.assignments(node.assignments)}{self.where(node.where)}"

    def p_MergeDelete(self, node: A.MergeDelete) -> str:
        """delete [where ..]."""
        return "delete" + self.where(node.where)

    def p_MergeInsert(self, node: A.MergeInsert) -> str:
        """insert [into S] [(cols)] select ... [where ..]."""
        out = "insert"
        if node.into is not None:
            out += f" into {self.ident(node.into)}"
        if node.columns:
            out += f" ({', '.join(self.ident(c) for c in node.columns)})"
        return out + f" select {self.join(node.select_items)}{self.where(node.where)}"

    # -- contexts -----------------------------------------------------------------------

    def p_CreateContext(self, node: A.CreateContext) -> str:
        """create context Name spec."""
        return (self.prefix(node.annotations, None)
                + f"create context {self.ident(node.name)} {self.node(node.spec)}")

    def from_type(self, type_name: str, filter_: A.Node | None) -> str:
        """'from Type[(filter)]'."""
        return f"from {self.ident(type_name)}{self.filter(filter_)}"

    def p_KeyedItem(self, node: A.KeyedItem) -> str:
        """p [and p] from Type[(filter)] [as alias]."""
        props = " and ".join(self.expr(p) for p in node.props)
        return f"{props} {self.from_type(node.type_name, node.filter)}{self.alias(node.alias)}"

    def p_KeyedContext(self, node: A.KeyedContext) -> str:
        """partition by ..."""
        out = "partition by " + self.join(node.items)
        if node.initiated:
            out += " initiated by " + self.join(node.initiated)
        if node.terminated is not None:
            out += f" terminated by {self.node(node.terminated)}"
        return out

    def p_HashItem(self, node: A.HashItem) -> str:
        """f(args) from Type[(filter)]."""
        args = ", ".join(self.arg(a) for a in node.args)
        return f"{self.ident(node.function)}({args}) {self.from_type(node.type_name, node.filter)}"

    def p_HashContext(self, node: A.HashContext) -> str:
        """coalesce by ... granularity N [preallocate]."""
        out = f"coalesce by {self.join(node.items)} granularity {self.expr(node.granularity)}"
        return out + (" preallocate" if node.preallocate else "")

    def p_CategoryGroup(self, node: A.CategoryGroup) -> str:
        """group expr as label."""
        return f"group {self.expr(node.expr)} as {self.ident(node.label)}"

    def p_CategoryContext(self, node: A.CategoryContext) -> str:
        """group ..., group ... from Type."""
        return f"{self.join(node.groups)} {self.from_type(node.type_name, node.filter)}"

    def p_NonOverlappingContext(self, node: A.NonOverlappingContext) -> str:
        """start cond [end cond]."""
        out = f"start {self.node(node.start)}"
        return out + (f" end {self.node(node.end)}" if node.end is not None else "")

    def p_OverlappingContext(self, node: A.OverlappingContext) -> str:
        """initiated by [distinct (..)] cond [terminated by cond]."""
        out = "initiated by "
        if node.distinct:
            out += f"distinct ({self.exprs(node.distinct)}) "
        out += self.node(node.initiated)
        if node.terminated is not None:
            out += f" terminated by {self.node(node.terminated)}"
        return out

    def p_NestedItem(self, node: A.NestedItem) -> str:
        """context Name spec."""
        return f"context {self.ident(node.name)} {self.node(node.spec)}"

    def p_NestedContext(self, node: A.NestedContext) -> str:
        """context A ..., context B ..."""
        return self.join(node.contexts)

    def p_CondFilter(self, node: A.CondFilter) -> str:
        """Type[(filter)] [as alias]."""
        return self.ident(node.type_name) + self.filter(node.filter) + self.alias(node.alias)

    def p_CondPattern(self, node: A.CondPattern) -> str:
        """pattern [..] [@inclusive] [as alias]."""
        out = f"pattern [{self.pat(node.pattern)}]"
        if node.inclusive:
            out += " @inclusive"
        return out + self.alias(node.alias)

    def p_CondCrontab(self, node: A.CondCrontab) -> str:
        """(crontab)."""
        return self.p_Crontab(node.crontab)

    def p_CondAfter(self, node: A.CondAfter) -> str:
        """after period."""
        return f"after {self.expr(node.period)}"

    def p_CondNow(self, node: A.CondNow) -> str:
        """@now."""
        return "@now"

    def p_CondNowAnd(self, node: A.CondNowAnd) -> str:
        """@now and cond."""
        return f"@now and {self.node(node.cond)}"

    # -- Apama and modules ---------------------------------------------------------------

    def p_ApamaQuery(self, node: A.ApamaQuery) -> str:
        """from v in s within D every P retain N select [rstream] items (Apama batched windows)."""
        out = self.prefix(node.annotations, None)
        out += f"from {self.ident(node.item)} in {self.ident(node.stream)}"
        if node.within is not None:
            out += f" within {self.expr(node.within)}"
            if node.every is not None:
                out += f" every {self.expr(node.every)}"
            if node.retain is not None:
                out += f" retain {self.expr(node.retain)}"
        elif node.retain is not None:
            out += f" retain {self.expr(node.retain)}"
            if node.every is not None:
                out += f" every {self.expr(node.every)}"
        elif node.every is not None:
            raise ValueError("an Apama 'every' needs 'within' or 'retain'")
        out += " select" + (" rstream" if node.rstream else "")
        return out + f" {self.join(node.select_items)}"

    def p_Module(self, node: A.Module) -> str:
        """Statements separated by ';' and newlines."""
        return ";\n".join(self.node(s) for s in node.statements) + (";" if node.statements else "")


_METHODS: dict[type[A.Node], Callable[..., str]] = {
    getattr(A, name[2:]): method
    for name, method in vars(_Printer).items() if name.startswith("p_")
}
"""The printing method of each node class (``p_<class name>``; a misnamed method fails
here, at import)."""

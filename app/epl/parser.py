"""EPL parser: text -> app.epl.ast nodes, via one cached LALR lark parser.

Public API: parse_statement, parse_module, parse_expression, parse_pattern,
reserved_words. Any input either parses or raises EplSyntaxError (with line,
column, the source line and a hint); no other exception escapes.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer_NonRecursive, Tree
from lark.exceptions import (
    LarkError,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)
from lark.lexer import PatternStr

from app.epl import ast as A
from app.epl.errors import EplSyntaxError, closest
from app.epl.walk import MAX_DEPTH, too_deep

__all__ = [
    "parse_statement",
    "parse_module",
    "parse_expression",
    "parse_pattern",
    "keywords",
    "reserved_words",
    "source_text",
]

_GRAMMAR_PATH = Path(__file__).with_name("grammar.lark")
_UNITS_SPELLINGS = (
    "year", "years", "month", "months", "week", "weeks", "day", "days", "hour", "hours",
    "minute", "minutes", "min", "second", "seconds", "sec", "millisecond", "milliseconds",
    "msec", "microsecond", "microseconds", "usec",
)
_STARTS = ["single_start", "module_start", "expr_start", "pattern_start"]
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LONG_MAX = (1 << 63) - 1


class _WholeWords:
    """Post-lexer that only makes NAME lexable in every parser state.

    Keywords are string terminals, which match as prefixes ('groupby' would lex
    as 'group' 'by' where no name is expected). With NAME always accepted the
    lexer reads the whole word first and turns it into a keyword only when it
    is exactly one, so 'groupby' is reported as an unexpected word.
    """

    always_accept = ("NAME",)

    def process(self, stream: Iterable[Token]) -> Iterable[Token]:
        """Pass tokens through unchanged."""
        return stream


@functools.cache
def _lark() -> Lark:
    """Build the LALR parser once per process (grammar.lark; see its header); its tables
    come from the user's cache directory after the first run (app.epl.lark_cache)."""
    from app.epl.lark_cache import cached_lark

    return cached_lark(
        "epl",
        _GRAMMAR_PATH.read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
        start=_STARTS,
        postlex=_WholeWords(),
    )


# --------------------------------------------------------------------- public API


def parse_statement(text: str) -> A.Statement:
    """Parse exactly one statement (an optional trailing ';' is allowed)."""
    if not isinstance(text, str):
        raise EplSyntaxError("statement text must be a string", 1, 1, "", None)
    if not _has_content(text):
        raise EplSyntaxError("empty statement", 1, 1, text, "write a statement such as "
                             "'select * from MyEvent'")
    return _run(text, "single_start")


def parse_module(text: str) -> list[A.Statement]:
    """Parse ';'-separated statements; empty statements are skipped."""
    if not isinstance(text, str):
        raise EplSyntaxError("module text must be a string", 1, 1, "", None)
    return list(_run(text, "module_start"))


def parse_expression(text: str) -> A.Node:
    """Parse a single expression such as ``a.b + 1 > 3``."""
    if not isinstance(text, str):
        raise EplSyntaxError("expression text must be a string", 1, 1, "", None)
    return _run(text, "expr_start")


def parse_pattern(text: str) -> A.Node:
    """Parse a pattern expression (the text between ``pattern [`` and ``]``)."""
    if not isinstance(text, str):
        raise EplSyntaxError("pattern text must be a string", 1, 1, "", None)
    return _run(text, "pattern_start")


def source_text(text: str, pos: A.Pos) -> str:
    """The slice of text that a node's pos covers (e.g. an expression as written)."""
    if pos.line <= 0:
        return ""
    lines = text.split("\n")  # lark counts lines by '\n' only
    start = sum(len(line) + 1 for line in lines[: pos.line - 1]) + pos.column - 1
    end = sum(len(line) + 1 for line in lines[: pos.end_line - 1]) + pos.end_column - 1
    return text[start:end]


@functools.cache
def keywords() -> frozenset[str]:
    """Every keyword spelling of the grammar, lower case."""
    return frozenset(
        t.pattern.value.lower()
        for t in _lark().terminals
        if isinstance(t.pattern, PatternStr) and _IDENT_RE.match(t.pattern.value)
    )


@functools.cache
def reserved_words() -> frozenset[str]:
    """Keywords that the lexer prefers over an identifier somewhere in the grammar.

    A keyword only shadows an identifier in a parser state that accepts both
    (contextual lexer), so this is computed from the LALR table; the printer
    back-quotes identifiers in this set.
    """
    lark = _lark()
    words: dict[str, str] = {}
    for term in lark.terminals:
        pattern = term.pattern
        if isinstance(pattern, PatternStr) and _IDENT_RE.match(pattern.value):
            words[term.name] = pattern.value.lower()
    table = lark.parser.parser.parser.parse_table  # LALR_Parser -> _Parser -> table
    reserved: set[str] = set()
    for actions in table.states.values():
        names = set(actions)
        if "NAME" in names:
            reserved.update(words[n] for n in names if n in words)
    return frozenset(reserved)


# ------------------------------------------------------------------ driving lark


def _has_content(text: str) -> bool:
    """True when text holds anything besides whitespace, comments and ';'."""
    stripped = re.sub(r"//[^\n]*|/\*.*?\*/|[\s;]", "", text, flags=re.S)
    return bool(stripped)


def _run(text: str, start: str) -> Any:
    """Parse text from the given start symbol and build the AST, mapping every error."""
    try:
        tree = _lark().parse(text, start=start)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text) from None
    except LarkError as exc:  # pragma: no cover - defensive, lark internals
        raise EplSyntaxError(f"cannot parse: {exc}", 1, 1, text) from None
    except RecursionError:  # pragma: no cover - the LALR driver is iterative
        raise EplSyntaxError("statement is nested too deeply", 1, 1, text) from None
    try:
        built = _Builder(text).transform(tree)
    except VisitError as exc:
        orig = exc.orig_exc
        if isinstance(orig, EplSyntaxError):
            raise orig from None
        raise EplSyntaxError(f"cannot build syntax tree: {orig!r}", 1, 1, text) from None
    except EplSyntaxError:
        raise
    except RecursionError:
        raise EplSyntaxError("statement is nested too deeply", 1, 1, text) from None
    except Exception as exc:  # noqa: BLE001 - contract: only EplSyntaxError escapes
        raise EplSyntaxError(f"cannot build syntax tree: {exc!r}", 1, 1, text) from None
    _check_depth(built, text)
    return built


def _check_depth(built: Any, text: str) -> None:
    """Refuse nesting deeper than the compiler follows (long operator chains are fine)."""
    for root in built if isinstance(built, list | tuple) else (built,):
        deep = too_deep(root)
        if deep is not None:
            pos = getattr(deep, "pos", A.NOPOS)
            raise EplSyntaxError(f"expression nested too deeply (more than {MAX_DEPTH} "
                                 "levels)", pos.line or 1, pos.column or 1, text,
                                 "split it with variables or simpler sub-expressions")


# Plain-word descriptions of regex terminals for 'expected ...' hints.
_TERMINAL_WORDS = {
    "NAME": "a name",
    "BQNAME": "a name",
    "NUMBER": "a number",
    "STRING": "a string",
    "COLON_NAME": "a 'namespace:function(...)'",
    "EVERY_DISTINCT": "'every-distinct'",
    "RETAIN_UNION": "'retain-union'",
    "RETAIN_INTERSECTION": "'retain-intersection'",
    "JOIN_LEFT": "'left outer join'",
    "JOIN_RIGHT": "'right outer join'",
    "JOIN_FULL": "'full outer join'",
    "JOIN_INNER": "'inner join'",
    "JOIN": "'join'",
    "COMMA_CONTEXT": "', context'",
    "$END": "end of input",
}


def _describe_terminal(name: str) -> str:
    """Plain words for a terminal name: keywords and punctuation quoted as written."""
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    try:
        term = _lark().get_terminal(name)
    except KeyError:
        return name.lower()
    if isinstance(term.pattern, PatternStr):
        return f"'{term.pattern.value}'"
    return name.lower()


_UNIT_WORDS = frozenset(f"'{u}'" for u in _UNITS_SPELLINGS)


def _expected_words(expected: Iterable[str]) -> list[str]:
    """Sorted, de-duplicated descriptions of the expected terminals (words first).

    The many time-unit spellings are summarised as 'a time unit'.
    """
    words = {_describe_terminal(n) for n in expected}
    if words & _UNIT_WORDS:
        words = (words - _UNIT_WORDS) | {"a time unit"}
    return sorted(words, key=lambda w: (not w.startswith("'") or not w[1:2].isalpha(), w))


def _keyword_candidates(expected: Iterable[str]) -> list[str]:
    """The expected terminals that are keywords, as lower-case words."""
    out = []
    for name in expected:
        try:
            term = _lark().get_terminal(name)
        except KeyError:
            continue
        if isinstance(term.pattern, PatternStr) and _IDENT_RE.match(term.pattern.value):
            out.append(term.pattern.value.lower())
        elif name in ("EVERY_DISTINCT", "RETAIN_UNION", "RETAIN_INTERSECTION"):
            out.append(_TERMINAL_WORDS[name].strip("'"))
    return out


def _hint_for(expected: Iterable[str], word: str | None) -> str | None:
    """'did you mean' for a misspelt keyword, else the expected tokens in plain words."""
    expected = list(expected)
    if word and _IDENT_RE.match(word):
        guess = closest(word, _keyword_candidates(expected), cutoff=0.7)
        if guess and guess.lower() != word.lower():
            return f"did you mean '{guess}'?"
    words = _expected_words(expected)
    if not words:
        return None
    shown = ", ".join(words[:14])
    more = f" (and {len(words) - 14} more)" if len(words) > 14 else ""
    return f"expected {shown}{more}" if len(words) == 1 else f"expected one of {shown}{more}"


def _syntax_error(exc: UnexpectedInput, text: str) -> EplSyntaxError:
    """Translate a lark UnexpectedInput into an EplSyntaxError with a hint."""
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        expected = set(exc.expected or ())
        if token.type == "$END":
            line, column = _end_position(text)
            return EplSyntaxError("unexpected end of input", line, column, text,
                                  _hint_for(expected, None))
        value = str(token.value)
        first = value.split("\n", 1)[0].rstrip("\r")  # the message stays on one line
        shown = value if len(value) <= 40 and first == value else first[:37] + "..."
        line = token.line if token.line is not None else 1
        column = token.column if token.column is not None else 1
        slip = _alias_slip(text, token.start_pos, value, expected)
        if slip is not None:
            return slip
        return EplSyntaxError(f"unexpected '{shown}'", line, column, text,
                              _hint_for(expected, value))
    if isinstance(exc, UnexpectedCharacters):
        char = text[exc.pos_in_stream] if 0 <= exc.pos_in_stream < len(text) else "?"
        message = f"unexpected character {char!r}"
        if char in "'\"":
            message = "unterminated string"
        elif char == "`":
            message = "unterminated back-quoted name"
        return EplSyntaxError(message, exc.line, exc.column, text,
                              _hint_for(exc.allowed or (), _word_at(text, exc.pos_in_stream)))
    if isinstance(exc, UnexpectedEOF):
        line, column = _end_position(text)
        return EplSyntaxError("unexpected end of input", line, column, text,
                              _hint_for(exc.expected or (), None))
    line = getattr(exc, "line", 1) or 1
    column = getattr(exc, "column", 1) or 1
    return EplSyntaxError("syntax error", line, column, text)


_SLIP_KEYWORDS = ("terminated", "initiated", "end", "output", "where", "unidirectional")
"""Keywords that follow a filter, where a misspelling reads as a bare stream name."""


def _alias_slip(text: str, pos: int | None, value: str, expected: set[str]
                ) -> EplSyntaxError | None:
    """A word taken as a stream name without 'as' that is a misspelt keyword (``A
    terminatd after 1 sec``): the error is reported at that word, not at the next one."""
    if pos is None or (_IDENT_RE.match(value) and
                       closest(value, _keyword_candidates(expected), cutoff=0.7)):
        return None
    m = re.search(r"(?<![A-Za-z0-9_.`])([A-Za-z_][A-Za-z0-9_]*)\s*$", text[:pos])
    if m is None or m.group(1).lower() in _SLIP_KEYWORDS:
        return None
    guess = closest(m.group(1), list(_SLIP_KEYWORDS), cutoff=0.8)
    if guess is None:
        return None
    start = m.start(1)
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return EplSyntaxError(f"unexpected '{m.group(1)}'", line, column, text,
                          f"did you mean '{guess}'?")


def _word_at(text: str, pos: int) -> str | None:
    """The identifier-like word starting at pos, if any."""
    match = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(text, pos)
    return match.group(0) if match else None


def _end_position(text: str) -> tuple[int, int]:
    """Line and column just after the last non-blank character of text."""
    trimmed = text.rstrip()
    line = trimmed.count("\n") + 1
    column = len(trimmed) - (trimmed.rfind("\n") + 1) + 1
    return line, column


# ---------------------------------------------------------------- tree building


@dataclasses.dataclass(frozen=True, slots=True)
class _Alias:
    """Stream alias while building (tells an alias apart from a type name)."""

    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class _Flag:
    """A keyword flag while building (unidirectional, primary key, ...)."""

    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class _Wrapped:
    """A tagged intermediate value while building (filter, args, clause pieces)."""

    tag: str
    value: Any


@dataclasses.dataclass(frozen=True, slots=True)
class _ViewName:
    """Namespace and name of a data window while building."""

    namespace: str | None
    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class _At:
    """``@word`` (now / inclusive) while building, with its position for errors."""

    word: str
    pos: A.Pos


_UNITS = {
    "year": "year", "years": "year",
    "month": "month", "months": "month",
    "week": "week", "weeks": "week",
    "day": "day", "days": "day",
    "hour": "hour", "hours": "hour",
    "minute": "minute", "minutes": "minute", "min": "minute",
    "second": "second", "seconds": "second", "sec": "second",
    "millisecond": "millisecond", "milliseconds": "millisecond", "msec": "millisecond",
    "microsecond": "microsecond", "microseconds": "microsecond", "usec": "microsecond",
}

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)

_OBSERVERS = ("timer:interval", "timer:at")
_GUARDS = ("timer:within",)


def _unescape(body: str) -> str:
    """Resolve backslash escapes of a string literal body (\\n, \\', \\uXXXX, ...)."""

    def repl(match: re.Match[str]) -> str:
        esc = match.group(1)
        if len(esc) == 5 and esc[0] == "u":
            return chr(int(esc[1:], 16))
        return _ESCAPES.get(esc, esc)

    return _ESCAPE_RE.sub(repl, body)


def _present(children: Iterable[Any]) -> list[Any]:
    """Children without maybe_placeholders' None and without punctuation tokens."""
    return [c for c in children if c is not None and not isinstance(c, Token)]


def _first(children: Iterable[Any], kind: type | tuple[type, ...]) -> Any:
    """First child of the given type, or None."""
    for child in children:
        if isinstance(child, kind):
            return child
    return None


def _all(children: Iterable[Any], kind: type | tuple[type, ...]) -> tuple[Any, ...]:
    """All children of the given type, in order."""
    return tuple(c for c in children if isinstance(c, kind))


def _wrapped(children: Iterable[Any], tag: str) -> Any:
    """Value of the first _Wrapped child with this tag, else None."""
    for child in children:
        if isinstance(child, _Wrapped) and child.tag == tag:
            return child.value
    return None


def _flag(children: Iterable[Any], name: str) -> bool:
    """True when a _Flag of this name is among the children."""
    return any(isinstance(c, _Flag) and c.name == name for c in children)


def _alias(children: Iterable[Any]) -> str | None:
    """The stream alias among the children, if any."""
    found = _first(children, _Alias)
    return found.name if found else None


def _and_all(exprs: Sequence[A.Node], pos: A.Pos) -> A.Node | None:
    """Fold a comma filter list into left-associative 'and' (000 §4.2.7.1 filter lists)."""
    if not exprs:
        return None
    result = exprs[0]
    for expr in exprs[1:]:
        result = A.Binary("and", result, expr, pos=pos)
    return result


class _Builder(Transformer_NonRecursive):
    """lark tree -> app.epl.ast; one method per grammar rule or alias."""

    def __init__(self, text: str) -> None:
        """Keep the source for error messages raised while building."""
        super().__init__(visit_tokens=False)
        self._text = text

    # -- plumbing -------------------------------------------------------------

    def _call_userfunc(self, tree: Tree, new_children: list[Any] | None = None) -> Any:
        """Call the rule method with (children, pos) so each node gets its span."""
        children = new_children if new_children is not None else tree.children
        name = tree.data
        rule = name.value if isinstance(name, Token) else name
        func = getattr(self, "r_" + rule, None)
        if func is None:
            raise EplSyntaxError(f"unsupported construct '{rule}'", *self._at(tree), self._text)
        return func(children, self._pos(tree))

    @staticmethod
    def _pos(tree: Tree) -> A.Pos:
        """Pos of a tree from lark's propagated meta."""
        meta = tree.meta
        if getattr(meta, "empty", True):
            return A.NOPOS
        return A.Pos(meta.line, meta.column, meta.end_line, meta.end_column)

    @staticmethod
    def _at(tree: Tree) -> tuple[int, int]:
        """Line and column of a tree, for errors."""
        meta = tree.meta
        if getattr(meta, "empty", True):
            return 1, 1
        return meta.line, meta.column

    def _error(self, message: str, pos: A.Pos, hint: str | None = None) -> EplSyntaxError:
        """An EplSyntaxError at pos."""
        return EplSyntaxError(message, pos.line or 1, pos.column or 1, self._text, hint)

    # -- entry points -----------------------------------------------------------

    def r_single_start(self, c: list[Any], pos: A.Pos) -> Any:
        """The one statement."""
        return _present(c)[0]

    def r_module_start(self, c: list[Any], pos: A.Pos) -> list[Any]:
        """All statements in order."""
        return _present(c)

    def r_expr_start(self, c: list[Any], pos: A.Pos) -> Any:
        """The expression."""
        return _present(c)[0]

    def r_pattern_start(self, c: list[Any], pos: A.Pos) -> Any:
        """The pattern."""
        return _present(c)[0]

    # -- statement frame --------------------------------------------------------

    def r_statement(self, c: list[Any], pos: A.Pos) -> Any:
        """Attach leading annotations and the 'context X' prefix to the statement body."""
        items = _present(c)
        annotations = _all(items, A.Annotation)
        ctx = _wrapped(items, "context")
        body = items[-1]
        changes: dict[str, Any] = {"pos": pos}
        if annotations:
            changes["annotations"] = annotations
        if ctx is not None:
            changes["context"] = ctx
        return dataclasses.replace(body, **changes)

    def r_ctx_prefix(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """'context Name' prefix."""
        return _Wrapped("context", _present(c)[0])

    def r_annotation(self, c: list[Any], pos: A.Pos) -> A.Annotation:
        """@name or @name(args)."""
        items = _present(c)
        args = _wrapped(items, "args") or ()
        return A.Annotation(items[0], args, pos=pos)

    def r_annotation_args(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """Annotation argument list."""
        return _Wrapped("args", tuple(_present(c)))

    def r_ident(self, c: list[Any], pos: A.Pos) -> str:
        """Identifier text; back-quotes removed."""
        tok = c[0]
        if tok.type == "BQNAME":
            return str(tok.value)[1:-1]
        return str(tok.value)

    # -- select -------------------------------------------------------------------

    def r_select_stmt(self, c: list[Any], pos: A.Pos) -> A.SelectStatement:
        """Select statement with all its clauses."""
        items = _present(c)
        sel = _wrapped(items, "select")
        out = _first(items, A.OutputClause)
        limit = _first(items, A.Limit)
        streams, joins = _wrapped(items, "from") or ((), ())
        return A.SelectStatement(
            insert_into=_first(items, A.InsertInto),
            into_table=_wrapped(items, "into_table"),
            stream_kind=sel["kind"],
            distinct=sel["distinct"],
            select_items=sel["items"],
            from_=streams,
            joins=joins,
            where=_wrapped(items, "where"),
            group_by=_wrapped(items, "group_by") or (),
            having=_wrapped(items, "having"),
            output=out,
            order_by=_wrapped(items, "order_by") or (),
            limit=limit,
            pos=pos,
        )

    def r_insert_into(self, c: list[Any], pos: A.Pos) -> A.InsertInto:
        """insert [kind] into Name [(cols)]."""
        items = _present(c)
        kind = _wrapped(items, "kind")
        name = _first(items, str)
        cols = _wrapped(items, "columns") or ()
        return A.InsertInto(kind, name, cols, pos=pos)

    def r_column_list(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """(a, b, c) column names."""
        return _Wrapped("columns", tuple(_present(c)))

    def r_into_table(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """into table Name."""
        return _Wrapped("into_table", _present(c)[0])

    def r_stream_kind(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """istream / rstream / irstream, lower-cased."""
        return _Wrapped("kind", str(c[0].value).lower())

    def r_rstream_kw(self, c: list[Any], pos: A.Pos) -> _Flag:
        """Apama 'select rstream'."""
        return _Flag("rstream")

    def r_distinct_kw(self, c: list[Any], pos: A.Pos) -> _Flag:
        """'distinct' keyword."""
        return _Flag("distinct")

    def r_select_clause(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """select [kind] [distinct] items."""
        items = _present(c)
        return _Wrapped("select", {
            "kind": _wrapped(items, "kind"),
            "distinct": _flag(items, "distinct"),
            "items": _wrapped(items, "select_list"),
        })

    def r_select_list(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """Select list items."""
        return _Wrapped("select_list", tuple(_present(c)))

    def r_wildcard_all(self, c: list[Any], pos: A.Pos) -> A.Wildcard:
        """'*'."""
        return A.Wildcard(None, pos=pos)

    def r_wildcard_stream(self, c: list[Any], pos: A.Pos) -> A.Wildcard:
        """'alias.*'."""
        return A.Wildcard(_present(c)[0], pos=pos)

    def r_select_expr(self, c: list[Any], pos: A.Pos) -> A.SelectItem:
        """expr [as alias]."""
        items = _present(c)
        alias = items[1] if len(items) > 1 else None
        return A.SelectItem(items[0], alias, pos=pos)

    def r_from_clause(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """Streams of the from clause; with ``join ... on`` the qualifiers as well."""
        items = _present(c)
        joins = tuple(i for i in items if isinstance(i, tuple))
        if not joins:
            return _Wrapped("from", (tuple(items), ()))
        return _Wrapped("from", ((items[0], *(s for s, _ in joins)),
                                 tuple(j for _, j in joins)))

    def r_outer_join(self, c: list[Any], pos: A.Pos) -> tuple[Any, A.OuterJoin]:
        """[kind] join stream on expr: (stream, qualifier)."""
        return c[1], A.OuterJoin(c[0], c[2], pos=pos)

    def r_join_left(self, c: list[Any], pos: A.Pos) -> str:
        return "left"

    def r_join_right(self, c: list[Any], pos: A.Pos) -> str:
        return "right"

    def r_join_full(self, c: list[Any], pos: A.Pos) -> str:
        return "full"

    def r_join_inner(self, c: list[Any], pos: A.Pos) -> str:
        return "inner"

    def r_stream_alias(self, c: list[Any], pos: A.Pos) -> _Alias:
        """[as] alias."""
        return _Alias(_present(c)[0])

    def r_unidirectional_kw(self, c: list[Any], pos: A.Pos) -> _Flag:
        """'unidirectional'."""
        return _Flag("unidirectional")

    def r_retain_kw(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """retain-union / retain-intersection, lower-cased."""
        return _Wrapped("retain", str(c[0].value).lower())

    def r_filter(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """Filter list folded into one conjunction."""
        return _Wrapped("filter", _and_all(_present(c), pos))

    def r_filter_stream(self, c: list[Any], pos: A.Pos) -> A.FilterStream:
        """Type[(filter)]#views [as alias] [unidirectional] [retain-...]."""
        items = _present(c)
        return A.FilterStream(
            type_name=items[0],
            filter=_wrapped(items, "filter"),
            views=_all(items, A.View),
            alias=_alias(items),
            retain=_wrapped(items, "retain"),
            unidirectional=_flag(items, "unidirectional"),
            pos=pos,
        )

    def r_pattern_stream(self, c: list[Any], pos: A.Pos) -> A.PatternStream:
        """pattern [ ... ]#views [as alias] ..."""
        items = _present(c)
        return A.PatternStream(
            pattern=items[0],
            alias=_alias(items),
            views=_all(items, A.View),
            retain=_wrapped(items, "retain"),
            unidirectional=_flag(items, "unidirectional"),
            pos=pos,
        )

    def _view(self, c: list[Any], pos: A.Pos, syntax: str) -> A.View:
        """Shared body of #view and .ns:view."""
        name_part = c[0] if isinstance(c[0], (Token, _ViewName)) else _first(c, _ViewName)
        if isinstance(name_part, Token):  # COLON_NAME 'ns:name' followed by '('
            ns, _, name = str(name_part.value).partition(":")
            view_name = _ViewName(ns, name)
        else:
            view_name = name_part
        params = tuple(p for p in c[1:] if p is not None and not isinstance(p, Token))
        return A.View(view_name.namespace, view_name.name, params, syntax=syntax, pos=pos)

    def r_view_hash(self, c: list[Any], pos: A.Pos) -> A.View:
        """#name(params) or #ns:name(params) (001 §14.1)."""
        return self._view(c, pos, "#")

    def r_view_dot(self, c: list[Any], pos: A.Pos) -> A.View:
        """.ns:name(params), the older spelling (001 §14.1)."""
        return self._view(c, pos, ".")

    def r_view_plain(self, c: list[Any], pos: A.Pos) -> _ViewName:
        """Window name without namespace."""
        return _ViewName(None, _present(c)[0])

    def r_view_ns(self, c: list[Any], pos: A.Pos) -> _ViewName:
        """ns:name written with separate tokens (no parameters follow)."""
        items = _present(c)
        return _ViewName(items[0], items[1])

    def r_vp_expr(self, c: list[Any], pos: A.Pos) -> A.Node:
        """Window parameter expression."""
        return _present(c)[0]

    def r_vp_sort(self, c: list[Any], pos: A.Pos) -> A.SortSpec:
        """Window sort criterion 'expr asc|desc' (001 §14.3.19)."""
        items = _present(c)
        return A.SortSpec(items[0], items[1].value, pos=pos)

    def r_vp_star(self, c: list[Any], pos: A.Pos) -> A.Star:
        """'*' window parameter (001 §14.4 size/uni/linest)."""
        return A.Star(pos=pos)

    def r_sort_dir(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """asc / desc -> descending flag."""
        return _Wrapped("desc", str(c[0].value).lower() == "desc")

    def r_where_clause(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """where expr."""
        return _Wrapped("where", _present(c)[0])

    def r_group_by_clause(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """group by exprs."""
        return _Wrapped("group_by", tuple(_present(c)))

    def r_having_clause(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """having expr."""
        return _Wrapped("having", _present(c)[0])

    def r_order_by_clause(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """order by items."""
        return _Wrapped("order_by", tuple(_present(c)))

    def r_order_item(self, c: list[Any], pos: A.Pos) -> A.OrderItem:
        """expr [asc|desc]."""
        items = _present(c)
        desc = _wrapped(items, "desc")
        return A.OrderItem(items[0], bool(desc), pos=pos)

    def r_limit_offset(self, c: list[Any], pos: A.Pos) -> A.Limit:
        """limit n [offset m]."""
        items = _present(c)
        return A.Limit(items[0], items[1] if len(items) > 1 else None, pos=pos)

    def r_limit_comma(self, c: list[Any], pos: A.Pos) -> A.Limit:
        """limit m, n means offset m, count n (Esper §5.11)."""
        items = _present(c)
        return A.Limit(items[1], items[0], pos=pos)

    # -- output -----------------------------------------------------------------

    def r_output_clause(self, c: list[Any], pos: A.Pos) -> A.OutputClause:
        """output [after ..] [all|first|last|snapshot] trigger (Esper §5.7, 000 §4.5)."""
        items = _present(c)
        kwargs: dict[str, Any] = {}
        for item in items:
            if isinstance(item, _Wrapped) and item.tag == "output_kind":
                kwargs["kind"] = item.value
            elif isinstance(item, _Wrapped) and item.tag == "output":
                kwargs.update(item.value)
        return A.OutputClause(**kwargs, pos=pos)

    def r_output_kind(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """all / first / last / snapshot."""
        return _Wrapped("output_kind", str(c[0].value).lower())

    def r_after_time(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """output after <time period>."""
        return _Wrapped("output", {"after": _present(c)[0], "after_events": False})

    def r_after_events(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """output after N events."""
        return _Wrapped("output", {"after": _present(c)[0], "after_events": True})

    def _with_terminated(self, base: dict[str, Any], items: list[Any]) -> _Wrapped:
        """Merge an optional 'and when terminated ...' part into the trigger fields."""
        term = _wrapped(items, "and_terminated")
        if term is not None:
            base.update(term)
        return _Wrapped("output", base)

    def r_every_time(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """every <time period> [and when terminated]."""
        items = _present(c)
        return self._with_terminated({"every_time": items[0]}, items)

    def r_every_events(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """every N events [and when terminated]."""
        items = _present(c)
        return self._with_terminated({"every_count": items[0], "every_unit": "events"}, items)

    def r_out_at(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """at (crontab) [and when terminated]."""
        items = _present(c)
        return self._with_terminated({"at": items[0]}, items)

    def r_out_when(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """when expr [then set ...]."""
        items = _present(c)
        return _Wrapped("output", {"when": items[0],
                                   "then_set": _wrapped(items, "then_set") or ()})

    def r_out_terminated(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """when terminated [and expr] [then set ...] (000 §4.5)."""
        items = _present(c)
        cond = next((i for i in items if isinstance(i, A.Node)), None)
        return _Wrapped("output", {"when_terminated": True, "terminated_and": cond,
                                   "then_set": _wrapped(items, "then_set") or ()})

    def r_and_terminated(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """and when terminated [and expr] [then set ...] (000 §4.5)."""
        items = _present(c)
        cond = next((i for i in items if isinstance(i, A.Node)), None)
        return _Wrapped("and_terminated", {"and_when_terminated": True, "terminated_and": cond,
                                           "then_set": _wrapped(items, "then_set") or ()})

    def r_then_set(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """then set a = x, b = y."""
        return _Wrapped("then_set", tuple(_present(c)))

    def r_assignment(self, c: list[Any], pos: A.Pos) -> A.Assignment:
        """target = expr."""
        items = _present(c)
        return A.Assignment(items[0], items[1], pos=pos)

    def r_int_literal(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """Number used as a count."""
        return self._number(c[0], pos)

    # -- create forms ------------------------------------------------------------

    def r_create_schema(self, c: list[Any], pos: A.Pos) -> A.CreateSchema:
        """create schema Name [as] (fields)."""
        items = _present(c)
        fields = tuple(i.value for i in items if isinstance(i, _Wrapped) and i.tag == "field")
        return A.CreateSchema((), items[0], fields, pos=pos)

    def r_schema_field(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """prop type."""
        items = _present(c)
        return _Wrapped("field", (items[0], items[1].value))

    def r_type_name(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """Dotted type name with optional [] suffix, as one string."""
        items = _present(c)
        text = ".".join(items[0].parts)
        if _flag(items, "array"):
            text += "[]"
        return _Wrapped("type", text)

    def r_array_kw(self, c: list[Any], pos: A.Pos) -> _Flag:
        """'[]' array suffix."""
        return _Flag("array")

    def r_create_window(self, c: list[Any], pos: A.Pos) -> A.CreateWindow:
        """create window Name#views [as] source [insert [where ...]]."""
        items = _present(c)
        src = _wrapped(items, "window_source")
        ins = _wrapped(items, "window_insert")
        return A.CreateWindow(
            name=items[0],
            views=_all(items, A.View),
            type_name=src.get("type_name"),
            select_items=src.get("select_items", ()),
            columns=src.get("columns", ()),
            insert=ins is not None,
            insert_where=ins.get("where") if ins is not None else None,
            pos=pos,
        )

    def r_ws_type(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """[as] Type."""
        return _Wrapped("window_source", {"type_name": _present(c)[0]})

    def r_ws_select(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """[as] select items from Type."""
        items = _present(c)
        return _Wrapped("window_source", {"select_items": _wrapped(items, "select_list"),
                                          "type_name": _first(items, str)})

    def r_ws_columns(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """as (col type, ...)."""
        cols = tuple(i.value for i in _present(c))
        return _Wrapped("window_source", {"columns": cols})

    def r_window_insert(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """insert [where expr] after a create window."""
        items = _present(c)
        return _Wrapped("window_insert", {"where": items[0] if items else None})

    def r_create_table(self, c: list[Any], pos: A.Pos) -> A.CreateTable:
        """create table Name (columns)."""
        items = _present(c)
        return A.CreateTable(name=items[0], columns=_all(items, A.TableColumn), pos=pos)

    def r_table_col_typed(self, c: list[Any], pos: A.Pos) -> A.TableColumn:
        """name type [primary key]."""
        items = _present(c)
        return A.TableColumn(items[0], items[1].value, _flag(items, "primary_key"), None, pos=pos)

    def r_table_col_agg(self, c: list[Any], pos: A.Pos) -> A.TableColumn:
        """name aggregation(type) (000 §4.7 'avgSpeed avg(double)')."""
        items = _present(c)
        return A.TableColumn(items[0], None, False, items[1], pos=pos)

    def r_primary_key(self, c: list[Any], pos: A.Pos) -> _Flag:
        """'primary key'."""
        return _Flag("primary_key")

    def r_create_variable(self, c: list[Any], pos: A.Pos) -> A.CreateVariable:
        """create [constant] variable type name [= expr]."""
        items = _present(c)
        type_name = _wrapped(items, "type")
        rest = [i for i in items if not isinstance(i, (_Wrapped, _Flag))]
        name = rest[0]
        init = rest[1] if len(rest) > 1 else None
        return A.CreateVariable(type_name=type_name, name=name, init=init,
                                constant=_flag(items, "constant"), pos=pos)

    def r_constant_kw(self, c: list[Any], pos: A.Pos) -> _Flag:
        """'constant'."""
        return _Flag("constant")

    def r_create_index(self, c: list[Any], pos: A.Pos) -> A.CreateIndex:
        """create [unique] index Name on Window (cols)."""
        items = _present(c)
        names = [i for i in items if isinstance(i, str)]
        return A.CreateIndex(name=names[0], window=names[1], columns=_all(items, A.IndexColumn),
                             unique=_flag(items, "unique"), pos=pos)

    def r_unique_kw(self, c: list[Any], pos: A.Pos) -> _Flag:
        """'unique'."""
        return _Flag("unique")

    def r_index_column(self, c: list[Any], pos: A.Pos) -> A.IndexColumn:
        """col [hash|btree]."""
        items = _present(c)
        return A.IndexColumn(items[0], items[1] if len(items) > 1 else None, pos=pos)

    # -- on-statements -----------------------------------------------------------

    def r_on_stmt(self, c: list[Any], pos: A.Pos) -> A.OnStatement:
        """on trigger action."""
        items = _present(c)
        return A.OnStatement((), None, items[0], items[1], pos=pos)

    def r_trigger_filter(self, c: list[Any], pos: A.Pos) -> A.FilterStream:
        """Type[(filter)] [as alias] trigger."""
        items = _present(c)
        return A.FilterStream(items[0], _wrapped(items, "filter"), (), _alias(items), pos=pos)

    def r_trigger_pattern(self, c: list[Any], pos: A.Pos) -> A.PatternStream:
        """pattern [..] [as alias] trigger."""
        items = _present(c)
        return A.PatternStream(items[0], _alias(items), pos=pos)

    def r_on_delete(self, c: list[Any], pos: A.Pos) -> A.OnDelete:
        """delete from W [as w] [where ..]."""
        items = _present(c)
        return A.OnDelete(items[0], _alias(items), _wrapped(items, "where"), pos=pos)

    def r_on_select(self, c: list[Any], pos: A.Pos) -> A.OnSelect:
        """[insert into ..] select [and delete] [distinct] items from W ..."""
        items = _present(c)
        return A.OnSelect(
            insert_into=_first(items, A.InsertInto),
            and_delete=_flag(items, "and_delete"),
            distinct=_flag(items, "distinct"),
            select_items=_wrapped(items, "select_list"),
            window=_first(items, str),
            alias=_alias(items),
            where=_wrapped(items, "where"),
            group_by=_wrapped(items, "group_by") or (),
            having=_wrapped(items, "having"),
            order_by=_wrapped(items, "order_by") or (),
            pos=pos,
        )

    def r_and_delete(self, c: list[Any], pos: A.Pos) -> _Flag:
        """'and delete' of on-select."""
        return _Flag("and_delete")

    def r_on_update(self, c: list[Any], pos: A.Pos) -> A.OnUpdate:
        """update W [as w] set ... [where ..]."""
        items = _present(c)
        return A.OnUpdate(items[0], _alias(items), _all(items, A.Assignment),
                          _wrapped(items, "where"), pos=pos)

    def r_on_set(self, c: list[Any], pos: A.Pos) -> A.OnSet:
        """set var = expr, ..."""
        return A.OnSet(_all(_present(c), A.Assignment), pos=pos)

    def r_on_merge(self, c: list[Any], pos: A.Pos) -> A.OnMerge:
        """merge [into] W [as w] [where ..] items."""
        items = _present(c)
        clauses = _all(items, (A.MergeWhen, A.MergeInsert))
        return A.OnMerge(items[0], _alias(items), _wrapped(items, "where"), clauses, pos=pos)

    def _merge_when(self, c: list[Any], pos: A.Pos, matched: bool) -> A.MergeWhen:
        """Shared body of 'when [not] matched'."""
        items = _present(c)
        actions = tuple(i.value for i in items if isinstance(i, _Wrapped) and i.tag == "then")
        cond = next((i for i in items if isinstance(i, A.Node)), None)
        return A.MergeWhen(matched, cond, actions, pos=pos)

    def r_merge_matched(self, c: list[Any], pos: A.Pos) -> A.MergeWhen:
        """when matched [and cond] then ..."""
        return self._merge_when(c, pos, True)

    def r_merge_not_matched(self, c: list[Any], pos: A.Pos) -> A.MergeWhen:
        """when not matched [and cond] then ..."""
        return self._merge_when(c, pos, False)

    def r_merge_then(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """then action."""
        return _Wrapped("then", _present(c)[0])

    def r_merge_update(self, c: list[Any], pos: A.Pos) -> A.MergeUpdate:
        """update set ... [where ..]."""
        items = _present(c)
        return A.MergeUpdate(_all(items, A.Assignment), _wrapped(items, "where"), pos=pos)

    def r_merge_delete(self, c: list[Any], pos: A.Pos) -> A.MergeDelete:
        """delete [where ..]."""
        return A.MergeDelete(_wrapped(_present(c), "where"), pos=pos)

    def r_merge_insert(self, c: list[Any], pos: A.Pos) -> A.MergeInsert:
        """insert [into S] [(cols)] select ... [where ..]."""
        items = _present(c)
        return A.MergeInsert(_wrapped(items, "into"), _wrapped(items, "columns") or (),
                             _wrapped(items, "select_list"), _wrapped(items, "where"), pos=pos)

    def r_into_name(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """into Name inside a merge insert."""
        return _Wrapped("into", _present(c)[0])

    # -- contexts -----------------------------------------------------------------

    def r_create_context(self, c: list[Any], pos: A.Pos) -> A.CreateContext:
        """create context Name [as] spec."""
        items = _present(c)
        return A.CreateContext((), items[0], items[-1], pos=pos)

    def r_keyed_spec(self, c: list[Any], pos: A.Pos) -> A.KeyedContext:
        """partition [by] items [initiated by filters] [terminated by cond] (000 §4.2.2)."""
        items = _present(c)
        return A.KeyedContext(_all(items, A.KeyedItem), _wrapped(items, "initiated") or (),
                              _wrapped(items, "terminated"), pos=pos)

    def r_keyed_item(self, c: list[Any], pos: A.Pos) -> A.KeyedItem:
        """p [and|, p] from Type[(filter)] [[as] alias]."""
        items = _present(c)
        props = _all(items, A.Name)
        names = [i for i in items if isinstance(i, str)]
        return A.KeyedItem(props, names[0], _wrapped(items, "filter"), _alias(items),
                           pos=pos)

    def r_keyed_init(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """initiated [by] filter [[as] alias], ... of a keyed context."""
        return _Wrapped("initiated", _all(_present(c), A.CondFilter))

    def r_keyed_term(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """terminated [by] cond of a keyed context."""
        return _Wrapped("terminated", _present(c)[0])

    def r_hash_spec(self, c: list[Any], pos: A.Pos) -> A.HashContext:
        """coalesce [by] items granularity N [preallocate] (000 §4.2.3)."""
        items = _present(c)
        hash_items = _all(items, A.HashItem)
        granularity = next(i for i in items if isinstance(i, A.Node)
                           and not isinstance(i, A.HashItem))
        return A.HashContext(hash_items, granularity, _flag(items, "preallocate"), pos=pos)

    def r_hash_item(self, c: list[Any], pos: A.Pos) -> A.HashItem:
        """func(args) from Type[(filter)]; a sole '*' argument is kept as Star."""
        items = _present(c)
        names = [i for i in items if isinstance(i, str)]
        args = _wrapped(items, "args") or ()
        args = tuple(A.Star(pos=a.pos) if isinstance(a, _StarArg) else a for a in args)
        for arg in args:
            if isinstance(arg, _DistinctArg):
                raise self._error("'distinct' is not allowed in a hash function", arg.pos)
        return A.HashItem(names[0], args, names[1], _wrapped(items, "filter"), pos=pos)

    def r_preallocate_kw(self, c: list[Any], pos: A.Pos) -> _Flag:
        """'preallocate'."""
        return _Flag("preallocate")

    def r_category_spec(self, c: list[Any], pos: A.Pos) -> A.CategoryContext:
        """group ... as label, ... from Type[(filter)] (000 §4.2.4)."""
        items = _present(c)
        return A.CategoryContext(_all(items, A.CategoryGroup), _first(items, str),
                                 _wrapped(items, "filter"), pos=pos)

    def r_category_group(self, c: list[Any], pos: A.Pos) -> A.CategoryGroup:
        """group [by] expr as label."""
        items = _present(c)
        return A.CategoryGroup(items[0], items[1], pos=pos)

    def r_nonoverlap_spec(self, c: list[Any], pos: A.Pos) -> A.NonOverlappingContext:
        """start (@now | cond) [end cond] (000 §4.2.5)."""
        items = _present(c)
        start = items[0]
        if isinstance(start, _At):
            start = self._now(start)
        end = items[1] if len(items) > 1 else None
        return A.NonOverlappingContext(start, end, pos=pos)

    def _now(self, at: _At) -> A.CondNow:
        """@now, or a syntax error with a hint for another @word."""
        if at.word.lower() != "now":
            raise self._error(f"unknown '@{at.word}' here", at.pos,
                              "write '@now' to start the context partition immediately")
        return A.CondNow(pos=at.pos)

    def r_overlap_spec(self, c: list[Any], pos: A.Pos) -> A.OverlappingContext:
        """initiated [by] [distinct (..)] [@now and] cond [terminated [by] cond] (000 §4.2.6)."""
        items = _present(c)
        distinct = _wrapped(items, "distinct") or ()
        conds = [i for i in items if isinstance(i, A.Node)]
        return A.OverlappingContext(conds[0], conds[1] if len(conds) > 1 else None, distinct,
                                    pos=pos)

    def r_cond_now_and(self, c: list[Any], pos: A.Pos) -> A.CondNowAnd:
        """@now and cond."""
        items = _present(c)
        self._now(items[0])
        return A.CondNowAnd(items[1], pos=pos)

    def r_distinct_exprs(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """distinct (exprs) of an overlapping context."""
        return _Wrapped("distinct", tuple(_present(c)))

    def r_at_word(self, c: list[Any], pos: A.Pos) -> _At:
        """@word (now / inclusive)."""
        return _At(_present(c)[0], pos)

    def r_nested_spec(self, c: list[Any], pos: A.Pos) -> A.NestedContext:
        """context A spec, context B spec, ... (000 §4.3)."""
        return A.NestedContext(_all(_present(c), A.NestedItem), pos=pos)

    def r_nested_item(self, c: list[Any], pos: A.Pos) -> A.NestedItem:
        """context Name [as] spec."""
        items = _present(c)
        return A.NestedItem(items[0], items[-1], pos=pos)

    r_nested_rest = r_nested_item

    def r_cond_filter(self, c: list[Any], pos: A.Pos) -> A.CondFilter:
        """Type[(filter)] [as alias] (000 §4.2.7.1)."""
        items = _present(c)
        return A.CondFilter(items[0], _wrapped(items, "filter"), _alias(items), pos=pos)

    def r_cond_pattern(self, c: list[Any], pos: A.Pos) -> A.CondPattern:
        """pattern [..] [@inclusive] [as alias] (000 §4.2.7.2)."""
        items = _present(c)
        at = _first(items, _At)
        if at is not None and at.word.lower() != "inclusive":
            guess = closest(at.word, ["inclusive"])
            hint = (f"did you mean '@{guess}'?" if guess
                    else "only '@inclusive' may follow a pattern")
            raise self._error(f"unknown '@{at.word}' after a pattern", at.pos, hint)
        alias = _first(items[1:], str)
        return A.CondPattern(items[0], at is not None, alias, pos=pos)

    def r_cond_crontab(self, c: list[Any], pos: A.Pos) -> A.CondCrontab:
        """(crontab) (000 §4.2.7.3)."""
        return A.CondCrontab(_present(c)[0], pos=pos)

    def r_cond_after(self, c: list[Any], pos: A.Pos) -> A.CondAfter:
        """after period (000 §4.2.7.4)."""
        return A.CondAfter(_present(c)[0], pos=pos)

    def _crontab(self, fields: Sequence[A.Node], pos: A.Pos) -> A.Crontab:
        """Crontab with 5 to 7 fields (Esper §7.6.4: 5 fields, optional seconds and zone)."""
        if not 5 <= len(fields) <= 7:
            raise self._error(
                f"a crontab needs 5 to 7 fields, found {len(fields)}", pos,
                "write (minutes, hours, days of month, months, days of week[, seconds"
                "[, timezone]]), e.g. (0, 9, *, *, *)")
        return A.Crontab(tuple(fields), pos=pos)

    def r_crontab(self, c: list[Any], pos: A.Pos) -> A.Crontab:
        """(f1, f2, f3, f4, f5 [, seconds [, tz]])."""
        return self._crontab(_present(c), pos)

    def r_cron_star(self, c: list[Any], pos: A.Pos) -> A.CronStar:
        """'*'."""
        return A.CronStar(pos=pos)

    def r_cron_step(self, c: list[Any], pos: A.Pos) -> A.CronStep:
        """'*/n'."""
        return A.CronStep(_present(c)[0], pos=pos)

    def r_cron_range(self, c: list[Any], pos: A.Pos) -> A.CronRange:
        """'a:b'."""
        items = _present(c)
        return A.CronRange(items[0], items[1], pos=pos)

    def r_cron_list(self, c: list[Any], pos: A.Pos) -> A.CronList:
        """'[a, b, ...]'."""
        return A.CronList(tuple(_present(c)), pos=pos)

    def r_cron_last_of(self, c: list[Any], pos: A.Pos) -> A.CronLast:
        """'n last'."""
        return A.CronLast(_present(c)[0], pos=pos)

    def r_cron_last(self, c: list[Any], pos: A.Pos) -> A.CronLast:
        """'last'."""
        return A.CronLast(None, pos=pos)

    def r_cron_weekday(self, c: list[Any], pos: A.Pos) -> A.CronWeekday:
        """'n weekday'."""
        return A.CronWeekday(_present(c)[0], pos=pos)

    def r_cron_lastweekday(self, c: list[Any], pos: A.Pos) -> A.CronLastWeekday:
        """'lastweekday'."""
        return A.CronLastWeekday(pos=pos)

    # -- Apama ----------------------------------------------------------------------

    def r_apama_query(self, c: list[Any], pos: A.Pos) -> A.ApamaQuery:
        """from v in stream [window] select [rstream] items (003)."""
        items = _present(c)
        win = _wrapped(items, "apama_window") or {}
        return A.ApamaQuery(
            annotations=(),
            item=items[0],
            stream=items[1],
            within=win.get("within"),
            every=win.get("every"),
            retain=win.get("retain"),
            rstream=_flag(items, "rstream"),
            select_items=_wrapped(items, "select_list"),
            pos=pos,
        )

    def r_apama_within(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """within D [every P] [retain N]; keyword order decides which value is which."""
        return _Wrapped("apama_window", self._keyword_values(c, ("within", "every", "retain")))

    def r_apama_retain(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """retain N [every M]."""
        return _Wrapped("apama_window", self._keyword_values(c, ("retain", "every")))

    @staticmethod
    def _keyword_values(c: list[Any], order: tuple[str, ...]) -> dict[str, Any]:
        """Map an 'kw1 e1 [kw2 e2] [kw3 e3]' rule's placeholders to keyword names."""
        # maybe_placeholders keeps one slot per optional part, in grammar order
        return {kw: value for kw, value in zip(order, c, strict=False) if value is not None}

    # -- patterns -------------------------------------------------------------------

    def r_pattern(self, c: list[Any], pos: A.Pos) -> A.PFollowedBy:
        """a -> b -> c."""
        return A.PFollowedBy(tuple(_present(c)), pos=pos)

    def r_p_or(self, c: list[Any], pos: A.Pos) -> A.POr:
        """a or b."""
        return A.POr(tuple(_present(c)), pos=pos)

    def r_p_and(self, c: list[Any], pos: A.Pos) -> A.PAnd:
        """a and b."""
        return A.PAnd(tuple(_present(c)), pos=pos)

    def r_p_match_until(self, c: list[Any], pos: A.Pos) -> A.PRepeat:
        """a until b."""
        items = _present(c)
        return A.PRepeat(items[0], until=items[1], pos=pos)

    def r_p_repeat(self, c: list[Any], pos: A.Pos) -> A.PRepeat:
        """[n] a / [n:m] a."""
        items = _present(c)
        low, high, ranged = items[0].value
        return A.PRepeat(items[1], low, high, ranged, None, pos=pos)

    def r_p_repeat_until(self, c: list[Any], pos: A.Pos) -> A.PRepeat:
        """[n:m] a until b."""
        items = _present(c)
        low, high, ranged = items[0].value
        return A.PRepeat(items[1], low, high, ranged, items[2], pos=pos)

    def r_p_range_exact(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """[n]."""
        return _Wrapped("range", (_present(c)[0], None, False))

    def r_p_range_bounds(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """[low:high] with either bound optional."""
        low, high = c[0], c[-1]
        return _Wrapped("range", (low, high, True))

    def r_p_every(self, c: list[Any], pos: A.Pos) -> A.PEvery:
        """every p."""
        return A.PEvery(_present(c)[0], pos=pos)

    def r_p_not(self, c: list[Any], pos: A.Pos) -> A.PNot:
        """not p."""
        return A.PNot(_present(c)[0], pos=pos)

    def r_p_every_distinct(self, c: list[Any], pos: A.Pos) -> A.PEveryDistinct:
        """every-distinct(exprs[, period]) p; a last time period is the expiry (000 §4.2.7.2)."""
        items = _present(c)
        exprs, child = list(items[:-1]), items[-1]
        period = None
        if len(exprs) > 1 and isinstance(exprs[-1], A.TimePeriod):
            period = exprs.pop()
        return A.PEveryDistinct(tuple(exprs), period, child, pos=pos)

    def r_p_guard(self, c: list[Any], pos: A.Pos) -> A.PGuard:
        """p where timer:within(period)."""
        child = c[0]
        name_tok = next(x for x in c if isinstance(x, Token) and x.type == "COLON_NAME")
        args = _wrapped(_present(c[1:]), "args") or ()
        name = str(name_tok.value)
        tok_pos = A.Pos(name_tok.line, name_tok.column, name_tok.end_line, name_tok.end_column)
        if name.lower() not in _GUARDS:
            guess = closest(name, _GUARDS)
            hint = f"did you mean '{guess}'?" if guess else "the supported guard is timer:within"
            raise self._error(f"unknown pattern guard '{name}'", tok_pos, hint)
        if len(args) != 1 or isinstance(args[0], (_StarArg, _DistinctArg, A.NamedArg)):
            raise self._error("timer:within takes exactly one time period", tok_pos,
                              "e.g. where timer:within(10 seconds)")
        return A.PGuard(child, args[0], pos=pos)

    def r_p_filter_tagged(self, c: list[Any], pos: A.Pos) -> A.PFilter:
        """tag=Type[(filter)]."""
        items = _present(c)
        return A.PFilter(items[0], items[1], _wrapped(items, "filter"), pos=pos)

    def r_p_filter_plain(self, c: list[Any], pos: A.Pos) -> A.PFilter:
        """Type[(filter)]."""
        items = _present(c)
        return A.PFilter(None, items[0], _wrapped(items, "filter"), pos=pos)

    def r_p_observer(self, c: list[Any], pos: A.Pos) -> A.Node:
        """timer:interval(period) or timer:at(crontab fields)."""
        name_tok = c[0]
        name = str(name_tok.value)
        fields = _present(c[1:])
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
        guess = closest(name, _OBSERVERS)
        hint = f"did you mean '{guess}'?" if guess else "supported: timer:interval, timer:at"
        raise self._error(f"unknown pattern observer '{name}'", pos, hint)

    # -- expressions -------------------------------------------------------------------

    def r_or_op(self, c: list[Any], pos: A.Pos) -> A.Binary:
        """a or b."""
        items = _present(c)
        return A.Binary("or", items[0], items[1], pos=pos)

    def r_and_op(self, c: list[Any], pos: A.Pos) -> A.Binary:
        """a and b."""
        items = _present(c)
        return A.Binary("and", items[0], items[1], pos=pos)

    def r_not_op(self, c: list[Any], pos: A.Pos) -> A.Unary:
        """not a."""
        return A.Unary("not", _present(c)[0], pos=pos)

    def r_binop(self, c: list[Any], pos: A.Pos) -> A.Binary:
        """a <op> b for comparison and arithmetic operators."""
        items = _present(c)
        return A.Binary(items[1].value, items[0], items[2], pos=pos)

    def _op(self, c: list[Any]) -> _Wrapped:
        """Operator token text, with '<>' normalised to '!='."""
        text = str(c[0].value)
        return _Wrapped("op", "!=" if text == "<>" else text)

    def r_eq_op(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """= != <>."""
        return self._op(c)

    def r_rel_op(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """< <= > >=."""
        return self._op(c)

    def r_add_op(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """+ -."""
        return self._op(c)

    def r_mul_op(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """* / %."""
        return self._op(c)

    def r_not_kw(self, c: list[Any], pos: A.Pos) -> _Flag:
        """'not' of 'not in', 'not between', 'is not null', ..."""
        return _Flag("not")

    def r_is_null(self, c: list[Any], pos: A.Pos) -> A.IsNull:
        """a is [not] null."""
        items = _present(c)
        return A.IsNull(items[0], _flag(items, "not"), pos=pos)

    def r_in_expr(self, c: list[Any], pos: A.Pos) -> A.Node:
        """a [not] in (list) | a [not] in [low:high]."""
        items = _present(c)
        negated = _flag(items, "not")
        target = items[-1]
        if target.tag == "in_list":
            return A.InList(items[0], target.value, negated, pos=pos)
        low, high, low_closed, high_closed = target.value
        return A.InRange(items[0], low, high, low_closed, high_closed, negated, pos=pos)

    def r_in_target(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """(a, b) list or [a:b] / (a:b) / [a:b) / (a:b] range."""
        tokens = [str(x.value) for x in c if isinstance(x, Token)]
        exprs = tuple(_present(c))
        if ":" in tokens:
            return _Wrapped("in_range", (exprs[0], exprs[1], tokens[0] == "[", tokens[-1] == "]"))
        return _Wrapped("in_list", exprs)

    def r_between(self, c: list[Any], pos: A.Pos) -> A.Between:
        """a [not] between low and high."""
        items = _present(c)
        negated = _flag(items, "not")
        exprs = [i for i in items if isinstance(i, A.Node)]
        return A.Between(exprs[0], exprs[1], exprs[2], negated, pos=pos)

    def r_like(self, c: list[Any], pos: A.Pos) -> A.Like:
        """a [not] like pattern [escape e]."""
        items = _present(c)
        negated = _flag(items, "not")
        exprs = [i for i in items if isinstance(i, A.Node)]
        return A.Like(exprs[0], exprs[1], exprs[2] if len(exprs) > 2 else None, negated, pos=pos)

    def r_regexp(self, c: list[Any], pos: A.Pos) -> A.Regexp:
        """a [not] regexp pattern."""
        items = _present(c)
        exprs = [i for i in items if isinstance(i, A.Node)]
        return A.Regexp(exprs[0], exprs[1], _flag(items, "not"), pos=pos)

    def r_concat(self, c: list[Any], pos: A.Pos) -> A.Binary:
        """a || b."""
        items = _present(c)
        return A.Binary("||", items[0], items[1], pos=pos)

    def r_neg(self, c: list[Any], pos: A.Pos) -> A.Node:
        """-a; folded into the literal for numbers (see app.epl.ast docstring)."""
        operand = _present(c)[0]
        if isinstance(operand, A.Literal) and operand.type in ("int", "long", "double"):
            return A.Literal(-operand.value, operand.type, pos=pos)  # type: ignore[operator]
        return A.Unary("-", operand, pos=pos)

    def r_name_ref(self, c: list[Any], pos: A.Pos) -> A.Name:
        """a.b.c."""
        return A.Name(tuple(_present(c)), pos=pos)

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
        args = list(_wrapped(_present(c[1:]), "args") or ())
        if len(args) == 1 and isinstance(args[0], _StarArg):
            return A.Call(name, (), False, True, pos=pos)
        distinct = False
        out: list[A.Node] = []
        for index, arg in enumerate(args):
            if isinstance(arg, _DistinctArg):
                if index != 0:
                    raise self._error("'distinct' may only precede the first argument", arg.pos)
                distinct = True
                out.append(arg.expr)
            elif isinstance(arg, _StarArg):
                out.append(A.Star(pos=arg.pos))
            else:
                out.append(arg)
        return A.Call(name, tuple(out), distinct, False, pos=pos)

    def r_call_args(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """Argument list."""
        return _Wrapped("args", tuple(_present(c)))

    def r_arg_expr(self, c: list[Any], pos: A.Pos) -> A.Node:
        """Plain argument."""
        return _present(c)[0]

    def r_arg_star(self, c: list[Any], pos: A.Pos) -> _StarArg:
        """'*' argument."""
        return _StarArg(pos)

    def r_arg_distinct(self, c: list[Any], pos: A.Pos) -> _DistinctArg:
        """'distinct expr' argument."""
        return _DistinctArg(_present(c)[0], pos)

    def r_arg_named(self, c: list[Any], pos: A.Pos) -> A.NamedArg:
        """'name: expr' argument (002: sum(amount, group_by:account))."""
        items = _present(c)
        return A.NamedArg(items[0], items[1], pos=pos)

    def r_case_searched(self, c: list[Any], pos: A.Pos) -> A.Case:
        """case when c then r ... [else e] end."""
        items = _present(c)
        whens = tuple(i.value for i in items if isinstance(i, _Wrapped))
        rest = [i for i in items if not isinstance(i, _Wrapped)]
        return A.Case(None, whens, rest[0] if rest else None, pos=pos)

    def r_case_simple(self, c: list[Any], pos: A.Pos) -> A.Case:
        """case x when v then r ... [else e] end."""
        items = _present(c)
        whens = tuple(i.value for i in items if isinstance(i, _Wrapped))
        rest = [i for i in items if not isinstance(i, _Wrapped)]
        return A.Case(rest[0], whens, rest[1] if len(rest) > 1 else None, pos=pos)

    def r_case_when(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """when c then r."""
        items = _present(c)
        return _Wrapped("when", (items[0], items[1]))

    def r_cast_expr(self, c: list[Any], pos: A.Pos) -> A.Cast:
        """cast(x, type) / cast(x as type)."""
        items = _present(c)
        return A.Cast(items[0], items[1].value, pos=pos)

    def r_time_period(self, c: list[Any], pos: A.Pos) -> A.TimePeriod:
        """Sequence of (amount unit) parts; a constant one must fit in a Java long of ms."""
        period = A.TimePeriod(tuple(p.value for p in _present(c)), pos=pos)
        ms = period.ms()
        if ms is not None and not (ms == ms and abs(ms) <= _LONG_MAX):
            raise self._error("time period is out of range", pos,
                              "the longest time period is about 292 million years")
        return period

    def r_tp_part(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """'5 sec' or 'VAR sec'."""
        amount_raw, unit = c[0], c[1]
        if isinstance(amount_raw, Token):
            amount: A.Node = self._number(amount_raw, pos)
        else:
            amount = A.Name((amount_raw,), pos=pos)
        return _Wrapped("part", (amount, unit.value))

    def r_time_unit(self, c: list[Any], pos: A.Pos) -> _Wrapped:
        """Unit keyword normalised to its singular long name."""
        return _Wrapped("unit", _UNITS[str(c[0].value).lower()])

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
        if len(digits) > 19 or int(body or "0") > _LONG_MAX:
            shown = f"'{text}'" if len(text) <= 30 else (
                f"'{text[:12]}...{text[-4:]}' ({len(text)} digits)")
            raise self._error(f"number {shown} is out of range", pos,
                              f"the largest integer is {_LONG_MAX}")
        return int(body)

    def r_number(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """Number literal."""
        return self._number(c[0], pos)

    def r_string(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """'...' or "..." with backslash escapes."""
        raw = str(c[0].value)
        return A.Literal(_unescape(raw[1:-1]), "string", pos=pos)

    def r_true(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """true."""
        return A.Literal(True, "boolean", pos=pos)

    def r_false(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """false."""
        return A.Literal(False, "boolean", pos=pos)

    def r_null(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """null."""
        return A.Literal(None, "null", pos=pos)


@dataclasses.dataclass(frozen=True, slots=True)
class _StarArg:
    """'*' call argument while building."""

    pos: A.Pos


@dataclasses.dataclass(frozen=True, slots=True)
class _DistinctArg:
    """'distinct expr' call argument while building."""

    expr: A.Node
    pos: A.Pos

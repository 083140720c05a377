"""EPL parser: text -> app.epl.ast nodes, via one cached LALR lark parser.

Public API: parse_statement, parse_module, parse_expression, parse_pattern,
reserved_words. Any input either parses or raises EplSyntaxError (with line,
column, the source line and a hint); no other exception escapes.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from lark.exceptions import (
    LarkError,
    UnexpectedInput,
    VisitError,
)
from lark.lexer import PatternStr

from app.epl import ast as A
from app.epl.errors import EplSyntaxError
from app.epl.parsing.contexts import ContextRules
from app.epl.parsing.declarations import DeclarationRules
from app.epl.parsing.expressions import ExpressionRules
from app.epl.parsing.grammar import epl_lark
from app.epl.parsing.match_recognize import MatchRecognizeRules
from app.epl.parsing.patterns import PatternRules
from app.epl.parsing.statements import StatementRules
from app.epl.parsing.streams import StreamRules
from app.epl.parsing.subqueries import SubqueryRules
from app.epl.parsing.syntax_errors import IDENT_RE, syntax_error
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
        for t in epl_lark().terminals
        if isinstance(t.pattern, PatternStr) and IDENT_RE.match(t.pattern.value)
    )


@functools.cache
def reserved_words() -> frozenset[str]:
    """Keywords that the lexer prefers over an identifier somewhere in the grammar.

    A keyword only shadows an identifier in a parser state that accepts both
    (contextual lexer), so this is computed from the LALR table; the printer
    back-quotes identifiers in this set.
    """
    lark = epl_lark()
    words: dict[str, str] = {}
    for term in lark.terminals:
        pattern = term.pattern
        if isinstance(pattern, PatternStr) and IDENT_RE.match(pattern.value):
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
        tree = epl_lark().parse(text, start=start)
    except UnexpectedInput as exc:
        raise syntax_error(exc, text) from None
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




class _Builder(StatementRules, StreamRules, ContextRules, PatternRules, SubqueryRules,
               MatchRecognizeRules, ExpressionRules, DeclarationRules):
    """lark tree -> app.epl.ast; one method per grammar rule or alias, by section."""

"""Syntax errors as a reader wants them: where, what was expected in plain words, and a
hint for the usual slips (a keyword used as a name, a missing alias keyword, ...)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)
from lark.lexer import PatternStr

from app.epl.errors import EplSyntaxError, closest
from app.epl.parsing.grammar import epl_lark

UNITS_SPELLINGS = (
    "year", "years", "month", "months", "week", "weeks", "day", "days", "hour", "hours",
    "minute", "minutes", "min", "second", "seconds", "sec", "millisecond", "milliseconds",
    "msec", "microsecond", "microseconds", "usec",
)

IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
        term = epl_lark().get_terminal(name)
    except KeyError:
        return name.lower()
    if isinstance(term.pattern, PatternStr):
        return f"'{term.pattern.value}'"
    return name.lower()


_UNIT_WORDS = frozenset(f"'{u}'" for u in UNITS_SPELLINGS)


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
            term = epl_lark().get_terminal(name)
        except KeyError:
            continue
        if isinstance(term.pattern, PatternStr) and IDENT_RE.match(term.pattern.value):
            out.append(term.pattern.value.lower())
        elif name in ("EVERY_DISTINCT", "RETAIN_UNION", "RETAIN_INTERSECTION"):
            out.append(_TERMINAL_WORDS[name].strip("'"))
    return out


def _hint_for(expected: Iterable[str], word: str | None) -> str | None:
    """'did you mean' for a misspelt keyword, else the expected tokens in plain words."""
    expected = list(expected)
    if word and IDENT_RE.match(word):
        guess = closest(word, _keyword_candidates(expected), cutoff=0.7)
        if guess and guess.lower() != word.lower():
            return f"did you mean '{guess}'?"
    words = _expected_words(expected)
    if not words:
        return None
    shown = ", ".join(words[:14])
    more = f" (and {len(words) - 14} more)" if len(words) > 14 else ""
    return f"expected {shown}{more}" if len(words) == 1 else f"expected one of {shown}{more}"


def syntax_error(exc: UnexpectedInput, text: str) -> EplSyntaxError:
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
    if pos is None or (IDENT_RE.match(value) and
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



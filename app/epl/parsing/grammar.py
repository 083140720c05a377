"""The one EPL grammar (app/epl/grammar.lark) as a cached LALR parser, shared by the
parser and by its syntax-error messages."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

from lark import Lark, Token

_GRAMMAR_PATH = Path(__file__).parent.parent / "grammar.lark"
_STARTS = ["single_start", "module_start", "expr_start", "pattern_start"]


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
def epl_lark() -> Lark:
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

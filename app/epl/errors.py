"""EPL error types with source positions, rendered compiler-style with a caret line."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.epl import ast

__all__ = ["EplError", "EplSyntaxError", "EplValidationError", "closest", "did_you_mean", "verr"]


class EplError(Exception):
    """Base of all EPL front-end errors: message plus where (line/column) and a hint."""

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        source: str | None = None,
        hint: str | None = None,
    ) -> None:
        """Keep the message, the 1-based position, the full source text and an optional hint."""
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.source = source
        self.hint = hint

    @property
    def source_line(self) -> str | None:
        """The line of the source text the error points at, without its newline."""
        if self.source is None or self.line is None:
            return None
        lines = self.source.split("\n")  # the parser counts lines by '\n' only
        if 1 <= self.line <= len(lines):
            return lines[self.line - 1].rstrip("\r")
        return None

    @property
    def caret_line(self) -> str | None:
        """Spaces (tabs kept, so terminals line up) then '^' under the error column."""
        text = self.source_line
        if text is None or self.column is None:
            return None
        prefix = text[: max(self.column - 1, 0)]
        return "".join("\t" if ch == "\t" else " " for ch in prefix) + "^"

    def render(self) -> str:
        """'line L:C: message', the source line, a caret line and 'hint: ...' when known."""
        where = f"line {self.line}:{self.column}: " if self.line is not None else ""
        out = [f"{where}{self.message}"]
        text, caret = self.source_line, self.caret_line
        if text is not None and caret is not None:
            out.append(f"  {text}")
            out.append(f"  {caret}")
        if self.hint:
            out.append(f"  hint: {self.hint}")
        return "\n".join(out)

    def __str__(self) -> str:
        """Same as render(), so that printing the error shows where it is."""
        return self.render()

    def __reduce__(self):  # type: ignore[no-untyped-def]
        """Pickle with all fields (Exception's default keeps only args)."""
        return (type(self), (self.message, self.line, self.column, self.source, self.hint))


class EplSyntaxError(EplError):
    """The text is not a well-formed EPL statement."""


class EplValidationError(EplError):
    """The statement is well-formed but not valid (unknown type, rule of the documents...)."""


def closest(name: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The candidate most similar to name (case-insensitive), for 'did you mean' hints."""
    by_lower: dict[str, str] = {}
    for cand in candidates:
        by_lower.setdefault(cand.lower(), cand)
    matches = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[matches[0]] if matches else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """A 'did you mean' hint naming the closest candidate, or None."""
    best = closest(name, list(candidates))
    return f"did you mean '{best}'?" if best else None


def verr(message: str, node: ast.Node | None = None, hint: str | None = None) -> EplValidationError:
    """A validation error positioned at ``node`` (an AST node with a ``pos``)."""
    pos = getattr(node, "pos", None)
    line = pos.line if pos is not None and pos.line else None
    col = pos.column if pos is not None and pos.line else None
    return EplValidationError(message, line, col, None, hint)

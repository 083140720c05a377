"""Tree building for expression declarations (Esper reference, "Expression
declarations"): ``expression name {...}`` and ``create expression``; and ``istream()``."""

from __future__ import annotations

import re
from typing import Any

from lark import Token

from app.epl import ast as A
from app.epl.parsing.base import BuilderBase, present

_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class DeclarationRules(BuilderBase):
    """Rules for declared expressions."""

    def r_expr_decl(self, c: list[Any], pos: A.Pos) -> A.ExpressionDecl:
        """expression name [alias for] {[params =>] body}."""
        tokens = {t.type: str(t) for t in c if isinstance(t, Token)}
        name, body = present(c)
        params: tuple[str, ...] = ()
        arrow = tokens.get("LAMBDA_PARAMS")
        if arrow is not None:
            params = tuple(_PARAM.findall(arrow[:-2]))
        return A.ExpressionDecl(name, params, body, "EXPR_ALIAS_FOR" in tokens, pos=pos)

    def r_istream_call(self, c: list[Any], pos: A.Pos) -> A.Call:
        """istream() (one terminal, see the grammar)."""
        return A.Call("istream", (), pos=pos)

    def r_create_expression(self, c: list[Any], pos: A.Pos) -> A.CreateExpression:
        """create expression ..."""
        return A.CreateExpression(present(c)[0], pos=pos)

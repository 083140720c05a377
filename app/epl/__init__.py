"""EPL language front end: grammar, AST, parser, printer and error types.

- ``app.epl.parser``: ``parse_statement``, ``parse_module``, ``parse_expression``,
  ``parse_pattern`` (text -> ``app.epl.ast`` nodes, or ``EplSyntaxError``);
- ``app.epl.printer``: ``to_epl`` (AST -> EPL text that parses back to the same AST);
- ``app.epl.ast``: the frozen-dataclass AST;
- ``app.epl.errors``: ``EplError``, ``EplSyntaxError``, ``EplValidationError``, ``closest``.
"""

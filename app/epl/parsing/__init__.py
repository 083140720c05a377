"""The parser's parts: syntax-error messages, and the tree builder's rules by section of
the language; ``app.epl.parser`` composes them."""

"""The planner's sections, one module per part of the language; ``app.epl.planner``
composes them."""

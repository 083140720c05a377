"""Shared helpers of the validation tests: a catalog with setup statements, a rejection."""

from __future__ import annotations

import pytest

from app.epl.errors import EplValidationError
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog


def catalog_with(schemas: dict[str, dict[str, str]], *setup: str) -> Catalog:
    """A catalog of ``schemas`` in which every ``setup`` statement was planned."""
    c = Catalog.from_schemas(schemas)
    for i, epl in enumerate(setup):
        plan_statement(c, epl, f"setup{i}")
    return c


def rejects(c: Catalog, epl: str) -> EplValidationError:
    """The validation error planning ``epl`` raises (fails the test if none)."""
    with pytest.raises(EplValidationError) as info:
        plan_statement(c, epl, "s")
    return info.value

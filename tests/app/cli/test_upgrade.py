"""``kepl deploy --rebuild`` values (no broker)."""

from __future__ import annotations

import pytest

from app.cli.upgrade import rebuild_choices
from app.statements import ConfigError


def test_rebuild_per_statement_and_for_all() -> None:
    assert rebuild_choices(["avg=from-now", "from-earliest"]) == {
        "avg": "from-now", "*": "from-earliest"}
    assert rebuild_choices([]) == {}


@pytest.mark.parametrize("bad", ["avg=later", "now", "avg="])
def test_an_unknown_rebuild_is_a_usage_error(bad: str) -> None:
    with pytest.raises(ConfigError) as e:
        rebuild_choices([bad])
    assert str(e.value) == (f"--rebuild {bad}: say from-now or from-earliest "
                            "(NAME=from-now for one statement)")

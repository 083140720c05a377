"""Project-wide pytest configuration: shared plugins and markers."""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.kafka_broker"]


def pytest_configure(config: pytest.Config) -> None:
    """Register the project's markers (so ``--strict-markers`` accepts them)."""
    config.addinivalue_line(
        "markers",
        "kafka: needs a real Kafka broker (use the kafka_bootstrap fixture; "
        "never skipped: the fixture fails if no broker can be started)",
    )
    config.addinivalue_line(
        "markers",
        "long: long-running fuzzing (10^4 inputs and more); deselected unless -m names it, "
        "as in 'pytest -m long'",
    )
    config.addinivalue_line(
        "markers",
        "spark: needs a real local PySpark session (the session-scoped spark fixture of "
        "tests/app/analytics; the Kafka connector jars are fetched once with Maven)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect ``long`` tests unless the -m expression names them."""
    if "long" in (config.getoption("markexpr") or ""):
        return
    long_ = [i for i in items if i.get_closest_marker("long") is not None]
    if long_:
        config.hook.pytest_deselected(items=long_)
        items[:] = [i for i in items if i.get_closest_marker("long") is None]

"""Project-wide pytest configuration: shared plugins and markers."""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.kafka_broker", "tests.schema_registry"]


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
        "cluster: starts a local 3-node Kafka cluster (three JVMs, about 90 s); deselected "
        "unless -m names it, as in 'pytest -m cluster' (make test-cluster)",
    )
    config.addinivalue_line(
        "markers",
        "spark: needs a real local PySpark session (the session-scoped spark fixture of "
        "tests/app/analytics; the Kafka connector jars are fetched once with Maven)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect ``long`` and ``cluster`` tests unless the -m expression names them."""
    expr = config.getoption("markexpr") or ""
    for marker in ("long", "cluster"):
        if marker in expr:
            continue
        off = [i for i in items if i.get_closest_marker(marker) is not None]
        if off:
            config.hook.pytest_deselected(items=off)
            items[:] = [i for i in items if i.get_closest_marker(marker) is None]

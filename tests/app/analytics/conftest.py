"""Fixtures of the Spark analytics tests: one local SparkSession for the whole run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from app.analytics.session import jvm_log, local_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local SparkSession with the Kafka connector (resolved by Ivy on first use)."""
    session = local_session("kepl-tests", master="local[2]")
    try:
        yield session
    finally:
        session.stop()
        jvm_log().unlink(missing_ok=True)

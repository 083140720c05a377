"""Fixtures of the Spark analytics tests: one local SparkSession for the whole run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from app.analytics.jars import ensure_spark_jars
from app.analytics.session import local_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local SparkSession with the Kafka connector (jars fetched here on first use)."""
    jars = ensure_spark_jars()  # the one-time Maven fetch happens here, not in a test
    session = local_session("kepl-tests", jars=jars)
    try:
        yield session
    finally:
        session.stop()

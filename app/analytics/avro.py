"""Avro output topics in the Spark jobs: Spark's Avro reader (``spark-avro``, resolved
through Ivy as the Kafka connector is, ``jars.package_conf``) with the subject's schema.

An output topic written as Avro (``formats:`` of the statement file) has its schema under
``<topic>-value`` in the registry (``$KEPL_REGISTRY_URL``).  Each record's value is the
Confluent framing (magic byte, 4-byte schema id) before the Avro body: the body is read
with the subject's newest schema and turned back into the JSON text a JSON output holds,
so every job (``parse_output`` on) reads both formats alike (a JSON Schema topic: the
JSON behind the framing).  A topic with no subject,
or no registry given, is read as JSON.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

REGISTRY_ENV = "KEPL_REGISTRY_URL"


def avro_topics(topics: str | Sequence[str] | None, pattern: str | None,
                registry: str | None = None) -> dict[str, str]:
    """Topic -> the newest Avro schema of its ``<topic>-value`` subject ("" for a JSON
    Schema subject: JSON behind the framing), for the topics read (named, or every
    subject's topic the pattern matches)."""
    url = registry or os.environ.get(REGISTRY_ENV)
    if not url:
        return {}
    from app.runtime.kafka import formats

    reg = formats.client(url.rstrip("/"))
    subjects = [s for s in reg.get_subjects() if s.endswith("-value")]
    if pattern is not None:
        rx = re.compile(pattern)
        names = [s[:-len("-value")] for s in subjects if rx.fullmatch(s[:-len("-value")])]
    else:
        wanted = [topics] if isinstance(topics, str) else list(topics or [])
        names = [t for t in wanted if f"{t}-value" in subjects]
    out = {}
    for t in names:
        schema = reg.get_latest_version(f"{t}-value").schema
        kind = schema.schema_type or "AVRO"
        if kind in ("AVRO", "JSON"):
            out[t] = schema.schema_str if kind == "AVRO" else ""
    return out


def json_values(raw: DataFrame, topics: str | Sequence[str] | None = None,
                pattern: str | None = None, registry: str | None = None) -> DataFrame:
    """Kafka source rows whose framed values (of the topics that have a subject) are
    replaced by the JSON text of the same row; other values are left as they are."""
    schemas = avro_topics(topics, pattern, registry)
    if not schemas:
        return raw
    from pyspark.sql.avro.functions import from_avro

    body = F.expr("substring(value, 6, length(value) - 5)")
    value = F.col("value")
    for topic, schema in schemas.items():
        text = F.to_json(from_avro(body, schema)).cast("binary") if schema else body
        value = F.when(F.col("topic") == topic, text).otherwise(value)
    return raw.withColumn("value", value)

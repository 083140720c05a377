"""Spark jobs over kepl output topics: batch read, a continuous stream job, a summary.

An output record is a JSON object (the row), keyed by its context partition, with
headers ``kepl.id`` (``statement/context partition/sequence``), ``kepl.time`` (runtime
ms) and, on a remove row, ``kepl.stream: remove``; records that carry
``kepl.statement`` and ``kepl.context_partition`` headers (older workers) are read
too. A worker that crashes may publish a row twice, always with the
same ``kepl.id``: every job here drops such repeats. Reads are ``read_committed`` so
rows of aborted transactions are never seen.

Parsed rows have the columns of ``ROW_COLUMNS``: the headers, ``value`` (the row as
``map<string,string>``, or a struct when a schema is given), ``value_json`` (the
record value as text, kept so that numbers keep their JSON type for ``summary``) and
where the record was read (``topic``, ``partition``, ``offset``, ``kafka_timestamp``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import MapType, StringType, StructType

from app.analytics import avro
from app.runtime.kafka.router import H_ID, H_PARTITION, H_STATEMENT, H_STREAM, H_TIME

ROW_COLUMNS = (
    "statement",
    "stream",
    "context_partition",
    "runtime_ms",
    "row_id",
    "value",
    "value_json",
    "topic",
    "partition",
    "offset",
    "kafka_timestamp",
)
# Variant types of JSON numbers (schema_of_variant: BIGINT, DECIMAL(p,s), DOUBLE, ...).
_NUMERIC_VARIANT = r"^(TINYINT|SMALLINT|INT|BIGINT|FLOAT|DOUBLE|DECIMAL)\b"
_DEDUPE_KEY = "_kepl_dedupe_key"

Schema = StructType | str | None


def output_topic_pattern(app: str) -> str:
    """Regex of all output topics of a kepl app (``kepl.<app>.out.<statement>``)."""
    return rf"kepl\.{re.escape(app)}\.out\..+"


def kafka_source_options(
    bootstrap: str, topics: str | Sequence[str] | None = None, pattern: str | None = None
) -> dict[str, str]:
    """Options of Spark's Kafka source: from the start, committed records only, headers."""
    if (topics is None) == (pattern is None):
        raise ValueError("give exactly one of topics or pattern")
    from app.runtime.kafka import client

    options = {
        "kafka.bootstrap.servers": bootstrap,
        "startingOffsets": "earliest",
        "kafka.isolation.level": "read_committed",
        "includeHeaders": "true",
        **client.spark_options(),  # security settings (KEPL_KAFKA_*, --kafka-config)
    }
    if pattern is not None:
        options["subscribePattern"] = pattern
    else:
        names = [topics] if isinstance(topics, str) else list(topics or [])
        if not names:
            raise ValueError("no topics given")
        options["subscribe"] = ",".join(names)
    return options


def _header(name: str) -> Column:
    """The first value of a Kafka header as a string column (null when absent)."""
    matches = F.filter("headers", lambda h: h["key"] == F.lit(name))
    return F.get(matches, 0)["value"].cast("string")


def parse_output(raw: DataFrame, schema: Schema = None) -> DataFrame:
    """Kafka source rows (with headers) as kepl output rows (``ROW_COLUMNS``)."""
    value_json = F.col("value").cast("string")
    value_type = schema if schema is not None else MapType(StringType(), StringType())
    return raw.select(
        F.coalesce(_header(H_STATEMENT),
                   F.substring_index(_header(H_ID), "/", 1)).alias("statement"),
        F.coalesce(_header(H_STREAM), F.lit("insert")).alias("stream"),
        F.coalesce(_header(H_PARTITION), F.col("key").cast("string")).alias(
            "context_partition"),
        _header(H_TIME).try_cast("long").alias("runtime_ms"),
        _header(H_ID).alias("row_id"),
        F.from_json(value_json, value_type).alias("value"),
        value_json.alias("value_json"),
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_timestamp"),
    )


def _dedupe_key() -> Column:
    """``row_id``, or the record's position for records without one (never merged)."""
    position = F.concat_ws("/", F.lit("@"), "topic", "partition", "offset")
    return F.coalesce(F.col("row_id"), position)


def drop_repeats(rows: DataFrame) -> DataFrame:
    """Keep the first record (by Kafka timestamp, then position) of each ``row_id``."""
    first = Window.partitionBy(_DEDUPE_KEY).orderBy(
        "kafka_timestamp", "topic", "partition", "offset"
    )
    return (
        rows.withColumn(_DEDUPE_KEY, _dedupe_key())
        .withColumn("_kepl_rank", F.row_number().over(first))
        .where(F.col("_kepl_rank") == 1)
        .drop(_DEDUPE_KEY, "_kepl_rank")
    )


def read_output(
    spark: SparkSession,
    bootstrap: str,
    topics: str | Sequence[str] | None = None,
    *,
    pattern: str | None = None,
    schema: Schema = None,
) -> DataFrame:
    """Batch read of output topics up to their current end, repeats dropped."""
    raw = (
        spark.read.format("kafka")
        .options(**kafka_source_options(bootstrap, topics, pattern))
        .option("endingOffsets", "latest")
        .load()
    )
    raw = avro.json_values(raw, topics, pattern)  # Avro outputs read as JSON rows
    return drop_repeats(parse_output(raw, schema))


SINKS = ("parquet", "console")


def deduped_stream(
    spark: SparkSession,
    bootstrap: str,
    topics: str | Sequence[str] | None = None,
    *,
    pattern: str | None = None,
    schema: Schema = None,
    dedupe_window: str = "1 hour",
) -> DataFrame:
    """Streaming rows of output topics (``ROW_COLUMNS``), repeats of a ``row_id`` dropped.

    ``dropDuplicatesWithinWatermark`` on ``row_id`` over the Kafka timestamp: a repeat
    published within ``dedupe_window`` of the first copy is dropped, also across
    restarts (the state lives in the query's checkpoint).
    """
    raw = (
        spark.readStream.format("kafka")
        .options(**kafka_source_options(bootstrap, topics, pattern))
        .load()
    )
    raw = avro.json_values(raw, topics, pattern)  # Avro outputs read as JSON rows
    return (
        parse_output(raw, schema)
        .withColumn(_DEDUPE_KEY, _dedupe_key())
        .withWatermark("kafka_timestamp", dedupe_window)
        .dropDuplicatesWithinWatermark([_DEDUPE_KEY])
        .drop(_DEDUPE_KEY)
    )


def stream(
    spark: SparkSession,
    bootstrap: str,
    topics: str | Sequence[str] | None = None,
    *,
    sink: str = "parquet",
    path: str | None = None,
    checkpoint: str | None = None,
    pattern: str | None = None,
    schema: Schema = None,
    dedupe_window: str = "1 hour",
    available_now: bool = False,
    interval: str = "10 seconds",
    partition_by: Sequence[str] = (),
    query_name: str | None = None,
) -> StreamingQuery:
    """Start the continuous job over output topics into a sink; returns the running query.

    ``parquet`` needs ``path`` and ``checkpoint``: the file sink commits each
    micro-batch exactly once (its ``_spark_metadata`` log) and the checkpoint holds the
    read offsets and the de-duplication state, so a restarted query neither loses nor
    doubles rows. ``console`` prints each micro-batch as a table (checkpoint optional:
    without one it starts from the beginning each time). ``available_now`` processes what is in the
    topics now and stops; otherwise a micro-batch runs every ``interval``.
    """
    if sink not in SINKS:
        raise ValueError(f"unknown sink {sink!r} (one of {', '.join(SINKS)})")
    if sink == "parquet" and not (path and checkpoint):
        raise ValueError("the parquet sink needs a path and a checkpoint")
    rows = deduped_stream(spark, bootstrap, topics, pattern=pattern, schema=schema,
                          dedupe_window=dedupe_window)
    writer = rows.writeStream.outputMode("append")
    if sink == "parquet":
        writer = writer.format("parquet").option("path", path)
    else:  # printed by Python: the JVM's standard output is stderr (session.py)
        writer = writer.foreachBatch(print_batch)
    if checkpoint:
        writer = writer.option("checkpointLocation", checkpoint)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if query_name:
        writer = writer.queryName(query_name)
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=interval)
    return writer.start()


def print_batch(batch: DataFrame, batch_id: int) -> None:
    """The console sink: one micro-batch as a table on standard output (none if empty:
    a batch may run only to advance the watermark)."""
    if batch.isEmpty():
        return
    print(f"Batch: {batch_id}")
    batch.show(1000, truncate=False)
    sys.stdout.flush()


def to_parquet(
    spark: SparkSession,
    bootstrap: str,
    path: str,
    checkpoint: str,
    topics: str | Sequence[str] | None = None,
    **options: Any,
) -> StreamingQuery:
    """``stream`` into Parquet (kept for callers of the export's first form)."""
    return stream(spark, bootstrap, topics, sink="parquet", path=path, checkpoint=checkpoint,
                  **options)


def summary(rows: DataFrame) -> DataFrame:
    """Per statement and stream: row count and, per numeric JSON field, count/min/max/avg.

    One output row per (statement, stream, column) with columns ``statement``,
    ``stream``, ``rows``, ``column``, ``values``, ``min``, ``max``, ``avg``; a
    (statement, stream) without numeric fields gets one row with ``column`` null.
    A field counts as numeric by its JSON type (``"42"`` is a string, ``true`` is not
    a number); the statistics are doubles. ``rows`` needs only ``statement``,
    ``stream`` and ``value_json``, so a Parquet export can be summarised as well.
    """
    keys = ["statement", "stream"]
    counts = rows.groupBy(*keys).agg(F.count(F.lit(1)).alias("rows"))
    cells = rows.select(
        *keys,
        F.explode(F.from_json("value_json", "map<string,variant>")).alias("column", "cell"),
    )
    numbers = cells.where(F.schema_of_variant("cell").rlike(_NUMERIC_VARIANT)).select(
        *keys, "column", F.try_variant_get("cell", "$", "double").alias("x")
    )
    stats = numbers.groupBy(*[F.col(k).alias(f"_s_{k}") for k in keys], "column").agg(
        F.count("x").alias("values"),
        F.min("x").alias("min"),
        F.max("x").alias("max"),
        F.avg("x").alias("avg"),
    )
    # Null-safe: records without kepl headers have a null statement and still count.
    same_group = [counts[k].eqNullSafe(stats[f"_s_{k}"]) for k in keys]
    return (
        counts.join(stats, same_group, "left")
        .select(*keys, "rows", "column", "values", "min", "max", "avg")
        .orderBy(*keys, F.col("column").asc_nulls_first())
    )

"""A small local SparkSession with the Kafka connector, for analytics and tests.

Two cores, a small driver heap, no UI and no progress bars, logs at ERROR, session
time zone UTC (so timestamps print the same everywhere), few shuffle partitions (the
data of a kepl app's output topics is small on one machine).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from app.analytics.jars import ensure_spark_jars
from app.kafka.local_broker import kepl_home

# Replaces Spark's default log4j2 profile (INFO to the console): errors only.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# PySpark starts as a shell: Spark then prints "Setting default log level" unless the
# gateway class (its logger) has a level of its own equal to the root's.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def _log4j2_config() -> Path:
    """Write (once) and return the quiet log4j2 configuration file."""
    path = kepl_home() / "spark" / "log4j2-quiet.properties"
    if not path.is_file() or path.read_text() != _LOG4J2:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        scratch.write_text(_LOG4J2)
        scratch.replace(path)
    return path


def local_session(
    app_name: str = "kepl-analytics",
    *,
    cores: int = 2,
    driver_memory: str = "768m",
    jars: Sequence[Path] | None = None,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """Start (or return the running) local SparkSession with the Kafka connector jars.

    Settings only take effect when this call starts the JVM: a session already running
    in this process is returned as it is (Spark allows one per process).
    """
    jar_paths = list(jars) if jars is not None else ensure_spark_jars()
    java_opts = f"-Dlog4j.configurationFile={_log4j2_config()} -XX:+UseSerialGC"
    conf = {
        "spark.master": f"local[{cores}]",
        "spark.app.name": app_name,
        "spark.driver.memory": driver_memory,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.jars": ",".join(str(p) for p in jar_paths),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    conf.update(extra_conf or {})
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark

"""The SparkSession of kepl's Spark jobs, with the Kafka connector of the installed Spark.

``master`` is any Spark master URL (``local[*]`` by default, ``spark://host:7077``,
``yarn``, ``k8s://...``). Locally: a small driver heap bound to 127.0.0.1, few shuffle
partitions (the output topics of a kepl app are small on one machine). Always: no UI
and no progress bars, logs at ERROR, session time zone UTC (timestamps print the same
everywhere), the connector through ``spark.jars.packages`` (app/analytics/jars.py).
A job started by ``spark-submit`` (app/analytics/submit.py) does not come here: the
session it gets is the one spark-submit configured.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from app.analytics.jars import package_conf
from app.kafka.local_broker import kepl_home

DEFAULT_MASTER = "local[*]"

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


def _local_cores(master: str) -> int | None:
    """Cores of a ``local``/``local[N]``/``local[*]`` master (``None``: not local)."""
    if master == "local":
        return 1
    if master.startswith("local["):
        n = master[len("local["):].split(",")[0].rstrip("]")
        return (os.cpu_count() or 1) if n == "*" else int(n)
    return None


def local_session(
    app_name: str = "kepl-analytics",
    *,
    master: str = DEFAULT_MASTER,
    driver_memory: str = "768m",
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """Start (or return the running) SparkSession with the Kafka connector.

    Settings only take effect when this call starts the JVM: a session already running
    in this process is returned as it is (Spark allows one per process).
    """
    java_opts = f"-Dlog4j.configurationFile={_log4j2_config()} -XX:+UseSerialGC"
    conf = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": java_opts,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        **package_conf(),
    }
    cores = _local_cores(master)
    if cores is not None:  # executors are threads of this process: stay on loopback
        conf.update({
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.shuffle.partitions": str(cores),
            "spark.default.parallelism": str(cores),
        })
    conf.update(extra_conf or {})
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    with _jvm_stdout_to_stderr():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def _jvm_stdout_to_stderr() -> Iterator[None]:
    """Start the JVM with its standard output on stderr (Ivy prints its settings line
    there): kepl's standard output stays the command's output alone (``--json``)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)

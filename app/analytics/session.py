"""The SparkSession of kepl's Spark jobs, with the Kafka connector of the installed Spark.

``master`` is any Spark master URL (``local[*]`` by default, ``spark://host:7077``,
``yarn``, ``k8s://...``). Locally: a small driver heap bound to 127.0.0.1, few shuffle
partitions (the output topics of a kepl app are small on one machine). Always: no UI
and no progress bars, logs at ERROR, session time zone UTC (timestamps print the same
everywhere), the connector through ``spark.jars.packages`` (app/analytics/jars.py).
The JVM's own output (Ivy's resolution report, JVM warnings) goes to ``jvm_log()``
unless ``verbose``; a JVM that fails to start has that log's tail in the error.
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

from app.analytics.cluster import session_conf
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
    verbose: bool = False,
) -> SparkSession:
    """Start (or return the running) SparkSession with the Kafka connector.

    Settings only take effect when this call starts the JVM: a session already running
    in this process is returned as it is (Spark allows one per process).  ``verbose``:
    the JVM's output goes to stderr instead of ``jvm_log()``.
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
    conf.update(session_conf(master))
    conf.update(extra_conf or {})
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    with _jvm_output(None if verbose else jvm_log()):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class JvmStartError(RuntimeError):
    """The Spark JVM did not start; the message ends with its log's last lines."""


def jvm_log() -> Path:
    """Where the JVM of this process writes its output when not ``verbose``."""
    return kepl_home() / "spark" / f"jvm-{os.getpid()}.log"


LOG_TAIL = 20


@contextmanager
def _jvm_output(log: Path | None) -> Iterator[None]:
    """Start the JVM with its standard output and error on ``log`` (the JVM keeps the
    descriptors it started with), or, with no log, its standard output on stderr (Ivy
    prints its report there): kepl's standard output stays the command's output alone
    (``--json``)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = -1
    try:
        if log is None:
            os.dup2(2, 1)
        else:
            log.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - re-raised with the JVM's own words
            if log is None:
                raise
            tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
            raise JvmStartError("\n".join([f"Spark did not start: {exc}",
                                            f"last lines of {log}:", *tail])) from exc
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for d in saved:
            os.close(d)
        if fd >= 0:
            os.close(fd)

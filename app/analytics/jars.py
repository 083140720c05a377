"""The Spark Kafka connector as Spark users get it: ``spark.jars.packages`` through Ivy.

The coordinates are ``org.apache.spark:spark-sql-kafka-0-10_<scala>:<spark>``, the Scala
and Spark versions of the installed pyspark exactly (a connector of another Spark
version is not used: its internal APIs change between releases). Spark resolves them
with Ivy when the JVM starts, from one Maven repository (``KEPL_SPARK_MAVEN_REPO``,
default Maven Central), into an Ivy cache under ``${KEPL_HOME:-~/.cache/kepl}/ivy``
that later sessions reuse. Kepl writes the Ivy settings itself so that only that
repository is asked (Spark's defaults also ask a spark-packages host).

A cluster job gets the same coordinates from ``kepl spark packages`` for
``spark-submit --packages``.
"""

from __future__ import annotations

import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

from app.kafka.local_broker import kepl_home

CENTRAL = "https://repo1.maven.org/maven2"
REPO_ENV = "KEPL_SPARK_MAVEN_REPO"
GROUP = "org.apache.spark"
_IVY_SETTINGS = """\
<ivysettings>
  <!-- Written by kepl (app/analytics/jars.py): one Maven repository, Ivy's cache
       (locked per artifact: two kepl spark commands may resolve at once). -->
  <settings defaultResolver="kepl-maven"/>
  <caches lockStrategy="artifact-lock"/>
  <resolvers>
    <ibiblio name="kepl-maven" m2compatible="true" root="{root}"/>
  </resolvers>
</ivysettings>
"""


POM = Path(__file__).with_name("pom.xml")


class SparkJarsError(RuntimeError):
    """The connector cannot be resolved for the installed Spark."""


def _log(msg: str) -> None:
    """One progress line on stderr (stdout stays free for command output)."""
    print(f"kepl spark: {msg}", file=sys.stderr, flush=True)


def spark_version() -> str:
    """Version of the installed pyspark (the connector must be exactly this version)."""
    import pyspark

    return str(pyspark.__version__)


def scala_version() -> str:
    """Scala binary version of the installed pyspark, from its ``scala-library`` jar."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob("scala-library-*.jar"):
        match = re.fullmatch(r"scala-library-(\d+\.\d+)\.\d+\.jar", jar.name)
        if match:
            return match.group(1)
    raise SparkJarsError(f"no scala-library jar in {jars}: cannot tell pyspark's Scala version")


def connector_package(spark: str | None = None, scala: str | None = None) -> str:
    """Maven coordinates of the Kafka connector of the installed Spark."""
    return (f"{GROUP}:spark-sql-kafka-0-10_{scala or scala_version()}:"
            f"{spark or spark_version()}")


def avro_package() -> str:
    """Spark's Avro data source of the installed Spark (Avro output topics: avro.py)."""
    return f"{GROUP}:spark-avro_{scala_version()}:{spark_version()}"


def maven_repository() -> str:
    """The Maven repository Ivy resolves from (``KEPL_SPARK_MAVEN_REPO``, else Central)."""
    return (os.environ.get(REPO_ENV, "").strip() or CENTRAL).rstrip("/")


def ivy_home() -> Path:
    """Ivy's directory (``spark.jars.ivy``): its cache and the resolved jars."""
    return kepl_home() / "ivy"


def ivy_settings(repository: str | None = None) -> Path:
    """Write (when changed) and return the Ivy settings file naming the repository."""
    text = _IVY_SETTINGS.format(root=repository or maven_repository())
    path = ivy_home() / "ivysettings.xml"
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        scratch.write_text(text)
        scratch.replace(path)
    return path


def pom_property(name: str) -> str:
    """A ``<properties>`` value of ``app/analytics/pom.xml``, the jar list of a Maven copy
    for hosts without Ivy access (package data; kepl's own sessions use Ivy)."""
    match = re.search(rf"<{re.escape(name)}>\s*([^<\s]+)\s*</{re.escape(name)}>", POM.read_text())
    if not match:
        raise SparkJarsError(f"no <{name}> in {POM}")
    return match.group(1)


def _cached_jar(package: str) -> Path:
    """Where Spark's Ivy retrieve puts the connector jar (present once resolved)."""
    group, artifact, version = package.split(":")
    return ivy_home() / "jars" / f"{group}_{artifact}-{version}.jar"


def check_published(package: str, repository: str) -> None:
    """Fail with a clear message when the connector's POM is not in the repository.

    Ivy's own failure surfaces as the Java gateway exiting; this check names the cause.
    A network error is not judged here (Ivy reports it).
    """
    group, artifact, version = package.split(":")
    url = f"{repository}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.pom"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=20):
            return
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            return
    except (urllib.error.URLError, OSError):
        return
    raise SparkJarsError(
        f"{package} is not in {repository}: the Kafka connector must match the installed "
        f"pyspark exactly; install a pyspark whose connector is published there "
        f"(pip install 'kepl[spark]') or point {REPO_ENV} at a repository that has it")


def package_conf(repository: str | None = None) -> dict[str, str]:
    """Spark settings that put the exact connector on the classpath (before the JVM starts)."""
    repository = repository or maven_repository()
    package = connector_package()
    if not _cached_jar(package).is_file():
        check_published(package, repository)
        _log(f"resolving {package} from {repository} into {ivy_home()} (one-time)...")
    return {
        "spark.jars.packages": f"{package},{avro_package()}",
        "spark.jars.ivy": str(ivy_home()),
        "spark.jars.ivySettings": str(ivy_settings(repository)),
    }


if __name__ == "__main__":
    print(connector_package())

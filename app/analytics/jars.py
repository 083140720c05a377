"""The Spark Kafka connector jars, fetched once with Maven into kepl's machine cache.

``app/analytics/pom.xml`` (package data) names the connector and excludes everything pyspark already
ships; Maven copies the remaining jars (connector, token provider, kafka-clients,
commons-pool2) into ``${KEPL_HOME:-~/.cache/kepl}/spark/<pyspark version>/jars``.
The copy goes to a scratch directory renamed into place at the end, under a file lock,
so concurrent callers fetch once and an interrupted fetch leaves nothing half done.

If the connector of the exact pyspark version is not in the Maven repository (a new
pyspark can reach PyPI before Maven Central), the fetch is retried once with the
``kepl.fallback.*`` versions of the POM, of the same major version, with a warning.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from app.kafka.local_broker import file_lock, kepl_home
from app.maven import copy_dependencies

POM = Path(__file__).with_name("pom.xml")
CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10_2.13"
# Maven's words for "this artifact or its POM is not in the repository".
_MISSING_MARKERS = ("Could not find artifact", "Failed to read artifact descriptor", "not found")


class SparkJarsError(RuntimeError):
    """The connector jars could not be fetched."""


def _log(msg: str) -> None:
    """One progress line on stderr (stdout stays free for command output)."""
    print(f"kepl spark: {msg}", file=sys.stderr, flush=True)


def pyspark_version() -> str:
    """Version of the installed pyspark distribution (the connector must match it)."""
    return metadata.version("pyspark")


def jars_dir(version: str | None = None) -> Path:
    """Cache directory of the jars for a pyspark version (may not exist yet)."""
    return kepl_home() / "spark" / (version or pyspark_version()) / "jars"


def pom_property(name: str) -> str:
    """A ``<properties>`` value of ``app/analytics/pom.xml`` (its single source of truth)."""
    match = re.search(rf"<{re.escape(name)}>\s*([^<\s]+)\s*</{re.escape(name)}>", POM.read_text())
    if not match:
        raise SparkJarsError(f"no <{name}> in {POM}")
    return match.group(1)


def _cached(directory: Path) -> list[Path]:
    """The jars of a complete cache directory, or ``[]`` if it is absent or incomplete."""
    if not directory.is_dir() or not any(directory.glob(f"{CONNECTOR_ARTIFACT}-*.jar")):
        return []
    return sorted(directory.glob("*.jar"))


def _version_pairs(version: str) -> list[tuple[str, str]]:
    """(connector, token provider) versions to try: the exact one, then the POM's fallback."""
    exact = (version, version)
    fallback = (
        pom_property("kepl.fallback.kafka.version"),
        pom_property("kepl.fallback.token.version"),
    )
    same_major = fallback[0].split(".")[0] == version.split(".")[0]
    return [exact, fallback] if fallback != exact and same_major else [exact]


def _copy_dependencies(
    mvn: str, version: str, pair: tuple[str, str], out: Path
) -> subprocess.CompletedProcess[str]:
    """``mvn dependency:copy-dependencies`` for one version pair into ``out``."""
    return copy_dependencies(mvn, POM, out, {"spark.version": version,
                                             "spark.kafka.version": pair[0],
                                             "spark.token.version": pair[1]})


def ensure_spark_jars(version: str | None = None) -> list[Path]:
    """Fetch the connector jars unless cached; return their paths (for ``spark.jars``)."""
    version = version or pyspark_version()
    target = jars_dir(version)
    jars = _cached(target)
    if jars:
        return jars
    with file_lock(target.parent / ".fetch.lock"):
        jars = _cached(target)
        if jars:  # another process fetched while we waited for the lock
            return jars
        mvn = shutil.which("mvn")
        if mvn is None:
            raise SparkJarsError("Maven (mvn) is not on PATH; it is needed once to fetch jars")
        _log(f"fetching the Spark {version} Kafka connector jars into {target} (one-time)...")
        started = time.monotonic()
        outputs: list[str] = []
        for pair in _version_pairs(version):
            scratch = target.parent / f"jars.partial-{os.getpid()}"
            shutil.rmtree(scratch, ignore_errors=True)
            proc = _copy_dependencies(mvn, version, pair, scratch)
            outputs.append(f"$ connector {pair[0]}, token provider {pair[1]}:\n{proc.stdout}")
            if proc.returncode == 0 and _cached(scratch):
                if target.exists():  # an incomplete leftover (no connector jar): replace it
                    shutil.rmtree(target)
                scratch.rename(target)
                if pair != (version, version):
                    _log(
                        f"WARNING: {CONNECTOR_ARTIFACT}:{version} is not in the Maven repository; "
                        f"using connector {pair[0]} with token provider {pair[1]} instead"
                    )
                jars = _cached(target)
                _log(f"fetched {len(jars)} jars in {time.monotonic() - started:.1f} s")
                return jars
            shutil.rmtree(scratch, ignore_errors=True)
            if not any(marker in proc.stdout for marker in _MISSING_MARKERS):
                break  # not a missing version (network, Maven itself): a fallback won't help
        tail = "\n".join("\n".join(outputs).strip().splitlines()[-30:])
        raise SparkJarsError(f"Maven could not fetch the Spark Kafka connector jars:\n{tail}")


if __name__ == "__main__":
    for jar in ensure_spark_jars():
        print(jar)

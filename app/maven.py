"""One-time jar fetches with Maven (the local Kafka broker, Spark's Kafka connector)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def copy_dependencies(mvn: str, pom: Path, out: Path,
                      properties: dict[str, str] | None = None
                      ) -> subprocess.CompletedProcess[str]:
    """Run ``mvn dependency:copy-dependencies`` of ``pom`` into ``out`` (quiet, batch
    mode, output captured for the error message)."""
    cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(pom),
           "dependency:copy-dependencies",
           *(f"-D{k}={v}" for k, v in (properties or {}).items()),
           f"-DoutputDirectory={out}"]
    return subprocess.run(cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)

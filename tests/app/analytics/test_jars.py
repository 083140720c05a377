"""The connector coordinates and the Ivy settings: the installed Spark's exact version."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyspark
import pytest

from app.analytics import jars

PUBLISHED = ("/maven2/org/apache/spark/spark-sql-kafka-0-10_2.13/4.2.0/"
             "spark-sql-kafka-0-10_2.13-4.2.0.pom")


class _Repo(BaseHTTPRequestHandler):
    """A Maven repository holding one POM."""

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200 if self.path == PUBLISHED else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def repo() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Repo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/maven2"
    server.shutdown()
    server.server_close()


def test_the_connector_is_the_installed_spark_exactly() -> None:
    assert jars.scala_version() == "2.13"
    assert jars.connector_package() == (
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}")
    assert jars.connector_package("4.2.0", "2.13") == (
        "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0")


def test_an_unpublished_version_is_one_clear_error(repo: str) -> None:
    jars.check_published("org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0", repo)
    with pytest.raises(jars.SparkJarsError) as err:
        jars.check_published("org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0", repo)
    assert str(err.value) == (
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0 is not in {repo}: the Kafka "
        "connector must match the installed pyspark exactly; install a pyspark whose "
        "connector is published there (pip install 'kepl[spark]') or point "
        "KEPL_SPARK_MAVEN_REPO at a repository that has it")


def test_spark_settings_name_the_package_and_one_repository(
        repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEPL_HOME", str(tmp_path))
    monkeypatch.setattr(jars, "spark_version", lambda: "4.2.0")
    monkeypatch.setenv(jars.REPO_ENV, repo + "/")
    assert jars.package_conf() == {
        "spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0,"
                               "org.apache.spark:spark-avro_2.13:4.2.0",
        "spark.jars.ivy": str(tmp_path / "ivy"),
        "spark.jars.ivySettings": str(tmp_path / "ivy" / "ivysettings.xml"),
    }
    assert f'<ibiblio name="kepl-maven" m2compatible="true" root="{repo}"/>' in (
        tmp_path / "ivy" / "ivysettings.xml").read_text()
    monkeypatch.setattr(jars, "spark_version", lambda: "4.3.0")
    with pytest.raises(jars.SparkJarsError):
        jars.package_conf()

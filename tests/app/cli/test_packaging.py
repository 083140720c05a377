"""Packaging: the metadata follows the current pyproject conventions, the dependencies are
split by role, and a wheel installed outside the checkout gives a working ``kepl``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from app.analytics.jars import pom_property
from app.cli.main import main
from app.kafka.local_broker import kafka_version

ROOT = Path(__file__).resolve().parents[3]
PACKAGE_DATA = [
    "app/analytics/pom.xml",
    "app/cli/bank.yaml",
    "app/epl/grammar.lark",
    "app/kafka/pom.xml",
    "app/registry/pom.xml",
    "app/registry/src/main/java/dev/kepl/registry/DynamicPropertiesProducer.java",
    "schemas/statement-file.schema.json",
]
"""Every file the CLI reads at run time, as the wheel holds them."""
# What the installed package reads from its data files, one line per reader.
PROBE = """\
import app
import operators
import schemas
from app.analytics.jars import pom_property
from app.cli.kafka_commands import DEMO_FILE
from app.kafka.local_broker import kafka_version
from app.statements import SCHEMA_PATH, load_statement_file
print(Path(app.__file__).parent == Path(sys.argv[1]) / "app")
print(Path(operators.__file__).parent == Path(sys.argv[1]) / "operators")
print(Path(schemas.__file__).parent == Path(sys.argv[1]) / "schemas")
print(kafka_version() == sys.argv[2])
print(pom_property("kepl.fallback.kafka.version") == sys.argv[3])
print(load_statement_file(DEMO_FILE).app)
print(SCHEMA_PATH.name)
"""


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_is_an_spdx_string_with_its_file() -> None:
    project = _project()
    meta = project["project"]
    assert meta["license"] == "Apache-2.0"
    assert meta["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert not [c for c in meta.get("classifiers", []) if c.startswith("License ::")]
    # license expressions need setuptools 77 or later in the build environment
    assert project["build-system"]["requires"] == ["setuptools>=77"]


def test_dependencies_are_split_by_role() -> None:
    meta = _project()["project"]
    names = [d.split(">")[0].split("[")[0] for d in meta["dependencies"]]
    assert names == ["confluent-kafka", "rocksdict", "lark", "pyyaml", "jsonschema", "orjson",
                     "prometheus-client", "sortedcontainers"]
    # at most the newest Spark whose Kafka connector Maven Central publishes
    assert meta["optional-dependencies"]["spark"] == ["pyspark>=4.0,<=4.2.0"]
    dev = [d.split(">")[0] for d in meta["optional-dependencies"]["dev"]]
    assert dev == ["pytest", "hypothesis", "ruff", "pytest-timeout", "py-spy", "testcontainers",
                   "croniter", "faust-streaming", "aiokafka", "setuptools",
                   "kubernetes-validate"]
    # the bench charts (tests/bench/charts.py)
    assert meta["optional-dependencies"]["bench"] == ["matplotlib>=3.8"]
    assert "pip install -q -e '.[dev,spark,bench]'" in (ROOT / "Makefile").read_text()


def test_kepl_spark_help_does_not_import_pyspark() -> None:
    code = ("import sys\nfrom app.cli.main import main\n"
            "try:\n    main(['spark', '--help'])\nexcept SystemExit as e:\n    print(e.code)\n"
            "print(sorted(m for m in sys.modules if m.startswith(('pyspark', 'py4j'))))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    assert out.splitlines()[-2:] == ["0", "[]"]


def test_kepl_version_and_help_import_no_compiler_and_no_runtime() -> None:
    """Short commands stay short: the parser, planner, operators and Kafka runtime are
    imported by the commands that use them (make bench-startup times them)."""
    heavy = ("app.epl.planner", "app.epl.parser", "operators.", "app.runtime.kafka.",
             "confluent_kafka", "lark")
    for argv in (["--version"], ["--help"]):
        code = ("import sys\nfrom app.cli.main import main\n"
                f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
                f"print(sorted(m for m in sys.modules if m.startswith({heavy!r})))\n")
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        assert out.splitlines()[-1] == "[]", (argv, out.splitlines()[-1])


def test_kepl_spark_without_pyspark_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # as if it were not installed, also where an earlier test imported it
    for name in ["pyspark", *(m for m in sys.modules if m.startswith("pyspark."))]:
        monkeypatch.setitem(sys.modules, name, None)
    assert main(["spark", "read", "--topic", "t"]) == 2
    assert capsys.readouterr().err == (
        "kepl spark: PySpark is not installed: pip install 'kepl[spark]'\n")


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_installed_wheel_works_outside_the_checkout(tmp_path: Path) -> None:
    # build from a copy, so the checkout gets no build/ or egg-info of this run
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("app", "operators", "schemas"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"),
          str(src)], tmp_path)
    (wheel,) = (tmp_path / "dist").glob("kepl-*.whl")
    files = zipfile.ZipFile(wheel).namelist()
    assert sorted(f for f in files if not f.endswith(".py") and ".dist-info/" not in f) == \
        PACKAGE_DATA
    assert not [f for f in files if f.startswith(("tests/", "deploy/", "examples/"))]

    site = tmp_path / "site"
    _run([*pip, "install", "--no-deps", "--no-compile", "--target", str(site), str(wheel)],
         tmp_path)
    _run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], tmp_path)
    python = str(tmp_path / "venv" / "bin" / "python")
    # the dependencies come from this venv's site-packages, kepl only from the wheel
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{sysconfig.get_paths()['purelib']}",
           "KEPL_CACHE_DIR": str(tmp_path / "cache")}
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples")
    installed = [python, str(site / "bin" / "kepl")]
    checkout = [sys.executable, "-m", "app.cli.main"]

    # the same values as the checkout's readers give
    probe = _run([python, "-c", "import sys\nfrom pathlib import Path\n" + PROBE, str(site),
                  kafka_version(), pom_property("kepl.fallback.kafka.version")], work, env)
    assert probe == "True\nTrue\nTrue\nTrue\nTrue\nbank\nstatement-file.schema.json\n"
    assert _run([*installed, "--version"], work, env) == "kepl 0.1.0\n"
    examples = ["examples/bank.yaml", "examples/bank.epl"]
    checked = _run([*installed, "check", *examples], work, env)
    assert checked == _run([*checkout, "check", *examples], ROOT) == "2 file(s) valid\n"
    explained = _run([*installed, "explain", "examples/bank.yaml"], work, env)
    assert explained == _run([*checkout, "explain", "examples/bank.yaml"], ROOT)
    assert [line for line in explained.splitlines() if line.startswith("statement")] == \
        ["statement large_withdrawals (query)", "statement last_five (query)"]
    assert _run([*installed, "spark", "--help"], work, env).startswith("usage: kepl spark ")

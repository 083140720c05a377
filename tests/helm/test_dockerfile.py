"""The worker image's Dockerfile (deploy/docker), checked without Docker: stages, the
non-root user, the runtime-only install, the exposed metrics port and a HEALTHCHECK
that answers like the worker's /healthz."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from app.runtime.kafka.health import Health, Metrics, serve

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
DOCKERIGNORE = ROOT / "deploy" / "docker" / "Dockerfile.dockerignore"
VALUES = ROOT / "helm" / "kepl" / "values.yaml"

Instruction = tuple[str, str]


def instructions(text: str) -> list[Instruction]:
    """(KEYWORD, arguments) of each instruction: continuations joined, comments dropped."""
    out: list[Instruction] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1].strip() + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def stages(instrs: list[Instruction]) -> dict[str, list[Instruction]]:
    """Instructions per build stage, keyed by the stage's ``AS`` name."""
    out: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    for keyword, args in instrs:
        if keyword == "FROM":
            name = re.fullmatch(r"\S+ AS (\S+)", args)
            assert name, f"unnamed stage: FROM {args}"
            current = out.setdefault(name.group(1), [])
        elif current is not None:
            current.append((keyword, args))
    return out


@pytest.fixture(scope="module")
def parsed() -> list[Instruction]:
    return instructions(DOCKERFILE.read_text())


def test_two_stages_on_the_same_slim_base(parsed: list[Instruction]) -> None:
    froms = [args for keyword, args in parsed if keyword == "FROM"]
    assert froms == ["python:${PYTHON_VERSION}-slim-bookworm AS build",
                     "python:${PYTHON_VERSION}-slim-bookworm AS runtime"]
    assert ("ARG", "PYTHON_VERSION=3.11") in parsed
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11"


def test_runtime_installs_no_extras(parsed: list[Instruction]) -> None:
    """``pip install .`` without extras: the runtime dependencies only (no pyspark, no
    test tools), and the runtime stage copies the built environment, not the sources."""
    build = stages(parsed)["build"]
    installs = [args for keyword, args in build if keyword == "RUN" and "pip install" in args]
    assert installs == [
        "/opt/kepl/bin/pip install . && /opt/kepl/bin/pip uninstall -y pip setuptools && "
        "cd /tmp && KEPL_CACHE_DIR=/opt/kepl/cache /opt/kepl/bin/kepl check "
        "\"$(/opt/kepl/bin/python -c 'import app.cli, os; "
        "print(os.path.dirname(app.cli.__file__))')/bank.yaml\""]
    assert not re.search(r"\[(spark|dev)", DOCKERFILE.read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=\[ ]", d)[0] for d in project["dependencies"]}
    assert names == {"confluent-kafka", "rocksdict", "lark", "pyyaml", "jsonschema", "orjson",
                     "prometheus-client", "sortedcontainers"}
    runtime = stages(parsed)["runtime"]
    assert [a for k, a in runtime if k == "COPY"] == ["--from=build /opt/kepl /opt/kepl"]
    assert [a for k, a in build if k == "COPY"] == [
        "pyproject.toml README.md LICENSE ./", "app ./app", "operators ./operators",
        "schemas ./schemas"]


def test_build_context_keeps_what_the_build_copies() -> None:
    kept = {line[1:] for line in DOCKERIGNORE.read_text().splitlines() if line.startswith("!")}
    assert kept == {"pyproject.toml", "README.md", "LICENSE", "app", "operators", "schemas"}
    assert DOCKERIGNORE.read_text().splitlines()[1] == "*"


def test_runs_as_the_charts_non_root_user(parsed: list[Instruction]) -> None:
    runtime = stages(parsed)["runtime"]
    users = [a for k, a in runtime if k == "USER"]
    assert users == ["10001:10001"]
    pod = yaml.safe_load(VALUES.read_text())["podSecurityContext"]
    assert (pod["runAsUser"], pod["runAsGroup"]) == (10001, 10001)
    # the state directory is the user's and a volume; nothing after USER runs as root
    assert runtime.index(("USER", "10001:10001")) > max(
        i for i, (k, _) in enumerate(runtime) if k == "RUN")
    assert ("VOLUME", '["/var/lib/kepl"]') in runtime


def test_worker_serves_metrics_on_the_exposed_port(parsed: list[Instruction]) -> None:
    runtime = dict(stages(parsed)["runtime"])
    port = yaml.safe_load(VALUES.read_text())["workers"]["metrics"]["port"]
    assert runtime["EXPOSE"] == str(port) == "9100"
    assert json.loads(runtime["ENTRYPOINT"]) == ["kepl"]
    assert json.loads(runtime["CMD"]) == ["worker", "/etc/kepl/statements.yaml", "--data-dir",
                                          "/var/lib/kepl", "--metrics-port", "9100"]
    assert "KEPL_METRICS_PORT=9100" in runtime["ENV"].split()
    # the parser tables built in the build stage, read from the read-only root
    assert "KEPL_CACHE_DIR=/opt/kepl/cache" in runtime["ENV"].split()


def test_healthcheck_follows_the_workers_healthz(parsed: list[Instruction]) -> None:
    """The HEALTHCHECK command passes while the loop turns and fails once it is wedged,
    run against the worker's own health server."""
    (check,) = [a for k, a in parsed if k == "HEALTHCHECK"]
    options, _, cmd = check.partition(" CMD ")
    assert options == "--interval=15s --timeout=5s --start-period=120s --retries=3"
    argv = json.loads(cmd)
    assert argv[:2] == ["python", "-c"] and "/healthz" in argv[2]
    health = Health()
    server = serve(0, health, Metrics("bank"), host="127.0.0.1")
    env = {"KEPL_METRICS_PORT": str(server.server_address[1])}
    try:
        run = [sys.executable, *argv[1:]]
        assert subprocess.run(run, env=env, capture_output=True, timeout=30).returncode == 0
        health.last_loop -= 60
        assert subprocess.run(run, env=env, capture_output=True, timeout=30).returncode == 1
    finally:
        server.shutdown()
        server.server_close()

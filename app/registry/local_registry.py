"""A real Apicurio Registry (in-memory storage) run from Maven Central jars, no Docker.

Its application jar is a Quarkus application: Maven builds it once into a runnable
jar (``app/registry/pom.xml``, package data) under
``${KEPL_HOME:-~/.cache/kepl}/registry/<version>``; the registry runs as a detached
background process with a small heap, its pid file and log in one data directory.
Clients use its Confluent-compatible API (``url``), as they would a Confluent registry.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from app.kafka.local_broker import HOST, _port_free, file_lock, java_bin, kepl_home

POM = Path(__file__).with_name("pom.xml")
HEAP_OPTS = ("-Xmx256m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
PID_FILE = "registry.pid"
RUNNER = Path("target") / "kepl-schema-registry-1-runner.jar"
"""The jar Quarkus builds (its libraries in ``target/lib``), as Apicurio packages it."""
CCOMPAT = "/apis/ccompat/v7"
DEFAULT_PORT = 8081


class RegistryError(RuntimeError):
    """The local registry could not be built, started or stopped."""


@dataclass(frozen=True)
class RegistryInfo:
    """Where a local registry lives and whether it runs."""

    port: int
    data_dir: Path
    running: bool
    pid: int | None = None
    started_in_s: float | None = None

    @property
    def url(self) -> str:
        """The Confluent-compatible API (``registry:`` of a statement file)."""
        return f"http://{HOST}:{self.port}{CCOMPAT}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "registry.log"


def _log(msg: str) -> None:
    print(f"kepl registry: {msg}", file=sys.stderr, flush=True)


def version() -> str:
    """The Apicurio version pinned in ``app/registry/pom.xml``."""
    match = re.search(r"<apicurio\.version>\s*([^<\s]+)\s*<", POM.read_text())
    if not match:
        raise RegistryError(f"no <apicurio.version> in {POM}")
    return match.group(1)


def build_dir() -> Path:
    return kepl_home() / "registry" / version()


def runner_jar() -> Path:
    return build_dir() / RUNNER


def ensure_build() -> Path:
    """Build the registry's runnable jar with Maven unless cached; return it.  Maven
    works in a scratch directory renamed into place at the end, so an interrupted build
    leaves nothing half-made."""
    jar = runner_jar()
    if jar.is_file():
        return jar
    with file_lock(build_dir().parent / ".build.lock"):
        if jar.is_file():
            return jar
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RegistryError("Maven (mvn) is not on PATH; it is needed once to build "
                                "the schema registry")
        scratch = build_dir().with_name(f"{version()}.partial-{os.getpid()}")
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        shutil.copy(POM, scratch / "pom.xml")
        shutil.copytree(POM.parent / "src", scratch / "src")
        _log(f"building Apicurio Registry {version()} with Maven into {build_dir()} "
             "(one-time)...")
        t0 = time.monotonic()
        proc = subprocess.run([mvn, "-q", "-B", "-Dstyle.color=never", "package"],
                              cwd=scratch, check=False, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        built = scratch / RUNNER
        if proc.returncode != 0 or not built.is_file():
            shutil.rmtree(scratch, ignore_errors=True)
            tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
            raise RegistryError(f"Maven failed to build the registry (exit "
                                f"{proc.returncode}):\n{tail}")
        shutil.rmtree(build_dir(), ignore_errors=True)
        scratch.rename(build_dir())
        _log(f"built in {time.monotonic() - t0:.1f} s")
    return jar


def default_data_dir(port: int) -> Path:
    return kepl_home() / f"registry-{port}"


def answers(port: int, timeout_s: float = 1.0) -> bool:
    """True once the Confluent-compatible API lists subjects."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}{CCOMPAT}/subjects",
                                    timeout=timeout_s) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _read_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int, data_dir: Path) -> bool:
    """A live (non-zombie) registry of ``data_dir``, not a reused pid."""
    child = _children.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, IndexError):
        return False
    return stat != "Z" and RUNNER.name in cmdline and str(data_dir) in cmdline


_children: dict[int, subprocess.Popen[bytes]] = {}


def start(port: int = DEFAULT_PORT, data_dir: Path | None = None, wait_s: float = 120,
          die_with_parent: bool = False) -> RegistryInfo:
    """Start the registry in the background (building it first if needed) and wait until
    it answers; a running one is left as it is."""
    data_dir = (data_dir or default_data_dir(port)).expanduser().resolve()
    pid = _read_pid(data_dir)
    if pid is not None and _alive(pid, data_dir):
        return RegistryInfo(port, data_dir, True, pid)
    jar = ensure_build()
    if not _port_free(port):
        raise RegistryError(f"port {port} on {HOST} is already in use")
    data_dir.mkdir(parents=True, exist_ok=True)
    setpriv = shutil.which("setpriv") if die_with_parent else None
    cmd = [*([setpriv, "--pdeathsig", "TERM"] if setpriv else []), java_bin(), *HEAP_OPTS,
           f"-Dquarkus.http.host={HOST}", f"-Dquarkus.http.port={port}",
           "-Dquarkus.log.level=WARN", "-Dquarkus.log.category.\"io.apicurio\".level=WARN",
           f"-Dkepl.data.dir={data_dir}", "-jar", str(jar)]
    t0 = time.monotonic()
    with open(data_dir / "registry.log", "ab") as out:
        proc = subprocess.Popen(cmd, cwd=data_dir, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    _children[proc.pid] = proc
    (data_dir / PID_FILE).write_text(f"{proc.pid}\n")
    while time.monotonic() < t0 + wait_s:
        if proc.poll() is not None:
            (data_dir / PID_FILE).unlink(missing_ok=True)
            raise RegistryError(f"registry exited with code {proc.returncode} during "
                                f"start-up; see {data_dir / 'registry.log'}")
        if answers(port):
            took = time.monotonic() - t0
            _log(f"registry http://{HOST}:{port}{CCOMPAT} ready in {took:.1f} s "
                 f"(pid {proc.pid})")
            return RegistryInfo(port, data_dir, True, proc.pid, took)
        time.sleep(0.3)
    stop(port, data_dir)
    raise RegistryError(f"registry did not answer on port {port} within {wait_s:.0f} s; "
                        f"see {data_dir / 'registry.log'}")


def stop(port: int = DEFAULT_PORT, data_dir: Path | None = None,
         timeout_s: float = 20) -> RegistryInfo:
    """Stop the registry: SIGTERM to its process group, SIGKILL after ``timeout_s``."""
    data_dir = (data_dir or default_data_dir(port)).expanduser().resolve()
    pid = _read_pid(data_dir)
    if pid is not None and _alive(pid, data_dir):
        for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)  # its own group: start_new_session
            deadline = time.monotonic() + wait
            while _alive(pid, data_dir) and time.monotonic() < deadline:
                time.sleep(0.1)
            if not _alive(pid, data_dir):
                break
        child = _children.pop(pid, None)
        if child is not None:
            child.wait(timeout=5)
        _log(f"registry on port {port} stopped")
    (data_dir / PID_FILE).unlink(missing_ok=True)
    return RegistryInfo(port, data_dir, False, pid)


def status(port: int = DEFAULT_PORT, data_dir: Path | None = None) -> RegistryInfo:
    data_dir = (data_dir or default_data_dir(port)).expanduser().resolve()
    pid = _read_pid(data_dir)
    if pid is not None and _alive(pid, data_dir):
        return RegistryInfo(port, data_dir, True, pid)
    return RegistryInfo(port, data_dir, False)

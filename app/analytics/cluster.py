"""A local Spark standalone cluster (a master and one worker) from the installed PySpark.

``kepl spark cluster start`` runs ``org.apache.spark.deploy.master.Master`` and
``...worker.Worker`` from PySpark's own jars as detached JVMs, as ``kepl kafka start``
runs the broker: pid files, logs and the worker's scratch space in one data directory
(``${KEPL_HOME:-~/.cache/kepl}/spark-cluster-PORT``), small heaps, bound to 127.0.0.1.
Jobs then take ``--master spark://127.0.0.1:PORT``; a user's cluster is the same URL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from app.kafka.local_broker import HOST, _port_free, java_bin, kepl_home

DEFAULT_PORT = 7077
DAEMON_HEAP = "-Xmx256m"
WORKER_CORES = 1
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "512m"
ROLES = ("master", "worker")


class ClusterError(RuntimeError):
    """The cluster could not be started or stopped."""


@dataclass(frozen=True)
class ClusterInfo:
    """Where a local Spark cluster lives and whether its master and worker run."""

    port: int
    data_dir: Path
    pids: dict[str, int]

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def web_port(self) -> int:
        return self.port + 1

    @property
    def running(self) -> bool:
        return set(self.pids) == set(ROLES)


def default_data_dir(port: int) -> Path:
    return kepl_home() / f"spark-cluster-{port}"


def _spark_home() -> Path:
    try:
        import pyspark
    except ImportError:
        raise ClusterError("PySpark is not installed: pip install 'kepl[spark]'") from None
    return Path(pyspark.__file__).parent


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _pids(data_dir: Path) -> dict[str, int]:
    out = {}
    for role in ROLES:
        try:
            pid = int((data_dir / f"{role}.pid").read_text())
        except (OSError, ValueError):
            continue
        if _alive(pid):
            out[role] = pid
    return out


def status(port: int = DEFAULT_PORT, data_dir: Path | None = None) -> ClusterInfo:
    data_dir = (data_dir or default_data_dir(port)).resolve()
    return ClusterInfo(port, data_dir, _pids(data_dir))


def _launch(role: str, main_class: str, args: list[str], data_dir: Path,
            env: dict[str, str]) -> int:
    home = _spark_home()
    cmd = [java_bin(), DAEMON_HEAP, "-XX:+UseSerialGC", "-cp", f"{home / 'jars'}/*",
           main_class, *args]
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{role}.log", "ab") as out:
        proc = subprocess.Popen(cmd, cwd=data_dir, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)
    (data_dir / f"{role}.pid").write_text(f"{proc.pid}\n")
    return proc.pid


def _alive_workers(web_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{web_port}/json/", timeout=2) as r:
            state = json.load(r)
    except (OSError, ValueError):
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


def start(port: int = DEFAULT_PORT, data_dir: Path | None = None,
          wait_s: float = 90) -> ClusterInfo:
    """Start the master on ``port`` (web UI ``port + 1``) and a worker (web UI
    ``port + 2``); return once the worker has registered.  Idempotent."""
    info = status(port, data_dir)
    if info.running:
        return info
    if info.pids:
        stop(port, info.data_dir)
    for p in (port, port + 1, port + 2):
        if not _port_free(p):
            raise ClusterError(f"port {p} on {HOST} is already in use (the cluster needs "
                               f"{port}..{port + 2})")
    data_dir = info.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    # SPARK_SCALA_VERSION: the executor launcher asks for it before it finds jars/ (a
    # pip-installed Spark has no build directories to guess it from)
    env = {**os.environ, "SPARK_HOME": str(_spark_home()), "SPARK_LOCAL_IP": HOST,
           "SPARK_SCALA_VERSION": "2.13",
           "PYSPARK_PYTHON": sys.executable}
    t0 = time.monotonic()
    _launch("master", "org.apache.spark.deploy.master.Master",
            ["--host", HOST, "--port", str(port), "--webui-port", str(port + 1)],
            data_dir, env)
    _launch("worker", "org.apache.spark.deploy.worker.Worker",
            ["--host", HOST, "--webui-port", str(port + 2), "--cores", str(WORKER_CORES),
             "--memory", WORKER_MEMORY, "--work-dir", str(data_dir / "work"),
             f"spark://{HOST}:{port}"], data_dir, env)
    while time.monotonic() < t0 + wait_s:
        info = status(port, data_dir)
        if not info.running:
            stop(port, data_dir)
            raise ClusterError(f"the Spark {'master' if 'master' not in info.pids else 'worker'}"
                               f" exited during start-up; see {data_dir / 'logs'}")
        if _alive_workers(port + 1) >= 1:
            print(f"kepl spark: cluster {info.master_url} ready in "
                  f"{time.monotonic() - t0:.1f} s", file=sys.stderr)
            return info
        time.sleep(0.5)
    stop(port, data_dir)
    raise ClusterError(f"no Spark worker registered with {HOST}:{port} within {wait_s:.0f} s;"
                       f" see {data_dir / 'logs'}")


def stop(port: int = DEFAULT_PORT, data_dir: Path | None = None,
         timeout_s: float = 20) -> ClusterInfo:
    """SIGTERM the worker then the master (their process groups), SIGKILL on timeout."""
    info = status(port, data_dir)
    for role in ("worker", "master"):
        pid = info.pids.get(role)
        if pid is None:
            continue
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        (info.data_dir / f"{role}.pid").unlink(missing_ok=True)
    return status(port, info.data_dir)


def session_conf(master: str) -> dict[str, str]:
    """What a driver adds for a ``spark://`` master: small executors, and the driver
    on 127.0.0.1 when the master is local (executors connect back to it)."""
    if not master.startswith("spark://"):
        return {}
    conf = {"spark.executor.memory": EXECUTOR_MEMORY, "spark.cores.max": str(WORKER_CORES)}
    if master.startswith((f"spark://{HOST}:", "spark://localhost:")):
        conf.update({"spark.driver.host": HOST, "spark.driver.bindAddress": HOST})
    return conf


def main(argv: list[str]) -> int:
    """``kepl spark cluster start|stop|status [--port N] [--data-dir DIR]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="kepl spark cluster",
                                 description="A local Spark standalone master and worker.")
    ap.add_argument("command", choices=("start", "stop", "status"))
    ap.add_argument("--port", type=int, default=DEFAULT_PORT,
                    help="master port; web UIs on PORT+1 (master) and PORT+2 (worker)")
    ap.add_argument("--data-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        action = {"start": start, "stop": stop, "status": status}[args.command]
        info = action(args.port, args.data_dir)
    except ClusterError as e:
        print(f"kepl spark cluster {args.command}: {e}", file=sys.stderr)
        return 1
    state = "running" if info.running else ("stopped" if not info.pids else "partly running")
    pids = " ".join(f"{r}={p}" for r, p in info.pids.items())
    print(f"{state}  master={info.master_url}  web=http://{HOST}:{info.web_port}  "
          f"data-dir={info.data_dir}{'  ' + pids if pids else ''}")
    return 0 if args.command != "status" or info.running else 3

"""A local Apache Kafka cluster of several KRaft nodes, without Docker.

Each node is one JVM in combined mode (broker and controller), so three nodes form a
three-voter controller quorum (static ``controller.quorum.voters``) and a three-broker
cluster: what replication factor 3 and ``min.insync.replicas`` 2 need.  Node *i*
(1-based) listens for clients on ``port + 2(i-1)`` and for the quorum on the port after
it; its config, data, logs and pid file live in ``<data dir>/node-<i>``.  The jars, the
JVM flags and the broker log settings are the single broker's (``local_broker``), with
a smaller heap, since a laptop runs three of them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from app.kafka import local_broker as lb

HEAP_OPTS = ("-Xmx320m", "-Xms128m")
DEFAULT_PORT = 9192
PID_FILE = lb.PID_FILE


@dataclass(frozen=True)
class NodeInfo:
    """One node of a local cluster and whether it runs."""

    node_id: int
    port: int
    data_dir: Path
    running: bool
    pid: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"{lb.HOST}:{self.port}"

    @property
    def controller_port(self) -> int:
        return self.port + 1

    @property
    def log_file(self) -> Path:
        return self.data_dir / "logs" / "server.log"


@dataclass(frozen=True)
class ClusterInfo:
    """Where a local cluster lives and which of its nodes run."""

    port: int
    data_dir: Path
    nodes: tuple[NodeInfo, ...]

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` naming every node (clients find the others anyway)."""
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def running(self) -> bool:
        return all(n.running for n in self.nodes)


def default_data_dir(port: int) -> Path:
    """Default data directory of the cluster whose first node listens on ``port``."""
    return lb.kepl_home() / f"cluster-{port}"


def node_port(port: int, node_id: int) -> int:
    """Client port of node ``node_id`` (1-based); its controller port is the next one."""
    return port + 2 * (node_id - 1)


def _voters(port: int, nodes: int) -> str:
    return ",".join(f"{i}@{lb.HOST}:{node_port(port, i) + 1}" for i in range(1, nodes + 1))


def _properties(port: int, nodes: int, node_id: int, node_dir: Path,
                overrides: dict[str, str] | None) -> str:
    """server.properties of one node: the single broker's, with a quorum of ``nodes``
    voters and internal topics replicated ``min(3, nodes)`` times."""
    p = node_port(port, node_id)
    rf = str(min(3, nodes))
    isr = str(min(2, nodes))
    props = {
        "node.id": str(node_id),
        "controller.quorum.voters": _voters(port, nodes),
        "controller.quorum.bootstrap.servers": "",
        "default.replication.factor": rf,
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": isr,
        # A replica that fell behind (its broker was killed) is out of the ISR soon, and
        # a restarted one is back in it as soon as it caught up.
        "replica.lag.time.max.ms": "10000",
        # A killed node is fenced (its partitions get new leaders) once its session
        # expires: 3 s instead of 9 s bounds the pause a crash causes.
        "broker.heartbeat.interval.ms": "500",
        "broker.session.timeout.ms": "3000",
        # A clean shutdown moves leadership away first (a rolling restart loses no leader).
        "controlled.shutdown.enable": "true",
        # leaders go back to their preferred replica soon after a node returns
        "leader.imbalance.check.interval.seconds": "10",
        **(overrides or {}),
    }
    text = lb._server_properties(p, node_dir, None, props)
    # no bootstrap servers with a static voter set: drop the empty line
    return "\n".join(line for line in text.splitlines()
                     if line != "controller.quorum.bootstrap.servers=") + "\n"


def _format(java: str, cp: str, node_dir: Path, props: Path, cluster_id: str) -> None:
    """Format a node's log dir once for the cluster id (static quorum: no --standalone)."""
    if (node_dir / "data" / "meta.properties").exists():
        return
    cmd = [java, "-Xmx256m", "-cp", cp,
           f"-Dlog4j2.configurationFile={node_dir / 'log4j2.properties'}",
           f"-Dkafka.logs.dir={node_dir / 'logs'}",
           "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props),
           "--ignore-formatted"]
    proc = subprocess.run(cmd, check=False, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise lb.BrokerError(f"kafka-storage format of {node_dir} failed "
                             f"(exit {proc.returncode}):\n{proc.stdout.strip()}")


def _cluster_id(data_dir: Path) -> str:
    path = data_dir / "cluster.id"
    if path.is_file():
        return path.read_text().strip()
    cid = lb.random_cluster_id()
    path.write_text(cid + "\n")
    return cid


def _node_dir(data_dir: Path, node_id: int) -> Path:
    return data_dir / f"node-{node_id}"


def _layout(port: int | None, data_dir: Path | None) -> tuple[int, Path, int]:
    """(first port, data dir, nodes) of a cluster, as its last start wrote them."""
    data_dir = (data_dir or default_data_dir(port or DEFAULT_PORT)).expanduser().resolve()
    try:
        first, nodes = (int(x) for x in (data_dir / "layout").read_text().split())
    except (OSError, ValueError):
        return port or DEFAULT_PORT, data_dir, 3
    return first, data_dir, nodes


def start(port: int = DEFAULT_PORT, nodes: int = 3, data_dir: Path | None = None,
          wait_s: float = 120, die_with_parent: bool = False,
          overrides: dict[str, str] | None = None) -> ClusterInfo:
    """Start every node of the cluster (those not running yet) and wait until each one
    answers and the cluster has all its brokers.  Idempotent."""
    if nodes < 1 or not 1 <= port <= 65535 - 2 * nodes:
        raise ValueError(f"{nodes} node(s) from port {port} do not fit below 65535")
    data_dir = (data_dir or default_data_dir(port)).expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    prior = (data_dir / "layout")
    if prior.is_file() and prior.read_text().split() != [str(port), str(nodes)]:
        raise lb.BrokerError(f"{data_dir} holds a cluster of another layout "
                             f"({prior.read_text().strip()}: port nodes); "
                             "stop it and delete the directory, or give another --data-dir")
    prior.write_text(f"{port} {nodes}\n")
    java = lb.java_bin()
    cp = lb.classpath(lb.ensure_jars())
    with lb.file_lock(data_dir / ".start.lock"):
        cid = _cluster_id(data_dir)
        for i in range(1, nodes + 1):
            node_dir = _node_dir(data_dir, i)
            pid = lb._read_pid(node_dir)
            if pid is not None and lb._alive(pid, node_dir):
                continue
            _launch(port, nodes, i, node_dir, java, cp, cid, die_with_parent, overrides)
    info = status(port, data_dir)
    _wait(info, wait_s)
    return status(port, data_dir)


def start_node(node_id: int, port: int | None = None, data_dir: Path | None = None,
               wait_s: float = 120, die_with_parent: bool = False,
               overrides: dict[str, str] | None = None) -> NodeInfo:
    """Start one node of an existing cluster (after ``kill_node`` or ``stop_node``)."""
    port, data_dir, nodes = _layout(port, data_dir)
    node_dir = _node_dir(data_dir, node_id)
    pid = lb._read_pid(node_dir)
    if pid is None or not lb._alive(pid, node_dir):
        java = lb.java_bin()
        cp = lb.classpath(lb.ensure_jars())
        _launch(port, nodes, node_id, node_dir, java, cp, _cluster_id(data_dir),
                die_with_parent, overrides)
    node = _node(port, data_dir, node_id)
    _wait_node(node, wait_s)
    return node


def _launch(port: int, nodes: int, node_id: int, node_dir: Path, java: str, cp: str,
            cluster_id: str, die_with_parent: bool,
            overrides: dict[str, str] | None) -> None:
    p = node_port(port, node_id)
    for q in (p, p + 1):
        if not lb._port_free(q):
            raise lb.BrokerError(f"port {q} on {lb.HOST} is already in use "
                                 f"(node {node_id} needs {p} and {p + 1})")
    logs = node_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    props = node_dir / "server.properties"
    props.write_text(_properties(port, nodes, node_id, node_dir, overrides))
    log4j = node_dir / "log4j2.properties"
    log4j.write_text(lb._LOG4J2)
    _format(java, cp, node_dir, props, cluster_id)
    setpriv = shutil.which("setpriv") if die_with_parent else None
    cmd = [*([setpriv, "--pdeathsig", "TERM"] if setpriv else []),
           java, *HEAP_OPTS, *lb.JVM_OPTS,
           f"-Dlog4j2.configurationFile={log4j}", f"-Dkafka.logs.dir={logs}",
           "-Dlog4j.shutdownHookEnabled=false", "-cp", cp, "kafka.Kafka", str(props)]
    with open(logs / "broker.out", "ab") as out:
        proc = subprocess.Popen(cmd, cwd=node_dir, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    lb._children[proc.pid] = proc
    (node_dir / PID_FILE).write_text(f"{proc.pid}\n")


def _wait_node(node: NodeInfo, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        pid = lb._read_pid(node.data_dir)
        if pid is None or not lb._alive(pid, node.data_dir):
            raise lb.BrokerError(f"node {node.node_id} exited during start-up; last lines of "
                                 f"{node.log_file}:\n{lb._tail(node.log_file)}")
        if lb._answers(node.bootstrap, 1.0):
            return
        time.sleep(0.3)
    raise lb.BrokerError(f"node {node.node_id} did not answer on {node.bootstrap} within "
                         f"{wait_s:.0f} s; log tail:\n{lb._tail(node.log_file)}")


def _wait(info: ClusterInfo, wait_s: float) -> None:
    """Every node answers, and the metadata lists every broker."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    t0 = time.monotonic()
    for node in info.nodes:
        _wait_node(node, max(1.0, wait_s - (time.monotonic() - t0)))
    admin = AdminClient({"bootstrap.servers": info.bootstrap, "log_level": 0})
    while time.monotonic() < t0 + wait_s:
        try:
            if len(admin.list_topics(timeout=2).brokers) == len(info.nodes):
                lb._log(f"cluster {info.bootstrap} ready in {time.monotonic() - t0:.1f} s")
                return
        except KafkaException:
            pass
        time.sleep(0.3)
    raise lb.BrokerError(f"the cluster {info.bootstrap} did not list all "
                         f"{len(info.nodes)} brokers within {wait_s:.0f} s")


def _node(port: int, data_dir: Path, node_id: int) -> NodeInfo:
    node_dir = _node_dir(data_dir, node_id)
    pid = lb._read_pid(node_dir)
    alive = pid is not None and lb._alive(pid, node_dir)
    return NodeInfo(node_id, node_port(port, node_id), node_dir, alive,
                    pid if alive else None)


def status(port: int | None = None, data_dir: Path | None = None) -> ClusterInfo:
    """Which nodes of the cluster run, with their pids."""
    port, data_dir, nodes = _layout(port, data_dir)
    return ClusterInfo(port, data_dir,
                       tuple(_node(port, data_dir, i) for i in range(1, nodes + 1)))


def stop_node(node_id: int, port: int | None = None, data_dir: Path | None = None,
              timeout_s: float = 30) -> NodeInfo:
    """Stop one node: SIGTERM (a controlled shutdown), SIGKILL after ``timeout_s``."""
    port, data_dir, _ = _layout(port, data_dir)
    node = _node(port, data_dir, node_id)
    if node.pid is not None:
        lb._signal_and_wait(node.pid, node.data_dir, timeout_s)
    (node.data_dir / PID_FILE).unlink(missing_ok=True)
    return _node(port, data_dir, node_id)


def kill_node(node_id: int, port: int | None = None, data_dir: Path | None = None
              ) -> NodeInfo:
    """``kill -9`` one node (a crash: no controlled shutdown, no flush)."""
    port, data_dir, _ = _layout(port, data_dir)
    node = _node(port, data_dir, node_id)
    if node.pid is not None:
        try:
            os.killpg(node.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for _ in range(100):
            if not lb._alive(node.pid, node.data_dir):
                break
            time.sleep(0.05)
        lb._reap(node.pid)
    (node.data_dir / PID_FILE).unlink(missing_ok=True)
    return _node(port, data_dir, node_id)


def stop(port: int | None = None, data_dir: Path | None = None,
         timeout_s: float = 30) -> ClusterInfo:
    """Stop every node: SIGTERM to all at once (one by one, the last ones would wait for
    a quorum that is gone), SIGKILL to those that outlive ``timeout_s``."""
    info = status(port, data_dir)
    live = [n for n in info.nodes if n.pid is not None]
    for node in live:
        try:
            os.killpg(node.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for node in live:
        lb._signal_and_wait(node.pid, node.data_dir, timeout_s)
        (node.data_dir / PID_FILE).unlink(missing_ok=True)
    if live:
        lb._log(f"cluster {info.bootstrap} stopped")
    return status(info.port, info.data_dir)


def leaders(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> node id of its current leader (-1: none)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    md = admin.list_topics(timeout=10)
    out: dict[tuple[str, int], int] = {}
    for t in topics:
        tm = md.topics.get(t)
        if tm is None:
            continue
        for p, pm in tm.partitions.items():
            out[(t, p)] = pm.leader
    return out


def free_port_run(count: int, attempts: int = 50) -> int:
    """A port ``p`` such that ``p .. p + count - 1`` are all free right now."""
    import socket

    for _ in range(attempts):
        with socket.socket() as s:
            s.bind((lb.HOST, 0))
            port = s.getsockname()[1]
        if port + count <= 65535 and all(lb._port_free(port + i) for i in range(count)):
            return port
    raise lb.BrokerError(f"could not find {count} adjacent free TCP ports")


def in_sync(bootstrap: str, topics: list[str] | None = None) -> bool:
    """Whether every partition (of ``topics``, default all) has all its replicas in
    sync and a leader: the cluster healed after a node came back."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    md = admin.list_topics(timeout=10)
    for name, tm in md.topics.items():
        if topics is not None and name not in topics:
            continue
        for pm in tm.partitions.values():
            if pm.leader < 0 or len(pm.isrs) < len(pm.replicas):
                return False
    return True

"""A real single-node Apache Kafka broker run from Maven Central jars, without Docker.

The jars are gathered once by Maven (``app/kafka/pom.xml``, package data) into
``${KEPL_HOME:-~/.cache/kepl}/kafka/<version>/libs``; the broker runs in KRaft
combined mode (broker and controller in one JVM) as a detached background process
whose pid file, config, data and logs live in one data directory.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.kafka import tls
from app.maven import copy_dependencies

POM = Path(__file__).with_name("pom.xml")
HOST = "127.0.0.1"
HEAP_OPTS = ("-Xmx512m", "-Xms256m")
# Kafka's own broker JVM flags (kafka-run-class.sh), minus the GC log.
JVM_OPTS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
PID_FILE = "broker.pid"
ARCHIVE_CANDIDATE = "appcds.jsa.new"

# Popen handles of brokers this process started: lets us reap them (no zombies
# that look alive to ``kill -0``) and tell a clean exit from a crash.
_children: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class Secure:
    """A TLS listener (``SSL``, or ``SASL_SSL`` with PLAIN or SCRAM accounts) and the
    authorizer."""

    files: tls.TlsFiles | None
    tls_port: int | None
    sasl_users: dict[str, str] | None
    authorizer: bool
    sasl_mechanism: str = tls.PLAIN

    @property
    def scram(self) -> bool:
        """SCRAM accounts: credentials in the cluster metadata, not in the config."""
        return bool(self.sasl_users) and self.sasl_mechanism != tls.PLAIN

    def properties(self) -> dict[str, str]:
        """What it adds to the broker's properties (listeners extended, not replaced)."""
        props: dict[str, str] = {}
        if self.files is not None and self.tls_port is not None:
            name = tls.listener_name(bool(self.sasl_users))
            listener = f"{name}://{HOST}:{self.tls_port}"
            props["+listeners"] = listener
            props["+advertised.listeners"] = listener
            props["+listener.security.protocol.map"] = f"{name}:{name}"
            props.update(tls.broker_properties(self.files, self.sasl_users,
                                               self.sasl_mechanism))
            if self.sasl_users:
                props["sasl.enabled.mechanisms"] = self.sasl_mechanism
        if self.authorizer:
            props["authorizer.class.name"] = (
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
            props["super.users"] = "User:ANONYMOUS"
            props["allow.everyone.if.no.acl.found"] = "false"
        return props


class BrokerError(RuntimeError):
    """The local broker could not be prepared, started or stopped."""


@dataclass(frozen=True)
class BrokerInfo:
    """Where a local broker lives and whether it runs."""

    port: int
    data_dir: Path
    running: bool
    pid: int | None = None
    started_in_s: float | None = None
    appcds: bool | None = None

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` string for clients."""
        return f"{HOST}:{self.port}"

    @property
    def controller_port(self) -> int:
        """The KRaft controller listener port (always ``port + 1``)."""
        return self.port + 1

    @property
    def log_file(self) -> Path:
        """The broker's main log4j log."""
        return self.data_dir / "logs" / "server.log"


def _log(msg: str) -> None:
    print(f"kepl kafka: {msg}", file=sys.stderr, flush=True)


def kepl_home() -> Path:
    """Root of kepl's machine-local cache (``$KEPL_HOME`` or ``~/.cache/kepl``)."""
    env = os.environ.get("KEPL_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kepl"


def kafka_version() -> str:
    """The Kafka version pinned in ``app/kafka/pom.xml`` (the single source of truth)."""
    match = re.search(r"<kafka\.version>\s*([^<\s]+)\s*</kafka\.version>", POM.read_text())
    if not match:
        raise BrokerError(f"no <kafka.version> in {POM}")
    return match.group(1)


def libs_dir() -> Path:
    """Directory holding this Kafka version's jars (may not exist yet)."""
    return kepl_home() / "kafka" / kafka_version() / "libs"


def default_data_dir(port: int) -> Path:
    """Default data directory of the broker on ``port``."""
    return kepl_home() / f"broker-{port}"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock, so concurrent processes fetch or format only once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_jars() -> Path:
    """Fetch Kafka's jars with Maven unless cached; return the libs directory.

    Maven copies into a scratch directory that is renamed into place at the end,
    so an interrupted fetch never leaves a half-filled cache behind. The bash
    wrappers in ``deploy/kafka/bin`` follow the same protocol.
    """
    libs = libs_dir()
    if libs.is_dir():
        return libs
    with file_lock(libs.parent / ".fetch.lock"):
        if libs.is_dir():
            return libs
        mvn = shutil.which("mvn")
        if mvn is None:
            raise BrokerError("Maven (mvn) is not on PATH; it is needed once to fetch Kafka's jars")
        scratch = libs.parent / f"libs.partial-{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        _log(f"fetching Apache Kafka {kafka_version()} jars with Maven into {libs} (one-time)...")
        t0 = time.monotonic()
        proc = copy_dependencies(mvn, POM, scratch, {"includeScope": "runtime"})
        if proc.returncode != 0 or not any(scratch.glob("kafka_2.13-*.jar")):
            shutil.rmtree(scratch, ignore_errors=True)
            tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
            raise BrokerError(f"Maven failed to fetch Kafka jars (exit {proc.returncode}):\n{tail}")
        scratch.rename(libs)
        _log(f"fetched {len(list(libs.glob('*.jar')))} jars in {time.monotonic() - t0:.1f} s")
    return libs


def classpath(libs: Path) -> str:
    """Explicit, sorted classpath: AppCDS needs the same classpath on every run."""
    return os.pathsep.join(str(p) for p in sorted(libs.glob("*.jar")))


def java_bin() -> str:
    """The ``java`` launcher (``$JAVA_HOME`` first, then ``PATH``)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise BrokerError("no java on PATH (Kafka 4 needs Java 17 or newer)")
    return found


def random_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 unpadded, not starting with '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def free_port_pair(host: str = HOST, attempts: int = 50) -> int:
    """Return a port ``p`` such that ``p`` and ``p + 1`` are both free right now."""
    for _ in range(attempts):
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port < 65535 and _port_free(port, host) and _port_free(port + 1, host):
            return port
    raise BrokerError("could not find two adjacent free TCP ports")


def _port_free(port: int, host: str = HOST) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _server_properties(port: int, data_dir: Path,
                       sasl: tuple[int, dict[str, str]] | None = None,
                       overrides: dict[str, str] | None = None,
                       secure: Secure | None = None) -> str:
    ctl = port + 1
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"{HOST}:{ctl}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{ctl}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir / "data"),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "auto.create.topics.enable": "true",
        "delete.topic.enable": "true",
        # Default is 3000 ms, paid by every first consumer-group join (i.e. every test).
        "group.initial.rebalance.delay.ms": "0",
        # Internal topics on one node: replication 1; fewer partitions than the
        # default 50 so the first group/transaction does not create 50 logs.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "5",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "5",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "min.insync.replicas": "1",
        "log.retention.hours": "168",
    }
    if sasl is not None:
        sasl_port, users = sasl
        listener = f"SASL_PLAINTEXT://{HOST}:{sasl_port}"
        props["listeners"] = props["listeners"].replace(",CONTROLLER", f",{listener},CONTROLLER")
        props["advertised.listeners"] += f",{listener}"
        props["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        props["sasl.enabled.mechanisms"] = "PLAIN"
        accounts = " ".join(f'user_{u}="{pw}"' for u, pw in users.items())
        props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {accounts};")
    for key, value in (secure.properties() if secure is not None else {}).items():
        if key.startswith("+"):  # one more entry of a list-valued property
            key = key[1:]
            value = (props[key].replace(",CONTROLLER", f",{value},CONTROLLER")
                     if key == "listeners" else f"{props[key]},{value}")
        props[key] = value
    props.update(overrides or {})
    lines = ["# Written by kepl (app/kafka/local_broker.py) on every start; edits are lost."]
    lines += [f"{k}={v}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


# Broker log: INFO from the broker, without the per-request chatter and the
# several-hundred-line config dumps every client/server config prints at start.
_LOG4J2 = """\
# Written by kepl (app/kafka/local_broker.py) on every start; edits are lost.
status = warn
name = kepl-local-broker

appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.filePattern = ${sys:kafka.logs.dir}/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c{1})%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3

rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file

logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
logger.appinfo.name = org.apache.kafka.common.utils.AppInfoParser
logger.appinfo.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.network.name = kafka.network.RequestChannel$
logger.network.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
# Housekeeping threads log every start/stop of themselves.
logger.reaper1.name = org.apache.kafka.server.purgatory.\
DelayedOperationPurgatory$ExpiredOperationReaper
logger.reaper1.level = WARN
logger.reaper2.name = kafka.server.ClientQuotaManager$ThrottledChannelReaper
logger.reaper2.level = WARN
logger.reaper3.name = org.apache.kafka.server.util.timer.SystemTimerReaper$Reaper
logger.reaper3.level = WARN
logger.events.name = org.apache.kafka.coordinator.common.runtime.\
MultiThreadedEventProcessor$EventProcessorThread
logger.events.level = WARN
"""


def _resolve(port: int, data_dir: Path | None) -> tuple[int, Path]:
    """The data dir (default for ``port``) and the port its last start wrote into its config."""
    data_dir = (data_dir or default_data_dir(port)).expanduser().resolve()
    try:
        text = (data_dir / "server.properties").read_text()
    except OSError:
        return port, data_dir
    match = re.search(r"^listeners=PLAINTEXT://[^:,]+:(\d+)", text, re.MULTILINE)
    return (int(match.group(1)) if match else port), data_dir


def _read_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int, data_dir: Path) -> bool:
    """True if ``pid`` is a live (non-zombie) broker of ``data_dir``, not a reused pid."""
    child = _children.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    proc = Path("/proc") / str(pid)
    if not proc.is_dir():
        return True  # no procfs: trust kill -0
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
    except (OSError, IndexError):
        return False
    return state != "Z" and "kafka.Kafka" in cmdline and str(data_dir) in cmdline


def _answers(bootstrap: str, timeout_s: float) -> bool:
    """True once the broker serves metadata (what every client needs first)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    host, port = bootstrap.rsplit(":", 1)
    try:  # cheap pre-check; keeps librdkafka from logging connection-refused noise
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError:
        return False
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        md = admin.list_topics(timeout=timeout_s)
    except KafkaException:  # while the broker is still coming up
        return False
    return bool(md.brokers)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no {path})"


def _format_storage(java: str, cp: str, data_dir: Path, props: Path, cds: list[str],
                    extra: Sequence[str] = ()) -> bool:
    """Format the KRaft log dir once (``--standalone``, ``extra`` arguments such as
    ``--add-scram``); an already formatted dir is kept.  True if it formatted now."""
    if (data_dir / "data" / "meta.properties").exists():
        return False
    cmd = [
        java,
        "-Xmx256m",
        *cds,
        "-cp",
        cp,
        f"-Dlog4j2.configurationFile={data_dir / 'log4j2.properties'}",
        f"-Dkafka.logs.dir={data_dir / 'logs'}",
        "kafka.tools.StorageTool",
        "format",
        "-t",
        random_cluster_id(),
        "-c",
        str(props),
        "--standalone",
        "--ignore-formatted",
        *extra,
    ]
    proc = subprocess.run(
        cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if proc.returncode != 0:
        raise BrokerError(
            f"kafka-storage format failed (exit {proc.returncode}):\n{proc.stdout.strip()}"
        )
    return True


def upsert_scram(bootstrap: str, users: dict[str, str], mechanism: str,
                 timeout_s: float = 30) -> None:
    """Create or replace SCRAM credentials through the admin API (what
    ``kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=...]'`` does)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    mech = ScramMechanism[mechanism.replace("-", "_")]
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    changes = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 8192),
                                            password.encode())
               for user, password in users.items()]
    for user, future in admin.alter_user_scram_credentials(changes).items():
        try:
            future.result(timeout_s)
        except Exception as e:  # noqa: BLE001 - KafkaException or a timeout: one line
            raise BrokerError(f"could not set the SCRAM credentials of {user}: {e}") from None


def _appcds_archive(java: str) -> Path:
    """Shared AppCDS archive for this Kafka version and this JVM build.

    An archive only fits the JVM that wrote it; keying it by the JVM binary means a
    Java upgrade records a new archive instead of silently running without one.
    """
    real = Path(java).resolve()
    jvm = real.parent.parent / "lib" / "server" / "libjvm.so"
    stamp = jvm.stat().st_mtime_ns if jvm.exists() else real.stat().st_mtime_ns
    key = hashlib.sha1(f"{real}:{stamp}".encode()).hexdigest()[:10]
    return kepl_home() / "kafka" / kafka_version() / f"broker-appcds-{key}.jsa"


def start(
    port: int = 9092,
    data_dir: Path | None = None,
    wait_s: float = 60,
    appcds: bool = True,
    die_with_parent: bool = False,
    sasl_users: dict[str, str] | None = None,
    sasl_port: int | None = None,
    overrides: dict[str, str] | None = None,
    tls_port: int | None = None,
    authorizer: bool = False,
    sasl_mechanism: str = tls.PLAIN,
) -> BrokerInfo:
    """Start a broker on ``port`` (controller on ``port + 1``) and wait until it answers.

    ``overrides``: broker properties laid over the defaults (a test session's broker
    checks retention every few seconds: ``log.retention.check.interval.ms``).

    ``sasl_users`` (name -> password) and ``sasl_port``: one more listener there,
    ``SASL_PLAINTEXT`` with the PLAIN mechanism, for clients that authenticate.
    ``tls_port``: a TLS listener there (``SSL``, or ``SASL_SSL`` with ``sasl_users``)
    with certificates made into ``data_dir/tls`` (``app.kafka.tls``); its
    ``sasl_mechanism`` is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (credentials created
    when the storage is formatted, replaced through the admin API on a later start).
    ``authorizer``: KRaft's ``StandardAuthorizer``; the PLAINTEXT listener's
    ``User:ANONYMOUS`` is the super user that sets up, every other principal needs ACLs.

    Idempotent: a broker already running for ``data_dir`` is returned as is.
    With ``appcds`` the first run records the loaded classes into an AppCDS archive
    (written when that broker stops cleanly) and later runs map it, which cuts
    JVM start-up time. ``die_with_parent`` ties the broker's life to the calling
    thread (Linux ``setpriv --pdeathsig``), for test sessions that may be killed
    before they can clean up.
    """
    if not 1 <= port <= 65534:
        raise ValueError(f"port must be within 1..65534 (the controller uses port+1), got {port}")
    data_dir = (data_dir or default_data_dir(port)).expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    java = java_bin()
    cp = classpath(ensure_jars())
    sasl_mechanism = tls.check_mechanism(sasl_mechanism)
    if sasl_mechanism != tls.PLAIN and (tls_port is None or sasl_port is not None):
        raise BrokerError(f"{sasl_mechanism} is offered on the TLS listener only "
                          "(tls_port, no sasl_port)")
    with file_lock(data_dir / ".start.lock"):  # one starter per data dir at a time
        secure = None
        if tls_port is not None or authorizer:
            secure = Secure(tls.ensure_certificates(data_dir) if tls_port else None,
                            tls_port, sasl_users, authorizer, sasl_mechanism)
        return _start_locked(port, data_dir, wait_s, appcds, die_with_parent, java, cp,
                             (sasl_port, sasl_users) if sasl_users and sasl_port else None,
                             overrides, secure)


def _start_locked(
    port: int,
    data_dir: Path,
    wait_s: float,
    appcds: bool,
    die_with_parent: bool,
    java: str,
    cp: str,
    sasl: tuple[int, dict[str, str]] | None = None,
    overrides: dict[str, str] | None = None,
    secure: Secure | None = None,
) -> BrokerInfo:
    bootstrap = f"{HOST}:{port}"
    pid = _read_pid(data_dir)
    if pid is not None and _alive(pid, data_dir):
        if _answers(bootstrap, 2.0):
            return BrokerInfo(port, data_dir, True, pid)
        raise BrokerError(f"broker pid {pid} of {data_dir} runs but does not answer on {bootstrap}")
    for p in (port, port + 1, *([secure.tls_port] if secure and secure.tls_port else [])):
        if not _port_free(p):
            raise BrokerError(
                f"port {p} on {HOST} is already in use (the broker needs {port} and {port + 1})"
            )

    t0 = time.monotonic()  # start-up time excludes the one-time jar fetch
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    props = data_dir / "server.properties"
    props.write_text(_server_properties(port, data_dir, sasl, overrides, secure))
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(_LOG4J2)

    # The archive dump lists every class it cannot keep (old class files, JFR...): noise.
    quiet_cds = "-Xlog:cds=off,cds+dynamic=off"
    archive = _appcds_archive(java)
    candidate = data_dir / ARCHIVE_CANDIDATE
    candidate.unlink(missing_ok=True)
    use_archive = appcds and archive.is_file()
    if use_archive:
        cds_opts = [f"-XX:SharedArchiveFile={archive}", quiet_cds]
    elif appcds:
        cds_opts = [f"-XX:ArchiveClassesAtExit={candidate}", quiet_cds]
    else:
        cds_opts = []
    # The broker's class archive covers most of what the storage tool loads too.
    scram = secure is not None and secure.scram
    formatted = _format_storage(
        java, cp, data_dir, props, cds_opts if use_archive else [],
        tls.scram_arguments(secure.sasl_users or {}, secure.sasl_mechanism) if scram else ())

    # setpriv execs java with PR_SET_PDEATHSIG: SIGTERM when the starting thread dies.
    setpriv = shutil.which("setpriv") if die_with_parent else None
    cmd = [
        *([setpriv, "--pdeathsig", "TERM"] if setpriv else []),
        java,
        *HEAP_OPTS,
        *JVM_OPTS,
        *cds_opts,
        f"-Dlog4j2.configurationFile={log4j}",
        f"-Dkafka.logs.dir={logs}",
        "-Dlog4j.shutdownHookEnabled=false",
        "-cp",
        cp,
        "kafka.Kafka",
        str(props),
    ]
    with open(logs / "broker.out", "ab") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=data_dir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Own session and process group: survives our Ctrl-C, killable as a group.
            start_new_session=True,
        )
    _children[proc.pid] = proc
    (data_dir / PID_FILE).write_text(f"{proc.pid}\n")

    deadline = t0 + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            (data_dir / PID_FILE).unlink(missing_ok=True)
            raise BrokerError(
                f"broker exited with code {proc.returncode} during start-up; "
                f"last lines of {logs}:\n"
                f"{_tail(logs / 'server.log')}\n{_tail(logs / 'broker.out', 10)}"
            )
        if _answers(bootstrap, 1.0):
            if scram and not formatted and secure is not None:  # users of an earlier start
                upsert_scram(bootstrap, secure.sasl_users or {}, secure.sasl_mechanism)
            took = time.monotonic() - t0
            how = "used" if use_archive else ("recording" if appcds else "off")
            _log(f"broker {bootstrap} ready in {took:.1f} s (pid {proc.pid}, AppCDS archive {how})")
            return BrokerInfo(port, data_dir, True, proc.pid, took, use_archive)
        time.sleep(0.2)
    _stop_pid(proc.pid, data_dir, 10)
    raise BrokerError(
        f"broker did not answer on {bootstrap} within {wait_s:.0f} s; "
        f"log tail:\n{_tail(logs / 'server.log')}"
    )


def stop(port: int = 9092, data_dir: Path | None = None, timeout_s: float = 30) -> BrokerInfo:
    """Stop the broker: SIGTERM to its process group, SIGKILL if it outlives ``timeout_s``.

    With ``data_dir`` given, the port is taken from that broker's config.
    """
    port, data_dir = _resolve(port, data_dir)
    pid = _read_pid(data_dir)
    if pid is None or not _alive(pid, data_dir):
        (data_dir / PID_FILE).unlink(missing_ok=True)
        return BrokerInfo(port, data_dir, False)
    clean = _stop_pid(pid, data_dir, timeout_s)
    _log(f"broker {HOST}:{port} stopped ({'clean' if clean else 'killed'})")
    return BrokerInfo(port, data_dir, False, pid)


def _stop_pid(pid: int, data_dir: Path, timeout_s: float) -> bool:
    """Stop ``pid``, drop its pid file, keep the AppCDS archive it recorded if it exited cleanly."""
    clean = _signal_and_wait(pid, data_dir, timeout_s)
    (data_dir / PID_FILE).unlink(missing_ok=True)
    candidate = data_dir / ARCHIVE_CANDIDATE
    if candidate.is_file():
        if clean and candidate.stat().st_size > 0:
            archive = _appcds_archive(java_bin())
            archive.parent.mkdir(parents=True, exist_ok=True)
            os.replace(candidate, archive)  # atomic: concurrent starters see all or nothing
            _log(f"saved AppCDS archive {archive}")
        else:
            candidate.unlink(missing_ok=True)
    return clean


def _signal_and_wait(pid: int, data_dir: Path, timeout_s: float) -> bool:
    """SIGTERM then wait; SIGKILL on timeout. True if the broker exited by itself."""

    def send(sig: int) -> None:
        try:
            os.killpg(pid, sig)  # pid == pgid: start_new_session made it group leader
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(pid, sig)

    send(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid, data_dir):
            _reap(pid)
            return True
        time.sleep(0.1)
    _log(f"broker pid {pid} ignored SIGTERM for {timeout_s:.0f} s; sending SIGKILL")
    send(signal.SIGKILL)
    for _ in range(50):
        if not _alive(pid, data_dir):
            break
        time.sleep(0.1)
    _reap(pid)
    return False


def _reap(pid: int) -> None:
    child = _children.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


def status(port: int = 9092, data_dir: Path | None = None) -> BrokerInfo:
    """Whether the broker of ``data_dir`` (default for ``port``) runs, with its pid."""
    port, data_dir = _resolve(port, data_dir)
    pid = _read_pid(data_dir)
    if pid is not None and _alive(pid, data_dir):
        return BrokerInfo(port, data_dir, True, pid)
    return BrokerInfo(port, data_dir, False)

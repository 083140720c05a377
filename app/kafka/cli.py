"""``kepl kafka ...``: start, stop and inspect the local Kafka broker.

``main`` takes the arguments after the word ``kafka`` so the top-level ``kepl``
command can mount it as a sub-command.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from app.kafka import local_broker, local_cluster, tls

PROG = "kepl kafka"
SASL_CHOICES = ("plain", "scram", "scram-sha-256", "scram-sha-512")
PASSWORD_ENV = "KEPL_SASL_PASSWORD"


class _UsageError(Exception):
    """Bad command-line input; reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """ArgumentParser that reports errors as one line instead of usage + exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message} (see --help)")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= value <= 65534:
        raise argparse.ArgumentTypeError(
            f"port must be within 1..65534 (the controller uses port+1), got {value}"
        )
    return value


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _nodes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of nodes: {text!r}") from None
    if not 1 <= value <= 9:
        raise argparse.ArgumentTypeError(f"nodes must be within 1..9, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``kepl kafka`` argument parser."""
    parser = _Parser(
        prog=PROG,
        description=(
            "Run a real single-node Apache Kafka broker (KRaft, broker+controller in one JVM), "
            "or with --nodes N a local cluster of N such nodes, "
            "without Docker. Jars come from Maven Central once and are cached in "
            "${KEPL_HOME:-~/.cache/kepl}/kafka/<version>/libs."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="{start,stop,status}", parser_class=_Parser)
    sub.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--port",
            type=_port,
            default=None,
            help="PLAINTEXT client port; the controller listens on PORT+1 (default: 9092; "
            f"with --nodes N > 1 the first node's, default {local_cluster.DEFAULT_PORT}, "
            "node i on PORT+2(i-1))",
        )
        p.add_argument(
            "--nodes",
            type=_nodes,
            default=1,
            metavar="N",
            help="a cluster of N KRaft nodes (each broker and controller, own ports and "
            "data dirs; 3 for replication factor 3) instead of one broker (default: 1)",
        )
        p.add_argument(
            "--data-dir",
            type=Path,
            default=None,
            metavar="DIR",
            help="config, data, logs and pid file of this broker "
            "(default: ${KEPL_HOME:-~/.cache/kepl}/broker-PORT, or cluster-PORT "
            "with --nodes)",
        )

    p_start = sub.add_parser(
        "start",
        help="start the broker in the background and wait until it answers",
        description="Start the broker as a detached background process (formatting its storage on "
        "first use) and return once it answers clients. Does nothing if it already runs.",
    )
    common(p_start)
    p_start.add_argument(
        "--wait",
        type=_positive,
        default=60.0,
        metavar="SECONDS",
        help="give up if the broker does not answer within this time (default: %(default)s)",
    )
    p_start.add_argument(
        "--no-appcds", action="store_true", help="do not use or record the AppCDS class archive"
    )
    p_start.add_argument(
        "--tls", action="store_true",
        help="also open an SSL listener (on --tls-port) with a CA and certificate made "
        "into DATA_DIR/tls; prints the client settings",
    )
    p_start.add_argument(
        "--tls-port", type=_port, default=None, metavar="PORT",
        help="port of the SSL listener (default: PORT+2)",
    )
    p_start.add_argument(
        "--sasl", choices=SASL_CHOICES, default=None, metavar="MECHANISM",
        help="with --tls, make the listener SASL_SSL with this mechanism: plain, scram "
        "(SCRAM-SHA-512), scram-sha-256 or scram-sha-512; SCRAM credentials are created "
        "when the storage is formatted (replaced on a later start)",
    )
    p_start.add_argument(
        "--sasl-user", default="kepl", metavar="NAME",
        help="the SASL account (default: %(default)s); its password is $KEPL_SASL_PASSWORD, "
        "else a random one kept in DATA_DIR/tls/sasl-NAME.password",
    )
    p_start.add_argument(
        "--authorizer", action="store_true",
        help="enable KRaft's StandardAuthorizer: the PLAINTEXT listener's User:ANONYMOUS is "
        "the super user, every other principal needs ACLs (kepl acls FILE)",
    )

    p_stop = sub.add_parser(
        "stop",
        help="stop the broker (SIGTERM, then SIGKILL after a timeout)",
        description="Stop the broker gracefully with SIGTERM; "
        "SIGKILL it if it has not exited in time.",
    )
    common(p_stop)
    p_stop.add_argument(
        "--timeout",
        type=_positive,
        default=30.0,
        metavar="SECONDS",
        help="wait this long after SIGTERM before SIGKILL (default: %(default)s)",
    )

    p_status = sub.add_parser(
        "status",
        help="say whether the broker runs, with its pid and bootstrap address",
        description="Print running/stopped, pid, bootstrap address and data dir. "
        "Exit code 0 if running, 3 if not.",
    )
    common(p_status)
    return parser


def _describe(info: local_broker.BrokerInfo) -> str:
    state = f"running (pid {info.pid})" if info.running else "stopped"
    return f"{state}  bootstrap={info.bootstrap}  data-dir={info.data_dir}  log={info.log_file}"


def _describe_cluster(info: local_cluster.ClusterInfo) -> str:
    lines = [f"{'running' if info.running else 'not all running'}  "
             f"bootstrap={info.bootstrap}  data-dir={info.data_dir}"]
    for n in info.nodes:
        state = f"running (pid {n.pid})" if n.running else "stopped"
        lines.append(f"  node {n.node_id}: {state}  {n.bootstrap}  log={n.log_file}")
    return "\n".join(lines)


def _cluster(args: argparse.Namespace) -> int:
    port = args.port or local_cluster.DEFAULT_PORT
    if args.command == "start":
        info = local_cluster.start(port, args.nodes, args.data_dir, args.wait)
        print(_describe_cluster(info))
        return 0
    if args.command == "stop":
        print(_describe_cluster(local_cluster.stop(port, args.data_dir, args.timeout)))
        return 0
    info = local_cluster.status(port, args.data_dir)
    print(_describe_cluster(info))
    return 0 if info.running else 3


def _mechanism(choice: str) -> str:
    """``--sasl`` as the mechanism's name (``scram`` is SCRAM-SHA-512)."""
    return "SCRAM-SHA-512" if choice == "scram" else choice.upper()


def _start(args: argparse.Namespace) -> int:
    """``start`` of one broker; with ``--tls`` prints the client settings it wrote."""
    if args.sasl and not args.tls:
        raise _UsageError(f"{PROG} start: --sasl needs --tls (the SASL_SSL listener)")
    tls_port = (args.tls_port or args.port + 2) if args.tls else None
    users = mechanism = password_file = None
    if args.sasl:
        mechanism = _mechanism(args.sasl)
        data_dir = (args.data_dir or local_broker.default_data_dir(args.port))
        files = tls.TlsFiles(data_dir.expanduser().resolve() / "tls")
        files.directory.mkdir(parents=True, exist_ok=True)
        password, password_file = tls.sasl_password(files, args.sasl_user,
                                                    os.environ.get(PASSWORD_ENV))
        users = {args.sasl_user: password}
    info = local_broker.start(
        args.port, args.data_dir, args.wait, appcds=not args.no_appcds,
        tls_port=tls_port, authorizer=args.authorizer, sasl_users=users,
        sasl_mechanism=mechanism or tls.PLAIN,
    )
    print(_describe(info))
    if tls_port is not None:
        files = tls.TlsFiles(info.data_dir / "tls")
        sasl = (bool(users), mechanism or tls.PLAIN, args.sasl_user if users else None,
                password_file)
        props = tls.write_client_properties(files, *sasl)
        how = f" (SASL_SSL, {mechanism}, user {args.sasl_user})" if users else ""
        print(f"TLS listener{how} bootstrap=127.0.0.1:{tls_port}; "
              f"client settings (also in {props}, for --kafka-config):")
        for key, value in tls.client_settings(files, *sasl).items():
            print(f"  {key}={value}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kepl kafka`` with ``argv`` (the words after ``kafka``); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0

    try:
        if args.nodes > 1:
            return _cluster(args)
        args.port = args.port or 9092
        if args.command == "start":
            return _start(args)
        if args.command == "stop":
            info = local_broker.stop(args.port, args.data_dir, args.timeout)
            print(_describe(info))
            return 0
        info = local_broker.status(args.port, args.data_dir)
        print(_describe(info))
        return 0 if info.running else 3
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except (local_broker.BrokerError, tls.TlsError, OSError, ValueError) as exc:
        print(f"{PROG} {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

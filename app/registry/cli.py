"""``kepl registry start|stop|status``: the local schema registry (Apicurio, in memory)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from app.registry import local_registry

PROG = "kepl registry"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Run a real schema registry (Apicurio Registry, in-memory "
        "storage, Confluent-compatible API) built once from Maven Central jars; no Docker.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("start", "start it in the background and wait until it answers"),
                       ("stop", "stop it (SIGTERM, then SIGKILL)"),
                       ("status", "say whether it runs (exit 0) or not (exit 3)")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("--port", type=int, default=local_registry.DEFAULT_PORT,
                       help="HTTP port (default: %(default)s)")
        p.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                       help="pid file and log (default: ${KEPL_HOME:-~/.cache/kepl}/"
                       "registry-PORT)")
    return parser


def _describe(info: local_registry.RegistryInfo) -> str:
    state = f"running (pid {info.pid})" if info.running else "stopped"
    return f"{state}  url={info.url}  log={info.log_file}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kepl registry`` with the words after ``registry``; the exit code."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        fn = getattr(local_registry, args.command)
        info = fn(args.port, args.data_dir)
    except (local_registry.RegistryError, OSError) as e:
        print(f"{PROG} {args.command}: {e}", file=sys.stderr)
        return 1
    print(_describe(info))
    return 0 if info.running or args.command == "stop" else 3

"""CPU time of short ``kepl`` commands (targets: --version under 0.1 s, check of a small
statement file under 0.3 s).

Each command runs as a fresh subprocess several times; the CPU time (user + system) of
each run comes from ``resource.getrusage(RUSAGE_CHILDREN)`` and the median is printed.
One warm-up run first fills the caches a user's second run finds: Python's bytecode
(in a private PYTHONPYCACHEPREFIX, so the work tree stays clean) and the parser tables.

Run: .venv/bin/python tests/bench/bench_cli_startup.py [--runs N] [--fail-above SECONDS]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BANK = str(ROOT / "examples" / "bank.yaml")
COMMANDS: list[list[str]] = [["--version"], ["--help"], ["check", BANK], ["explain", BANK]]


def children_cpu() -> float:
    """User + system CPU seconds of every waited-for child process so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def cpu_of(argv: list[str], env: dict[str, str]) -> float:
    """CPU seconds of one ``kepl`` run (its output discarded; a failure stops the bench)."""
    before = children_cpu()
    subprocess.run([sys.executable, "-m", "app.cli.main", *argv], cwd=ROOT, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    return children_cpu() - before


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="runs per command (default 7)")
    ap.add_argument("--fail-above", type=float, default=None, metavar="SECONDS",
                    help="exit 1 if a command's median exceeds SECONDS")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kepl-pyc-") as pyc:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = pyc
        slow = []
        for argv in COMMANDS:
            cpu_of(argv, env)  # warm-up
            median = statistics.median(cpu_of(argv, env) for _ in range(args.runs))
            shown = " ".join(Path(a).name if a == BANK else a for a in argv)
            print(f"kepl {shown:<22} {median:6.3f} s CPU (median of {args.runs})")
            if args.fail_above is not None and median > args.fail_above:
                slow.append(shown)
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())

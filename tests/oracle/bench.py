"""Esper 9's events/s for statements run in-process (EsperBench.java), beside kepl's.

The oracle's build (tests/oracle/oracle.py: Maven fetches Esper once, javac compiles the
Java sources) also holds ``EsperBench``, which deploys the statements into a fresh
runtime per run, sends the given events with ``sendEventMap`` and times them.  One JVM
runs every case, with the default JIT (not the oracle's quick-start flags): the best of
its runs is Esper warmed up.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.kafka.local_broker import java_bin
from tests.oracle.oracle import OracleUnavailable, ensure_built, missing_tools

MAIN_CLASS = "dev.kepl.oracle.EsperBench"


@dataclass(frozen=True)
class EsperCase:
    """Statements and the events sent to them (all of one type); ``prime``: events sent
    before the clock starts."""

    statements: tuple[str, ...]
    type_name: str
    events: list[dict]
    prime: tuple[dict, ...] = ()
    repeat: int | None = None
    """Runs of this case (a fresh runtime each); None: ``esper_rates``' ``repeat``."""


def unavailable() -> str | None:
    """Why Esper cannot be measured here (missing tools, a failed build), or None."""
    missing = missing_tools()
    if missing:
        return f"{', '.join(missing)} not found"
    try:
        ensure_built()
    except OracleUnavailable as e:
        return str(e).splitlines()[0]
    return None


def esper_rates(schemas: dict, cases: list[EsperCase], repeat: int = 10
                ) -> list[float | str]:
    """Esper's best events/s per case, or the error text Esper gave for it."""
    return [max(r["rates"]) if isinstance(r, dict) else r
            for r in esper_runs(schemas, cases, repeat)]


def esper_runs(schemas: dict, cases: list[EsperCase], repeat: int = 10,
               heap: str = "2g") -> list[dict[str, Any] | str]:
    """Each case's runs as EsperBench reports them (``rates`` and ``wall``: events per
    CPU and per wall-clock second, ``gc``: the collectors' seconds, a figure per run),
    or the error text Esper gave for it (``heap``: the JVM's maximum heap)."""
    home = ensure_built()
    cmd = [java_bin(), "-XX:+UseSerialGC", f"-Xmx{heap}",
           "-cp", f"{home / 'classes'}:{home / 'libs' / '*'}", MAIN_CLASS]
    with tempfile.TemporaryDirectory() as tmp:
        lines = []
        for i, case in enumerate(cases):
            path = Path(tmp) / f"events{i}.jsonl"
            path.write_text("".join(json.dumps(e) + "\n" for e in case.events))
            doc = {"schemas": schemas, "statements": list(case.statements),
                   "type": case.type_name, "events": str(path),
                   "repeat": repeat if case.repeat is None else case.repeat}
            if case.prime:
                prime = Path(tmp) / f"prime{i}.jsonl"
                prime.write_text("".join(json.dumps(e) + "\n" for e in case.prime))
                doc["prime"] = str(prime)
            lines.append(json.dumps(doc))
        proc = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True,
                              text=True, check=False)
    out: list[dict[str, Any] | str] = []
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        out.append(msg if "rates" in msg else str(msg.get("error")))
    if len(out) < len(cases):
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        out += [f"Esper stopped (exit {proc.returncode}): {tail}"] * (len(cases) - len(out))
    return out

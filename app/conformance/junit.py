"""JUnit XML of a scenario run (``kepl scenario run --format junit``), the report format
CI systems show: one ``testcase`` per scenario, a ``failure`` for a difference from the
expectations, an ``error`` for a scenario that could not run (a bad file, an engine
error, a statement kepl does not support)."""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from app.conformance.runner import Outcome

_ERRORS = ("bad scenario file:", "engine error:", "not supported yet:")


@dataclass
class Timed:
    """A scenario's outcome and its run time in seconds."""

    outcome: Outcome
    seconds: float


def kind_of(outcome: Outcome) -> str:
    """``passed``, ``failure`` (a difference, a time limit) or ``error``."""
    if outcome.passed:
        return "passed"
    if outcome.detail.startswith(_ERRORS) or outcome.detail.startswith("line "):
        return "error"
    return "failure"


def junit_xml(results: list[Timed], suite: str = "kepl scenarios",
              started: datetime | None = None) -> str:
    """The XML document (a ``testsuites`` root holding one ``testsuite``)."""
    kinds = [kind_of(r.outcome) for r in results]
    total = f"{sum(r.seconds for r in results):.3f}"
    counts = {"tests": str(len(results)), "failures": str(kinds.count("failure")),
              "errors": str(kinds.count("error")), "skipped": "0", "time": total}
    root = ET.Element("testsuites", {"name": suite, **{k: counts[k] for k in
                                                       ("tests", "failures", "errors", "time")}})
    ts = ET.SubElement(root, "testsuite", {
        "name": suite, **counts,
        "timestamp": (started or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S"),
        "hostname": socket.gethostname()})
    for r, kind in zip(results, kinds):
        o = r.outcome
        path = Path(o.path) if o.path else None
        case = ET.SubElement(ts, "testcase", {
            "classname": _classname(path), "name": o.name, "time": f"{r.seconds:.3f}",
            **({"file": str(path)} if path else {})})
        if kind != "passed":
            first = o.detail.split(" | ", 1)[0]
            el = ET.SubElement(case, kind, {"message": first[:500],
                                            "type": _type_of(o.detail, kind)})
            el.text = o.detail.replace(" | ", "\n")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _classname(path: Path | None) -> str:
    """Dotted folder and file name, the way CI systems group test cases."""
    if path is None:
        return "scenarios"
    parts = [p for p in path.with_suffix("").parts if p not in ("", ".", "..", "/")]
    return ".".join(parts[-3:]) or "scenarios"


def _type_of(detail: str, kind: str) -> str:
    for prefix in _ERRORS:
        if detail.startswith(prefix):
            return prefix.rstrip(":").replace(" ", "_")
    if detail.startswith("line "):
        return "invalid_statement"
    if detail.startswith("time limit"):
        return "time_limit"
    return "difference" if kind == "failure" else "error"

"""``kepl scenario record``: a scenario file (FORMAT.md) whose expectations are the rows a
statement file gives now for a steps file, a golden file for a user's CI.

The steps file is the JSON-lines format of ``kepl run``, one step a line:

    {"time": 1000}                                   move the clock to 1000 ms
    {"send": "Withdrawal", "event": {"amount": 5}}   deliver one event
    {"expect": null}                                 record the rows produced so far here
    {"expect": ["big", "totals"]}                    ... of these statements only

Without any ``expect`` line, an expectation is recorded after every step that produced
rows, naming every statement that can produce rows (``none`` for those that did not), so
a row that appears, disappears or changes later fails the scenario.  A last expectation
closes the file after the last step (rows that come late are checked too).  A line holds
one step; blank lines and lines starting with ``#`` are skipped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.conformance.runner import Collected, ScenarioError, clock_or_event
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog, string_limits
from app.runtime.engine import Engine
from app.statements import StatementFile

EMITTING = ("query", "window", "on")
"""Plan kinds whose statements may emit rows (named windows post their inserts)."""


@dataclass
class Recording:
    """The scenario document being built, and what the engine produced since the last
    expectation."""

    doc: dict[str, Any]
    checked: list[str]
    collected: dict[str, Collected] = field(default_factory=dict)
    events: int = 0
    expects: int = 0

    def expect(self, names: list[str] | None = None) -> None:
        exp: dict[str, Any] = {}
        for name in names if names is not None else self.checked:
            c = self.collected[name]
            exp[name] = ({"new": list(c.new), "old": list(c.old)} if c.new or c.old
                         else "none")
        for c in self.collected.values():
            c.new.clear()
            c.old.clear()
        self.doc["steps"].append({"expect": exp})
        self.expects += 1

    def produced(self) -> bool:
        return any(c.new or c.old for c in self.collected.values())


def record(sf: StatementFile, steps_path: str, out: Path, name: str | None = None
           ) -> Recording:
    """Run ``sf`` embedded over the steps of ``steps_path`` and build the scenario that
    ``out`` will hold (its ``functions`` paths are made relative to ``out``)."""
    catalog = Catalog.from_schemas(sf.schemas, string_limits(sf.raw.get("max_string_length")),
                                   sf.functions)
    engine = Engine()
    statements, checked = [], []
    for s in sf.statements:
        plan = plan_statement(catalog, s.epl, s.name)
        engine.deploy(plan)
        statements.append({"name": s.name, "epl": s.epl})
        if plan.kind in EMITTING:
            checked.append(s.name)
    doc: dict[str, Any] = {
        "name": name or f"{sf.app}_{Path(steps_path).stem}",
        "source": f"recorded by kepl scenario record from {Path(sf.path).name} and "
                  f"{Path(steps_path).name}",
        "tags": ["recorded"],
    }
    if sf.schemas:
        doc["schemas"] = sf.schemas
    if sf.raw.get("functions"):
        doc["functions"] = _functions_from(sf.raw["functions"], Path(sf.base_dir), out)
    doc["statements"] = statements
    doc["steps"] = []
    rec = Recording(doc, checked, {s["name"]: Collected() for s in statements})

    def listen(stmt: str, new: list, old: list, pid: Any) -> None:
        c = rec.collected[stmt]
        c.new.extend(new)
        c.old.extend(old)

    engine.listeners.append(listen)
    lines = _read_steps(steps_path)
    explicit = any("expect" in step for _, step in lines)
    clock = 0
    for n, step in lines:
        kinds = [k for k in ("time", "send", "expect") if k in step]
        unknown = sorted(set(step) - {"time", "send", "event", "expect"})
        if unknown or len(kinds) != 1 or ("event" in step and "send" not in step):
            raise ScenarioError(f"{steps_path}:{n}: a step is one of {{\"time\": ms}}, "
                                f"{{\"send\": Type, \"event\": {{...}}}}, "
                                f"{{\"expect\": ...}}"
                                + (f" (unknown key {unknown[0]!r})" if unknown else ""))
        if "expect" in step:
            names = step["expect"]
            if names is not None and (not isinstance(names, list) or not all(
                    isinstance(x, str) and x in rec.collected for x in names)):
                raise ScenarioError(f"{steps_path}:{n}: 'expect' takes null or a list of "
                                    f"statement names of {sf.path}")
            rec.expect(names)
            continue
        if "time" in step:
            t = step["time"]
            if isinstance(t, bool) or not isinstance(t, int) or t < clock:
                raise ScenarioError(f"{steps_path}:{n}: time {t!r} moves backwards or is "
                                    "not an int")
            clock = t
        try:
            clock_or_event(step, lambda t: engine.advance_time(int(t)), engine.send, catalog)
        except ScenarioError:
            raise
        except Exception as e:  # noqa: BLE001 - a refused event names its line
            raise ScenarioError(f"{steps_path}:{n}: {e}") from None
        doc["steps"].append(step)
        if "send" in step:
            rec.events += 1
        if not explicit and rec.produced():
            rec.expect()
    if rec.produced() or not doc["steps"] or "expect" not in doc["steps"][-1]:
        rec.expect()
    return rec


def _read_steps(path: str) -> list[tuple[int, dict[str, Any]]]:
    out = []
    with open(path) as src:
        for n, line in enumerate(src, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                step = json.loads(line)
            except ValueError as e:
                raise ScenarioError(f"{path}:{n}: not JSON: {e}") from None
            if not isinstance(step, dict):
                raise ScenarioError(f"{path}:{n}: a step is a JSON object")
            out.append((n, step))
    return out


def _functions_from(raw: dict[str, Any], base: Path, out: Path) -> dict[str, Any]:
    """A statement file's ``functions`` with module paths relative to the scenario file."""
    where = out.resolve().parent
    return {name: {**spec, "path": os.path.relpath(base / spec.get("path", "."), where)}
            for name, spec in raw.items()}


def dump(doc: dict[str, Any]) -> str:
    """The scenario as YAML: keys in the format's order, rows in flow style."""
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


class _Dumper(yaml.SafeDumper):
    """Block style for the document, flow style for rows and events (one per line)."""


def _mapping(dumper: yaml.SafeDumper, data: dict) -> Any:
    flow = (bool(data) and "epl" not in data
            and not any(isinstance(v, dict | list) for v in data.values()))
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flow)


_Dumper.add_representer(dict, _mapping)

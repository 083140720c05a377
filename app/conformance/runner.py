"""The conformance scenario runner (../shared/conformance/FORMAT.md), embedded mode.

A scenario deploys its statements, replays its steps against an explicit clock and
compares what each statement produced with the expectations.  Anything that is not a
pass is a FAIL line with the first difference or the reason; never a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.epl.errors import EplError
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog, NotSupported, coerce_event
from app.runtime.engine import Engine
from app.runtime.functions import FunctionError, parse_functions

TYPES = {"string", "int", "long", "double", "boolean", "float", "short", "byte"}


class ScenarioError(Exception):
    """The file does not follow the scenario format."""


@dataclass
class Outcome:
    """Result of one scenario."""

    name: str
    passed: bool
    detail: str = ""
    path: str = ""


@dataclass
class Collected:
    """Rows a statement produced since the previous ``expect``."""

    new: list[dict] = field(default_factory=list)
    old: list[dict] = field(default_factory=list)
    by_partition: list[tuple[Any, str, dict]] = field(default_factory=list)


def values_equal(expected: Any, actual: Any) -> bool:
    """FORMAT.md: numbers compare with relative tolerance 1e-9; int equals same float.

    NaN (YAML ``.nan``) equals NaN: a scenario states the value the engine must output,
    and an undefined statistic is NaN (Esper ref. 14.4 derived-value windows)."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        if math.isnan(expected) or math.isnan(actual):
            return math.isnan(expected) and math.isnan(actual)
        return math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(expected, dict) and isinstance(actual, dict):
        return rows_equal(expected, actual)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            values_equal(e, a) for e, a in zip(expected, actual))
    return bool(expected == actual)


def rows_equal(expected: dict, actual: dict) -> bool:
    if set(expected) != set(actual):
        return False
    return all(values_equal(expected[k], actual[k]) for k in expected)


def compare_rows(label: str, expected: list, actual: list) -> str | None:
    """The first difference between two ordered row lists, or None."""
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not isinstance(e, dict) or not rows_equal(e, a):
            return f"{label}[{i}]: expected {e}, got {a}"
    if len(expected) != len(actual):
        return f"{label}: expected {len(expected)} rows {expected}, got {len(actual)} {actual}"
    return None


def load_scenario(path: Path) -> dict:
    """Read and check the shape of a scenario file."""
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ScenarioError(f"not valid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise ScenarioError("a scenario must be a mapping")
    for key in ("name", "statements", "steps"):
        if key not in doc:
            raise ScenarioError(f"missing '{key}'")
    schemas = doc.get("schemas") or {}
    if not isinstance(schemas, dict):
        raise ScenarioError("'schemas' must map event types to property types")
    for tname, props in schemas.items():
        if not isinstance(props, dict):
            raise ScenarioError(f"schema '{tname}' must map properties to types")
        for p, t in props.items():
            if t not in TYPES:
                raise ScenarioError(f"schema '{tname}': property '{p}' has unknown type '{t}'")
    if not isinstance(doc["statements"], list) or not all(
            isinstance(s, dict) and "epl" in s for s in doc["statements"]):
        raise ScenarioError("'statements' must be a list of {name, epl}")
    if not isinstance(doc["steps"], list):
        raise ScenarioError("'steps' must be a list")
    if doc.get("functions") is not None:
        doc["functions"] = _functions_near(doc["functions"], path.resolve().parent)
    return doc


def _functions_near(raw: Any, base: Path) -> Any:
    """A scenario's ``functions:`` (kepl's extension of the format: user functions, as a
    statement file declares them), each module looked for next to the scenario file
    unless its ``path`` says where; checked here so that a bad one is a bad file."""
    if raw is None:
        return None
    try:
        parse_functions(raw, base)
    except FunctionError as e:
        raise ScenarioError(f"functions: {e}") from None
    return {name: {**spec, "path": str(base / spec.get("path", "."))}
            for name, spec in raw.items()}


def scenario_functions(doc: dict) -> dict[str, Any]:
    """The user functions a loaded scenario declares."""
    try:
        return parse_functions(doc.get("functions"))
    except FunctionError as e:
        raise ScenarioError(f"functions: {e}") from None


def run_scenario_embedded(doc: dict) -> str | None:
    """Run one scenario in-process; return the first difference, or None on a pass."""
    catalog = Catalog.from_schemas(doc.get("schemas") or {},
                                   functions=scenario_functions(doc))
    engine = Engine()
    names: list[str] = []
    for i, s in enumerate(doc["statements"]):
        plan = plan_statement(catalog, str(s["epl"]), s.get("name") or f"s{i}")
        engine.deploy(plan)
        names.append(plan.name)
    collected: dict[str, Collected] = {n: Collected() for n in names}

    def listen(stmt: str, new: list, old: list, pid: Any) -> None:
        c = collected[stmt]
        c.new.extend(new)
        c.old.extend(old)

    engine.listeners.append(listen)
    return replay(doc, engine.advance_time, lambda t, e: engine.send(t, e), collected,
                  catalog, lambda: engine.now_ms)


def clock_or_event(step: dict, advance: Callable[[Any], None],
                   send: Callable[[str, dict], None], catalog: Catalog) -> bool:
    """Apply a ``time`` or ``send`` step (the event checked against its type); False for
    a step of another kind.  One interpreter for scenarios and ``kepl run`` steps."""
    if "time" in step:
        advance(step["time"])
        return True
    if "send" in step:
        tname = step["send"]
        send(tname, coerce_event(catalog, tname, step.get("event") or {}))
        return True
    return False


def replay(doc: dict, advance: Callable[[int], None], send: Callable[[str, dict], None],
           collected: dict[str, Collected], catalog: Catalog, now: Callable[[], int],
           settle: Callable[[], None] | None = None) -> str | None:
    """Drive the steps of a scenario; shared by embedded and Kafka mode."""
    clock = 0
    for n, step in enumerate(doc["steps"], 1):
        if not isinstance(step, dict):
            raise ScenarioError(f"step {n} is not a mapping")
        if "time" in step:
            t = step["time"]
            if isinstance(t, bool) or not isinstance(t, int) or t < clock:
                raise ScenarioError(f"step {n}: time {t!r} moves backwards or is not an int")
            clock = t
        if clock_or_event(step, advance, send, catalog):
            continue
        if "expect" in step:
            if settle is not None:
                settle()
            exp = step["expect"] or {}
            for stmt, rows in exp.items():
                if stmt not in collected:
                    raise ScenarioError(f"step {n}: expect names unknown statement '{stmt}'")
                got = collected[stmt]
                if rows == "none":
                    rows = {"new": [], "old": []}
                if not isinstance(rows, dict):
                    raise ScenarioError(f"step {n}: expectation of '{stmt}' must be a mapping")
                for label in ("new", "old"):
                    if label in rows:
                        diff = compare_rows(label, rows[label] or [], getattr(got, label))
                        if diff:
                            return f"step {n} (t={clock}) {stmt}.{diff}"
            for c in collected.values():
                c.new.clear()
                c.old.clear()
        else:
            raise ScenarioError(f"step {n}: unknown step {sorted(step)}")
    return None


def scenario_files(paths: Iterable[str]) -> list[Path]:
    """Expand folders into their .yaml/.yml files, sorted."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out += sorted(q for q in path.rglob("*") if q.suffix in (".yaml", ".yml"))
        else:
            out.append(path)
    return out


def run_file(path: Path, runner: Callable[[dict], str | None]) -> Outcome:
    """Run one file and turn every failure into an Outcome, never an exception."""
    name = path.stem
    try:
        doc = load_scenario(path)
        name = str(doc["name"])
        diff = runner(doc)
    except NotSupported as e:
        return Outcome(name, False, f"not supported yet: {e}", str(path))
    except EplError as e:
        return Outcome(name, False, e.render().replace("\n", " | "), str(path))
    except ScenarioError as e:
        return Outcome(name, False, f"bad scenario file: {e}", str(path))
    except Exception as e:  # noqa: BLE001 - a scenario must report, never crash the run
        return Outcome(name, False, f"engine error: {type(e).__name__}: {e}", str(path))
    return Outcome(name, diff is None, diff or "", str(path))

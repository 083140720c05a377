"""A differential oracle: conformance scenarios run through real Esper 9 and through kepl.

Each Esper-syntax scenario (FORMAT.md; Apama and SPL ones are skipped) is turned into
JSON for ``EsperOracle.java``, which replays it in an Esper runtime with an external
clock (at 0 before the first step; a ``time`` step is ``advanceTimeSpan``, so every
timer fires at its own due time). At every ``expect`` step the rows Esper produced are
compared with the scenario's expectation and with kepl's embedded output; a step agrees
when all three are equal.

The Java side is built once per version of its sources: Maven copies Esper's jars and
javac compiles the oracle into ``${KEPL_HOME:-~/.cache/kepl}/oracle/<hash>``.

With ``--record`` the expectations are taken from Esper: every expect step of a file
gets the rows Esper produced there for the statements it lists (all statements when it
lists none), the file is rewritten, and kepl is compared with them. Generated scenarios
(tests/oracle/generate.py) are written without rows and recorded this way.

    python -m tests.oracle.oracle [-v] [--strict] [--record] [--brief] PATH...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.conformance.runner import (
    Collected,
    ScenarioError,
    compare_rows,
    load_scenario,
    rows_equal,
    scenario_files,
)
from app.epl.planner import plan_statement
from app.kafka.local_broker import file_lock, java_bin, kepl_home
from app.maven import copy_dependencies

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
MAIN_CLASS = "dev.kepl.oracle.EsperOracle"
NON_ESPER_TAGS = {"apama": "Apama stream query", "spl": "SPL window clause"}
# Names an EPL statement gives to a new event type: configuring the same name from the
# scenario's schemas would make Esper refuse the statement.
CREATES_TYPE = re.compile(r"\bcreate\s+(?:schema|window|table)\s+(\w+)", re.IGNORECASE)


class OracleUnavailable(Exception):
    """Java, javac or Maven is missing, or the oracle could not be built."""


# --------------------------------------------------------------------------- build

def sources() -> list[Path]:
    """The files the built oracle depends on."""
    return [POM, *sorted((HERE / "src").rglob("*.java"))]


def source_hash() -> str:
    """A short hash of the pom and the Java sources: the cache key of a build."""
    h = hashlib.sha256()
    for p in sources():
        h.update(str(p.relative_to(HERE)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build_dir() -> Path:
    return kepl_home() / "oracle" / source_hash()


def _tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    if home and name in ("java", "javac") and (Path(home) / "bin" / name).is_file():
        return str(Path(home) / "bin" / name)
    found = shutil.which(name)
    if found is None:
        raise OracleUnavailable(f"{name} is not on PATH")
    return found


def missing_tools() -> list[str]:
    """Which of java, javac and mvn cannot be found (empty when the oracle can run)."""
    out = []
    for name in ("java", "javac", "mvn"):
        try:
            _tool(name)
        except OracleUnavailable:
            out.append(name)
    return out


def ensure_built() -> Path:
    """Build the oracle unless this version is cached; return its directory.

    The build goes to a scratch directory renamed into place at the end, so an
    interrupted build never leaves a half-filled cache behind."""
    home = build_dir()
    if (home / "classes").is_dir():
        return home
    with file_lock(home.parent / ".build.lock"):
        if (home / "classes").is_dir():
            return home
        mvn, javac = _tool("mvn"), _tool("javac")
        scratch = home.parent / f"{home.name}.partial-{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        print(f"esper oracle: building into {home} (one-time)...", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        proc = copy_dependencies(mvn, POM, scratch / "libs", {"includeScope": "runtime"})
        if proc.returncode != 0 or not any((scratch / "libs").glob("esper-runtime-*.jar")):
            shutil.rmtree(scratch, ignore_errors=True)
            tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
            raise OracleUnavailable(
                f"Maven failed to fetch Esper (exit {proc.returncode}):\n{tail}")
        java_files = [str(p) for p in sources() if p.suffix == ".java"]
        proc = subprocess.run(
            [javac, "-nowarn", "-encoding", "UTF-8", "-d", str(scratch / "classes"),
             "-cp", str(scratch / "libs" / "*"), *java_files],
            check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            raise OracleUnavailable(f"javac failed:\n{proc.stdout[-3000:]}")
        scratch.rename(home)
        print(f"esper oracle: built in {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    return home


# --------------------------------------------------------------------------- scenarios

def skip_reason(doc: dict) -> str | None:
    """Why a scenario is not Esper syntax (FORMAT.md: the tags say so), or None."""
    tags = {str(t).lower() for t in doc.get("tags") or []}
    for tag, what in NON_ESPER_TAGS.items():
        if tag in tags:
            return f"not Esper syntax ({what})"
    if doc.get("functions"):
        return "calls Python user functions (functions:), which Esper cannot run"
    return None


def statement_names(doc: dict) -> list[str]:
    return [str(s.get("name") or f"s{i}") for i, s in enumerate(doc["statements"])]


def to_oracle_json(doc: dict) -> dict:
    """The scenario as the Java side reads it."""
    created = {m.group(1) for s in doc["statements"] for m in CREATES_TYPE.finditer(str(s["epl"]))}
    schemas = {t: props for t, props in (doc.get("schemas") or {}).items() if t not in created}
    steps: list[dict] = []
    for step in doc["steps"]:
        if "time" in step:
            steps.append({"time": step["time"]})
        elif "send" in step:
            steps.append({"send": step["send"], "event": step.get("event") or {}})
        elif "expect" in step:
            steps.append({"expect": True})
        else:
            raise ScenarioError(f"unknown step {sorted(step)}")
    return {"schemas": schemas,
            "statements": [{"name": n, "epl": str(s["epl"])}
                           for n, s in zip(statement_names(doc), doc["statements"])],
            "steps": steps}


@dataclass
class EsperRun:
    """What Esper did with one scenario."""

    rows: dict[int, dict[str, Collected]] = field(default_factory=dict)  # by step number
    deploy_error: str | None = None
    error: str | None = None
    error_step: int | None = None
    notes: list[str] = field(default_factory=list)


def _from_json(v: Any) -> Any:
    """Undo the Java side's encoding of NaN and infinities."""
    if isinstance(v, dict):
        if set(v) == {"$double"}:
            return float(v["$double"].replace("Infinity", "inf"))
        return {k: _from_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_from_json(x) for x in v]
    return v


def _column(name: str) -> str:
    """FORMAT.md: an unaliased column is the expression text with its whitespace removed."""
    return re.sub(r"\s+", "", name)


SCENARIO_LIMIT_S = 60.0
"""Wall time one scenario may take in Esper (a clock jump of years replays every timer
firing one by one there): past it the JVM is stopped, the scenario reported, and the
rest run in a new JVM."""


def run_esper(docs: list[dict], limit_s: float = SCENARIO_LIMIT_S) -> list[EsperRun]:
    """Run scenarios through Esper, in one JVM while none hangs; one EsperRun each."""
    import selectors
    import threading
    import time

    home = ensure_built()
    cmd = [java_bin(), "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss4m",
           "-cp", f"{home / 'classes'}{os.pathsep}{home / 'libs' / '*'}", MAIN_CLASS]
    runs = [EsperRun() for _ in docs]
    first = 0
    while first < len(docs):
        errfile = tempfile.TemporaryFile(mode="w+")  # a pipe could fill and stall the JVM
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=errfile, text=True)
        stdin = "".join(json.dumps(to_oracle_json(d)) + "\n" for d in docs[first:])

        def feed(proc: subprocess.Popen[str] = proc, text: str = stdin) -> None:
            try:
                assert proc.stdin is not None
                proc.stdin.write(text)
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass

        threading.Thread(target=feed, daemon=True).start()
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        done: set[int] = set()
        current = first
        deadline = time.monotonic() + limit_s
        hung = False
        while True:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                hung = True
                break
            line = proc.stdout.readline()
            if not line:
                break
            i = _take(line, runs, first)
            if i is not None:
                done.add(i)
                while current in done:
                    current += 1
                deadline = time.monotonic() + limit_s
        if hung:
            errfile.close()
            proc.kill()
            proc.wait()
            runs[current].error = (f"time limit: Esper did not finish this scenario within "
                                   f"{limit_s:.0f} s")
            first = current + 1
            continue
        proc.wait()
        errfile.seek(0)
        err = errfile.read()
        for i in range(first, len(docs)):
            if i not in done and runs[i].error is None:
                tail = " | ".join(err.strip().splitlines()[-5:])
                runs[i].error = f"the oracle stopped (exit {proc.returncode}): {tail}"
        break
    return runs


def _take(line: str, runs: list[EsperRun], first: int) -> int | None:
    """Record one message of the Java side; the scenario's index when it is done."""
    try:
        msg = json.loads(line)
    except json.JSONDecodeError:
        return None
    i = msg["scenario"] + first
    run = runs[i]
    if msg.get("done"):
        return i
    if "quoted" in msg:
        run.notes.append(f"statement {msg['statement']} ran with its reserved keywords "
                         f"escaped: {msg['quoted']}")
    elif "deploy_error" in msg:
        run.deploy_error = f"statement {msg['statement']}: {msg['deploy_error']}"
    elif "error" in msg:
        run.error, run.error_step = msg["error"], msg.get("step")
    elif "rows" in msg:
        run.rows[msg["step"]] = {
            stmt: Collected(new=[{_column(k): v for k, v in _from_json(r).items()}
                                 for r in got["new"]],
                            old=[{_column(k): v for k, v in _from_json(r).items()}
                                 for r in got["old"]])
            for stmt, got in msg["rows"].items()}
    return None


def run_kepl(doc: dict) -> tuple[dict[int, dict[str, Collected]], str | None]:
    """kepl's embedded output at every expect step, and the error that stopped it, if any.

    The same deployment and replay as app/conformance/runner.py, except that the rows
    are kept per step instead of compared."""
    from app.runtime.catalog import Catalog, coerce_event
    from app.runtime.engine import Engine

    rows: dict[int, dict[str, Collected]] = {}
    try:
        catalog = Catalog.from_schemas(doc.get("schemas") or {})
        engine = Engine()
        names = statement_names(doc)
        for name, s in zip(names, doc["statements"]):
            engine.deploy(plan_statement(catalog, str(s["epl"]), name))
        collected = {n: Collected() for n in names}

        def listen(stmt: str, new: list, old: list, pid: Any) -> None:
            collected[stmt].new.extend(new)
            collected[stmt].old.extend(old)

        engine.listeners.append(listen)
        for n, step in enumerate(doc["steps"], 1):
            if "time" in step:
                engine.advance_time(step["time"])
            elif "send" in step:
                event = coerce_event(catalog, step["send"], step.get("event") or {})
                engine.send(step["send"], event)
            elif "expect" in step:
                rows[n] = {k: Collected(list(c.new), list(c.old)) for k, c in collected.items()}
                for c in collected.values():
                    c.new.clear()
                    c.old.clear()
    except Exception as e:  # noqa: BLE001 - reported, the comparison goes on with Esper
        render = getattr(e, "render", None)
        text = render().replace("\n", " | ") if callable(render) else f"{type(e).__name__}: {e}"
        return rows, text
    return rows, None


# --------------------------------------------------------------------------- comparison

@dataclass
class StepResult:
    """One expect step: the first difference for each label/statement checked."""

    step: int
    clock: int
    differences: list[str] = field(default_factory=list)


@dataclass
class ScenarioResult:
    name: str
    path: str
    status: str  # agree | order-only | disagree | esper-error | kepl-error | skipped | invalid
    detail: str = ""
    steps: list[StepResult] = field(default_factory=list)
    kepl_error: str | None = None
    notes: list[str] = field(default_factory=list)


def _same_multiset(a: list[dict], b: list[dict]) -> bool:
    rest = list(b)
    for row in a:
        for i, other in enumerate(rest):
            if rows_equal(row, other):
                del rest[i]
                break
        else:
            return False
    return not rest


def _differs(a: list, b: list) -> str | None:
    """None when two row lists are equal, else "order" or "rows"."""
    if compare_rows("", a, b) is None:
        return None
    return "order" if len(a) == len(b) and _same_multiset(a, b) else "rows"


def _difference(label: str, expected: list, esper: list, kepl: list | None) -> str | None:
    """Describe how Esper, kepl and the expectation differ for one row list, or None."""
    e_x = _differs(expected, esper)
    k_e = "kepl failed" if kepl is None else _differs(esper, kepl)
    if e_x is None and k_e is None:
        return None
    k_x = None if kepl is None else _differs(expected, kepl)
    if kepl is None:
        who = "kepl failed" + ("" if e_x is None else ", esper differs from expected")
    elif e_x is None:
        who = "kepl differs"
    elif k_x is None:
        who = "esper differs"
    elif k_e is None:
        who = "expected differs from both"
    else:
        who = "all three differ"
    if "rows" not in (e_x, k_e, k_x):
        who += ", order only"
    kepl_text = "-" if kepl is None else json.dumps(kepl, default=str)
    return (f"{label} [{who}]: esper={json.dumps(esper, default=str)} "
            f"kepl={kepl_text} expected={json.dumps(expected, default=str)}")


def compare(doc: dict, path: str, esper: EsperRun, everything: bool = False) -> ScenarioResult:
    """Compare Esper's rows with the expectations and kepl's rows, step by step.

    With ``everything``, the rows an expect step does not check (unlisted statements,
    omitted ``new``/``old``) are compared between Esper and kepl as well."""
    name = str(doc["name"])
    if esper.deploy_error is not None:
        return ScenarioResult(name, path, "esper-error", esper.deploy_error, notes=esper.notes)
    kepl_rows, kepl_error = run_kepl(doc)
    result = ScenarioResult(name, path, "agree", kepl_error=kepl_error, notes=esper.notes)
    clock = 0
    for n, step in enumerate(doc["steps"], 1):
        if "time" in step:
            clock = step["time"]
        if "expect" not in step:
            continue
        if n not in esper.rows:
            where = f"at step {esper.error_step}" if esper.error_step else ""
            result.status, result.detail = "esper-error", f"{where}: {esper.error}".strip(": ")
            return result
        sr = StepResult(n, clock)
        for stmt, rows in (step["expect"] or {}).items():
            if rows == "none":
                rows = {"new": [], "old": []}
            got_esper = esper.rows[n].get(stmt)
            got_kepl = kepl_rows.get(n, {}).get(stmt)
            if got_esper is None:
                sr.differences.append(f"{stmt}: unknown statement")
                continue
            for label in ("new", "old"):
                if label in rows:
                    diff = _difference(label, rows[label] or [], getattr(got_esper, label),
                                       None if got_kepl is None else getattr(got_kepl, label))
                    if diff:
                        sr.differences.append(f"{stmt}.{diff}")
        if everything:
            sr.differences += _unchecked(step["expect"] or {}, esper.rows[n], kepl_rows.get(n))
        result.steps.append(sr)
        if sr.differences:
            result.status = "disagree"
    if result.status == "disagree" and all(
            ", order only]" in d for sr in result.steps for d in sr.differences):
        # The same rows at every step, in another order: in the README's deviations
        # this is the reference product's hash-map order of groups and unique keys.
        result.status = "order-only"
    if kepl_error and result.status == "agree":
        result.status = "kepl-error"
    return result


def _unchecked(expect: dict, esper: dict[str, Collected],
               kepl: dict[str, Collected] | None) -> list[str]:
    """Esper/kepl differences in the rows an expect step leaves unchecked."""
    if kepl is None:
        return []
    out = []
    for stmt, got in esper.items():
        rows = expect.get(stmt)
        rows = {"new": [], "old": []} if rows == "none" else rows or {}
        for label in ("new", "old"):
            if label in rows or stmt not in kepl:
                continue
            e, k = getattr(got, label), getattr(kepl[stmt], label)
            how = _differs(e, k)
            if how:
                order = ", order only" if how == "order" else ""
                out.append(f"{stmt}.{label} [unchecked, kepl differs{order}]: "
                           f"esper={json.dumps(e, default=str)} kepl={json.dumps(k, default=str)}")
    return out


def _recorded(rows: Collected) -> dict | str:
    """One statement's rows as an expectation (``none`` when it produced nothing)."""
    if not rows.new and not rows.old:
        return "none"
    return {"new": rows.new, "old": rows.old}


def record(doc: dict, esper: EsperRun) -> bool:
    """Replace the expectations of ``doc`` with Esper's rows; False when Esper failed.

    A step keeps its list of statements (all of them when it names none)."""
    if esper.deploy_error is not None or esper.error is not None:
        return False
    for n, step in enumerate(doc["steps"], 1):
        if "expect" not in step:
            continue
        got = esper.rows.get(n)
        if got is None:
            return False
        listed = list(step["expect"] or {}) or list(got)
        step["expect"] = {stmt: _recorded(got[stmt]) for stmt in listed if stmt in got}
    return True


def _write_scenario(path: str, doc: dict) -> None:
    Path(path).write_text(yaml.safe_dump(doc, sort_keys=False, width=100))


def run_paths(paths: Iterable[str], everything: bool = False,
              recording: bool = False) -> list[ScenarioResult]:
    """Load, run and compare every scenario under ``paths``; with ``recording``, first
    write Esper's rows into each file as its expectations."""
    results: list[ScenarioResult | None] = []
    todo: list[tuple[int, dict, str]] = []
    for path in scenario_files(paths):
        try:
            doc = load_scenario(path)
            reason = skip_reason(doc)
            if reason:
                results.append(ScenarioResult(str(doc["name"]), str(path), "skipped", reason))
                continue
            to_oracle_json(doc)
        except ScenarioError as e:
            results.append(ScenarioResult(path.stem, str(path), "invalid", str(e)))
            continue
        todo.append((len(results), doc, str(path)))
        results.append(None)
    runs = run_esper([doc for _, doc, _ in todo]) if todo else []
    for (i, doc, path), run in zip(todo, runs):
        if recording and record(doc, run):
            _write_scenario(path, doc)
        results[i] = compare(doc, path, run, everything)
    return [r for r in results if r is not None]


def report(results: list[ScenarioResult], verbose: bool = False, brief: bool = False) -> str:
    """The per-scenario lines (with a line per disagreeing step) and a summary line;
    ``brief`` leaves out the scenarios that agree."""
    lines = []
    for r in results:
        head = f"{r.status.upper():<12}{r.name}"
        if r.status == "agree" and brief and not r.notes:
            continue
        if r.status == "agree":
            lines.append(f"{head} ({len(r.steps)} expect steps)")
        elif r.status in ("esper-error", "skipped", "invalid"):
            lines.append(f"{head}: {r.detail}")
        else:
            lines.append(head)
        lines += [f"    note: {n}" for n in r.notes]
        if r.kepl_error:
            lines.append(f"    kepl error: {r.kepl_error}")
        for s in r.steps:
            if s.differences or verbose:
                what = "; ".join(s.differences) if s.differences else "agree"
                lines.append(f"    step {s.step} (t={s.clock}): {what}")
    counts = Counter(r.status for r in results)
    lines.append(", ".join(f"{counts.get(k, 0)} {k}"
                           for k in ("agree", "order-only", "disagree", "esper-error",
                                     "kepl-error", "skipped", "invalid")))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.oracle.oracle",
        description="Run conformance scenarios through Esper 9 and kepl; report agreement "
                    "per scenario and step.")
    ap.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or folders")
    ap.add_argument("-v", "--verbose", action="store_true", help="list agreeing steps too")
    ap.add_argument("--all", action="store_true",
                    help="also compare Esper and kepl on the rows the expectations leave "
                         "unchecked (unlisted statements, omitted new/old)")
    ap.add_argument("--record", action="store_true",
                    help="first write Esper's rows into each file as its expectations "
                         "(for generated scenarios), then compare kepl with them")
    ap.add_argument("--brief", action="store_true",
                    help="print only the scenarios that do not agree, and the summary")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when any scenario disagrees or Esper refuses it")
    args = ap.parse_args(argv)
    try:
        results = run_paths(args.paths, args.all, args.record)
    except OracleUnavailable as e:
        print(f"esper oracle unavailable: {e}", file=sys.stderr)
        return 2
    print(report(results, args.verbose, args.brief))
    bad = any(r.status in ("disagree", "esper-error", "kepl-error", "invalid") for r in results)
    return 1 if args.strict and bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""``kepl check`` never crashes: mutated statements and statement files give exit 0 (valid)
or exit 2 with a positioned message, never a traceback.

Seeds are the examples and the statements of the conformance cases.  The default run
checks a few hundred inputs; ``pytest -m long tests/app/cli/test_check_fuzz.py`` checks
more than 10^4.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
CASES_DIR = Path("/work/shared/conformance/cases")


def _case_docs() -> list[dict[str, Any]]:
    if not CASES_DIR.is_dir():
        return []
    return [yaml.safe_load(f.read_text()) for f in sorted(CASES_DIR.glob("*.yaml"))]


def _module_of(doc: dict[str, Any]) -> str:
    """A case as an EPL module: its schemas as create schema, then its statements."""
    lines = [f"create schema {name}({', '.join(f'{p} {t}' for p, t in props.items())});"
             for name, props in (doc.get("schemas") or {}).items()]
    lines += [s["epl"].rstrip().rstrip(";") + ";" for s in doc["statements"]]
    return "\n".join(lines) + "\n"


def _file_of(doc: dict[str, Any]) -> str:
    """A case as a YAML statement file."""
    return yaml.safe_dump({"app": "fuzz", "schemas": doc.get("schemas") or {},
                           "statements": [{"name": s["name"], "epl": s["epl"]}
                                          for s in doc["statements"]]}, sort_keys=False)


CASES = _case_docs()
MODULES = [(ROOT / "examples" / "bank.epl").read_text()] + [_module_of(d) for d in CASES]
FILES = [(ROOT / "examples" / "bank.yaml").read_text()] + [_file_of(d) for d in CASES]

PIECES = [
    "(", ")", "[", "]", ",", ".", ";", ":", "+", "-", "*", "/", "%", "||", "=", "<", " and ",
    " or ", " not ", "#time(", "#length(", "#time_length_batch(", "#time_batch(", " sec",
    " msec", " years", "1e308", "1e-400", "Infinity", "9" * 400, "9223372036854775808", "-1",
    "0", "0.5", "'s'", "`x`", "__class__", "a.__doc__", "prev(", "count(*)", "sum(", " -> ",
    "every ", "pattern [", " where ", " group by ", " output every ", "retain 3 every ",
    "within 1 every ", " from ", " select ", "é", "\x00", "\t", "\n", "\\", "'", '"', "//",
    "/*", "*/", "@name('x') ", "context ", "create window W#keepall as ", "\ufeff",
]
YAML_PIECES = [
    "[", "]", "{", "}", ":", "- ", "  ", "\t", "\n", "&a ", "*a", "!!python/object:os.system ",
    "!!binary ", "? ", "|", ">", "%YAML 1.1\n", "---\n", "...\n", "app: 3\n", "epl: 7\n",
    "schemas: []\n", "'", '"', "#", "\x00", "\udcff", "é", "null", "~", "1e400",
]


def _mutate(pieces: list[str]) -> Callable[[str, st.DataObject], str]:
    """Up to four edits: insert, delete, duplicate, replace a span, or repeat a piece."""

    def mutate(text: str, data: st.DataObject) -> str:
        for _ in range(data.draw(st.integers(1, 4), label="edits")):
            n = len(text)
            start = data.draw(st.integers(0, n), label="start")
            end = data.draw(st.integers(start, min(n, start + 40)), label="end")
            piece = data.draw(st.sampled_from(pieces), label="piece")
            op = data.draw(st.sampled_from(["insert", "delete", "dup", "replace", "repeat"]),
                           label="op")
            if op == "insert":
                text = text[:start] + piece + text[start:]
            elif op == "delete":
                text = text[:start] + text[end:]
            elif op == "dup":
                text = text[:end] + text[start:end] * data.draw(st.integers(1, 300)) + text[end:]
            elif op == "replace":
                text = text[:start] + piece + text[end:]
            else:
                text = text[:start] + piece * data.draw(st.integers(2, 1200)) + text[start:]
        return text

    return mutate


mutate_epl = _mutate(PIECES)
mutate_yaml = _mutate(PIECES + YAML_PIECES)

POSITIONED = re.compile(r"^line \d+:\d+: .+\n  .*\n  [ \t]*\^$", re.M)


def run_check(name: str, content: str | bytes) -> tuple[int, str]:
    """``kepl check`` on one file written with that content: (exit code, output)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", errors="surrogateescape")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["check", str(path)])
        return code, (out.getvalue() + err.getvalue()).replace(str(path), name)


def assert_clean(name: str, content: str | bytes) -> tuple[int, str]:
    """Exit 0 saying the file is valid, or exit 2 with every error positioned."""
    code, text = run_check(name, content)
    assert "Traceback" not in text
    if code == 0:
        assert text.endswith("1 file(s) valid\n"), text
        return code, text
    assert code == 2, text
    assert text.endswith(" error(s)\n"), text
    body = text.rsplit("\n", 2)[0]
    assert body.startswith(f"{name}:"), body
    if POSITIONED.search(body) is None:
        # file-level errors: one line naming the file and where in it
        assert re.match(rf"^{re.escape(name)}: (line \d+, column \d+: |at \S+|YAML nested|"
                        rf"not valid YAML at line \d+, column \d+: )", body), body
    return code, text


def fuzz_settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def _modules(data: st.DataObject) -> str:
    return mutate_epl(data.draw(st.sampled_from(MODULES), label="seed"), data)


def _files(data: st.DataObject) -> str:
    return mutate_yaml(data.draw(st.sampled_from(FILES), label="seed"), data)


def _epl_in_file(data: st.DataObject) -> str:
    """A statement file whose EPL strings are mutated (the YAML stays well-formed)."""
    doc = yaml.safe_load(data.draw(st.sampled_from(FILES), label="seed"))
    for s in doc["statements"]:
        if data.draw(st.booleans(), label="mutate this statement"):
            s["epl"] = mutate_epl(s["epl"], data)
    return yaml.safe_dump(doc, allow_unicode=True)


def _chains(data: st.DataObject) -> str:
    """Long flat operator chains over the declared properties: always valid."""
    n = data.draw(st.integers(2, 2500), label="length")
    ops = data.draw(st.sampled_from([["+", "-"], ["*"], ["||"], ["and"], ["or"],
                                     ["+", "-", "*", "/", "%"]]), label="ops")
    kind = "string" if ops == ["||"] else "boolean" if ops[0] in ("and", "or") else "int"
    seq = " ".join(f"{data.draw(st.sampled_from(ops))} a" for _ in range(n - 1))
    where = " where a" if kind == "boolean" else ""
    return f"create schema E(a {kind});\nselect a {seq} as x from E{where};\n"


# ---------------------------------------------------------------------- default run

@fuzz_settings(250)
@given(st.data())
def test_mutated_modules(data: st.DataObject) -> None:
    assert_clean("m.epl", _modules(data))


@fuzz_settings(120)
@given(st.data())
def test_mutated_statement_files(data: st.DataObject) -> None:
    assert_clean("f.yaml", _files(data))


@fuzz_settings(120)
@given(st.data())
def test_mutated_statements_in_files(data: st.DataObject) -> None:
    assert_clean("f.yaml", _epl_in_file(data))


@fuzz_settings(30)
@given(st.data())
def test_long_chains_are_valid(data: st.DataObject) -> None:
    assert run_check("c.epl", _chains(data)) == (0, "1 file(s) valid\n")


@fuzz_settings(40)
@given(st.binary(max_size=300), st.sampled_from(["b.yaml", "b.epl"]))
def test_binary_files(content: bytes, name: str) -> None:
    assert_clean(name, content)


def test_seeds_are_valid() -> None:
    """Every seed, unmutated, checks with exit 0."""
    for i, text in enumerate(MODULES):
        assert run_check("m.epl", text) == (0, "1 file(s) valid\n"), i
    for i, text in enumerate(FILES):
        assert run_check("f.yaml", text) == (0, "1 file(s) valid\n"), i


# ---------------------------------------------------------------------- long run

@pytest.mark.long
@fuzz_settings(5000)
@given(st.data())
def test_long_mutated_modules(data: st.DataObject) -> None:
    assert_clean("m.epl", _modules(data))


@pytest.mark.long
@fuzz_settings(2500)
@given(st.data())
def test_long_mutated_statement_files(data: st.DataObject) -> None:
    assert_clean("f.yaml", _files(data))


@pytest.mark.long
@fuzz_settings(2500)
@given(st.data())
def test_long_mutated_statements_in_files(data: st.DataObject) -> None:
    assert_clean("f.yaml", _epl_in_file(data))


@pytest.mark.long
@fuzz_settings(500)
@given(st.binary(max_size=2000), st.sampled_from(["b.yaml", "b.epl"]))
def test_long_binary_files(content: bytes, name: str) -> None:
    assert_clean(name, content)


# ---------------------------------------------------------------------- the fuzzing finds

FINDS = [
    ("chain.epl", "create schema E(a int);\nselect " + "+".join(["1"] * 1000) + " as x from E;\n",
     0, "1 file(s) valid\n"),
    ("bin.yaml", b"app: x\n\x80\x81", 2,
     "bin.yaml: line 2, column 1: not UTF-8 text (byte 0x80); statement files and EPL "
     "modules are UTF-8\n1 error(s)\n"),
    ("deep.yaml", "[" * 5000 + "]" * 5000, 2,
     "deep.yaml: YAML nested too deeply to read (a statement file is a mapping of a few "
     "levels: app, schemas, statements)\n1 error(s)\n"),
    ("tlb.epl", "create schema E(a int);\nselect * from E#time_length_batch(Infinity sec, 3);\n",
     2, "tlb.epl: statement 's1':\n"
        "line 2:35: 'Infinity' in time period 'Infinity second' is not a variable\n"
        "  select * from E#time_length_batch(Infinity sec, 3)\n"
        "                                    ^\n"
        "  hint: a time-period amount is a number or a variable\n1 error(s)\n"),
    ("t308.epl", "create schema E(a int);\nselect * from E#time(1e308 sec);\n", 2,
     "t308.epl:\nline 2:22: time period is out of range\n"
     "  select * from E#time(1e308 sec);\n"
     "                       ^\n"
     "  hint: the longest time period is about 292 million years\n1 error(s)\n"),
    ("t308s.epl", "create schema E(a int);\nselect * from E#time(1e308);\n", 2,
     "t308s.epl: statement 's1':\n"
     "line 2:16: window 'time': time period '1e+308' is out of range\n"
     "  select * from E#time(1e308)\n"
     "                 ^\n1 error(s)\n"),
    ("t400.epl", "create schema E(a int);\nselect * from E#time(" + "9" * 400 + " sec);\n", 2,
     "t400.epl:\nline 2:22: number '999999999999...9999' (400 digits) is out of range\n"
     f"  select * from E#time({'9' * 400} sec);\n"
     "                       ^\n"
     "  hint: the largest integer is 9223372036854775807\n1 error(s)\n"),
    ("apama.epl", "create schema values(v int);\nfrom v in values retain 3 every 1e-400 "
     "select v;\n", 2,
     "apama.epl:\nline 2:33: number '1e-400' is too small to be a double\n"
     "  from v in values retain 3 every 1e-400 select v;\n"
     "                                  ^\n"
     "  hint: the smallest positive double is about 4.9e-324\n1 error(s)\n"),
    ("apama2.epl", "create schema values(v int);\nfrom v in values retain 3 every 0.5 "
     "select v;\n", 2,
     "apama2.epl: statement 's1':\n"
     "line 2:33: window 'apama_batched': batch size '0.5' must be a positive integer\n"
     "  from v in values retain 3 every 0.5 select v\n"
     "                                  ^\n"
     "  hint: Apama batched windows: 'within D every P' takes seconds, 'retain N every M' "
     "positive whole numbers of items\n1 error(s)\n"),
]


# scalars PyYAML resolves to a value its constructors cannot build
UNREADABLE = ["9" * 4301, "-" + "7" * 5000, "+1" + "0" * 4400, "2001-02-30", "2001-13-01",
              "2001-02-03 25:61:00", "!!timestamp foo", "!!bool maybe", "!!int ''",
              "!!float ''", "!!int 0x", "!!float x1", "!!int " + "1" * 9000]


def _unreadable_in_file(data: st.DataObject) -> str:
    """A seed file with one value, or a new key's value, replaced by an unreadable scalar."""
    lines = data.draw(st.sampled_from(FILES), label="seed").split("\n")
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    bad = data.draw(st.sampled_from(UNREADABLE), label="scalar")
    head, sep, _ = lines[i].partition(": ")
    if sep and data.draw(st.booleans(), label="replace the value"):
        lines[i] = f"{head}: {bad}"
    else:
        lines.insert(i, f"{data.draw(st.sampled_from(['x', 'app', 'partitions']))}: {bad}")
    return "\n".join(lines)


@fuzz_settings(150)
@given(st.data())
def test_unreadable_scalars(data: st.DataObject) -> None:
    """A scalar the YAML constructors cannot build is a positioned error (exit 2)."""
    code, text = assert_clean("f.yaml", _unreadable_in_file(data))
    assert code == 2, text


@pytest.mark.long
@fuzz_settings(1000)
@given(st.data())
def test_long_unreadable_scalars(data: st.DataObject) -> None:
    code, text = assert_clean("f.yaml", _unreadable_in_file(data))
    assert code == 2, text


def _digits_line(prefix: str, digits: int) -> str:
    return prefix + "9" * digits


UNREADABLE_FINDS = [
    ("big.yaml", "app: x\n" + _digits_line("partitions: ", 4301) + "\n", 2,
     "big.yaml: not valid YAML:\n"
     "line 2:13: an integer of 4301 digits is too long to read (at most 4300 digits)\n"
     f"  {_digits_line('partitions: ', 4301)}\n"
     "              ^\n1 error(s)\n"),
    ("date.yaml", "app: x\nstatements:\n  - epl: 2001-02-30\n", 2,
     "date.yaml: not valid YAML:\n"
     "line 3:10: cannot read this timestamp: day is out of range for month\n"
     "    - epl: 2001-02-30\n"
     "           ^\n1 error(s)\n"),
    ("ts.yaml", "app: !!timestamp foo\n", 2,
     "ts.yaml: not valid YAML:\n"
     "line 1:6: cannot read this timestamp: 'foo' is not a valid timestamp\n"
     "  app: !!timestamp foo\n"
     "       ^\n1 error(s)\n"),
]
FINDS += UNREADABLE_FINDS


@pytest.mark.parametrize(("name", "content", "code", "expected"), FINDS,
                         ids=[f[0] for f in FINDS])
def test_fuzzing_finds(name: str, content: str | bytes, code: int, expected: str) -> None:
    """Each input that once gave a traceback now gives this exact answer."""
    assert run_check(name, content) == (code, expected)


def test_subprocess_exit_codes(tmp_path: Path) -> None:
    """The installed entry point: valid 0, invalid 2, no traceback on stderr."""
    for name, content, code, _ in FINDS[:4]:
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        proc = subprocess.run([sys.executable, "-m", "app.cli.main", "check", str(path)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert (proc.returncode, proc.stderr) == (code, ""), proc.stderr

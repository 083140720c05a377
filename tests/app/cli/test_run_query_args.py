"""``kepl run`` and ``kepl query`` take the statement file the same way: FILE first,
steps with --events; ``--file FILE`` (the older form of query) still works."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import main

APP = """\
app: w
schemas: {E: {a: int}}
statements:
  - {name: win, epl: create window W#keepall as E}
  - {name: ins, epl: insert into W select * from E}
"""
STEPS = '{"send": "E", "event": {"a": 1}}\n{"send": "E", "event": {"a": 2}}\n'


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "w.yaml").write_text(APP)
    (tmp_path / "w.jsonl").write_text(STEPS)
    return str(tmp_path / "w.yaml"), str(tmp_path / "w.jsonl")


@pytest.mark.parametrize("shape", [
    ["query", "{f}", "select a from W where a > 1", "--events", "{e}"],
    ["query", "select a from W where a > 1", "--file", "{f}", "--events", "{e}"],
    ["query", "--events", "{e}", "{f}", "select a from W where a > 1"],
])
def test_query_shapes(files: tuple[str, str], shape: list[str],
                      capsys: pytest.CaptureFixture[str]) -> None:
    f, e = files
    assert main([a.format(f=f, e=e) for a in shape]) == 0
    assert capsys.readouterr().out == '{"a": 2}\n'


def test_query_iterate_with_file_first(files: tuple[str, str],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    f, e = files
    assert main(["query", f, "--iterate", "win", "--events", e]) == 0
    assert capsys.readouterr().out == '{"a": 1}\n{"a": 2}\n'


def test_run_file_positional_or_option(files: tuple[str, str],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    f, e = files
    assert main(["run", f, "--events", e]) == 0
    first = capsys.readouterr().out
    assert main(["run", "--file", f, "--events", e]) == 0
    assert capsys.readouterr().out == first
    assert first.splitlines()[0] == (
        '{"statement": "ins", "stream": "insert", "context_partition": "0", "time": 0, '
        '"id": "ins/0/1", "row": {"a": 1}}')


@pytest.mark.parametrize(("argv", "message"), [
    (["query"], "kepl: error: query: the statement file FILE is required\n"),
    (["run"], "kepl: error: run: the statement file FILE is required\n"),
    (["query", "{f}", "select 1", "--file", "{f}"],
     "kepl: error: query: give the statement file once (FILE or --file)\n"),
    (["run", "{f}", "--file", "other.yaml"],
     "kepl: error: run: give the statement file once (FILE or --file)\n"),
])
def test_statement_file_given_once(files: tuple[str, str], argv: list[str], message: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main([a.format(f=files[0]) for a in argv])
    assert stop.value.code == 2
    assert capsys.readouterr().err.endswith(message)

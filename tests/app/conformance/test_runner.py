"""The scenario runner reports differences and bad files as FAIL lines, never crashes."""

from __future__ import annotations

from pathlib import Path

from app.cli.main import main
from app.conformance.runner import run_file, run_scenario_embedded

GOOD = """
name: tiny
schemas:
  W: {a: string, n: double}
statements:
  - name: s0
    epl: select count(*) as cnt, sum(n) as total from W#length(2)
steps:
  - {time: 0}
  - send: W
    event: {a: x, n: 1}
  - send: W
    event: {a: y, n: 2}
  - send: W
    event: {a: z, n: 4}
  - expect:
      s0:
        new: [{cnt: 1, total: 1.0}, {cnt: 2, total: 3.0}, {cnt: 2, total: 6.0}]
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_pass(tmp_path: Path) -> None:
    out = run_file(write(tmp_path, "a.yaml", GOOD), run_scenario_embedded)
    assert (out.name, out.passed, out.detail) == ("tiny", True, "")


def test_first_difference_is_reported(tmp_path: Path) -> None:
    bad = GOOD.replace("total: 6.0", "total: 7.0")
    out = run_file(write(tmp_path, "a.yaml", bad), run_scenario_embedded)
    assert not out.passed
    assert out.detail == ("step 5 (t=0) s0.new[2]: expected {'cnt': 2, 'total': 7.0}, "
                          "got {'cnt': 2, 'total': 6.0}")


def test_unsupported_construct_is_named(tmp_path: Path) -> None:
    text = GOOD.replace("select count(*) as cnt, sum(n) as total from W#length(2)",
                        "select * from W#keepall as a, pattern [every x=W] as b")
    out = run_file(write(tmp_path, "a.yaml", text), run_scenario_embedded)
    assert (out.passed, out.detail) == (False,
                                        "not supported yet: joins with a pattern stream")


def test_malformed_file_is_a_fail_with_reason(tmp_path: Path) -> None:
    out = run_file(write(tmp_path, "a.yaml", "name: x\nsteps: []\n"), run_scenario_embedded)
    assert (out.passed, out.detail) == (False, "bad scenario file: missing 'statements'")
    out = run_file(write(tmp_path, "b.yaml", "name: [\n"), run_scenario_embedded)
    assert not out.passed and out.detail.startswith("bad scenario file: not valid YAML")


def test_backwards_time_is_a_file_error(tmp_path: Path) -> None:
    text = GOOD.replace("  - {time: 0}\n", "  - {time: 5}\n  - {time: 1}\n")
    out = run_file(write(tmp_path, "a.yaml", text), run_scenario_embedded)
    assert (out.passed, out.detail) == (
        False, "bad scenario file: step 2: time 1 moves backwards or is not an int")


def test_cli_prints_pass_fail_and_totals(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    write(tmp_path, "a.yaml", GOOD)
    write(tmp_path, "b.yaml", GOOD.replace("name: tiny", "name: tiny2").replace(
        "total: 6.0", "total: 7.0"))
    code = main(["scenario", "run", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0] == "PASS tiny"
    assert out[1].startswith("FAIL tiny2: step 5 (t=0) s0.new[2]")
    assert out[-1] == "1 passed, 1 failed (2 files)"

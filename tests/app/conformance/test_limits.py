"""NaN compares equal to NaN; a scenario over its time limit is a FAIL and the run goes on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.cli.main import main
from app.conformance.limits import LimitedRunner
from app.conformance.runner import run_file, run_scenario_embedded, values_equal

NAN_OUT = """
name: nan_out
schemas:
  W: {v: double}
statements:
  - name: s0
    epl: select stddev, average from W#length(2)#uni(v)
steps:
  - send: W
    event: {v: 4.0}
  - expect:
      s0: {new: [{stddev: .nan, average: 4.0}]}
"""

TINY = """
name: {name}
schemas:
  W: {{v: double}}
statements:
  - name: s0
    epl: select count(*) as cnt from W
steps:
  - send: W
    event: {{v: 1.0}}
  - expect:
      s0: {{new: [{{cnt: 1}}]}}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_nan_equals_nan_only() -> None:
    nan = float("nan")
    assert values_equal(nan, nan)
    assert not values_equal(nan, 1.0)
    assert not values_equal(1.0, nan)
    assert not values_equal(nan, None)
    assert values_equal({"a": [nan]}, {"a": [nan]})


def test_nan_output_passes(tmp_path: Path) -> None:
    out = run_file(write(tmp_path, "n.yaml", NAN_OUT), run_scenario_embedded)
    assert (out.passed, out.detail) == (True, "")
    wrong = NAN_OUT.replace("stddev: .nan", "stddev: 0.0")
    out = run_file(write(tmp_path, "w.yaml", wrong), run_scenario_embedded)
    assert out.detail == ("step 2 (t=0) s0.new[0]: expected {'stddev': 0.0, 'average': 4.0}, "
                          "got {'stddev': nan, 'average': 4.0}")


def hang_on_slow(doc: dict) -> str | None:
    """A runner that never finishes the scenario named 'slow'."""
    if doc["name"] == "slow":
        while True:
            time.sleep(0.05)
    return run_scenario_embedded(doc)


@pytest.mark.parametrize("mode", ["worker", "alarm"])
def test_hung_scenario_is_a_time_limit_fail_and_the_run_goes_on(
        tmp_path: Path, mode: str) -> None:
    files = [write(tmp_path, f"{n}.yaml", TINY.format(name=n)) for n in ("a", "slow", "c")]
    with LimitedRunner(hang_on_slow, 0.5) as limited:
        limited.mode = mode
        t0 = time.monotonic()
        outs = [limited.run(f) for f in files]
        assert time.monotonic() - t0 < 5
    assert [(o.name, o.passed) for o in outs] == [("a", True), ("slow", False), ("c", True)]
    assert outs[1].detail == "time limit: not finished within 0.5 s"


def test_no_limit_runs_in_process(tmp_path: Path) -> None:
    limited = LimitedRunner(run_scenario_embedded, 0)
    assert limited.mode == "inline"
    out = limited.run(write(tmp_path, "a.yaml", TINY.format(name="a")))
    assert (out.name, out.passed) == ("a", True)


def test_cli_time_limit_flag_and_exit_codes(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    write(tmp_path, "a.yaml", TINY.format(name="a"))
    assert main(["scenario", "run", "--time-limit", "30", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == ["PASS a", "1 passed, 0 failed (1 file)"]
    write(tmp_path, "b.yaml", TINY.format(name="b").replace("cnt: 1", "cnt: 2"))
    assert main(["scenario", "run", "--time-limit", "0", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "PASS a"
    assert out[1].startswith("FAIL b: step 2 (t=0) s0.new[0]")
    assert out[-1] == "1 passed, 1 failed (2 files)"

"""``kepl scenario record`` writes a golden scenario that ``kepl scenario run`` passes, and
fails once the statements give other rows; ``--format junit`` reports it as JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from app.cli.main import main
from app.conformance.record import record
from app.conformance.runner import ScenarioError, run_file, run_scenario_embedded
from app.statements import load_statement_file

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"

APP = """
app: shop
schemas:
  Order: {id: string, amount: double}
statements:
  - name: shape
    epl: create schema Refund (id string)
  - name: big
    epl: select id from Order(amount > 100)
  - name: totals
    epl: select irstream sum(amount) as total from Order#length(2)
  - name: per_second
    epl: select count(*) as n from Order#time_batch(1 sec)
"""

STEPS = """\
# a comment
{"time": 0}
{"send": "Order", "event": {"id": "a", "amount": 50}}
{"time": 500}

{"send": "Order", "event": {"id": "b", "amount": 150}}
{"time": 1000}
{"send": "Order", "event": {"id": "c", "amount": 10}}
{"time": 2500}
"""


DIFF = "step 10 (t=1000) totals.new[0]: expected {'total': 160.0}, got {'total': 210.0}"
"""The first difference once ``totals`` keeps three orders instead of two."""


def files(tmp_path: Path, app: str = APP, steps: str = STEPS) -> tuple[Path, Path]:
    (tmp_path / "shop.yaml").write_text(app)
    (tmp_path / "steps.jsonl").write_text(steps)
    return tmp_path / "shop.yaml", tmp_path / "steps.jsonl"


def test_recorded_rows_are_the_expectations(tmp_path: Path) -> None:
    app, steps = files(tmp_path)
    rec = record(load_statement_file(app), str(steps), tmp_path / "s.yaml")
    doc = rec.doc
    assert doc["name"] == "shop_steps"
    assert [s["name"] for s in doc["statements"]] == ["shape", "big", "totals", "per_second"]
    assert rec.checked == ["big", "totals", "per_second"]  # create schema emits nothing
    expects = [s["expect"] for s in doc["steps"] if "expect" in s]
    assert expects == [
        {"big": "none", "totals": {"new": [{"total": 50.0}], "old": [{"total": None}]},
         "per_second": "none"},
        {"big": {"new": [{"id": "b"}], "old": []},
         "totals": {"new": [{"total": 200.0}], "old": [{"total": 50.0}]},
         "per_second": "none"},
        # the batch of [0, 1000) fires at 1000, before the event sent then
        {"big": "none", "totals": "none", "per_second": {"new": [{"n": 2}], "old": []}},
        {"big": "none", "totals": {"new": [{"total": 160.0}], "old": [{"total": 200.0}]},
         "per_second": "none"},
        {"big": "none", "totals": "none", "per_second": {"new": [{"n": 1}], "old": []}},
    ]
    assert rec.events == 3 and rec.expects == 5


def test_a_recorded_scenario_round_trips_through_scenario_run(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture
                                                              ) -> None:
    app, steps = files(tmp_path)
    out = tmp_path / "golden" / "shop.yaml"
    out.parent.mkdir()
    assert main(["scenario", "record", str(app), "--events", str(steps), "-o", str(out),
                 "--name", "shop_golden"]) == 0
    assert capsys.readouterr().err == (
        f"kepl scenario record: {out}: 3 events, 5 expectation(s) over 3 statement(s)\n")
    assert main(["scenario", "run", str(out)]) == 0
    assert capsys.readouterr().out == "PASS shop_golden\n1 passed, 0 failed (1 file)\n"
    # the same statements with another window give other rows: the golden file says so
    changed = APP.replace("#length(2)", "#length(3)")
    (tmp_path / "shop.yaml").write_text(changed)
    doc = yaml.safe_load(out.read_text())
    doc["statements"] = [{"name": s.name, "epl": s.epl}
                         for s in load_statement_file(app).statements]
    out.write_text(yaml.safe_dump(doc))
    assert main(["scenario", "run", str(out)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == "FAIL shop_golden: " + DIFF


def test_expect_lines_choose_where_and_what_is_checked(tmp_path: Path) -> None:
    steps = STEPS.replace('{"time": 1000}\n', '{"expect": ["big"]}\n{"time": 1000}\n')
    app, path = files(tmp_path, steps=steps)
    rec = record(load_statement_file(app), str(path), tmp_path / "s.yaml")
    expects = [s["expect"] for s in rec.doc["steps"] if "expect" in s]
    assert expects == [
        {"big": {"new": [{"id": "b"}], "old": []}},
        # the closing expectation: rows after the last expect line, every statement
        {"big": "none", "totals": {"new": [{"total": 160.0}], "old": [{"total": 200.0}]},
         "per_second": {"new": [{"n": 2}, {"n": 1}], "old": []}},
    ]
    assert run_scenario_embedded(rec.doc) is None


@pytest.mark.parametrize("line, why", [
    ('{"time": 5}\n{"time": 1}', "steps.jsonl:2: time 1 moves backwards or is not an int"),
    ('{"send": "Nope", "event": {}}', "steps.jsonl:1: unknown event type 'Nope'"),
    ('{"expect": ["nope"]}', "steps.jsonl:1: 'expect' takes null or a list of statement "
                             "names of"),
    ('{"wait": 1}', "steps.jsonl:1: a step is one of {\"time\": ms}, {\"send\": Type, "
                    "\"event\": {...}}, {\"expect\": ...} (unknown key 'wait')"),
    ('{"send": "Order", "evnt": {}}', "(unknown key 'evnt')"),
    ('{"time": 5, "send": "Order", "event": {}}', "steps.jsonl:1: a step is one of"),
    ('{"event": {}}', "steps.jsonl:1: a step is one of"),
    ("[1]", "steps.jsonl:1: a step is a JSON object"),
])
def test_a_bad_steps_file_names_its_line(tmp_path: Path, line: str, why: str) -> None:
    app, path = files(tmp_path, steps=line + "\n")
    with pytest.raises(ScenarioError) as e:
        record(load_statement_file(app), str(path), tmp_path / "s.yaml")
    assert why in str(e.value)


def test_the_example_golden_file_is_what_its_steps_give_now(tmp_path: Path) -> None:
    """examples/bank-scenario.yaml is recorded from examples/bank-test-steps.jsonl."""
    out = tmp_path / "bank-scenario.yaml"
    assert main(["scenario", "record", str(EXAMPLES / "bank.yaml"), "--events",
                 str(EXAMPLES / "bank-test-steps.jsonl"), "-o", str(out),
                 "--name", "bank_withdrawals"]) == 0
    assert out.read_text() == (EXAMPLES / "bank-scenario.yaml").read_text()
    assert run_file(EXAMPLES / "bank-scenario.yaml", run_scenario_embedded).passed


def junit_of(text: str) -> ET.Element:
    """Parse a JUnit report and check its structure (the elements and attributes of the
    JUnit schema CI systems read; counts that add up)."""
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    assert set(root.attrib) == {"name", "tests", "failures", "errors", "time"}
    suites = list(root)
    assert suites and all(s.tag == "testsuite" for s in suites)
    for suite in suites:
        assert {"name", "tests", "failures", "errors", "skipped", "time", "timestamp",
                "hostname"} == set(suite.attrib)
        cases = list(suite)
        assert all(c.tag == "testcase" for c in cases)
        assert int(suite.get("tests")) == len(cases)
        for c in cases:
            assert {"name", "classname", "time"} <= set(c.attrib) <= {"name", "classname",
                                                                      "time", "file"}
            float(c.get("time"))
            for child in c:
                assert child.tag in ("failure", "error")
                assert set(child.attrib) == {"message", "type"} and child.text
        for kind in ("failure", "error"):
            assert int(suite.get(kind + "s")) == sum(len(c.findall(kind)) for c in cases)
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites)
    return root


def test_junit_reports_a_broken_expectation_as_a_failure(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture
                                                         ) -> None:
    good = EXAMPLES / "bank-scenario.yaml"
    broken = tmp_path / "broken.yaml"
    broken.write_text(good.read_text().replace("total: 1400.0", "total: 1399.0")
                      .replace("name: bank_withdrawals", "name: bank_broken", 1))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nstatements: 3\nsteps: []\n")
    report = tmp_path / "report.xml"
    code = main(["scenario", "run", "--format", "junit", "--junit-xml", str(report),
                 str(good), str(broken), str(bad)])
    assert code == 1
    captured = capsys.readouterr()
    assert captured.err.endswith("kepl scenario run: 1 passed, 2 failed (3 files)\n")
    assert captured.out == report.read_text()
    root = junit_of(captured.out)
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in suite}
    assert list(cases["bank_withdrawals"]) == []
    assert cases["bank_withdrawals"].get("classname").endswith("examples.bank-scenario")
    [failure] = list(cases["bank_broken"])
    assert failure.tag == "failure" and failure.get("type") == "difference"
    assert failure.get("message") == (
        "step 12 (t=3000) last_five.new[1]: expected {'cnt': 5, 'total': 1399.0}, "
        "got {'cnt': 5, 'total': 1400.0}")
    [error] = list(cases["bad"])
    assert (error.tag, error.get("type")) == ("error", "bad_scenario_file")
    assert "'statements' must be a list" in error.get("message")


def test_text_report_with_a_junit_file_beside_it(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    report = tmp_path / "r.xml"
    assert main(["scenario", "run", "--junit-xml", str(report),
                 str(EXAMPLES / "bank-scenario.yaml")]) == 0
    assert capsys.readouterr().out == "PASS bank_withdrawals\n1 passed, 0 failed (1 file)\n"
    suite = junit_of(report.read_text()).find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0")


@pytest.mark.kafka
def test_the_recorded_golden_file_passes_on_kafka(kafka_bootstrap: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    """The rows recorded embedded are the rows workers give (lanes for the filter, engine
    partitions for the windows and the keyed context)."""
    app, steps = files(tmp_path, app=APP + """\
  - name: by_id
    epl: create context ById partition by id from Order
  - name: per_id
    epl: context ById select id, count(*) as n from Order
""")
    out = tmp_path / "golden.yaml"
    assert main(["scenario", "record", str(app), "--events", str(steps), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["scenario", "run", "--kafka", "--bootstrap", kafka_bootstrap,
                 "--junit-xml", str(tmp_path / "r.xml"), str(out)]) == 0
    assert capsys.readouterr().out == "PASS shop_steps\n1 passed, 0 failed (1 file)\n"
    suite = junit_of((tmp_path / "r.xml").read_text()).find("testsuite")
    assert suite.get("name") == "kepl scenarios (kafka)" and suite.get("failures") == "0"

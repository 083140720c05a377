"""Named windows, tables and on-demand queries through the embedded engine and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from app.epl.planner import plan_query, plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine

SCHEMAS = {"W": {"account": "string", "amount": "double"}, "Q": {"account": "string"}}


def deploy(*epls: str) -> tuple[Catalog, Engine, list]:
    cat = Catalog.from_schemas(SCHEMAS)
    eng = Engine()
    out: list = []
    eng.listeners.append(lambda s, n, o, p: out.append((s, n, o)))
    for i, epl in enumerate(epls):
        eng.deploy(plan_statement(cat, epl, f"s{i}"))
    return cat, eng, out


def test_consumer_deployed_later_starts_from_the_window_rows() -> None:
    """Esper ref. 2: a new consumer 'determines the count and sum by iterating' the window."""
    cat, eng, out = deploy("create window WW#keepall as W", "insert into WW select * from W")
    eng.send("W", {"account": "A", "amount": 5.0})
    eng.send("W", {"account": "B", "amount": 7.0})
    eng.deploy(plan_statement(cat, "select count(*) as n, sum(amount) as total from WW", "late"))
    eng.send("W", {"account": "C", "amount": 1.0})
    assert [n for s, n, _ in out if s == "late"] == [[{"n": 3, "total": 13.0}]]


def test_on_demand_query_over_window_and_table() -> None:
    cat, eng, _ = deploy(
        "create window WW#keepall as W", "insert into WW select * from W",
        "create table T (account string primary key, total sum(double))",
        "into table T select sum(amount) as total from W group by account")
    for a, x in (("A", 1.0), ("B", 2.0), ("A", 3.0)):
        eng.send("W", {"account": a, "amount": x})
    def q(epl: str) -> Any:
        return plan_query(cat, epl)

    assert eng.query(q("select account, sum(amount) as s from WW group by account "
                       "order by s desc limit 1")) == [{"account": "A", "s": 4.0}]
    assert eng.query(q("select * from T where total > 2")) == [{"account": "A", "total": 4.0}]
    assert eng.query(q("select count(*) as n from WW where amount > 10")) == [{"n": 0}]


def test_on_demand_grouped_query_lists_groups_in_hash_order() -> None:
    """Esper's fire-and-forget query runs the rows through the result set as one update:
    a fully aggregated grouped one lists its groups in its hash map's order."""
    cat, eng, _ = deploy("create window WW#keepall as W", "insert into WW select * from W")
    for a in ("c", "b", "zz", "a", "b"):
        eng.send("W", {"account": a, "amount": 1.0})
    rows = eng.query(plan_query(cat, "select account, count(*) as n from WW group by account"))
    assert rows == [{"account": "zz", "n": 1}, {"account": "a", "n": 1},
                    {"account": "b", "n": 2}, {"account": "c", "n": 1}]


def test_query_cli_prints_rows_as_json_lines(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "app.yaml"
    f.write_text("app: q\nschemas:\n  W: {account: string, amount: double}\nstatements:\n"
                 "  - {name: w, epl: 'create window WW#time(10) as W'}\n"
                 "  - {name: m, epl: 'on W merge WW insert select *'}\n")
    ev = tmp_path / "steps.jsonl"
    ev.write_text("\n".join(json.dumps(s) for s in (
        {"time": 1000}, {"send": "W", "event": {"account": "A", "amount": 5}},
        {"time": 5000}, {"send": "W", "event": {"account": "B", "amount": 7}},
        {"time": 11000})) + "\n")
    assert main(["query", "select account from WW", "--file", str(f), "--events", str(ev)]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [
        {"account": "B"}]
    assert main(["query", "select x from WW", "--file", str(f)]) == 1
    assert "unknown property 'x'" in capsys.readouterr().err

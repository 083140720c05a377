"""Context partition selection: iteration and on-demand queries per partition (Esper ref. 4.9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import main
from app.epl.planner import plan_query, plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.selector import ContextSelector, SelectorError, selector_predicate


def test_selector_forms() -> None:
    props = {"name": "C", "id": 2, "key1": "IBM", "key2": "NYSE"}
    assert ContextSelector.parse("2").matches(props)
    assert ContextSelector.parse("id=2").matches(props)
    assert not ContextSelector.parse("id=3").matches(props)
    assert ContextSelector.parse("key=IBM,NYSE").matches(props)
    assert not ContextSelector.parse("key=IBM").matches(props)  # a key has all its values
    assert ContextSelector.parse("key2=NYSE").matches(props)
    nested = {"id": (0, 1), "Outer": {"id": 0, "startTime": 5}, "Inner": {"key1": "A"}}
    assert ContextSelector.parse("Inner.key=A").matches(nested)
    assert ContextSelector.parse("Outer.startTime=5").matches(nested)
    assert not ContextSelector.parse("Outer.key=A").matches(nested)
    assert ContextSelector.parse("label=high").matches({"id": 1, "label": "high"})
    with pytest.raises(SelectorError, match="expected PROP=VALUE"):
        ContextSelector.parse("no good=1")
    assert selector_predicate([]) is None
    union = selector_predicate(["id=1", "id=3"])
    assert union is not None
    assert [i for i in range(5) if union({"id": i})] == [1, 3]


def _keyed_engine() -> tuple[Catalog, Engine]:
    cat = Catalog.from_schemas({"Tick": {"symbol": "string", "price": "double"}})
    eng = Engine()
    for name, epl in (
            ("ctx", "create context BySymbol partition by symbol from Tick"),
            ("w", "context BySymbol create window Last2#length(2) as Tick"),
            ("ins", "context BySymbol insert into Last2 select * from Tick"),
            ("avg", "context BySymbol select avg(price) as p from Tick#length(2)")):
        eng.deploy(plan_statement(cat, epl, name))
    for s, p in (("IBM", 1.0), ("MSFT", 10.0), ("IBM", 3.0), ("IBM", 5.0), ("MSFT", 20.0)):
        eng.send("Tick", {"symbol": s, "price": p})
    return cat, eng


def test_iterate_and_query_one_keyed_partition() -> None:
    cat, eng = _keyed_engine()
    assert eng.iterate("avg") == [{"p": 4.0}, {"p": 15.0}]
    assert eng.iterate("avg", selector_predicate(["key=MSFT"])) == [{"p": 15.0}]
    assert eng.iterate("avg", selector_predicate(["id=0"])) == [{"p": 4.0}]
    q = plan_query(cat, "select symbol, price from Last2")
    assert eng.query(q, selector_predicate(["key=IBM"])) == [
        {"symbol": "IBM", "price": 3.0}, {"symbol": "IBM", "price": 5.0}]
    assert eng.query(q, selector_predicate(["key=none"])) == []


def test_query_cli_context_partition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "app.yaml"
    f.write_text(
        "app: q\nschemas:\n  Tick: {symbol: string, price: double}\nstatements:\n"
        "  - {name: ctx, epl: 'create context BySymbol partition by symbol from Tick'}\n"
        "  - {name: avg, epl: 'context BySymbol select count(*) as n from Tick#keepall'}\n")
    ev = tmp_path / "steps.jsonl"
    ev.write_text("\n".join(json.dumps({"send": "Tick", "event": {"symbol": s, "price": 1}})
                            for s in ("A", "B", "A")) + "\n")
    assert main(["query", "--iterate", "avg", "--context-partition", "key=A",
                 "--file", str(f), "--events", str(ev)]) == 0
    assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [{"n": 2}]
    assert main(["query", "--iterate", "avg", "--context-partition", "1",
                 "--context-partition", "0", "--file", str(f), "--events", str(ev)]) == 0
    assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [{"n": 2}, {"n": 1}]
    assert main(["query", "--iterate", "nope", "--file", str(f)]) == 1
    assert "no statement named 'nope'" in capsys.readouterr().err
    assert main(["query", "--file", str(f)]) == 2
    assert main(["query", "--iterate", "avg", "--context-partition", "a b=1",
                 "--file", str(f)]) == 2
    assert "expected PROP=VALUE" in capsys.readouterr().err

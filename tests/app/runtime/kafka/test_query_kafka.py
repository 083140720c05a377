"""``kepl query --kafka``: a running app's state per context partition, from its changelog."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from app.cli.main import main
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.runner import KafkaApp

pytestmark = pytest.mark.kafka


def test_query_running_app_by_context_partition(
        kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"q-{uuid.uuid4().hex[:8]}"
    doc = {
        "app": name,
        "schemas": {"Tick": {"symbol": "string", "price": "double"}},
        "topics": {"Tick": f"{name}.tick"},
        "statements": [
            {"name": "ctx", "epl": "create context BySymbol partition by symbol from Tick"},
            {"name": "win", "epl": "context BySymbol create window Last2#length(2) as Tick"},
            {"name": "fill", "epl": "context BySymbol insert into Last2 select * from Tick"},
            {"name": "avg", "epl": "context BySymbol select avg(price) as p from Tick#length(2)"},
        ],
    }
    f = tmp_path / "app.yaml"
    f.write_text(yaml.safe_dump(doc))
    kapp = KafkaApp(AppConfig.from_dict(doc), kafka_bootstrap, start=True)
    try:
        for s, p in (("IBM", 1.0), ("MSFT", 10.0), ("IBM", 3.0), ("IBM", 5.0), ("MSFT", 20.0)):
            kapp.send("Tick", {"symbol": s, "price": p})
        kapp.settle()
        base = ["query", "--kafka", "--file", str(f), "--bootstrap", kafka_bootstrap]
        capsys.readouterr()
        assert main([*base, "--iterate", "avg", "--context-partition", "key=MSFT"]) == 0
        assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [{"p": 15.0}]
        assert main([*base, "--iterate", "avg"]) == 0
        assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [
            {"p": 4.0}, {"p": 15.0}]
        assert main([*base, "select symbol, price from Last2",
                     "--context-partition", "key=IBM"]) == 0
        assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [
            {"symbol": "IBM", "price": 3.0}, {"symbol": "IBM", "price": 5.0}]
    finally:
        kapp.close(graceful=False)
        kapp.delete_topics()

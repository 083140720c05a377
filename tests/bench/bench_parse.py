"""Parse and plan a file of 500 statements (issue target: under one second).

Run: .venv/bin/python tests/bench/bench_parse.py
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from app.epl.parser import parse_statement
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog

GOLDEN = Path(__file__).resolve().parents[1] / "app" / "cli" / "golden"


def statements() -> list[tuple[dict, str]]:
    """(schemas, epl) of the golden statement files: a realistic mix of every clause."""
    out = []
    for f in sorted(GOLDEN.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        for s in doc["statements"]:
            out.append((doc["schemas"], s["epl"]))
    return out


def main() -> None:
    pool = statements()
    batch = [pool[i % len(pool)] for i in range(500)]
    parse_statement(batch[0][1])  # build the cached LALR parser once
    t0 = time.perf_counter()
    for _, epl in batch:
        parse_statement(epl)
    t_parse = time.perf_counter() - t0
    t0 = time.perf_counter()
    catalog = None
    last_schemas = None
    for i, (schemas, epl) in enumerate(batch):
        if schemas is not last_schemas:
            catalog = Catalog.from_schemas(schemas)
            last_schemas = schemas
        plan_statement(catalog, epl, f"s{i}")
    t_all = time.perf_counter() - t0
    print(f"parse 500 statements:          {t_parse:.3f} s")
    print(f"parse + validate + plan 500:   {t_all:.3f} s")


if __name__ == "__main__":
    main()

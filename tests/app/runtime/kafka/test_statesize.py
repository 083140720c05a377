"""State bytes per statement (``kepl_state_bytes``): one scan, then each batch's writes,
always equal to a fresh scan of the committed database."""

from __future__ import annotations

from pathlib import Path

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.statesize import StateSizes, statement_of
from app.runtime.kafka.store import PartitionStore

SCHEMAS = {"T": {"k": "string", "p": "double"}}


def engine(store: PartitionStore) -> Engine:
    e = Engine(store=store)
    catalog = Catalog.from_schemas(SCHEMAS)
    e.deploy(plan_statement(catalog, "select k, sum(p) as s from T#length(50) group by k",
                            "per_k"))
    e.deploy(plan_statement(catalog, "select count(*) as n from T#length(3)", "odd\x00name"))
    e.deploy(plan_statement(catalog, "select * from T(p > 1)", "stateless"))
    return e


def test_statement_of_reads_the_engine_key_prefix(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "db")
    e = engine(store)
    e.send("T", {"k": "a", "p": 2.0})
    store.commit(0)
    owners = {statement_of(k) for k, _ in store.state_items()}
    assert {"per_k", "odd\x00name"} <= owners
    assert "stateless" not in owners
    assert statement_of(b"\x03kepl\x00\x00whatever") is None
    store.close()


def test_batches_keep_the_count_equal_to_a_scan(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "db")
    e = engine(store)
    sizes = StateSizes.scan(store.state_items())
    assert sizes.bytes == {}
    for batch in range(12):
        for i in range(37):
            e.send("T", {"k": "abcdefg"[(batch * 37 + i) % 7], "p": float(i)})
        writes = store.batch_writes()
        sizes.apply(store.base, writes)
        store.commit(batch, writes)
        fresh = StateSizes.scan(store.state_items()).bytes
        assert sizes.bytes == fresh
    assert sizes.bytes["per_k"] > sizes.bytes["odd\x00name"] > 0
    store.close()

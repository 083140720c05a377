"""State bytes per statement (``kepl_state_bytes``): a scan in steps and each batch's
writes, always equal to a full count of the committed database."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def full_count(store: PartitionStore) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, v in store.state_items():
        stmt = statement_of(k)
        if stmt is not None:
            out[stmt] = out.get(stmt, 0) + len(k) + len(v)
    return out


def send_batch(e: Engine, batch: int) -> None:
    for i in range(37):
        e.send("T", {"k": "abcdefghijklm"[(batch * 37 + i) % 13], "p": float(i)})


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


@pytest.mark.parametrize("step", [1, 7, 10_000])
def test_a_scan_in_steps_between_batches_counts_each_key_once(tmp_path: Path,
                                                              step: int) -> None:
    """State exists before the count starts (an assignment restored it); the scan reads
    ``step`` keys per checkpoint while batches keep writing and deleting keys."""
    store = PartitionStore(tmp_path / "db")
    e = engine(store)
    for batch in range(4):
        send_batch(e, batch)
        store.commit(batch)
    keys = sum(1 for k, _ in store.state_items() if statement_of(k) is not None)
    sizes = StateSizes()
    batch = 4
    while not sizes.complete or batch < 40:
        # batches add keys ahead of the scan: it reads that many more
        assert sizes.complete or batch < 4 + keys // step + 2
        send_batch(e, batch)
        writes = store.batch_writes()
        sizes.apply(store.committed, writes)
        store.commit(batch, writes)
        sizes.step(store.flushed(), step)
        if sizes.complete:
            assert sizes.bytes == full_count(store)
        batch += 1
    assert sizes.bytes["per_k"] > 0
    assert sizes.bytes["per_k"] > sizes.bytes["odd\x00name"] > 0
    store.close()

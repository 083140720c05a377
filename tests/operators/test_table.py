"""Tables (operators/table.py): rows by primary key, one store key each, restorable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from operators.aggregates import make_aggregator
from operators.base import PartitionCtx
from operators.resultset import GROUPED, AggregateDef, SelectColumn
from operators.state import MemoryStore, RocksStore
from operators.table import IntoTableSpec, TableColumn, TableSpec, table_key

SPEC = TableSpec("Speeds", (
    TableColumn("carId", "string", key=True),
    TableColumn("note", "string"),
    TableColumn("avgSpeed", None, aggregator=make_aggregator("avg"), agg_text="avg(double)"),
))


@pytest.fixture(params=["memory", "rocks"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    s = RocksStore(tmp_path / "db") if request.param == "rocks" else MemoryStore()
    yield s
    if isinstance(s, RocksStore):
        s.close()


def test_insert_update_delete_one_key_per_row(store: Any) -> None:
    ns = store.namespace("t", "Speeds", "0")
    t = SPEC.build(ns)
    row, replaced = t.insert_row({"carId": "A", "note": "x"})
    assert row == {"carId": "A", "note": "x", "avgSpeed": None} and replaced is None
    t.insert_row({"carId": "B"})
    assert [k for k, _ in ns.items()] == sorted([table_key(["A"]), table_key(["B"])])
    assert t.update_row({"carId": "A"}, {"note": "y"}) == {"carId": "A", "note": "y",
                                                          "avgSpeed": None}
    assert t.delete_row({"carId": "B"}) is True
    assert SPEC.build(ns).rows() == [{"carId": "A", "note": "y", "avgSpeed": None}]


def test_rows_in_hash_map_order_kept_after_restore(store: Any) -> None:
    """Esper iterates a table's hash map: by the bucket of the key's hash code ('A' 1, 'Z'
    and 'J' 10, 'M' 13 of 16), in insertion order within a bucket."""
    ns = store.namespace("t", "Speeds", "0")
    t = SPEC.build(ns)
    for car in ("Z", "A", "M", "J"):
        t.insert_row({"carId": car})
    assert [r["carId"] for r in t.rows()] == ["A", "Z", "J", "M"]
    assert [r["carId"] for r in SPEC.build(ns).rows()] == ["A", "Z", "J", "M"]


def test_into_table_result_set_aggregates_into_the_rows(store: Any) -> None:
    """Esper ref. 4.7: the aggregation column is maintained per primary key by 'into table'."""
    table = SPEC.build(store.namespace("t", "Speeds", "0"))
    avg = AggregateDef("avg(speed)", make_aggregator("avg"), lambda r, c: r["speed"])
    rs_spec = IntoTableSpec(GROUPED, (SelectColumn("carId", lambda r, c: r["carId"]),
                                      SelectColumn("avgSpeed", lambda r, c: c.aggs[0])),
                            (avg,), (lambda r, c: r["carId"],), table="Speeds",
                            table_columns=("avgSpeed",))
    ctx = PartitionCtx(tables={"Speeds": table})
    rs = rs_spec.build(store.namespace("s", "into"), ctx)
    assert rs.process([{"carId": "A", "speed": 100.0}], []) == (
        [{"carId": "A", "avgSpeed": 100.0}], [{"carId": "A", "avgSpeed": None}])
    table.update_row({"carId": "A"}, {"note": "kept"})  # another statement writes the row
    rs.process([{"carId": "A", "speed": 50.0}], [])
    assert table.rows() == [{"carId": "A", "note": "kept", "avgSpeed": 75.0}]
    restored = SPEC.build(store.namespace("t", "Speeds", "0"))
    assert restored.rows() == [{"carId": "A", "note": "kept", "avgSpeed": 75.0}]

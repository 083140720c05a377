"""Keyed reads of a table (operators/table.py ``lookup``/``value``, ``GlobalTables``):
what table-access expressions ``T[k].col`` use (Esper ref. 4.7 Context and Tables)."""

from __future__ import annotations

from operators.aggregates import make_aggregator
from operators.state import MemoryNamespace
from operators.table import GlobalTables, Table, TableColumn, TableSpec, coerce_key

SPEC = TableSpec("Acc", (
    TableColumn("region", "string", key=True),
    TableColumn("id", "long", key=True),
    TableColumn("note", "string"),
    TableColumn("total", None, aggregator=make_aggregator("sum"), agg_text="sum(double)"),
))


def _table() -> Table:
    t = SPEC.build(MemoryNamespace())
    t.insert_row({"region": "EU", "id": 7, "note": "n"})
    return t


def test_lookup_by_key_values_and_column_values() -> None:
    t = _table()
    rec = t.lookup(["EU", 7])
    assert rec is not None
    assert t.value(rec, "region") == "EU" and t.value(rec, "id") == 7
    assert t.value(rec, "note") == "n"
    assert t.value(rec, "total") is None  # an empty sum is null
    assert t.value(rec, "nope") is None
    assert t.lookup(["EU", 8]) is None and t.lookup(["US", 7]) is None


def test_lookup_coerces_numeric_keys() -> None:
    """An int or integral double key expression reads a long key (Esper ref. 4.7)."""
    t = _table()
    assert t.lookup(["EU", 7.0]) is t.lookup(["EU", 7])
    dspec = TableSpec("D", (TableColumn("k", "double", key=True), TableColumn("v", "int")))
    d = dspec.build(MemoryNamespace())
    d.insert_row({"k": 2, "v": 1})  # stored as the event carried it
    d.insert_row({"k": 2.5, "v": 2})
    assert d.value(d.lookup([2]) or {}, "v") == 1
    assert d.value(d.lookup([2.0]) or {}, "v") == 1
    assert d.value(d.lookup([2.5]) or {}, "v") == 2
    assert d.lookup([3]) is None


def test_coerce_key() -> None:
    assert coerce_key("long", 5.0) == 5 and isinstance(coerce_key("long", 5.0), int)
    assert coerce_key("long", 5.5) == 5.5
    assert isinstance(coerce_key("double", 5), float)
    assert coerce_key("double", True) is True
    assert coerce_key("string", 5) == 5 and coerce_key("int", None) is None


def test_keyless_table_has_one_row_under_the_empty_key() -> None:
    spec = TableSpec("S", (TableColumn("v", "int"),))
    t = spec.build(MemoryNamespace())
    assert t.lookup(()) is None
    t.insert_row({"v": 3})
    assert t.value(t.lookup(()) or {}, "v") == 3


def test_global_tables_lists_only_tables_without_context() -> None:
    specs = {"G": TableSpec("G", (TableColumn("v", "int"),)),
             "C": TableSpec("C", (TableColumn("v", "int"),), context="Ctx")}
    made: list[tuple[str, object]] = []

    def instance(name: str, pid: object) -> Table:
        made.append((name, pid))
        return specs[name].build(MemoryNamespace())

    g = GlobalTables(specs, instance)
    assert list(g) == ["G"] and len(g) == 1
    assert g.get("C") is None and g.get("X") is None
    assert isinstance(g["G"], Table) and made == [("G", 0)]

"""Validation of output clauses, named windows, tables and variables (Esper ref. 2;
4.5-4.8)."""

from __future__ import annotations

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog, NotSupported
from tests.app.epl.validation import catalog_with, rejects

SCHEMAS = {
    "TrafficEvent": {"carId": "string", "speed": "double"},
    "TruncateEvent": {"id": "string"},
}


def catalog(*setup: str) -> Catalog:
    return catalog_with(SCHEMAS, *setup)


NINE = "create context NineToFive start (0, 9, *, *, *) end (0, 17, *, *, *)"


def test_on_trigger_must_declare_the_window_context() -> None:
    """Esper ref. 4.6: on-merge/select/update/delete must declare the named window's context."""
    c = catalog(NINE, "context NineToFive create window W#time(30 min) as TrafficEvent")
    e = rejects(c, "on TruncateEvent delete from W")
    assert "declared with context 'NineToFive'" in e.message
    assert e.hint == "write 'context NineToFive on ...' (Esper ref. 4.6 Context and Named Window)"


def test_into_table_must_declare_the_table_context() -> None:
    """Esper ref. 4.7 Context and Tables: aggregate into a table only with the table's context."""
    c = catalog(NINE, "context NineToFive create table T (carId string primary key, "
                      "avgSpeed avg(double))")
    e = rejects(c, "into table T select avg(speed) as avgSpeed from TrafficEvent group by carId")
    assert "must declare the same context" in e.message


def test_into_table_columns_and_keys_are_checked() -> None:
    c = catalog("create table T (carId string primary key, avgSpeed avg(double))")
    assert "has no aggregation column 'nope'" in rejects(
        c, "into table T select avg(speed) as nope from TrafficEvent group by carId").message
    assert "primary key column" in rejects(
        c, "into table T select avg(speed) as avgSpeed from TrafficEvent").message
    assert "aggregates sum(speed)" in rejects(
        c, "into table T select sum(speed) as avgSpeed from TrafficEvent group by carId").message


def test_table_aggregation_column_cannot_be_assigned() -> None:
    c = catalog("create table T (carId string primary key, n count(*), note string)")
    e = rejects(c, "on TruncateEvent update T set n = 1")
    assert "aggregation column" in e.message
    plan_statement(c, "on TruncateEvent update T set note = 'x'", "ok")


def test_table_read_in_a_continuous_statement_is_not_supported_yet() -> None:
    c = catalog("create table T (carId string primary key, n count(*))")
    with pytest.raises(NotSupported):
        plan_statement(c, "select * from T", "s")


def test_output_condition_reads_variables_and_builtins_only() -> None:
    """Esper ref. 5.7.1.1: 'output when' may not read event properties."""
    c = catalog("create variable boolean go = false")
    e = rejects(c, "select * from TrafficEvent output when speed > 1")
    assert "is not a variable or a built-in property" in e.message
    plan_statement(c, "select * from TrafficEvent output when go or count_insert > 2", "ok")


def test_variables_types_constants_and_then_set() -> None:
    c = catalog("create constant variable int k = 3", "create variable double d = 1")
    assert "unknown variable type" in rejects(c, "create variable nosuch x").message
    assert "already declared" in rejects(c, "create variable int d").message
    assert "cannot be assigned" in rejects(c, "on TruncateEvent set k = 4").message
    assert "cannot be assigned" in rejects(
        c, "select * from TrafficEvent output when terminated then set k = 1").message
    assert "cannot hold" in rejects(c, "create variable int i = 'x'").message
    assert "needs an initial value" in rejects(c, "create constant variable int j").message


def test_merge_update_needs_a_matched_row() -> None:
    c = catalog("create window W#keepall as TrafficEvent")
    e = rejects(c, "on TruncateEvent merge W when not matched then update set speed = 1")
    assert "needs a matched row" in e.message


def test_context_variable_needs_the_same_context() -> None:
    """Esper ref. 4.8: context variables only in statements associated to the same context."""
    c = catalog("create context PerCar partition by carId from TrafficEvent",
                "context PerCar create variable int th = 100")
    e = rejects(c, "select * from TrafficEvent(speed > th)")
    assert "context variable of 'PerCar'" in e.message
    plan_statement(c, "context PerCar select * from TrafficEvent(speed > th)", "ok")


@pytest.mark.parametrize("epl,kind", [
    ("select carId from TrafficEvent group by carId", "grouped"),
    ("select carId, (select id from TruncateEvent#lastevent) as t from TrafficEvent "
     "group by carId", "grouped"),
    ("select carId, speed from TrafficEvent group by carId", "grouped_rows"),
    ("select * from TrafficEvent group by carId", "grouped_rows"),
])
def test_group_by_without_aggregates_is_row_per_group_when_all_grouped(epl: str,
                                                                       kind: str) -> None:
    """Esper's result-set kinds: without aggregation functions too, a group by whose
    selected event properties are all grouped posts one row per group."""
    plan = plan_statement(catalog(), epl, "s")
    assert plan.pipeline is not None
    assert plan.pipeline.resultset.kind == kind

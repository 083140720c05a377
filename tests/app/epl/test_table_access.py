"""Table access in expressions (Esper ref. 4.7 tables; Esper ``T[keys].column``): syntax,
printing, validation with positions and hints, compiled closures and what the plan lists."""

from __future__ import annotations

from typing import Any

import pytest

from app.epl import ast as A
from app.epl.errors import EplSyntaxError, EplValidationError
from app.epl.expr import Scope, TableEnv, compile_expr
from app.epl.parser import parse_expression, parse_statement
from app.epl.planner import plan_query, plan_statement
from app.epl.printer import to_epl
from app.runtime.catalog import Catalog
from operators.aggregates import make_aggregator
from operators.base import PartitionCtx
from operators.state import MemoryNamespace
from operators.table import TableColumn, TableSpec

SCHEMAS = {
    "Deposit": {"custId": "string", "amount": "double"},
    "Withdrawal": {"custId": "string", "amount": "double", "tier": "int", "Limits": "string"},
    "Tick": {"n": "int"},
}
SETUP = (
    "create table Balances (custId string primary key, total sum(double), note string)",
    "create table Tiers (level long primary key, rate double)",
    "create table Pair (a string primary key, b int primary key, v double)",
    "create table Totals (grand sum(double))",
    "create context Shift start (0, 9, *, *, *) end (0, 17, *, *, *)",
    "context Shift create table PerShift (custId string primary key, total sum(double))",
)


def catalog() -> Catalog:
    c = Catalog.from_schemas(SCHEMAS)
    for i, epl in enumerate(SETUP):
        plan_statement(c, epl, f"setup{i}")
    return c


def rejects(epl: str) -> EplValidationError:
    with pytest.raises(EplValidationError) as info:
        plan_statement(catalog(), epl, "s")
    return info.value


# -- syntax -------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("Limits[custId].max", A.TableAccess("Limits", (A.Name(("custId",)),), "max")),
    ("Limits[custId]", A.TableAccess("Limits", (A.Name(("custId",)),), None)),
    ("T[a.b, 1 + 2].c", A.TableAccess("T", (
        A.Name(("a", "b")), A.Binary("+", A.Literal(1, "int"), A.Literal(2, "int"))), "c")),
    ("T['x'].total > 5", A.Binary(">", A.TableAccess("T", (A.Literal("x", "string"),),
                                                      "total"), A.Literal(5, "int"))),
    ("Totals.grand", A.Name(("Totals", "grand"))),
])
def test_parse_and_round_trip(text: str, expected: A.Node) -> None:
    node = parse_expression(text)
    assert node == expected
    assert parse_expression(to_epl(node)) == node


def test_printed_form_and_positions() -> None:
    node = parse_expression("x + Limits[ custId , 2 ] . max")
    assert to_epl(node) == "x + Limits[custId, 2].max"
    access = node.right  # type: ignore[attr-defined]
    assert (access.pos.line, access.pos.column) == (1, 5)


def test_statement_round_trip_in_every_clause() -> None:
    epl = ("select custId, Balances[custId] as row from Withdrawal(amount > Limits[custId].max)"
           " where Tiers[tier].rate is not null group by custId having sum(amount) > "
           "Balances[custId].total output when Totals.grand > 10")
    stmt = parse_statement(epl)
    assert parse_statement(to_epl(stmt)) == stmt


@pytest.mark.parametrize("text", ["T[]", "T[1].", "T[1]]", "T[1].c.d"])
def test_syntax_errors(text: str) -> None:
    with pytest.raises(EplSyntaxError):
        parse_expression(text)


# -- validation -----------------------------------------------------------------------


def test_unknown_table_has_position_and_hint() -> None:
    e = rejects("select Balancez[custId].total from Withdrawal")
    assert e.message == "unknown table 'Balancez'"
    assert (e.line, e.column) == (1, 8)
    assert e.hint == "did you mean 'Balances'?"


def test_unknown_column_has_hint() -> None:
    e = rejects("select custId from Withdrawal(amount > Balances[custId].totl)")
    assert e.message == "table 'Balances' has no column 'totl'"
    assert (e.line, e.column) == (1, 40)
    assert e.hint == "did you mean 'total'?"


def test_key_count_must_match() -> None:
    e = rejects("select Pair['a'].v from Withdrawal")
    assert e.message.startswith("table 'Pair' has 2 primary key column(s) (a, b); 1 key")
    assert e.column == 8


def test_key_types_are_checked_for_literals_and_properties() -> None:
    e = rejects("select Tiers['gold'].rate from Withdrawal")
    assert e.message == ("key 'level' of table 'Tiers' is long; the key expression "
                         "''gold'' is a string")
    assert e.column == 14
    e = rejects("select Balances[amount].total from Withdrawal")
    assert "is string" in e.message and e.column == 17
    # an int reads a long key
    plan_statement(catalog(), "select Tiers[tier].rate from Withdrawal", "ok")


def test_keyed_table_needs_keys_and_keyless_table_takes_none() -> None:
    e = rejects("select Balances.total from Withdrawal")
    assert e.message == "table 'Balances' has primary key(s) custId"
    assert e.hint == "write Balances[custId].total"
    e = rejects("select Totals[1].grand from Withdrawal")
    assert e.message == "table 'Totals' has no primary key"
    e = rejects("select Totals.grnd from Withdrawal")
    assert e.message == "table 'Totals' has no column 'grnd'" and e.hint == "did you mean 'grand'?"


def test_context_table_is_read_only_from_its_context() -> None:
    e = rejects("select PerShift[custId].total from Withdrawal")
    assert "declared with context 'Shift'" in e.message and e.column == 8
    plan = plan_statement(
        catalog(), "context Shift select PerShift[custId].total as t from Withdrawal", "s")
    assert plan.tables == ("PerShift",)


def test_on_demand_query_refuses_other_tables() -> None:
    c = catalog()
    with pytest.raises(EplValidationError) as info:
        plan_query(c, "select custId, Tiers[1].rate from Balances")
    assert info.value.message == "an on-demand query cannot read other tables"


def test_not_readable_in_a_keyed_or_hash_context_declaration() -> None:
    e = rejects("create context K partition by custId from Withdrawal(amount > Totals.grand)")
    assert e.message == "a keyed or hash context declaration cannot read a table"
    assert e.column == 63
    e = rejects("create context H coalesce by consistent_hash_crc32(custId) from "
                "Withdrawal(amount > Balances['a'].total) granularity 4")
    assert e.message == "a keyed or hash context declaration cannot read a table"


def test_readable_in_category_and_temporal_context_conditions() -> None:
    c = catalog()
    plan_statement(c, "create context Cat group by amount > Totals.grand as big, group by "
                   "amount <= Totals.grand as small from Withdrawal", "cat")
    plan_statement(c, "create context T start Deposit(amount > Balances[custId].total) "
                   "end after 1 sec", "t")
    with pytest.raises(EplValidationError) as info:
        plan_statement(c, "create context T2 start Deposit(amount > PerShift[custId].total) "
               "end after 1 sec", "t2")
    assert "declared with context 'Shift'" in info.value.message


# -- resolution and plan ----------------------------------------------------------------


def test_plan_lists_read_tables_after_the_into_table() -> None:
    c = catalog()
    plan = plan_statement(c, "into table Balances select sum(amount) as total from Deposit "
                  "group by custId having sum(amount) > Totals.grand", "s")
    assert plan.tables == ("Balances", "Totals")
    plan = plan_statement(c, "on Tick merge Balances as b where b.custId = 'x' when matched and "
                  "Tiers[n].rate > 1 then delete", "m")
    assert plan.tables == ("Balances", "Tiers")
    plan = plan_statement(
        c, "select * from Tick(n > Totals.grand) output when Totals.grand > 3", "o")
    assert plan.tables == ("Totals",)


def test_aliases_and_properties_win_over_table_names() -> None:
    c = catalog()
    plan = plan_statement(c, "select Totals.amount as a from Withdrawal as Totals", "s")
    assert plan.tables == ()
    plan = plan_statement(c, "select Limits from Withdrawal", "p")  # a property, not a table
    assert plan.tables == ()


def test_table_access_keeps_aggregated_grouped_kind() -> None:
    plan = plan_statement(catalog(), "select custId, sum(amount) as s, Balances[custId].total as t "
                          "from Deposit group by custId", "s")
    assert plan.pipeline is not None
    assert plan.pipeline.resultset.kind == "grouped"


# -- compiled closures --------------------------------------------------------------------


SPEC = TableSpec("Acc", (
    TableColumn("id", "long", key=True),
    TableColumn("note", "string"),
    TableColumn("total", None, aggregator=make_aggregator("sum"), agg_text="sum(double)"),
))
KEYLESS = TableSpec("One", (TableColumn("v", "int"),))


def _compiled(text: str, aliases: frozenset[str] = frozenset()) -> tuple[Any, TableEnv]:
    env = TableEnv({"Acc": SPEC, "One": KEYLESS}, props={"k": "int", "x": "double"})
    return compile_expr(parse_expression(text), Scope("event", aliases, tables=env)), env


def _ctx() -> PartitionCtx:
    acc = SPEC.build(MemoryNamespace())
    acc.insert_row({"id": 1, "note": "first"})
    one = KEYLESS.build(MemoryNamespace())
    one.insert_row({"v": 42})
    return PartitionCtx(tables={"Acc": acc, "One": one})


def test_compiled_keyed_read_coerces_and_nulls() -> None:
    fn, env = _compiled("Acc[k].note")
    ctx = _ctx()
    assert env.used == {"Acc"}
    assert fn({"k": 1}, ctx) == "first"
    assert fn({"k": 1.0}, ctx) == "first"
    assert fn({"k": 2}, ctx) is None
    assert fn({"k": None}, ctx) is None
    assert fn({"k": 1}, PartitionCtx()) is None  # no instance handed to the statement


def test_compiled_aggregation_column_and_whole_row() -> None:
    ctx = _ctx()
    rec = ctx.tables["Acc"].get(ctx.tables["Acc"].key_of_row({"id": 1}))
    agg = SPEC.column("total").aggregator  # type: ignore[union-attr]
    state = agg.initial()
    for v in (2.0, 3.5):
        state = agg.enter(state, v)
    ctx.tables["Acc"].put(ctx.tables["Acc"].key_of_row({"id": 1}), {**rec, "a": {"total": state}})
    total, _ = _compiled("Acc[k].total")
    assert total({"k": 1}, ctx) == 5.5
    row, _ = _compiled("Acc[k]")
    assert row({"k": 1}, ctx) == {"id": 1, "note": "first", "total": agg.result(state)}
    key, _ = _compiled("Acc[k].id")
    assert key({"k": 1}, ctx) == 1


def test_compiled_keyless_read_and_arithmetic() -> None:
    fn, env = _compiled("x * One.v")
    assert env.used == {"One"}
    assert fn({"x": 2.0}, _ctx()) == 84.0
    alias, env = _compiled("One.v", aliases=frozenset({"One"}))
    assert env.used == set() and alias({"v": 5}, _ctx()) == 5

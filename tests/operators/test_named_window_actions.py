"""On-actions (operators/named_window.py): what a trigger does to a window's rows."""

from __future__ import annotations

from typing import Any

from operators.base import PartitionCtx, Row
from operators.named_window import MergeActionSpec, MergeClauseSpec, OnActionSpec
from operators.output import Assignment


def get(path: str) -> Any:
    head, _, rest = path.partition(".")

    def fn(row: Row, ctx: PartitionCtx) -> Any:
        v = row.get(head)
        return v.get(rest) if rest and isinstance(v, dict) else v
    return fn


ROWS = [{"account": "A", "balance": 10.0}, {"account": "B", "balance": 5.0}]
SAME = lambda r, c: r["w"]["account"] == r["t"]["account"]  # noqa: E731


def merge(*clauses: MergeClauseSpec) -> OnActionSpec:
    return OnActionSpec("merge", "T", trigger_alias="t", window="W", window_alias="w",
                        where=SAME, clauses=clauses, target_props=("account", "balance"))


def test_first_applicable_matched_clause_only() -> None:
    """Esper ref. 2, on-merge: per matching row, only the first 'when matched' clause that
    applies."""
    upd = MergeActionSpec("update", assignments=(Assignment(
        "balance", lambda r, c: r["w"]["balance"] + r["t"]["amount"]),))
    dele = MergeActionSpec("delete")
    spec = merge(MergeClauseSpec(True, lambda r, c: r["t"]["amount"] < -100, (dele,)),
                 MergeClauseSpec(True, None, (upd,)),
                 MergeClauseSpec(True, None, (dele,)))
    res = spec.run({"account": "A", "amount": 1.0}, ROWS, PartitionCtx())
    assert res.updated == [(ROWS[0], {"account": "A", "balance": 11.0})]
    assert res.deleted == [] and res.new == [{"account": "A", "balance": 11.0}]
    assert res.old == [ROWS[0]]


def test_not_matched_inserts_with_the_window_columns() -> None:
    ins = MergeActionSpec("insert", columns=(("account", get("t.account")),))
    spec = merge(MergeClauseSpec(False, None, (ins,)))
    res = spec.run({"account": "Z", "amount": 1.0}, ROWS, PartitionCtx())
    assert res.inserted == [{"account": "Z", "balance": None}]


def test_action_where_and_routed_insert() -> None:
    """Each action of a clause runs when its own where holds; 'insert into S' routes."""
    ins_skip = MergeActionSpec("insert", where=lambda r, c: False, columns=(("a", get("t.a")),))
    routed = MergeActionSpec("insert", columns=(("a", get("t.account")),), into="Audit")
    spec = merge(MergeClauseSpec(False, None, (ins_skip, routed)))
    res = spec.run({"account": "Q"}, ROWS, PartitionCtx())
    assert res.inserted == [] and res.routed == [("Audit", {"a": "Q"})]


def test_bare_insert_runs_for_every_trigger() -> None:
    """Esper ref. 2: 'on Withdrawal merge WithdrawalWindow insert select *' inserts each event."""
    spec = OnActionSpec("merge", "T", window="W", clauses=(
        MergeClauseSpec(False, None, (MergeActionSpec("insert", wildcard=True),), always=True),),
        target_props=("account", "balance"))
    res = spec.run({"account": "A", "balance": 1.0}, ROWS, PartitionCtx())
    assert res.inserted == [{"account": "A", "balance": 1.0}] and res.new == res.inserted


def test_update_assignments_apply_in_order_to_the_copy() -> None:
    spec = OnActionSpec("update", "T", window="W", window_alias="w", assignments=(
        Assignment("balance", lambda r, c: r["balance"] * 2),
        Assignment("account", lambda r, c: f"{r['account']}:{r['balance']}:"
                                           f"{r['initial']['balance']}")))
    res = spec.run({}, ROWS[:1], PartitionCtx())
    assert res.updated == [(ROWS[0], {"account": "A:20.0:10.0", "balance": 20.0})]

"""Subqueries: parsing, printing, planning errors and evaluation (Esper reference
"Subqueries")."""

from __future__ import annotations

import pytest

from app.epl import ast as A
from app.epl.errors import EplError, EplValidationError
from app.epl.parser import parse_statement
from app.epl.planner import plan_statement
from app.epl.printer import to_epl
from app.runtime.catalog import Catalog, NotSupported
from app.runtime.engine import Engine

SCHEMAS = {"A": {"k": "string", "v": "int"}, "B": {"k": "string", "v": "int"},
           "C": {"k": "string", "w": "int"}}


def run(epl: str, steps: list[tuple[str, dict]], extra: tuple[str, ...] = ()) -> list:
    """Rows the last statement outputs, one list per event sent."""
    cat = Catalog.from_schemas(SCHEMAS)
    engine = Engine()
    for i, e in enumerate(extra):
        engine.deploy(plan_statement(cat, e, f"x{i}"))
    engine.deploy(plan_statement(cat, epl, "s"))
    got: list = []
    engine.listeners.append(lambda s, new, old, p: got.extend(new) if s == "s" else None)
    out = []
    for t, e in steps:
        got.clear()
        engine.send(t, e)
        out.append(list(got))
    return out


def test_parse_forms() -> None:
    s = parse_statement("select (select max(v) from B#length(2)) as mx from A as a "
                        "where exists (select * from B#keepall as b where b.k = a.k) "
                        "and a.v not in (select v from B#keepall) "
                        "and a.v >= some (select v from B#keepall)")
    item = s.select_items[0].expr
    assert isinstance(item, A.Subquery)
    assert item.query.stream.type_name == "B"
    assert item.query.stream.views[0].name == "length"
    where = s.where
    assert isinstance(where.right, A.Quantified)
    assert where.right.quantifier == "any" and where.right.op == ">="
    assert isinstance(where.left.right, A.InSubquery) and where.left.right.negated
    assert isinstance(where.left.left, A.Exists)


@pytest.mark.parametrize("text", [
    "select (select b.v from B#unique(k) as b where b.k = a.k) as bv from A as a",
    "select * from A(v > (select max(v) from B#keepall))",
    "select (select k, sum(v) as t from B#keepall group by k having sum(v) > 1) from A",
    "select * from A where v != all (select distinct v from B#length(3))",
])
def test_print_roundtrip(text: str) -> None:
    node = parse_statement(text)
    assert parse_statement(to_epl(node)) == node


def test_scalar_and_correlated() -> None:
    rows = run("select (select max(v) from B#length(2)) as mx, "
               "(select b.v from B#unique(k) as b where b.k = a.k) as bv from A as a",
               [("A", {"k": "X", "v": 1}), ("B", {"k": "X", "v": 7}),
                ("B", {"k": "Y", "v": 3}), ("B", {"k": "Z", "v": 2}),
                ("A", {"k": "X", "v": 2}), ("A", {"k": "Q", "v": 2})])
    assert rows[0] == [{"mx": None, "bv": None}]
    assert rows[4] == [{"mx": 3, "bv": 7}]
    assert rows[5] == [{"mx": 3, "bv": None}]


def test_several_rows_give_null() -> None:
    rows = run("select (select v from B#keepall) as v from A",
               [("B", {"k": "X", "v": 1}), ("A", {"k": "X", "v": 0}),
                ("B", {"k": "X", "v": 2}), ("A", {"k": "X", "v": 0})])
    assert rows[1] == [{"v": 1}]
    assert rows[3] == [{"v": None}]


def test_in_and_quantifiers_three_valued() -> None:
    epl = ("select v in (select v from B#keepall) as i, v not in (select v from B#keepall)"
           " as ni, v > any (select v from B#keepall) as gany, "
           "v > all (select v from B#keepall) as gall from A")
    rows = run(epl, [("A", {"k": "X", "v": 1}), ("B", {"k": "X", "v": 1}),
                     ("B", {"k": "X", "v": None}), ("A", {"k": "X", "v": 1}),
                     ("A", {"k": "X", "v": 5}), ("A", {"k": "X", "v": None})])
    # an empty subquery: in false, not in true, any false, all true
    assert rows[0] == [{"i": False, "ni": True, "gany": False, "gall": True}]
    # rows 1 and null: a relational any is false once a row value is not null (Esper)
    assert rows[3] == [{"i": True, "ni": False, "gany": False, "gall": False}]
    assert rows[4] == [{"i": None, "ni": None, "gany": True, "gall": None}]
    assert rows[5] == [{"i": None, "ni": None, "gany": None, "gall": None}]


def test_same_stream_enters_window_first() -> None:
    rows = run("select (select count(*) from A#keepall) as n from A",
               [("A", {"k": "X", "v": 1}), ("A", {"k": "X", "v": 2})])
    assert rows == [[{"n": 1}], [{"n": 2}]]


def test_no_window_aggregates_every_event() -> None:
    rows = run("select (select sum(v) from B) as s from A",
               [("B", {"k": "X", "v": 1}), ("B", {"k": "X", "v": 2}),
                ("A", {"k": "X", "v": 0})])
    assert rows[2] == [{"s": 3}]


def test_correlated_lookup_uses_hash_index() -> None:
    plan = plan_statement(Catalog.from_schemas(SCHEMAS),
                          "select (select b.v from B#keepall as b where b.k = a.k and "
                          "b.v > a.v) as x from A as a", "s")
    (sq,) = plan.pipeline.subqueries
    assert sq.correlated and sq.key_texts == ("b.k",)
    assert "hash index on b.k" in sq.describe()
    full = plan_statement(Catalog.from_schemas(SCHEMAS),
                          "select (select b.v from B#keepall as b where b.v > a.v) as x "
                          "from A as a", "s").pipeline.subqueries[0]
    assert "full scan" in full.describe()


def _error(epl: str, extra: tuple[str, ...] = ()) -> EplError:
    cat = Catalog.from_schemas(SCHEMAS)
    for i, e in enumerate(extra):
        plan_statement(cat, e, f"x{i}")
    with pytest.raises(EplError) as info:
        plan_statement(cat, epl, "s")
    return info.value


def test_errors_have_positions() -> None:
    e = _error("select (select v from B) as x from A")
    assert isinstance(e, EplValidationError)
    assert "needs a data window" in e.message and (e.line, e.column) == (1, 23)
    e = _error("select (select w from B#keepall) as x from A")
    assert "'w'" in e.message and (e.line, e.column) == (1, 16)
    e = _error("select * from A where v in (select k, v from B#keepall)")
    assert "one column" in e.message and e.column == 28
    e = _error("select (select k, max(v) from B#keepall) as x from A")
    assert "neither aggregated nor grouped" in e.message and e.column == 16
    e = _error("select (select * from Bx#keepall) as x from A")
    assert "unknown event type 'Bx'" in e.message and e.hint
    e = _error("select (select * from W#length(2)) as x from A",
               ("create window W#keepall as B",))
    assert "named window takes no data window" in e.message


def test_unsupported_places_are_refused() -> None:
    cat = Catalog.from_schemas(SCHEMAS)
    with pytest.raises(EplValidationError, match="inside another subquery") as info:
        plan_statement(cat, "select (select (select v from A#lastevent) from B#lastevent) "
                            "as x from A", "s")
    assert info.value.column == 16
    plan_statement(cat, "create context C partition by k from A", "c")
    with pytest.raises(NotSupported, match="does not partition"):
        plan_statement(cat, "context C select (select v from B#lastevent) as x from A", "s")


def test_pattern_tags_are_not_streams_of_a_subquery() -> None:
    e = _error("select (select count(*) from B#keepall as b where b.k = x.k) as n "
               "from pattern [every x=A]")
    assert "pattern tag 'x'" in e.message and e.column == 57


def test_on_set_reads_a_subquery() -> None:
    cat = Catalog.from_schemas(SCHEMAS)
    engine = Engine()
    for i, e in enumerate(("create variable int top = 0",
                           "on A set top = (select max(v) from B#length(2))")):
        engine.deploy(plan_statement(cat, e, f"x{i}"))
    for v in (4, 9, 1):
        engine.send("B", {"k": "X", "v": v})
    engine.send("A", {"k": "X", "v": 0})
    assert engine.variables.get("top") == 9
    for v in (2, 3):
        engine.send("B", {"k": "X", "v": v})
    engine.send("A", {"k": "X", "v": 0})
    assert engine.variables.get("top") == 3


def test_unqualified_outer_name_in_a_join_subquery_is_refused() -> None:
    e = _error("select (select count(*) from B#keepall as b where b.v > w) as n "
               "from A#lastevent as a, C#lastevent as c", ())
    assert "ambiguous inside a subquery" in e.message and e.hint and "<stream>.w" in e.hint


def test_conditions_on_the_subquery_event_alone_filter_its_index() -> None:
    cat = Catalog.from_schemas(SCHEMAS)
    plan_statement(cat, "create variable int lim = 1", "v")
    sq = plan_statement(cat, "select (select count(*) from B#keepall as b where b.k = a.k "
                             "and b.v > 100 and b.v > lim) as n from A as a",
                        "s").pipeline.subqueries[0]
    assert sq.index_filter is not None and sq.where is not None  # lim may change
    rows = run("select (select b.v from B#length(3) as b where b.k = a.k and b.v > 5) as x "
               "from A as a",
               [("B", {"k": "X", "v": 9}), ("B", {"k": "X", "v": 1}),
                ("A", {"k": "X", "v": 0}), ("B", {"k": "Y", "v": 7}),
                ("B", {"k": "Y", "v": 8}), ("A", {"k": "X", "v": 0})])
    assert rows[2] == [{"x": 9}]
    assert rows[5] == [{"x": None}]  # X's row 9 left the length(3) window


def test_row_entering_and_leaving_a_full_sorted_window_is_not_held() -> None:
    """Esper ref. 14.3.19: an event sorting below a full sorted window enters and leaves
    at once; the subquery never sees it."""
    out = run("select (select window(w) from C#sort(2, w desc)) as ws from A",
              [("C", {"k": "x", "w": 3}), ("C", {"k": "x", "w": 4}),
               ("C", {"k": "x", "w": -1}), ("A", {"k": "a", "v": 1})])
    assert sorted(out[-1][0]["ws"]) == [3, 4]

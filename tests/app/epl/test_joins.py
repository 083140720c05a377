"""Planning joins: name resolution over the streams, Esper's join rules, the join plan
(hash index on equalities between streams, sorted index on relational operators,
nested loop otherwise), and rows end to end."""

from __future__ import annotations

from typing import Any

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog, NotSupported
from app.runtime.engine import Engine
from tests.app.epl.validation import catalog_with, rejects

SCHEMAS = {"A": {"k": "string", "v": "int"}, "B": {"k": "string", "w": "int"},
           "C": {"k": "string", "n": "int"}}
AB = "from A#length(3) as a, B#keepall as b"


def catalog(*setup: str) -> Catalog:
    return catalog_with(SCHEMAS, *setup)


def explain(epl: str) -> list[str]:
    return plan_statement(catalog(), epl, "s").explain()


def run(epl: str, events: list[tuple[str, dict[str, Any]]]) -> list[tuple[list, list]]:
    eng = Engine()
    out: list[tuple[list, list]] = []
    eng.listeners.append(lambda s, n, o, p: out.append((n, o)))
    eng.deploy(plan_statement(catalog(), epl, "s"))
    for t, e in events:
        eng.send(t, e)
    return out


def test_equality_between_streams_plans_hash_indexes() -> None:
    lines = explain(f"select a.v, b.w {AB} where a.k = b.k and a.v < b.w")
    assert lines[1:4] == [
        "  -> join A length(3) as a, B keepall() as b",
        "  ->   event of a: lookup b by hash index on (b.k = a.k)",
        "  ->   event of b: lookup a by hash index on (a.k = b.k)"]
    assert "  -> where" in lines


def test_other_conditions_plan_a_nested_loop() -> None:
    for cond in ("a.k = b.k or a.v = b.w", "a.k = 'x'", "a.v < b.w + 0.5 * a.v",
                 "a.k < b.w", "a.v < b.w and a.k > b.k"):
        lines = explain(f"select a.v, b.w {AB} where {cond}")
        assert lines[2:4] == ["  ->   event of a: lookup b by full scan (nested loop)",
                              "  ->   event of b: lookup a by full scan (nested loop)"], cond


def test_relational_operators_plan_sorted_indexes() -> None:
    lines = explain(f"select a.v, b.w {AB} where a.v < b.w and b.w <= a.v * 2")
    assert lines[2:4] == [
        "  ->   event of a: lookup b by sorted index on (b.w > a.v and b.w <= a.v * 2)",
        "  ->   event of b: lookup a by sorted index on (a.v < b.w)"]


def test_sorted_index_gives_rows_in_key_order() -> None:
    """Esper's sorted event table: ascending key, arrival order among equal keys; null
    keys and null lookups find nothing."""
    events = [("A", {"k": k, "v": v}) for k, v in
              (("x", 5), ("y", 3), ("z", None), ("u", 3))]
    out = run("select a.k as k, b.k as bk from A#keepall as a, B#keepall as b "
              "where a.v >= b.w", events + [("B", {"k": "n", "w": None}),
                                             ("B", {"k": "p", "w": 3}),
                                             ("B", {"k": "q", "w": 1}),
                                             ("A", {"k": "t", "v": 4})])
    assert [r for n, _ in out for r in n] == [
        {"k": "y", "bk": "p"}, {"k": "u", "bk": "p"}, {"k": "x", "bk": "p"},
        {"k": "y", "bk": "q"}, {"k": "u", "bk": "q"}, {"k": "x", "bk": "q"},
        {"k": "t", "bk": "q"}, {"k": "t", "bk": "p"}]


def test_three_streams_chain_their_lookups() -> None:
    lines = explain("select * from A#keepall as a, B#keepall as b, C#keepall as c "
                    "where a.k = b.k and b.w = c.n")
    assert lines[2:5] == [
        "  ->   event of a: lookup b by hash index on (b.k = a.k), then c by hash index on "
        "(c.n = b.w)",
        "  ->   event of b: lookup a by hash index on (a.k = b.k), then c by hash index on "
        "(c.n = b.w)",
        "  ->   event of c: lookup b by hash index on (b.w = c.n), then a by hash index on "
        "(a.k = b.k)"]


def test_unqualified_property_of_one_stream_resolves() -> None:
    out = run(f"select v, w {AB} where a.k = b.k",
              [("A", {"k": "x", "v": 1}), ("B", {"k": "x", "w": 10})])
    assert out == [([{"v": 1, "w": 10}], [])]


def test_ambiguous_property_is_an_error() -> None:
    e = rejects(catalog(), f"select k {AB}")
    assert e.message == "property 'k' is ambiguous: streams a, b all have it"
    assert e.hint == "qualify it, as in a.k"


def test_unknown_properties_are_errors() -> None:
    assert rejects(catalog(), f"select z {AB}").message == \
        "'z' is not a property of any stream of the join"
    e = rejects(catalog(), f"select a.w {AB}")
    assert "w" in e.message


def test_each_stream_needs_a_data_window_unless_unidirectional() -> None:
    e = rejects(catalog(), "select * from A as a, B#keepall as b")
    assert e.message == "stream 'a' of the join needs a data window"
    e = rejects(catalog(), "select * from A#length(1) as a unidirectional, B#keepall as b")
    assert e.message == "a unidirectional stream takes no data window"
    e = rejects(catalog(), "select * from A as a unidirectional, B as b unidirectional")
    assert "needs a data window" in e.message or "only one" in e.message


def test_stream_names_must_differ() -> None:
    e = rejects(catalog(), "select * from A#keepall as x, B#keepall as x")
    assert e.message == "stream name 'x' is used by two streams of the join"


def test_stream_wildcard_expands_to_its_properties() -> None:
    out = run(f"select b.* {AB} where a.k = b.k",
              [("B", {"k": "x", "w": 10}), ("A", {"k": "x", "v": 1})])
    assert out == [([{"k": "x", "w": 10}], [])]


def test_keyed_context_must_partition_every_joined_type() -> None:
    c = catalog("create context ByK partition by k from A")
    with pytest.raises(NotSupported, match="does not partition"):
        plan_statement(c, f"context ByK select * {AB} where a.k = b.k", "s")


def test_keyed_context_partitions_the_join() -> None:
    eng = Engine()
    out: list[tuple[Any, list]] = []
    eng.listeners.append(lambda s, n, o, p: out.append((p, n)))
    c = catalog()
    for i, epl in enumerate(["create context ByK partition by k from A, k from B",
                             f"context ByK select a.v as v, b.w as w {AB}"]):
        eng.deploy(plan_statement(c, epl, f"s{i}"))
    for t, e in [("A", {"k": "x", "v": 1}), ("B", {"k": "y", "w": 20}),
                 ("B", {"k": "x", "w": 10})]:
        eng.send(t, e)
    assert out == [(0, [{"v": 1, "w": 10}])]


def test_outer_join_syntax_parses_and_prints_back() -> None:
    from app.epl.parser import parse_statement
    from app.epl.printer import to_epl

    for text in ("select * from A#keepall as a left outer join B#keepall as b on a.k = b.k",
                 "select * from A#keepall as a right outer join B#keepall as b on a.k = b.k "
                 "where a.v > 1",
                 "select * from A#keepall as a full outer join B#keepall as b on a.k = b.k "
                 "and a.v = b.w",
                 "select * from A#keepall as a inner join B#keepall as b on a.k = b.k"):
        node = parse_statement(text)
        assert to_epl(node) == text
        assert parse_statement(to_epl(node)) == node
        assert len(node.from_) == 2 and len(node.joins) == 1
    assert parse_statement("select * from A as a join B as b on a.k = b.k").joins[0].kind == \
        "inner"


def test_outer_join_plans_its_on_clause_as_index() -> None:
    lines = explain("select * from A#length(2) as a left outer join B#keepall as b "
                    "on a.k = b.k where a.v > b.w")
    assert lines[1:4] == [
        "  -> join A length(2) as a (outer: kept without a match), B keepall() as b",
        "  ->   event of a: lookup b by hash index on (b.k = a.k) or null",
        "  ->   event of b: lookup a by hash index on (a.k = b.k)"]


def test_outer_join_rows_with_nulls() -> None:
    out = run("select a.v as v, b.w as w from A#length(2) as a full outer join "
              "B#keepall as b on a.k = b.k",
              [("A", {"k": "x", "v": 1}), ("B", {"k": "y", "w": 20}),
               ("B", {"k": "x", "w": 10})])
    assert out == [([{"v": 1, "w": None}], []), ([{"v": None, "w": 20}], []),
                   ([{"v": 1, "w": 10}], [])]


def test_three_stream_outer_join_follows_its_on_clauses() -> None:
    lines = explain("select * from A#keepall as a right outer join B#keepall as b on "
                    "a.k = b.k left outer join C#keepall as c on c.k = b.k")
    assert lines[2:5] == [
        "  ->   event of a: lookup b by hash index on (b.k = a.k), then c by hash index on "
        "(c.k = b.k) or null",
        "  ->   event of b: lookup a by hash index on (a.k = b.k) or null, then c by hash "
        "index on (c.k = b.k) or null",
        "  ->   event of c: lookup b by hash index on (b.k = c.k), then a by hash index on "
        "(a.k = b.k) or null"]


def test_outer_join_limits() -> None:
    with pytest.raises(NotSupported, match="one earlier stream"):
        plan_statement(catalog(), "select * from A#keepall as a left outer join B#keepall as b on "
                       "a.k = b.k left outer join C#keepall as c on c.k = b.k and c.n = a.v",
                       "s")
    with pytest.raises(NotSupported, match="on clause"):
        plan_statement(catalog(), "select * from A#keepall as a left outer join B#keepall as b on "
                       "a.v > b.w", "s")


def test_inner_join_on_is_part_of_the_where_clause() -> None:
    lines = explain("select * from A#keepall as a inner join B#keepall as b on a.k = b.k")
    assert "  ->   event of a: lookup b by hash index on (b.k = a.k)" in lines


def test_join_with_a_named_window_starts_from_its_rows() -> None:
    eng = Engine()
    out: list[tuple[str, list, list]] = []
    eng.listeners.append(lambda s, n, o, p: out.append((s, n, o)))
    c = catalog()
    eng.deploy(plan_statement(c, "create window W#length(2) as B", "win"))
    eng.deploy(plan_statement(c, "insert into W select * from B", "fill"))
    eng.send("B", {"k": "x", "w": 10})
    eng.deploy(plan_statement(c, "select irstream a.v as v, w.w as w from A#keepall as a, W as w "
                      "where a.k = w.k", "j"))
    assert plan_statement(c, "select * from A#keepall as a, W as w", "e").explain()[1] == \
        "  named window: W"
    out.clear()
    eng.send("A", {"k": "x", "v": 1})
    assert out == [("j", [{"v": 1, "w": 10}], [])]
    out.clear()
    eng.send("B", {"k": "x", "w": 20})
    eng.send("B", {"k": "y", "w": 30})  # w=10 leaves W: its join row is removed
    assert [(n, o) for s, n, o in out if s == "j"] == [
        ([{"v": 1, "w": 20}], []), ([], [{"v": 1, "w": 10}])]


def test_named_window_join_limits() -> None:
    c = catalog("create window W#keepall as B", "create window V#keepall as C")
    with pytest.raises(NotSupported, match="two named windows"):
        plan_statement(c, "select * from W as w, V as v", "s")
    with pytest.raises(NotSupported, match="data windows on a named window"):
        plan_statement(c, "select * from A#keepall as a, W#length(1) as w", "s")


def test_implied_equalities_order_the_lookups() -> None:
    """a.k = b.k and b.k = c.k imply a.k = c.k: an event of c looks a up first (as Esper's
    query graph does; the rows then come a by a)."""
    lines = explain("select * from A#keepall as a, B#keepall as b, C#keepall as c "
                    "where a.k = b.k and b.k = c.k")
    assert lines[4] == ("  ->   event of c: lookup a by hash index on (a.k = c.k), then b by "
                        "hash index on (b.k = a.k)")


def test_table_in_a_join_is_read_by_primary_key() -> None:
    c = catalog("create table T (k string primary key, total sum(int))")
    plan = plan_statement(
        c, "select a.v, t.total from A#length(2) as a, T as t where a.k = t.k", "s")
    assert plan.explain()[1:3] == ["  -> join A length(2) as a, T (table) as t",
                                   "  ->   event of a: lookup t by primary key (t.k = a.k)"]
    assert plan.tables == ("T",) and plan.pipeline.types() == {"A"}
    lines = plan_statement(
        c, "select * from A#length(2) as a, T as t where a.v < t.total", "s").explain()
    assert lines[2] == "  ->   event of a: lookup t by full scan (nested loop)"
    with pytest.raises(NotSupported, match="table in a join with a data window"):
        plan_statement(c, "select * from A#length(2) as a, T#keepall as t", "s")


def _keyed_join(epl: str, events: list[tuple[str, dict[str, Any]]]) -> list[tuple[list, list]]:
    eng = Engine()
    out: list[tuple[list, list]] = []
    eng.listeners.append(lambda s, n, o, p: out.append((n, o)))
    c = catalog()
    for i, text in enumerate(["create context ByK partition by k from A, k from B", epl]):
        eng.deploy(plan_statement(c, text, f"s{i}"))
    for t, e in events:
        eng.send(t, e)
    return out


def test_keyed_join_partition_property_makes_a_fully_aggregated_select() -> None:
    """Esper ref. 4.2: a stream's partition property reads as the partition's key, so
    ``a.k`` with aggregates posts one row per update, its remove row the state before."""
    out = _keyed_join(f"context ByK select irstream a.k as k, count(*) as n {AB} "
                      "where a.k = b.k", [("A", {"k": "x", "v": 1}), ("B", {"k": "x", "w": 2})])
    assert out == [([{"k": "x", "n": 1}], [{"k": "x", "n": 0}])]


def test_keyed_outer_join_reads_the_missing_streams_key_from_the_partition() -> None:
    out = _keyed_join("context ByK select a.k as ak, b.w as w from A#keepall as a "
                      "right outer join B#keepall as b on a.k = b.k", [("B", {"k": "x", "w": 2})])
    assert out == [([{"ak": "x", "w": 2}], [])]

"""prev, prevtail, prevwindow, prevcount, prior and istream: planning rules and results
(Esper ref. "Single-row functions")."""

from __future__ import annotations

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import NotSupported
from app.runtime.engine import Engine
from tests.app.epl.validation import catalog_with, rejects

SCHEMAS = {"Q": {"sym": "string", "px": "double", "n": "int"},
           "R": {"sym": "string"}}


def run(epl: str, events: list[dict]) -> list[tuple[list, list]]:
    """(insert rows, remove rows) of ``epl`` for each event of type Q."""
    cat = catalog_with(SCHEMAS)
    eng = Engine()
    out: list = []
    eng.listeners.append(lambda s, n, o, p: out.append((list(n), list(o))))
    eng.deploy(plan_statement(cat, epl, "s"))
    for e in events:
        eng.send("Q", e)
    return out


def q(sym: str, px: float, n: int = 0) -> dict:
    return {"sym": sym, "px": px, "n": n}


def test_prevtail_without_index_is_the_oldest() -> None:
    out = run("select prevtail(px) as t, prev(px) as p, prevcount(px) as c, "
              "prevwindow(px) as w from Q#length(3)",
              [q("a", 1), q("b", 2), q("c", 3), q("d", 4)])
    assert [n for n, _ in out] == [
        [{"t": 1, "p": None, "c": 1, "w": [1]}],
        [{"t": 1, "p": 1, "c": 2, "w": [2, 1]}],
        [{"t": 1, "p": 2, "c": 3, "w": [3, 2, 1]}],
        [{"t": 2, "p": 3, "c": 3, "w": [4, 3, 2]}],
    ]


def test_sorted_window_is_read_in_sort_order() -> None:
    out = run("select prev(0, px) as top, prevtail(px) as bottom, prevwindow(px) as w "
              "from Q#sort(3, px desc)", [q("a", 1), q("b", 5), q("c", 3)])
    assert out[-1][0] == [{"top": 5, "bottom": 1, "w": [5, 3, 1]}]


def test_prev_functions_give_null_on_the_remove_stream_and_istream_tells() -> None:
    out = run("select irstream sym, prev(0, px) as p, istream() as i from Q#length(1)",
              [q("a", 1), q("b", 2)])
    assert out[-1] == ([{"sym": "b", "p": 2, "i": True}], [{"sym": "a", "p": None, "i": False}])


def test_prev_in_a_batch_is_relative_to_the_event() -> None:
    out = run("select sym, prev(1, sym) as p, prevtail(sym) as t from Q#length_batch(3)",
              [q("a", 1), q("b", 2), q("c", 3)])
    assert out == [([{"sym": "a", "p": None, "t": "a"}, {"sym": "b", "p": "a", "t": "a"},
                     {"sym": "c", "p": "b", "t": "a"}], [])]


def test_prior_ignores_the_window_and_travels_with_the_event() -> None:
    out = run("select irstream sym, prior(1, sym) as p1, prior(0, sym) as p0 "
              "from Q(px > 0)#length(1)", [q("a", 1), q("x", -1), q("b", 2), q("c", 3)])
    assert out == [
        ([{"sym": "a", "p1": None, "p0": "a"}], []),
        ([{"sym": "b", "p1": "a", "p0": "b"}], [{"sym": "a", "p1": None, "p0": "a"}]),
        ([{"sym": "c", "p1": "b", "p0": "c"}], [{"sym": "b", "p1": "a", "p0": "b"}]),
    ]


def test_prior_values_stay_out_of_a_wildcard() -> None:
    out = run("select *, prior(1, px) as pp from Q", [q("a", 1), q("b", 2)])
    assert out[-1][0] == [{"sym": "b", "px": 2, "n": 0, "pp": 1}]


def test_misuse_is_refused_with_a_position() -> None:
    cat = catalog_with(SCHEMAS)
    e = rejects(cat, "select prior(n, px) from Q")
    assert "constant" in str(e) and (e.line, e.column) == (1, 14)
    e = rejects(cat, "select prior(-1, px) from Q")
    assert "constant non-negative" in str(e)
    e = rejects(cat, "select prev(1, px) from Q#unique(sym)")
    assert "retains previous events" in str(e) and (e.line, e.column) == (1, 8)
    e = rejects(cat, "select sym from Q(prev(1, px) > 0)#length(2)")
    assert "stream filter" in str(e)
    plan_statement(cat, "select prior(1, a.px) from pattern [every a=Q]", "pp")
    e = rejects(cat, "select prev(1, r.sym) from Q#length(2) as q, R#unique(sym) as r")
    assert "retains previous events" in str(e)
    e = rejects(cat, "select prev(1, q.px || r.sym) from Q#length(2) as q, R#length(2) as r")
    assert "one stream" in str(e)
    e = rejects(cat, "select prev(1, a.px) from pattern [every a=Q]")
    assert "retains previous events" in str(e)
    e = rejects(cat, "select count(*) from Q#length(3) having prev(1, px) > 1")
    assert "statement with aggregations" in str(e) and (e.line, e.column) == (1, 41)
    e = rejects(cat, "select sum(px) from Q#length(3) where prevtail(px) > 1")
    assert "statement with aggregations" in str(e)
    plan_statement(cat, "select sum(px), prev(1, px) from Q#length(3)", "ok")
    plan_statement(cat, "create variable double v = 0", "v")
    with pytest.raises(NotSupported, match="outside a select"):
        plan_statement(cat, "on Q set v = prior(1, px)", "o")
    e = rejects(cat, "select prior(1) from Q")
    assert "index and an expression" in str(e)
    e = rejects(cat, "select sym, istream(px) from Q")
    assert "no parameters" in str(e)


def test_first_last_index_must_be_a_constant() -> None:
    e = rejects(catalog_with(SCHEMAS), "select first(px, n) from Q#length(3)")
    assert "index of first" in str(e) and (e.line, e.column) == (1, 18)

"""Expiry-expression batch window (Esper ref. 14.3.13; conformance window_expr_batch)."""

from __future__ import annotations

from operators.windows.registry import WindowParam
from tests.operators.harness import P, SumAgg, W, prop


def expiry(text: str, fn, aggregates: tuple = ()) -> WindowParam:
    return WindowParam(text, is_constant=False, expr=fn, aggregates=aggregates)


def ev(i: int, value: str) -> dict:
    return {"id": f"e{i}", "myvalue": value}


VALUES = ["a", "b", "postme", "c", "postme", "d"]


def run(h) -> list:
    return [h.send(ev(i + 1, v)) for i, v in enumerate(VALUES)]


def ids(emit) -> tuple:
    return [r["id"] for r in emit[0]], [r["id"] for r in emit[1]]


def test_expr_batch_current_count(harness) -> None:
    h = harness(
        W("expr_batch", expiry("current_count >= 2", lambda env, ctx: env["current_count"] >= 2))
    )
    assert [ids(e) for e in run(h)] == [
        ([], []),
        (["e1", "e2"], []),
        ([], []),
        (["e3", "e4"], ["e1", "e2"]),
        ([], []),
        (["e5", "e6"], ["e3", "e4"]),
    ]


def test_expr_batch_postme(harness) -> None:
    h = harness(
        W("expr_batch", expiry("myvalue = 'postme'", lambda env, ctx: env["myvalue"] == "postme"))
    )
    assert [ids(e) for e in run(h)] == [
        ([], []),
        ([], []),
        (["e1", "e2", "e3"], []),
        ([], []),
        (["e4", "e5"], ["e1", "e2", "e3"]),
        ([], []),
    ]


def test_expr_batch_postme_exclude_trigger(harness) -> None:
    fn = lambda env, ctx: env["myvalue"] == "postme"  # noqa: E731
    h = harness(W("expr_batch", expiry("myvalue = 'postme'", fn), P(False, "false")))
    assert [ids(e) for e in run(h)] == [
        ([], []),
        ([], []),
        (["e1", "e2"], []),
        ([], []),
        (["e3", "e4"], ["e1", "e2"]),
        ([], []),
    ]
    assert [r["id"] for r in h.contents()] == ["e5", "e6"]


def test_expr_batch_sum_and_flag_change(harness) -> None:
    aggs = (("s", SumAgg(), prop("price")),)
    h = harness(
        W("expr_batch", expiry("sum(price) > 1000", lambda env, ctx: (env["s"] or 0) > 1000, aggs))
    )
    a, b, c, d = ({"id": x, "price": p} for x, p in zip("abcd", [600, 600, 300, 800], strict=True))
    assert h.send(a) == ([], [])
    assert h.send(b) == ([a, b], [])
    assert h.send(c) == ([], [])  # the aggregate was reset with the batch
    assert h.send(d) == ([c, d], [a, b])
    fn = lambda env, ctx: env["newest_event"]["flag"] != env["oldest_event"]["flag"]  # noqa: E731
    g = harness(W("expr_batch", expiry("flag change", fn), P(False, "false")))
    f = [{"id": i, "flag": fl} for i, fl in enumerate([1, 1, 2, 2, 1])]
    outs = [g.send(r) for r in f]
    assert outs[2] == ([f[0], f[1]], [])
    assert outs[4] == ([f[2], f[3]], [f[0], f[1]])

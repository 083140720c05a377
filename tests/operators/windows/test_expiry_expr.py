"""Expiry-expression window (Esper ref. 14.3.12; conformance window_expr_*)."""

from __future__ import annotations

from operators.windows.registry import WindowParam
from tests.operators.harness import SumAgg, W, prop


def expiry(text: str, fn, aggregates: tuple = ()) -> WindowParam:
    return WindowParam(text, is_constant=False, expr=fn, aggregates=aggregates)


def ev(i: int, **kw) -> dict:
    return {"id": f"e{i}", **kw}


def test_expr_current_count_retains_last_two(harness) -> None:
    h = harness(W("expr", expiry("current_count <= 2", lambda env, ctx: env["current_count"] <= 2)))
    e = [ev(i, price=1.0) for i in range(1, 5)]
    assert h.at(1000, e[0]) == ([e[0]], [])
    assert h.send(e[1]) == ([e[1]], [])
    assert h.send(e[2]) == ([e[2]], [e[0]])
    assert h.send(e[3]) == ([e[3]], [e[1]])
    assert h.advance(600000) == []


def test_expr_sum_price_below_1000(harness) -> None:
    aggs = (("sum_price", SumAgg(), prop("price")),)
    param = expiry("sum(price) < 1000", lambda env, ctx: env["sum_price"] < 1000, aggs)
    h = harness(W("expr", param))
    e1, e2, e3, e4, e5 = (
        ev(1, price=400),
        ev(2, price=500),
        ev(3, price=300),
        ev(4, price=700),
        ev(5, price=100),
    )
    assert h.send(e1) == ([e1], [])
    assert h.send(e2) == ([e2], [])
    assert h.send(e3) == ([e3], [e1])
    assert h.send(e4) == ([e4], [e2, e3])
    assert h.send(e5) == ([e5], [])


def test_expr_flag_change_flushes_old_flag(harness) -> None:
    fn = lambda env, ctx: env["newest_event"]["flag"] == env["oldest_event"]["flag"]  # noqa: E731
    h = harness(W("expr", expiry("newest_event.flag = oldest_event.flag", fn)))
    e1, e2, e3, e4, e5 = (
        ev(1, flag=True),
        ev(2, flag=True),
        ev(3, flag=False),
        ev(4, flag=False),
        ev(5, flag=True),
    )
    assert h.send(e1) == ([e1], [])
    assert h.send(e2) == ([e2], [])
    assert h.send(e3) == ([e3], [e1, e2])
    assert h.send(e4) == ([e4], [])
    assert h.send(e5) == ([e5], [e3, e4])


def test_expr_timestamps_properties_and_removing_the_arrival(harness) -> None:
    fn = lambda env, ctx: env["oldest_timestamp"] > env["newest_timestamp"] - 2000 and env["keep"]  # noqa: E731
    h = harness(W("expr", expiry("...", fn)))
    a, b, c = ev(1, keep=True), ev(2, keep=True), ev(3, keep=False)
    assert h.at(1000, a) == ([a], [])
    assert h.at(2000, b) == ([b], [])
    assert h.at(3000, {"id": "x", "keep": True})[1] == [a]
    # the expression names the checked (oldest) event's property: c fails once it is oldest
    assert h.at(3500, c) == ([c], [])
    assert h.at(5500, ev(4, keep=True))[1] == [b, {"id": "x", "keep": True}, c]


def test_expr_variable_change_reevaluates(harness) -> None:
    h = harness(W("expr", expiry("KEEP", lambda env, ctx: ctx.variables.get("KEEP", True))))
    a, b = ev(1), ev(2)
    h.send(a, b)
    h.ctx.variables["KEEP"] = False
    h._step()
    # Esper schedules the re-check for the current time: it runs when the clock moves
    now = h.now
    assert h.view.on_variables_changed(now) == ([], [])
    assert h.view.next_timer() == now
    assert h.advance(now + 1) == [(now, [], [a, b])]
    h.ctx.variables["KEEP"] = True
    assert h.send(a) == ([a], [])
    assert h.advance(10**6) == []  # no other timer

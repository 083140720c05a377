"""Apama batched windows (Apama, "Defining batched windows"; conformance apama_batched_*)."""

from __future__ import annotations

from operators.windows.apama_batched import apama_query_must_run
from operators.windows.registry import WindowParam
from tests.operators.harness import P, T, W


def v(x: float) -> dict:
    return {"v": x}


def within_every(harness):
    return harness(W("apama_batched", T(1500, "1.5"), T(1000, "1.0"), None), start_ms=0)


def test_within_every_timeline(harness) -> None:
    h = within_every(harness)
    r10, r20, r30, r40, r50 = v(10.0), v(20.0), v(30.0), v(40.0), v(50.0)
    assert h.at(500, r10) == ([], [])
    assert h.advance(1000) == [(1000, [r10], [])]
    assert h.at(1500, r20) == ([], [])
    assert h.advance(2000) == [(2000, [r20], [r10])]
    assert h.advance(3000) == [(3000, [], [r20])]
    assert h.advance(4000) == []
    assert h.send(r30) == ([r30], [])  # arrives at a batch point: enters at once
    assert h.at(4500, r40) == ([], [])
    assert h.advance(5000) == [(5000, [r40], [])]
    assert h.advance(6000) == [(6000, [], [r30, r40])]
    assert h.advance(7000) == []
    assert h.send(r50) == ([r50], [])
    assert h.advance(8000) == []
    assert h.advance(9000) == [(9000, [], [r50])]
    assert h.advance(12000) == []


def test_within_every_sum_runs_only_on_content_change(harness) -> None:
    h = within_every(harness)
    total = 0.0
    sums = []
    steps = [
        (500, v(10.0)),
        (1000, None),
        (1500, v(20.0)),
        (2000, None),
        (3000, None),
        (4000, v(30.0)),
    ]
    steps += [
        (4500, v(40.0)),
        (5000, None),
        (6000, None),
        (7000, v(50.0)),
        (8000, None),
        (9000, None),
    ]
    for t, row in steps:
        for _, new, old in h.advance(t):
            assert apama_query_must_run((new, old))
            total += sum(r["v"] for r in new) - sum(r["v"] for r in old)
            sums.append(total)
        if row is not None:
            emit = h.send(row)
            if apama_query_must_run(emit):
                total += sum(r["v"] for r in emit[0]) - sum(r["v"] for r in emit[1])
                sums.append(total)
    assert sums == [10.0, 20.0, 0.0, 30.0, 70.0, 0.0, 50.0, 0.0]


def test_items_that_expire_before_the_batch_never_enter(harness) -> None:
    h = harness(W("apama_batched", T(500), T(2000), None))
    assert h.at(100, v(1.0)) == ([], [])
    assert h.advance(10000) == []
    assert h.contents() == []


def test_within_every_retain(harness) -> None:
    h = harness(W("apama_batched", T(10000), T(1000), P(2)))
    a, b, c = v(1.0), v(2.0), v(3.0)
    h.at(100, a, b, c)
    assert h.advance(1000) == [(1000, [b, c], [])]  # a never shows: retain 2
    d = v(4.0)
    h.at(1500, d)
    assert h.advance(2000) == [(2000, [d], [b])]


def test_retain_every_counts_items(harness) -> None:
    h = harness(W("apama_batched", None, P(2), P(3)))
    r = {x: v(x) for x in (10.0, 20.0, 30.0, 40.0, 50.0, 60.0)}
    assert h.at(1000, r[10.0]) == ([], [])
    assert h.send(r[20.0]) == ([r[10.0], r[20.0]], [])
    assert h.send(r[30.0]) == ([], [])
    assert h.send(r[40.0]) == ([r[30.0], r[40.0]], [r[10.0]])
    assert h.advance(60000) == []
    assert h.send(r[50.0]) == ([], [])
    assert h.send(r[60.0]) == ([r[50.0], r[60.0]], [r[20.0], r[30.0]])
    assert h.contents() == [r[40.0], r[50.0], r[60.0]]


def test_registry_takes_absent_params_as_null_constants() -> None:
    spec = W("apama_batched", WindowParam(""), P(2), P(3))
    assert spec.describe() == "retain 3 every 2"
    spec = W("apama_batched", WindowParam("1.5", 1.5), WindowParam("1.0", 1.0), WindowParam(""))
    assert (spec.within, spec.every, spec.retain) == (1500, 1000, None)
    assert spec.describe() == "within 1.5 every 1.0"

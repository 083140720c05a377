"""Keep-all window (Esper ref. 14.3.9; conformance window_keepall_and_namespaces)."""

from __future__ import annotations

from tests.operators.harness import W


def test_keepall_never_expires(harness) -> None:
    h = harness(W("keepall"))
    rows = [{"id": f"e{i}"} for i in range(4)]
    for t, r in zip((1000, 2000, 3000, 100000), rows, strict=True):
        assert h.at(t, r) == ([r], [])
    assert h.advance(10**8) == []
    assert h.contents() == rows
    assert h.send(old=[rows[1]]) == ([], [rows[1]])
    assert h.view.count() == 3

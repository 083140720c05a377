"""Length batch window (Esper ref. 14.3.2, 14.2; conformance window_length_batch)."""

from __future__ import annotations

from tests.operators.harness import P, W


def test_length_batch_releases_every_three(harness) -> None:
    h = harness(W("length_batch", P(3)), start_ms=0)
    e = [
        {"id": f"e{i}", "price": p} for i, p in zip(range(1, 7), [10, 20, 30, 1, 2, 3], strict=True)
    ]
    assert h.at(1000, e[0]) == ([], [])
    assert h.send(e[1]) == ([], [])
    assert h.send(e[2]) == ([e[0], e[1], e[2]], [])
    assert h.send(e[3]) == ([], [])
    assert h.send(e[4]) == ([], [])
    assert h.advance(100000) == []
    assert h.send(e[5]) == ([e[3], e[4], e[5]], [e[0], e[1], e[2]])
    # prev sees the released batch; contents is the batch being collected
    assert h.view.prev(0) == e[5] and h.view.prevtail(0) == e[3]
    assert h.contents() == []


def test_length_batch_upstream_removal(harness) -> None:
    h = harness(W("length_batch", P(2)))
    a, b, c, d = ({"id": x} for x in "abcd")
    assert h.send(a, b) == ([a, b], [])
    assert h.send(c) == ([], [])
    # a removed from the posted batch leaves now; c from the pending batch silently
    assert h.send(old=[a, c]) == ([], [a])
    assert h.send(d) == ([], [])
    assert h.contents() == [d]


def test_length_batch_undo_release_keeps_the_batch(harness) -> None:
    """The view after the window failed on a batch: the batch stays the one being
    collected, the next event releases it again with the previous batch as remove
    stream once more (Esper's view resets its batches after the child update)."""
    h = harness(W("length_batch", P(2)))
    a, b, c, d, e = ({"id": x} for x in "abcde")
    assert h.send(a, b) == ([a, b], [])
    assert h.send(c, d) == ([c, d], [a, b])
    assert h.view.undo_release() is True
    assert h.view.undo_release() is False
    assert h.contents() == [c, d]
    assert h.send(e) == ([c, d, e], [a, b])
    assert h.contents() == []

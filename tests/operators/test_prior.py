"""The stream memory of prior(n, x): stamps, depth and restore from state."""

from __future__ import annotations

from operators.base import PartitionCtx
from operators.prior import PriorSpec
from operators.state import MemoryNamespace


def px(row: dict, ctx: PartitionCtx) -> object:
    return row["px"]


def test_stamps_the_nth_earlier_event_and_keeps_only_the_depth() -> None:
    spec = PriorSpec((("k1", 1, px), ("k2", 2, px), ("k0", 0, None)))
    state = MemoryNamespace()
    p = spec.build(state, PartitionCtx())
    out = [p.stamp({"px": v}) for v in (1, 2, 3)]
    assert [(o["k1"], o["k2"]) for o in out] == [(None, None), (1, None), (2, 1)]
    assert out[2]["k0"] == {"px": 3}
    assert len(p.recent) == 2
    again = spec.build(state, PartitionCtx())
    assert again.stamp({"px": 4})["k2"] == 2


def test_pattern_matches_carry_the_tagged_event_of_an_earlier_match() -> None:
    from operators.prior import MatchPriorSpec

    spec = MatchPriorSpec((("k", 1, px, "a"),))
    state = MemoryNamespace()
    p = spec.build(state, PartitionCtx())
    first = p.stamp({"a": {"px": 1}, "b": {"n": 5}})
    second = p.stamp({"a": {"px": 2}, "b": None})
    assert first["a"]["k"] is None and second["a"]["k"] == 1
    assert second["b"] is None and "k" not in first["b"]
    assert spec.build(state, PartitionCtx()).stamp({"a": {"px": 3}})["a"]["k"] == 2

"""An epoch's merge: the order ``heapq.merge`` gives, whether or not each upstream's
records arrive with rising timestamps."""

from __future__ import annotations

import heapq

from hypothesis import given
from hypothesis import strategies as st

from app.runtime.kafka.partition import InRecord, merge_epoch

# per upstream: (timestamp, kepl.seq or None) of each record, in arrival order
UPSTREAMS = st.lists(st.lists(st.tuples(st.integers(0, 6), st.none() | st.integers(0, 3)),
                              max_size=8), max_size=4)


def heads_of(spec: list[list[tuple[int, int | None]]]) -> list[list[InRecord]]:
    return [[InRecord("event", f"t:{ui}", off, "T", ts, seq, {"n": off}, b"", f"t:{ui}", off)
             for off, (ts, seq) in enumerate(records)] for ui, records in enumerate(spec)]


@given(UPSTREAMS)
def test_the_merge_is_heapq_merge_of_the_upstreams(spec: list[list[tuple[int, int | None]]]
                                                  ) -> None:
    merges_as_heapq(spec)


def merges_as_heapq(spec: list[list[tuple[int, int | None]]]) -> None:
    heads = heads_of(spec)
    keyed = [[((r.ts, -1 if r.seq is None else r.seq, ui, r.offset), r) for r in events]
             for ui, events in enumerate(heads)]
    expected = [(r.upstream, r.offset) for _, r in heapq.merge(*keyed)]
    assert [(r.upstream, r.offset) for r in merge_epoch(heads)] == expected


# without kepl.seq, timestamps mostly rising with ties within and across upstreams (the
# common epoch: one stable sort by timestamp), now and then one falling back
RISING = st.lists(st.lists(st.tuples(st.integers(0, 3), st.none()), max_size=12)
                  .map(lambda rs: sorted(rs) if len(rs) % 5 else rs), max_size=5)


@given(RISING)
def test_the_merge_without_seqs_is_heapq_merge_too(spec: list[list[tuple[int, None]]]
                                                  ) -> None:
    merges_as_heapq(spec)  # type: ignore[arg-type]


def test_rising_and_falling_timestamps() -> None:
    # both upstreams rise: one sort (at ts 4 no kepl.seq, read as -1, comes before 0);
    # then upstream 0 falls back (ts 1 after 5): its records keep their order, as
    # heapq.merge keeps them
    rising = heads_of([[(1, None), (4, None)], [(2, None), (4, 0)]])
    assert [(r.upstream, r.offset) for r in merge_epoch(rising)] == [
        ("t:0", 0), ("t:1", 0), ("t:0", 1), ("t:1", 1)]
    falling = heads_of([[(5, None), (1, None)], [(3, None)]])
    assert [(r.upstream, r.offset) for r in merge_epoch(falling)] == [
        ("t:1", 0), ("t:0", 0), ("t:0", 1)]
    assert merge_epoch(heads_of([[], [(3, None)], []])) == heads_of([[], [(3, None)]])[1]
    assert merge_epoch([[], []]) == []

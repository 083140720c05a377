"""Property tests: the O(1) windows against naive models, with restores at random points."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.base import PartitionCtx
from operators.state import MemoryStore
from operators.windows.common import must_post
from tests.operators.harness import P, T, W, X, chain

# a step: ("e", symbol) sends an event, ("t", dt) moves the clock, ("r",) rebuilds from state
steps = st.lists(
    st.one_of(
        st.tuples(st.just("e"), st.sampled_from("ABC")),
        st.tuples(st.just("t"), st.integers(0, 3000)),
        st.tuples(st.just("r")),
    ),
    max_size=60,
)


def drive(spec, script):
    """Run a script; returns the emissions and the final contents (restores via checkpoint)."""
    store = MemoryStore()
    ctx = PartitionCtx()
    view = spec.build(store.namespace("v"), ctx)
    now, seq, out = 0, 0, []
    for step in script:
        if step[0] == "e":
            seq += 1
            out.append(("e", view.on_events([{"symbol": step[1], "seq": seq}], [], now)))
        elif step[0] == "t":
            target = now + step[1]
            while (due := view.next_timer()) is not None and due <= target:
                now = due
                emit = view.on_time(due)
                if must_post(emit):
                    out.append((due, emit))
            now = target
        else:
            store = MemoryStore.restore(store.checkpoint())
            view = spec.build(store.namespace("v"), ctx)
    return [(k, (list(e[0]), list(e[1]))) for k, e in out], view.contents()


def plain(script):
    return [s for s in script if s[0] != "r"]


@settings(max_examples=60, deadline=None)
@given(steps)
def test_length_matches_model(script) -> None:
    out, contents = drive(W("length", P(3)), script)
    model: list = []
    expected = []
    seq = 0
    for step in plain(script):
        if step[0] == "e":
            seq += 1
            row = {"symbol": step[1], "seq": seq}
            model.append(row)
            expected.append(("e", ([row], model[:-3] if len(model) > 3 else [])))
            model = model[-3:]
    assert out == expected and contents == model


@settings(max_examples=60, deadline=None)
@given(steps)
def test_time_matches_model(script) -> None:
    out, contents = drive(W("time", T(2000)), script)
    held: list = []
    expected = []
    now = seq = 0
    for step in plain(script):
        if step[0] == "e":
            seq += 1
            row = {"symbol": step[1], "seq": seq}
            held.append((now, row))
            expected.append(("e", ([row], [])))
        else:
            target = now + step[1]
            for due in sorted({t + 2000 for t, _ in held if t + 2000 <= target}):
                gone = [r for t, r in held if t + 2000 == due]
                held = [(t, r) for t, r in held if t + 2000 != due]
                expected.append((due, ([], gone)))
            now = target
    assert out == expected and contents == [r for _, r in held]


@settings(max_examples=60, deadline=None)
@given(steps)
def test_groupwin_unique_matches_model(script) -> None:
    grouped, _ = drive(chain(W("groupwin", X("symbol")), W("length", P(1))), script)
    unique, contents = drive(W("unique", X("symbol")), script)
    assert grouped == unique  # Esper ref. 14.3.15: groupwin(symbol)#length(1) equals unique(symbol)
    latest: dict = {}
    seq = 0
    for step in plain(script):
        if step[0] == "e":
            seq += 1
            latest.pop(step[1], None)
            latest[step[1]] = {"symbol": step[1], "seq": seq}
    assert contents == list(latest.values())

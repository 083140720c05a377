"""Window registry: names, namespaces, parameter checks, composition (Esper ref. 14.1)."""

from __future__ import annotations

import pytest

from operators.base import PartitionCtx
from operators.state import MemoryStore
from operators.windows.chain import ChainSpec
from operators.windows.groupwin import GroupWinSpec
from operators.windows.intersection import IntersectionSpec
from operators.windows.registry import WINDOWS, WindowParam
from tests.operators.harness import P, T, W, X, chain

VALID = {
    "length": [P(2)],
    "length_batch": [P(2)],
    "time": [T(1000)],
    "ext_timed": [X("ts"), T(1000)],
    "time_batch": [T(1000), P(5000, "5000L"), P("FORCE_UPDATE")],
    "ext_timed_batch": [X("ts"), T(1000), P(0, "0L")],
    "time_length_batch": [T(1000), P(3), P("START_EAGER")],
    "time_accum": [T(1000)],
    "keepall": [],
    "firstlength": [P(2)],
    "firsttime": [T(1000)],
    "expr": [WindowParam("true", is_constant=False, expr=lambda e, c: True)],
    "expr_batch": [
        WindowParam("true", is_constant=False, expr=lambda e, c: True),
        P(False, "false"),
    ],
    "unique": [X("a"), X("b")],
    "lastevent": [],
    "firstevent": [],
    "firstunique": [X("a")],
    "size": [],
    "sort": [P(3), X("a", descending=True), X("b")],
    "rank": [X("a"), X("b"), P(3), X("c")],
    "time_order": [X("ts"), T(1000)],
    "timetolive": [X("ts")],
    "uni": [X("a"), X("b"), WindowParam("*")],
    "linest": [X("a"), X("b")],
    "correl": [X("a"), X("b")],
    "weighted_avg": [X("a"), X("b"), X("c")],
    "time_interval": [X("ts"), T(10000), T(5000), T(15000)],
    "apama_batched": [T(1500), T(1000), None],
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_every_window_builds(name: str) -> None:
    spec = W(name, *VALID[name])
    view = spec.build(MemoryStore().namespace("s"), PartitionCtx())
    assert view.on_events([{"a": 1, "b": 2, "c": 3, "ts": 1}], [], 0) is not None
    assert isinstance(spec.describe(), str)


def test_every_registered_name_is_covered() -> None:
    assert set(WINDOWS) - {"groupwin", "merge"} == set(VALID)


@pytest.mark.parametrize(
    ("namespace", "name"),
    [
        ("win", "length"),
        ("win", "keepall"),
        ("std", "unique"),
        ("std", "size"),
        ("ext", "sort"),
        ("stat", "uni"),
    ],
)
def test_namespaces(namespace: str, name: str) -> None:
    spec = W(name, *VALID.get(name, []), namespace=namespace)
    assert spec.describe().startswith(f"{namespace}:{name}(")


def test_wrong_namespace_and_unknown_names() -> None:
    with pytest.raises(ValueError, match="std:length"):
        W("length", P(2), namespace="std")
    with pytest.raises(ValueError, match="unknown data window 'lengthbatch'"):
        W("lengthbatch", P(2))
    with pytest.raises(ValueError, match="unknown data window"):
        W("time_interval", X("ts"), T(1), T(1), T(1), namespace="win")


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("length", [], "expects 1 parameter"),
        ("length", [P(0)], "positive integer"),
        ("length", [P("x")], "positive integer"),
        ("keepall", [P(1)], "expects 0 parameter"),
        ("time", [P("5 apples")], "time period"),
        ("time_batch", [T(1000), P("FORCE_UPDATES")], "unknown flow control keyword"),
        ("time_batch", [T(1000), P(1, "1L"), P("FORCE_UPDATE"), P(2)], "expects 1 to 3"),
        ("expr_batch", [X("a"), P(3)], "true or false"),
        ("rank", [X("a"), X("b"), X("c")], "constant size"),
        ("sort", [P(1)], "at least 2"),
        ("uni", [], "at least 1"),
        ("linest", [X("a")], "at least 2"),
        ("apama_batched", [None, P(2), None], "needs 'within' or 'retain'"),
    ],
)
def test_parameter_errors(name: str, params: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        W(name, *params)


def test_time_parameter_in_seconds_and_periods() -> None:
    assert W("time", P(4)).period == 4000
    assert W("time", P(0.25)).period == 250
    assert W("time", T(4000)).period == 4000
    spec = W("time_batch", T(60000), P(5000, "5000L"), P("FORCE_UPDATE, START_EAGER"))
    assert (spec.period, spec.reference, spec.flow.force_update, spec.flow.start_eager) == (
        60000,
        5000,
        True,
        True,
    )
    assert W("time_batch", T(1000), P("force_update")).flow.force_update


def test_parameters_evaluated_at_partition_build() -> None:
    size = WindowParam("SIZE", is_constant=False, expr=lambda row, ctx: ctx.variables["SIZE"])
    spec = W("length", size)
    view = spec.build(MemoryStore().namespace("s"), PartitionCtx(variables={"SIZE": 1}))
    view.on_events([{"id": 1}], [], 0)
    assert view.on_events([{"id": 2}], [], 0)[1] == [{"id": 1}]
    with pytest.raises(ValueError, match="positive integer, got 0"):
        spec.build(MemoryStore().namespace("s"), PartitionCtx(variables={"SIZE": 0}))
    with pytest.raises(ValueError, match="time period"):
        W("time", WindowParam("X", is_constant=False, expr=lambda r, c: "x")).build(
            MemoryStore().namespace("s"), PartitionCtx()
        )


def test_rank_splits_unique_size_and_criteria() -> None:
    spec = W("rank", X("market"), X("symbol"), P(10), X("price", descending=True), X("qty"))
    assert (len(spec.unique), spec.size, len(spec.exprs), spec.descending) == (
        2,
        10,
        2,
        (True, False),
    )


def test_composition() -> None:
    single = chain(W("length", P(2)))
    assert single.describe() == "length(2)"
    inter = chain(W("length", P(2)), W("time", T(1000)))
    assert isinstance(inter, IntersectionSpec)
    derived = chain(W("length", P(2)), W("time", T(1000)), W("uni", X("a")))
    assert isinstance(derived, ChainSpec) and isinstance(derived.stages[0], IntersectionSpec)
    grouped = chain(W("groupwin", X("a")), W("length", P(2)), W("merge", X("a")), W("size"))
    assert isinstance(grouped, ChainSpec) and isinstance(grouped.stages[0], GroupWinSpec)
    assert grouped.describe() == "#groupwin(a)#length(2)#size()"
    with pytest.raises(ValueError, match="followed by at least one window"):
        chain(W("groupwin", X("a")))
    with pytest.raises(ValueError, match="merge may only follow"):
        chain(W("length", P(2)), W("merge"))
    with pytest.raises(ValueError, match="only one groupwin"):
        chain(W("groupwin", X("a")), W("groupwin", X("b")), W("length", P(1)))
    with pytest.raises(ValueError, match="at most one batch window"):
        chain(W("length_batch", P(2)), W("time_batch", T(1000)))
    with pytest.raises(ValueError, match="no data window"):
        chain()

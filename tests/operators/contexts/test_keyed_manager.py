"""The plain keyed context's manager: ids in the order keys first come, and the live
partitions it lists after a reload."""

from __future__ import annotations

from operators.base import PartitionCtx
from operators.contexts.managers import KeyedItem, KeyedSpec
from operators.state import MemoryNamespace


def key(e, c):  # noqa: ANN001, ANN201
    return e["k"]


SPEC = KeyedSpec("K", (KeyedItem("T", (key,), key_texts=("k",)),))


def test_a_reloaded_manager_lists_every_id_in_order_and_routes_known_keys_to_them() -> None:
    state = MemoryNamespace()
    m = SPEC.build(state, PartitionCtx())
    assert [m.route("T", {"k": k}, 0) for k in ("b", "a", "b", "c")] == [[0], [1], [0], [2]]
    again = SPEC.build(state, PartitionCtx())
    assert again.live() == [0, 1, 2]
    assert [again.route("T", {"k": k}, 0) for k in ("c", "a", "d")] == [[2], [1], [3]]
    assert again.live() == [0, 1, 2, 3]
    assert again.key(3) == ["d"]


def test_ids_that_are_not_all_held_are_listed_sorted() -> None:
    state = MemoryNamespace()
    state.put(("k", '["x"]'), [2, ["x"]])
    state.put(("k", '["y"]'), [0, ["y"]])
    state.put("next", 3)
    m = SPEC.build(state, PartitionCtx())
    assert m.live() == [0, 2]
    assert m.route("T", {"k": "z"}, 0) == [3]
    assert m.live() == [0, 2, 3]

"""Variables (operators/variables.py): typed, persisted, scoped per context partition."""

from __future__ import annotations

import pytest

from operators.state import MemoryStore
from operators.variables import VariableDecl, VariableError, VariableScope, VariableStore


@pytest.mark.parametrize(("type_name", "value", "held"), [
    ("int", 7.0, 7), ("integer", 3, 3), ("long", 5_000_000_000, 5_000_000_000),
    ("short", 2, 2), ("byte", 1, 1), ("double", 2, 2.0), ("float", 1, 1.0),
    ("string", "x", "x"), ("boolean", True, True), ("object", [1, "a"], [1, "a"]),
    ("int[]", [1, 2.0], [1, 2]), ("MyEvent", {"a": 1}, {"a": 1}), ("int", None, None),
])
def test_values_are_held_in_the_declared_type(type_name: str, value: object,
                                              held: object) -> None:
    assert VariableDecl("v", type_name).coerce(value) == held


@pytest.mark.parametrize(("type_name", "value"), [
    ("int", 2.5), ("int", "1"), ("double", True), ("string", 1), ("boolean", 0),
    ("int[]", 3), ("MyEvent", 3),
])
def test_values_that_do_not_fit_are_refused(type_name: str, value: object) -> None:
    with pytest.raises(VariableError):
        VariableDecl("v", type_name).coerce(value)


def test_changes_are_recorded_and_persisted() -> None:
    store = MemoryStore()
    changes: list[str] = []
    vs = VariableStore(store.namespace("v"), changes)
    vs.declare(VariableDecl("lim", "double", 200))
    vs.set("lim", 100)
    vs.set("lim", 100.0)  # the same value: a write all the same (Esper calls back)
    assert changes == ["lim", "lim"]
    again = VariableStore(MemoryStore.restore(store.checkpoint()).namespace("v"))
    again.declare(VariableDecl("lim", "double", 200))
    assert again.values["lim"] == 100.0


def test_constant_cannot_be_assigned() -> None:
    vs = VariableStore(MemoryStore().namespace("v"))
    vs.declare(VariableDecl("k", "int", 10, constant=True))
    with pytest.raises(VariableError):
        vs.set("k", 11)


def test_context_variables_shadow_nothing_and_stay_per_partition() -> None:
    """Esper ref. 4.8: one value per context partition; global variables are shared."""
    store = MemoryStore()
    glob = VariableStore(store.namespace("v", "g"))
    glob.declare(VariableDecl("g", "int", 1))
    p1 = VariableStore(store.namespace("v", "c", "1"))
    p2 = VariableStore(store.namespace("v", "c", "2"))
    for p in (p1, p2):
        p.declare(VariableDecl("th", "int", 100))
    s1, s2 = VariableScope(glob, p1), VariableScope(glob, p2)
    s1["th"] = 50
    s1["g"] = 5
    assert (s1["th"], s2["th"], s2.get("g")) == (50, 100, 5)
    assert set(s1) == {"g", "th"} and "th" in s1 and "nope" not in s1

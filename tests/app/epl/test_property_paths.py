"""Property paths resolve through the declared types only: nested types, map keys, and
nothing of the Python objects that hold the values."""

from __future__ import annotations

from typing import Any

import pytest

from app.epl.errors import EplValidationError
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine

DECLS = ["create schema Inner(x int, tags string[])",
         "create schema E(a string, inner Inner, m java.util.Map, o object)"]


def catalog() -> Catalog:
    cat = Catalog()
    for i, d in enumerate(DECLS):
        plan_statement(cat, d, f"d{i}")
    return cat


@pytest.mark.parametrize(("epl", "rendered"), [
    ("select a.__class__.__name__, a.__doc__ from E",
     "line 1:10: 'a' is a string and has no property '__class__'\n"
     "  select a.__class__.__name__, a.__doc__ from E\n"
     "           ^\n"
     "  hint: 'a' can only be read as a whole"),
    ("select e.a.__doc__ from E as e",
     "line 1:12: 'a' is a string and has no property '__doc__'\n"
     "  select e.a.__doc__ from E as e\n"
     "             ^\n"
     "  hint: 'a' can only be read as a whole"),
    ("select inner.x, inner.y from E",
     "line 1:23: unknown property 'y' of Inner\n"
     "  select inner.x, inner.y from E\n"
     "                        ^"),
    ("select * from E where inner.tags.__len__ > 0",
     "line 1:34: 'inner.tags' is an array (string[]) and has no property '__len__'\n"
     "  select * from E where inner.tags.__len__ > 0\n"
     "                                   ^"),
    ("select * from E(inner.x.real = 1)",
     "line 1:25: 'inner.x' is a int and has no property 'real'\n"
     "  select * from E(inner.x.real = 1)\n"
     "                          ^\n"
     "  hint: 'inner.x' can only be read as a whole"),
    ("select p.a.__class__ from pattern [every p=E]",
     "line 1:12: 'a' is a string and has no property '__class__'\n"
     "  select p.a.__class__ from pattern [every p=E]\n"
     "             ^\n"
     "  hint: 'a' can only be read as a whole"),
    ("select p.inner.nope from pattern [every p=E]",
     "line 1:16: unknown property 'nope' of Inner\n"
     "  select p.inner.nope from pattern [every p=E]\n"
     "                 ^"),
    ("select `inner` . __dict__ from E",
     "line 1:8: unknown property '__dict__' of Inner\n"
     "  select `inner` . __dict__ from E\n"
     "         ^"),
])
def test_paths_outside_the_schema_are_validation_errors(epl: str, rendered: str) -> None:
    with pytest.raises(EplValidationError) as info:
        plan_statement(catalog(), epl, "s")
    assert info.value.render() == rendered


class Spy:
    """A value whose every attribute read is recorded."""

    reads: list[str] = []
    secret = "s3cret"

    def __getattribute__(self, name: str) -> Any:
        Spy.reads.append(name)
        return object.__getattribute__(self, name)


def run(epl: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cat = catalog()
    engine = Engine()
    engine.deploy(plan_statement(cat, epl, "s"))
    out: list[dict[str, Any]] = []
    engine.listeners.append(lambda stmt, new, old, pid: out.extend(new))
    for e in events:
        engine.send("E", e)
    return out


def test_declared_paths_and_map_keys_are_read() -> None:
    rows = run("select inner.x as x, m.k as k, m.k.deeper as d, o.v as v from E",
               [{"a": "z", "inner": {"x": 7, "tags": ["t"]}, "m": {"k": 1}, "o": {"v": 2}},
                {"a": "z", "inner": None, "m": {"k": {"deeper": 3}}, "o": None}])
    assert rows == [{"x": 7, "k": 1, "d": None, "v": 2},
                    {"x": None, "k": {"deeper": 3}, "d": 3, "v": None}]


def test_no_attribute_of_a_python_value_is_ever_read() -> None:
    """Values only known at run time (object, maps) are read as map keys or not at all."""
    Spy.reads.clear()
    spy = Spy()
    rows = run("select o.secret as s, o.__class__ as c, m.__doc__ as d, p.o.secret as t "
               "from E as p", [{"a": "z", "inner": None, "m": spy, "o": spy}])
    assert rows == [{"s": None, "c": None, "d": None, "t": None}]
    assert Spy.reads == []


def test_pattern_tag_paths_are_read_through_maps() -> None:
    rows = run("select p.inner.x as x from pattern [every p=E]",
               [{"a": "z", "inner": {"x": 5, "tags": []}, "m": None, "o": None}])
    assert rows == [{"x": 5}]

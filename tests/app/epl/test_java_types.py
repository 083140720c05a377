"""The Java type Esper gives a group-by expression (its hash code orders the groups)."""

from __future__ import annotations

import pytest

from app.epl.parser import parse_expression
from app.epl.planning.java_types import java_box, qualified_types

TYPES = qualified_types({"i": "int", "n": "long", "d": "double", "s": "string",
                         "b": "boolean", "f": "float", "x": "any"}, "E", "e")


@pytest.mark.parametrize(("text", "box"), [
    ("i", "int"), ("n", "long"), ("e.d", "double"), ("E.s", "string"), ("b", "boolean"),
    ("x", ""), ("missing", ""),
    ("i + i", "int"), ("i * n", "long"), ("i % 3", "int"), ("n - 1", "long"),
    ("i + d", "double"), ("f + i", "double"), ("f * f", "float"), ("i / i", "double"),
    ("-i", "int"), ("s || 'x'", "string"), ("i > 2", "boolean"), ("x + 1", ""),
    ("cast(d, int)", "int"), ("cast(i, string)", "string"), ("1", "int"), ("1L", "long"),
    ("'a'", "string"), ("s in ('a', 'b')", "boolean"), ("s is null", "boolean"),
    ("coalesce(i, 0)", ""),
])
def test_java_box(text: str, box: str) -> None:
    assert java_box(parse_expression(text), TYPES) == box

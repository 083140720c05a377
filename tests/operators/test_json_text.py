"""Key texts are stored (state, changelog): the fast paths must give ``json.dumps``'s text."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from operators.json_text import array_text, scalar_text

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-(2**200), 2**200),
                    st.floats(allow_nan=True, allow_infinity=True), st.text())


@given(st.lists(SCALARS, max_size=4))
def test_an_array_of_scalars_reads_as_json_dumps_writes_it(values: list) -> None:
    assert array_text(values) == json.dumps(values)
    assert array_text(tuple(values), str) == json.dumps(tuple(values), default=str)


@given(SCALARS)
def test_a_scalar_reads_as_json_dumps_writes_it(value: object) -> None:
    assert scalar_text(value, sort_keys=True) == json.dumps(value, sort_keys=True)


def test_exact_texts_of_the_common_keys() -> None:
    assert array_text((7,), str) == "[7]"
    assert array_text(("a", 7, None, True, 1.5)) == '["a", 7, null, true, 1.5]'
    assert array_text(["é\x00"]) == '["\\u00e9\\u0000"]'
    assert array_text([float("nan"), float("-inf")]) == "[NaN, -Infinity]"


def test_other_values_go_to_json_dumps_with_its_default() -> None:
    assert array_text((Decimal("1.5"), 2), str) == '["1.5", 2]'
    assert array_text(({"b": 1, "a": [2]},)) == '[{"b": 1, "a": [2]}]'
    assert scalar_text({"b": 1, "a": 2}, sort_keys=True) == '{"a": 2, "b": 1}'
    try:
        array_text((date(2026, 1, 1),))
    except TypeError as e:
        assert "not JSON serializable" in str(e)
    else:
        raise AssertionError("a date without a default is not JSON")


class _Int(int):
    def __repr__(self) -> str:
        return "odd"


def test_a_subclass_of_a_scalar_takes_json_dumps_path() -> None:
    assert array_text((_Int(3),)) == json.dumps((_Int(3),)) == "[3]"


@given(SCALARS)
def test_a_group_by_property_takes_the_key_group_key_gives(value: object) -> None:
    from app.epl.expr import _property
    from operators.resultset import _group_of_one, group_key

    expected = value if type(value) is str and not value.startswith("\x00") else group_key(
        (value,))
    assert _group_of_one(_property("p"))({"p": value}, None) == expected  # type: ignore[arg-type]
    assert _group_of_one(lambda r, c: r["p"])({"p": value}, None) == expected  # type: ignore[arg-type]

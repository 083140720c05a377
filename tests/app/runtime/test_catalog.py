"""Event checking: ``coerce_event`` and the per-type coercer the Kafka worker uses."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.runtime.catalog import (
    Catalog,
    EventTypeError,
    coerce_event,
    event_coercer,
    event_run_check,
)

CATALOG = Catalog.from_schemas(
    {"T": {"name": "string", "qty": "long", "price": "double", "ok": "boolean"}})


@pytest.mark.parametrize("event", [
    {"name": "a", "qty": 2, "price": 1.5, "ok": True},      # exact: returned as it is
    {"qty": 2, "name": "a", "price": 1.5, "ok": True},      # other order
    {"name": "a", "qty": 2.0, "price": 1, "ok": False},     # numbers converted
    {"name": "a", "qty": None, "price": 1.5, "ok": True},   # null
    {"name": "a"},                                          # missing properties
])
def test_coercer_gives_what_coerce_event_gives(event: dict[str, Any]) -> None:
    want = coerce_event(CATALOG, "T", dict(event))
    got = event_coercer(CATALOG, "T")(dict(event))
    assert got == want
    assert list(got) == ["name", "qty", "price", "ok"]  # schema order, as embedded
    assert [type(v) for v in got.values()] == [type(v) for v in want.values()]


@pytest.mark.parametrize(("event", "message"), [
    ({"name": "a", "qty": True, "price": 1.5, "ok": True}, "T.qty must be a long, got True"),
    ({"name": "a", "qty": 1, "price": "x", "ok": True}, "T.price must be a double, got 'x'"),
    ({"name": "a", "qty": 1, "price": 1.5, "ok": True, "z": 1}, "T has no property 'z'"),
])
def test_coercer_refuses_what_coerce_event_refuses(event: dict[str, Any], message: str
                                                   ) -> None:
    with pytest.raises(EventTypeError) as e:
        event_coercer(CATALOG, "T")(event)
    assert str(e.value) == message


NUMBERS = Catalog.from_schemas(
    {"N": {"d": "double", "l": "long", "i": "int", "s": "short", "b": "byte"}})


@pytest.mark.parametrize(("event", "message"), [
    ({"d": float("nan")}, "N.d must be a finite double, got nan"),
    ({"d": float("-inf")}, "N.d must be a finite double, got -inf"),
    ({"d": 10 ** 400}, "N.d must be a finite double, got 1000000000000000000000000000000000000..."),
    ({"l": 10 ** 26}, "N.l is out of range for a long (64-bit signed), "
                      "got 100000000000000000000000000"),
    ({"l": 1e300}, "N.l is out of range for a long (64-bit signed), got 1e+300"),
    ({"l": 2 ** 63}, "N.l is out of range for a long (64-bit signed), got 9223372036854775808"),
    ({"i": 2 ** 31}, "N.i is out of range for an int (32-bit signed), got 2147483648"),
    ({"s": -(2 ** 15) - 1}, "N.s is out of range for a short (16-bit signed), got -32769"),
    ({"b": 128}, "N.b is out of range for a byte (8-bit signed), got 128"),
])
def test_values_a_type_cannot_hold_are_refused(event: dict[str, Any], message: str) -> None:
    full = {"d": 1.0, "l": 1, "i": 1, "s": 1, "b": 1, **event}
    for check in (lambda e: coerce_event(NUMBERS, "N", e), event_coercer(NUMBERS, "N")):
        with pytest.raises(EventTypeError) as e:
            check(dict(full))
        assert str(e.value) == message


def test_the_widest_values_pass() -> None:
    event = {"d": -1.7976931348623157e308, "l": -(2 ** 63), "i": 2 ** 31 - 1,
             "s": 2 ** 15 - 1, "b": -128}
    assert event_coercer(NUMBERS, "N")(dict(event)) == event


def test_strings_longer_than_the_limit_are_refused() -> None:
    from app.runtime.catalog import DEFAULT_MAX_STRING_LENGTH, string_limits

    cat = Catalog.from_schemas({"E": {"s": "string", "n": "long"}, "F": {"s": "string"}},
                               string_limits({"E": 4}))
    coerce = event_coercer(cat, "E")
    assert coerce({"s": "abcd", "n": 1}) == {"s": "abcd", "n": 1}
    with pytest.raises(EventTypeError) as e:
        coerce({"s": "abcde", "n": 1})
    assert str(e.value) == ("E.s holds 5 characters, more than the limit of 4 "
                            "(max_string_length)")
    # other types keep the default
    long_ok = "x" * DEFAULT_MAX_STRING_LENGTH
    assert event_coercer(cat, "F")({"s": long_ok}) == {"s": long_ok}
    with pytest.raises(EventTypeError) as e:
        event_coercer(cat, "F")({"s": long_ok + "x"})
    assert str(e.value) == ("F.s holds 65,537 characters, more than the limit of 65,536 "
                            "(max_string_length)")
    # 0: no limit
    free = Catalog.from_schemas({"F": {"s": "string"}}, string_limits(0))
    assert event_coercer(free, "F")({"s": long_ok * 7}) == {"s": long_ok * 7}


_ANY_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                       st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))
_TYPES = ["string", "long", "int", "short", "byte", "double", "float", "boolean"]


@given(st.lists(st.sampled_from(_TYPES), min_size=1, max_size=5), st.data())
def test_coercer_agrees_with_coerce_event_on_any_event_in_schema_order(
        types: list[str], data: st.DataObject) -> None:
    schema = {f"p{i}": t for i, t in enumerate(types)}
    catalog = Catalog.from_schemas({"E": schema}, max_string_length={"*": 3})
    event = {p: data.draw(_ANY_VALUE) for p in schema}
    try:
        want: Any = coerce_event(catalog, "E", dict(event))
    except EventTypeError as e:
        want = str(e)
    try:
        got: Any = event_coercer(catalog, "E")(dict(event))
    except EventTypeError as e:
        got = str(e)
    assert got == want
    if isinstance(want, dict):
        assert [type(v) for v in got.values()] == [type(v) for v in want.values()]


_VALID = {"string": st.text(max_size=3), "boolean": st.booleans(),
          "long": st.integers(-(2 ** 63), 2 ** 63 - 1), "int": st.integers(-(2 ** 31), 2 ** 31 - 1),
          "short": st.integers(-(2 ** 15), 2 ** 15 - 1), "byte": st.integers(-128, 127),
          "double": st.floats(allow_nan=False, allow_infinity=False),
          "float": st.floats(allow_nan=False, allow_infinity=False)}


@given(st.lists(st.sampled_from(_TYPES), min_size=1, max_size=4), st.data())
def test_a_run_check_passes_exactly_the_runs_the_coercer_takes_as_they_are(
        types: list[str], data: st.DataObject) -> None:
    schema = {f"p{i}": t for i, t in enumerate(types)}
    catalog = Catalog.from_schemas({"E": schema}, max_string_length={"*": 3})
    coerce = event_coercer(catalog, "E")
    # events in schema order with values the type takes, or any values; some with a
    # property missing or moved
    valid = st.fixed_dictionaries({p: _VALID[t] for p, t in schema.items()})
    event = st.fixed_dictionaries({p: _ANY_VALUE for p in schema})
    reordered = event.map(lambda e: dict(reversed(list(e.items()))))
    events = data.draw(st.lists(valid | valid | event | reordered | event.map(
        lambda e: dict(list(e.items())[1:])), max_size=6))

    def as_it_is(e: dict[str, Any]) -> bool:
        try:
            return coerce(e) is e
        except EventTypeError:
            return False
    taken = bool(events) and all(as_it_is(e) for e in events)
    # the one case the run check leaves to the coercer: doubles whose sum overflows
    doubles = [p for p, t in schema.items() if t in ("double", "float")]
    finite = taken and all(math.isfinite(sum(e[p] for e in events)) for p in doubles)
    assert event_run_check(catalog, "E")(events) == finite


def test_a_run_check_of_doubles_and_longs() -> None:
    check = event_run_check(NUMBERS, "N")
    ok = {"d": 1.5, "l": 2 ** 63 - 1, "i": -(2 ** 31), "s": 1, "b": -128}
    assert check([ok, dict(ok)])
    assert not check([])
    assert not check([ok, {**ok, "d": float("nan")}])
    assert not check([ok, {**ok, "d": 1}])                # an int where a double is due
    assert not check([ok, {**ok, "l": 2 ** 63}])
    assert not check([ok, {**ok, "b": 128}])
    assert not check([{**ok, "d": 1.7e308}, {**ok, "d": 1.7e308}])  # the sum overflows
    assert not check([ok, [1]])                            # not a JSON object
    assert not check([ok, {**ok, "b": True}])

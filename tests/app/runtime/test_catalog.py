"""Event checking: ``coerce_event`` and the per-type coercer the Kafka worker uses."""

from __future__ import annotations

from typing import Any

import pytest

from app.runtime.catalog import Catalog, EventTypeError, coerce_event, event_coercer

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

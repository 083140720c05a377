"""``insert [istream|rstream|irstream] into``: the keyword picks the routed stream from the
statement's insert and remove streams; listeners get what the select clause selects."""

from __future__ import annotations

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine

SCHEMAS = {"W": {"k": "string"}}


def run(epl: str) -> tuple[list, list]:
    """The statement's (new, old) batches and the rows its target stream received."""
    cat = Catalog.from_schemas(SCHEMAS)
    eng = Engine()
    own: list = []
    routed: list = []
    eng.listeners.append(lambda s, n, o, p: (own if s == "s" else routed).append((n, o)))
    eng.deploy(plan_statement(cat, epl, "s"))
    eng.deploy(plan_statement(cat, "select k from Out", "t"))
    for k in "abc":
        eng.send("W", {"k": k})
    return own, [n for n, _ in routed]


A, B, C = {"k": "a"}, {"k": "b"}, {"k": "c"}


@pytest.mark.parametrize(("epl", "own", "routed"), [
    ("insert into Out select k from W#length(2)",
     [([A], []), ([B], []), ([C], [])], [[A], [B], [C]]),
    ("insert rstream into Out select k from W#length(2)",
     [([A], []), ([B], []), ([C], [])], [[A]]),
    ("insert irstream into Out select k from W#length(2)",
     [([A], []), ([B], []), ([C], [])], [[A], [B], [C], [A]]),
    ("insert into Out select rstream k from W#length(2)",
     [([A], [])], [[A], [B], [C]]),
    ("insert rstream into Out select irstream k from W#length(2)",
     [([A], []), ([B], []), ([C], [A])], [[A]]),
])
def test_routed_stream_and_listened_stream(epl: str, own: list, routed: list) -> None:
    assert run(epl) == (own, routed)


def test_plan_posts_both_streams_only_when_routing_needs_them() -> None:
    cat = Catalog.from_schemas(SCHEMAS)
    plain = plan_statement(cat, "insert into O1 select k from W#length(2)", "p")
    assert plain.select_stream is None and plain.pipeline.stream_kind == "istream"
    rins = plan_statement(cat, "insert rstream into O2 select k from W#length(2)", "r")
    assert rins.select_stream == "istream" and rins.pipeline.stream_kind == "irstream"
    assert rins.listened([A], [B]) == ([A], []) and rins.routed([A], [B]) == [B]

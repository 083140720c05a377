"""The Nexmark generator's stream: proportions, determinism, references; queries plan."""

from collections import Counter

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from tests.bench.nexmark.generator import FIRST_ID, SCHEMAS, generate
from tests.bench.nexmark.queries import QUERIES


def test_proportions_and_seed() -> None:
    stream = list(generate(5_000))
    assert Counter(t for t, _ in stream) == {"Person": 100, "Auction": 300, "Bid": 4_600}
    assert stream == list(generate(5_000))
    assert stream != list(generate(5_000, seed=2))
    assert [e["dateTime"] for _, e in stream] == list(range(5_000))


def test_references_point_to_earlier_events() -> None:
    persons = auctions = 0
    for type_name, e in generate(5_000):
        assert set(e) == set(SCHEMAS[type_name])
        if type_name == "Person":
            assert e["id"] == FIRST_ID + persons
            persons += 1
        elif type_name == "Auction":
            assert e["id"] == FIRST_ID + auctions and FIRST_ID <= e["seller"] < FIRST_ID + persons
            assert e["expires"] > e["dateTime"]
            auctions += 1
        else:
            assert FIRST_ID <= e["auction"] < FIRST_ID + auctions
            assert FIRST_ID <= e["bidder"] < FIRST_ID + persons


def test_every_query_plans() -> None:
    for _name, _what, statements in QUERIES:
        catalog = Catalog.from_schemas(SCHEMAS)
        for i, epl in enumerate(statements):
            plan_statement(catalog, epl, f"s{i}")

"""A small, seeded Nexmark event generator (Person, Auction, Bid at 1:3:46).

Field names follow the Nexmark benchmark's schemas (Person: id, name, emailAddress,
creditCard, city, state, dateTime; Auction: id, itemName, description, initialBid, reserve,
dateTime, expires, seller, category; Bid: auction, bidder, price, channel, url, dateTime).
Event time advances by ``gap_ms`` per event; bids go mostly to recent ("hot") auctions and
are placed by recent people, as in the reference generator, so that joins find partners.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

PROPORTION = (1, 3, 46)
"""Persons, auctions and bids in each run of 50 events."""

FIRST_ID = 1000
STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
          "Seattle", "Kent", "Cheyenne")
NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter",
         "Walter")
CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CATEGORIES = 5
AUCTION_LIFE_MS = 10_000

SCHEMAS: dict[str, dict[str, str]] = {
    "Person": {"id": "long", "name": "string", "emailAddress": "string",
               "creditCard": "string", "city": "string", "state": "string",
               "dateTime": "long"},
    "Auction": {"id": "long", "itemName": "string", "description": "string",
                "initialBid": "long", "reserve": "long", "dateTime": "long",
                "expires": "long", "seller": "long", "category": "long"},
    "Bid": {"auction": "long", "bidder": "long", "price": "long", "channel": "string",
            "url": "string", "dateTime": "long"},
}


def generate(n: int, seed: int = 1, gap_ms: int = 1) -> Iterator[tuple[str, dict]]:
    """``n`` events as (type, event), in event-time order (``dateTime`` in ms from 0)."""
    rnd = random.Random(seed)
    persons = auctions = 0
    period = sum(PROPORTION)
    for i in range(n):
        now = i * gap_ms
        slot = i % period
        if slot < PROPORTION[0]:
            pid = FIRST_ID + persons
            persons += 1
            name = f"{rnd.choice(NAMES)} {rnd.choice(NAMES)}"
            yield "Person", {
                "id": pid, "name": name,
                "emailAddress": f"{name.replace(' ', '.').lower()}@example.com",
                "creditCard": " ".join(f"{rnd.randrange(10_000):04d}" for _ in range(4)),
                "city": rnd.choice(CITIES), "state": rnd.choice(STATES), "dateTime": now}
        elif slot < PROPORTION[0] + PROPORTION[1]:
            aid = FIRST_ID + auctions
            auctions += 1
            initial = rnd.randrange(1, 1_000)
            yield "Auction", {
                "id": aid, "itemName": f"item{aid}", "description": f"lot {aid}",
                "initialBid": initial, "reserve": initial + rnd.randrange(1, 1_000),
                "dateTime": now, "expires": now + AUCTION_LIFE_MS,
                "seller": FIRST_ID + _recent(rnd, max(persons, 1)),
                "category": rnd.randrange(CATEGORIES) + 10}
        else:
            yield "Bid", {
                "auction": FIRST_ID + _recent(rnd, max(auctions, 1)),
                "bidder": FIRST_ID + _recent(rnd, max(persons, 1)),
                "price": rnd.randrange(100, 100_000), "channel": rnd.choice(CHANNELS),
                "url": f"https://www.nexmark.com/item?id={rnd.randrange(1_000_000)}",
                "dateTime": now}


def _recent(rnd: random.Random, count: int) -> int:
    """An index among ``count`` ids, mostly one of the latest 100 (hot), else any."""
    if rnd.random() < 0.9:
        return max(0, count - 1 - rnd.randrange(min(count, 100)))
    return rnd.randrange(count)

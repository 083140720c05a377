"""Patterns split by the key their events correlate on: N engine partitions give the rows
of one.

Composed as the Kafka runtime composes a split (``topology``, ``partition``): each of N
Engines deploys the statement, an event of any type in the pattern goes to the Engine of
``crc32(its key property's text) mod N``, rows are numbered per key.  Per step the N
Engines must post the same multiset of rows as one Engine, each key's rows in the same
order with the same ids: ``every a=A -> ...`` starts an instance per ``A`` (Esper ref.
7.5.1), and an instance whose every later filter correlates with its leading event's
key only ever takes events of that key.
"""

from __future__ import annotations

import pytest

from app.epl.planner import plan_statement
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.topology import Topology, split_of
from tests.app.runtime.split_rows import (
    TWO_TYPES,
    assert_split_matches,
    differs_when_split,
    refusal,
    split_app,
    two_type_steps,
)

SCHEMAS = {
    **TWO_TYPES,
    "D": {"amount": "double", "id": "long"},
}

SPLITTABLE = {
    "followed": "select a.account as who, a.amount, b.v from pattern "
                "[every a=W -> b=X(acct = a.account)]",
    "every_later": "select a.account, b.v from pattern "
                   "[every a=W(amount > 20) -> every b=X(acct = a.account and v > 2)]",
    "within": "select a.account, b.v from pattern "
              "[every a=W -> b=X(acct = a.account) where timer:within(1500 msec)]",
    "not_and": "select a.account, a.n, b.v from pattern [every a=W -> "
               "(b=X(acct = a.account) and not W(account = a.account, n = 2))]",
    "same_type": "select a.account, a.amount as first, c.amount as second from pattern "
                 "[every a=W -> c=W(account = a.account and amount > a.amount)]",
    "chain": "select a.account, b.v, c.n from pattern [every a=W -> b=X(acct = a.account) "
             "-> c=W(account = b.acct, n = 1)]",
    "or_timer": "select a.account, b.v from pattern [every a=W(n = 0) -> "
                "(b=X(acct = a.account) or timer:interval(700 msec))]",
    "where": "select a.account, b.v from pattern [every a=W -> b=X(acct = a.account)] "
             "where b.v > 1",
    "repeat": "select a.account, a.amount from pattern [every a=W(n > 0) -> "
              "[2] X(acct = a.account)]",
    "until": "select a.account, a.n from pattern [every a=W -> "
             "(X(acct = a.account, v > 1) until W(account = a.account, n = 3))]",
    "while": "select a.account, b.v from pattern [every a=W -> "
             "every b=X(acct = a.account) while (b.v < 4)]",
    # duplicates of the key alone, which only one partition sees
    "distinct": "select a.account, b.v from pattern [every-distinct(a.account, 2 sec) a=W "
                "-> b=X(acct = a.account)]",
}


def _app(name: str, epl: str, n: int) -> AppConfig:
    return split_app(name, epl, n, SCHEMAS)


@pytest.mark.parametrize("name", sorted(SPLITTABLE))
@pytest.mark.parametrize("n", [1, 2, 5])
def test_split_gives_the_rows_of_one_engine(name: str, n: int) -> None:
    topology = Topology.plan(_app(name, SPLITTABLE[name], n))
    split = topology.groups[name].split
    assert split is not None and split.kind == "pattern"
    assert_split_matches(topology, name, two_type_steps(len(name) * 17 + n), lambda s: s)


REFUSED = {
    "select a.account from pattern [every (a=W -> b=X(acct = a.account))]":
        "the pattern does not begin with every tag=Type",
    "select a.account from pattern [a=W -> b=X(acct = a.account)]":
        "the pattern does not begin with every tag=Type",
    "select a.account, b.v from pattern [every a=W -> b=X(v > 2)]":
        "X is not correlated with a",
    "select a.account, b.v from pattern [every a=W -> b=X(acct = a.account) -> W(n = 1)]":
        "W is not correlated with a",
    "select a.account from pattern [every a=W -> b=X(acct = a.account) -> "
    "c=X(v = a.account)]": "X would route by two properties",
    "select a.account from pattern [every a=W -> b=X(acct = a.account or v > 3)]":
        "X's equality with a correlated tag is inside an 'or'",
    "select a.account from pattern [every a=W -> d=D(amount = a.amount)]":
        "the correlated properties are not all of one type",
    "select b.acct from pattern [every a=W -> b=X(acct = a.account)]":
        "a.account is not a select column",
    "select a.account from pattern [every-distinct(a.n) a=W -> X(acct = a.account)]":
        "every-distinct's expressions do not include a.account",
    "select a.account from pattern [every a=W -> [2] X(v > 1)]":
        "X is not correlated with a",
    "select a.account, count(*) from pattern [every a=W -> X(acct = a.account)]":
        "aggregates over a pattern",
    "select a.account from pattern [every a=W -> X(acct = a.account)] "
    "output last every 1 sec": "output limiting collects",
    "select a.account from pattern [every a=W -> X(acct = a.account)]#time(1 sec)":
        "a data window over the pattern",
}


@pytest.mark.parametrize("epl", sorted(REFUSED))
def test_rules_say_why_not(epl: str) -> None:
    why = refusal(epl, SCHEMAS)
    assert why.startswith(REFUSED[epl]), why


def test_a_pattern_without_a_leading_every_per_event_differs_when_split() -> None:
    """``every (a=W -> b=X(acct = a.account))`` holds one instance at a time over all
    keys: routed as the correlated pattern is, N Engines give other rows than one."""
    topology = Topology.plan(_app("s", SPLITTABLE["followed"], 3))
    plan = plan_statement(topology.catalog, "select a.account as who, a.amount, b.v from "
                          "pattern [every (a=W -> b=X(acct = a.account))]", "s")
    assert isinstance(split_of(plan, [plan], SCHEMAS), str)
    topology.plans[:] = [plan]
    topology.groups["s"].plans[:] = [plan]
    assert differs_when_split(topology, "s", two_type_steps(5), lambda s: s)

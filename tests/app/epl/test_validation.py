"""Validation: statements the reference documents call not valid are rejected with the
documented reason, at the right position, with a hint where one helps."""

from __future__ import annotations

import pytest

from app.epl.errors import EplError
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from tests.app.epl.validation import catalog_with, rejects

SCHEMAS = {
    "BankTxn": {"custId": "string", "account": "string", "amount": "double"},
    "LoginEvent": {"loginId": "string", "loginTime": "long"},
    "LogoutEvent": {"loginId": "string"},
    "MyStartEvent": {"id": "string"},
    "StockTickEvent": {"symbol": "string", "feed": "string", "price": "double", "size": "int"},
    "Market": {"ticker": "string"},
}


def catalog(*setup: str) -> Catalog:
    return catalog_with(SCHEMAS, *setup)


def test_keyed_context_statement_must_filter_a_listed_type() -> None:
    c = catalog("create context SegmentedByCustomer partition by custId from BankTxn")
    e = rejects(c, "context SegmentedByCustomer\nselect * from pattern "
                   "[every a=LoginEvent -> b=LogoutEvent where timer:within(10 minutes)]")
    assert e.message == ("statement refers to keyed segmented context 'SegmentedByCustomer' "
                         "but filters none of its event types (BankTxn)")
    assert (e.line, e.column) == (2, 15)


def test_hash_context_statement_must_filter_a_listed_type() -> None:
    c = catalog("create context SegmentedByCustomerHash coalesce by "
                "consistent_hash_crc32(custId) from BankTxn granularity 16 preallocate")
    e = rejects(c, "context SegmentedByCustomerHash select * from LoginEvent")
    assert e.message.startswith("statement refers to hash segmented context")


def test_same_type_twice_in_partition_by() -> None:
    e = rejects(catalog(), "create context SegmentedByCustomer partition by custId from "
                           "BankTxn, account from BankTxn")
    assert e.message == "event type 'BankTxn' is listed twice in partition by"
    assert e.column == 70  # the second item naming BankTxn


def test_key_property_types_must_match() -> None:
    e = rejects(catalog(), "create context SegmentedByCustomer partition by custId from "
                           "BankTxn, loginTime from LoginEvent")
    assert e.message == ("type mismatch between key properties: 'loginTime' of LoginEvent is "
                         "long, the first stream's key is string")


def test_keyed_lifecycle_rules() -> None:
    """Esper's keyed context with initiation: initiating types are listed in partition
    by, streams are named in one place, each name once."""
    e = rejects(catalog(), "create context C partition by custId from BankTxn "
                           "initiated by LoginEvent")
    assert e.message == ("initiated by 'LoginEvent': every initiating event type must be "
                         "listed in partition by")
    e = rejects(catalog(), "create context C partition by custId from BankTxn as a "
                           "initiated by BankTxn as b")
    assert e.message == ("a keyed context names its streams in partition by or in "
                         "initiated by, not both")
    e = rejects(catalog(), "create context C partition by custId from BankTxn, loginId from "
                           "LoginEvent initiated by BankTxn as a, LoginEvent as a")
    assert e.message == "name 'a' already used for type 'BankTxn'"
    ok = catalog("create context C partition by custId from BankTxn b "
                 "terminated by BankTxn(amount = b.amount)")
    assert ok.contexts["C"].terminated.types() == frozenset({"BankTxn"})


def test_now_with_filter_initiating_condition() -> None:
    e = rejects(catalog(), "create context CtxNowFilter initiated @now and MyStartEvent "
                           "terminated after 1 minute")
    assert e.message == "@now cannot be combined with a filter initiating condition"


@pytest.mark.parametrize(("epl", "message"), [
    ("select sum(price) from StockTickEvent#groupwin(symbol)#groupwin(feed)#length(10)",
     "only one groupwin may be declared per stream"),
    ("select * from Market#length(10)#merge(ticker)",
     "merge may only follow a groupwin declaration"),
    ("select * from StockTickEvent#groupwin(symbol)",
     "groupwin must be followed by at least one window"),
    ("select * from StockTickEvent#length(prev(1, size))",
     "prev is not allowed as a data window parameter"),
    ("select * from StockTickEvent#time(sum(price))",
     "aggregation function 'sum' is not allowed as a parameter of 'time'"),
])
def test_window_rules(epl: str, message: str) -> None:
    assert rejects(catalog(), epl).message == message


def test_unknown_property_hint_and_caret() -> None:
    e = rejects(catalog(), "select custid from BankTxn")
    assert e.render() == ("line 1:8: unknown property 'custid' of BankTxn\n"
                          "  select custid from BankTxn\n"
                          "         ^\n"
                          "  hint: did you mean 'custId'?")


def test_unknown_property_in_a_window_parameter() -> None:
    """Esper refuses the data window declaration; a null key for every event would keep
    one event in all."""
    e = rejects(catalog(), "select * from BankTxn#unique(acount)")
    assert e.render() == ("line 1:30: unknown property 'acount' of BankTxn\n"
                          "  select * from BankTxn#unique(acount)\n"
                          "                               ^\n"
                          "  hint: did you mean 'account'?")
    e = rejects(catalog(), "select * from BankTxn#sort(3, B.amount desc)")
    assert (e.message, e.column) == ("unknown property 'B' of BankTxn", 31)
    e = rejects(catalog(), "select a.amount from BankTxn#time(1 sec) as a, LoginEvent"
                           "#groupwin(a.loginId)#lastevent as l where a.custId = l.loginId")
    assert e.message.startswith("unknown property 'a' of LoginEvent")


def test_type_name_qualifies_a_stream_beside_its_alias() -> None:
    """Esper ref. 5.4: ``W.account`` reads the stream of type W, aliased or not, also in a
    window parameter."""
    for epl in ("select BankTxn.account from BankTxn#unique(BankTxn.account)",
                "select BankTxn.account, b.amount from BankTxn(BankTxn.amount > 1)"
                "#unique(BankTxn.custId) as b where BankTxn.amount < 5"):
        assert plan_statement(catalog(), epl, "s").kind == "query"


def test_unknown_context_property() -> None:
    """Esper ref. 4.2.1: a statement reads the properties its context provides; another
    name is refused where it stands (it would be null on every row)."""
    c = catalog("create context ByCust partition by custId from BankTxn")
    e = rejects(c, "context ByCust select context.key2 as k from BankTxn")
    assert e.render() == ("line 1:31: context property 'key2' is not a known property of "
                          "context 'ByCust'\n"
                          "  context ByCust select context.key2 as k from BankTxn\n"
                          "                                ^\n"
                          "  hint: known properties: name, id, key1")
    c = catalog("create context Nest context Win start MyStartEvent as s end after 1 minute, "
                "context ByCust partition by custId from BankTxn")
    for ok in ("context.Win.s.id", "context.ByCust.key1", "context.id", "context.Win.endTime"):
        assert plan_statement(c, f"context Nest select {ok} from BankTxn", "s").kind == "query"
    e = rejects(c, "context Nest select context.ByCust.label from BankTxn")
    assert (e.message, e.hint) == ("context property 'label' is not a known property of "
                                   "context 'Nest'", "known properties: name, id, key1")
    e = rejects(c, "context Nest select context.key1 from BankTxn")
    assert e.message.startswith("context property 'key1'")


def test_unknown_type_and_context() -> None:
    assert rejects(catalog(), "select * from BankTx").hint == "did you mean 'BankTxn'?"
    e = rejects(catalog(), "context Nope select * from BankTxn")
    assert e.message == "unknown context 'Nope'"


def test_syntax_error_is_an_epl_error_with_position() -> None:
    with pytest.raises(EplError) as info:
        plan_statement(catalog(), "select * form BankTxn", "s")
    assert info.value.line == 1 and info.value.column is not None


def test_derived_window_rows_hold_its_properties() -> None:
    """Esper ref. 14.4: after a derived-value window the statement reads the window's
    properties and the additional ones it lists, not the event's (they would be null)."""
    c = catalog()
    e = rejects(c, "select amount from BankTxn#uni(amount)")
    assert e.render() == (
        "line 1:8: unknown property 'amount' of the derived-value window over BankTxn\n"
        "  select amount from BankTxn#uni(amount)\n"
        "         ^\n"
        "  hint: its rows hold datapoints, total, average, variance, stddev, stddevpa; list "
        "an event property after the window's own parameters to carry it (Esper ref. 14.4)")
    assert rejects(c, "select average from BankTxn#uni(amount) where amount > 1").column == 47
    for ok in ("select average, custId from BankTxn#uni(amount, custId) where custId = 'a'",
               "select custId, size from BankTxn#groupwin(custId)#size()",
               "select size from BankTxn(amount > 1)#size()"):
        assert plan_statement(c, ok, "s").kind == "query"

"""The upgrade plan per statement (no broker): unchanged, changed stateless or stateful,
added, removed, and the refusals."""

from __future__ import annotations

from typing import Any

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.deployments import (
    ADDED,
    REMOVED,
    STATEFUL,
    STATELESS,
    UNCHANGED,
    Deployment,
    form_of,
    plan_upgrade,
)
from app.runtime.kafka.topology import Topology

SCHEMAS = {"Trade": {"sym": "string", "px": "double"}}


def version(statements: list[dict[str, Any]], n: int = 1, **extra: Any) -> Deployment:
    config = AppConfig.from_dict({"app": "up", "schemas": SCHEMAS,
                                  "statements": statements, **extra})
    return form_of(Topology.plan(config), "", n)


FILTER = {"name": "big", "epl": "select sym, px from Trade where px > 10"}
AVG = {"name": "avg", "epl": "select sym, avg(px) as a from Trade#length(3) group by sym"}


def categories(plan: Any) -> dict[str, str]:
    return {s.name: s.category for s in plan.steps}


def test_same_text_with_other_layout_is_unchanged() -> None:
    old = version([FILTER, AVG])
    new = version([FILTER, {"name": "avg", "epl": "SELECT sym,\n  avg(px) AS a\n"
                            "FROM Trade#length(3)   GROUP BY sym"}], 2)
    plan = plan_upgrade(old, new, {})
    assert categories(plan) == {"big": UNCHANGED, "avg": UNCHANGED}
    assert not plan.changes and not plan.refusals
    assert old.digest == new.digest


def test_changed_stateless_takes_effect_without_rebuild() -> None:
    old = version([FILTER, AVG])
    new = version([{"name": "big", "epl": "select sym, px from Trade where px > 20"}, AVG], 2)
    plan = plan_upgrade(old, new, {})
    assert categories(plan) == {"big": STATELESS, "avg": UNCHANGED}
    assert plan.refusals == [] and plan.resets == []
    assert old.digest != new.digest


def test_changed_stateful_needs_a_rebuild_choice() -> None:
    old = version([FILTER, AVG])
    new = version([FILTER, {"name": "avg", "epl": "select sym, avg(px) as a from "
                            "Trade#length(5) group by sym"}], 2)
    refused = plan_upgrade(old, new, {})
    assert categories(refused)["avg"] == STATEFUL
    assert len(refused.refusals) == 1
    assert "--rebuild avg=from-now" in refused.refusals[0]
    served = plan_upgrade(old, new, {"avg": "from-now"})
    assert served.refusals == [] and served.resets == ["avg"]
    assert "from-now" in [s for s in served.steps if s.name == "avg"][0].detail
    everything = plan_upgrade(old, new, {"*": "from-now"})
    assert everything.resets == ["avg"]


def test_from_earliest_replays_a_statement_reading_retained_input() -> None:
    old = version([AVG])
    new = version([{"name": "avg", "epl": "select sym, avg(px) as a from Trade#length(5) "
                    "group by sym"}], 2)
    plan = plan_upgrade(old, new, {"avg": "from-earliest"})
    assert plan.refusals == [] and plan.resets == ["avg"] and plan.replays == ["avg"]
    assert plan.lines() == [
        "  avg  changed, stateful: rebuild from-earliest: replays its retained input into "
        "fresh state, alone, when each engine partition first loads; the rows its new "
        "text gives are written once, row ids continue"]


def test_from_earliest_refuses_what_the_retained_input_cannot_serve() -> None:
    ctx_cnt = {"name": "cnt", "epl": "context H select sym, count(*) as n from Trade#length(9) "
               "group by sym"}
    plan = plan_upgrade(version(HASHED), version([HASHED[0], ctx_cnt], 2),
                        {"cnt": "from-earliest"})
    assert plan.replays == [] and plan.refusals == [
        "cnt: --rebuild from-earliest cannot serve it: it runs in context 'H', whose "
        "partitions the other statements of the context share (use from-now, or kepl "
        "reset to replay the app)"]
    fed = [{"name": "feed", "epl": "insert into Big select sym, px from Trade where px > 5"},
           {"name": "avg", "epl": "select avg(px) as a from Big#length(3)"}]
    plan = plan_upgrade(version(fed), version([fed[0], {
        "name": "avg", "epl": "select avg(px) as a from Big#length(4)"}], 2),
        {"avg": "from-earliest"})
    assert plan.refusals == [
        "avg: --rebuild from-earliest cannot serve it: it reads Big, which statements "
        "insert into: that stream has no retained input of its own (use from-now, or "
        "kepl reset to replay the app)"]
    windowed = [{"name": "w", "epl": "create window W#keepall as Trade"},
                {"name": "fill", "epl": "insert into W select * from Trade"},
                {"name": "q", "epl": "select px, (select count(*) from W) as n from Trade"}]
    plan = plan_upgrade(version(windowed), version([*windowed[:2], {
        "name": "q", "epl": "select px, (select count(*) from W) as m from Trade"}], 2),
        {"q": "from-earliest"})
    assert plan.refusals == [
        "q: --rebuild from-earliest cannot serve it: it names named window W, which other "
        "statements write: a replay of this statement alone cannot give its contents (use "
        "from-now, or kepl reset to replay the app)"]
    two = {"Trade": SCHEMAS["Trade"], "Quote": {"sym": "string", "bid": "double"}}
    old = form_of(Topology.plan(AppConfig.from_dict(
        {"app": "up", "schemas": two, "statements": [AVG]})), "", 1)
    new = form_of(Topology.plan(AppConfig.from_dict({"app": "up", "schemas": two,
        "statements": [{"name": "avg", "epl": "select count(*) as n from "
                        "Trade#length(3) as t, Quote#length(3) as q"}]})), "", 2)
    plan = plan_upgrade(old, new, {"avg": "from-earliest"})
    assert plan.refusals == [
        "avg: --rebuild from-earliest cannot serve it: it now reads Quote, which group "
        "'main' did not read before: its past events are not in the group's input (use "
        "from-now, or kepl reset to replay the app)"]


def test_added_and_removed() -> None:
    old = version([FILTER, AVG])
    new = version([AVG, {"name": "mx", "epl": "select max(px) as m from Trade"}], 2)
    kept = plan_upgrade(old, new, {})
    assert categories(kept) == {"avg": UNCHANGED, "mx": ADDED, "big": REMOVED}
    assert kept.refusals == [] and kept.delete_outputs == [] and kept.resets == []
    dropped = plan_upgrade(old, version([FILTER], 2), {}, delete_removed=True)
    assert categories(dropped) == {"big": UNCHANGED, "avg": REMOVED}
    assert dropped.delete_outputs == ["avg"] and dropped.resets == ["avg"]


def test_rebuild_of_an_unknown_statement_is_refused() -> None:
    old = version([AVG])
    plan = plan_upgrade(old, version([AVG], 2), {"nope": "from-now"})
    assert plan.refusals == ["--rebuild names 'nope', which is no statement of the new file"]


HASHED = [{"name": "ctx", "epl": "create context H coalesce by consistent_hash_crc32(sym) "
           "from Trade granularity 4"},
          {"name": "cnt", "epl": "context H select sym, count(*) as n from Trade group by sym"}]


def test_context_partitioning_change_under_state_is_refused() -> None:
    old = version(HASHED)
    new = version([{"name": "ctx", "epl": "create context H coalesce by "
                    "consistent_hash_crc32(sym) from Trade granularity 8"}, HASHED[1]], 2)
    plan = plan_upgrade(old, new, {"*": "from-now"})
    assert len(plan.refusals) == 1
    assert plan.refusals[0].startswith("cnt: its group 'H' changes its engine partitions "
                                       "(4 partitions, hash context H -> 8 partitions")


def test_keyed_context_partitions_change_is_refused() -> None:
    keyed = [{"name": "ctx", "epl": "create context K partition by sym from Trade"},
             {"name": "cnt", "epl": "context K select count(*) as n from Trade"}]
    old = version(keyed, context_partitions={"K": 2})
    new = version(keyed, 2, context_partitions={"K": 3})
    plan = plan_upgrade(old, new, {})
    assert len(plan.refusals) == 1 and "changes its engine partitions" in plan.refusals[0]


def test_record_round_trips() -> None:
    d = version([FILTER, AVG, *HASHED], 7)
    again = Deployment.decode(d.encode())
    assert again == d and again.digest == d.digest


def test_a_changed_table_declaration_is_refused_and_a_schema_keeps_no_state() -> None:
    table = {"name": "tbl", "epl": "create table Totals (sym string primary key, "
             "n long)"}
    old = version([table, {"name": "sch", "epl": "create schema Tick (sym string)"}])
    new = version([{"name": "tbl", "epl": "create table Totals (sym string primary key, "
                    "n long, m long)"},
                   {"name": "sch", "epl": "create schema Tick (sym string, px double)"}], 2)
    plan = plan_upgrade(old, new, {"*": "from-now"})
    assert categories(plan) == {"tbl": STATEFUL, "sch": STATELESS}
    assert plan.resets == [] and len(plan.refusals) == 1
    assert plan.refusals[0].startswith("tbl: the declaration of table 'tbl' changes")


def test_a_schema_change_changes_the_statements_reading_the_type() -> None:
    old = version([FILTER, AVG])
    config = AppConfig.from_dict({"app": "up", "schemas": {
        "Trade": {"sym": "string", "px": "double", "qty": "long"}},
        "statements": [FILTER, AVG]})
    plan = plan_upgrade(old, form_of(Topology.plan(config), "", 2), {})
    assert categories(plan) == {"big": STATELESS, "avg": STATEFUL}

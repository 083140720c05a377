"""Whether a match_recognize statement can run over several engine partitions on Kafka.

Esper keeps the partial matches of each ``partition by`` key apart (Esper ref., Match
Recognize, "partition by"), so the events of one key can meet in one engine partition
while other keys run elsewhere, as a keyed context's do: the routing stage sends an
event to partition ``crc32(key text) mod N`` of the statement's repartition topic
(``context_partitions: {statement: N}``).  That gives the embedded rows only when nothing
the statement does reads more than one key at a time; ``mr_route`` says which
statements qualify and, for the others, why they stay in one engine partition.
"""

from __future__ import annotations

from typing import Any

from app.runtime.kafka.reads import assigned_variables, names_read
from app.runtime.plan import StatementPlan

ROUTABLE_WINDOWS = frozenset({"time", "keepall"})
"""Data windows whose removals depend on each event alone (not on other keys' events)."""


def mr_route_in(plan: StatementPlan, plans: list[StatementPlan],
                schemas: dict[str, dict[str, str]]) -> tuple[tuple[Any, ...] | None, str]:
    """``mr_route`` of a statement among the app's ``plans`` (``schemas``: the event types
    read from topics)."""
    assigned = set().union(*(assigned_variables(p) for p in plans))
    inserted = {p.insert_into for p in plans if p.insert_into is not None}
    stream = plan.pipeline.stream if plan.pipeline is not None else None
    props = schemas.get(stream.type_name) if stream is not None else None
    return mr_route(plan, props, assigned, inserted)


def mr_route(plan: StatementPlan, props: dict[str, str] | None,
             assigned: set[str] = frozenset(), inserted: set[str] = frozenset()
             ) -> tuple[tuple[Any, ...] | None, str]:
    """``(partition-by expressions, "")`` when the statement's input may be spread over
    engine partitions by its partition-by key, else ``(None, why it stays in one)``.

    ``props``: the properties of the statement's event type (None: not read from a
    topic); ``assigned``: variables some statement of the app assigns (a statement
    reading one must stay with its writer); ``inserted``: streams statements insert into.
    """
    p = plan.pipeline
    mr = p.match_recognize if p is not None else None
    if plan.kind != "query" or mr is None:
        return None, "not a match_recognize statement"
    if plan.context is not None:
        return None, (f"runs in context '{plan.context}' (the context decides its engine "
                      "partition)")
    if not mr.partition_by:
        return None, "no partition by: any event may continue any partial match"
    if plan.window is not None:
        return None, (f"reads named window '{plan.window}', whose rows live in the main "
                      "engine group")
    type_name = p.stream.type_name if p.stream is not None else ""
    if props is None or type_name in inserted:
        return None, (f"its stream {type_name} is inserted into by statements of the main "
                      "engine group")
    bad = _partition_by_problem(plan, props or {})
    if bad:
        return None, bad
    view = p.stream.view if p.stream is not None else None
    if view is not None and getattr(view, "name", None) not in ROUTABLE_WINDOWS:
        return None, (f"data window {view.describe()}: which events it removes depends "
                      "on the events of every key")
    if mr.interval_ms is not None:
        # Esper ref. Match Recognize, interval: one schedule for every key; a match is
        # held whenever another key's match began at the same time
        return None, "interval: the held matches of every key share one schedule"
    if mr.prev_depth:
        return None, ("prev() in define: past 100 keys the history of idle keys is "
                      "dropped, counted over every key")
    rs, out = p.resultset, p.output
    if rs.aggregates or rs.group_by or rs.having is not None or rs.table is not None:
        return None, "the select clause aggregates the rows of every key"
    if rs.order_by or rs.limit is not None or p.distinct:
        return None, "order by, limit or distinct over the rows of every key"
    if (out.limited or out.when_terminated or out.after_ms is not None
            or out.after_events is not None):
        return None, "output rate limiting over the rows of every key"
    if plan.insert_into is not None:
        return None, "insert into: the stream's consumers run in the main engine group"
    if p.subqueries or plan.tables:
        return None, "subqueries and tables are state of the main engine group"
    if assigned:
        read = names_read(plan) & assigned
        if read:
            return None, (f"reads variable '{sorted(read)[0]}', which another statement "
                          "assigns (each engine partition would hold its own copy)")
    return tuple(mr.partition_by), ""


def _partition_by_problem(plan: StatementPlan, props: dict[str, str]) -> str:
    """Why the partition-by expressions cannot be computed from an event alone ("" if
    they can): the routing stage has the event, not the engine's variables or windows."""
    from app.epl import ast
    from app.epl.parser import parse_statement
    from app.epl.walk import iter_nodes

    stmt = parse_statement(plan.epl)
    mr = next((n for n in iter_nodes(stmt) if isinstance(n, ast.MatchRecognize)), None)
    if mr is None:
        return "no partition by"
    alias = plan.pipeline.stream.alias if plan.pipeline.stream is not None else None
    for e in mr.partition_by:
        for n in iter_nodes(e):
            if isinstance(n, ast.SubSelect):
                return "partition by reads a subquery"
            if isinstance(n, ast.Name):
                parts = n.parts[1:] if alias and n.parts[0] == alias and len(n.parts) > 1 \
                    else n.parts
                if parts[0] not in props:
                    return (f"partition by reads '{'.'.join(n.parts)}', not a property "
                            "of the stream's events")
    return ""

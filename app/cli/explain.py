"""``kepl explain``: per statement, the operator chain, state, partitioning and topics."""

from __future__ import annotations

from typing import Any

from app.epl.errors import EplError
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog, NotSupported
from app.statements import StatementFile


def explain_file(sf: StatementFile) -> tuple[list[str], bool]:
    """Lines describing every statement of a file, and whether all were valid."""
    catalog = Catalog.from_schemas(sf.schemas, functions=sf.functions)
    out: list[str] = []
    for s in sf.statements:
        try:
            plan = plan_statement(catalog, s.epl, s.name)
        except EplError as e:
            out += [f"statement {s.name}: invalid", e.render()]
            return out, False
        except NotSupported as e:
            out.append(f"statement {s.name}: not supported yet: {e}")
            continue
        out += plan.explain()
        out += [f"  state: {line}" for line in _state_of(plan)]
        out += [f"  calls: {sf.functions[n].signature()}"
                for n in called_functions(s.epl, sf.functions)]
    topology = _topology(sf)
    if isinstance(topology, str):
        out.append(f"kafka: not runnable on Kafka: {topology}")
        return out, True
    return _with_topics(out, topology), True


def called_functions(epl: str, functions: dict[str, Any]) -> list[str]:
    """The declared user functions a statement calls (hash functions too), in order."""
    from app.epl import ast
    from app.epl.parser import parse_statement
    from app.epl.walk import iter_nodes

    if not functions:
        return []
    names: list[str] = []
    for n in iter_nodes(parse_statement(epl)):
        name = n.name if isinstance(n, ast.Call) else \
            n.function if isinstance(n, ast.HashItem) else None
        if name in functions and name not in names:
            names.append(name)
    return names


def _topology(sf: StatementFile) -> Any:
    """The Kafka layout of the file, or why it cannot run on Kafka."""
    from app.runtime.kafka.config import AppConfig, ConfigError
    from app.runtime.kafka.topology import Topology

    try:
        return Topology.plan(AppConfig.from_dict(sf.raw, sf.base_dir))
    except (ConfigError, NotSupported) as e:
        return str(e)


def _with_topics(lines: list[str], topology: Any) -> list[str]:
    """Insert each statement's Kafka lines at the end of its block."""
    out: list[str] = []
    current: str | None = None
    for line in [*lines, "statement <end> ()"]:
        if line.startswith("statement ") and current is not None:
            out += [f"  {t}" for t in topics_of(topology, current)]
            current = None
        if line.startswith("statement ") and "(" in line:
            current = line.split()[1]
        if line != "statement <end> ()":
            out.append(line)
    return out


def _state_of(plan: Any) -> list[str]:
    """Where the statement keeps state, per context partition."""
    if plan.kind != "query":
        return []
    p = plan.pipeline
    out = []
    if p.stream is not None and p.stream.view is not None:
        out.append(f"window {p.stream.view.describe()} (rows, O(1) writes per event)")
    if p.pattern is not None:
        out.append("pattern instances")
    if p.match_recognize is not None:
        out.append("match_recognize partial matches (one record per partition by key, "
                   "rewritten when its events arrive)"
                   + ("; the window's matched events (one key each)"
                      if p.match_recognize.bound else "")
                   + ("; matches held by the interval" if p.match_recognize.interval_ms
                      is not None else ""))
    if p.join is not None:
        for s in p.join.streams:
            if s.view is not None:
                out.append(f"window {s.view.describe()} of join stream {s.name} (rows, O(1) "
                           "writes per event)")
        if p.join.indexes:
            out.append("join indexes: in memory, rebuilt from the windows")
    for sq in p.subqueries:
        if sq.view is not None:
            kept = ("its aggregates, one record" if sq.incremental()
                    else "its index in memory, rebuilt from the window")
            out.append(f"subquery window {sq.view.describe()} of {sq.type_name} (rows; "
                       f"{kept})")
        elif sq.incremental():
            out.append(f"subquery aggregates over {sq.type_name} (one record)")
    if p.resultset.table is not None:
        out.append(f"aggregates in the rows of table {p.resultset.table} (one key per row)")
    elif p.resultset.aggregates:
        per = "per group" if p.resultset.group_by else "one record"
        out.append(f"aggregates {', '.join(a.text for a in p.resultset.aggregates)} ({per})")
    if p.output.limited:
        out.append("output buffer")
    return out or ["none (stateless)"]


def topics_of(topology: Any, name: str) -> list[str]:
    """Kafka topics a statement reads and writes, with partition counts, and where its
    events travel (the layout the worker uses: ``app.runtime.kafka.topology``)."""
    from app.runtime.kafka.topology import STATEMENT_KINDS, consumed_types

    config = topology.config
    counts = topology.source_counts
    lane = next((p for p in topology.lanes if p.name == name), None)
    if lane is not None:
        topic = config.topic_of(lane.pipeline.stream.type_name)
        n = counts.get(topic, 1)
        return [f"topic in  {topic} ({_count(n)})",
                "path  lane: runs on each source partition where it is read (stateless: "
                "no repartition, no state, rows at once)",
                f"topic out {config.output_topic(name)} ({_count(n)}, partition p from "
                "source partition p)"]
    for g in topology.groups.values():
        plan = next((p for p in g.plans if p.name == name), None)
        if plan is None or (plan.kind not in STATEMENT_KINDS and plan.kind != "context"):
            continue
        if plan.kind == "context" and g.context is None:
            return []
        types = (set(plan.context_spec.types()) if plan.kind == "context"
                 else consumed_types(plan)) & set(config.schemas)
        out = [f"topic in  {config.topic_of(t)} "
               f"({_count(counts.get(config.topic_of(t), 1))})" for t in sorted(types)]
        if g.direct:
            out.append(f"path  direct: source partition p feeds engine partition p "
                       f"({_count(g.partitions)}, no repartition hop)")
        else:
            if g.hash_spec is not None:
                fns = dict.fromkeys(i.function for i in g.hash_spec.items)
                how = f"by {', '.join(fns)} mod {g.partitions}"
            elif g.keyed_spec is not None:
                how = f"by crc32(key) mod {g.partitions}"
            elif g.split is not None:
                how = f"by crc32({g.split.kind} key) mod {g.partitions}"
            elif g.mr_keys is not None:
                how = f"by crc32(partition by key) mod {g.partitions}"
            else:
                how = "one engine"
            out.append(f"topic via {config.repartition_topic(g.name)} "
                       f"({_count(g.partitions)}, {how})")
            spec = g.hash_spec
            if (plan.kind == "context" and spec is not None and spec.preallocate and g.topics
                    and all(counts.get(t, 1) == g.partitions for t in g.topics)
                    and all(i.function.lower() == "consistent_hash_crc32" and not i.user
                            for i in spec.items)):
                out.append(f"note  its source topics have a partition per bucket: "
                           f"context_partitions {{{spec.name}: source}} reads them in "
                           "place, no repartition hop, when their producers key them by "
                           "the hashed value (librdkafka's default partitioner)")
        out.append(f"topic state {config.changelog_topic(g.name)} ({_count(g.partitions)})")
        route = _mr_routing(topology, g, plan)
        if route:
            out.append(route)
        if plan.kind in STATEMENT_KINDS:
            out.append(f"topic out {config.output_topic(name)} ({_count(g.partitions)})")
        out += _split_lines(topology, g, plan)
        out += _forwarding(topology, g, plan)
        ups = len(g.upstreams(0, topology.source_upstreams()))
        if ups > 1 and not g.fed_by:  # a fed group's wait: ``_forwarding``
            out.append(f"wait  events of {ups} source partitions merge in timestamp order "
                       "at each watermark: rows wait for it")
        return out
    return []


def _split_lines(topology: Any, g: Any, plan: Any) -> list[str]:
    """Whether a statement without a context is split over engine partitions by its
    group key, could be, or why not (``app.epl.planning.group_split``)."""
    from app.epl.planning.group_split import split_key
    from app.runtime.kafka.topology import feeder_for, feeding, split_of, split_schemas

    if plan.kind != "query" or plan.context is not None:
        return []
    if plan.pipeline is not None and plan.pipeline.match_recognize is not None:
        return []  # placed by its partition by (``_mr_routing``)
    feeder = next((f for f in g.split.feeders if f.statement == plan.name), None) \
        if g.split is not None else None
    if feeder is not None:
        return [f"split partitioned by {feeder.text} over {_count(g.partitions)} with the "
                f"statement reading {feeder.stream} (its {g.split.kind} key): each key's "
                "rows in order, numbered per key (context_partition = that key)"]
    if g.split is not None and g.split.kind != "group":
        kind = g.split.kind
        return [f"split partitioned by {kind} key ({g.split.describe()}) over "
                f"{_count(g.partitions)}: each key's rows in order, numbered per key "
                f"(context_partition = {kind} key); no order across keys"]
    if g.split is not None:
        return [f"split partitioned by group key ({g.split.describe()}) over "
                f"{_count(g.partitions)}: each group's rows in order, numbered per group "
                "(context_partition = group key); no order across groups"]
    schemas = split_schemas(topology.catalog, topology.config, topology.plans)
    forwarded = _forwarded_to(topology, plan, schemas)
    feeds = (_feeds(topology, plan, schemas) if plan.insert_into is not None
             and forwarded is None else None)
    if feeds is not None:
        return [feeds]
    split = split_of(plan, topology.plans, schemas, forwarded is not None)
    if isinstance(split, str):
        return [f"split not partitioned by {split_key(plan)} key: {split}"]
    # the statements inserting into a stream it reads split with it (``Feeder``)
    feeders = feeding(split, topology.plans, topology.config)
    if _reads_forwarded(topology, split, feeders):
        names = ", ".join(f"'{p.name}'" for p in feeders)
        return [f"split can be partitioned by {split.kind} key ({split.describe()}), "
                f"reading {split.type_name} through its repartition topic from the engine "
                f"partitions of {names}: statement_partitions: {{{plan.name}: N}}"]
    for p in feeders:
        found = feeder_for(split, p, topology.plans)
        if isinstance(found, str):
            return [f"split not partitioned by {split.kind} key: reads {p.insert_into}, "
                    f"which statement '{p.name}' inserts into: {found}"]
    named = ", ".join(f"{n}: N" for n in [*(p.name for p in feeders), plan.name])
    return [f"split can be partitioned by {split.kind} key ({split.describe()}): "
            f"statement_partitions: {{{named}}}"]


def _reads_forwarded(topology: Any, split: Any, feeders: list[Any]) -> bool:
    """Whether a split statement would read its one stream through its repartition
    topic (``topology.forwarded_streams``): no feeding statement splits with it."""
    from app.runtime.kafka.topology import Feeder, feeder_for

    return (bool(feeders) and not split.others
            and split.type_name not in topology.config.schemas
            and not any(isinstance(feeder_for(split, p, topology.plans), Feeder)
                        for p in feeders))


def _forwarded_to(topology: Any, plan: Any, schemas: dict[str, dict[str, str]]
                  ) -> str | None:
    """The splittable statement that would read what ``plan`` inserts into through its
    repartition topic, if one does."""
    from app.runtime.kafka.topology import consumed_types, feeding, split_of

    if plan.insert_into is None:
        return None
    for reader in topology.plans:
        if reader is plan or plan.insert_into not in consumed_types(reader):
            continue
        split = split_of(reader, topology.plans, schemas)
        if not isinstance(split, str) and _reads_forwarded(
                topology, split, feeding(split, topology.plans, topology.config)):
            return str(reader.name)
    return None


def _feeds(topology: Any, plan: Any, schemas: dict[str, dict[str, str]]) -> str | None:
    """How a statement inserting into a stream a splittable statement reads could split
    with it (``feed_split``), or why not; None when no such statement reads it."""
    from app.runtime.kafka.topology import consumed_types, feeder_for, split_of

    for reader in topology.plans:
        if reader is plan or plan.insert_into not in consumed_types(reader):
            continue
        split = split_of(reader, topology.plans, schemas,
                         _forwarded_to(topology, reader, schemas) is not None)
        if isinstance(split, str):
            continue
        found = feeder_for(split, plan, topology.plans)
        if isinstance(found, str):
            return f"split not partitioned with {reader.name}, which reads it: {found}"
        return (f"split can be partitioned by {found.text} with {reader.name}, which reads "
                f"it: statement_partitions: {{{plan.name}: N, {reader.name}: N}}")
    return None


def _forwarding(topology: Any, g: Any, plan: Any) -> list[str]:
    """What a statement forwards to a split statement of another group through that
    one's repartition topic, or what it reads so (``Group.forwards``, ``fed_by``)."""
    from app.runtime.kafka.topology import STATEMENT_KINDS

    config = topology.config
    out = []
    for reader in g.forwards.get(plan.insert_into or "", ()):
        b = topology.groups[reader]
        assert b.split is not None
        out.append(f"feed  {plan.insert_into} -> {config.repartition_topic(reader)} "
                   f"({_count(b.partitions)}, by crc32({b.split.describe()}) mod "
                   f"{b.partitions}): each event at its engine time, each watermark "
                   "after the events before it")
    if g.fed_by and plan.kind in STATEMENT_KINDS and g.split is not None \
            and plan.name in g.statements:
        fed = ", ".join(f"'{name}' ({_count(n)})" for name, n in g.fed_by)
        out.append(f"wait  reads {g.split.type_name} from the engine partitions of {fed}: "
                   "each event runs at its time once all of them passed it, in one "
                   "engine's order of its inserts (but a timer's inserts of one time from "
                   "two of them: in partition order)")
    return out


def _mr_routing(topology: Any, group: Any, plan: Any) -> str:
    """How a match_recognize statement's partition by spreads it on Kafka, or why it
    stays in one engine partition ("" for other statements)."""
    from app.runtime.kafka.mr_routing import mr_route_in

    p = plan.pipeline
    if plan.kind != "query" or p is None or p.match_recognize is None or plan.context:
        return ""  # (a statement of a context is placed by its context)
    if group.mr_keys is not None:
        return (f"route partition by: each key's events meet in one of "
                f"{_count(group.partitions)}, its partial matches in that partition's "
                "state")
    keys, why = mr_route_in(plan, topology.plans, topology.config.schemas)
    if keys is not None:
        return (f"route one engine partition; name '{plan.name}' in context_partitions "
                "to spread it by its partition by")
    return f"route one engine partition: {why}"


def _count(n: int) -> str:
    return f"{n} partition{'s' if n != 1 else ''}"

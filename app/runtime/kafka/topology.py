"""How an app's statements are laid out on Kafka: engine groups, routing, topics.

Statements are planned once and split into *groups*, each run by one engine agent over
its own repartition topic (docs/architecture.md, "An event's path on Kafka"):

- ``main``: every statement of no dedicated group (plain statements, category and
  temporal contexts, keyed contexts not named in ``context_partitions``), on a
  single-partition repartition topic so all events reach one Engine in a deterministic
  order;
- one group per hash context (``coalesce by consistent_hash_crc32(p) ... granularity
  N``): a repartition topic with exactly N partitions, an event going to partition
  ``crc32(str(p)) mod N`` (``HashSpec.partition_of``), so Kafka partition = bucket
  (Esper ref. 4.2.3); without ``preallocate`` ``context.id`` numbers the buckets in order of
  first use, as embedded (the router's touch entries, ``router.Routing.forward``);
- one group per keyed context named in ``context_partitions`` (``partition by p from
  T``, Esper ref. 4.2.2): a repartition topic with K partitions, an event going to partition
  ``crc32(key text) mod K`` where the key text is that of the event's key values
  (``key_text``: a lone string as is, else JSON).  All events of one key meet in one
  Engine, whose keyed manager holds the keys of its partition.  Output rows are
  identified by the key text (``kepl.context_partition``), not by ``context.id``, which
  numbers keys in order of first appearance within one engine partition;
- one group per statement named in ``statement_partitions``: a statement without a context
  split by its group key (``app.epl.planning.group_split`` says which can be), on N
  partitions, an event going to partition ``crc32(group key text) mod N``; each engine
  partition runs the whole statement over its groups, rows are numbered per group, and
  the router's touch arms a timed output in every partition at the statement's first
  update (``router.Routing.arm``).
- one group per match_recognize statement named in ``context_partitions``: routed like
  a keyed context by the key of its ``partition by`` (``mr_routing``; a statement that
  reads more than one key at a time is refused there); its rows are identified by the
  engine partition, as a hash context's by the bucket.

How a group is fed (the data plane, ``app.runtime.kafka.loop``):

- *direct*: engine partition p reads partition p of the group's source topics itself,
  with no repartition hop.  ``main`` is direct when each of its source topics has one
  partition; a keyed context is direct when ``context_partitions`` says ``source``
  (the producers already key the source topics by the context key), and so is a
  ``preallocate`` hash context whose source topics hold one partition per bucket, record
  partition = ``crc32(key) mod N`` (librdkafka's default partitioner); an event of another
  bucket there is dead-lettered (``Group.misplaced``);
- *repartitioned*: the worker's routing stage forwards each event to the group's
  repartition topic (in the same transaction as the source offsets), and the engine
  partitions read that.

Statements that keep no state at all (a filter and projection of one stream, no window,
aggregation, pattern, output limiting, table or assigned variable: ``is_stateless``) run
in *lanes*: one per source partition, in place, with no changelog.  Their rows depend
on one event each, so they flow without waiting for any barrier and scale with the
source partitions.

The statements of a context, and tables, variables and named windows declared with it,
go to its group; declarations without a context go to every group.  ``insert into`` a
stream consumed by another group is refused (a topic hop would break the single-Engine
ordering), and so is setting a variable without a context from a keyed group of several
partitions.
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from app.epl.planner import plan_statement
from app.epl.planning.group_split import (
    Feeder,
    GroupSplit,
    carried_properties,
    feed_split,
    group_split,
    split_key,
)
from app.runtime.catalog import Catalog, NotSupported
from app.runtime.kafka import client
from app.runtime.kafka.config import MAIN_GROUP, SOURCE, AppConfig, ConfigError
from app.runtime.kafka.eventtime import EventTime
from app.runtime.kafka.mr_routing import mr_route_in
from app.runtime.kafka.reads import assigned_variables as _assigned_variables
from app.runtime.kafka.reads import names_read as _names_read
from app.runtime.plan import StatementPlan
from operators.base import PartitionCtx, Row
from operators.contexts.managers import HashSpec, KeyedSpec, key_text, wrong_bucket

STATEMENT_KINDS = ("query", "window", "on")
"""Plan kinds that run per context partition and may emit rows."""


def consumed_types(plan: StatementPlan) -> set[str]:
    """Event types a statement reads (an on-action: its trigger type)."""
    if plan.kind == "on" and plan.action is not None:
        subs = plan.subqueries.subquery_types() if plan.subqueries is not None else frozenset()
        return {plan.action.trigger_type} | set(subs)
    if plan.pipeline is not None:
        return set(plan.pipeline.types())
    return set()


ROUTE_CACHE = 1 << 16


def keyed_text(spec: KeyedSpec, type_name: str, event: Row, ctx: PartitionCtx
               ) -> str | None:
    """Key text of an event under a keyed context; None if the context ignores it."""
    for item in spec.items:
        if item.type_name == type_name:
            break
    else:
        return None
    if item.filter is not None and not spec.lifecycle and not item.filter(event, ctx):
        # with a lifecycle, an event failing the filter may still start (initiated by)
        # or end (terminated by) its key's partition: it goes to its key's engine
        return None
    keys = item.keys
    if len(keys) == 1:
        v = keys[0](event, ctx)
        if type(v) is str:
            return v  # key_text of a lone string is the string
        return key_text([v])
    return key_text([k(event, ctx) for k in keys])


@dataclass
class Group:
    """Statements run by one engine agent, and how events find their partition."""

    name: str
    partitions: int
    plans: list[StatementPlan] = field(default_factory=list)
    types: set[str] = field(default_factory=set)
    hash_spec: HashSpec | None = None
    keyed_spec: KeyedSpec | None = None
    split: GroupSplit | None = None
    """A statement without a context split by its group key (``statement_partitions``)."""
    direct: bool = False
    """Engine partition p reads source partition p of ``topics`` (no repartition hop)."""
    topics: list[str] = field(default_factory=list)
    """Source topics of the group's event types, sorted."""
    mr_keys: tuple[Any, ...] | None = None
    """A match_recognize statement's partition-by expressions (its own group)."""
    mr_statement: str | None = None
    """That statement's name."""
    event_time: Any = None
    """The app's ``EventTime`` (None: time from ``kepl clock``): engine partitions hold
    events until a watermark reaches their time."""
    posting: list[str] = field(default_factory=list)
    """Variable statements whose variable this group's statements assign: each write
    posts a row (Esper: a create-variable statement's listeners get every write)."""
    resets: tuple[int, dict[str, int]] | None = None
    """(deployed version, statement -> the version that started its state empty): set
    from the app's deployment record (``deployments.apply_resets``)."""
    replays: dict[str, int] = field(default_factory=dict)
    """Statement -> the version that rebuilt it from-earliest (``rebuild``)."""
    forwards: dict[str, list[str]] = field(default_factory=dict)
    """Stream this group's statements insert into -> the groups whose split statements
    read it through their repartition topic (``forwarded_streams``)."""
    fed_by: list[tuple[str, int]] = field(default_factory=list)
    """The groups (name, partitions) whose engine partitions forward this group its
    events: its only upstreams."""
    _ctx: PartitionCtx = field(default_factory=PartitionCtx, repr=False)
    _routes: dict[str, int] = field(default_factory=dict, repr=False)
    """Key text -> partition, for the keys seen lately (bounded by ``ROUTE_CACHE``)."""

    def upstreams(self, partition: int, all_sources: list[str]) -> list[str]:
        """``topic:partition`` names whose barriers engine partition ``partition`` waits
        for: its own source partitions when direct, the engine partitions of the groups
        feeding it (``group/partition``), else every source partition."""
        if self.fed_by:
            return sorted(f"{g}/{q}" for g, n in self.fed_by for q in range(n))
        if self.direct:
            return sorted(f"{t}:{partition}" for t in self.topics)
        return all_sources

    @property
    def context(self) -> str | None:
        """The context this group is dedicated to (None: ``main``)."""
        spec = self.hash_spec or self.keyed_spec
        return spec.name if spec is not None else None

    @property
    def numbers_first_use(self) -> bool:
        """A hash context without ``preallocate``: its ids follow the first use of the
        buckets, so the routing stage tells every partition of them (``touch``)."""
        return self.hash_spec is not None and not self.hash_spec.preallocate

    @property
    def statements(self) -> list[str]:
        """Names of the statements that may emit rows (each has an output topic)."""
        return [p.name for p in self.plans if p.kind in STATEMENT_KINDS] + self.posting

    def partition_of(self, type_name: str, event: Row) -> int | None:
        """Kafka partition of the repartition topic for an event, None if not for us."""
        if type_name not in self.types:
            return None
        if self.hash_spec is not None:
            return self.hash_spec.partition_of(type_name, event, self._ctx)
        if self.keyed_spec is not None or self.mr_keys is not None:
            if self.mr_keys is not None:
                ctx = self._ctx
                text = key_text([k(event, ctx) for k in self.mr_keys])
            else:
                text = keyed_text(self.keyed_spec, type_name, event, self._ctx)
            if text is None:
                return None
            q = self._routes.get(text)
            return self._new_route(text) if q is None else q
        if self.split is not None:
            return self._split_partition(type_name, event)
        return 0

    def partition_fn(self, type_name: str) -> Callable[[Row], int | None]:
        """``partition_of`` for events of one type, as one function: a keyed context or a
        statement split by group key on one property of the type, without a filter,
        reads it and finds its partition in one call; a hash context asks its spec."""
        if type_name not in self.types or self.mr_keys is not None:
            return partial(self.partition_of, type_name)
        hashed, keyed = self.hash_spec, self.keyed_spec
        if hashed is not None:
            return self._hash_fn(type_name)
        keys: tuple[Any, ...] = ()
        if keyed is not None:
            item = next((it for it in keyed.items if it.type_name == type_name), None)
            if item is not None and item.filter is None:
                keys = item.keys
        elif self.split is not None:
            route = self.split.route(type_name)
            if route is not None and route.filter is None:
                keys = route.keys
        prop = getattr(keys[0], "property_name", None) if len(keys) == 1 else None
        if prop is None:
            return partial(self.partition_of, type_name)
        cache, new_route = self._routes, self._new_route
        lone = keyed is not None  # a keyed context's lone string is its own text (keyed_text)

        def one_property(event: Row) -> int:
            v = event.get(prop)
            text = v if lone and type(v) is str else key_text([v])
            q = cache.get(text)
            return new_route(text) if q is None else q
        return one_property

    def _hash_fn(self, type_name: str) -> Callable[[Row], int | None]:
        """A hash context's ``partition_of`` for events of one type; where one unfiltered
        built-in hash of a property decides, the bucket of each string value is
        remembered (bounded by ``ROUTE_CACHE``), as a keyed context's route is."""
        hashed, ctx = self.hash_spec, self._ctx
        assert hashed is not None
        items = [it for it in hashed.items if it.type_name == type_name]
        prop = (getattr(items[0].expr, "property_name", None)
                if len(items) == 1 and items[0].filter is None and not items[0].user
                else None)
        if prop is None:
            return lambda event: hashed.partition_of(type_name, event, ctx)
        buckets: dict[str, int | None] = {}
        of = hashed.partition_of

        def by_property(event: Row) -> int | None:
            v = event.get(prop)
            if type(v) is not str:
                return of(type_name, event, ctx)
            b = buckets.get(v, -1)
            if b == -1:
                if len(buckets) >= ROUTE_CACHE:
                    buckets.clear()
                b = buckets[v] = of(type_name, event, ctx)
            return b
        return by_property

    def misplaced(self, type_name: str
                  ) -> Callable[[list[Row], int], tuple[int, str | None]] | None:
        """A hash context read in place (direct): for events of ``type_name`` read from
        source partition p, the index of the first that does not belong there (its bucket
        is not p) and why, or (their count, None); None where no check applies."""
        spec = self.hash_spec
        if spec is None or not self.direct or type_name not in self.types:
            return None
        bucket_of = self.partition_fn(type_name)

        def check(events: list[Row], p: int) -> tuple[int, str | None]:
            buckets = list(map(bucket_of, events))
            if buckets.count(p) + buckets.count(None) == len(buckets):
                return len(buckets), None
            j, b = next((j, b) for j, b in enumerate(buckets) if b is not None and b != p)
            return j, wrong_bucket(spec, type_name, b, p)
        return check

    def _new_route(self, text: str) -> int:
        """Partition of a key text not in the cache: ``crc32(text) mod N``, cached."""
        cache = self._routes
        if len(cache) >= ROUTE_CACHE:
            cache.clear()
        q = cache[text] = zlib.crc32(text.encode()) % self.partitions
        return q

    def _split_partition(self, type_name: str, event: Row) -> int | None:
        """Partition of a split statement's event: ``crc32(key text) mod N``."""
        assert self.split is not None
        text = self.split.key_of_event(event, self._ctx, type_name)
        if text is None:
            return None
        q = self._routes.get(text)
        return self._new_route(text) if q is None else q

    @property
    def arms(self) -> bool:
        """A split statement whose timed output is armed by its first update: the
        router tells every partition of it (``router.Routing.forward``)."""
        return self.split is not None and self.split.arms


LANES = "lanes"
"""Progress-key prefix of the stateless lanes (``lanes/<topic>:<partition>``)."""


def is_stateless(plan: StatementPlan, assigned: set[str]) -> bool:
    """Whether a statement's rows depend on the current event alone (a lane can run it).

    ``assigned``: variables some statement of the app assigns (reading one is state).
    """
    if plan.kind != "query" or plan.context is not None or plan.pipeline is None:
        return False
    p = plan.pipeline
    rs, out = p.resultset, p.output
    if (p.stream is None or p.stream.view is not None or p.pattern is not None
            or p.subqueries or p.match_recognize is not None or p.distinct or out.limited
            or out.when_terminated
            or out.after_ms is not None or out.after_events is not None):
        return False
    if (rs.aggregates or rs.group_by or rs.having is not None or rs.table is not None
            or rs.order_by or rs.limit is not None):
        return False
    if plan.tables or plan.insert_into is not None or plan.window is not None:
        return False
    return not (assigned and _names_read(plan) & assigned)


@dataclass
class Topology:
    """Planned statements of an app, grouped for the engine agents."""

    config: AppConfig
    catalog: Catalog
    groups: dict[str, Group]
    plans: list[StatementPlan] = field(default_factory=list)
    lanes: list[StatementPlan] = field(default_factory=list)
    """Stateless statements, run per source partition (``is_stateless``)."""
    source_counts: dict[str, int] = field(default_factory=dict)
    """Partitions per source topic (the broker's, or as the file declares them)."""

    @classmethod
    def plan(cls, config: AppConfig, source_counts: dict[str, int] | None = None
             ) -> Topology:
        """Plan every statement (errors surface here, before any topic is touched).

        ``source_counts``: partitions of each source topic as the broker has them
        (default: ``partitions`` of the statement file for every source topic).
        """
        counts = {t: config.source_partitions for t in config.source_topics}
        counts.update(source_counts or {})
        catalog = Catalog.from_schemas(config.schemas, config.max_string_length,
                                         config.functions)
        plans = [plan_statement(catalog, s.epl, s.name) for s in config.statements]
        assigned = set().union(*(_assigned_variables(p) for p in plans))
        # an event a @Drop statement takes must not reach those after it: statements of a
        # type a @Drop statement reads run in the engine, in priority order, not as lanes
        dropped = {t for p in plans if p.drop and p.pipeline is not None
                   for t in p.pipeline.types()}
        # a type with a topic that statements also insert into has events of both: its
        # readers run in the engine, where the inserted ones arrive
        inserted = {p.insert_into for p in plans if p.insert_into is not None}
        lanes = [p for p in plans if p.pipeline is not None and is_stateless(p, assigned)
                 and p.pipeline.stream.type_name in config.schemas
                 and p.pipeline.stream.type_name not in dropped | inserted]
        lane_names = {p.name for p in lanes}
        groups: dict[str, Group] = {MAIN_GROUP: Group(MAIN_GROUP, 1)}
        owner: dict[str, str] = {}  # context name -> its dedicated group
        for p in plans:
            spec = p.context_spec if p.kind == "context" else None
            if isinstance(spec, HashSpec):
                n = config.context_partitions.get(spec.name)
                if n is not None and n != SOURCE:
                    raise ConfigError(
                        f"context_partitions: '{spec.name}' is a hash context; its "
                        "granularity sets its partitions (or 'source': its source topics "
                        "are partitioned by its hash)")
                if n == SOURCE:
                    _check_source_hash(config, spec, counts)
                g = Group(_group_name(spec.name, groups), spec.granularity, hash_spec=spec)
            elif isinstance(spec, KeyedSpec) and spec.name in config.context_partitions:
                _check_keyed_lifecycle(spec)
                n = config.context_partitions[spec.name]
                if n == SOURCE:
                    g = _source_keyed_group(config, spec, counts, groups)
                else:
                    g = Group(_group_name(spec.name, groups), int(n), keyed_spec=spec)
            else:
                continue
            groups[g.name] = g
            owner[spec.name] = g.name
        split_owner, forwarded = _split_groups(config, plans, groups, catalog)
        declared = {p.context_spec.name for p in plans if p.kind == "context"}
        by_statement: dict[str, str] = {}  # match_recognize statement -> its group
        for p in plans:
            n = config.context_partitions.get(p.name)
            if n is None or p.kind not in STATEMENT_KINDS:
                continue
            if p.name in declared:
                raise ConfigError(f"context_partitions: '{p.name}' names both a context "
                                  "and a statement")
            g = _statement_group(config, p, n, counts, groups, plans)
            groups[g.name] = g
            by_statement[p.name] = g.name
        for name in config.context_partitions:
            if name in by_statement:
                continue
            if name not in declared:
                raise ConfigError(f"context_partitions: no context named '{name}'")
            if name not in owner:
                raise ConfigError(f"context_partitions: '{name}' is not a keyed context "
                                  "(only 'partition by' contexts are repartitioned by key)")
        for p in plans:
            if p.kind == "context":
                g = groups[owner.get(p.context_spec.name, MAIN_GROUP)]
                g.plans.append(p)
                types = getattr(p.context_spec, "types", None)
                if types is not None:
                    g.types |= set(types())
            elif p.name in lane_names:
                continue
            elif p.kind in STATEMENT_KINDS:
                g = groups[split_owner.get(p.name) or by_statement.get(p.name)
                           or owner.get(p.context or "", MAIN_GROUP)]
                g.plans.append(p)
                g.types |= consumed_types(p)
            elif p.context in owner:  # a table or variable of a context: its group only
                groups[owner[p.context]].plans.append(p)
            else:  # declarations (variables, tables, schemas): every engine needs them
                for g in groups.values():
                    g.plans.append(p)
        for g in groups.values():
            written = set().union(*(_assigned_variables(p) for p in g.plans
                                    if p.kind in STATEMENT_KINDS))
            g.posting = [p.name for p in g.plans
                         if p.kind == "variable" and (p.variable or p.name) in written]
            g.types &= set(config.schemas)  # insert-into streams never come from Kafka
            g.topics = sorted({config.topic_of(t) for t in g.types})
        for g in groups.values():
            g.event_time = config.event_time
        _forward(plans, groups, split_owner, forwarded)
        main = groups[MAIN_GROUP]
        main.direct = all(counts.get(t, 1) == 1 for t in main.topics)
        for g in groups.values():
            spec = g.keyed_spec or g.hash_spec
            if spec is not None and config.context_partitions.get(spec.name) == SOURCE:
                g.direct = True
            if g.mr_statement is not None and config.context_partitions.get(
                    g.mr_statement) == SOURCE:
                g.direct = True
        _check_insert_into(plans, groups)
        _check_shared_state(groups)
        _check_global_tables(groups)
        _check_global_variables(plans, groups)
        return cls(config, catalog, groups, plans, lanes, counts)

    def active_groups(self) -> list[Group]:
        """Groups that run at least one query (the others need no agent)."""
        return [g for g in self.groups.values() if g.statements]

    def routed_groups(self) -> list[Group]:
        """Active groups fed through their repartition topic."""
        return [g for g in self.active_groups() if not g.direct]

    def lane_types(self) -> set[str]:
        """Event types some stateless lane statement reads."""
        return {p.pipeline.stream.type_name for p in self.lanes}

    def source_upstreams(self) -> list[str]:
        """Every source partition as ``topic:partition``, sorted (barrier upstreams)."""
        return sorted(f"{t}:{p}" for t in self.config.source_topics
                      for p in range(self.source_counts.get(t, 1)))

    def progress_keys(self) -> list[str]:
        """Keys on the progress topic of everything that reports barriers."""
        keys = [f"{g.name}/{p}" for g in self.active_groups() for p in range(g.partitions)]
        lane_topics = sorted({self.config.topic_of(t) for t in self.lane_types()})
        keys += [f"{LANES}/{t}:{p}" for t in lane_topics
                 for p in range(self.source_counts.get(t, 1))]
        return keys

    def output_topics(self) -> dict[str, tuple[str, int]]:
        """Statement name -> (output topic, partitions)."""
        out: dict[str, tuple[str, int]] = {}
        for g in self.active_groups():
            for s in g.statements:
                out[s] = (self.config.output_topic(s), g.partitions)
        for p in self.lanes:
            topic = self.config.topic_of(p.pipeline.stream.type_name)
            out[p.name] = (self.config.output_topic(p.name), self.source_counts.get(topic, 1))
        return out

    def topic_specs(self) -> dict[str, tuple[int, dict[str, str]]]:
        """Every topic the app needs: name -> (partitions, topic config, with the
        replication factor under ``REPLICATION``).

        Changelog topics are not compacted: a record is one batch of writes chained to
        the one before it (``store.ChangelogRecord.prev``), not the value of a key, so
        compaction would break the chain; snapshots bound them instead, deleting the
        records a complete snapshot made obsolete.

        Source topics kepl creates keep their records: no time or size retention
        (``SOURCE_CONFIG``).  kepl's producers stamp records with the runtime time (the
        demo, ``kepl scenario run --kafka``, the watermarks ``kepl clock`` writes into
        every source partition), near 0 = 1970 for a clock that starts at 0, and a
        worker merges the records of several source partitions by that timestamp
        (``partition.EnginePartition._release``), so the timestamps stay the
        producer's (``CreateTime``) and the broker's retention (7 days by default)
        would delete such records at its next check, before a worker read them.  A
        source topic that exists is left as it is.
        """
        forever = {"retention.ms": "-1", "retention.bytes": "-1"}
        # changelog records hold a whole batch: allow big ones, and never let time or size
        # retention delete them (workers delete what snapshots made obsolete); segments
        # no bigger than a record may be, so that deleted records free their disk soon
        big = str(64 * 1024 * 1024)
        keep = {**forever, "max.message.bytes": big, "segment.bytes": big}
        c = self.config
        # replication: every topic kepl creates; min.insync.replicas: the internal ones
        rf = {REPLICATION: str(c.replication_factor)}
        isr = ({"min.insync.replicas": str(c.min_insync_replicas)}
               if c.min_insync_replicas is not None else {})
        specs: dict[str, tuple[int, dict[str, str]]] = {}
        for t in c.source_topics:
            specs[t] = (c.source_partitions, {**rf, **SOURCE_CONFIG})
        for g in self.active_groups():
            if not g.direct:
                specs[c.repartition_topic(g.name)] = (g.partitions, {**rf, **isr})
            specs[c.changelog_topic(g.name)] = (g.partitions, {**rf, **isr, **keep})
        for topic, parts in self.output_topics().values():
            specs.setdefault(topic, (parts, dict(rf)))
        specs[c.watermark_topic] = (1, {**rf, **isr})
        specs[c.progress_topic] = (1, {**rf, **isr, "cleanup.policy": "compact"})
        specs[c.dlq_topic] = (1, dict(rf))
        return specs


SOURCE_CONFIG = {"retention.ms": "-1", "retention.bytes": "-1",
                 "message.timestamp.type": "CreateTime"}
"""Topic settings of the source topics kepl creates (``Topology.topic_specs``)."""


def split_of(plan: StatementPlan, plans: list[StatementPlan],
             schemas: dict[str, dict[str, str]] | None = None,
             forwarded: bool = False) -> GroupSplit | str:
    """How a statement splits by its group key (a join: its join key), or why it cannot
    (``group_split``); ``schemas``: the app's event types; ``forwarded``: its insert into
    is read through a repartition topic (``forwarded_streams``)."""
    from app.epl.parser import parse_statement

    if plan.kind != "query":
        return "not a select statement"
    variables = {p.variable or p.name for p in plans if p.kind == "variable"}
    return group_split(plan, parse_statement(plan.epl), variables, schemas, forwarded)


def split_schemas(catalog: Catalog, config: AppConfig,
                  plans: list[StatementPlan] = ()) -> dict[str, dict[str, str]]:
    """The properties of the app's event types and ``insert into`` streams: a split
    statement may read a stream another statement inserts into (``Feeder``).  A stream
    column that is a property of its producer's event has that property's type."""
    from app.epl.parser import parse_statement

    streams = {t: dict(props) for t, props in catalog.streams.items()}
    for p in plans:
        if p.kind not in STATEMENT_KINDS or p.insert_into not in streams \
                or p.pipeline is None or p.pipeline.stream is None:
            continue
        source = config.schemas.get(p.pipeline.stream.type_name, {})
        for name, prop in carried_properties(p, parse_statement(p.epl)).items():
            if prop in source and streams[p.insert_into].get(name) in (None, "any"):
                streams[p.insert_into][name] = source[prop]
    return {**streams, **config.schemas}


def feeding(split: GroupSplit, plans: list[StatementPlan], config: AppConfig
            ) -> list[StatementPlan]:
    """The statements inserting into the streams (not event types) a split reads."""
    read = {split.type_name, *(r.type_name for r in split.others)} - set(config.schemas)
    return [p for p in plans if p.kind in STATEMENT_KINDS and p.insert_into in read]


def feeder_for(split: GroupSplit, p: StatementPlan, plans: list[StatementPlan]
               ) -> Feeder | str:
    """How statement ``p``, inserting into a stream ``split`` reads, splits with it
    (``feed_split``), or why it cannot."""
    from app.epl.parser import parse_statement

    key = split.property_of(p.insert_into or "")
    if key is None:
        return f"its key on {p.insert_into} is not one property"
    if split.arms:
        return ("its output or #time_batch is armed by its first update, which the events "
                "of a statement feeding it do not route")
    variables = {q.variable or q.name for q in plans if q.kind == "variable"}
    return feed_split(p, parse_statement(p.epl), p.insert_into or "", key, variables)


def _split_groups(config: AppConfig, plans: list[StatementPlan], groups: dict[str, Group],
                  catalog: Catalog) -> tuple[dict[str, str], dict[str, str]]:
    """A group per statement of ``statement_partitions`` (with the statements feeding it
    its ``insert into`` streams); returns statement name -> group name, and each stream
    forwarded to split statements through their repartition topics -> those statements
    (``forwarded_streams``)."""
    by_name = {p.name: p for p in plans}
    for name in config.statement_partitions:
        if name not in by_name:
            raise ConfigError(f"statement_partitions: no statement named '{name}'")
    schemas = split_schemas(catalog, config, plans)
    forwarded: dict[str, list[str]] = {}
    # a statement may split once what it inserts into is forwarded, and then be read
    # through a repartition topic itself: until nothing changes
    for _ in range(len(config.statement_partitions) + 1):
        splits = {name: split_of(by_name[name], plans, schemas,
                                 by_name[name].insert_into in forwarded)
                  for name in config.statement_partitions}
        found = forwarded_streams(config, plans, splits)
        if found == forwarded:
            break
        forwarded = found
    fed: dict[str, str] = {}  # feeding statement -> the split statement it runs with
    for name, n in config.statement_partitions.items():
        split = splits[name]
        if not isinstance(split, GroupSplit) or any(name in r for r in forwarded.values()):
            continue
        feeders = _feeders(config, plans, name, n, split)
        if feeders:
            splits[name] = replace(split, feeders=feeders)
            fed.update((f.statement, name) for f in feeders)
    out: dict[str, str] = {}
    for name, n in config.statement_partitions.items():
        if name in fed:
            continue
        split = splits[name]
        if isinstance(split, str):
            raise ConfigError(f"statement_partitions: statement '{name}' cannot be split by "
                              f"its {split_key(by_name[name])} key: {split}"
                              + _nor_with(config, plans, by_name[name], splits, forwarded))
        g = Group(_group_name(name, groups), n, split=split)
        groups[g.name] = g
        out[name] = g.name
    for feeder, name in fed.items():
        out[feeder] = out[name]
    return out, forwarded


def _nor_with(config: AppConfig, plans: list[StatementPlan], plan: StatementPlan,
              splits: dict[str, GroupSplit | str], forwarded: dict[str, list[str]]) -> str:
    """Why a statement that cannot split by its own key cannot split with the (first)
    statement reading its ``insert into`` either ("" if none reads it through its
    repartition topic)."""
    reader = next(iter(forwarded.get(plan.insert_into or "", [])), None)
    split = splits.get(reader or "")
    if not isinstance(split, GroupSplit):
        return ""
    found = feeder_for(split, plan, plans)
    n = config.statement_partitions[reader or ""]
    if isinstance(found, Feeder):
        found = (f"name '{plan.name}' in statement_partitions with {n} partitions too, to "
                 "split it by the same key")
    return f"; nor with '{reader}', which reads {plan.insert_into}: {found}"


def forwarded_streams(config: AppConfig, plans: list[StatementPlan],
                      splits: dict[str, GroupSplit | str]) -> dict[str, list[str]]:
    """Streams read through a repartition topic: stream -> the split statements reading
    it so, each through its own.

    A split statement that reads one ``insert into`` stream and nothing else, none of
    whose feeding statements can split with it (``feeder_for``, with the same
    partitions), is fed by the engine partitions of the feeding statements' groups
    whatever they are: each inserted event goes to the repartition partition of its key,
    and each watermark those partitions complete follows it there, so the reader merges
    them in time order (``partition.EnginePartition._on_export``); the first event of
    each that updates a reader whose timed output its first update arms also arms the
    reader's other partitions (``_arm_reader``)."""
    out: dict[str, list[str]] = {}
    for name, n in config.statement_partitions.items():
        split = splits.get(name)
        if not isinstance(split, GroupSplit) or split.others \
                or split.type_name in config.schemas:
            continue
        feeders = feeding(split, plans, config)
        if feeders and all(p.name != name for p in feeders) and not any(
                config.statement_partitions.get(p.name) == n
                and isinstance(feeder_for(split, p, plans), Feeder) for p in feeders):
            out.setdefault(split.type_name, []).append(name)
    return out


def _forward(plans: list[StatementPlan], groups: dict[str, Group],
             split_owner: dict[str, str], forwarded: dict[str, list[str]]) -> None:
    """Link each group inserting into a forwarded stream with the groups reading it."""
    owner = {p.name: g for g in groups.values() for p in g.plans
             if p.kind in STATEMENT_KINDS}
    for stream, readers in forwarded.items():
        for reader in readers:
            b = groups[split_owner[reader]]
            b.types.add(stream)
            b.event_time = b.event_time or EventTime()
            for p in plans:
                if p.kind not in STATEMENT_KINDS or p.insert_into != stream:
                    continue
                a = owner[p.name]
                if b.name not in a.forwards.setdefault(stream, []):
                    a.forwards[stream].append(b.name)
                if (a.name, a.partitions) not in b.fed_by:
                    b.fed_by.append((a.name, a.partitions))


def _feeders(config: AppConfig, plans: list[StatementPlan], name: str, n: int,
             split: GroupSplit) -> tuple[Feeder, ...]:
    """The statements inserting into the streams split statement ``name`` reads, each
    split with it by the property its key reads (``feeder_for``); a ``ConfigError`` says
    why one cannot be."""
    out: list[Feeder] = []
    for p in feeding(split, plans, config):
        found = feeder_for(split, p, plans)
        if isinstance(found, Feeder):
            routed = {split.type_name: "", **{r.type_name: "" for r in split.others},
                      **{f.route.type_name: f.text for f in out}}
            if config.statement_partitions.get(p.name) != n:
                found = (f"name '{p.name}' in statement_partitions with {n} partitions too, "
                         "to split it by the same key")
            elif routed.get(found.route.type_name, found.text) != found.text:
                found = (f"{found.route.type_name} is routed by another key already "
                         "(an event is routed by one key)")
        if isinstance(found, str):
            raise ConfigError(f"statement_partitions: statement '{name}' reads "
                              f"{p.insert_into}, which statement '{p.name}' inserts into: "
                              f"{found}")
        out.append(found)
    return tuple(out)


def _source_keyed_group(config: AppConfig, spec: KeyedSpec, counts: dict[str, int],
                        groups: dict[str, Any]) -> Group:
    """A keyed context run in place on its source partitions (``context_partitions:
    {C: source}``): every source topic of its types must have the same partitions."""
    topics = sorted({config.topic_of(t) for t in spec.types() if t in config.schemas})
    have = {t: counts.get(t, 1) for t in topics}
    if len(set(have.values())) > 1:
        listed = ", ".join(f"{t} ({_partitions(n)})" for t, n in have.items())
        raise ConfigError(f"context_partitions: '{spec.name}' is 'source' but its topics "
                          f"differ in partitions: {listed}; they must be co-partitioned")
    n = next(iter(have.values()), 1)
    return Group(_group_name(spec.name, groups), n, keyed_spec=spec)


def _check_source_hash(config: AppConfig, spec: HashSpec, counts: dict[str, int]) -> None:
    """A hash context read in place (``context_partitions: {H: source}``): partition p of
    each source topic must hold bucket p, so every topic of its types has exactly
    ``granularity`` partitions; and ``preallocate``, since numbering buckets by first use
    needs the routing stage, which alone sees every bucket (Esper ref. 4.2.3)."""
    if not spec.preallocate:
        raise ConfigError(
            f"context_partitions: hash context '{spec.name}' is 'source' but not "
            "preallocate: its context.id numbers the buckets in order of first use, which "
            "only the routing stage sees; add preallocate or leave it out of "
            "context_partitions")
    topics = sorted({config.topic_of(t) for t in spec.types() if t in config.schemas})
    wrong = {t: counts.get(t, 1) for t in topics if counts.get(t, 1) != spec.granularity}
    if wrong:
        listed = ", ".join(f"{t} ({_partitions(n)})" for t, n in wrong.items())
        raise ConfigError(
            f"context_partitions: hash context '{spec.name}' is 'source' but its "
            f"granularity is {spec.granularity} and {listed}: each source topic must have "
            "one partition per bucket")


def _statement_group(config: AppConfig, plan: StatementPlan, n: int | str,
                     counts: dict[str, int], groups: dict[str, Any],
                     plans: list[StatementPlan]) -> Group:
    """The group of a match_recognize statement named in ``context_partitions``: its
    events routed by its partition-by key (``source``: the source topics are already
    partitioned by it), or a ``ConfigError`` saying why it must stay in one engine."""
    keys, why = mr_route_in(plan, plans, config.schemas)
    if keys is None:
        raise ConfigError(f"context_partitions: statement '{plan.name}' cannot be spread "
                          f"over engine partitions by its partition by: {why}")
    if n == SOURCE:
        topic = config.topic_of(plan.pipeline.stream.type_name)
        n = counts.get(topic, 1)
    return Group(_group_name(plan.name, groups), int(n), mr_keys=keys,
                 mr_statement=plan.name)


def _check_keyed_lifecycle(spec: KeyedSpec) -> None:
    """A keyed context partitioned by key on Kafka sees only the events of its keys: an
    event type of its terminating condition that ``partition by`` does not list ends the
    partitions of every key (Esper's keyed termination), so it would have to reach every
    engine partition.  Such a context runs in ``main`` only."""
    unkeyed = spec.unkeyed_types()
    if unkeyed:
        raise NotSupported(
            f"context_partitions: keyed context '{spec.name}' is terminated by "
            f"{', '.join(sorted(unkeyed))}, an event type not listed in its partition by: "
            "that event ends the partitions of every key and cannot be routed to one key's "
            "engine partition (Kafka mode); leave the context out of context_partitions "
            "or list the type in partition by")


def _group_name(ctx_name: str, groups: dict[str, Any]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]", "_", ctx_name) or "ctx"
    name = base if base != MAIN_GROUP else f"{base}_"
    while name in groups:
        name += "_"
    return name


def _check_insert_into(plans: list[StatementPlan], groups: dict[str, Group]) -> None:
    owner = {p.name: g.name for g in groups.values() for p in g.plans
             if p.kind in STATEMENT_KINDS}
    for p in plans:
        if p.kind not in STATEMENT_KINDS or p.insert_into is None:
            continue
        mine = groups.get(owner.get(p.name, ""))
        for g in groups.values():
            if g is mine or (mine is not None
                             and g.name in mine.forwards.get(p.insert_into, ())):
                continue  # the same engine, or fed through its repartition topic
            if any(p.insert_into in consumed_types(q) or q.window == p.insert_into
                   for q in g.plans if q.kind in STATEMENT_KINDS):
                raise NotSupported(
                    f"insert into '{p.insert_into}' consumed under another context "
                    f"partitioning (engine group '{g.name}', Kafka mode)")


def _tables_used(p: StatementPlan) -> set[str]:
    """Tables a statement reads or writes (into table, table access, on-actions)."""
    used = set(p.tables)
    if p.kind == "on" and p.action is not None and getattr(p.action, "target", "") == "table":
        used.add(p.action.window)
    return used


def _partitions(n: int) -> str:
    return f"{n} partition{'s' if n != 1 else ''}"


def _check_global_tables(groups: dict[str, Group]) -> None:
    """A table without a context is one table (Esper ref. 4.7); on Kafka it lives in the state
    of one engine partition, so only statements of one single-partition group may use it."""
    users: dict[str, set[str]] = {}
    for g in groups.values():
        declared = {p.table.name for p in g.plans
                    if p.kind == "table" and p.table is not None and p.context is None}
        for p in g.plans:
            if p.kind in STATEMENT_KINDS:
                for t in _tables_used(p) & declared:
                    users.setdefault(t, set()).add(g.name)
    for table, names in users.items():
        multi = [n for n in names if groups[n].partitions > 1]
        if len(names) > 1 or multi:
            where = ", ".join(f"'{n}' ({_partitions(groups[n].partitions)})"
                              for n in sorted(names))
            raise NotSupported(
                f"table '{table}' has no context and is used by statements of engine group "
                f"{where}: on Kafka such a table lives in one engine partition; declare it "
                "with the statements' context or use it from one single-partition group")


def _check_global_variables(plans: list[StatementPlan], groups: dict[str, Group]) -> None:
    """A variable without a context has one value (Esper ref. 4.8); on Kafka each engine
    partition keeps a copy, so one assigned in one group must not be read in another."""
    globals_ = {p.variable or p.name for p in plans if p.kind == "variable" and p.context is None}
    for g in groups.values():
        assigned = set().union(*(_assigned_variables(p) for p in g.plans
                                 if p.kind in STATEMENT_KINDS)) & globals_
        if not assigned:
            continue
        if g.partitions > 1:
            raise NotSupported(
                f"variable '{sorted(assigned)[0]}' has no context and is assigned in engine "
                f"group '{g.name}' of {g.partitions} partitions: on Kafka each partition "
                "keeps its own copy; declare it with the context")
        for other in groups.values():
            if other is g:
                continue
            for p in other.plans:
                if p.kind not in STATEMENT_KINDS and p.kind != "context":
                    continue
                read = _names_read(p) & assigned
                if read:
                    name = sorted(read)[0]
                    raise NotSupported(
                        f"variable '{name}' has no context, is assigned in engine group "
                        f"'{g.name}' and read by statement '{p.name}' of engine group "
                        f"'{other.name}': on Kafka each engine keeps its own copy; declare it "
                        "with the context or keep its users in one engine group")


def _check_shared_state(groups: dict[str, Group]) -> None:
    """A keyed group of several partitions must not set a variable without a context:
    each engine partition would hold its own diverging copy.  (Named windows and tables
    without a context are already refused in a context's statements, Esper ref. 4.6/4.7.)"""
    for g in groups.values():
        if g.keyed_spec is None or g.partitions == 1:
            continue
        own = {p.variable or p.name for p in g.plans
               if p.kind == "variable" and p.context == g.context}
        for p in g.plans:
            if p.kind != "on" or p.action is None or p.action.kind != "set":
                continue
            for a in p.action.assignments:
                if a.variable not in own:
                    raise NotSupported(
                        f"statement '{p.name}' sets variable '{a.variable}', which has no "
                        f"context, from the {g.partitions} partitions of keyed context "
                        f"'{g.context}' (Kafka mode)")


REPLICATION = "replication.factor"
"""Key of a topic spec's config that is a creation parameter, not a topic config."""


def ensure_topics(bootstrap: str, specs: dict[str, tuple[int, dict[str, str]]],
                  timeout_s: float = 30.0) -> None:
    """Create the missing topics; existing ones must have the partitions a group needs."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    from app.runtime.kafka.refusals import NotAuthorized

    admin = AdminClient(client.conf({"bootstrap.servers": bootstrap, "log_level": 0}))
    md = admin.list_topics(timeout=timeout_s)
    missing = []
    for t, (n, cfg) in specs.items():
        if t not in md.topics:
            cfg = dict(cfg)
            rf = int(cfg.pop(REPLICATION, "1"))
            missing.append(NewTopic(t, num_partitions=n, replication_factor=rf, config=cfg))
    if missing:
        for topic, fut in admin.create_topics(missing, request_timeout=timeout_s).items():
            try:
                fut.result()
            except KafkaException as e:
                if e.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    # the principal cannot see the topic (no Describe), so it tried Create
                    raise NotAuthorized("Topic", topic, "Describe (and so Create)"
                                        ) from None
                if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
    # Wait until metadata shows every topic with its partitions (creation is async).
    for _ in range(100):
        md = admin.list_topics(timeout=timeout_s)
        if all(t in md.topics and md.topics[t].error is None and md.topics[t].partitions
               for t in specs):
            break
        time.sleep(0.05)
    for t, (n, _) in specs.items():
        have = len(md.topics[t].partitions) if t in md.topics else 0
        if ".repartition." in t or ".changelog." in t:
            if have != n:
                raise RuntimeError(f"topic {t} has {have} partitions, the app needs {n}")


def source_partitions(bootstrap: str, topics: list[str], timeout_s: float = 30.0
                      ) -> list[tuple[str, int]]:
    """Every (topic, partition) of the source topics, sorted: the barrier's upstreams."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client.conf({"bootstrap.servers": bootstrap, "log_level": 0}))
    md = admin.list_topics(timeout=timeout_s)
    out: list[tuple[str, int]] = []
    for t in topics:
        if t not in md.topics:
            raise RuntimeError(f"source topic {t} does not exist")
        out += [(t, p) for p in sorted(md.topics[t].partitions)]
    return sorted(out)

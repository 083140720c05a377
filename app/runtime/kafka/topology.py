"""How an app's statements are laid out on Kafka: engine groups, routing, topics.

Statements are planned once and split into *groups*, each run by one engine agent over
its own repartition topic (ARCHITECTURE.md, Partitioning):

- ``main``: every statement without a hash context (plain statements, keyed, category
  and temporal contexts), on a single-partition repartition topic so all events reach
  one Engine in a deterministic order;
- one group per hash context (``coalesce by consistent_hash_crc32(p) ... granularity
  N``): a repartition topic with exactly N partitions, an event going to partition
  ``crc32(str(p)) mod N`` (``HashSpec.partition_of``), so Kafka partition = bucket.

Variables are deployed into every group.  ``insert into`` a stream consumed by another
group is refused (it would need a topic hop that breaks the single-Engine ordering).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from app.runtime.catalog import Catalog, NotSupported
from app.runtime.kafka.config import MAIN_GROUP, AppConfig
from app.runtime.plan import StatementPlan
from operators.base import PartitionCtx, Row
from operators.contexts.managers import HashSpec

STATEMENT_KINDS = ("query", "window", "on")
"""Plan kinds that run per context partition and may emit rows."""


def consumed_types(plan: StatementPlan) -> set[str]:
    """Event types a statement reads (an on-action: its trigger type)."""
    if plan.kind == "on" and plan.action is not None:
        return {plan.action.trigger_type}
    if plan.pipeline is not None:
        return set(plan.pipeline.types())
    return set()


@dataclass
class Group:
    """Statements run by one engine agent, and how events find their partition."""

    name: str
    partitions: int
    plans: list[StatementPlan] = field(default_factory=list)
    types: set[str] = field(default_factory=set)
    hash_spec: HashSpec | None = None
    _ctx: PartitionCtx = field(default_factory=PartitionCtx, repr=False)

    @property
    def statements(self) -> list[str]:
        """Names of the statements that may emit rows (each has an output topic)."""
        return [p.name for p in self.plans if p.kind in STATEMENT_KINDS]

    def partition_of(self, type_name: str, event: Row) -> int | None:
        """Kafka partition of the repartition topic for an event, None if not for us."""
        if type_name not in self.types:
            return None
        if self.hash_spec is None:
            return 0
        return self.hash_spec.partition_of(type_name, event, self._ctx)


@dataclass
class Topology:
    """Planned statements of an app, grouped for the engine agents."""

    config: AppConfig
    catalog: Catalog
    groups: dict[str, Group]
    plans: list[StatementPlan] = field(default_factory=list)

    @classmethod
    def plan(cls, config: AppConfig) -> Topology:
        """Plan every statement (errors surface here, before any topic is touched)."""
        catalog = Catalog.from_schemas(config.schemas)
        plans = [catalog.plan(s.epl, s.name) for s in config.statements]
        hash_groups: dict[str, str] = {}
        groups: dict[str, Group] = {MAIN_GROUP: Group(MAIN_GROUP, 1)}
        for p in plans:
            if p.kind == "context" and isinstance(p.context_spec, HashSpec):
                gname = _group_name(p.context_spec.name, groups)
                hash_groups[p.context_spec.name] = gname
                groups[gname] = Group(gname, p.context_spec.granularity,
                                      hash_spec=p.context_spec)
        for p in plans:
            if p.kind == "context":
                g = groups[hash_groups.get(p.context_spec.name, MAIN_GROUP)]
                g.plans.append(p)
                types = getattr(p.context_spec, "types", None)
                if types is not None:
                    g.types |= set(types())
            elif p.kind in STATEMENT_KINDS:
                g = groups[hash_groups.get(p.context or "", MAIN_GROUP)]
                g.plans.append(p)
                g.types |= consumed_types(p)
            else:  # declarations (variables, tables, schemas): every engine needs them
                for g in groups.values():
                    g.plans.append(p)
        for g in groups.values():
            g.types &= set(config.schemas)  # insert-into streams never come from Kafka
        _check_insert_into(plans, groups)
        return cls(config, catalog, groups, plans)

    def active_groups(self) -> list[Group]:
        """Groups that run at least one query (the others need no agent)."""
        return [g for g in self.groups.values() if g.statements]

    def output_topics(self) -> dict[str, tuple[str, int]]:
        """Statement name -> (output topic, partitions)."""
        out: dict[str, tuple[str, int]] = {}
        for g in self.active_groups():
            for s in g.statements:
                out[s] = (self.config.output_topic(s), g.partitions)
        return out

    def topic_specs(self, keep_sources: bool = False) -> dict[str, tuple[int, dict[str, str]]]:
        """Every topic the app needs: name -> (partitions, topic config).

        ``keep_sources``: source topics get infinite retention.  Needed when records
        carry old timestamps (scenarios start the clock at 1970): time-based retention
        would delete them at the broker's next retention check.
        """
        forever = {"retention.ms": "-1", "retention.bytes": "-1"}
        # changelog records hold a whole batch: keep them forever, allow big ones
        keep = {**forever, "max.message.bytes": str(64 * 1024 * 1024)}
        c = self.config
        specs: dict[str, tuple[int, dict[str, str]]] = {}
        for t in c.source_topics:
            specs[t] = (c.source_partitions, dict(forever) if keep_sources else {})
        for g in self.active_groups():
            specs[c.repartition_topic(g.name)] = (g.partitions, {})
            specs[c.changelog_topic(g.name)] = (g.partitions, keep)
        for topic, parts in self.output_topics().values():
            specs.setdefault(topic, (parts, {}))
        specs[c.watermark_topic] = (1, {})
        specs[c.progress_topic] = (1, {"cleanup.policy": "compact"})
        specs[c.dlq_topic] = (1, {})
        return specs


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
        for g in groups.values():
            if g.name == owner.get(p.name):
                continue
            if any(p.insert_into in consumed_types(q) or q.window == p.insert_into
                   for q in g.plans if q.kind in STATEMENT_KINDS):
                raise NotSupported(
                    f"insert into '{p.insert_into}' consumed under another hash context "
                    "(Kafka mode)")


def ensure_topics(bootstrap: str, specs: dict[str, tuple[int, dict[str, str]]],
                  timeout_s: float = 30.0) -> None:
    """Create the missing topics; existing ones must have the partitions a group needs."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    md = admin.list_topics(timeout=timeout_s)
    missing = [NewTopic(t, num_partitions=n, replication_factor=1, config=cfg)
               for t, (n, cfg) in specs.items() if t not in md.topics]
    if missing:
        for fut in admin.create_topics(missing, request_timeout=timeout_s).values():
            try:
                fut.result()
            except KafkaException as e:
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

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    md = admin.list_topics(timeout=timeout_s)
    out: list[tuple[str, int]] = []
    for t in topics:
        if t not in md.topics:
            raise RuntimeError(f"source topic {t} does not exist")
        out += [(t, p) for p in sorted(md.topics[t].partitions)]
    return sorted(out)

"""Which rooms a worker's topics feed, read once from the app's topology.

A source topic feeds its lane (the stateless statements that read it, with the
declarations they need), the engine groups fed directly by its partitions, and routing;
a repartition topic feeds one routed engine group.  The intake, the assignment and the
checkpoint ask this table instead of the topology on every record.
"""

from __future__ import annotations

from typing import Any

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.topology import STATEMENT_KINDS, Group, Topology


class Wiring:
    """Topic → rooms of one app (module docstring)."""

    def __init__(self, config: AppConfig, topology: Topology) -> None:
        self.sources = set(config.source_topics)
        self.repartition: dict[str, Group] = {
            config.repartition_topic(g.name): g for g in topology.routed_groups()}
        direct = [g for g in topology.active_groups() if g.direct]
        self.direct_of: dict[str, list[Group]] = {
            t: [g for g in direct if t in g.topics] for t in config.source_topics}
        """The engine groups partition p of a source topic feeds as their partition p."""
        self.all_upstreams = topology.source_upstreams()
        self.forward_to: dict[str, dict[str, list[tuple[str, Group]]]] = {
            g.name: {stream: [(config.repartition_topic(b), topology.groups[b])
                              for b in readers]
                     for stream, readers in g.forwards.items()}
            for g in topology.active_groups() if g.forwards}
        """Group -> what its engine partitions forward: stream -> (repartition topic,
        the group reading it there) of each reader."""
        declarations = [p for p in topology.plans
                        if p.kind not in STATEMENT_KINDS and p.kind != "context"
                        and p.context is None]
        self.lane_plans: dict[str, list[Any]] = {}
        for p in topology.lanes:
            topic = config.topic_of(p.pipeline.stream.type_name)
            self.lane_plans.setdefault(topic, list(declarations)).append(p)

    def topics(self) -> list[str]:
        """What the worker subscribes to: source and repartition topics."""
        return sorted(self.sources | set(self.repartition))

    def groups_of(self, topic: str) -> list[Group]:
        """The engine groups a partition of ``topic`` feeds (as the same partition)."""
        if topic in self.sources:
            return self.direct_of.get(topic, [])
        g = self.repartition.get(topic)
        return [g] if g is not None else []

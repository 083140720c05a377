"""Read a running app's state from its changelog topics, without touching the workers.

``kepl query --kafka`` uses this: every engine partition of every group is rebuilt in a
throw-away directory from its changelog (the same restore a replacement worker does), and
the on-demand query or statement iteration then runs over those engines.  The state is the
one of the last completed batch of each partition.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.runtime.engine import Engine
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import EnginePartition
from app.runtime.kafka.topology import Topology, source_partitions
from app.runtime.kafka.worker import KafkaChangelog


@contextmanager
def restored_engines(config: AppConfig, bootstrap: str
                     ) -> Iterator[list[tuple[str, int, Engine]]]:
    """(group, partition, engine) of every engine partition, rebuilt from the changelog."""
    topology = Topology.plan(config)
    upstreams = [f"{t}:{p}" for t, p in source_partitions(bootstrap, config.source_topics)]
    log = KafkaChangelog(bootstrap)
    parts: list[EnginePartition] = []
    with tempfile.TemporaryDirectory(prefix=f"kepl-inspect-{config.app}-") as tmp:
        try:
            out: list[tuple[str, int, Engine]] = []
            for g in topology.active_groups():
                for p in range(g.partitions):
                    part = EnginePartition(g, p, Path(tmp) / g.name / str(p), upstreams,
                                           config.changelog_topic(g.name))
                    parts.append(part)
                    part.restore(log)
                    assert part.engine is not None
                    out.append((g.name, p, part.engine))
            yield out
        finally:
            for part in parts:
                part.close()

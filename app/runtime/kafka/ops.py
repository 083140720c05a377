"""What an operator asks of a deployed app: its status, and removing or rewinding it.

``app_status`` gathers, without touching the workers: the app's topics with their
partition counts, its consumer group (``kepl.<app>``: state, members and their
partitions), the lag of every partition the group consumes, the last watermark, the
dead-letter count, each changelog partition's offsets and visible snapshot, and the
local state directories.  Lag is what ``kafka-consumer-groups --describe`` shows: the
partition's end offset (transaction markers included, so a caught-up transactional
topic such as a repartition topic shows 1) minus the group's committed offset; a
partition the group never committed counts from its first offset, where a worker
starts.

``undeploy`` deletes the app's internal and output topics and its consumer group;
``reset`` deletes the group and recreates the topics derived from the inputs, so the
next worker reads every input from the beginning into fresh state.  Both refuse while
the group has members (``Busy``): a worker writing into topics being deleted would
recreate them half-way.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.topology import Topology

TIMEOUT_S = 10.0
ROLES = ("input", "repartition", "changelog", "output", "dlq", "watermark", "progress")
RESET_ROLES = ("repartition", "changelog", "output", "dlq", "progress")
"""Topics whose records derive from the inputs: emptied by ``reset`` (the watermark
topic stays: the clock's last time is still the last time in the inputs)."""


LastWatermark = Callable[[str, str], "int | None"]


class Busy(Exception):
    """The consumer group has active members: workers still run."""


class BrokerError(Exception):
    """A request the broker refused, or kept answering with a transient error for the
    whole retry budget: one line saying which request and why."""


RETRY_S = 15.0
"""How long a request answered with a transient error is retried (``Retrying``)."""
TRANSIENT = ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
             "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION", "NOT_CONTROLLER",
             "REQUEST_TIMED_OUT", "REBALANCE_IN_PROGRESS", "UNKNOWN_TOPIC_OR_PART",
             "NETWORK_EXCEPTION", "_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN",
             "_WAIT_COORD")
"""Errors a broker answers while it starts, elects a leader or loads a group
coordinator (right after the first deploy on a new broker): worth asking again."""


class Retrying:
    """Runs admin requests, asking again with a growing pause (0.1 s to 1 s) while the
    broker answers with a transient error, until ``budget_s`` after the first request
    of this object; then, or on any other error, ``BrokerError`` names the request."""

    def __init__(self, budget_s: float | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.budget_s = RETRY_S if budget_s is None else budget_s
        self.sleep = sleep
        self.clock = clock
        self.deadline: float | None = None
        self.retries = 0

    def __call__(self, what: str, request: Callable[[], Any]) -> Any:
        from confluent_kafka import KafkaError, KafkaException

        transient = {getattr(KafkaError, name) for name in TRANSIENT
                     if hasattr(KafkaError, name)}
        if self.deadline is None:
            self.deadline = self.clock() + self.budget_s
        pause = 0.1
        while True:
            try:
                return request()
            except KafkaException as e:
                err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
                again = err is not None and err.code() in transient
                cause = err.str() if err is not None else str(e)
                if not again:
                    raise BrokerError(f"{what}: {cause}") from None
                if self.clock() + pause > self.deadline:
                    raise BrokerError(f"{what}: {cause} (still after retrying for "
                                      f"{self.budget_s:g} s)") from None
            self.retries += 1
            self.sleep(pause)
            pause = min(1.0, pause * 2)


def group_id(config: AppConfig) -> str:
    """The consumer group of the app's workers (``loop.Worker``)."""
    return f"kepl.{config.app}"


def app_topics(config: AppConfig, counts: dict[str, int] | None = None
               ) -> list[tuple[str, str, int]]:
    """(role, topic, partitions the app plans) of every topic of the app, in ``ROLES``
    order; ``counts``: source partitions as the broker has them."""
    topology = Topology.plan(config, counts)
    specs = topology.topic_specs()
    out = [("input", t, specs[t][0]) for t in config.source_topics]
    groups = topology.active_groups()
    out += [("repartition", config.repartition_topic(g.name), g.partitions)
            for g in groups if not g.direct]
    out += [("changelog", config.changelog_topic(g.name), g.partitions) for g in groups]
    outputs = sorted({t: n for t, n in topology.output_topics().values()}.items())
    out += [("output", t, n) for t, n in outputs]
    out += [("dlq", config.dlq_topic, 1), ("watermark", config.watermark_topic, 1),
            ("progress", config.progress_topic, 1)]
    return out


@dataclass
class Broker:
    """An admin client and the topic metadata of one broker."""

    bootstrap: str
    retry: Retrying | None = None
    """Every request goes through it (default: a ``Retrying`` of ``RETRY_S``)."""

    def __post_init__(self) -> None:
        from confluent_kafka.admin import AdminClient

        from app.runtime.kafka import client

        if self.retry is None:
            self.retry = Retrying()
        self.admin = AdminClient(client.conf({"bootstrap.servers": self.bootstrap,
                                              "log_level": 0}))
        self.refresh()

    def refresh(self) -> None:
        md = self.retry("list topics", lambda: self.admin.list_topics(timeout=TIMEOUT_S))
        self.topics = {name: sorted(t.partitions) for name, t in md.topics.items()
                       if t.error is None}

    def offsets(self, tps: list[tuple[str, int]], latest: bool) -> dict[tuple[str, int], int]:
        """End (``latest``) or start offsets of partitions, as the tools list them."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        if not tps:
            return {}
        spec = OffsetSpec.latest() if latest else OffsetSpec.earliest()

        def ask() -> dict[tuple[str, int], int]:
            futures = self.admin.list_offsets(
                {TopicPartition(t, p): spec for t, p in tps},
                isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=TIMEOUT_S)
            return {(tp.topic, tp.partition): int(f.result().offset)
                    for tp, f in futures.items()}

        return self.retry(f"list {'end' if latest else 'start'} offsets", ask)

    def group(self, gid: str) -> tuple[str, list[dict[str, Any]]]:
        """(state, members) of a consumer group; a group that never existed is ``dead``."""
        desc = self.retry(f"describe consumer group {gid}", lambda: self.admin.
                          describe_consumer_groups([gid], request_timeout=TIMEOUT_S)[gid]
                          .result())
        members = []
        for m in sorted(desc.members, key=lambda m: (m.group_instance_id or "", m.member_id)):
            tps = m.assignment.topic_partitions if m.assignment else []
            members.append({
                "member_id": m.member_id, "instance_id": m.group_instance_id,
                "client_id": m.client_id, "host": m.host,
                "partitions": [f"{tp.topic}[{tp.partition}]" for tp in
                               sorted(tps, key=lambda tp: (tp.topic, tp.partition))]})
        return desc.state.name.lower(), members

    def committed(self, gid: str) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Committed offset and its metadata per partition of the group."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        got = self.retry(f"list committed offsets of {gid}", lambda: self.admin.
                         list_consumer_group_offsets([ConsumerGroupTopicPartitions(gid)],
                                                     request_timeout=TIMEOUT_S)[gid].result())
        return {(tp.topic, tp.partition): (int(tp.offset), tp.metadata)
                for tp in got.topic_partitions if tp.offset >= 0}


def app_status(config: AppConfig, bootstrap: str,
               last_watermark: LastWatermark | None = None,
               data_dir: Path | None = None) -> dict[str, Any]:
    """Everything ``kepl status`` shows, as a JSON-friendly dict (module docstring);
    ``last_watermark(bootstrap, topic)`` reads the watermark topic's last time
    (default ``clock.last_watermark``)."""
    from app.runtime.kafka import clock
    from app.runtime.kafka.lanes import LaneCursor
    from app.runtime.kafka.recovery import KafkaChangelog

    broker = Broker(bootstrap)
    counts = {t: len(broker.topics[t]) for t in config.source_topics if t in broker.topics}
    topics = [{"role": role, "topic": t, "partitions":
               len(broker.topics[t]) if t in broker.topics else None}
              for role, t, _ in app_topics(config, counts)]
    present = [(d["topic"], p) for d in topics for p in broker.topics.get(d["topic"], [])]
    ends = broker.offsets(present, latest=True)
    starts = broker.offsets(present, latest=False)
    gid = group_id(config)
    state, members = broker.group(gid)
    committed = broker.committed(gid)
    lag = []
    for d in topics:
        if d["role"] not in ("input", "repartition"):
            continue
        for p in broker.topics.get(d["topic"], []):
            key = (d["topic"], p)
            c, meta = committed.get(key, (None, None))
            # records deleted before the app read them: counted by the workers (the
            # cursor's metadata), and those below the log start no worker has passed yet
            lost = LaneCursor.from_metadata(meta).lost if d["role"] == "input" else 0
            if c is not None and c < starts[key]:
                lost += starts[key] - c
            lag.append({"topic": d["topic"], "partition": p, "committed": c,
                        "end": ends[key], "lag": ends[key] - (starts[key] if c is None else c),
                        "lost": lost})
    by_role = {d["role"]: d["topic"] for d in topics}
    log = KafkaChangelog(bootstrap)
    dlq = by_role["dlq"]
    dead = (sum(1 for p in broker.topics[dlq] for _ in log.read(dlq, p, 0))
            if dlq in broker.topics else None)
    wm_topic = by_role["watermark"]
    read_last = last_watermark or clock.last_watermark
    changelogs = []
    for d in topics:
        if d["role"] != "changelog":
            continue
        for p in broker.topics.get(d["topic"], []):
            key = (d["topic"], p)
            version = _last_meta(log, d["topic"], p, starts[key], ends[key]).get("version")
            changelogs.append({"topic": d["topic"], "partition": p, "start": starts[key],
                               "end": ends[key],
                               "version": None if version is None else int(version),
                               "snapshot": _first_snapshot(log, d["topic"], p, starts[key]),
                               "late": (_late_events(log, d["topic"], p, starts[key],
                                                     ends[key])
                                        if config.event_time is not None else 0)})
    return {
        "app": config.app, "bootstrap": bootstrap,
        "statements": [{"name": s.name, "output_topic": config.output_topic(s.name)}
                       for s in config.statements],
        "outputs": [{"statement": s.name, "topic": config.output_topic(s.name),
                     "end": sum(ends[(config.output_topic(s.name), p)]
                                for p in broker.topics.get(config.output_topic(s.name), []))}
                    for s in config.statements],
        "topics": topics,
        "group": {"id": gid, "state": state, "members": members},
        "version": _versions(config, bootstrap, counts, changelogs),
        "lag": lag, "total_lag": sum(d["lag"] for d in lag),
        "input_lost": sum(d["lost"] for d in lag),
        "watermark": {"topic": wm_topic, "last": read_last(bootstrap, wm_topic)
                      if wm_topic in broker.topics else None},
        "dlq": {"topic": dlq, "records": dead},
        "changelogs": changelogs,
        "late_events": (None if config.event_time is None else
                        {"policy": config.event_time.late,
                         "count": sum(c["late"] for c in changelogs)}),
        "state_dirs": None if data_dir is None else state_dirs(data_dir),
    }


def _versions(config: AppConfig, bootstrap: str, counts: dict[str, int],
              changelogs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The recorded version, whether the status file is it, and the engine partitions
    whose last checkpoint a worker of another version wrote (None: nothing recorded)."""
    from app.runtime.kafka import deployments
    from app.runtime.kafka.topology import Topology

    latest = deployments.read_latest(config, bootstrap)
    if latest is None:
        return None
    mine = deployments.form_of(Topology.plan(config, counts), "")
    return {"recorded": latest.version, "topic": deployments.deployments_topic(config),
            "file_is_recorded": mine.digest == latest.digest,
            "others": [{"partition": f"{c['topic']}[{c['partition']}]",
                        "version": c["version"]} for c in changelogs
                       if c["version"] is not None and c["version"] != latest.version]}


def _last_meta(log: Any, topic: str, partition: int, start: int, end: int
               ) -> dict[str, Any]:
    """The metadata of a changelog partition's last record (committed state)."""
    from app.runtime.kafka.store import ChangelogRecord

    meta: dict[str, Any] = {}
    for _, value in log.read(topic, partition, max(start, end - 4)):  # markers between
        try:
            meta = ChangelogRecord.decode_head(value)[0].meta
        except (ValueError, KeyError, TypeError):
            continue
    return meta


def _late_events(log: Any, topic: str, partition: int, start: int, end: int) -> int:
    """Late events an engine partition has seen (event_time apps): the count its last
    changelog record carries (committed state, so it survives restarts)."""
    from app.runtime.kafka.store import ChangelogRecord

    late = 0
    for _, value in log.read(topic, partition, max(start, end - 4)):
        try:
            late = int(ChangelogRecord.decode_head(value)[0].meta.get("late", late))
        except (ValueError, KeyError, TypeError):
            continue
    return late


def _first_snapshot(log: Any, topic: str, partition: int, start: int
                    ) -> dict[str, int] | None:
    """The snapshot the changelog partition begins with (a snapshot deletes the records
    before it, so a visible one is the last complete one), or None.  Its parts may have
    batches between them; the last part gives the size."""
    from app.runtime.kafka.partition import last_part
    from app.runtime.kafka.store import ChangelogRecord

    found: dict[str, Any] | None = None
    for offset, value in log.read(topic, partition, start):
        try:
            snap = ChangelogRecord.decode_head(value)[0].snapshot
        except (ValueError, KeyError):
            return found
        if found is None:
            if snap is None or snap.get("part") != 0:
                return None
            found = {"offset": offset, "id": snap.get("id"), "parts": 0, "bytes": None}
        if snap is None or snap.get("id") != found["id"]:
            continue
        found["parts"] += 1
        if last_part(snap):
            found["bytes"] = snap.get("bytes")
            return found
    return found


def state_dirs(data_dir: Path) -> list[dict[str, Any]]:
    """Engine partition directories (``<group>/<partition>``) under a worker's data dir,
    with their size on disk (not a database a kill left half removed: the next open
    deletes it)."""
    from app.runtime.kafka.store import DISCARDED

    out = []
    root = Path(data_dir)
    if not root.is_dir():
        return out
    for d in sorted(p for p in root.glob("*/*")
                    if p.is_dir() and not p.name.endswith(DISCARDED)):
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        out.append({"path": str(d), "bytes": size})
    return out


def render_status(st: dict[str, Any]) -> list[str]:
    """``kepl status`` as text lines."""
    lines = [f"app {st['app']} at {st['bootstrap']}"]
    v = st.get("version")
    if v is None:
        lines.append("version: none recorded (kepl deploy FILE records one)")
    else:
        lines.append(f"version: {v['recorded']} runs ({v['topic']}); " + (
            "this file is that version" if v["file_is_recorded"] else
            "this file differs from it (kepl deploy FILE --plan shows how)"))
        if v["others"]:
            old = ", ".join(f"{o['partition']} (version {o['version']})" for o in v["others"])
            lines.append(f"  last checkpointed by a worker of another version: {old}; "
                         "workers on an older version leave by themselves once they see "
                         f"version {v['recorded']}, and a worker of version "
                         f"{v['recorded']} (the chart's rolling restart starts them) "
                         "checkpoints each partition once it loads it")
    lines.append("statements:")
    lines += [f"  {s['name']} -> {s['output_topic']}" for s in st["statements"]]
    lines.append("topics:")
    width = max(len(d["topic"]) for d in st["topics"])
    for d in st["topics"]:
        n = d["partitions"]
        have = "missing" if n is None else f"{n} partition{'s' if n != 1 else ''}"
        lines.append(f"  {d['role']:<12}{d['topic']:<{width + 2}}{have}")
    g = st["group"]
    if g["state"] == "dead" and not g["members"]:
        lines.append(f"consumer group {g['id']}: does not exist (no worker joined yet)")
    else:
        lines.append(f"consumer group {g['id']}: {g['state']}, {len(g['members'])} member(s)")
    for m in g["members"]:
        who = m["instance_id"] or m["member_id"]
        lines.append(f"  {who} ({m['client_id']} on {m['host']}): "
                     + (", ".join(m["partitions"]) or "no partitions"))
    lines.append("lag (end offset - committed offset):")
    rows = [("TOPIC", "PARTITION", "COMMITTED", "END", "LAG")] + [
        (d["topic"], str(d["partition"]), "-" if d["committed"] is None else str(d["committed"]),
         str(d["end"]), str(d["lag"])) for d in st["lag"]]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    lines.append(f"  total lag {st['total_lag']}")
    lost = [d for d in st["lag"] if d["lost"]]
    if lost:
        lines.append("input lost (deleted before the app read it: retention or DeleteRecords): "
                     + ", ".join(f"{d['topic']}[{d['partition']}] {d['lost']}" for d in lost))
    wm = st["watermark"]
    lines.append(f"last watermark: {'none' if wm['last'] is None else wm['last']} "
                 f"({wm['topic']})")
    dlq = st["dlq"]
    lines.append(f"dead letters: {'-' if dlq['records'] is None else dlq['records']} "
                 f"({dlq['topic']})")
    for c in st["changelogs"]:
        snap = c["snapshot"]
        size = "being written" if snap is None or snap["bytes"] is None else \
            f"{snap['bytes']} bytes in {snap['parts']} part(s)"
        seen = ("no snapshot" if snap is None else
                f"snapshot {snap['id']} at offset {snap['offset']} ({size})")
        ver = "" if c.get("version") is None else f", version {c['version']}"
        lines.append(f"changelog {c['topic']}[{c['partition']}]: offsets {c['start']}.."
                     f"{c['end']}, {seen}{ver}")
    late = st.get("late_events")
    if late is not None:
        lines.append(f"late events: {late['count']} (late_events: {late['policy']})")
    if st["state_dirs"] is not None:
        lines.append("state dirs:" if st["state_dirs"] else "state dirs: none")
        for d in st["state_dirs"]:
            lines.append(f"  {d['path']} ({d['bytes']} bytes)")
    return lines


# -- undeploy and reset ----------------------------------------------------------------
def require_idle(broker: Broker, config: AppConfig, command: str) -> None:
    """``Busy`` if the app's consumer group has members."""
    state, members = broker.group(group_id(config))
    if members:
        names = ", ".join(m["instance_id"] or m["member_id"] for m in members)
        raise Busy(f"{command}: consumer group {group_id(config)} has {len(members)} active "
                   f"member(s) ({names}): stop the app's workers first (a stopped worker "
                   f"leaves the group after its 10 s session timeout)")


def planned_topics(config: AppConfig, bootstrap: str, roles: tuple[str, ...]
                   ) -> list[tuple[str, str, int]]:
    """(role, topic, partitions) of the app's topics of ``roles`` that exist."""
    broker = Broker(bootstrap)
    counts = {t: len(broker.topics[t]) for t in config.source_topics if t in broker.topics}
    return [(r, t, n) for r, t, n in app_topics(config, counts)
            if r in roles and t in broker.topics]


def delete_topics(broker: Broker, topics: list[str]) -> None:
    """Delete topics and wait until the broker's metadata no longer lists them."""
    if not topics:
        return
    for fut in broker.admin.delete_topics(topics, operation_timeout=TIMEOUT_S).values():
        fut.result()
    deadline = time.monotonic() + 30
    while True:
        broker.refresh()
        if not set(topics) & set(broker.topics):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics still listed after deletion: "
                               f"{', '.join(sorted(set(topics) & set(broker.topics)))}")
        time.sleep(0.1)


def delete_group(broker: Broker, gid: str) -> bool:
    """Delete a consumer group; False if there was none."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        broker.admin.delete_consumer_groups([gid], request_timeout=TIMEOUT_S)[gid].result()
    except KafkaException as e:
        if e.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
            return False
        raise
    return True


def undeploy(config: AppConfig, bootstrap: str, topics: list[str],
             state_dir: Path | None) -> list[str]:
    """Delete ``topics`` and the group (and ``state_dir``): one line per thing removed."""
    broker = Broker(bootstrap)
    require_idle(broker, config, "undeploy")
    delete_topics(broker, topics)
    lines = [f"deleted topic {t}" for t in topics]
    if delete_group(broker, group_id(config)):
        lines.append(f"deleted consumer group {group_id(config)}")
    if state_dir is not None and state_dir.exists():
        shutil.rmtree(state_dir)
        lines.append(f"deleted state directory {state_dir}")
    return lines


def reset(config: AppConfig, bootstrap: str, topics: list[tuple[str, str, int]],
          state_dir: Path) -> list[str]:
    """Delete the group and local state, delete and recreate ``topics`` (role, name,
    partitions) with the app's topic settings: one line per step."""
    from app.runtime.kafka.topology import ensure_topics

    broker = Broker(bootstrap)
    require_idle(broker, config, "reset")
    lines = []
    if delete_group(broker, group_id(config)):
        lines.append(f"deleted consumer group {group_id(config)} (its committed offsets)")
    delete_topics(broker, [t for _, t, _ in topics])
    counts = {t: len(broker.topics[t]) for t in config.source_topics if t in broker.topics}
    specs = Topology.plan(config, counts).topic_specs()
    ensure_topics(bootstrap, {t: specs[t] for _, t, _ in topics})
    lines += [f"recreated topic {t} ({n} partition{'s' if n != 1 else ''})"
              for _, t, n in topics]
    if state_dir.exists():
        shutil.rmtree(state_dir)
        lines.append(f"deleted state directory {state_dir}")
    return lines

"""What runs: the deployed statement file, recorded with the app on Kafka, versioned.

``kepl deploy`` appends one record per deployed version to ``kepl.<app>.deployments``
(one partition, compacted, key ``v<version>`` so every version stays): the version
number, the file's text, and per statement a fingerprint (of its text printed back from
its syntax tree, so whitespace, comments and keyword case do not count, of its output
topic and of the schemas of the types it reads), whether it keeps state, and its engine
group; per group its partition layout.  A worker compares its own file with the latest
record (``check``) and refuses to start on another version; a running one leaves once
another is recorded (``VersionWatch``), so two versions never share the consumer group.

``plan_upgrade`` compares two recorded forms and says, per statement, what an upgrade
does (docs/operations.md, "Changing a running app").
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from app.runtime.kafka import client
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.rebuild import replay_refusal
from app.runtime.kafka.topology import STATEMENT_KINDS, Topology, consumed_types

DECLARED_STATE = ("table", "variable")
"""Declarations whose state is shared by the statements that use them."""
FROM_NOW = "from-now"
FROM_EARLIEST = "from-earliest"
REBUILDS = (FROM_NOW, FROM_EARLIEST)
EXIT_OTHER_VERSION = 6
"""Exit code of a worker whose statement file is not the deployed version."""

UNCHANGED, STATELESS, STATEFUL, ADDED, REMOVED = (
    "unchanged", "changed, stateless", "changed, stateful", "added", "removed")


def deployments_topic(config: AppConfig) -> str:
    """The app's record of deployed versions."""
    return f"kepl.{config.app}.deployments"


TOPIC_CONFIG = {"cleanup.policy": "compact"}


def normalized(epl: str) -> str:
    """The statement's text printed back from its syntax tree (layout-free)."""
    from app.epl.parser import parse_statement
    from app.epl.printer import to_epl

    return to_epl(parse_statement(epl))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class StatementForm:
    """One statement as an upgrade sees it."""

    fingerprint: str
    stateful: bool
    group: str | None
    """Engine group (None: a stateless lane, or a declaration every group holds)."""
    kind: str
    context: str | None = None
    """The context a statement runs in, or the one a context declaration declares."""
    output: str | None = None
    """Its output topic (statements that emit rows)."""
    reads: tuple[str, ...] = ()
    """The event types it reads."""
    replay: str = ""
    """Why ``--rebuild from-earliest`` cannot serve it ("": it can, see ``rebuild``)."""


@dataclass(frozen=True)
class Deployment:
    """A deployed version: what ``kepl.<app>.deployments`` holds per record."""

    version: int
    file: str
    statements: dict[str, StatementForm]
    groups: dict[str, str]
    """Group -> its partition layout (partitions and how events are split)."""
    resets: dict[str, int] = field(default_factory=dict)
    """Statement -> the version that started its state empty (``from-now``, or removed
    and deleted on request): an engine partition last at an older version drops it,
    however many versions it skipped."""
    replays: dict[str, int] = field(default_factory=dict)
    """Statement -> the version that rebuilt it ``from-earliest``: with its reset, the
    engine partition replays its retained input into that statement alone
    (``rebuild``)."""

    @property
    def digest(self) -> str:
        """What two workers must agree on: every statement's form and the layout."""
        body = {n: [s.fingerprint, s.group] for n, s in sorted(self.statements.items())}
        return _digest(json.dumps([body, sorted(self.groups.items())]))

    def encode(self) -> bytes:
        return json.dumps({
            "version": self.version, "file": self.file,
            "statements": {n: vars(s) for n, s in self.statements.items()},
            "groups": self.groups, "resets": self.resets, "replays": self.replays,
            "digest": self.digest,
        }, sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Deployment:
        d = json.loads(raw)
        return cls(int(d["version"]), d["file"],
                   {n: StatementForm(**{**s, "reads": tuple(s.get("reads", ()))})
                    for n, s in d["statements"].items()},
                   dict(d["groups"]), {n: int(v) for n, v in d.get("resets", {}).items()},
                   {n: int(v) for n, v in d.get("replays", {}).items()})


def _layout(g: Any) -> str:
    if g.hash_spec is not None:
        how = f"hash context {g.hash_spec.name}"
    elif g.keyed_spec is not None:
        how = f"keyed context {g.keyed_spec.name}"
    elif g.split is not None:
        how = "split by group key"
    else:
        how = "one engine"
    return f"{g.partitions} partition{'s' if g.partitions != 1 else ''}, {how}" + (
        ", fed directly" if g.direct else "")


def form_of(topology: Topology, file_text: str, version: int = 0) -> Deployment:
    """The recorded form of a planned app."""
    config = topology.config
    outputs = {s.name: config.output_topic(s.name) for s in config.statements}
    lanes = {p.name for p in topology.lanes}
    group_of: dict[str, str] = {}
    for g in topology.groups.values():
        for p in g.plans:
            if p.kind in STATEMENT_KINDS or p.kind == "context" or p.context is not None:
                group_of[p.name] = g.name
    forms: dict[str, StatementForm] = {}
    for p in topology.plans:
        ctx = p.context_spec.name if p.kind == "context" else p.context
        stateful = p.name not in lanes and p.kind not in ("context", "schema")
        reads = {t: config.schemas[t] for t in sorted(consumed_types(p)) if t in config.schemas}
        fp = _digest(json.dumps([normalized(p.epl), outputs.get(p.name, ""), reads],
                                sort_keys=True))
        forms[p.name] = StatementForm(fp, stateful, group_of.get(p.name), p.kind, ctx,
                                      outputs.get(p.name) if p.kind in STATEMENT_KINDS
                                      else None, tuple(sorted(consumed_types(p))),
                                      replay_refusal(topology, p) if stateful else "")
    groups = {g.name: _layout(g) for g in topology.active_groups()}
    return Deployment(version, file_text, forms, groups)


@dataclass(frozen=True)
class Step:
    """What an upgrade does to one statement."""

    name: str
    category: str
    detail: str = ""


@dataclass
class UpgradePlan:
    """Per-statement steps, the refusals, and the version to record."""

    steps: list[Step] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    resets: list[str] = field(default_factory=list)
    replays: list[str] = field(default_factory=list)
    """Statements rebuilt ``from-earliest`` (also in ``resets``)."""
    delete_outputs: list[str] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return any(s.category != UNCHANGED for s in self.steps)

    def lines(self) -> list[str]:
        width = max((len(s.name) for s in self.steps), default=0)
        out = [f"  {s.name:<{width}}  {s.category}" + (f": {s.detail}" if s.detail else "")
               for s in self.steps]
        out += [f"refused: {r}" for r in self.refusals]
        return out


def plan_upgrade(old: Deployment, new: Deployment, rebuild: dict[str, str],
                 delete_removed: bool = False) -> UpgradePlan:
    """Compare the running version with a new one.  ``rebuild``: statement name (or
    ``*`` for every changed stateful statement) -> ``from-now`` / ``from-earliest``."""
    plan = UpgradePlan()
    for name in rebuild:
        if name != "*" and name not in new.statements:
            plan.refusals.append(f"--rebuild names '{name}', which is no statement of "
                                 "the new file")
    moved = {g for g in new.groups if g in old.groups and old.groups[g] != new.groups[g]}
    changed_ctx = {s.context for n, s in new.statements.items()
                   if s.kind == "context" and n in old.statements
                   and old.statements[n].fingerprint != s.fingerprint}
    for name, s in new.statements.items():
        was = old.statements.get(name)
        if was is None:
            plan.steps.append(Step(name, ADDED, "starts with empty state from the "
                                   "current input offsets"))
            continue
        keeps = s.stateful and was.stateful
        if keeps and s.group in moved:
            plan.refusals.append(
                f"{name}: its group '{s.group}' changes its engine partitions "
                f"({old.groups[s.group]} -> {new.groups[s.group]}); its state is split "
                "by partition and cannot be moved (kepl reset replays everything)")
            continue
        if keeps and s.kind != "context" and s.context in changed_ctx:
            plan.refusals.append(
                f"{name}: context '{s.context}' changes its partitioning under it and it "
                "keeps state per context partition (remove it, or kepl reset)")
            continue
        if keeps and was.group != s.group:
            plan.refusals.append(f"{name}: moves from group '{was.group}' to "
                                 f"'{s.group}'; its state cannot follow")
            continue
        if was.fingerprint == s.fingerprint:
            plan.steps.append(Step(name, UNCHANGED, "keeps its state and row ids"
                                   if s.stateful else ""))
            continue
        if not s.stateful and not was.stateful:
            plan.steps.append(Step(name, STATELESS, "takes effect from the next record"))
            continue
        if s.kind == "context":
            plan.steps.append(Step(name, STATELESS, "no statement keeping state runs in it"))
            continue
        if s.kind in DECLARED_STATE:
            plan.refusals.append(
                f"{name}: the declaration of {s.kind} '{name}' changes, and its rows are "
                "shared by the statements using it: a rebuild of one statement cannot "
                "serve it (kepl reset replays the app)")
            plan.steps.append(Step(name, STATEFUL, "refused"))
            continue
        how = rebuild.get(name) or rebuild.get("*")
        if how is None:
            plan.refusals.append(
                f"{name}: changed and keeps state: say how to rebuild it "
                f"(--rebuild {name}={FROM_NOW}: start empty; --rebuild "
                f"{name}={FROM_EARLIEST}: replay its retained input)")
            plan.steps.append(Step(name, STATEFUL, "needs --rebuild"))
        elif how == FROM_EARLIEST:
            why = s.replay or _new_input(old, s)
            if why:
                plan.refusals.append(f"{name}: --rebuild {FROM_EARLIEST} cannot serve it: "
                                     f"{why} (use {FROM_NOW}, or kepl reset to replay "
                                     "the app)")
                plan.steps.append(Step(name, STATEFUL, f"rebuild {FROM_EARLIEST}: refused"))
                continue
            plan.resets.append(name)
            plan.replays.append(name)
            plan.steps.append(Step(
                name, STATEFUL, f"rebuild {FROM_EARLIEST}: replays its retained input "
                "into fresh state, alone, when each engine partition first loads; the "
                "rows its new text gives are written once, row ids continue"))
        else:
            plan.resets.append(name)
            plan.steps.append(Step(name, STATEFUL, f"rebuild {FROM_NOW}: starts with "
                                   "empty state at the next record, row ids continue"))
    for name, was in old.statements.items():
        if name in new.statements:
            continue
        if delete_removed:
            if was.stateful:
                plan.resets.append(name)
            if was.kind in STATEMENT_KINDS:
                plan.delete_outputs.append(name)
            plan.steps.append(Step(name, REMOVED, "stops; its state and output topic "
                                   "are deleted"))
        else:
            plan.steps.append(Step(name, REMOVED, "stops; its state and output topic "
                                   "are kept (--delete-removed deletes them)"))
    return plan


def _new_input(old: Deployment, s: StatementForm) -> str:
    """Why the group's retained input lacks a type the new text reads ("": it has all)."""
    had = {t for o in old.statements.values() if o.group == s.group for t in o.reads}
    new = sorted(set(s.reads) - had)
    if new:
        return (f"it now reads {', '.join(new)}, which group '{s.group}' did not read "
                "before: its past events are not in the group's input")
    return ""


# -- the record on Kafka ---------------------------------------------------------------
def read_latest(config: AppConfig, bootstrap: str, timeout_s: float = 15.0
                ) -> Deployment | None:
    """The latest recorded version (None: no record, or no deployments topic)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    topic = deployments_topic(config)
    c = Consumer(client.consumer_conf({
        "bootstrap.servers": bootstrap, "group.id": "kepl-deployments",
        "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": "read_committed", "log_level": 0}))
    try:
        md = c.list_topics(topic, timeout=timeout_s)
        if topic not in md.topics or md.topics[topic].error is not None:
            return None
        tp = TopicPartition(topic, 0)
        low, high = c.get_watermark_offsets(tp, timeout=timeout_s)
        if high <= low:
            return None
        c.assign([TopicPartition(topic, 0, low)])
        latest: Deployment | None = None
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    break
                continue
            if m.value():
                d = Deployment.decode(m.value())
                if latest is None or d.version > latest.version:
                    latest = d
            if m.offset() + 1 >= high:
                break
        return latest
    finally:
        c.close()


def record(config: AppConfig, bootstrap: str, deployment: Deployment) -> None:
    """Append ``deployment`` to the app's deployments topic (created if missing)."""
    from confluent_kafka import Producer

    from app.runtime.kafka.topology import REPLICATION, ensure_topics

    cfg = {**TOPIC_CONFIG, REPLICATION: str(config.replication_factor)}
    if config.min_insync_replicas is not None:
        cfg["min.insync.replicas"] = str(config.min_insync_replicas)
    ensure_topics(bootstrap, {deployments_topic(config): (1, cfg)})
    p = Producer(client.conf({"bootstrap.servers": bootstrap, "acks": "all",
                              "enable.idempotence": True, "log_level": 0}))
    failed: list[str] = []

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    p.produce(deployments_topic(config), key=f"v{deployment.version:08d}".encode(),
              value=deployment.encode(), on_delivery=done)
    if p.flush(30) or failed:
        raise RuntimeError(f"recording version {deployment.version} failed: "
                           f"{failed[0] if failed else 'not delivered'}")


class OtherVersion(Exception):
    """A worker's statement file is not the recorded version."""


def check(topology: Topology, bootstrap: str) -> Deployment | None:
    """The recorded version the worker's own file is (None: nothing recorded: an app
    deployed before versions were recorded runs as it did).  ``OtherVersion`` when the
    file differs from the latest record."""
    latest = read_latest(topology.config, bootstrap)
    if latest is None:
        return None
    mine = form_of(topology, "")
    if mine.digest != latest.digest:
        raise OtherVersion(
            f"worker: app {topology.config.app} runs version {latest.version}, and this "
            "statement file differs from it: kepl deploy FILE --plan shows how, kepl "
            "deploy FILE records it as the next version")
    return latest


def apply_resets(topology: Topology, deployment: Deployment | None) -> None:
    """Tell each group which statements start empty in the recorded version."""
    if deployment is None:
        return
    for g in topology.groups.values():
        g.resets = (deployment.version, dict(deployment.resets))
        g.replays = dict(deployment.replays)


WATCH_S = 3.0
"""How often a running worker looks for a newer recorded version."""


class VersionWatch:
    """Stops a running worker once another version is recorded, so that workers of two
    versions never share the group: once ``kepl deploy`` records a new version, the
    workers still on the old one commit and leave, and the rolling restart's new workers
    take their partitions (``finish`` then raises ``OtherVersion``)."""

    def __init__(self, topology: Topology, bootstrap: str, worker: Any,
                 interval_s: float = WATCH_S) -> None:
        import threading

        self.config = topology.config
        self.bootstrap = bootstrap
        self.worker = worker
        self.digest = form_of(topology, "").digest
        self.interval_s = interval_s
        self.newer: Deployment | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kepl-version-watch",
                                        daemon=True)
        self._thread.start()

    def _end(self, consumer: Any) -> int:
        from confluent_kafka import TopicPartition

        try:
            return int(consumer.get_watermark_offsets(
                TopicPartition(deployments_topic(self.config), 0), timeout=10)[1])
        except Exception:  # noqa: BLE001 - no topic or no answer: look again later
            return -1

    def _run(self) -> None:
        from confluent_kafka import Consumer

        c = Consumer(client.consumer_conf({"bootstrap.servers": self.bootstrap,
                                           "group.id": "kepl-deployments", "log_level": 0}))
        try:
            seen = self._end(c)
            while not self._done.wait(self.interval_s):
                end = self._end(c)
                if end <= seen:
                    continue
                seen = end
                latest = read_latest(self.config, self.bootstrap)
                if latest is not None and latest.digest != self.digest:
                    self.newer = latest
                    self.worker.stopping = True
                    return
        finally:
            c.close()

    def finish(self) -> None:
        """After the worker's loop ended: ``OtherVersion`` if a newer version stopped it."""
        self._done.set()
        if self.newer is not None:
            raise OtherVersion(
                f"worker: app {self.config.app} now runs version {self.newer.version}, "
                "which this worker's statement file is not: stopped after its last "
                "commit (workers of the new version take its partitions)")

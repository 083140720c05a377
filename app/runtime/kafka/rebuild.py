"""``--rebuild NAME=from-earliest``: one statement's state rebuilt from the retained input.

The statements of an engine group share its input offsets, so the group cannot rewind
for one of them.  Instead, when an engine partition first loads the version that
rebuilds statement X (``EnginePartition._reset_for_version``), it replays its retained
input into X alone, beside the live engine: a scratch engine partition holding only X
(and the schemas) reads the partition's input (the source partitions of a directly fed
group, else its repartition partition) from the earliest retained offset up to what the
partition's committed state applied (``applied``, per upstream source partition), through
the same merge of upstreams at watermarks and the same clock moves as the live partition
(``EnginePartition._handle``), so X sees the events and watermarks in the order the
statement would have seen them had it run from the start.  X's state is then copied into
the partition's state, and X's rows from the replay are numbered after X's last row ids;
both go into the next checkpoint's transaction, with the version marker that says the
rebuild is done, so the rows are written exactly once.  The live input then goes on from
the committed offsets, to X and the other statements alike.

What the retained input cannot serve is refused when the plan is made
(``replay_refusal``, ``retention_refusals``): a statement in a context, or reading a
table, a named window, a variable or a stream another statement inserts into, or
inserting into one; and input partitions whose earliest records were deleted.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from time import perf_counter
from typing import Any, Protocol

from app.runtime.kafka.eventtime import LATE
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.topology import STATEMENT_KINDS, Topology, consumed_types
from app.runtime.plan import StatementPlan

log = logging.getLogger("kepl.worker")

CHUNK = 2000
"""Records the scratch partition applies between two local commits (bounds its memory)."""


def replay_refusal(topology: Topology, plan: StatementPlan) -> str:
    """Why ``--rebuild from-earliest`` cannot serve ``plan`` ("": it can)."""
    plans = topology.plans
    if plan.kind != "query":
        return (f"a {plan.kind} statement's rows are shared with the statements using it"
                if plan.kind in STATEMENT_KINDS else f"a {plan.kind} declaration")
    if plan.context is not None:
        return (f"it runs in context '{plan.context}', whose partitions the other "
                "statements of the context share")
    if plan.tables:
        return f"it reads table {', '.join(plan.tables)}, whose rows other statements write"
    if plan.window is not None:
        return f"it reads named window '{plan.window}', which other statements fill"
    if plan.insert_into is not None:
        return (f"it inserts into '{plan.insert_into}': the statements reading that "
                "stream would not see the replay")
    inserted = {p.insert_into for p in plans if p.insert_into is not None}
    streams = sorted(consumed_types(plan) & inserted)
    if streams:
        return (f"it reads {', '.join(streams)}, which statements insert into: that stream "
                "has no retained input of its own")
    # what a subquery or an expression may name besides the statement's own streams
    shared = {
        "variable": {p.variable or p.name for p in plans if p.kind == "variable"},
        "named window": {p.window for p in plans if p.kind == "window" and p.window},
        "table": {p.name for p in plans if p.kind == "table"},
        "stream": inserted}
    for what, names in shared.items():
        used = sorted(n for n in names if re.search(rf"\b{re.escape(n)}\b", plan.epl))
        if used:
            return (f"it names {what} {', '.join(used)}, which other statements write: a "
                    "replay of this statement alone cannot give its contents")
    return ""


class RetainedInput(Protocol):
    """An engine partition's input records as far back as they are retained."""

    def records(self, part: EnginePartition, alive: Callable[[], None]) -> Iterator[InRecord]:
        """Input records of ``part`` in each input partition's order, from its earliest
        retained offset, at least up to what ``part.applied`` says was applied."""
        ...


def rebuild(part: EnginePartition, names: list[str], source: RetainedInput,
            alive: Callable[[], None] | None = None) -> int:
    """Replay ``part``'s retained input into fresh state of statements ``names`` (their
    state already cleared in ``part``'s batch); their state and rows join ``part``'s
    batch.  Returns the number of input records replayed."""
    t0 = perf_counter()
    keep = set(names)
    g = part.group
    plans = [p for p in g.plans if p.name in keep or p.kind == "schema"]
    scratch_group = replace(g, plans=plans, posting=[], resets=None, replays={})
    path = part.store.path.parent / f"{part.partition}.rebuild"
    shutil.rmtree(path, ignore_errors=True)
    scratch = EnginePartition(scratch_group, part.partition, path, part.upstreams,
                              f"{part.changelog_topic}.rebuild", None)
    rows = []
    replayed = 0
    late = dict(LATE)  # the replay's late events were counted when they came
    try:
        scratch.load()
        limit = dict(part.applied)
        batch: list[InRecord] = []
        offset = 0

        def flush() -> None:
            nonlocal offset
            scratch.run(batch)
            rows.extend(r for r in scratch.outputs if r.statement in keep)
            scratch.seal()
            scratch.committed(offset)  # local only: the scratch state is thrown away
            offset += 1
            batch.clear()

        records = source.records(part, alive or (lambda: None)) if limit else iter(())
        for r in records:
            if r.offset > limit.get(r.upstream, -1):
                continue
            batch.append(r)
            replayed += 1
            if len(batch) >= CHUNK:
                flush()
        if batch:
            flush()
        for name in names:
            prefix = scratch.store.namespace("s", name).prefix
            it = scratch.store.db.iter()
            it.seek(prefix)
            while it.valid() and it.key().startswith(prefix):
                part.store.db[it.key()] = it.value()
                it.next()
    finally:
        LATE.update(late)
        scratch.close()
        shutil.rmtree(path, ignore_errors=True)
    for r in rows:  # row ids continue after the statement's last ones
        c = part.counter((r.statement, r.context_partition))
        part.outputs.append(r._replace(seq=part.next_seq(c), counter=c))
    part.rebuilt = (f"rebuilt {', '.join(names)} in {g.name}[{part.partition}] from its "
                    f"retained input: {replayed} records, {len(rows)} rows in "
                    f"{perf_counter() - t0:.3f} s")
    log.info("%s", part.rebuilt)
    return replayed


# -- on Kafka ----------------------------------------------------------------------
def _partitions(topology: Topology, group_name: str, partitions: dict[str, int]
                ) -> list[tuple[str, int]]:
    """The Kafka partitions that feed group ``group_name``'s engine partitions."""
    g = topology.groups[group_name]
    if g.direct:
        return [(t, p) for t in g.topics for p in range(partitions.get(t, 1))]
    return [(topology.config.repartition_topic(g.name), p) for p in range(g.partitions)]


def retention_refusals(topology: Topology, bootstrap: str, names: list[str]) -> list[str]:
    """Statements rebuilt from-earliest whose group's input partitions lost their
    earliest records (retention, DeleteRecords): the replay would start late."""
    from confluent_kafka.admin import AdminClient

    from app.runtime.kafka import client

    if not names:
        return []
    admin = AdminClient(client.conf({"bootstrap.servers": bootstrap, "log_level": 0}))
    md = admin.list_topics(timeout=30)
    counts = {t: len(m.partitions) for t, m in md.topics.items()}
    group_of = {p.name: g.name for g in topology.groups.values() for p in g.plans}
    out: list[str] = []
    consumer = _consumer(bootstrap)
    try:
        from confluent_kafka import TopicPartition

        for name in names:
            g = group_of.get(name)
            if g is None:
                continue
            for topic, p in _partitions(topology, g, counts):
                if topic not in counts:
                    continue
                low, _ = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                if low > 0:
                    out.append(
                        f"{name}: --rebuild from-earliest cannot serve it: {topic}[{p}] "
                        f"starts at offset {low} (its earlier records were deleted by "
                        "retention or DeleteRecords), so its retained input is not all "
                        "of its input (use from-now, or kepl reset)")
                    break
    finally:
        consumer.close()
    return out


def _consumer(bootstrap: str) -> Any:
    from confluent_kafka import Consumer

    from app.runtime.kafka import client

    return Consumer(client.consumer_conf({
        "bootstrap.servers": bootstrap, "group.id": "kepl-rebuild",
        "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": "read_committed", "log_level": 0}))


class KafkaRetainedInput:
    """An engine partition's retained input, read from the broker with its own consumer
    (read_committed, no group offsets)."""

    def __init__(self, bootstrap: str, topology: Topology, routing: Any) -> None:
        self.bootstrap = bootstrap
        self.topology = topology
        self.routing = routing

    def records(self, part: EnginePartition, alive: Callable[[], None]) -> Iterator[InRecord]:
        from confluent_kafka import KafkaError, TopicPartition

        g = part.group
        if g.direct:
            stops = {}
            for u in part.upstreams:
                topic, _, p = u.rpartition(":")
                if part.applied.get(u, -1) >= 0:
                    stops[(topic, int(p))] = part.applied[u]
        else:
            stops = {(self.topology.config.repartition_topic(g.name), part.partition): -1}
        if not stops:
            return
        c = _consumer(self.bootstrap)
        try:
            starts = []
            for (topic, p), stop in list(stops.items()):
                low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                if low > 0:
                    log.warning("%s[%d] starts at offset %d: the rebuild replays what is "
                                "retained", topic, p, low)
                if stop < 0:
                    stops[(topic, p)] = stop = high - 1
                if high <= low or stop < low:
                    del stops[(topic, p)]
                    continue
                starts.append(TopicPartition(topic, p, low))
            if not stops:
                return
            c.assign(starts)
            while stops:
                m = c.poll(1.0)
                alive()
                if m is None:
                    continue
                key = (m.topic(), m.partition())
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        stops.pop(key, None)
                        continue
                    raise RuntimeError(f"rebuild: reading {key[0]}[{key[1]}]: {err}")
                if key not in stops:
                    continue
                off = m.offset()
                if g.direct:
                    rec = self._source(m, g.types)
                    if rec is not None:
                        yield rec
                else:
                    from app.runtime.kafka.router import decode_bundle

                    yield from decode_bundle(m.value(), f"{key[0]}:{key[1]}", off)
                if off >= stops[key]:
                    del stops[key]
        finally:
            c.close()

    def _source(self, m: Any, types: set[str]) -> InRecord | None:
        """A source record as the intake stages it for a directly fed engine partition
        (``intake.Intake.source``); None for what the intake dead-letters."""
        from app.runtime.kafka.router import (
            H_CONTROL,
            H_SEQ,
            H_TYPE,
            KNOWN_HEADERS,
            decode_seq,
            decode_watermark,
        )

        upstream = f"{m.topic()}:{m.partition()}"
        off = m.offset()
        control = type_hdr = seq = None
        for k, v in m.headers() or ():
            if k == H_CONTROL:
                control = v if v is not None else b""
            elif k == H_TYPE:
                type_hdr = v
            elif k == H_SEQ:
                seq = v
            elif k.startswith("kepl.") and k not in KNOWN_HEADERS:
                return None
        try:
            if control is not None:
                if control != b"watermark":
                    return None
                t, wid = decode_watermark(m.value())
                return InRecord("barrier", upstream, off, payload={"t": t, "id": wid},
                                via=upstream, via_offset=off)
            seqn = decode_seq(seq) if seq is not None else None
            type_name, event = self.routing.decode(m.topic(), type_hdr, m.value())
        except Exception:  # noqa: BLE001 - the intake dead-lettered it
            return None
        if type_name not in types:
            return None
        return InRecord("event", upstream, off, type_name=type_name, ts=m.timestamp()[1],
                        seq=seqn, payload=event, via=upstream, via_offset=off)

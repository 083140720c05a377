"""The routing stage: source records in, repartitioned events, barriers and dead letters out.

Pure logic (no I/O) so it can be tested without a broker; the worker's router agent
feeds it the records it consumes and produces what it returns.

- An event record is decoded (JSON object), checked against its type with
  ``coerce_event`` and forwarded, in canonical JSON, to the repartition partition of
  every group that consumes its type.  Anything else goes to the dead-letter topic with
  the original bytes and headers ``kepl.error`` (the reason) and ``kepl.source``
  (``topic/partition/offset``).
- A watermark control record (``kepl.control: watermark``, written in-band by the
  clock) becomes a barrier in *every* partition of every repartition topic, tagged with
  the source partition it came from.

Every forwarded record carries its upstream ``topic:partition`` and offset, which lets
the engine drop the duplicates a restarted router re-forwards.

On the wire, what a router batch sends to one repartition partition travels as *bundle*
records (``bundle``): a JSON array of ``[kind, type, upstream, offset, ts, seq, value]``
entries in routing order.  The engine side then pays Kafka's and faust's per-message cost
once per bundle instead of once per event; duplicates are still dropped per entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.runtime.catalog import EventTypeError, coerce_event
from app.runtime.kafka.topology import Topology

H_CONTROL = "kepl.control"
H_KIND = "kepl.kind"
H_TYPE = "kepl.type"
H_UPSTREAM = "kepl.upstream"
H_OFFSET = "kepl.offset"
H_TS = "kepl.ts"
H_SEQ = "kepl.seq"
H_ERROR = "kepl.error"
H_SOURCE = "kepl.source"
H_STATEMENT = "kepl.statement"
H_STREAM = "kepl.stream"
H_PARTITION = "kepl.context_partition"
H_TIME = "kepl.time"
H_ID = "kepl.id"
H_COUNT = "kepl.count"

BUNDLE_MAX_BYTES = 256 * 1024
"""A bundle record stays well under the broker's default ``max.message.bytes`` (1 MiB)."""

Headers = list[tuple[str, bytes]]


@dataclass(frozen=True)
class SourceRecord:
    """What the router needs of a consumed record."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    headers: dict[str, bytes]
    value: bytes | None


@dataclass(frozen=True)
class OutRecord:
    """A record to produce."""

    topic: str
    partition: int | None
    value: bytes
    headers: Headers
    key: bytes | None = None


def headers_dict(headers: Any) -> dict[str, bytes]:
    """Kafka headers (list of pairs or mapping, values bytes or None) as a dict."""
    if not headers:
        return {}
    items = headers.items() if isinstance(headers, dict) else headers
    return {str(k): (v if isinstance(v, bytes) else (v or "").encode()) for k, v in items}


class Router:
    """Routes source records of one app (see module docstring)."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        cfg = topology.config
        self.groups = topology.active_groups()
        self.repartition = {g.name: cfg.repartition_topic(g.name) for g in self.groups}
        self.dlq_topic = cfg.dlq_topic
        self.types_of = {t: cfg.types_of_topic(t) for t in cfg.source_topics}

    def route(self, rec: SourceRecord) -> list[OutRecord]:
        """Records to produce for one source record (possibly none)."""
        upstream = f"{rec.topic}:{rec.partition}".encode()
        offset = str(rec.offset).encode()
        if rec.headers.get(H_CONTROL) == b"watermark":
            return self._barrier(rec, upstream, offset)
        try:
            type_name = self._type_of(rec)
            if rec.value is None:
                raise EventTypeError("empty record (no value)")
            try:
                raw = json.loads(rec.value)
            except (ValueError, UnicodeDecodeError) as e:
                raise EventTypeError(f"not JSON: {e}") from None
            if not isinstance(raw, dict):
                raise EventTypeError(f"an event of {type_name} must be a JSON object")
            event = coerce_event(self.topology.catalog, type_name, raw)
            targets = [(g.name, g.partition_of(type_name, event)) for g in self.groups]
        except Exception as e:  # noqa: BLE001 - anything a record can trigger is a dead letter
            return [self.dead_letter(rec, str(e) or type(e).__name__)]
        value = json.dumps(event, separators=(",", ":")).encode()
        headers: Headers = [(H_KIND, b"event"), (H_TYPE, type_name.encode()),
                            (H_UPSTREAM, upstream), (H_OFFSET, offset),
                            (H_TS, str(rec.timestamp_ms).encode())]
        seq = rec.headers.get(H_SEQ)
        if seq is not None:
            headers.append((H_SEQ, seq))
        return [OutRecord(self.repartition[g], p, value, headers)
                for g, p in targets if p is not None]

    def _type_of(self, rec: SourceRecord) -> str:
        types = self.types_of.get(rec.topic, [])
        given = rec.headers.get(H_TYPE)
        if given is not None:
            name = given.decode(errors="replace")
            if name not in types:
                raise EventTypeError(f"topic {rec.topic} does not carry event type '{name}'")
            return name
        if len(types) != 1:
            raise EventTypeError(
                f"topic {rec.topic} carries several event types; header {H_TYPE} is required")
        return types[0]

    def _barrier(self, rec: SourceRecord, upstream: bytes, offset: bytes) -> list[OutRecord]:
        try:
            wm = json.loads(rec.value or b"")
            t = int(wm["t"])
            str(wm["id"])
        except (ValueError, TypeError, KeyError) as e:
            return [self.dead_letter(rec, f"malformed watermark: {e}")]
        value = json.dumps({"t": t, "id": str(wm["id"])}, separators=(",", ":")).encode()
        headers: Headers = [(H_KIND, b"barrier"), (H_UPSTREAM, upstream), (H_OFFSET, offset)]
        return [OutRecord(self.repartition[g.name], p, value, headers)
                for g in self.groups for p in range(g.partitions)]

    def dead_letter(self, rec: SourceRecord, reason: str) -> OutRecord:
        """The original record, with why and where it came from, for the DLQ topic."""
        headers: Headers = [(k, v) for k, v in rec.headers.items()
                            if k not in (H_ERROR, H_SOURCE)]
        headers += [(H_ERROR, reason.encode()),
                    (H_SOURCE, f"{rec.topic}/{rec.partition}/{rec.offset}".encode())]
        return OutRecord(self.dlq_topic, 0, rec.value or b"", headers)


def _entry(out: OutRecord) -> bytes:
    """One repartition record as a bundle entry (the value is already canonical JSON)."""
    h = dict(out.headers)
    seq = h.get(H_SEQ)
    head = [h[H_KIND].decode(), h.get(H_TYPE, b"").decode(), h[H_UPSTREAM].decode(),
            int(h[H_OFFSET]), int(h.get(H_TS, b"0")), int(seq) if seq is not None else None]
    return json.dumps(head, separators=(",", ":")).encode()[:-1] + b"," + out.value + b"]"


def bundle(records: list[OutRecord], repartition_topics: set[str]) -> list[OutRecord]:
    """Repartition records as bundles: per (topic, partition), in order, at most
    ``BUNDLE_MAX_BYTES`` each; other records (dead letters) pass through unchanged."""
    out: list[OutRecord] = []
    lanes: dict[tuple[str, int | None], list[bytes]] = {}
    for r in records:
        if r.topic in repartition_topics:
            lanes.setdefault((r.topic, r.partition), []).append(_entry(r))
        else:
            out.append(r)
    for (topic, partition), entries in lanes.items():
        chunk: list[bytes] = []
        size = 0
        for e in entries:
            if chunk and size + len(e) > BUNDLE_MAX_BYTES:
                out.append(_bundle_record(topic, partition, chunk))
                chunk, size = [], 0
            chunk.append(e)
            size += len(e) + 1
        if chunk:
            out.append(_bundle_record(topic, partition, chunk))
    return out


def _bundle_record(topic: str, partition: int | None, entries: list[bytes]) -> OutRecord:
    return OutRecord(topic, partition, b"[" + b",".join(entries) + b"]",
                     [(H_KIND, b"bundle"), (H_COUNT, str(len(entries)).encode())])

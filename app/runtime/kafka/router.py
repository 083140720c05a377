"""The routing stage: what a source record is, and where it goes.  Pure logic, no I/O.

- An event record is decoded (a JSON object) and checked against its type with
  ``event_coercer``; ``Routing.targets`` names the repartition partition of every routed
  group that consumes its type.  A record that fails goes to the dead-letter topic with
  the original bytes and headers ``kepl.error`` (the reason) and ``kepl.source``
  (``topic/partition/offset``): ``dead_letter_headers``.
- A watermark control record (``kepl.control: watermark``, written in-band by the clock)
  becomes a barrier in *every* partition of every repartition topic, tagged with the
  source partition it came from.

- A hash context without ``preallocate`` numbers its buckets in order of first use
  (``context.id``), and each bucket lives in another engine partition.  So at the first
  event of a bucket from a source partition, every engine partition that has had no
  event from that source partition yet also gets a *touch* entry (the bucket, at the
  event's place): each then knows which buckets were used before its own, in the same
  merged order as its events (``Routing.forward``, ``EnginePartition._first_uses``).
  Which partitions a source partition has sent events to is kept in its ``LaneCursor``,
  committed and rewound with it; a restart forgets it and sends touches again, which
  change nothing.

What one consume batch sends to one repartition partition travels as a *bundle* record:
a JSON array of ``[kind, type, upstream, offset, ts, seq, value]`` entries in routing
order (``encode_bundle`` / ``decode_bundle``).  Every entry carries its upstream
``topic:partition`` and offset, so the engine side drops what a restarted worker
forwards twice, and pays Kafka's per-record cost once per bundle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.runtime.catalog import Catalog, EventTypeError, event_coercer
from app.runtime.kafka import codec, formats
from app.runtime.kafka.lanes import LaneCursor
from app.runtime.kafka.partition import InRecord
from app.runtime.kafka.topology import Group, Topology

H_CONTROL = "kepl.control"
H_TYPE = "kepl.type"
H_SEQ = "kepl.seq"
H_ERROR = "kepl.error"
H_SOURCE = "kepl.source"
H_STATEMENT = "kepl.statement"
H_STREAM = "kepl.stream"
H_PARTITION = "kepl.context_partition"
H_TIME = "kepl.time"
H_ID = "kepl.id"
H_NONFINITE = "kepl.nonfinite"
"""On an output record whose row held NaN or an infinity, written as a string."""
KNOWN_HEADERS = frozenset({H_CONTROL, H_TYPE, H_SEQ, H_ERROR, H_SOURCE, H_STATEMENT,
                           H_STREAM, H_PARTITION, H_TIME, H_ID, H_NONFINITE})
"""Every kepl.* header kepl writes: a source record may carry them (a dead letter sent
back, another app's output); any other kepl.* header makes the record a dead letter."""

BUNDLE_MAX_ENTRIES = 2000
"""Entries per bundle record at most (keeps a record well under the broker's 1 MiB)."""

Headers = list[tuple[str, bytes]]
Entry = list[Any]


def headers_dict(headers: Any) -> dict[str, bytes]:
    """Kafka headers (list of pairs or mapping, values bytes or None) as a dict."""
    if not headers:
        return {}
    items = headers.items() if isinstance(headers, dict) else headers
    return {str(k): (v if isinstance(v, bytes) else (v or "").encode()) for k, v in items}


class Routing:
    """Types, decoding and targets of the source records of one app."""

    def __init__(self, topology: Topology) -> None:
        cfg = topology.config
        self.catalog: Catalog = topology.catalog
        self.types_of = {t: cfg.types_of_topic(t) for t in cfg.source_topics}
        self.coerce = {t: event_coercer(self.catalog, t) for t in cfg.schemas}
        self.decoders = formats.decoders(cfg.formats, cfg.topics)
        """Source topic -> the decoder of its non-JSON records (``formats``)."""
        routed = topology.routed_groups()
        self.barrier_targets = [(cfg.repartition_topic(g.name), q)
                                for g in routed if not g.fed_by for q in range(g.partitions)]
        """Every repartition partition but those of groups fed by other engine
        partitions, whose watermarks come from them (``Group.fed_by``)."""
        self._route_of: dict[str, list[tuple[str, Group]]] = {
            t: [(cfg.repartition_topic(g.name), g) for g in routed
                if g.types & set(self.types_of[t])]
            for t in cfg.source_topics}
        self._numbered = {cfg.repartition_topic(g.name): g.partitions for g in routed
                          if g.numbers_first_use}
        """Repartition topics of hash contexts numbered by first use -> partitions."""
        self._arming = {cfg.repartition_topic(g.name): g for g in routed if g.arms}
        """Repartition topics of split statements whose timed output the first update
        arms -> their group (``arm``)."""
        self._routers: dict[tuple[str, str], Callable[..., None]] = {}
        """(topic, type) -> its ``router``, built once: a route's caches outlive a run."""

    def type_of(self, topic: str, given: bytes | None) -> str:
        """The event type of a record: its ``kepl.type`` header, or the topic's one type."""
        types = self.types_of.get(topic, [])
        if given is not None:
            name = given.decode(errors="replace")
            if name not in types:
                raise EventTypeError(f"topic {topic} does not carry event type '{name}'")
            return name
        if len(types) != 1:
            raise EventTypeError(
                f"topic {topic} carries several event types; header {H_TYPE} is required")
        return types[0]

    def decode(self, topic: str, type_header: bytes | None,
               value: bytes | None) -> tuple[str, dict[str, Any]]:
        """``(type, event)`` of an event record; ``EventTypeError`` says why not."""
        type_name = self.type_of(topic, type_header)
        if value is None:
            raise EventTypeError("empty record (no value)")
        try:
            dec = self.decoders.get(topic)
            raw = codec.loads(value) if dec is None else dec(value)
        except codec.NotText as e:
            raise EventTypeError(f"{type_name}: {e}") from None
        except ValueError as e:
            raise EventTypeError(str(e) if dec else f"not JSON: {e}") from None
        except RecursionError:
            raise EventTypeError("not JSON: nested too deeply") from None
        if not isinstance(raw, dict):
            raise EventTypeError(f"an event of {type_name} must be a JSON object")
        return type_name, self.coerce[type_name](raw)

    def routes(self, topic: str) -> bool:
        """Whether some routed group takes events of ``topic``."""
        return bool(self._route_of[topic])

    def forward(self, bundles: dict[tuple[str, int], list[Entry]], cursor: LaneCursor,
                topic: str, type_name: str, event: dict[str, Any], upstream: str,
                offset: int, ts: int, seq: int | None,
                targets: list[tuple[str, int]] | None = None) -> None:
        """Append an event of source partition ``upstream`` to the bundles of its
        repartition partitions (``targets``, when already known), with the touches of a
        first use (module docstring)."""
        if targets is None:
            targets = self.targets(topic, type_name, event)
        entry: Entry | None = None
        for rt, q in targets:
            if entry is None:
                entry = event_entry(type_name, upstream, offset, ts, seq, event)
            bundles.setdefault((rt, q), []).append(entry)
            if rt in self._numbered:
                if q not in cursor.used.get(rt, ()):
                    self.first_use(bundles, cursor, rt, q, upstream, offset, ts, seq)
            elif rt in self._arming and arm_key(rt, type_name) not in cursor.used:
                self.arm(bundles, cursor, rt, q, type_name, event, upstream, offset, ts,
                         seq)

    def first_use(self, bundles: dict[tuple[str, int], list[Entry]], cursor: LaneCursor,
                  rt: str, q: int, upstream: str, offset: int, ts: int, seq: int | None
                  ) -> None:
        """The first event of bucket partition ``q`` of a numbered hash context from
        this source partition: a touch to each partition that has had none from here."""
        used = cursor.used.get(rt, frozenset())
        cursor.used[rt] = used | {q}
        touch = touch_entry(upstream, offset, ts, seq, q)
        for r in range(self._numbered[rt]):
            if r != q and r not in used:
                bundles.setdefault((rt, r), []).append(touch)

    def arm(self, bundles: dict[tuple[str, int], list[Entry]], cursor: LaneCursor, rt: str,
            q: int, type_name: str, event: dict[str, Any], upstream: str, offset: int,
            ts: int, seq: int | None) -> None:
        """The first update (or arrival) of a split statement from this source
        partition: a touch to its other partitions, which arm their timed output (or
        ``#time_batch``) at the same time, as one engine's first update arms it (Esper
        ref. 5.7.1 Output clause options, 14.3.5).  In event time the touch carries the
        event's time, at which it arms.  A join's streams arm apart (each window's first
        arrival), so the touch names the event's type.  A restarted router may send it
        again: arming twice changes nothing."""
        g = self._arming[rt]
        assert g.split is not None
        if not g.split.arms_with(event, g._ctx, type_name):
            return
        cursor.used[arm_key(rt, type_name)] = frozenset((q,))
        if g.event_time is not None:
            ts = g.event_time.time_of(type_name, event, ts)
        touch = touch_entry(upstream, offset, ts, seq, q, type_name)
        for r in range(g.partitions):
            if r != q:
                bundles.setdefault((rt, r), []).append(touch)

    def router(self, topic: str, type_name: str) -> Callable[..., None]:
        """``forward`` of events of one type of ``topic`` as one function of
        ``(bundles, cursor, event, upstream, offset, ts)``, its targets found as it goes
        (an error finding them is raised before anything is appended).  An event of a
        topic read by one group takes one call to find its partition
        (``Group.partition_fn``) and none to forward, but for a first use or an arming.
        Built once per (topic, type)."""
        built = self._routers.get((topic, type_name))
        if built is None:
            built = self._routers[(topic, type_name)] = self._router(topic, type_name)
        return built

    def _router(self, topic: str, type_name: str) -> Callable[..., None]:
        routes = self._route_of[topic]
        if len(routes) == 1:
            rt, g = routes[0]
            partition_of = g.partition_fn(type_name)
            numbered, first_use = rt in self._numbered, self.first_use
            arming, arm, armed = rt in self._arming, self.arm, arm_key(rt, type_name)

            def one_route(bundles: dict[tuple[str, int], list[Entry]], cursor: LaneCursor,
                          event: dict[str, Any], upstream: str, offset: int, ts: int
                          ) -> None:
                q = partition_of(event)
                if q is not None:
                    entry = ["event", type_name, upstream, offset, ts, None, event]  # event_entry
                    staged = bundles.get((rt, q))
                    if staged is None:
                        bundles[(rt, q)] = [entry]
                    else:
                        staged.append(entry)
                    if numbered:
                        if q not in cursor.used.get(rt, ()):
                            first_use(bundles, cursor, rt, q, upstream, offset, ts, None)
                    elif arming and armed not in cursor.used:
                        arm(bundles, cursor, rt, q, type_name, event, upstream, offset,
                            ts, None)
            return one_route

        def any_routes(bundles: dict[tuple[str, int], list[Entry]], cursor: LaneCursor,
                       event: dict[str, Any], upstream: str, offset: int, ts: int) -> None:
            targets = self.targets(topic, type_name, event)
            if targets:
                self.forward(bundles, cursor, topic, type_name, event, upstream, offset,
                             ts, None, targets)
        return any_routes

    def targets(self, topic: str, type_name: str,
                event: dict[str, Any]) -> list[tuple[str, int]]:
        """The repartition partitions an event of ``topic`` goes to."""
        out = []
        for rt, g in self._route_of[topic]:
            q = g.partition_of(type_name, event)
            if q is not None:
                out.append((rt, q))
        return out


LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


def decode_watermark(value: bytes | None) -> tuple[int, str]:
    """``(t, id)`` of a watermark record (``{"t": ms, "id": text}``, ``t`` a 64-bit
    integer); ``ValueError`` says what is wrong with a malformed one."""
    try:
        wm = codec.loads(value or b"")
    except RecursionError:
        raise ValueError("malformed watermark: nested too deeply") from None
    except ValueError as e:
        raise ValueError(f"malformed watermark: not JSON: {e}") from None
    if type(wm) is not dict or "t" not in wm or "id" not in wm:
        raise ValueError('malformed watermark: must be an object {"t": ms, "id": text}')
    given, wid = wm["t"], wm["id"]
    t = int(given) if type(given) is float and given.is_integer() else given
    if type(t) is not int or not LONG_MIN <= t <= LONG_MAX:
        raise ValueError(f"malformed watermark: t must be a 64-bit integer (ms), got "
                         f"{_short(given)}")
    if type(wid) not in (str, int):
        raise ValueError(f"malformed watermark: id must be a string, got {_short(wid)}")
    return t, str(wid)


def decode_seq(value: bytes) -> int:
    """The ``kepl.seq`` header: a 64-bit integer, else ``ValueError`` saying so."""
    try:
        seq = int(value)
    except (ValueError, TypeError):
        seq = None
    if seq is None or not LONG_MIN <= seq <= LONG_MAX:
        raise ValueError(f"header {H_SEQ} must be a 64-bit integer, got {_short(value)}")
    return seq


def _short(v: object) -> str:
    r = repr(v)
    return r if len(r) <= 40 else f"{r[:37]}..."


def dead_letter_headers(headers: Any, reason: str, topic: str, partition: int,
                        offset: int) -> Headers:
    """The original headers plus why (``kepl.error``) and where from (``kepl.source``)."""
    out: Headers = [(k, v) for k, v in headers_dict(headers).items()
                    if k not in (H_ERROR, H_SOURCE)]
    out += [(H_ERROR, reason.encode()), (H_SOURCE, f"{topic}/{partition}/{offset}".encode())]
    return out


def event_entry(type_name: str, upstream: str, offset: int, ts: int, seq: int | None,
                event: dict[str, Any]) -> Entry:
    return ["event", type_name, upstream, offset, ts, seq, event]


def touch_entry(upstream: str, offset: int, ts: int, seq: int | None, bucket: int,
                type_name: str = "") -> Entry:
    """The first use of ``bucket`` by the event at ``offset`` (sent to other buckets);
    an arming touch names the event's type."""
    return ["touch", type_name, upstream, offset, ts, seq, bucket]


def arm_key(rt: str, type_name: str) -> str:
    """A lane cursor's key for "events of ``type_name`` armed the split statement of
    repartition topic ``rt`` from this source partition"."""
    return f"{rt}\x00{type_name}"


def barrier_entry(upstream: str, offset: int, t: int, wid: str) -> Entry:
    return ["barrier", "", upstream, offset, 0, None, {"t": t, "id": wid}]


def encode_bundles(entries: list[Entry]) -> list[bytes]:
    """Bundle record values for entries bound to one repartition partition, in order."""
    return [codec.bundle(entries[i:i + BUNDLE_MAX_ENTRIES])
            for i in range(0, len(entries), BUNDLE_MAX_ENTRIES)]


def decode_bundle(value: bytes, via: str = "", via_offset: int = -1) -> list[InRecord]:
    """The input records of a bundle (``via``: the repartition partition that carried it)."""
    new = tuple.__new__
    return [new(InRecord, (kind, up, uoff, type_name, ts, seq, payload, b"", via, via_offset))
            for kind, type_name, up, uoff, ts, seq, payload in codec.loads(value)]

"""Event time: the runtime time of an app taken from its events, not from ``kepl clock T``.

An app with an ``event_time:`` section runs on the time its producers stamp on their
records (the Kafka record timestamp, or a declared property of the event type):

- ``event_clock.EventClock`` (``kepl clock FILE --from-events``) follows the source partitions and
  publishes watermarks in-band, as ``kepl clock`` does: per partition the newest event
  time read minus ``delay_ms``; the watermark is the minimum over the partitions, where
  a partition that has had no record for ``idle_ms`` (wall clock) does not count (as
  Flink's ``withIdleness``); when every partition is idle the newest of them counts, so
  the time of a stream that went quiet still reaches its last event minus the delay.
  The watermark never goes back, also across a restart of the clock (it starts from
  the last one on ``kepl.<app>.watermarks``).
- An engine partition holds each event until a watermark reaches its event time
  (``HeldEvents``, part of the partition's committed state), then runs the held events
  in event-time order (ties: the producer's ``kepl.seq``, the upstream, the offset),
  moving the engine clock to each event's time before it.  So a time window, a pattern
  timer or ``output every`` sees the events at their own times, whatever the order they
  arrived in within ``delay_ms``: the rows are those of the embedded run of the same
  events in time order (``advance_time(t)`` then ``send`` per event).
- An event older than the runtime time already reached (a watermark passed it) is
  *late*: ``late_events: process`` runs it at once at the current runtime time (as Esper
  does with an event that arrives after its time: it is simply processed now), ``late_events:
  dead-letter`` sends it to ``kepl.<app>.dlq`` with ``kepl.error`` (the reason) and
  ``kepl.lateness`` (ms behind the runtime time).  Both are counted (``LATE``:
  ``/metrics`` ``kepl_late_events``; ``kepl status`` from the changelog).
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("kepl.eventtime")

LATE_POLICIES = ("process", "dead-letter")
H_LATENESS = "kepl.lateness"
LATE: dict[str, int] = {"process": 0, "dead-letter": 0}
"""Late events of this process by policy (the worker's /metrics)."""


class EventTimeError(ValueError):
    """A malformed ``event_time:`` section."""


@dataclass(frozen=True)
class EventTime:
    """How an app takes its time from its events (module docstring)."""

    delay_ms: int = 0
    idle_ms: int = 10_000
    property: dict[str, str] = field(default_factory=dict)
    """Event type -> the property holding its time (ms); other types: the record
    timestamp."""
    late: str = "process"

    @classmethod
    def parse(cls, raw: Any, late: Any, schemas: dict[str, dict[str, str]]
              ) -> EventTime | None:
        """The ``event_time:`` section and ``late_events`` of a statement file."""
        if late is not None and late not in LATE_POLICIES:
            raise EventTimeError(f"'late_events' must be one of {', '.join(LATE_POLICIES)}, "
                                 f"got {late!r}")
        if raw is None:
            if late is not None:
                raise EventTimeError("'late_events' needs an 'event_time' section (late "
                                     "means behind the time taken from the events)")
            return None
        if not isinstance(raw, dict):
            raise EventTimeError("'event_time' must be a mapping {delay_ms, idle_ms, property}")
        unknown = set(raw) - {"delay_ms", "idle_ms", "property"}
        if unknown:
            raise EventTimeError(f"'event_time' has unknown key(s) {', '.join(sorted(unknown))} "
                                 "(known: delay_ms, idle_ms, property)")
        nums = {}
        for key, default in (("delay_ms", 0), ("idle_ms", 10_000)):
            v = raw.get(key, default)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise EventTimeError(f"'event_time.{key}' must be a number of ms >= 0, "
                                     f"got {v!r}")
            nums[key] = v
        props = raw.get("property") or {}
        if not isinstance(props, dict):
            raise EventTimeError("'event_time.property' must map event types to a property")
        for t, p in props.items():
            if t not in schemas:
                raise EventTimeError(f"'event_time.property' names unknown event type '{t}'")
            kind = schemas[t].get(p) if isinstance(p, str) else None
            if kind not in ("long", "int", "integer"):
                raise EventTimeError(
                    f"'event_time.property.{t}' must name a long property of {t} (the "
                    f"event's time in ms), got {p!r}" + (f" of type {kind}" if kind else ""))
        return cls(nums["delay_ms"], nums["idle_ms"], {str(k): str(v) for k, v in
                                                       props.items()},
                   late or "process")

    def to_dict(self) -> dict[str, Any]:
        return {"delay_ms": self.delay_ms, "idle_ms": self.idle_ms,
                **({"property": dict(self.property)} if self.property else {})}

    def time_of(self, type_name: str, event: Any, record_ts: int) -> int:
        """An event's time: its declared property, else the record timestamp."""
        prop = self.property.get(type_name)
        if prop is not None and isinstance(event, dict):
            v = event.get(prop)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        return int(record_ts)


# -- the engine side -----------------------------------------------------------------

HeldKey = tuple[int, int, int, int]
"""(event time, kepl.seq or -1, upstream index, offset): the release order."""


def _held_key(item: tuple[HeldKey, str, Any]) -> HeldKey:
    return item[0]


class HeldEvents:
    """Events waiting for a watermark at or past their time: entries of a state
    namespace (committed with the partition), mirrored in memory in release order.

    An event is written to the namespace at the checkpoint that finds it still held
    (``persist``, from the partition's seal), not when it arrives: one released before
    that costs the state nothing, where a put and a delete each encoded its key.

    In memory, events that come in release order (a producer's timestamps rarely go
    back) queue in ``run``, a FIFO; one that comes before the run's last goes into
    ``heap``; ``due`` takes from the front of either, whichever is first."""

    def __init__(self, ns: Any) -> None:
        self.ns = ns
        self.run: deque[tuple[HeldKey, str, Any]] = deque(sorted(
            ((tuple(key), value[0], value[1])  # type: ignore[misc]
             for key, value in ns.items()), key=_held_key))
        self.heap: list[tuple[HeldKey, str, Any]] = []
        self.fresh: dict[HeldKey, tuple[str, Any]] = {}
        """Held events added since the last ``persist``: not in the namespace yet."""

    def __len__(self) -> int:
        return len(self.run) + len(self.heap)

    def add(self, key: HeldKey, type_name: str, payload: Any) -> None:
        self.fresh[key] = (type_name, payload)
        run = self.run
        if not run or key > run[-1][0]:
            run.append((key, type_name, payload))
        else:
            heapq.heappush(self.heap, (key, type_name, payload))

    def due(self, t: int) -> Iterator[tuple[HeldKey, str, Any]]:
        """``(key, type, event)`` of every held event with time <= ``t``, in order."""
        run, heap, fresh = self.run, self.heap, self.fresh
        while True:
            if run and (not heap or run[0][0] < heap[0][0]):
                if run[0][0][0] > t:
                    return
                item = run.popleft()
            elif heap:
                if heap[0][0][0] > t:
                    return
                item = heapq.heappop(heap)
            else:
                return
            if fresh.pop(item[0], None) is None:
                self.ns.delete(item[0])
            yield item

    def persist(self) -> None:
        """Write the events added since the last call and still held into the
        namespace (the checkpoint's state must hold every event a watermark has not
        released: its source offset is committed with it)."""
        put = self.ns.put
        for key, (type_name, payload) in self.fresh.items():
            put(key, [type_name, payload])
        self.fresh.clear()


def late_reason(event_time: int, now: int) -> str:
    return (f"late event: event time {event_time} is {now - event_time} ms behind the "
            f"runtime time {now} (a watermark passed it; late_events: dead-letter)")


# -- the watermark source ------------------------------------------------------------

@dataclass
class _Partition:
    newest: int | None = None
    last_seen: float = 0.0


class Follower:
    """The watermark of a set of partitions from what was read (pure: no Kafka)."""

    def __init__(self, partitions: list[tuple[str, int]], event_time: EventTime,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.et = event_time
        self.now = now
        start = now()
        self.parts = {tp: _Partition(None, start) for tp in partitions}

    def saw(self, tp: tuple[str, int], event_time: int) -> None:
        p = self.parts.setdefault(tp, _Partition())
        p.newest = event_time if p.newest is None else max(p.newest, event_time)
        p.last_seen = self.now()

    def watermark(self) -> int | None:
        """min over active partitions of (newest - delay); a partition idle longer than
        ``idle_ms`` does not count; all idle: the newest of all.  None: nothing yet."""
        now = self.now()
        idle_s = self.et.idle_ms / 1000
        active = [p for p in self.parts.values() if now - p.last_seen < idle_s]
        if any(p.newest is None for p in active):
            return None  # an active partition that has not said anything yet holds time
        seen = [p.newest for p in (active or self.parts.values()) if p.newest is not None]
        if not seen:
            return None
        return (min(seen) if active else max(seen)) - self.et.delay_ms

"""``kepl clock FILE --from-events``: watermarks from the events' own time.

Follows every source partition of an app (read_committed, from the beginning) and, every
``every_s``, publishes the watermark ``eventtime.Follower`` computes when it moved past
the last one, through the same in-band ``Clock`` as ``kepl clock T``
(``eventtime`` says how event time maps to the runtime time).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from app.runtime.kafka.eventtime import EventTime, EventTimeError, Follower


class EventClock:
    """``kepl clock FILE --from-events``: follows the source topics, publishes watermarks
    (module docstring) until stopped."""

    def __init__(self, bootstrap: str, config: Any, last: int | None = None,
                 every_s: float = 0.2) -> None:
        """``last``: the last watermark already published (it never goes back)."""
        from confluent_kafka import Consumer

        from app.runtime.kafka import client
        from app.runtime.kafka.clock import Clock

        if config.event_time is None:
            raise EventTimeError(f"app {config.app} has no 'event_time' section")
        self.config = config
        self.et: EventTime = config.event_time
        self.every_s = every_s
        self.clock = Clock(bootstrap, config)
        self.last = last
        self.consumer = Consumer(client.consumer_conf({
            "bootstrap.servers": bootstrap, "group.id": f"kepl.{config.app}.clock",
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "auto.offset.reset": "earliest", "log_level": 3}))
        self.follower = Follower(self.clock.partitions, self.et)
        self.published = 0
        self.stopping = False

    def run(self, stop: Callable[[], bool] = lambda: False) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        from app.runtime.kafka.router import H_CONTROL, H_TYPE, headers_dict

        # from the beginning: the newest time of each partition is what it holds now
        self.consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING)
                              for t, p in self.clock.partitions])
        types = {t: self.config.types_of_topic(t) for t in self.config.source_topics}
        due = time.monotonic() + self.every_s
        while not stop():
            for m in self.consumer.consume(1000, 0.05):
                if m.error() is not None:
                    continue
                hd = headers_dict(m.headers())
                if H_CONTROL in hd:
                    continue
                ts = m.timestamp()[1]
                name = (hd[H_TYPE].decode(errors="replace") if H_TYPE in hd
                        else (types.get(m.topic()) or [""])[0])
                event: Any = None
                if name in self.et.property:
                    try:
                        event = json.loads(m.value() or b"null")
                    except ValueError:
                        event = None
                self.follower.saw((m.topic(), m.partition()),
                                  self.et.time_of(name, event, ts))
            if time.monotonic() >= due:
                due = time.monotonic() + self.every_s
                self.tick()

    def tick(self) -> int | None:
        """Publish the watermark if it moved past the last one; returns it."""
        wm = self.follower.watermark()
        if wm is None or (self.last is not None and wm <= self.last):
            return None
        self.clock.publish(wm)
        self.last = wm
        self.published += 1
        return wm

    def close(self) -> None:
        self.consumer.close()
        self.clock.close()

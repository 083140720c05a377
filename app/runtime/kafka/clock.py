"""The ``kepl clock`` side: watermarks written in-band into the source partitions.

A watermark is a barrier (docs/architecture.md, "Time"): the clock
appends a control record (header ``kepl.control: watermark``, value ``{"t": ms, "id":
...}``) to *every* partition of every source topic, so each partition says where in its
own record order the time moved.  The router forwards it into the repartition topics and
the engine advances to the minimum over its upstream partitions.  A copy goes to
``kepl.<app>.watermarks`` as the clock's own log.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from app.runtime.kafka import client
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.router import H_CONTROL, decode_watermark


class NotDelivered(RuntimeError):
    """A watermark the broker did not acknowledge in time; ``cause`` says why."""

    def __init__(self, wid: str, cause: str) -> None:
        super().__init__(f"watermark {wid} not written: {cause}")
        self.cause = cause


class Clock:
    """Publishes watermarks of one app; keeps its producer and partition list."""

    def __init__(self, bootstrap: str, config: AppConfig,
                 timeout_s: float | None = None) -> None:
        """``timeout_s``: every watermark is acknowledged within it or ``publish`` raises
        ``NotDelivered``; None waits 30 s and leaves what is still queued to the producer."""
        from confluent_kafka import Producer

        self.config = config
        self.timeout_s = timeout_s
        settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                    "linger.ms": 0, "log_level": 0}
        if timeout_s is not None:
            settings["message.timeout.ms"] = max(1, int(timeout_s * 1000))
        self.producer = Producer(client.conf(settings))
        self.partitions = self._partitions()

    def _partitions(self) -> list[tuple[str, int]]:
        md = self.producer.list_topics(timeout=30 if self.timeout_s is None else self.timeout_s)
        out: list[tuple[str, int]] = []
        for t in self.config.source_topics:
            if t not in md.topics or not md.topics[t].partitions:
                raise RuntimeError(f"source topic {t} does not exist")
            out += [(t, p) for p in sorted(md.topics[t].partitions)]
        return out

    def publish(self, t_ms: int, wid: str | None = None) -> str:
        """Write watermark ``t_ms`` into every source partition; returns its id."""
        wid = wid or f"{t_ms}-{uuid.uuid4().hex[:12]}"
        value = json.dumps({"t": int(t_ms), "id": wid}, separators=(",", ":")).encode()
        headers = [(H_CONTROL, b"watermark")]
        errors: list[Any] = []

        def check(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        for topic, p in self.partitions:
            self.producer.produce(topic, value, partition=p, headers=headers,
                                  timestamp=max(int(t_ms), 0), on_delivery=check)
        self.producer.produce(self.config.watermark_topic, value, headers=headers,
                              on_delivery=check)
        left = self.producer.flush(30 if self.timeout_s is None else self.timeout_s + 5)
        if errors or (left and self.timeout_s is not None):
            cause = errors[0].str() if errors else f"{left} record(s) not acknowledged"
            raise NotDelivered(wid, cause)
        return wid

    def close(self) -> None:
        self.producer.flush(30)


def publish_watermark(bootstrap: str, app_config: AppConfig, t_ms: int,
                      timeout_s: float | None = None) -> str:
    """Publish one watermark at ``t_ms`` for ``app_config``'s source topics and wait for
    every acknowledgement (``NotDelivered`` after ``timeout_s``); its id."""
    clock = Clock(bootstrap, app_config, timeout_s)
    try:
        return clock.publish(t_ms)
    finally:
        clock.close()


def last_watermark(bootstrap: str, topic: str, timeout_s: float = 5.0) -> int | None:
    """The time of the last watermark on the app's watermark topic (None: none yet):
    what ``kepl clock`` refuses to go below and ``kepl status`` shows.

    Reads the last few records of each partition; the greatest time wins.  Each request
    to the broker waits ``timeout_s`` at most."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(client.consumer_conf({
        "bootstrap.servers": bootstrap, "group.id": "kepl-clock",
        "enable.auto.commit": False, "log_level": 0}))
    last: int | None = None
    try:
        md = consumer.list_topics(topic, timeout=timeout_s)
        for p in sorted(md.topics[topic].partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                       timeout=timeout_s)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, max(low, high - 16))])
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                try:
                    t, _ = decode_watermark(msg.value())
                    last = t if last is None else max(last, t)
                except ValueError:
                    pass
                if msg.offset() >= high - 1:
                    break
    finally:
        consumer.close()
    return last

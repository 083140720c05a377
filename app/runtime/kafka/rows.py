"""Output rows as Kafka records: what a lane emits and an engine partition's rows at a
checkpoint (its step 2) go to the statement's output topic through the open transaction.

A record is the row as JSON (or its topic's format: ``formats``), keyed by its context
partition, with headers ``kepl.id`` (statement/partition/sequence, what readers
deduplicate by), ``kepl.time``, and ``kepl.stream`` on a remove row only: each header
costs about as much as the rest of the record's produce call.
"""

from __future__ import annotations

from collections import Counter
from operator import itemgetter
from typing import Any

from orjson import dumps as _dumps

from app.runtime.kafka import codec, formats
from app.runtime.kafka.checkpoint import OutputLog
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import EnginePartition
from app.runtime.kafka.router import H_ID, H_NONFINITE, H_STREAM, H_TIME
from app.runtime.kafka.topology import Topology

_REMOVE = (H_STREAM, b"remove")
_STATEMENT = itemgetter(0)


class RowWriter:
    """Produces output rows per statement and counts them (``counts``, for metrics)."""

    def __init__(self, out: OutputLog, config: AppConfig, topology: Topology) -> None:
        out_topics = {s: config.output_topic(s) for g in topology.active_groups()
                      for s in g.statements}
        out_topics.update({p.name: config.output_topic(p.name) for p in topology.lanes})
        out_parts = {s: n for s, (_, n) in topology.output_topics().items()}
        self.meta = {s: (out_topics[s], out_parts[s], s.encode()) for s in out_topics}
        self.encoders = formats.encoders(config.formats, out_topics)
        """Output topic -> the encoder of its non-JSON rows (``formats``)."""
        self.out = out
        self.counts: dict[str, int] = {}

    def row(self, stmt: str, stream: str, cp: str, now: int, seq: int, row: Any,
            p: int) -> None:
        """One output record of statement ``stmt`` (context partition ``cp``), sent to
        partition ``p`` of the output topic modulo its partition count."""
        topic, parts, stmtb = self.meta[stmt]
        counts = self.counts
        counts[stmt] = counts.get(stmt, 0) + 1
        cpb = cp.encode()
        enc = self.encoders.get(topic)
        data, nonfinite = codec.encode_row(row) if enc is None else enc(row)
        headers = [(H_ID, b"%s/%s/%d" % (stmtb, cpb, seq)), (H_TIME, b"%d" % now)]
        if stream != "insert":
            headers.append(_REMOVE)
        if nonfinite is not None:
            headers.append((H_NONFINITE, nonfinite))
        self.out.produce(topic, data, p % parts, headers, cpb)

    def of_partition(self, part: EnginePartition) -> None:
        """Produce an engine partition's output rows (the checkpoint's step 2): the
        records ``row`` would produce, with what repeats from row to row of a statement
        and context partition worked out once (the topic here, the id's prefix and the key by
        the row counter)."""
        outputs = part.outputs
        if not outputs:
            return
        p = part.partition
        produce = self.out.produce
        sender = getattr(self.out, "sender", None)
        send, cb = sender() if sender is not None else (None, None)
        dumps, non_finite = _dumps, codec._non_finite
        last: Any = None
        topic = enc = None
        q = 0
        stmtb = b""
        time_of: dict[int, tuple[bytes, bytes]] = {}
        for stmt, stream, cp, now, seq, row, c in outputs:
            if stmt is not last:
                last = stmt
                topic, parts, stmtb = self.meta[stmt]
                enc = self.encoders.get(topic)
                q = p % parts
            if c is not None:
                id_prefix, key = c.id_prefix, c.record_key
            else:
                key = cp.encode()
                id_prefix = b"%s/%s/" % (stmtb, key)
            nonfinite = None
            if enc is None:
                try:
                    data = dumps(row, default=str)
                    if data.find(b"null") >= 0 and non_finite(row):
                        data, nonfinite = codec.encode_row(row)
                except TypeError:
                    data, nonfinite = codec.encode_row(row)
            else:
                data, nonfinite = enc(row)
            t = time_of.get(now)
            if t is None:
                t = time_of[now] = (H_TIME, b"%d" % now)
            headers = [(H_ID, id_prefix + b"%d" % seq), t]
            if stream != "insert":
                headers.append(_REMOVE)
            if nonfinite is not None:
                headers.append((H_NONFINITE, nonfinite))
            if send is None:
                produce(topic, data, q, headers, key)
                continue
            try:
                send(topic, data, key, q, cb, None, 0, headers)
            except BufferError:
                produce(topic, data, q, headers, key)
        total = self.counts
        for stmt, n in Counter(map(_STATEMENT, outputs)).items():
            total[stmt] = total.get(stmt, 0) + n

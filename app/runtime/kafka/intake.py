"""Where a consumed record goes: the worker's intake.

A source record is validated once (its ``kepl.*`` headers), decoded once, and handed to
the rooms that want it: its partition's lane (stateless statements, in place), routing
(stages repartition bundles for the engine partitions that read it from a repartition
topic), and the engine partitions its partition feeds directly (staged as ``InRecord``).
A watermark record advances them the same way.  A record of a repartition topic is a
bundle of routed records for one engine partition.  What fails to validate or decode,
or fails inside a lane, or belongs to another partition than the one it was read from
(a hash context read in place), goes to the dead-letter topic.

Lanes and routing skip what their cursor says they did (``LaneCursor.applied``), so a
record read again after a rewind is handled once.  A record that fails inside a statement
of a directly fed engine partition is poison: the worker rewinds to the last commit and
from there on every room skips it and it is dead-lettered instead (``hand_over``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from orjson import loads as _loads

from app.runtime.catalog import event_run_check
from app.runtime.kafka.checkpoint import Fenced, OutputLog
from app.runtime.kafka.inputs import Inputs
from app.runtime.kafka.lanes import LaneCursor
from app.runtime.kafka.lost_input import LostInput
from app.runtime.kafka.partition import EnginePartition, InRecord, Poisoned
from app.runtime.kafka.router import (
    H_CONTROL,
    H_SEQ,
    H_TYPE,
    KNOWN_HEADERS,
    Entry,
    Routing,
    barrier_entry,
    dead_letter_headers,
    decode_bundle,
    decode_seq,
    decode_watermark,
    encode_bundles,
)
from app.runtime.kafka.topology import Topology
from app.runtime.kafka.watch import DeadLetterLog
from app.runtime.kafka.wiring import Wiring
from operators.contexts.managers import WrongBucket

log = logging.getLogger("kepl.worker")

_W = b"watermark"


def _plain_event(m: Any, p: int, topic: str, coerce: Callable[[dict], dict]) -> dict | None:
    """The event of a record of a run (partition ``p`` of ``topic``, no error, no headers,
    a JSON object its type's check takes), or None: the record ends the run and
    ``source`` takes it, dead-lettering it if it is bad."""
    if m.error() is not None or m.headers() or m.partition() != p or m.topic() != topic:
        return None
    try:
        event = _loads(m.value())
        return coerce(event) if type(event) is dict else None
    except Exception:  # noqa: BLE001 - ``source`` dead-letters it, saying why
        return None


class Intake:
    """Dispatches consumed records to lanes, routing and engine partitions (module
    docstring); stages what goes on at the next hand-over."""

    def __init__(self, topology: Topology, wiring: Wiring, inputs: Inputs,
                 parts: dict[tuple[str, int], EnginePartition], out: OutputLog,
                 dlq_topic: str, dead_log: DeadLetterLog, lost: LostInput,
                 stats: dict[str, int]) -> None:
        """``parts``: the worker's engine partitions by (group, partition), read as they
        are at each hand-over; ``stats``: counts ``events`` and ``dead``."""
        self.inputs = inputs
        self.parts = parts
        self.out = out
        self.dlq_topic = dlq_topic
        self.dead_log = dead_log
        self.lost = lost
        self.stats = stats
        self.repartition = wiring.repartition
        self.direct_of = wiring.direct_of
        self.routing = Routing(topology)
        self.routes = {t: self.routing.routes(t) for t in wiring.sources}
        self.upstream_names: dict[tuple[str, int], str] = {}
        self.pending: dict[tuple[str, int], list[InRecord]] = {}
        """(group, partition) -> records staged for that engine partition."""
        self.bundles: dict[tuple[str, int], list[Entry]] = {}
        """(repartition topic, partition) -> routed records staged for it."""
        self.poison: dict[tuple[str, int], str] = {}
        """(upstream, offset) -> reason: source records that failed inside a statement of
        an engine partition fed directly; every room skips them."""
        self.lane_progress: set[tuple[str, int]] = set()
        """Source partitions whose lane applied a watermark since the last checkpoint."""
        self._held = inputs.held
        self._one_type = {t: (types[0], self.routing.coerce[types[0]])
                          for t, types in self.routing.types_of.items()
                          if len(types) == 1 and t not in self.routing.decoders}
        """Source topics of one event type in JSON -> (type, coercer): their records
        are decoded here without ``Routing.decode``'s dispatch (same outcome)."""
        self._run_check = {t: event_run_check(self.routing.catalog, one[0])
                           for t, one in self._one_type.items()}
        """The same topics -> whether the coercer takes a run's events as they are."""
        self._misplaced: dict[tuple[str, str],
                              list[Callable[[list[dict], int], tuple[int, str | None]]]] = {}
        """(source topic, type) -> checks that an event belongs to the source partition it
        was read from (a hash context read in place: ``Group.misplaced``); one that does
        not is a dead letter, as a record that does not decode."""
        for t, groups in self.direct_of.items():
            for g in groups:
                for type_name in sorted(g.types):
                    check = g.misplaced(type_name)
                    if check is not None:
                        self._misplaced.setdefault((t, type_name), []).append(check)

    def discard(self) -> None:
        """Drop what is staged (the checkpoint it would go in is aborted)."""
        self.pending.clear()
        self.bundles.clear()

    def hand_over(self) -> bool:
        """Hand staged records to the engine partitions, bundles to the producer.  False:
        a record is poison (it is noted; the worker must rewind to the last commit)."""
        try:
            for key, recs in self.pending.items():
                part = self.parts.get(key)
                if part is not None:
                    part.run(recs)
        except Poisoned as e:
            self.poison[(e.record.upstream, e.record.offset)] = e.reason
            log.warning("%s offset %d failed in a statement (%s): rewinding to the last "
                        "commit to dead-letter it", e.record.upstream, e.record.offset,
                        e.reason)
            return False
        self.pending.clear()
        for (topic, p), entries in self.bundles.items():
            for value in encode_bundles(entries):
                self.out.produce(topic, value, p)
        self.bundles.clear()
        return True

    def source_run(self, msgs: list[Any], i: int, topic: str) -> int:
        """``source`` of ``msgs[i]`` and of the records after it while they are the
        commonest kind: the same source partition, read by engine partitions directly,
        by a lane or by the routing alone (nothing poisoned), without headers, JSON of
        the topic's one type.  What is looked up per partition is looked up once; any other
        record ends the run and takes ``source``.  Returns the index after the run."""
        m = msgs[i]
        inp = self._held.get((topic, m.partition()))
        one = self._one_type.get(topic)
        direct = self.direct_of[topic]
        if inp is None or inp.cursor is None or one is None or self.poison or (
                (inp.lane is not None) + bool(self.routes[topic]) + bool(direct) != 1):
            self.source(m, topic)  # not ours yet, or read by more than one room
            return i + 1
        if inp.lane is not None:
            return self._lane_run(msgs, i, topic, inp, one)
        if self.routes[topic]:
            return self._routed_run(msgs, i, topic, inp, one)
        return self._direct_run(msgs, i, topic, inp, one, direct)

    def _direct_run(self, msgs: list[Any], i: int, topic: str, inp: Any,
                    one: tuple[str, Any], direct: list[Any]) -> int:
        """``source_run`` of a source partition read by engine partitions directly
        alone: each record of the run staged for them (a record already applied is
        staged too: the engine partition skips it)."""
        p = msgs[i].partition()
        key = (topic, p)
        records, events = self._plain_run(msgs, i, topic, p, one, -1)
        type_name = one[0]
        checks = self._misplaced.get((topic, type_name))
        if checks:  # the run ends before an event of another partition: ``source`` takes it
            n = min(check(events, p)[0] for check in checks)
            if n < len(events):
                records, events = records[:n], events[:n]
        if not records:
            self.source(msgs[i], topic)
            return i + 1
        upstream = self.upstream_names.get(key) or self.upstream_names.setdefault(
            key, f"{topic}:{p}")
        pending = self.pending
        staged = [pending.setdefault((g.name, p), []).append
                  for g in direct if type_name in g.types]
        cur = inp.cursor
        # the input's position and the cursor move once, after the run
        expected = inp.position
        off = -1
        new = tuple.__new__
        for m, event in zip(records, events):
            off = m.offset()
            if expected is not None and off > expected:
                self.lost.gap(key, expected, off)
            expected = off + 1
            rec = new(InRecord, ("event", upstream, off, type_name, m.timestamp()[1], None,
                                 event, b"", upstream, off))
            for append in staged:
                append(rec)
        inp.position = expected
        if off > cur.applied:
            cur.applied = off
        self.stats["events"] += len(records)
        return i + len(records)

    def _plain_run(self, msgs: list[Any], i: int, topic: str, p: int,
                   one: tuple[str, Any], applied: int) -> tuple[list[Any], list[dict]]:
        """The records of a run from ``msgs[i]`` and their events: records of partition
        ``p`` of ``topic`` past offset ``applied`` and rising, without error or headers,
        each a JSON object its type's check takes (``_plain_event``); the run ends before
        the first record that is not.  When every event of the run passes as it is, the run is
        checked in one pass (``catalog.event_run_check``), else a record at a time."""
        n = len(msgs)
        j = i
        while j < n:
            m = msgs[j]
            if (m.error() is not None or m.headers() or m.partition() != p
                    or m.topic() != topic or m.offset() <= applied):
                break
            applied = m.offset()  # offsets rise within a run
            j += 1
        records = msgs[i:j]
        try:
            events: list[Any] | None = [_loads(m.value()) for m in records]
        except Exception:  # noqa: BLE001 - a record at a time finds where the run ends
            events = None
        if events is None or not self._run_check[topic](events):
            coerce = one[1]
            events = []
            for m in records:
                event = _plain_event(m, p, topic, coerce)
                if event is None:
                    break
                events.append(event)
            records = records[:len(events)]
        return records, events

    def _lane_run(self, msgs: list[Any], i: int, topic: str, inp: Any,
                  one: tuple[str, Any]) -> int:
        """``source_run`` of a source partition read by a lane alone: each record of the
        run sent to the lane in turn, a statement failing on one dead-letters that record
        alone (as ``source`` does); a record already applied (a replay after a rewind) or
        of another kind ends the run."""
        p = msgs[i].partition()
        key = (topic, p)
        type_name = one[0]
        lane = inp.lane
        send = lane.send if type_name in lane.types else None
        cur = inp.cursor
        records, events = self._plain_run(msgs, i, topic, p, one, cur.applied)
        if not records:
            self.source(msgs[i], topic)
            return i + 1
        expected = inp.position
        for m, event in zip(records, events):
            off = m.offset()
            if expected is not None and off > expected:
                self.lost.gap(key, expected, off)
            expected = inp.position = off + 1
            if send is not None:
                try:
                    send(type_name, event)
                except Fenced:  # the producer's, not the event's: no dead letter
                    raise
                except Exception as e:  # noqa: BLE001 - a statement failing on one event
                    self.dead_letter(m, f"engine error: {type(e).__name__}: {e}")
            cur.applied = off
        self.stats["events"] += len(records)
        return i + len(records)

    def _routed_run(self, msgs: list[Any], i: int, topic: str, inp: Any,
                    one: tuple[str, Any]) -> int:
        """``source_run`` of a source partition whose events are routed alone (no lane,
        no engine partition reading it directly): each record of the run forwarded to
        its repartition partitions; a record already applied, of another kind, or whose
        routing fails (``source`` dead-letters it) ends the run."""
        p = msgs[i].partition()
        key = (topic, p)
        route, bundles = self.routing.router(topic, one[0]), self.bundles
        upstream = self.upstream_names.get(key) or self.upstream_names.setdefault(
            key, f"{topic}:{p}")
        cur = inp.cursor
        records, events = self._plain_run(msgs, i, topic, p, one, cur.applied)
        expected = inp.position
        done = 0
        for m, event in zip(records, events):
            off = m.offset()
            try:
                route(bundles, cur, event, upstream, off, m.timestamp()[1])
            except Exception:  # noqa: BLE001 - ``source`` dead-letters it, saying why
                break
            if expected is not None and off > expected:
                self.lost.gap(key, expected, off)
            expected = inp.position = off + 1
            cur.applied = off
            done += 1
        if not done:
            self.source(msgs[i], topic)
            return i + 1
        self.stats["events"] += done
        return i + done

    def source(self, m: Any, topic: str) -> None:
        """A record of a source topic."""
        p = m.partition()
        off = m.offset()
        key = (topic, p)
        inp = self._held.get(key)
        if inp is None or inp.cursor is None:  # not (yet) ours
            return
        expected = inp.position
        inp.position = off + 1
        cur = inp.cursor
        if expected is not None and off > expected:
            self.lost.gap(key, expected, off)
        fresh = off > cur.applied
        upstream = self.upstream_names.get(key) or self.upstream_names.setdefault(
            key, f"{topic}:{p}")
        if self.poison and (upstream, off) in self.poison:
            # it failed inside a statement: every room skips it (see ``hand_over``)
            if fresh:
                self.dead_letter(m, self.poison[(upstream, off)])
                cur.applied = off
            return
        type_hdr = seq = None
        headers = m.headers()
        if headers:
            control = None
            bad = None
            for k, v in headers:
                if k == H_CONTROL:
                    control = v if v is not None else b""
                elif k == H_TYPE:
                    type_hdr = v
                elif k == H_SEQ:
                    seq = v
                elif k.startswith("kepl.") and k not in KNOWN_HEADERS:
                    bad = f"unknown header {k!r} (kepl.* headers are kepl's own)"
            if bad is None and control is not None and control != _W:
                bad = (f"unknown {H_CONTROL} {control[:40].decode(errors='replace')!r} "
                       "(known: watermark)")
            if bad is None and seq is not None:
                try:
                    seq = decode_seq(seq)
                except ValueError as e:
                    bad = str(e)
            if bad is not None:
                if fresh:
                    self.dead_letter(m, bad)
                    cur.applied = off
                return
            if control == _W:
                self._barrier(m, topic, p, upstream, off, fresh, cur)
                return
        direct = self.direct_of[topic]
        if not fresh and not direct:
            return
        routing = self.routing
        try:
            one = self._one_type.get(topic) if type_hdr is None else None
            event = None
            if one is not None:
                # the commonest record: JSON of the topic's one type, parsed as
                # Routing.decode would; anything else takes its path (and its errors)
                try:
                    event = _loads(m.value())
                except Exception:  # noqa: BLE001 - Routing.decode says what is wrong
                    event = None
            if type(event) is dict:
                type_name, coerce = one
                event = coerce(event)
            else:
                type_name, event = routing.decode(topic, type_hdr, m.value())
            if self._misplaced:
                for check in self._misplaced.get((topic, type_name), ()):
                    why = check([event], p)[1]
                    if why is not None:
                        raise WrongBucket(why)
            targets = (routing.targets(topic, type_name, event)
                       if fresh and self.routes[topic] else None)
        except Exception as e:  # noqa: BLE001 - anything a record can trigger is a dead letter
            if fresh:
                self.dead_letter(m, str(e) or type(e).__name__)
                cur.applied = off
            return
        self.stats["events"] += 1
        if fresh:
            lane = inp.lane
            if lane is not None and type_name in lane.types:
                try:
                    lane.send(type_name, event)
                except Fenced:  # the producer's, not the event's: no dead letter
                    raise
                except Exception as e:  # noqa: BLE001 - a statement failing on one event
                    # nothing of it went anywhere yet: the lane emits all rows or none
                    self.dead_letter(m, f"engine error: {type(e).__name__}: {e}")
                    cur.applied = off
                    return
            if targets:
                routing.forward(self.bundles, cur, topic, type_name, event, upstream,
                                off, m.timestamp()[1], seq, targets)
            cur.applied = off
        if direct:
            ts = m.timestamp()[1]
            pending = self.pending
            for g in direct:
                if type_name in g.types:
                    rec = InRecord("event", upstream, off, type_name, ts, seq, event, b"",
                                   upstream, off)
                    staged = pending.get((g.name, p))
                    if staged is None:
                        pending[(g.name, p)] = [rec]
                    else:
                        staged.append(rec)

    def _barrier(self, m: Any, topic: str, p: int, upstream: str, off: int, fresh: bool,
                 cur: LaneCursor) -> None:
        try:
            t, wid = decode_watermark(m.value())
        except ValueError as e:
            if fresh:
                self.dead_letter(m, str(e))
                cur.applied = off
            return
        payload = {"t": t, "id": wid}
        if fresh:
            inp = self.inputs.get((topic, p))
            lane = inp.lane if inp is not None else None
            if lane is not None:
                lane.advance(t, wid)
                self.lane_progress.add((topic, p))
            else:
                cur.now, cur.barrier = max(cur.now, t), wid
            if self.routing.barrier_targets:
                entry = barrier_entry(upstream, off, t, wid)
                for target in self.routing.barrier_targets:
                    self.bundles.setdefault(target, []).append(entry)
            cur.applied = off
        for g in self.direct_of[topic]:
            self.pending.setdefault((g.name, p), []).append(
                InRecord("barrier", upstream, off, payload=payload, via=upstream,
                         via_offset=off))

    def repartitioned(self, m: Any, topic: str) -> None:
        """A bundle of routed records on a repartition topic."""
        g = self.repartition.get(topic)
        if g is None:
            return
        p = m.partition()
        off = m.offset()
        inp = self.inputs.get((topic, p))
        if inp is None:
            return
        inp.position = off + 1
        self.pending.setdefault((g.name, p), []).extend(
            decode_bundle(m.value(), f"{topic}:{p}", off))

    def dead_letter(self, m: Any, reason: str) -> None:
        """Send record ``m`` to the dead-letter topic with why and where it came from."""
        self.stats["dead"] += 1
        self.dead_log.say(f"{m.topic()}/{m.partition()}/{m.offset()}", reason)
        headers = dead_letter_headers(m.headers(), reason, m.topic(), m.partition(),
                                      m.offset())
        self.out.produce(self.dlq_topic, m.value() or b"", 0, headers)

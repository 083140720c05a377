"""Output rows as every runtime prints them, so a downstream job can read either.

A row is ``{"statement", "stream", "context_partition", "time", "id", "row"}`` (``kepl
run``, ``kepl tail``).  ``context_partition`` is the same text whichever engine emits
the row: the key text of a keyed context that ``context_partitions`` gives its own
partitions, the group key text of a statement ``statement_partitions`` splits by group
key (its rows numbered per group), the bucket of a hash context, the source partition of
a stateless statement (a lane), the engine partition of a match_recognize statement
spread by its partition by, otherwise the context partition id as text.  ``id`` is
``statement/context_partition/seq``, ``seq`` counting from 1 per (statement, context
partition); a lane counts once per source partition for all its statements.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from operators.contexts.managers import key_text


def pid_text(pid: Any) -> str:
    """A context partition id as text (a composite id as compact JSON)."""
    if isinstance(pid, (int, str)):
        return str(pid)
    return json.dumps(pid, default=str, separators=(",", ":"))


def keyed_text(engine: Any, context: str, pid: Any) -> str | None:
    """The key text of a keyed context's partition (None: not one of its keys)."""
    key = engine.contexts[context].manager.key(pid)
    return key_text(key) if key is not None else None


def row_id(statement: str, context_partition: str, seq: int) -> str:
    """``statement/context_partition/seq`` (the ``kepl.id`` header)."""
    return f"{statement}/{context_partition}/{seq}"


def row_dict(statement: str, stream: str, context_partition: str, time_ms: int, rid: str,
             row: Any) -> dict[str, Any]:
    """The JSON object of one output row."""
    return {"statement": statement, "stream": stream, "context_partition": context_partition,
            "time": time_ms, "id": rid, "row": row}


class RowNumbering:
    """Context partition text and ids of an embedded Engine's rows, as a Kafka worker
    running the same statement file gives them (``EnginePartition._on_rows``,
    ``Lane.send``).  Without a Kafka layout every statement numbers by its context
    partition id."""

    def __init__(self, engine: Any, topology: Any = None) -> None:
        """``topology``: the app's ``Topology`` (None: an ``.epl`` module, or a file that
        cannot run on Kafka)."""
        self.engine = engine
        self.seqs: dict[tuple[str, str], int] = {}
        self._cp: dict[str, Callable[[Any], str]] = {}
        self._lane: dict[str, str] = {}
        self._buckets: dict[str, dict[Any, int]] = {}
        self._split: dict[str, Callable[[Any], str]] = {}
        """Statement split by group key -> the key text of one of its rows."""
        self._routed: dict[str, Any] = {}
        """match_recognize statement spread by its partition by -> its group: its rows
        are numbered per engine partition, the one of the event that made them."""
        self.current: tuple[str, Any] | None = None
        if topology is None:
            return
        for g in topology.groups.values():
            if g.hash_spec is not None:
                name = g.hash_spec.name
                for s in g.statements:
                    self._cp[s] = lambda pid, name=name: self._bucket(name, pid)
            elif g.keyed_spec is not None:
                name = g.keyed_spec.name
                for s in g.statements:
                    self._cp[s] = lambda pid, name=name: (keyed_text(engine, name, pid)
                                                          or pid_text(pid))
        for g in topology.groups.values():
            if g.split is not None:
                for s in g.statements:
                    self._split[s] = g.split.row_key(s)
            if g.mr_keys is not None:
                for s in g.statements:
                    self._routed[s] = g
        for p in topology.lanes:
            # the source partition: 0 of a one-partition topic (more: the producer's)
            # (no statement is named with a NUL: lane keys never meet statement names)
            self._lane[p.name] = "\0" + topology.config.topic_of(p.pipeline.stream.type_name)
            self._cp[p.name] = lambda pid: "0"

    def _bucket(self, context: str, pid: Any) -> str:
        """The hash bucket of an embedded context partition id (ids count buckets in
        order of first use unless preallocated)."""
        rev = self._buckets.get(context)
        if rev is None or pid not in rev:
            ids = self.engine.contexts[context].manager.ids
            rev = self._buckets[context] = {i: b for b, i in ids.items()}
        return str(rev.get(pid, pid))

    def sending(self, type_name: str, event: Any) -> None:
        """The event about to be sent: a spread match_recognize statement's rows all
        come from events (it has no interval), each from its key's engine partition."""
        self.current = (type_name, event)

    def rows(self, stmt: str, new: list, old: list, pid: Any) -> list[dict[str, Any]]:
        """The output rows of one listener call, numbered."""
        if stmt in self._split:
            return self._split_rows(stmt, new, old)
        routed = self._routed.get(stmt)
        if routed is not None:
            q = routed.partition_of(*self.current) if self.current is not None else None
            cp = str(q if q is not None else 0)
        else:
            to_text = self._cp.get(stmt)
            cp = to_text(pid) if to_text is not None else pid_text(pid)
        key = (self._lane.get(stmt, stmt), cp)
        seq = self.seqs.get(key, 0)
        now = self.engine.now_ms
        out = []
        for stream, rows in (("insert", new), ("remove", old)):
            for row in rows:
                seq += 1
                out.append(row_dict(stmt, stream, cp, now, row_id(stmt, cp, seq), row))
        self.seqs[key] = seq
        return out

    def _split_rows(self, stmt: str, new: list, old: list) -> list[dict[str, Any]]:
        """Rows of a statement split by group key on Kafka: numbered per group, the
        group's key text as their context partition (``EnginePartition._on_split_rows``)."""
        key_of = self._split[stmt]
        now = self.engine.now_ms
        out = []
        for stream, rows in (("insert", new), ("remove", old)):
            for row in rows:
                cp = key_of(row)
                seq = self.seqs.get((stmt, cp), 0) + 1
                self.seqs[(stmt, cp)] = seq
                out.append(row_dict(stmt, stream, cp, now, row_id(stmt, cp, seq), row))
        return out

"""What a Kafka-mode worker runs: the app, its event types, statements and topic names.

``AppConfig.from_dict`` takes the plain-dict shape a statement file loads into
(``{app, schemas, topics, statements: [{name, epl, output_topic?}]}``) and derives every
topic name in one place, so the worker, the clock, the scenario runner and the readers
agree on them:

- inputs: as ``topics`` maps each event type (default: the type name);
- ``kepl.<app>.repartition.<group>``: one per engine group (``main`` = every statement
  on one partition; a hash context gets its own group of ``granularity`` partitions, a
  keyed context named in ``context_partitions`` its own group of that many);
- ``kepl.<app>.changelog.<group>``: the engine state of that group (same partitions);
- ``kepl.<app>.watermarks``, ``kepl.<app>.progress``, ``kepl.<app>.dlq``;
- outputs ``kepl.<app>.out.<statement>`` unless the statement names ``output_topic``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.runtime.catalog import string_limits
from app.runtime.functions import FunctionError, parse_functions
from app.runtime.kafka import formats
from app.runtime.kafka.eventtime import EventTime, EventTimeError

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
MAIN_GROUP = "main"


class ConfigError(ValueError):
    """The worker configuration is malformed."""


@dataclass(frozen=True)
class StatementConfig:
    """One statement as the file gives it."""

    name: str
    epl: str
    output_topic: str | None = None


@dataclass(frozen=True)
class AppConfig:
    """A Kafka-mode application: event types, their topics, statements and topic names."""

    app: str
    schemas: dict[str, dict[str, str]]
    statements: tuple[StatementConfig, ...]
    topics: dict[str, str] = field(default_factory=dict)
    source_partitions: int = 1
    """Partitions given to a source topic the worker has to create (existing ones are kept)."""
    context_partitions: dict[str, int | str] = field(default_factory=dict)
    """Keyed context name -> partitions of its own repartition topic (and engine
    partitions), or ``source``: the source topics are already partitioned by the
    context's key (producers key each record by its key), so engine partition p reads
    source partition p with no repartition hop.  A keyed context not named here runs in
    the ``main`` group, so its ``context.id`` values are the embedded runtime's.  A
    match_recognize statement's name routes it by its partition by (``mr_routing``)."""
    max_string_length: dict[str, int] = field(default_factory=dict)
    """Event type (or ``"*"``) -> longest string property accepted (``catalog``)."""
    kafka: dict[str, str] = field(default_factory=dict)
    """Client settings for every Kafka client of the app (``client``: security, SASL,
    SSL …); values may be ``${ENV}`` or ``file:PATH`` references."""
    replication_factor: int = 1
    """Replicas of the topics kepl creates (1 for a single local broker; 3 in
    production)."""
    min_insync_replicas: int | None = None
    """``min.insync.replicas`` of the internal topics kepl creates (None: the broker's)."""
    functions: dict[str, Any] = field(default_factory=dict)
    """Declared user functions (``app.runtime.functions.FunctionDef`` by name)."""
    processing_guarantee: str = "exactly_once"
    """``exactly_once`` (one Kafka transaction per checkpoint: outputs, changelog,
    repartition records and input offsets; readers use read_committed) or
    ``at_least_once`` (the same records without a transaction; a crash may repeat rows,
    with the same ``kepl.id``)."""
    event_time: EventTime | None = None
    """Runtime time from the events (``eventtime``): watermarks by ``kepl clock
    --from-events``, events run in event-time order, ``late_events`` policy."""
    formats: dict[str, Any] = field(default_factory=dict)
    """The registry and the record formats of the app's topics (``formats.section``;
    empty: every topic JSON)."""
    on_lost_input: str = "continue"
    """When source records were deleted before they were read: ``continue`` (say so,
    count them, go on from the log start) or ``stop`` (say so and exit)."""
    statement_partitions: dict[str, int] = field(default_factory=dict)
    """Statement without a context -> engine partitions it is split over by its group
    key (``topology``, docs/architecture.md "Statements split by group key")."""

    @classmethod
    def from_dict(cls, doc: dict[str, Any], base_dir: str | Path | None = None) -> AppConfig:
        """Validate the dict shape (item names, types) and fill in defaults; ``base_dir``:
        the directory of the file it was read from (where function modules may live)."""
        if not isinstance(doc, dict):
            raise ConfigError("the configuration must be a mapping")
        doc = _formats(doc)
        app = doc.get("app")
        if not isinstance(app, str) or not _NAME.match(app):
            raise ConfigError(f"'app' must be a topic-safe name ([A-Za-z0-9._-]+), got {app!r}")
        schemas = doc.get("schemas") or {}
        if not isinstance(schemas, dict) or not all(
                isinstance(p, dict) for p in schemas.values()):
            raise ConfigError("'schemas' must map event types to {property: type}")
        topics = doc.get("topics") or {}
        if not isinstance(topics, dict):
            raise ConfigError("'topics' must map event types to topic names")
        for t in topics:
            if t not in schemas:
                raise ConfigError(f"'topics' names unknown event type '{t}'")
        stmts: list[StatementConfig] = []
        seen: set[str] = set()
        for i, s in enumerate(doc.get("statements") or []):
            if not isinstance(s, dict) or not isinstance(s.get("epl"), str):
                raise ConfigError(f"statement {i} must be a mapping with 'epl'")
            name = str(s.get("name") or f"s{i}")
            if not _NAME.match(name):
                raise ConfigError(f"statement name {name!r} must be topic-safe "
                                  "([A-Za-z0-9._-]+): it names an output topic")
            if name in seen:
                raise ConfigError(f"duplicate statement name '{name}'")
            seen.add(name)
            out = s.get("output_topic")
            stmts.append(StatementConfig(name, s["epl"], str(out) if out else None))
        full_topics = {t: str(topics.get(t, t)) for t in schemas}
        for t in full_topics.values():
            if not _NAME.match(t):
                raise ConfigError(f"topic name '{t}' is not valid")
        # one name for the source partitions, as statement files, the JSON schema and
        # the helm chart say: 'partitions'
        if "source_partitions" in doc:
            raise ConfigError("unknown key 'source_partitions': the partitions of the "
                              "source topics are 'partitions'")
        parts = doc.get("partitions", 1)
        if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
            raise ConfigError(f"'partitions' must be a positive integer, got {parts!r}")
        guarantee = doc.get("processing_guarantee", "exactly_once")
        if guarantee not in GUARANTEES:
            raise ConfigError(f"'processing_guarantee' must be one of {', '.join(GUARANTEES)}, "
                              f"got {guarantee!r}")
        on_lost = doc.get("on_lost_input", "continue")
        if on_lost not in LOST_INPUT_POLICIES:
            raise ConfigError("'on_lost_input' must be one of "
                              f"{', '.join(LOST_INPUT_POLICIES)}, got {on_lost!r}")
        limits = doc.get("max_string_length")
        if limits is not None and not (
                (isinstance(limits, int) and not isinstance(limits, bool) and limits >= 0)
                or (isinstance(limits, dict) and all(
                    isinstance(v, int) and not isinstance(v, bool) and v >= 0
                    for v in limits.values()))):
            raise ConfigError("'max_string_length' must be a number of characters (0: no "
                              f"limit) or map event types to one, got {limits!r}")
        kafka = doc.get("kafka") or {}
        if not isinstance(kafka, dict) or not all(
                isinstance(v, str | int | float | bool) for v in kafka.values()):
            raise ConfigError("'kafka' must map client properties (security.protocol, "
                              "sasl.mechanisms, ...) to values")
        rf = doc.get("replication_factor", 1)
        isr = doc.get("min_insync_replicas")
        for key, v in (("replication_factor", rf), ("min_insync_replicas", isr)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ConfigError(f"'{key}' must be a positive integer, got {v!r}")
        if isr is not None and isr > rf:
            raise ConfigError(f"'min_insync_replicas' ({isr}) must not exceed "
                              f"'replication_factor' ({rf}): no write could succeed")
        try:
            functions = parse_functions(doc.get("functions"), base_dir)
        except FunctionError as e:
            raise ConfigError(f"functions: {e}") from None
        try:
            event_time = EventTime.parse(doc.get("event_time"), doc.get("late_events"),
                                         schemas)
        except EventTimeError as e:
            raise ConfigError(str(e)) from None
        return cls(app, {k: dict(v) for k, v in schemas.items()}, tuple(stmts), full_topics,
                   parts, _context_partitions(doc.get("context_partitions")),
                   string_limits(limits), {str(k): _prop(v) for k, v in kafka.items()},
                   rf, isr, functions=functions, processing_guarantee=guarantee,
                   event_time=event_time, on_lost_input=on_lost,
                   statement_partitions=_statement_partitions(doc.get("statement_partitions")),
                   formats=formats.section(doc))

    @classmethod
    def from_file(cls, path: Path | str) -> AppConfig:
        """Load a YAML (or JSON) file of the ``from_dict`` shape; a file that cannot be
        read or is not valid is a one-line ``ConfigError`` naming it (and where in it)."""
        import yaml

        from app.statements import _yaml_problem, load_yaml

        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"{p}: cannot read: {e.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{p}: not UTF-8 text") from None
        try:
            doc = load_yaml(text)
        except RecursionError:
            raise ConfigError(f"{p}: YAML nested too deeply to read") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"{p}: not valid YAML at {_yaml_problem(text, e)}") from None
        try:
            return cls.from_dict(doc, p.resolve().parent)
        except ConfigError as e:
            raise ConfigError(f"{p}: {e}") from None

    def to_dict(self) -> dict[str, Any]:
        """The dict shape again (for writing a worker's config file)."""
        return {
            "app": self.app,
            "schemas": self.schemas,
            "topics": dict(self.topics),
            "partitions": self.source_partitions,
            **({"context_partitions": dict(self.context_partitions)}
               if self.context_partitions else {}),
            **({"statement_partitions": dict(self.statement_partitions)}
               if self.statement_partitions else {}),
            **({"processing_guarantee": self.processing_guarantee}
               if self.processing_guarantee != "exactly_once" else {}),
            **({"event_time": self.event_time.to_dict(),
                "late_events": self.event_time.late} if self.event_time else {}),
            **({"on_lost_input": self.on_lost_input}
               if self.on_lost_input != "continue" else {}),
            **({"max_string_length": dict(self.max_string_length)}
               if self.max_string_length else {}),
            **({"kafka": dict(self.kafka)} if self.kafka else {}),
            **({"replication_factor": self.replication_factor}
               if self.replication_factor != 1 else {}),
            **({"min_insync_replicas": self.min_insync_replicas}
               if self.min_insync_replicas is not None else {}),
            **self.formats,
            **({"functions": {n: f.to_dict() for n, f in self.functions.items()}}
               if self.functions else {}),
            "statements": [
                {"name": s.name, "epl": s.epl,
                 **({"output_topic": s.output_topic} if s.output_topic else {})}
                for s in self.statements],
        }

    # -- topic names ----------------------------------------------------------
    def topic_of(self, type_name: str) -> str:
        """The source topic of an event type."""
        return self.topics.get(type_name, type_name)

    @property
    def source_topics(self) -> list[str]:
        """Distinct source topics, sorted (two types may share one)."""
        return sorted(set(self.topics.values()))

    def types_of_topic(self, topic: str) -> list[str]:
        """Event types carried by a source topic."""
        return sorted(t for t, tp in self.topics.items() if tp == topic)

    def repartition_topic(self, group: str) -> str:
        return f"kepl.{self.app}.repartition.{group}"

    def changelog_topic(self, group: str) -> str:
        return f"kepl.{self.app}.changelog.{group}"

    @property
    def watermark_topic(self) -> str:
        return f"kepl.{self.app}.watermarks"

    @property
    def progress_topic(self) -> str:
        return f"kepl.{self.app}.progress"

    @property
    def dlq_topic(self) -> str:
        return f"kepl.{self.app}.dlq"

    def output_topic(self, statement: str) -> str:
        for s in self.statements:
            if s.name == statement and s.output_topic:
                return s.output_topic
        return f"kepl.{self.app}.out.{statement}"


def _formats(doc: dict[str, Any]) -> dict[str, Any]:
    """``formats.prepare`` (registry subjects fetched, formats checked) as ConfigError."""
    try:
        return formats.prepare(doc)
    except formats.FormatError as e:
        raise ConfigError(str(e)) from None


def _prop(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


MAX_CONTEXT_PARTITIONS = 10_000
GUARANTEES = ("exactly_once", "at_least_once")
LOST_INPUT_POLICIES = ("continue", "stop")
SOURCE = "source"
"""``context_partitions: {C: source}``: C's key already partitions the source topics."""


def _context_partitions(raw: Any) -> dict[str, int | str]:
    """``context_partitions``: context name -> a positive partition count."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError("'context_partitions' must map keyed context names to partition "
                          "counts")
    out: dict[str, int | str] = {}
    for name, n in raw.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"'context_partitions' has a bad context name {name!r}")
        if n == SOURCE:
            out[name] = n
            continue
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CONTEXT_PARTITIONS:
            raise ConfigError(f"'context_partitions.{name}' must be an integer from 1 to "
                              f"{MAX_CONTEXT_PARTITIONS} or '{SOURCE}', got {n!r}")
        out[name] = n
    return out


def _statement_partitions(raw: Any) -> dict[str, int]:
    """``statement_partitions``: statement name -> a positive partition count."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError("'statement_partitions' must map statement names to partition "
                          "counts")
    out: dict[str, int] = {}
    for name, n in raw.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"'statement_partitions' has a bad statement name {name!r}")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CONTEXT_PARTITIONS:
            raise ConfigError(f"'statement_partitions.{name}' must be an integer from 1 to "
                              f"{MAX_CONTEXT_PARTITIONS}, got {n!r}")
        out[name] = n
    return out

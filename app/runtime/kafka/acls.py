"""The least privileges a worker needs, as ACL bindings: printed as ``kafka-acls.sh``
commands (``kepl acls``), applied through the admin API (tests, set-up scripts), and
the one line a worker says when the broker refuses one of them (``refusals``).

The topics are created beforehand by the set-up principal (``kepl deploy``), so the
worker needs no ``Create``; ``--create-topics`` adds it for a worker that creates them.
Per topic, only the operations its role needs:

- source topics: ``Read``;
- repartition topics: ``Read``, ``Write`` (the worker writes and reads them);
- changelog topics: the same and ``Delete`` (a snapshot deletes the records it made
  obsolete: ``DeleteRecords``);
- the watermark topic: ``Read``; progress, DLQ and output topics: ``Write``;
- consumer group ``kepl.<app>``: ``Read`` (join, commit offsets inside the transaction);
- transactional ids ``kepl.<app>.*`` (prefixed; one per worker instance): ``Write``
  (``exactly_once`` only).

``Read``, ``Write`` and ``Delete`` each imply ``Describe`` (Kafka's authorizer), so
``Describe`` is never listed on its own.

Kafka 3 and later brokers need no cluster ``IdempotentWrite`` for an idempotent
producer that may ``Write`` a topic (KIP-679); ``--idempotent-write`` adds it for older
brokers.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.runtime.kafka.config import AppConfig

@dataclass(frozen=True)
class Acl:
    """Allow ``principal`` the ``operations`` on one resource (``prefixed``: on every
    name starting with ``name``)."""

    resource: str  # Topic, Group, TransactionalId, Cluster
    name: str
    operations: tuple[str, ...]
    prefixed: bool = False

    def describe(self) -> str:
        what = "kafka-cluster" if self.resource == "Cluster" else self.name
        star = "*" if self.prefixed else ""
        return f"{self.resource} {what}{star}: {', '.join(self.operations)}"


def worker_acls(config: AppConfig, create_topics: bool = False,
                idempotent_write: bool = False) -> list[Acl]:
    """What a worker of ``config`` needs, resource by resource."""
    create = ("Create",) if create_topics else ()
    out: list[Acl] = []
    for t in config.source_topics:
        out.append(Acl("Topic", t, ("Read", *create)))
    from app.runtime.kafka.topology import Topology

    topology = Topology.plan(config)
    specs = topology.topic_specs()
    for t in sorted(specs):
        if t in config.source_topics:
            continue
        if ".repartition." in t and t.startswith(f"kepl.{config.app}."):
            ops: tuple[str, ...] = ("Read", "Write")
        elif ".changelog." in t and t.startswith(f"kepl.{config.app}."):
            ops = ("Read", "Write", "Delete")
        elif t == config.watermark_topic:
            ops = ("Read",)
        else:
            ops = ("Write",)
        out.append(Acl("Topic", t, (*ops, *create)))
    out.append(Acl("Group", f"kepl.{config.app}", ("Read",)))
    if config.processing_guarantee == "exactly_once":
        out.append(Acl("TransactionalId", f"kepl.{config.app}.", ("Write",),
                       prefixed=True))
    if idempotent_write:
        out.append(Acl("Cluster", "kafka-cluster", ("IdempotentWrite",)))
    return out


def kafka_acls_commands(acls: list[Acl], principal: str, bootstrap: str,
                        command_config: str | None = None) -> list[str]:
    """One ``kafka-acls.sh --add`` command per resource."""
    lines = []
    for a in acls:
        words = ["kafka-acls.sh", "--bootstrap-server", bootstrap]
        if command_config:
            words += ["--command-config", command_config]
        words += ["--add", "--allow-principal", principal]
        for op in a.operations:
            words += ["--operation", op]
        if a.resource == "Cluster":
            words.append("--cluster")
        else:
            flag = {"Topic": "--topic", "Group": "--group",
                    "TransactionalId": "--transactional-id"}[a.resource]
            words += [flag, a.name]
        if a.prefixed:
            words += ["--resource-pattern-type", "prefixed"]
        lines.append(" ".join(shlex.quote(w) for w in words))
    return lines


def bindings(acls: list[Acl], principal: str) -> list[Any]:
    """The ACLs as ``confluent_kafka`` ``AclBinding`` objects (one per operation)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    kinds = {"Topic": ResourceType.TOPIC, "Group": ResourceType.GROUP,
             "TransactionalId": ResourceType.TRANSACTIONAL_ID,
             "Cluster": ResourceType.BROKER}
    ops = {"Read": AclOperation.READ, "Write": AclOperation.WRITE,
           "Describe": AclOperation.DESCRIBE, "Create": AclOperation.CREATE,
           "Delete": AclOperation.DELETE, "IdempotentWrite": AclOperation.IDEMPOTENT_WRITE}
    return [AclBinding(kinds[a.resource], a.name,
                       ResourcePatternType.PREFIXED if a.prefixed else
                       ResourcePatternType.LITERAL,
                       principal, "*", ops[op], AclPermissionType.ALLOW)
            for a in acls for op in a.operations]


def apply(admin: Any, acls: list[Acl], principal: str, timeout_s: float = 30) -> None:
    """Create the bindings with a (super user's) ``AdminClient``; waits for each."""
    for fut in admin.create_acls(bindings(acls, principal),
                                 request_timeout=timeout_s).values():
        fut.result()

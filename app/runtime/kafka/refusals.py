"""The one line a worker says when the broker refuses it an operation: which resource,
which operation (``acls`` lists what a worker needs)."""

from __future__ import annotations

# librdkafka error codes of a refused operation -> the kind of resource refused
REFUSED = {29: "Topic", 30: "Group", 31: "Cluster", 53: "TransactionalId"}


class NotAuthorized(Exception):
    """The broker refused the worker an operation on a resource: one line naming both."""

    def __init__(self, resource: str, name: str, operation: str) -> None:
        super().__init__(f"the broker refused {operation} on {resource} {name}: the "
                         "principal lacks that ACL (kepl acls FILE prints every ACL a "
                         "worker needs)")
        self.resource, self.name, self.operation = resource, name, operation


def refused(code: int, name: str, operation: str) -> NotAuthorized | None:
    """``NotAuthorized`` if ``code`` is an authorization failure, else None; ``name``
    and ``operation``: what the call that failed needed of that resource."""
    kind = REFUSED.get(code)
    return None if kind is None else NotAuthorized(kind, name, operation)


def consumer_refused(code: int, topic: str | None, app: str) -> NotAuthorized | None:
    """What the worker's consumer was refused: ``Read`` on its group or on a topic."""
    kind = REFUSED.get(code)
    if kind == "Group":
        return NotAuthorized(kind, f"kepl.{app}", "Read")
    if kind == "Topic":
        return NotAuthorized(kind, topic or "(unknown)", "Read")
    return None if kind is None else NotAuthorized(kind, "kafka-cluster", "Read")

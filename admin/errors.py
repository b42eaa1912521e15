"""The two kinds of failure an admin command reports, and the malformed-znode collector.

* InvalidArgumentError: the request itself is wrong, whatever the cluster holds (a bad
  topic name, partitions < 1, an unknown config key). The CLI exits 2, as argparse does.
* AdminError: the request cannot be carried out against this cluster (the topic exists,
  too few brokers, a reassignment is running). The CLI exits 1.

Malformed znodes are neither: a command reports them (path and reason) and goes on.
"""

from __future__ import annotations

from collections.abc import Iterator

from zkdata.znodes import MalformedZnode


class InvalidArgumentError(ValueError):
    """The command's arguments are wrong; nothing was read from or written to ZooKeeper."""


class AdminError(RuntimeError):
    """The operation is not possible in the cluster's current state; nothing was written."""


class TopicExistsError(AdminError):
    pass


class UnknownTopicError(AdminError):
    pass


class ConcurrentChangeError(AdminError):
    """A conditional write lost a race with another writer; nothing was written."""


# Which of Kafka's errors an AdminError is, where the wire's admin APIs must tell them
# apart (broker/admin_apis.py); the CLI reports them all alike.


class TopicCollisionError(AdminError):
    """The name differs from an existing topic's only by '.' against '_'."""


class MarkedForDeletionError(AdminError):
    pass


class ReassignmentInProgressError(AdminError):
    pass


class PartitionCountError(AdminError):
    """Too few partitions (a topic's count can only grow)."""


class ReplicationFactorError(AdminError):
    """More replicas than live brokers."""


class ReplicaAssignmentError(AdminError):
    """A replica assignment given by the user is not valid in this cluster."""


class RackInfoError(AdminError):
    """Some brokers have a rack and some do not, and the assignment is rack-aware
    (Kafka's AdminOperationException, no ApiException: a broker answers it
    UNKNOWN_SERVER_ERROR)."""


def one_line(problems: list[str] | tuple[str, ...]) -> str:
    """Several problems as one line, for argparse-style error messages."""
    return "; ".join(problems)


class Problems:
    """Malformed znodes met while reading: each is reported once, by path, and skipped."""

    def __init__(self) -> None:
        self._items: dict[str, MalformedZnode] = {}

    def add(self, error: MalformedZnode) -> None:
        self._items.setdefault(error.path, error)

    def __iter__(self) -> Iterator[MalformedZnode]:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def paths(self) -> list[str]:
        return list(self._items)

    def messages(self) -> list[str]:
        return [str(e) for e in self._items.values()]

    def to_json(self) -> list[dict[str, str]]:
        return [{"path": e.path, "reason": e.reason} for e in self._items.values()]

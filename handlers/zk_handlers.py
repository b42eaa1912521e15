"""ZooKeeper watches turned into controller events (Kafka's ZNodeChangeHandlers).

A handler runs on kazoo's callback thread, so it only enqueues. The event it enqueues
re-reads the znode with `watch=True`, which re-arms the one-shot watch, on the event
thread. Handlers are keyed by path in `ZkClient`'s registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller import events as ev
from zkdata import paths
from zkdata.client import WatchedEvent, ZkClient, event_kind
from zkdata.znodes import TopicPartition

Enqueue = Callable[[ev.ControllerEvent], object]


@dataclass(frozen=True)
class ChildChangeHandler:
    """Children of `path` changed -> `make()`."""

    path: str
    enqueue: Enqueue
    make: Callable[[], ev.ControllerEvent]

    def __call__(self, event: WatchedEvent) -> None:
        if event_kind(event) == "CHILD":
            self.enqueue(self.make())


@dataclass(frozen=True)
class DataChangeHandler:
    """`path` created / changed / deleted -> the event made for that kind, if any."""

    path: str
    enqueue: Enqueue
    on_created: Callable[[], ev.ControllerEvent] | None = None
    on_changed: Callable[[], ev.ControllerEvent] | None = None
    on_deleted: Callable[[], ev.ControllerEvent] | None = None

    def __call__(self, event: WatchedEvent) -> None:
        make = {
            "CREATED": self.on_created,
            "CHANGED": self.on_changed,
            "DELETED": self.on_deleted,
        }.get(event_kind(event))
        if make is not None:
            self.enqueue(make())


def controller_change(enqueue: Enqueue) -> DataChangeHandler:
    return DataChangeHandler(
        paths.CONTROLLER,
        enqueue,
        on_created=ev.ControllerChange,
        on_changed=ev.ControllerChange,
        on_deleted=ev.Reelect,
    )


def controller_epoch_change(enqueue: Enqueue) -> DataChangeHandler:
    """Armed only by an election that found `/controller_epoch` malformed (its read again
    with a watch): any change to it (an operator's repair) retries the election. A repair
    that read finds already made leaves the watch on a valid epoch: it fires once, at the
    next change, a Reelect that finds a controller."""
    return DataChangeHandler(
        paths.CONTROLLER_EPOCH,
        enqueue,
        on_created=ev.Reelect,
        on_changed=ev.Reelect,
        on_deleted=ev.Reelect,
    )


def broker_change(enqueue: Enqueue) -> ChildChangeHandler:
    return ChildChangeHandler(paths.BROKER_IDS, enqueue, ev.BrokerChange)


def broker_modifications(enqueue: Enqueue, broker_id: int) -> DataChangeHandler:
    return DataChangeHandler(
        paths.broker(broker_id), enqueue, on_changed=lambda: ev.BrokerModifications(broker_id)
    )


def topic_change(enqueue: Enqueue) -> ChildChangeHandler:
    return ChildChangeHandler(paths.BROKER_TOPICS, enqueue, ev.TopicChange)


def partition_modifications(enqueue: Enqueue, topic: str) -> DataChangeHandler:
    return DataChangeHandler(
        paths.topic(topic), enqueue, on_changed=lambda: ev.PartitionModifications(topic)
    )


def topic_deletion(enqueue: Enqueue) -> ChildChangeHandler:
    return ChildChangeHandler(paths.DELETE_TOPICS, enqueue, ev.TopicDeletion)


def isr_change_notification(enqueue: Enqueue) -> ChildChangeHandler:
    return ChildChangeHandler(paths.ISR_CHANGE_NOTIFICATION, enqueue, ev.IsrChangeNotification)


def log_dir_event_notification(enqueue: Enqueue) -> ChildChangeHandler:
    return ChildChangeHandler(paths.LOG_DIR_EVENT_NOTIFICATION, enqueue, ev.LogDirEventNotification)


# The two admin request znodes are created by a tool and deleted by the controller when it
# is done. Deleting one fires the watch its event armed, and nothing would arm another: the
# next request would go unseen. So a deletion enqueues the event too, whose re-read (the
# znode is gone) arms the watch for the next creation, as Kafka's controller re-registers
# its handler after the deletion ("ensure we detect future reassignments"). A reassignment
# znode the controller rewrote meanwhile (partitions left to do) spent that watch on the
# rewrite: then the controller itself must look again once it has deleted the znode, and
# its next look at the znode (ZkControllerStore.remove_from_reassignment_znode's read,
# as Kafka's reads of a watched path) arms the watch again, so an admin's deletion of it
# in between and a later request are seen.


def partition_reassignment(enqueue: Enqueue) -> DataChangeHandler:
    return DataChangeHandler(
        paths.REASSIGN_PARTITIONS,
        enqueue,
        on_created=ev.PartitionReassignment,
        on_deleted=ev.PartitionReassignment,
    )


def preferred_replica_election(enqueue: Enqueue) -> DataChangeHandler:
    return DataChangeHandler(
        paths.PREFERRED_REPLICA_ELECTION,
        enqueue,
        on_created=ev.PreferredReplicaElection,
        on_deleted=ev.PreferredReplicaElection,
    )


def partition_reassignment_isr_change(enqueue: Enqueue, tp: TopicPartition) -> DataChangeHandler:
    return DataChangeHandler(
        paths.partition_state(tp.topic, tp.partition),
        enqueue,
        on_changed=lambda: ev.PartitionReassignmentIsrChange(tp),
    )


class HandlerRegistry:
    """The handlers an active controller has registered, so resignation removes them all.

    The controller-change handler is not in here: every broker keeps it, controller or not.
    """

    def __init__(self, zk: ZkClient, enqueue: Enqueue) -> None:
        self.zk = zk
        self.enqueue = enqueue
        self._registered: dict[str, ChildChangeHandler | DataChangeHandler] = {}

    def register(self, handler: ChildChangeHandler | DataChangeHandler) -> None:
        old = self._registered.get(handler.path)
        if old == handler:
            return
        self._registered[handler.path] = handler
        # The new one before the old one goes: a watch firing meanwhile finds one (or
        # both, an event twice, whose second read finds nothing new), never none, which
        # would drop it with its one-shot watch spent.
        self.zk.register_handler(handler.path, handler)
        if old is not None:
            self.zk.unregister_handler(handler.path, old)

    def unregister(self, path: str) -> None:
        handler = self._registered.pop(path, None)
        if handler is not None:
            self.zk.unregister_handler(path, handler)

    def unregister_all(self) -> None:
        for path in list(self._registered):
            self.unregister(path)

    def register_controller_handlers(self) -> None:
        """What onControllerFailover registers before loading the context."""
        for make in (
            broker_change,
            topic_change,
            topic_deletion,
            log_dir_event_notification,
            isr_change_notification,
            partition_reassignment,
            preferred_replica_election,
        ):
            self.register(make(self.enqueue))

"""ZooKeeper watches turned into controller events (handlers/zk_handlers.py), as Kafka
2.8's ZNodeChangeHandlers: which kind of watch each handler turns into which event, and
the registry an active controller keeps of them (KafkaController's ControllerChangeHandler,
BrokerChangeHandler, BrokerModificationsHandler, TopicChangeHandler,
PartitionModificationsHandler, TopicDeletionHandler, PartitionReassignmentHandler,
PartitionReassignmentIsrChangeHandler, IsrChangeNotificationHandler,
LogDirEventNotificationHandler, PreferredReplicaElectionHandler)."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent

from controller import events as ev
from handlers import zk_handlers
from handlers.zk_handlers import ChildChangeHandler, DataChangeHandler, HandlerRegistry
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import TopicPartition

KINDS = {
    "CREATED": EventType.CREATED,
    "CHANGED": EventType.CHANGED,
    "DELETED": EventType.DELETED,
    "CHILD": EventType.CHILD,
}
TP = TopicPartition("t", 3)


def fired(handler: ChildChangeHandler | DataChangeHandler) -> dict[str, list[ev.ControllerEvent]]:
    """kind of watch -> the events the handler enqueued for it."""
    out: dict[str, list[ev.ControllerEvent]] = {}
    for kind, etype in KINDS.items():
        got: list[ev.ControllerEvent] = []
        rebuilt = dataclasses.replace(handler, enqueue=got.append)
        rebuilt(WatchedEvent(etype, KeeperState.CONNECTED, handler.path))
        out[kind] = got
    return out


def made(factory: Any, *args: object) -> tuple[str, dict[str, list[ev.ControllerEvent]]]:
    handler = factory(lambda _e: None, *args)
    return handler.path, fired(handler)


NOTHING: list[ev.ControllerEvent] = []


@pytest.mark.parametrize(
    ("factory", "path", "event"),
    [
        (zk_handlers.broker_change, paths.BROKER_IDS, ev.BrokerChange()),
        (zk_handlers.topic_change, paths.BROKER_TOPICS, ev.TopicChange()),
        (zk_handlers.topic_deletion, paths.DELETE_TOPICS, ev.TopicDeletion()),
        (
            zk_handlers.isr_change_notification,
            paths.ISR_CHANGE_NOTIFICATION,
            ev.IsrChangeNotification(),
        ),
        (
            zk_handlers.log_dir_event_notification,
            paths.LOG_DIR_EVENT_NOTIFICATION,
            ev.LogDirEventNotification(),
        ),
    ],
)
def test_a_child_handler_fires_on_a_change_of_children_only(
    factory: Any, path: str, event: ev.ControllerEvent
) -> None:
    got_path, got = made(factory)
    assert got_path == path
    assert got == {"CREATED": NOTHING, "CHANGED": NOTHING, "DELETED": NOTHING, "CHILD": [event]}


def test_the_controller_znode_created_or_changed_is_a_controller_change_deleted_a_reelection() -> (
    None
):
    path, got = made(zk_handlers.controller_change)
    assert path == paths.CONTROLLER
    assert got == {
        "CREATED": [ev.ControllerChange()],
        "CHANGED": [ev.ControllerChange()],
        "DELETED": [ev.Reelect()],
        "CHILD": NOTHING,
    }


def test_any_change_of_the_controller_epoch_znode_retries_the_election() -> None:
    path, got = made(zk_handlers.controller_epoch_change)
    assert path == paths.CONTROLLER_EPOCH
    assert got == {
        "CREATED": [ev.Reelect()],
        "CHANGED": [ev.Reelect()],
        "DELETED": [ev.Reelect()],
        "CHILD": NOTHING,
    }


@pytest.mark.parametrize(
    ("factory", "path", "event"),
    [
        (zk_handlers.partition_reassignment, paths.REASSIGN_PARTITIONS, ev.PartitionReassignment()),
        (
            zk_handlers.preferred_replica_election,
            paths.PREFERRED_REPLICA_ELECTION,
            ev.PreferredReplicaElection(),
        ),
    ],
)
def test_an_admin_request_znode_fires_when_created_and_when_deleted(
    factory: Any, path: str, event: ev.ControllerEvent
) -> None:
    """Created: the request. Deleted (the controller done with it): the event's re-read
    arms the watch for the next request. A change (the controller's own rewrite) is not
    an event."""
    got_path, got = made(factory)
    assert got_path == path
    assert got == {"CREATED": [event], "CHANGED": NOTHING, "DELETED": [event], "CHILD": NOTHING}


@pytest.mark.parametrize(
    ("factory", "arg", "path", "event"),
    [
        (zk_handlers.broker_modifications, 7, paths.broker(7), ev.BrokerModifications(7)),
        (
            zk_handlers.partition_modifications,
            "t",
            paths.topic("t"),
            ev.PartitionModifications("t"),
        ),
        (
            zk_handlers.partition_reassignment_isr_change,
            TP,
            paths.partition_state("t", 3),
            ev.PartitionReassignmentIsrChange(TP),
        ),
    ],
)
def test_a_data_handler_of_one_znode_fires_on_a_change_of_its_data_only(
    factory: Any, arg: object, path: str, event: ev.ControllerEvent
) -> None:
    got_path, got = made(factory, arg)
    assert got_path == path
    assert got == {"CREATED": NOTHING, "CHANGED": [event], "DELETED": NOTHING, "CHILD": NOTHING}


# --- the registry -----------------------------------------------------------------------


class RecordingZk:
    """ZkClient's handler registry, recording each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, object]] = []
        self.handlers: dict[str, list[object]] = {}

    def register_handler(self, path: str, handler: object) -> None:
        self.calls.append(("register", path, handler))
        self.handlers.setdefault(path, []).append(handler)

    def unregister_handler(self, path: str, handler: object) -> None:
        self.calls.append(("unregister", path, handler))
        self.handlers[path].remove(handler)


def registry() -> tuple[HandlerRegistry, RecordingZk, list[ev.ControllerEvent]]:
    zk = RecordingZk()
    events: list[ev.ControllerEvent] = []
    return HandlerRegistry(cast(ZkClient, zk), events.append), zk, events


def test_an_active_controller_registers_what_on_controller_failover_registers() -> None:
    reg, zk, _events = registry()
    reg.register_controller_handlers()
    assert sorted(zk.handlers) == sorted(
        [
            paths.BROKER_IDS,
            paths.BROKER_TOPICS,
            paths.DELETE_TOPICS,
            paths.LOG_DIR_EVENT_NOTIFICATION,
            paths.ISR_CHANGE_NOTIFICATION,
            paths.REASSIGN_PARTITIONS,
            paths.PREFERRED_REPLICA_ELECTION,
        ]
    )
    assert all(len(hs) == 1 for hs in zk.handlers.values())
    reg.register_controller_handlers()  # a second failover's: nothing twice
    assert all(len(hs) == 1 for hs in zk.handlers.values())
    reg.unregister_all()
    assert all(hs == [] for hs in zk.handlers.values())


def test_a_handler_for_a_path_replaces_the_one_before_it_registered_first() -> None:
    reg, zk, events = registry()
    first = zk_handlers.broker_change(events.append)
    reg.register(first)
    reg.register(zk_handlers.broker_change(events.append))  # an equal one: kept
    assert zk.calls == [("register", paths.BROKER_IDS, first)]
    other = ChildChangeHandler(paths.BROKER_IDS, events.append, ev.TopicChange)
    reg.register(other)
    assert zk.calls[1:] == [
        ("register", paths.BROKER_IDS, other),
        ("unregister", paths.BROKER_IDS, first),
    ]
    assert zk.handlers[paths.BROKER_IDS] == [other]


def test_unregistering_a_path_removes_its_handler_once() -> None:
    reg, zk, events = registry()
    handler = zk_handlers.partition_modifications(events.append, "t")
    reg.register(handler)
    reg.unregister(paths.topic("t"))
    reg.unregister(paths.topic("t"))  # gone already: nothing
    assert zk.calls == [
        ("register", paths.topic("t"), handler),
        ("unregister", paths.topic("t"), handler),
    ]
    reg.register(handler)  # registered again after its removal
    assert zk.handlers[paths.topic("t")] == [handler]

"""The real KafkaController over an in-memory ZooKeeper (tests/unit/fake_zk.py): brokers
registered, topics with their partition states, and a controller elected through a real
failover (its channel to the brokers mocked). Events are processed by `drain`, as the
event thread would, and watches fired by hand (`FakeZk.fire`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from unittest.mock import MagicMock, patch

from controller import events as ev
from controller.controller import ControllerConfig, KafkaController
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.znodes import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    TopicAssignment,
    encode_broker,
    encode_partition_state,
    encode_topic,
    new_topic_id,
)

CONTROLLER_SESSION = 0x111


def registration(broker_id: int, port: int = 9092) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", f"b{broker_id}", port),))


def broker_session(broker_id: int) -> int:
    return 0x200 + broker_id


def empty_cluster(session_id: int = CONTROLLER_SESSION) -> FakeZk:
    """The persistent paths every broker creates, nothing in them."""
    zk = FakeZk(session_id)
    for p in ("/brokers", "/admin", "/config", *paths.PERSISTENT_PATHS):
        zk.put(p, b"")
    return zk


def register(zk: FakeZk, broker_id: int, data: bytes | None = None) -> None:
    """The broker's ephemeral registration (its own session's)."""
    data = encode_broker(registration(broker_id)) if data is None else data
    zk.put(paths.broker(broker_id), data, owner=broker_session(broker_id))


def add_topic(
    zk: FakeZk,
    topic: str,
    partitions: Mapping[int, tuple[int, ...]],
    leaders: Mapping[int, int] | None = None,
) -> None:
    """A topic's znode and its partitions' states (ISR: every replica), as a controller
    left them."""
    zk.put(paths.topic(topic), encode_topic(TopicAssignment(topic, partitions, new_topic_id())))
    zk.put(paths.topic_partitions(topic), b"")
    for p, replicas in partitions.items():
        zk.put(paths.partition(topic, p), b"")
        leader = (leaders or {}).get(p, replicas[0])
        zk.put(
            paths.partition_state(topic, p),
            encode_partition_state(LeaderAndIsr(leader, 1, tuple(replicas)), 1),
        )


def process(c: KafkaController, event: ev.ControllerEvent) -> None:
    """``event`` processed, as the event thread would; a failover it runs gets a mocked
    channel to the brokers (there are none to connect to)."""
    with patch("controller.controller.ControllerChannelManager", MagicMock()):
        c.process(event)


def start_controller(zk: FakeZk, broker_id: int = 1, **config: Any) -> KafkaController:
    """Broker ``broker_id``'s controller over ``zk``, its Startup processed."""
    cfg = ControllerConfig(broker_id=broker_id, auto_leader_rebalance_enable=False, **config)
    c = KafkaController(cfg, zk, MagicMock(), lambda: 123)  # type: ignore[arg-type]
    process(c, ev.Startup())
    drain(c)
    return c


def cluster(
    brokers: Iterable[int] = (1, 2, 3),
    topics: Mapping[str, Mapping[int, tuple[int, ...]]] | None = None,
    **config: Any,
) -> tuple[FakeZk, KafkaController]:
    """Brokers registered, topics (by default "t": partition 0 on 2, 3, 1, led by 2) and
    broker 1 elected controller through a real failover."""
    zk = empty_cluster()
    for b in brokers:
        register(zk, b)
    for topic, partitions in (topics if topics is not None else {"t": {0: (2, 3, 1)}}).items():
        add_topic(zk, topic, partitions)
    c = start_controller(zk, **config)
    assert c.is_active, "broker 1 did not win the election"
    return zk, c


def queued(c: KafkaController) -> list[ev.ControllerEvent]:
    """The events waiting in the controller's queue, taken out of it."""
    out = []
    while not c.events._queue.empty():
        out.append(c.events._queue.get_nowait().event)
    return out


def drain(c: KafkaController, rounds: int = 50) -> list[str]:
    """Process what is queued (and what that queues), as the event thread would; the
    names of the events processed."""
    names: list[str] = []
    for _ in range(rounds):
        events = queued(c)
        if not events:
            break
        for e in events:
            names.append(e.name)
            process(c, e)
    return names

"""The real KafkaController over an in-memory ZooKeeper (tests/unit/fake_zk.py): brokers
registered, topics with their partition states, and a controller elected through a real
failover (its channel to the brokers mocked). Events are processed by `drain`, as the
event thread would, and watches fired by hand (`FakeZk.fire`).

Two ways to drive it: the functions (`cluster`, `drain`) for a controller elected over a
few topics, and `ZooKeeperData` with `Controller` for what the admin znodes hold before a
failover (reassignments, deletions, partition states written by hand), recording each
request the controller sends."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar
from unittest.mock import MagicMock, patch

from broker.state_change_log import StateChangeLog
from controller import events as ev
from controller.controller import ControllerConfig, KafkaController
from controller.request_batch import BrokerRequest
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import SetData
from zkdata.znodes import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    TopicAssignment,
    TopicPartition,
    decode_partition_state,
    decode_topic,
    encode_broker,
    encode_partition_state,
    encode_reassignment,
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


def start_controller(
    zk: FakeZk, broker_id: int = 1, *, state_log: StateChangeLog | None = None, **config: Any
) -> KafkaController:
    """Broker ``broker_id``'s controller over ``zk``, its Startup processed; its
    state-change log ``state_log`` (by default a mock)."""
    cfg = ControllerConfig(broker_id=broker_id, auto_leader_rebalance_enable=False, **config)
    log = MagicMock() if state_log is None else state_log
    c = KafkaController(cfg, zk, log, lambda: 123)  # type: ignore[arg-type]
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


def active_controller(
    brokers: Iterable[int], topics: Mapping[str, Mapping[int, tuple[int, ...]]]
) -> tuple[FakeZk, KafkaController, MagicMock, list[BrokerRequest]]:
    """Broker 1 elected controller of ``brokers`` and ``topics`` through a real failover;
    its channel (a mock, never answering) and the list of what it sends, cleared after
    the failover (as are the channel's and the state-change log's mock calls)."""
    zk = empty_cluster()
    for b in brokers:
        register(zk, b)
    for topic, partitions in topics.items():
        add_topic(zk, topic, partitions)
    sent: list[BrokerRequest] = []
    channel = MagicMock()
    channel.send.side_effect = sent.extend
    state_log = MagicMock()
    c = KafkaController(
        ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False),
        zk,  # type: ignore[arg-type]
        state_log,
        lambda: 1,
    )
    with patch("controller.controller.ControllerChannelManager", return_value=channel):
        c.process(ev.Startup())
        drain(c)
    assert c.is_active, "broker 1 did not win the election"
    sent.clear()
    channel.reset_mock()
    state_log.reset_mock()
    return zk, c, channel, sent


class RecordedTimer:
    """threading.Timer, recorded and never started (patched in for
    controller.controller.threading.Timer): its interval, what it would call, and whether
    it was cancelled. ``armed`` holds every one made; clear it first."""

    armed: ClassVar[list[RecordedTimer]] = []

    def __init__(
        self,
        interval: float,
        function: Callable[..., Any],
        args: Any = (),
        kwargs: Any = None,
    ) -> None:
        self.interval = interval
        self.function = function
        self.args = args
        self.cancelled = False
        self.daemon = False
        RecordedTimer.armed.append(self)

    def start(self) -> None:
        pass

    def cancel(self) -> None:
        self.cancelled = True


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


# --- a controller driven step by step over prepared znodes (reassignments, deletions) ---


class ZooKeeperData:
    """What ZooKeeper holds: brokers registered, topics with their partition states, the
    admin znodes, as written before a controller reads them."""

    def __init__(self, brokers: Iterable[int] = (1, 2, 3, 4), controller_epoch: int = 4) -> None:
        self.zk = empty_cluster()
        self.zk.put(paths.CONTROLLER_EPOCH, str(controller_epoch).encode())
        self.topic_ids: dict[str, uuid.UUID] = {}
        for b in brokers:
            self.register(b)

    def register(self, broker_id: int) -> None:
        register(self.zk, broker_id)

    def unregister(self, broker_id: int) -> None:
        del self.zk.nodes[paths.broker(broker_id)]

    def topic(
        self,
        name: str,
        partitions: dict[int, tuple[int, ...]],
        states: dict[int, LeaderAndIsr] | None = None,
        *,
        adding: dict[int, tuple[int, ...]] | None = None,
        removing: dict[int, tuple[int, ...]] | None = None,
    ) -> None:
        """A topic, each partition led by its first replica with every replica in sync
        unless ``states`` says otherwise (``adding``, ``removing``: the reassignments in
        progress its znode shows)."""
        topic_id = self.topic_ids.setdefault(name, uuid.uuid4())
        assignment = TopicAssignment(name, partitions, topic_id, adding or {}, removing or {})
        self.zk.put(paths.topic(name), encode_topic(assignment))
        self.zk.put(paths.topic_partitions(name), b"")
        for p, replicas in partitions.items():
            lai = (states or {}).get(p) or LeaderAndIsr(replicas[0], 0, replicas, 0)
            self.zk.put(paths.partition(name, p), b"")
            self.zk.put(paths.partition_state(name, p), encode_partition_state(lai, 1))

    def request_reassignment(self, targets: dict[TopicPartition, tuple[int, ...]]) -> None:
        self.zk.put(paths.REASSIGN_PARTITIONS, encode_reassignment(targets))

    def request_deletion(self, name: str) -> None:
        self.zk.put(paths.delete_topic(name), b"")

    def has(self, path: str) -> bool:
        return path in self.zk.nodes

    def state(self, tp: TopicPartition) -> LeaderAndIsr:
        data, stat = self.zk.nodes[paths.partition_state(tp.topic, tp.partition)]
        return decode_partition_state(str(tp), data, stat.version).leader_and_isr

    def leader_sets_isr(self, tp: TopicPartition, isr: tuple[int, ...]) -> None:
        """A leader's ISR change: same leader and epochs, a new zkVersion."""
        path = paths.partition_state(tp.topic, tp.partition)
        data, stat = self.zk.nodes[path]
        state = decode_partition_state(str(tp), data, stat.version)
        lai = state.leader_and_isr
        new = LeaderAndIsr(lai.leader, lai.leader_epoch, isr, lai.zk_version)
        self.zk.multi(
            [SetData(path, encode_partition_state(new, state.controller_epoch), stat.version)]
        )

    def assignment(self, name: str) -> TopicAssignment:
        return decode_topic(name, self.zk.nodes[paths.topic(name)][0])


class Controller:
    """Broker ``broker_id``'s KafkaController over ``data``'s ZooKeeper, its own session;
    `elect` makes it the controller (and runs its failover). Call `close` when done."""

    def __init__(self, data: ZooKeeperData, broker_id: int = 1) -> None:
        self.data = data
        self.zk = data.zk.share(0x100 + broker_id)
        self.sent: list[BrokerRequest] = []
        self._patch = patch("controller.controller.ControllerChannelManager")
        channel = MagicMock()
        channel.send.side_effect = self.sent.extend
        self._patch.start().return_value = channel
        self.controller = KafkaController(
            ControllerConfig(broker_id=broker_id),
            self.zk,  # type: ignore[arg-type]
            StateChangeLog(None, broker_id),
            lambda: 1,
        )

    def close(self) -> None:
        self._patch.stop()

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def run(self, event: ev.ControllerEvent) -> None:
        self.controller.process(event)

    def drain(self, limit: int = 50) -> list[str]:
        """Process the events the controller queued for itself (and the watches would
        have brought: the tests queue those by hand); their names, in order."""
        names = []
        queue = self.controller.events._queue
        for _ in range(limit):
            if queue.empty():
                break
            item = queue.get_nowait()
            names.append(item.event.name)
            self.controller.process(item.event)
        return names

    def elect(self) -> Controller:
        self.run(ev.Startup())
        assert self.controller.is_active
        self.drain()
        return self

    def stop_replica_deletes(self, topic: str) -> list[BrokerRequest]:
        return [
            r
            for r in self.sent
            if r.api_key.name == "STOP_REPLICA"
            and r.delete_partitions
            and any(tp.topic == topic for tp in r.partitions)
        ]

    def answer_stop_replicas(self, topic: str) -> None:
        """Every StopReplica (delete) of the topic sent so far answered: deleted."""
        answered = self.stop_replica_deletes(topic)
        for r in answered:
            self.controller.events.put(
                ev.TopicDeletionStopReplicaResponseReceived(
                    r.broker_id, 0, dict.fromkeys(r.partitions, 0), r.broker_epoch
                )
            )
        self.sent[:] = [r for r in self.sent if r not in answered]
        self.drain()

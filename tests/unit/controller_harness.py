"""A whole KafkaController (controller/controller.py: its event handlers, failover and the
store's znode I/O) driven over an in-memory ZooKeeper, for what the pure-logic tests of the
state machines cannot show: how the shell reads and writes the admin znodes around them.

`ClusterZk` extends tests/unit/fake_zk.py with what the controller's store reads and writes
(children, batched reads, fenced multis). Brokers are registrations only; the channel to
them is a mock that records each request the controller sends. Events are processed on the
test's thread (`Controller.run`, `Controller.drain`), never on the event thread."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from unittest.mock import MagicMock, patch

from kazoo.exceptions import BadVersionError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from broker.state_change_log import StateChangeLog
from controller import events as ev
from controller.controller import ControllerConfig, KafkaController
from controller.request_batch import BrokerRequest
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import Check, ControllerMovedError, SetData, WriteOp
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
)


class ClusterZk(FakeZk):
    """One session's view of an in-memory ensemble, with the controller's reads and
    fenced writes (each item of a batch one multi, after the epoch check)."""

    def share(self, session_id: int) -> ClusterZk:
        other = ClusterZk(session_id)
        other.nodes, other._zxid = self.nodes, self._zxid
        return other

    def get_children(self, path: str, *, watch: bool = False) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix) :].split("/")[0] for p in self.nodes if p.startswith(prefix)})

    def get_many(
        self, path_list: Sequence[str], *, watch: bool = False, batch: int = 0
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        return [self.nodes.get(p) for p in path_list]

    def get_many_sent(
        self, path_list: Sequence[str], *, batch: int = 0
    ) -> Callable[[], list[tuple[bytes, ZnodeStat] | None]]:
        got = self.get_many(path_list)
        return lambda: got

    def multi_fenced_batched(
        self,
        epoch_zk_version: int,
        items: Iterable[Sequence[WriteOp]],
        *,
        max_ops: int = 0,
        on_answered: Callable[[list[int], list[list[Any]]], None] | None = None,
    ) -> list[list[Any]]:
        out: list[list[Any]] = []
        for i, item in enumerate(items):
            results = self.multi([Check(paths.CONTROLLER_EPOCH, epoch_zk_version), *item])
            if isinstance(results[0], (BadVersionError, NoNodeError)):
                raise ControllerMovedError("the controller epoch moved on")
            out.append(list(results[1:]))
            if on_answered is not None:
                on_answered([i], [out[-1]])
        return out

    def multi_fenced(self, epoch_zk_version: int, ops: Sequence[WriteOp]) -> list[Any]:
        return self.multi_fenced_batched(epoch_zk_version, [ops])[0]

    def delete_children(self, path: str) -> None:
        for p in [p for p in self.nodes if p == path or p.startswith(path + "/")]:
            del self.nodes[p]


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", f"b{broker_id}", 9092),))


class ZooKeeperData:
    """What ZooKeeper holds: brokers registered, topics with their partition states, the
    admin znodes, as written before a controller reads them."""

    def __init__(self, brokers: Iterable[int] = (1, 2, 3, 4), controller_epoch: int = 4) -> None:
        self.zk = ClusterZk(0x111)
        self.zk.put(paths.CONTROLLER_EPOCH, str(controller_epoch).encode())
        self.topic_ids: dict[str, uuid.UUID] = {}
        for b in brokers:
            self.register(b)

    def register(self, broker_id: int) -> None:
        self.zk.put(
            paths.broker(broker_id), encode_broker(registration(broker_id)), owner=0x200 + broker_id
        )

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
        for p, replicas in partitions.items():
            lai = (states or {}).get(p) or LeaderAndIsr(replicas[0], 0, replicas, 0)
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
                    r.broker_id, 0, dict.fromkeys(r.partitions, 0)
                )
            )
        self.sent[:] = [r for r in self.sent if r not in answered]
        self.drain()

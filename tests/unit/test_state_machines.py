"""The partition and replica state machines, driven through the scenarios Kafka's controller
goes through, over an in-memory store; then random sequences of them with invariants checked
after every step.

`Cluster` below plays the controller's part as KafkaController.scala does: on a broker
failure it moves partitions with a dead leader Offline, tries to bring every Offline or New
partition Online, then moves the dead replicas Offline; on a startup it moves the replicas
Online and triggers an election; and so on.
"""

from __future__ import annotations

import collections
import json
import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from broker.state_change_log import StateChangeLog
from controller import election, reactions, reassignment, state_machines
from controller.context import (
    ControllerContext,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    PartitionStateName,
    ReplicaAssignment,
    ReplicaStateName,
)
from controller.election import ElectionStrategy
from controller.reassignment import reassign_partition
from controller.request_batch import BrokerRequest
from controller.state_machines import (
    ControllerOps,
    PartitionStateMachine,
    ReplicaStateMachine,
    StateChangeFailed,
)
from controller.topic_deletion import TopicDeletionManager
from tests.unit.memory_store import MemoryStore
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import request_codec
from zkdata.client import ControllerMovedError
from zkdata.znodes import (
    LEADER_DURING_DELETE,
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    PartitionState,
    TopicPartition,
    decode_partition_state,
)

P = PartitionStateName
R = ReplicaStateName
CONTROLLER_ID = 1
EPOCH = 5
UNCLEAN = "unclean.leader.election.enable"


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", f"b{broker_id}", 9092),))


class Cluster:
    """A controller's context, the store and both state machines, plus the controller's
    reactions to events (KafkaController.scala's onBrokerFailure and friends)."""

    def __init__(
        self,
        brokers: Iterable[int] = (1, 2, 3),
        *,
        unclean_default: bool = False,
        log_dir: Path | None = None,
    ) -> None:
        self.store = MemoryStore()
        self.ctx = ControllerContext(epoch=EPOCH, epoch_zk_version=self.store.epoch_zk_version)
        self.sent: list[list[BrokerRequest]] = []
        self.state_log = StateChangeLog(log_dir, CONTROLLER_ID)
        self.ops = ControllerOps(
            self.ctx,
            self.store,
            CONTROLLER_ID,
            self.sent.append,
            self.state_log,
            unclean_default=unclean_default,
        )
        self.psm = PartitionStateMachine(self.ops)
        self.rsm = ReplicaStateMachine(self.ops)
        self.deletion = TopicDeletionManager(
            self.ops, self.psm, self.rsm, self.store, lambda _topic: None
        )
        self.add_brokers(brokers)

    # --- the controller's reactions -----------------------------------------------------

    def add_brokers(self, brokers: Iterable[int]) -> None:
        for b in brokers:
            self.ctx.add_live_brokers({b: (registration(b), self.store.next_zxid())})

    def create_topic(self, topic: str, assignment: Mapping[int, Sequence[int]]) -> None:
        """A new topic, or partitions added to one: onNewPartitionCreation."""
        tps = []
        for p, replicas in assignment.items():
            tp = TopicPartition(topic, p)
            self.ctx.update_assignment(tp, ReplicaAssignment(tuple(replicas)))
            tps.append(tp)
        reactions.new_partitions(self.psm, self.rsm, tps)

    def kill(self, *brokers: int) -> None:
        """onBrokerFailure -> onReplicasBecomeOffline."""
        reactions.brokers_failed(self.psm, self.rsm, brokers, self.deletion.fail_replica_deletion)

    def start(self, *brokers: int) -> reactions.BrokersStarted:
        """onBrokerStartup, with a new broker epoch: what it lets resume."""
        started = {}
        for b in brokers:
            started[b] = (registration(b), self.store.next_zxid())
        return reactions.brokers_started(self.psm, self.rsm, started)

    def bounce(self, *brokers: int) -> reactions.BrokersStarted:
        """Brokers that re-registered (a new broker epoch) before the controller saw them
        go: failed, then started (KafkaController's onBrokerChange for bounced brokers)."""
        self.kill(*brokers)
        return self.start(*brokers)

    def controlled_shutdown(self, broker: int) -> list[TopicPartition]:
        """doControlledShutdown: the partitions the broker still leads afterwards."""
        _led, remaining = reactions.controlled_shutdown_moves(self.psm, self.rsm, broker)
        return remaining

    def preferred_election(
        self, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        return self.psm.handle_state_changes(tps, P.ONLINE, ElectionStrategy.PREFERRED)

    def isr_change_notification(self, tps: Iterable[TopicPartition]) -> None:
        """A leader changed an ISR: the controller refreshes its cache from the store and
        elects an Offline partition the change made electable."""
        known = self.ctx.known_partitions(tps)
        reactions.isr_changes_noticed(self.psm, self.store.read_partition_states(known))

    def leader_sets_isr(self, tp: TopicPartition, isr: Sequence[int]) -> None:
        self.store.leader_change(
            tp, lambda lai: LeaderAndIsr(lai.leader, lai.leader_epoch, tuple(isr), lai.zk_version)
        )
        self.isr_change_notification([tp])

    # --- looking at the outcome --------------------------------------------------------

    def leader_and_isr(self, tp: TopicPartition) -> LeaderAndIsr:
        return self.store.state(tp).leader_and_isr

    def requests(self, api: ApiKey | None = None) -> list[BrokerRequest]:
        return [r for batch in self.sent for r in batch if api is None or r.api_key == api]

    def partition_states_sent(self, api: ApiKey, tp: TopicPartition) -> dict[int, dict[str, Any]]:
        """broker -> the last state of `tp` sent to it in a request of kind `api`."""
        out: dict[int, dict[str, object]] = {}
        for r in self.requests(api):
            for t in r.body["topic_states"]:
                for p in t["partition_states"]:
                    if (t["topic_name"], p["partition_index"]) == (tp.topic, tp.partition):
                        out[r.broker_id] = p
        return out

    def load(self, tp: TopicPartition, replicas: tuple[int, ...], lai: LeaderAndIsr | None) -> None:
        """A partition as a failover loads it: its assignment, and its state (written by
        the previous controller) if it has one."""
        self.ctx.update_assignment(tp, ReplicaAssignment(replicas))
        if lai is not None:
            self.store.put(tp, lai, EPOCH - 1, version=lai.zk_version)
            self.ctx.leadership[tp] = LeaderIsrAndControllerEpoch(lai, EPOCH - 1)

    def assert_context_matches_store(self) -> None:
        for tp, lice in self.ctx.leadership.items():
            stored = self.store.state(tp)
            assert lice.leader_and_isr == stored.leader_and_isr, tp
            # a state the controller only re-read is cached with its own epoch, as in Kafka
            assert lice.controller_epoch in (stored.controller_epoch, self.ctx.epoch), tp


T = "orders"
T0, T1, T2 = (TopicPartition(T, p) for p in range(3))


def three_partitions() -> Cluster:
    c = Cluster()
    c.create_topic(T, {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    c.sent.clear()
    return c


# --- a new topic -------------------------------------------------------------------------


def test_new_topic_goes_online_with_the_first_live_replica_leading() -> None:
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2, 3), 1: (3, 1, 2)})
    for tp, leader in ((T0, 1), (T1, 3)):
        assert c.store.state(tp) == PartitionState(
            LeaderAndIsr(leader, 0, c.ctx.replicas(tp), 0), EPOCH
        )
        assert c.ctx.partition_state(tp) is P.ONLINE
        for r in c.ctx.replicas(tp):
            assert c.ctx.replica_state(PartitionReplica(tp, r)) is R.ONLINE
    c.assert_context_matches_store()
    # LeaderAndIsr (is_new) to the ISR, then UpdateMetadata to every live broker
    [batch] = [b for b in c.sent if b]
    assert [r.api_key for r in batch] == [ApiKey.LEADER_AND_ISR] * 3 + [ApiKey.UPDATE_METADATA] * 3
    for tp, leader in ((T0, 1), (T1, 3)):
        lai_sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, tp)
        assert sorted(lai_sent) == [1, 2, 3]
        for state in lai_sent.values():
            assert state["is_new"] is True
            assert (state["leader"], state["leader_epoch"], state["partition_epoch"]) == (
                leader,
                0,
                0,
            )
        um_sent = c.partition_states_sent(ApiKey.UPDATE_METADATA, tp)
        assert sorted(um_sent) == [1, 2, 3]
    for request in batch:
        request_codec(request.api_key, request.api_version).encode(request.body)


def test_new_topic_with_a_dead_replica() -> None:
    c = Cluster(brokers=(1, 2))
    c.create_topic(T, {0: (3, 1, 2)})
    assert c.leader_and_isr(T0) == LeaderAndIsr(1, 0, (1, 2), 0)
    assert sorted(c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)) == [1, 2]
    assert all(r.broker_id in (1, 2) for r in c.requests())
    assert c.ctx.replica_state(PartitionReplica(T0, 3)) is R.ONLINE  # as Kafka: it was New


def test_new_partition_without_a_live_replica_stays_new() -> None:
    c = Cluster(brokers=(1,))
    c.create_topic(T, {0: (2, 3), 1: (1,)})
    assert T0 not in c.store.znodes
    assert T0 not in c.ctx.leadership
    assert c.ctx.partition_state(T0) is P.NEW
    assert c.ctx.partition_state(T1) is P.ONLINE
    # it comes online when a replica's broker starts
    c.start(3)
    assert c.leader_and_isr(T0) == LeaderAndIsr(3, 0, (3,), 0)
    assert c.ctx.partition_state(T0) is P.ONLINE


def test_new_partition_whose_state_znode_already_exists_adopts_it() -> None:
    """A state left by an earlier, interrupted attempt is not overwritten."""
    c = Cluster()
    c.store.put(T0, LeaderAndIsr(2, 0, (2, 3), 0), EPOCH)
    c.create_topic(T, {0: (1, 2, 3)})
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 0, (2, 3), 0)
    assert [w for w in c.store.writes if w.tp == T0] == []
    assert c.ctx.partition_state(T0) is P.ONLINE
    c.assert_context_matches_store()


def test_new_partition_whose_existing_state_has_a_dead_leader_is_elected_at_once() -> None:
    """An adopted state must not make a partition Online under a leader that is gone: it is
    Offline, and elected in the same step as any Offline partition (nothing else would
    elect it before an unrelated event)."""
    c = Cluster(brokers=(1, 2, 3))
    c.store.put(T0, LeaderAndIsr(4, 3, (4, 2)), EPOCH)  # broker 4 is dead
    c.ctx.update_assignment(T0, ReplicaAssignment((4, 2, 3)))
    c.psm.handle_state_changes([T0], P.NEW)
    result = c.psm.handle_state_changes([T0], P.ONLINE, ElectionStrategy.OFFLINE)
    assert result[T0] == LeaderAndIsr(2, 4, (2,), 1)
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 4, (2,), 1)
    assert c.ctx.partition_state(T0) is P.ONLINE
    assert [w.tp for w in c.store.writes] == [T0]  # the election's conditional write
    c.assert_context_matches_store()


def test_new_partition_whose_existing_state_has_no_live_isr_member_stays_offline() -> None:
    c = Cluster(brokers=(1, 2, 3))
    c.store.put(T0, LeaderAndIsr(4, 3, (4,)), EPOCH)  # broker 4 is dead, alone in the ISR
    c.ctx.update_assignment(T0, ReplicaAssignment((4, 2, 3)))
    c.psm.handle_state_changes([T0], P.NEW)
    result = c.psm.handle_state_changes([T0], P.ONLINE, ElectionStrategy.OFFLINE)
    assert isinstance(result[T0], StateChangeFailed)
    assert c.ctx.partition_state(T0) is P.OFFLINE
    assert c.store.writes == []
    assert c.requests(ApiKey.LEADER_AND_ISR) == []
    c.assert_context_matches_store()


# --- losing a broker -----------------------------------------------------------------


def timeline_of_event(
    c: Cluster, reaction: Callable[[], object]
) -> list[tuple[str, set[TopicPartition]]]:
    """The reads of partition states and the LeaderAndIsr partitions sent, in order, while
    `reaction` runs as the controller runs an event (sending once at its end, but where it
    asks for a barrier)."""
    timeline: list[tuple[str, set[TopicPartition]]] = []
    send, read = c.ops.send, c.store.read_partition_states

    def recording_send(requests: list[BrokerRequest]) -> None:
        led = {
            TopicPartition(t["topic_name"], p["partition_index"])
            for r in requests
            if r.api_key == ApiKey.LEADER_AND_ISR
            for t in r.body["topic_states"]
            for p in t["partition_states"]
        }
        timeline.append(("sent LeaderAndIsr for", led))
        send(requests)

    def recording_read(tps: Sequence[TopicPartition]) -> Any:
        timeline.append(("read", set(tps)))
        return read(tps)

    c.ops.send = recording_send
    c.store.read_partition_states = recording_read  # type: ignore[method-assign]
    c.ops.deferred = True
    reaction()
    c.ops.deferred = False
    c.ops.flush()
    return timeline


def test_a_broker_loss_sends_the_new_leaders_before_taking_the_lost_replica_out_of_isrs() -> None:
    """Within one event (which otherwise sends once, at its end) the elections' requests
    go out before the lost replica's step, as Kafka sends each state machine's batch."""
    c = three_partitions()
    # t-0 was led by 1: elected from the cached state, written, sent; then the replica's
    # step takes 1 out of the cached ISRs of t-1 and t-2 (not t-0's, just written without
    # 1), nothing read, sent at the event's end
    assert timeline_of_event(c, lambda: c.kill(1)) == [
        ("sent LeaderAndIsr for", {T0}),
        ("sent LeaderAndIsr for", {T1, T2}),
    ]
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 1, (2, 3), 1)
    for tp in (T1, T2):
        assert 1 not in c.leader_and_isr(tp).isr
    assert c.ctx.replica_state(PartitionReplica(T0, 1)) is R.OFFLINE
    c.assert_context_matches_store()


def test_the_isr_step_takes_the_replica_out_of_a_just_written_state_that_holds_it() -> None:
    """Only a written ISR without the replica is taken as it is: one that holds it has the
    replica taken out, as for any other partition."""
    c = three_partitions()
    written = c.leader_and_isr(T1)
    assert 3 in written.isr
    c.rsm.handle_state_changes(
        [PartitionReplica(T1, 3), PartitionReplica(T0, 3)],
        R.OFFLINE,
        just_written={T1: written, T0: LeaderAndIsr(1, 0, (1, 2), 0)},
    )
    assert c.leader_and_isr(T1).isr == (2, 1)
    # t-0's state was taken as written: 3 is left in the store's ISR, unread and unwritten
    assert 3 in c.leader_and_isr(T0).isr
    assert [w.tp for w in c.store.writes if w.op == "update"] == [T1]


def test_a_controlled_shutdown_sends_the_new_leaders_before_the_isr_changes() -> None:
    c = three_partitions()
    assert timeline_of_event(c, lambda: c.controlled_shutdown(1)) == [
        ("sent LeaderAndIsr for", {T0}),
        ("sent LeaderAndIsr for", {T1, T2}),
    ]
    assert c.leader_and_isr(T0).leader == 2
    for tp in (T0, T1, T2):
        assert 1 not in c.leader_and_isr(tp).isr


def test_losing_a_leader_elects_the_next_isr_member() -> None:
    c = three_partitions()
    c.kill(1)
    # t-0 was led by 1: Offline, then Online with the first live ISR member in assignment order
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 1, (2, 3), 1)
    assert c.ctx.partition_state(T0) is P.ONLINE
    # followers: 1 leaves the ISRs; the leader stays and the epoch is bumped
    assert c.leader_and_isr(T1) == LeaderAndIsr(2, 1, (2, 3), 1)
    assert c.leader_and_isr(T2) == LeaderAndIsr(3, 1, (3, 2), 1)
    for tp in (T0, T1, T2):
        assert c.ctx.replica_state(PartitionReplica(tp, 1)) is R.OFFLINE
        assert c.ctx.partition_state(tp) is P.ONLINE
    c.assert_context_matches_store()
    # nothing goes to the dead broker, and the survivors hear about each change
    assert all(r.broker_id != 1 for r in c.requests())
    for tp in (T0, T1, T2):
        lai = c.leader_and_isr(tp)
        for state in c.partition_states_sent(ApiKey.LEADER_AND_ISR, tp).values():
            assert (state["leader"], state["leader_epoch"], state["isr"]) == (
                lai.leader,
                lai.leader_epoch,
                lai.isr,
            )
        assert sorted(c.partition_states_sent(ApiKey.LEADER_AND_ISR, tp)) == [2, 3]
        assert sorted(c.partition_states_sent(ApiKey.UPDATE_METADATA, tp)) == [2, 3]
    assert c.store.pending_races() == 0


def test_the_last_isr_member_stays_and_the_leader_becomes_none() -> None:
    c = three_partitions()
    c.leader_sets_isr(T0, (1,))
    c.kill(1)
    # no live ISR member and no unclean election: Offline, leader -1, ISR not emptied
    assert c.leader_and_isr(T0) == LeaderAndIsr(-1, 1, (1,), 2)
    assert c.ctx.partition_state(T0) is P.OFFLINE
    assert c.ctx.offline_partition_count == 1
    c.assert_context_matches_store()
    # the broker returns: the clean election can now pick it
    c.start(1)
    assert c.leader_and_isr(T0) == LeaderAndIsr(1, 2, (1,), 3)
    assert c.ctx.partition_state(T0) is P.ONLINE
    assert c.ctx.offline_partition_count == 0


def test_losing_every_replica_then_getting_them_back() -> None:
    c = three_partitions()
    c.kill(1)
    c.kill(2)
    c.kill(3)
    for tp in (T0, T1, T2):
        lai = c.leader_and_isr(tp)
        assert lai.leader == -1
        assert len(lai.isr) == 1
        assert c.ctx.partition_state(tp) is P.OFFLINE
    # the last broker to die is the only one in the ISRs; the first two back cannot lead
    c.start(1, 2)
    for tp in (T0, T1, T2):
        assert c.ctx.partition_state(tp) is P.OFFLINE
        assert c.leader_and_isr(tp).leader == -1
    c.start(3)
    for tp in (T0, T1, T2):
        assert c.leader_and_isr(tp).leader == 3
        assert c.ctx.partition_state(tp) is P.ONLINE
    c.assert_context_matches_store()


def test_offline_replica_on_a_live_broker_gets_stop_replica_without_delete() -> None:
    c = three_partitions()
    c.rsm.handle_state_changes([PartitionReplica(T0, 3)], R.OFFLINE)
    [stop] = c.requests(ApiKey.STOP_REPLICA)
    assert stop.broker_id == 3
    assert not stop.delete_partitions
    assert stop.partitions == (T0,)
    assert c.leader_and_isr(T0) == LeaderAndIsr(1, 1, (1, 2), 1)
    # the LeaderAndIsr goes to the partition's other replicas only
    assert sorted(c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)) == [1, 2]


def test_a_failovers_replica_startup() -> None:
    """Replicas on live brokers (shutting down included) go Online and their brokers get
    the partition's state again (not new, no UpdateMetadata: the failover sent a full one
    first); replicas on a dead broker are returned, ReplicaDeletionIneligible until they
    go Offline, out of the ISR; a partition without a known state is sent nothing."""
    c = Cluster(brokers=(1, 2, 3))
    c.ctx.shutting_down_broker_ids = {3}
    U0 = TopicPartition("other", 0)
    states = {T0: ((1, 2, 4), 1), T1: ((2, 3, 1), 2), U0: ((2, 3, 1), 3)}
    for tp, replicas in (*((tp, r) for tp, (r, _) in states.items()), (T2, (4, 1, 2))):
        c.ctx.update_assignment(tp, ReplicaAssignment(replicas))
    for tp, (replicas, leader) in states.items():
        c.store.put(tp, LeaderAndIsr(leader, 3, replicas), 4)
        c.ctx.leadership[tp] = LeaderIsrAndControllerEpoch(c.store.state(tp).leader_and_isr, 4)
    dead = c.rsm.startup()
    assert sorted(dead) == sorted([PartitionReplica(T0, 4), PartitionReplica(T2, 4)])
    for tp, replicas in ((T0, (1, 2, 4)), (T1, (2, 3, 1)), (T2, (4, 1, 2)), (U0, (2, 3, 1))):
        assert c.ctx.replica_states_of(tp) == {
            r: R.DELETION_INELIGIBLE if r == 4 else R.ONLINE for r in replicas
        }, tp
    first = c.sent[0]
    assert {r.api_key for r in first} == {ApiKey.LEADER_AND_ISR}
    sent = {
        (r.broker_id, t["topic_name"], p["partition_index"]): p
        for r in first
        for t in r.body["topic_states"]
        for p in t["partition_states"]
    }
    assert sorted(sent) == sorted(
        [(1, T, 0), (2, T, 0), (1, T, 1), (2, T, 1), (3, T, 1)]
        + [(b, "other", 0) for b in (1, 2, 3)]
    )
    assert not any(p["is_new"] for p in sent.values())
    assert sent[(3, T, 1)]["leader_epoch"] == 3
    # The dead replicas' step: out of T0's ISR, T0's state sent to its live replicas.
    c.rsm.handle_state_changes(dead, R.OFFLINE)
    assert c.ctx.replica_state(PartitionReplica(T0, 4)) is R.OFFLINE
    assert c.ctx.replica_state(PartitionReplica(T2, 4)) is R.OFFLINE
    assert c.leader_and_isr(T0) == LeaderAndIsr(1, 4, (1, 2), 1)
    for tp in (T1, U0):
        assert c.leader_and_isr(tp).leader_epoch == 3
    assert sorted(c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)) == [1, 2]
    c.assert_context_matches_store()


def test_equal_leaderships_decided_are_one_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """Elections of partitions on the same brokers decide equal leaderships: the context
    keeps one object for them (100,000 partitions: a few dozen, not 300,000 objects),
    and the table of shared values stays bounded."""
    c = Cluster()
    c.create_topic(T, {p: (1, 2, 3) for p in range(6)} | {6: (2, 3, 1)})
    led_by_1 = {id(c.ctx.leadership[TopicPartition(T, p)]) for p in range(6)}
    assert len(led_by_1) == 1
    assert id(c.ctx.leadership[TopicPartition(T, 6)]) not in led_by_1
    monkeypatch.setattr(state_machines, "SHARED_LEADERSHIPS_MAX", 2)
    c.kill(1)
    assert len(c.ops._shared_leaderships) <= 2
    for p in range(7):
        assert c.ctx.leadership[TopicPartition(T, p)].leader_and_isr[:3] == (2, 1, (2, 3))
    c.assert_context_matches_store()


def test_a_broker_hosting_nothing_is_reported_gone_while_a_partition_stays_offline() -> None:
    """KAFKA-13225 (fixed in Kafka 3.1): Kafka 2.8 sent the UpdateMetadata that reports a
    lost broker only where no partition had an offline leader; one left offline for good
    (its only replica gone) kept every later loss of a broker hosting nothing unreported,
    and clients were sent to it. Kafka 3.1 sends it where no replica went offline and no
    election succeeded."""
    c = Cluster(brokers=(1, 2, 3, 4))
    c.create_topic("solo", {0: (4,)})
    c.create_topic("b", {0: (1, 2)})
    c.kill(4)  # solo-0 is offline for good
    c.sent.clear()
    c.kill(3)  # hosts nothing
    [batch] = c.sent
    assert [(r.broker_id, r.api_key) for r in batch] == [
        (1, ApiKey.UPDATE_METADATA),
        (2, ApiKey.UPDATE_METADATA),
    ]
    assert [b["id"] for b in batch[0].body["live_brokers"]] == [1, 2]


def test_two_brokers_failing_together() -> None:
    c = three_partitions()
    c.kill(1, 2)
    for tp in (T0, T1, T2):
        lai = c.leader_and_isr(tp)
        assert lai.leader == 3
        assert lai.isr == (3,)
        assert c.ctx.partition_state(tp) is P.ONLINE
    c.assert_context_matches_store()


def test_two_brokers_lost_leave_the_isr_of_a_partition_in_one_write(tmp_path: Path) -> None:
    """A partition led by the survivor held both lost replicas in its ISR: Kafka's Offline
    step writes it once a broker, and its batch sends only the last state; here one
    write of that state, one leader epoch bump, one `partition_state` line, one
    LeaderAndIsr (item 56 of docs/architecture.md). The partitions the lost brokers led
    are elected without them, one write each, as before."""
    c = Cluster(log_dir=tmp_path)
    c.create_topic(T, {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    a_broker_at_a_time = three_partitions()
    for b in (1, 2):  # Kafka's passes
        a_broker_at_a_time.rsm.handle_state_changes([PartitionReplica(T2, b)], R.OFFLINE)
    each = a_broker_at_a_time.leader_and_isr(T2)
    c.sent.clear()
    c.kill(1, 2)
    for tp in (T0, T1, T2):
        once = c.leader_and_isr(tp)
        assert (once.leader, once.isr, once.leader_epoch, once.zk_version) == (3, (3,), 1, 1)
    assert (each.leader, each.isr, each.leader_epoch, each.zk_version) == (3, (3,), 2, 2)
    c.assert_context_matches_store()
    sent = [
        p["leader_epoch"]
        for r in c.requests(ApiKey.LEADER_AND_ISR)
        for t in r.body["topic_states"]
        for p in t["partition_states"]
        if (r.broker_id, t["topic_name"], p["partition_index"]) == (3, T, 2)
    ]
    assert sent == [1]
    c.state_log.close()
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    offline = [
        (r["partition"], r["leader"], r["isr"], r["leader_epoch"])
        for r in rows
        if r["event"] == "partition_state" and r["reason"] == "offline"
    ]
    assert sorted(offline) == [(p, 3, [3], 1) for p in (0, 1, 2)]  # elections, then T2's


# --- unclean leader election -----------------------------------------------------------


def lose_the_whole_isr(c: Cluster) -> None:
    c.leader_sets_isr(T0, (1,))
    c.kill(1)


def test_unclean_election_is_off_by_default() -> None:
    c = three_partitions()
    lose_the_whole_isr(c)
    assert c.leader_and_isr(T0).leader == -1
    assert c.ctx.unclean_elections == 0
    # a later attempt still finds nobody eligible
    result = c.psm.trigger_online_partition_state_change()
    assert isinstance(result[T0], StateChangeFailed)
    assert c.ctx.partition_state(T0) is P.OFFLINE


# Stored with spaces by a tool that does not trim: read as ConfigDef reads it (trimmed).
@pytest.mark.parametrize("value", ["true", "TRUE", "True", " true", "true ", "\tTrue\n"])
def test_unclean_election_enabled_by_topic_config(tmp_path: Path, value: str) -> None:
    c = Cluster(log_dir=tmp_path)
    c.create_topic(T, {0: (1, 2, 3)})
    c.store.configs[T] = {UNCLEAN: value}
    lose_the_whole_isr(c)
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 1, (2,), 2)
    assert c.ctx.partition_state(T0) is P.ONLINE
    assert c.ctx.unclean_elections == 1
    c.state_log.close()
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    reasons = [(r["partition"], r["leader"], r["reason"]) for r in rows if r["topic"] == T]
    assert reasons[0] == (0, 1, "new")
    assert reasons[-1] == (0, 2, "unclean")
    assert all(r["controller_epoch"] == EPOCH for r in rows)


def test_unclean_election_by_broker_default_and_topic_override() -> None:
    c = Cluster(unclean_default=True)
    c.create_topic(T, {0: (1, 2, 3)})
    c.create_topic("other", {0: (1, 2, 3)})
    c.store.configs["other"] = {UNCLEAN: "false"}
    other = TopicPartition("other", 0)
    c.leader_sets_isr(other, (1,))
    lose_the_whole_isr(c)
    assert c.leader_and_isr(T0).leader == 2
    assert c.leader_and_isr(other).leader == -1  # the topic said no
    assert c.ctx.unclean_elections == 1


def test_unclean_election_forced_by_the_caller() -> None:
    c = three_partitions()
    lose_the_whole_isr(c)
    result = c.psm.handle_state_changes(
        [T0], P.ONLINE, ElectionStrategy.OFFLINE, allow_unclean=True
    )
    assert result[T0] == LeaderAndIsr(2, 2, (2,), 3)
    assert c.ctx.unclean_elections == 1


def test_unclean_election_is_not_used_while_an_isr_member_lives() -> None:
    c = three_partitions()
    c.store.configs[T] = {UNCLEAN: "true"}
    c.leader_sets_isr(T0, (1, 3))
    c.kill(1)
    assert c.leader_and_isr(T0) == LeaderAndIsr(3, 1, (3,), 2)
    assert c.ctx.unclean_elections == 0


# --- a failed log directory (KIP-112) ----------------------------------------------------


def dir_fails(
    c: Cluster, broker: int, offline: Iterable[TopicPartition], *, keep_question: bool = True
) -> set[TopicPartition]:
    """Broker `broker` said a log directory failed; it answers the LeaderAndIsr that
    follows with KAFKA_STORAGE_ERROR for `offline` and no error for its other partitions
    (KafkaController's processLogDirEventNotification, then its LeaderAndIsr answer).
    ``keep_question=False``: ``c.sent`` keeps only what the answer made the controller
    send."""
    asked_from = len(c.sent)
    reactions.log_dir_failure(c.rsm, [broker])
    c.ops.flush()
    asked = {
        TopicPartition(t["topic_name"], p["partition_index"])
        for batch in c.sent[asked_from:]
        for r in batch
        if r.api_key == ApiKey.LEADER_AND_ISR and r.broker_id == broker
        for t in r.body["topic_states"]
        for p in t["partition_states"]
    }
    lost = set(offline)
    if not keep_question:
        c.sent.clear()
    return reactions.replicas_reported_offline(
        c.psm, c.rsm, broker, lost & asked, asked - lost, c.deletion.fail_replica_deletion
    )


def test_a_log_directory_failure_asks_the_broker_for_each_of_its_partitions() -> None:
    c = three_partitions()
    c.create_topic("other", {0: (2, 3)})
    c.sent.clear()
    reactions.log_dir_failure(c.rsm, [1, 4])  # 4: not a live broker
    c.ops.flush()
    requests = c.requests(ApiKey.LEADER_AND_ISR)
    assert {r.broker_id for r in requests} == {1}
    for tp in (T0, T1, T2):
        [state] = c.partition_states_sent(ApiKey.LEADER_AND_ISR, tp).values()
        assert state["is_new"] is False
        assert state["leader_epoch"] == 0
    assert c.partition_states_sent(ApiKey.LEADER_AND_ISR, TopicPartition("other", 0)) == {}
    assert c.store.writes[-1].tp.topic == "other"  # nothing written: a question only


def test_a_leader_on_a_failed_log_directory_is_replaced_from_the_isr(tmp_path: Path) -> None:
    c = Cluster(log_dir=tmp_path)
    c.create_topic(T, {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    c.sent.clear()
    assert dir_fails(c, 1, {T0, T2}, keep_question=False) == {T0, T2}
    # broker 1 lives on; its replicas of T0 and T2 do not
    assert 1 in c.ctx.live_broker_ids
    assert not c.ctx.is_replica_online(1, T0)
    assert c.ctx.is_replica_online(1, T1)
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 1, (2, 3), 1)  # elected from the ISR
    assert c.leader_and_isr(T2) == LeaderAndIsr(3, 1, (3, 2), 1)  # out of the ISR
    assert c.leader_and_isr(T1) == LeaderAndIsr(2, 0, (2, 3, 1), 0)  # untouched
    assert c.ctx.replica_state(PartitionReplica(T0, 1)) is R.OFFLINE
    assert c.ctx.replica_state(PartitionReplica(T1, 1)) is R.ONLINE
    assert c.ctx.partition_state(T0) is P.ONLINE
    # the new leader's state goes to the online replicas, and the failed one is told to
    # stop (it answers KAFKA_STORAGE_ERROR, as Kafka's broker does)
    assert sorted(c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)) == [2, 3]
    stopped = {(r.broker_id, tp) for r in c.requests(ApiKey.STOP_REPLICA) for tp in r.partitions}
    assert stopped == {(1, T0), (1, T2)}
    # every broker's metadata names the replica offline
    for state in c.partition_states_sent(ApiKey.UPDATE_METADATA, T0).values():
        assert list(state["offline_replicas"]) == [1]
    c.assert_context_matches_store()
    c.state_log.close()
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    written = [(r["partition"], r["leader"], r["reason"]) for r in rows if r["topic"] == T][3:]
    assert written == [(0, 2, "offline"), (2, 3, "offline")]


def test_a_replica_on_a_failed_log_directory_is_not_elected() -> None:
    c = three_partitions()
    dir_fails(c, 1, {T0})
    # the preferred replica's directory failed: no preferred election moves T0 back to it
    result = c.preferred_election([T0])
    assert isinstance(result[T0], StateChangeFailed)
    # nor does losing the other ISR members
    c.kill(2, 3)
    assert c.leader_and_isr(T0).leader == -1
    assert c.ctx.partition_state(T0) is P.OFFLINE
    assert c.ctx.replicas_on_offline_dirs == {1: {T0}}


def test_a_partition_whose_isr_was_on_the_failed_directory_waits_or_goes_unclean() -> None:
    c = three_partitions()
    c.leader_sets_isr(T0, (1,))
    dir_fails(c, 1, {T0})
    assert c.leader_and_isr(T0) == LeaderAndIsr(-1, 1, (1,), 2)  # the ISR never empties
    assert c.ctx.partition_state(T0) is P.OFFLINE
    # unclean election on: a live replica outside the ISR leads, and it is logged so
    c.store.configs[T] = {UNCLEAN: "true"}
    c.psm.trigger_online_partition_state_change()
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 2, (2,), 3)
    assert c.ctx.unclean_elections == 1


def test_a_failed_directory_reported_again_changes_nothing() -> None:
    c = three_partitions()
    dir_fails(c, 1, {T0})
    writes = len(c.store.writes)
    # every later LeaderAndIsr the broker answers says the same
    assert dir_fails(c, 1, {T0}, keep_question=False) == set()
    assert len(c.store.writes) == writes
    assert c.requests(ApiKey.STOP_REPLICA) == []
    # a partition answered without an error is online again
    reactions.replicas_reported_offline(c.psm, c.rsm, 1, [], [T0], c.deletion.fail_replica_deletion)
    assert c.ctx.replicas_on_offline_dirs == {}


def test_a_broker_that_registers_again_has_its_replicas_back() -> None:
    c = three_partitions()
    dir_fails(c, 1, {T0, T1})
    c.bounce(1)  # restarted: a new broker epoch, with whatever directories it has now
    assert c.ctx.replicas_on_offline_dirs == {}
    assert c.ctx.is_replica_online(1, T0)
    assert c.ctx.replica_state(PartitionReplica(T0, 1)) is R.ONLINE
    c.leader_sets_isr(T0, (2, 3, 1))
    assert c.preferred_election([T0])[T0] == LeaderAndIsr(1, 2, (2, 3, 1), 3)
    # a broker that died with a failed directory, too
    dir_fails(c, 2, {T1})
    c.kill(2)
    c.start(2)
    assert c.ctx.replicas_on_offline_dirs == {}


def test_a_failed_directory_reported_by_a_broker_gone_since_is_ignored() -> None:
    c = three_partitions()
    c.kill(1)
    writes = len(c.store.writes)
    assert (
        reactions.replicas_reported_offline(
            c.psm, c.rsm, 1, [T0], [], c.deletion.fail_replica_deletion
        )
        == set()
    )
    assert c.ctx.replicas_on_offline_dirs == {}
    assert len(c.store.writes) == writes


# --- controlled shutdown ---------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_and_shrinks_isrs() -> None:
    c = three_partitions()
    remaining = c.controlled_shutdown(1)
    assert remaining == []
    # t-0 was led by 1: the next ISR member that is not shutting down leads
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 1, (2, 3), 1)
    # followed partitions: 1 leaves the ISR, StopReplica (no delete) tells it to stop
    assert c.leader_and_isr(T1) == LeaderAndIsr(2, 1, (2, 3), 1)
    assert c.leader_and_isr(T2) == LeaderAndIsr(3, 1, (3, 2), 1)
    stops = c.requests(ApiKey.STOP_REPLICA)
    assert {r.broker_id for r in stops} == {1}
    assert not any(r.delete_partitions for r in stops)
    assert {tp for r in stops for tp in r.partitions} == {T1, T2}
    # the shutting-down broker still hears about the leader change of its partition
    assert 1 in c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    c.assert_context_matches_store()
    # then it dies: nothing left to do for partitions it no longer leads
    writes = len(c.store.writes)
    c.kill(1)
    assert len(c.store.writes) == writes
    for tp in (T0, T1, T2):
        assert c.ctx.partition_state(tp) is P.ONLINE


def offline_replicas_told(c: Cluster, tp: TopicPartition) -> dict[int, tuple[int, ...]]:
    """broker -> the offline replicas of ``tp`` in the last UpdateMetadata it was sent."""
    return {
        b: tuple(p["offline_replicas"])
        for b, p in c.partition_states_sent(ApiKey.UPDATE_METADATA, tp).items()
    }


def test_losing_a_follower_out_of_the_isr_tells_every_broker_it_is_offline() -> None:
    """Found by review against Kafka 2.8: its Offline step's doRemoveReplicasFromIsr also
    returns the partitions whose ISR did not hold the replica, and each gets an
    UpdateMetadata for every live broker, whose offline replicas now list it. Nothing was
    sent, so clients were told the dead replica was online."""
    c = three_partitions()
    c.leader_sets_isr(T0, (1, 2))  # 3 fell out of sync
    c.sent.clear()
    c.kill(3)
    assert c.leader_and_isr(T0) == LeaderAndIsr(1, 0, (1, 2), 1)  # nothing to write
    assert offline_replicas_told(c, T0) == {1: (3,), 2: (3,)}
    # its unchanged state is not re-sent as a LeaderAndIsr (every replica would ignore it)
    assert c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0) == {}


def test_a_broker_loss_tells_each_broker_of_each_partition_once() -> None:
    """The partition elected without the lost replica went out with its UpdateMetadata
    before the ISR step, which finds the replica out of its ISR: not sent again."""
    c = three_partitions()
    c.leader_sets_isr(T2, (3, 2))  # 1 fell out of sync
    c.sent.clear()
    c.ops.deferred = True
    c.kill(1)
    c.ops.deferred = False
    c.ops.flush()
    told = [
        (r.broker_id, t["topic_name"], p["partition_index"])
        for r in c.requests(ApiKey.UPDATE_METADATA)
        for t in r.body["topic_states"]
        for p in t["partition_states"]
    ]
    assert sorted(told) == sorted((b, T, p) for b in (2, 3) for p in range(3))
    assert offline_replicas_told(c, T2) == {2: (1,), 3: (1,)}


def test_a_controlled_shutdown_tells_every_broker_of_its_followers_out_of_the_isr() -> None:
    """As after a loss: a stopping broker's replica is offline in metadata (a broker shutting
    down is not online), also where it was out of the ISR already."""
    c = three_partitions()
    c.leader_sets_isr(T1, (2, 1))  # 3 fell out of sync
    c.sent.clear()
    c.controlled_shutdown(3)
    assert offline_replicas_told(c, T1) == {1: (3,), 2: (3,), 3: (3,)}


def test_controlled_shutdown_of_the_only_isr_member_keeps_the_leader() -> None:
    c = three_partitions()
    c.leader_sets_isr(T0, (1,))
    remaining = c.controlled_shutdown(1)
    assert remaining == [T0]
    assert c.leader_and_isr(T0).leader == 1


# --- preferred replica election -----------------------------------------------------


def test_preferred_election_moves_leadership_back() -> None:
    c = three_partitions()
    c.kill(1)
    c.start(1)
    assert c.leader_and_isr(T0).leader == 2
    result = c.preferred_election([T0])
    assert isinstance(result[T0], StateChangeFailed)  # 1 is not back in the ISR yet
    assert c.leader_and_isr(T0).leader == 2
    c.leader_sets_isr(T0, (2, 3, 1))  # it caught up
    result = c.preferred_election([T0])
    assert result[T0] == c.leader_and_isr(T0)
    assert c.leader_and_isr(T0) == LeaderAndIsr(1, 2, (2, 3, 1), 3)
    assert c.ctx.partition_state(T0) is P.ONLINE
    c.assert_context_matches_store()


def test_preferred_election_tells_the_leader_it_replaces_while_that_one_shuts_down() -> None:
    """A leader shutting down that no ISR member could replace keeps leading; once its
    preferred replica is back in the ISR, a preferred election moves the leadership and
    must tell the old leader too: Kafka's leaderForPreferredReplica sends the LeaderAndIsr
    to every assigned replica (its sender drops only those neither live nor shutting
    down). Told nothing, broker 2 led on at its old epoch, taking writes acks=1 that
    the new leader's log would never have."""
    c = three_partitions()
    c.leader_sets_isr(T0, (1, 2))
    c.kill(1)
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 1, (2,), 2)
    assert c.controlled_shutdown(2) == [T0]  # no one to take it over
    c.start(1)
    c.leader_sets_isr(T0, (2, 1))  # the preferred replica caught up
    c.sent.clear()
    result = c.preferred_election([T0])
    assert result[T0] == c.leader_and_isr(T0)
    assert c.leader_and_isr(T0).leader == 1
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert sorted(sent) == [1, 2, 3]  # 2, shutting down, gives way
    assert sent[2]["leader"] == 1
    assert sent[2]["leader_epoch"] == c.leader_and_isr(T0).leader_epoch


# --- an admin's ElectLeaders -----------------------------------------------------------


def test_admin_preferred_election_answers_each_partition() -> None:
    c = three_partitions()
    c.kill(1)
    c.start(1)
    c.create_topic("gone", {0: (1, 2, 3)})
    c.ctx.topics_to_be_deleted.add("gone")
    unknown = TopicPartition("nosuch", 0)
    results = reactions.admin_election(
        c.psm, [T0, T1, TopicPartition("gone", 0), unknown], reactions.PREFERRED_ELECTION
    )
    assert results[T0].error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # not in ISR
    assert results[T1] == (ErrorCode.ELECTION_NOT_NEEDED, results[T1].message, 2)
    assert results[TopicPartition("gone", 0)].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert results[unknown].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    c.leader_sets_isr(T0, (2, 3, 1))  # it caught up
    results = reactions.admin_election(c.psm, None, reactions.PREFERRED_ELECTION)
    assert results[T0] == (ErrorCode.NONE, None, 1)
    assert c.leader_and_isr(T0).leader == 1
    assert {tp for tp, r in results.items() if r.error_code != ErrorCode.ELECTION_NOT_NEEDED} == {
        T0,
        TopicPartition("gone", 0),
    }


def test_admin_unclean_election_overrides_the_topic_config(tmp_path: Path) -> None:
    c = Cluster(log_dir=tmp_path)
    c.create_topic(T, {0: (1, 2, 3), 1: (2, 3, 1)})
    lose_the_whole_isr(c)
    assert c.leader_and_isr(T0).leader == -1  # unclean election is off for the topic
    results = reactions.admin_election(c.psm, [T0, T1], reactions.UNCLEAN_ELECTION)
    assert results[T0] == (ErrorCode.NONE, None, 2)
    assert results[T1].error_code == ErrorCode.ELECTION_NOT_NEEDED  # broker 2 leads it
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 2, (2,), 3)
    assert c.ctx.unclean_elections == 1
    c.kill(2, 3)
    results = reactions.admin_election(c.psm, [T0], reactions.UNCLEAN_ELECTION)
    assert results[T0].error_code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE  # none live
    c.state_log.close()
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    assert [(r["leader"], r["reason"]) for r in rows if r.get("partition") == 0][-3:] == [
        (-1, "offline"),
        (2, "unclean"),
        (-1, "offline"),
    ]


# --- reassignment ---------------------------------------------------------------------


def test_reassign_election_picks_a_target_replica_and_keeps_the_isr() -> None:
    c = three_partitions()
    c.add_brokers([4])
    c.ctx.update_assignment(T0, ReplicaAssignment.for_reassignment((1, 2, 3), (4, 3, 2)))
    c.leader_sets_isr(T0, (1, 2, 3, 4))  # the new replica caught up
    result = c.psm.handle_state_changes([T0], P.ONLINE, ElectionStrategy.REASSIGN)
    assert result[T0] == LeaderAndIsr(4, 1, (1, 2, 3, 4), 2)
    assert c.leader_and_isr(T0) == result[T0]
    # the LeaderAndIsr goes to the target replicas, with the full assignment
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert sorted(sent) == [2, 3, 4]
    assert sent[4]["replicas"] == (4, 3, 2, 1)
    assert sent[4]["adding_replicas"] == (4,)
    assert sent[4]["removing_replicas"] == (1,)


def test_reassign_election_tells_the_leader_it_replaces_while_that_one_shuts_down() -> None:
    """A reassignment's completion elects anew where its leader, in the target, is shutting
    down; that leader stays a replica and must hear of its successor: Kafka's
    leaderForReassign sends the LeaderAndIsr to every target replica (its sender drops
    only those neither live nor shutting down). Told nothing, broker 1 led on at its old
    epoch."""
    c = three_partitions()
    c.add_brokers([4])
    c.ctx.update_assignment(T0, ReplicaAssignment.for_reassignment((1, 2, 3), (1, 2, 4)))
    c.leader_sets_isr(T0, (1, 2, 3, 4))
    c.ctx.shutting_down_broker_ids.add(1)
    c.sent.clear()
    result = c.psm.handle_state_changes([T0], P.ONLINE, ElectionStrategy.REASSIGN)
    assert result[T0] == LeaderAndIsr(2, 1, (1, 2, 3, 4), 2)
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert sorted(sent) == [1, 2, 4]
    assert (sent[1]["leader"], sent[1]["leader_epoch"]) == (2, 1)


# --- fencing -----------------------------------------------------------------------------


def assert_fenced(c: Cluster, action: object) -> None:
    assert callable(action)
    before = c.store.snapshot()
    writes = len(c.store.writes)
    c.sent.clear()
    c.store.elect_other_controller()
    with pytest.raises(ControllerMovedError):
        action()
    assert c.store.snapshot() == before, "a fenced controller changed the store"
    assert len(c.store.writes) == writes
    assert c.sent == [], "a fenced controller sent requests to brokers"


def test_fenced_controller_cannot_create_partitions() -> None:
    c = Cluster()
    assert_fenced(c, lambda: c.create_topic(T, {0: (1, 2, 3)}))
    assert T0 not in c.ctx.leadership


def test_fenced_controller_cannot_elect() -> None:
    c = three_partitions()
    assert_fenced(c, lambda: c.kill(1))


def test_fenced_controller_cannot_shrink_an_isr() -> None:
    c = three_partitions()
    assert_fenced(c, lambda: c.rsm.handle_state_changes([PartitionReplica(T1, 1)], R.OFFLINE))


def test_fenced_controller_cannot_move_leaders_for_a_shutdown() -> None:
    c = three_partitions()
    assert_fenced(c, lambda: c.controlled_shutdown(1))


def test_fenced_controller_sends_nothing_decided_earlier_in_the_same_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One call initialises a New partition (written) and then elects an Offline one, and
    the election finds the controller fenced: none of that call's requests may go out."""
    c = three_partitions()
    c.kill(1)
    c.leader_sets_isr(T0, (2,))
    c.kill(2)
    assert c.ctx.partition_state(T0) is P.OFFLINE
    c.ctx.update_assignment(TopicPartition(T, 3), ReplicaAssignment((3,)))
    c.psm.handle_state_changes([TopicPartition(T, 3)], P.NEW)
    c.sent.clear()

    real_update = c.store.update_partition_states

    def fenced_update(*args: Any, **kwargs: Any) -> Any:
        c.store.elect_other_controller()
        return real_update(*args, **kwargs)

    monkeypatch.setattr(c.store, "update_partition_states", fenced_update)
    c.store.configs[T] = {UNCLEAN: "true"}
    with pytest.raises(ControllerMovedError):
        c.psm.handle_state_changes([TopicPartition(T, 3), T0], P.ONLINE, ElectionStrategy.OFFLINE)
    assert c.sent == []


def test_a_fence_moving_between_multis_logs_what_was_written_and_sends_nothing(
    tmp_path: Path,
) -> None:
    """ZooKeeper applies the packed multis one by one, and the controller records and logs
    each one's writes as it is answered: when another controller wins between two, what
    was written before is logged (it happened, in this controller's term) and nothing of
    the call reaches a broker."""
    c = Cluster(log_dir=tmp_path)
    c.create_topic(T, {p: (1, 2, 3) for p in range(8)})
    c.sent.clear()
    writes = len(c.store.writes)
    c.store.fence_moves_after_updates = 5
    with pytest.raises(ControllerMovedError):
        c.kill(1)
    assert c.sent == []
    written = [w.tp for w in c.store.writes[writes:]]
    assert len(written) == 5
    c.state_log.close()
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    logged = [TopicPartition(r["topic"], r["partition"]) for r in rows if r["reason"] == "offline"]
    # Reported a slice of three at a time, and what was written when the fence moved.
    assert sorted(logged) == sorted(written)
    for tp in written:
        assert c.store.state(tp).leader_and_isr.leader == 2


def test_a_state_written_by_a_newer_controller_aborts_the_change() -> None:
    """Kafka's "soft failure" check: this controller was replaced while it slept."""
    c = three_partitions()
    c.store.put(T0, LeaderAndIsr(1, 4, (1, 2, 3), 0), EPOCH + 1)
    before = c.store.snapshot()
    c.ctx.remove_live_brokers([1])
    c.psm.handle_state_changes([T0], P.OFFLINE)
    result = c.psm.handle_state_changes([T0], P.ONLINE, ElectionStrategy.OFFLINE)
    assert isinstance(result[T0], StateChangeFailed)
    assert "newer" in str(result[T0])
    assert c.ctx.partition_state(T0) is P.OFFLINE
    c.rsm.handle_state_changes([PartitionReplica(T0, 1)], R.OFFLINE)
    assert c.store.snapshot() == before


# --- races with leaders (BadVersion) -------------------------------------------------


def shrink_to(*isr: int) -> Callable[[LeaderAndIsr], LeaderAndIsr]:
    """A leader's ISR change, keeping leader and leader epoch."""
    return lambda lai: LeaderAndIsr(lai.leader, lai.leader_epoch, isr, lai.zk_version)


def test_election_rereads_after_a_leader_changed_the_isr() -> None:
    c = three_partitions()
    # between the controller's read and its write, leader 1 drops 2 from the ISR
    c.store.race(T0, shrink_to(1, 3))
    reads = c.store.reads
    c.kill(1)
    assert c.store.pending_races() == 0
    assert c.store.reads == reads + 1  # t-0's, after its lost write (the ISR step reads none)
    # the decision is made again on what the store holds now: 2 is no longer eligible
    assert c.leader_and_isr(T0) == LeaderAndIsr(3, 1, (3,), 2)
    assert c.ctx.partition_state(T0) is P.ONLINE
    c.assert_context_matches_store()
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert {s["leader"] for s in sent.values()} == {3}


def test_an_election_from_a_stale_cache_loses_its_write_and_decides_again() -> None:
    """The controller has not heard yet that leader 1 took 2 out of t-0's ISR: deciding
    from its cache it would elect 2, but that write is conditional on the cached zkVersion,
    so it fails, and the state ZooKeeper holds is read and decided on."""
    c = three_partitions()
    c.store.leader_change(T0, shrink_to(1, 3))  # no notification
    assert c.ctx.leadership[T0].leader_and_isr.isr == (1, 2, 3)
    timeline = timeline_of_event(c, lambda: c.kill(1))
    assert timeline[:2] == [("read", {T0}), ("sent LeaderAndIsr for", {T0})]
    assert c.leader_and_isr(T0) == LeaderAndIsr(3, 1, (3,), 2)
    # only the decision made on what ZooKeeper held was written, and only it was sent
    updates = [w for w in c.store.writes if w.tp == T0 and w.op == "update"]
    assert [w.after.leader_and_isr.leader for w in updates] == [3]
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert {s["leader"] for s in sent.values()} == {3}
    c.assert_context_matches_store()


def test_a_cache_without_an_eligible_leader_is_read_before_giving_up() -> None:
    """The cache says t-0's ISR is only 1, but leader 1 has since added 2 back (its
    notification not yet handled): losing 1 must not leave t-0 offline on the cache's
    word. A decision not to write is made on ZooKeeper's state."""
    c = three_partitions()
    c.leader_sets_isr(T0, (1,))
    c.store.leader_change(T0, shrink_to(1, 2))  # no notification
    reads = c.store.reads
    c.kill(1)
    assert c.store.reads > reads
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 1, (2,), 3)
    assert c.ctx.partition_state(T0) is P.ONLINE
    c.assert_context_matches_store()


def test_isr_removal_writes_from_the_cache_without_reading() -> None:
    """A cached state that holds the replica is written without it, conditional on the
    cached zkVersion: ZooKeeper holding that version is what a read would have shown."""
    c = three_partitions()
    reads = c.store.reads
    c.controlled_shutdown(3)
    assert c.store.reads == reads
    assert [(w.tp, w.op) for w in c.store.writes if w.op == "update"] == [
        (T2, "update"),  # its election (3 led it)
        (T0, "update"),
        (T1, "update"),
    ]
    for tp in (T0, T1, T2):
        assert 3 not in c.leader_and_isr(tp).isr
    for tp in (T0, T1):
        assert c.ctx.replica_state(PartitionReplica(tp, 3)) is R.OFFLINE
    c.assert_context_matches_store()


def test_isr_removal_reads_a_cached_state_without_the_replica() -> None:
    """The cache says 3 left t-1's ISR, but its leader has since added 3 back (its
    notification not yet handled): not writing is a decision too, so it is made on
    ZooKeeper's state, and 3 is taken out."""
    c = three_partitions()
    c.leader_sets_isr(T1, (2, 1))
    c.store.leader_change(T1, shrink_to(2, 1, 3))  # no notification
    reads = c.store.reads
    c.rsm.handle_state_changes([PartitionReplica(T1, 3), PartitionReplica(T0, 3)], R.OFFLINE)
    assert c.store.reads == reads + 1
    assert c.leader_and_isr(T1) == LeaderAndIsr(2, 1, (2, 1), 3)
    assert c.leader_and_isr(T0).isr == (1, 2)
    c.assert_context_matches_store()


def test_isr_removal_rereads_after_a_leader_changed_the_isr() -> None:
    c = three_partitions()
    # the leader of t-1 reorders its ISR three times, each just before the controller writes
    c.store.race(T1, shrink_to(2, 1, 3))
    c.store.race(T1, shrink_to(2, 3, 1))
    c.store.race(T1, shrink_to(2, 1, 3))
    c.kill(3)
    assert c.store.pending_races() == 0
    assert c.leader_and_isr(T1) == LeaderAndIsr(2, 1, (2, 1), 4)
    assert c.ctx.replica_state(PartitionReplica(T1, 3)) is R.OFFLINE
    c.assert_context_matches_store()


def test_isr_removal_when_a_leader_already_removed_the_replica() -> None:
    c = three_partitions()
    c.store.race(T1, shrink_to(2, 1))
    c.rsm.handle_state_changes([PartitionReplica(T1, 3)], R.OFFLINE)
    # the re-read shows 3 already gone: nothing to write, the cache is refreshed
    assert c.leader_and_isr(T1) == LeaderAndIsr(2, 0, (2, 1), 1)
    assert [w.tp for w in c.store.writes if w.op == "update"] == []
    c.assert_context_matches_store()


def test_a_partition_that_never_stops_changing_fails_without_crashing() -> None:
    c = three_partitions()
    c.store.race(T0, shrink_to(1, 2, 3), times=state_machines.MAX_WRITE_ROUNDS)
    c.kill(1)
    # the election gave up on t-0; the replica state machine then took 1 out of its ISR
    assert c.store.pending_races() == 0
    assert c.ctx.partition_state(T0) is P.OFFLINE
    assert c.leader_and_isr(T0) == LeaderAndIsr(-1, 1, (2, 3), state_machines.MAX_WRITE_ROUNDS + 1)
    # the others were unaffected
    assert c.ctx.partition_state(T1) is P.ONLINE
    assert c.leader_and_isr(T1) == LeaderAndIsr(2, 1, (2, 3), 1)
    c.assert_context_matches_store()
    # the next attempt succeeds
    c.psm.trigger_online_partition_state_change()
    assert c.ctx.partition_state(T0) is P.ONLINE
    assert c.leader_and_isr(T0).leader == 2


def test_a_partition_that_changes_one_round_short_of_the_limit_is_elected_in_the_last() -> None:
    c = three_partitions()
    c.store.race(T0, shrink_to(1, 2, 3), times=state_machines.MAX_WRITE_ROUNDS - 1)
    c.kill(1)
    assert c.store.pending_races() == 0
    assert c.ctx.partition_state(T0) is P.ONLINE
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 1, (2, 3), state_machines.MAX_WRITE_ROUNDS)


@pytest.mark.parametrize(
    "races", [state_machines.MAX_WRITE_ROUNDS - 1, state_machines.MAX_WRITE_ROUNDS]
)
def test_an_isr_removal_that_keeps_losing_its_race_gives_up_after_the_last_round(
    races: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Broker 1 follows t-1 (led by 2): its removal from the ISR is written again after
    each lost race, up to MAX_WRITE_ROUNDS writes; past them it is given up, logged, and
    the ISR keeps it (Kafka loops until it wins)."""
    c = three_partitions()
    c.store.race(T1, shrink_to(2, 3, 1), times=races)
    with caplog.at_level(logging.ERROR, logger="controller.state_machines"):
        c.kill(1)
    assert c.store.pending_races() == 0
    gave_up = [r.getMessage() for r in caplog.records if "gave up removing" in r.getMessage()]
    if races < state_machines.MAX_WRITE_ROUNDS:
        assert gave_up == []
        assert c.leader_and_isr(T1) == LeaderAndIsr(2, 1, (2, 3), races + 1)
    else:
        assert gave_up == [
            f"gave up removing replica 1 from the ISR of {T1}: its state kept changing"
        ]
        assert c.leader_and_isr(T1) == LeaderAndIsr(2, 0, (2, 3, 1), races)
    assert c.leader_and_isr(T2).isr == (3, 2)


# --- invalid transitions ---------------------------------------------------------------


def test_invalid_partition_transitions_are_refused_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = three_partitions()
    unknown = TopicPartition("nope", 0)
    before = c.store.snapshot()
    with caplog.at_level(logging.ERROR, logger="controller.state_machines"):
        assert c.psm.handle_state_changes([unknown], P.ONLINE, ElectionStrategy.OFFLINE) == {}
        assert c.psm.handle_state_changes([T0], P.NEW) == {}
        assert c.psm.handle_state_changes([T0], P.NON_EXISTENT) == {}
    assert c.ctx.partition_state(T0) is P.ONLINE
    assert c.ctx.partition_state(unknown) is P.NON_EXISTENT
    assert c.store.snapshot() == before
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert all("invalid partition state transition" in m for m in messages)
    assert "OnlinePartition to NewPartition" in messages[1]
    # Offline -> NonExistent is the one way out
    c.psm.handle_state_changes([T0], P.OFFLINE)
    c.psm.handle_state_changes([T0], P.NON_EXISTENT)
    assert c.ctx.partition_state(T0) is P.NON_EXISTENT


def test_invalid_replica_transitions_are_refused_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = three_partitions()
    pr = PartitionReplica(T0, 2)
    with caplog.at_level(logging.ERROR, logger="controller.state_machines"):
        c.rsm.handle_state_changes([pr], R.DELETION_STARTED)  # Online -> DeletionStarted
        c.rsm.handle_state_changes([pr], R.NON_EXISTENT)
        c.rsm.handle_state_changes([PartitionReplica(T0, 9)], R.ONLINE)  # NonExistent -> Online
    assert c.ctx.replica_state(pr) is R.ONLINE
    assert c.ctx.replicas(T0) == (1, 2, 3)
    assert c.requests() == []
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert all("invalid replica state transition" in m for m in messages)


def test_an_election_without_a_strategy_is_a_programming_error() -> None:
    c = three_partitions()
    with pytest.raises(ValueError, match="strategy"):
        c.psm.handle_state_changes([T0], P.ONLINE)


# --- the replica state machine's other transitions ------------------------------------


def test_replica_deletion_path() -> None:
    c = three_partitions()
    prs = [PartitionReplica(T0, 3)]
    c.rsm.handle_state_changes(prs, R.OFFLINE)
    c.sent.clear()
    c.rsm.handle_state_changes(prs, R.DELETION_STARTED)
    [stop] = c.requests()
    assert (stop.api_key, stop.broker_id, stop.delete_partitions) == (ApiKey.STOP_REPLICA, 3, True)
    c.rsm.handle_state_changes(prs, R.DELETION_SUCCESSFUL)
    assert c.ctx.replica_state(prs[0]) is R.DELETION_SUCCESSFUL
    c.rsm.handle_state_changes(prs, R.NON_EXISTENT)
    assert c.ctx.replicas(T0) == (1, 2)
    assert c.ctx.replica_state(prs[0]) is R.NON_EXISTENT
    assert 3 not in c.ctx.replica_states_of(T0)


def refused_transitions(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "state transition" in r.getMessage()]


def delete(c: Cluster, topic: str) -> None:
    """/admin/delete_topics gets `topic`."""
    c.ctx.topics_to_be_deleted.add(topic)
    c.deletion.resume()


def test_deleting_a_topic_created_while_a_replica_was_down_waits_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Created while broker 3 was down: its replicas went Online (as in Kafka). The deletion
    # takes them Offline, then ineligible; Kafka asks for Online -> ineligible, refused.
    c = Cluster(brokers=(1, 2))
    c.create_topic(T, {0: (1, 2, 3), 1: (3, 1, 2)})
    delete(c, T)
    dead = [PartitionReplica(T0, 3), PartitionReplica(T1, 3)]
    assert [c.ctx.replica_state(pr) for pr in dead] == [R.DELETION_INELIGIBLE] * 2
    assert T in c.ctx.topics_ineligible_for_deletion
    c.deletion.complete_replica_deletion(
        [PartitionReplica(tp, b) for tp in (T0, T1) for b in (1, 2)]
    )
    assert T in c.ctx.all_topics  # held for broker 3
    resume = c.start(3)
    assert resume.deletions == [T]
    c.deletion.resume_for(resume.deletions)
    assert [c.ctx.replica_state(pr) for pr in dead] == [R.DELETION_STARTED] * 2
    c.deletion.complete_replica_deletion(dead)
    assert T not in c.ctx.all_topics
    assert c.store.deleted_topics == [T]
    assert refused_transitions(caplog) == []


def test_a_deletion_answered_after_its_replica_became_ineligible_is_asked_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Broker 3 is sent StopReplica (delete); before its answer lands, its LeaderAndIsr
    # answer says the partitions are on a failed log directory: ineligible. The late
    # "deleted" completes nothing (Kafka attempts ineligible -> successful, refused and
    # logged); once the deletion resumes, broker 3 is asked again, and that answer
    # completes it.
    c = three_partitions()
    delete(c, T)
    on = {b: [PartitionReplica(tp, b) for tp in (T0, T1, T2)] for b in (1, 2, 3)}
    assert {c.ctx.replica_state(pr) for b in on for pr in on[b]} == {R.DELETION_STARTED}
    c.deletion.complete_replica_deletion(on[2])
    c.deletion.fail_replica_deletion(on[3])
    assert {c.ctx.replica_state(pr) for pr in on[3]} == {R.DELETION_INELIGIBLE}
    c.deletion.complete_replica_deletion(on[3])  # the late answers
    assert {c.ctx.replica_state(pr) for pr in on[3]} == {R.DELETION_INELIGIBLE}
    c.deletion.complete_replica_deletion(on[1])
    assert T in c.ctx.all_topics  # held for broker 3
    c.sent.clear()
    c.deletion.resume_for([T])  # its directory repaired, say: the broker started again
    assert {c.ctx.replica_state(pr) for pr in on[3]} == {R.DELETION_STARTED}
    deletes = [r for r in c.requests(ApiKey.STOP_REPLICA) if r.delete_partitions]
    assert [(r.broker_id, set(r.partitions)) for r in deletes] == [(3, {T0, T1, T2})]
    c.deletion.complete_replica_deletion(on[3])
    assert T not in c.ctx.all_topics
    assert c.store.deleted_topics == [T]
    assert refused_transitions(caplog) == []


def test_a_replica_deleted_before_its_broker_died_holds_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = three_partitions()
    delete(c, T)
    c.deletion.complete_replica_deletion([PartitionReplica(tp, 3) for tp in (T0, T1, T2)])
    c.kill(3)
    # Kafka makes the deleted replicas ineligible (refused) and holds the topic for broker 3.
    assert T not in c.ctx.topics_ineligible_for_deletion
    assert c.ctx.replica_state(PartitionReplica(T0, 3)) is R.DELETION_SUCCESSFUL
    c.deletion.complete_replica_deletion(
        [PartitionReplica(tp, b) for tp in (T0, T1, T2) for b in (1, 2)]
    )
    assert T not in c.ctx.all_topics
    c.start(3)  # Kafka moves its deleted replicas Online again (refused)
    assert refused_transitions(caplog) == []


def test_a_replica_deleted_before_its_broker_bounced_stays_deleted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = three_partitions()
    delete(c, T)
    c.deletion.complete_replica_deletion([PartitionReplica(T0, 3)])
    resume = c.bounce(3)
    assert resume.deletions == [T]
    c.deletion.resume_for(resume.deletions)  # as the shell does
    assert c.ctx.replica_state(PartitionReplica(T0, 3)) is R.DELETION_SUCCESSFUL
    # Its other replicas' deletion failed with the broker; once the rest answered, they
    # are asked again.
    c.deletion.complete_replica_deletion(
        [PartitionReplica(tp, b) for tp in (T0, T1, T2) for b in (1, 2)]
    )
    again = [PartitionReplica(T1, 3), PartitionReplica(T2, 3)]
    assert [c.ctx.replica_state(pr) for pr in again] == [R.DELETION_STARTED] * 2
    c.deletion.complete_replica_deletion(again)
    assert T not in c.ctx.all_topics
    assert refused_transitions(caplog) == []


def test_a_bounced_broker_is_failed_and_started_with_its_new_epoch() -> None:
    c = three_partitions()
    before = c.ctx.broker_epochs[1]
    c.sent.clear()
    c.bounce(1)
    assert c.ctx.broker_epochs[1] > before
    assert sorted(c.ctx.live_brokers) == [1, 2, 3]
    # The partition it led has a new leader, and it left every ISR (its log may be behind).
    assert c.leader_and_isr(T0).leader == 2
    for tp in (T0, T1, T2):
        assert 1 not in c.leader_and_isr(tp).isr
        assert c.ctx.replica_state(PartitionReplica(tp, 1)) is R.ONLINE
    # It learned the whole cluster before any LeaderAndIsr, then every partition it hosts.
    to_1 = [r.api_key for r in c.requests() if r.broker_id == 1]
    assert to_1[0] == ApiKey.UPDATE_METADATA
    assert {
        tp for tp in (T0, T1, T2) if 1 in c.partition_states_sent(ApiKey.LEADER_AND_ISR, tp)
    } == {T0, T1, T2}


def test_a_bounced_brokers_new_incarnation_is_sent_no_stop_replica() -> None:
    """Within one event (as the controller runs it): the StopReplicas of the failure step
    are owed to the old incarnation, which Kafka's send drops (the broker is not live when
    onBrokerFailure sends its batch). Built at the event's end, they went to the new
    incarnation, live again by then: a StopReplica of every partition it hosts."""
    c = three_partitions()
    c.ops.deferred = True
    c.bounce(3)
    c.ops.deferred = False
    c.ops.flush()
    assert [r.partitions for r in c.requests(ApiKey.STOP_REPLICA)] == []
    # it is sent every partition it hosts, to follow
    assert {
        tp for tp in (T0, T1, T2) if 3 in c.partition_states_sent(ApiKey.LEADER_AND_ISR, tp)
    } == {T0, T1, T2}


def test_new_replica_that_would_lead_is_refused() -> None:
    c = Cluster()
    c.ctx.update_assignment(T0, ReplicaAssignment((1, 2)))
    c.ctx.leadership[T0] = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2)), EPOCH)
    c.rsm.handle_state_changes([PartitionReplica(T0, 1), PartitionReplica(T0, 2)], R.NEW)
    assert c.ctx.replica_state(PartitionReplica(T0, 1)) is R.NON_EXISTENT
    assert c.ctx.replica_state(PartitionReplica(T0, 2)) is R.NEW
    # the new follower was told, with is_new
    assert c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)[2]["is_new"] is True
    assert 1 not in c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)


def test_new_replica_outside_the_assignment_is_added_to_it() -> None:
    c = three_partitions()
    c.add_brokers([4])
    pr = PartitionReplica(T0, 4)
    c.rsm.handle_state_changes([pr], R.NEW)
    c.rsm.handle_state_changes([pr], R.ONLINE)
    assert c.ctx.replicas(T0) == (1, 2, 3, 4)
    assert c.ctx.replica_state(pr) is R.ONLINE


def test_a_broker_start_sends_the_brokers_up_only_what_changed() -> None:
    """Kafka's onBrokerStartup: the brokers up get an UpdateMetadata without partitions
    (who is live), the new one every partition; then each partition with a replica on it
    goes to every broker, its offline replicas changed. Both went in one batch, whose
    UpdateMetadata has one set of partitions: every broker got every partition."""
    c = three_partitions()
    U0 = TopicPartition("other", 0)
    c.create_topic(U0.topic, {0: (1, 2)})  # nothing on 3
    c.kill(3)
    c.sent.clear()
    c.start(3)
    told = {
        (r.broker_id, TopicPartition(t["topic_name"], p["partition_index"]))
        for r in c.requests(ApiKey.UPDATE_METADATA)
        for t in r.body["topic_states"]
        for p in t["partition_states"]
    }
    assert told == {(b, tp) for b in (1, 2, 3) for tp in (T0, T1, T2)} | {(3, U0)}
    # and the brokers up heard first that 3 is back
    first = c.sent[0]
    assert [(r.broker_id, r.api_key) for r in first] == [
        (1, ApiKey.UPDATE_METADATA),
        (2, ApiKey.UPDATE_METADATA),
    ]
    assert all(r.body["topic_states"] == [] for r in first)
    assert 3 in {b["id"] for b in first[0].body["live_brokers"]}


def test_replica_going_online_again_hears_the_current_leadership() -> None:
    c = three_partitions()
    c.kill(3)
    c.sent.clear()
    c.start(3)
    for tp in (T0, T1, T2):
        sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, tp)
        assert sent[3]["leader_epoch"] == c.leader_and_isr(tp).leader_epoch
        assert sent[3]["is_new"] is False


def test_offline_replica_of_a_partition_without_leadership_only_updates_metadata() -> None:
    c = Cluster(brokers=(1,))
    c.create_topic(T, {0: (2, 3)})  # no live replica: no leadership
    c.sent.clear()
    c.rsm.handle_state_changes([PartitionReplica(T0, 2)], R.OFFLINE)
    assert c.ctx.replica_state(PartitionReplica(T0, 2)) is R.OFFLINE
    assert c.store.writes == []
    # broker 2 is dead (no StopReplica); the live broker gets metadata, with no state for t-0
    [request] = c.requests()
    assert (request.api_key, request.broker_id) == (ApiKey.UPDATE_METADATA, 1)
    assert request.body["topic_states"] == []


def test_startup_from_a_loaded_context() -> None:
    """Failover: states derived from what was loaded, then elections where needed, then
    the dead replicas out of the ISRs. A partition the dead broker led is written once,
    straight to its new leader: Kafka's order (the dead replicas first) would write it
    leaderless with a new leader epoch, then elect it."""
    c = Cluster(brokers=(1, 2))
    U0, U1 = TopicPartition("other", 0), TopicPartition("other", 1)
    for tp, replicas, lai in (
        (T0, (1, 2, 3), LeaderAndIsr(3, 4, (3, 1), 9)),  # leader on dead broker 3
        (T1, (2, 1), LeaderAndIsr(2, 1, (2, 1), 2)),
        (T2, (3, 1), None),  # never initialised
        (U0, (1, 3), LeaderAndIsr(1, 2, (1, 3), 5)),  # a follower on dead broker 3
        (U1, (3, 2), LeaderAndIsr(3, 7, (3,), 8)),  # no live ISR member: no leader
    ):
        c.load(tp, replicas, lai)
    phases: list[str] = []
    reactions.start_state_machines(c.psm, c.rsm, phases.append)
    assert phases == [
        "replica_state_machine_ms",
        "partition_state_machine_ms",
        "offline_replicas_ms",
    ]
    for tp in (T0, T2, U0, U1):
        assert c.ctx.replica_state(PartitionReplica(tp, 3)) is R.OFFLINE, tp
    assert c.ctx.replica_state(PartitionReplica(T0, 1)) is R.ONLINE
    assert c.leader_and_isr(T0) == LeaderAndIsr(1, 5, (1,), 10)
    assert c.leader_and_isr(T1) == LeaderAndIsr(2, 1, (2, 1), 2)
    assert c.leader_and_isr(T2) == LeaderAndIsr(1, 0, (1,), 0)
    assert c.leader_and_isr(U0) == LeaderAndIsr(1, 3, (1,), 6)
    # As Kafka leaves it: leaderless, its last ISR member kept (an ISR never empties).
    assert c.leader_and_isr(U1) == LeaderAndIsr(-1, 8, (3,), 9)
    for tp in (T0, T1, T2, U0):
        assert c.ctx.partition_state(tp) is P.ONLINE
    assert c.ctx.partition_state(U1) is P.OFFLINE
    c.assert_context_matches_store()


def test_a_failover_in_an_event_sends_each_partition_state_once() -> None:
    """Inside an event, the new leaders go out before the dead replicas' step; the states
    the start-up re-sends go with them, except those that step is about to change, which
    go once, changed, at the event's end."""
    c = Cluster(brokers=(1, 2))
    U0, U1 = TopicPartition("other", 0), TopicPartition("other", 1)
    for tp, replicas, lai in (
        (T0, (3, 1, 2), LeaderAndIsr(3, 4, (3, 1, 2), 9)),  # led by dead broker 3
        (T1, (1, 3, 2), LeaderAndIsr(1, 2, (1, 3, 2), 5)),  # followed by 3, in its ISR
        (U0, (2, 1, 3), LeaderAndIsr(2, 1, (2, 1), 3)),  # 3 out of the ISR already
        (U1, (1, 2), LeaderAndIsr(1, 1, (1, 2), 2)),  # no replica on 3
    ):
        c.load(tp, replicas, lai)
    c.ops.deferred = True
    reactions.start_state_machines(c.psm, c.rsm)
    c.ops.deferred = False
    c.ops.flush()
    assert len(c.sent) == 2

    def states(batch: list[BrokerRequest]) -> dict[tuple[int, TopicPartition], tuple[int, ...]]:
        return {
            (r.broker_id, TopicPartition(t["topic_name"], p["partition_index"])): tuple(p["isr"])
            for r in batch
            if r.api_key is ApiKey.LEADER_AND_ISR
            for t in r.body["topic_states"]
            for p in t["partition_states"]
        }

    first, last = states(c.sent[0]), states(c.sent[1])
    assert sorted(first) == sorted((b, tp) for b in (1, 2) for tp in (T0, U1))
    assert first[(1, T0)] == (1, 2)  # elected
    assert sorted(last) == sorted((b, tp) for b in (1, 2) for tp in (T1, U0))
    assert last[(1, T1)] == (1, 2)  # 3 taken out
    assert last[(1, U0)] == (2, 1)  # re-sent as it was
    # 3 out of U0's ISR: its offline replica is no news after the failover's full
    # UpdateMetadata (item 6 of docs/architecture.md), unlike after a broker loss
    assert c.partition_states_sent(ApiKey.UPDATE_METADATA, U0) == {}
    c.assert_context_matches_store()


def test_a_failover_takes_two_dead_brokers_out_of_an_isr_in_one_write() -> None:
    """Two brokers dead when the controller takes over: a partition the live one leads
    loses both from its ISR in one write (item 56), not one a dead broker."""
    c = Cluster(brokers=(1,))
    c.load(T0, (1, 2, 3), LeaderAndIsr(1, 4, (1, 2, 3), 9))
    c.load(T1, (2, 1, 3), LeaderAndIsr(2, 2, (2, 3, 1), 5))  # led by a dead broker
    reactions.start_state_machines(c.psm, c.rsm)
    assert c.leader_and_isr(T0) == LeaderAndIsr(1, 5, (1,), 10)
    assert c.leader_and_isr(T1) == LeaderAndIsr(1, 3, (1,), 6)  # elected
    for b in (2, 3):
        assert c.ctx.replica_state(PartitionReplica(T0, b)) is R.OFFLINE
    c.assert_context_matches_store()


def test_an_offline_partition_an_isr_change_made_electable_is_elected() -> None:
    """Found by the stateful model: the leader (1) is shutting down with no one to take
    over; a broker change (2 dies) takes its partition offline (Kafka counts a leader
    shutting down as offline) and finds no one to elect in the ISR (1, 2) it reads. Then
    the leader, still alive, lets 3 in: the ISR change notification elects 3 at once,
    not at the next broker change as Kafka would."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T0.topic, {0: (1, 2, 3)})
    c.leader_sets_isr(T0, (1,))
    assert c.controlled_shutdown(1) == [T0]  # no one in the ISR to take over
    c.leader_sets_isr(T0, (1, 2))  # 2 caught up again
    c.kill(2)
    assert c.ctx.partition_state(T0) is P.OFFLINE
    assert c.leader_and_isr(T0).leader == 1
    c.store.leader_change(T0, lambda lai: LeaderAndIsr(1, lai.leader_epoch, (1, 3), lai.zk_version))
    c.isr_change_notification([T0])
    assert c.ctx.partition_state(T0) is P.ONLINE
    state = c.leader_and_isr(T0)
    assert state.leader == 3
    assert 3 in state.isr
    c.assert_context_matches_store()


# --- random histories -----------------------------------------------------------------

BROKERS = (1, 2, 3, 4)
TOPICS = ("a", "b", "c")
StateKey = tuple[int, int, tuple[int, ...], int]  # leader, leader epoch, ISR, zkVersion
IsrChange = Callable[[LeaderAndIsr], LeaderAndIsr | None]  # a leader's write, or None


# what the controller does while a leader's ISR change is in flight
RACING_ACTIONS = ["kill", "start", "bounce", "shutdown", "elect", "reassign", "resume"]
RACING_ACTIONS += ["failover", "fenced", "delete", "log_dir", "admin_elect"]


class InvalidTransitions(logging.Handler):
    """Collects the state machines' errors for refused transitions."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "state transition" in record.getMessage():
            self.messages.append(record.getMessage())


class ControllerMachine(RuleBasedStateMachine):
    """Random broker deaths, returns and bounces, controlled shutdowns, topics created and
    grown, elections with random strategies, ISR changes by leaders by the replica set
    they last learned (some racing the controller's writes: elections, broker changes,
    fencing and failovers, reassignments and their next steps, topic deletions, failed log
    directories, admins' ElectLeaders), fencing and failovers, reassignments (requested,
    overridden, resumed) and topic deletions (their StopReplicas answered or failed), with
    the invariants of sections 3, 5 and 6 of the model checked after every step, and no
    transition asked of the state machines that they refuse."""

    # racing actions that do nothing here (their rules are switched off in a subclass)
    quiet_actions: frozenset[str] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.c = Cluster(brokers=BROKERS)
        self.topics: list[str] = []
        self.unclean_topics: set[str] = set()
        # partitions an admin's ElectLeaders asked to elect uncleanly in the step
        self.forced_unclean: set[TopicPartition] = set()
        self.last_epoch: dict[TopicPartition, tuple[int, int]] = {}
        self.checked_writes = 0
        self.checked_batches = 0
        # replicas the controller was told are gone: they must be OfflineReplica
        self.gone: set[PartitionReplica] = set()
        self.deleted: set[str] = set()  # topics whose deletion completed
        # brokers that bounced in the step: dead while the controller decided, live after
        self.bounced: set[int] = set()
        # each broker's partitions whose log directory failed (the broker's truth: the
        # controller learns it from the broker's answers)
        self.failed_dirs: dict[int, set[TopicPartition]] = {}
        # each broker's view of each partition: the leader epoch and replicas of the last
        # LeaderAndIsr it applied (a leader lets followers in by the replica set it knows,
        # which may be older than the controller's)
        self.broker_views: dict[tuple[int, TopicPartition], tuple[int, tuple[int, ...]]] = {}
        self.notifying = False  # see notification_pending
        # partitions in a topic znode that the controller left alone: added to a topic
        # being deleted (an admin's check raced the marking); the next failover loads them
        self.unseen: dict[TopicPartition, tuple[int, ...]] = {}
        # each partition's replicas before its reassignment in progress started, whatever
        # targets overrode it since: what a cancellation goes back to (a replica an
        # override kept is not one of them; the review found it taken for one)
        self.origins: dict[TopicPartition, tuple[int, ...]] = {}
        # transitions the state machines refused as invalid: each a wrong step to attempt
        self.invalid = InvalidTransitions()
        logging.getLogger("controller.state_machines").addHandler(self.invalid)
        # StopReplicas (delete) sent and not answered yet, by replica: an answer may land
        # after the replica's state moved on (see stop_replica_answered_late)
        self.pending_deletes: set[PartitionReplica] = set()
        send = self.c.ops.send

        def sent(batch: list[BrokerRequest]) -> None:
            send(batch)
            for r in batch:
                if r.api_key == ApiKey.STOP_REPLICA and r.delete_partitions:
                    self.pending_deletes |= {
                        PartitionReplica(tp, r.broker_id) for tp in r.partitions
                    }

        self.c.ops.send = sent

    # --- rules ------------------------------------------------------------------------

    @initialize(unclean=st.booleans())
    def setup(self, unclean: bool) -> None:
        if unclean:
            self.unclean_topics.add("c")
            self.c.store.configs["c"] = {UNCLEAN: "true"}

    @precondition(lambda self: len(self.topics) < len(TOPICS))
    @rule(data=st.data())
    def create_topic(self, data: st.DataObject) -> None:
        topic = TOPICS[len(self.topics)]
        partitions = data.draw(st.integers(1, 3), label="partitions")
        assignment = {
            p: data.draw(st.permutations(BROKERS), label=f"replicas of {p}")[:3]
            for p in range(partitions)
        }
        self.topics.append(topic)
        self.c.create_topic(topic, assignment)

    @rule(data=st.data())
    def add_partitions(self, data: st.DataObject) -> None:
        """Partitions added to a topic (not one being deleted: the shell refuses those),
        their replicas on any brokers, live or not."""
        ctx = self.c.ctx
        topics = sorted(t for t in ctx.all_topics if not ctx.is_topic_queued_for_deletion(t))
        if not topics:
            return
        topic = data.draw(st.sampled_from(topics), label="grown topic")
        first = max(ctx.assignments[topic]) + 1
        added = data.draw(st.integers(1, 2), label="added partitions")
        self.c.create_topic(
            topic,
            {
                p: data.draw(st.permutations(BROKERS), label=f"replicas of {p}")[:3]
                for p in range(first, first + added)
            },
        )
        # Only the new ones: onNewPartitionCreation elects no other (in Kafka neither).
        self.assert_elected_where_possible(
            TopicPartition(topic, p) for p in range(first, first + added)
        )

    @rule(data=st.data())
    def partitions_added_while_deleting(self, data: st.DataObject) -> None:
        """Partitions added to a topic being deleted: the admin's check that it is not
        raced the marking, and its write of the topic znode landed. The controller leaves
        them alone (KafkaController's processPartitionModifications), so only the store
        has them until a failover loads them with the topic."""
        ctx = self.c.ctx
        topics = sorted(t for t in ctx.topics_to_be_deleted if t in ctx.all_topics)
        if not topics:
            return
        topic = data.draw(st.sampled_from(topics), label="grown while deleting")
        first = 1 + max(
            [*ctx.assignments[topic], *(tp.partition for tp in self.unseen if tp.topic == topic)]
        )
        for p in range(first, first + data.draw(st.integers(1, 2), label="added partitions")):
            replicas = data.draw(st.permutations(BROKERS), label=f"replicas of {p}")[:3]
            self.unseen[TopicPartition(topic, p)] = tuple(replicas)

    @rule(brokers=st.sets(st.sampled_from(BROKERS), min_size=1, max_size=2))
    def kill(self, brokers: set[int]) -> None:
        dead = brokers & set(self.c.ctx.live_brokers)
        if dead:
            self.gone |= set(self.c.ctx.replicas_on_brokers(dead))
            for b in dead:
                self.failed_dirs.pop(b, None)  # it comes back with its directories repaired
                self.forget(b)
            self.c.kill(*dead)
            self.assert_elected_where_possible()

    @rule(broker=st.sampled_from(BROKERS))
    def start(self, broker: int) -> None:
        if broker not in self.c.ctx.live_brokers:
            self.gone -= set(self.c.ctx.replicas_on_brokers({broker}))
            self.failed_dirs.pop(broker, None)
            self.resume(self.c.start(broker))

    @rule(broker=st.sampled_from(BROKERS))
    def bounce(self, broker: int) -> None:
        """The broker restarted before the controller saw it go: its registration has a new
        broker epoch, and it is treated as failed and started (KIP-380)."""
        if broker in self.c.ctx.live_brokers:
            before = self.c.ctx.broker_epochs[broker]
            self.bounced.add(broker)
            self.failed_dirs.pop(broker, None)
            self.forget(broker)
            self.resume(self.c.bounce(broker))
            assert self.c.ctx.broker_epochs[broker] > before

    @rule(broker=st.sampled_from(BROKERS))
    def registers_while_no_controller_watches(self, broker: int) -> None:
        """The controller's term ends and, before the next controller loads, the broker
        registers again: restarted (perhaps on new disks, perhaps as that controller), or
        back after being away. The next controller reads a registration no controller saw,
        and finds it stale in each ISR listing it (a state written before): where another
        live member is left, it leads no such partition afterwards and has left the ISR;
        elsewhere (no other live member) the state is as Kafka leaves it."""
        c = self.c
        # the next failover holds the deletions of topics being reassigned, and leads them
        held = {
            tp.topic
            for tp in c.ctx.all_partitions()
            if c.ctx.full_assignment(tp).is_being_reassigned
        }
        listed = {
            tp: c.leader_and_isr(tp)
            for tp in c.store.znodes
            if (tp.topic not in c.ctx.topics_to_be_deleted or tp.topic in held)
            and broker in c.leader_and_isr(tp).isr
        }
        live_before = set(c.ctx.live_brokers) | {broker}
        self.failed_dirs.pop(broker, None)
        self.forget(broker)
        stale = self.failover(registered_unseen=[broker])  # its replicas leave `gone` there
        assert {tp for tp, members in stale.items() if broker in members} == set(listed)
        for tp, before in listed.items():
            if tp not in c.store.znodes:
                continue
            lai = c.leader_and_isr(tp)
            if any(r != broker and r in live_before for r in before.isr):
                assert broker not in lai.isr, f"{tp}: {before} -> {lai}"
                assert lai.leader != broker, f"{tp}: {before} -> {lai}"

    @rule(data=st.data())
    def leader_lacks_its_log(self, data: st.DataObject) -> None:
        """A live leader the ISR lists with others refuses to lead for want of the log
        (back on new disks while the ISR still listed it): it leaves the ISR, and the
        leadership goes to another member, or to none while no member left is live (then
        elected as any Offline partition is: uncleanly where the topic allows, and only
        that way may it lead again, alone in the ISR). One the ISR lists alone keeps it:
        the controller never empties an ISR (drawn too, or emptying it passed unseen)."""
        c = self.c
        ctx = c.ctx
        candidates = sorted(
            tp
            for tp, lice in ctx.leadership.items()
            if lice.leader_and_isr.leader in ctx.live_brokers and ctx.is_topic_in_service(tp.topic)
        )
        if not candidates:
            return
        tp = data.draw(st.sampled_from(candidates), label="refused leadership")
        broker = ctx.leadership[tp].leader_and_isr.leader
        before = c.leader_and_isr(tp)
        reactions.leaders_lacking_their_logs(c.psm, broker, [tp])
        after = c.leader_and_isr(tp)
        if before.isr == (broker,):
            assert after == before, (before, after)
            return
        assert after.leader_epoch > before.leader_epoch, (before, after)
        if after.isr == (broker,):
            assert tp.topic in self.unclean_topics, (before, after)
        else:
            assert broker not in after.isr, (before, after)
            assert after.leader != broker, (before, after)
        self.assert_elected_where_possible([tp])

    def forget(self, broker: int) -> None:
        """A broker that died or restarted: what it knew of partitions is gone with it, and
        it answers none of the requests it had."""
        self.broker_views = {k: v for k, v in self.broker_views.items() if k[0] != broker}
        self.pending_deletes = {pr for pr in self.pending_deletes if pr.replica != broker}

    def resume(self, started: reactions.BrokersStarted) -> None:
        """What a broker's return lets move on, as the shell resumes it."""
        self.reassign_block(dict.fromkeys(started.reassignments))
        if started.deletions:
            self.c.deletion.resume_for(started.deletions)
        self.deletions_done()
        self.assert_elected_where_possible()

    @rule(data=st.data())
    def log_dir_fails(self, data: st.DataObject) -> None:
        """A log directory of a live broker fails, holding some of its partitions: it says
        so, and answers the LeaderAndIsr that follows with KAFKA_STORAGE_ERROR for them."""
        ctx = self.c.ctx
        live = sorted(ctx.live_brokers)
        if not live:
            return
        broker = data.draw(st.sampled_from(live), label="broker")
        # the partitions it has a log of: those it has been sent a state of
        hosted = sorted(
            tp
            for tp in ctx.partitions_on_broker(broker)
            if tp in ctx.leadership and tp not in self.failed_dirs.get(broker, ())
        )
        if not hosted:
            return
        lost = data.draw(st.lists(st.sampled_from(hosted), min_size=1, unique=True), label="lost")
        failed = self.failed_dirs.setdefault(broker, set())
        failed.update(lost)
        dir_fails(self.c, broker, failed)
        self.assert_elected_where_possible(lost)

    def answer_as_brokers(self) -> None:
        """A new controller's first LeaderAndIsr of each partition is answered: the brokers
        with failed directories say which (as every later answer would)."""
        c = self.c
        for broker, failed in sorted(self.failed_dirs.items()):
            asked = sorted(tp for tp in failed if broker in c.ctx.replicas(tp))
            if broker in c.ctx.live_brokers and asked:
                reactions.replicas_reported_offline(
                    c.psm, c.rsm, broker, asked, [], c.deletion.fail_replica_deletion
                )

    def online(self, broker: int, tp: TopicPartition) -> bool:
        """The broker is live and its log of ``tp`` is in a working directory."""
        return broker in self.c.ctx.live_brokers and tp not in self.failed_dirs.get(broker, ())

    @rule(broker=st.sampled_from(BROKERS))
    def controlled_shutdown(self, broker: int) -> None:
        if broker in self.c.ctx.live_brokers:
            self.c.controlled_shutdown(broker)

    @rule(data=st.data())
    def elect(self, data: st.DataObject) -> None:
        ctx = self.c.ctx
        tps = sorted(tp for tp in ctx.leadership if not ctx.is_topic_queued_for_deletion(tp.topic))
        if tps:
            chosen = data.draw(st.lists(st.sampled_from(tps), min_size=1, unique=True))
            strategy = data.draw(st.sampled_from(ElectionStrategy))
            self.elect_and_check(chosen, strategy)

    @rule(data=st.data(), unclean=st.booleans())
    def admin_elects(self, data: st.DataObject, unclean: bool) -> None:
        """An admin's ElectLeaders, preferred or unclean, for some partitions (an unknown
        one too) or all: each answered, and an election made only where one was needed
        and possible."""
        self.admin_election(data, unclean)

    def admin_election(
        self, data: st.DataObject, unclean: bool, racing: TopicPartition | None = None
    ) -> None:
        """An admin's ElectLeaders and its answers checked against the states before and
        after. ``racing``: a partition (asked for) whose leader's ISR change, and maybe
        others', may land amid the election, so only leaders and leader epochs are
        compared (a leader's change keeps both)."""
        ctx = self.c.ctx
        known = sorted(ctx.leadership)
        unknown = TopicPartition("nosuch", 0)
        everything = data.draw(st.booleans())
        tps = (
            None
            if everything
            else data.draw(st.lists(st.sampled_from([*known, unknown]), unique=True))
        )
        if tps is not None and racing is not None and racing not in tps:
            tps.append(racing)
        before = {tp: self.c.leader_and_isr(tp) for tp in known}

        def unchanged(was: LeaderAndIsr, now: LeaderAndIsr) -> bool:
            if racing is None:
                return now == was
            return (now.leader, now.leader_epoch) == (was.leader, was.leader_epoch)

        live = set(ctx.live_broker_ids)
        if unclean:
            self.forced_unclean.update(known if tps is None else tps)
        election_type = reactions.UNCLEAN_ELECTION if unclean else reactions.PREFERRED_ELECTION
        results = reactions.admin_election(self.c.psm, tps, election_type)
        assert set(results) == set(ctx.all_partitions() if tps is None else tps)
        for tp, r in results.items():
            if tp == unknown:
                assert r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if ctx.is_topic_queued_for_deletion(tp.topic):
                assert r.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
                continue
            failed = (
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                if unclean
                else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            )
            if tp not in before:  # never elected: not an admin's to elect
                assert r.error_code == failed, (tp, r)
                assert tp not in ctx.leadership
                continue
            was, now = before[tp], self.c.leader_and_isr(tp)
            needed = (
                not (was.leader in live and self.online(was.leader, tp))
                if unclean
                else was.leader != ctx.replicas(tp)[0]
            )
            if not needed:
                assert r.error_code == ErrorCode.ELECTION_NOT_NEEDED, (tp, r)
                assert unchanged(was, now), (tp, was, now)
            elif r.error_code == ErrorCode.NONE:
                assert now.leader == r.leader != -1
                assert now.leader_epoch == was.leader_epoch + 1
                if not unclean:
                    assert now.leader == ctx.replicas(tp)[0]
            else:
                assert r.error_code == failed, (tp, r)
                assert unchanged(was, now), (tp, was, now)

    @rule(data=st.data(), percentage=st.sampled_from([0, 10]))
    def auto_rebalance(self, data: st.DataObject, percentage: int) -> None:
        """A preferred replica that another broker leads catches up and its leader lets it
        back into the ISR; then the auto leader rebalance runs: each broker whose preferred
        partitions others lead beyond the threshold gets them back where it is live and in
        the ISR (KafkaController's checkAndTriggerAutoLeaderRebalance, which does nothing
        while partitions are reassigned)."""
        c = self.c
        ctx = c.ctx
        live = ctx.live_broker_ids
        behind = sorted(
            tp
            for tp, lice in ctx.leadership.items()
            if ctx.replicas(tp)
            and ctx.replicas(tp)[0] in live
            and self.online(ctx.replicas(tp)[0], tp)
            and lice.leader_and_isr.leader in live
            and lice.leader_and_isr.leader != ctx.replicas(tp)[0]
            and not ctx.is_topic_queued_for_deletion(tp.topic)
        )
        if behind:
            tp = data.draw(st.sampled_from(behind), label="caught up")
            leader, preferred = ctx.leadership[tp].leader_and_isr.leader, ctx.replicas(tp)[0]

            def let_in(current: LeaderAndIsr) -> LeaderAndIsr | None:
                if current.leader != leader or preferred in current.isr:
                    return None
                isr = (*current.isr, preferred)
                return LeaderAndIsr(leader, current.leader_epoch, isr, current.zk_version)

            if c.store.leader_change(tp, let_in):
                self.isr_changed([tp])
        if ctx.partitions_being_reassigned:
            return
        for broker, tps in sorted(election.imbalanced_partitions(ctx, percentage).items()):
            for tp, outcome in reactions.preferred_election(c.psm, tps).items():
                if not isinstance(outcome, Exception):
                    assert outcome.leader == broker == ctx.replicas(tp)[0], (tp, outcome)

    def elect_and_check(self, tps: list[TopicPartition], strategy: ElectionStrategy) -> None:
        """An election fails only where the strategy finds no leader in what the store holds
        (a failed election leaves the state as it was, so it can be judged afterwards)."""
        results = self.c.psm.handle_state_changes(tps, P.ONLINE, strategy)
        assert set(results) == set(tps), "an election lost track of partitions"
        for tp, outcome in results.items():
            if isinstance(outcome, Exception):
                current = self.c.leader_and_isr(tp)
                unclean = tp.topic in self.unclean_topics
                again = election.elect(self.c.ctx, tp, current, strategy, unclean)
                assert again.leader_and_isr is None, f"{tp}: {outcome}, yet {again}"
            else:
                assert outcome == self.c.leader_and_isr(tp)

    @rule(data=st.data())
    def leader_changes_isr(self, data: st.DataObject) -> None:
        """A live leader shrinks its ISR or lets caught-up replicas back in, and the
        controller hears of it through an ISR change notification."""
        change = self.draw_isr_change(data)
        if change is not None:
            tp, isr_change = change
            self.c.store.leader_change(tp, isr_change)
            self.isr_changed([tp])

    @rule(
        data=st.data(),
        times=st.integers(1, 3),
        action=st.sampled_from(RACING_ACTIONS),
    )
    def leader_races_the_controller(self, data: st.DataObject, times: int, action: str) -> None:
        """Leaders' ISR changes land between the controller's read and write of the same
        partitions (BadVersion), up to `times` times each; what meets no write lands
        afterwards."""
        changes = self.draw_isr_changes(data)
        if not changes:
            return
        for tp, isr_change in changes:
            self.c.store.race(tp, isr_change, times)
        with self.notification_pending():
            self.act(data, action, changes[0][0])
            self.c.store.settle_races()
        # every successful ISR change of a leader is followed by a notification
        self.isr_changed([tp for tp, _ in changes])
        self.assert_elected_where_possible()

    @rule(
        data=st.data(),
        action=st.sampled_from(RACING_ACTIONS),
    )
    def controller_acts_before_a_notification(self, data: st.DataObject, action: str) -> None:
        """Leaders' ISR changes land, and the controller acts before their notification
        arrives: the context's states of those partitions are stale."""
        changes = self.draw_isr_changes(data)
        if not changes:
            return
        for tp, isr_change in changes:
            self.c.store.leader_change(tp, isr_change)
        with self.notification_pending():
            self.act(data, action, changes[0][0])
        self.isr_changed([tp for tp, _ in changes])
        self.assert_elected_where_possible()

    @contextmanager
    def notification_pending(self) -> Iterator[None]:
        """A leader's ISR change landed amid the controller's steps, its notification not
        yet processed: it may have made electable a partition those steps left Offline,
        so that check waits for the notification."""
        self.notifying = True
        try:
            yield
        finally:
            self.notifying = False

    def act(self, data: st.DataObject, action: str, tp: TopicPartition) -> None:
        ctx = self.c.ctx
        live = sorted(ctx.live_brokers)
        if action in self.quiet_actions:
            return
        if action == "kill" and live:
            self.kill({data.draw(st.sampled_from(live))})
        elif action == "start" and len(live) < len(BROKERS):
            self.start(data.draw(st.sampled_from([b for b in BROKERS if b not in live])))
        elif action == "bounce" and live:
            self.bounce(data.draw(st.sampled_from(live)))
        elif action == "shutdown" and live:
            self.c.controlled_shutdown(data.draw(st.sampled_from(live)))
        elif action == "log_dir":
            self.log_dir_fails(data)
        elif action == "fenced":
            self.fenced(data)
        elif action == "admin_elect":
            self.admin_election(data, data.draw(st.booleans(), label="unclean"), racing=tp)
        elif action == "failover":
            # the controller lost its session and won the election again, a new epoch: it
            # loads every state, the leader's change landed or not, and resumes everything
            self.c.store.elect_other_controller()
            self.failover()
        elif ctx.is_topic_queued_for_deletion(tp.topic):
            return
        elif action == "delete":
            # its replicas taken out of the ISRs and stopped; the StopReplicas answered
            self.delete(tp.topic)
            if data.draw(st.booleans(), label="answered"):
                self.every_stop_replica_answered()
        elif action == "reassign":
            # a new target for the partition (overriding one in progress, KIP-455)
            target = tuple(
                data.draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True))
            )
            current = ctx.full_assignment(tp)
            if current.is_being_reassigned or current.replicas != target:
                self.note_origins([tp])
                self.reassigned(tp, reassign_partition(self.c.psm, self.c.rsm, tp, target))
        elif action == "resume":
            # the reassignment's next step (its completion, if the target is in the ISR)
            if tp in ctx.partitions_being_reassigned:
                self.resume_reassignment(tp)
        else:
            self.elect_and_check([tp], data.draw(st.sampled_from(ElectionStrategy)))

    def draw_isr_changes(self, data: st.DataObject) -> list[tuple[TopicPartition, IsrChange]]:
        """One to three leaders' ISR changes, each of another partition (leaders write at
        once: one batch of the controller's writes may meet several)."""
        changes: list[tuple[TopicPartition, IsrChange]] = []
        for _ in range(data.draw(st.integers(1, 3), label="ISR changes")):
            change = self.draw_isr_change(data, {tp for tp, _ in changes})
            if change is None:
                break
            changes.append(change)
        return changes

    def draw_isr_change(
        self, data: st.DataObject, taken: Collection[TopicPartition] = ()
    ) -> tuple[TopicPartition, IsrChange] | None:
        ctx = self.c.ctx
        led = [
            tp
            for tp, lice in sorted(ctx.leadership.items())
            if self.online(lice.leader_and_isr.leader, tp) and tp not in taken
        ]
        if not led:
            return None
        tp = data.draw(st.sampled_from(led), label="partition")
        known = self.c.leader_and_isr(tp)
        leader = known.leader
        # the replica set the leader last learned, which a reassignment may have changed
        # since (its LeaderAndIsr not yet applied); the controller's if none was recorded
        view = self.broker_views.get((leader, tp))
        replicas = view[1] if view is not None else ctx.replicas(tp)
        followers = [r for r in replicas if r != leader]
        chosen = (
            data.draw(st.lists(st.sampled_from(followers), unique=True), label="followers")
            if followers
            else []
        )
        expected = known.zk_version
        incarnation = ctx.broker_epochs[leader]

        def isr_change(current: LeaderAndIsr) -> LeaderAndIsr | None:
            # the leader's write is conditional on the zkVersion it knows; it only lets
            # in followers that fetch from it (on live brokers, shutting down or not: a
            # leader is not told, and a broker fetches until it stops)
            nonlocal expected
            if current.zk_version != expected or current.leader != leader:
                return None
            if ctx.broker_epochs.get(leader) != incarnation:
                return None  # its session is gone (it died or restarted), its writes too
            expected += 1
            isr = (
                leader,
                *(r for r in chosen if self.online(r, tp)),
            )
            return LeaderAndIsr(leader, current.leader_epoch, isr, current.zk_version)

        return tp, isr_change

    def isr_changed(self, tps: Sequence[TopicPartition]) -> None:
        """The notification of leaders' ISR changes, and the watch on a reassigned
        partition's state: a reassignment whose target replicas all joined the ISR moves
        on (KafkaController._on_PartitionReassignmentIsrChange)."""
        c = self.c
        c.isr_change_notification(tps)
        for tp in tps:
            if tp in c.ctx.partitions_being_reassigned and reassignment.can_complete(
                c.ctx, tp, c.ctx.full_assignment(tp), c.store.state(tp)
            ):
                self.resume_reassignment(tp)

    @rule(data=st.data())
    def reassign(self, data: st.DataObject) -> None:
        """A reassignment is requested, to any one to three brokers, live or not, of a
        partition that has a state (one in progress gets a new target, as KIP-455 allows)."""
        c = self.c
        tps = sorted(
            tp
            for tp in c.ctx.all_partitions()
            if tp in c.store.znodes and not c.ctx.is_topic_queued_for_deletion(tp.topic)
        )
        if not tps:
            return
        tp = data.draw(st.sampled_from(tps), label="reassigned")
        target = tuple(
            data.draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True))
        )
        current = c.ctx.full_assignment(tp)
        if not current.is_being_reassigned and current.replicas == target:
            return
        self.note_origins([tp])
        self.reassigned(tp, reassign_partition(c.psm, c.rsm, tp, target))

    @rule(data=st.data(), cancel=st.booleans())
    def override_dropping_a_caught_up_replica(self, data: st.DataObject, cancel: bool) -> None:
        """A new target for a reassignment in progress that drops a replica it was adding
        and the ISR has let in (kept until the target catches up, architecture.md's 18),
        then perhaps the admin's cancellation: back to the replicas the partition had
        before the first reassignment, the kept one not among them (found by review: it
        became an origin replica, kept for good by the cancel). Rare in random histories,
        so drawn here on purpose."""
        c = self.c
        ctx = c.ctx
        candidates = []
        for tp in sorted(ctx.partitions_being_reassigned):
            if tp not in c.store.znodes or ctx.is_topic_queued_for_deletion(tp.topic):
                continue
            leader = c.store.state(tp).leader_and_isr.leader
            if not self.online(leader, tp):
                continue
            view = self.broker_views.get((leader, tp))
            known = view[1] if view is not None else ctx.replicas(tp)
            candidates += [
                (tp, r)
                for r in ctx.full_assignment(tp).adding
                if r != leader and r in known and self.online(r, tp)
            ]
        if not candidates:
            return
        tp, dropped = data.draw(st.sampled_from(candidates), label="dropped")
        if dropped not in c.store.state(tp).leader_and_isr.isr:
            # the leader lets it in, caught up (the reassignment may complete then)
            c.store.leader_change(
                tp,
                lambda current: LeaderAndIsr(
                    current.leader,
                    current.leader_epoch,
                    (*current.isr, dropped),
                    current.zk_version,
                ),
            )
            self.isr_changed([tp])
            if tp not in ctx.partitions_being_reassigned:
                return
        target = tuple(
            data.draw(
                st.lists(
                    st.sampled_from([b for b in BROKERS if b != dropped]),
                    min_size=1,
                    max_size=3,
                    unique=True,
                ),
                label="new target",
            )
        )
        origin = self.origin(tp)
        self.note_origins([tp])
        self.reassigned(tp, reassign_partition(c.psm, c.rsm, tp, target))
        if not cancel or tp not in ctx.partitions_being_reassigned:
            return
        accepted, refused = reassignment.api_reassignment_targets(ctx, {tp: None})
        assert not refused, refused
        assert set(accepted[tp]) == set(origin), (accepted[tp], origin)
        self.reassign_block(dict(accepted))
        if tp not in ctx.partitions_being_reassigned:
            assert set(ctx.replicas(tp)) == set(origin), (ctx.full_assignment(tp), origin)

    @rule(data=st.data())
    def admin_reassigns(self, data: st.DataObject) -> None:
        """An admin's AlterPartitionReassignments: targets for some partitions (an unknown
        one too), valid or not (empty, a broker twice, a negative id, a broker not live),
        or None to cancel. Each refusal is Kafka's; each accepted target is started and
        checked as the ZooKeeper-requested ones are; a cancellation goes back to the
        origin replicas: those before the reassignment started, whatever targets
        overrode it since."""
        c = self.c
        ctx = c.ctx
        unknown = TopicPartition("nosuch", 0)
        tps = data.draw(
            st.lists(st.sampled_from([*sorted(ctx.all_partitions()), unknown]), unique=True),
            label="partitions",
        )
        targets = st.one_of(
            st.none(),
            st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True).map(tuple),
            st.lists(st.sampled_from((*BROKERS, -1)), max_size=3).map(tuple),
        )
        requested = {tp: data.draw(targets, label=f"target of {tp}") for tp in tps}
        before = {tp: ctx.full_assignment(tp) for tp in tps}
        origins = {tp: self.origin(tp) for tp in tps}
        live = ctx.live_broker_ids
        accepted, refused = reassignment.api_reassignment_targets(ctx, requested)
        writes_before = len(c.store.topic_writes)
        assert set(accepted) | set(refused) == set(requested)
        assert not set(accepted) & set(refused)
        for tp, target in requested.items():
            was = before[tp]
            expected: ErrorCode | None = None
            if target is None:
                if not was.is_being_reassigned:
                    expected = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
            elif (
                not target
                or len(set(target)) < len(target)
                or min(target) < 0
                or not {r for r in target if r not in origins[tp]} <= live
            ):
                expected = ErrorCode.INVALID_REPLICA_ASSIGNMENT
            if expected is None and (
                ctx.is_topic_queued_for_deletion(tp.topic) or not was.replicas
            ):
                expected = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if expected is not None:
                assert refused[tp].error_code == expected, (tp, target, refused[tp])
                assert ctx.full_assignment(tp) == was
            elif target is None:
                # a cancellation's target is the origin (in Kafka's order: compare sets)
                assert set(accepted[tp]) == set(origins[tp]), (accepted[tp], origins[tp])
            else:
                assert accepted[tp] == target
        self.note_origins(accepted)
        self.reassign_block(dict(accepted))
        # As the shell starts them: each topic's znode written at most once for them
        # all, or twice where some completed (the replicas added and removed before the
        # completion's requests are sent, then the final assignment: Kafka's U1, B6); not
        # at all where none changes (a target asked again), as Kafka's
        # updateCurrentReassignment.
        topics = {tp.topic for tp in accepted}
        completed = {tp.topic for tp in accepted if tp not in ctx.partitions_being_reassigned}
        writes = collections.Counter(a.topic for a in c.store.topic_writes[writes_before:])
        assert set(writes) <= topics, writes
        assert all(n <= (2 if t in completed else 1) for t, n in writes.items()), writes
        for tp, target in accepted.items():
            # The target asked for is the one the partition moves to (or has).
            assert ctx.full_assignment(tp).target_replicas == target

    def origin(self, tp: TopicPartition) -> tuple[int, ...]:
        """The partition's replicas before its reassignment in progress (if any) started."""
        if self.c.ctx.full_assignment(tp).is_being_reassigned and tp in self.origins:
            return self.origins[tp]
        return self.c.ctx.replicas(tp)

    def note_origins(self, tps: Iterable[TopicPartition]) -> None:
        """Reassignments about to start or be overridden: the origin of each that starts."""
        for tp in tps:
            if not self.c.ctx.full_assignment(tp).is_being_reassigned:
                self.origins[tp] = self.c.ctx.replicas(tp)

    def resume_reassignment(self, tp: TopicPartition) -> None:
        c = self.c
        self.reassigned(tp, reassign_partition(c.psm, c.rsm, tp))

    def reassign_block(self, targets: dict[TopicPartition, tuple[int, ...] | None]) -> None:
        """Reassignments started or resumed together, as the shell does (an admin's request,
        a broker back, a failover): their topics' znodes written once at the end."""
        c = self.c
        with reassignment.coalesced_topic_writes(c.ops):
            complete = reassignment.reassign_partitions(c.psm, c.rsm, targets)
        for tp in targets:
            self.reassigned(tp, tp in complete)

    def reassigned(self, tp: TopicPartition, complete: bool) -> None:
        c = self.c
        assignment = c.ctx.full_assignment(tp)
        assert c.store.topics[tp.topic].partitions[tp.partition] == assignment.replicas
        assert complete != assignment.is_being_reassigned
        assert complete != (tp in c.ctx.partitions_being_reassigned)
        # the origin stays the one the reassignment started from (the topic's znode shows
        # it: a failover reads the same), a replica an override kept not in it
        if tp in self.origins and assignment.is_being_reassigned:
            assert set(assignment.origin_replicas) == set(self.origins[tp]), (
                assignment,
                self.origins[tp],
            )
        # the replicas a reassignment removed are gone, whatever state their brokers were in
        self.gone = {pr for pr in self.gone if pr.replica in c.ctx.replicas(pr.topic_partition)}
        if complete:
            c.deletion.resume_for([tp.topic])
            self.deletions_done()
        self.answer_storage_errors(tp)

    def answer_storage_errors(self, tp: TopicPartition) -> None:
        """A broker whose log directory of ``tp`` failed answers the LeaderAndIsr of it this
        controller sent (a reassignment's new replica, which the controller may not know
        of: a failover forgets, and asks only the brokers that were replicas then)."""
        c = self.c
        for broker, failed in sorted(self.failed_dirs.items()):
            if (
                tp in failed
                and broker in c.ctx.live_brokers
                and broker in c.ctx.replicas(tp)
                and not c.ctx.is_on_offline_dir(broker, tp)
                and broker in c.partition_states_sent(ApiKey.LEADER_AND_ISR, tp)
            ):
                reactions.replicas_reported_offline(
                    c.psm, c.rsm, broker, [tp], [], c.deletion.fail_replica_deletion
                )

    @rule(data=st.data())
    def delete_topic(self, data: st.DataObject) -> None:
        """/admin/delete_topics gets a topic (KafkaController's TopicDeletion): held while
        any of its partitions is being reassigned."""
        ctx = self.c.ctx
        topics = sorted(t for t in ctx.all_topics if not ctx.is_topic_queued_for_deletion(t))
        if topics:
            self.delete(data.draw(st.sampled_from(topics), label="deleted topic"))

    @rule(data=st.data())
    def delete_a_topic_being_reassigned(self, data: st.DataObject) -> None:
        """/admin/delete_topics gets a topic with a partition being reassigned: its deletion
        is held until the reassignments end (item 33), its partitions led meanwhile as any
        topic's, through broker losses, returns and failovers (item 36)."""
        ctx = self.c.ctx
        topics = sorted(
            {tp.topic for tp in ctx.partitions_being_reassigned} - ctx.topics_to_be_deleted
        )
        if topics:
            topic = data.draw(st.sampled_from(topics), label="deleted while reassigned")
            self.delete(topic)
            assert ctx.is_topic_in_service(topic)

    def delete(self, topic: str) -> None:
        ctx = self.c.ctx
        ctx.topics_to_be_deleted.add(topic)
        if any(tp.topic == topic for tp in ctx.partitions_being_reassigned):
            self.c.deletion.mark_ineligible([topic], "partitions are being reassigned")
        self.c.deletion.resume()
        self.deletions_done()

    @rule(data=st.data(), ok=st.booleans())
    def stop_replica_answered(self, data: st.DataObject, ok: bool) -> None:
        """A live broker answers a StopReplica (delete) of a topic being deleted."""
        ctx = self.c.ctx
        started = sorted(
            pr
            for t in ctx.topics_to_be_deleted
            for pr in ctx.replicas_for_topic(t)
            if ctx.replica_state(pr) is R.DELETION_STARTED and pr.replica in ctx.live_brokers
        )
        if not started:
            return
        answered = data.draw(st.lists(st.sampled_from(started), min_size=1, unique=True))
        self.pending_deletes -= set(answered)
        if ok:
            self.c.deletion.complete_replica_deletion(answered)
        else:
            self.c.deletion.fail_replica_deletion(answered)
        self.deletions_done()

    @rule(data=st.data(), ok=st.booleans())
    def stop_replica_answered_late(self, data: st.DataObject, ok: bool) -> None:
        """A live broker answers a StopReplica (delete) it was sent, whatever became of its
        replica since: another failure made it ineligible (its log directory failed, its
        broker was out a while), or a retry asked again. The controller's handler passes
        on the answers of replicas whose topic is still being deleted."""
        ctx = self.c.ctx
        pending = sorted(pr for pr in self.pending_deletes if pr.replica in ctx.live_brokers)
        if not pending:
            return
        answered = data.draw(st.lists(st.sampled_from(pending), min_size=1, unique=True))
        self.pending_deletes -= set(answered)
        answered = [pr for pr in answered if not ctx.is_topic_in_service(pr.topic_partition.topic)]
        if ok:
            self.c.deletion.complete_replica_deletion(answered)
        elif answered:
            self.c.deletion.fail_replica_deletion(answered)
        self.deletions_done()

    @rule()
    def every_stop_replica_answered(self) -> None:
        """Every live broker answers every StopReplica (delete) it has: deletions that no
        dead broker holds complete."""
        ctx = self.c.ctx
        started = sorted(
            pr
            for t in ctx.topics_to_be_deleted
            for pr in ctx.replicas_for_topic(t)
            if ctx.replica_state(pr) is R.DELETION_STARTED and pr.replica in ctx.live_brokers
        )
        if started:
            self.pending_deletes -= set(started)
            self.c.deletion.complete_replica_deletion(started)
            self.deletions_done()

    def deletions_done(self) -> None:
        """Topics whose deletion completed: gone from the context and the store."""
        c = self.c
        for topic in set(self.topics) - self.deleted:
            if topic not in c.ctx.all_topics:
                assert topic in c.store.deleted_topics, topic
                self.deleted.add(topic)
                self.unseen = {tp: r for tp, r in self.unseen.items() if tp.topic != topic}
                self.gone = {pr for pr in self.gone if pr.topic_partition.topic != topic}
                self.last_epoch = {tp: e for tp, e in self.last_epoch.items() if tp.topic != topic}

    def resume_reassignments(self) -> None:
        """A failover resumes every reassignment."""
        self.reassign_block(dict.fromkeys(sorted(self.c.ctx.partitions_being_reassigned)))

    @rule(data=st.data())
    def fenced(self, data: st.DataObject) -> None:
        """Another controller is elected: nothing this one does afterwards takes effect.
        Then this broker wins an election again, with a new epoch, and fails over."""
        c = self.c
        live = sorted(c.ctx.live_brokers)
        with_isr = sorted(
            tp
            for tp in c.store.znodes
            if tp in c.ctx.leadership and not c.ctx.is_topic_queued_for_deletion(tp.topic)
        )
        if not live or not with_isr:
            return
        tp = data.draw(st.sampled_from(with_isr))
        replica = data.draw(st.sampled_from(c.leader_and_isr(tp).isr))
        before = c.store.snapshot()
        c.sent.clear()
        self.checked_batches = 0
        c.store.elect_other_controller()
        killed = data.draw(st.sampled_from(live))
        self.failed_dirs.pop(killed, None)  # it comes back with its directories repaired
        self.forget(killed)
        try:
            c.kill(killed)
        except ControllerMovedError:
            # Nothing it decided went out. What it sent before its first write failed (an
            # UpdateMetadata of partitions left offline, sent before the ISR step) holds
            # states ZooKeeper already had, and its old controller epoch, which brokers
            # that heard from the new controller refuse.
            self.requests_carry_only_real_states()
        else:
            # It wrote nothing, so it could not learn it was fenced: the same. An ISR
            # shrink must write, though, and so fails, with nothing sent.
            c.sent.clear()
            with pytest.raises(ControllerMovedError):
                c.rsm.handle_state_changes([PartitionReplica(tp, replica)], R.OFFLINE)
            assert c.sent == [], "a fenced controller sent requests"
        assert c.store.snapshot() == before, "a fenced controller changed the store"
        self.failover()

    def failover(
        self, registered_unseen: Iterable[int] = ()
    ) -> dict[TopicPartition, frozenset[int]]:
        """onControllerFailover: load everything from the store, then start both machines.
        What was sent before is checked (a step sends nothing before its failover), and
        what the new controller sends is its own. `registered_unseen`: brokers that
        registered again while no controller watched (a new broker epoch the last
        controller never read). Returns the stale ISR members it found."""
        c = self.c
        c.sent.clear()
        self.checked_batches = 0
        self.pending_deletes.clear()  # their answers go to the controller that resigned
        old = c.ctx
        ctx = ControllerContext(epoch=old.epoch + 1, epoch_zk_version=c.store.epoch_zk_version)
        registrations = {b: (reg, old.broker_epochs[b]) for b, reg in old.live_brokers.items()}
        registrations.update({b: (registration(b), c.store.next_zxid()) for b in registered_unseen})
        ctx.add_live_brokers(registrations)
        ctx.assignments = {t: dict(parts) for t, parts in old.assignments.items()}
        for tp, replicas in self.unseen.items():  # the topic znodes have them
            if tp.topic in ctx.assignments:
                ctx.assignments[tp.topic][tp.partition] = ReplicaAssignment(replicas)
        self.unseen.clear()
        ctx.topic_ids = dict(old.topic_ids)
        # what the topic znodes say is being reassigned (as _add_topics reads it)
        ctx.partitions_being_reassigned = {
            tp for tp in ctx.all_partitions() if ctx.full_assignment(tp).is_being_reassigned
        }
        # /admin/delete_topics, and the topics it holds for their reassignments
        ctx.topics_to_be_deleted = set(old.topics_to_be_deleted)
        ctx.topics_ineligible_for_deletion = {
            tp.topic
            for tp in ctx.partitions_being_reassigned
            if tp.topic in ctx.topics_to_be_deleted
        }
        newest = max((epoch for _, epoch in registrations.values()), default=0)
        states, written_at = c.store.read_partition_states_written_before(
            list(ctx.all_partitions()), newest
        )
        ctx.adopt_partition_states(states)
        self.gone = {pr for pr in self.gone if pr.replica not in ctx.live_brokers}
        c.ctx = ctx
        c.ops.ctx = ctx
        c.ops.batch.clear()
        c.psm = PartitionStateMachine(c.ops)
        c.rsm = ReplicaStateMachine(c.ops)
        c.deletion = TopicDeletionManager(c.ops, c.psm, c.rsm, c.store, lambda _topic: None)
        stale = reactions.stale_isr_members(ctx, written_at)
        written = reactions.drop_stale_isr_members(c.psm, stale)
        # Only a registration no controller read can be newer than a state listing it,
        # but where an earlier failover left the state as it was (no other live member).
        for tp in written:
            assert stale[tp] <= set(registered_unseen), (tp, stale[tp])
        reactions.start_state_machines(c.psm, c.rsm)
        self.resume_reassignments()
        c.deletion.resume()
        self.deletions_done()
        # The brokers' answers to its LeaderAndIsr are events after the failover's (by
        # then every topic queued for deletion is being deleted, or held for a
        # reassignment, and so led: item 36).
        self.answer_as_brokers()
        self.deletions_done()
        self.assert_elected_where_possible()
        return stale

    def assert_elected_where_possible(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """After a broker change or a failover every New or Offline partition had its
        election: none is left without a leader while a live ISR member (or, for a new
        partition, a live replica) could lead. After partitions were added, those had. So
        too in a topic whose deletion is held before it started (item 36)."""
        if self.notifying:
            return
        ctx = self.c.ctx
        for tp in ctx.all_partitions() if tps is None else tps:
            if not ctx.is_topic_in_service(tp.topic):
                continue
            state = ctx.partition_state(tp)
            if state is P.NEW:
                assert not ctx.online_replicas(tp, ctx.replicas(tp)), f"{tp} left New"
            elif state is P.OFFLINE:
                isr = self.c.leader_and_isr(tp).isr
                assert not ctx.online_replicas(tp, isr), f"{tp} left Offline, ISR {isr}"

    # --- invariants ---------------------------------------------------------------------

    @invariant()
    def context_equals_the_store(self) -> None:
        assert self.c.store.pending_races() == 0
        self.c.assert_context_matches_store()
        ctx = self.c.ctx
        deleting = ctx.topics_to_be_deleted
        assert {tp for tp in ctx.leadership if tp.topic not in deleting} == {
            tp for tp in self.c.store.znodes if tp.topic not in deleting
        }
        assert not {tp.topic for tp in self.c.store.znodes} & self.deleted

    @invariant()
    def partition_invariants(self) -> None:
        ctx = self.c.ctx
        live = ctx.live_or_shutting_down_broker_ids
        for tp in self.c.store.znodes:
            if not ctx.is_topic_in_service(tp.topic):
                continue  # going: no longer led, its replicas being stopped
            lai = self.c.leader_and_isr(tp)
            replicas = ctx.replicas(tp)
            state = ctx.partition_state(tp)
            assert lai.isr, f"{tp}: empty ISR"
            assert set(lai.isr) <= set(replicas), f"{tp}: ISR {lai.isr} outside {replicas}"
            assert lai.leader == -1 or lai.leader in replicas, f"{tp}: leader {lai.leader}"
            assert lai.leader == -1 or lai.leader in lai.isr, f"{tp}: leader not in ISR {lai}"
            if state is P.ONLINE:
                assert lai.leader in live, f"{tp} is Online, led by {lai.leader}, not live"
                assert self.online(lai.leader, tp), f"{tp} is led from a failed directory"
            if ctx.is_replica_online(lai.leader, tp):
                assert state is P.ONLINE, f"{tp} has live leader {lai.leader} but is {state}"
            if lai.leader == -1:
                assert state is P.OFFLINE, f"{tp} has no leader but is {state}"
            # a dead broker stays in an ISR only as its last member (KAFKA-5083), and so
            # does a replica on a failed log directory
            if len(lai.isr) > 1:
                assert set(lai.isr) <= live, f"{tp}: dead broker in ISR {lai.isr}"
                assert all(self.online(r, tp) for r in lai.isr if r in ctx.live_brokers), (
                    f"{tp}: a replica on a failed directory in ISR {lai.isr}"
                )
        # the controller knows every failed directory a live broker has answered about (it
        # asks of each partition with a state that the broker hosts, new replicas aside)
        for broker, failed in self.failed_dirs.items():
            if broker not in ctx.live_brokers:
                continue
            asked = {
                tp
                for tp in failed
                if tp in ctx.leadership
                and broker in ctx.replicas(tp)
                and ctx.replica_state(PartitionReplica(tp, broker)) is not R.NEW
                and not ctx.is_topic_queued_for_deletion(tp.topic)
            }
            known = ctx.replicas_on_offline_dirs.get(broker, set())
            assert asked <= known, (broker, asked, known)

    @invariant()
    def deletions_not_started_are_held_for_reassignments(self) -> None:
        """A topic queued for deletion is being deleted, or held for a reassignment of it
        in progress (and then led as any topic: `is_topic_in_service`, item 36)."""
        ctx = self.c.ctx
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
        for topic in ctx.topics_to_be_deleted - ctx.topics_with_deletion_started:
            assert topic in ctx.topics_ineligible_for_deletion, topic
            assert topic in reassigning, topic

    @invariant()
    def offline_count_is_the_offline_partitions(self) -> None:
        ctx = self.c.ctx
        recount = sum(
            1
            for tp, state in ctx.partition_states.items()
            if state is P.OFFLINE and tp.topic not in ctx.topics_to_be_deleted
        )
        assert ctx.offline_partition_count == recount

    @invariant()
    def replica_states(self) -> None:
        ctx = self.c.ctx
        for pr in self.gone:
            if not ctx.is_topic_in_service(pr.topic_partition.topic):
                continue  # DeletionIneligible, or already deleted
            assert ctx.replica_state(pr) is R.OFFLINE, f"{pr} is {ctx.replica_state(pr)}"
        for tp in ctx.all_partitions():
            if not ctx.is_topic_in_service(tp.topic):
                continue
            adding = ctx.full_assignment(tp).adding
            for r in ctx.replicas(tp):
                if r in ctx.live_broker_ids:
                    state = ctx.replica_state(PartitionReplica(tp, r))
                    # a reassignment's new replica is New until its broker (re)starts or
                    # the reassignment completes (Kafka's NewReplica); one on a failed
                    # directory is Offline (or Online, asked again after another failure,
                    # as in Kafka)
                    allowed = (R.ONLINE, R.NEW) if r in adding else (R.ONLINE,)
                    if ctx.is_on_offline_dir(r, tp):
                        allowed = (*allowed, R.OFFLINE)
                    assert state in allowed, f"replica {r} of {tp} on a live broker is {state}"

    @invariant()
    def epochs_only_grow(self) -> None:
        for tp in self.c.store.znodes:
            lai = self.c.leader_and_isr(tp)
            now = (lai.leader_epoch, lai.zk_version)
            last = self.last_epoch.get(tp, (-1, -1))
            assert now[0] >= last[0], f"{tp}: leader epoch went from {last[0]} to {now[0]}"
            assert now[1] >= last[1], f"{tp}: zkVersion went from {last[1]} to {now[1]}"
            self.last_epoch[tp] = now

    @invariant()
    def controller_writes_follow_the_rules(self) -> None:
        ctx = self.c.ctx
        for w in self.c.store.writes[self.checked_writes :]:
            after = w.after.leader_and_isr
            assert w.after.controller_epoch == ctx.epoch, w
            if w.op == "create":
                assert (after.leader_epoch, after.zk_version) == (0, 0), w
                assert after.isr[0] == after.leader, w
                continue
            assert w.before is not None
            before = w.before.leader_and_isr
            assert after.leader_epoch == before.leader_epoch + 1, w
            assert after.zk_version == before.zk_version + 1, w
            assert after.isr, w
            assert set(after.isr) <= set(before.isr) | {after.leader}, w
            if after.leader not in (-1, before.leader):
                # elected: live, and from the ISR unless the topic allows unclean election
                assert after.leader in ctx.live_or_shutting_down_broker_ids, w
                if w.tp.topic not in self.unclean_topics and w.tp not in self.forced_unclean:
                    assert after.leader in before.isr, f"unclean election: {w}"
                elif after.leader not in before.isr:
                    assert after.isr == (after.leader,), w
                    live = ctx.live_broker_ids - self.bounced
                    assert not [r for r in before.isr if r in live and self.online(r, w.tp)], (
                        f"needless unclean: {w}"
                    )
        self.checked_writes = len(self.c.store.writes)
        self.bounced.clear()
        self.forced_unclean.clear()

    @invariant()
    def no_invalid_transition_attempted(self) -> None:
        assert not self.invalid.messages, self.invalid.messages

    def teardown(self) -> None:
        logging.getLogger("controller.state_machines").removeHandler(self.invalid)

    @invariant()
    def requests_carry_only_real_states(self) -> None:
        ctx = self.c.ctx
        held: dict[TopicPartition, set[StateKey]] = {}
        for tp, node in self.c.store.history:
            lai = decode_partition_state(str(tp), node.data, node.version).leader_and_isr
            held.setdefault(tp, set()).add((lai.leader, lai.leader_epoch, lai.isr, lai.zk_version))
        for batch in self.c.sent[self.checked_batches :]:
            kinds = [r.api_key for r in batch]
            order = [ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA]
            assert kinds == sorted(kinds, key=order.index)
            for r in batch:
                assert r.broker_id in ctx.live_or_shutting_down_broker_ids
                assert r.body["controller_epoch"] == ctx.epoch
                if r.api_key == ApiKey.STOP_REPLICA:
                    continue
                if r.api_key == ApiKey.LEADER_AND_ISR:
                    self.apply_leader_and_isr(r)
                version = "partition_epoch" if r.api_key == ApiKey.LEADER_AND_ISR else "zk_version"
                for t in r.body["topic_states"]:
                    for p in t["partition_states"]:
                        tp = TopicPartition(t["topic_name"], p["partition_index"])
                        if p["leader"] == LEADER_DURING_DELETE:
                            # a topic being deleted (or deleted since, in the same step),
                            # as every broker must learn it
                            deleting = ctx.is_topic_queued_for_deletion(tp.topic)
                            assert deleting or tp.topic in self.deleted, (r, tp)
                            continue
                        key = (p["leader"], p["leader_epoch"], tuple(p["isr"]), p[version])
                        assert key in held[tp], f"{r.api_key.name} to {r.broker_id}: {tp} {key}"
        self.checked_batches = len(self.c.sent)

    def apply_leader_and_isr(self, request: BrokerRequest) -> None:
        """The broker applies the partitions of a LeaderAndIsr whose leader epoch is newer
        than the one it has (its view of their replicas)."""
        for t in request.body["topic_states"]:
            for p in t["partition_states"]:
                tp = TopicPartition(t["topic_name"], p["partition_index"])
                key = (request.broker_id, tp)
                had = self.broker_views.get(key)
                if had is None or p["leader_epoch"] > had[0]:
                    self.broker_views[key] = (p["leader_epoch"], tuple(p["replicas"]))


def run_histories(machine: type[ControllerMachine], histories: int) -> None:
    """`histories` random histories of 40 steps, the same on every run (derandomized)."""
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=histories,
            stateful_step_count=40,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_random_histories_keep_the_invariants() -> None:
    run_histories(ControllerMachine, 300)


class ReassignmentRaces(ControllerMachine):
    """The same model with only the rules that move replicas, change ISRs and race the two
    (broker deaths, returns, bounces and shutdowns, elections, failovers), so that its
    histories are denser in the races of architecture.md's 18, 24 and 25: a leader letting
    in, by the replica set it last learned, a replica a reassignment is dropping. The other
    rules are switched off (a plain method carries no rule marker)."""

    quiet_actions = frozenset({"delete", "log_dir", "admin_elect"})

    def add_partitions(self, data: st.DataObject) -> None:
        raise AssertionError("not a rule here")

    def log_dir_fails(self, data: st.DataObject) -> None:
        raise AssertionError("not a rule here")

    def admin_elects(self, data: st.DataObject, unclean: bool) -> None:
        raise AssertionError("not a rule here")

    def auto_rebalance(self, data: st.DataObject, percentage: int) -> None:
        raise AssertionError("not a rule here")

    def admin_reassigns(self, data: st.DataObject) -> None:
        raise AssertionError("not a rule here")

    def delete_topic(self, data: st.DataObject) -> None:
        raise AssertionError("not a rule here")

    def delete_a_topic_being_reassigned(self, data: st.DataObject) -> None:
        raise AssertionError("not a rule here")

    def stop_replica_answered(self, data: st.DataObject, ok: bool) -> None:
        raise AssertionError("not a rule here")

    def stop_replica_answered_late(self, data: st.DataObject, ok: bool) -> None:
        raise AssertionError("not a rule here")

    def every_stop_replica_answered(self) -> None:
        raise AssertionError("not a rule here")


def test_random_reassignment_races_keep_the_invariants() -> None:
    # A search, not a proof: each race it found is pinned by a test in test_reassignment.py
    # (random runs of 3,000 histories found 18's with its fix undone, derandomized ones
    # not always). 1,000 histories, about 13 s.
    run_histories(ReassignmentRaces, 1000)

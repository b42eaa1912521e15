"""A partition reassignment's steps (controller/reassignment.py) over the in-memory store:
started, resumed, completed, fenced, and for any origin and target replicas."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.context import (
    PartitionReplica,
    PartitionStateName,
    ReplicaAssignment,
    ReplicaStateName,
)
from controller.reassignment import (
    api_reassignment_targets,
    coalesced_topic_writes,
    reassign_partition,
    reassign_partitions,
    reassignment_to,
)
from tests.unit.test_state_machines import EPOCH, Cluster
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.client import ControllerMovedError
from zkdata.znodes import LeaderAndIsr, PartitionState, TopicPartition

P = PartitionStateName
R = ReplicaStateName
T = "orders"
T0 = TopicPartition(T, 0)
BROKERS = (1, 2, 3, 4, 5)


def reassign(c: Cluster, tp: TopicPartition, target: tuple[int, ...]) -> bool:
    """A reassignment requested (the shell's PartitionReassignment event)."""
    return reassign_partition(c.psm, c.rsm, tp, target)


def resume(c: Cluster, tp: TopicPartition) -> bool:
    """The next step (an ISR change, a failover, a target broker back)."""
    return reassign_partition(c.psm, c.rsm, tp)


def caught_up(c: Cluster, tp: TopicPartition) -> None:
    """The leader adds the target replicas to the ISR (they fetched up to its log end)."""
    isr = c.leader_and_isr(tp).isr
    target = c.ctx.full_assignment(tp).target_replicas
    c.leader_sets_isr(tp, tuple(dict.fromkeys(isr + tuple(r for r in target if r not in isr))))


def started_on(
    brokers: tuple[int, ...], replicas: tuple[int, ...], log_dir: Path | None = None
) -> Cluster:
    c = Cluster(brokers=brokers, log_dir=log_dir)
    c.create_topic(T, {0: replicas})
    c.sent.clear()
    return c


def test_a_reassignment_starts_with_the_full_replica_set_and_the_new_replicas() -> None:
    c = started_on((1, 2, 3, 4), (1, 2, 3))
    before = c.leader_and_isr(T0)
    assert not reassign(c, T0, (1, 2, 4))
    written = c.store.topics[T]
    assert written.partitions == {0: (1, 2, 4, 3)}
    assert written.adding_replicas == {0: (4,)}
    assert written.removing_replicas == {0: (3,)}
    after = c.leader_and_isr(T0)
    assert (after.leader, after.isr) == (before.leader, before.isr)
    assert after.leader_epoch == before.leader_epoch + 1
    assert T0 in c.ctx.partitions_being_reassigned
    assert c.ctx.replica_state(PartitionReplica(T0, 4)) is R.NEW
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert set(sent) == {1, 2, 3, 4}
    for state in sent.values():
        assert state["leader_epoch"] == after.leader_epoch
        assert tuple(state["replicas"]) == (1, 2, 4, 3)
        assert tuple(state["adding_replicas"]) == (4,)
        assert tuple(state["removing_replicas"]) == (3,)


def test_a_caught_up_reassignment_completes_keeping_a_leader_in_the_target() -> None:
    c = started_on((1, 2, 3, 4), (1, 2, 3))
    reassign(c, T0, (1, 2, 4))
    caught_up(c, T0)
    c.sent.clear()
    started = c.leader_and_isr(T0)
    assert resume(c, T0)
    done = c.leader_and_isr(T0)
    assert c.store.topics[T].partitions == {0: (1, 2, 4)}
    assert not c.store.topics[T].adding_replicas
    assert not c.store.topics[T].removing_replicas
    assert c.ctx.full_assignment(T0) == ReplicaAssignment((1, 2, 4))
    assert done.leader == 1
    assert set(done.isr) == {1, 2, 4}
    assert done.leader_epoch > started.leader_epoch
    assert T0 not in c.ctx.partitions_being_reassigned
    assert c.ctx.replica_state(PartitionReplica(T0, 3)) is R.NON_EXISTENT
    assert c.ctx.replica_state(PartitionReplica(T0, 4)) is R.ONLINE
    [stop] = [r for r in c.requests(ApiKey.STOP_REPLICA) if r.delete_partitions]
    assert stop.broker_id == 3
    assert {r.broker_id for r in c.requests(ApiKey.UPDATE_METADATA)} == {1, 2, 3, 4}


def test_a_completion_dropping_two_replicas_takes_them_out_of_the_isr_in_one_write() -> None:
    """Kafka's Offline step writes the state once a dropped replica in the ISR; here once
    for both (item 56 of docs/architecture.md): the completion's leader epoch bump, then
    one ISR write."""
    c = started_on((1, 2, 3, 4, 5), (1, 2, 3))
    reassign(c, T0, (1, 4, 5))
    caught_up(c, T0)
    started = c.leader_and_isr(T0)
    assert set(started.isr) == {1, 2, 3, 4, 5}
    assert resume(c, T0)
    done = c.leader_and_isr(T0)
    assert (done.leader, set(done.isr)) == (1, {1, 4, 5})
    assert (done.leader_epoch, done.zk_version) == (
        started.leader_epoch + 2,
        started.zk_version + 2,
    )
    for b in (2, 3):
        assert c.ctx.replica_state(PartitionReplica(T0, b)) is R.NON_EXISTENT


def test_a_leader_outside_the_target_is_replaced_by_a_target_replica(tmp_path: Path) -> None:
    c = started_on((1, 2, 3, 4), (1, 2, 3), tmp_path)
    reassign(c, T0, (4, 2))
    caught_up(c, T0)
    assert resume(c, T0)
    done = c.leader_and_isr(T0)
    assert done.leader == 4  # the first target replica that is live and in the ISR
    assert set(done.isr) == {2, 4}
    c.state_log.close()
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    last = [r for r in rows if r["event"] == "partition_state"][-1]
    assert (last["leader"], last["reason"]) == (4, "reassign")


@pytest.mark.parametrize("broker_state", ["online", "offline"])
def test_a_resumed_reassignment_leaves_its_started_replicas_alone(
    broker_state: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A failover (the new replica's broker alive: Online; dead: Offline) or the broker's
    return (Online) resumes the reassignment: the new replica is not started again."""
    c = started_on((1, 2, 3, 4), (1, 2, 3))
    reassign(c, T0, (1, 2, 4))
    new_replica = PartitionReplica(T0, 4)
    if broker_state == "online":
        c.rsm.handle_state_changes([new_replica], R.ONLINE)
    else:
        c.kill(4)
    c.sent.clear()
    epoch = c.leader_and_isr(T0).leader_epoch
    with caplog.at_level(logging.ERROR):
        assert not resume(c, T0)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    expected = R.ONLINE if broker_state == "online" else R.OFFLINE
    assert c.ctx.replica_state(new_replica) is expected
    # Every replica of the full set hears of the reassignment again, one epoch later.
    assert c.leader_and_isr(T0).leader_epoch == epoch + 1
    live = {1, 2, 3, 4} if broker_state == "online" else {1, 2, 3}
    assert set(c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)) == live


def test_a_fenced_controller_writes_nothing() -> None:
    c = started_on((1, 2, 3, 4), (1, 2, 3))
    c.store.elect_other_controller()
    writes = list(c.store.writes)
    with pytest.raises(ControllerMovedError):
        reassign(c, T0, (1, 2, 4))
    assert c.store.writes == writes
    assert c.store.topic_writes == []


@settings(max_examples=150, deadline=None)
@given(
    origin=st.permutations(BROKERS).map(lambda b: b[:3]),
    target=st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True).map(tuple),
)
def test_any_reassignment_ends_with_the_target_assignment_led_from_it(
    origin: tuple[int, ...], target: tuple[int, ...]
) -> None:
    c = started_on(BROKERS, origin)
    epochs = [c.leader_and_isr(T0).leader_epoch]
    done = reassign(c, T0, target)
    for _ in range(2):
        if done:
            break
        epochs.append(c.leader_and_isr(T0).leader_epoch)
        caught_up(c, T0)
        done = resume(c, T0)
    assert done
    final = c.leader_and_isr(T0)
    epochs.append(final.leader_epoch)
    assert epochs == sorted(epochs)
    assert c.store.topics[T].partitions == {0: target}
    assert c.ctx.full_assignment(T0) == ReplicaAssignment(target)
    assert final.leader in target
    assert set(final.isr) == set(target)
    assert c.ctx.partition_state(T0) is P.ONLINE
    for r in BROKERS:
        state = c.ctx.replica_state(PartitionReplica(T0, r))
        assert state is (R.ONLINE if r in target else R.NON_EXISTENT), (r, state)
    assert T0 not in c.ctx.partitions_being_reassigned
    c.assert_context_matches_store()
    assert EPOCH in {w.after.controller_epoch for w in c.store.writes}


def test_a_new_target_replaces_the_reassignment_in_progress() -> None:
    # Origin (1, 2, 3) was being moved to (4, 5, 1); now to (1, 2, 4). Replica 5, added by
    # the first, is dropped; 4 stays added; 3 is still removed.
    current = ReplicaAssignment((4, 5, 1, 2, 3), adding=(4, 5), removing=(2, 3))
    assert reassignment_to(current, (1, 2, 4), isr=(1, 2, 3)) == ReplicaAssignment(
        (1, 2, 4, 3), adding=(4,), removing=(3,)
    )
    # Cancelled (back to the origin): nothing added, nothing removed.
    assert reassignment_to(current, (1, 2, 3), isr=(1, 2, 3)) == ReplicaAssignment(
        (1, 2, 3), adding=(), removing=()
    )
    # An added replica that joined the ISR is kept until the new target catches up:
    # neither origin nor target, it is listed both added and removed.
    assert reassignment_to(current, (1, 2, 3), isr=(5, 1)) == ReplicaAssignment(
        (1, 2, 3, 5), adding=(5,), removing=(5,)
    )


def test_a_cancel_after_an_override_goes_back_to_the_true_origin() -> None:
    # Origin (1, 2, 3) moved to (4, 5, 1), 4 caught up; (1, 2, 6) keeps 4 (in the ISR) as
    # neither origin nor target, so the origin is still (1, 2, 3) (found by review: 4
    # became an origin replica, and a cancel kept it for good).
    first = ReplicaAssignment((4, 5, 1, 2, 3), adding=(4, 5), removing=(2, 3))
    isr = (1, 2, 3, 4)
    override = reassignment_to(first, (1, 2, 6), isr)
    assert override == ReplicaAssignment((1, 2, 6, 3, 4), adding=(6, 4), removing=(3, 4))
    assert override.origin_replicas == (1, 2, 3)
    assert override.target_replicas == (1, 2, 6)
    # A cancel (the target is the origin) keeps 4 until the origin is in the ISR, then
    # removes it with the others.
    assert reassignment_to(override, override.origin_replicas, isr) == ReplicaAssignment(
        (1, 2, 3, 4), adding=(4,), removing=(4,)
    )
    # 4 out of the ISR: stopped at once, the origin is the assignment.
    assert reassignment_to(override, override.origin_replicas, (1, 2, 3)) == ReplicaAssignment(
        (1, 2, 3)
    )
    # A later override that targets 4 again adds it, as any replica outside the origin.
    assert reassignment_to(override, (4, 1, 2), isr) == ReplicaAssignment(
        (4, 1, 2, 3), adding=(4,), removing=(3,)
    )


def test_an_override_stops_the_dropped_new_replicas_at_once() -> None:
    c = started_on(BROKERS, (1, 2, 3))
    assert not reassign(c, T0, (4, 5, 1))
    c.sent.clear()
    assert reassign(c, T0, (1, 2, 3))  # cancelled: the origin is in the ISR
    assert c.store.topics[T].partitions == {0: (1, 2, 3)}
    for r in (4, 5):
        assert c.ctx.replica_state(PartitionReplica(T0, r)) is R.NON_EXISTENT
    stopped = {r.broker_id for r in c.requests(ApiKey.STOP_REPLICA) if r.delete_partitions}
    assert stopped == {4, 5}
    assert set(c.leader_and_isr(T0).isr) == {1, 2, 3}


def test_an_override_keeps_a_dropped_replica_that_alone_can_lead() -> None:
    """Found by the random histories: a reassignment to (1, 2) of a partition on (1,) has
    its new replica 2 caught up; broker 1 dies, 2 is elected; the reassignment is then
    overridden back to (1,). Dropping 2 at once (Kafka) would leave the partition with no
    leader and an ISR outside its replicas; it stays until 1 is back and caught up."""
    c = started_on((1, 2, 3), (1, 2, 3))
    assert reassign(c, T0, (1,))  # every target replica in the ISR: done at once
    assert not reassign(c, T0, (1, 2))
    caught_up(c, T0)
    c.kill(1)
    assert c.leader_and_isr(T0).leader == 2
    assert not reassign(c, T0, (1,))
    assert c.ctx.full_assignment(T0) == ReplicaAssignment((1, 2), adding=(2,), removing=(2,))
    assert c.leader_and_isr(T0).leader == 2
    c.start(1)
    assert not resume(c, T0)  # broker 1 is back, not yet caught up
    caught_up(c, T0)
    assert resume(c, T0)
    done = c.leader_and_isr(T0)
    assert (done.leader, done.isr) == (1, (1,))
    assert c.store.topics[T].partitions == {0: (1,)}


def test_a_new_order_of_the_same_replicas_completes_at_once() -> None:
    """Nothing to add or remove: complete even with a replica out of the ISR (Kafka's
    isReassignmentComplete), not left waiting on a catch-up the target never asked for."""
    c = started_on((1, 2, 3), (1, 2, 3))
    c.leader_sets_isr(T0, (1, 2))
    assert reassign(c, T0, (3, 1, 2))
    assert c.store.topics[T].partitions == {0: (3, 1, 2)}
    assert T0 not in c.ctx.partitions_being_reassigned
    assert c.leader_and_isr(T0).leader == 1  # still in the target: kept


def test_a_reassignment_completed_while_its_new_replica_is_down_starts_it_on_return(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # 4 joins and caught up, leads once 1 stops; then 4 dies, the partition's last ISR
    # member. A new target of 4 alone is complete at once (4 is all of it, in the ISR):
    # 4's replica stays Offline, not Online with its broker down (Kafka), until it returns.
    c = started_on((1, 2, 3, 4), (1, 2, 3))
    assert not reassign(c, T0, (1, 4))
    c.leader_sets_isr(T0, (1, 4))
    c.controlled_shutdown(1)
    assert c.leader_and_isr(T0).leader == 4
    c.kill(4)
    assert c.leader_and_isr(T0).leader == -1
    assert reassign(c, T0, (4,))
    assert c.ctx.replicas(T0) == (4,)
    assert c.ctx.replica_state(PartitionReplica(T0, 4)) is R.OFFLINE
    c.start(4)
    assert c.ctx.replica_state(PartitionReplica(T0, 4)) is R.ONLINE
    assert c.leader_and_isr(T0).leader == 4
    assert not [r for r in caplog.records if "state transition" in r.getMessage()]


def test_an_admins_requests_are_checked_in_kafkas_order() -> None:
    """AlterPartitionReassignments' checks (api_reassignment_targets): a cancellation's
    target is the origin; each refusal is Kafka's error for it."""
    c = started_on((1, 2, 3, 4), (1, 2, 3))
    c.create_topic("gone", {0: (1, 2)})
    c.ctx.topics_to_be_deleted.add("gone")
    assert not reassign(c, T0, (1, 2, 4))
    c.kill(4)
    E = ErrorCode
    asked: dict[TopicPartition, tuple[int, ...] | None] = {
        T0: None,  # cancelled: back to (1, 2, 3)
        TopicPartition(T, 1): (1,),  # no such partition
        TopicPartition("gone", 0): (2, 1),  # its topic is being deleted
        TopicPartition("nosuch", 0): None,  # nothing to cancel comes first
    }
    targets, refused = api_reassignment_targets(c.ctx, asked)
    assert targets == {T0: (1, 2, 3)}
    assert {tp: r.error_code for tp, r in refused.items()} == {
        TopicPartition(T, 1): E.UNKNOWN_TOPIC_OR_PARTITION,
        TopicPartition("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        TopicPartition("nosuch", 0): E.NO_REASSIGNMENT_IN_PROGRESS,
    }
    for replicas in [(), (1, 1), (1, -1), (1, 4), (1, 5)]:  # 4 is down, 5 unknown
        _, refused = api_reassignment_targets(c.ctx, {T0: replicas})
        assert refused[T0].error_code == E.INVALID_REPLICA_ASSIGNMENT, replicas
    # Replica 4 (being added, now down) is counted against the origin replicas, as
    # Kafka counts it: a new target that keeps it is refused.
    assert api_reassignment_targets(c.ctx, {T0: (4, 1)})[0] == {}
    assert api_reassignment_targets(c.ctx, {T0: (3, 1)})[0] == {T0: (3, 1)}


def test_a_topics_reassignments_started_together_write_its_znode_once() -> None:
    """Inside coalesced_topic_writes (as the shell starts a request's reassignments) the
    topic's znode is written once, at the end, with every partition's new replica set;
    a block ended by the fence writes nothing more."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {p: (1 + p % 3, 1 + (p + 1) % 3) for p in range(6)})
    before = len(c.store.topic_writes)
    with coalesced_topic_writes(c.ops):
        for p in range(6):
            assert not reassign(
                c, TopicPartition(T, p), (1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3)
            )
        assert len(c.store.topic_writes) == before  # not yet
    [written] = c.store.topic_writes[before:]
    assert written.adding_replicas == {p: (1 + (p + 2) % 3,) for p in range(6)}
    assert all(len(r) == 3 for r in written.partitions.values())

    fenced = Cluster(brokers=(1, 2, 3))
    fenced.create_topic(T, {0: (1, 2)})
    before = len(fenced.store.topic_writes)
    fenced.store.elect_other_controller()

    def start() -> None:
        with coalesced_topic_writes(fenced.ops):
            reassign(fenced, T0, (1, 2, 3))

    with pytest.raises(ControllerMovedError):
        start()
    assert len(fenced.store.topic_writes) == before
    assert fenced.ops.topics_to_write is None


def test_a_block_of_reassignments_goes_to_zookeeper_in_rounds_not_per_partition() -> None:
    """An admin's request for a whole topic (reassign_partitions, as the shell starts it):
    its partitions' states are read and written in a few rounds whatever their number,
    when started and when completed; Kafka takes each partition's steps in turn."""
    c = Cluster(brokers=(1, 2, 3, 4))
    n = 60
    c.create_topic(T, {p: (1 + p % 3, 1 + (p + 1) % 3) for p in range(n)})
    tps = [TopicPartition(T, p) for p in range(n)]
    # One replica added and, for every other partition, the leader moved off (its first
    # replica dropped): both the epoch bump and the reassignment election are taken.
    targets = {
        tp: (1 + (tp.partition + 1) % 3, 4) if tp.partition % 2 else (*c.ctx.replicas(tp), 4)
        for tp in tps
    }
    reads, updates = c.store.reads, c.store.updates
    with coalesced_topic_writes(c.ops):
        assert reassign_partitions(c.psm, c.rsm, targets) == set()
    assert (c.store.reads - reads, c.store.updates - updates) == (1, 1)
    assert c.ctx.partitions_being_reassigned == set(tps)
    for tp in tps:
        caught_up(c, tp)
    # The shell read the caught-up states to find them: the block does not read them again.
    states = c.store.read_partition_states(tps)
    reads, updates = c.store.reads, c.store.updates
    with coalesced_topic_writes(c.ops):
        assert reassign_partitions(c.psm, c.rsm, dict.fromkeys(tps), states) == set(tps)
    # No read: the elections and the bumps work from the states given and the context,
    # the dropped leaders' replicas leave the ISR from the context's states (each write
    # conditional on the zkVersion read). The writes: the elections and the bumps, the
    # ISR steps a round per broker (three of them).
    assert c.store.reads == reads
    assert c.store.updates - updates <= 2 + 3
    for tp, target in targets.items():
        assert c.store.topics[T].partitions[tp.partition] == target
        assert c.leader_and_isr(tp).leader in target
        assert set(c.leader_and_isr(tp).isr) == set(target)
    assert not c.ctx.partitions_being_reassigned
    c.assert_context_matches_store()


def entries(api_key: int, broker: int, body: dict[str, Any]) -> Iterator[tuple[object, ...]]:
    """A request body as what it tells the broker of each partition (with the fields of
    the request and of the partition's topic): a block's completion sends its requests
    before its final write, so partitions completed one at a time are sent in as many
    requests, where those completed together share one of each kind per broker. The
    live leaders are left out: each request lists those of its own partitions."""

    def dump(value: object) -> str:
        return json.dumps(value, sort_keys=True, default=str)

    head = dump({k: v for k, v in body.items() if k not in ("topic_states", "live_leaders")})
    for topic in body.get("topic_states", []):
        fields = dump({k: v for k, v in topic.items() if k != "partition_states"})
        for partition in topic["partition_states"]:
            yield (api_key, broker, head, fields, dump(partition))


def outcome(c: Cluster) -> object:
    """Everything a block of reassignments decides: each partition's successive states
    in ZooKeeper, the topic znode, the context, and the requests the brokers get."""
    ctx = c.ctx
    history: dict[TopicPartition, list[PartitionState]] = {}
    for w in c.store.writes:
        history.setdefault(w.tp, []).append(w.after)
    replica_states = {
        (tp, r): ctx.replica_state(PartitionReplica(tp, r))
        for tp in ctx.all_partitions()
        for r in BROKERS
    }
    requests = sorted(
        entry
        for batch in c.sent
        for r in batch
        for entry in entries(int(r.api_key), r.broker_id, r.body)
    )
    return (
        history,
        c.store.topics[T],
        {tp: ctx.full_assignment(tp) for tp in ctx.all_partitions()},
        {tp: ctx.partition_state(tp) for tp in ctx.all_partitions()},
        replica_states,
        sorted(ctx.partitions_being_reassigned),
        requests,
    )


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_block_decides_what_the_partitions_one_at_a_time_decide(data: st.DataObject) -> None:
    """reassign_partitions over many partitions ends where reassign_partition called for
    each in turn ends (Kafka's order): the same states written, the same context, the
    same partition states sent to each broker (in fewer requests); through a start, a
    broker down or not, some caught up and resumed, and new targets overriding
    reassignments in progress."""
    replicas = st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True).map(tuple)
    origins = data.draw(
        st.lists(st.permutations(BROKERS).map(lambda b: b[:3]), min_size=1, max_size=5),
        label="origins",
    )
    tps = [TopicPartition(T, p) for p in range(len(origins))]
    down = data.draw(st.sets(st.sampled_from(BROKERS), max_size=1), label="down")
    steps = []
    for _ in range(3):
        targets = {
            tp: data.draw(st.one_of(st.none(), replicas), label=f"target of {tp}") for tp in tps
        }
        steps.append((targets, data.draw(st.sets(st.sampled_from(tps)), label="caught up")))

    def run(one_at_a_time: bool) -> object:
        c = Cluster(brokers=BROKERS)
        c.create_topic(T, dict(enumerate(origins)))
        c.kill(*down)
        c.sent.clear()
        c.ops.deferred = True  # as in an event: one flush at its end
        for targets, caught in steps:
            for tp in sorted(caught):
                if tp in c.ctx.partitions_being_reassigned:
                    caught_up(c, tp)
            with coalesced_topic_writes(c.ops):
                if one_at_a_time:
                    done = {
                        tp for tp, t in targets.items() if reassign_partition(c.psm, c.rsm, tp, t)
                    }
                else:
                    done = reassign_partitions(c.psm, c.rsm, targets)
            c.ops.deferred = False
            c.ops.flush()
            c.ops.deferred = True
            assert done == set(tps) - c.ctx.partitions_being_reassigned
        c.assert_context_matches_store()
        return outcome(c)

    assert run(one_at_a_time=False) == run(one_at_a_time=True)


def test_a_dropped_replica_the_leader_adds_meanwhile_does_not_stay_in_the_isr(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by a fault schedule (overlapping faults with full disks, seed 20): a
    partition moved back onto broker 1 is moved off it again before 1 caught up. 1 is not
    in the ISR then, so it is stopped and deleted at once; but the leader, which still
    has 1 among its replicas, adds it to the ISR just before the controller's leader epoch
    bump, whose write loses and is made again over the leader's state. That state's ISR
    held 1, a replica the partition no longer had (its log deleted): moved back once more,
    the partition counted 1 as caught up at once and could have elected it."""
    c = started_on((1, 2, 3), (2, 3, 1))
    assert reassign(c, T0, (2, 3))
    assert not reassign(c, T0, (2, 3, 1))  # back onto 1: a new replica, not in the ISR
    c.store.race(
        T0,
        lambda lai: LeaderAndIsr(lai.leader, lai.leader_epoch, (*lai.isr, 1), lai.zk_version),
    )
    assert reassign(c, T0, (2, 3))  # overridden: 1 dropped before it caught up
    assert c.store.pending_races() == 0  # the bump lost to the leader's ISR change
    assert set(c.leader_and_isr(T0).isr) == {2, 3}
    assert c.ctx.replica_state(PartitionReplica(T0, 1)) is R.NON_EXISTENT
    assert not reassign(c, T0, (2, 3, 1))  # a new replica again, not caught up at once
    assert c.ctx.replica_state(PartitionReplica(T0, 1)) is R.NEW
    assert "invalid replica state transition" not in caplog.text


def test_nor_when_the_completion_elects_a_new_leader(caplog: pytest.LogCaptureFixture) -> None:
    """As above, but the new target leaves the leader out: the completion elects one
    (Kafka's ReassignPartitionLeaderElection), over the state the leader's ISR change
    left, which held the dropped replica."""
    c = started_on((1, 2, 3), (2, 3, 1))
    assert reassign(c, T0, (2, 3))
    assert not reassign(c, T0, (2, 3, 1))
    assert c.leader_and_isr(T0).leader == 2
    c.store.race(
        T0,
        lambda lai: LeaderAndIsr(lai.leader, lai.leader_epoch, (*lai.isr, 1), lai.zk_version),
    )
    assert reassign(c, T0, (3,))  # 2 leaves (in the ISR), 1 is dropped (not in it)
    assert c.store.pending_races() == 0
    state = c.leader_and_isr(T0)
    assert (state.leader, state.isr) == (3, (3,))
    assert c.ctx.replica_state(PartitionReplica(T0, 1)) is R.NON_EXISTENT
    assert "invalid replica state transition" not in caplog.text


def test_a_completion_whose_target_left_the_isr_meanwhile_stays_in_progress(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by the controller's stateful model: the target (2) is in the ISR when the
    completion reads it, but the leader (1, being removed) shrinks the ISR to itself
    before the election's write. No target replica can lead then. Completing anyway (as
    Kafka does) would stop the leader and leave the partition without one, Online to the
    state machine, so nothing would elect it again. The reassignment stays in progress
    under its leader instead, and completes once 2 is back in the ISR."""
    c = started_on((1, 2, 3), (1, 2, 3))
    c.store.race(T0, lambda lai: LeaderAndIsr(1, lai.leader_epoch, (1,), lai.zk_version))
    assert not reassign(c, T0, (2,))
    assert c.store.pending_races() == 0  # the election's write lost to the shrink
    assert c.ctx.partition_state(T0) is P.ONLINE
    state = c.leader_and_isr(T0)
    assert (state.leader, state.isr) == (1, (1,))
    assignment = c.ctx.full_assignment(T0)
    assert assignment.target_replicas == (2,)
    assert T0 in c.ctx.partitions_being_reassigned
    assert c.store.topics[T].partitions[0] == assignment.replicas
    assert "stays in progress, led by 1" in caplog.text
    c.isr_change_notification([T0])
    caught_up(c, T0)
    assert resume(c, T0)
    state = c.leader_and_isr(T0)
    assert (state.leader, state.isr) == (2, (2,))
    assert c.store.topics[T].partitions[0] == (2,)
    assert T0 not in c.ctx.partitions_being_reassigned
    assert "invalid replica state transition" not in caplog.text


def test_nor_when_the_target_is_shutting_down() -> None:
    """Found by the model too: the target's only replica is on a broker shutting down (so
    it cannot be elected) when the completion elects a leader for a partition led by a
    replica being removed. The partition keeps its leader and the reassignment waits."""
    c = started_on((1, 2, 3), (1, 2, 3))
    remaining = c.controlled_shutdown(1)  # 1 led nothing: it just leaves the ISRs
    assert remaining == []
    assert c.leader_and_isr(T0).leader == 2
    c.leader_sets_isr(T0, (2, 1))  # ... and is let back in, as in a race with the leader
    assert not reassign(c, T0, (1,))
    state = c.leader_and_isr(T0)
    assert state.leader == 2
    assert c.ctx.partition_state(T0) is P.ONLINE
    assert T0 in c.ctx.partitions_being_reassigned


def test_a_dropped_replica_the_leader_adds_during_a_step_in_progress_leaves_the_isr(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by the stateful model: as in the test above, but the override leaves the
    reassignment in progress (its new target has a replica yet to catch up). That step's
    leader epoch bump loses to the leader's ISR change that let in the replica the
    override dropped (stopped and deleted at once, not being in the ISR as read), and is
    written again over it: the replica must not stay in the ISR, or the partition's
    leader dying would let a replica with a deleted log be elected."""
    c = started_on(BROKERS, (1, 2, 4))
    assert not reassign(c, T0, (1, 2, 3))  # 3 being added, not in the ISR yet
    c.store.race(
        T0,
        lambda lai: LeaderAndIsr(lai.leader, lai.leader_epoch, (*lai.isr, 3), lai.zk_version),
    )
    assert not reassign(c, T0, (1, 2, 5))  # 3 dropped before it caught up; 5 to add
    assert c.store.pending_races() == 0  # the step's bump lost to the leader's change
    assert set(c.leader_and_isr(T0).isr) == {1, 2, 4}
    assert c.ctx.replica_state(PartitionReplica(T0, 3)) is R.NON_EXISTENT
    assert "replica 3 is in the ISR" in caplog.text
    caught_up(c, T0)
    assert resume(c, T0)
    assert c.store.topics[T].partitions[0] == (1, 2, 5)
    assert set(c.leader_and_isr(T0).isr) == {1, 2, 5}
    assert "invalid replica state transition" not in caplog.text


def test_a_completion_that_keeps_a_leader_it_could_not_replace_bumps_its_epoch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by the stateful model: the leader (1, the target) is shutting down, so the
    completion tries to elect another from the target and finds none. Kafka writes nothing
    then; but the leader still counts the removed replicas among its replicas, and its
    next ISR change, conditional on the zkVersion it knows, let 2 (removed) back into the
    ISR. The completion bumps the leader epoch as for a leader that stays: 1 learns its
    replicas, and its stale change loses."""
    c = started_on((1, 2, 3), (1, 2, 3))
    c.leader_sets_isr(T0, (1,))
    assert c.controlled_shutdown(1) == [T0]  # no one to take over
    before = c.leader_and_isr(T0)
    c.store.race(
        T0,
        lambda lai: (
            LeaderAndIsr(lai.leader, lai.leader_epoch, (1, 2), lai.zk_version)
            if lai.zk_version == before.zk_version
            else None
        ),
    )
    assert reassign(c, T0, (1,))
    c.store.settle_races()
    after = c.leader_and_isr(T0)
    assert (after.leader, after.isr) == (1, (1,))
    assert after.leader_epoch > before.leader_epoch
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert tuple(sent[1]["replicas"]) == (1,)
    assert "invalid replica state transition" not in caplog.text


def test_a_partition_that_never_had_a_leader_gets_one_on_its_new_replica(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by the stateful model: a partition created while its replicas' brokers were
    all down has no state (New). Moved onto a live broker, it stayed New, with nothing to
    elect it until a broker change (Kafka likewise, logging that it cannot bump a leader
    epoch it does not have). The reassignment's first step elects it on the new replica,
    and the next, once that replica is in the ISR, completes it."""
    c = Cluster(brokers=(4,))
    c.create_topic(T, {0: (1, 2, 3)})
    assert c.ctx.partition_state(T0) is P.NEW
    assert T0 not in c.store.znodes
    assert not reassign(c, T0, (4,))
    assert c.ctx.partition_state(T0) is P.ONLINE
    state = c.leader_and_isr(T0)
    assert (state.leader, state.isr) == (4, (4,))
    assert 4 in c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert resume(c, T0)
    assert c.store.topics[T].partitions[0] == (4,)
    assert "cannot bump" not in caplog.text
    assert "invalid" not in caplog.text


def test_a_topic_being_deleted_stays_held_while_a_partition_of_it_is_reassigned() -> None:
    """A deletion held for a reassignment is not let go by a broker's return: the
    reassignment's next step would meet partitions deleted under it (found by the stateful
    model, a broker registering while no controller watched among its steps: invalid
    transitions, NonExistentPartition to OnlinePartition). Kafka's resumeDeletionForTopics
    lets it go. Once the reassignment completes, the deletion goes on."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2), 1: (1, 2)})
    c.kill(3)
    assert not reassign(c, T0, (3,))  # waits for 3, which is down
    c.ctx.topics_to_be_deleted.add(T)
    c.deletion.mark_ineligible([T], "partitions are being reassigned")
    c.deletion.resume()
    started = c.start(3)
    assert started.deletions == [T]
    c.deletion.resume_for(started.deletions)  # as the shell does
    assert T in c.ctx.topics_ineligible_for_deletion
    assert c.ctx.partition_state(T0) is PartitionStateName.ONLINE
    assert not any(
        c.ctx.replica_state(pr) is ReplicaStateName.DELETION_STARTED
        for pr in c.ctx.replicas_for_topic(T)
    )
    caught_up(c, T0)
    assert resume(c, T0)
    c.deletion.resume_for([T])  # as the shell does for completed reassignments
    assert T not in c.ctx.topics_ineligible_for_deletion
    assert c.ctx.replica_state(PartitionReplica(T0, 3)) is ReplicaStateName.DELETION_STARTED


def test_a_reassignment_started_or_resumed_holds_its_topics_deletion() -> None:
    """A reassignment of a topic queued for deletion whose deletion has not started yet
    (a failover resumes reassignments before it resumes deletions) holds that deletion,
    as Kafka's onPartitionReassignment marks the topic ineligible: the deletion would
    otherwise delete the partition under the reassignment."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2)})
    c.ctx.topics_to_be_deleted.add(T)  # queued, its deletion not started
    assert not reassign(c, T0, (2, 3))
    assert T in c.ctx.topics_ineligible_for_deletion
    c.deletion.resume()
    assert not any(
        c.ctx.replica_state(pr) is ReplicaStateName.DELETION_STARTED
        for pr in c.ctx.replicas_for_topic(T)
    )
    caught_up(c, T0)
    assert resume(c, T0)
    c.deletion.resume_for([T])  # as the shell does for completed reassignments
    assert {c.ctx.replica_state(pr) for pr in c.ctx.replicas_for_topic(T)} == {
        ReplicaStateName.DELETION_STARTED
    }


def test_a_topic_held_for_a_reassignment_is_led_through_its_leaders_loss(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A topic whose deletion a reassignment holds (item 33) loses the broker leading the
    partition being reassigned: the partition is elected anew, as any topic's (item 36).
    It was left leaderless for good (its leader taken Offline on the way to deletion
    ineligible, item 19, and partitions of topics queued for deletion never elected), so
    the reassignment never completed and the deletion it held never ran. Kafka leaves the
    state as it was (its ineligible transition refused) and re-sends the leadership to the
    broker when it returns."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2)})
    assert not reassign(c, T0, (2, 3))
    c.ctx.topics_to_be_deleted.add(T)
    c.deletion.mark_ineligible([T], "partitions are being reassigned")
    c.deletion.resume()
    c.sent.clear()
    c.kill(1)
    assert c.leader_and_isr(T0).leader == 2
    assert c.ctx.partition_state(T0) is P.ONLINE
    assert c.ctx.replica_state(PartitionReplica(T0, 1)) is R.OFFLINE
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert sorted(sent) == [2, 3]
    assert {s["leader"] for s in sent.values()} == {2}
    c.deletion.resume_for(c.start(1).deletions)  # as the shell does
    assert T in c.ctx.topics_ineligible_for_deletion
    caught_up(c, T0)
    assert resume(c, T0)
    c.deletion.resume_for([T])
    assert {c.ctx.replica_state(pr) for pr in c.ctx.replicas_for_topic(T)} == {R.DELETION_STARTED}
    assert "invalid" not in caplog.text


def test_a_topic_held_for_a_reassignment_has_its_offline_partitions_elected() -> None:
    """A held topic's partition left without a leader (by an earlier version of this
    controller, or as a failover loads it) is elected when a broker change, an ISR change
    or a failover elects Offline partitions."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2)})
    assert not reassign(c, T0, (2, 3))
    c.ctx.topics_to_be_deleted.add(T)
    c.deletion.mark_ineligible([T], "partitions are being reassigned")
    c.deletion.resume()
    c.kill(1, 2)
    assert c.leader_and_isr(T0).leader == -1
    assert c.ctx.partition_state(T0) is P.OFFLINE
    c.start(2)
    assert c.leader_and_isr(T0).leader == 2
    assert c.ctx.partition_state(T0) is P.ONLINE

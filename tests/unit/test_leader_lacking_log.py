"""A broker told to lead a partition whose log it does not have (back on new disks, while
the ISR still lists it: a failover kept it because every ISR member had registered again
unseen) refuses, and the controller hands the leadership to another ISR member and takes
the broker out of the ISR (`without_leader_lacking_its_log`, `leaders_lacking_their_logs`);
the broker then follows and fetches the log again. Found by a fault schedule (ensemble
seed 114): such a broker led from an empty log, and its followers truncated 53,463
acknowledged offsets to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.context import ControllerContext, PartitionStateName, ReplicaAssignment
from controller.election import without_leader_lacking_its_log
from controller.reactions import leaders_lacking_their_logs
from tests.unit.test_state_machines import Cluster, registration
from wire.api import ApiKey
from zkdata.client import ControllerMovedError
from zkdata.znodes import NO_LEADER, LeaderAndIsr, TopicPartition

T0 = TopicPartition("t", 0)


def context(live: set[int], replicas: tuple[int, ...] = (1, 2, 3)) -> ControllerContext:
    ctx = ControllerContext(epoch=3, epoch_zk_version=2)
    ctx.add_live_brokers({b: (registration(b), 10 + b) for b in live})
    ctx.update_assignment(T0, ReplicaAssignment(replicas))
    return ctx


def test_the_leadership_goes_to_the_first_live_isr_member_left() -> None:
    current = LeaderAndIsr(2, 3, (2, 3, 1), 5)
    # assignment (1, 2, 3): 1 is the first live member left
    got = without_leader_lacking_its_log(context({1, 2, 3}), T0, current, 2)
    assert got == LeaderAndIsr(1, 4, (3, 1), 5)


def test_no_live_member_left_leaves_no_leader_and_the_others_in_the_isr() -> None:
    current = LeaderAndIsr(2, 3, (2, 3), 5)
    got = without_leader_lacking_its_log(context({2}), T0, current, 2)
    assert got == LeaderAndIsr(NO_LEADER, 4, (3,), 5)


def test_nothing_for_the_isrs_only_member_or_a_broker_that_leads_no_longer() -> None:
    ctx = context({1, 2, 3})
    assert without_leader_lacking_its_log(ctx, T0, LeaderAndIsr(2, 3, (2,), 5), 2) is None
    assert without_leader_lacking_its_log(ctx, T0, LeaderAndIsr(1, 4, (1, 2), 6), 2) is None


def test_a_broker_shutting_down_is_not_made_leader() -> None:
    """Found by review: every Kafka election of a leader (isReplicaOnline) leaves out a
    broker in controlled shutdown; this one counted it as live, ahead of a member that is
    not stopping, and a partition with only such a member left was led by it."""
    current = LeaderAndIsr(2, 3, (2, 1, 3), 5)
    ctx = context({1, 2, 3})
    ctx.shutting_down_broker_ids.add(1)
    assert without_leader_lacking_its_log(ctx, T0, current, 2) == LeaderAndIsr(3, 4, (1, 3), 5)
    ctx.shutting_down_broker_ids.add(3)
    got = without_leader_lacking_its_log(ctx, T0, current, 2)
    assert got == LeaderAndIsr(NO_LEADER, 4, (1, 3), 5)


def test_a_member_whose_log_directory_failed_is_not_made_leader() -> None:
    current = LeaderAndIsr(2, 3, (2, 1, 3), 5)
    ctx = context({1, 2, 3})
    ctx.replicas_on_offline_dirs[1] = {T0}
    assert without_leader_lacking_its_log(ctx, T0, current, 2) == LeaderAndIsr(3, 4, (1, 3), 5)


def test_the_leadership_goes_past_a_broker_in_controlled_shutdown() -> None:
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic("t", {0: [1, 2, 3]})
    c.controlled_shutdown(2)  # it led nothing; it leaves the ISR
    c.leader_sets_isr(T0, (1, 2, 3))  # the leader let it in again meanwhile
    leaders_lacking_their_logs(c.psm, 1, [T0])
    assert c.leader_and_isr(T0).leader == 3


@given(
    isr=st.lists(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=4, unique=True),
    live=st.sets(st.sampled_from([1, 2, 3, 4])),
    shutting_down=st.sets(st.sampled_from([1, 2, 3, 4])),
    data=st.data(),
)
def test_the_broker_leaves_and_a_leader_is_live_and_in_the_isr_or_none(
    isr: list[int], live: set[int], shutting_down: set[int], data: st.DataObject
) -> None:
    leader = data.draw(st.sampled_from(isr))
    current = LeaderAndIsr(leader, 7, tuple(isr), 9)
    ctx = context(live | {leader}, (1, 2, 3, 4))
    ctx.shutting_down_broker_ids = shutting_down & ctx.live_brokers.keys()
    live = ctx.live_broker_ids - {leader}  # online: not shutting down
    got = without_leader_lacking_its_log(ctx, T0, current, leader)
    if len(isr) == 1:
        assert got is None
        return
    assert got is not None
    assert leader not in got.isr
    assert got.isr  # never emptied
    assert set(got.isr) == set(isr) - {leader}
    assert got.leader_epoch == 8
    if got.leader == NO_LEADER:
        assert not (set(got.isr) & live)
    else:
        assert got.leader in got.isr
        assert got.leader in live


def test_the_leadership_moves_in_one_write_and_the_broker_is_sent_the_state_as_a_follower(
    tmp_path: Path,
) -> None:
    c = Cluster(brokers=(1, 2, 3), log_dir=tmp_path)
    c.create_topic("t", {0: [2, 1, 3]})
    c.sent.clear()
    writes = len(c.store.writes)
    written = leaders_lacking_their_logs(c.psm, 2, [T0])
    c.ops.flush()
    assert written == {T0: LeaderAndIsr(1, 1, (1, 3), 1)}
    assert c.leader_and_isr(T0) == written[T0]
    assert c.ctx.leadership[T0].leader_and_isr == written[T0]
    assert len(c.store.writes) == writes + 1
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert sorted(sent) == [1, 2, 3]  # broker 2 too: it follows now
    assert {b: s["leader"] for b, s in sent.items()} == {1: 1, 2: 1, 3: 1}
    assert {r.broker_id for r in c.requests(ApiKey.UPDATE_METADATA)} == {1, 2, 3}
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    last = [r for r in rows if r["event"] == "partition_state"][-1]
    assert (last["leader"], last["isr"], last["reason"]) == (1, [1, 3], "offline")
    # Answered again for a state it no longer leads: nothing more.
    assert leaders_lacking_their_logs(c.psm, 2, [T0]) == {}


def test_without_a_live_member_left_the_partition_waits_offline_for_one() -> None:
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic("t", {0: [2, 1, 3]})
    c.kill(1, 3)  # out of the ISR but the last member stays: 2 leads, ISR (2,)
    # A state as a failover may load it: 3 in the ISR, its broker not registered.
    c.leader_sets_isr(T0, [2, 3])
    lai = c.leader_and_isr(T0)
    assert (lai.leader, lai.isr) == (2, (2, 3))
    written = leaders_lacking_their_logs(c.psm, 2, [T0])
    assert written[T0].leader == NO_LEADER
    assert written[T0].isr == (3,)
    assert c.ctx.partition_state(T0) is PartitionStateName.OFFLINE
    c.start(3)  # the member that has the log returns: it leads
    assert c.leader_and_isr(T0).leader == 3


def test_a_fenced_controller_moves_nothing() -> None:
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic("t", {0: [2, 1, 3]})
    before = c.store.snapshot()
    c.store.elect_other_controller()
    with pytest.raises(ControllerMovedError):
        leaders_lacking_their_logs(c.psm, 2, [T0])
    assert c.store.snapshot() == before

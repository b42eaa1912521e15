"""The group coordinator's shell (groups/coordinator.py) answering membership requests as
Kafka 2.8's GroupCoordinator does, over the real parts of test_group_coordinator.py: a
SyncGroup sent again while the first is held, a refused JoinGroup to a group that had a
generation, what a MEMBER_ID_REQUIRED answer writes (nothing), and an Empty generation
written late."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from groups import coordinator as coordinator_module
from groups.coordinator import OFFSETS_TOPIC, GroupCoordinator
from groups.membership import GroupState, SyncAnswer
from groups.offset_records import group_metadata_batch
from tests.unit.test_group_coordinator import (
    G0,
    WAIT_S,
    Call,
    Node,
    join,
    member_ids,
    node,  # noqa: F401 (a fixture)
    nodes,  # noqa: F401 (a fixture)
    stable_member,
    state_of,
    sync,
    tp,
    wait_until,
)
from wire.errors import ErrorCode


def test_a_member_syncing_again_gets_its_first_sync_answered_rebalance_in_progress(
    node: Node,  # noqa: F811
) -> None:
    """Kafka 2.8's MemberMetadata keeps one awaitingSyncCallback: a SyncGroup sent again
    while the first is held answers the first REBALANCE_IN_PROGRESS (its answer would
    reach nobody); the second gets the assignment."""
    groups = node.groups
    first = stable_member(groups, G0)
    second = Call(lambda: join(groups, G0, client_id="second"))
    wait_until("the second member in the group", lambda: len(member_ids(groups, G0)) == 2)
    assert join(groups, G0, first.member_id).error == ErrorCode.NONE  # generation 2
    joined = second.answer()
    assert (joined.error, joined.generation_id) == (ErrorCode.NONE, 2)
    follower = joined.member_id
    held = Call(lambda: sync(groups, G0, follower, 2))
    assert held.waiting()
    again = Call(lambda: sync(groups, G0, follower, 2))
    assert held.answer() == SyncAnswer(ErrorCode.REBALANCE_IN_PROGRESS)
    assert again.waiting()
    assignments = {first.member_id: b"F", follower: b"S"}
    assert sync(groups, G0, first.member_id, 2, assignments).error == ErrorCode.NONE
    assert again.answer() == SyncAnswer(ErrorCode.NONE, b"S", "consumer", "range")


def test_a_refused_join_keeps_an_empty_group_that_had_a_generation(
    node: Node,  # noqa: F811
) -> None:
    """Only a group a refused JoinGroup itself made (no generation, member or offset) is
    not kept: one left Empty by its members stays Empty at its generation (Kafka keeps it
    until offsets retention finds it without offsets)."""
    groups = node.groups
    left = stable_member(groups, G0)
    assert groups.leave_group(G0, [left.member_id]) == (
        ErrorCode.NONE,
        {left.member_id: ErrorCode.NONE},
    )
    assert join(groups, G0, session_ms=1).error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert groups.list_groups() == (ErrorCode.NONE, [(G0, "consumer", GroupState.EMPTY.value)])
    assert state_of(groups, G0)["group_state"] == GroupState.EMPTY.value


def test_member_id_required_writes_no_group_record(
    node: Node,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka 2.8's doUnknownJoinGroup only registers a pending member: no group record is
    written (a group is written when a generation is formed or left Empty), so a new
    coordinator knows nothing of a group that never had a member."""
    groups = node.groups
    written: list[Any] = []
    monkeypatch.setattr(groups, "_store_group", lambda *args: written.append(args))
    monkeypatch.setattr(groups._empty_writes, "put", written.append)
    answer = join(groups, G0, require_known=True)
    assert answer.error == ErrorCode.MEMBER_ID_REQUIRED
    assert written == []


def test_an_empty_generation_written_late_is_not_written_after_the_next_one(
    node: Node,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group left Empty is written in the background; if the group formed a later
    generation (written at its SyncGroup) before the writer's turn came, the Empty one is
    not written after it: compaction keeps a group's last record, and a coordinator
    reading the compacted partition would find the group Empty, without its members.
    (Kafka appends each generation's record in order, under the group's lock.)"""
    groups = node.groups
    index = groups.partition_of(G0)
    old = stable_member(groups, G0)  # generation 1
    paused, release, done = threading.Event(), threading.Event(), threading.Event()
    real_store = GroupCoordinator._store_group

    def slow_batch(*args: Any, **kwargs: Any) -> bytearray:
        if not paused.is_set():
            paused.set()
            assert release.wait(WAIT_S)
        return group_metadata_batch(*args, **kwargs)

    def store(self: GroupCoordinator, *args: Any, **kwargs: Any) -> ErrorCode:
        try:
            return real_store(self, *args, **kwargs)
        finally:
            if threading.current_thread().name == "group-writer":
                done.set()

    monkeypatch.setattr(coordinator_module, "group_metadata_batch", slow_batch)
    monkeypatch.setattr(GroupCoordinator, "_store_group", store)
    assert groups.leave_group(G0, [old.member_id])[1] == {old.member_id: ErrorCode.NONE}
    assert paused.wait(WAIT_S)  # the writer has the Empty generation 2, not yet written
    new = stable_member(groups, G0)  # generation 3, written at its SyncGroup
    assert new.generation_id == 3
    plog = node.replicas.partitions[tp(OFFSETS_TOPIC, index)].log
    assert plog is not None
    end = plog.log_end_offset
    release.set()
    assert done.wait(WAIT_S)
    assert plog.log_end_offset == end


def test_a_leaders_sync_whose_partition_moves_away_during_the_write_is_not_coordinator(
    node: Node,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The partition moving away while the leader's assignment is written: Kafka 2.8's
    onGroupUnloaded answers the waiting SyncGroup NOT_COORDINATOR, and the member finds
    the new coordinator."""
    groups = node.groups
    index = groups.partition_of(G0)
    leader = join(groups, G0)
    assert leader.leader == leader.member_id
    writing, release = threading.Event(), threading.Event()
    real_store = GroupCoordinator._store_group

    def slow_store(self: GroupCoordinator, *args: Any, **kwargs: Any) -> ErrorCode:
        writing.set()
        assert release.wait(WAIT_S)
        return real_store(self, *args, **kwargs)

    monkeypatch.setattr(GroupCoordinator, "_store_group", slow_store)
    leader_sync = Call(
        lambda: sync(groups, G0, leader.member_id, leader.generation_id, {leader.member_id: b"A"})
    )
    assert writing.wait(WAIT_S)
    node.follow(index, epoch=1)
    release.set()
    assert leader_sync.answer() == SyncAnswer(ErrorCode.NOT_COORDINATOR)

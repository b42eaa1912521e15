"""Which requests give a group member a new session (groups/membership.py), as Kafka
2.8's GroupCoordinator calls completeAndScheduleNextHeartbeatExpiration: a member whose
session would otherwise end just after such a request stays in the group."""

from __future__ import annotations

from groups.membership import GroupState
from tests.unit.test_group_membership import (
    DELAY,
    REBALANCE,
    SESSION,
    completing_group,
    rejoin,
    stable_group,
    state,
)
from tests.unit.test_group_static_membership import join_static, stable_static_group
from wire.errors import ErrorCode


def test_a_restarted_static_member_gets_a_new_session() -> None:
    """updateStaticMemberAndRebalance: the member under its new id is given a session from
    its JoinGroup, not the rest of the old id's."""
    group = stable_static_group()
    end = DELAY + SESSION  # when both sessions end, unless renewed
    restart = end - 1
    assert join_static(group, "b", "b2", restart).joins["b2"].error == ErrorCode.NONE
    assert group.heartbeat(member_id="a1", generation_id=1, now_ms=restart) == ErrorCode.NONE
    assert not group.tick(end)
    assert set(group.members) == {"a1", "b2"}
    assert state(group) is GroupState.STABLE
    assert group.next_deadline_ms() == end - 1 + SESSION


def test_a_member_rejoining_with_another_session_timeout_keeps_its_first() -> None:
    """Kafka 2.8's MemberMetadata holds a member's timeouts and client details as vals,
    and updateMemberAndRebalance (updateMember) takes only the protocols: a known
    member's JoinGroup with other timeouts keeps those of its first, for its session and
    the group's record. They were replaced by the request's."""
    group = stable_group("a")
    longer = 2 * SESSION
    now = DELAY + 1000
    answers = rejoin(group, "a", now, session=longer, rebalance=longer)  # a rebalance, at once
    assert answers.joins["a"].generation_id == 2
    member = group.members["a"]
    assert (member.session_timeout_ms, member.rebalance_timeout_ms) == (SESSION, REBALANCE)
    assert [m.session_timeout_ms for m in group.to_metadata().members] == [SESSION]
    group.tick(now + SESSION)
    assert not group.members  # dropped when its first session timeout ran out


def test_a_followers_join_answered_at_once_does_not_renew_its_session() -> None:
    """A Stable group's follower rejoining with the same metadata is answered the current
    generation at once, and its session is not renewed: Kafka 2.8's doJoinGroup answers it
    without completeAndScheduleNextHeartbeatExpiration, so it is dropped when the session
    from its last heartbeat ends (the leader heartbeated meanwhile, and stays)."""
    group = stable_group("a", "b")
    end = DELAY + SESSION  # both sessions run from their SyncGroup at DELAY
    answers = rejoin(group, "b", end - 1)
    assert answers.joins["b"].error == ErrorCode.NONE
    assert answers.joins["b"].generation_id == 1
    assert state(group) is GroupState.STABLE
    assert group.heartbeat(member_id="a", generation_id=1, now_ms=end - 1) == ErrorCode.NONE
    group.tick(end)
    assert set(group.members) == {"a"}
    assert state(group) is GroupState.PREPARING_REBALANCE


def test_a_join_answered_at_once_while_completing_does_not_renew_the_session() -> None:
    """CompletingRebalance: a member that rejoins with the same metadata (it lost its
    JoinGroup answer) is given the generation again at once, its session not renewed (the
    one onCompleteJoin scheduled runs on)."""
    group = completing_group("a", "b")
    end = DELAY + SESSION  # onCompleteJoin gave both a session at DELAY
    answers = rejoin(group, "b", end - 1)
    assert answers.joins["b"].error == ErrorCode.NONE
    assert answers.joins["b"].generation_id == 1
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert group.heartbeat(member_id="a", generation_id=1, now_ms=end - 1) == ErrorCode.NONE
    group.tick(end)
    assert set(group.members) == {"a"}
    assert state(group) is GroupState.PREPARING_REBALANCE

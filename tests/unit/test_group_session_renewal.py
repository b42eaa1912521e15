"""Which requests give a group member a new session (groups/membership.py), as Kafka
2.8's GroupCoordinator calls completeAndScheduleNextHeartbeatExpiration: a member whose
session would otherwise end just after such a request stays in the group."""

from __future__ import annotations

from groups.membership import GroupState
from tests.unit.test_group_membership import DELAY, SESSION, rejoin, stable_group, state
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


def test_a_member_rejoining_with_another_session_timeout_gets_that_session() -> None:
    """updateMemberAndRebalance: a known member's JoinGroup updates its session timeout
    (and its rebalance timeout) with its protocols; the next generation's session and the
    group's record use the new one."""
    group = stable_group("a")
    longer = 2 * SESSION
    now = DELAY + 1000
    answers = rejoin(group, "a", now, session=longer)  # the leader: a rebalance, at once
    assert answers.joins["a"].generation_id == 2
    assert group.members["a"].session_timeout_ms == longer
    assert not group.tick(now + SESSION)
    assert set(group.members) == {"a"}
    assert [m.session_timeout_ms for m in group.to_metadata(now).members] == [longer]

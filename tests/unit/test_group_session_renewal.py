"""Which requests give a group member a new session (groups/membership.py), as Kafka
2.8's GroupCoordinator calls completeAndScheduleNextHeartbeatExpiration: a member whose
session would otherwise end just after such a request stays in the group."""

from __future__ import annotations

from groups.membership import GroupState
from tests.unit.test_group_membership import DELAY, SESSION, state
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

"""A new member's JoinGroup times out (groups/membership.py), as Kafka 2.8's
GroupCoordinator: addMemberAndRebalance marks the member new and schedules its expiration
NewMemberJoinTimeoutMs (5 minutes) after its JoinGroup, not a session after; a new member
counts that time even while it waits in the join phase (MemberMetadata.hasSatisfiedHeartbeat
checks isNew first), and onExpireHeartbeat removes it, answering its JoinGroup
UNKNOWN_MEMBER_ID with no member id (removeMemberAndUpdateGroup). onCompleteJoin clears
isNew: a member of a generation waiting in a later join phase is not timed so.

The rebalance timeout here is 10 minutes (a consumer with a max.poll.interval.ms above the
default): the join phase outlasts a new member's timeout.
"""

from __future__ import annotations

from groups.membership import Group, GroupState, JoinAnswer
from tests.unit.test_group_membership import (
    DELAY,
    SESSION,
    join_new,
    rejoin,
    stable_group,
    state,
    sync,
)
from wire.errors import ErrorCode

NEW_MEMBER_JOIN_TIMEOUT = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
LONG = 10 * 60 * 1000  # the members' rebalance timeout


def keep_alive(group: Group, member_id: str, start: int, end: int) -> None:
    """``member_id`` (of generation 1, not rejoining) heartbeats every half session from
    ``start`` to ``end`` inclusive, the group ticked at each: nothing is answered."""
    for now in [*range(start, end, SESSION // 2), end]:
        assert group.heartbeat(member_id=member_id, generation_id=1, now_ms=now) == (
            ErrorCode.REBALANCE_IN_PROGRESS
        )
        assert not group.tick(now)


def test_a_new_member_waiting_in_a_long_join_phase_is_removed_after_5_minutes() -> None:
    """a has rejoined, b heartbeats but has not rejoined yet (a long poll), c joined new
    and never does anything again (its client went): at 5 minutes c is removed, its
    JoinGroup answered UNKNOWN_MEMBER_ID, and the generation b completes has a and b."""
    group = stable_group("a", "b", rebalance=LONG)
    start = DELAY + 100
    assert not join_new(group, "c", start, rebalance=LONG)  # a rebalance, until start + LONG
    assert not rejoin(group, "a", start, rebalance=LONG)
    expiry = start + NEW_MEMBER_JOIN_TIMEOUT
    assert group.next_deadline_ms() == DELAY + SESSION  # b's, before c's
    keep_alive(group, "b", start, expiry - 1)
    assert set(group.members) == {"a", "b", "c"}
    assert group.next_deadline_ms() == expiry
    answers = group.tick(expiry)
    assert answers.joins == {"c": JoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID, member_id="")}
    assert not answers.syncs
    assert set(group.members) == {"a", "b"}
    assert state(group) is GroupState.PREPARING_REBALANCE  # b has still not rejoined
    assert group.join_deadline_ms == start + LONG
    answers = rejoin(group, "b", expiry + 1000, rebalance=LONG)
    assert set(answers.joins) == {"a", "b"}
    assert answers.joins["a"].generation_id == 2
    assert [m for m, _ in answers.joins["a"].members] == ["a", "b"]
    assert state(group) is GroupState.COMPLETING_REBALANCE


def test_a_new_member_resending_its_join_keeps_its_first_timeout() -> None:
    """A JoinGroup resent with the new member's id schedules no expiration in Kafka
    (updateMemberAndRebalance): the 5 minutes still run from its first JoinGroup, and its
    session timeout (10 s here) does not time it meanwhile."""
    group = stable_group("a", "b", rebalance=LONG)
    start = DELAY + 100
    join_new(group, "c", start, rebalance=LONG)
    rejoin(group, "a", start, rebalance=LONG)
    keep_alive(group, "b", start, start + 60_000)
    assert not rejoin(group, "c", start + 60_000, rebalance=LONG)
    expiry = start + NEW_MEMBER_JOIN_TIMEOUT
    keep_alive(group, "b", start + 60_000, expiry - 1)
    assert "c" in group.members
    assert set(group.tick(expiry).joins) == {"c"}
    assert "c" not in group.members


def test_a_member_of_a_generation_waiting_in_a_later_join_phase_is_not_timed_out() -> None:
    """c joined new, but its join phase completed (generation 2): isNew is cleared, and
    waiting in the next join phase it stays past 5 minutes, until b, which heartbeats
    but never rejoins, stops and its session ends."""
    group = stable_group("a", "b", rebalance=LONG)
    start = DELAY + 100
    join_new(group, "c", start, rebalance=LONG)
    rejoin(group, "a", start, rebalance=LONG)
    answers = rejoin(group, "b", start + 1000, rebalance=LONG)
    assert set(answers.joins) == {"a", "b", "c"}  # generation 2, c in it
    now = start + 2000
    assert not sync(group, "b", 2, now)
    assert not sync(group, "c", 2, now)
    stable = sync(group, "a", 2, now, {"a": b"a", "b": b"b", "c": b"c"})
    assert set(stable.syncs) == {"a", "b", "c"}
    assert state(group) is GroupState.STABLE
    rebalance = now + 1000
    assert not rejoin(group, "a", rebalance, rebalance=LONG)  # the leader: a rebalance
    assert not rejoin(group, "c", rebalance, rebalance=LONG)
    for now in range(rebalance, rebalance + NEW_MEMBER_JOIN_TIMEOUT + SESSION, SESSION // 2):
        assert group.heartbeat(member_id="b", generation_id=2, now_ms=now) == (
            ErrorCode.REBALANCE_IN_PROGRESS
        )
        assert not group.tick(now)
    assert set(group.members) == {"a", "b", "c"}
    assert group.next_deadline_ms() == now + SESSION  # b's: a and c are not timed
    answers = group.tick(now + SESSION)  # b's session ends: the others have all joined
    assert set(answers.joins) == {"a", "c"}
    assert answers.joins["c"].generation_id == 3

"""The consumer group membership state machine (groups/membership.py): Kafka 2.8's
GroupCoordinator states and transitions, one operation at a time, and as properties of
random sequences of JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and time.

Unit tests use a group whose members have a 10 s session and a 30 s rebalance timeout
and a broker with a 3 s initial rebalance delay, unless a test says otherwise.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groups import membership
from groups.membership import (
    Answers,
    Group,
    GroupLimits,
    GroupState,
    JoinAnswer,
    Member,
    SyncAnswer,
)
from wire.errors import ErrorCode

LIMITS = GroupLimits(
    min_session_timeout_ms=1000, max_session_timeout_ms=60_000, initial_rebalance_delay_ms=3000
)
DELAY = LIMITS.initial_rebalance_delay_ms
SESSION = 10_000
REBALANCE = 30_000
RANGE: tuple[tuple[str, bytes], ...] = (("range", b"range-meta"),)
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None)


def _join(
    group: Group,
    member_id: str,
    new_member_id: str,
    now: int,
    *,
    require: bool = False,
    protocols: tuple[tuple[str, bytes], ...] = RANGE,
    session: int = SESSION,
    rebalance: int = REBALANCE,
    protocol_type: str = "consumer",
    group_instance_id: str | None = None,
    wall_ms: int | None = None,
) -> Answers:
    return group.join(
        member_id=member_id,
        new_member_id=new_member_id,
        require_known_member_id=require,
        client_id="client",
        client_host="/127.0.0.1",
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        protocol_type=protocol_type,
        protocols=protocols,
        now_ms=now,
        group_instance_id=group_instance_id,
        wall_ms=wall_ms,
    )


def join_new(group: Group, new_id: str, now: int, **kw: Any) -> Answers:
    """A JoinGroup without a member id; ``new_id`` is the id the coordinator hands out."""
    return _join(group, "", new_id, now, **kw)


def rejoin(group: Group, member_id: str, now: int, **kw: Any) -> Answers:
    """A JoinGroup with a member id (a known member, or one told MEMBER_ID_REQUIRED)."""
    return _join(group, member_id, "unused-new-id", now, **kw)


def sync(
    group: Group,
    member_id: str,
    generation: int,
    now: int,
    assignments: dict[str, bytes] | None = None,
    *,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
) -> Answers:
    return group.sync(
        member_id=member_id,
        generation_id=generation,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=assignments or {},
        now_ms=now,
    )


def completing_group(*ids: str, limits: GroupLimits = LIMITS, **kw: Any) -> Group:
    """A group whose members joined together and got generation 1 at the end of the
    initial delay, at DELAY: CompletingRebalance, the first id leading. (Several members
    join at -DELAY: the others joining in the first delay, it is extended by one more,
    from its end at 0, as Kafka's InitialDelayedJoin.)"""
    group = Group("g", limits)
    delay = limits.initial_rebalance_delay_ms
    start = -delay if len(ids) > 1 else 0
    for member_id in ids:
        join_new(group, member_id, start, **kw)
    if start < 0:
        assert not group.tick(0)
    answers = group.tick(delay)
    assert set(answers.joins) == set(ids)
    assert state(group) is GroupState.COMPLETING_REBALANCE
    return group


def stable_group(*ids: str, limits: GroupLimits = LIMITS, **kw: Any) -> Group:
    """As completing_group, then every member synced at DELAY (the leader last): Stable,
    member ``m`` assigned ``m.encode()``."""
    group = completing_group(*ids, limits=limits, **kw)
    now = limits.initial_rebalance_delay_ms
    for member_id in ids[1:]:
        assert not sync(group, member_id, 1, now)
    answers = sync(group, ids[0], 1, now, {m: m.encode() for m in ids})
    assert set(answers.syncs) == set(ids)
    assert state(group) is GroupState.STABLE
    return group


def state(group: Group) -> GroupState:
    """The group's state (read through a call, so that mypy does not narrow it for good)."""
    return group.state


def awaiting(group: Group) -> tuple[set[str], set[str]]:
    joins = {m for m, x in group.members.items() if x.awaiting_join}
    syncs = {m for m, x in group.members.items() if x.awaiting_sync}
    return joins, syncs


# --- JoinGroup: the first generation ----------------------------------------------------


def test_a_new_group_has_nothing_timed() -> None:
    group = Group("g")
    assert group.limits == GroupLimits()
    assert state(group) is GroupState.EMPTY
    assert group.generation_id == 0
    assert group.leader == ""
    assert group.is_empty()
    assert group.candidate_protocols() == set()
    assert group.next_deadline_ms() is None
    assert not group.tick(10**9)
    assert state(group) is GroupState.EMPTY


def test_first_member_waits_the_initial_delay_then_leads_generation_1() -> None:
    group = Group("g", LIMITS)
    assert not join_new(group, "a", 0)
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert group.leader == "a"
    assert group.protocol_type == "consumer"
    assert awaiting(group) == ({"a"}, set())
    assert group.next_deadline_ms() == DELAY
    # every member has joined, but a new group waits the whole delay for more
    assert not group.tick(DELAY - 1)
    assert state(group) is GroupState.PREPARING_REBALANCE
    answers = group.tick(DELAY)
    assert answers.joins == {
        "a": JoinAnswer(ErrorCode.NONE, 1, "consumer", "range", "a", "a", (("a", b"range-meta"),))
    }
    assert not answers.syncs
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert group.generation_id == 1
    assert group.protocol_name == "range"
    assert awaiting(group) == (set(), set())
    # the leader's session starts with its answer
    assert group.members["a"].heartbeat_deadline_ms == DELAY + SESSION


def test_initial_delay_grows_with_each_new_member_up_to_the_rebalance_timeout() -> None:
    """Kafka 2.8's InitialDelayedJoin: when a delay ends and a new member joined during
    it, the phase waits another delay from then (no more than what is left of the first
    member's rebalance timeout); a delay in which nobody new joined ends it."""
    group = Group("g", LIMITS)
    join_new(group, "a", 0, rebalance=10_000)
    assert group.next_deadline_ms() == 3000
    join_new(group, "b", 2000, rebalance=10_000)
    assert group.next_deadline_ms() == 3000  # extended only when the delay ends
    # a known member rejoining does not extend it
    rejoin(group, "a", 2500, rebalance=10_000)
    assert not group.tick(2999)
    assert not group.tick(3000)
    assert group.next_deadline_ms() == 6000
    join_new(group, "c", 4500, rebalance=10_000)
    assert not group.tick(6000)
    assert group.next_deadline_ms() == 9000
    join_new(group, "d", 8000, rebalance=10_000)
    assert not group.tick(9000)
    assert group.next_deadline_ms() == 10_000  # what is left of the rebalance timeout
    assert not group.tick(9999)
    answers = group.tick(10_000)
    assert set(answers.joins) == {"a", "b", "c", "d"}
    assert all(a.generation_id == 1 for a in answers.joins.values())
    assert group.generation_id == 1


def test_an_initial_delay_in_which_nobody_new_joins_ends_the_phase() -> None:
    group = Group("g", LIMITS)
    join_new(group, "a", 0)
    join_new(group, "b", 100)  # during the first delay: one more, counted from its end
    assert not group.tick(DELAY)
    assert group.next_deadline_ms() == 2 * DELAY
    rejoin(group, "b", DELAY + 500)
    assert not group.tick(2 * DELAY - 1)
    assert set(group.tick(2 * DELAY).joins) == {"a", "b"}


def test_the_first_initial_delay_is_whole_even_past_the_rebalance_timeout() -> None:
    """Kafka's prepareRebalance waits group.initial.rebalance.delay.ms whole, and only
    what the rebalance timeout leaves after it (here nothing) may extend it."""
    group = Group("g", LIMITS)
    join_new(group, "a", 0, rebalance=1000)
    assert group.next_deadline_ms() == DELAY
    join_new(group, "b", 500, rebalance=1000)
    assert not group.tick(1000)
    assert set(group.tick(DELAY).joins) == {"a", "b"}


def test_an_empty_group_of_a_later_generation_waits_one_initial_delay() -> None:
    """Kafka's addMemberAndRebalance marks a new member for another delay only while the
    group is at generation 0."""
    group = stable_group("a")
    group.leave(["a"], 4000)
    assert (group.generation_id, state(group)) == (2, GroupState.EMPTY)
    join_new(group, "b", 5000)
    join_new(group, "c", 7000)
    assert set(group.tick(5000 + DELAY).joins) == {"b", "c"}


def test_a_mark_left_by_a_phase_with_no_time_to_extend_extends_the_next_one() -> None:
    """Kafka's newMemberAdded is cleared only by an extension: one set in a first phase
    whose rebalance timeout left nothing to extend by extends the next phase from Empty."""
    group = Group("g", LIMITS)
    join_new(group, "a", 0, rebalance=1000)
    join_new(group, "b", 100, rebalance=1000)
    assert set(group.tick(DELAY).joins) == {"a", "b"}
    group.leave(["a", "b"], DELAY + 10)
    assert state(group) is GroupState.EMPTY
    join_new(group, "c", 10_000)
    assert not group.tick(10_000 + DELAY)
    assert set(group.tick(10_000 + 2 * DELAY).joins) == {"c"}


def test_without_an_initial_delay_a_first_member_is_answered_at_once() -> None:
    group = Group("g", GroupLimits(1000, 60_000, 0))
    answers = join_new(group, "a", 7)
    assert answers.joins["a"].error == ErrorCode.NONE
    assert answers.joins["a"].generation_id == 1
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert group.sync_deadline_ms == 7 + REBALANCE


def test_two_members_leader_gets_every_members_metadata_follower_none() -> None:
    group = Group("g", LIMITS)
    join_new(group, "a", 0, protocols=(("range", b"a-meta"),))
    join_new(group, "b", 100, protocols=(("range", b"b-meta"),))
    assert group.leader == "a"
    answers = group.tick(2 * DELAY)  # b joined in the first delay: one more
    assert answers.joins == {
        "a": JoinAnswer(
            ErrorCode.NONE, 1, "consumer", "range", "a", "a", (("a", b"a-meta"), ("b", b"b-meta"))
        ),
        "b": JoinAnswer(ErrorCode.NONE, 1, "consumer", "range", "a", "b", ()),
    }


def test_a_join_resent_while_awaiting_replaces_the_first_and_is_answered_once() -> None:
    group = Group("g", LIMITS)
    join_new(group, "a", 0)
    new = (("range", b"v2"),)
    assert not rejoin(group, "a", 100, protocols=new)
    assert list(group.members) == ["a"]
    answers = group.tick(DELAY)
    assert answers.joins["a"].members == (("a", b"v2"),)


def test_an_empty_group_again_waits_the_initial_delay() -> None:
    group = stable_group("a")
    group.leave(["a"], 4000)
    assert state(group) is GroupState.EMPTY
    assert group.generation_id == 2
    assert not join_new(group, "b", 5000)
    assert group.next_deadline_ms() == 5000 + DELAY
    answers = group.tick(5000 + DELAY)
    assert answers.joins["b"].generation_id == 3
    assert answers.joins["b"].leader == "b"


# --- SyncGroup ----------------------------------------------------------------------------


def test_follower_sync_waits_for_the_leaders_then_both_get_their_assignments() -> None:
    group = completing_group("a", "b")
    assert not sync(group, "b", 1, DELAY + 10)
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert awaiting(group) == (set(), {"b"})
    answers = sync(group, "a", 1, DELAY + 20, {"a": b"A", "b": b"B"})
    assert answers.syncs == {
        "a": SyncAnswer(ErrorCode.NONE, b"A", "consumer", "range"),
        "b": SyncAnswer(ErrorCode.NONE, b"B", "consumer", "range"),
    }
    assert not answers.joins
    assert state(group) is GroupState.STABLE
    assert awaiting(group) == (set(), set())
    # everyone's session restarts with the assignment
    assert group.members["a"].heartbeat_deadline_ms == DELAY + 20 + SESSION
    assert group.members["b"].heartbeat_deadline_ms == DELAY + 20 + SESSION
    # a SyncGroup in Stable gets the member's assignment at once
    again = sync(group, "b", 1, DELAY + 30, protocol_type="consumer", protocol_name="range")
    assert again.syncs == {"b": SyncAnswer(ErrorCode.NONE, b"B", "consumer", "range")}


def test_follower_syncing_after_the_leader_is_answered_at_once() -> None:
    group = completing_group("a", "b")
    answers = sync(group, "a", 1, DELAY, {"a": b"A", "b": b"B"})
    assert set(answers.syncs) == {"a"}
    assert state(group) is GroupState.STABLE
    assert sync(group, "b", 1, DELAY).syncs["b"] == SyncAnswer(
        ErrorCode.NONE, b"B", "consumer", "range"
    )


def test_a_member_the_leader_left_out_gets_an_empty_assignment() -> None:
    group = completing_group("a", "b")
    sync(group, "b", 1, DELAY)
    answers = sync(group, "a", 1, DELAY, {"a": b"A", "stranger": b"S"})
    assert answers.syncs["b"] == SyncAnswer(ErrorCode.NONE, b"", "consumer", "range")
    assert "stranger" not in group.members


@pytest.mark.parametrize(
    ("member_id", "generation", "protocol_type", "protocol_name", "error"),
    [
        ("nobody", 1, None, None, ErrorCode.UNKNOWN_MEMBER_ID),
        # Kafka 2.8's doSyncGroup: the member first, then the generation, then protocols.
        ("nobody", 2, "connect", "roundrobin", ErrorCode.UNKNOWN_MEMBER_ID),
        ("b", 2, "connect", "roundrobin", ErrorCode.ILLEGAL_GENERATION),
        ("b", 2, None, None, ErrorCode.ILLEGAL_GENERATION),
        ("b", 0, None, None, ErrorCode.ILLEGAL_GENERATION),
        ("b", 1, "connect", None, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        ("b", 1, None, "roundrobin", ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        ("b", 1, "consumer", "range", None),
    ],
)
def test_sync_errors(
    member_id: str,
    generation: int,
    protocol_type: str | None,
    protocol_name: str | None,
    error: ErrorCode | None,
) -> None:
    group = completing_group("a", "b")
    answers = sync(
        group,
        member_id,
        generation,
        DELAY,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
    )
    if error is None:  # accepted: the follower waits for the leader
        assert not answers
        assert group.members["b"].awaiting_sync
    else:
        # An error names no protocol (Kafka 2.8's SyncGroupResult(error)).
        assert answers.syncs == {member_id: SyncAnswer(error, b"", None, None)}
        assert not group.members["b"].awaiting_sync
        assert state(group) is GroupState.COMPLETING_REBALANCE


def test_sync_while_preparing_a_rebalance_is_told_to_rejoin() -> None:
    group = stable_group("a", "b")
    join_new(group, "c", 4000)
    assert state(group) is GroupState.PREPARING_REBALANCE
    answers = sync(group, "b", 1, 4100)
    assert answers.syncs["b"].error == ErrorCode.REBALANCE_IN_PROGRESS
    assert not group.members["b"].awaiting_sync
    # ... and the SyncGroup counts as a sign of life
    assert group.members["b"].heartbeat_deadline_ms == 4100 + SESSION


# --- Heartbeat ----------------------------------------------------------------------------


def test_heartbeat_answers_by_state() -> None:
    group = completing_group("a", "b")
    assert group.heartbeat(member_id="b", generation_id=1, now_ms=4000) == ErrorCode.NONE
    assert group.members["b"].heartbeat_deadline_ms == 4000 + SESSION
    sync(group, "a", 1, 4000, {"a": b"A", "b": b"B"})
    assert state(group) is GroupState.STABLE
    assert group.heartbeat(member_id="a", generation_id=1, now_ms=5000) == ErrorCode.NONE
    assert group.members["a"].heartbeat_deadline_ms == 5000 + SESSION
    assert (
        group.heartbeat(member_id="a", generation_id=0, now_ms=5000) == ErrorCode.ILLEGAL_GENERATION
    )
    assert (
        group.heartbeat(member_id="a", generation_id=2, now_ms=5000) == ErrorCode.ILLEGAL_GENERATION
    )
    assert (
        group.heartbeat(member_id="zed", generation_id=1, now_ms=5000)
        == ErrorCode.UNKNOWN_MEMBER_ID
    )
    # (Kafka 2.8's handleHeartbeat: an unknown member before a wrong generation.)
    assert (
        group.heartbeat(member_id="zed", generation_id=2, now_ms=5000)
        == ErrorCode.UNKNOWN_MEMBER_ID
    )
    rejoin(group, "a", 6000)  # the leader rejoins: a rebalance
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert (
        group.heartbeat(member_id="b", generation_id=1, now_ms=7000)
        == ErrorCode.REBALANCE_IN_PROGRESS
    )
    assert group.members["b"].heartbeat_deadline_ms == 7000 + SESSION
    group.unload()
    assert (
        group.heartbeat(member_id="b", generation_id=1, now_ms=8000)
        == ErrorCode.COORDINATOR_NOT_AVAILABLE
    )


def test_heartbeat_on_an_empty_group() -> None:
    group = Group("g", LIMITS)
    assert group.heartbeat(member_id="a", generation_id=0, now_ms=0) == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )


def test_a_rejected_heartbeat_does_not_keep_the_member_alive() -> None:
    group = stable_group("a", "b")
    group.heartbeat(member_id="b", generation_id=7, now_ms=12_000)
    assert group.members["b"].heartbeat_deadline_ms == DELAY + SESSION


# --- rebalances in a formed group -----------------------------------------------------------


def test_a_new_member_joining_a_stable_group_triggers_a_rebalance() -> None:
    group = stable_group("a", "b")
    assert not join_new(group, "c", 4000)
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert group.join_deadline_ms == 4000 + REBALANCE  # no initial delay any more
    assert group.next_deadline_ms() == DELAY + SESSION  # a's and b's sessions come first
    assert group.heartbeat(member_id="a", generation_id=1, now_ms=4100) == (
        ErrorCode.REBALANCE_IN_PROGRESS
    )
    assert not rejoin(group, "a", 4200)
    answers = rejoin(group, "b", 4300)  # the last known member: the join phase ends
    assert set(answers.joins) == {"a", "b", "c"}
    assert group.generation_id == 2
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert answers.joins["a"].leader == "a"
    assert [m for m, _ in answers.joins["a"].members] == ["a", "b", "c"]
    assert answers.joins["c"].members == ()
    assert group.members["a"].assignment == b""  # the old assignment is gone


def test_a_new_member_joining_while_completing_sends_waiting_syncs_back_to_rejoin() -> None:
    group = completing_group("a", "b")
    sync(group, "b", 1, 4000)
    answers = join_new(group, "c", 4100)
    assert answers.syncs == {"b": SyncAnswer(ErrorCode.REBALANCE_IN_PROGRESS)}
    assert not answers.joins
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert awaiting(group) == ({"c"}, set())
    # the leader's late SyncGroup is for a generation being replaced
    assert sync(group, "a", 1, 4200, {"a": b"A"}).syncs["a"].error == (
        ErrorCode.REBALANCE_IN_PROGRESS
    )


def test_a_follower_rejoining_with_the_same_metadata_gets_the_current_generation() -> None:
    group = stable_group("a", "b")
    answers = rejoin(group, "b", 4000)
    assert answers.joins == {"b": JoinAnswer(ErrorCode.NONE, 1, "consumer", "range", "a", "b", ())}
    assert state(group) is GroupState.STABLE
    # Its session still runs from its SyncGroup: a JoinGroup renews none (Kafka 2.8's
    # doJoinGroup answers it without scheduling a heartbeat expiration).
    assert group.members["b"].heartbeat_deadline_ms == DELAY + SESSION


def test_a_member_rejoining_while_completing_with_the_same_metadata_gets_it_again() -> None:
    group = completing_group("a", "b")
    answers = rejoin(group, "a", 4000)
    assert answers.joins["a"] == JoinAnswer(
        ErrorCode.NONE,
        1,
        "consumer",
        "range",
        "a",
        "a",
        (("a", b"range-meta"), ("b", b"range-meta")),
    )
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert group.generation_id == 1


def test_a_follower_rejoining_while_its_sync_is_held() -> None:
    group = completing_group("a", "b")
    sync(group, "b", 1, 4000)
    # the same metadata (its JoinGroup answer was lost): the generation again, and the
    # SyncGroup stays held
    answers = rejoin(group, "b", 4100)
    assert answers.joins["b"].generation_id == 1
    assert not answers.syncs
    assert awaiting(group) == (set(), {"b"})
    # new metadata: a rebalance, and the held SyncGroup is answered
    answers = rejoin(group, "b", 4200, protocols=(("range", b"new"),))
    assert answers.syncs == {"b": SyncAnswer(ErrorCode.REBALANCE_IN_PROGRESS)}
    assert not answers.joins
    assert awaiting(group) == ({"b"}, set())
    assert state(group) is GroupState.PREPARING_REBALANCE


def test_the_leader_rejoining_a_stable_group_triggers_a_rebalance() -> None:
    group = stable_group("a", "b")
    assert not rejoin(group, "a", 4000)
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert awaiting(group) == ({"a"}, set())


@pytest.mark.parametrize("completing", [False, True])
def test_a_follower_rejoining_with_new_metadata_triggers_a_rebalance(completing: bool) -> None:
    group = completing_group("a", "b") if completing else stable_group("a", "b")
    new = (("range", b"more-topics"),)
    assert not rejoin(group, "b", 4000, protocols=new)
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert group.members["b"].protocols == new
    answers = rejoin(group, "a", 4100)
    assert answers.joins["a"].members == (("a", b"range-meta"), ("b", b"more-topics"))
    assert group.generation_id == 2


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_dropped() -> None:
    group = stable_group("a", "b", "c", session=60_000)
    long = 60_000
    rejoin(group, "b", 4000, session=long)  # b changes nothing: answered, no rebalance
    assert state(group) is GroupState.STABLE
    rejoin(group, "a", 5000, session=long)  # the leader: a rebalance, until 35 000
    assert group.join_deadline_ms == 5000 + REBALANCE
    rejoin(group, "c", 6000, session=long)
    assert group.next_deadline_ms() == 5000 + REBALANCE
    assert not group.tick(5000 + REBALANCE - 1)
    answers = group.tick(5000 + REBALANCE)
    assert set(answers.joins) == {"a", "c"}  # b had nothing waiting
    assert list(group.members) == ["a", "c"]
    assert group.generation_id == 2
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert answers.joins["a"].members == (("a", b"range-meta"), ("c", b"range-meta"))


def test_the_join_phase_lasts_the_longest_rebalance_timeout_of_the_members() -> None:
    """Kafka 2.8's group.rebalanceTimeoutMs is the largest of its members': the join
    phase waits that long for a member that has not rejoined, not the shortest."""
    group = stable_group("a", "b", session=60_000)
    now = DELAY + 100
    assert not join_new(group, "c", now, session=60_000, rebalance=50_000)
    assert not rejoin(group, "a", now, session=60_000)
    assert group.next_deadline_ms() == now + 50_000
    assert not group.tick(now + REBALANCE)  # a's and b's rebalance timeout: b waited for
    assert state(group) is GroupState.PREPARING_REBALANCE
    answers = group.tick(now + 50_000)
    assert answers.joins["a"].generation_id == 2
    assert set(group.members) == {"a", "c"}


def test_the_leader_not_rejoining_in_time_hands_over_to_a_member_that_did() -> None:
    group = stable_group("a", "b", "c", session=60_000)
    join_new(group, "d", 5000)
    rejoin(group, "c", 5100)
    answers = group.tick(5000 + REBALANCE)
    assert list(group.members) == ["c", "d"]
    assert group.leader == "c"
    assert answers.joins["c"].leader == "c"
    assert [m for m, _ in answers.joins["c"].members] == ["c", "d"]
    assert answers.joins["d"].members == ()


def test_nobody_rejoining_in_time_leaves_the_group_empty() -> None:
    group = stable_group("a", "b", session=60_000)
    # the leader rejoins (a rebalance) and then leaves; the follower never rejoins and is
    # dropped at the rebalance timeout, which leaves nobody
    rejoin(group, "a", 4000)
    errors, answers = group.leave(["a"], 4100)
    assert errors == {"a": ErrorCode.NONE}
    assert answers.joins == {"a": JoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID, member_id="")}
    assert state(group) is GroupState.PREPARING_REBALANCE
    answers = group.tick(4000 + REBALANCE)
    assert not answers
    assert state(group) is GroupState.EMPTY
    assert group.generation_id == 2
    assert group.leader == ""
    assert group.protocol_name is None
    assert group.protocol_type == "consumer"  # kept, as Kafka's initNextGeneration keeps it
    empty = group.to_metadata()
    assert (empty.protocol_type, empty.protocol, empty.members) == ("consumer", None, ())
    assert empty.leader is None  # (Kafka's leaderOrNull: no leader is null, not "")
    back = Group.from_metadata("g", empty, LIMITS, 0)
    assert (back.state, back.protocol_type) == (GroupState.EMPTY, "consumer")


# --- session expiry ------------------------------------------------------------------------


def test_session_expiry_of_a_stable_member_drops_it_and_rebalances() -> None:
    group = stable_group("a", "b")
    assert group.next_deadline_ms() == DELAY + SESSION
    group.heartbeat(member_id="a", generation_id=1, now_ms=12_000)
    assert group.next_deadline_ms() == DELAY + SESSION  # b's
    assert not group.tick(DELAY + SESSION - 1)
    answers = group.tick(DELAY + SESSION)
    assert not answers
    assert list(group.members) == ["a"]
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert group.heartbeat(member_id="a", generation_id=1, now_ms=13_500) == (
        ErrorCode.REBALANCE_IN_PROGRESS
    )
    answers = rejoin(group, "a", 14_000)
    assert answers.joins["a"].generation_id == 2
    assert answers.joins["a"].members == (("a", b"range-meta"),)


def test_session_expiry_of_the_leader_elects_another() -> None:
    group = stable_group("a", "b")
    group.heartbeat(member_id="b", generation_id=1, now_ms=12_000)
    group.tick(DELAY + SESSION)
    assert list(group.members) == ["b"]
    assert group.leader == "b"


def test_members_awaiting_a_join_or_sync_answer_do_not_expire() -> None:
    group = completing_group("a", "b", rebalance=60_000)
    sync(group, "b", 1, DELAY)  # b waits for the leader
    group.heartbeat(member_id="a", generation_id=1, now_ms=12_000)
    assert group.next_deadline_ms() == 12_000 + SESSION  # b's session is not timed
    assert not group.tick(20_000)
    assert awaiting(group) == (set(), {"b"})
    group = stable_group("a", "b", rebalance=60_000)
    rejoin(group, "a", 4000)  # a waits for b to rejoin
    group.heartbeat(member_id="b", generation_id=1, now_ms=12_000)
    assert not group.tick(20_000)
    assert awaiting(group) == ({"a"}, set())
    assert rejoin(group, "b", 20_000).joins["a"].generation_id == 2


def test_a_member_told_to_rejoin_after_a_long_sync_wait_gets_a_new_session() -> None:
    """b synced at once and waited; the leader died after its JoinGroup answer. When the
    leader's session ends b is told REBALANCE_IN_PROGRESS, with a new session from then
    (Kafka 2.8's propagateAssignment schedules each answered member's next heartbeat
    expiration, error or not): it was dropped in the next tick, its deadline long
    passed, and its JoinGroup met UNKNOWN_MEMBER_ID."""
    group = completing_group("a", "b")
    assert not sync(group, "b", 1, DELAY + 50)
    told = DELAY + SESSION
    answers = group.tick(told)  # a's session ends
    assert answers.syncs["b"].error == ErrorCode.REBALANCE_IN_PROGRESS
    assert list(group.members) == ["b"]
    assert group.members["b"].heartbeat_deadline_ms == told + SESSION
    assert not group.tick(told + 100)
    assert "b" in group.members
    assert rejoin(group, "b", told + 200).joins["b"].error == ErrorCode.NONE


@pytest.mark.parametrize("how", ["new member", "leave", "store failed"])
def test_members_told_to_rejoin_while_completing_get_a_new_session(how: str) -> None:
    """The other ways a CompletingRebalance group answers its waiting syncs with an
    error (a member joining or leaving, the leader's assignment not written): each
    member answered gets a session from then."""
    group = completing_group("a", "b", "c")
    assert not sync(group, "b", 1, DELAY)
    now = DELAY + SESSION + 500  # b waited longer than its session
    for m in ("a", "c"):
        assert group.heartbeat(member_id=m, generation_id=1, now_ms=now) == ErrorCode.NONE
    if how == "new member":
        answers = join_new(group, "d", now)
    elif how == "leave":
        _errors, answers = group.leave(["c"], now)
    else:
        group.persist = True
        assert sync(group, "c", 1, now).syncs == {}
        stored = sync(group, "a", 1, now, {"a": b"x"})
        assert stored.store
        answers = group.assignment_store_failed(1, ErrorCode.NOT_COORDINATOR, now)
    assert answers.syncs["b"].error != ErrorCode.NONE
    assert group.members["b"].heartbeat_deadline_ms == now + SESSION
    group.tick(now + 100)
    assert "b" in group.members


def test_session_expiry_while_others_rejoin_completes_the_join_phase() -> None:
    group = stable_group("a", "b")
    rejoin(group, "a", 4000)
    answers = group.tick(DELAY + SESSION)  # b never rejoined nor heartbeat
    assert set(answers.joins) == {"a"}
    assert list(group.members) == ["a"]
    assert group.generation_id == 2


# --- LeaveGroup -----------------------------------------------------------------------------


def test_a_follower_leaving_makes_the_others_rebalance() -> None:
    group = stable_group("a", "b", "c")
    errors, answers = group.leave(["b"], 4000)
    assert errors == {"b": ErrorCode.NONE}
    assert not answers
    assert list(group.members) == ["a", "c"]
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert group.leader == "a"
    rejoin(group, "a", 4100)
    answers = rejoin(group, "c", 4200)
    assert set(answers.joins) == {"a", "c"}
    assert group.generation_id == 2


def test_leave_errors_per_member() -> None:
    group = stable_group("a", "b")
    errors, _ = group.leave(["b", "ghost"], 4000)
    assert errors == {"b": ErrorCode.NONE, "ghost": ErrorCode.UNKNOWN_MEMBER_ID}
    errors, _ = group.leave(["b"], 4000)
    assert errors == {"b": ErrorCode.UNKNOWN_MEMBER_ID}


def test_several_members_leaving_at_once() -> None:
    group = stable_group("a", "b", "c")
    errors, answers = group.leave(["a", "c"], 4000)
    assert errors == {"a": ErrorCode.NONE, "c": ErrorCode.NONE}
    assert not answers
    assert list(group.members) == ["b"]
    assert group.leader == "b"
    assert state(group) is GroupState.PREPARING_REBALANCE
    errors, answers = group.leave(["b"], 4100)
    assert state(group) is GroupState.EMPTY
    assert group.generation_id == 2


def test_the_last_member_leaving_empties_the_group_at_once() -> None:
    group = stable_group("a")
    errors, answers = group.leave(["a"], 4000)
    assert errors == {"a": ErrorCode.NONE}
    assert not answers
    assert state(group) is GroupState.EMPTY
    assert group.generation_id == 2
    assert group.leader == ""
    assert group.next_deadline_ms() is None


def test_a_member_leaving_while_awaiting_its_join_is_answered_and_the_rest_proceed() -> None:
    group = stable_group("a", "b")
    join_new(group, "c", 4000)
    rejoin(group, "a", 4100)
    errors, answers = group.leave(["c"], 4200)
    assert errors == {"c": ErrorCode.NONE}
    assert answers.joins["c"] == JoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID, member_id="")
    # (its waiting JoinGroup told with no member id, as Kafka's removeMemberAndUpdateGroup)
    assert state(group) is GroupState.PREPARING_REBALANCE  # b has not rejoined
    errors, answers = group.leave(["b"], 4300)
    assert set(answers.joins) == {"a"}  # now all that are left have joined
    assert answers.joins["a"].error == ErrorCode.NONE
    assert answers.joins["a"].generation_id == 2


def test_the_leader_leaving_hands_the_lead_to_another_member() -> None:
    group = stable_group("a", "b", "c")
    group.leave(["a"], 4000)
    assert group.leader == "b"
    assert state(group) is GroupState.PREPARING_REBALANCE
    rejoin(group, "c", 4100)
    answers = rejoin(group, "b", 4200)
    assert answers.joins["b"].leader == "b"
    assert [m for m, _ in answers.joins["b"].members] == ["b", "c"]
    assert answers.joins["c"].leader == "b"
    assert answers.joins["c"].members == ()


def test_the_leader_leaving_while_completing_sends_waiting_syncs_back() -> None:
    group = completing_group("a", "b")
    sync(group, "b", 1, 4000)
    _, answers = group.leave(["a"], 4100)
    assert answers.syncs == {"b": SyncAnswer(ErrorCode.REBALANCE_IN_PROGRESS)}
    assert group.leader == "b"
    assert state(group) is GroupState.PREPARING_REBALANCE
    answers = rejoin(group, "b", 4200)
    assert answers.joins["b"].generation_id == 2
    assert answers.joins["b"].members == (("b", b"range-meta"),)


def test_leaving_a_dead_group() -> None:
    group = stable_group("a")
    group.unload()
    errors, answers = group.leave(["a", "ghost"], 4000)
    assert errors == {
        "a": ErrorCode.COORDINATOR_NOT_AVAILABLE,
        "ghost": ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
    assert not answers


# --- KIP-394: MEMBER_ID_REQUIRED ------------------------------------------------------------


def test_member_id_required_then_the_member_joins_with_its_id() -> None:
    group = Group("g", LIMITS)
    answers = join_new(group, "a-1", 0, require=True)
    assert answers.joins == {"a-1": JoinAnswer(ErrorCode.MEMBER_ID_REQUIRED, member_id="a-1")}
    assert state(group) is GroupState.EMPTY
    assert not group.members
    assert group.pending_members == {"a-1": SESSION}
    assert group.next_deadline_ms() == SESSION
    assert not rejoin(group, "a-1", 50)
    assert not group.pending_members
    assert list(group.members) == ["a-1"]
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert group.tick(50 + DELAY).joins["a-1"].generation_id == 1


def test_joining_with_an_id_nobody_was_given_is_unknown() -> None:
    group = Group("g", LIMITS)
    assert rejoin(group, "made-up", 0).joins == {
        "made-up": JoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID, member_id="made-up")
    }
    assert state(group) is GroupState.EMPTY
    group = stable_group("a")
    assert rejoin(group, "made-up", 4000).joins["made-up"].error == ErrorCode.UNKNOWN_MEMBER_ID
    assert state(group) is GroupState.STABLE


def test_the_join_phase_waits_for_pending_members() -> None:
    group = stable_group("a")
    join_new(group, "b", 4000, require=True)
    assert state(group) is GroupState.STABLE  # a pending member is no reason to rebalance
    assert not rejoin(group, "a", 4100)  # the leader's rejoin: a rebalance
    assert state(group) is GroupState.PREPARING_REBALANCE
    answers = rejoin(group, "b", 4200)
    assert set(answers.joins) == {"a", "b"}
    assert group.generation_id == 2


def test_a_pending_member_that_never_rejoins_expires_and_the_join_phase_ends() -> None:
    group = stable_group("a", rebalance=60_000)
    join_new(group, "b", 5000, require=True)
    assert group.pending_members == {"b": 5000 + SESSION}
    rejoin(group, "a", 6000)
    assert group.next_deadline_ms() == 5000 + SESSION
    assert not group.tick(5000 + SESSION - 1)
    answers = group.tick(5000 + SESSION)
    assert set(answers.joins) == {"a"}
    assert not group.pending_members
    assert group.generation_id == 2
    assert rejoin(group, "b", 16_000).joins["b"].error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_pending_member_expires_in_a_stable_group_too() -> None:
    group = stable_group("a")
    join_new(group, "b", 5000, require=True)
    assert group.next_deadline_ms() == DELAY + SESSION  # a's session first
    group.heartbeat(member_id="a", generation_id=1, now_ms=12_000)
    assert group.next_deadline_ms() == 5000 + SESSION  # then b's pending deadline
    assert not group.tick(5000 + SESSION - 1)
    assert group.pending_members
    assert not group.tick(5000 + SESSION)
    assert not group.pending_members
    assert state(group) is GroupState.STABLE


def test_a_pending_member_is_not_yet_a_member() -> None:
    group = stable_group("a")
    join_new(group, "b", 4000, require=True)
    assert group.heartbeat(member_id="b", generation_id=1, now_ms=4100) == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert sync(group, "b", 1, 4100).syncs["b"].error == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.check_commit("b", 1, 4100) == ErrorCode.UNKNOWN_MEMBER_ID
    assert "b" in group.pending_members


def test_a_pending_member_may_leave() -> None:
    group = stable_group("a")
    join_new(group, "b", 4000, require=True)
    rejoin(group, "a", 4100)
    errors, answers = group.leave(["b"], 4200)
    assert errors == {"b": ErrorCode.NONE}
    assert set(answers.joins) == {"a"}  # nobody else to wait for
    assert not group.pending_members


def test_a_pending_member_outlives_a_join_phase_it_missed() -> None:
    """Kafka keeps a pending member until its session timeout: one that rejoins after the
    join phase it was waited for ended (at the rebalance timeout) is still accepted."""
    group = stable_group("a", session=60_000, rebalance=1000)
    join_new(group, "b", 5000, require=True, session=20_000)
    rejoin(group, "a", 6000, rebalance=1000, session=60_000)
    answers = group.tick(7000)
    assert set(answers.joins) == {"a"}
    assert group.pending_members == {"b": 25_000}
    assert not rejoin(group, "b", 8000, session=20_000)
    assert "b" in group.members
    assert state(group) is GroupState.PREPARING_REBALANCE


# --- refused joins ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("session", "ok"), [(999, False), (1000, True), (60_000, True), (60_001, False)]
)
def test_session_timeout_bounds(session: int, ok: bool) -> None:
    group = Group("g", LIMITS)
    answers = join_new(group, "a", 0, session=session)
    if ok:
        assert not answers
        assert "a" in group.members
    else:
        assert answers.joins == {"a": JoinAnswer(ErrorCode.INVALID_SESSION_TIMEOUT)}
        assert state(group) is GroupState.EMPTY
        assert not group.members


def test_invalid_session_timeout_leaves_a_known_member_as_it_was() -> None:
    group = stable_group("a", "b")
    answers = rejoin(group, "b", 4000, session=100)
    assert answers.joins == {
        "b": JoinAnswer(ErrorCode.INVALID_SESSION_TIMEOUT, member_id="b"),
    }
    assert group.members["b"].session_timeout_ms == SESSION
    assert state(group) is GroupState.STABLE


@pytest.mark.parametrize(
    ("protocol_type", "protocols"),
    [
        ("connect", RANGE),  # another protocol type
        ("consumer", (("roundrobin", b""),)),  # nothing in common
        ("consumer", ()),  # no protocol at all
        ("consumer", (("range", b"1"), ("range", b"2"))),  # a protocol twice
    ],
)
def test_inconsistent_group_protocol(
    protocol_type: str, protocols: tuple[tuple[str, bytes], ...]
) -> None:
    group = stable_group("a")
    answers = join_new(group, "b", 4000, protocol_type=protocol_type, protocols=protocols)
    assert answers.joins == {"b": JoinAnswer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)}
    assert list(group.members) == ["a"]
    assert state(group) is GroupState.STABLE
    # a known member too
    answers = rejoin(group, "a", 4000, protocol_type=protocol_type, protocols=protocols)
    assert answers.joins["a"].error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert group.members["a"].protocols == RANGE
    assert state(group) is GroupState.STABLE


@pytest.mark.parametrize(
    ("protocol_type", "protocols"),
    [("", RANGE), ("consumer", ()), ("consumer", (("x", b""), ("x", b"")))],
)
def test_the_first_member_needs_a_protocol_type_and_protocols(
    protocol_type: str, protocols: tuple[tuple[str, bytes], ...]
) -> None:
    group = Group("g", LIMITS)
    answers = join_new(group, "a", 0, protocol_type=protocol_type, protocols=protocols)
    assert answers.joins["a"].error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert state(group) is GroupState.EMPTY
    assert group.protocol_type is None


def test_a_member_may_not_leave_the_group_without_a_common_protocol() -> None:
    group = Group("g", LIMITS)
    join_new(group, "a", 0, protocols=(("range", b""), ("roundrobin", b"")))
    join_new(group, "b", 0, protocols=(("range", b""),))
    # a may drop roundrobin but not range, which is all b supports
    assert (
        rejoin(group, "a", 10, protocols=(("roundrobin", b""),)).joins["a"].error
        == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    )
    assert not rejoin(group, "a", 20, protocols=(("range", b""), ("sticky", b"")))
    assert group.candidate_protocols() == {"range"}


# --- group.max.size ------------------------------------------------------------------------

MAX_TWO = dataclasses.replace(LIMITS, max_size=2)
FULL = JoinAnswer(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id="")


def test_a_full_stable_group_refuses_a_new_member_and_takes_its_own_back() -> None:
    """Kafka 2.8's acceptJoiningMember: CompletingRebalance and Stable take a known member
    and new ones while the group has fewer than group.max.size; the refusal names no
    member id and changes nothing."""
    group = stable_group("a", "b", limits=MAX_TWO)
    now = DELAY + 10
    assert join_new(group, "c", now).joins == {"c": FULL}
    assert join_new(group, "c", now, require=True).joins == {"c": FULL}  # (before KIP-394)
    assert not group.pending_members
    assert (state(group), list(group.members)) == (GroupState.STABLE, ["a", "b"])
    assert rejoin(group, "b", now).joins["b"].generation_id == 1  # its own place
    # CompletingRebalance too.
    assert not rejoin(group, "a", now, protocols=(("range", b"v2"),))
    rejoin(group, "b", now)
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert join_new(group, "c", now).joins == {"c": FULL}
    assert list(group.members) == ["a", "b"]


def test_a_member_told_to_rejoin_with_its_id_may_find_the_group_full() -> None:
    group = stable_group("a", limits=MAX_TWO)
    now = DELAY + 10
    assert join_new(group, "p", now, require=True).joins["p"].error == (
        ErrorCode.MEMBER_ID_REQUIRED
    )
    join_new(group, "b", now)  # the second place goes meanwhile
    rejoin(group, "a", now)
    assert state(group) is GroupState.PREPARING_REBALANCE  # (waiting for p)
    assert rejoin(group, "p", now + 10).joins == {"p": FULL}
    # Kafka's remove() leaves a pending id: the phase waits for it until it expires.
    assert group.pending_members == {"p": now + SESSION}
    assert set(group.tick(now + SESSION).joins) == {"a", "b"}


def test_a_static_member_restarting_into_a_full_stable_group_is_refused() -> None:
    """Kafka's rule counts a JoinGroup without a member id as a new member, a static one
    coming back to its place too."""
    group = Group("g", MAX_TWO)
    for instance in ("a", "b"):
        # (joined a delay early: see completing_group)
        join_new(group, f"{instance}1", -DELAY, group_instance_id=instance)
    group.tick(DELAY)
    sync(group, "a1", 1, DELAY, {"a1": b"A", "b1": b"B"})
    answers = join_new(group, "b2", DELAY + 10, group_instance_id="b")
    assert answers.joins == {"b2": FULL}
    assert group.static_members == {"a": "a1", "b": "b1"}


def test_preparing_a_rebalance_counts_the_members_that_rejoined() -> None:
    """Kafka's PreparingRebalance takes a member already rejoined, and any other while
    fewer than group.max.size have: one past that is refused and removed from the group
    (a known member: GroupMetadata.remove), which may end the join phase."""
    group = stable_group("a", "b", "c")
    written = dataclasses.replace(group.to_metadata(), generation=4)
    # Read back by a coordinator whose group.max.size is lower: it rebalances at once
    # (Kafka's onGroupLoaded: "Freshly-loaded group is over capacity").
    back = Group.from_metadata("g", written, MAX_TWO, 10_000)
    assert state(back) is GroupState.PREPARING_REBALANCE
    assert back.join_deadline_ms == 10_000 + REBALANCE
    assert back.heartbeat(member_id="c", generation_id=4, now_ms=10_001) == (
        ErrorCode.REBALANCE_IN_PROGRESS
    )
    assert not rejoin(back, "b", 10_010)
    assert not join_new(back, "d", 10_020)  # one rejoined: a place left
    back.leave(["d"], 10_030)
    assert not rejoin(back, "c", 10_040)
    assert not rejoin(back, "c", 10_050)  # (already rejoined: taken again)
    assert join_new(back, "e", 10_060).joins == {"e": FULL}
    answers = rejoin(back, "a", 10_070)
    # a, the leader, is refused and removed: b and c, all that are left, have rejoined.
    assert answers.joins["a"] == FULL
    assert set(answers.joins) == {"a", "b", "c"}
    assert answers.joins["b"].generation_id == 5
    assert answers.joins["b"].leader == "b"
    assert list(back.members) == ["b", "c"]
    assert state(back) is GroupState.COMPLETING_REBALANCE


def test_a_group_within_group_max_size_is_read_back_stable() -> None:
    group = stable_group("a", "b")
    back = Group.from_metadata("g", group.to_metadata(), MAX_TWO, 10_000)
    assert state(back) is GroupState.STABLE


def test_an_empty_group_takes_its_first_member_whatever_the_limit() -> None:
    group = Group("g", dataclasses.replace(LIMITS, max_size=1))
    assert not join_new(group, "a", 0)
    assert join_new(group, "b", 10).joins == {"b": FULL}
    assert set(group.tick(DELAY).joins) == {"a"}


# --- protocol selection ------------------------------------------------------------------------


def _protocols(*names: str) -> tuple[tuple[str, bytes], ...]:
    return tuple((name, name.encode()) for name in names)


@pytest.mark.parametrize(
    ("preferences", "chosen"),
    [
        ((("range", "roundrobin"), ("roundrobin", "range"), ("roundrobin",)), "roundrobin"),
        ((("range", "roundrobin"), ("roundrobin", "range"), ("range", "roundrobin")), "range"),
        # a tie goes to the first member's earlier choice
        ((("range", "roundrobin"), ("roundrobin", "range")), "range"),
        ((("roundrobin", "range"), ("range", "roundrobin")), "roundrobin"),
        # votes go to the first protocol every member supports
        ((("sticky", "range"), ("range",)), "range"),
        (
            (("sticky", "roundrobin", "range"), ("range", "roundrobin"), ("roundrobin",)),
            "roundrobin",
        ),
    ],
)
def test_protocol_selection_by_votes(preferences: tuple[tuple[str, ...], ...], chosen: str) -> None:
    group = Group("g", LIMITS)
    ids = [f"m{i}" for i in range(len(preferences))]
    for member_id, names in zip(ids, preferences, strict=True):
        join_new(group, member_id, 0, protocols=_protocols(*names))
    assert group.select_protocol() == chosen
    answers = group.tick(2 * DELAY)
    assert group.protocol_name == chosen
    leader = answers.joins["m0"]
    assert leader.protocol_name == chosen
    assert leader.members == tuple((m, chosen.encode()) for m in ids)
    assert {a.protocol_name for a in answers.joins.values()} == {chosen}


def test_candidate_protocols_are_those_every_member_supports() -> None:
    group = Group("g", LIMITS)
    join_new(group, "a", 0, protocols=_protocols("range", "roundrobin", "sticky"))
    assert group.candidate_protocols() == {"range", "roundrobin", "sticky"}
    join_new(group, "b", 0, protocols=_protocols("sticky", "range"))
    assert group.candidate_protocols() == {"range", "sticky"}
    group.leave(["a"], 10)
    assert group.candidate_protocols() == {"range", "sticky"}


def test_member_metadata_lookup() -> None:
    member = Member("m", "c", "h", SESSION, REBALANCE, "consumer", _protocols("range", "sticky"))
    assert member.protocol_names() == ["range", "sticky"]
    assert member.metadata("sticky") == b"sticky"
    with pytest.raises(KeyError):
        member.metadata("roundrobin")


# --- the sync deadline -------------------------------------------------------------------------


def test_a_leader_that_never_syncs_is_dropped_and_the_rest_rebalance() -> None:
    group = completing_group("a", "b", "c", session=60_000)
    assert group.sync_deadline_ms == DELAY + REBALANCE
    sync(group, "b", 1, DELAY + 100)
    assert group.next_deadline_ms() == DELAY + REBALANCE
    assert not group.tick(DELAY + REBALANCE - 1)
    answers = group.tick(DELAY + REBALANCE)
    # a (the leader) and c never sent SyncGroup; b's is answered: rejoin
    assert answers.syncs == {"b": SyncAnswer(ErrorCode.REBALANCE_IN_PROGRESS)}
    assert not answers.joins
    assert list(group.members) == ["b"]
    assert group.leader == "b"
    assert state(group) is GroupState.PREPARING_REBALANCE
    answers = rejoin(group, "b", DELAY + REBALANCE + 10)
    assert answers.joins["b"].generation_id == 2
    assert answers.joins["b"].leader == "b"


def test_nobody_syncing_in_time_empties_the_group() -> None:
    group = completing_group("a", "b", session=60_000)
    answers = group.tick(DELAY + REBALANCE)
    assert not answers
    assert state(group) is GroupState.EMPTY
    assert not group.members
    assert group.generation_id == 2


def test_the_sync_deadline_with_a_zero_rebalance_timeout() -> None:
    """Regression: dropping the first unsynced member restarted and ended a join phase at
    once (a zero rebalance timeout), which dropped the other unsynced member too; the loop
    then tried to remove it again (KeyError)."""
    group = Group("g", GroupLimits(1000, 60_000, 50))
    join_new(group, "b", 0, rebalance=100)
    join_new(group, "a", 10, rebalance=0)
    assert not group.tick(50)  # a joined in the delay: 50 more, all the timeout leaves
    assert set(group.tick(100).joins) == {"a", "b"}
    assert group.sync_deadline_ms == 200
    answers = group.tick(200)
    assert not answers
    assert state(group) is GroupState.EMPTY
    assert not group.members
    assert group.generation_id == 2


def test_a_member_that_never_syncs_is_dropped_from_a_stable_group_at_the_sync_deadline() -> None:
    """Kafka 2.8's schedulePendingSync/onExpirePendingSync: every member of a generation
    owes a SyncGroup within the rebalance timeout, in CompletingRebalance or Stable; those
    that did not send one by then are removed and the group rebalances. Regression: the
    leader's SyncGroup made the group Stable and the deadline was forgotten, so a member
    that heartbeats and never syncs (it has no assignment) stayed for good."""
    group = completing_group("a", "b", "c")
    assert group.pending_sync == {"a", "b", "c"}
    sync(group, "a", 1, DELAY + 100, {"a": b"A", "b": b"B", "c": b"C"})
    assert state(group) is GroupState.STABLE
    # b asks for its assignment in the Stable group: it owes nothing more
    assert sync(group, "b", 1, DELAY + 200).syncs["b"].assignment == b"B"
    assert group.pending_sync == {"c"}
    assert group.next_deadline_ms() == DELAY + 100 + SESSION  # c's session, from a's sync
    now = DELAY + 200
    while now + 1000 < DELAY + REBALANCE:
        now += 1000
        for member_id in ("a", "b", "c"):
            assert group.heartbeat(member_id=member_id, generation_id=1, now_ms=now) == (
                ErrorCode.NONE
            )
        assert not group.tick(now)
    assert group.next_deadline_ms() == DELAY + REBALANCE
    assert not group.tick(DELAY + REBALANCE - 1)
    answers = group.tick(DELAY + REBALANCE)
    assert not answers
    assert list(group.members) == ["a", "b"]
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert not group.pending_sync
    assert group.join_deadline_ms == DELAY + REBALANCE + REBALANCE
    answer = group.heartbeat(member_id="c", generation_id=1, now_ms=DELAY + REBALANCE)
    assert answer == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_rebalance_forgets_who_owed_a_sync() -> None:
    """Kafka's prepareRebalance cancels the pending sync (removeSyncExpiration): the next
    generation's members owe one from its own start."""
    group = completing_group("a", "b", "c", session=60_000)
    sync(group, "a", 1, DELAY, {"a": b"A"})
    assert group.pending_sync == {"b", "c"}
    group.leave(["c"], DELAY + 10)
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert not group.pending_sync
    rejoin(group, "a", DELAY + 20, session=60_000)
    rejoin(group, "b", DELAY + 20, session=60_000)
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert group.pending_sync == {"a", "b"}
    sync(group, "a", 2, DELAY + 30, {"a": b"A", "b": b"B"})
    assert not group.tick(DELAY + REBALANCE)  # generation 1's deadline is gone
    assert group.tick(DELAY + 20 + REBALANCE - 1) == Answers()
    group.tick(DELAY + 20 + REBALANCE)
    assert list(group.members) == ["a"]
    assert state(group) is GroupState.PREPARING_REBALANCE


# --- unload -----------------------------------------------------------------------------------


def test_unload_answers_waiting_joins_not_coordinator() -> None:
    group = Group("g", LIMITS)
    join_new(group, "a", 0)
    join_new(group, "b", 0)
    answers = group.unload()
    assert answers.joins == {
        "a": JoinAnswer(ErrorCode.NOT_COORDINATOR, member_id="a"),
        "b": JoinAnswer(ErrorCode.NOT_COORDINATOR, member_id="b"),
    }
    assert not answers.syncs
    assert state(group) is GroupState.DEAD
    assert awaiting(group) == (set(), set())


def test_unload_answers_waiting_syncs_not_coordinator() -> None:
    group = completing_group("a", "b", "c")
    sync(group, "b", 1, DELAY)
    sync(group, "c", 1, DELAY)
    answers = group.unload()
    assert answers.syncs == {
        "b": SyncAnswer(ErrorCode.NOT_COORDINATOR),
        "c": SyncAnswer(ErrorCode.NOT_COORDINATOR),
    }
    assert not answers.joins


def test_a_dead_group_refuses_everything_and_times_nothing() -> None:
    group = stable_group("a", "b")
    assert not group.unload()  # nothing was waiting
    assert state(group) is GroupState.DEAD
    assert group.next_deadline_ms() is None
    assert not group.tick(10**9)
    assert "a" in group.members
    assert rejoin(group, "a", 5000).joins["a"] == JoinAnswer(
        ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id="a"
    )
    assert join_new(group, "c", 5000).joins["c"].error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert sync(group, "a", 1, 5000).syncs["a"].error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert group.check_commit("a", 1, 5000) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert group.check_commit("", -1, 5000) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert state(group) is GroupState.DEAD


# --- OffsetCommit ------------------------------------------------------------------------------


def test_check_commit_on_an_empty_group() -> None:
    group = Group("g", LIMITS)
    # a consumer assigning its own partitions: generation -1, any member id
    assert group.check_commit("", -1, 0) == ErrorCode.NONE
    assert group.check_commit("whoever", -1, 0) == ErrorCode.NONE
    assert group.check_commit("whoever", 0, 0) == ErrorCode.UNKNOWN_MEMBER_ID
    group = stable_group("a")
    group.leave(["a"], 4000)
    assert state(group) is GroupState.EMPTY
    assert group.check_commit("", -1, 4000) == ErrorCode.NONE
    assert group.check_commit("a", 1, 4000) == ErrorCode.UNKNOWN_MEMBER_ID


def test_check_commit_by_state() -> None:
    group = completing_group("a", "b")
    assert group.check_commit("a", 1, 4000) == ErrorCode.REBALANCE_IN_PROGRESS
    assert group.check_commit("a", 0, 4000) == ErrorCode.ILLEGAL_GENERATION
    assert group.check_commit("x", 1, 4000) == ErrorCode.UNKNOWN_MEMBER_ID
    # generation -1 only passes on an Empty group
    assert group.check_commit("", -1, 4000) == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.check_commit("a", -1, 4000) == ErrorCode.ILLEGAL_GENERATION
    sync(group, "a", 1, 4000, {"a": b"A", "b": b"B"})
    assert group.check_commit("b", 1, 9000) == ErrorCode.NONE
    assert group.members["b"].heartbeat_deadline_ms == 9000 + SESSION  # a sign of life
    assert group.check_commit("b", 2, 9500) == ErrorCode.ILLEGAL_GENERATION
    assert group.members["b"].heartbeat_deadline_ms == 9000 + SESSION
    assert group.check_commit("nobody", 1, 9500) == ErrorCode.UNKNOWN_MEMBER_ID
    # while preparing a rebalance the current generation may still commit
    join_new(group, "c", 10_000)
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert group.check_commit("b", 1, 10_500) == ErrorCode.NONE
    assert group.check_commit("c", 1, 10_500) == ErrorCode.NONE  # c is a member already
    group.unload()
    assert group.check_commit("b", 1, 11_000) == ErrorCode.COORDINATOR_NOT_AVAILABLE


# --- next_deadline_ms ------------------------------------------------------------------------


def test_next_deadline_follows_the_state() -> None:
    group = Group("g", LIMITS)
    assert group.next_deadline_ms() is None
    join_new(group, "p", 0, require=True, session=20_000)
    assert group.next_deadline_ms() == 20_000  # a pending member
    join_new(group, "a", 100)
    assert group.next_deadline_ms() == 100 + DELAY  # the join phase
    group.tick(100 + DELAY)
    # CompletingRebalance: the earliest of the sessions and the sync deadline
    assert group.next_deadline_ms() == 100 + DELAY + SESSION
    group.heartbeat(member_id="a", generation_id=1, now_ms=5000)
    assert group.next_deadline_ms() == 5000 + SESSION
    sync(group, "a", 1, 6000, {"a": b"A"})
    assert group.next_deadline_ms() == 6000 + SESSION  # Stable: the session
    group.leave(["p"], 6000)
    group.leave(["a"], 6000)
    assert group.next_deadline_ms() is None


def test_the_sync_deadline_can_come_first() -> None:
    group = completing_group("a", session=60_000, rebalance=20_000)
    assert group.next_deadline_ms() == DELAY + 20_000


def test_answers_are_truthy_only_with_an_answer() -> None:
    assert not Answers()
    assert Answers(joins={"a": JoinAnswer(ErrorCode.NONE)})
    assert Answers(syncs={"a": SyncAnswer(ErrorCode.NONE)})


# --- regressions -------------------------------------------------------------------------------


def test_the_last_member_leaving_during_the_initial_delay_waits_out_the_delay() -> None:
    """Kafka 2.8's InitialDelayedJoin never completes early (its tryComplete is false):
    with its last member gone, the group stays PreparingRebalance until the delay ends,
    keeping its protocol type (a member of another is refused, as supportsProtocols does
    outside Empty); one of the same type joining meanwhile extends the delay, as any new
    member of generation 0 does, and leads generation 1."""
    group = Group("g", LIMITS)
    join_new(group, "a", 0)
    errors, answers = group.leave(["a"], 10)
    assert errors == {"a": ErrorCode.NONE}
    assert answers.joins == {"a": JoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID, member_id="")}
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert (group.generation_id, group.protocol_type) == (0, "consumer")
    answers = join_new(group, "x", 20, protocol_type="connect", protocols=(("x", b""),))
    assert answers.joins == {"x": JoinAnswer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)}
    # Any protocol of the group's type will do: no member is left to have one in common.
    assert not join_new(group, "b", 20, protocols=(("roundrobin", b""),))
    assert not group.tick(DELAY)  # b came in the delay: one more
    answers = group.tick(2 * DELAY)
    assert set(answers.joins) == {"b"}
    assert answers.joins["b"].generation_id == 1
    assert answers.joins["b"].protocol_name == "roundrobin"


def test_the_last_member_leaving_during_the_initial_delay_then_the_group_is_empty() -> None:
    group = Group("g", LIMITS)
    join_new(group, "a", 0)
    group.leave(["a"], 10)
    assert group.next_deadline_ms() == DELAY
    assert not group.tick(DELAY - 1)
    assert not group.tick(DELAY)
    assert state(group) is GroupState.EMPTY
    assert (group.generation_id, group.protocol_type) == (1, "consumer")
    # An Empty group takes a member of any protocol type (Kafka's add()).
    join_new(group, "b", DELAY + 10, protocol_type="connect", protocols=(("x", b""),))
    assert group.protocol_type == "connect"
    answers = group.tick(2 * DELAY + 10)
    assert answers.joins["b"].protocol_type == "connect"
    assert answers.joins["b"].generation_id == 2


def test_the_last_member_leaving_a_rebalance_that_waits_for_a_pending_one() -> None:
    """Kafka 2.8's hasAllMembersJoined (members.size == numMembersAwaitingJoin &&
    pendingMembers.isEmpty) is false while a member told MEMBER_ID_REQUIRED has not
    joined, members or none: the join phase waits for it, and its join completes the
    phase at once, the next generation its own."""
    group = stable_group("a")
    join_new(group, "b", 4000, require=True)
    rejoin(group, "a", 4100)
    group.leave(["a"], 4200)
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert not group.members
    assert group.generation_id == 1
    answers = rejoin(group, "b", 4300)
    assert set(answers.joins) == {"b"}
    assert answers.joins["b"].generation_id == 2
    assert answers.joins["b"].leader == "b"
    assert state(group) is GroupState.COMPLETING_REBALANCE


def test_the_last_member_leaving_a_rebalance_ends_it_when_the_pending_one_expires() -> None:
    group = stable_group("a", rebalance=60_000)
    join_new(group, "b", 4000, require=True)
    rejoin(group, "a", 4100, rebalance=60_000)
    group.leave(["a"], 4200)
    assert group.next_deadline_ms() == 4000 + SESSION
    assert not group.tick(4000 + SESSION - 1)
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert not group.tick(4000 + SESSION)
    assert state(group) is GroupState.EMPTY
    assert group.generation_id == 2


# --- properties: random operations from a few clients ------------------------------------------

CLIENTS = ("a", "b", "c")
# "auto": the client's natural next step (join, sync, heartbeat, rejoin when told to);
# the others are the request named, well-formed or not.
KINDS = (
    *("auto",) * 8,
    "join",
    "join",
    "sync",
    "sync",
    "heartbeat",
    "leave",
    "commit",
    "tick",
    "tick",
    "tick",
    "unload",
)
DTS = (0, 0, 1, 50, 50, 400, 400, 1500, 4000, 12_000, 40_000)
PROTOCOL_SETS: tuple[tuple[tuple[str, bytes], ...], ...] = (
    (("range", b"r0"), ("roundrobin", b"rr0")),
    (("roundrobin", b"rr1"), ("range", b"r1")),
    (("sticky", b"s2"), ("range", b"r2")),
    (("sticky", b"s3"),),  # nothing in common with the first two
)
# 500 and 90 000 are out of the bounds below
SESSIONS = (500, 3000, 8000, 8000, 25_000, 25_000, 90_000)
REBALANCES = (0, 1500, 6000, 6000, 20_000)
PROPERTY_LIMITS = (2000, 60_000)


@dataclass(frozen=True)
class Op:
    kind: str
    client: str
    dt: int
    variant: int


OPS = st.builds(
    Op,
    kind=st.sampled_from(KINDS),
    client=st.sampled_from(CLIENTS),
    dt=st.sampled_from(DTS),
    variant=st.integers(0, 2**16 - 1),
)


@dataclass
class Client:
    """What a consumer knows: its member id, its generation, the members it leads."""

    name: str
    member_id: str = ""
    generation: int = -1
    protocol_name: str | None = None
    leads: tuple[str, ...] = ()
    protocols: int = 0
    synced: int = -1  # the generation of its last assignment
    rejoin: bool = False  # told to rejoin (a rebalance, or a generation gone)
    # Its one request the coordinator holds ("join" or "sync"), under which id.
    waiting: str | None = None
    key: str = ""

    def forget(self) -> None:
        self.member_id, self.generation, self.leads, self.rejoin = "", -1, (), False

    def next_step(self) -> str | None:
        if self.waiting:
            return "heartbeat" if self.generation >= 0 else None
        if not self.member_id or self.generation < 0 or self.rejoin:
            return "join"
        if self.synced != self.generation:
            return "sync"
        return "heartbeat"

    def told(self, error: ErrorCode) -> None:
        """What a client does with an error from SyncGroup, Heartbeat or OffsetCommit."""
        if error == ErrorCode.UNKNOWN_MEMBER_ID:
            self.forget()
        elif error in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
            self.rejoin = True


class _Produced:
    """The group an operation under test runs on, for checks as each answer is made."""

    group: Group | None = None


def _check_join_answer(group: Group, key: str, answer: JoinAnswer) -> None:
    if answer.error != ErrorCode.NONE:
        assert answer.generation_id == -1
        assert answer.members == ()
        return
    assert group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
    assert answer.generation_id == group.generation_id
    assert answer.member_id == key
    assert key in group.members
    assert answer.leader == group.leader
    assert answer.leader in group.members
    assert answer.protocol_type == group.protocol_type
    assert answer.protocol_name == group.protocol_name
    assert answer.protocol_name in group.members[key].protocol_names()
    if key == group.leader:
        assert answer.members == tuple(
            (m, x.metadata(answer.protocol_name)) for m, x in group.members.items()
        )
    else:
        assert answer.members == ()


def _check_sync_answer(group: Group, key: str, answer: SyncAnswer) -> None:
    if answer.error == ErrorCode.NONE:
        assert state(group) is GroupState.STABLE
        assert answer.assignment == group.members[key].assignment
        assert answer.protocol_name == group.protocol_name
    else:
        assert answer.assignment == b""


class _OnceJoins(dict[str, JoinAnswer]):
    def __setitem__(self, key: str, value: JoinAnswer, /) -> None:
        assert key not in self, f"two join answers for {key} in one operation"
        if _Produced.group is not None:
            _check_join_answer(_Produced.group, key, value)
        super().__setitem__(key, value)


class _OnceSyncs(dict[str, SyncAnswer]):
    def __setitem__(self, key: str, value: SyncAnswer, /) -> None:
        assert key not in self, f"two sync answers for {key} in one operation"
        if _Produced.group is not None:
            _check_sync_answer(_Produced.group, key, value)
        super().__setitem__(key, value)


@dataclass
class _CheckedAnswers(Answers):
    """Answers that refuse a second answer to one member and check each as it is made."""

    joins: dict[str, JoinAnswer] = field(default_factory=_OnceJoins)
    syncs: dict[str, SyncAnswer] = field(default_factory=_OnceSyncs)


def _snapshot(group: Group) -> tuple[object, ...]:
    return (
        group.state,
        group.generation_id,
        group.leader,
        group.protocol_type,
        group.protocol_name,
        {m: dataclasses.astuple(x) for m, x in group.members.items()},
        dict(group.pending_members),
        group.join_deadline_ms,
        group.sync_deadline_ms,
        set(group.pending_sync),
        group.initial_join_remaining_ms,
        group.new_member_added,
    )


def _expected_heartbeat(group: Group, member_id: str, generation: int) -> ErrorCode:
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    if group.state is GroupState.PREPARING_REBALANCE:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def _expected_commit(group: Group, member_id: str, generation: int) -> ErrorCode:
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation < 0 and group.state is GroupState.EMPTY:
        return ErrorCode.NONE
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    if group.state is GroupState.COMPLETING_REBALANCE:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


class Driver:
    """Runs operations from CLIENTS against one group and checks every answer and the
    invariants after each step."""

    def __init__(self, initial_delay_ms: int, *, cooperative: bool = False) -> None:
        # Cooperative clients send valid timeouts, common protocols, the generation they
        # were given, and never restart; the others do anything ("auto" steps are always
        # cooperative).
        self.cooperative = cooperative
        self.group = Group("g", GroupLimits(*PROPERTY_LIMITS, initial_delay_ms))
        self.clients = {name: Client(name) for name in CLIENTS}
        self.owner: dict[str, Client] = {}
        self.now = 0
        self.ids = 0
        self.last_generation = 0
        # member id -> the generation of its last successful JoinGroup answer
        self.joined_generation: dict[str, int] = {}
        self.seen: set[tuple[str, str]] = set()

    def run(self, ops: Iterable[Op]) -> None:
        with mock.patch.object(membership, "Answers", _CheckedAnswers):
            for op in ops:
                self.now += op.dt
                before = self.group.state
                self.step(op)
                self.seen.add((before.value, self.group.state.value))
                self.check()

    def step(self, op: Op) -> None:
        group, client, v = self.group, self.clients[op.client], op.variant
        kind: str | None = op.kind
        coop = self.cooperative
        if kind == "auto":
            kind, coop = client.next_step(), True
        _Produced.group = group
        if kind == "join":
            self.join(client, v, coop)
        elif kind == "sync":
            self.sync(client, v, coop)
        elif kind == "heartbeat":
            wrong = not coop and v % 8 == 0
            generation = client.generation + (1 if wrong else 0)
            expected = _expected_heartbeat(group, client.member_id, generation)
            error = group.heartbeat(
                member_id=client.member_id, generation_id=generation, now_ms=self.now
            )
            assert error == expected
            client.told(error)
        elif kind == "commit":
            generation = -1 if v % 4 == 0 else client.generation
            expected = _expected_commit(group, client.member_id, generation)
            assert group.check_commit(client.member_id, generation, self.now) == expected
        elif kind == "leave":
            self.leave(client, v)
        elif kind == "tick":
            self.tick(v)
        elif kind == "unload" and v % 8 == 0:
            waiting = {c.key: c.waiting for c in self.clients.values() if c.waiting}
            answers = group.unload()
            assert {k: "join" for k in answers.joins} | {k: "sync" for k in answers.syncs} == (
                waiting
            )
            assert all(a.error == ErrorCode.NOT_COORDINATOR for a in answers.joins.values())
            assert all(a.error == ErrorCode.NOT_COORDINATOR for a in answers.syncs.values())
            self.deliver(answers)

    def join(self, client: Client, v: int, coop: bool) -> None:
        # one JoinGroup at a time; an unruly client may send one while its SyncGroup is held
        if client.waiting == "join" or (coop and client.waiting):
            return
        if v & 3:
            client.protocols = (v >> 2) % (2 if coop else len(PROTOCOL_SETS))
        restart = not coop and (v >> 13) % 8 == 0
        member_id = "" if restart else client.member_id
        sessions = SESSIONS[1:-1] if coop else SESSIONS
        rebalances = REBALANCES[1:] if coop else REBALANCES
        self.ids += 1
        new_id = f"{client.name}{self.ids}"
        self.owner[new_id] = client
        key = member_id or new_id
        answers = self.group.join(
            member_id=member_id,
            new_member_id=new_id,
            require_known_member_id=bool((v >> 4) & 1),
            client_id=client.name,
            client_host="h",
            session_timeout_ms=sessions[(v >> 5) % len(sessions)],
            rebalance_timeout_ms=rebalances[(v >> 8) % len(rebalances)],
            protocol_type="connect" if not coop and (v >> 11) % 16 == 0 else "consumer",
            protocols=PROTOCOL_SETS[client.protocols],
            now_ms=self.now,
        )
        self.deliver(answers, own=("join", key, client))

    def sync(self, client: Client, v: int, coop: bool) -> None:
        if client.waiting == "sync" or (coop and (client.waiting or client.generation < 0)):
            return
        group = self.group
        wrong = not coop and v % 10 == 0
        generation = client.generation + (1 if wrong else 0)
        assignments = {
            m: f"{m}/{generation}".encode()
            for i, m in enumerate(client.leads)
            if (v >> 4) % 5 or i != 0
        }
        before = group.state
        answers = group.sync(
            member_id=client.member_id,
            generation_id=generation,
            protocol_type=None if v & 2 else "consumer",
            protocol_name="bogus" if not coop and (v >> 7) % 8 == 0 else client.protocol_name,
            assignments=assignments,
            now_ms=self.now,
        )
        if (
            before is GroupState.COMPLETING_REBALANCE
            and group.state is GroupState.STABLE
            and client.member_id == group.leader
        ):
            for m, x in group.members.items():
                assert x.assignment == assignments.get(m, b"")
        self.deliver(answers, own=("sync", client.member_id, client))

    def leave(self, client: Client, v: int) -> None:
        group = self.group
        member_id = client.member_id or "ghost"
        others = sorted([*group.members, *group.pending_members])
        if v % 3 == 0 and others:
            # an admin removing a member by the id DescribeGroups showed it
            member_id = others[(v >> 2) % len(others)]
        known = member_id in group.members or member_id in group.pending_members
        errors, answers = group.leave([member_id], self.now)
        if group.state is GroupState.DEAD:
            assert errors == {member_id: ErrorCode.COORDINATOR_NOT_AVAILABLE}
        else:
            assert errors == {member_id: ErrorCode.NONE if known else ErrorCode.UNKNOWN_MEMBER_ID}
            assert member_id not in group.members
            assert member_id not in group.pending_members
        self.deliver(answers)
        if errors[member_id] == ErrorCode.NONE and member_id == client.member_id:
            client.forget()

    def tick(self, v: int) -> None:
        group = self.group
        deadline = group.next_deadline_ms()
        if v % 2 and deadline is not None:
            self.now = max(self.now, deadline)
        if deadline is None or self.now < deadline:
            # nothing is due: a tick changes nothing
            clone = copy.deepcopy(group)
            _Produced.group = clone
            assert not clone.tick(self.now)
            assert _snapshot(clone) == _snapshot(group)
            _Produced.group = group
        self.deliver(group.tick(self.now))
        # A tick can start a phase whose deadline is already due (a zero rebalance
        # timeout); ticking again at the same time settles, as the coordinator does.
        for _ in range(4):
            after = group.next_deadline_ms()
            if after is None or after > self.now:
                break
            self.check()
            self.deliver(group.tick(self.now))
        else:
            pytest.fail("ticking at one time never settles")

    def deliver(self, answers: Answers, own: tuple[str, str, Client] | None = None) -> None:
        """Hands each answer to its client: its own request's, or a held one's (never one
        nobody is waiting for); a request not answered is held."""
        for kind, answered in (("join", answers.joins), ("sync", answers.syncs)):
            for key, answer in answered.items():
                is_own = own is not None and own[:2] == (kind, key)
                if own is not None and is_own:
                    client = own[2]
                else:
                    assert key in self.owner, f"{kind} answer for {key}, nobody's id"
                    client = self.owner[key]
                    assert (client.waiting, client.key) == (kind, key), (
                        f"{kind} answer for {key}, which waits for none"
                    )
                    client.waiting = None
                if isinstance(answer, JoinAnswer):
                    self.joined(client, answer)
                elif answer.error == ErrorCode.NONE:
                    client.synced = client.generation
                else:
                    client.told(answer.error)
        if own is not None:
            kind, key, client = own
            if key not in (answers.joins if kind == "join" else answers.syncs):
                member = self.group.members.get(key)
                assert member is not None, f"{kind} of {key} neither answered nor held"
                assert client.waiting is None, f"{key} has a join and a sync held"
                client.waiting, client.key = kind, key

    def joined(self, client: Client, answer: JoinAnswer) -> None:
        if answer.error == ErrorCode.NONE:
            client.member_id = answer.member_id
            client.generation = answer.generation_id
            client.protocol_name = answer.protocol_name
            client.leads = tuple(m for m, _ in answer.members)
            client.rejoin = False
            self.joined_generation[answer.member_id] = answer.generation_id
        elif answer.error == ErrorCode.MEMBER_ID_REQUIRED:
            client.forget()
            client.member_id = answer.member_id
        elif answer.error == ErrorCode.UNKNOWN_MEMBER_ID:
            client.forget()

    def check(self) -> None:
        group = self.group
        members = group.members
        assert group.generation_id >= self.last_generation
        self.last_generation = group.generation_id
        if members:
            assert group.leader in members
            assert group.candidate_protocols()
            assert all(m.protocol_type == group.protocol_type for m in members.values())
        else:
            assert group.leader == ""
        if group.state is GroupState.EMPTY:
            assert not members
        if not members:
            # (A join phase whose last member left waits out an initial delay, or for a
            # pending member, as Kafka's: PreparingRebalance with nobody in it.)
            assert group.state is not GroupState.STABLE
            assert group.state is not GroupState.COMPLETING_REBALANCE
        if group.state is GroupState.EMPTY:
            assert group.protocol_name is None
        for member in members.values():
            assert not (member.awaiting_join and member.awaiting_sync)
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            for member_id in members:
                assert self.joined_generation.get(member_id) == group.generation_id
            assert not any(m.awaiting_join for m in members.values())
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            assert not any(m.awaiting_sync for m in members.values())
        # no lost waiter and no phantom one: held requests are exactly the awaiting members
        held_joins = {c.key for c in self.clients.values() if c.waiting == "join"}
        held_syncs = {c.key for c in self.clients.values() if c.waiting == "sync"}
        assert held_joins == {m for m, x in members.items() if x.awaiting_join}
        assert held_syncs == {m for m, x in members.items() if x.awaiting_sync}
        deadline = group.next_deadline_ms()
        if group.state is GroupState.PREPARING_REBALANCE:
            assert deadline is not None
            assert deadline <= group.join_deadline_ms
        # Whoever of the generation owes a SyncGroup is timed by the sync deadline; in
        # CompletingRebalance at least the leader does (its SyncGroup ends the state).
        assert group.pending_sync <= set(members)
        if group.state is GroupState.COMPLETING_REBALANCE and group.storing is None:
            assert group.leader in group.pending_sync
        if group.pending_sync:
            assert group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            assert deadline is not None
            assert deadline <= group.sync_deadline_ms


@SETTINGS
@given(
    ops=st.lists(OPS, min_size=5, max_size=60),
    initial_delay=st.sampled_from((0, 700, 3000)),
)
def test_random_operations_keep_the_invariants(ops: list[Op], initial_delay: int) -> None:
    Driver(initial_delay).run(ops)


@SETTINGS
@given(
    ops=st.lists(OPS, min_size=5, max_size=60),
    initial_delay=st.sampled_from((0, 700)),
)
def test_cooperative_clients_keep_the_invariants(ops: list[Op], initial_delay: int) -> None:
    Driver(initial_delay, cooperative=True).run(ops)


def test_the_random_operations_reach_every_state_change() -> None:
    """The properties are only as good as the transitions they exercise."""
    seen: set[tuple[str, str]] = set()

    @SETTINGS
    @given(ops=st.lists(OPS, min_size=20, max_size=60), initial_delay=st.sampled_from((0, 700)))
    def run(ops: list[Op], initial_delay: int) -> None:
        driver = Driver(initial_delay, cooperative=True)
        driver.run(ops)
        seen.update(driver.seen)

    run()
    empty, preparing, completing, stable, dead = (s.value for s in GroupState)
    assert {
        (empty, preparing),
        (empty, completing),  # a first member without an initial delay left to wait
        (preparing, completing),
        (preparing, empty),
        (completing, stable),
        (completing, preparing),
        (completing, empty),
        (stable, preparing),
        (stable, stable),
        (stable, dead),
        (completing, dead),
        (preparing, dead),
        (empty, dead),
    } <= seen


# --- a group that writes its generations (the coordinator's) ------------------------------


def persisting_completing_group(*ids: str) -> Group:
    group = completing_group(*ids)
    group.persist = True
    return group


def test_a_persisting_group_answers_the_syncs_once_the_assignment_is_stored() -> None:
    group = persisting_completing_group("a", "b")
    assert not sync(group, "b", 1, DELAY)
    answers = sync(group, "a", 1, DELAY, {"a": b"A", "b": b"B"})
    assert answers.store
    assert not answers.syncs
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert group.heartbeat(member_id="b", generation_id=1, now_ms=DELAY) == ErrorCode.NONE
    # What is written: this generation, its leader, each member's subscription and the
    # assignment being stored.
    written = group.to_metadata()
    assert (written.generation, written.protocol, written.leader) == (1, "range", "a")
    assert {(m.member_id, m.subscription, m.assignment) for m in written.members} == {
        ("a", b"range-meta", b"A"),
        ("b", b"range-meta", b"B"),
    }
    # The leader asking again meanwhile writes nothing more.
    assert not sync(group, "a", 1, DELAY, {"a": b"A", "b": b"B"}).store
    stored = group.assignment_stored(1, DELAY + 1)
    assert {m: a.assignment for m, a in stored.syncs.items()} == {"a": b"A", "b": b"B"}
    assert state(group) is GroupState.STABLE
    assert group.persisted_generation == 1


def test_a_failed_store_answers_the_error_and_rebalances() -> None:
    group = persisting_completing_group("a", "b")
    assert not sync(group, "b", 1, DELAY)
    assert sync(group, "a", 1, DELAY, {"a": b"A"}).store
    failed = group.assignment_store_failed(1, ErrorCode.NOT_COORDINATOR, DELAY + 1)
    assert {m: a.error for m, a in failed.syncs.items()} == {
        "a": ErrorCode.NOT_COORDINATOR,
        "b": ErrorCode.NOT_COORDINATOR,
    }
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert group.storing is None
    # A store that ends after the group moved on changes nothing.
    assert not group.assignment_stored(1, DELAY + 2)
    assert state(group) is GroupState.PREPARING_REBALANCE


def test_a_rebalance_during_the_store_drops_it() -> None:
    group = persisting_completing_group("a", "b")
    assert sync(group, "a", 1, DELAY, {"a": b"A", "b": b"B"}).store
    answers = join_new(group, "c", DELAY + 1)  # a new member: the generation ends
    assert answers.syncs["a"].error == ErrorCode.REBALANCE_IN_PROGRESS
    assert group.storing is None
    assert not group.assignment_stored(1, DELAY + 2)
    assert state(group) is GroupState.PREPARING_REBALANCE


def test_a_stale_generations_write_ending_does_not_settle_the_next_ones() -> None:
    """Kafka 2.8's storeGroup callback acts only while the group is CompletingRebalance at
    the generation written: the write of generation 1 ending once generation 2's is under
    way neither hands out generation 2's assignment nor fails it."""
    group = persisting_completing_group("a", "b")
    assert sync(group, "a", 1, DELAY, {"a": b"A", "b": b"B"}).store
    join_new(group, "c", DELAY + 1)  # generation 1 ends while its write is under way
    assert not rejoin(group, "b", DELAY + 2)
    answers = rejoin(group, "a", DELAY + 3)  # every member has joined: generation 2
    assert answers.joins["a"].generation_id == 2
    assert sync(group, "a", 2, DELAY + 4, {"a": b"A2", "b": b"B2", "c": b"C2"}).store
    assert not group.assignment_stored(1, DELAY + 5)
    assert not group.assignment_store_failed(1, ErrorCode.NOT_COORDINATOR, DELAY + 5)
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert group.members["a"].assignment == b""
    stored = group.assignment_stored(2, DELAY + 6)
    assert stored.syncs["a"].assignment == b"A2"
    assert state(group) is GroupState.STABLE


def test_a_group_read_back_is_stable_with_its_members_and_generation() -> None:
    group = persisting_completing_group("a", "b")
    assert not sync(group, "b", 1, DELAY)
    assert sync(group, "a", 1, DELAY, {"a": b"A", "b": b"B"}).store
    group.assignment_stored(1, DELAY)
    written = group.to_metadata()

    back = Group.from_metadata("g", written, LIMITS, 100_000)
    assert state(back) is GroupState.STABLE
    assert (back.generation_id, back.leader, back.protocol_name) == (1, "a", "range")
    assert back.persist
    assert {m.member_id: m.assignment for m in back.members.values()} == {"a": b"A", "b": b"B"}
    # Its members go on heartbeating with their generation; their SyncGroup (a member
    # that lost its answer) gets the assignment again.
    assert back.heartbeat(member_id="b", generation_id=1, now_ms=100_001) == ErrorCode.NONE
    assert sync(back, "b", 1, 100_001).syncs["b"].assignment == b"B"
    # One that never shows up is dropped a session later, and the others rebalance.
    assert back.heartbeat(member_id="a", generation_id=1, now_ms=100_000 + SESSION) == (
        ErrorCode.NONE
    )
    back.tick(100_001 + SESSION)
    assert set(back.members) == {"a"}
    assert state(back) is GroupState.PREPARING_REBALANCE


def test_an_empty_group_read_back_keeps_its_generation() -> None:
    group = persisting_completing_group("a")
    group.leave(["a"], DELAY)
    assert state(group) is GroupState.EMPTY
    written = group.to_metadata()
    assert (written.generation, written.members, written.protocol) == (2, (), None)
    back = Group.from_metadata("g", written, LIMITS, 0)
    assert state(back) is GroupState.EMPTY
    assert back.generation_id == 2
    assert not join_new(back, "n", 0).joins  # held for the initial delay
    answers = back.tick(DELAY)
    assert answers.joins["n"].generation_id == 3


def test_an_empty_group_read_back_from_a_record_without_a_timestamp() -> None:
    """A group record of value version 0 or 1 has no current state timestamp (-1): Kafka
    2.8's readGroupMessageValue takes -1 as none, so the Empty group's offsets expire
    counting from their commits, not from -1 (at once); written again, it is -1 still
    (currentStateTimestampOrDefault)."""
    group = persisting_completing_group("a")
    group.leave(["a"], DELAY)
    written = dataclasses.replace(group.to_metadata(), current_state_timestamp_ms=-1)
    back = Group.from_metadata("g", written, LIMITS, 0)
    assert state(back) is GroupState.EMPTY
    assert back.empty_since_ms is None
    assert back.to_metadata().current_state_timestamp_ms == -1


def test_deadlines_take_now_and_the_empty_group_records_the_wall_clock() -> None:
    """``now_ms`` (monotonic) times every deadline; ``wall_ms`` is what the group records
    when it becomes Empty (and writes in its metadata record), so a step of the wall
    clock moves no deadline."""
    group = Group("g", LIMITS, persist=True)
    answers = join_new(group, "a", 100, wall_ms=9_000_000)
    assert not answers.joins  # the initial delay
    assert group.next_deadline_ms() == 100 + DELAY
    answers = group.tick(100 + DELAY, wall_ms=5_000_000)
    assert answers.joins["a"].generation_id == 1
    assert group.members["a"].heartbeat_deadline_ms == 100 + DELAY + SESSION
    # (Its record's timestamp: when it became CompletingRebalance.)
    assert group.to_metadata().current_state_timestamp_ms == 5_000_000
    # The session ends on the monotonic clock; the group left Empty records the wall's.
    assert not group.tick(100 + DELAY + SESSION - 1, wall_ms=1)
    group.tick(100 + DELAY + SESSION, wall_ms=4_000_000)
    assert group.state is GroupState.EMPTY
    assert group.empty_since_ms == 4_000_000
    assert group.to_metadata().current_state_timestamp_ms == 4_000_000
    # A leave too.
    join_new(group, "b", 20_000)
    group.tick(20_000 + DELAY)
    assert state(group) is GroupState.COMPLETING_REBALANCE
    _, _ = group.leave(["b"], 20_000 + DELAY + 1, wall_ms=6_000_000)
    assert group.empty_since_ms == 6_000_000


def test_the_group_record_carries_the_time_of_the_last_change_of_state() -> None:
    """Kafka 2.8's groupMetadataValue writes currentStateTimestampOrDefault, which
    transitionTo sets at every change of state: not only an Empty group's. A group read
    back keeps its record's (loadGroup), whatever its state, until it changes again."""
    group = Group("g", LIMITS, persist=True)
    join_new(group, "a", 0, wall_ms=1_000_000)
    assert group.to_metadata().current_state_timestamp_ms == 1_000_000  # PreparingRebalance
    group.tick(DELAY, wall_ms=2_000_000)
    assert state(group) is GroupState.COMPLETING_REBALANCE
    answers = group.sync(
        member_id="a",
        generation_id=1,
        protocol_type=None,
        protocol_name=None,
        assignments={"a": b"A"},
        now_ms=DELAY + 10,
        wall_ms=3_000_000,
    )
    assert answers.store
    # The leader's assignment is written with the time the generation started.
    assert group.to_metadata().current_state_timestamp_ms == 2_000_000
    group.assignment_stored(1, DELAY + 20, wall_ms=4_000_000)
    assert state(group) is GroupState.STABLE
    stable = group.to_metadata()
    assert stable.current_state_timestamp_ms == 4_000_000
    back = Group.from_metadata("g", stable, LIMITS, 0, wall_ms=9_000_000)
    assert state(back) is GroupState.STABLE
    assert back.empty_since_ms is None  # (read for an Empty group only)
    assert back.to_metadata().current_state_timestamp_ms == 4_000_000
    back.leave(["a"], 100, wall_ms=10_000_000)
    assert state(back) is GroupState.EMPTY
    assert back.to_metadata().current_state_timestamp_ms == 10_000_000
    # A write that fails: the group rebalances, at that time.
    failing = Group("g", LIMITS, persist=True)
    join_new(failing, "a", 0)
    failing.tick(DELAY, wall_ms=2_000_000)
    sync(failing, "a", 1, DELAY + 10, {"a": b"A"})
    failing.assignment_store_failed(1, ErrorCode.NOT_COORDINATOR, DELAY + 20, wall_ms=5_000_000)
    assert state(failing) is GroupState.PREPARING_REBALANCE
    assert failing.to_metadata().current_state_timestamp_ms == 5_000_000

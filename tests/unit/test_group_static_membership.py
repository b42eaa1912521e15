"""Static membership (KIP-345) in the group state machine (groups/membership.py), as
Kafka 2.8's GroupCoordinator: a member with a ``group.instance.id`` that restarts takes its
old place under a new member id (in a Stable group, without a rebalance), its old id is
fenced, and only its session timeout, not a join phase, drops it."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from groups.membership import Answers, Group, GroupState, JoinAnswer, SyncAnswer
from tests.unit.test_group_membership import (
    DELAY,
    LIMITS,
    RANGE,
    REBALANCE,
    SESSION,
    SETTINGS,
    _join,
    rejoin,
    state,
    sync,
)
from wire.errors import ErrorCode

ROUNDROBIN: tuple[tuple[str, bytes], ...] = (("roundrobin", b"rr-meta"),)
BOTH: tuple[tuple[str, bytes], ...] = (("range", b"range-meta"), ("roundrobin", b"rr-meta"))


def join_static(
    group: Group, instance: str, new_id: str, now: int, *, member_id: str = "", **kw: Any
) -> Answers:
    """A JoinGroup from the static member ``instance``, without a member id unless given
    (``new_id``: the id the coordinator hands out)."""
    answers = group.join(
        member_id=member_id,
        new_member_id=new_id,
        require_known_member_id=True,  # v4+: a static member is not asked for an id
        client_id="client",
        client_host="/127.0.0.1",
        session_timeout_ms=kw.pop("session", SESSION),
        rebalance_timeout_ms=kw.pop("rebalance", REBALANCE),
        protocol_type="consumer",
        protocols=kw.pop("protocols", RANGE),
        now_ms=now,
        group_instance_id=instance,
    )
    assert not kw
    return answers


def stable_static_group(*instances: str, persist: bool = False, session: int = SESSION) -> Group:
    """Static members ("a" and "b" unless named; member ids "a1", "b1"..., the first
    leading), Stable at generation 1 at DELAY, each assigned its instance id upper-cased.
    (Several join at -DELAY: see completing_group.)"""
    instances = instances or ("a", "b")
    ids = [f"{i}1" for i in instances]
    group = Group("g", LIMITS, persist=persist)
    start = -DELAY if len(ids) > 1 else 0
    for instance, member_id in zip(instances, ids, strict=True):
        join_static(group, instance, member_id, start, session=session)
    assert not group.tick(0)
    answers = group.tick(DELAY)
    assert set(answers.joins) == set(ids)
    assert answers.joins[ids[0]].instance_ids == instances
    for member_id in ids[1:]:
        assert not sync(group, member_id, 1, DELAY)
    answers = sync(group, ids[0], 1, DELAY, {m: m[0].upper().encode() for m in ids})
    if persist:
        assert answers.store
        answers = group.assignment_stored(1, DELAY)
    assert set(answers.syncs) == set(ids)
    assert state(group) is GroupState.STABLE
    return group


def test_a_static_member_joins_at_once_without_being_asked_for_an_id() -> None:
    group = Group("g", LIMITS)
    answers = join_static(group, "a", "a1", 0)
    assert not answers.joins  # waiting in the join phase, not told MEMBER_ID_REQUIRED
    assert group.static_members == {"a": "a1"}
    assert group.members["a1"].group_instance_id == "a"
    assert not group.pending_members


def test_a_restarted_static_member_keeps_its_assignment_without_a_rebalance() -> None:
    group = stable_static_group()
    now = DELAY + 1000
    answers = join_static(group, "b", "b2", now)
    assert answers.joins == {
        "b2": JoinAnswer(ErrorCode.NONE, 1, "consumer", "range", "a1", "b2", ())
    }
    assert state(group) is GroupState.STABLE
    assert group.generation_id == 1
    assert group.static_members == {"a": "a1", "b": "b2"}
    assert set(group.members) == {"a1", "b2"}
    # Its SyncGroup gets its old assignment; the other member notices nothing.
    assert sync(group, "b2", 1, now).syncs == {
        "b2": SyncAnswer(ErrorCode.NONE, b"B", "consumer", "range")
    }
    assert group.heartbeat(member_id="a1", generation_id=1, now_ms=now) == ErrorCode.NONE
    # The old id is fenced everywhere it names the instance; unknown without it.
    assert (
        group.heartbeat(member_id="b1", generation_id=1, now_ms=now, group_instance_id="b")
        == ErrorCode.FENCED_INSTANCE_ID
    )
    assert group.heartbeat(member_id="b1", generation_id=1, now_ms=now) == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert group.check_commit("b1", 1, now, "b") == ErrorCode.FENCED_INSTANCE_ID
    assert group.check_commit("b2", 1, now, "b") == ErrorCode.NONE
    fenced_sync = group.sync(
        member_id="b1",
        generation_id=1,
        protocol_type=None,
        protocol_name=None,
        assignments={},
        now_ms=now,
        group_instance_id="b",
    )
    assert fenced_sync.syncs["b1"].error == ErrorCode.FENCED_INSTANCE_ID
    fenced_join = _fenced_rejoin(group, "b1", "b", now)
    assert fenced_join.joins["b1"].error == ErrorCode.FENCED_INSTANCE_ID


def _fenced_rejoin(group: Group, member_id: str, instance: str, now: int) -> Answers:
    """A JoinGroup of ``instance`` with the member id ``member_id``."""
    return join_static(group, instance, "unused", now, member_id=member_id)


def test_the_leader_restarting_keeps_leading_but_is_answered_with_the_old_leader_id() -> None:
    group = stable_static_group()
    answers = join_static(group, "a", "a2", DELAY + 10)
    # Named leader: the old id, so the new one does not compute an assignment that a
    # Stable group would not hand out.
    assert answers.joins["a2"].leader == "a1"
    assert answers.joins["a2"].members == ()
    assert group.leader == "a2"
    assert state(group) is GroupState.STABLE


def test_a_persisted_group_is_written_before_the_answer_and_put_back_if_that_fails() -> None:
    group = stable_static_group(persist=True)
    answers = join_static(group, "b", "b2", DELAY + 10)
    assert answers.replacement is not None
    assert answers.replacement.old_member_id == "b1"
    metadata = group.to_metadata()
    assert {m.member_id: m.group_instance_id for m in metadata.members} == {
        "a1": "a",
        "b2": "b",
    }
    reverted = group.static_replacement_failed(answers.replacement, ErrorCode.NOT_COORDINATOR)
    assert reverted.joins == {"b2": JoinAnswer(ErrorCode.NOT_COORDINATOR, member_id="")}
    assert group.static_members == {"a": "a1", "b": "b1"}
    assert set(group.members) == {"a1", "b1"}
    assert group.members["b1"].assignment == b"B"
    assert group.heartbeat(member_id="b1", generation_id=1, now_ms=DELAY + 20) == ErrorCode.NONE


def test_a_restarted_leader_put_back_after_a_failed_write_leads_again() -> None:
    """Kafka 2.8 undoes a failed write of a static member's replacement with
    replaceGroupInstance back to the old id, which hands the lead back to it too."""
    group = stable_static_group(persist=True)
    answers = join_static(group, "a", "a2", DELAY + 10)
    assert group.leader == "a2"
    assert answers.replacement is not None
    group.static_replacement_failed(answers.replacement, ErrorCode.NOT_COORDINATOR)
    assert group.leader == "a1"
    assert group.to_metadata().leader == "a1"


def test_a_restart_in_a_stable_group_still_owes_the_generation_its_sync() -> None:
    """A static member that has not sent SyncGroup in its generation restarts into the
    Stable group: under its new id it still owes one by the sync deadline (Kafka 2.8's
    pendingSyncMembers, left here naming the old id, would have it fail at the deadline)."""
    group = Group("g", LIMITS, persist=True)
    join_static(group, "a", "a1", -DELAY)  # (see completing_group)
    join_static(group, "b", "b1", -DELAY)
    group.tick(DELAY)
    sync(group, "a1", 1, DELAY, {"a1": b"A", "b1": b"B"})
    group.assignment_stored(1, DELAY)
    assert state(group) is GroupState.STABLE
    assert group.pending_sync == {"b1"}
    answers = join_static(group, "b", "b2", DELAY + 10)
    assert answers.replacement is not None
    assert group.pending_sync == {"b2"}
    group.static_replacement_failed(answers.replacement, ErrorCode.NOT_COORDINATOR)
    assert group.pending_sync == {"b1"}
    answers = join_static(group, "b", "b3", DELAY + 20)
    assert group.pending_sync == {"b3"}
    assert sync(group, "b3", 1, DELAY + 30).syncs["b3"].assignment == b"B"
    assert not group.pending_sync


def test_a_changed_protocol_on_restart_rebalances() -> None:
    group = Group("g", LIMITS)
    both = (("range", b"range-meta"), ("roundrobin", b"rr-meta"))
    join_static(group, "a", "a1", -DELAY, protocols=both)  # (see completing_group)
    join_static(group, "b", "b1", -DELAY, protocols=both)
    group.tick(DELAY)
    sync(group, "b1", 1, DELAY)
    sync(group, "a1", 1, DELAY, {"a1": b"A", "b1": b"B"})
    assert group.protocol_name == "range"
    # b comes back preferring roundrobin: the vote is tied 1-1, the first member's
    # order wins, so range stays and nothing rebalances...
    assert join_static(group, "b", "b2", DELAY + 1, protocols=(both[1], both[0])).joins
    assert state(group) is GroupState.STABLE
    # ...but supporting roundrobin alone, the group must change protocol: a rebalance.
    answers = join_static(group, "b", "b3", DELAY + 2, protocols=ROUNDROBIN)
    assert not answers.joins
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert group.members["b3"].awaiting_join


def test_a_restart_during_completing_rebalance_rebalances_and_fences_the_old_sync() -> None:
    group = Group("g", LIMITS)
    join_static(group, "a", "a1", -DELAY)  # (see completing_group)
    join_static(group, "b", "b1", -DELAY)
    group.tick(DELAY)
    assert not sync(group, "b1", 1, DELAY)  # b1 waits for the leader's assignment
    answers = join_static(group, "b", "b2", DELAY + 5)
    assert answers.syncs["b1"].error == ErrorCode.FENCED_INSTANCE_ID
    assert state(group) is GroupState.PREPARING_REBALANCE
    # The leader's pending sync is answered REBALANCE_IN_PROGRESS when it comes.
    assert sync(group, "a1", 1, DELAY + 6).syncs["a1"].error == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_restart_during_the_join_phase_joins_it_and_fences_the_old_join() -> None:
    group = stable_static_group("a", "b", "c")
    now = DELAY + 100
    assert not rejoin(group, "a1", now)  # the leader rejoins: a rebalance
    assert not _fenced_rejoin(group, "b1", "b", now).joins  # b1 rejoins too, held
    answers = join_static(group, "b", "b2", now + 1)
    assert answers.joins == {"b1": JoinAnswer(ErrorCode.FENCED_INSTANCE_ID, member_id="b1")}
    assert state(group) is GroupState.PREPARING_REBALANCE  # c has not rejoined yet
    answers = rejoin(group, "c1", now + 2)
    # Everyone joined (a1, b2, c1): generation 2 at once.
    assert set(answers.joins) == {"a1", "b2", "c1"}
    assert answers.joins["b2"].generation_id == 2
    assert answers.joins["a1"].instance_ids == ("a", "c", "b")
    assert {m for m, _ in answers.joins["a1"].members} == {"a1", "b2", "c1"}


def test_a_join_phase_keeps_a_static_member_that_did_not_rejoin() -> None:
    group = stable_static_group(session=60_000)  # longer than the rebalance timeout
    now = DELAY + 100
    assert not rejoin(group, "a1", now)  # a rebalance; b is down (restarting)
    answers = group.tick(now + REBALANCE)  # the phase ends without b
    assert set(answers.joins) == {"a1"}
    assert set(group.members) == {"a1", "b1"}  # b kept: the leader assigns it too
    assert {m for m, _ in answers.joins["a1"].members} == {"a1", "b1"}
    assert group.generation_id == 2
    # b comes back within its session: its place, the assignment the leader gives it.
    assert not sync(group, "a1", 2, now + REBALANCE + 1, {"a1": b"A2", "b1": b"B2"}).joins
    assert state(group) is GroupState.STABLE
    answers = join_static(group, "b", "b2", now + REBALANCE + 2)
    assert answers.joins["b2"].generation_id == 2
    assert sync(group, "b2", 2, now + REBALANCE + 3).syncs["b2"].assignment == b"B2"


def test_a_static_member_that_did_not_rejoin_owes_the_generation_its_sync() -> None:
    """Kafka 2.8's completeJoin adds every member of the new generation to its
    pendingSyncMembers, a static member that did not rejoin too: one that has not come
    back by the sync deadline is dropped then, though its session lasts longer."""
    group = stable_static_group(session=60_000)  # longer than the rebalance timeout
    now = DELAY + 100
    assert not rejoin(group, "a1", now, session=60_000)  # a rebalance; b is down
    formed = now + REBALANCE
    group.tick(formed)  # generation 2, b kept
    sync(group, "a1", 2, formed + 1, {"a1": b"A2", "b1": b"B2"})
    assert state(group) is GroupState.STABLE
    assert group.next_deadline_ms() == formed + REBALANCE
    group.tick(formed + REBALANCE)
    assert set(group.members) == {"a1"}
    assert group.static_members == {"a": "a1"}
    assert state(group) is GroupState.PREPARING_REBALANCE


def test_a_join_phase_a_static_leader_missed_is_led_by_a_member_that_rejoined() -> None:
    """Kafka 2.8's maybeElectNewJoinedLeader: a static leader kept though it did not
    rejoin hands the lead to a member that did, which gets every member's metadata."""
    group = stable_static_group(session=60_000)
    now = DELAY + 100
    # b rejoins with another protocol (a rebalance); a, the leader, is down.
    assert not join_static(group, "b", "unused", now, member_id="b1", protocols=BOTH)
    answers = group.tick(now + REBALANCE)
    assert set(group.members) == {"a1", "b1"}
    assert group.leader == "b1"
    assert answers.joins["b1"].leader == "b1"
    assert {m for m, _ in answers.joins["b1"].members} == {"a1", "b1"}


def test_a_dynamic_member_that_did_not_rejoin_is_dropped_beside_static_ones() -> None:
    group = Group("g", LIMITS)
    join_static(group, "a", "a1", -DELAY)  # (see completing_group)
    _join(group, "", "d1", -DELAY)  # dynamic
    group.tick(DELAY)
    sync(group, "d1", 1, DELAY)
    sync(group, "a1", 1, DELAY, {"a1": b"A", "d1": b"D"})
    now = DELAY + 10
    assert not rejoin(group, "a1", now)
    answers = group.tick(now + REBALANCE)
    assert set(group.members) == {"a1"}
    assert answers.joins["a1"].generation_id == 2


def test_a_static_member_is_dropped_by_its_session_timeout() -> None:
    group = stable_static_group()
    # a heartbeats, b does not: b's session ends, the group rebalances without it.
    now = DELAY
    while now < DELAY + SESSION:
        now += 1000
        assert group.heartbeat(member_id="a1", generation_id=1, now_ms=now) in (
            ErrorCode.NONE,
            ErrorCode.REBALANCE_IN_PROGRESS,
        )
        group.tick(now)
    assert set(group.members) == {"a1"}
    assert group.static_members == {"a": "a1"}
    assert state(group) is GroupState.PREPARING_REBALANCE
    # Back after its session: a new member of the next generation.
    assert not join_static(group, "b", "b2", now + 1)
    assert group.static_members == {"a": "a1", "b": "b2"}


def test_with_every_member_absent_the_join_phase_waits() -> None:
    group = stable_static_group(session=60_000)
    now = DELAY + 100
    assert not rejoin(group, "a1", now)
    # a1 left without a LeaveGroup, b is down: nobody is waiting for an answer.
    group.members["a1"].awaiting_join = False
    answers = group.tick(now + REBALANCE)
    assert not answers.joins
    assert state(group) is GroupState.PREPARING_REBALANCE
    assert group.generation_id == 1
    assert group.next_deadline_ms() is not None


def test_leave_by_instance_id_and_fencing() -> None:
    group = stable_static_group()
    now = DELAY + 10
    errors, _ = group.leave_members([("b-old", "b"), ("", "nobody"), ("", "b")], now)
    # A known instance under another member id: fenced; an unknown instance: unknown;
    # an instance id alone (an administrator's removal): removed.
    assert errors == [
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.NONE,
    ]
    assert set(group.members) == {"a1"}
    assert group.static_members == {"a": "a1"}
    assert state(group) is GroupState.PREPARING_REBALANCE
    errors, _ = group.leave_members([("a1", "a")], now)
    assert errors == [ErrorCode.NONE]
    assert group.is_empty()
    assert not group.static_members


def test_a_join_with_an_id_and_an_unknown_instance_id_is_unknown() -> None:
    group = stable_static_group()
    answers = _fenced_rejoin(group, "a1", "x", DELAY + 1)
    assert answers.joins["a1"].error == ErrorCode.UNKNOWN_MEMBER_ID


def test_static_members_are_read_back_by_a_new_coordinator() -> None:
    group = stable_static_group()
    metadata = group.to_metadata()
    loaded = Group.from_metadata("g", metadata, LIMITS, DELAY + 5)
    assert loaded.static_members == {"a": "a1", "b": "b1"}
    answers = join_static(loaded, "b", "b2", DELAY + 6)
    assert answers.joins["b2"].error == ErrorCode.NONE
    assert answers.replacement is not None  # a loaded group persists
    assert loaded.members["b2"].assignment == b"B"


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["join", "restart", "heartbeat", "leave", "tick", "sync"]),
            st.sampled_from(["a", "b", "c"]),
            st.integers(0, 12_000),
        ),
        max_size=40,
    )
)
def test_any_history_keeps_one_member_per_instance_id(
    steps: list[tuple[str, str, int]],
) -> None:
    """Over any sequence of static members joining, restarting, heartbeating, leaving,
    syncing and time passing: each instance id names exactly one member and that member
    carries it, the leader is a member, and a member id is never reused for another
    instance."""
    group = Group("g", LIMITS)
    now = 0
    ids: dict[str, str] = {}  # member id -> instance id, every id ever handed out
    counter = 0
    for op, instance, dt in steps:
        now += dt
        current = group.static_members.get(instance)
        if op in ("join", "restart") or current is None:
            counter += 1
            new_id = f"{instance}{counter}"
            ids[new_id] = instance
            join_static(group, instance, new_id, now)
        elif op == "heartbeat":
            group.heartbeat(
                member_id=current,
                generation_id=group.generation_id,
                now_ms=now,
                group_instance_id=instance,
            )
        elif op == "leave":
            group.leave_members([(current, instance)], now)
        elif op == "sync":
            assignments = {m: m.encode() for m in group.members} if current == group.leader else {}
            group.sync(
                member_id=current,
                generation_id=group.generation_id,
                protocol_type=None,
                protocol_name=None,
                assignments=assignments,
                now_ms=now,
                group_instance_id=instance,
            )
        else:
            group.tick(now)
        for inst, member_id in group.static_members.items():
            assert group.members[member_id].group_instance_id == inst
            assert ids[member_id] == inst
        assert len(group.static_members) == len(group.members)
        assert (group.leader in group.members) == bool(group.members)


def test_a_failed_write_puts_the_old_subscription_back_too() -> None:
    """Kafka 2.8's updateStaticMemberAndRebalance, its write failed: updateMember with the
    old protocols, then replaceGroupInstance back. The member restarted with another
    subscription (the same protocol, so no rebalance) keeps the old one, as the group
    record a new coordinator reads still says."""
    group = stable_static_group(persist=True)
    changed = (("range", b"other-topics"),)
    answers = join_static(group, "b", "b2", DELAY + 10, protocols=changed)
    assert answers.replacement is not None
    assert group.members["b2"].protocols == changed
    group.static_replacement_failed(answers.replacement, ErrorCode.NOT_COORDINATOR)
    assert group.members["b1"].protocols == RANGE
    subscriptions = {m.member_id: m.subscription for m in group.to_metadata().members}
    assert subscriptions == {"a1": b"range-meta", "b1": b"range-meta"}

"""Details of Kafka 2.8's group APIs and coordinator that a client rarely meets, kept as
Kafka has them: a JoinGroup v1+ with a negative rebalance timeout keeps it (only v0's is
the session timeout, JoinGroupRequest.maybeOverrideRebalanceTimeout)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from broker.group_apis import GroupApis
from groups.membership import Group, GroupState
from tests.unit import test_group_coordinator as shell
from tests.unit.test_group_apis_static import Coordinator, answered, through_the_wire
from tests.unit.test_group_coordinator import (
    G0,
    Call,
    Node,
    join,
    member_ids,
    node,  # noqa: F401 (a fixture)
    nodes,  # noqa: F401 (a fixture)
    stable_member,
    wait_until,
)
from tests.unit.test_group_membership import DELAY, LIMITS, join_new, rejoin, state, sync
from wire.api import ApiKey
from wire.errors import ErrorCode

# The most negative an int32 rebalance timeout can be.
MOST_NEGATIVE = -(2**31)


def _join_request(**fields: Any) -> dict[str, Any]:
    return {
        "group_id": "g",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 30_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"meta-a"}],
        **fields,
    }


def _joined_with(version: int, request: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments JoinGroup ``version`` passes the coordinator."""
    coordinator = Coordinator()
    apis = GroupApis(cast(Any, coordinator), cast(Any, None), None, offsets_replication_factor=1)
    body = through_the_wire(ApiKey.JOIN_GROUP, version, request)
    answered(ApiKey.JOIN_GROUP, version, apis.join_group(version, body, {"client_id": "c"}, "h"))
    return coordinator.calls[0][2]


# --- a negative rebalance timeout -------------------------------------------------------


@pytest.mark.parametrize("version", [1, 4, 7])
def test_a_negative_rebalance_timeout_of_join_group_v1_and_later_is_kept(version: int) -> None:
    """JoinGroupRequest.maybeOverrideRebalanceTimeout replaces it by the session timeout
    for v0 alone; KafkaApis passes a v1+ request's value to the coordinator as it is."""
    kwargs = _joined_with(version, _join_request(rebalance_timeout_ms=-1))
    assert kwargs["rebalance_timeout_ms"] == -1
    assert kwargs["session_timeout_ms"] == 10_000


def test_join_group_v0_takes_the_session_timeout_for_the_rebalance_timeout() -> None:
    kwargs = _joined_with(0, _join_request())
    assert kwargs["rebalance_timeout_ms"] == 10_000


def test_a_negative_rebalance_timeout_ends_the_join_phase_at_once() -> None:
    """The group's rebalance timeout is its members' largest, folded from 0 (Kafka's
    GroupMetadata.rebalanceTimeoutMs): all negative, the DelayedJoin has no delay and the
    leader rejoining forms the next generation at once, without the follower that did not
    rejoin; and the sync phase has none either (DelayedSync): the member that has not
    synced by the next tick is dropped."""
    group = Group("g", LIMITS)
    join_new(group, "a", 0, rebalance=-1)
    join_new(group, "b", 0, rebalance=-1)
    # (The initial delay is waited whole, and not extended: the rebalance timeout leaves
    # nothing of it, InitialDelayedJoin's remaining max(-1 - delay, 0).)
    assert set(group.tick(DELAY).joins) == {"a", "b"}
    assert not sync(group, "b", 1, DELAY)
    assert set(sync(group, "a", 1, DELAY, {"a": b"A", "b": b"B"}).syncs) == {"a", "b"}
    assert state(group) is GroupState.STABLE
    now = DELAY + 100
    answers = rejoin(group, "a", now, protocols=(("range", b"new"),), rebalance=-1)
    assert answers.joins["a"].error == ErrorCode.NONE
    assert answers.joins["a"].generation_id == 2
    assert set(group.members) == {"a"}
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert group.next_deadline_ms() == now
    group.tick(now)
    assert not group.members
    assert state(group) is GroupState.EMPTY
    assert group.next_deadline_ms() is None


def test_a_held_sync_of_a_member_with_a_negative_rebalance_timeout_waits_for_the_leader(
    node: Node,  # noqa: F811 (the fixture imported)
) -> None:
    """The sync phase is timed by the group's rebalance timeout (Kafka's DelayedSync): a
    follower whose own is negative still has its SyncGroup held until the leader's
    assignment, not answered at once with an error."""
    groups = node.groups
    first = stable_member(groups, G0)
    second = Call(lambda: join(groups, G0, client_id="second", rebalance_ms=MOST_NEGATIVE))
    wait_until("the second member in the group", lambda: len(member_ids(groups, G0)) == 2)
    assert join(groups, G0, first.member_id).generation_id == 2
    follower = second.answer().member_id
    held = Call(lambda: shell.sync(groups, G0, follower, 2))
    assert held.waiting(0.1)
    assert shell.sync(groups, G0, first.member_id, 2, {follower: b"yours"}).error == ErrorCode.NONE
    assert held.answer().error == ErrorCode.NONE
    assert held.answer().assignment == b"yours"

"""The fault schedules' checks of a consumer group's generations (GroupMembers.problems
in tests/integration/workload.py), with a static member among the two: what they must
flag, and the static member's legitimate histories they must not."""

from __future__ import annotations

from typing import Any, cast

from tests.integration.workload import GroupMembers

S = GroupMembers.STATIC


Completed = dict[int, list[tuple[int, str, tuple[str, ...] | None, str]]]


def members_with(completed: Completed) -> GroupMembers:
    members = GroupMembers(cast(Any, None))  # threads made, never started
    members.completed = completed
    return members


def test_a_static_leader_replaced_within_a_generation_is_one_leader() -> None:
    # Generation 3: the static member leads as S-1; it restarts twice in the Stable group
    # (S-2, then S-3), each time answered with the leader as it was then.
    members = members_with(
        {
            0: [(3, f"{S}-1", None, "zkctl-a")],
            1: [(3, f"{S}-1", (S, "zkctl-a"), S), (3, f"{S}-1", None, S), (3, f"{S}-2", None, S)],
        }
    )
    assert members.problems() == []


def test_two_leaders_or_a_member_outside_the_list_are_flagged() -> None:
    members = members_with(
        {
            0: [(4, "zkctl-a", ("zkctl-a", "zkctl-b"), "zkctl-a")],
            1: [(4, "zkctl-b", None, "zkctl-b")],
        }
    )
    assert members.problems() == ["generation 4 completed under leaders ['zkctl-a', 'zkctl-b']"]
    outside = members_with(
        {
            0: [(5, "zkctl-a", ("zkctl-a",), "zkctl-a")],
            1: [(5, "zkctl-a", None, S)],
        }
    )
    assert outside.problems() == [f"generation 5 completed by ['{S}'], not its members"]


def test_generations_going_back_are_flagged() -> None:
    members = members_with(
        cast(
            Completed,
            {0: [(6, "zkctl-a", ("zkctl-a",), "zkctl-a"), (5, "zkctl-a", ("zkctl-a",), "zkctl-a")]}
            | {1: []},
        )
    )
    assert members.problems() == ["member 0 completed generations out of order: [6, 5]"]

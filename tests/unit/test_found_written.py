"""found_written: which unanswered partition-state writes of a controller term landed
(their answer lost with the connection). A row counts only if ZooKeeper holds exactly what
the write gave: the zkVersion, leader, leader epoch and ISR, under that controller epoch.
Each field alone differing means another writer (or no landing): no row."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.state_change_log import PartitionStateRow
from controller.state_machines import UnansweredStates, found_written
from zkdata.znodes import LeaderAndIsr, PartitionState, TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
ROW0 = PartitionStateRow("t", 0, 2, 7, (2, 3), "offline", (1, 2, 3), 12)
ROW1 = PartitionStateRow("t", 1, 3, 4, (3,), "offline", (1, 3), 5)
UNANSWERED = UnansweredStates(9, (ROW0, ROW1))


def landed(row: PartitionStateRow, controller_epoch: int = 9, **changes: Any) -> PartitionState:
    lai = LeaderAndIsr(row.leader, row.leader_epoch, tuple(row.isr), row.zk_version)
    return PartitionState(lai._replace(**changes), controller_epoch)


def test_writes_that_landed_as_sent_are_found_in_their_order() -> None:
    stored = {T1: landed(ROW1), T0: landed(ROW0)}
    assert found_written(UNANSWERED, stored) == [ROW0, ROW1]


@pytest.mark.parametrize(
    "change",
    [
        {"zk_version": 11},  # older: the write never landed
        {"zk_version": 13},  # newer: written again since
        {"leader": 3},
        {"leader_epoch": 8},
        {"isr": (2,)},
        {"isr": (3, 2)},  # the same members in another order is another ISR
    ],
)
def test_one_field_unlike_the_write_finds_nothing_for_that_partition(
    change: dict[str, Any],
) -> None:
    stored = {T0: landed(ROW0, **change), T1: landed(ROW1)}
    assert found_written(UNANSWERED, stored) == [ROW1]


def test_another_controller_epoch_or_no_state_finds_nothing() -> None:
    assert found_written(UNANSWERED, {T0: landed(ROW0, controller_epoch=10)}) == []
    assert found_written(UNANSWERED, {T0: landed(ROW0, controller_epoch=8)}) == []
    assert found_written(UNANSWERED, {T0: None, T1: landed(ROW1)}) == [ROW1]
    assert found_written(UNANSWERED, {}) == []


@given(
    st.sampled_from(["zk_version", "leader", "leader_epoch", "isr", "controller_epoch"]),
    st.integers(min_value=1, max_value=5),
)
def test_any_single_difference_is_not_the_write(field: str, delta: int) -> None:
    if field == "controller_epoch":
        state = landed(ROW0, controller_epoch=9 + delta)
    elif field == "isr":
        state = landed(ROW0, isr=(*ROW0.isr, 10 + delta))
    else:
        state = landed(ROW0, **{field: getattr(ROW0, field) + delta})
    assert found_written(UnansweredStates(9, (ROW0,)), {T0: state}) == []

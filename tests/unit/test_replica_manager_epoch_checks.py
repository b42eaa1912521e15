"""The replica manager's checks of who asks, at which leader epoch, against Kafka 2.8:
Partition.checkCurrentLeaderEpoch (an older epoch FENCED_LEADER_EPOCH, a newer one
UNKNOWN_LEADER_EPOCH, checked before whether this broker leads), getPartitionOrError (a
partition not hosted here but in the metadata is NOT_LEADER_OR_FOLLOWER, else
UNKNOWN_TOPIC_OR_PARTITION), and a stopped replica: no longer served, and a fetch answer
in flight from its leader is not appended. No ZooKeeper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request, stop_replica_request
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

BROKER = 1
TP = TopicPartition("t", 0)


def manager(tmp_path: Path) -> ReplicaManager:
    return ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER))


def stop_request(delete: bool = False, leader_epoch: int = -1) -> dict[str, Any]:
    return stop_replica_request(TP, leader_epoch, delete=delete)


@pytest.fixture
def with_logs(tmp_path: Path) -> Iterator[ReplicaManager]:
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        yield rm
    finally:
        rm.close()
        logs.close()


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        (-1, ErrorCode.NONE),  # no epoch given
        (5, ErrorCode.NONE),
        (4, ErrorCode.FENCED_LEADER_EPOCH),  # one older
        (0, ErrorCode.FENCED_LEADER_EPOCH),  # epoch 0 is an epoch, not "none given"
        (6, ErrorCode.UNKNOWN_LEADER_EPOCH),  # one newer: this broker has not heard yet
    ],
)
def test_a_leaders_partition_is_had_only_at_its_leader_epoch(
    tmp_path: Path, asked: int, expected: ErrorCode
) -> None:
    rm = manager(tmp_path)
    rm.become_leader_or_follower(leader_and_isr_request(TP, BROKER, 5, [1, 2], [1, 2]))
    error, p = rm.leader_partition(TP, asked)
    assert error == expected
    assert (p is not None) == (expected == ErrorCode.NONE)


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        (4, ErrorCode.FENCED_LEADER_EPOCH),
        (6, ErrorCode.UNKNOWN_LEADER_EPOCH),
        (5, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (-1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    ],
)
def test_a_followers_epoch_is_checked_before_it_is_found_no_leader(
    tmp_path: Path, asked: int, expected: ErrorCode
) -> None:
    rm = manager(tmp_path)
    rm.become_leader_or_follower(leader_and_isr_request(TP, 2, 5, [1, 2], [1, 2]))
    assert rm.leader_partition(TP, asked)[0] == expected
    # A reader that takes a follower (leader_only=False) still has its epoch checked.
    error, p = rm.leader_partition(TP, asked, leader_only=False)
    if expected == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        assert (error, p) == (ErrorCode.NONE, rm.partitions[TP])
    else:
        assert (error, p) == (expected, None)


@pytest.mark.parametrize("known", [True, False])
def test_a_partition_not_hosted_here_is_not_ours_if_the_cluster_has_it_else_unknown(
    tmp_path: Path, known: bool
) -> None:
    rm = manager(tmp_path)
    rm.known_partition = lambda tp: known and tp == TP
    expected = ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert rm.leader_partition(TP, -1) == (expected, None)
    assert rm.leader_partition(TP, 3, leader_only=False) == (expected, None)


def test_a_stopped_replica_is_served_at_no_epoch(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    rm.become_leader_or_follower(leader_and_isr_request(TP, BROKER, 5, [1, 2], [1, 2]))
    assert rm.stop_replicas(stop_request())["partition_errors"][0]["error_code"] == 0
    for asked in (-1, 5):
        for leader_only in (True, False):
            assert rm.leader_partition(TP, asked, leader_only) == (
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                None,
            )


def test_a_fetch_answer_reaching_a_stopped_follower_is_not_appended(
    with_logs: ReplicaManager,
) -> None:
    rm = with_logs
    rm.become_leader_or_follower(leader_and_isr_request(TP, 2, 5, [1, 2], [1, 2], is_new=True))
    batch = bytes(build_batch([b"a", b"b"], partition_leader_epoch=5))
    assert rm.append_as_follower(TP, 2, 5, batch, 2) == 2
    rm.stop_replicas(stop_request(leader_epoch=5))
    # The fetcher is told to stop; an answer it had in flight arrives after.
    late = bytes(build_batch([b"c"], base_offset=2, partition_leader_epoch=5))
    assert rm.append_as_follower(TP, 2, 5, late, 3) is None
    log = rm.partitions[TP].log
    assert log is not None
    assert (log.log_end_offset, log.high_watermark) == (2, 2)
    assert rm.truncate(TP, 2, 5, 0, "test") is None
    assert log.log_end_offset == 2


def test_a_follower_follows_its_leaders_log_start_only_up_to_its_own_high_watermark(
    with_logs: ReplicaManager,
) -> None:
    # The leader's DeleteRecords moved its log start past what this answer carried (the
    # start is read after the records): the follower's log start follows as far as its
    # own high watermark, with no error, and its next fetch finds the rest gone.
    rm = with_logs
    rm.become_leader_or_follower(leader_and_isr_request(TP, 2, 5, [1, 2], [1, 2], is_new=True))
    batch = bytes(build_batch([b"a"] * 5, partition_leader_epoch=5))
    assert rm.append_as_follower(TP, 2, 5, batch, 8, leader_log_start=8) == 5
    log = rm.partitions[TP].log
    assert log is not None
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (5, 5, 5)
    # Within what it has: followed exactly.
    more = bytes(build_batch([b"b"] * 5, base_offset=5, partition_leader_epoch=5))
    assert rm.append_as_follower(TP, 2, 5, more, 10, leader_log_start=7) == 10
    assert (log.log_start_offset, log.high_watermark) == (7, 10)


def test_a_stop_replica_raises_the_controller_epoch_a_leader_and_isr_is_fenced_by(
    tmp_path: Path,
) -> None:
    # Kafka 2.8's stopReplicas records the request's controller epoch as the latest known.
    rm = manager(tmp_path)
    stop = stop_request()
    stop["controller_epoch"] = 5
    rm.stop_replicas(stop)
    assert rm.controller_epoch == 5
    response = rm.become_leader_or_follower(leader_and_isr_request(TP, BROKER, 1, [1], [1]))
    assert response == {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH), "topics": []}
    assert TP not in rm.partitions


def test_a_follower_wholly_below_its_leaders_log_start_starts_again_there(
    with_logs: ReplicaManager,
) -> None:
    # Kafka's truncateFullyAndStartAt, also for a start just past its log end.
    rm = with_logs
    rm.become_leader_or_follower(leader_and_isr_request(TP, 2, 5, [1, 2], [1, 2], is_new=True))
    batch = bytes(build_batch([b"a"] * 5, partition_leader_epoch=5))
    assert rm.append_as_follower(TP, 2, 5, batch, 5) == 5
    assert rm.start_at(TP, 2, 5, 6, "test") == 6
    log = rm.partitions[TP].log
    assert log is not None
    assert (log.log_start_offset, log.log_end_offset) == (6, 6)
    assert rm.start_at(TP, 2, 5, 6, "test") == 6  # at its log end: nothing to do
    assert rm.start_at(TP, 2, 4, 9, "test") is None  # an answer of an older epoch

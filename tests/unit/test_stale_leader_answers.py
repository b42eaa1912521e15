"""A leader's answer that arrives after the partition moved on is dropped, never applied.

Found by the fault schedule (tests/integration/test_nemesis.py): a follower asked its leader
where its log diverged (OffsetsForLeaderEpoch), the leader was paused past its session
timeout, the controller made the follower the new leader, and when the old leader woke up
and answered, the new leader truncated its own log to that answer: 5,014 acknowledged
records gone. The same for a fetch answer's records, which must not be appended once the
partition follows another leader or leads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from broker.config import BrokerConfig
from broker.fetcher import FetchState, ReplicaFetcherThread
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.checkpoints import read_offset_checkpoint
from storage.log_manager import LogManager
from storage.testing import build_batch
from wire.api import ApiKey
from zkdata.znodes import TopicPartition

ME = 2
OLD_LEADER = 1
TP = TopicPartition("t", 0)


def leader_and_isr(leader: int, leader_epoch: int) -> dict[str, Any]:
    return {
        "controller_id": 3,
        "controller_epoch": 1,
        "broker_epoch": -1,
        "topic_states": [
            {
                "topic_name": TP.topic,
                "partition_states": [
                    {
                        "partition_index": TP.partition,
                        "controller_epoch": 1,
                        "leader": leader,
                        "leader_epoch": leader_epoch,
                        "isr": [1, 2, 3],
                        "partition_epoch": 0,
                        "replicas": [1, 2, 3],
                    }
                ],
            }
        ],
    }


@pytest.fixture
def follower(tmp_path: Path) -> Iterator[ReplicaManager]:
    """Broker 2 following broker 1 at leader epoch 6, its log holding 10 records of epoch 5."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "127.0.0.1:2181", "broker.id": "2"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(ME, cast(Any, None), StateChangeLog(tmp_path, ME), logs=logs)
    rm.become_leader_or_follower(leader_and_isr(OLD_LEADER, 5))
    for offset in range(10):  # a batch each: truncation cuts at batch boundaries
        batch = bytes(build_batch([b"r"], base_offset=offset, partition_leader_epoch=5))
        assert rm.append_as_follower(TP, OLD_LEADER, 5, batch, 0) == offset + 1
    rm.become_leader_or_follower(leader_and_isr(OLD_LEADER, 6))
    yield rm
    logs.close()


def log_end(rm: ReplicaManager) -> int:
    return rm.partitions[TP].log_end_offset


def truncations(tmp_path: Path) -> list[str]:
    text = (tmp_path / "state-change.log").read_text()
    return [line for line in text.splitlines() if '"truncated"' in line]


class HeldAnswers:
    """A connection to the old leader whose OffsetsForLeaderEpoch answer is held until
    released: the leader was paused while the follower waited."""

    def __init__(self, answer_end_offset: int) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()
        self.answer_end_offset = answer_end_offset

    def request(self, api_key: int, _version: int, body: Mapping[str, Any]) -> Any:
        if api_key != ApiKey.OFFSET_FOR_LEADER_EPOCH:
            raise ConnectionError("only OffsetsForLeaderEpoch is answered here")
        self.asked.set()
        assert self.release.wait(10), "the test never released the answer"
        return {
            "topics": [
                {
                    "topic": t["topic"],
                    "partitions": [
                        {
                            "partition": p["partition"],
                            "error_code": 0,
                            "leader_epoch": 5,
                            "end_offset": self.answer_end_offset,
                        }
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ]
        }

    def close(self) -> None:
        pass


def start_fetcher(follower: ReplicaManager, conn: HeldAnswers) -> ReplicaFetcherThread:
    """Broker 2's fetcher from the old leader, for the partition at leader epoch 6."""
    fetcher = ReplicaFetcherThread(
        ME,
        OLD_LEADER,
        ("127.0.0.1", 1),
        follower.append_as_follower,
        follower,
        backoff_ms=50,
        connect=lambda _endpoint, _client, _timeout: conn,
    )
    fetcher.add_all([(TP, FetchState(log_end(follower), 6))])
    fetcher.start()
    return fetcher


@pytest.mark.parametrize("then", ["leads", "follows_another_leader"])
def test_a_divergence_answer_arriving_after_the_partition_moved_on_truncates_nothing(
    follower: ReplicaManager, tmp_path: Path, then: str
) -> None:
    conn = HeldAnswers(answer_end_offset=3)
    fetcher = start_fetcher(follower, conn)
    try:
        assert conn.asked.wait(10), "the fetcher never asked where the logs diverged"
        # Meanwhile the controller moved the partition on (and the broker stopped this
        # fetcher's work on it, as it does on a LeaderAndIsr).
        new_leader = ME if then == "leads" else 3
        follower.become_leader_or_follower(leader_and_isr(new_leader, 7))
        fetcher.remove([TP])
        conn.release.set()
    finally:
        fetcher.stop()
        fetcher.thread.join(10)
    assert not fetcher.thread.is_alive()
    assert log_end(follower) == 10
    assert truncations(tmp_path) == []


def test_the_same_answer_while_still_following_truncates(
    follower: ReplicaManager, tmp_path: Path
) -> None:
    """The control: with nothing moved on, the answer is acted on (the test above could
    not pass by the fetcher never truncating)."""
    checkpoint = tmp_path / "data" / "recovery-point-offset-checkpoint"
    assert follower.logs is not None
    follower.partitions[TP].log.flush()  # type: ignore[union-attr]
    follower.logs.checkpoint_recovery_points()
    assert read_offset_checkpoint(checkpoint) == {(TP.topic, TP.partition): 10}
    conn = HeldAnswers(answer_end_offset=3)
    conn.release.set()
    fetcher = start_fetcher(follower, conn)
    try:
        assert conn.asked.wait(10)
    finally:
        fetcher.stop()
        fetcher.thread.join(10)
    assert log_end(follower) == 3
    assert len(truncations(tmp_path)) == 1
    # its recovery point moved back with it, on disk before anything is fetched after it
    assert read_offset_checkpoint(checkpoint) == {(TP.topic, TP.partition): 3}


@pytest.mark.parametrize(
    ("leader", "leader_epoch"), [(ME, 7), (3, 7), (OLD_LEADER, 7)], ids=["leads", "other", "newer"]
)
def test_fetched_records_from_a_leader_no_longer_followed_are_not_appended(
    follower: ReplicaManager, leader: int, leader_epoch: int
) -> None:
    follower.become_leader_or_follower(leader_and_isr(leader, leader_epoch))
    more = bytes(build_batch([b"late"], base_offset=10, partition_leader_epoch=6))
    assert follower.append_as_follower(TP, OLD_LEADER, 6, more, 11) is None
    assert log_end(follower) == 10
    assert follower.truncate(TP, OLD_LEADER, 6, 3, "a stale answer") is None
    assert log_end(follower) == 10


def test_fetched_records_from_the_leader_followed_are_appended(follower: ReplicaManager) -> None:
    more = bytes(build_batch([b"next"], base_offset=10, partition_leader_epoch=6))
    assert follower.append_as_follower(TP, OLD_LEADER, 6, more, 11) == 11

"""KIP-279: a follower whose history lacks the epoch its leader answers with diverged
before it. Leaders that alternated without replicating from each other (an unclean
election, or two quick failovers while they could not reach each other) leave such
histories: the follower cuts where its largest epoch below that one ended and asks
again, until the answer names an epoch it has. One answer taken as final kept the
follower's records of an epoch the leader never had, under the leader's later records,
and the follower joined the ISR with them. Real replica managers and logs; the leader's
answers come from its real epoch cache."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from broker.config import BrokerConfig
from broker.fetcher import FetchState, ReplicaFetcherThread
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log import PartitionLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request
from wire.api import ApiKey
from zkdata.znodes import TopicPartition

TP = TopicPartition("t", 0)
L, F = 1, 2


def leader_and_isr(leader: int, leader_epoch: int) -> dict[str, Any]:
    return leader_and_isr_request(TP, leader, leader_epoch, [leader], [L, F])


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[tuple[ReplicaManager, ReplicaManager]]:
    made: list[tuple[ReplicaManager, LogManager]] = []
    for broker in (L, F):
        config = BrokerConfig.from_properties(
            {"zookeeper.connect": "x:2181", "broker.id": str(broker)}
        )
        logs = LogManager([tmp_path / f"data-{broker}"], config)
        state_log = StateChangeLog(tmp_path / str(broker), broker)
        made.append((ReplicaManager(broker, cast(Any, None), state_log, logs=logs), logs))
    yield made[0][0], made[1][0]
    for rm, logs in made:
        rm.close()
        logs.close()


class EpochAnswers:
    """The leader's OffsetsForLeaderEpoch answers, from its log; the epochs asked about."""

    def __init__(self, leader: ReplicaManager) -> None:
        self.leader = leader
        self.asked: list[int] = []

    def request(self, api_key: int, _version: int, body: Mapping[str, Any]) -> Any:
        assert api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH
        (asked,) = [p for t in body["topics"] for p in t["partitions"]]
        self.asked.append(asked["leader_epoch"])
        log = self.leader.partitions[TP].log
        assert log is not None
        epoch, end = log.end_offset_for_epoch(asked["leader_epoch"])
        answer = {"partition": TP.partition, "error_code": 0, "leader_epoch": epoch}
        return {"topics": [{"topic": TP.topic, "partitions": [{**answer, "end_offset": end}]}]}

    def close(self) -> None:
        pass


def test_a_follower_lacking_the_answered_epoch_cuts_back_and_asks_again(
    brokers: tuple[ReplicaManager, ReplicaManager],
) -> None:
    leader, follower = brokers
    # Epoch 1: F leads and writes 0..9 (one-record batches from 5); L replicates 0..4.
    follower.become_leader_or_follower(leader_and_isr(F, 1))
    follower.append_as_leader(TP, build_batch([b"f"] * 5), 1)
    for _ in range(5):
        follower.append_as_leader(TP, build_batch([b"f"]), 1)
    f_log = follower.partitions[TP].log
    assert f_log is not None
    leader.become_leader_or_follower(leader_and_isr(F, 1))
    assert leader.append_as_follower(TP, F, 1, f_log.read(0, 1 << 20, 5).to_bytes(), 5) == 5
    # Epoch 2: L leads and writes 5..7, F hearing nothing of it.
    leader.become_leader_or_follower(leader_and_isr(L, 2))
    leader.append_as_leader(TP, build_batch([b"L2"] * 3), 1)
    # Epoch 3: F leads again from 10 and writes nothing; epoch 4: L again, 8..9.
    follower.become_leader_or_follower(leader_and_isr(F, 3))
    leader.become_leader_or_follower(leader_and_isr(L, 4))
    leader.append_as_leader(TP, build_batch([b"L4"] * 2), 1)
    follower.become_leader_or_follower(leader_and_isr(L, 4))
    l_log = leader.partitions[TP].log
    assert l_log is not None
    assert [tuple(e) for e in l_log.epoch_cache.entries()] == [(1, 0), (2, 5), (4, 8)]
    assert [tuple(e) for e in f_log.epoch_cache.entries()] == [(1, 0), (3, 10)]

    answers = EpochAnswers(leader)
    fetcher = ReplicaFetcherThread(
        F, L, ("127.0.0.1", 1), follower.append_as_follower, follower, connect=lambda *_: answers
    )
    fetcher.add_all([(TP, FetchState(f_log.log_end_offset, 4))])
    # Asked about 3, the leader answers epoch 2 ending at 8: F has no epoch 2, its epoch 1
    # ends at 10 there (where its epoch 3 began, with no record): cut there, ask again.
    fetcher._truncate_new_partitions()
    assert answers.asked == [3]
    assert fetcher.partitions[TP].truncating
    assert [tuple(e) for e in f_log.epoch_cache.entries()] == [(1, 0)]
    # Asked about 1, the leader answers epoch 1 ending at 5: both have it; cut at 5.
    fetcher._truncate_new_partitions()
    assert answers.asked == [3, 1]
    assert not fetcher.partitions[TP].truncating
    assert fetcher.partitions[TP].fetch_offset == 5
    assert f_log.log_end_offset == 5
    # What it fetches next is the leader's epoch 2, where its own epoch 1 records were.
    assert f_log.read(0, 1 << 20).to_bytes() == l_log.read(0, 1 << 20, 5).to_bytes()


def test_a_follower_without_epochs_is_truncated_to_its_high_watermark(
    brokers: tuple[ReplicaManager, ReplicaManager],
) -> None:
    """A log with records but no leader epochs (its epochs lost) was taken as truncated at
    its own end: records above the high watermark that the new leader never had were
    kept, and fetching went on past them, so the replicas held different records at the
    same offsets for good. Kafka 2.8 truncates such a partition to its high watermark
    (AbstractFetcherThread.truncateToHighWatermark), without asking the leader."""
    leader, follower = brokers
    # Epoch 1: F leads and writes 0..9; L replicates 0..4, so the high watermark is 5.
    follower.become_leader_or_follower(
        leader_and_isr_request(TP, F, 1, [F, L], [L, F], is_new=True)
    )
    follower.append_as_leader(TP, build_batch([b"f"] * 5), 1)
    for _ in range(5):
        follower.append_as_leader(TP, build_batch([b"f"]), 1)
    f_log = follower.partitions[TP].log
    assert f_log is not None
    assert f_log.log_end_offset == 10
    f_log.update_high_watermark(5)
    leader.become_leader_or_follower(leader_and_isr_request(TP, F, 1, [F, L], [L, F], is_new=True))
    assert leader.append_as_follower(TP, F, 1, f_log.read(0, 1 << 20, 5).to_bytes(), 5) == 5
    # Epoch 2: L leads and writes 5..7; F follows, its epochs lost.
    leader.become_leader_or_follower(leader_and_isr(L, 2))
    leader.append_as_leader(TP, build_batch([b"L2"] * 3), 1)
    follower.become_leader_or_follower(leader_and_isr(L, 2))
    f_log.epoch_cache.clear()
    assert (f_log.latest_epoch, f_log.log_end_offset, f_log.high_watermark) == (None, 10, 5)

    answers = EpochAnswers(leader)
    fetcher = ReplicaFetcherThread(
        F, L, ("127.0.0.1", 1), follower.append_as_follower, follower,
        connect=lambda *_: answers,
    )  # fmt: skip
    fetcher.add_all([(TP, FetchState(f_log.log_end_offset, 2))])
    fetcher._truncate_new_partitions()
    assert answers.asked == []  # no epoch to ask about
    assert not fetcher.partitions[TP].truncating
    assert (fetcher.partitions[TP].fetch_offset, f_log.log_end_offset) == (5, 5)


# A follower whose log is empty but whose epoch cache holds the entry of its own (empty)
# leadership, (E, 0), fetches records of an older epoch from the new leader. Kafka 2.8 drops
# (E, 0): the fetcher asks about any log with an epoch, an empty one included, and the
# truncation's no-op branch truncates the cache from the log end; and Log.append assigns
# every fetched batch's epoch that differs from the latest (maybeAssignEpochStartOffset).
# Here neither happened: the cache went on claiming epoch E started at 0 over records of
# epoch 0, and the broker, leading later, answered OffsetsForLeaderEpoch(0) with end offset 0
# instead of 10 (a KIP-320 consumer at offset 5 of epoch 0 told its log was truncated).
# The fetched batch's epoch is assigned now (an empty log is still not asked about: see
# broker/fetcher.py's _truncation_plan), which is enough.


def follow_after_an_empty_leadership(
    leader: ReplicaManager, follower: ReplicaManager
) -> tuple[PartitionLog, PartitionLog]:
    """F led at epoch 1 over its empty log, then follows L (epoch 2), which still holds
    records of epoch 0 F never had: F's truncation step, then its fetch of all of them.
    The leader's log and the follower's."""
    # Epoch 0: L leads a new partition and writes 0..9; F (in the ISR) has fetched nothing.
    new = leader_and_isr_request(TP, L, 0, [L, F], [L, F], is_new=True)
    leader.become_leader_or_follower(new)
    follower.become_leader_or_follower(new)
    leader.append_as_leader(TP, build_batch([b"e0"] * 10), 1)
    # Epoch 1: F is elected (L lost, say) with its empty log: its cache gets (1, 0).
    follower.become_leader_or_follower(leader_and_isr_request(TP, F, 1, [F, L], [L, F]))
    f_log = follower.partitions[TP].log
    assert f_log is not None
    assert [tuple(e) for e in f_log.epoch_cache.entries()] == [(1, 0)]
    # Epoch 2: L leads again before it ever followed F (it still has 0..9 of epoch 0);
    # F, still running, follows it.
    leader.become_leader_or_follower(leader_and_isr_request(TP, L, 2, [L, F], [L, F]))
    leader.append_as_leader(TP, build_batch([b"e2"] * 2), 1)
    follower.become_leader_or_follower(leader_and_isr_request(TP, L, 2, [L, F], [L, F]))
    l_log = leader.partitions[TP].log
    assert l_log is not None
    assert [tuple(e) for e in l_log.epoch_cache.entries()] == [(0, 0), (2, 10)]
    answers = EpochAnswers(leader)
    fetcher = ReplicaFetcherThread(
        F, L, ("127.0.0.1", 1), follower.append_as_follower, follower, connect=lambda *_: answers
    )
    fetcher.add_all([(TP, FetchState(f_log.log_end_offset, 2))])
    fetcher._truncate_new_partitions()
    assert not fetcher.partitions[TP].truncating
    # F fetches what L has (as the fetcher's sink would apply the answer).
    assert follower.append_as_follower(TP, L, 2, l_log.read(0, 1 << 20).to_bytes(), 12) == 12
    assert f_log.read(0, 1 << 20).to_bytes() == l_log.read(0, 1 << 20).to_bytes()
    return l_log, f_log


def test_an_empty_follower_takes_the_leaders_epoch_history(
    brokers: tuple[ReplicaManager, ReplicaManager],
) -> None:
    """Same records, so the same history (Kafka 2.8: [(0, 0), (2, 10)] on both); the
    follower's was [(1, 0), (2, 10)]."""
    _l_log, f_log = follow_after_an_empty_leadership(*brokers)
    assert [tuple(e) for e in f_log.epoch_cache.entries()] == [(0, 0), (2, 10)]


def test_leading_later_it_answers_offsets_for_leader_epoch_as_the_old_leader(
    brokers: tuple[ReplicaManager, ReplicaManager],
) -> None:
    """F, made leader later, answers OffsetsForLeaderEpoch(0) (a KIP-320 consumer's, or a
    follower's) with epoch 0's true end, 10 (it answered 0), and ListOffsets EARLIEST's
    leader epoch (v4+) is 0 (it was 1)."""
    leader, follower = brokers
    l_log, f_log = follow_after_an_empty_leadership(leader, follower)
    follower.become_leader_or_follower(leader_and_isr_request(TP, F, 3, [F, L], [L, F]))
    assert l_log.end_offset_for_epoch(0) == (0, 10)
    assert f_log.end_offset_for_epoch(0) == (0, 10)
    assert f_log.earliest_offset_and_epoch() == (0, 0)

"""A producer's batch and a leadership change on the same broker: the leadership check
and the append are one step under the lock a LeaderAndIsr takes to change the partition
(Kafka's leaderIsrUpdateLock), so a batch checked while the broker led cannot land after
it became a follower, at offsets the new leader gives other records. And a follower whose
log no longer ends where it fetched from (something else wrote it) stops fetching that
partition rather than fetching on past records the leader never had (Kafka's "Offset
mismatch"). A produce waiting for acks=all outlives a new leader epoch of the same
leader, not a log rewritten meanwhile. A compacted topic's key check, which decodes the
batch, holds none of those locks up. Real replica managers and logs; the interleaving is
injected."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest

import storage.compaction
import storage.log
import storage.records
from broker.config import BrokerConfig
from broker.fetcher import FetchState, ReplicaFetcherThread
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.codecs import Compression
from storage.log import LogConfig
from storage.log_manager import LogManager
from storage.records import RecordSpec
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request, stop_replica_request
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)
OLD, NEW = 1, 2


def leader_and_isr(leader: int, leader_epoch: int) -> dict[str, Any]:
    # its log is made here, as for a new partition
    return leader_and_isr_request(TP, leader, leader_epoch, [OLD, NEW], [OLD, NEW], is_new=True)


@pytest.fixture
def old(tmp_path: Path) -> Iterator[ReplicaManager]:
    """Broker OLD leading TP at epoch 1 with five records, its topic compressed with gzip
    (the leader recompresses what it is sent: the slow step before the append)."""
    config = BrokerConfig.from_properties(
        {"zookeeper.connect": "x:2181", "broker.id": str(OLD), "compression.type": "gzip"}
    )
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(OLD, cast(Any, None), StateChangeLog(tmp_path, OLD), logs=logs)
    rm.become_leader_or_follower(leader_and_isr(OLD, 1))
    assert rm.append_as_leader(TP, build_batch([b"a"] * 5), 1)[0] == ErrorCode.NONE
    yield rm
    rm.close()
    logs.close()


def test_a_batch_checked_while_leading_does_not_land_after_the_broker_follows(
    old: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = old.partitions[TP].log
    assert log is not None
    real = storage.records.recompress  # the function storage.log imports

    def leadership_moves_meanwhile(records: Any, codec: int, **limits: Any) -> Any:
        old.become_leader_or_follower(leader_and_isr(NEW, 2))
        return real(records, codec, **limits)

    monkeypatch.setattr(storage.log, "recompress", leadership_moves_meanwhile)
    error, _p, info, _why = old.append_as_leader(TP, build_batch([b"stray"]), 1)
    assert error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert info is None
    assert log.log_end_offset == 5


def test_a_batch_checked_before_a_stop_replica_is_not_appended(
    old: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped (not deleted) during the recompression: the partition is still there, this
    broker still its leader at that epoch, but it no longer serves it (the fetcher and
    the producers' waits were let go of), so nothing more lands in its log."""
    log = old.partitions[TP].log
    assert log is not None
    real = storage.records.recompress

    def stopped_meanwhile(records: Any, codec: int, **limits: Any) -> Any:
        stop = {"partition_index": TP.partition, "leader_epoch": 1, "delete_partition": False}
        old.stop_replicas(
            {
                "controller_id": 9,
                "controller_epoch": 3,
                "broker_epoch": 100,
                "topic_states": [{"topic_name": TP.topic, "partition_states": [stop]}],
            }
        )
        return real(records, codec, **limits)

    monkeypatch.setattr("storage.log.recompress", stopped_meanwhile)
    error, _p, info, _why = old.append_as_leader(TP, build_batch([b"stray"]), 1)
    assert error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert info is None
    assert log.log_end_offset == 5


def test_a_batch_checked_before_a_new_leader_epoch_of_the_same_leader_takes_the_new_one(
    old: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Still the leader, at a newer epoch (the controller bumped it): appended, and with
    that epoch, as Kafka appends with the epoch current under its lock."""
    real = storage.records.recompress  # the function storage.log imports

    def epoch_bumped_meanwhile(records: Any, codec: int, **limits: Any) -> Any:
        old.become_leader_or_follower(leader_and_isr(OLD, 2))
        return real(records, codec, **limits)

    monkeypatch.setattr(storage.log, "recompress", epoch_bumped_meanwhile)
    error, p, info, _why = old.append_as_leader(TP, build_batch([b"next"]), 1)
    assert error == ErrorCode.NONE
    assert info is not None
    assert info.first_offset == 5
    assert p is old.partitions[TP]
    assert p.log is not None
    assert p.log.latest_epoch == 2


def test_an_acks_all_produce_waiting_across_a_new_epoch_of_the_same_leader_completes(
    old: ReplicaManager,
) -> None:
    """A follower drops out: the controller shrinks the ISR with a new leader epoch, the
    leader unchanged, and the replica manager makes a new Partition for it. The produce
    waiting for the ISR is answered once the high watermark passes its batch, as Kafka's
    DelayedProduce fails only once the broker no longer leads; answered
    NOT_LEADER_OR_FOLLOWER, the producer sent the committed batch again (a duplicate)."""
    error, p, info, _why = old.append_as_leader(TP, build_batch([b"acked"]), -1)
    assert error == ErrorCode.NONE
    assert p is not None
    assert info is not None
    old.become_leader_or_follower(leader_and_isr_request(TP, OLD, 2, [OLD], [OLD, NEW]))
    assert old.partitions[TP] is not p
    assert old.wait_for_replication(p, info.last_offset, 5.0) == ErrorCode.NONE
    assert old.partitions[TP].high_watermark == info.last_offset + 1


def test_an_acks_all_produce_whose_batch_was_rewritten_while_leading_elsewhere_fails(
    old: ReplicaManager,
) -> None:
    """Leading again after following meanwhile (too quickly for the waiting produce to
    look): the log was truncated below the batch and took the other leader's records at
    the same offsets, so the batch is not what got committed: NOT_LEADER_OR_FOLLOWER, and
    the producer sends it again."""
    error, p, info, _why = old.append_as_leader(TP, build_batch([b"lost"]), -1)
    assert error == ErrorCode.NONE
    assert p is not None
    assert info is not None
    old.become_leader_or_follower(leader_and_isr_request(TP, NEW, 2, [NEW], [OLD, NEW]))
    assert old.truncate(TP, NEW, 2, 5, "diverged") == 5
    other = build_batch([b"other"], base_offset=5, partition_leader_epoch=2)
    assert old.append_as_follower(TP, NEW, 2, bytes(other), 6) == 6
    old.become_leader_or_follower(leader_and_isr_request(TP, OLD, 3, [OLD], [OLD, NEW]))
    assert old.partitions[TP].high_watermark == 6  # offset 5 committed: not the batch
    assert old.wait_for_replication(p, info.last_offset, 1.0) == ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.fixture
def compacted(tmp_path: Path) -> Iterator[ReplicaManager]:
    """Broker OLD leading TP and OTHER at epoch 1, their topic compacted: the leader
    decodes a producer's compressed batch to check that every record has a key."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": str(OLD)})
    topic = LogConfig(compact=True)
    logs = LogManager([tmp_path / "data"], config, topic_config=lambda _topic: topic)
    rm = ReplicaManager(OLD, cast(Any, None), StateChangeLog(tmp_path, OLD), logs=logs)
    for tp in (TP, OTHER):
        rm.become_leader_or_follower(
            leader_and_isr_request(tp, OLD, 1, [OLD, NEW], [OLD, NEW], is_new=True)
        )
    yield rm
    rm.close()
    logs.close()


def test_a_compacted_topics_key_check_holds_up_no_leader_and_isr_and_no_other_produce(
    compacted: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key check decodes the batch in pure Python: seconds for some zstd batches of
    1 MB. It ran under the log's lock and the partition's follower lock, which a
    LeaderAndIsr for the partition waits for holding the replica manager's lock, which
    every produce takes to move its high watermark: a LeaderAndIsr waited 7.9 s for a
    decoding produce, a produce to another partition 4.1 s. It runs before any lock, as
    the recompression does. Here the decode is held until both are done (before, they
    waited for it, until the hold gave up)."""
    decoding = threading.Event()
    release = threading.Event()
    held: list[bool] = []
    real = storage.compaction.first_keyless_offset  # the function storage.log imports

    def held_up(*args: Any, **kwargs: Any) -> int | None:
        decoding.set()
        held.append(release.wait(timeout=10))
        return real(*args, **kwargs)

    monkeypatch.setattr(storage.log, "first_keyless_offset", held_up)
    batch = build_batch([RecordSpec(b"v", key=b"k")], compression=Compression.ZSTD)
    answers: list[ErrorCode] = []
    producer = threading.Thread(
        target=lambda: answers.append(compacted.append_as_leader(TP, batch, 1)[0])
    )
    producer.start()
    try:
        assert decoding.wait(timeout=10)
        compacted.become_leader_or_follower(
            leader_and_isr_request(TP, OLD, 2, [OLD, NEW], [OLD, NEW])
        )
        other = build_batch([RecordSpec(b"w", key=b"k")])
        assert compacted.append_as_leader(OTHER, other, 1)[0] == ErrorCode.NONE
    finally:
        release.set()
        producer.join()
    assert held == [True]  # both were done while the decode was held
    assert answers == [ErrorCode.NONE]
    log = compacted.partitions[TP].log
    assert log is not None
    assert log.latest_epoch == 2  # appended under the lock, with the epoch current there


class EmptyAnswers:
    """A leader answering every fetch with no records and no error."""

    def __init__(self) -> None:
        self.fetched_at: list[int] = []

    def request(self, api_key: int, _version: int, body: Mapping[str, Any]) -> Any:
        assert api_key == ApiKey.FETCH
        parts = [p for t in body["topics"] for p in t["partitions"]]
        self.fetched_at += [p["fetch_offset"] for p in parts]
        return {
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": TP.topic,
                    "partitions": [
                        {
                            "partition_index": TP.partition,
                            "error_code": 0,
                            "high_watermark": 5,
                            "last_stable_offset": 5,
                            "log_start_offset": 0,
                            "aborted_transactions": [],
                            "preferred_read_replica": -1,
                            "records": None,
                        }
                    ],
                }
            ],
        }

    def close(self) -> None:
        pass


@pytest.mark.parametrize(("log_end", "failed"), [(5, False), (6, True)])
def test_a_follower_whose_log_ends_elsewhere_than_it_fetched_stops_fetching_it(
    log_end: int, failed: bool
) -> None:
    leader = EmptyAnswers()
    fetcher = ReplicaFetcherThread(
        NEW,
        OLD,
        ("127.0.0.1", 1),
        lambda *_args: log_end,  # the follower's log end after appending nothing
        None,
        connect=lambda *_args: leader,
    )
    fetcher.add_all([(TP, FetchState(5, 2, truncating=False))])
    fetch = fetcher._build_fetch()
    assert fetch is not None
    fetcher._fetch_once(fetch)
    assert leader.fetched_at == [5]
    if failed:
        assert TP not in fetcher.partitions  # until a LeaderAndIsr follows it again
    else:
        assert fetcher.partitions[TP].fetch_offset == 5


def stop_replica_deleting(tp: TopicPartition) -> dict[str, Any]:
    """A topic deletion's StopReplica (leader epoch -2, EpochDuringDelete)."""
    return stop_replica_request(tp, -2, delete=True, controller_epoch=5, broker_epoch=-1)


@pytest.mark.parametrize(
    ("still_known", "expected"),
    [
        # A topic deletion: the UpdateMetadata marking it deleted comes before the StopReplica.
        (False, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        # A reassignment moving the replica off: the partition is still the cluster's.
        (True, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    ],
)
def test_an_acks_all_produce_waiting_when_its_partition_is_deleted_is_answered_as_kafka(
    old: ReplicaManager, still_known: bool, expected: ErrorCode
) -> None:
    """Its partition deleted here while the produce waits for the ISR: Kafka 2.8's
    DelayedProduce asks getPartitionOrError, which answers UNKNOWN_TOPIC_OR_PARTITION for
    a partition this broker no longer hosts and its metadata no longer lists (the topic's
    deletion), NOT_LEADER_OR_FOLLOWER only for one the cluster still has. It was
    NOT_LEADER_OR_FOLLOWER either way, which the produce of a partition not hosted here
    (`leader_partition`) already tells apart."""
    old.known_partition = lambda _tp: still_known
    error, p, info, _why = old.append_as_leader(TP, build_batch([b"waiting"]), -1)
    assert error == ErrorCode.NONE
    assert p is not None
    assert info is not None
    result: list[ErrorCode] = []
    waiter = threading.Thread(
        target=lambda: result.append(old.wait_for_replication(p, info.last_offset, 5.0)),
        daemon=True,
    )
    waiter.start()
    answer = old.stop_replicas(stop_replica_deleting(TP))
    assert answer["partition_errors"][0]["error_code"] == 0
    waiter.join(5.0)
    assert result == [expected]

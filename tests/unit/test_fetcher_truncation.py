"""Which partitions a fetcher asks the leader about before fetching them (KIP-101): each
newly followed one once, until it is truncated; none it stopped following; one the leader
could not answer for yet, again after the backoff. An idle round asks nothing."""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, cast

from broker.config import BrokerConfig
from broker.fetcher import FetchState, FollowerLog, ReplicaFetcherThread, _truncation_plan
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import encode_request
from zkdata.znodes import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


class Logs:
    """Every partition's log holds 10 records of leader epoch 4."""

    def __init__(self) -> None:
        self.truncated: list[tuple[TopicPartition, int]] = []
        self.checkpointed: list[set[TopicPartition]] = []

    def follower_position(self, tp: TopicPartition) -> tuple[int | None, int, int]:
        return 4, 10, 10

    def follower_log_start(self, tp: TopicPartition) -> int:
        return 0

    def follower_end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> tuple[int, int]:
        return 4, 10

    def truncate(
        self, tp: TopicPartition, leader: int, leader_epoch: int, offset: int, why: str
    ) -> int | None:
        self.truncated.append((tp, offset))
        return offset

    def checkpoint_truncated(self, tps: Collection[TopicPartition]) -> None:
        self.checkpointed.append(set(tps))


class Leader:
    """Answers OffsetsForLeaderEpoch: epoch 4 ends at 8, except for the partitions it
    does not know it leads yet."""

    def __init__(self) -> None:
        self.asked: list[set[TopicPartition]] = []
        self.not_yet: set[TopicPartition] = set()

    def request(self, api_key: int, _version: int, body: Mapping[str, Any]) -> Any:
        assert api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH
        asked = {
            TopicPartition(t["topic"], p["partition"])
            for t in body["topics"]
            for p in t["partitions"]
        }
        self.asked.append(asked)

        def answer(tp: TopicPartition) -> dict[str, int]:
            if tp in self.not_yet:
                return {
                    "partition": tp.partition,
                    "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    "leader_epoch": -1,
                    "end_offset": -1,
                }
            return {"partition": tp.partition, "error_code": 0, "leader_epoch": 4, "end_offset": 8}

        return {
            "topics": [
                {
                    "topic": t["topic"],
                    "partitions": [
                        answer(TopicPartition(t["topic"], p["partition"])) for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ]
        }

    def close(self) -> None:
        pass


def test_each_new_partition_is_asked_about_once_until_it_is_truncated() -> None:
    logs, leader = Logs(), Leader()
    fetcher = ReplicaFetcherThread(
        2,
        1,
        ("127.0.0.1", 1),
        lambda *_: None,
        cast(FollowerLog, logs),  # its start_at (a leader's log past ours) is not reached
        backoff_ms=60_000,
        connect=lambda _endpoint, _client, _timeout: leader,
    )
    leader.not_yet = {B0}
    fetcher.add_all([(A0, FetchState(10, 5)), (A1, FetchState(10, 5)), (B0, FetchState(10, 5))])
    fetcher._truncate_new_partitions()
    assert leader.asked == [{A0, A1, B0}]
    assert sorted(logs.truncated) == [(A0, 8), (A1, 8)]
    assert [fetcher.partitions[tp].fetch_offset for tp in (A0, A1)] == [8, 8]
    # the round's truncations made durable at once, before anything is fetched after them
    assert logs.checkpointed == [{A0, A1}]

    fetcher._truncate_new_partitions()  # a0 and a1 are done; b0 waits out its backoff
    assert len(leader.asked) == 1
    fetcher.partitions[B0].delayed_until = 0.0
    leader.not_yet = set()
    fetcher._truncate_new_partitions()
    assert leader.asked[1:] == [{B0}]

    # Followed anew (a new leader epoch): asked again; one no longer followed is not.
    fetcher.add_all([(A0, FetchState(8, 6)), (A1, FetchState(8, 6))])
    fetcher.remove([A1])
    fetcher._truncate_new_partitions()
    assert leader.asked[2:] == [{A0}]
    fetcher._truncate_new_partitions()
    assert len(leader.asked) == 3
    assert not any(s.truncating for s in fetcher.partitions.values())
    assert logs.checkpointed == [{A0, A1}, {B0}, {A0}]


def test_the_sets_of_partitions_to_truncate_and_send_give_their_tables_back() -> None:
    # A set never shrinks: emptied, one that held a LeaderAndIsr's tens of thousands of
    # partitions would keep 1-2 MB for nothing.
    logs, leader = Logs(), Leader()
    fetcher = ReplicaFetcherThread(
        2,
        1,
        ("127.0.0.1", 1),
        lambda *_: None,
        cast(FollowerLog, logs),  # its start_at (a leader's log past ours) is not reached
        connect=lambda _endpoint, _client, _timeout: leader,
    )
    many = [TopicPartition("t", p) for p in range(5000)]
    fetcher.add_all([(tp, FetchState(10, 5)) for tp in many])
    fetcher._truncate_new_partitions()
    assert not fetcher._truncating
    assert sys.getsizeof(fetcher._truncating) < 1024
    fetcher.session_id, fetcher.session_epoch = 7, 1  # an incremental fetch lists them
    fetch = fetcher._build_fetch()
    assert fetch is not None
    assert len(fetch.listed) == 5000
    assert not fetcher._dirty
    assert sys.getsizeof(fetcher._dirty) < 1024


def test_partitions_without_an_epoch_are_cut_at_their_high_watermark() -> None:
    """Kafka's fetchTruncatingPartitions: a log with records and an epoch is asked about;
    one with records but no epoch is cut at its high watermark (truncateToHighWatermark),
    not fetched on from its end; an empty one (nothing to cut: unlike Kafka, not asked),
    or one with nothing above its high watermark, is fetched from its end."""
    c0, d0 = TopicPartition("c", 0), TopicPartition("d", 0)
    asks, to_hw, done = _truncation_plan(
        {A0: (4, 10, 7), A1: (None, 10, 7), B0: (None, 7, 7), c0: (None, 0, 0), d0: (3, 0, 0)}
    )
    assert asks == {A0: (4, 10, 7)}
    assert to_hw == {A1: (10, 7)}
    assert done == {B0: 7, c0: 0, d0: 0}


class EncodingLeader(Leader):
    """Encodes each request as a connection does (an out-of-range field raises) before
    answering; keeps the epochs asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.epochs: dict[TopicPartition, int] = {}

    def request(self, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
        encode_request(api_key, version, 1, "replica-fetcher-2", body)
        for t in body["topics"]:
            for p in t["partitions"]:
                self.epochs[TopicPartition(t["topic"], p["partition"])] = p["leader_epoch"]
        return super().request(api_key, version, body)


def test_a_follower_restarted_over_an_epoch_past_32_bits_asks_about_its_batches_epoch(
    tmp_path: Path,
) -> None:
    """A leader-epoch-checkpoint line with an epoch past Kafka's Int was loaded as the
    log's latest epoch: the round's one OffsetsForLeaderEpoch could not be encoded, and the
    round failed again and again, no partition from that leader (a0's too) truncated or
    fetched. Kafka refuses the line; here the epochs are read again from the batches."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "2"})

    def start() -> tuple[ReplicaManager, LogManager]:
        logs = LogManager([tmp_path / "data"], config)
        return ReplicaManager(2, cast(Any, None), StateChangeLog(tmp_path, 2), logs=logs), logs

    follower, logs = start()
    for tp in (A0, B0):  # it led both in epoch 4, and wrote 10 records
        follower.become_leader_or_follower(
            leader_and_isr_request(tp, 2, 4, [2], [1, 2], is_new=True)
        )
        for _ in range(10):
            follower.append_as_leader(tp, build_batch([b"x"]), 1)
    follower.close()
    logs.close()
    (tmp_path / "data" / "b-0" / "leader-epoch-checkpoint").write_text("0\n1\n3000000000 0\n")
    follower, logs = start()
    try:
        for tp in (A0, B0):
            follower.become_leader_or_follower(leader_and_isr_request(tp, 1, 5, [1, 2], [1, 2]))
        leader = EncodingLeader()
        fetcher = ReplicaFetcherThread(
            2, 1, ("127.0.0.1", 1), follower.append_as_follower, follower, connect=lambda *_: leader
        )
        fetcher.add_all([(tp, FetchState(10, 5)) for tp in (A0, B0)])
        fetcher._truncate_new_partitions()
        assert leader.epochs == {A0: 4, B0: 4}  # the answer: epoch 4 ends at 8
        assert [fetcher.partitions[tp].fetch_offset for tp in (A0, B0)] == [8, 8]
        assert not any(state.truncating for state in fetcher.partitions.values())
    finally:
        follower.close()
        logs.close()

"""A follower fetching outside its leader's log (answered OFFSET_OUT_OF_RANGE) asks where
that log starts and ends, as Kafka's fetchOffsetAndTruncate does, instead of fetching from
the same offset forever: below the leader's log start (retention deleted what it lacks: a
new replica of an old log, a broker back after a long absence or on a new disk), it starts
its log anew there; past the leader's log end (records the leader never had), it cuts its
log there. Real replica managers and logs; Fetch and ListOffsets go through the leader's
real KafkaApis and the wire codec."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from broker.apis import KafkaApis
from broker.config import BrokerConfig
from broker.fetcher import FetchState, ReplicaFetcherThread
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log import PartitionLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request, update_metadata_listing
from tests.unit.test_fetch_session import Loopback
from wire.api import ApiKey
from zkdata.znodes import TopicPartition

TP = TopicPartition("t", 0)
L, F = 1, 2


def leader_and_isr(leader_epoch: int, replicas: list[int]) -> dict[str, Any]:
    return leader_and_isr_request(TP, L, leader_epoch, [L], replicas)


Brokers = tuple[ReplicaManager, ReplicaManager]


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Brokers]:
    """The leader L with small segments and retention by size (it keeps only its active
    segment), and the follower F."""
    made: list[tuple[ReplicaManager, LogManager]] = []
    for broker, extra in ((L, {"log.segment.bytes": "200", "log.retention.bytes": "1"}), (F, {})):
        props = {"zookeeper.connect": "x:2181", "broker.id": str(broker), **extra}
        logs = LogManager([tmp_path / f"data-{broker}"], BrokerConfig.from_properties(props))
        state_log = StateChangeLog(tmp_path / str(broker), broker)
        made.append((ReplicaManager(broker, cast(Any, None), state_log, logs=logs), logs))
    yield made[0][0], made[1][0]
    for rm, logs in made:
        rm.close()
        logs.close()


def log_of(rm: ReplicaManager) -> PartitionLog:
    log = rm.partitions[TP].log
    assert log is not None
    return log


def produce(leader: ReplicaManager, count: int) -> None:
    for _ in range(count):
        assert leader.append_as_leader(TP, build_batch([b"x" * 50]), 1)[0] == 0


class Recording(Loopback):
    """The loopback, with the API of each request sent."""

    def __init__(self, apis: KafkaApis) -> None:
        super().__init__(apis)
        self.keys: list[int] = []

    def request(self, api_key: int, api_version: int, body: Any) -> Any:
        self.keys.append(api_key)
        return super().request(api_key, api_version, body)


def fetch_rounds(leader: ReplicaManager, follower: ReplicaManager, epoch: int) -> Recording:
    """The follower's fetcher, a few rounds (truncation, reset, fetch), from its log end."""
    metadata = MetadataCache(L, "PLAINTEXT")
    # What the controller's UpdateMetadata says (a fetch of a partition not listed is
    # UNKNOWN_TOPIC_OR_PARTITION, a follower's too).
    metadata.update(update_metadata_listing([TP], L, [L, F]))
    apis = KafkaApis(
        L,
        metadata,
        leader,
        cast(Any, None),
        StateChangeLog(None, L),
        lambda: 1,
    )
    conn = Recording(apis)
    fetcher = ReplicaFetcherThread(
        F,
        L,
        ("127.0.0.1", 1),
        follower.append_as_follower,
        follower,
        connect=lambda *_: conn,
        max_wait_ms=0,
    )
    fetcher.add_all([(TP, FetchState(log_of(follower).log_end_offset, epoch))])
    for _ in range(6):
        fetcher._truncate_new_partitions()
        fetch = fetcher._build_fetch()
        if fetch is not None:
            fetcher._fetch_once(fetch)
    return conn


def test_a_new_replica_of_a_log_retention_trimmed_starts_at_the_leaders_log_start(
    brokers: Brokers,
) -> None:
    leader, follower = brokers
    leader.become_leader_or_follower(leader_and_isr(1, [L]))
    produce(leader, 20)
    assert log_of(leader).delete_old_segments() > 0
    start = log_of(leader).log_start_offset
    assert start > 0
    # A reassignment adds F, empty.
    leader.become_leader_or_follower(leader_and_isr(2, [L, F]))
    follower.become_leader_or_follower(leader_and_isr(2, [L, F]))
    conn = fetch_rounds(leader, follower, 2)
    assert log_of(follower).log_start_offset == start
    assert log_of(follower).log_end_offset == 20
    assert log_of(follower).read(start, 1 << 20).to_bytes() == (
        log_of(leader).read(start, 1 << 20).to_bytes()
    )
    assert conn.keys.count(ApiKey.LIST_OFFSETS) == 2  # the leader's log end, then its start


def test_a_follower_back_after_retention_passed_its_log_end_starts_over_there(
    brokers: Brokers,
) -> None:
    leader, follower = brokers
    leader.become_leader_or_follower(leader_and_isr(1, [L, F]))
    follower.become_leader_or_follower(leader_and_isr(1, [L, F]))
    produce(leader, 3)
    fetch_rounds(leader, follower, 1)
    assert log_of(follower).log_end_offset == 3
    # F goes away; the leader writes on and its retention passes F's log end.
    leader.become_leader_or_follower(leader_and_isr(2, [L, F]))
    produce(leader, 20)
    log_of(leader).delete_old_segments()
    assert log_of(leader).log_start_offset > 3
    follower.become_leader_or_follower(leader_and_isr(2, [L, F]))
    fetch_rounds(leader, follower, 2)
    assert log_of(follower).log_start_offset == log_of(leader).log_start_offset
    assert log_of(follower).log_end_offset == 23


def test_a_follower_holding_records_past_the_leaders_log_end_cuts_them(
    brokers: Brokers,
) -> None:
    """Records without a leader epoch (written before epochs were kept: nothing to ask
    the leader about) past the leader's end: the fetch there is out of range, and the
    follower cuts its log at the leader's end (Kafka's unclean-election case)."""
    leader, follower = brokers
    leader.become_leader_or_follower(leader_and_isr(1, [L, F]))
    follower.become_leader_or_follower(leader_and_isr(1, [L, F]))
    produce(leader, 5)
    unversioned = b"".join(
        bytes(build_batch([b"old"], base_offset=offset, partition_leader_epoch=-1))
        for offset in range(8)
    )
    assert follower.append_as_follower(TP, L, 1, unversioned, 0) == 8
    assert log_of(follower).latest_epoch is None
    fetch_rounds(leader, follower, 1)
    assert log_of(follower).log_end_offset == 5


def test_a_follower_moves_its_log_start_up_to_its_leaders(brokers: Brokers) -> None:
    """Each broker runs its retention on its own clock: once the leader's removed old
    segments, the follower's log start follows the leader's log_start_offset in the Fetch
    answers, as Kafka's ReplicaFetcherThread.processPartitionData moves it. It stayed at 0,
    so a leadership moving to the follower before its own retention ran took consumers'
    earliest offset back to 0 and served the removed records again."""
    leader, follower = brokers
    leader.become_leader_or_follower(leader_and_isr(1, [L, F]))
    follower.become_leader_or_follower(leader_and_isr(1, [L, F]))
    produce(leader, 20)
    for _ in range(5):  # the leader's small segments: a few offsets a round
        fetch_rounds(leader, follower, 1)
    assert log_of(follower).log_end_offset == 20
    assert log_of(leader).delete_old_segments() > 0  # the leader's check; not the follower's
    start = log_of(leader).log_start_offset
    assert start > 0
    produce(leader, 1)
    for _ in range(2):  # the new record, then the high watermark past it
        fetch_rounds(leader, follower, 1)
    assert log_of(follower).log_end_offset == 21
    assert log_of(follower).log_start_offset == start

"""A follower whose leader keeps no fetch session for it (the leader's
max.incremental.fetch.session.cache.slots is 0, or its cache is full) lists every
partition in every fetch. In a fixed order, a partition whose next batch is larger than
the fetch's partition_max_bytes (1 MiB) is never served while a partition listed before
it has records at each fetch: only the first partition with records may exceed its max
bytes (KIP-74), so that follower stops replicating it and drops out of its ISR. Kafka
2.8's fetcher moves each partition that returned data to the end of its partition states
(AbstractFetcherThread.processFetchRequest: partitionStates.updateAndMoveToEnd), and
buildFetch lists them in that order, so the order rotates and the big batch comes first
(and is served) in the next fetch. With a session the follower moves them too, and an
incremental fetch still lists only what changed."""

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
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request, update_metadata_listing
from tests.unit.test_fetch_session import Loopback
from zkdata.znodes import TopicPartition

L, F = 1, 2
A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def broker(tmp_path: Path, b: int) -> tuple[ReplicaManager, LogManager]:
    config = BrokerConfig.from_properties(
        # message.max.bytes lets the leader take a 1.5 MB batch.
        {"zookeeper.connect": "x:2181", "broker.id": str(b), "message.max.bytes": "3000000"}
    )
    logs = LogManager([tmp_path / f"d{b}"], config)
    return ReplicaManager(b, cast(Any, None), StateChangeLog(None, b), logs=logs), logs


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[ReplicaManager, ReplicaManager]]:
    (leader, llogs), (follower, flogs) = broker(tmp_path, L), broker(tmp_path, F)
    try:
        for tp in (A, B, C):
            req = leader_and_isr_request(tp, L, 1, [L, F], [L, F], is_new=True)
            leader.become_leader_or_follower(req)
            follower.become_leader_or_follower(req)
        yield leader, follower
    finally:
        for rm, logs in ((leader, llogs), (follower, flogs)):
            rm.close()
            logs.close()


def fetcher_of(
    leader: ReplicaManager, follower: ReplicaManager, slots: int
) -> tuple[ReplicaFetcherThread, Loopback]:
    metadata = MetadataCache(L, "PLAINTEXT")
    # What the controller's UpdateMetadata says (a fetch of a partition not listed is
    # UNKNOWN_TOPIC_OR_PARTITION, a follower's too).
    metadata.update(update_metadata_listing([A, B, C], L, [L, F]))
    apis = KafkaApis(
        L,
        metadata,
        leader,
        cast(Any, None),
        StateChangeLog(None, L),
        lambda: 1,
        fetch_session_cache_slots=slots,
    )
    conn = Loopback(apis)
    fetcher = ReplicaFetcherThread(
        F,
        L,
        ("127.0.0.1", 1),
        follower.append_as_follower,
        follower,
        connect=lambda *_: conn,
        max_wait_ms=0,
    )
    return fetcher, conn


def fetch(fetcher: ReplicaFetcherThread) -> None:
    fetcher._truncate_new_partitions()
    built = fetcher._build_fetch()
    assert built is not None
    fetcher._fetch_once(built)


def positions(body: dict[str, Any]) -> list[tuple[TopicPartition, int]]:
    return [
        (TopicPartition(t["topic"], p["partition"]), p["fetch_offset"])
        for t in body["topics"]
        for p in t["partitions"]
    ]


@pytest.mark.parametrize("slots", [0, 1000])
def test_a_big_batch_behind_a_busy_partition_is_fetched(
    pair: tuple[ReplicaManager, ReplicaManager], slots: int
) -> None:
    leader, follower = pair
    fetcher, conn = fetcher_of(leader, follower, slots)
    # B holds one 1.5 MB batch; A gets a small batch before every fetch (a producer
    # writing to it steadily).
    leader.append_as_leader(B, build_batch([b"b" * 1_500_000]), 1)
    fetcher.add_all([(A, FetchState(0, 1)), (B, FetchState(0, 1))])
    for _ in range(10):
        leader.append_as_leader(A, build_batch([b"a" * 100]), 1)
        fetch(fetcher)
    assert fetcher._sessionless == (slots == 0)
    f_a, f_b = follower.partitions[A].log, follower.partitions[B].log
    assert f_a is not None
    assert f_b is not None
    assert f_b.log_end_offset == 1  # was 0 without a session: never served
    assert f_a.log_end_offset == 10
    if slots:
        # With a session, moving partitions in the follower's order changes nothing in
        # what it sends: after the full fetch, each incremental fetch lists a partition
        # only at a fetch offset the session does not hold yet.
        held: dict[TopicPartition, int] = {}
        for body in conn.requests[1:]:
            assert body["session_epoch"] > 0
            for tp, offset in positions(body):
                assert held.get(tp) != offset, (tp, offset)
                held[tp] = offset


def test_a_partition_that_returned_records_moves_to_the_end(
    pair: tuple[ReplicaManager, ReplicaManager],
) -> None:
    leader, follower = pair
    fetcher, conn = fetcher_of(leader, follower, 0)
    fetcher.add_all([(A, FetchState(0, 1)), (B, FetchState(0, 1))])
    fetch(fetcher)  # nothing to read: the order stays
    assert list(fetcher.partitions) == [A, B]
    leader.append_as_leader(A, build_batch([b"a"]), 1)
    fetch(fetcher)
    assert list(fetcher.partitions) == [B, A]
    fetch(fetcher)
    assert positions(conn.requests[-1]) == [(B, 0), (A, 1)]
    leader.append_as_leader(A, build_batch([b"a"]), 1)
    leader.append_as_leader(B, build_batch([b"b"]), 1)
    fetch(fetcher)  # both returned records: moved in the order they were answered
    assert list(fetcher.partitions) == [B, A]
    assert (fetcher.partitions[A].fetch_offset, fetcher.partitions[B].fetch_offset) == (2, 1)


def test_partitions_of_one_topic_are_grouped_only_where_they_are_consecutive(
    pair: tuple[ReplicaManager, ReplicaManager],
) -> None:
    """Kafka's FetchRequest.Builder puts partitions in one topic entry only where they
    follow each other: the leader reads them in the request's order, so one entry per
    topic would list a partition of another topic behind them all. Here that kept C's
    big batch behind B's records at every fetch (A, listed before C, has none)."""
    leader, follower = pair
    fetcher, conn = fetcher_of(leader, follower, 0)
    leader.append_as_leader(C, build_batch([b"c" * 1_500_000]), 1)
    fetcher.add_all([(A, FetchState(0, 1)), (C, FetchState(0, 1)), (B, FetchState(0, 1))])
    for _ in range(3):
        leader.append_as_leader(B, build_batch([b"b" * 100]), 1)
        fetch(fetcher)
    assert [t["topic"] for t in conn.requests[0]["topics"]] == ["t", "u", "t"]
    assert positions(conn.requests[0]) == [(A, 0), (C, 0), (B, 0)]
    f_c = follower.partitions[C].log
    assert f_c is not None
    assert f_c.log_end_offset == 1

"""The follower's fetcher manager: one fetcher per leader, partitions moved between them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from broker.fetcher import FetchConnection, ReplicaFetcherManager, ReplicaFetcherThread
from zkdata.znodes import TopicPartition

ENDPOINTS = {1: ("127.0.0.1", 9001), 2: ("127.0.0.1", 9002)}


def refuse(endpoint: tuple[str, int], client_id: str, timeout_s: float) -> FetchConnection:
    raise ConnectionRefusedError(f"no leader at {endpoint}")  # the fetchers back off


@pytest.fixture
def endpoints() -> dict[int, tuple[str, int]]:
    return dict(ENDPOINTS)


@pytest.fixture
def manager(endpoints: dict[int, tuple[str, int]]) -> Iterator[ReplicaFetcherManager]:
    m = ReplicaFetcherManager(
        3,
        lambda tp, leader, epoch, records, hw, log_start: None,
        endpoints.get,
        backoff_ms=60_000,
        connect=refuse,
    )
    yield m
    m.close()


def tps(n: int, topic: str = "t") -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(n)]


def test_partitions_are_fetched_from_their_leaders(manager: ReplicaFetcherManager) -> None:
    parts = tps(3_000)
    manager.follow([(tp, 1 + tp.partition % 2, 5, 0) for tp in parts])
    assert manager.followed() == {
        1: {tp for tp in parts if tp.partition % 2 == 0},
        2: {tp for tp in parts if tp.partition % 2 == 1},
    }


def test_a_partition_whose_leader_moves_is_fetched_from_the_new_leader_only(
    manager: ReplicaFetcherManager,
) -> None:
    a, b = tps(2)
    manager.follow([(a, 1, 5, 0), (b, 1, 5, 0)])
    manager.follow([(a, 2, 6, 0)])
    assert manager.followed() == {1: {b}, 2: {a}}
    # Led here now, or leaderless: fetched from nobody; a fetcher left empty goes.
    manager.follow([(b, 3, 7, 0), (a, -1, 7, 0)])
    assert manager.followed() == {}


def test_a_leader_without_a_known_address_is_named_once(
    manager: ReplicaFetcherManager, caplog: pytest.LogCaptureFixture
) -> None:
    parts = tps(1_000)
    with caplog.at_level(logging.WARNING, logger="broker.fetcher"):
        manager.follow([(tp, 4, 5, 0) for tp in parts] + [(TopicPartition("u", 0), 1, 5, 0)])
    assert manager.followed() == {1: {TopicPartition("u", 0)}}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "no address known for leader 4 of 1000 partitions (t-0 first); not fetching them yet"
    ]


def fetchers(manager: ReplicaFetcherManager) -> dict[int, ReplicaFetcherThread]:
    return dict(manager._fetchers)


def test_a_leader_that_restarted_on_another_port_is_fetched_from_there(
    manager: ReplicaFetcherManager, endpoints: dict[int, tuple[str, int]]
) -> None:
    """The leader kept its leader epochs (a LeaderAndIsr repeating them changes nothing):
    only the metadata tells the follower where the leader is now."""
    a, b, c = tps(3)
    manager.follow([(a, 1, 5, 0), (b, 1, 5, 0), (c, 2, 5, 0)])
    before = fetchers(manager)
    endpoints[1] = ("127.0.0.1", 9101)
    manager.refresh_endpoints()
    after = fetchers(manager)
    assert manager.followed() == {1: {a, b}, 2: {c}}
    assert after[1].endpoint == ("127.0.0.1", 9101)
    assert after[1] is not before[1]
    assert before[1]._stopped.is_set()
    assert after[2] is before[2]
    # The restarted leader may have lost its tail: ask again where the logs diverge.
    assert all(state.truncating for _, state in after[1].states())
    assert {tp: state.leader_epoch for tp, state in after[1].states()} == {a: 5, b: 5}


def test_following_a_leader_at_a_new_address_keeps_its_other_partitions(
    manager: ReplicaFetcherManager, endpoints: dict[int, tuple[str, int]]
) -> None:
    a, b = tps(2)
    manager.follow([(a, 1, 5, 0), (b, 1, 5, 0)])
    endpoints[1] = ("127.0.0.1", 9101)
    manager.follow([(a, 1, 6, 0)])
    assert manager.followed() == {1: {a, b}}
    assert fetchers(manager)[1].endpoint == ("127.0.0.1", 9101)


def test_a_partition_led_here_or_leaderless_is_not_fetched(
    manager: ReplicaFetcherManager,
    endpoints: dict[int, tuple[str, int]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only partitions with a leader other than this broker (3) are fetched: no fetcher
    from itself, none from leader -1 (no leader: the next LeaderAndIsr names one, and no
    address is looked for); one that was fetched and is now led here is fetched no more."""
    endpoints[3] = ("127.0.0.1", 9003)
    a, b, c = tps(3)
    manager.follow([(a, 1, 5, 0)])
    with caplog.at_level(logging.WARNING, logger="broker.fetcher"):
        manager.follow([(a, 3, 6, 0), (b, 3, 6, 0), (c, -1, 6, 0)])
    assert manager.followed() == {}
    assert caplog.records == []


def test_a_leader_gone_from_the_metadata_is_fetched_from_its_last_address(
    manager: ReplicaFetcherManager, endpoints: dict[int, tuple[str, int]]
) -> None:
    """No address known for the leader now (it is not in the metadata while it restarts):
    its fetcher stays where it was, until the metadata names a new one."""
    a, b = tps(2)
    manager.follow([(a, 1, 5, 0), (b, 2, 5, 0)])
    before = fetchers(manager)
    del endpoints[1]
    manager.refresh_endpoints()
    assert fetchers(manager) == before
    assert not before[1]._stopped.is_set()
    assert manager.followed() == {1: {a}, 2: {b}}


def test_partitions_moved_with_their_leader_are_truncated_again(
    manager: ReplicaFetcherManager, endpoints: dict[int, tuple[str, int]]
) -> None:
    """Partitions done truncating, moved to the leader's new address, start over: new
    states at their fetch offsets, to be truncated first."""
    a, b = tps(2)
    manager.follow([(a, 1, 5, 0), (b, 1, 5, 0)])
    old = fetchers(manager)[1]
    for tp, state in old.states():
        state.truncating, state.fetch_offset = False, 7 + tp.partition
    endpoints[1] = ("127.0.0.1", 9101)
    manager.refresh_endpoints()
    moved = dict(fetchers(manager)[1].states())
    assert {tp: (s.fetch_offset, s.leader_epoch, s.truncating) for tp, s in moved.items()} == {
        a: (7, 5, True),
        b: (8, 5, True),
    }
    assert not set(map(id, moved.values())) & {id(s) for _, s in old.states()}


def test_a_leader_no_partition_is_fetched_from_any_more_has_no_fetcher(
    manager: ReplicaFetcherManager,
) -> None:
    """Kafka's shutdownIdleFetcherThreads: unfollowing the last partition fetched from a
    leader stops its fetcher."""
    a, b = tps(2)
    manager.follow([(a, 1, 5, 0), (b, 2, 5, 0)])
    old = fetchers(manager)[1]
    manager.unfollow([a])
    assert manager.followed() == {2: {b}}
    assert old._stopped.is_set()


def test_fetchers_take_the_managers_wait_and_backoff() -> None:
    """replica.fetch.wait.max.ms and replica.fetch.backoff.ms reach every fetcher."""
    m = ReplicaFetcherManager(
        3,
        lambda tp, leader, epoch, records, hw, log_start: None,
        ENDPOINTS.get,
        max_wait_ms=123,
        backoff_ms=45_000,
        connect=refuse,
    )
    try:
        m.follow([(TopicPartition("t", 0), 1, 5, 0)])
        fetcher = fetchers(m)[1]
        assert (fetcher.max_wait_ms, fetcher.backoff_s) == (123, 45.0)
    finally:
        m.close()

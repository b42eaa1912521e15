"""A Fetch of a partition the broker's metadata cache does not list.

Kafka 2.8.2's handleFetchRequest answers every such partition UNKNOWN_TOPIC_OR_PARTITION
(a consumer's and a follower's fetch alike) before the replica manager reads anything:
a topic whose deletion the controller's UpdateMetadata announced (leader -2) is not read
at its leader, though the StopReplica has not come yet. The partitions so answered are
part of the response built through the fetch context, so an incremental session answers
them (errors always go out) and keeps them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.config import BrokerConfig
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import update_metadata_listing
from tests.unit.test_fetch_session import (
    FOLLOWER,
    LEADER,
    T0,
    T2,
    Loopback,
    fetch_body,
    make_leader,
    response_partitions,
)
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import LEADER_DURING_DELETE


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    manager = LogManager([tmp_path], config)
    yield manager
    manager.close()


def delete_topic_b(conn: Loopback) -> None:
    """The controller's UpdateMetadata marking topic "b" deleted (leader -2), as the
    broker receives it; no StopReplica yet."""
    listing = update_metadata_listing([T2], LEADER, [LEADER, FOLLOWER])
    listing["controller_epoch"] = 1  # make_leader's LeaderAndIsr's
    listing["topic_states"][0]["partition_states"][0]["leader"] = LEADER_DURING_DELETE
    assert conn.request(ApiKey.UPDATE_METADATA, 6, listing)["error_code"] == ErrorCode.NONE
    assert conn.apis.metadata.partition(T2.topic, T2.partition) is None


def errors(response: dict[str, Any]) -> dict[Any, int]:
    return {tp: p["error_code"] for tp, p in response_partitions(response).items()}


@pytest.mark.parametrize("replica_id", [-1, FOLLOWER], ids=["consumer", "follower"])
@pytest.mark.parametrize(("version", "epoch"), [(4, -1), (12, -1), (12, 0)])
def test_a_fetch_of_a_topic_the_metadata_says_deleted_is_unknown_and_reads_nothing(
    logs: LogManager, replica_id: int, version: int, epoch: int
) -> None:
    """Served, its records read, until the StopReplica came."""
    apis, replicas, _zk = make_leader([T0, T2], isr=(LEADER,), logs=logs)
    for tp in (T0, T2):
        assert replicas.append_as_leader(tp, build_batch([b"x"]), 1)[0] == ErrorCode.NONE
    conn = Loopback(apis)
    delete_topic_b(conn)
    got = conn.request(
        ApiKey.FETCH, version, fetch_body({T0: 0, T2: 0}, epoch=epoch, replica_id=replica_id)
    )
    parts = response_partitions(got)
    assert errors(got) == {T0: ErrorCode.NONE, T2: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert parts[T0]["records"]
    assert not parts[T2]["records"]
    assert parts[T2]["high_watermark"] == -1


@pytest.mark.parametrize("replica_id", [-1, FOLLOWER], ids=["consumer", "follower"])
@pytest.mark.parametrize("looked", [False, True], ids=["look-at-all", "what-changed"])
def test_an_incremental_session_answers_a_deleted_topic_each_fetch_and_keeps_it(
    replica_id: int, looked: bool
) -> None:
    """Kafka's IncrementalFetchContext.foreachPartition goes over every partition of the
    session: a partition the metadata cache stopped listing is answered, an error going
    out on every fetch (CachedPartition.maybeUpdateResponseData), and stays in the
    session. The session answered nothing: the partition was led here, unchanged."""
    apis, _replicas, _zk = make_leader([T0, T2], isr=(LEADER,))
    conn = Loopback(apis)
    full = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0, T2: 0}, replica_id=replica_id))
    session_id = full["session_id"]
    assert errors(full) == {T0: ErrorCode.NONE, T2: ErrorCode.NONE}
    first = 1
    if looked:
        # An idle round first: the session's next reads look at what changed (what the
        # UpdateMetadata names), not at every partition.
        idle = fetch_body({}, session_id=session_id, epoch=first, replica_id=replica_id)
        assert conn.request(ApiKey.FETCH, 12, idle)["responses"] == []
        first += 1
    delete_topic_b(conn)
    for epoch in (first, first + 1):
        got = conn.request(
            ApiKey.FETCH,
            12,
            fetch_body({}, session_id=session_id, epoch=epoch, replica_id=replica_id),
        )
        assert got["error_code"] == ErrorCode.NONE
        assert errors(got) == {T2: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    session = apis._fetch_session_cache().get(session_id)
    assert session is not None
    assert set(session.partitions) == {T0, T2}

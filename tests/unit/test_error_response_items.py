"""The items of each error response: every topic, partition, group or key a failed request
names is answered with the error, and each of its other fields as Kafka's
AbstractRequest.getErrorResponse of that request sets it (offsets and times unknown, -1)."""

from __future__ import annotations

import logging
import uuid

import pytest

from broker.error_responses import error_response
from broker.network import SocketServer
from tests.unit.test_error_responses import answer, fetch, server
from wire.api import ApiKey
from wire.errors import ErrorCode

__all__ = ["server"]  # the fixture


def test_metadata_topics_asked_by_id_only_are_answered_with_an_empty_name(
    server: SocketServer,
) -> None:
    """A Metadata v10+ request may name a topic by its id alone (name null); the response's
    name is not nullable before v12, so MetadataRequest.getErrorResponse answers ""."""
    topic_id = uuid.UUID(int=7)
    body = {"topics": [{"name": None, "topic_id": topic_id}]}
    for version in (10, 11, 12):
        response = answer(server, ApiKey.METADATA, version, body)
        assert response is not None, f"v{version} closed"
        assert [(t["name"], t["topic_id"], t["error_code"]) for t in response["topics"]] == [
            ("", topic_id, ErrorCode.UNKNOWN_SERVER_ERROR)
        ]


@pytest.mark.parametrize("version", [5, 8, 9])
def test_produce_errors_leave_every_offset_and_time_unknown(
    server: SocketServer, version: int
) -> None:
    """ProduceRequest.getErrorResponse: PartitionResponse(error), whose base offset, log
    append time and log start offset are all -1."""
    topic = {"name": "t", "partition_data": [{"index": 3, "records": b""}]}
    body = {"acks": -1, "timeout_ms": 1, "transactional_id": None, "topic_data": [topic]}
    response = answer(server, ApiKey.PRODUCE, version, body)
    assert response is not None
    (partition,) = response["responses"][0]["partition_responses"]
    assert partition["index"] == 3
    assert partition["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    assert (
        partition["base_offset"],
        partition["log_append_time_ms"],
        partition["log_start_offset"],
    ) == (-1, -1, -1)


def test_fetch_errors_leave_every_offset_unknown(server: SocketServer) -> None:
    """FetchResponse.partitionResponse(error): high watermark, last stable offset, log
    start offset all -1, no aborted transactions, no preferred read replica (-1)."""
    response = answer(server, ApiKey.FETCH, 11, fetch(11))
    assert response is not None
    for p in response["responses"][0]["partitions"]:
        assert (
            p["high_watermark"],
            p["last_stable_offset"],
            p["log_start_offset"],
            p["preferred_read_replica"],
        ) == (-1, -1, -1, -1)
        assert p["aborted_transactions"] is None


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_errors_leave_the_epoch_and_end_offset_undefined(
    server: SocketServer, version: int
) -> None:
    """OffsetsForLeaderEpochRequest.getErrorResponse: EpochEndOffset(error,
    UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) for each partition."""
    partitions = [{"partition": p, "current_leader_epoch": 1, "leader_epoch": 1} for p in (0, 4)]
    body = {"replica_id": -1, "topics": [{"topic": "t", "partitions": partitions}]}
    response = answer(server, ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body)
    assert response is not None
    (topic,) = response["topics"]
    assert topic["topic"] == "t"
    assert [
        (p["partition"], p["error_code"], p["leader_epoch"], p["end_offset"])
        for p in topic["partitions"]
    ] == [(p, ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1) for p in (0, 4)]


@pytest.mark.parametrize("version", [1, 4, 6])
def test_list_offsets_errors_leave_the_offset_and_timestamp_unknown(
    server: SocketServer, version: int
) -> None:
    partitions = [
        {"partition_index": p, "timestamp": -1, "current_leader_epoch": -1} for p in (1, 2)
    ]
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": "t", "partitions": partitions}],
    }
    response = answer(server, ApiKey.LIST_OFFSETS, version, body)
    assert response is not None
    (topic,) = response["topics"]
    assert topic["name"] == "t"
    assert [
        (p["partition_index"], p["error_code"], p["timestamp"], p["offset"])
        for p in topic["partitions"]
    ] == [(p, ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1) for p in (1, 2)]


def test_delete_topics_errors_go_in_every_topic_by_name_or_id(server: SocketServer) -> None:
    response = answer(server, ApiKey.DELETE_TOPICS, 5, {"topic_names": ["a", "b"], "timeout_ms": 1})
    assert response is not None
    assert [(t["name"], t["error_code"]) for t in response["responses"]] == [
        ("a", ErrorCode.UNKNOWN_SERVER_ERROR),
        ("b", ErrorCode.UNKNOWN_SERVER_ERROR),
    ]
    topic_id = uuid.UUID(int=9)
    body = {
        "topics": [
            {"name": "a", "topic_id": uuid.UUID(int=0)},
            {"name": None, "topic_id": topic_id},
        ],
        "timeout_ms": 1,
    }
    response = answer(server, ApiKey.DELETE_TOPICS, 6, body)
    assert response is not None
    assert [(t["name"], t["topic_id"], t["error_code"]) for t in response["responses"]] == [
        ("a", uuid.UUID(int=0), ErrorCode.UNKNOWN_SERVER_ERROR),
        (None, topic_id, ErrorCode.UNKNOWN_SERVER_ERROR),
    ]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_errors_go_in_every_partition(server: SocketServer, version: int) -> None:
    body = {
        "election_type": 0,
        "topic_partitions": [{"topic": "t", "partitions": [5, 6]}],
        "timeout_ms": 1,
    }
    response = answer(server, ApiKey.ELECT_LEADERS, version, body)
    assert response is not None
    (topic,) = response["replica_election_results"]
    assert topic["topic"] == "t"
    assert [(p["partition_id"], p["error_code"]) for p in topic["partition_result"]] == [
        (5, ErrorCode.UNKNOWN_SERVER_ERROR),
        (6, ErrorCode.UNKNOWN_SERVER_ERROR),
    ]


def test_describe_configs_errors_go_in_every_resource_with_no_configs(
    server: SocketServer,
) -> None:
    resources = [
        {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "1", "configuration_keys": ["a"]},
    ]
    response = answer(server, ApiKey.DESCRIBE_CONFIGS, 1, {"resources": resources})
    assert response is not None
    assert [
        (r["resource_type"], r["resource_name"], r["error_code"], r["configs"])
        for r in response["results"]
    ] == [
        (2, "t", ErrorCode.UNKNOWN_SERVER_ERROR, []),
        (4, "1", ErrorCode.UNKNOWN_SERVER_ERROR, []),
    ]


@pytest.mark.parametrize("version", [2, 7])
def test_offset_fetch_errors_go_in_the_top_level_error_from_v2(
    server: SocketServer, version: int
) -> None:
    """OffsetFetchRequest.getErrorResponse: from v2, the top-level error code and no
    partitions."""
    body = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}
    response = answer(server, ApiKey.OFFSET_FETCH, version, body)
    assert response is not None
    assert response["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    assert response["topics"] == []


def test_find_coordinator_before_v4_has_the_error_at_the_top_level(server: SocketServer) -> None:
    response = answer(server, ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert response is not None
    assert response["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    assert response["coordinators"] == []


def test_a_request_of_all_topics_or_partitions_lists_none_without_a_fault(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A null array (Metadata of all topics, ElectLeaders of all partitions) is a request
    naming no item, not a request the error response fails to read."""
    with caplog.at_level(logging.ERROR, logger="broker.error_responses"):
        assert (
            error_response(ApiKey.METADATA, 9, ErrorCode.UNKNOWN_SERVER_ERROR, {"topics": None})
            is None
        )
        request = {"election_type": 0, "topic_partitions": None, "timeout_ms": 1}
        response = error_response(ApiKey.ELECT_LEADERS, 1, ErrorCode.UNKNOWN_SERVER_ERROR, request)
        assert response is not None
        assert response["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
        assert response["replica_election_results"] == []
    assert caplog.records == []

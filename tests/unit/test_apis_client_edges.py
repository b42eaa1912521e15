"""Edges of the client-facing handlers of KafkaApis (Metadata, DescribeCluster,
ApiVersions, FindCoordinator, OffsetForLeaderEpoch, the dispatch), against Kafka 2.8's
KafkaApis (handleTopicMetadataRequest, handleDescribeCluster, handleApiVersionsRequest),
ReplicaManager.lastOffsetForLeaderEpoch and MetadataRequest.getErrorResponse. Found by
mutation testing: each was free to change."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from broker.apis import SUPPORTED, KafkaApis, Supported, api_versions_response
from broker.group_apis import GroupApis
from broker.metadata_cache import MetadataCache
from broker.state_change_log import StateChangeLog
from groups.coordinator import OFFSETS_TOPIC
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.test_fetch_session import LEADER, T0, Loopback, make_leader
from tests.unit.test_metadata_answer import NO_ID, UNKNOWN_ID, apis, metadata
from tests.unit.test_metadata_auto_create_offsets import metadata_of
from tests.unit.test_metadata_cache import TOPIC_ID, request, state, two_listener_request
from tests.unit.test_produce_handler import (
    answers,
    logs,  # noqa: F401 (a fixture)
    produce_records,
)
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import request_codec, response_codec
from zkdata import paths


def test_metadata_v0_asking_no_topic_is_every_topic_and_from_v1_no_topic() -> None:
    """MetadataRequest v0 has no null topic list: an empty one asks for every topic. From
    v1 null asks for every topic and an empty list for none (Kafka's
    MetadataRequest.isAllTopics): a client asking for brokers only got every topic."""
    a = apis()
    assert [t["name"] for t in metadata(a, 0, {"topics": []})["topics"]] == ["t"]
    for version in (1, 4, 9, 12):
        body: dict[str, Any] = {"topics": []}
        if version >= 4:
            body["allow_auto_topic_creation"] = False
        answer = metadata(a, version, body)
        assert (answer["topics"], len(answer["brokers"])) == ([], 3)
        body["topics"] = None
        assert [t["name"] for t in metadata(a, version, body)["topics"]] == ["t"]


def test_an_invalid_metadata_request_is_answered_as_kafkas_get_error_response() -> None:
    """MetadataRequest.getErrorResponse: no brokers, the schema's defaults for the
    controller (-1) and the cluster id (null), each topic not internal (even one named
    as an internal topic) with no partitions."""
    topics = [{"topic_id": TOPIC_ID, "name": OFFSETS_TOPIC}, {"topic_id": NO_ID, "name": "t"}]
    answer = metadata(apis(), 10, {"topics": topics, "allow_auto_topic_creation": False})
    assert (answer["brokers"], answer["controller_id"], answer["cluster_id"]) == ([], -1, None)
    assert [(t["name"], t["error_code"], t["is_internal"]) for t in answer["topics"]] == [
        (OFFSETS_TOPIC, ErrorCode.INVALID_REQUEST, False),
        ("t", ErrorCode.INVALID_REQUEST, False),
    ]


def test_unknown_topic_ids_are_answered_before_the_topics_found() -> None:
    """Kafka 3.1's handleTopicMetadataRequest answers unknownTopicIdsTopicMetadata ++
    topicMetadata: the unknown ids first."""
    topics = [{"topic_id": TOPIC_ID, "name": None}, {"topic_id": UNKNOWN_ID, "name": None}]
    answer = metadata(apis(), 12, {"topics": topics, "allow_auto_topic_creation": False})
    assert [(t["topic_id"], t["name"]) for t in answer["topics"]] == [
        (UNKNOWN_ID, None),
        (TOPIC_ID, "t"),
    ]


def test_a_broker_not_yet_informed_makes_no_topic_it_cannot_say_is_absent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before its first full UpdateMetadata a broker does not know whether a topic
    exists (it answers LEADER_NOT_AVAILABLE, not UNKNOWN_TOPIC_OR_PARTITION): only a
    topic its metadata says is absent is auto-created, so none is written here."""
    monkeypatch.setattr(MetadataCache, "update", lambda _self, _body: [])
    answered, zk = metadata_of("an-ordinary-topic")
    assert answered["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
    assert zk.exists(paths.topic("an-ordinary-topic")) is None
    # Informed, the same request makes it.
    monkeypatch.undo()
    answered, zk = metadata_of("an-ordinary-topic")
    assert answered["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
    assert zk.exists(paths.topic("an-ordinary-topic")) is not None


def test_describe_cluster_gives_the_controller_the_cluster_id_and_the_listeners_addresses() -> None:
    """handleDescribeCluster: the cluster id, the controller, and every live broker at
    its address on the request's listener, with its rack."""
    cache = MetadataCache(1, "REPLICATION")
    body = two_listener_request()
    body["controller_id"] = 2
    body["live_brokers"][2]["rack"] = "r3"
    cache.update(body)
    cache.cluster_id = "the-cluster"
    none = cast(Any, None)
    a = KafkaApis(1, cache, none, none, StateChangeLog(None, 1), lambda: 10, metadata_wait_s=0)
    codec = request_codec(ApiKey.DESCRIBE_CLUSTER, 0)
    asked = codec.decode(bytes(codec.encode({"include_cluster_authorized_operations": False})))
    out = response_codec(ApiKey.DESCRIBE_CLUSTER, 0)
    for listener, host, base in (("CLIENT", "c", 9000), (None, "r", 9100)):
        answer = a._handle_describe_cluster(asked, listener)
        decoded = out.decode(bytes(out.encode(answer)))
        assert (decoded["cluster_id"], decoded["controller_id"]) == ("the-cluster", 2)
        assert (decoded["error_code"], decoded["error_message"]) == (ErrorCode.NONE, None)
        assert [(b["broker_id"], b["host"], b["port"], b["rack"]) for b in decoded["brokers"]] == [
            (1, host, base + 1, None),
            (2, host, base + 2, None),
            (3, host, base + 3, "r3"),
        ]


def _offsets_led_by(leader: int) -> MetadataCache:
    cache = MetadataCache(1, "REPLICATION")
    body = two_listener_request()
    body["topic_states"] = request((OFFSETS_TOPIC, [state(0, leader)]))["topic_states"]
    cache.update(body)
    return cache


def test_group_apis_are_served_only_by_a_broker_with_a_group_coordinator() -> None:
    """A broker made without group APIs does not take their requests (their connection
    is closed), and answers FindCoordinator COORDINATOR_NOT_AVAILABLE; with them,
    FindCoordinator is the group coordinator's answer on the request's listener."""
    cache = _offsets_led_by(2)
    none = cast(Any, None)
    bare = KafkaApis(1, cache, none, none, StateChangeLog(None, 1), lambda: 10)
    coordinator = SimpleNamespace(partition_of=lambda _key: 0)
    groups = GroupApis(cast(Any, coordinator), cache, None, offsets_replication_factor=1)
    full = KafkaApis(1, cache, none, none, StateChangeLog(None, 1), lambda: 10, groups=groups)
    for key, supported in SUPPORTED.items():
        for a in (bare, full):
            assert not a.supported(key, supported.max_version + 1)
            assert not a.supported(key, supported.min_version - 1)
        assert full.supported(key, supported.max_version)
        group_api = key in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT) or key in (
            ApiKey.LEAVE_GROUP,
            ApiKey.OFFSET_COMMIT,
            ApiKey.OFFSET_FETCH,
            ApiKey.LIST_GROUPS,
            ApiKey.DESCRIBE_GROUPS,
        )
        assert bare.supported(key, supported.max_version) is not group_api, key.name
    body = {"key": "g", "key_type": 0}
    answer = bare.handle(ApiKey.FIND_COORDINATOR, 3, {}, body, listener="CLIENT")
    assert answer is not None
    assert (answer["error_code"], answer["node_id"]) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    answer = full.handle(ApiKey.FIND_COORDINATOR, 3, {}, body, listener="CLIENT")
    assert answer is not None
    assert (answer["error_code"], answer["node_id"], answer["host"], answer["port"]) == (
        ErrorCode.NONE,
        2,
        "c",
        9002,
    )


def test_find_coordinator_without_a_coordinator_answers_each_key_from_v4() -> None:
    """FindCoordinator v4 (KIP-699) answers each key asked for in its coordinators;
    v0-v3 the one key at the top level."""
    none = cast(Any, None)
    a = KafkaApis(1, _offsets_led_by(1), none, none, StateChangeLog(None, 1), lambda: 10)
    answer = a.handle(
        ApiKey.FIND_COORDINATOR, 4, {}, {"key_type": 0, "coordinator_keys": ["a", "b"]}
    )
    assert answer is not None
    assert [(c["key"], c["error_code"], c["node_id"]) for c in answer["coordinators"]] == [
        ("a", ErrorCode.COORDINATOR_NOT_AVAILABLE, -1),
        ("b", ErrorCode.COORDINATOR_NOT_AVAILABLE, -1),
    ]
    answer = a.handle(ApiKey.FIND_COORDINATOR, 3, {}, {"key": "a", "key_type": 0})
    assert answer is not None
    assert (answer["error_code"], answer["node_id"]) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)


# Kafka 2.8.2's newest versions of the client APIs (its ApiVersions answer), and the
# ones this broker serves past them: Metadata v12 (Kafka 3.1, KIP-516 topic ids) and
# FindCoordinator v4 (Kafka 3.0, KIP-699). OffsetForLeaderEpoch from v0, as Kafka 2.8 (it
# was from v2, v0-v1 then named in the README's "Not served").
CLIENT_APIS = {
    ApiKey.PRODUCE: Supported(0, 9),
    ApiKey.FETCH: Supported(0, 12),
    ApiKey.LIST_OFFSETS: Supported(0, 6),
    ApiKey.METADATA: Supported(0, 12),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Supported(0, 4),
    ApiKey.FIND_COORDINATOR: Supported(0, 4),
    ApiKey.API_VERSIONS: Supported(0, 3),
    ApiKey.DESCRIBE_CLUSTER: Supported(0, 0),
}


def test_api_versions_lists_every_api_once_in_api_key_order_with_kafkas_client_ranges() -> None:
    """ApiVersionsResponse lists the APIs in ApiKeys order, each once; a client
    negotiates the newest version both sides have, so a range narrower than Kafka's
    makes clients fall back (Produce below v7 has no zstd, Fetch below v11 no
    follower fetching)."""
    keys = api_versions_response(ErrorCode.NONE)["api_keys"]
    assert [k["api_key"] for k in keys] == sorted(int(k) for k in SUPPORTED)
    ranges = {k["api_key"]: Supported(k["min_version"], k["max_version"]) for k in keys}
    assert {k: ranges[int(k)] for k in CLIENT_APIS} == CLIENT_APIS


def test_join_group_is_handed_the_clients_address() -> None:
    """JoinGroup's member records the client's host (DescribeGroups's client_host,
    kafka-consumer-groups.sh --describe --members): the request's address reaches the
    group APIs with it, the other group APIs without."""
    calls: list[tuple[str, tuple[Any, ...]]] = []

    class Groups:
        def join_group(self, *args: Any) -> dict[str, Any]:
            calls.append(("join_group", args))
            return {}

        def heartbeat(self, *args: Any) -> dict[str, Any]:
            calls.append(("heartbeat", args))
            return {}

    none = cast(Any, None)
    a = KafkaApis(
        1, _offsets_led_by(1), none, none, StateChangeLog(None, 1), lambda: 10,
        groups=cast(Any, Groups()),
    )  # fmt: skip
    header = {"client_id": "c"}
    a.handle(ApiKey.JOIN_GROUP, 5, header, {"group_id": "g"}, client_host="/10.0.0.7")
    a.handle(ApiKey.HEARTBEAT, 4, header, {"group_id": "g"}, client_host="/10.0.0.7")
    assert calls == [
        ("join_group", (5, {"group_id": "g"}, header, "/10.0.0.7")),
        ("heartbeat", (4, {"group_id": "g"}, header)),
    ]


def test_offset_for_leader_epoch_answers_where_each_epoch_ended_at_the_current_epoch(
    logs: LogManager,  # noqa: F811
) -> None:
    """Kafka 2.8's lastOffsetForLeaderEpoch: the leader's log says where the epoch asked
    for ended (the log end for its latest epoch), an epoch past the latest is
    (-1, -1); a current_leader_epoch other than the leader's is its error, with
    (-1, -1); -1 checks none."""
    apis, _replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
    client = Loopback(apis)
    for _ in range(3):
        body = produce_records(T0, bytes(build_batch([b"v"])))
        assert answers(client.request(ApiKey.PRODUCE, 8, body)) == [("a", 0, 0)]
    asked = [(0, 0), (-1, 0), (0, 7), (1, 0)]  # (current_leader_epoch, leader_epoch)
    body = {
        "replica_id": -1,
        "topics": [
            {
                "topic": T0.topic,
                "partitions": [
                    {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}
                    for current, epoch in asked
                ],
            }
        ],
    }
    got = client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body)
    (topic,) = got["topics"]
    assert [(p["error_code"], p["leader_epoch"], p["end_offset"]) for p in topic["partitions"]] == [
        (ErrorCode.NONE, 0, 3),
        (ErrorCode.NONE, 0, 3),
        (ErrorCode.NONE, -1, -1),
        (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1),
    ]


@pytest.mark.parametrize("version", [0, 1])
def test_offset_for_leader_epoch_v0_and_v1_answer_as_kafka_2_8(
    logs: LogManager,  # noqa: F811
    version: int,
) -> None:
    """Kafka 2.8 serves OffsetForLeaderEpoch from v0 (brokers before 2.1 send v0-v1).
    Those requests have no current_leader_epoch (its default, -1: no epoch checked,
    ReplicaManager.lastOffsetForLeaderEpoch's Optional.empty) and no replica_id; the
    answer is v2's, without leader_epoch in v0 (v1 adds it): the client reads -1."""
    apis, _replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
    assert apis.supported(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    client = Loopback(apis)
    for _ in range(3):
        body = produce_records(T0, bytes(build_batch([b"v"])))
        assert answers(client.request(ApiKey.PRODUCE, 8, body)) == [("a", 0, 0)]
    body = {
        "topics": [
            {
                "topic": T0.topic,
                "partitions": [
                    {"partition": 0, "leader_epoch": 0},
                    {"partition": 0, "leader_epoch": 7},
                    {"partition": 9, "leader_epoch": 0},
                ],
            }
        ],
    }
    got = client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body)
    assert client.requests[-1]["topics"][0]["partitions"][0]["current_leader_epoch"] == -1
    (topic,) = got["topics"]
    carried = 0 if version >= 1 else -1
    assert [
        (p["partition"], p["error_code"], p["leader_epoch"], p["end_offset"])
        for p in topic["partitions"]
    ] == [
        (0, ErrorCode.NONE, carried, 3),
        (0, ErrorCode.NONE, -1, -1),
        (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    ]

"""The Metadata answer (KafkaApis over the metadata cache), against Kafka 2.8's
KafkaApis.handleTopicMetadataRequest."""

from __future__ import annotations

import uuid
from typing import Any, cast

import pytest

from broker.apis import KafkaApis
from broker.metadata_cache import MetadataCache
from broker.state_change_log import StateChangeLog
from tests.unit.test_metadata_cache import TOPIC_ID, request, state
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import request_codec, response_codec


def apis(*, informed: bool = True) -> KafkaApis:
    cache = MetadataCache(1)
    if informed:
        cache.update(request(("t", [state(0, 1)])))
    none = cast(Any, None)
    return KafkaApis(1, cache, none, none, StateChangeLog(None, 1), lambda: 10, metadata_wait_s=0)


def metadata(a: KafkaApis, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """The answer to ``body`` at ``version``, both through the wire's codecs."""
    codec = request_codec(ApiKey.METADATA, version)
    answer = a.handle(ApiKey.METADATA, version, {}, codec.decode(bytes(codec.encode(body))))
    assert answer is not None
    out = response_codec(ApiKey.METADATA, version)
    decoded: dict[str, Any] = out.decode(bytes(out.encode(answer)))
    return decoded


INVALID = ["", ".", "..", "bad name!", "x" * 250, "caf\u00e9"]


@pytest.mark.parametrize("informed", [True, False])
@pytest.mark.parametrize("version", [1, 4, 9, 12])
def test_a_topic_name_no_topic_can_have_is_invalid_topic_exception(
    version: int, informed: bool
) -> None:
    """Kafka's getTopicMetadata answers a missing topic that Topic.validate refuses
    INVALID_TOPIC_EXCEPTION (the Java producer fails at once; UNKNOWN_TOPIC_OR_PARTITION
    makes it wait max.block.ms), an empty name included (it was dropped from the answer),
    whatever the broker knows yet."""
    body: dict[str, Any] = {"topics": [{"name": n} for n in [*INVALID, "t", "valid-but-absent"]]}
    if version >= 4:
        body["allow_auto_topic_creation"] = False
    answer = metadata(apis(informed=informed), version, body)
    codes = {t["name"]: t["error_code"] for t in answer["topics"]}
    missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if informed else ErrorCode.LEADER_NOT_AVAILABLE
    assert codes == {
        **dict.fromkeys(INVALID, ErrorCode.INVALID_TOPIC_EXCEPTION),
        "t": ErrorCode.NONE if informed else ErrorCode.LEADER_NOT_AVAILABLE,
        "valid-but-absent": missing,
    }


# Kafka's AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPS = sum(1 << op for op in (5, 9, 10, 11, 12, 7, 8))
NOT_ASKED = -(2**31)


@pytest.mark.parametrize("asked", [True, False])
@pytest.mark.parametrize("version", [8, 10, 11, 12])
def test_authorized_operations_are_every_supported_one_when_asked(
    version: int, asked: bool
) -> None:
    """Kafka 2.8 without an authorizer answers include_*_authorized_operations with every
    operation the resource supports (AuthHelper.authorizedOperations), for each topic
    answered (found or not) and the cluster (v8-v10); the schema's default (Int.MinValue,
    which the Java AdminClient reads as "not provided") was answered even when asked."""
    body = {
        "topics": [{"name": "t"}, {"name": "absent"}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": asked,
    }
    if version <= 10:
        body["include_cluster_authorized_operations"] = asked
    answer = metadata(apis(), version, body)
    assert [t["topic_authorized_operations"] for t in answer["topics"]] == [
        TOPIC_OPS if asked else NOT_ASKED
    ] * 2
    if version <= 10:
        assert answer["cluster_authorized_operations"] == (CLUSTER_OPS if asked else NOT_ASKED)


@pytest.mark.parametrize("asked", [True, False])
def test_describe_cluster_answers_the_clusters_authorized_operations_when_asked(
    asked: bool,
) -> None:
    codec = request_codec(ApiKey.DESCRIBE_CLUSTER, 0)
    body = codec.decode(bytes(codec.encode({"include_cluster_authorized_operations": asked})))
    answer = apis().handle(ApiKey.DESCRIBE_CLUSTER, 0, {}, body)
    assert answer is not None
    out = response_codec(ApiKey.DESCRIBE_CLUSTER, 0)
    decoded = out.decode(bytes(out.encode(answer)))
    assert decoded["cluster_authorized_operations"] == (CLUSTER_OPS if asked else NOT_ASKED)
    assert [b["broker_id"] for b in decoded["brokers"]] == [1, 2, 3]


UNKNOWN_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")
NO_ID = uuid.UUID(int=0)


def topics_by_id(answer: dict[str, Any]) -> list[tuple[uuid.UUID, str | None, int, int]]:
    return sorted(
        (
            (t["topic_id"], t["name"], t["error_code"], len(t["partitions"]))
            for t in answer["topics"]
        ),
        key=str,
    )


def test_metadata_v12_asks_for_topics_by_id() -> None:
    """Metadata v12 (KIP-516, Kafka 3.1) may name a topic by its id alone, as the Java
    AdminClient's describeTopics(TopicCollection.ofTopicIds(..)) does. Kafka 3.1's
    handleTopicMetadataRequest answers a known id with its topic (name, id, partitions)
    and an unknown one UNKNOWN_TOPIC_ID with a null name; once the request holds an id,
    the names it holds are not looked at. Such entries were dropped: no answer at all."""
    a = apis()
    for topics in (
        [{"topic_id": TOPIC_ID, "name": None}, {"topic_id": UNKNOWN_ID, "name": None}],
        # A name beside an id, or alone beside others' ids, is not asked for.
        [
            {"topic_id": TOPIC_ID, "name": "elsewhere"},
            {"topic_id": UNKNOWN_ID, "name": "t"},
            {"topic_id": NO_ID, "name": "absent"},
            {"topic_id": TOPIC_ID, "name": None},  # asked twice, answered once
        ],
    ):
        body = {
            "topics": topics,
            "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False,
        }
        assert topics_by_id(metadata(a, 12, body)) == sorted(
            [
                (TOPIC_ID, "t", ErrorCode.NONE, 1),
                (UNKNOWN_ID, None, ErrorCode.UNKNOWN_TOPIC_ID, 0),
            ],
            key=str,
        )
    # Before its first full UpdateMetadata a broker cannot say an id is no topic's.
    body = {"topics": [{"topic_id": UNKNOWN_ID, "name": None}], "allow_auto_topic_creation": False}
    assert topics_by_id(metadata(apis(informed=False), 12, body)) == [
        (UNKNOWN_ID, None, ErrorCode.LEADER_NOT_AVAILABLE, 0)
    ]


@pytest.mark.parametrize(
    ("version", "topics"),
    [
        # Before v12 a topic is named, never given by id (Kafka 2.8 and 3.1).
        (10, [{"topic_id": NO_ID, "name": None}, {"topic_id": NO_ID, "name": "t"}]),
        (11, [{"topic_id": TOPIC_ID, "name": "t"}, {"topic_id": NO_ID, "name": "u"}]),
        # At v12 a topic with neither is asked for by nothing (Kafka fails on the null name).
        (12, [{"topic_id": NO_ID, "name": None}, {"topic_id": NO_ID, "name": "t"}]),
    ],
)
def test_a_topic_asked_for_by_nothing_or_by_id_before_v12_is_invalid_request(
    version: int, topics: list[dict[str, Any]]
) -> None:
    """Kafka's handleTopicMetadataRequest throws InvalidRequestException for the whole
    request, answered as MetadataRequest.getErrorResponse does: each topic asked for with
    that error, a null name given as "", no brokers."""
    body = {"topics": topics, "allow_auto_topic_creation": False}
    answer = metadata(apis(), version, body)
    assert answer["brokers"] == []
    assert [
        (t["name"], t["topic_id"], t["error_code"], t["partitions"]) for t in answer["topics"]
    ] == [(t["name"] or "", t["topic_id"], ErrorCode.INVALID_REQUEST, []) for t in topics]


@pytest.mark.parametrize("version", [0, 4, 12])
def test_a_topic_named_twice_is_answered_once(version: int) -> None:
    """Kafka 2.8's handleTopicMetadataRequest asks for metadataRequest.topics as a set:
    a topic named twice is answered once (it was answered twice), known or not."""
    body: dict[str, Any] = {"topics": [{"name": n} for n in ["t", "absent", "t", "absent"]]}
    if version >= 4:
        body["allow_auto_topic_creation"] = False
    answer = metadata(apis(), version, body)
    assert sorted(t["name"] for t in answer["topics"]) == ["absent", "t"]

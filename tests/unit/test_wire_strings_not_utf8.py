"""A request string that is not UTF-8 (a topic name a C client such as kcat passes through
from a Latin-1 argv) is read as Kafka 2.8 reads it, and the request answered. Kafka's
Readable.readString is `new String(bytes, UTF_8)`: bad bytes become U+FFFD, and the name
is then one no topic can have (Topic.validate), answered for that topic alone. The
codec's strict decode made it a malformed request: Metadata, Produce and CreateTopics,
having no top-level error code, had their connection closed (librdkafka asking for one
such topic lost every metadata refresh). Through a real socket server and request
handler, the wire codec both ways."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from broker.apis import KafkaApis
from broker.config import BrokerConfig
from broker.metadata_cache import MetadataCache
from broker.network import SocketServer
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.test_admin_apis import zk_cluster
from tests.unit.test_fetch_session import LEADER, T0, make_leader
from tests.unit.test_metadata_cache import request, state
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import decode_response, encode_request

PLACEHOLDER = "cafX"
READ_AS = "caf\ufffd"  # "café" in Latin-1 (0xE9 alone), as Java's String reads it


def latin1_frame(api: ApiKey, version: int, body: dict[str, Any]) -> bytes:
    """The request with PLACEHOLDER's last byte made 0xE9: same length, not UTF-8."""
    frame = bytearray(encode_request(api, version, 7, "kcat", body))
    i = frame.index(PLACEHOLDER.encode())
    frame[i + 3] = 0xE9
    return bytes(frame)


def ask(apis: KafkaApis, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """The answer over a real connection; fails if the broker closes it instead."""
    server = SocketServer("127.0.0.1", 0, lambda: apis)
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as c:
            c.sendall(latin1_frame(api, version, body))
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                more = c.recv(65536)
                assert more, "the broker closed the connection without an answer"
                data += more
    finally:
        server.stop()
    correlation_id, answer = decode_response(api, version, data[4:])
    assert correlation_id == 7
    return answer


def metadata_apis() -> KafkaApis:
    cache = MetadataCache(1)
    cache.update(request(("t", [state(0, 1)])))
    none = cast(Any, None)
    return KafkaApis(1, cache, none, none, StateChangeLog(None, 1), lambda: 10, metadata_wait_s=0)


@pytest.mark.parametrize("version", [0, 1, 4, 9, 12])  # v9+: compact strings
def test_metadata_naming_a_topic_not_utf8_answers_it_invalid_and_serves_the_rest(
    version: int,
) -> None:
    """Kafka's getTopicMetadata: a missing topic Topic.validate refuses (U+FFFD is outside
    [a-zA-Z0-9._-]) is INVALID_TOPIC_EXCEPTION, auto-creation or not."""
    body: dict[str, Any] = {"topics": [{"name": "t"}, {"name": PLACEHOLDER}]}
    if version >= 4:
        body["allow_auto_topic_creation"] = False
    answer = ask(metadata_apis(), ApiKey.METADATA, version, body)
    codes = {t["name"]: t["error_code"] for t in answer["topics"]}
    assert codes == {"t": ErrorCode.NONE, READ_AS: ErrorCode.INVALID_TOPIC_EXCEPTION}
    served = next(t for t in answer["topics"] if t["name"] == "t")
    assert [p["leader_id"] for p in served["partitions"]] == [1]


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    manager = LogManager([tmp_path], config)
    yield manager
    manager.close()


@pytest.mark.parametrize("version", [3, 8, 9])  # v9: compact strings
def test_produce_to_a_topic_not_utf8_answers_it_unknown_and_appends_the_rest(
    logs: LogManager, version: int
) -> None:
    """Kafka 2.8's handleProduceRequest answers a partition the metadata cache does not
    have UNKNOWN_TOPIC_OR_PARTITION (it does not validate the name), the others appended."""
    apis, _replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
    partition = [{"index": 0, "records": bytes(build_batch([b"v"]))}]
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [
            {"name": T0.topic, "partition_data": partition},
            {"name": PLACEHOLDER, "partition_data": partition},
        ],
    }
    answer = ask(apis, ApiKey.PRODUCE, version, body)
    codes = {
        (t["name"], p["index"]): (p["error_code"], p["base_offset"])
        for t in answer["responses"]
        for p in t["partition_responses"]
    }
    assert codes == {
        (T0.topic, 0): (ErrorCode.NONE, 0),
        (READ_AS, 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    }


@pytest.mark.parametrize("version", [1, 4, 5, 7])  # v5+: compact strings
def test_create_topics_naming_a_topic_not_utf8_answers_it_invalid_and_checks_the_rest(
    version: int,
) -> None:
    """Kafka's ZkAdminManager.createTopics: Topic.validate refuses the name,
    INVALID_TOPIC_EXCEPTION for that topic; the other is checked (validate_only) as usual."""
    _zk, admin = zk_cluster()
    none = cast(Any, None)
    apis = KafkaApis(1, MetadataCache(1), none, none, StateChangeLog(None, 1), lambda: 10)
    apis.admin = admin
    topics = [
        {"name": n, "num_partitions": 1, "replication_factor": 2, "assignments": [], "configs": []}
        for n in ("ok", PLACEHOLDER)
    ]
    body = {"topics": topics, "timeout_ms": 1000, "validate_only": True}
    answer = ask(apis, ApiKey.CREATE_TOPICS, version, body)
    codes = {t["name"]: t["error_code"] for t in answer["topics"]}
    assert codes == {"ok": ErrorCode.NONE, READ_AS: ErrorCode.INVALID_TOPIC_EXCEPTION}

"""Znode codecs: Kafka's exact bytes, Kafka-written data decodes, round trips, and every kind
of malformed data raising MalformedZnode that names the znode."""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkdata import paths
from zkdata.znodes import (
    BrokerRegistration,
    EndPoint,
    IdentityClaim,
    LeaderAndIsr,
    MalformedZnode,
    PartitionState,
    TopicAssignment,
    TopicPartition,
    decode_broker,
    decode_cluster_id,
    decode_config_change,
    decode_controller,
    decode_controller_epoch,
    decode_identity_claim,
    decode_log_dir_event,
    decode_partition_list,
    decode_partition_list_entries,
    decode_partition_state,
    decode_reassignment,
    decode_reassignment_entries,
    decode_topic,
    decode_topic_config,
    encode_broker,
    encode_cluster_id,
    encode_config_change,
    encode_controller,
    encode_controller_epoch,
    encode_identity_claim,
    encode_log_dir_event,
    encode_partition_list,
    encode_partition_state,
    encode_reassignment,
    encode_topic,
    encode_topic_config,
    new_topic_id,
    next_zk_version,
    shared_index,
    shared_indexes,
    topic_id_from_str,
    topic_id_to_str,
)

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None)
STATE_PATH = paths.partition_state("orders", 3)
INT32_MAX = 2**31 - 1

# --- Kafka's bytes ---------------------------------------------------------------------


def test_partition_state_bytes_are_kafkas() -> None:
    data = encode_partition_state(LeaderAndIsr(1, 0, (1, 2, 3)), 1)
    assert data == b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'
    assert json.loads(data) == {
        "controller_epoch": 1,
        "leader": 1,
        "version": 1,
        "leader_epoch": 0,
        "isr": [1, 2, 3],
    }


def test_partition_state_bytes_with_no_leader_and_a_single_isr_member() -> None:
    data = encode_partition_state(LeaderAndIsr(-1, 17, (4,), zk_version=9), 12)
    assert data == b'{"controller_epoch":12,"leader":-1,"version":1,"leader_epoch":17,"isr":[4]}'


def test_controller_bytes_are_kafkas() -> None:
    assert (
        encode_controller(1, 1_700_000_000_123)
        == b'{"version":1,"brokerid":1,"timestamp":"1700000000123"}'
    )


def test_controller_timestamp_defaults_to_now_as_a_string() -> None:
    obj = json.loads(encode_controller(7))
    assert obj["brokerid"] == 7
    assert isinstance(obj["timestamp"], str)
    assert int(obj["timestamp"]) > 1_600_000_000_000


def test_controller_epoch_is_a_bare_integer() -> None:
    assert encode_controller_epoch(0) == b"0"
    assert encode_controller_epoch(42) == b"42"


def test_topic_bytes_version_2_without_an_id() -> None:
    data = encode_topic(TopicAssignment("t", {1: (2, 3, 1), 0: (1, 2, 3)}))
    assert data == (
        b'{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,1]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )


def test_topic_bytes_version_3_with_an_id_and_a_reassignment() -> None:
    tid = uuid.UUID(int=1)
    data = encode_topic(
        TopicAssignment("t", {0: (4, 1, 2)}, tid, adding_replicas={0: (4,)}, removing_replicas={})
    )
    assert data == (
        b'{"version":3,"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","partitions":{"0":[4,1,2]},'
        b'"adding_replicas":{"0":[4]},"removing_replicas":{}}'
    )


def test_broker_registration_bytes_are_a_kafka_2_8_brokers() -> None:
    """Version 5 with its (empty) features, as Kafka 2.8 writes it at its default
    inter.broker.protocol.version (2.7-IV0 and later); it wrote version 4 before."""
    reg = BrokerRegistration(0, (EndPoint("PLAINTEXT", "localhost", 9092),), timestamp_ms=1)
    assert encode_broker(reg) == (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"localhost","version":5,"timestamp":"1"}'
    )
    assert decode_broker(0, encode_broker(reg)) == reg


def test_the_registration_key_order_is_the_scala_hash_maps() -> None:
    """BrokerIdZNode.encode's keys in a Scala 2.13 mutable.HashMap of 16 buckets: by
    bucket (the String hash spread by h ^ h >>> 16), then by signed hash within one."""

    def java_hash(text: str) -> int:
        h = 0
        for c in text:
            h = (31 * h + ord(c)) & 0xFFFFFFFF
        h ^= h >> 16
        return h - (1 << 32) if h >= 1 << 31 else h

    reg = BrokerRegistration(0, (EndPoint("PLAINTEXT", "h", 1),), rack="r", timestamp_ms=1)
    keys = list(json.loads(encode_broker(reg)))
    assert keys == sorted(keys, key=lambda k: (java_hash(k) & 15, java_hash(k)))


def test_broker_registration_bytes_with_rack_and_two_listeners() -> None:
    reg = BrokerRegistration(
        2,
        (EndPoint("INTERNAL", "10.0.0.2", 9093), EndPoint("EXTERNAL", "b2.example", 19093, "SSL")),
        rack="eu-1a",
        timestamp_ms=1_600_000_000_000,
    )
    assert encode_broker(reg) == (
        b'{"features":{},"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT",'
        b'"EXTERNAL":"SSL"},"endpoints":["INTERNAL://10.0.0.2:9093",'
        b'"EXTERNAL://b2.example:19093"],"rack":"eu-1a","jmx_port":-1,"port":9093,'
        b'"host":"10.0.0.2","version":5,"timestamp":"1600000000000"}'
    )


def test_broker_host_and_port_are_the_first_plaintext_endpoints() -> None:
    # Kafka's BrokerIdZNode.encode: host/port (for old readers) come from the first PLAINTEXT
    # endpoint, whatever the order of the listeners; with none, null and -1.
    ssl = EndPoint("SECURE", "s.example", 9093, "SSL")
    plain = EndPoint("PLAIN", "p.example", 9092, "PLAINTEXT")
    reg = BrokerRegistration(1, (ssl, plain), timestamp_ms=1)
    obj = json.loads(encode_broker(reg))
    assert (obj["host"], obj["port"]) == ("p.example", 9092)
    assert decode_broker(1, encode_broker(reg)) == reg
    only_ssl = BrokerRegistration(1, (ssl,), timestamp_ms=1)
    assert encode_broker(only_ssl) == (
        b'{"features":{},"listener_security_protocol_map":{"SECURE":"SSL"},'
        b'"endpoints":["SECURE://s.example:9093"],"jmx_port":-1,"port":-1,"host":null,'
        b'"version":5,"timestamp":"1"}'
    )
    assert decode_broker(1, encode_broker(only_ssl)) == only_ssl


def test_ipv6_endpoints_are_bracketed_as_kafka_formats_them() -> None:
    # Kafka's EndPoint.connectionString uses Utils.formatAddress: [host]:port for IPv6.
    reg = BrokerRegistration(1, (EndPoint("PLAINTEXT", "::1", 9092),), timestamp_ms=1)
    assert json.loads(encode_broker(reg))["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert decode_broker(1, encode_broker(reg)) == reg


def test_admin_and_notification_bytes() -> None:
    tps = [TopicPartition("a", 0), TopicPartition("b", 2)]
    assert encode_partition_list(tps) == (
        b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":2}]}'
    )
    assert encode_reassignment({TopicPartition("b", 1): (3, 4), TopicPartition("a", 0): [1]}) == (
        b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1]},'
        b'{"topic":"b","partition":1,"replicas":[3,4]}]}'
    )
    assert encode_topic_config({"min.insync.replicas": "2"}) == (
        b'{"version":1,"config":{"min.insync.replicas":"2"}}'
    )
    assert encode_config_change("topics/t") == b'{"version":2,"entity_path":"topics/t"}'
    # Kafka's Map("version", "broker", "event"): a Scala Map of three keeps their order.
    assert encode_log_dir_event(7) == b'{"version":1,"broker":7,"event":1}'


def test_topic_ids_are_kafka_uuid_strings() -> None:
    tid = uuid.UUID("e5ab1b9e-6c6a-4f0e-9b33-8f4d6b1e2a10")
    text = topic_id_to_str(tid)
    assert len(text) == 22
    assert "=" not in text
    assert topic_id_from_str(text) == tid
    for _ in range(200):
        fresh = new_topic_id()
        assert not topic_id_to_str(fresh).startswith("-")
        assert fresh != uuid.UUID(int=0)


# --- data Kafka wrote --------------------------------------------------------------------


def test_decodes_a_partition_state_kafka_wrote() -> None:
    data = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":5,"isr":[2,1]}'
    assert decode_partition_state(STATE_PATH, data, 11) == PartitionState(
        LeaderAndIsr(2, 5, (2, 1), zk_version=11), 3
    )


def test_decodes_a_partition_state_of_a_partition_without_leader() -> None:
    data = b'{"controller_epoch":3,"leader":-1,"version":1,"leader_epoch":6,"isr":[1]}'
    state = decode_partition_state(STATE_PATH, data, 2)
    assert state.leader_and_isr.leader == -1
    assert state.leader_and_isr.isr == (1,)


def test_decodes_a_broker_registration_kafka_wrote() -> None:
    data = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
        b'"SASL_SSL":"SASL_SSL"},"endpoints":["PLAINTEXT://kafka-1:9092","SASL_SSL://[fe80::1]:9094"],'
        b'"rack":"r1","jmx_port":9999,"port":9092,"host":"kafka-1","version":5,'
        b'"timestamp":"1651234567890"}'
    )
    reg = decode_broker(1, data)
    assert reg.endpoints == (
        EndPoint("PLAINTEXT", "kafka-1", 9092, "PLAINTEXT"),
        EndPoint("SASL_SSL", "fe80::1", 9094, "SASL_SSL"),
    )
    assert (reg.rack, reg.jmx_port, reg.timestamp_ms) == ("r1", 9999, 1651234567890)
    assert (reg.host, reg.port) == ("kafka-1", 9092)


def test_decodes_a_version_4_broker_registration_kafka_wrote() -> None:
    """What Kafka before 2.7-IV0 writes (and this broker wrote): no features."""
    data = (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"host":"localhost",'
        b'"timestamp":"1","port":9092,"version":4}'
    )
    assert decode_broker(0, data) == BrokerRegistration(
        0, (EndPoint("PLAINTEXT", "localhost", 9092),), timestamp_ms=1
    )


def test_decodes_a_version_2_broker_registration() -> None:
    """Kafka 0.9's: endpoints without a security protocol map (their listener names are
    security protocols)."""
    data = (
        b'{"version":2,"host":"b","port":9092,"endpoints":["PLAINTEXT://b:9092"],'
        b'"jmx_port":-1,"timestamp":"2"}'
    )
    assert decode_broker(4, data).endpoints == (EndPoint("PLAINTEXT", "b", 9092),)


def test_decodes_a_version_1_broker_registration() -> None:
    reg = decode_broker(3, b'{"jmx_port":-1,"timestamp":"5","host":"old","version":1,"port":9092}')
    assert reg.endpoints == (EndPoint("PLAINTEXT", "old", 9092),)
    assert reg.rack is None


def test_decodes_topics_kafka_wrote() -> None:
    v3 = (
        b'{"removing_replicas":{},"partitions":{"2":[3,1],"1":[2,3],"0":[1,2]},'
        b'"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","adding_replicas":{},"version":3}'
    )
    got = decode_topic("t", v3)
    assert got.partitions == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    assert got.topic_id == uuid.UUID(int=1)
    v1 = decode_topic("t", b'{"version":1,"partitions":{"0":[1,2]}}')
    assert v1.partitions == {0: (1, 2)}
    assert (v1.adding_replicas, v1.removing_replicas, v1.topic_id) == ({}, {}, None)


def test_decodes_controllers_of_every_age() -> None:
    assert decode_controller(b'{"version":1,"brokerid":5,"timestamp":"1"}') == 5
    assert decode_controller(b"5") == 5  # Kafka 0.8 wrote a bare id
    assert decode_controller_epoch(b"17") == 17
    assert decode_controller_epoch(b"0") == 0


@pytest.mark.parametrize(
    ("data", "epoch"),
    [
        (b"+5", 5),
        (b"-0", 0),
        (b"+0", 0),
        ("\u0665".encode(), 5),  # ARABIC-INDIC DIGIT FIVE
        ("1\uff17".encode(), 17),  # FULLWIDTH DIGIT SEVEN
        (b"+2147483647", 2147483647),
    ],
    ids=repr,
)
def test_a_controller_epoch_is_read_as_kafkas_parseint_reads_it(data: bytes, epoch: int) -> None:
    """Kafka's ControllerEpochZNode.decode is new String(bytes, UTF_8).toInt
    (Integer.parseInt): a '+' and any BMP decimal digit are an epoch there, so a broker
    refusing them would not fence a controller Kafka's brokers take."""
    assert decode_controller_epoch(data) == epoch


def test_a_topics_partition_keys_are_read_as_kafkas_parseint_reads_them() -> None:
    """Kafka's TopicZNode.decode reads a partition key with toInt (Integer.parseInt)."""
    for key in ("+1", "\u0661", "0\uff11"):  # ARABIC-INDIC ONE, FULLWIDTH ONE
        assert decode_topic("t", with_field(GOOD_TOPIC, "partitions", {key: [1]})).partitions == {
            1: (1,)
        }


def test_decodes_admin_znodes() -> None:
    assert decode_partition_list(
        paths.PREFERRED_REPLICA_ELECTION,
        b'{"version":1,"partitions":[{"topic":"a","partition":0}]}',
    ) == [TopicPartition("a", 0)]
    assert decode_reassignment(
        b'{"version":1,"partitions":[{"topic":"a","partition":1,"replicas":[3,1]}]}'
    ) == {TopicPartition("a", 1): (3, 1)}
    assert decode_topic_config("t", b'{"version":1,"config":{"retention.ms":"1"}}') == {
        "retention.ms": "1"
    }
    assert decode_topic_config("t", b'{"version":1}') == {}


# --- malformed data -----------------------------------------------------------------------

GOOD_STATE: dict[str, Any] = {
    "controller_epoch": 1,
    "leader": 1,
    "version": 1,
    "leader_epoch": 0,
    "isr": [1, 2],
}


def short_id(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}...({len(text)} chars)"


def with_field(base: dict[str, Any], key: str, value: Any) -> bytes:
    return json.dumps({**base, key: value}).encode()


def without_field(base: dict[str, Any], key: str) -> bytes:
    return json.dumps({k: v for k, v in base.items() if k != key}).encode()


NOT_JSON_OBJECTS: list[bytes | None] = [
    None,
    b"",
    b"not json",
    b"{",
    b'{"leader":1',
    b"\xff\xfe\x00garbage",
    b"\xc3\x28",  # invalid UTF-8
    b"null",
    b"[]",
    b"[1,2]",
    b"42",
    b'"a string"',
    b"true",
    b"[" * 100_000 + b"]" * 100_000,  # nesting deeper than the parser recurses
    b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
]

BAD_STATES: list[bytes] = [
    *[without_field(GOOD_STATE, k) for k in ("leader", "leader_epoch", "controller_epoch", "isr")],
    *[
        with_field(GOOD_STATE, k, v)
        for k in ("leader", "leader_epoch", "controller_epoch")
        for v in ("1", 1.0, 1.5, True, False, None, [1], {"a": 1}, 2**31, -(2**31) - 1, 2**70)
    ],
    *[
        with_field(GOOD_STATE, "isr", v)
        for v in ("1,2", 1, None, {"1": 2}, [1, "2"], [True], [1.0], [None], [[1]], [2**31])
    ],
    with_field(GOOD_STATE, "leader", -3),
    with_field(GOOD_STATE, "leader_epoch", -1),
    with_field(GOOD_STATE, "controller_epoch", -1),
    with_field(GOOD_STATE, "isr", [1, 1]),
    with_field(GOOD_STATE, "isr", [2, 1, 2]),
    b'{"controller_epoch":1,"leader":NaN,"version":1,"leader_epoch":0,"isr":[1]}',
    b'{"controller_epoch":1,"leader":Infinity,"version":1,"leader_epoch":0,"isr":[1]}',
]


def assert_malformed(decode: Callable[[], object], path: str) -> None:
    with pytest.raises(MalformedZnode) as info:
        decode()
    assert info.value.path == path
    assert path in str(info.value)


@pytest.mark.parametrize("data", NOT_JSON_OBJECTS, ids=short_id)
def test_partition_state_that_is_not_a_json_object(data: bytes | None) -> None:
    assert_malformed(lambda: decode_partition_state(STATE_PATH, data, 0), STATE_PATH)


@pytest.mark.parametrize("data", BAD_STATES, ids=short_id)
def test_malformed_partition_state(data: bytes) -> None:
    assert_malformed(lambda: decode_partition_state(STATE_PATH, data, 0), STATE_PATH)


GOOD_TOPIC: dict[str, Any] = {
    "version": 2,
    "partitions": {"0": [1, 2], "1": [2, 3]},
    "adding_replicas": {},
    "removing_replicas": {},
}

BAD_TOPICS: list[bytes] = [
    without_field(GOOD_TOPIC, "partitions"),
    with_field(GOOD_TOPIC, "partitions", {}),
    with_field(GOOD_TOPIC, "partitions", [[1, 2]]),
    with_field(GOOD_TOPIC, "partitions", "0:1,2"),
    with_field(GOOD_TOPIC, "partitions", {"a": [1]}),
    with_field(GOOD_TOPIC, "partitions", {"": [1]}),
    with_field(GOOD_TOPIC, "partitions", {"-1": [1]}),
    with_field(GOOD_TOPIC, "partitions", {"1_0": [1]}),
    with_field(GOOD_TOPIC, "partitions", {" 1": [1]}),
    with_field(GOOD_TOPIC, "partitions", {"2147483648": [1]}),
    # past Python's 4,300-digit int() limit: malformed, not int()'s ValueError
    with_field(GOOD_TOPIC, "partitions", {"1" * 5000: [1]}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 2], "9" * 11: [2, 3]}),
    with_field(GOOD_TOPIC, "partitions", {"0": []}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 1]}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 2, 1]}),
    with_field(GOOD_TOPIC, "partitions", {"0": "1,2"}),
    with_field(GOOD_TOPIC, "partitions", {"0": [True, 2]}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1.0]}),
    with_field(GOOD_TOPIC, "partitions", {"0": None}),
    # Bad after good ones (the fast path checks whole maps at once):
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 2], "1": None}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 2], "1": [2, 2]}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 2], "1": []}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 2], "1": [[1]]}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 2], "1": [2, 2147483648]}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 2], "1": [-2147483649, 2]}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 2], "1": [2, False]}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 2], "": [2, 3]}),
    with_field(GOOD_TOPIC, "partitions", {"0": [1, 2], "1x": [2, 3]}),
    with_field(GOOD_TOPIC, "adding_replicas", [1]),
    with_field(GOOD_TOPIC, "adding_replicas", {"x": [1]}),
    with_field(GOOD_TOPIC, "removing_replicas", {"-2": [1]}),
    with_field(GOOD_TOPIC, "removing_replicas", {"0": ["1"]}),
    with_field(GOOD_TOPIC, "topic_id", "not a uuid"),
    with_field(GOOD_TOPIC, "topic_id", 12),
    with_field(GOOD_TOPIC, "topic_id", "AAAA"),
    with_field(GOOD_TOPIC, "topic_id", "+AAAAAAAAAAAAAAAAAAAAQ"),  # not URL-safe base64
    with_field(GOOD_TOPIC, "topic_id", "AAAAAAAAAAAAAAAAAAAAAQ!!"),
    with_field(GOOD_TOPIC, "topic_id", "AAAAAAAAAAAA AAAAAAAAAQ"),
    with_field(GOOD_TOPIC, "topic_id", ["AAAAAAAAAAAAAAAAAAAAAQ"]),
]


@pytest.mark.parametrize("data", NOT_JSON_OBJECTS, ids=short_id)
def test_topic_that_is_not_a_json_object(data: bytes | None) -> None:
    assert_malformed(lambda: decode_topic("t", data), paths.topic("t"))


@pytest.mark.parametrize("data", BAD_TOPICS, ids=short_id)
def test_malformed_topic(data: bytes) -> None:
    assert_malformed(lambda: decode_topic("t", data), paths.topic("t"))
    # the caller may name the path it read
    assert_malformed(lambda: decode_topic("t", data, "/chroot/x"), "/chroot/x")


BAD_CONTROLLERS: list[bytes | None] = [
    b'{"version":1}',
    b'{"version":1,"brokerid":"1"}',
    b'{"version":1,"brokerid":true}',
    b'{"version":1,"brokerid":1.5}',
    b'{"version":1,"brokerid":null}',
    b'{"version":1,"brokerid":2147483648}',
    b"--5",
    b"-",
    b"1 2",
    b"0x10",
    b"2147483648",
    b"1" * 5000,  # past Python's 4,300-digit int() limit
    # no broker has a negative id (and -1 would read as no controller at all)
    b'{"version":1,"brokerid":-1,"timestamp":"0"}',
    b"-3",
]


# A bare integer is Kafka 0.8's controller format, so b"42" is not malformed there.
@pytest.mark.parametrize(
    "data", [d for d in NOT_JSON_OBJECTS if d != b"42"] + BAD_CONTROLLERS, ids=short_id
)
def test_malformed_controller(data: bytes | None) -> None:
    assert_malformed(lambda: decode_controller(data), paths.CONTROLLER)


@pytest.mark.parametrize(
    "data",
    [
        None,
        b"",
        b"abc",
        b"-1",
        b"1.5",
        b"1e3",
        b"1_0",
        b"0x1",
        b'{"epoch":1}',
        b"\xff",
        b"2147483648",
        # Kafka's ControllerEpochZNode.decode is new String(bytes, UTF_8).toInt: no trim
        b" 5",
        b"5 ",
        b"5\n",
        b"\t5",
        b"+",
        b"+-5",
        b"++5",
        b"\xc2\xb2",  # SUPERSCRIPT TWO: not a decimal digit
        b"\xf0\x9d\x9f\x95",  # MATHEMATICAL BOLD DIGIT SEVEN: beyond the BMP
        b"1" * 5000,  # past Python's 4,300-digit int() limit
        b"-" + b"1" * 5000,
    ],
    ids=short_id,
)
def test_malformed_controller_epoch(data: bytes | None) -> None:
    assert_malformed(lambda: decode_controller_epoch(data), paths.CONTROLLER_EPOCH)


GOOD_BROKER: dict[str, Any] = json.loads(
    encode_broker(BrokerRegistration(1, (EndPoint("PLAINTEXT", "h", 9092),), timestamp_ms=1))
)

BAD_BROKERS: list[bytes] = [
    without_field(GOOD_BROKER, "version"),
    with_field(GOOD_BROKER, "version", "4"),
    with_field(GOOD_BROKER, "version", True),
    with_field(GOOD_BROKER, "endpoints", "PLAINTEXT://h:9092"),
    with_field(GOOD_BROKER, "endpoints", [1]),
    with_field(GOOD_BROKER, "endpoints", ["h:9092"]),
    with_field(GOOD_BROKER, "endpoints", ["PLAINTEXT://h"]),
    with_field(GOOD_BROKER, "endpoints", ["PLAINTEXT://h:"]),
    with_field(GOOD_BROKER, "endpoints", ["PLAINTEXT://h:port"]),
    with_field(GOOD_BROKER, "endpoints", ["PLAINTEXT://h:\u00b2"]),  # SUPERSCRIPT TWO
    with_field(GOOD_BROKER, "endpoints", ["PLAINTEXT://h:\u0661"]),  # ARABIC-INDIC DIGIT ONE
    with_field(GOOD_BROKER, "endpoints", ["PLAINTEXT://h:-1"]),
    with_field(GOOD_BROKER, "endpoints", ["PLAINTEXT://h:65536"]),
    with_field(GOOD_BROKER, "endpoints", ["PLAINTEXT://h:" + "1" * 5000]),  # int() refuses it
    with_field(GOOD_BROKER, "listener_security_protocol_map", ["PLAINTEXT"]),
    with_field(GOOD_BROKER, "rack", 5),
    with_field(GOOD_BROKER, "rack", True),
    with_field(GOOD_BROKER, "timestamp", "yesterday"),
    with_field(GOOD_BROKER, "timestamp", True),
    with_field(GOOD_BROKER, "timestamp", [1]),
    with_field(GOOD_BROKER, "jmx_port", True),
    with_field(GOOD_BROKER, "jmx_port", "9999"),
    # version 1: host and port are the only address
    json.dumps({"version": 1, "port": 9092}).encode(),
    json.dumps({"version": 1, "host": "h", "port": "9092"}).encode(),
    json.dumps({"version": 1, "host": "h", "port": True}).encode(),
    json.dumps({"version": 1, "host": 5, "port": 9092}).encode(),
    json.dumps({"version": 1, "host": "h", "port": 65536}).encode(),
    json.dumps({"version": 1, "host": "h", "port": -1}).encode(),
    # Not a Kafka wire string (UTF-8, at most 32,767 bytes): every UpdateMetadata lists
    # each live broker, so one such broker would keep metadata from all of them. json.dumps
    # writes a lone surrogate as the escape "\ud800": valid JSON, not encodable as UTF-8.
    with_field(GOOD_BROKER, "endpoints", ["PLAINTEXT://" + "h" * 40_000 + ":9092"]),
    with_field(GOOD_BROKER, "endpoints", ["PLAINTEXT://b\ud800:9092"]),
    with_field(GOOD_BROKER, "endpoints", ["L" * 40_000 + "://h:9092"]),
    with_field(GOOD_BROKER, "endpoints", ["L\udc00://h:9092"]),
    with_field(GOOD_BROKER, "listener_security_protocol_map", {"PLAINTEXT": "P\ud800"}),
    with_field(GOOD_BROKER, "listener_security_protocol_map", {"PLAINTEXT": "P" * 40_000}),
    with_field(GOOD_BROKER, "rack", "r" * 40_000),
    with_field(GOOD_BROKER, "rack", "r\udc00"),
    json.dumps({"version": 1, "host": "h" * 40_000, "port": 9092}).encode(),
    json.dumps({"version": 1, "host": "b\ud800", "port": 9092}).encode(),
]


@pytest.mark.parametrize("data", NOT_JSON_OBJECTS, ids=short_id)
def test_broker_that_is_not_a_json_object(data: bytes | None) -> None:
    assert_malformed(lambda: decode_broker(4, data), paths.broker(4))


@pytest.mark.parametrize("data", BAD_BROKERS, ids=short_id)
def test_malformed_broker(data: bytes) -> None:
    assert_malformed(lambda: decode_broker(4, data), paths.broker(4))


def test_a_broker_string_of_32767_utf8_bytes_is_a_wire_string() -> None:
    """The limit is Kafka's (Short.MAX_VALUE bytes of UTF-8), not characters."""
    host = "\u00e9" * (32_767 // 2) + "h"  # 32,767 bytes
    endpoint = with_field(GOOD_BROKER, "endpoints", [f"PLAINTEXT://{host}:9092"])
    assert decode_broker(4, endpoint).host == host
    assert_malformed(
        lambda: decode_broker(4, with_field(GOOD_BROKER, "rack", host + "h")), paths.broker(4)
    )


@pytest.mark.parametrize(
    "data",
    [b'{"version":"1","id":"' + b"c" * 40_000 + b'"}', b'{"version":"1","id":"c\\ud800"}'],
    ids=["long", "surrogate"],
)
def test_a_cluster_id_that_is_no_wire_string_is_malformed(data: bytes) -> None:
    """Every Metadata answer carries the cluster id: a broker started with one it could not
    encode answered no client's Metadata (it now fails its start-up naming the znode)."""
    assert_malformed(lambda: decode_cluster_id(data), paths.CLUSTER_ID)
    assert decode_cluster_id(encode_cluster_id("c" * 32_767)) == "c" * 32_767


def test_numbers_with_leading_zeros_past_int_limit_are_read_as_java_parses_them() -> None:
    """Java's parseInt reads "0...07" as 7: so do the codecs, the zeros never reaching
    int() (which refuses a text of more than 4,300 digits)."""
    zeros = "0" * 5000
    assert decode_controller_epoch(f"{zeros}7".encode()) == 7
    assert decode_topic(
        "t", with_field(GOOD_TOPIC, "partitions", {f"{zeros}3": [1]})
    ).partitions == {3: (1,)}
    endpoint = with_field(GOOD_BROKER, "endpoints", [f"PLAINTEXT://h:{zeros}9092"])
    assert decode_broker(4, endpoint).port == 9092
    assert decode_broker(4, with_field(GOOD_BROKER, "endpoints", ["PLAINTEXT://h:0"])).port == 0


BAD_PARTITION_LISTS: list[bytes] = [
    b'{"version":1}',
    b'{"version":1,"partitions":{"topic":"a","partition":0}}',
    b'{"version":1,"partitions":[1]}',
    b'{"version":1,"partitions":[["a",0]]}',
    b'{"version":1,"partitions":[{"partition":0}]}',
    b'{"version":1,"partitions":[{"topic":5,"partition":0}]}',
    b'{"version":1,"partitions":[{"topic":"a"}]}',
    b'{"version":1,"partitions":[{"topic":"a","partition":"0"}]}',
    b'{"version":1,"partitions":[{"topic":"a","partition":true}]}',
    b'{"version":1,"partitions":[{"topic":"a","partition":-1}]}',
    b'{"version":1,"partitions":[{"topic":"a","partition":0.0}]}',
]


@pytest.mark.parametrize("data", [*NOT_JSON_OBJECTS, *BAD_PARTITION_LISTS], ids=short_id)
def test_malformed_partition_list(data: bytes | None) -> None:
    path = paths.isr_change_notification("isr_change_0000000001")
    assert_malformed(lambda: decode_partition_list(path, data), path)


BAD_REASSIGNMENTS: list[bytes] = [
    *BAD_PARTITION_LISTS,
    b'{"version":1,"partitions":[{"topic":"a","partition":0}]}',
    b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[]}]}',
    b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,1]}]}',
    b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":["1"]}]}',
    b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[false]}]}',
    b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":1}]}',
]


@pytest.mark.parametrize("data", [*NOT_JSON_OBJECTS, *BAD_REASSIGNMENTS], ids=short_id)
def test_malformed_reassignment(data: bytes | None) -> None:
    assert_malformed(lambda: decode_reassignment(data), paths.REASSIGN_PARTITIONS)


# An admin request's entries are read one by one, as Kafka 2.8 acts on each partition: one
# that cannot be read is left out, its error naming the znode and the entry, and the
# others stand. Only a znode that is no JSON object with a list of entries is bad whole.
NO_ENTRIES: list[bytes | None] = [*NOT_JSON_OBJECTS, *BAD_PARTITION_LISTS[:2]]
BAD_PARTITION_ENTRIES: list[Any] = [json.loads(d)["partitions"][0] for d in BAD_PARTITION_LISTS[2:]]
BAD_REASSIGNMENT_ENTRIES: list[Any] = [
    json.loads(d)["partitions"][0] for d in BAD_REASSIGNMENTS[2:]
]


def _with_entries(*entries: Any) -> bytes:
    return json.dumps({"version": 1, "partitions": list(entries)}).encode()


@pytest.mark.parametrize("entry", BAD_PARTITION_ENTRIES, ids=short_id)
def test_a_partition_list_entry_that_cannot_be_read_is_left_out_alone(entry: Any) -> None:
    path = paths.PREFERRED_REPLICA_ELECTION
    data = _with_entries({"topic": "a", "partition": 1}, entry, {"topic": "b", "partition": 0})
    tps, unreadable = decode_partition_list_entries(path, data)
    assert tps == [TopicPartition("a", 1), TopicPartition("b", 0)]
    assert [e.path for e in unreadable] == [path]
    assert f"entry {entry!r}" in str(unreadable[0])
    assert_malformed(lambda: decode_partition_list(path, data), path)


@pytest.mark.parametrize("entry", BAD_REASSIGNMENT_ENTRIES, ids=short_id)
def test_a_reassignment_entry_that_cannot_be_read_is_left_out_alone(entry: Any) -> None:
    data = _with_entries(
        {"topic": "a", "partition": 1, "replicas": [3, 1]},
        entry,
        {"topic": "b", "partition": 0, "replicas": [2]},
    )
    targets, unreadable = decode_reassignment_entries(data)
    assert targets == {TopicPartition("a", 1): (3, 1), TopicPartition("b", 0): (2,)}
    assert [e.path for e in unreadable] == [paths.REASSIGN_PARTITIONS]
    assert f"entry {entry!r}" in str(unreadable[0])
    assert_malformed(lambda: decode_reassignment(data), paths.REASSIGN_PARTITIONS)


def test_an_entry_too_long_to_report_whole_is_cut() -> None:
    entry = {"topic": "a" * 10_000, "partition": -1}
    _tps, unreadable = decode_partition_list_entries(
        paths.PREFERRED_REPLICA_ELECTION, _with_entries(entry)
    )
    assert len(str(unreadable[0])) < 500


@pytest.mark.parametrize("data", NO_ENTRIES, ids=short_id)
def test_an_admin_request_with_no_list_of_entries_is_malformed_whole(data: bytes | None) -> None:
    path = paths.PREFERRED_REPLICA_ELECTION
    assert_malformed(lambda: decode_partition_list_entries(path, data), path)
    assert_malformed(lambda: decode_reassignment_entries(data), paths.REASSIGN_PARTITIONS)


@pytest.mark.parametrize(
    "data",
    [
        *NOT_JSON_OBJECTS,
        b'{"version":1,"config":[]}',
        b'{"version":1,"config":"a=b"}',
        b'{"version":1,"config":{"min.insync.replicas":2}}',
        b'{"version":1,"config":{"unclean.leader.election.enable":true}}',
        b'{"version":1,"config":{"a":null}}',
    ],
    ids=short_id,
)
def test_malformed_topic_config(data: bytes | None) -> None:
    assert_malformed(lambda: decode_topic_config("t", data), paths.topic_config("t"))


LOG_DIR_EVENT_PATH = paths.log_dir_event_notification("log_dir_event_0000000004")


def test_log_dir_event_names_its_broker() -> None:
    assert LOG_DIR_EVENT_PATH == "/log_dir_event_notification/log_dir_event_0000000004"
    assert decode_log_dir_event(LOG_DIR_EVENT_PATH, encode_log_dir_event(3)) == 3
    # Kafka reads the broker alone: another event number, or none, still names it.
    assert decode_log_dir_event(LOG_DIR_EVENT_PATH, b'{"version":1,"broker":0}') == 0


@pytest.mark.parametrize(
    "data",
    [
        *NOT_JSON_OBJECTS,
        b'{"version":1,"event":1}',
        b'{"version":1,"broker":"1","event":1}',
        b'{"version":1,"broker":-1,"event":1}',
        b'{"version":1,"broker":true,"event":1}',
    ],
    ids=short_id,
)
def test_malformed_log_dir_event(data: bytes | None) -> None:
    assert_malformed(lambda: decode_log_dir_event(LOG_DIR_EVENT_PATH, data), LOG_DIR_EVENT_PATH)


# --- round trips -----------------------------------------------------------------------

int32s = st.integers(-(2**31), 2**31 - 1)
broker_ids = st.integers(0, 2**31 - 1)
replica_lists = st.lists(broker_ids, min_size=1, max_size=6, unique=True).map(tuple)


@SETTINGS
@given(
    leader=st.integers(-2, 2**31 - 1),
    leader_epoch=st.integers(0, 2**31 - 1),
    isr=replica_lists,
    controller_epoch=st.integers(0, 2**31 - 1),
    zk_version=st.integers(0, 2**31 - 1),
)
def test_partition_state_round_trips(
    leader: int, leader_epoch: int, isr: tuple[int, ...], controller_epoch: int, zk_version: int
) -> None:
    lai = LeaderAndIsr(leader, leader_epoch, isr, zk_version)
    data = encode_partition_state(lai, controller_epoch)
    assert decode_partition_state(STATE_PATH, data, zk_version) == PartitionState(
        lai, controller_epoch
    )
    # what json.dumps would write, with Kafka's key order and no spaces
    assert (
        data
        == json.dumps(
            {
                "controller_epoch": controller_epoch,
                "leader": leader,
                "version": 1,
                "leader_epoch": leader_epoch,
                "isr": list(isr),
            },
            separators=(",", ":"),
        ).encode()
    )


@SETTINGS
@given(broker_id=st.integers(0, 2**31 - 1), ts=st.integers(0, 2**62))
def test_controller_round_trips(broker_id: int, ts: int) -> None:
    assert decode_controller(encode_controller(broker_id, ts)) == broker_id


@SETTINGS
@given(st.integers(0, 2**31 - 1))
def test_controller_epoch_round_trips(epoch: int) -> None:
    assert decode_controller_epoch(encode_controller_epoch(epoch)) == epoch


partition_maps = st.dictionaries(st.integers(0, 2**31 - 1), replica_lists, min_size=1, max_size=5)


@SETTINGS
@given(
    partitions=partition_maps,
    topic_id=st.none() | st.uuids(),
    adding=st.dictionaries(st.integers(0, 100), replica_lists, max_size=2),
    removing=st.dictionaries(st.integers(0, 100), replica_lists, max_size=2),
)
def test_topic_round_trips(
    partitions: dict[int, tuple[int, ...]],
    topic_id: uuid.UUID | None,
    adding: dict[int, tuple[int, ...]],
    removing: dict[int, tuple[int, ...]],
) -> None:
    assignment = TopicAssignment("t", partitions, topic_id, adding, removing)
    assert decode_topic("t", encode_topic(assignment)) == assignment


hosts = st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,10}){0,2}", fullmatch=True) | (
    st.ip_addresses().map(str)
)
listeners = st.from_regex(r"[A-Z][A-Z_]{0,12}", fullmatch=True)
protocols = st.sampled_from(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])


@st.composite
def registrations(draw: st.DrawFn) -> BrokerRegistration:
    names = draw(st.lists(listeners, min_size=1, max_size=3, unique=True))
    endpoints = tuple(
        EndPoint(name, draw(hosts), draw(st.integers(0, 65535)), draw(protocols)) for name in names
    )
    return BrokerRegistration(
        draw(broker_ids),
        endpoints,
        rack=draw(st.none() | st.text(min_size=1, max_size=8)),
        timestamp_ms=draw(st.integers(1, 2**62)),
        jmx_port=draw(st.integers(-1, 65535)),
    )


@SETTINGS
@given(registrations())
def test_broker_registration_round_trips(reg: BrokerRegistration) -> None:
    assert decode_broker(reg.broker_id, encode_broker(reg)) == reg


topic_names = st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True)
tps = st.builds(TopicPartition, topic_names, st.integers(0, 2**31 - 1))


@SETTINGS
@given(st.lists(tps, max_size=8))
def test_partition_list_round_trips(items: list[TopicPartition]) -> None:
    path = paths.PREFERRED_REPLICA_ELECTION
    assert decode_partition_list(path, encode_partition_list(items)) == items


@SETTINGS
@given(st.dictionaries(tps, replica_lists, max_size=8))
def test_reassignment_round_trips(targets: dict[TopicPartition, tuple[int, ...]]) -> None:
    assert decode_reassignment(encode_reassignment(targets)) == targets


@SETTINGS
@given(st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=6))
def test_topic_config_round_trips(config: dict[str, str]) -> None:
    assert decode_topic_config("t", encode_topic_config(config)) == config


@SETTINGS
@given(st.binary(max_size=64))
def test_arbitrary_bytes_never_crash_a_decoder(data: bytes) -> None:
    """Whatever a znode holds, a decoder returns a value or raises MalformedZnode."""
    decoders: list[Callable[[], object]] = [
        lambda: decode_partition_state(STATE_PATH, data, 0),
        lambda: decode_topic("t", data),
        lambda: decode_controller(data),
        lambda: decode_controller_epoch(data),
        lambda: decode_broker(1, data),
        lambda: decode_partition_list(paths.PREFERRED_REPLICA_ELECTION, data),
        lambda: decode_partition_list_entries(paths.PREFERRED_REPLICA_ELECTION, data),
        lambda: decode_reassignment(data),
        lambda: decode_reassignment_entries(data),
        lambda: decode_topic_config("t", data),
    ]
    for decode in decoders:
        try:
            decode()
        except MalformedZnode:
            pass


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@SETTINGS
@given(
    key=st.sampled_from(["leader", "leader_epoch", "controller_epoch", "isr"]), value=json_values
)
def test_partition_state_field_of_any_json_type_decodes_or_is_malformed(
    key: str, value: Any
) -> None:
    """A decoded state always holds ints where ints belong (never a bool or float)."""
    data = with_field(GOOD_STATE, key, value)
    try:
        state = decode_partition_state(STATE_PATH, data, 0)
    except MalformedZnode:
        return
    lai = state.leader_and_isr
    for v in (lai.leader, lai.leader_epoch, state.controller_epoch, *lai.isr):
        assert type(v) is int
        assert -(2**31) <= v <= INT32_MAX
    assert len(set(lai.isr)) == len(lai.isr)


# --- paths ---------------------------------------------------------------------------------


@given(
    st.lists(
        st.tuples(st.text(min_size=1, max_size=20), st.integers(min_value=0, max_value=2**31 - 1)),
        max_size=20,
    )
)
def test_partition_state_paths_made_at_once_are_each_partitions(
    partitions: list[tuple[str, int]],
) -> None:
    tps = [TopicPartition(t, p) for t, p in partitions]
    expected = [paths.partition_state(t, p) for t, p in partitions]
    assert paths.partition_states(tps) == expected
    assert paths.partition_states(partitions) == expected


def test_paths_are_kafkas() -> None:
    assert paths.partition_state("t", 0) == "/brokers/topics/t/partitions/0/state"
    assert paths.partition("t", 3) == "/brokers/topics/t/partitions/3"
    assert paths.topic_partitions("t") == "/brokers/topics/t/partitions"
    assert paths.topic("t") == "/brokers/topics/t"
    assert paths.broker(7) == "/brokers/ids/7"
    assert paths.delete_topic("t") == "/admin/delete_topics/t"
    assert paths.topic_config("t") == "/config/topics/t"
    assert paths.isr_change_notification("isr_change_1") == "/isr_change_notification/isr_change_1"
    assert paths.CONTROLLER == "/controller"
    assert paths.CONTROLLER_EPOCH == "/controller_epoch"
    assert paths.REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert paths.PREFERRED_REPLICA_ELECTION == "/admin/preferred_replica_election"
    assert paths.BROKER_SEQID == "/brokers/seqid"


@pytest.mark.parametrize(
    ("child", "expected"),
    [
        ("0", 0),
        ("1001", 1001),
        ("-1", None),
        ("01", None),
        ("+1", None),
        ("1_0", None),
        (" 1", None),
        ("x", None),
        ("", None),
        ("\u0661", None),
        ("2147483647", 2147483647),
        # past Java's int: no request could carry it
        ("2147483648", None),
        ("9" * 5000, None),
    ],
    ids=lambda v: v if not isinstance(v, str) or len(v) < 20 else f"{len(v)} digits",
)
def test_parse_broker_id(child: str, expected: int | None) -> None:
    assert paths.parse_broker_id(child) == expected


@pytest.mark.parametrize(
    "name", ["", ".", "..", "a" * 250, "a b", "a/b", "t\u00e9", "x:y", "a\x00", "a\n"]
)
def test_illegal_topic_names(name: str) -> None:
    """A child of /brokers/topics so named is a topic znode nobody can read (item 41)."""
    assert paths.topic_name_problem(name) is not None
    data = json.dumps(GOOD_TOPIC).encode()
    assert_malformed(lambda: decode_topic(name, data), paths.topic(name))


@pytest.mark.parametrize("name", ["a", "a" * 249, "A-b_c.9", "...", "__consumer_offsets"])
def test_legal_topic_names(name: str) -> None:
    assert paths.topic_name_problem(name) is None


def test_shared_values_hand_out_the_first_equal_value_up_to_their_limit() -> None:
    from zkdata.znodes import SharedValues

    shared: SharedValues[tuple[int, ...]] = SharedValues(2)
    first = tuple([1, 2])
    assert shared(first) is first
    assert shared(tuple([1, 2])) is first
    second = tuple([3])
    assert shared(second) is second
    third = tuple([4])
    assert shared(third) is third
    assert shared(tuple([4])) is not third  # full: not remembered, still equal
    assert shared(tuple([4])) == third
    assert shared(tuple([3])) is second


def test_equal_replica_lists_of_a_topic_decode_to_one_tuple() -> None:
    data = (
        b'{"version":2,"partitions":{"2":[1,2],"0":[1,2],"1":[2,1],"7":[1,2]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    got = decode_topic("t", data)
    assert got.partitions == {2: (1, 2), 0: (1, 2), 1: (2, 1), 7: (1, 2)}
    assert list(got.partitions) == [2, 0, 1, 7]  # the znode's order
    assert got.partitions[0] is got.partitions[2] is got.partitions[7]
    assert decode_topic("u", data).partitions[1] is got.partitions[1]  # across topics too


# --- partition indexes: one int each ------------------------------------------------------


def fresh_int(i: int) -> int:
    """An int equal to ``i`` that is not the one the interpreter keeps for it."""
    return int(str(i))


@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=50))
def test_a_shared_index_equals_what_it_was_given(indexes: list[int]) -> None:
    assert [shared_index(i) for i in indexes] == indexes
    assert shared_indexes(list(indexes)) == indexes


def test_equal_partition_indexes_are_one_int_including_past_the_table_it_started_with() -> None:
    for i in (257, 999, 1023, 1024, 5_000, 40_000, 2**16 - 1):
        a, b = fresh_int(i), fresh_int(i)
        assert a is not b
        assert shared_index(a) is shared_index(b)
    got = shared_indexes([fresh_int(i) for i in (300, 12_345, 7)])
    assert got[0] is shared_index(300)
    assert got[1] is shared_index(12_345)


def test_indexes_outside_the_bound_are_given_back_as_they_are() -> None:
    for i in (-1, -300, 2**16, 2**31 - 1):
        a = fresh_int(i)
        assert shared_index(a) is a
    big = [fresh_int(2**16 + 5), fresh_int(3)]
    assert shared_indexes(big) == [2**16 + 5, 3]
    assert shared_indexes(big)[0] is big[0]
    assert shared_indexes([fresh_int(-4), fresh_int(300)]) == [-4, 300]


def test_a_topic_read_from_zookeeper_keys_its_partitions_by_the_shared_ints() -> None:
    data = json.dumps({"version": 2, "partitions": {"700": [1, 2], "3": [2, 1]}}).encode()
    assignment = decode_topic("t", data)
    (seven_hundred,) = (p for p in assignment.partitions if p == 700)
    assert seven_hundred is shared_index(fresh_int(700))


# --- what mutation testing found -------------------------------------------------------


def test_a_version_1_broker_registration_is_read_from_host_and_port_alone() -> None:
    # BrokerIdZNode.decode: version 1 is host and port, a PLAINTEXT endpoint, whatever
    # else the znode holds.
    reg = decode_broker(
        3,
        b'{"jmx_port":-1,"timestamp":"5","host":"old","version":1,"port":9092,'
        b'"endpoints":["SSL://new:9093"],"listener_security_protocol_map":{"SSL":"SSL"}}',
    )
    assert reg.endpoints == (EndPoint("PLAINTEXT", "old", 9092),)


def test_a_version_2_broker_registration_is_read_from_its_endpoints() -> None:
    # From version 2 the endpoints are the broker's listeners; host and port are only
    # for older readers (here no PLAINTEXT listener: null and -1, as Kafka writes them).
    reg = decode_broker(
        4,
        b'{"version":2,"host":null,"port":-1,"endpoints":["SSL://b:9093"],'
        b'"jmx_port":-1,"timestamp":"2"}',
    )
    assert reg.endpoints == (EndPoint("SSL", "b", 9093, "SSL"),)


def test_endpoints_without_a_protocol_map_name_their_security_protocol() -> None:
    # EndPoint.createEndPoint without listener_security_protocol_map: the default map,
    # each security protocol's name to itself.
    reg = decode_broker(
        5,
        b'{"version":4,"endpoints":["SASL_SSL://b:9094","PLAINTEXT://b:9092"],'
        b'"jmx_port":-1,"timestamp":"2","host":"b","port":9092}',
    )
    assert reg.endpoints == (
        EndPoint("SASL_SSL", "b", 9094, "SASL_SSL"),
        EndPoint("PLAINTEXT", "b", 9092, "PLAINTEXT"),
    )


@pytest.mark.parametrize("tail", [b"x", b"{}", b',"leader":2}', b"\x00"])
def test_a_partition_state_with_data_after_its_object_is_malformed(tail: bytes) -> None:
    # The fast path takes what the strict decoder (json.loads: one whole JSON text, as
    # every other znode here is read) takes, no more: data after the object is refused
    # there too. (Kafka's Jackson readTree would ignore it; a znode so written is damaged.)
    data = encode_partition_state(LeaderAndIsr(1, 0, (1, 2)), 3)
    with pytest.raises(MalformedZnode) as e:
        decode_partition_state(STATE_PATH, data + tail, 0)
    assert e.value.path == STATE_PATH


def test_a_partition_state_with_whitespace_after_its_object_decodes() -> None:
    data = encode_partition_state(LeaderAndIsr(1, 0, (1, 2)), 3)
    state = decode_partition_state(STATE_PATH, data + b" \n", 4)
    assert state == PartitionState(LeaderAndIsr(1, 0, (1, 2), 4), 3)


@pytest.mark.parametrize("tail", [b"", b"\n"])  # the fast path, and the strict one
def test_a_partition_state_of_a_topic_being_deleted_decodes(tail: bytes) -> None:
    # LeaderAndIsr.LeaderDuringDelete (-2) is a leader Kafka writes; below it none.
    data = b'{"controller_epoch":3,"leader":-2,"version":1,"leader_epoch":5,"isr":[1]}'
    state = decode_partition_state(STATE_PATH, data + tail, 1)
    assert state.leader_and_isr == LeaderAndIsr(-2, 5, (1,), 1)
    with pytest.raises(MalformedZnode):
        decode_partition_state(STATE_PATH, data.replace(b"-2", b"-3") + tail, 1)


def test_a_znode_version_wraps_as_zookeepers_java_int() -> None:
    # PrepRequestProcessor.checkAndIncVersion: currentVersion + 1 in a Java int.
    assert next_zk_version(0) == 1
    assert next_zk_version(INT32_MAX - 1) == INT32_MAX
    assert next_zk_version(INT32_MAX) == -(2**31)
    assert next_zk_version(-(2**31)) == -(2**31) + 1


def test_the_last_reassignment_entry_of_a_partition_wins() -> None:
    # Kafka's ReassignPartitionsZNode.decode: the entries' (partition, replicas) toMap.
    data = (
        b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2]},'
        b'{"topic":"b","partition":0,"replicas":[3]},'
        b'{"topic":"a","partition":0,"replicas":[2,3]}]}'
    )
    assert decode_reassignment(data) == {
        TopicPartition("a", 0): (2, 3),
        TopicPartition("b", 0): (3,),
    }


def test_a_config_entry_no_wire_string_carries_is_left_out_alone() -> None:
    data = json.dumps(
        {
            "version": 1,
            "config": {"retention.ms": "1", "x\ud800": "1", "cleanup.policy": "c\ud800"},
        }
    ).encode()
    assert decode_topic_config("t", data) == {"retention.ms": "1"}


def test_cluster_id_bytes_are_kafkas() -> None:
    # ClusterIdZNode.toJson: Map("version" -> "1", "id" -> id): the version is a string.
    assert encode_cluster_id("AbC-123_xyzAbC-123_xyz") == (
        b'{"version":"1","id":"AbC-123_xyzAbC-123_xyz"}'
    )


def test_a_broker_is_reached_at_the_endpoint_of_the_listener_named() -> None:
    reg = decode_broker(
        1,
        b'{"version":4,"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT",'
        b'"EXTERNAL":"SSL"},"endpoints":["INTERNAL://in.example:9092",'
        b'"EXTERNAL://EXTERNAL:19093"],"jmx_port":-1,"timestamp":"1","host":"in.example",'
        b'"port":9092}',
    )
    assert reg.endpoint("EXTERNAL") == EndPoint("EXTERNAL", "EXTERNAL", 19093, "SSL")
    assert reg.address("EXTERNAL") == ("EXTERNAL", 19093)
    assert reg.endpoint("INTERNAL") == EndPoint("INTERNAL", "in.example", 9092, "PLAINTEXT")
    assert reg.endpoint("in.example") is None
    # A listener the broker lacks: its first endpoint, rather than none.
    assert reg.address("REPLICATION") == ("in.example", 9092)


@pytest.mark.parametrize("endpoint", ["b:9092", "PLAINTEXT:/b:9092", "PLAINTEXT//b:9092"])
def test_an_endpoint_without_its_listener_separator_is_named_so(endpoint: str) -> None:
    data = json.dumps({"version": 4, "endpoints": [endpoint], "jmx_port": -1}).encode()
    with pytest.raises(MalformedZnode) as e:
        decode_broker(2, data)
    assert e.value.reason == f"endpoint {endpoint!r} is not LISTENER://host:port"


@pytest.mark.parametrize("timestamp", [5, "x", "-1", None, True])
def test_an_identity_claim_timestamp_is_a_string_of_a_number(timestamp: object) -> None:
    # Written as a string (as Kafka writes a broker's): anything else is malformed.
    claim = IdentityClaim(4, "c", "n", "h:1", "x", 5)
    obj = json.loads(encode_identity_claim(claim))
    assert obj["timestamp"] == "5"
    assert decode_identity_claim(4, json.dumps(obj).encode()) == claim
    obj["timestamp"] = timestamp
    with pytest.raises(MalformedZnode) as e:
        decode_identity_claim(4, json.dumps(obj).encode())
    assert e.value.path == paths.broker_identity(4)


@pytest.mark.parametrize("version", [0, -1, -(2**31)])
def test_a_broker_registration_below_version_1_is_malformed(version: int) -> None:
    # BrokerIdZNode.decode: "Unsupported version of broker registration" below 1.
    path = paths.broker(1)
    assert_malformed(lambda: decode_broker(1, with_field(GOOD_BROKER, "version", version)), path)
    old = {"version": version, "host": "h", "port": 9092, "jmx_port": -1, "timestamp": "1"}
    assert_malformed(lambda: decode_broker(1, json.dumps(old).encode()), path)


@pytest.mark.parametrize(
    "topic_id", [1234567890123456789012, ["AAAAAAAAAAAAAAAAAAAAAQ"], True, "", 0, False, {}]
)
def test_a_topic_id_that_is_no_uuid_text_is_malformed(topic_id: object) -> None:
    # TopicZNode.decode reads topic_id .to[String] (a number of 22 digits is none) into
    # Uuid.fromString ("" is none either); only a missing or null topic_id is no id.
    data = json.dumps({"version": 3, "topic_id": topic_id, "partitions": {"0": [1]}}).encode()
    assert_malformed(lambda: decode_topic("t", data), paths.topic("t"))


@pytest.mark.parametrize("data", [None, b""])
def test_a_znode_without_data_is_said_to_have_none(data: bytes | None) -> None:
    with pytest.raises(MalformedZnode) as e:
        decode_topic("t", data)
    assert e.value.reason == "no data"
    with pytest.raises(MalformedZnode) as e:
        decode_partition_state(STATE_PATH, data, 0)
    assert e.value.reason == "no data"


@pytest.mark.parametrize(("key", "partition"), [("\u0661", 1), ("\uff12", 2), ("0\u0663", 3)])
def test_a_partition_key_is_read_as_javas_parse_int_reads_it(key: str, partition: int) -> None:
    # TopicZNode.decode: partition.toInt (Integer.parseInt takes any BMP decimal digit).
    data = json.dumps({"version": 2, "partitions": {"0": [1], key: [2]}}).encode()
    assert decode_topic("t", data).partitions == {0: (1,), partition: (2,)}


@pytest.mark.parametrize("key", ["\U0001d7cf", "\u00b2", "\u2460"])  # beyond the BMP, ², ①
def test_a_partition_key_of_digits_parse_int_refuses_is_malformed(key: str) -> None:
    data = json.dumps({"version": 2, "partitions": {"0": [1], key: [2]}}).encode()
    assert_malformed(lambda: decode_topic("t", data), paths.topic("t"))


def test_a_timestamp_of_0_is_written_as_given_for_a_controller_and_as_now_for_a_broker() -> None:
    assert encode_controller(1, 0) == b'{"version":1,"brokerid":1,"timestamp":"0"}'
    before = time.time_ns() // 1_000_000
    reg = BrokerRegistration(1, (EndPoint("PLAINTEXT", "h", 9092),), timestamp_ms=0)
    assert int(json.loads(encode_broker(reg))["timestamp"]) >= before


@pytest.mark.parametrize("endpoints", [{"PLAINTEXT://h:9092": 1}, "PLAINTEXT://h:9092"])
def test_endpoints_that_are_no_list_are_malformed(endpoints: object) -> None:
    # BrokerIdZNode.decode: endpoints .to[Seq[String]].
    with pytest.raises(MalformedZnode) as e:
        decode_broker(1, with_field(GOOD_BROKER, "endpoints", endpoints))
    assert e.value.reason == "endpoints must be a list"


@pytest.mark.parametrize("version", [0, 3, -1, True, 1.0, 2.0, "2", None])
def test_a_config_change_of_a_version_kafka_does_not_read_is_malformed(version: object) -> None:
    # ConfigChangedNotificationHandler: version .to[Int], 1 or 2, else "unsupported version".
    path = "/config/changes/config_change_0000000007"
    for data in (
        json.dumps({"version": version, "entity_path": "topics/t"}).encode(),
        json.dumps({"version": version, "entity_type": "topics", "entity_name": "t"}).encode(),
    ):
        assert_malformed(functools.partial(decode_config_change, path, data), path)


def test_an_unreadable_partition_entry_is_quoted_as_written() -> None:
    path = paths.PREFERRED_REPLICA_ELECTION
    data = b'{"version":1,"partitions":["a-0",{"topic":"b","partition":1}]}'
    partitions, unreadable = decode_partition_list_entries(path, data)
    assert partitions == [TopicPartition("b", 1)]
    assert [e.reason for e in unreadable] == ["partition entry 'a-0': not an object"]


@pytest.mark.parametrize("data", [b" 5", b"5\n", b"\t5 \r\n"])
def test_a_bare_controller_id_may_have_json_whitespace_around_it(data: bytes) -> None:
    assert decode_controller(data) == 5


def test_a_broker_registration_without_a_timestamp_decodes() -> None:
    # BrokerIdZNode.decode does not read the timestamp.
    reg = decode_broker(1, without_field(GOOD_BROKER, "timestamp"))
    assert reg == BrokerRegistration(1, (EndPoint("PLAINTEXT", "h", 9092),), timestamp_ms=0)

"""DescribeConfigs of a topic, checked against Kafka 2.8's ConfigHelper (createTopicConfigEntry,
configSynonyms), driven through AdminApis.describe_configs and the wire codec."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from broker.admin_apis import AdminApis
from broker.config import load_broker_config
from broker.metadata_cache import MetadataCache
from tests.unit.fake_zk import FakeZk
from tests.unit.test_metadata_cache import request as metadata_request
from tests.unit.test_metadata_cache import state as partition_state
from wire.api import ApiKey
from wire.protocol import response_codec
from zkdata import paths
from zkdata.client import ZkClient

DEFAULT_CONFIG, STATIC_BROKER_CONFIG, TOPIC_CONFIG = 5, 4, 1


def describe(
    broker_lines: list[str],
    overrides: dict[str, str],
    version: int = 3,
    *,
    resource: tuple[int, str] = (2, "t"),
) -> dict[str, dict[str, Any]]:
    """The configs of topic "t" (or of ``resource``: (4, "1") is the broker's own)."""
    config = load_broker_config(
        overrides=["broker.id=1", "zookeeper.connect=z:2181", *broker_lines]
    )
    zk = FakeZk()
    zk.put(paths.topic("t"), b"{}")
    zk.put(paths.topic_config("t"), json.dumps({"version": 1, "config": overrides}).encode())
    cache = MetadataCache(1)
    cache.update(metadata_request(("t", [partition_state(0, 1)])))  # a topic the brokers know
    a = AdminApis(cast(ZkClient, zk), cache, lambda: False, config)
    kind, name = resource
    body = {
        "resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True,
    }
    codec = response_codec(ApiKey.DESCRIBE_CONFIGS, version)
    (got,) = codec.decode(bytes(codec.encode(a.describe_configs(version, body))))["results"]
    assert got["error_code"] == 0
    return {row["name"]: row for row in got["configs"]}


def synonyms(row: dict[str, Any]) -> list[tuple[str, str | None, int]]:
    return [(s["name"], s["value"], s["source"]) for s in row["synonyms"]]


def answer(row: dict[str, Any]) -> tuple[str | None, int, list[tuple[str, str | None, int]]]:
    return row["value"], row["config_source"], synonyms(row)


# --- where a value comes from: configSynonyms' dropWhile ---------------------------------


def test_retention_ms_with_only_log_retention_hours_at_the_broker_is_kafkas_default() -> None:
    """Kafka 2.8's configSynonyms("log.retention.ms", [ms, minutes, hours]) collects
    [log.retention.hours STATIC, log.retention.hours DEFAULT] and then
    dropWhile(_.name != "log.retention.ms") drops them all: the topic's retention.ms is
    answered source DEFAULT_CONFIG, no synonyms (kafka-topics.sh --describe, which lists the
    entries that are not isDefault, shows no retention.ms for the topic; Kafka's stock
    server.properties sets log.retention.hours=168). The value is still the effective one,
    LogConfig's default taken from the broker's resolved log.retention.hours."""
    rows = describe(["log.retention.hours=24"], {})
    assert answer(rows["retention.ms"]) == ("86400000", DEFAULT_CONFIG, [])
    rows = describe(["log.retention.minutes=3"], {})
    assert answer(rows["retention.ms"]) == ("180000", DEFAULT_CONFIG, [])
    # v0's is_default says the same.
    rows = describe(["log.retention.hours=168"], {}, version=0)
    assert (rows["retention.ms"]["value"], rows["retention.ms"]["is_default"]) == (
        "604800000",
        True,
    )


def test_segment_ms_flush_ms_jitter_have_no_synonyms_unless_their_ms_key_is_set() -> None:
    """Same dropWhile: log.roll.ms, log.roll.jitter.ms and log.flush.interval.ms have no
    default, so their topic keys' synonym lists end up empty in Kafka 2.8, whether or not
    the keys they fall back to are in the broker's file."""
    rows = describe([], {})
    keys = ("segment.ms", "segment.jitter.ms", "flush.ms", "retention.ms")
    got = {k: (rows[k]["config_source"], synonyms(rows[k])) for k in keys}
    assert got == {k: (DEFAULT_CONFIG, []) for k in keys}
    rows = describe(
        ["log.roll.hours=2", "log.roll.jitter.hours=1", "log.flush.scheduler.interval.ms=1000"],
        {},
    )
    assert answer(rows["segment.ms"]) == ("7200000", DEFAULT_CONFIG, [])
    assert answer(rows["segment.jitter.ms"]) == ("3600000", DEFAULT_CONFIG, [])
    assert answer(rows["flush.ms"]) == ("1000", DEFAULT_CONFIG, [])


def test_the_ms_key_set_at_the_broker_lists_every_synonym_beneath_it() -> None:
    """When the topic key's own broker synonym is set, nothing is dropped: the static
    values in brokerConfigSynonyms' order, then the keys' Kafka defaults."""
    rows = describe(["log.retention.hours=24", "log.retention.ms=5000"], {})
    assert answer(rows["retention.ms"]) == (
        "5000",
        STATIC_BROKER_CONFIG,
        [
            ("log.retention.ms", "5000", STATIC_BROKER_CONFIG),
            ("log.retention.hours", "24", STATIC_BROKER_CONFIG),
            ("log.retention.hours", "168", DEFAULT_CONFIG),
        ],
    )
    rows = describe(["log.roll.ms=60000"], {})
    assert answer(rows["segment.ms"]) == (
        "60000",
        STATIC_BROKER_CONFIG,
        [
            ("log.roll.ms", "60000", STATIC_BROKER_CONFIG),
            ("log.roll.hours", "168", DEFAULT_CONFIG),
        ],
    )


def test_a_topic_override_lists_only_itself_above_dropped_fallbacks() -> None:
    rows = describe(["log.retention.hours=24"], {"retention.ms": "1000"})
    assert answer(rows["retention.ms"]) == ("1000", TOPIC_CONFIG, [("retention.ms", "1000", 1)])


def test_a_key_whose_broker_synonym_has_a_default_keeps_it() -> None:
    rows = describe(["log.segment.bytes=1048576"], {})
    assert answer(rows["segment.bytes"]) == (
        "1048576",
        STATIC_BROKER_CONFIG,
        [
            ("log.segment.bytes", "1048576", STATIC_BROKER_CONFIG),
            ("log.segment.bytes", str(2**30), DEFAULT_CONFIG),
        ],
    )
    rows = describe([], {})
    assert answer(rows["segment.bytes"]) == (
        str(2**30),
        DEFAULT_CONFIG,
        [("log.segment.bytes", str(2**30), DEFAULT_CONFIG)],
    )


# --- a topic override as Kafka parses it: createTopicConfigEntry's convertToString --------


def test_a_topic_override_is_answered_as_kafka_parses_it() -> None:
    """Kafka 2.8's createTopicConfigEntry answers ConfigDef.convertToString of the parsed
    LogConfig value (for the entry and its TOPIC_CONFIG synonym): a stored "TRUE" (which
    kafka-configs.sh and CreateTopics accept: ConfigDef's boolean ignores case) is "true",
    a stored "0.50" ratio is "0.5"."""
    rows = describe(
        [], {"unclean.leader.election.enable": "TRUE", "min.cleanable.dirty.ratio": "0.50"}
    )
    assert answer(rows["unclean.leader.election.enable"]) == (
        "true",
        TOPIC_CONFIG,
        [
            ("unclean.leader.election.enable", "true", TOPIC_CONFIG),
            ("unclean.leader.election.enable", "false", DEFAULT_CONFIG),
        ],
    )
    assert answer(rows["min.cleanable.dirty.ratio"]) == (
        "0.5",
        TOPIC_CONFIG,
        [
            ("min.cleanable.dirty.ratio", "0.5", TOPIC_CONFIG),
            ("log.cleaner.min.cleanable.ratio", "0.5", DEFAULT_CONFIG),
        ],
    )


def test_each_type_of_override_is_answered_in_kafkas_text() -> None:
    """A LIST is split at commas with the whitespace around them (ConfigDef's
    COMMA_WITH_WHITESPACE) and joined with ","; a long is Long.toString of what
    Long.parseLong read; a string is trimmed; a double is Double.toString's (scientific
    below 10^-3)."""
    overrides = {
        "cleanup.policy": "delete, compact",
        "leader.replication.throttled.replicas": "0:1 , 1:2",
        "retention.ms": " +0100 ",
        "compression.type": " gzip ",
        "preallocate": "False",
        "min.cleanable.dirty.ratio": "0.0001",
        "segment.bytes": "01048576",
        "follower.replication.throttled.replicas": " ",
    }
    rows = describe([], overrides)
    got = {k: (rows[k]["value"], synonyms(rows[k])[0][1]) for k in overrides}
    assert got["follower.replication.throttled.replicas"] == ("", "")  # an empty list
    assert got["cleanup.policy"] == ("delete,compact", "delete,compact")
    assert got["leader.replication.throttled.replicas"] == ("0:1,1:2", "0:1,1:2")
    assert got["retention.ms"] == ("100", "100")
    assert got["compression.type"] == ("gzip", "gzip")
    assert got["preallocate"] == ("false", "false")
    assert got["min.cleanable.dirty.ratio"] == ("1.0E-4", "1.0E-4")
    assert got["segment.bytes"] == ("1048576", "1048576")


def test_an_override_stored_unparsable_is_answered_as_stored() -> None:
    """Another tool may have stored a value Kafka's LogConfig could not parse (Kafka 2.8
    fails the whole resource); here it is answered as stored, the rest as usual."""
    rows = describe([], {"retention.ms": "soon", "preallocate": "maybe", "segment.ms": "1"})
    assert answer(rows["retention.ms"]) == ("soon", TOPIC_CONFIG, [("retention.ms", "soon", 1)])
    assert rows["preallocate"]["value"] == "maybe"
    assert rows["segment.ms"]["value"] == "1"


# --- a broker's own configs: createBrokerConfigEntry's convertToString ---------------------


@pytest.mark.parametrize(
    ("lines", "protocol_map"),
    [
        ([], "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
        (
            [
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                "listeners=PLAINTEXT://:9092,INTERNAL://[::1]:9093",
                "inter.broker.listener.name=INTERNAL",
            ],
            "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        ),
    ],
)
def test_a_brokers_map_and_list_values_are_answered_in_kafkas_text(
    lines: list[str], protocol_map: str
) -> None:
    """Kafka 2.8 answers a broker's listener.security.protocol.map (a STRING) as it is
    given, else its default, NAME:PROTOCOL,...; a list is joined with ",". The map was
    answered as a Python repr, "FrozenMap({'PLAINTEXT': 'PLAINTEXT', ...})"."""
    rows = describe(["log.dirs=/a,/b", *lines], {}, resource=(4, "1"))
    assert rows["listener.security.protocol.map"]["value"] == protocol_map
    # Unset, listeners is null, Kafka 2.8's default (PLAINTEXT://:9092 is made from port).
    listeners = "PLAINTEXT://:9092,INTERNAL://[::1]:9093" if lines else None
    assert rows["listeners"]["value"] == listeners
    assert rows["log.dirs"]["value"] == "/a,/b"
    assert rows["log.cleanup.policy"]["value"] == "delete"


# --- a broker's own configs: Kafka 2.8's createBrokerConfigEntry ---------------------------


def test_a_broker_key_kafka_defines_with_a_null_default_is_null_when_unset() -> None:
    """KafkaConfig defines these with a null default: unset, nonInternalValues answers
    null, and staticDefaultConfigs (convertToStringMapWithPasswordValues) drops them, so
    configSynonyms lists no DEFAULT_CONFIG synonym. They were answered the value this
    broker resolved (log.retention.ms from log.retention.hours, listeners' PLAINTEXT://:9092)
    with a DEFAULT_CONFIG synonym Kafka does not have."""
    rows = describe(["log.retention.hours=24"], {}, resource=(4, "1"))
    null_in_kafka = (
        "zookeeper.connection.timeout.ms",
        "listeners",
        "advertised.listeners",
        "inter.broker.listener.name",
        "broker.rack",
        "log.dirs",
        "log.roll.ms",
        "log.roll.jitter.ms",
        "log.retention.ms",
        "log.retention.minutes",
        "log.flush.interval.ms",
    )
    assert {k: answer(rows[k]) for k in null_in_kafka} == {
        k: (None, DEFAULT_CONFIG, []) for k in null_in_kafka
    }


def test_a_broker_key_lists_its_synonyms_as_kafkas_config_synonyms_does() -> None:
    """DynamicBrokerConfig.brokerConfigSynonyms groups log.retention.{ms,minutes,hours},
    log.roll.{ms,hours}, log.roll.jitter.{ms,hours} and log.flush.interval.ms with
    log.flush.scheduler.interval.ms; configSynonyms lists each one's value from the file,
    then each one's default, then drops those above the key described. A key set in the
    file listed only itself, not its default beneath."""
    rows = describe(
        ["log.retention.hours=24", "log.retention.minutes=3", "log.flush.interval.ms=500"],
        {},
        resource=(4, "1"),
    )
    assert answer(rows["log.retention.hours"]) == (
        "24",
        STATIC_BROKER_CONFIG,
        [
            ("log.retention.hours", "24", STATIC_BROKER_CONFIG),
            ("log.retention.hours", "168", DEFAULT_CONFIG),
        ],
    )
    assert answer(rows["log.retention.minutes"]) == (
        "3",
        STATIC_BROKER_CONFIG,
        [
            ("log.retention.minutes", "3", STATIC_BROKER_CONFIG),
            ("log.retention.hours", "24", STATIC_BROKER_CONFIG),
            ("log.retention.hours", "168", DEFAULT_CONFIG),
        ],
    )
    assert answer(rows["log.flush.interval.ms"]) == (
        "500",
        STATIC_BROKER_CONFIG,
        [
            ("log.flush.interval.ms", "500", STATIC_BROKER_CONFIG),
            ("log.flush.scheduler.interval.ms", str(2**63 - 1), DEFAULT_CONFIG),
        ],
    )
    # The scheduler's own key has no synonym but itself (Kafka matches the group on
    # log.flush.interval.ms only); log.roll.hours' drops log.roll.ms above it.
    assert answer(rows["log.flush.scheduler.interval.ms"]) == (
        str(2**63 - 1),
        DEFAULT_CONFIG,
        [("log.flush.scheduler.interval.ms", str(2**63 - 1), DEFAULT_CONFIG)],
    )
    rows = describe(["log.roll.ms=60000"], {}, resource=(4, "1"))
    assert answer(rows["log.roll.hours"]) == (
        "168",
        DEFAULT_CONFIG,
        [("log.roll.hours", "168", DEFAULT_CONFIG)],
    )
    assert answer(rows["log.roll.ms"]) == (
        "60000",
        STATIC_BROKER_CONFIG,
        [("log.roll.ms", "60000", STATIC_BROKER_CONFIG), ("log.roll.hours", "168", DEFAULT_CONFIG)],
    )


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("1", 0, None),
        ("01", 0, None),  # resourceNameToBrokerId: Scala's toInt
        ("+1", 0, None),
        ("2", 42, "Unexpected broker id, expected 1 or empty string, but received 2"),
        ("x", 42, "Broker id must be an integer, but it is: x"),
        (" 1", 42, "Broker id must be an integer, but it is:  1"),
        ("2147483648", 42, "Broker id must be an integer, but it is: 2147483648"),
        ("\u0661", 0, None),  # ARABIC-INDIC DIGIT ONE: Character.digit reads it
        ("0\uff11", 0, None),  # FULLWIDTH DIGIT ONE
        ("+-1", 42, "Broker id must be an integer, but it is: +-1"),
        ("\U0001d7cf", 42, "Broker id must be an integer, but it is: \U0001d7cf"),
    ],
)
def test_the_broker_resource_is_named_by_an_int_as_kafka_reads_it(
    name: str, code: int, message: str | None
) -> None:
    """Kafka 2.8's ConfigHelper.resourceNameToBrokerId: Integer.parseInt of the name,
    compared with this broker's id; "01" was refused INVALID_REQUEST."""
    config = load_broker_config(overrides=["broker.id=1", "zookeeper.connect=z:2181"])
    a = AdminApis(cast(ZkClient, FakeZk()), MetadataCache(1), lambda: False, config)
    body = {
        "resources": [
            {"resource_type": 4, "resource_name": name, "configuration_keys": ["broker.id"]}
        ]
    }
    (got,) = a.describe_configs(4, body)["results"]
    assert (got["error_code"], got["error_message"]) == (code, message)
    assert [c["value"] for c in got["configs"]] == (["1"] if code == 0 else [])


def test_a_brokers_negative_log_retention_ms_is_answered_as_it_is_set() -> None:
    """Kafka 2.8 takes log.retention.ms=-5 (validateValues checks logRetentionTimeMillis,
    which is -1 for any negative) and its createBrokerConfigEntry answers the key's own
    value (nonInternalValues: -5); a topic's retention.ms is the resolved -1, above the
    broker's "-5" (STATIC_BROKER_CONFIG). The broker's key was answered -1, the value its
    logs follow rather than the one it was given."""
    own = describe(["log.retention.ms=-5"], {}, resource=(4, "1"))["log.retention.ms"]
    below = [("log.retention.ms", "-5", 4), ("log.retention.hours", "168", 5)]
    assert answer(own) == ("-5", STATIC_BROKER_CONFIG, below)
    topic = describe(["log.retention.ms=-5"], {})["retention.ms"]
    assert answer(topic) == ("-1", STATIC_BROKER_CONFIG, below)
    minutes = describe(["log.retention.minutes=-5"], {}, resource=(4, "1"))
    assert minutes["log.retention.minutes"]["value"] == "-5"
    assert minutes["log.retention.ms"]["value"] is None  # unset: Kafka's null default

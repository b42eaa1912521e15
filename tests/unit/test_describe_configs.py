"""DescribeConfigs of a topic, checked against Kafka 2.8's ConfigHelper (createTopicConfigEntry,
configSynonyms), driven through AdminApis.describe_configs and the wire codec."""

from __future__ import annotations

import json
from typing import Any, cast

from broker.admin_apis import AdminApis
from broker.config import load_broker_config
from broker.metadata_cache import MetadataCache
from tests.unit.fake_zk import FakeZk
from wire.api import ApiKey
from wire.protocol import response_codec
from zkdata import paths
from zkdata.client import ZkClient

DEFAULT_CONFIG, STATIC_BROKER_CONFIG, TOPIC_CONFIG = 5, 4, 1


def describe(
    broker_lines: list[str], overrides: dict[str, str], version: int = 3
) -> dict[str, dict[str, Any]]:
    config = load_broker_config(
        overrides=["broker.id=1", "zookeeper.connect=z:2181", *broker_lines]
    )
    zk = FakeZk()
    zk.put(paths.topic("t"), b"{}")
    zk.put(paths.topic_config("t"), json.dumps({"version": 1, "config": overrides}).encode())
    a = AdminApis(cast(ZkClient, zk), MetadataCache(1), lambda: False, config)
    body = {
        "resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
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

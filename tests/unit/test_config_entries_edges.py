"""broker/config_entries.py at its edges: Java's text of a DOUBLE, the config types, the
fields of each DescribeConfigs version, the synonyms of the jitter group and of a required
key, internal keys given in the file, and sensitive values (Kafka 2.8's ConfigHelper and
ConfigDef.convertToString)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from broker.config import BROKER_CONFIGS, load_broker_config
from broker.config_entries import (
    DEFAULT_CONFIG,
    STATIC_BROKER_CONFIG,
    ConfigEntry,
    _entry,
    broker_entries,
    config_text,
    create_topics_row,
    describe_configs_row,
    kafka_default,
    topic_entries,
)


def broker(*lines: str) -> dict[str, ConfigEntry]:
    config = load_broker_config(overrides=["broker.id=1", "zookeeper.connect=z:2181", *lines])
    return {e.name: e for e in broker_entries(config)}


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.5, "0.5"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (0.001, "0.001"),  # 10^-3: still plain
        (0.00099, "9.9E-4"),
        (-2.5e-5, "-2.5E-5"),
        (0.1234567, "0.1234567"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),  # 10^7: no longer plain
        (12345678.9, "1.23456789E7"),
        (-1.5e10, "-1.5E10"),
        (1e20, "1.0E20"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (math.nan, "NaN"),
    ],
)
def test_a_double_is_written_as_javas_double_to_string(value: float, text: str) -> None:
    """ConfigDef.convertToString of a DOUBLE is Java's Double.toString: plain decimal for
    10^-3 <= |d| < 10^7, else computerized scientific notation, one digit before the point
    and at least one after."""
    assert config_text(value) == text


def test_each_type_has_describe_configs_type_number() -> None:
    """DescribeConfigs v3+'s ConfigType: SHORT is 4, DOUBLE 6 (not INT's 3, LONG's 5)."""
    own = broker()
    assert own["offsets.topic.replication.factor"].type == 4  # SHORT
    assert own["log.cleaner.min.cleanable.ratio"].type == 6  # DOUBLE
    assert own["num.partitions"].type == 3  # INT
    topic = {e.name: e for e in topic_entries(None, {})}
    assert topic["min.cleanable.dirty.ratio"].type == 6
    assert topic["retention.ms"].type == 5  # LONG


def test_each_version_answers_its_own_fields() -> None:
    """v0 has is_default and no source; v1 and v2 add config_source and synonyms (empty
    unless include_synonyms); v3 adds config_type and documentation (null unless
    include_documentation), as Kafka 2.8's ConfigHelper fills them."""
    entry = broker("log.roll.ms=60000")["log.roll.ms"]
    assert describe_configs_row(entry, 0, synonyms=True, documentation=True) == {
        "name": "log.roll.ms",
        "value": "60000",
        "read_only": True,
        "is_sensitive": False,
        "is_default": False,
    }
    for version in (1, 2):
        row = describe_configs_row(entry, version, synonyms=False, documentation=True)
        assert row == {
            "name": "log.roll.ms",
            "value": "60000",
            "read_only": True,
            "is_sensitive": False,
            "config_source": STATIC_BROKER_CONFIG,
            "synonyms": [],
        }
    row = describe_configs_row(entry, 3, synonyms=True, documentation=False)
    assert row["synonyms"] == [
        {"name": "log.roll.ms", "value": "60000", "source": STATIC_BROKER_CONFIG},
        {"name": "log.roll.hours", "value": "168", "source": DEFAULT_CONFIG},
    ]
    assert (row["config_type"], row["documentation"]) == (5, None)
    row = describe_configs_row(entry, 3, synonyms=False, documentation=True)
    assert row["synonyms"] == []
    assert entry.doc
    assert row["documentation"] == entry.doc


def test_the_roll_jitter_keys_are_one_synonym_group() -> None:
    """brokerConfigSynonyms groups log.roll.jitter.ms with log.roll.jitter.hours: the ms
    key set lists the hours' default beneath it, for the broker and the topic."""
    below = (
        ("log.roll.jitter.ms", "5", STATIC_BROKER_CONFIG),
        ("log.roll.jitter.hours", "0", DEFAULT_CONFIG),
    )
    assert broker("log.roll.jitter.ms=5")["log.roll.jitter.ms"].synonyms == below
    config = load_broker_config(
        overrides=["broker.id=1", "zookeeper.connect=z:2181", "log.roll.jitter.ms=5"]
    )
    jitter = {e.name: e for e in topic_entries(config, {})}["segment.jitter.ms"]
    assert (jitter.value, jitter.source, jitter.synonyms) == ("5", STATIC_BROKER_CONFIG, below)


def test_a_required_key_has_no_default_beneath_it() -> None:
    """zookeeper.connect has no default in Kafka (staticDefaultConfigs has none): it
    lists only the broker file's value."""
    assert kafka_default("zookeeper.connect") is None
    zk = broker()["zookeeper.connect"]
    assert (zk.value, zk.source, zk.synonyms) == (
        "z:2181",
        STATIC_BROKER_CONFIG,
        (("zookeeper.connect", "z:2181", STATIC_BROKER_CONFIG),),
    )


def test_an_internal_key_is_described_only_when_given() -> None:
    """Kafka 2.8 describes originals ++ nonInternalValues: a defineInternal key (the KRaft
    ones) appears when the broker's file sets it, not otherwise."""
    assert "broker.heartbeat.interval.ms" not in broker()
    given = broker("broker.heartbeat.interval.ms=3000")["broker.heartbeat.interval.ms"]
    assert (given.value, given.source) == ("3000", STATIC_BROKER_CONFIG)


def test_a_sensitive_value_is_never_answered() -> None:
    """A password's value is null in the entry and in each of its synonyms (Kafka's
    ConfigHelper answers a sensitive config's value, and its synonyms', as null), and it
    is marked sensitive in both DescribeConfigs and CreateTopics answers."""
    definition = dataclasses.replace(BROKER_CONFIGS["zookeeper.connect"], name="ssl.key.password")
    entry = _entry(
        definition,
        "secret",
        STATIC_BROKER_CONFIG,
        (("ssl.key.password", "secret", STATIC_BROKER_CONFIG),),
        read_only=True,
    )
    assert (entry.value, entry.sensitive) == (None, True)
    assert entry.synonyms == (("ssl.key.password", None, STATIC_BROKER_CONFIG),)
    assert create_topics_row(entry)["is_sensitive"] is True
    assert create_topics_row(entry)["value"] is None
    assert create_topics_row(broker()["zookeeper.connect"])["is_sensitive"] is False

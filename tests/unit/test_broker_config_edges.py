"""Broker config edges found by mutation testing: boundaries of Kafka 2.8's checks that the
main config tests (test_broker_config.py) did not pin."""

from __future__ import annotations

import pytest

from broker.config import (
    ConfigError,
    Listener,
    effective_topic_config,
    format_properties,
    parse_properties,
    topic_config_as_stored,
    topic_override_bool,
    validate_topic_config,
)
from tests.unit.test_broker_config import cfg, problems_of

# --------------------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("protocol", "message_format"),
    [
        # The first version of a record format has that format (ApiVersion's
        # KAFKA_0_10_0_IV0 and KAFKA_0_11_0_IV0 carry RecordVersion V1 and V2).
        ("0.10.0-IV0", "0.10.0-IV1"),
        ("0.10.0-IV0", "0.10.2"),
        ("0.11.0-IV0", "0.11.0-IV2"),
        ("0.11.0-IV0", "2.8"),
    ],
)
def test_the_first_version_of_a_record_format_allows_that_format(
    protocol: str, message_format: str
) -> None:
    c = cfg(
        f"inter.broker.protocol.version={protocol}\nlog.message.format.version={message_format}\n"
    )
    assert c.inter_broker_protocol_version == protocol


def test_the_version_before_a_record_format_does_not_allow_it() -> None:
    assert problems_of(
        "inter.broker.protocol.version=0.10.2-IV0\nlog.message.format.version=0.11.0-IV0\n"
    ) == [
        "log.message.format.version 0.11.0-IV0 can only be used when"
        " inter.broker.protocol.version is set to version 0.11.0 or higher"
    ]


# --------------------------------------------------------------------------- listeners


def test_security_inter_broker_protocol_is_read_in_any_case() -> None:
    # KafkaConfig.getSecurityProtocol: SecurityProtocol.forName upper-cases the name.
    c = cfg("security.inter.broker.protocol=plaintext\n")
    assert c.security_inter_broker_protocol == "PLAINTEXT"
    assert c.inter_broker_listener_name == "PLAINTEXT"


def test_the_highest_port_is_a_listener_port() -> None:
    c = cfg("listeners=PLAINTEXT://:65535\n")
    assert c.listeners == (Listener("PLAINTEXT", "", 65535),)
    assert any(
        "a port between 0 and 65535" in m for m in problems_of("listeners=PLAINTEXT://:65536\n")
    )


def test_protocol_map_names_are_upper_cased_as_listener_names_are() -> None:
    # ListenerName.normalised on both sides: "internal" in the map is the INTERNAL listener.
    c = cfg(
        "listeners=INTERNAL://:9093\n"
        "listener.security.protocol.map=internal:plaintext\n"
        "inter.broker.listener.name=Internal\n"
    )
    assert dict(c.listener_security_protocol_map) == {"INTERNAL": "PLAINTEXT"}
    assert c.listener("INTERNAL").security_protocol == "PLAINTEXT"


def test_protocol_map_splits_each_entry_at_its_last_colon() -> None:
    # CoreUtils.parseCsvMap: s.lastIndexOf(":"), so a name may hold a colon.
    c = cfg(
        "listeners=A:B://:9093\n"
        "listener.security.protocol.map=A:B:PLAINTEXT\n"
        "inter.broker.listener.name=A:B\n"
    )
    assert dict(c.listener_security_protocol_map) == {"A:B": "PLAINTEXT"}
    assert c.advertised_listener().name == "A:B"


# --------------------------------------------------------------------------- KRaft keys


def test_controller_quorum_voters_need_an_id_before_the_at() -> None:
    # RaftConfig.parseVoterConnections: each entry is {id}@{host}:{port}, the id an integer.
    assert cfg("controller.quorum.voters=1@localhost:9093\n").controller_quorum_voters == (
        "1@localhost:9093",
    )
    (problem,) = problems_of("controller.quorum.voters=@localhost:9093\n")
    assert "controller.quorum.voters" in problem


# --------------------------------------------------------------------------- broker id


def test_node_id_zero_is_the_broker_id() -> None:
    # KafkaConfig.brokerId: node.id when it is not negative, 0 included.
    assert cfg("broker.id=5\nnode.id=0\n").broker_id == 0
    assert cfg("broker.id=5\nnode.id=-1\n").broker_id == 5


def test_broker_id_may_be_reserved_broker_max_id_itself() -> None:
    # KafkaConfig.validateValues: brokerId >= -1 && brokerId <= maxReservedBrokerId.
    assert cfg("broker.id=1000\n").broker_id == 1000
    assert cfg("broker.id=7\nreserved.broker.max.id=7\n").broker_id == 7
    (problem,) = problems_of("broker.id=8\nreserved.broker.max.id=7\n")
    assert problem == (
        "invalid value '8' for config key 'broker.id': expected -1 (generate one) or 0..7"
        " (reserved.broker.max.id)"
    )


# --------------------------------------------------------------------------- cross-key checks


def test_replica_fetch_wait_may_equal_the_socket_and_lag_timeouts() -> None:
    # KafkaConfig.validateValues: replicaFetchWaitMaxMs <= replicaSocketTimeoutMs and
    # replicaFetchWaitMaxMs <= replicaLagTimeMaxMs.
    c = cfg(
        "replica.fetch.wait.max.ms=20000\nreplica.socket.timeout.ms=20000\n"
        "replica.lag.time.max.ms=20000\n"
    )
    assert c.replica_fetch_wait_max_ms == 20000
    (problem,) = problems_of(
        "replica.fetch.wait.max.ms=20001\nreplica.socket.timeout.ms=20000\n"
        "replica.lag.time.max.ms=30000\n"
    )
    assert problem.startswith("replica.socket.timeout.ms should always be at least")


def test_dedupe_buffer_per_thread_is_an_integer_division() -> None:
    # KafkaConfig.validateValues: logCleanerDedupeBufferSize / logCleanerThreads > 1024 * 1024
    # in Java's long division: 2 MiB + 1 for 2 threads is 1 MiB per thread, refused.
    mib = 1024 * 1024
    (problem,) = problems_of(
        f"log.cleaner.dedupe.buffer.size={2 * mib + 1}\nlog.cleaner.threads=2\n"
    )
    assert problem.startswith("log.cleaner.dedupe.buffer.size must be at least 1MB")
    c = cfg(f"log.cleaner.dedupe.buffer.size={2 * mib + 2}\nlog.cleaner.threads=2\n")
    assert c.log_cleaner_threads == 2


def test_broker_compaction_lags_may_be_equal() -> None:
    # Only a minimum over the maximum conflicts (LogConfig.validateValues: min > max).
    c = cfg("log.cleaner.min.compaction.lag.ms=5000\nlog.cleaner.max.compaction.lag.ms=5000\n")
    assert (c.log_cleaner_min_compaction_lag_ms, c.log_cleaner_max_compaction_lag_ms) == (
        5000,
        5000,
    )
    (problem,) = problems_of(
        "log.cleaner.min.compaction.lag.ms=5001\nlog.cleaner.max.compaction.lag.ms=5000\n"
    )
    assert problem.startswith("log.cleaner.min.compaction.lag.ms (5001) must not exceed")


@pytest.mark.parametrize("queued", ["0", "-1", "104857600", "104857601"])
def test_queued_max_request_bytes_is_no_limit_or_at_least_the_largest_request(
    queued: str,
) -> None:
    # KafkaConfig.validateValues: queuedMaxBytes <= 0 || queuedMaxBytes >= socketRequestMaxBytes
    # (104857600 by default).
    assert cfg(f"queued.max.request.bytes={queued}\n").queued_max_request_bytes == int(queued)


def test_queued_max_request_bytes_below_the_largest_request_is_refused() -> None:
    (problem,) = problems_of("queued.max.request.bytes=1000\nsocket.request.max.bytes=1001\n")
    assert problem.startswith("queued.max.request.bytes (1000) must be larger or equal")


def test_a_negative_replica_lag_time_is_a_period_kafka_accepts() -> None:
    # The ISR check runs every replica.lag.time.max.ms / 2 (Java's long division): only -1,
    # 0 and 1 give a period of 0; -4 gives -2, which runs the task once.
    c = cfg("replica.lag.time.max.ms=-4\nreplica.fetch.wait.max.ms=-10\n")
    assert c.replica_lag_time_max_ms == -4
    (problem,) = problems_of("replica.lag.time.max.ms=-1\nreplica.fetch.wait.max.ms=-10\n")
    assert problem.startswith("replica.lag.time.max.ms must not be -1, 0 or 1")


def test_a_bad_broker_default_of_a_topic_key_is_reported_once() -> None:
    # log.roll.ms=0 fails KafkaConfig's own check; segment.ms (its topic key, at least 1)
    # does not report it a second time.
    assert problems_of("log.roll.ms=0\n") == ["log.roll.ms must be greater than or equal to 1"]


def test_advertised_port_alone_keeps_host_name_as_the_advertised_host() -> None:
    # KafkaConfig.advertisedListeners: "PLAINTEXT://" + advertisedHostName + ":" +
    # advertisedPort, advertisedHostName falling back to host.name ("" by default).
    c = cfg("advertised.port=9999\n")
    assert c.listeners == (Listener("PLAINTEXT", "", 9092),)
    assert c.advertised_listeners == (Listener("PLAINTEXT", "127.0.0.1", 9999),)
    c = cfg("host.name=broker1\nadvertised.port=9999\n")
    assert c.advertised_listeners == (Listener("PLAINTEXT", "broker1", 9999),)


def test_topic_compaction_lags_may_be_equal() -> None:
    # LogConfig.validateValues refuses min.compaction.lag.ms > max.compaction.lag.ms only.
    lags = {"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "5000"}
    assert validate_topic_config(lags) == lags
    config = effective_topic_config(None, lags)
    assert (config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (5000, 5000)
    with pytest.raises(ConfigError, match="conflict topic config setting"):
        validate_topic_config({**lags, "min.compaction.lag.ms": "5001"})


# --------------------------------------------------------------------------- topic ranges

# LogConfig.configDef's atLeast bounds in Kafka 2.8: the lowest value each key takes.
_TOPIC_LOWEST: dict[str, int] = {
    "segment.bytes": 14,  # LegacyRecord.RECORD_OVERHEAD_V0
    "segment.ms": 1,
    "segment.jitter.ms": 0,
    "flush.messages": 0,
    "flush.ms": 0,
    "retention.ms": -1,
    "max.message.bytes": 0,
    "index.interval.bytes": 0,
    "delete.retention.ms": 0,
    "file.delete.delay.ms": 0,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 1,
    "min.insync.replicas": 1,
    "message.timestamp.difference.max.ms": 0,
}


@pytest.mark.parametrize(("key", "lowest"), sorted(_TOPIC_LOWEST.items()))
def test_a_topic_keys_lowest_value_is_accepted_and_one_less_refused(key: str, lowest: int) -> None:
    assert validate_topic_config({key: str(lowest)}) == {key: str(lowest)}
    with pytest.raises(ConfigError) as info:
        validate_topic_config({key: str(lowest - 1)})
    (problem,) = info.value.problems
    assert problem.message == (
        f"invalid value '{lowest - 1}' for topic config key {key!r}: expected a value >= {lowest}"
    )


@pytest.mark.parametrize("ratio", ["0", "0.0", "1", "1.0", "0.99"])
def test_min_cleanable_dirty_ratio_takes_zero_to_one_inclusive(ratio: str) -> None:
    # LogConfig: between(0, 1).
    assert validate_topic_config({"min.cleanable.dirty.ratio": ratio})


@pytest.mark.parametrize("ratio", ["-0.01", "1.01"])
def test_min_cleanable_dirty_ratio_outside_zero_to_one_is_refused(ratio: str) -> None:
    with pytest.raises(ConfigError, match="a value between 0 and 1"):
        validate_topic_config({"min.cleanable.dirty.ratio": ratio})


# KafkaConfig.configDef's atLeast bounds in Kafka 2.8: the lowest value each key takes.
_BROKER_LOWEST: dict[str, int] = {
    "message.max.bytes": 0,
    "reserved.broker.max.id": 0,
    "num.partitions": 1,
    "log.segment.bytes": 14,  # LegacyRecord.RECORD_OVERHEAD_V0
    "socket.request.max.bytes": 1,
    "zookeeper.session.timeout.ms": 1,
}


@pytest.mark.parametrize(("key", "lowest"), sorted(_BROKER_LOWEST.items()))
def test_a_broker_keys_lowest_value_is_accepted_and_one_less_refused(key: str, lowest: int) -> None:
    assert cfg(f"{key}={lowest}\n").get(key) == lowest
    assert problems_of(f"{key}={lowest - 1}\n") == [
        f"invalid value '{lowest - 1}' for config key {key!r}: expected a value >= {lowest}"
    ]


# --------------------------------------------------------------------------- writing values


def test_format_properties_escapes_what_is_not_printable_ascii() -> None:
    # Properties.saveConvert: a char < 0x20 or > 0x7e as \uXXXX; DEL (0x7f) is one.
    assert format_properties({"k": "~\x7f\x80"}) == "k=~\\u007F\\u0080\n"
    assert parse_properties(format_properties({"k": "~\x7f\x80"})) == {"k": "~\x7f\x80"}


def test_a_whole_double_is_shown_as_java_shows_it() -> None:
    # Double.toString: 1.0, not 1 (DescribeConfigs' value of a DOUBLE key).
    config = effective_topic_config(None, {"min.cleanable.dirty.ratio": "1"})
    assert config.as_strings()["min.cleanable.dirty.ratio"] == "1.0"
    text = cfg("log.cleaner.min.cleanable.ratio=1\n").to_properties()
    assert "\nlog.cleaner.min.cleanable.ratio=1.0\n" in text


# --------------------------------------------------------------------------- errors


def test_a_config_error_of_one_problem_is_that_problem() -> None:
    with pytest.raises(ConfigError) as info:
        cfg("num.partitions=0\n")
    assert str(info.value) == (
        "invalid value '0' for config key 'num.partitions': expected a value >= 1"
    )
    with pytest.raises(ConfigError) as info:
        cfg("num.partitions=0\nnum.io.threads=0\n")
    assert str(info.value) == (
        "2 config problems:\n"
        "  - invalid value '0' for config key 'num.partitions': expected a value >= 1\n"
        "  - invalid value '0' for config key 'num.io.threads': expected a value >= 1"
    )


def test_an_empty_key_is_an_unknown_key_and_named_in_the_error_keys() -> None:
    # "=5" is the key "" (Properties.load): unknown, and a key of the error, not a
    # file-level problem (whose key is None).
    with pytest.raises(ConfigError) as info:
        cfg("=5\n")
    assert info.value.keys == ("",)
    assert str(info.value) == "unknown config key ''"


@pytest.mark.parametrize("stored", [True, 1, None])
def test_a_stored_topic_boolean_that_is_not_a_string_is_the_default(stored: object) -> None:
    # /config/topics/<t> written by another tool may hold JSON true or 1; Kafka's configs
    # are strings, so it is a bad value: the default, as topic_config_as_stored reads it.
    key = "unclean.leader.election.enable"
    overrides = {key: stored}
    assert topic_override_bool(overrides, key, False) is False
    assert topic_override_bool(overrides, key, True) is True
    as_stored = topic_config_as_stored(None, overrides)
    assert as_stored.config.unclean_leader_election_enable is False
    assert [p.key for p in as_stored.problems] == [key]


# --------------------------------------------------------------------------- more listeners


def test_advertised_listeners_may_share_a_port() -> None:
    # KafkaConfig.advertisedListeners: listenerListToEndPoints(..., requireDistinctPorts =
    # false): two brokers behind one address, say, each at its own host.
    c = cfg(
        "listeners=A://:9092,B://:9093\n"
        "advertised.listeners=A://h1:9092,B://h2:9092\n"
        "listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT\n"
        "inter.broker.listener.name=A\n"
    )
    assert c.advertised_listeners == (Listener("A", "h1", 9092), Listener("B", "h2", 9092))
    assert any(
        "must have a different port" in m
        for m in problems_of(
            "listeners=A://:9092,B://:9092\n"
            "listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT\n"
            "inter.broker.listener.name=A\n"
        )
    )


# --------------------------------------------------------------------------- throttled replicas


@pytest.mark.parametrize("value", [":1", "1:", "a:1", "1:1,:2"])
def test_a_throttled_replica_needs_a_partition_and_a_broker(value: str) -> None:
    # ThrottledReplicaListValidator: each item matches ([0-9]+:[0-9]+)? after trim.
    with pytest.raises(ConfigError, match=r"'\*' or a list of \[partitionId\]:\[brokerId\]"):
        validate_topic_config({"leader.replication.throttled.replicas": value})


@pytest.mark.parametrize("value", ["*", " * ", "*,", "0:1, 1:2", ""])
def test_throttled_replicas_take_a_star_or_partition_broker_pairs(value: str) -> None:
    assert validate_topic_config({"follower.replication.throttled.replicas": value})


def test_a_throttled_star_is_trimmed_as_java_trims() -> None:
    # proposed.mkString.trim.equals("*"): String.trim drops chars up to U+0020 only, so
    # a no-break space before the star is kept, and the value refused.
    with pytest.raises(ConfigError, match="brokerId"):
        validate_topic_config({"leader.replication.throttled.replicas": "\u00a0*"})


def test_listener_lists_take_whitespace_around_their_commas() -> None:
    # CoreUtils.parseCsvList splits at \s*,\s*.
    c = cfg(
        "listeners=A://:9092 ,\tB://:9093\n"
        "advertised.listeners=A://h1:9092 , B://h1:9093\n"
        "listener.security.protocol.map=A:PLAINTEXT , B:PLAINTEXT\n"
        "inter.broker.listener.name=A\n"
    )
    assert [str(listener) for listener in c.listeners] == ["A://:9092", "B://:9093"]
    assert [str(a) for a in c.advertised_listeners] == ["A://h1:9092", "B://h1:9093"]

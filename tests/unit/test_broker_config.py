"""Broker and topic configuration: .properties parsing, typing, errors, defaults, derived values."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import (
    BROKER_CONFIG_DEFS,
    BROKER_CONFIGS,
    LONG_MAX,
    TOPIC_CONFIG_DEFS,
    BrokerConfig,
    ConfigError,
    FrozenMap,
    Listener,
    effective_topic_config,
    format_properties,
    java_parse_double,
    load_broker_config,
    parse_configs_to_be_added,
    parse_overrides,
    parse_properties,
    parse_topic_config_args,
    topic_config_as_stored,
    topic_config_defaults,
    topic_override_bool,
    validate_topic_config,
)
from broker.server import group_limits
from groups.membership import GroupLimits
from tests.unit.test_broker_controlled_shutdown import unstarted_server

ZK = "zookeeper.connect=localhost:2181\n"


def cfg(text: str = "", *overrides: str) -> BrokerConfig:
    return load_broker_config(text=ZK + text, overrides=overrides)


def problems_of(text: str = "", *overrides: str, zk: bool = True) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_broker_config(text=(ZK if zk else "") + text, overrides=overrides)
    return [p.message for p in info.value.problems]


# --------------------------------------------------------------------------- .properties


def test_separators_and_comments() -> None:
    text = (
        "# a comment\n"
        "   ! another comment\n"
        "\n"
        "   \t\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d   =   4\n"
        "e:=5\n"
        "f\t\t6\n"
        "g=\n"
        "h\n"
        "i = x = y\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4",
        "e": "=5",  # only one separator is skipped
        "f": "6",
        "g": "",
        "h": "",
        "i": "x = y",
    }


def test_values_keep_trailing_whitespace_until_typed() -> None:
    assert parse_properties("a = v  \n") == {"a": "v  "}
    assert cfg("num.partitions = 4   \n").num_partitions == 4
    assert cfg("broker.rack =  r1 \t\n").broker_rack == "r1"


def test_line_continuations() -> None:
    text = (
        "log.dirs=/a,\\\n"
        "         /b,\\\n"
        "    /c\n"
        "x=ends with escaped backslash\\\\\n"
        "y=next\n"
        "# comment ending in backslash is not continued \\\n"
        "z=1\n"
        "w=continued\\\n"
        "#not a comment here\n"
    )
    assert parse_properties(text) == {
        "log.dirs": "/a,/b,/c",
        "x": "ends with escaped backslash\\",
        "y": "next",
        "z": "1",
        "w": "continued#not a comment here",
    }


def test_continuation_into_blank_line_and_eof() -> None:
    assert parse_properties("a=1\\\n\nb=2\n") == {"a": "1", "b": "2"}
    assert parse_properties("a=1\\") == {"a": "1"}


@pytest.mark.parametrize(
    ("text", "props"),
    [
        ("\\\n\nnum.partitions=3\n", {"num.partitions": "3"}),
        ("\\\r\n\r\nx=1", {"x": "1"}),
        ("  \\\n \t\f\n", {}),
        ("\\\n\\\n\nb=2\n", {"b": "2"}),
        ("\\\n\n#c\nx=1\n", {"x": "1"}),
        ("\\\n   \\\n  x=1\n", {"x": "1"}),
        # Nothing in the line yet: a comment is one (Java 9 and later).
        ("\\\n#x=1\n", {}),
        # At the end of the text the line ends, empty or not: the key "".
        ("\\", {"": ""}),
        ("\\\n", {"": ""}),
        ("\\\n\\\n", {"": ""}),
        ("\\\n ", {}),
        ("\\\r\n", {}),  # Java passes the \r as a line end, then skips the \n
    ],
)
def test_a_continuation_that_leaves_the_line_empty_does_not_end_it(
    text: str, props: dict[str, str]
) -> None:
    """Java's LineReader (Properties.load) starts a new logical line until something is in
    it: a line holding only a continuation's backslash, then a blank line, is no entry
    (checked against Java 17). It was the key '': "unknown config key ''" at start."""
    assert parse_properties(text) == props


def test_a_lone_continuation_line_does_not_stop_the_broker() -> None:
    assert cfg("\\\n\nnum.partitions=3\n").num_partitions == 3


def test_escapes() -> None:
    text = (
        "tab=a\\tb\n"
        "nl=a\\nb\n"
        "uni=\\u0041\\u00e9\n"
        "key\\ with\\ spaces=1\n"
        "key\\=eq\\:colon=2\n"
        "other=\\q\\#\\!\n"
        "astral=\\uD83D\\uDE00\n"
    )
    assert parse_properties(text) == {
        "tab": "a\tb",
        "nl": "a\nb",
        "uni": "A\u00e9",
        "key with spaces": "1",
        "key=eq:colon": "2",
        "other": "q#!",
        "astral": "\U0001f600",
    }


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings(newline: str) -> None:
    text = newline.join(["a=1", "b=2\\", "  3", "# c", "d=4"])
    assert parse_properties(text) == {"a": "1", "b": "23", "d": "4"}


def test_duplicate_keys_last_wins() -> None:
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"line 2: malformed \\uxxxx escape") as info:
        parse_properties("a=1\nb=\\u12g4\nc=\\u12\n")
    assert len(info.value.problems) == 2


def test_format_properties_round_trip_example() -> None:
    props = {"a b=c:d": " lead x=:#! \\ \u00e9 \U0001f600\t", "#k": "=v", "e": ""}
    text = format_properties(props)
    assert text.isascii()
    assert parse_properties(text) == props
    assert format_properties({"listeners": "PLAINTEXT://:9092"}) == "listeners=PLAINTEXT://:9092\n"


@settings(deadline=None)
@given(st.dictionaries(st.text(), st.text(), max_size=8))
def test_format_properties_round_trip(props: dict[str, str]) -> None:
    assert parse_properties(format_properties(props)) == props


# --------------------------------------------------------------------------- overrides


def test_overrides_win_over_the_file() -> None:
    c = cfg("num.partitions=3\nbroker.id=1\n", "num.partitions=7", " broker.rack =r2")
    assert c.num_partitions == 7
    assert c.broker_id == 1
    assert c.broker_rack == "r2"
    assert c.originals["num.partitions"] == "7"


def test_override_value_may_contain_equals() -> None:
    assert parse_overrides(["a=b=c", "d="]) == {"a": "b=c", "d": ""}


def test_bad_overrides_are_reported_with_other_problems() -> None:
    msgs = problems_of("num.partitions=x\n", "nokey", "=v")
    assert "--override 'nokey' is not of the form key=value" in msgs
    assert "--override '=v' is not of the form key=value" in msgs
    assert any("'num.partitions'" in m for m in msgs)


def test_overrides_alone_without_a_file() -> None:
    c = load_broker_config(overrides=["zookeeper.connect=zk:2181/kafka", "broker.id=4"])
    assert c.zookeeper_connect == "zk:2181/kafka"
    assert c.broker_id == 4


def test_load_from_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(ZK + "broker.id=2\nlog.dirs=/data/a,/data/b\n", encoding="utf-8")
    c = load_broker_config(path, ["broker.id=3"])
    assert (c.broker_id, c.log_dirs) == (3, ("/data/a", "/data/b"))
    assert BrokerConfig.load(path) == load_broker_config(path)


def test_a_file_is_read_as_iso_8859_1(tmp_path: Path) -> None:
    """As Properties.load(InputStream) reads it: a Latin-1 byte in a comment (or a value)
    is one character. It was read as UTF-8, and its UnicodeDecodeError escaped."""
    path = tmp_path / "server.properties"
    path.write_bytes(
        b"# broker of the caf\xe9\n" + ZK.encode() + b"broker.rack=caf\xe9 \\u00e9\\u20ac\n"
    )
    assert load_broker_config(path).broker_rack == "caf\u00e9 \u00e9\u20ac"
    # A UTF-8 file with non-ASCII in comments only loads too.
    path.write_bytes("# caf\u00e9 \u20ac\n".encode() + ZK.encode() + b"broker.id=1\n")
    assert load_broker_config(path).broker_id == 1
    # A bad value of another byte is a bad value, named.
    path.write_bytes(ZK.encode() + b"broker.id=\xff\n")
    with pytest.raises(ConfigError) as info:
        load_broker_config(path)
    (problem,) = info.value.problems
    assert problem.message.startswith("invalid value '\xff' for config key 'broker.id'")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_broker_config(tmp_path / "missing.properties")


def test_path_and_text_are_exclusive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        load_broker_config(tmp_path / "x", text=ZK)


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize(
    ("line", "attr", "value"),
    [
        ("num.partitions=2147483647", "num_partitions", 2**31 - 1),
        ("num.partitions=+5", "num_partitions", 5),
        # Leading zeros are no digits of the value (Integer.parseInt reads them so).
        ("num.partitions=" + "0" * 4400 + "7", "num_partitions", 7),
        ("log.retention.bytes=-" + "0" * 4400 + "1", "log_retention_bytes", -1),
        ("log.retention.bytes=9223372036854775807", "log_retention_bytes", LONG_MAX),
        ("log.retention.bytes=-9223372036854775808", "log_retention_bytes", -(2**63)),
        ("offsets.topic.replication.factor=32767", "offsets_topic_replication_factor", 32767),
        ("unclean.leader.election.enable=TRUE", "unclean_leader_election_enable", True),
        ("delete.topic.enable= False ", "delete_topic_enable", False),
        ("log.cleaner.min.cleanable.ratio=0.75", "log_cleaner_min_cleanable_ratio", 0.75),
        ("log.cleaner.min.cleanable.ratio=1e-1", "log_cleaner_min_cleanable_ratio", 0.1),
        ("log.cleaner.min.cleanable.ratio=1", "log_cleaner_min_cleanable_ratio", 1.0),
        ("log.dirs= /a , ,/b ,", "log_dirs", ("/a", "/b")),
        ("log.cleanup.policy=compact, delete", "log_cleanup_policy", ("compact", "delete")),
        ("broker.rack=eu-west-1a", "broker_rack", "eu-west-1a"),
        # No sessions at all (every fetch sessionless), as Kafka allows.
        (
            "max.incremental.fetch.session.cache.slots=0",
            "max_incremental_fetch_session_cache_slots",
            0,
        ),
        (
            "min.incremental.fetch.session.eviction.ms=9223372036854775807",
            "min_incremental_fetch_session_eviction_ms",
            LONG_MAX,
        ),
        ("group.max.size=1", "group_max_size", 1),
        # ConfigDef reads an INT, LONG or SHORT as Integer.parseInt(value.trim()) (and
        # Long.parseLong, Short.parseShort): any BMP decimal digit, String.trim's spaces.
        ("num.partitions=\u0665", "num_partitions", 5),  # ARABIC-INDIC FIVE
        ("num.partitions=+1\uff10", "num_partitions", 10),  # FULLWIDTH ZERO
        ("log.retention.bytes=\u0967\u0966", "log_retention_bytes", 10),  # DEVANAGARI
        ("offsets.topic.replication.factor=\u0663", "offsets_topic_replication_factor", 3),
    ],
)
def test_typed_values(line: str, attr: str, value: Any) -> None:
    assert getattr(cfg(line + "\n"), attr) == value


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("num.partitions=2147483648", "expected an int (32-bit integer)"),
        # More digits than int() takes: its "Exceeds the limit (4300 digits)" was the message.
        ("num.partitions=" + "9" * 4400, "expected an int (32-bit integer)"),
        ("num.partitions=-" + "9" * 4400, "expected an int (32-bit integer)"),
        ("log.retention.bytes=+" + "9" * 4400, "expected a long (64-bit integer)"),
        ("offsets.topic.replication.factor=" + "1" * 4400, "expected a short (16-bit integer)"),
        ("num.partitions=1_000", "expected an int (32-bit integer)"),
        ("num.partitions=+-1", "expected an int (32-bit integer)"),
        ("num.partitions=\u00b2", "expected an int (32-bit integer)"),  # SUPERSCRIPT TWO
        ("num.partitions=\U0001d7d5", "expected an int (32-bit integer)"),  # beyond the BMP
        ("num.partitions=\u00a05", "expected an int (32-bit integer)"),  # not String.trim's
        ("num.partitions=1.0", "expected an int (32-bit integer)"),
        ("num.partitions=", "expected an int (32-bit integer)"),
        ("log.retention.bytes=9223372036854775808", "expected a long (64-bit integer)"),
        ("offsets.topic.replication.factor=32768", "expected a short (16-bit integer)"),
        ("unclean.leader.election.enable=yes", "expected a boolean (true or false)"),
        ("unclean.leader.election.enable=1", "expected a boolean (true or false)"),
        ("log.cleaner.min.cleanable.ratio=half", "expected a double (decimal number)"),
        ("log.cleaner.min.cleanable.ratio=1.5", "expected a value between 0 and 1"),
        ("num.partitions=0", "expected a value >= 1"),
        ("log.segment.bytes=13", "expected a value >= 14"),
        ("compression.type=brotli", "expected one of uncompressed, zstd, lz4, snappy"),
        ("log.message.timestamp.type=createtime", "expected one of CreateTime, LogAppendTime"),
        ("log.cleanup.policy=delete,archive", "expected a list of compact, delete"),
        # An empty item is kept, as ConfigDef's LIST parsing keeps it, and refused, as
        # ValidList.in refuses "".
        ("log.cleanup.policy=delete,", "expected a list of compact, delete"),
        ("log.cleanup.policy=,delete", "expected a list of compact, delete"),
        ("log.cleanup.policy=compact,,delete", "expected a list of compact, delete"),
        ("broker.rack=", "expected a non-empty value"),
        # Kafka has no validator: a negative backoff failed the controlled shutdown's sleep.
        ("controlled.shutdown.retry.backoff.ms=-1", "expected a value >= 0"),
        ("security.inter.broker.protocol=TLS", "expected one of PLAINTEXT, SSL"),
        ("max.incremental.fetch.session.cache.slots=-1", "expected a value >= 0"),
        ("min.incremental.fetch.session.eviction.ms=-1", "expected a value >= 0"),
        ("group.max.size=0", "expected a value >= 1"),
    ],
)
def test_bad_values_name_key_value_and_expectation(line: str, expected: str) -> None:
    key, _, value = line.partition("=")
    (msg,) = problems_of(line + "\n")
    assert msg.startswith(f"invalid value {value!r} for config key {key!r}: ")
    assert expected in msg


# Double.parseDouble's answers (Java 17), as raw bits: ConfigDef reads a DOUBLE with it.
JAVA_DOUBLES = {
    "0.5d": 0x3FE0000000000000,
    "0.5F": 0x3FE0000000000000,
    "+0.5D": 0x3FE0000000000000,
    "5e-1f": 0x3FE0000000000000,
    "5.E-1": 0x3FE0000000000000,
    ".5": 0x3FE0000000000000,
    "1.": 0x3FF0000000000000,
    "0.1f": 0x3FB999999999999A,  # the double nearest 0.1, not the float's
    "0x1p-1": 0x3FE0000000000000,
    "0X1P-1F": 0x3FE0000000000000,
    "0x.8p0": 0x3FE0000000000000,
    "0x1.p-1": 0x3FE0000000000000,
    "0x0.8P+0d": 0x3FE0000000000000,
    "-0x1p-1": 0xBFE0000000000000,
    "0x1.00000000000008p0": 0x3FF0000000000000,  # a tie, rounded to even
    "0x1.fffffffffffff8p1023": 0x7FF0000000000000,  # Infinity, not OverflowError
    "0x1p99999999999999999999": 0x7FF0000000000000,
    "-0x1p99999999999999999999": 0xFFF0000000000000,  # -Infinity keeps its sign
    "-0x1.fffffffffffff8p1023": 0xFFF0000000000000,
    "0x1p-99999999999999999999": 0,
    "1e99999999999999999999": 0x7FF0000000000000,
    "1e-400": 0,
    "-0.0": 0x8000000000000000,
    "NaN": 0x7FF8000000000000,
    "+NaN": 0x7FF8000000000000,
    "-NaN": 0x7FF8000000000000,
    "Infinity": 0x7FF0000000000000,
    "-Infinity": 0xFFF0000000000000,
    " 0.25 ": 0x3FD0000000000000,
}
NOT_JAVA_DOUBLES = [
    *("0x1", "0x1.8", "0xp1", "0x.p1", "0x1p", "1_0", "0.5dd", "0.5 d", "0.5L", "d", "."),
    *("e5", "1e", "1e5.5", "inf", "nan", "infinity", "\u0663", ""),
]


@pytest.mark.parametrize(("text", "bits"), JAVA_DOUBLES.items())
def test_a_double_is_read_as_double_parse_double_reads_it(text: str, bits: int) -> None:
    assert struct.unpack(">Q", struct.pack(">d", java_parse_double(text)))[0] == bits


@pytest.mark.parametrize("text", NOT_JAVA_DOUBLES)
def test_what_double_parse_double_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a double"):
        java_parse_double(text)


@pytest.mark.parametrize("value", ["0.5d", "0.5F", "0x1p-1", " 5E-1f "])
def test_a_ratio_in_javas_forms_is_accepted(value: str) -> None:
    """log.cleaner.min.cleanable.ratio=0.5d was refused as "expected a double"."""
    assert cfg(f"log.cleaner.min.cleanable.ratio={value}\n").log_cleaner_min_cleanable_ratio == 0.5
    assert validate_topic_config({"min.cleanable.dirty.ratio": value})


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "0x1p1"])
def test_a_ratio_that_parses_but_is_no_ratio_is_refused(value: str) -> None:
    # Kafka's Range accepts NaN (no comparison with it is true); refused here.
    (msg,) = problems_of(f"log.cleaner.min.cleanable.ratio={value}\n")
    assert msg.endswith("expected a value between 0 and 1")


# --------------------------------------------------------------------------- errors


def test_unknown_key_with_a_close_match() -> None:
    msgs = problems_of("zookeper.connect=localhost:2181\n", zk=False)
    assert "unknown config key 'zookeper.connect' (did you mean 'zookeeper.connect'?)" in msgs


def test_unknown_key_without_a_close_match() -> None:
    assert problems_of("frobnicate=1\n") == ["unknown config key 'frobnicate'"]


def test_topic_key_in_broker_config_points_at_the_broker_key() -> None:
    (msg,) = problems_of("retention.ms=1000\n")
    assert "'retention.ms' is a topic config; the broker-wide default is 'log.retention.ms'" in msg


def test_missing_required_key() -> None:
    (msg,) = problems_of("broker.id=1\n", zk=False)
    assert msg.startswith("missing required config key 'zookeeper.connect'")


def test_empty_zookeeper_connect() -> None:
    (msg,) = problems_of("zookeeper.connect=  \n", zk=False)
    assert "expected a non-empty value" in msg


@pytest.mark.parametrize(
    ("connect", "problem"),
    [
        # Kazoo's connection thread died on the resolver's UnicodeError (IDNA: an empty
        # label, one over 63 characters), and the start waited out the whole
        # zookeeper.connection.timeout.ms for "Connection time-out".
        ("a..b:2181", "'a..b' is not a host name (label empty or too long)"),
        ("127.0.0.1:2181,a..b:2181/kafka", "'a..b' is not a host name (label empty or too long)"),
        ("x" * 64 + ":2181", f"{'x' * 64!r} is not a host name (label too long)"),
        # What kazoo refuses to read, at start with no key named before.
        ("localhost:abc", "Port could not be cast to integer value as 'abc'"),
        ("localhost:99999", "Port out of range 0-65535"),
        ("localhost:2181,", "bad hostname"),
        # A chroot with a relative part: the client refuses it (Kafka 2.8's ZooKeeper
        # client at once, PathUtils.validatePath), and the start waited out the whole
        # zookeeper.connection.timeout.ms for "Connection time-out".
        ("127.0.0.1:2181/kafka/../b", "chroot '/kafka/../b': relative paths not allowed"),
        ("zk1:2181,zk2:2181/.", "chroot '/.': relative paths not allowed"),
        # kazoo reads port 0 as none given: the client went to port 2181, another
        # ZooKeeper perhaps, where Kafka 2.8's client tries port 0 and never connects.
        ("zk1:2181,zk2:0/kafka", "'zk2:0': port 0 is no port to connect to"),
    ],
)
def test_a_zookeeper_connect_the_client_cannot_use_is_a_bad_value(
    connect: str, problem: str
) -> None:
    (msg,) = problems_of(f"zookeeper.connect={connect}\n", zk=False)
    assert msg.startswith(
        f"invalid value {connect!r} for config key 'zookeeper.connect': expected"
        f" host:port[,host:port...][/chroot]; "
    )
    assert msg.endswith(problem)


@pytest.mark.parametrize(
    "connect", ["zk", "zk:2181", "zk1:2181,zk2:2182/kafka/a", "[::1]:2181", "127.0.0.1"]
)
def test_a_zookeeper_connect_of_host_names_is_accepted(connect: str) -> None:
    config = load_broker_config(text=f"zookeeper.connect={connect}\n")
    assert config.zookeeper_connect == connect


def test_every_problem_is_reported() -> None:
    text = (
        "zookeper.connect=x\n"
        "num.partitions=abc\n"
        "unclean.leader.election.enable=maybe\n"
        "log.retention.ms=0\n"
        "broker.id=5000\n"
    )
    with pytest.raises(ConfigError) as info:
        load_broker_config(text=text, overrides=["oops"])
    err = info.value
    assert len(err.problems) == 7
    assert set(err.keys) == {
        "zookeper.connect",
        "num.partitions",
        "unclean.leader.election.enable",
        "log.retention.ms",
        "broker.id",
        "zookeeper.connect",
    }
    assert str(err).startswith("7 config problems:\n  - ")
    assert isinstance(err, ValueError)


def test_a_bad_value_is_reported_once() -> None:
    # log.retention.hours fails to parse; the retention checks built on it stay quiet.
    assert len(problems_of("log.retention.hours=lots\n")) == 1


# --------------------------------------------------------------------------- defaults


KAFKA_DEFAULTS: dict[str, Any] = {
    "broker.id": -1,
    "broker.rack": None,
    "zookeeper.session.timeout.ms": 18000,
    "zookeeper.connection.timeout.ms": 18000,
    "zookeeper.max.in.flight.requests": 10,
    "log.dirs": ("/tmp/kafka-logs",),
    "log.dir": ("/tmp/kafka-logs",),
    "num.partitions": 1,
    "default.replication.factor": 1,
    "unclean.leader.election.enable": False,
    "min.insync.replicas": 1,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.per.broker.percentage": 10,
    "leader.imbalance.check.interval.seconds": 300,
    "controlled.shutdown.enable": True,
    "controlled.shutdown.max.retries": 3,
    "controlled.shutdown.retry.backoff.ms": 5000,
    "controller.socket.timeout.ms": 30000,
    "delete.topic.enable": True,
    "auto.create.topics.enable": False,  # Kafka: true; a deliberate difference
    "reserved.broker.max.id": 1000,
    "broker.id.generation.enable": True,
    "replica.lag.time.max.ms": 30000,
    "replica.fetch.max.bytes": 1048576,
    "replica.fetch.wait.max.ms": 500,
    "message.max.bytes": 1048588,
    "offset.metadata.max.bytes": 4096,
    "log.segment.bytes": 1073741824,
    "log.retention.ms": 168 * 3600 * 1000,
    "log.retention.minutes": None,
    "log.retention.hours": 168,
    "log.retention.bytes": -1,
    "log.roll.ms": 168 * 3600 * 1000,
    "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": LONG_MAX,
    "request.timeout.ms": 30000,
    "socket.request.max.bytes": 104857600,
    "num.network.threads": 3,
    "num.io.threads": 8,
    "queued.max.requests": 500,
    "compression.type": "producer",
    "log.cleanup.policy": ("delete",),
    "inter.broker.listener.name": "PLAINTEXT",
    "security.inter.broker.protocol": "PLAINTEXT",
    "listeners": (Listener("PLAINTEXT", "", 9092),),
    "advertised.listeners": (Listener("PLAINTEXT", "127.0.0.1", 9092),),
    # Fetch sessions (KIP-227): a server.properties with them stopped the broker (unknown
    # keys), and the cache's limits were fixed.
    "max.incremental.fetch.session.cache.slots": 1000,
    "min.incremental.fetch.session.eviction.ms": 120_000,
    # A server.properties setting it stopped the broker (an unknown key).
    "group.max.size": 2**31 - 1,
}


@pytest.mark.parametrize(("key", "value"), KAFKA_DEFAULTS.items())
def test_defaults(key: str, value: Any) -> None:
    c = cfg()
    assert c.get(key) == value
    assert getattr(c, key.replace(".", "_")) == value


def test_every_default_is_valid_and_typed() -> None:
    for definition in (*BROKER_CONFIG_DEFS, *TOPIC_CONFIG_DEFS):
        if definition.required or definition.default is None:
            continue
        if definition.validator is not None:
            assert definition.validator.check(definition.default) is None, definition.name
    assert [d.name for d in BROKER_CONFIG_DEFS if d.required] == ["zookeeper.connect"]


def test_writing_every_default_explicitly_changes_nothing() -> None:
    explicit = "".join(
        f"{d.name}={d.default if not isinstance(d.default, bool) else str(d.default).lower()}\n"
        for d in BROKER_CONFIG_DEFS
        if not d.required and d.default is not None and not isinstance(d.default, tuple)
    )
    explicit += "log.dir=/tmp/kafka-logs\nlog.cleanup.policy=delete\n"
    # Kafka refuses both inter-broker settings at once; the protocol is the default anyway.
    explicit = explicit.replace("security.inter.broker.protocol=PLAINTEXT\n", "")
    assert cfg(explicit) == cfg()


def test_stock_kafka_server_properties() -> None:
    # The settings of config/server.properties shipped with Kafka 2.8.
    stock = """
broker.id=0
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""
    c = load_broker_config(text=stock)
    assert (
        c.broker_id,
        c.offsets_topic_replication_factor,
        c.group_initial_rebalance_delay_ms,
    ) == (
        0,
        1,
        0,
    )


# --------------------------------------------------------------------------- derived values


# README: accepted, checked as Kafka checks them, and without effect.
NO_EFFECT_DEFAULTS: dict[str, Any] = {
    "inter.broker.protocol.version": "2.8-IV1",
    "log.message.format.version": "2.8-IV1",
    "transactional.id.expiration.ms": 604800000,
    "transaction.max.timeout.ms": 900000,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.load.buffer.size": 5242880,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.num.partitions": 50,
    "transaction.state.log.segment.bytes": 104857600,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000,
}


@pytest.mark.parametrize(("key", "value"), NO_EFFECT_DEFAULTS.items())
def test_kafkas_keys_without_effect_here_are_accepted_with_kafkas_defaults(
    key: str, value: Any
) -> None:
    """They were unknown keys (the transaction settings but two, the versions), though
    the README says they are accepted."""
    assert cfg().get(key) == value
    assert cfg(f"{key}={value}\n").get(key) == value
    if isinstance(value, int):
        (msg,) = problems_of(f"{key}=0\n")
        assert msg == f"invalid value '0' for config key {key!r}: expected a value >= 1"
    else:
        (msg,) = problems_of(f"{key}=3.0\n")
        assert "expected a Kafka version from 0.8.0 to 2.8-IV1" in msg


def test_kafkas_offsets_commit_keys_are_accepted_and_the_timeout_is_the_coordinators(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """offsets.commit.timeout.ms, offsets.commit.required.acks and offsets.load.buffer.size
    are Kafka 2.8 broker keys: a server.properties setting one stopped the broker (unknown
    config key). The timeout is how long a commit waits for the ISR (Kafka's
    offsetCommitTimeoutMs); the acks are checked as KafkaConfig.validateValues checks them."""
    c = cfg()
    assert (
        c.offsets_commit_timeout_ms,
        c.offsets_commit_required_acks,
        c.offsets_load_buffer_size,
    ) == (5000, -1, 5 * 1024 * 1024)
    c = cfg(
        "offsets.commit.timeout.ms=12000\noffsets.commit.required.acks=1\n"
        "offsets.load.buffer.size=1048576\n"
    )
    assert (
        c.offsets_commit_timeout_ms,
        c.offsets_commit_required_acks,
        c.offsets_load_buffer_size,
    ) == (12000, 1, 1048576)
    assert problems_of("offsets.commit.timeout.ms=0\n") == [
        "invalid value '0' for config key 'offsets.commit.timeout.ms': expected a value >= 1"
    ]
    assert problems_of("offsets.commit.required.acks=4\n") == [
        "offsets.commit.required.acks must be greater or equal -1 and less or equal to"
        " offsets.topic.replication.factor (3): it is 4"
    ]
    cfg("offsets.commit.required.acks=4\noffsets.topic.replication.factor=4\n")
    broker = unstarted_server(tmp_path, monkeypatch, "offsets.commit.timeout.ms=12000\n")
    try:
        assert broker.groups.commit_timeout_s == 12.0
    finally:
        assert broker.shutdown()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "inter.broker.protocol.version=0.10.2\n",
            "log.message.format.version 2.8-IV1 can only be used when"
            " inter.broker.protocol.version is set to version 0.11.0 or higher",
        ),
        (
            "inter.broker.protocol.version=0.9.0\nlog.message.format.version=0.10.0\n",
            "log.message.format.version 0.10.0 can only be used when"
            " inter.broker.protocol.version is set to version 0.10.0 or higher",
        ),
        (
            "inter.broker.protocol.version=0.10.2\nlog.message.format.version=0.10.2\n"
            "offsets.topic.compression.codec=4\n",
            "offsets.topic.compression.codec zstd can only be used when"
            " inter.broker.protocol.version is set to version 2.1 or higher",
        ),
    ],
)
def test_versions_are_checked_together_as_kafka_checks_them(text: str, problem: str) -> None:
    assert problems_of(text) == [problem]


def test_older_versions_that_agree_are_accepted() -> None:
    c = cfg("inter.broker.protocol.version=2.1\nlog.message.format.version=0.10.2\n")
    assert (c.inter_broker_protocol_version, c.log_message_format_version) == ("2.1", "0.10.2")
    cfg("inter.broker.protocol.version=0.11.0\noffsets.topic.compression.codec=4\n")


def test_zookeeper_connection_timeout_defaults_to_session_timeout() -> None:
    assert cfg("zookeeper.session.timeout.ms=6000\n").zookeeper_connection_timeout_ms == 6000
    c = cfg("zookeeper.session.timeout.ms=6000\nzookeeper.connection.timeout.ms=1000\n")
    assert c.zookeeper_connection_timeout_ms == 1000


def test_log_dirs_wins_over_log_dir() -> None:
    assert cfg("log.dir=/one\n").log_dirs == ("/one",)
    c = cfg("log.dir=/one\nlog.dirs=/a,/b\n")
    assert (c.log_dirs, c.log_dir) == (("/a", "/b"), ("/one",))


def test_no_log_dir_at_all() -> None:
    (msg,) = problems_of("log.dirs= , \n")
    assert "at least one log directory" in msg


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("log.retention.hours=1\n", 3600 * 1000),
        ("log.retention.hours=1\nlog.retention.minutes=5\n", 5 * 60 * 1000),
        ("log.retention.minutes=5\nlog.retention.ms=1234\n", 1234),
        ("log.retention.ms=-5\n", -1),
        ("log.retention.minutes=-1\n", -1),
        ("log.retention.hours=-1\n", -1),
    ],
)
def test_retention_precedence(text: str, millis: int) -> None:
    assert cfg(text).log_retention_ms == millis


def test_zero_retention_is_an_error() -> None:
    (msg,) = problems_of("log.retention.minutes=0\n")
    assert "log.retention.ms must be unlimited (-1) or >= 1" in msg


def test_roll_and_flush_fallbacks() -> None:
    c = cfg("log.roll.hours=2\nlog.roll.jitter.hours=1\nlog.flush.scheduler.interval.ms=5\n")
    assert (c.log_roll_ms, c.log_roll_jitter_ms, c.log_flush_interval_ms) == (
        2 * 3600 * 1000,
        3600 * 1000,
        5,
    )
    c = cfg("log.roll.ms=10\nlog.roll.jitter.ms=3\nlog.flush.interval.ms=7\n")
    assert (c.log_roll_ms, c.log_roll_jitter_ms, c.log_flush_interval_ms) == (10, 3, 7)
    assert "log.roll.ms must be greater than or equal to 1" in problems_of("log.roll.ms=0\n")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("log.roll.hours=0", "expected a value >= 1"),
        ("log.roll.hours=abc", "expected an int (32-bit integer)"),
        ("log.roll.jitter.hours=-1", "expected a value >= 0"),
        ("log.roll.jitter.hours=x", "expected an int (32-bit integer)"),
        ("log.flush.scheduler.interval.ms=x", "expected a long (64-bit integer)"),
        ("zookeeper.session.timeout.ms=0", "expected a value >= 1"),
    ],
)
def test_a_bad_fallback_key_is_reported_once_naming_it(line: str, expected: str) -> None:
    # The unset key that falls back to it stays unresolved; the checks on that key must
    # skip it (log.roll.hours=0 was a TypeError comparing None with 1).
    key, _, value = line.partition("=")
    (msg,) = problems_of(line + "\n")
    assert msg.startswith(f"invalid value {value!r} for config key {key!r}: {expected}")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("broker.id=1001\n", "expected -1 (generate one) or 0..1000"),
        ("broker.id=-2\n", "expected -1 (generate one) or 0..1000"),
        ("broker.id=11\nreserved.broker.max.id=10\n", "or 0..10 (reserved.broker.max.id)"),
        ("broker.id=-1\nbroker.id.generation.enable=false\n", "a value >= 0"),
        ("replica.fetch.wait.max.ms=40000\n", "at most replica.lag.time.max.ms"),
        (
            "replica.fetch.wait.max.ms=20000\nreplica.socket.timeout.ms=10000\n",
            "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms",
        ),
        (
            "log.cleaner.min.compaction.lag.ms=10\nlog.cleaner.max.compaction.lag.ms=5\n",
            "must not exceed log.cleaner.max.compaction.lag.ms",
        ),
    ],
)
def test_cross_key_checks(text: str, problem: str) -> None:
    assert any(problem in m for m in problems_of(text))


@pytest.mark.parametrize(
    "text",
    [
        "log.flush.offset.checkpoint.interval.ms=0\n",
        "replica.high.watermark.checkpoint.interval.ms=0\n",
        "log.flush.scheduler.interval.ms=0\n",
        # isr-expiration runs every replica.lag.time.max.ms / 2 (Java's long division)
        "replica.lag.time.max.ms=1\nreplica.fetch.wait.max.ms=0\n",
        "replica.lag.time.max.ms=0\nreplica.fetch.wait.max.ms=0\n",
        "replica.lag.time.max.ms=-1\nreplica.fetch.wait.max.ms=-1\n",
    ],
)
def test_a_background_task_period_of_zero_is_refused_naming_its_key(text: str) -> None:
    # Kafka 2.8's KafkaScheduler hands a period of 0 to scheduleAtFixedRate, which throws
    # IllegalArgumentException: the broker does not start.
    key = text.split("=", maxsplit=1)[0]
    with pytest.raises(ConfigError) as info:
        cfg(text)
    assert info.value.keys == (key,)
    assert f"{key} must not be" in str(info.value)


def test_the_high_watermark_checkpoint_period_of_zero_says_when_kafka_fails() -> None:
    # Kafka schedules that task at the first LeaderAndIsr, not at start.
    with pytest.raises(ConfigError) as info:
        cfg("replica.high.watermark.checkpoint.interval.ms=0\n")
    assert "Kafka fails its first LeaderAndIsr with a period of 0" in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "replica.high.watermark.checkpoint.interval.ms=-1\n",
        "log.flush.scheduler.interval.ms=-1\nlog.flush.interval.ms=1000\n",
        "log.flush.offset.checkpoint.interval.ms=1\nreplica.lag.time.max.ms=2\n"
        "replica.fetch.wait.max.ms=0\n",
    ],
)
def test_a_negative_or_positive_background_task_period_is_accepted(text: str) -> None:
    cfg(text)  # Kafka runs a task with a negative period once


@pytest.mark.parametrize(
    ("text", "key", "topic_key"),
    [
        (
            "log.message.timestamp.difference.max.ms=-1\n",
            "log.message.timestamp.difference.max.ms",
            "message.timestamp.difference.max.ms",
        ),
        ("log.flush.interval.ms=-1\n", "log.flush.interval.ms", "flush.ms"),
        # log.flush.interval.ms unset takes it (KafkaConfig.logFlushIntervalMs)
        ("log.flush.scheduler.interval.ms=-1\n", "log.flush.scheduler.interval.ms", "flush.ms"),
        ("log.cleaner.delete.retention.ms=-1\n", "log.cleaner.delete.retention.ms",
         "delete.retention.ms"),
        ("log.cleaner.min.compaction.lag.ms=-1\n", "log.cleaner.min.compaction.lag.ms",
         "min.compaction.lag.ms"),
    ],
)  # fmt: skip
def test_a_broker_value_its_topic_key_refuses_stops_the_broker(
    text: str, key: str, topic_key: str
) -> None:
    # Kafka 2.8's LogManager.apply builds LogConfig(extractLogConfigMap(config)), whose
    # ConfigDef checks each synonym's value with the topic key's validator: the broker
    # does not start. Accepted, they made topics of values no topic could be given (a
    # negative timestamp difference refused every CreateTime produce).
    with pytest.raises(ConfigError):
        validate_topic_config({topic_key: "-1"})
    with pytest.raises(ConfigError) as info:
        cfg(text)
    assert info.value.keys == (key,)
    assert topic_key in str(info.value)


def test_every_broker_default_of_a_topic_key_passes_the_topic_keys_validator() -> None:
    # Every value topic_config_defaults hands a topic is one the topic key accepts.
    defaults = topic_config_defaults(cfg(""))
    for definition in TOPIC_CONFIG_DEFS:
        if definition.validator is not None:
            assert definition.validator.check(defaults[definition.name]) is None, definition


@pytest.mark.parametrize("idle_ms", ["0", "1", "100"])
def test_connections_max_idle_ms_must_exceed_the_failed_authentication_delay(
    idle_ms: str,
) -> None:
    """Kafka's validateValues: connection.failed.authentication.delay.ms (100, not
    configurable here) < connections.max.idle.ms when that is >= 0. 0 was accepted, and
    closed every connection after 1 ms of idleness."""
    assert any(
        f"connection.failed.authentication.delay.ms=100 should always be less than"
        f" connections.max.idle.ms={idle_ms}" in m
        for m in problems_of(f"connections.max.idle.ms={idle_ms}\n")
    )


@pytest.mark.parametrize("idle_ms", ["-1", "101", "600000"])
def test_connections_max_idle_ms_negative_or_over_100_is_accepted(idle_ms: str) -> None:
    config = load_broker_config(
        text=f"zookeeper.connect=127.0.0.1:2181\nconnections.max.idle.ms={idle_ms}\n"
    )
    assert config.connections_max_idle_ms == int(idle_ms)


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("log.cleaner.dedupe.buffer.size=1024\n", True),
        # More than 1 MiB per thread, in integer division, as KafkaConfig.validateValues.
        ("log.cleaner.dedupe.buffer.size=1048576\n", True),
        ("log.cleaner.dedupe.buffer.size=1048577\n", False),
        ("log.cleaner.dedupe.buffer.size=3145727\nlog.cleaner.threads=3\n", True),
        ("log.cleaner.dedupe.buffer.size=3145731\nlog.cleaner.threads=3\n", False),
        # Checked whether the cleaner runs or not, as Kafka does.
        ("log.cleaner.dedupe.buffer.size=1024\nlog.cleaner.enable=false\n", True),
        # No cleaner thread: nothing to share (Kafka divides by zero).
        ("log.cleaner.dedupe.buffer.size=1024\nlog.cleaner.threads=0\n", False),
    ],
)
def test_the_dedupe_buffer_takes_more_than_1mib_per_cleaner_thread(
    text: str, refused: bool
) -> None:
    if not refused:
        cfg(text)
        return
    (msg,) = problems_of(text)
    assert msg.startswith(
        "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread: it is"
    )


def test_broker_id_above_reserved_when_generation_is_off() -> None:
    assert cfg("broker.id=5000\nbroker.id.generation.enable=false\n").broker_id == 5000


def test_the_group_settings_are_the_group_coordinators_limits() -> None:
    limits = group_limits(
        cfg(
            "group.min.session.timeout.ms=10\ngroup.max.session.timeout.ms=20\n"
            "group.initial.rebalance.delay.ms=30\ngroup.max.size=40\n"
        )
    )
    assert limits == GroupLimits(10, 20, 30, 40)
    assert group_limits(cfg()) == GroupLimits()  # Kafka's defaults, as the coordinator's


# --------------------------------------------------------------------------- listeners


def test_listeners_parse() -> None:
    c = cfg("listeners=plaintext://localhost:9093\n")
    assert c.listeners == (Listener("PLAINTEXT", "localhost", 9093),)
    assert c.advertised_listeners == c.listeners
    assert str(c.listeners[0]) == "PLAINTEXT://localhost:9093"


def test_ipv6_listener() -> None:
    c = cfg("listeners=PLAINTEXT://[::1]:9092\n")
    assert c.listeners[0].host == "::1"
    assert str(c.listeners[0]) == "PLAINTEXT://[::1]:9092"


def test_empty_host_is_advertised_as_loopback() -> None:
    c = cfg("listeners=PLAINTEXT://:0\n")
    assert c.listeners[0].host == ""
    assert c.advertised_listener() == Listener("PLAINTEXT", "127.0.0.1", 0)
    c = cfg("advertised.listeners=PLAINTEXT://:9092\n")
    assert c.advertised_listeners[0].host == "127.0.0.1"


def test_advertised_listeners_given() -> None:
    c = cfg("listeners=PLAINTEXT://0.0.0.0:9092\nadvertised.listeners=PLAINTEXT://kafka1:9092\n")
    assert c.listener("plaintext").host == "0.0.0.0"
    assert c.advertised_listener("PLAINTEXT") == Listener("PLAINTEXT", "kafka1", 9092)


def test_named_listeners_and_inter_broker_listener() -> None:
    c = cfg(
        "listeners=INTERNAL://:9093,EXTERNAL://:9092\n"
        "advertised.listeners=INTERNAL://broker1:9093,EXTERNAL://localhost:9092\n"
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT\n"
        "inter.broker.listener.name=internal\n"
    )
    assert c.inter_broker_listener_name == "INTERNAL"
    assert c.security_inter_broker_protocol == "PLAINTEXT"
    assert c.advertised_listener() == Listener("INTERNAL", "broker1", 9093)
    assert dict(c.listener_security_protocol_map) == {
        "INTERNAL": "PLAINTEXT",
        "EXTERNAL": "PLAINTEXT",
    }


def test_port_zero_may_repeat() -> None:
    c = cfg(
        "listeners=A://:0,B://:0\nlistener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT\n"
        "inter.broker.listener.name=A\n"
    )
    assert [listener.port for listener in c.listeners] == [0, 0]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("listeners=localhost:9092\n", "expected NAME://host:port"),
        ("listeners=PLAINTEXT://:99999\n", "a port between 0 and 65535"),
        # More digits than int() takes (4,300): a ValueError traceback at start before.
        ("listeners=PLAINTEXT://:" + "9" * 4400 + "\n", "a port between 0 and 65535"),
        ("listeners=PLAINTEXT://:" + "0" * 4400 + "9092,A://:-" + "9" * 4400 + "\n", "a port"),
        ("listeners=\n", "expected NAME://host:port"),
        ("listeners=PLAINTEXT://:9092,PLAINTEXT://:9093\n", "must have a different name"),
        ("listeners=PLAINTEXT://:9092,SSL://:9092\n", "security protocol SSL is not supported"),
        ("listeners=FOO://:9092\n", "listener name 'FOO' has no security protocol"),
        ("listeners=PLAINTEXT://0.0.0.0:9092\n", "nonroutable meta-address 0.0.0.0"),
        ("advertised.listeners=PLAINTEXT://0.0.0.0:9092\n", "nonroutable meta-address 0.0.0.0"),
        ("listener.security.protocol.map=PLAINTEXT:TLS\n", "expected NAME:PROTOCOL"),
        ("security.inter.broker.protocol=SSL\n", "inter-broker listener 'SSL' is not among"),
        ("inter.broker.listener.name=NOPE\n", "listener 'NOPE' in 'inter.broker.listener.name'"),
        (
            "inter.broker.listener.name=PLAINTEXT\nsecurity.inter.broker.protocol=PLAINTEXT\n",
            "only one of 'inter.broker.listener.name' and 'security.inter.broker.protocol'",
        ),
    ],
)
def test_listener_problems(text: str, problem: str) -> None:
    assert any(problem in m for m in problems_of(text))


def test_duplicate_ports() -> None:
    msgs = problems_of(
        "listeners=A://:9092,B://:9092\nlistener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT\n"
        "inter.broker.listener.name=A\n"
    )
    assert any("must have a different port" in m for m in msgs)


def test_advertised_names_must_be_listeners() -> None:
    msgs = problems_of(
        "listeners=A://:9092\nadvertised.listeners=A://h:9092,B://h:9093\n"
        "listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT\ninter.broker.listener.name=A\n"
    )
    assert any("subset of those in listeners" in m for m in msgs)


# --------------------------------------------------------------------------- the object


def test_get_by_kafka_name() -> None:
    c = cfg("num.partitions=6\n")
    assert c.get("num.partitions") == 6
    with pytest.raises(KeyError, match=re.escape("did you mean 'num.partitions'")):
        c.get("num.partition")


def test_immutable_and_replaceable() -> None:
    c = cfg()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.broker_id = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        c.listener_security_protocol_map["X"] = "PLAINTEXT"  # type: ignore[index]
    generated = dataclasses.replace(c, broker_id=1001)
    assert (generated.broker_id, c.broker_id) == (1001, -1)


def test_to_properties_round_trip() -> None:
    c = cfg(
        "broker.id=3\nbroker.rack=r 1\nlog.retention.minutes=90\nlog.dirs=/a, /b\n"
        "listeners=INTERNAL://:9093,EXTERNAL://0.0.0.0:9092\n"
        "advertised.listeners=INTERNAL://b3:9093,EXTERNAL://example.com:9092\n"
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT\n"
        "inter.broker.listener.name=INTERNAL\n"
        "log.cleaner.min.cleanable.ratio=0.25\n"
    )
    text = c.to_properties()
    again = load_broker_config(text=text)
    assert again == c
    assert "log.retention.ms=5400000\n" in text
    assert "broker.rack=r 1\n" in text
    assert "log.retention.minutes=90\n" in text
    assert "listeners=INTERNAL://:9093,EXTERNAL://0.0.0.0:9092\n" in text


def test_to_properties_default_config_round_trip() -> None:
    c = cfg()
    assert load_broker_config(text=c.to_properties()) == c


def test_to_properties_only_given_keys() -> None:
    c = cfg("num.partitions= 3\n", "broker.id=2")
    assert parse_properties(c.to_properties(include_defaults=False)) == {
        "zookeeper.connect": "localhost:2181",
        "num.partitions": "3",
        "broker.id": "2",
    }


def test_copy_pickle_and_hash() -> None:
    c = cfg("broker.rack=r1\n")
    assert pickle.loads(pickle.dumps(c)) == c
    assert copy.deepcopy(c) == c
    assert hash(c) == hash(load_broker_config(text=c.to_properties()))
    topic = effective_topic_config(c, {"retention.ms": "5"})
    assert pickle.loads(pickle.dumps(topic)) == topic
    assert pickle.loads(pickle.dumps(c)).originals == c.originals


def test_tables_and_dataclass_agree() -> None:
    fields = {f.name for f in dataclasses.fields(BrokerConfig)} - {"originals"}
    assert fields == {d.attr for d in BROKER_CONFIG_DEFS}
    assert len(BROKER_CONFIGS) == len(BROKER_CONFIG_DEFS)


# --------------------------------------------------------------------------- topic configs


def test_validate_topic_config_returns_strings_unchanged() -> None:
    given = {
        "retention.ms": " 1000",
        "cleanup.policy": "compact,delete",
        "min.insync.replicas": "2",
    }
    assert validate_topic_config(given) == given


def test_topic_config_errors_all_reported() -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_config(
            {
                "retention.mss": "1",
                "log.retention.ms": "5",
                "min.insync.replicas": "0",
                "cleanup.policy": "compact,foo",
                "unclean.leader.election.enable": "sometimes",
                "leader.replication.throttled.replicas": "0:1,x",
            }
        )
    msgs = [p.message for p in info.value.problems]
    assert msgs == [
        "unknown topic config key 'retention.mss' (did you mean 'retention.ms'?)",
        "unknown topic config key 'log.retention.ms' ('log.retention.ms' is a broker config;"
        " the topic-level key is 'retention.ms')",
        "invalid value '0' for topic config key 'min.insync.replicas': expected a value >= 1",
        "invalid value 'compact,foo' for topic config key 'cleanup.policy':"
        " expected a list of compact, delete",
        "invalid value 'sometimes' for topic config key 'unclean.leader.election.enable':"
        " expected a boolean (true or false)",
        "invalid value '0:1,x' for topic config key 'leader.replication.throttled.replicas':"
        " expected '*' or a list of [partitionId]:[brokerId]",
    ]


def test_throttled_replicas() -> None:
    assert validate_topic_config({"follower.replication.throttled.replicas": "*"})
    assert validate_topic_config({"follower.replication.throttled.replicas": "0:1, 1:2"})
    # Kafka's ThrottledReplicaListValidator takes empty items, and "*" with them.
    assert validate_topic_config({"follower.replication.throttled.replicas": "0:1,"})
    assert validate_topic_config({"leader.replication.throttled.replicas": "*,"})
    with pytest.raises(ConfigError, match="expected '\\*' or a list"):
        validate_topic_config({"leader.replication.throttled.replicas": "*,0:1"})


@pytest.mark.parametrize("value", ["compact,", "compact,,delete", ",delete", " , "])
def test_a_cleanup_policy_with_an_empty_item_is_refused(value: str) -> None:
    """ConfigDef splits a LIST keeping empty items, and ValidList.in refuses ""; they were
    dropped, and "compact," accepted."""
    with pytest.raises(ConfigError, match="expected a list of compact, delete"):
        validate_topic_config({"cleanup.policy": value})


def test_an_empty_cleanup_policy_is_an_empty_list() -> None:
    assert effective_topic_config(None, {"cleanup.policy": " "}).cleanup_policy == ()
    assert cfg("log.cleanup.policy=\n").log_cleanup_policy == ()


@pytest.mark.parametrize("value", ["2.8", "2.8-IV1", "2.8.1", " 0.10.2.1 ", "0.8.2", "1.0"])
def test_message_format_version_is_a_topic_key(value: str) -> None:
    """LogConfig defines it, with ApiVersionValidator (and no effect here); it was an
    unknown key, so kafka-topics.sh --config message.format.version=2.8 was refused."""
    assert validate_topic_config({"message.format.version": value})


@pytest.mark.parametrize("value", ["2.9", "3.0", "2", "0.10", "2.8-IV2", "latest", ""])
def test_message_format_version_is_checked_as_kafka_checks_it(value: str) -> None:
    with pytest.raises(ConfigError, match=re.escape("expected a Kafka version from 0.8.0 to 2.8")):
        validate_topic_config({"message.format.version": value})


def test_a_topics_message_format_version_defaults_to_the_brokers_as_kafka_reads_it() -> None:
    assert effective_topic_config(None).message_format_version == "2.8-IV1"
    broker = cfg("log.message.format.version=2.1\n")
    assert broker.log_message_format_version == "2.1"
    assert effective_topic_config(broker).message_format_version == "2.1-IV2"


def test_topic_compaction_lag_conflict() -> None:
    with pytest.raises(ConfigError, match=re.escape("min.compaction.lag.ms (10) > max.compaction")):
        validate_topic_config({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    broker = cfg("log.cleaner.max.compaction.lag.ms=5\nlog.cleaner.min.compaction.lag.ms=1\n")
    with pytest.raises(ConfigError, match="conflict topic config setting"):
        effective_topic_config(broker, {"min.compaction.lag.ms": "10"})


def test_a_topic_value_of_more_digits_than_int_takes_is_refused_as_a_long() -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_config({"retention.ms": "9" * 4400})
    assert str(info.value).endswith("expected a long (64-bit integer)")


def test_topic_config_non_string_value() -> None:
    with pytest.raises(ConfigError, match="expected a string"):
        effective_topic_config(None, {"retention.ms": 1000})  # type: ignore[dict-item]


def test_a_stored_topic_config_ignores_unknown_keys_and_keeps_the_others() -> None:
    """Kafka's LogConfig.fromProps ignores keys it does not define: one written by a newer
    Kafka or another tool's typo must not drop the topic's other overrides (a compacted
    topic read as cleanup.policy=delete has its records deleted by retention)."""
    stored = topic_config_as_stored(
        cfg(),
        {"cleanup.policy": "compact", "retention.ms": "1000", "remote.storage.enable": "x"},
    )
    assert stored.unknown_keys == ("remote.storage.enable",)
    assert stored.problems == ()
    assert stored.config.cleanup_policy == ("compact",)
    assert stored.config.retention_ms == 1000
    assert stored.config.overrides == {"cleanup.policy": "compact", "retention.ms": "1000"}


def test_a_stored_topic_configs_bad_values_are_reported_and_left_at_the_defaults() -> None:
    broker = cfg("log.retention.ms=777\n")
    stored = topic_config_as_stored(
        broker, {"cleanup.policy": "compact", "retention.ms": "soon", "segment.bytes": 5}
    )
    assert [p.key for p in stored.problems] == ["retention.ms", "segment.bytes"]
    assert stored.config.cleanup_policy == ("compact",)
    assert stored.config.retention_ms == 777
    assert stored.config.overrides == {"cleanup.policy": "compact"}
    # A lag conflict drops both lag overrides, whatever else is kept.
    stored = topic_config_as_stored(
        broker,
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5", "retention.ms": "9"},
    )
    assert [p.key for p in stored.problems] == ["min.compaction.lag.ms"]
    assert (stored.config.min_compaction_lag_ms, stored.config.retention_ms) == (0, 9)
    assert stored.config.max_compaction_lag_ms == LONG_MAX
    # What is good is read as effective_topic_config reads it.
    good = {"cleanup.policy": "compact,delete", "min.insync.replicas": "2"}
    assert topic_config_as_stored(broker, good).config == effective_topic_config(broker, good)


def test_parse_topic_config_args() -> None:
    assert parse_topic_config_args(["retention.ms=1000", "cleanup.policy=compact"]) == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
    }
    with pytest.raises(ConfigError, match=re.escape("--config 'retention.ms' is not of the form")):
        parse_topic_config_args(["retention.ms"])
    with pytest.raises(ConfigError, match="unknown topic config key"):
        parse_topic_config_args(["retention=1"])


def test_topic_config_args_are_trimmed_key_and_value() -> None:
    """Kafka 2.8's TopicCommand (and ConfigCommand) split at \\s*=\\s* and trim both: the
    value is stored as "true", not " true"."""
    given = ["unclean.leader.election.enable = true", " retention.ms=\t1000 "]
    assert parse_topic_config_args(given) == {
        "unclean.leader.election.enable": "true",
        "retention.ms": "1000",
    }


@pytest.mark.parametrize("pair", ["retention.ms=1000=2", "retention.ms=", "retention.ms = "])
def test_topic_config_args_need_exactly_one_value(pair: str) -> None:
    """Kafka 2.8's TopicCommand and ConfigCommand split at \\s*=\\s* and require two
    parts ("all configs to be added must be in the format key=val"): a second '=' or an
    empty value is refused there, not stored."""
    with pytest.raises(ConfigError, match=re.escape(f"--config {pair!r} is not of the form")):
        parse_topic_config_args([pair])


def test_delete_config_takes_keys_separated_by_commas() -> None:
    """kafka-configs.sh's --delete-config is withValuesSeparatedBy(','), each key trimmed
    ("config keys to remove 'k1,k2'"): two keys in one flag were taken for one key,
    refused as not set on the topic. An empty key (a doubled comma) is refused."""
    from admin.errors import InvalidArgumentError
    from admin.topics import parse_config_alteration

    assert parse_config_alteration("t", [], ["retention.ms, segment.ms", "cleanup.policy"]) == (
        {},
        ["retention.ms", "segment.ms", "cleanup.policy"],
    )
    with pytest.raises(InvalidArgumentError, match="--delete-config 'a,,b': an empty config key"):
        parse_config_alteration("t", [], ["a,,b"])


def test_alter_config_args_need_exactly_one_value() -> None:
    """ConfigCommand (kafka-configs.sh --add-config) refuses a second '=' but keeps an
    empty value (its split(..., -1): "to support empty value"), an empty list config."""
    from admin.errors import InvalidArgumentError
    from admin.topics import parse_config_alteration

    with pytest.raises(InvalidArgumentError, match="is not of the form key=value"):
        parse_config_alteration("t", ["cleanup.policy=compact=delete"], [])
    empty = ["leader.replication.throttled.replicas=", "follower.replication.throttled.replicas = "]
    assert parse_config_alteration("t", empty, []) == (
        {
            "leader.replication.throttled.replicas": "",
            "follower.replication.throttled.replicas": "",
        },
        [],
    )


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        # One config per flag, as before.
        (
            ["retention.ms=1000", "segment.ms = 9000"],
            {"retention.ms": "1000", "segment.ms": "9000"},
        ),
        # Several in one, separated by ',' outside square brackets...
        (["retention.ms=1000,segment.ms=9000"], {"retention.ms": "1000", "segment.ms": "9000"}),
        # ... and a list value in brackets, which are dropped wherever they are.
        (["cleanup.policy=[compact,delete]"], {"cleanup.policy": "compact,delete"}),
        (["k=[a,b],j= [c] ,i=d"], {"k": "a,b", "j": "c", "i": "d"}),
        (["k=a[b]c]"], {"k": "abc"}),
        # Inside brackets is where the next bracket ahead is a ']', a stray one too.
        (["k=a,j=[b,c] ,i=d]"], {"k": "a", "j": "b,c ,i=d"}),
        # A '=' in brackets is the value's.
        (["k=[x=y,z]"], {"k": "x=y,z"}),
        # An empty value ("to support empty value"), and trailing commas (Java's split).
        (["k=,j=1,,"], {"k": "", "j": "1"}),
        # A key given again: the last (Properties.setProperty), in one flag or two.
        (["k=1,k=2", "j=1", "j=3"], {"k": "2", "j": "3"}),
        # Java's trim and \s: a no-break space is kept.
        (["\tk\x01 =\u00a0v\u00a0"], {"k": "\u00a0v\u00a0"}),
    ],
)
def test_add_config_is_split_as_kafka_configs_splits_it(
    given: list[str], expected: dict[str, str]
) -> None:
    """Kafka 2.8's ConfigCommand.parseConfigsToBeAdded: the --add-config value split at
    ',' outside square brackets, each part at \\s*=\\s* outside them, the brackets then
    dropped from the value (k1=v1,k2=[v1,v2]). zkctl took one key=value per flag, so
    Kafka's own examples were refused as a second '=' in the value."""
    assert parse_configs_to_be_added(given) == expected


@pytest.mark.parametrize(
    ("given", "refused"),
    [
        # The list value out of brackets: its second item is no key=value.
        ("cleanup.policy=compact,delete", "'delete'"),
        ("retention.ms=1000=2", "'retention.ms=1000=2'"),
        ("retention.ms=1,,segment.ms=2", "''"),
        (",retention.ms=1", "''"),
        ("", "''"),
        ("retention.ms", "'retention.ms'"),
        ("=1", "'=1'"),
    ],
)
def test_add_config_refuses_what_kafka_configs_refuses(given: str, refused: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_configs_to_be_added([given])
    (problem,) = info.value.problems
    assert f"{refused} is not of the form key=value" in problem.message
    assert problem.message.startswith("--add-config")


@pytest.mark.parametrize(
    ("stored", "default", "expected"),
    [
        ({}, False, False),
        ({}, True, True),
        ({"unclean.leader.election.enable": "true"}, False, True),
        ({"unclean.leader.election.enable": " TRUE\n"}, False, True),
        ({"unclean.leader.election.enable": "\tFalse "}, True, False),
        # a value no tool of ours writes: the default, as topic_config_as_stored reads it
        ({"unclean.leader.election.enable": "yes"}, True, True),
        ({"unclean.leader.election.enable": "yes"}, False, False),
    ],
)
def test_a_stored_topic_boolean_is_read_as_configdef_reads_it(
    stored: dict[str, str], default: bool, expected: bool
) -> None:
    key = "unclean.leader.election.enable"
    assert topic_override_bool(stored, key, default) is expected
    assert (
        topic_config_as_stored(
            cfg(f"{key}={str(default).lower()}\n"), stored
        ).config.unclean_leader_election_enable
        is expected
    )


def test_effective_topic_config_overrides_win() -> None:
    broker = cfg("unclean.leader.election.enable=true\nmin.insync.replicas=2\n")
    assert effective_topic_config(broker).unclean_leader_election_enable is True
    topic = effective_topic_config(broker, {"unclean.leader.election.enable": "false"})
    assert topic.unclean_leader_election_enable is False
    assert topic.min_insync_replicas == 2
    assert topic.is_overridden("unclean.leader.election.enable")
    assert not topic.is_overridden("min.insync.replicas")
    assert topic.overrides == {"unclean.leader.election.enable": "false"}


def test_effective_topic_config_takes_resolved_broker_values() -> None:
    broker = cfg(
        "log.retention.minutes=10\nlog.roll.hours=1\nlog.flush.scheduler.interval.ms=99\n"
        "message.max.bytes=2000\nlog.cleanup.policy=compact\ncompression.type=lz4\n"
    )
    topic = effective_topic_config(broker, {"segment.bytes": "1048576"})
    assert topic.retention_ms == 600000
    assert topic.segment_ms == 3600000
    assert topic.flush_ms == 99
    assert topic.max_message_bytes == 2000
    assert topic.cleanup_policy == ("compact",)
    assert topic.compression_type == "lz4"
    assert topic.segment_bytes == 1048576
    assert topic.get("segment.bytes") == 1048576


def test_topic_static_defaults_match_default_broker() -> None:
    assert topic_config_defaults(None) == topic_config_defaults(cfg())
    assert effective_topic_config(None) == effective_topic_config(cfg())


def test_topic_as_strings() -> None:
    strings = effective_topic_config(cfg(), {"retention.ms": "-1"}).as_strings()
    assert strings["retention.ms"] == "-1"
    assert strings["unclean.leader.election.enable"] == "false"
    assert strings["min.cleanable.dirty.ratio"] == "0.5"
    assert set(strings) == {d.name for d in TOPIC_CONFIG_DEFS}
    # The strings parse back to the same effective values.
    reparsed = effective_topic_config(None, {k: v for k, v in strings.items() if v})
    original = effective_topic_config(cfg(), {"retention.ms": "-1"})
    no_overrides = FrozenMap()
    assert dataclasses.replace(reparsed, overrides=no_overrides) == dataclasses.replace(
        original, overrides=no_overrides
    )


def test_topic_get_unknown() -> None:
    with pytest.raises(KeyError, match=re.escape("did you mean 'segment.ms'")):
        effective_topic_config(None).get("segment.mss")


def test_every_topic_key_has_its_broker_synonym() -> None:
    for definition in TOPIC_CONFIG_DEFS:
        if definition.synonym is not None:
            assert definition.synonym in BROKER_CONFIGS, definition.name


# Every key of Kafka 2.8.2's KafkaConfig.configDef (core/src/main/scala/kafka/server/
# KafkaConfig.scala, define and defineInternal, constants of other classes resolved).
KAFKA_2_8_2_BROKER_KEYS = frozenset({
    "advertised.host.name", "advertised.listeners", "advertised.port",
    "alter.config.policy.class.name", "alter.log.dirs.replication.quota.window.num",
    "alter.log.dirs.replication.quota.window.size.seconds", "authorizer.class.name",
    "auto.create.topics.enable", "auto.leader.rebalance.enable", "background.threads",
    "broker.heartbeat.interval.ms", "broker.id", "broker.id.generation.enable", "broker.rack",
    "broker.session.timeout.ms", "client.quota.callback.class", "compression.type",
    "connection.failed.authentication.delay.ms", "connections.max.idle.ms",
    "connections.max.reauth.ms", "control.plane.listener.name", "controlled.shutdown.enable",
    "controlled.shutdown.max.retries", "controlled.shutdown.retry.backoff.ms",
    "controller.listener.names", "controller.quorum.append.linger.ms",
    "controller.quorum.election.backoff.max.ms", "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms", "controller.quorum.request.timeout.ms",
    "controller.quorum.retry.backoff.ms", "controller.quorum.voters",
    "controller.quota.window.num", "controller.quota.window.size.seconds",
    "controller.socket.timeout.ms", "create.topic.policy.class.name", "default.replication.factor",
    "delegation.token.expiry.check.interval.ms", "delegation.token.expiry.time.ms",
    "delegation.token.master.key", "delegation.token.max.lifetime.ms",
    "delegation.token.secret.key", "delete.records.purgatory.purge.interval.requests",
    "delete.topic.enable", "fetch.max.bytes", "fetch.purgatory.purge.interval.requests",
    "group.initial.rebalance.delay.ms", "group.max.session.timeout.ms", "group.max.size",
    "group.min.session.timeout.ms", "host.name", "initial.broker.registration.timeout.ms",
    "inter.broker.listener.name", "inter.broker.protocol.version",
    "kafka.metrics.polling.interval.secs", "kafka.metrics.reporters",
    "leader.imbalance.check.interval.seconds", "leader.imbalance.per.broker.percentage",
    "listener.security.protocol.map", "listeners", "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size", "log.cleaner.delete.retention.ms", "log.cleaner.enable",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleaner.min.compaction.lag.ms", "log.cleaner.threads",
    "log.cleanup.policy", "log.dir", "log.dirs", "log.flush.interval.messages",
    "log.flush.interval.ms", "log.flush.offset.checkpoint.interval.ms",
    "log.flush.scheduler.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "log.index.interval.bytes", "log.index.size.max.bytes", "log.message.downconversion.enable",
    "log.message.format.version", "log.message.timestamp.difference.max.ms",
    "log.message.timestamp.type", "log.preallocate", "log.retention.bytes",
    "log.retention.check.interval.ms", "log.retention.hours", "log.retention.minutes",
    "log.retention.ms", "log.roll.hours", "log.roll.jitter.hours", "log.roll.jitter.ms",
    "log.roll.ms", "log.segment.bytes", "log.segment.delete.delay.ms",
    "max.connection.creation.rate", "max.connections", "max.connections.per.ip",
    "max.connections.per.ip.overrides", "max.incremental.fetch.session.cache.slots",
    "message.max.bytes", "metadata.log.dir", "metric.reporters", "metrics.num.samples",
    "metrics.recording.level", "metrics.sample.window.ms", "min.insync.replicas", "node.id",
    "num.io.threads", "num.network.threads", "num.partitions", "num.recovery.threads.per.data.dir",
    "num.replica.alter.log.dirs.threads", "num.replica.fetchers", "offset.metadata.max.bytes",
    "offsets.commit.required.acks", "offsets.commit.timeout.ms", "offsets.load.buffer.size",
    "offsets.retention.check.interval.ms", "offsets.retention.minutes",
    "offsets.topic.compression.codec", "offsets.topic.num.partitions",
    "offsets.topic.replication.factor", "offsets.topic.segment.bytes",
    "password.encoder.cipher.algorithm", "password.encoder.iterations",
    "password.encoder.key.length", "password.encoder.keyfactory.algorithm",
    "password.encoder.old.secret", "password.encoder.secret", "port", "principal.builder.class",
    "process.roles", "producer.purgatory.purge.interval.requests", "queued.max.request.bytes",
    "queued.max.requests", "quota.consumer.default", "quota.producer.default", "quota.window.num",
    "quota.window.size.seconds", "replica.fetch.backoff.ms", "replica.fetch.max.bytes",
    "replica.fetch.min.bytes", "replica.fetch.response.max.bytes", "replica.fetch.wait.max.ms",
    "replica.high.watermark.checkpoint.interval.ms", "replica.lag.time.max.ms",
    "replica.selector.class", "replica.socket.receive.buffer.bytes", "replica.socket.timeout.ms",
    "replication.quota.window.num", "replication.quota.window.size.seconds", "request.timeout.ms",
    "reserved.broker.max.id", "sasl.client.callback.handler.class", "sasl.enabled.mechanisms",
    "sasl.jaas.config", "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.callback.handler.class", "sasl.login.class", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.mechanism.controller.protocol",
    "sasl.mechanism.inter.broker.protocol", "sasl.server.callback.handler.class",
    "sasl.server.max.receive.size", "security.inter.broker.protocol", "security.providers",
    "socket.connection.setup.timeout.max.ms", "socket.connection.setup.timeout.ms",
    "socket.receive.buffer.bytes", "socket.request.max.bytes", "socket.send.buffer.bytes",
    "ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm", "ssl.engine.factory.class", "ssl.key.password",
    "ssl.keymanager.algorithm", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type",
    "ssl.principal.mapping.rules", "ssl.protocol", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.type", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.max.timeout.ms", "transaction.remove.expired.transaction.cleanup.interval.ms",
    "transaction.state.log.load.buffer.size", "transaction.state.log.min.isr",
    "transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
    "transaction.state.log.segment.bytes", "transactional.id.expiration.ms",
    "unclean.leader.election.enable", "zookeeper.clientCnxnSocket", "zookeeper.connect",
    "zookeeper.connection.timeout.ms", "zookeeper.max.in.flight.requests",
    "zookeeper.session.timeout.ms", "zookeeper.set.acl", "zookeeper.ssl.cipher.suites",
    "zookeeper.ssl.client.enable", "zookeeper.ssl.crl.enable", "zookeeper.ssl.enabled.protocols",
    "zookeeper.ssl.endpoint.identification.algorithm", "zookeeper.ssl.keystore.location",
    "zookeeper.ssl.keystore.password", "zookeeper.ssl.keystore.type", "zookeeper.ssl.ocsp.enable",
    "zookeeper.ssl.protocol", "zookeeper.ssl.truststore.location",
    "zookeeper.ssl.truststore.password", "zookeeper.ssl.truststore.type", "zookeeper.sync.time.ms",
})  # fmt: skip

# Kafka 2.8.2's defaults of the keys added as accepted with no effect (KafkaConfig's
# Defaults, RaftConfig, CommonClientConfigs, the quota manager configs); None: null.
KAFKA_2_8_2_NO_EFFECT_DEFAULTS: dict[str, Any] = {
    "zookeeper.sync.time.ms": 2000, "num.replica.alter.log.dirs.threads": None,
    "queued.max.request.bytes": -1, "socket.connection.setup.timeout.ms": 10_000,
    "socket.connection.setup.timeout.max.ms": 30_000, "port": 9092, "host.name": "",
    "advertised.host.name": None, "advertised.port": None,
    "control.plane.listener.name": None, "max.connections.per.ip": 2**31 - 1,
    "max.connections.per.ip.overrides": "", "max.connections": 2**31 - 1,
    "max.connection.creation.rate": 2**31 - 1,
    "log.cleaner.io.max.bytes.per.second": 1.7976931348623157e308,
    "log.cleaner.io.buffer.size": 512 * 1024, "log.cleaner.io.buffer.load.factor": 0.9,
    "log.flush.start.offset.checkpoint.interval.ms": 60000,
    "create.topic.policy.class.name": None, "alter.config.policy.class.name": None,
    "fetch.purgatory.purge.interval.requests": 1000,
    "producer.purgatory.purge.interval.requests": 1000,
    "delete.records.purgatory.purge.interval.requests": 1, "replica.selector.class": None,
    "metrics.num.samples": 2, "metrics.sample.window.ms": 30000, "metric.reporters": (),
    "metrics.recording.level": "INFO", "kafka.metrics.reporters": (),
    "kafka.metrics.polling.interval.secs": 10, "quota.producer.default": LONG_MAX,
    "quota.consumer.default": LONG_MAX, "quota.window.num": 11,
    "replication.quota.window.num": 11, "alter.log.dirs.replication.quota.window.num": 11,
    "controller.quota.window.num": 11, "quota.window.size.seconds": 1,
    "replication.quota.window.size.seconds": 1,
    "alter.log.dirs.replication.quota.window.size.seconds": 1,
    "controller.quota.window.size.seconds": 1, "client.quota.callback.class": None,
    "process.roles": (), "node.id": -1, "initial.broker.registration.timeout.ms": 60000,
    "broker.heartbeat.interval.ms": 2000, "broker.session.timeout.ms": 9000,
    "metadata.log.dir": None, "controller.listener.names": None,
    "controller.quorum.voters": (), "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.election.backoff.max.ms": 1000,
    "controller.quorum.append.linger.ms": 25, "controller.quorum.request.timeout.ms": 2000,
    "controller.quorum.retry.backoff.ms": 20,
}  # fmt: skip

_SECURITY_MESSAGE = "TLS, SASL and authorization are not supported here"


def _is_security_key(key: str) -> bool:
    return key.startswith(
        ("ssl.", "sasl.", "zookeeper.ssl.", "delegation.token.", "password.encoder.")
    ) or key in {
        "authorizer.class.name", "connection.failed.authentication.delay.ms",
        "connections.max.reauth.ms", "principal.builder.class", "security.providers",
        "zookeeper.clientCnxnSocket", "zookeeper.set.acl",
    }  # fmt: skip


def test_every_kafka_2_8_2_broker_key_is_accepted_with_its_default_or_refused_as_security() -> None:
    base = {"zookeeper.connect": "localhost:2181"}
    defaults = BrokerConfig.from_properties(base)
    written = parse_properties(defaults.to_properties())
    for key in sorted(KAFKA_2_8_2_BROKER_KEYS):
        if _is_security_key(key):
            assert key not in BROKER_CONFIGS
            with pytest.raises(ConfigError, match=_SECURITY_MESSAGE) as e:
                BrokerConfig.from_properties({**base, key: "x"})
            assert e.value.keys == (key,)
            continue
        assert key in BROKER_CONFIGS, key
        if key in KAFKA_2_8_2_NO_EFFECT_DEFAULTS:
            assert BROKER_CONFIGS[key].default == KAFKA_2_8_2_NO_EFFECT_DEFAULTS[key], key
        if key in written:
            # The default written as text is accepted, and read back as the default.
            config = BrokerConfig.from_properties({**base, key: written[key]})
            assert config.get(key) == defaults.get(key), key


def test_a_listener_scoped_security_key_is_refused_as_security() -> None:
    key = "listener.name.internal.ssl.keystore.location"
    with pytest.raises(ConfigError, match=_SECURITY_MESSAGE):
        BrokerConfig.from_properties({"zookeeper.connect": "localhost:2181", key: "/k"})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("quota.window.num", "0", "expected a value >= 1"),
        ("max.connections", "-1", "expected a value >= 0"),
        ("log.cleaner.io.buffer.load.factor", "high", "expected a double"),
        ("password.encoder.iterations", "2048", _SECURITY_MESSAGE),
        ("controller.quorum.voters", "localhost:9093", r"expected a list of \{id\}@"),
        ("process.roles", "zookeeper", "expected a list of broker, controller"),
        ("process.roles", "broker", "KRaft mode, which is not supported here"),
        ("queued.max.request.bytes", "1024", "must be larger or equal to socket.request"),
        ("max.connections.per.ip", "0", "only if max.connections.per.ip.overrides is set"),
    ],
)
def test_a_bad_value_of_a_kafka_key_accepted_with_no_effect_is_a_clear_error(
    key: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        BrokerConfig.from_properties({"zookeeper.connect": "localhost:2181", key: value})
    assert e.value.keys == (key,)


def test_the_deprecated_port_and_host_name_make_the_listener_as_in_kafka() -> None:
    base = {"zookeeper.connect": "localhost:2181"}
    config = BrokerConfig.from_properties({**base, "port": "9093", "host.name": "10.0.0.1"})
    assert config.listeners == (Listener("PLAINTEXT", "10.0.0.1", 9093, "PLAINTEXT"),)
    assert config.advertised_listeners == config.listeners
    config = BrokerConfig.from_properties({**base, "port": "9093", "advertised.host.name": "b1"})
    assert config.advertised_listeners == (Listener("PLAINTEXT", "b1", 9093, "PLAINTEXT"),)
    # listeners, when given, wins (KafkaConfig.listeners).
    config = BrokerConfig.from_properties(
        {**base, "port": "9093", "listeners": "PLAINTEXT://:9094"}
    )
    assert [listener.port for listener in config.listeners] == [9094]


def test_node_id_is_the_broker_id_when_set() -> None:
    config = BrokerConfig.from_properties(
        {"zookeeper.connect": "localhost:2181", "broker.id": "1", "node.id": "7"}
    )
    assert config.broker_id == 7


@pytest.mark.parametrize(
    ("size", "refused"), [(-1, False), (1, False), (65536, False), (0, True), (-2, True)]
)
def test_the_followers_receive_buffer_is_above_0_or_minus_1(size: int, refused: bool) -> None:
    """replica.socket.receive.buffer.bytes: Kafka has no validator, and its fetchers fail
    every connection with 0 or a negative size other than -1 (Java's
    setReceiveBufferSize refuses them): a broker that could never replicate, refused at
    start here."""
    text = f"replica.socket.receive.buffer.bytes={size}\n"
    if not refused:
        assert cfg(text).replica_socket_receive_buffer_bytes == size
        return
    (msg,) = problems_of(text)
    assert msg == (
        f"replica.socket.receive.buffer.bytes={size}: a buffer size must be above 0, or -1"
        " for the OS default (Kafka's fetchers fail every connection with it)"
    )

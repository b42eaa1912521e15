"""Broker configuration with Kafka's key names (KafkaConfig and LogConfig, Kafka 2.8, ZK mode).

* ``BROKER_CONFIG_DEFS`` / ``TOPIC_CONFIG_DEFS``: the definition tables (name, type,
  default, validator, importance, doc) with Kafka's defaults and types.
* ``parse_properties`` reads Java ``.properties`` text (``Properties.load`` rules); a file
  is read as ISO-8859-1, as ``Properties.load(InputStream)`` reads it: other characters
  are written as ``\\uXXXX`` escapes (``format_properties`` does), and a UTF-8 file's
  non-ASCII characters are read as Kafka reads them (each byte a character: only in
  comments are they harmless);
  ``parse_overrides`` reads ``--override key=value`` pairs, which win over the file.
* ``BrokerConfig`` is the typed, immutable result: one snake_case attribute per Kafka key
  (``log.retention.ms`` -> ``log_retention_ms``). Keys that Kafka resolves through a
  fallback hold the resolved value: ``log_dirs`` (log.dirs, else log.dir),
  ``log_retention_ms`` (ms, else minutes, else hours), ``zookeeper_connection_timeout_ms``
  (else the session timeout), ``advertised_listeners`` (else listeners), and so on.
* Topic-level configs (``/config/topics/<t>``, ``kafka-topics.sh --config``) are validated
  with ``validate_topic_config``; ``effective_topic_config`` layers a topic's overrides over
  the broker's defaults, and ``topic_config_as_stored`` reads them as a broker reads
  ZooKeeper (unknown keys ignored, as Kafka's LogConfig.fromProps ignores them). Topic
  config values stay strings, as Kafka stores them in ZooKeeper.

Every problem found (unknown keys, bad values, missing required keys, inconsistent values)
is collected and raised together as one ConfigError. A broker key that is a topic key's
default is also checked with the topic key's validator, as Kafka's LogManager checks it.

Deliberate differences from Kafka:
* ``auto.create.topics.enable`` defaults to false (Kafka: true): topics appear only when asked.
* A listener with no host is advertised as 127.0.0.1; Kafka advertises the machine's
  canonical hostname, which on a laptop or in CI often does not resolve back to it.
* Only the PLAINTEXT security protocol is accepted for listeners (no TLS or SASL here),
  and the keys of TLS, SASL, authorization, delegation tokens and the password encoder
  (``_SECURITY_KEYS``) are refused as unsupported: Kafka would secure the broker, and
  one started open instead would be worse than none. ``process.roles`` (KRaft) must be
  empty. Kafka's other keys are accepted, checked, and mostly have no effect here.
* ``min.incremental.fetch.session.eviction.ms`` (KIP-227's name; 120000, atLeast(0)) is a
  key here; Kafka 2.8 fixes it at 120000 and only warns of the key as unused.
* A few validators are stricter (session and connection timeouts >= 1, non-empty
  ``zookeeper.connect`` and ``broker.rack``, ports 0-65535, min <= max compaction lag, a
  ratio of NaN refused).
* Every host of ``zookeeper.connect`` must be a name the resolver can be asked about
  ("a..b" is not): kazoo's connection thread dies on one. Kafka 2.8's ZooKeeper client
  (3.5) logs "Unable to resolve address" and tries the next host, and with none left
  waits out ``zookeeper.connection.timeout.ms``.
* ``log.cleaner.threads=0`` runs no cleaner; Kafka 2.8 divides the dedupe buffer by it
  and does not start.
* ``replica.high.watermark.checkpoint.interval.ms=0`` is refused at start; Kafka 2.8
  starts and fails its first LeaderAndIsr (its checkpoint task is scheduled there).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import math
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Protocol

from zkdata.connect_string import connect_string_problem
from zkdata.int_text import int_text_in_range, java_int_in_range

__all__ = [
    "BROKER_CONFIGS",
    "BROKER_CONFIG_DEFS",
    "REQUIRED",
    "TOPIC_CONFIGS",
    "TOPIC_CONFIG_DEFS",
    "AtLeast",
    "Between",
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "ConfigProblem",
    "ConfigType",
    "FrozenMap",
    "Importance",
    "Listener",
    "NonEmpty",
    "OneOf",
    "StoredTopicConfig",
    "SubsetOf",
    "ThrottledReplicas",
    "TopicConfig",
    "effective_topic_config",
    "format_properties",
    "java_parse_double",
    "load_broker_config",
    "parse_configs_to_be_added",
    "parse_key_value_pairs",
    "parse_overrides",
    "parse_per_ip_overrides",
    "parse_properties",
    "parse_topic_config_args",
    "parse_topic_value",
    "topic_config_as_stored",
    "topic_config_defaults",
    "topic_override_bool",
    "validate_topic_config",
]

INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1
SHORT_MIN: Final = -(2**15)
SHORT_MAX: Final = 2**15 - 1

_HOUR_MS: Final = 60 * 60 * 1000
# Kafka's connection.failed.authentication.delay.ms default, a key not configurable here
# (no authentication): connections.max.idle.ms must exceed it (KafkaConfig.validateValues).
FAILED_AUTHENTICATION_DELAY_MS: Final = 100
_MINUTE_MS: Final = 60 * 1000

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_SECURITY_PROTOCOLS: Final = ("PLAINTEXT",)
COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES: Final = ("CreateTime", "LogAppendTime")
IDENTITY_MODES: Final = ("kafka", "persistent")
CLEANUP_POLICIES: Final = ("compact", "delete")
PROCESS_ROLES: Final = ("broker", "controller")

# Kafka 2.8 keys of the security features this broker lacks (TLS, SASL, authentication,
# authorization, delegation tokens, encrypted dynamic passwords): refused with that reason,
# not accepted to do nothing (a broker the file asks to secure must not start open).
_SECURITY_KEYS: Final = frozenset({
    "authorizer.class.name", "connection.failed.authentication.delay.ms",
    "connections.max.reauth.ms", "principal.builder.class", "security.providers",
    "zookeeper.clientCnxnSocket", "zookeeper.set.acl",
})  # fmt: skip
_SECURITY_PREFIXES: Final = (
    "ssl.", "sasl.", "zookeeper.ssl.", "delegation.token.", "password.encoder.",
    "listener.name.",
)  # fmt: skip
SECURITY_UNSUPPORTED: Final = (
    "TLS, SASL and authorization are not supported here (PLAINTEXT listeners only, no"
    " authentication or ACLs)"
)


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a configuration; ``key`` is None for file-level problems."""

    key: str | None
    message: str

    def __str__(self) -> str:
        return self.message


class ConfigError(ValueError):
    """Every problem found in a configuration (never just the first)."""

    def __init__(self, problems: Sequence[ConfigProblem]) -> None:
        self.problems: tuple[ConfigProblem, ...] = tuple(problems)
        if len(self.problems) == 1:
            message = self.problems[0].message
        else:
            message = f"{len(self.problems)} config problems:\n" + "\n".join(
                f"  - {p.message}" for p in self.problems
            )
        super().__init__(message)

    @property
    def keys(self) -> tuple[str, ...]:
        """The config keys with problems, in the order found."""
        return tuple(p.key for p in self.problems if p.key is not None)


class _Problems(list[ConfigProblem]):
    """The problems found so far; ``add`` saves building ConfigProblem at every call."""

    def add(self, key: str | None, message: str) -> None:
        self.append(ConfigProblem(key, message))


class FrozenMap(Mapping[str, str]):
    """An immutable str -> str mapping that, unlike MappingProxyType, pickles and hashes,
    so configs can be copied, sent to subprocesses and used as keys."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._data: dict[str, str] = dict(data)

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"


# --------------------------------------------------------------------------- definitions


class ConfigType(enum.Enum):
    BOOLEAN = "boolean"
    SHORT = "short"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"


class Importance(enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class _Required:
    """Sentinel default of a key that must be given (Kafka's NO_DEFAULT_VALUE)."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = _Required()


class Validator(Protocol):
    def check(self, value: Any) -> str | None:
        """None when the value is valid, else what was expected ("a value >= 1")."""

    def describe(self) -> str:
        """The valid values, for documentation."""


@dataclass(frozen=True)
class AtLeast:
    minimum: int | float

    def check(self, value: Any) -> str | None:
        return None if value >= self.minimum else f"a value >= {self.minimum}"

    def describe(self) -> str:
        return f"[{self.minimum},...]"


@dataclass(frozen=True)
class Between:
    low: int | float
    high: int | float

    def check(self, value: Any) -> str | None:
        ok = self.low <= value <= self.high
        return None if ok else f"a value between {self.low} and {self.high}"

    def describe(self) -> str:
        return f"[{self.low},...,{self.high}]"


@dataclass(frozen=True)
class OneOf:
    choices: tuple[str, ...]
    case_insensitive: bool = False

    def check(self, value: Any) -> str | None:
        if self.case_insensitive:
            ok = str(value).upper() in {c.upper() for c in self.choices}
        else:
            ok = value in self.choices
        return None if ok else f"one of {', '.join(self.choices)}"

    def describe(self) -> str:
        return f"[{', '.join(self.choices)}]"


@dataclass(frozen=True)
class SubsetOf:
    """A list whose every item is one of ``choices`` (Kafka's ValidList.in)."""

    choices: tuple[str, ...]

    def check(self, value: Any) -> str | None:
        ok = all(item in self.choices for item in value)
        return None if ok else f"a list of {', '.join(self.choices)}"

    def describe(self) -> str:
        return f"[{', '.join(self.choices)}]"


@dataclass(frozen=True)
class NonEmpty:
    def check(self, value: Any) -> str | None:
        return None if value else "a non-empty value"

    def describe(self) -> str:
        return "non-empty"


@dataclass(frozen=True)
class ZooKeeperConnect:
    """A connect string the ZooKeeper client can use: kazoo reads it, and the resolver
    can be asked about each host (its connection thread dies on "a..b", and the start
    waited out the whole connection timeout for nothing)."""

    def check(self, value: Any) -> str | None:
        if not value:
            return "a non-empty value"
        problem = connect_string_problem(value)
        return None if problem is None else f"{self.describe()}; {problem}"

    def describe(self) -> str:
        return "host:port[,host:port...][/chroot]"


_NAME = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Name:
    """A cluster or broker name: ASCII letters, digits, '.', '_' and '-'."""

    def check(self, value: Any) -> str | None:
        ok = value is None or _NAME.fullmatch(value)
        return None if ok else "a name of ASCII letters, digits, '.', '_' and '-'"

    def describe(self) -> str:
        return "[A-Za-z0-9._-]+"


# Kafka 2.8's ApiVersion.allVersions, oldest first: (short version, sub-version); the
# versions before 0.10.0 have none.
_API_VERSIONS: Final = (
    *((v, "") for v in ("0.8.0", "0.8.1", "0.8.2", "0.9.0")),
    *(("0.10.0", f"IV{i}") for i in range(2)),
    *(("0.10.1", f"IV{i}") for i in range(3)),
    ("0.10.2", "IV0"),
    *(("0.11.0", f"IV{i}") for i in range(3)),
    ("1.0", "IV0"),
    ("1.1", "IV0"),
    *(("2.0", f"IV{i}") for i in range(2)),
    *(("2.1", f"IV{i}") for i in range(3)),
    *(("2.2", f"IV{i}") for i in range(2)),
    *(("2.3", f"IV{i}") for i in range(2)),
    *(("2.4", f"IV{i}") for i in range(2)),
    ("2.5", "IV0"),
    ("2.6", "IV0"),
    *(("2.7", f"IV{i}") for i in range(3)),
    *(("2.8", f"IV{i}") for i in range(2)),
)
_FULL_VERSIONS: Final = tuple(f"{v}-{sub}" if sub else v for v, sub in _API_VERSIONS)
# ApiVersion.versionMap: each full version, and each short one for its latest full version.
_VERSION_MAP: Final = {
    **{short: full for (short, _sub), full in zip(_API_VERSIONS, _FULL_VERSIONS, strict=True)},
    **{full: full for full in _FULL_VERSIONS},
}
LATEST_API_VERSION: Final = _FULL_VERSIONS[-1]
# The first version of each record format (message format v0, v1, v2: magic 0, 1, 2).
_RECORD_VERSION_STARTS: Final = (
    _FULL_VERSIONS.index("0.8.0"),
    _FULL_VERSIONS.index("0.10.0-IV0"),
    _FULL_VERSIONS.index("0.11.0-IV0"),
)


def api_version(text: str) -> str | None:
    """Kafka's ApiVersion(text) as a full version ("2.8" -> "2.8-IV1", "0.10.2.1" ->
    "0.10.2-IV0"); None when Kafka refuses it. Only the first three dot-separated parts of
    a 0.x version count, and the first two of a later one, as in Kafka."""
    parts = text.split(".")
    while parts and not parts[-1]:
        parts.pop()  # Java's String.split drops trailing empty strings
    key = ".".join(parts[: 3 if text.startswith("0.") else 2])
    return _VERSION_MAP.get(key)


def _record_version(full_version: str) -> int:
    """The record format (0, 1 or 2) of a full version, as ApiVersion.recordVersion."""
    position = _FULL_VERSIONS.index(full_version)
    return sum(1 for start in _RECORD_VERSION_STARTS[1:] if position >= start)


@dataclass(frozen=True)
class KafkaVersion:
    """Kafka's ApiVersionValidator: a version ApiVersion(value) knows."""

    def check(self, value: Any) -> str | None:
        if api_version(value) is not None:
            return None
        return f"a Kafka version from {_FULL_VERSIONS[0]} to {LATEST_API_VERSION}, e.g. 2.8"

    def describe(self) -> str:
        return f"[{', '.join(_FULL_VERSIONS)}]"


_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


@dataclass(frozen=True)
class ThrottledReplicas:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker,...``."""

    def check(self, value: Any) -> str | None:
        items = list(value)
        # Empty items are valid, and "*" may come with them ("*," is "*" and "").
        star = java_trim("".join(items)) == "*"  # proposed.mkString.trim, Java's trim
        if star or all(_THROTTLED_REPLICA.fullmatch(i) for i in items):
            return None
        return "'*' or a list of [partitionId]:[brokerId]"

    def describe(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],... or *"


_QUORUM_VOTER = re.compile(r"[0-9]+@.+:[0-9]+")


@dataclass(frozen=True)
class QuorumVoters:
    """RaftConfig.ControllerQuorumVotersValidator: id@host:port,..."""

    def check(self, value: Any) -> str | None:
        ok = all(_QUORUM_VOTER.fullmatch(item) for item in value)
        return None if ok else "a list of {id}@{host}:{port}"

    def describe(self) -> str:
        return "{id}@{host}:{port},..."


@dataclass(frozen=True)
class ConfigDef:
    """One config key. ``default`` is REQUIRED, None (unset unless given) or a typed value."""

    name: str
    type: ConfigType
    default: Any
    importance: Importance
    doc: str
    validator: Validator | None = None
    #: topic configs: the broker key whose value is the topic's default
    synonym: str | None = None
    #: Kafka defines it with defineInternal (KRaft in 2.8): not described unless given
    internal: bool = False

    @property
    def attr(self) -> str:
        """The snake_case attribute name: ``log.retention.ms`` -> ``log_retention_ms``."""
        return self.name.replace(".", "_")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


_B, _I, _L, _S, _D, _STR, _LIST = (
    ConfigType.BOOLEAN,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.SHORT,
    ConfigType.DOUBLE,
    ConfigType.STRING,
    ConfigType.LIST,
)
_HIGH, _MEDIUM, _LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW

BROKER_CONFIG_DEFS: Final[tuple[ConfigDef, ...]] = (
    # ZooKeeper
    ConfigDef("zookeeper.connect", _STR, REQUIRED, _HIGH,
              "ZooKeeper connection string host:port[,host:port...][/chroot].",
              ZooKeeperConnect()),
    ConfigDef("zookeeper.session.timeout.ms", _I, 18000, _HIGH,
              "ZooKeeper session timeout (6000 before Kafka 2.5).", AtLeast(1)),
    ConfigDef("zookeeper.connection.timeout.ms", _I, None, _HIGH,
              "Max wait to connect to ZooKeeper; unset: zookeeper.session.timeout.ms.",
              AtLeast(1)),
    ConfigDef("zookeeper.max.in.flight.requests", _I, 10, _HIGH,
              "Unacknowledged requests the ZooKeeper client sends before blocking.", AtLeast(1)),
    # General
    ConfigDef("broker.id", _I, -1, _HIGH,
              "This broker's id; -1: generate one from ZooKeeper (broker.id.generation.enable)."),
    ConfigDef("broker.id.generation.enable", _B, True, _MEDIUM,
              "Generate broker ids (above reserved.broker.max.id) when broker.id is -1."),
    ConfigDef("reserved.broker.max.id", _I, 1000, _MEDIUM,
              "Highest configurable broker id; generated ids start above it.", AtLeast(0)),
    ConfigDef("broker.identity.mode", _STR, "kafka", _MEDIUM,
              "kafka: broker.id, or an id generated from /brokers/seqid (kept in meta.properties);"
              " persistent: with no broker.id, an id allocated once through ZooKeeper and kept"
              " in the broker-identity file (docs/broker-identity.md).",
              OneOf(IDENTITY_MODES)),
    ConfigDef("cluster.name", _STR, "DefaultCluster", _MEDIUM,
              "Cluster name of the persistent identity cluster:broker-name:id.", Name()),
    ConfigDef("broker.name", _STR, None, _MEDIUM,
              "Broker name of the persistent identity; required in the persistent mode.", Name()),
    ConfigDef("broker.rack", _STR, None, _MEDIUM,
              "Rack of the broker, for rack-aware replica assignment.", NonEmpty()),
    ConfigDef("message.max.bytes", _I, 1024 * 1024 + 12, _HIGH,
              "Largest record batch size allowed (1 MiB plus the 12-byte log overhead).",
              AtLeast(0)),
    ConfigDef("num.network.threads", _I, 3, _HIGH,
              "Threads receiving requests and sending responses.", AtLeast(1)),
    ConfigDef("num.io.threads", _I, 8, _HIGH, "Threads processing requests.", AtLeast(1)),
    ConfigDef("background.threads", _I, 10, _HIGH,
              "Threads for background processing tasks.", AtLeast(1)),
    ConfigDef("queued.max.requests", _I, 500, _HIGH,
              "Requests queued for the I/O threads before network threads stop reading.",
              AtLeast(1)),
    ConfigDef("request.timeout.ms", _I, 30000, _HIGH,
              "Max wait for the response to a request the broker sends."),
    ConfigDef("delete.topic.enable", _B, True, _HIGH,
              "Allow topic deletion; when false, deleting a topic through the admin tool has "
              "no effect."),
    ConfigDef("auto.create.topics.enable", _B, False, _HIGH,
              "Create an unknown topic a client's Metadata request names (unless the client "
              "says not to: a consumer's allow.auto.create.topics), with num.partitions and "
              "default.replication.factor. Default false here, true in Kafka."),
    ConfigDef("compression.type", _STR, "producer", _HIGH,
              "Final compression of a topic's data; producer: keep the producer's.",
              OneOf(COMPRESSION_TYPES)),
    # Socket server
    ConfigDef("listeners", _STR, "PLAINTEXT://:9092", _HIGH,
              "Comma-separated NAME://host:port to listen on; empty host: all interfaces."),
    ConfigDef("advertised.listeners", _STR, None, _HIGH,
              "Listeners published in ZooKeeper for clients and brokers; unset: listeners."),
    ConfigDef("listener.security.protocol.map", _STR,
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              _LOW, "Listener name to security protocol, NAME:PROTOCOL,..."),
    ConfigDef("inter.broker.listener.name", _STR, None, _MEDIUM,
              "Listener brokers use to talk to each other; unset: from "
              "security.inter.broker.protocol."),
    ConfigDef("security.inter.broker.protocol", _STR, "PLAINTEXT", _MEDIUM,
              "Security protocol between brokers (only one of this and "
              "inter.broker.listener.name may be set).",
              OneOf(SECURITY_PROTOCOLS, case_insensitive=True)),
    ConfigDef("socket.send.buffer.bytes", _I, 100 * 1024, _HIGH,
              "SO_SNDBUF of server sockets; -1: the OS default."),
    ConfigDef("socket.receive.buffer.bytes", _I, 100 * 1024, _HIGH,
              "SO_RCVBUF of server sockets; -1: the OS default."),
    ConfigDef("socket.request.max.bytes", _I, 100 * 1024 * 1024, _HIGH,
              "Largest request the broker accepts.", AtLeast(1)),
    ConfigDef("connections.max.idle.ms", _L, 10 * 60 * 1000, _MEDIUM,
              "Idle connections are closed after this long (over 100; negative: never)."),
    # Log
    ConfigDef("num.partitions", _I, 1, _MEDIUM,
              "Default number of partitions of a new topic.", AtLeast(1)),
    ConfigDef("log.dir", _LIST, ("/tmp/kafka-logs",), _HIGH,
              "Directory of the log data (used when log.dirs is unset)."),
    ConfigDef("log.dirs", _LIST, None, _HIGH,
              "Comma-separated directories of the log data; unset: log.dir."),
    ConfigDef("log.segment.bytes", _I, 1024 * 1024 * 1024, _HIGH,
              "Maximum size of one log segment file.", AtLeast(14)),
    ConfigDef("log.roll.ms", _L, None, _HIGH,
              "Roll a new segment after this long; unset: log.roll.hours."),
    ConfigDef("log.roll.hours", _I, 24 * 7, _HIGH,
              "Roll a new segment after this many hours.", AtLeast(1)),
    ConfigDef("log.roll.jitter.ms", _L, None, _HIGH,
              "Max jitter subtracted from the roll time; unset: log.roll.jitter.hours."),
    ConfigDef("log.roll.jitter.hours", _I, 0, _HIGH,
              "Max jitter subtracted from the roll time, in hours.", AtLeast(0)),
    ConfigDef("log.retention.ms", _L, None, _HIGH,
              "Keep a log segment this long (-1: forever); unset: log.retention.minutes."),
    ConfigDef("log.retention.minutes", _I, None, _HIGH,
              "Retention in minutes; unset: log.retention.hours."),
    ConfigDef("log.retention.hours", _I, 24 * 7, _HIGH, "Retention in hours."),
    ConfigDef("log.retention.bytes", _L, -1, _HIGH,
              "Maximum size of a partition's log before old segments go; -1: no limit."),
    ConfigDef("log.retention.check.interval.ms", _L, 5 * 60 * 1000, _MEDIUM,
              "How often segments are checked for deletion.", AtLeast(1)),
    ConfigDef("log.cleanup.policy", _LIST, ("delete",), _MEDIUM,
              "Default cleanup policy of segments past retention: delete and/or compact.",
              SubsetOf(CLEANUP_POLICIES)),
    ConfigDef("log.cleaner.enable", _B, True, _MEDIUM, "Run the log cleaner (compaction)."),
    ConfigDef("log.cleaner.delete.retention.ms", _L, 24 * 60 * 60 * 1000, _MEDIUM,
              "How long delete tombstones are kept in compacted topics."),
    ConfigDef("log.cleaner.min.compaction.lag.ms", _L, 0, _MEDIUM,
              "Minimum age of a record before it may be compacted."),
    ConfigDef("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX, _MEDIUM,
              "Maximum age of a record before it must be compacted.", AtLeast(1)),
    ConfigDef("log.cleaner.min.cleanable.ratio", _D, 0.5, _MEDIUM,
              "Minimum dirty share of a log before it is cleaned.", Between(0, 1)),
    ConfigDef("log.cleaner.threads", _I, 1, _MEDIUM,
              "Threads cleaning compacted logs (0: none clean).", AtLeast(0)),
    ConfigDef("log.cleaner.backoff.ms", _L, 15_000, _MEDIUM,
              "How long a cleaner thread waits when no log is due.", AtLeast(0)),
    ConfigDef("log.cleaner.dedupe.buffer.size", _L, 128 * 1024 * 1024, _MEDIUM,
              "Memory the cleaner threads' offset maps may use in all: more than 1 MiB per"
              " cleaner thread.", AtLeast(1)),
    ConfigDef("log.index.size.max.bytes", _I, 10 * 1024 * 1024, _MEDIUM,
              "Maximum size of an offset index file.", AtLeast(4)),
    ConfigDef("log.index.interval.bytes", _I, 4096, _MEDIUM,
              "Bytes between offset index entries.", AtLeast(0)),
    ConfigDef("log.flush.interval.messages", _L, LONG_MAX, _HIGH,
              "Messages accumulated before a flush to disk.", AtLeast(1)),
    ConfigDef("log.flush.interval.ms", _L, None, _HIGH,
              "Max time a message stays unflushed; unset: log.flush.scheduler.interval.ms."),
    ConfigDef("log.flush.scheduler.interval.ms", _L, LONG_MAX, _HIGH,
              "How often the flusher checks whether a log needs flushing."),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", _I, 60000, _HIGH,
              "How often the recovery point is written.", AtLeast(0)),
    ConfigDef("log.segment.delete.delay.ms", _L, 60000, _HIGH,
              "Wait before deleting a file from the file system.", AtLeast(0)),
    ConfigDef("log.preallocate", _B, False, _MEDIUM, "Preallocate new segment files."),
    ConfigDef("log.message.timestamp.type", _STR, "CreateTime", _MEDIUM,
              "Timestamp kept in records: CreateTime or LogAppendTime.", OneOf(TIMESTAMP_TYPES)),
    ConfigDef("log.message.timestamp.difference.max.ms", _L, LONG_MAX, _MEDIUM,
              "Max allowed gap between a record's CreateTime and the broker's clock."),
    ConfigDef("log.message.downconversion.enable", _B, True, _LOW,
              "Down-convert record formats for old consumers."),
    ConfigDef("log.message.format.version", _STR, LATEST_API_VERSION, _MEDIUM,
              "Record format version of the logs; no effect here (batches are kept as the"
              " producer sent them, message format v2).", KafkaVersion()),
    ConfigDef("num.recovery.threads.per.data.dir", _I, 1, _HIGH,
              "Threads per data directory for log recovery at startup and flush at shutdown.",
              AtLeast(1)),
    ConfigDef("min.insync.replicas", _I, 1, _HIGH,
              "Minimum ISR size for acks=all produce requests to succeed.", AtLeast(1)),
    # Replication
    ConfigDef("controller.socket.timeout.ms", _I, 30000, _MEDIUM,
              "Socket timeout of controller-to-broker channels."),
    ConfigDef("default.replication.factor", _I, 1, _MEDIUM,
              "Default replication factor of automatically created topics."),
    ConfigDef("replica.lag.time.max.ms", _L, 30000, _HIGH,
              "A follower not caught up for this long leaves the ISR (10000 before 2.5)."),
    ConfigDef("replica.socket.timeout.ms", _I, 30 * 1000, _HIGH,
              "Socket timeout of replica fetch requests."),
    ConfigDef("replica.socket.receive.buffer.bytes", _I, 64 * 1024, _HIGH,
              "SO_RCVBUF of the followers' connections to their leaders; -1: the OS"
              " default."),
    ConfigDef("replica.fetch.max.bytes", _I, 1024 * 1024, _MEDIUM,
              "Bytes fetched per partition by a replica fetch request.", AtLeast(0)),
    ConfigDef("replica.fetch.wait.max.ms", _I, 500, _HIGH,
              "Max wait of a follower's fetch request (<= replica.lag.time.max.ms)."),
    ConfigDef("replica.fetch.min.bytes", _I, 1, _HIGH,
              "Minimum bytes a follower's fetch waits for."),
    ConfigDef("replica.fetch.backoff.ms", _I, 1000, _MEDIUM,
              "Sleep after a fetch partition error.", AtLeast(0)),
    ConfigDef("replica.fetch.response.max.bytes", _I, 10 * 1024 * 1024, _MEDIUM,
              "Max bytes of a whole replica fetch response.", AtLeast(0)),
    ConfigDef("num.replica.fetchers", _I, 1, _HIGH,
              "Fetcher threads per source broker."),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", _L, 5000, _HIGH,
              "How often the high watermark is saved to disk."),
    ConfigDef("auto.leader.rebalance.enable", _B, True, _HIGH,
              "Move leadership back to preferred replicas periodically."),
    ConfigDef("leader.imbalance.per.broker.percentage", _I, 10, _HIGH,
              "Allowed share (percent) of a broker's partitions not led by it as preferred."),
    ConfigDef("leader.imbalance.check.interval.seconds", _L, 300, _HIGH,
              "How often the controller checks leader imbalance."),
    ConfigDef("unclean.leader.election.enable", _B, False, _HIGH,
              "Elect an out-of-sync replica as a last resort, possibly losing data."),
    ConfigDef("inter.broker.protocol.version", _STR, LATEST_API_VERSION, _MEDIUM,
              "Protocol version brokers use between themselves; no effect here (they speak"
              " Kafka 2.8's).", KafkaVersion()),
    # Controlled shutdown
    ConfigDef("controlled.shutdown.enable", _B, True, _MEDIUM,
              "Move leadership away before shutting down."),
    ConfigDef("controlled.shutdown.max.retries", _I, 3, _MEDIUM,
              "Retries of a failed controlled shutdown."),
    ConfigDef("controlled.shutdown.retry.backoff.ms", _L, 5000, _MEDIUM,
              "Wait between controlled shutdown retries.", AtLeast(0)),
    # Group coordinator, offsets and transactions (accepted so stock server.properties parse)
    ConfigDef("offsets.topic.replication.factor", _S, 3, _HIGH,
              "Replication factor of __consumer_offsets.", AtLeast(1)),
    ConfigDef("offsets.topic.num.partitions", _I, 50, _HIGH,
              "Partitions of __consumer_offsets.", AtLeast(1)),
    ConfigDef("offsets.retention.minutes", _I, 7 * 24 * 60, _HIGH,
              "How long a group's committed offsets are kept once it is Empty (or, for a"
              " consumer committing alone, after the commit).", AtLeast(1)),
    ConfigDef("offsets.retention.check.interval.ms", _L, 600_000, _HIGH,
              "How often expired committed offsets are looked for.", AtLeast(1)),
    ConfigDef("offset.metadata.max.bytes", _I, 4096, _HIGH,
              "The longest metadata an offset commit may carry, in UTF-16 code units (a Java"
              " string's length, as Kafka counts it)."),
    ConfigDef("offsets.topic.compression.codec", _I, 0, _HIGH,
              "Codec of the group coordinator's records: 0 none, 1 gzip, 2 snappy, 3 lz4,"
              " 4 zstd.", Between(0, 4)),
    ConfigDef("offsets.topic.segment.bytes", _I, 100 * 1024 * 1024, _HIGH,
              "segment.bytes of __consumer_offsets (kept small: compaction cleans whole"
              " segments, and a new coordinator reads them all).", AtLeast(1)),
    ConfigDef("offsets.commit.timeout.ms", _I, 5000, _HIGH,
              "How long an offset commit (or a group's record) waits for every in-sync"
              " replica of its __consumer_offsets partition before it fails.", AtLeast(1)),
    ConfigDef("offsets.commit.required.acks", _S, -1, _HIGH,
              "Acks of the coordinator's writes, -1 to offsets.topic.replication.factor"
              " (no effect here: a commit always waits for every in-sync replica)."),
    ConfigDef("offsets.load.buffer.size", _I, 5 * 1024 * 1024, _HIGH,
              "Read size when loading __consumer_offsets (no effect here).", AtLeast(1)),
    # Transactions: no transaction coordinator runs here, so none of these has an effect.
    ConfigDef("transactional.id.expiration.ms", _I, 7 * 24 * _HOUR_MS, _HIGH,
              "How long a transactional id is kept without a transaction (no effect here).",
              AtLeast(1)),
    ConfigDef("transaction.max.timeout.ms", _I, 15 * _MINUTE_MS, _HIGH,
              "Largest transaction timeout a producer may ask for (no effect here).",
              AtLeast(1)),
    ConfigDef("transaction.state.log.min.isr", _I, 2, _HIGH,
              "min.insync.replicas of __transaction_state (no effect here).", AtLeast(1)),
    ConfigDef("transaction.state.log.load.buffer.size", _I, 5 * 1024 * 1024, _HIGH,
              "Read size when loading __transaction_state (no effect here).", AtLeast(1)),
    ConfigDef("transaction.state.log.replication.factor", _S, 3, _HIGH,
              "Replication factor of __transaction_state (no effect here).", AtLeast(1)),
    ConfigDef("transaction.state.log.num.partitions", _I, 50, _HIGH,
              "Partitions of __transaction_state (no effect here).", AtLeast(1)),
    ConfigDef("transaction.state.log.segment.bytes", _I, 100 * 1024 * 1024, _HIGH,
              "segment.bytes of __transaction_state (no effect here).", AtLeast(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10_000, _LOW,
              "How often timed-out transactions are rolled back (no effect here).",
              AtLeast(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", _I, _HOUR_MS,
              _LOW, "How often expired transactional ids are removed (no effect here).",
              AtLeast(1)),
    ConfigDef("group.initial.rebalance.delay.ms", _I, 3000, _MEDIUM,
              "Wait for more members before a new group's first rebalance."),
    ConfigDef("group.min.session.timeout.ms", _I, 6000, _MEDIUM,
              "Smallest session timeout a group member may ask for."),
    ConfigDef("group.max.session.timeout.ms", _I, 1800000, _MEDIUM,
              "Largest session timeout a group member may ask for."),
    ConfigDef("group.max.size", _I, 2**31 - 1, _MEDIUM,
              "The most members a group takes (more: GROUP_MAX_SIZE_REACHED).", AtLeast(1)),
    ConfigDef("fetch.max.bytes", _I, 55 * 1024 * 1024, _MEDIUM,
              "Max bytes returned by one fetch request.", AtLeast(1024)),
    # Fetch sessions (KIP-227, broker/fetch_session.py).
    ConfigDef("max.incremental.fetch.session.cache.slots", _I, 1000, _MEDIUM,
              "The most incremental fetch sessions the broker keeps (0: every fetch is"
              " sessionless).", AtLeast(0)),
    # KIP-227's name; Kafka 2.8 fixes it at 120000 (KafkaServer's
    # MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS) and only warns of the key as unused.
    ConfigDef("min.incremental.fetch.session.eviction.ms", _L, 120_000, _MEDIUM,
              "How long a fetch session is kept from eviction, and (here) how long an idle"
              " one is kept at all.", AtLeast(0)),
    # Kafka 2.8 keys with nothing to act on here (no quotas, metrics reporters, policies,
    # purgatories, connection limits or KRaft quorum), accepted so a Kafka server.properties
    # starts a broker.
    ConfigDef("zookeeper.sync.time.ms", _I, 2000, _LOW,
              "How far a ZooKeeper follower may lag its leader (no effect here)."),
    ConfigDef("num.replica.alter.log.dirs.threads", _I, None, _HIGH,
              "Threads moving replicas between log directories; unset: one per log"
              " directory (no effect here)."),
    ConfigDef("queued.max.request.bytes", _L, -1, _MEDIUM,
              "Bytes of requests queued before no more are read; -1: no limit (no effect"
              " here)."),
    ConfigDef("socket.connection.setup.timeout.ms", _L, 10_000, _MEDIUM,
              "Wait for a client connection to be set up (no effect here)."),
    ConfigDef("socket.connection.setup.timeout.max.ms", _L, 30_000, _MEDIUM,
              "Longest wait for a client connection to be set up (no effect here)."),
    # Kafka's listeners before listeners: used when listeners (or advertised.listeners)
    # is not given, as KafkaConfig.listeners does.
    ConfigDef("port", _I, 9092, _HIGH,
              "Deprecated: the PLAINTEXT port when listeners is not given."),
    ConfigDef("host.name", _STR, "", _HIGH,
              "Deprecated: the PLAINTEXT host when listeners is not given; empty: all"
              " interfaces."),
    ConfigDef("advertised.host.name", _STR, None, _HIGH,
              "Deprecated: the advertised PLAINTEXT host when advertised.listeners is not"
              " given; unset: host.name."),
    ConfigDef("advertised.port", _I, None, _HIGH,
              "Deprecated: the advertised PLAINTEXT port when advertised.listeners is not"
              " given; unset: port."),
    ConfigDef("control.plane.listener.name", _STR, None, _HIGH,
              "Listener of the controller's requests (no effect here: they use the"
              " inter-broker listener)."),
    ConfigDef("max.connections.per.ip", _I, INT_MAX, _MEDIUM,
              "Most connections from one address, over every listener; one more is closed"
              " once accepted.", AtLeast(0)),
    ConfigDef("max.connections.per.ip.overrides", _STR, "", _MEDIUM,
              "host:count,... overriding max.connections.per.ip for those hosts' addresses."),
    ConfigDef("max.connections", _I, INT_MAX, _MEDIUM,
              "Most connections to the broker; at that many the listeners wait for one to"
              " close (the inter-broker listener, when there are others, closes the least"
              " recently used connection of another instead).", AtLeast(0)),
    ConfigDef("max.connection.creation.rate", _I, INT_MAX, _MEDIUM,
              "Most new connections a second over the listeners (but the inter-broker one"
              " when there are others): past it an acceptor waits before serving the next,"
              " at most quota.window.size.seconds.", AtLeast(0)),
    ConfigDef("log.cleaner.io.max.bytes.per.second", _D, sys.float_info.max, _MEDIUM,
              "Throttle of the cleaner's reads and writes (no effect here)."),
    ConfigDef("log.cleaner.io.buffer.size", _I, 512 * 1024, _MEDIUM,
              "I/O buffer memory of the cleaner threads (no effect here).", AtLeast(0)),
    ConfigDef("log.cleaner.io.buffer.load.factor", _D, 0.9, _MEDIUM,
              "Load factor of the cleaner's offset map (no effect here)."),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", _I, 60000, _HIGH,
              "How often the log start offsets are written (no effect here).", AtLeast(0)),
    ConfigDef("create.topic.policy.class.name", _STR, None, _LOW,
              "CreateTopicPolicy class (no effect here: no policy plug-ins)."),
    ConfigDef("alter.config.policy.class.name", _STR, None, _LOW,
              "AlterConfigPolicy class (no effect here: no policy plug-ins)."),
    ConfigDef("fetch.purgatory.purge.interval.requests", _I, 1000, _MEDIUM,
              "Purge interval of the fetch purgatory, in requests (no effect here)."),
    ConfigDef("producer.purgatory.purge.interval.requests", _I, 1000, _MEDIUM,
              "Purge interval of the produce purgatory, in requests (no effect here)."),
    ConfigDef("delete.records.purgatory.purge.interval.requests", _I, 1, _MEDIUM,
              "Purge interval of the delete-records purgatory, in requests (no effect here)."),
    ConfigDef("replica.selector.class", _STR, None, _MEDIUM,
              "ReplicaSelector class (no effect here: consumers fetch from leaders)."),
    ConfigDef("metrics.num.samples", _I, 2, _LOW,
              "Samples kept to compute metrics (no effect here).", AtLeast(1)),
    ConfigDef("metrics.sample.window.ms", _L, 30000, _LOW,
              "Window of a metrics sample (no effect here).", AtLeast(1)),
    ConfigDef("metric.reporters", _LIST, (), _LOW, "Metrics reporter classes (no effect here)."),
    ConfigDef("metrics.recording.level", _STR, "INFO", _LOW,
              "Highest recording level of metrics (no effect here)."),
    ConfigDef("kafka.metrics.reporters", _LIST, (), _LOW,
              "Yammer metrics reporter classes (no effect here)."),
    ConfigDef("kafka.metrics.polling.interval.secs", _I, 10, _LOW,
              "Polling interval of the Yammer reporters (no effect here).", AtLeast(1)),
    ConfigDef("quota.producer.default", _L, LONG_MAX, _HIGH,
              "Deprecated default produce quota, bytes a second (no effect here: no"
              " quotas).", AtLeast(1)),
    ConfigDef("quota.consumer.default", _L, LONG_MAX, _HIGH,
              "Deprecated default fetch quota, bytes a second (no effect here: no quotas).",
              AtLeast(1)),
    ConfigDef("quota.window.num", _I, 11, _LOW,
              "Samples kept for quotas (here: of max.connection.creation.rate only).",
              AtLeast(1)),
    ConfigDef("replication.quota.window.num", _I, 11, _LOW,
              "Samples kept for replication quotas (no effect here).", AtLeast(1)),
    ConfigDef("alter.log.dirs.replication.quota.window.num", _I, 11, _LOW,
              "Samples kept for alter-log-dirs quotas (no effect here).", AtLeast(1)),
    ConfigDef("controller.quota.window.num", _I, 11, _LOW,
              "Samples kept for controller mutation quotas (no effect here).", AtLeast(1)),
    ConfigDef("quota.window.size.seconds", _I, 1, _LOW,
              "Sample length of quotas (here: of max.connection.creation.rate only).",
              AtLeast(1)),
    ConfigDef("replication.quota.window.size.seconds", _I, 1, _LOW,
              "Sample length of replication quotas (no effect here).", AtLeast(1)),
    ConfigDef("alter.log.dirs.replication.quota.window.size.seconds", _I, 1, _LOW,
              "Sample length of alter-log-dirs quotas (no effect here).", AtLeast(1)),
    ConfigDef("controller.quota.window.size.seconds", _I, 1, _LOW,
              "Sample length of controller mutation quotas (no effect here).", AtLeast(1)),
    ConfigDef("client.quota.callback.class", _STR, None, _LOW,
              "ClientQuotaCallback class (no effect here: no quotas)."),
    # KRaft (internal keys in Kafka 2.8): only ZooKeeper mode runs here, so process.roles
    # must stay empty; node.id, when set, is the broker id, as in Kafka.
    ConfigDef("process.roles", _LIST, (), _HIGH,
              "KRaft roles; must be empty here (ZooKeeper mode only).",
              SubsetOf(PROCESS_ROLES), internal=True),
    ConfigDef("node.id", _I, -1, _HIGH,
              "The broker id when >= 0 (KafkaConfig.brokerId takes it over broker.id).",
              internal=True),
    ConfigDef("initial.broker.registration.timeout.ms", _I, 60000, _MEDIUM,
              "KRaft registration timeout (no effect here).", internal=True),
    ConfigDef("broker.heartbeat.interval.ms", _I, 2000, _MEDIUM,
              "KRaft heartbeat interval (no effect here).", internal=True),
    ConfigDef("broker.session.timeout.ms", _I, 9000, _MEDIUM,
              "KRaft broker session timeout (no effect here).", internal=True),
    ConfigDef("metadata.log.dir", _STR, None, _HIGH,
              "KRaft metadata log directory (no effect here).", internal=True),
    ConfigDef("controller.listener.names", _STR, None, _HIGH,
              "KRaft controller listeners (no effect here).", internal=True),
    ConfigDef("controller.quorum.voters", _LIST, (), _HIGH,
              "KRaft voters id@host:port,... (no effect here).", QuorumVoters(), internal=True),
    ConfigDef("controller.quorum.election.timeout.ms", _I, 1000, _HIGH,
              "KRaft election timeout (no effect here).", internal=True),
    ConfigDef("controller.quorum.fetch.timeout.ms", _I, 2000, _HIGH,
              "KRaft fetch timeout (no effect here).", internal=True),
    ConfigDef("controller.quorum.election.backoff.max.ms", _I, 1000, _HIGH,
              "KRaft election backoff (no effect here).", internal=True),
    ConfigDef("controller.quorum.append.linger.ms", _I, 25, _MEDIUM,
              "KRaft append linger (no effect here).", internal=True),
    ConfigDef("controller.quorum.request.timeout.ms", _I, 2000, _MEDIUM,
              "KRaft request timeout (no effect here).", internal=True),
    ConfigDef("controller.quorum.retry.backoff.ms", _I, 20, _LOW,
              "KRaft retry backoff (no effect here).", internal=True),
)  # fmt: skip

BROKER_CONFIGS: Final[Mapping[str, ConfigDef]] = MappingProxyType(
    {d.name: d for d in BROKER_CONFIG_DEFS}
)

TOPIC_CONFIG_DEFS: Final[tuple[ConfigDef, ...]] = (
    ConfigDef("cleanup.policy", _LIST, ("delete",), _MEDIUM,
              "delete and/or compact old segments.", SubsetOf(CLEANUP_POLICIES),
              "log.cleanup.policy"),
    ConfigDef("compression.type", _STR, "producer", _MEDIUM,
              "Final compression of the topic's data.", OneOf(COMPRESSION_TYPES),
              "compression.type"),
    ConfigDef("delete.retention.ms", _L, 24 * 60 * 60 * 1000, _MEDIUM,
              "How long delete tombstones are kept (compacted topics).", AtLeast(0),
              "log.cleaner.delete.retention.ms"),
    ConfigDef("file.delete.delay.ms", _L, 60000, _MEDIUM,
              "Wait before deleting a file from the file system.", AtLeast(0),
              "log.segment.delete.delay.ms"),
    ConfigDef("flush.messages", _L, LONG_MAX, _MEDIUM,
              "Messages between forced fsyncs.", AtLeast(0), "log.flush.interval.messages"),
    ConfigDef("flush.ms", _L, LONG_MAX, _MEDIUM,
              "Time between forced fsyncs.", AtLeast(0), "log.flush.interval.ms"),
    ConfigDef("follower.replication.throttled.replicas", _LIST, (), _MEDIUM,
              "Replicas throttled on the follower side.", ThrottledReplicas()),
    ConfigDef("index.interval.bytes", _I, 4096, _MEDIUM,
              "Bytes between offset index entries.", AtLeast(0), "log.index.interval.bytes"),
    ConfigDef("leader.replication.throttled.replicas", _LIST, (), _MEDIUM,
              "Replicas throttled on the leader side.", ThrottledReplicas()),
    ConfigDef("max.compaction.lag.ms", _L, LONG_MAX, _MEDIUM,
              "Maximum age of a record before it must be compacted.", AtLeast(1),
              "log.cleaner.max.compaction.lag.ms"),
    ConfigDef("max.message.bytes", _I, 1024 * 1024 + 12, _MEDIUM,
              "Largest record batch size allowed.", AtLeast(0), "message.max.bytes"),
    ConfigDef("message.downconversion.enable", _B, True, _LOW,
              "Down-convert record formats for old consumers.", None,
              "log.message.downconversion.enable"),
    ConfigDef("message.format.version", _STR, LATEST_API_VERSION, _MEDIUM,
              "Record format version of the topic's log; no effect here (batches are kept"
              " as the producer sent them).", KafkaVersion(), "log.message.format.version"),
    ConfigDef("message.timestamp.difference.max.ms", _L, LONG_MAX, _MEDIUM,
              "Max allowed gap between a record's CreateTime and the broker's clock.",
              AtLeast(0), "log.message.timestamp.difference.max.ms"),
    ConfigDef("message.timestamp.type", _STR, "CreateTime", _MEDIUM,
              "CreateTime or LogAppendTime.", OneOf(TIMESTAMP_TYPES),
              "log.message.timestamp.type"),
    ConfigDef("min.cleanable.dirty.ratio", _D, 0.5, _MEDIUM,
              "Minimum dirty share of the log before it is cleaned.", Between(0, 1),
              "log.cleaner.min.cleanable.ratio"),
    ConfigDef("min.compaction.lag.ms", _L, 0, _MEDIUM,
              "Minimum age of a record before it may be compacted.", AtLeast(0),
              "log.cleaner.min.compaction.lag.ms"),
    ConfigDef("min.insync.replicas", _I, 1, _MEDIUM,
              "Minimum ISR size for acks=all produce requests.", AtLeast(1),
              "min.insync.replicas"),
    ConfigDef("preallocate", _B, False, _MEDIUM, "Preallocate new segment files.", None,
              "log.preallocate"),
    ConfigDef("retention.bytes", _L, -1, _MEDIUM,
              "Maximum partition size before old segments go; -1: no limit.", None,
              "log.retention.bytes"),
    ConfigDef("retention.ms", _L, 24 * 7 * _HOUR_MS, _MEDIUM,
              "How long segments are kept; -1: forever.", AtLeast(-1), "log.retention.ms"),
    ConfigDef("segment.bytes", _I, 1024 * 1024 * 1024, _MEDIUM,
              "Maximum size of one segment file.", AtLeast(14), "log.segment.bytes"),
    ConfigDef("segment.index.bytes", _I, 10 * 1024 * 1024, _MEDIUM,
              "Maximum size of an offset index file.", AtLeast(0), "log.index.size.max.bytes"),
    ConfigDef("segment.jitter.ms", _L, 0, _MEDIUM,
              "Max jitter subtracted from the roll time.", AtLeast(0), "log.roll.jitter.ms"),
    ConfigDef("segment.ms", _L, 24 * 7 * _HOUR_MS, _MEDIUM,
              "Roll a new segment after this long.", AtLeast(1), "log.roll.ms"),
    ConfigDef("unclean.leader.election.enable", _B, False, _MEDIUM,
              "Elect an out-of-sync replica as a last resort, possibly losing data.", None,
              "unclean.leader.election.enable"),
)  # fmt: skip

TOPIC_CONFIGS: Final[Mapping[str, ConfigDef]] = MappingProxyType(
    {d.name: d for d in TOPIC_CONFIG_DEFS}
)

# Broker key -> the topic key it is the default of, to point users at the right name.
_TOPIC_KEY_FOR_BROKER_KEY: Final = {d.synonym: d.name for d in TOPIC_CONFIG_DEFS if d.synonym}


# --------------------------------------------------------------------------- .properties


# String.trim() drops every char <= U+0020, not Unicode whitespace.
_JAVA_TRIMMED: Final = "".join(chr(c) for c in range(0x21))


def java_trim(s: str) -> str:
    """``s`` as Java's String.trim leaves it (Kafka's tools trim their arguments so)."""
    return s.strip(_JAVA_TRIMMED)


_CSV_MAP_SEPARATOR: Final = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def parse_per_ip_overrides(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides as Kafka reads it (CoreUtils.parseCsvMap, then each
    count an Integer.parseInt): "host:count" items split at commas, each at its last colon
    (so an IPv6 address needs no brackets), both sides trimmed; empty items at the end
    dropped, as Java's split drops them. ValueError names the item that is not host:count
    (Kafka fails to start on it too)."""
    if text == "":
        return {}
    items = _CSV_MAP_SEPARATOR.split(text)
    while items and items[-1] == "":
        items.pop()
    overrides: dict[str, int] = {}
    for item in items:
        host, colon, count_text = item.rpartition(":")
        count = java_int_in_range(java_trim(count_text), -(2**31), 2**31 - 1) if colon else None
        if count is None:
            raise ValueError(f"{item!r} is not host:count (count an int)")
        overrides[java_trim(host)] = count
    return overrides


_PROPS_WHITESPACE: Final = " \t\f"


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) per Properties.load: comments and blanks skipped,
    a line ending in an odd number of backslashes continued, the continuation's leading
    whitespace dropped."""
    # \r\n, \r and \n all end a line in Java; a literal CR can never be inside a value.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "" and not text.endswith("\r\n"):
        # Nothing follows the last line end: Java's LineReader is at the text's end there
        # (but not after a \r\n's \r, which it passes as a line end of its own).
        lines.pop()
    result: list[tuple[int, str]] = []
    line, lineno = "", 0
    for number, raw in enumerate(lines, 1):
        physical = raw.lstrip(_PROPS_WHITESPACE)
        if not line:
            # A new logical line until something is in it, even after a continuation
            # (Java's LineReader: len == 0): a blank line then is skipped, not the key "".
            lineno = number
            if not physical or physical[0] in "#!":
                continue  # a comment is never continued, even if it ends in a backslash
        line += physical
        if (len(line) - len(line.rstrip("\\"))) % 2 == 0:
            result.append((lineno, line))
            line = ""
        else:
            line = line[:-1]
            if number == len(lines):
                result.append((lineno, line))  # the text's end ends it, even empty
    return result


_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX: Final = frozenset("0123456789abcdefABCDEF")


def _unescape(s: str) -> str:
    """Properties.loadConvert: \\t \\n \\r \\f \\uXXXX; a backslash before anything else drops."""
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= len(s):
            break
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i : i + 4]
            if len(digits) != 4 or not set(digits) <= _HEX:
                raise ValueError(f"malformed \\uxxxx escape '\\u{digits}'")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    joined = "".join(out)
    # Java writes characters beyond the BMP as two \u escapes (a UTF-16 surrogate pair).
    return joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _split_key_value(line: str) -> tuple[str, str]:
    """Properties.load0: the key ends at the first unescaped '=', ':' or whitespace; one
    separator and the whitespace around it are skipped."""
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    backslash = False
    for pos, c in enumerate(line):
        if c in "=:" and not backslash:
            key_end, value_start, has_separator = pos, pos + 1, True
            break
        if c in _PROPS_WHITESPACE and not backslash:
            key_end, value_start = pos, pos + 1
            break
        backslash = (not backslash) if c == "\\" else False
    while value_start < len(line):
        c = line[value_start]
        if c not in _PROPS_WHITESPACE:
            if not has_separator and c in "=:":
                has_separator = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


def _parse_properties(text: str) -> tuple[dict[str, str], _Problems]:
    props: dict[str, str] = {}
    problems = _Problems()
    for lineno, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        try:
            key = _unescape(raw_key)
            value = _unescape(raw_value)
        except ValueError as e:
            problems.add(None, f"line {lineno}: {e}")
            continue
        props[key] = value  # a repeated key: the last one wins, as in java.util.Properties
    return props, problems


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text into key -> raw string value (last duplicate wins).

    Comments (``#``, ``!``), ``key=value`` / ``key: value`` / ``key value``, backslash line
    continuations and escapes follow ``java.util.Properties.load``. Values are not trimmed
    here; typing does that, as Kafka's ConfigDef does.
    """
    props, problems = _parse_properties(text)
    if problems:
        raise ConfigError(problems)
    return props


def parse_key_value_pairs(
    pairs: Iterable[str], what: str, *, trim_value: bool = False
) -> dict[str, str]:
    """``["k=v", ...]`` -> dict, split at the first '='; the key is trimmed. With
    ``trim_value`` (kafka-topics.sh --config) the value is trimmed too and may hold no
    '=' and not be empty: Kafka's TopicCommand splits at \\s*=\\s* and requires exactly
    two parts, and its split drops a trailing empty part (kafka-configs.sh --add-config:
    parse_configs_to_be_added). ``what`` names the option in errors ("--override")."""
    result: dict[str, str] = {}
    problems = _Problems()
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if trim_value:
            value = value.strip()
        refused_value = trim_value and ("=" in value or not value)
        if not sep or not key or refused_value:
            problems.add(None, f"{what} {pair!r} is not of the form key=value")
            continue
        result[key] = value
    if problems:
        raise ConfigError(problems)
    return result


# Kafka 2.8's ConfigCommand.parseConfigsToBeAdded: a ',' or '=' is a separator only
# outside square brackets, where the next bracket ahead is not a ']' (its regex; Java's \s
# is ASCII's).
_OUTSIDE_BRACKETS: Final = r"(?=[^\]]*(?:\[|$))"
_CONFIGS_SEPARATOR: Final = re.compile("," + _OUTSIDE_BRACKETS)
_KEY_VALUE_SEPARATOR: Final = re.compile(r"\s*=\s*" + _OUTSIDE_BRACKETS, re.ASCII)


def parse_configs_to_be_added(values: Iterable[str]) -> dict[str, str]:
    """``kafka-configs.sh --add-config`` values, as Kafka 2.8's parseConfigsToBeAdded
    reads one: configs separated by ',' and each split into key and value at '=', both
    outside square brackets (``k1=v1,k2=[v1,v2]``); exactly one key, not empty (Kafka's
    LogConfig.validate refuses it later), and one value, maybe empty; the brackets
    dropped from the value, wherever they are; both trimmed (Java's trim). Each
    flag's value is read so (Kafka takes one flag); a key given again keeps its last value,
    as Properties.setProperty does. Not validated as topic configs."""
    result: dict[str, str] = {}
    problems = _Problems()
    for text in values:
        configs = _CONFIGS_SEPARATOR.split(text)
        if len(configs) > 1:
            # Java's split(regex) drops trailing empty strings (not the input alone, "").
            while configs and not configs[-1]:
                configs.pop()
        for config in configs:
            pair = _KEY_VALUE_SEPARATOR.split(config)
            key = java_trim(pair[0])
            if len(pair) != 2 or not key:
                where = f"{text!r}: {config!r}" if len(configs) > 1 else repr(text)
                problems.add(
                    None,
                    f"--add-config {where} is not of the form key=value (configs are"
                    " separated by ','; a value holding ',' or '=' goes in square brackets,"
                    " k=[v1,v2], which are dropped)",
                )
                continue
            result[key] = java_trim(pair[1].replace("[", "").replace("]", ""))
    if problems:
        raise ConfigError(problems)
    return result


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """``kafka-server-start.sh ... --override key=value`` pairs."""
    return parse_key_value_pairs(overrides, "--override")


def parse_topic_config_args(pairs: Iterable[str]) -> dict[str, str]:
    """``kafka-topics.sh --config key=value`` pairs, validated as topic configs."""
    return validate_topic_config(parse_key_value_pairs(pairs, "--config", trim_value=True))


def _escape(s: str, *, is_key: bool) -> str:
    """Properties.saveConvert, escaping non-ASCII as \\uXXXX so Java can read the file too.

    Unlike Java, '=', ':', '#' and '!' are escaped in keys only: after ``key=`` they are
    plain characters, and ``listeners=PLAINTEXT://:9092`` stays readable.
    """
    out: list[str] = []
    for pos, c in enumerate(s):
        if c == " ":
            out.append("\\ " if is_key or pos == 0 else " ")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif c == "\\" or (is_key and c in "=:#!"):
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            code = ord(c)
            if code > 0xFFFF:
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}")
            else:
                out.append(f"\\u{code:04X}")
        else:
            out.append(c)
    return "".join(out)


def format_properties(props: Mapping[str, str]) -> str:
    """``key=value`` lines that parse_properties (and Java) read back as ``props``."""
    return "".join(
        f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}\n" for k, v in props.items()
    )


# --------------------------------------------------------------------------- typing values

# LIST keys whose empty items are dropped (KafkaConfig reads them with parseCsvList).
_CSV_LIST_KEYS: Final = frozenset({"log.dir", "log.dirs"})
# Double.parseDouble's forms (Double.valueOf's grammar): a decimal or a hexadecimal one
# (whose binary exponent is required), each with an optional float suffix, or NaN or
# Infinity; ASCII only, no underscores.
_DOUBLE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")
_HEX_DOUBLE = re.compile(
    r"([+-]?0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?"
)
_INT_RANGES: Final = {
    ConfigType.SHORT: (SHORT_MIN, SHORT_MAX, "a short (16-bit integer)"),
    ConfigType.INT: (INT_MIN, INT_MAX, "an int (32-bit integer)"),
    ConfigType.LONG: (LONG_MIN, LONG_MAX, "a long (64-bit integer)"),
}


def java_parse_double(text: str) -> float:
    """``text`` (trimmed, as Java's String.trim) as Java's Double.parseDouble reads it, which
    ConfigDef reads a DOUBLE with: "0.5d", "5e-1F", "0x1p-1" and "NaN" are doubles; Python's
    "inf", "1_0" and "\\u0663" (an Arabic-Indic 3) are not. ValueError if it is none."""
    value = java_trim(text)
    sign, word = (value[0], value[1:]) if value[:1] in ("+", "-") else ("", value)
    if word == "NaN":
        return math.nan  # Java has one NaN, whatever its sign
    if word == "Infinity":
        return -math.inf if sign == "-" else math.inf
    if _DOUBLE.fullmatch(value):
        return float(value.rstrip("fFdD"))  # correctly rounded, as Java's
    hexadecimal = _HEX_DOUBLE.fullmatch(value)
    if hexadecimal is None:
        raise ValueError(f"not a double: {text!r}")
    try:
        return float.fromhex(hexadecimal.group(1))  # rounded to even, as Java's
    except OverflowError:
        return -math.inf if sign == "-" else math.inf  # Java's is Infinity


def _parse_typed(definition: ConfigDef, raw: str) -> Any:
    """The typed value of ``raw``; ValueError carries what was expected instead."""
    value = java_trim(raw)
    kind = definition.type
    if kind is ConfigType.BOOLEAN:
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValueError("a boolean (true or false)")
    if kind in _INT_RANGES:
        low, high, text = _INT_RANGES[kind]
        # Integer.parseInt(trimmed) (Long.parseLong, Short.parseShort): any BMP decimal
        # digit; never more digits to int() than the type holds (past 4,300 it raises its
        # own ValueError, whose text would be the "expected" here).
        number = java_int_in_range(value, low, high)
        if number is None:
            raise ValueError(text)
        return number
    if kind is ConfigType.DOUBLE:
        try:
            return java_parse_double(value)
        except ValueError:
            raise ValueError("a double (decimal number)") from None
    if kind is ConfigType.LIST:
        if not value:
            return ()
        # ConfigDef keeps empty items ("compact," is compact and ""), which a validator then
        # refuses; log.dir and log.dirs are strings in Kafka, split by parseCsvList, which
        # drops them.
        items = tuple(java_trim(i) for i in value.split(","))
        return tuple(i for i in items if i) if definition.name in _CSV_LIST_KEYS else items
    return value


def _typed_value(
    definition: ConfigDef, raw: str, problems: _Problems, *, topic: bool = False
) -> tuple[bool, Any]:
    """(ok, value); on failure a problem naming the key, the value and what was expected."""
    try:
        value = _parse_typed(definition, raw)
    except ValueError as e:
        expected = str(e)
    else:
        expected_or_none = definition.validator.check(value) if definition.validator else None
        if expected_or_none is None:
            return True, value
        expected = expected_or_none
    what = "topic config key" if topic else "config key"
    name = definition.name
    problems.add(name, f"invalid value {raw!r} for {what} {name!r}: expected {expected}")
    return False, None


def _unknown_key_problem(key: str, *, topic: bool) -> ConfigProblem:
    names = TOPIC_CONFIGS if topic else BROKER_CONFIGS
    what = "topic config key" if topic else "config key"
    hint = ""
    if topic and key in _TOPIC_KEY_FOR_BROKER_KEY:
        hint = (
            f" ({key!r} is a broker config; the topic-level key is"
            f" {_TOPIC_KEY_FOR_BROKER_KEY[key]!r})"
        )
    elif not topic and key in TOPIC_CONFIGS and TOPIC_CONFIGS[key].synonym:
        hint = (
            f" ({key!r} is a topic config; the broker-wide default is"
            f" {TOPIC_CONFIGS[key].synonym!r})"
        )
    elif not topic and (key in _SECURITY_KEYS or key.startswith(_SECURITY_PREFIXES)):
        return ConfigProblem(key, f"unsupported config key {key!r}: {SECURITY_UNSUPPORTED}")
    else:
        close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.75)
        if close:
            hint = f" (did you mean {close[0]!r}?)"
    return ConfigProblem(key, f"unknown {what} {key!r}{hint}")


def _format_value(value: Any) -> str | None:
    """A typed or derived value as Kafka would write it; None for "unset"."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, tuple):
        return ",".join(str(item) for item in value)
    raise TypeError(f"cannot format config value {value!r}")


# --------------------------------------------------------------------------- listeners


# EndPoint.uriParseExp: NAME://host:port, an IPv6 host in brackets.
_LISTENER = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")

#: advertised in place of an empty host: Kafka uses the canonical hostname, which often does
#: not resolve back to the machine on laptops and CI runners; loopback always works there.
ADVERTISED_HOST_FOR_ALL_INTERFACES: Final = "127.0.0.1"


@dataclass(frozen=True)
class Listener:
    """One endpoint, ``NAME://host:port``; host "" means all interfaces (bind only)."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def _parse_listeners(
    key: str,
    text: str,
    protocol_map: Mapping[str, str],
    problems: _Problems,
    *,
    require_distinct_ports: bool,
) -> tuple[Listener, ...] | None:
    """CoreUtils.listenerListToEndPoints; None (and problems) when anything is wrong."""
    found = len(problems)
    listeners: list[Listener] = []
    items = [i for i in (java_trim(x) for x in text.split(",")) if i]
    if not items:
        problems.add(
            key, f"invalid value {text!r} for config key {key!r}: expected NAME://host:port"
        )
    for item in items:
        m = _LISTENER.fullmatch(item)
        where = f"listener {item!r} in {key!r}"
        if m is None:
            problems.add(key, f"invalid {where}: expected NAME://host:port, e.g. PLAINTEXT://:9092")
            continue
        name, host = m.group(1).upper(), m.group(2)
        port = int_text_in_range(m.group(3), 0, 65535)  # no int() of 4,300+ digits
        protocol = protocol_map.get(name)
        if port is None:
            problems.add(key, f"invalid {where}: expected a port between 0 and 65535")
        elif protocol is None:
            problems.add(
                key,
                f"invalid {where}: listener name {name!r} has no security protocol"
                " in 'listener.security.protocol.map'",
            )
        elif protocol not in SUPPORTED_SECURITY_PROTOCOLS:
            problems.add(
                key,
                f"invalid {where}: security protocol {protocol} is not supported"
                f" (only {', '.join(SUPPORTED_SECURITY_PROTOCOLS)})",
            )
        else:
            listeners.append(Listener(name, host, port, protocol))
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        problems.add(key, f"each listener in {key!r} must have a different name: {text!r}")
    # Port 0 (any free port) may repeat: Kafka's tests rely on that, and so can ours.
    ports = [listener.port for listener in listeners if listener.port != 0]
    if require_distinct_ports and len(set(ports)) != len(ports):
        problems.add(key, f"each listener in {key!r} must have a different port: {text!r}")
    return tuple(listeners) if len(problems) == found else None


def _parse_protocol_map(text: str, problems: _Problems) -> dict[str, str] | None:
    """CoreUtils.parseCsvMap of NAME:PROTOCOL; names upper-cased as ListenerName does."""
    key = "listener.security.protocol.map"
    found = len(problems)
    result: dict[str, str] = {}
    for item in (i for i in (java_trim(x) for x in text.split(",")) if i):
        name, sep, protocol = item.rpartition(":")
        name, protocol = java_trim(name).upper(), java_trim(protocol).upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            problems.add(
                key,
                f"invalid entry {item!r} in {key!r}: expected NAME:PROTOCOL with"
                f" PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}",
            )
        else:
            result[name] = protocol
    return result if len(problems) == found else None


# --------------------------------------------------------------------------- broker config


@dataclass(frozen=True)
class BrokerConfig:
    """A validated broker configuration; build it with ``from_properties`` or ``load``.

    One attribute per key of BROKER_CONFIG_DEFS (dots become underscores). Keys with a
    fallback hold the resolved value. ``originals`` keeps the raw strings that were given.
    Use ``dataclasses.replace`` to set a generated broker id.
    """

    # ZooKeeper
    zookeeper_connect: str
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_ms: int
    zookeeper_max_in_flight_requests: int
    # General
    broker_id: int
    broker_id_generation_enable: bool
    reserved_broker_max_id: int
    broker_identity_mode: str
    cluster_name: str
    broker_name: str | None
    broker_rack: str | None
    message_max_bytes: int
    num_network_threads: int
    num_io_threads: int
    background_threads: int
    queued_max_requests: int
    request_timeout_ms: int
    delete_topic_enable: bool
    auto_create_topics_enable: bool
    compression_type: str
    # Socket server
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    listener_security_protocol_map: Mapping[str, str]
    inter_broker_listener_name: str
    security_inter_broker_protocol: str
    socket_send_buffer_bytes: int
    socket_receive_buffer_bytes: int
    socket_request_max_bytes: int
    connections_max_idle_ms: int
    # Log
    num_partitions: int
    log_dir: tuple[str, ...]
    log_dirs: tuple[str, ...]
    log_segment_bytes: int
    log_roll_ms: int
    log_roll_hours: int
    log_roll_jitter_ms: int
    log_roll_jitter_hours: int
    log_retention_ms: int
    log_retention_minutes: int | None
    log_retention_hours: int
    log_retention_bytes: int
    log_retention_check_interval_ms: int
    log_cleanup_policy: tuple[str, ...]
    log_cleaner_enable: bool
    log_cleaner_delete_retention_ms: int
    log_cleaner_min_compaction_lag_ms: int
    log_cleaner_max_compaction_lag_ms: int
    log_cleaner_min_cleanable_ratio: float
    log_cleaner_threads: int
    log_cleaner_backoff_ms: int
    log_cleaner_dedupe_buffer_size: int
    log_index_size_max_bytes: int
    log_index_interval_bytes: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    log_segment_delete_delay_ms: int
    log_preallocate: bool
    log_message_timestamp_type: str
    log_message_timestamp_difference_max_ms: int
    log_message_downconversion_enable: bool
    log_message_format_version: str
    num_recovery_threads_per_data_dir: int
    min_insync_replicas: int
    # Replication
    controller_socket_timeout_ms: int
    default_replication_factor: int
    replica_lag_time_max_ms: int
    replica_socket_timeout_ms: int
    replica_socket_receive_buffer_bytes: int
    replica_fetch_max_bytes: int
    replica_fetch_wait_max_ms: int
    replica_fetch_min_bytes: int
    replica_fetch_backoff_ms: int
    replica_fetch_response_max_bytes: int
    num_replica_fetchers: int
    replica_high_watermark_checkpoint_interval_ms: int
    auto_leader_rebalance_enable: bool
    leader_imbalance_per_broker_percentage: int
    leader_imbalance_check_interval_seconds: int
    unclean_leader_election_enable: bool
    inter_broker_protocol_version: str
    # Controlled shutdown
    controlled_shutdown_enable: bool
    controlled_shutdown_max_retries: int
    controlled_shutdown_retry_backoff_ms: int
    # Group coordinator, offsets, transactions, fetch
    offsets_topic_replication_factor: int
    offsets_topic_num_partitions: int
    offsets_topic_segment_bytes: int
    offsets_topic_compression_codec: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offset_metadata_max_bytes: int
    offsets_commit_timeout_ms: int
    offsets_commit_required_acks: int
    offsets_load_buffer_size: int
    transactional_id_expiration_ms: int
    transaction_max_timeout_ms: int
    transaction_state_log_min_isr: int
    transaction_state_log_load_buffer_size: int
    transaction_state_log_replication_factor: int
    transaction_state_log_num_partitions: int
    transaction_state_log_segment_bytes: int
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int
    transaction_remove_expired_transaction_cleanup_interval_ms: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: int
    fetch_max_bytes: int
    max_incremental_fetch_session_cache_slots: int
    min_incremental_fetch_session_eviction_ms: int
    # Accepted with no effect (but the listeners' port, host.name, advertised.* and node.id)
    zookeeper_sync_time_ms: int
    num_replica_alter_log_dirs_threads: int | None
    queued_max_request_bytes: int
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    port: int
    host_name: str
    advertised_host_name: str | None
    advertised_port: int | None
    control_plane_listener_name: str | None
    max_connections_per_ip: int
    max_connections_per_ip_overrides: str
    max_connections: int
    max_connection_creation_rate: int
    log_cleaner_io_max_bytes_per_second: float
    log_cleaner_io_buffer_size: int
    log_cleaner_io_buffer_load_factor: float
    log_flush_start_offset_checkpoint_interval_ms: int
    create_topic_policy_class_name: str | None
    alter_config_policy_class_name: str | None
    fetch_purgatory_purge_interval_requests: int
    producer_purgatory_purge_interval_requests: int
    delete_records_purgatory_purge_interval_requests: int
    replica_selector_class: str | None
    metrics_num_samples: int
    metrics_sample_window_ms: int
    metric_reporters: tuple[str, ...]
    metrics_recording_level: str
    kafka_metrics_reporters: tuple[str, ...]
    kafka_metrics_polling_interval_secs: int
    quota_producer_default: int
    quota_consumer_default: int
    quota_window_num: int
    replication_quota_window_num: int
    alter_log_dirs_replication_quota_window_num: int
    controller_quota_window_num: int
    quota_window_size_seconds: int
    replication_quota_window_size_seconds: int
    alter_log_dirs_replication_quota_window_size_seconds: int
    controller_quota_window_size_seconds: int
    client_quota_callback_class: str | None
    process_roles: tuple[str, ...]
    node_id: int
    initial_broker_registration_timeout_ms: int
    broker_heartbeat_interval_ms: int
    broker_session_timeout_ms: int
    metadata_log_dir: str | None
    controller_listener_names: str | None
    controller_quorum_voters: tuple[str, ...]
    controller_quorum_election_timeout_ms: int
    controller_quorum_fetch_timeout_ms: int
    controller_quorum_election_backoff_max_ms: int
    controller_quorum_append_linger_ms: int
    controller_quorum_request_timeout_ms: int
    controller_quorum_retry_backoff_ms: int
    # The raw strings given (file plus overrides); not part of equality.
    originals: Mapping[str, str] = field(default_factory=FrozenMap, compare=False, repr=False)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Validate raw key -> string values; raise ConfigError with every problem."""
        return _build_broker_config(props, _Problems())

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        overrides: Iterable[str] = (),
        *,
        text: str | None = None,
    ) -> BrokerConfig:
        """Read a server.properties file (or ``text``) and apply ``--override key=value``."""
        return load_broker_config(path, overrides, text=text)

    def get(self, key: str) -> Any:
        """The value of a Kafka key (``"log.retention.ms"``), resolved as the attribute is."""
        if key not in BROKER_CONFIGS:
            raise KeyError(_unknown_key_problem(key, topic=False).message)
        return getattr(self, BROKER_CONFIGS[key].attr)

    def to_properties(self, *, include_defaults: bool = True) -> str:
        """The config as ``.properties`` text that parses back to an equal BrokerConfig.

        With ``include_defaults`` every key is written with its resolved value (unset
        optional keys omitted); without it, only the keys given, as they were given.
        """
        if not include_defaults:
            return format_properties(self.originals)
        props: dict[str, str] = {}
        for definition in BROKER_CONFIG_DEFS:
            # inter.broker.listener.name already determines the protocol, and Kafka refuses
            # both at once.
            if definition.name == "security.inter.broker.protocol":
                continue
            text = _format_value(getattr(self, definition.attr))
            if text is not None:
                props[definition.name] = text
        return format_properties(props)

    def listener(self, name: str) -> Listener:
        """The (bind) listener called ``name``."""
        for listener in self.listeners:
            if listener.name == name.upper():
                return listener
        raise KeyError(f"no listener named {name!r}")

    def advertised_listener(self, name: str | None = None) -> Listener:
        """The advertised listener called ``name`` (default: the inter-broker one)."""
        wanted = (name or self.inter_broker_listener_name).upper()
        for listener in self.advertised_listeners:
            if listener.name == wanted:
                return listener
        raise KeyError(f"no advertised listener named {wanted!r}")


def _build_broker_config(props: Mapping[str, str], problems: _Problems) -> BrokerConfig:
    vals: dict[str, Any] = {}
    given: set[str] = set()
    for key, raw in props.items():
        definition = BROKER_CONFIGS.get(key)
        if definition is None:
            problems.append(_unknown_key_problem(key, topic=False))
            continue
        given.add(key)
        ok, value = _typed_value(definition, raw, problems)
        if ok:
            vals[key] = value
    for definition in BROKER_CONFIG_DEFS:
        if definition.name in given:
            continue
        if definition.required:
            name = definition.name
            problems.add(name, f"missing required config key {name!r}: {definition.doc}")
        else:
            vals[definition.name] = definition.default
    _resolve_broker_values(vals, given, problems)
    if problems:
        raise ConfigError(problems)
    kwargs = {BROKER_CONFIGS[k].attr: v for k, v in vals.items()}
    return BrokerConfig(**kwargs, originals=FrozenMap(props))


def _have(vals: Mapping[str, Any], *keys: str) -> bool:
    # A key that failed to parse is absent; checks depending on it are skipped so that one
    # mistake is reported once.
    return all(k in vals for k in keys)


def _fallback(vals: dict[str, Any], key: str, fallback: str, factor: int = 1) -> None:
    """An unset ``key`` takes ``fallback``'s value times ``factor`` (hours -> ms, ...)."""
    if not _have(vals, key) or vals[key] is not None:
        return
    if not _have(vals, fallback):
        # The fallback did not parse (reported there): the key has no value either, and
        # the checks on it skip it (log.roll.hours=0 left log.roll.ms None to compare).
        del vals[key]
    elif vals[fallback] is not None:
        vals[key] = vals[fallback] * factor


def _resolve_broker_values(vals: dict[str, Any], given: set[str], problems: _Problems) -> None:
    """Resolve fallback keys and run KafkaConfig.validateValues' cross-key checks (on the
    keys that parsed)."""
    _fallback(vals, "zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms")
    _fallback(vals, "log.dirs", "log.dir")
    _fallback(vals, "log.roll.ms", "log.roll.hours", _HOUR_MS)
    _fallback(vals, "log.roll.jitter.ms", "log.roll.jitter.hours", _HOUR_MS)
    _fallback(vals, "log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    if _have(vals, "log.retention.ms", "log.retention.minutes", "log.retention.hours"):
        # KafkaConfig.logRetentionTimeMillis: ms, else minutes, else hours; negative: forever
        millis = vals["log.retention.ms"]
        if millis is None:
            minutes = vals["log.retention.minutes"]
            millis = (
                minutes * _MINUTE_MS
                if minutes is not None
                else vals["log.retention.hours"] * _HOUR_MS
            )
        vals["log.retention.ms"] = max(-1, millis)
        if millis == 0:
            problems.add("log.retention.ms", "log.retention.ms must be unlimited (-1) or >= 1")

    if _have(vals, "process.roles") and vals["process.roles"]:
        problems.add(
            "process.roles",
            f"process.roles={','.join(vals['process.roles'])} asks for KRaft mode, which is"
            " not supported here: the broker runs in ZooKeeper mode (leave process.roles"
            " empty)",
        )
    if _have(vals, "node.id", "broker.id") and vals["node.id"] >= 0:
        # KafkaConfig.brokerId: node.id, when set, is the broker id.
        vals["broker.id"] = vals["node.id"]
    if _have(vals, "broker.id", "broker.id.generation.enable", "reserved.broker.max.id"):
        broker_id, max_id = vals["broker.id"], vals["reserved.broker.max.id"]
        bad = f"invalid value '{broker_id}' for config key 'broker.id': expected"
        if vals["broker.id.generation.enable"] and not -1 <= broker_id <= max_id:
            problems.add(
                "broker.id", f"{bad} -1 (generate one) or 0..{max_id} (reserved.broker.max.id)"
            )
        elif not vals["broker.id.generation.enable"] and broker_id < 0:
            problems.add("broker.id", f"{bad} a value >= 0 (broker.id.generation.enable is false)")
    if _have(vals, "broker.identity.mode", "broker.id", "broker.name") and (
        vals["broker.identity.mode"] == "persistent"
    ):
        if vals["broker.id"] != -1:
            problems.add(
                "broker.id",
                "broker.id must not be set when broker.identity.mode is persistent: the"
                " broker obtains its id through ZooKeeper (remove broker.id, or use"
                " broker.identity.mode=kafka)",
            )
        if vals["broker.name"] is None:
            problems.add(
                "broker.name",
                "missing config key 'broker.name': required when broker.identity.mode is"
                " persistent (the identity is cluster.name:broker.name:id)",
            )
    if _have(vals, "log.dirs") and not vals["log.dirs"]:
        problems.add(
            "log.dirs", "at least one log directory must be given in 'log.dirs' or 'log.dir'"
        )
    if _have(vals, "log.roll.ms") and vals["log.roll.ms"] < 1:
        problems.add("log.roll.ms", "log.roll.ms must be greater than or equal to 1")
    if _have(vals, "log.roll.jitter.ms") and vals["log.roll.jitter.ms"] < 0:
        problems.add("log.roll.jitter.ms", "log.roll.jitter.ms must be greater than or equal to 0")
    if _have(vals, "replica.fetch.wait.max.ms", "replica.socket.timeout.ms") and (
        vals["replica.fetch.wait.max.ms"] > vals["replica.socket.timeout.ms"]
    ):
        problems.add(
            "replica.socket.timeout.ms",
            "replica.socket.timeout.ms should always be at"
            " least replica.fetch.wait.max.ms to prevent unnecessary socket timeouts",
        )
    if _have(vals, "replica.fetch.wait.max.ms", "replica.lag.time.max.ms") and (
        vals["replica.fetch.wait.max.ms"] > vals["replica.lag.time.max.ms"]
    ):
        problems.add(
            "replica.fetch.wait.max.ms",
            "replica.fetch.wait.max.ms should always be at"
            " most replica.lag.time.max.ms to prevent frequent changes in ISR",
        )
    # KafkaConfig.validateValues: connection.failed.authentication.delay.ms (100 by
    # default) < connections.max.idle.ms when that is >= 0. The delay key is not
    # configurable here (no authentication; an unknown key stops the broker): Kafka's
    # default stands for it.
    idle_key = "connections.max.idle.ms"
    if _have(vals, idle_key) and 0 <= vals[idle_key] <= FAILED_AUTHENTICATION_DELAY_MS:
        problems.add(
            idle_key,
            f"connection.failed.authentication.delay.ms={FAILED_AUTHENTICATION_DELAY_MS} should"
            f" always be less than {idle_key}={vals[idle_key]} to prevent failed authentication"
            f" responses from timing out ({idle_key} must be over"
            f" {FAILED_AUTHENTICATION_DELAY_MS}, or negative: never)",
        )
    buffer_key, threads_key = "log.cleaner.dedupe.buffer.size", "log.cleaner.threads"
    # KafkaConfig.validateValues, whether or not log.cleaner.enable: more than 1 MiB per
    # thread, in integer division. With no thread Kafka divides by zero and does not start;
    # here no cleaner runs then, and nothing is checked.
    if (
        _have(vals, buffer_key, threads_key)
        and vals[threads_key] > 0
        and vals[buffer_key] // vals[threads_key] <= 1024 * 1024
    ):
        problems.add(
            buffer_key,
            f"log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread: it is"
            f" {vals[buffer_key]} for {vals[threads_key]} thread(s) (log.cleaner.threads)",
        )
    low_key, high_key = "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms"
    if _have(vals, low_key, high_key) and vals[low_key] > vals[high_key]:
        problems.add(
            low_key, f"{low_key} ({vals[low_key]}) must not exceed {high_key} ({vals[high_key]})"
        )
    acks_key, factor_key = "offsets.commit.required.acks", "offsets.topic.replication.factor"
    # KafkaConfig.validateValues, though the acks have no effect here.
    if _have(vals, acks_key, factor_key) and not -1 <= vals[acks_key] <= vals[factor_key]:
        problems.add(
            acks_key,
            f"{acks_key} must be greater or equal -1 and less or equal to {factor_key}"
            f" ({vals[factor_key]}): it is {vals[acks_key]}",
        )
    queued_key, request_key = "queued.max.request.bytes", "socket.request.max.bytes"
    if _have(vals, queued_key, request_key) and 0 < vals[queued_key] < vals[request_key]:
        problems.add(
            queued_key,
            f"{queued_key} ({vals[queued_key]}) must be larger or equal to {request_key}"
            f" ({vals[request_key]}), or <= 0 (no limit)",
        )
    per_ip_key, overrides_key = "max.connections.per.ip", "max.connections.per.ip.overrides"
    if (
        _have(vals, per_ip_key, overrides_key)
        and vals[per_ip_key] == 0
        and not java_trim(vals[overrides_key])
    ):
        problems.add(per_ip_key, f"{per_ip_key} can be set to zero only if {overrides_key} is set")
    if _have(vals, overrides_key):
        try:
            parse_per_ip_overrides(vals[overrides_key])
        except ValueError as e:
            problems.add(
                overrides_key,
                f"invalid value {vals[overrides_key]!r} for config key {overrides_key!r}: {e}",
            )
    buffer_key = "replica.socket.receive.buffer.bytes"
    if _have(vals, buffer_key) and vals[buffer_key] <= 0 and vals[buffer_key] != -1:
        problems.add(
            buffer_key,
            f"{buffer_key}={vals[buffer_key]}: a buffer size must be above 0, or -1 for the"
            " OS default (Kafka's fetchers fail every connection with it)",
        )
    _check_task_periods(vals, problems)
    _check_topic_synonyms(vals, given, problems)
    _check_versions(vals, problems)
    _resolve_listeners(vals, given, problems)


# A broker key left unset takes this key's value (``_fallback``), so a bad value is that
# key's.
_FALLBACK_SOURCES: Final = {
    "log.flush.interval.ms": "log.flush.scheduler.interval.ms",
    "log.roll.ms": "log.roll.hours",
    "log.roll.jitter.ms": "log.roll.jitter.hours",
}


def _check_topic_synonyms(vals: Mapping[str, Any], given: set[str], problems: _Problems) -> None:
    """Each topic key's broker default passes the topic key's validator. Kafka 2.8's
    LogManager.apply builds LogConfig(extractLogConfigMap(config)), whose ConfigDef checks
    them: the broker does not start (log.message.timestamp.difference.max.ms=-1 would
    otherwise refuse every CreateTime produce)."""
    reported = {p.key for p in problems}
    for definition in TOPIC_CONFIG_DEFS:
        key, validator = definition.synonym, definition.validator
        if key is None or validator is None or not _have(vals, key) or key in reported:
            continue
        value = vals[key]
        if value is None:
            continue  # unset, its fallback not parsed: reported there
        expected = validator.check(value)
        if expected is None:
            continue
        source = key if key in given else _FALLBACK_SOURCES.get(key, key)
        via = "" if source == key else f" (as {key}, which is unset)"
        problems.add(
            source,
            f"invalid value {_format_value(value)!r} for config key {source!r}{via}: expected"
            f" {expected}, as the default of topic config key {definition.name!r}",
        )


# Keys Kafka 2.8's KafkaScheduler takes as a task's period (LogManager.startup,
# ReplicaManager.startHighWatermarkCheckPointThread). A period of 0 makes
# scheduleAtFixedRate throw: the broker does not start (the high watermark checkpoint
# fails its first LeaderAndIsr instead; refused at start here, as the others). A negative
# period runs the task once, and is accepted.
_TASK_PERIOD_KEYS: Final = (
    "log.flush.scheduler.interval.ms",
    "log.flush.offset.checkpoint.interval.ms",
    "replica.high.watermark.checkpoint.interval.ms",
)


def _check_task_periods(vals: Mapping[str, Any], problems: _Problems) -> None:
    for key in _TASK_PERIOD_KEYS:
        if _have(vals, key) and vals[key] == 0:
            # Kafka schedules the high watermark checkpoint at the first LeaderAndIsr.
            when = (
                "fails its first LeaderAndIsr with a period of 0"
                if key == "replica.high.watermark.checkpoint.interval.ms"
                else "refuses a period of 0"
            )
            problems.add(
                key,
                f"{key} must not be 0: it is the period of a background task, and Kafka"
                f" {when} (a negative one runs the task once)",
            )
    lag_key = "replica.lag.time.max.ms"
    # ReplicaManager's isr-expiration runs every replica.lag.time.max.ms / 2, in Java's
    # long division (toward zero): -1, 0 and 1 make a period of 0.
    if _have(vals, lag_key) and abs(vals[lag_key]) < 2:
        problems.add(
            lag_key,
            f"{lag_key} must not be -1, 0 or 1: the ISR is checked every {lag_key} / 2 ms,"
            f" and Kafka refuses a period of 0 ({lag_key}={vals[lag_key]})",
        )


def _check_versions(vals: Mapping[str, Any], problems: _Problems) -> None:
    """KafkaConfig.validateValues on the versions (which have no other effect here)."""
    if not _have(vals, "inter.broker.protocol.version"):
        return
    # Both passed KafkaVersion: api_version knows them.
    protocol = _record_version(api_version(vals["inter.broker.protocol.version"]) or "")
    if _have(vals, "log.message.format.version"):
        given = vals["log.message.format.version"]
        needed = _record_version(api_version(given) or "")
        if protocol < needed:
            first = _API_VERSIONS[_RECORD_VERSION_STARTS[needed]][0]
            problems.add(
                "log.message.format.version",
                f"log.message.format.version {given} can only be used when"
                f" inter.broker.protocol.version is set to version {first} or higher",
            )
    if _have(vals, "offsets.topic.compression.codec") and (
        vals["offsets.topic.compression.codec"] == 4 and protocol < 2
    ):
        problems.add(
            "offsets.topic.compression.codec",
            "offsets.topic.compression.codec zstd can only be used when"
            " inter.broker.protocol.version is set to version 2.1 or higher",
        )


def _resolve_listeners(vals: dict[str, Any], given: set[str], problems: _Problems) -> None:
    """Parse listeners, advertised listeners and the protocol map; pick the inter-broker
    listener (KafkaConfig.getInterBrokerListenerNameAndSecurityProtocol)."""
    protocol_map = _parse_protocol_map(vals.pop("listener.security.protocol.map"), problems)
    listeners_text, advertised_text = vals.pop("listeners"), vals.pop("advertised.listeners")
    # KafkaConfig.listeners and advertisedListeners: without them, the deprecated port,
    # host.name, advertised.host.name and advertised.port make one PLAINTEXT listener.
    host, port = vals.get("host.name"), vals.get("port")
    if "listeners" not in given and host is not None and port is not None:
        listeners_text = f"PLAINTEXT://{host}:{port}"
    if advertised_text is None and {"advertised.host.name", "advertised.port"} & given:
        advertised_host = vals.get("advertised.host.name", host)
        advertised_port = vals.get("advertised.port", port)
        advertised_host = host if advertised_host is None else advertised_host
        advertised_port = port if advertised_port is None else advertised_port
        if advertised_host is not None and advertised_port is not None:
            advertised_text = f"PLAINTEXT://{advertised_host}:{advertised_port}"
    listener_name = vals.pop("inter.broker.listener.name")
    protocol = vals.pop("security.inter.broker.protocol", None)
    if protocol_map is None or protocol is None:
        return
    listeners = _parse_listeners(
        "listeners", listeners_text, protocol_map, problems, require_distinct_ports=True
    )
    advertised = listeners
    if advertised_text is not None:
        advertised = _parse_listeners(
            "advertised.listeners",
            advertised_text,
            protocol_map,
            problems,
            require_distinct_ports=False,
        )
    if advertised is not None:
        if any(a.host == "0.0.0.0" for a in advertised):
            problems.add(
                "advertised.listeners",
                "advertised.listeners cannot use the"
                " nonroutable meta-address 0.0.0.0; use a routable IP address",
            )
        # An empty host binds every interface; peers need an address (see the constant).
        advertised = tuple(
            dataclasses.replace(a, host=ADVERTISED_HOST_FOR_ALL_INTERFACES) if not a.host else a
            for a in advertised
        )
    if listener_name is not None and "security.inter.broker.protocol" in given:
        problems.add(
            "inter.broker.listener.name",
            "only one of 'inter.broker.listener.name'"
            " and 'security.inter.broker.protocol' may be set",
        )
        return
    name = protocol = protocol.upper()
    if listener_name is not None:
        name = listener_name.upper()
        if name not in protocol_map:
            problems.add(
                "inter.broker.listener.name",
                f"listener {name!r} in"
                " 'inter.broker.listener.name' is not in"
                " 'listener.security.protocol.map'",
            )
            return
        protocol = protocol_map[name]
    if listeners is None or advertised is None:
        return
    names = {listener.name for listener in listeners}
    advertised_names = {a.name for a in advertised}
    if name not in advertised_names:
        problems.add(
            "inter.broker.listener.name",
            f"the inter-broker listener {name!r} is not"
            f" among the advertised listeners ({', '.join(sorted(advertised_names))})",
        )
    if not advertised_names <= names:
        problems.add(
            "advertised.listeners",
            "advertised.listeners names must be equal to or a"
            f" subset of those in listeners: found {', '.join(sorted(advertised_names))},"
            f" valid {', '.join(sorted(names))}",
        )
    vals["listeners"] = listeners
    vals["advertised.listeners"] = advertised
    vals["listener.security.protocol.map"] = FrozenMap(protocol_map)
    vals["inter.broker.listener.name"] = name
    vals["security.inter.broker.protocol"] = protocol


def load_broker_config(
    path: str | os.PathLike[str] | None = None,
    overrides: Iterable[str] = (),
    *,
    text: str | None = None,
) -> BrokerConfig:
    """Read ``path`` (or ``text``; neither: no file) then apply ``--override key=value``
    pairs, which win. Raise ConfigError with every problem in the file, the overrides and
    the values."""
    problems = _Problems()
    props: dict[str, str] = {}
    if path is not None and text is not None:
        raise ValueError("give a path or a text, not both")
    if path is not None:
        try:
            # Properties.load(InputStream): ISO-8859-1, one character per byte, so no
            # file fails to decode (a Latin-1 comment is fine; \uXXXX escapes give the rest).
            text = Path(path).read_bytes().decode("latin-1")
        except OSError as e:
            raise ConfigError([ConfigProblem(None, f"cannot read config file {path}: {e}")]) from e
    if text is not None:
        props, problems = _parse_properties(text)
    try:
        props.update(parse_overrides(overrides))
    except ConfigError as e:
        problems.extend(e.problems)
    return _build_broker_config(props, problems)


# --------------------------------------------------------------------------- topic config


@dataclass(frozen=True)
class TopicConfig:
    """A topic's effective config: its overrides over the broker's defaults.

    One attribute per key of TOPIC_CONFIG_DEFS; ``overrides`` holds the topic's own
    settings as the strings stored in ``/config/topics/<topic>``.
    """

    cleanup_policy: tuple[str, ...]
    compression_type: str
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    follower_replication_throttled_replicas: tuple[str, ...]
    index_interval_bytes: int
    leader_replication_throttled_replicas: tuple[str, ...]
    max_compaction_lag_ms: int
    max_message_bytes: int
    message_downconversion_enable: bool
    message_format_version: str
    message_timestamp_difference_max_ms: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    min_insync_replicas: int
    preallocate: bool
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_jitter_ms: int
    segment_ms: int
    unclean_leader_election_enable: bool
    overrides: Mapping[str, str] = field(default_factory=FrozenMap)

    def get(self, key: str) -> Any:
        """The effective value of a topic key (``"retention.ms"``)."""
        if key not in TOPIC_CONFIGS:
            raise KeyError(_unknown_key_problem(key, topic=True).message)
        return getattr(self, TOPIC_CONFIGS[key].attr)

    def is_overridden(self, key: str) -> bool:
        return key in self.overrides

    def as_strings(self) -> dict[str, str]:
        """Every effective value as the string Kafka would show (DescribeConfigs)."""
        result: dict[str, str] = {}
        for definition in TOPIC_CONFIG_DEFS:
            text = _format_value(getattr(self, definition.attr))
            result[definition.name] = "" if text is None else text
        return result


def _parse_topic_overrides(overrides: Mapping[str, object], problems: _Problems) -> dict[str, Any]:
    typed: dict[str, Any] = {}
    for key, raw in overrides.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            problems.append(_unknown_key_problem(key, topic=True))
            continue
        if not isinstance(raw, str):
            # ZooKeeper JSON written by other tools could hold numbers; Kafka keeps strings.
            problems.add(
                key, f"invalid value {raw!r} for topic config key {key!r}: expected a string"
            )
            continue
        ok, value = _typed_value(definition, raw, problems, topic=True)
        if ok:
            typed[key] = value
    return typed


def _check_compaction_lag(values: Mapping[str, Any], problems: _Problems) -> None:
    # LogConfig.validateValues
    low, high = values.get("min.compaction.lag.ms"), values.get("max.compaction.lag.ms")
    if low is not None and high is not None and low > high:
        problems.add(
            "min.compaction.lag.ms",
            f"conflict topic config setting min.compaction.lag.ms ({low}) >"
            f" max.compaction.lag.ms ({high})",
        )


def validate_topic_config(overrides: Mapping[str, str]) -> dict[str, str]:
    """Check topic config overrides (keys and values); return them as the strings to store.

    Raises ConfigError naming every unknown key (with a close match) and bad value.
    """
    problems = _Problems()
    typed = _parse_topic_overrides(overrides, problems)
    _check_compaction_lag(typed, problems)
    if problems:
        raise ConfigError(problems)
    return dict(overrides)


def topic_override_bool(overrides: Mapping[str, object], key: str, default: bool) -> bool:
    """A boolean topic config as Kafka's LogConfig reads it from ``/config/topics/<t>``:
    trimmed, in any case (ConfigDef's BOOLEAN). ``default`` when it is not set, or not a
    boolean, as ``topic_config_as_stored`` reads a bad value (a tool that does not trim
    may have stored " true")."""
    raw = overrides.get(key)
    if not isinstance(raw, str):
        return default
    try:
        value = _parse_typed(TOPIC_CONFIGS[key], raw)
    except ValueError:
        return default
    return value if isinstance(value, bool) else default


def parse_broker_value(key: str, raw: str) -> Any:
    """A broker key's typed value as ConfigDef parses it, unvalidated and unresolved;
    ValueError if it does not parse."""
    return _parse_typed(BROKER_CONFIGS[key], raw)


def parse_topic_value(key: str, raw: str) -> Any:
    """A topic override's typed value as ConfigDef parses it (trimmed; a boolean in any
    case; a list split at commas), unvalidated; ValueError if it does not parse."""
    return _parse_typed(TOPIC_CONFIGS[key], raw)


def topic_config_defaults(broker: BrokerConfig | None = None) -> dict[str, Any]:
    """Each topic key's default: the broker's value of its synonym (LogConfig's
    extractLogConfigMap), or Kafka's static default when no broker config is given."""
    result: dict[str, Any] = {}
    for definition in TOPIC_CONFIG_DEFS:
        if broker is not None and definition.synonym is not None:
            value = broker.get(definition.synonym)
            if isinstance(definition.validator, KafkaVersion):
                # LogConfig takes the broker's version as ApiVersion reads it ("2.8-IV1").
                value = api_version(value) or value
            result[definition.name] = value
        else:
            result[definition.name] = definition.default
    return result


def effective_topic_config(
    broker: BrokerConfig | None, overrides: Mapping[str, str] | None = None
) -> TopicConfig:
    """A topic's effective config: ``overrides`` (``/config/topics/<t>``) over the broker's
    defaults, e.g. a topic's unclean.leader.election.enable over the broker's. Raises
    ConfigError if an override is unknown or invalid."""
    given = dict(overrides or {})
    problems = _Problems()
    values = topic_config_defaults(broker)
    values.update(_parse_topic_overrides(given, problems))
    _check_compaction_lag(values, problems)
    if problems:
        raise ConfigError(problems)
    kwargs = {TOPIC_CONFIGS[k].attr: v for k, v in values.items()}
    return TopicConfig(**kwargs, overrides=FrozenMap(given))


@dataclass(frozen=True)
class StoredTopicConfig:
    """A topic's config as read from ``/config/topics/<t>`` (``topic_config_as_stored``)."""

    #: the effective config of the known keys whose values are good
    config: TopicConfig
    #: keys this broker does not know (a newer Kafka's, another tool's typo): ignored
    unknown_keys: tuple[str, ...]
    #: the known keys' bad values (their keys left at the broker's defaults in ``config``)
    problems: tuple[ConfigProblem, ...]


def topic_config_as_stored(
    broker: BrokerConfig | None, overrides: Mapping[str, object]
) -> StoredTopicConfig:
    """A topic's overrides as found in ZooKeeper, read as Kafka's LogConfig.fromProps reads
    them: unknown keys are ignored (AbstractConfig keeps only the keys it defines) and the
    others kept. Where Kafka fails on a bad value of a known key, the problem is returned
    and the key left at the broker's default (the caller decides: a broker keeps the
    topic's config known before, as Kafka keeps it when a change fails); a
    min.compaction.lag.ms over max.compaction.lag.ms drops both overrides. Writes (admin
    tools, CreateTopics) are checked strictly, by ``validate_topic_config``."""
    known = {k: v for k, v in overrides.items() if k in TOPIC_CONFIGS}
    unknown = tuple(k for k in overrides if k not in TOPIC_CONFIGS)
    problems = _Problems()
    typed = _parse_topic_overrides(known, problems)
    values = topic_config_defaults(broker)
    values.update(typed)
    conflict = _Problems()
    _check_compaction_lag(values, conflict)
    if conflict:
        problems.extend(conflict)
        lags = ("min.compaction.lag.ms", "max.compaction.lag.ms")
        typed = {k: v for k, v in typed.items() if k not in lags}
        values = topic_config_defaults(broker)
        values.update(typed)
    kwargs = {TOPIC_CONFIGS[k].attr: v for k, v in values.items()}
    kept = FrozenMap({k: str(known[k]) for k in typed})
    return StoredTopicConfig(TopicConfig(**kwargs, overrides=kept), unknown, tuple(problems))


# The dataclasses must cover the tables exactly; catch drift at import, not in production.
def _check_tables() -> None:
    for cls, defs in ((BrokerConfig, BROKER_CONFIG_DEFS), (TopicConfig, TOPIC_CONFIG_DEFS)):
        extra = {"originals", "overrides"}
        fields = {f.name for f in dataclasses.fields(cls)} - extra
        attrs = {d.attr for d in defs}
        if fields != attrs:
            raise AssertionError(f"{cls.__name__} fields and definitions differ: {fields ^ attrs}")


_check_tables()

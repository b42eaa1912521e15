"""Codecs for the data of every znode, byte-compatible with Kafka's (ZkData.scala).

Kafka writes compact JSON (Jackson: no spaces) and a few fields in peculiar forms: the
controller's and a broker's timestamps are strings, `/controller_epoch` is a bare integer.
Decoders are strict about types and raise `MalformedZnode` naming the path, so that the
caller can report the bad znode and skip it instead of crashing the controller.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Generic, NamedTuple, TypeGuard, TypeVar

from zkdata import paths
from zkdata.int_text import INT32_MAX, INT32_MIN, INT_TEXT, java_int_in_range, small_int_text

log = logging.getLogger(__name__)

NO_LEADER = -1
LEADER_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
# ZooKeeper refuses znodes above jute.maxbuffer (1 MiB by default); leave room for framing.
MAX_ZNODE_BYTES = 1_000_000

# Kafka reads every integer field as a Java int: a bigger number is malformed, not a broker id.
_H = TypeVar("_H", bound=Hashable)
_T = TypeVar("_T")
_INT32_MIN = INT32_MIN
_INT32_MAX = INT32_MAX
# The C scanner behind json.loads, without its per-call Python wrapping.
_scan_json = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
# An integer written as text (a partition key, /controller_epoch) is read as Java's
# parseInt reads it (zkdata/int_text.py): no 32-bit integer has more than 10 digits,
# leading zeros aside, so a longer text is out of range before int() sees it.
_INT32_DIGITS = 10
_MAX_PORT = 65535
# Kafka's Uuid.toString: 16 bytes in URL-safe base64 without padding.
_TOPIC_ID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")


class SharedValues(Generic[_H]):
    """Equal immutable values as one object: calling it with a value returns the first
    equal one it was given (while it remembers fewer than ``limit``; values come from
    outside, so the table is bounded). Brokers and the controller hold the same few
    values (replica lists, configs, states) for 100,000s of partitions."""

    __slots__ = ("_limit", "_table")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._table: dict[_H, _H] = {}

    def __call__(self, value: _H) -> _H:
        shared = self._table.get(value)
        if shared is not None:
            return shared
        if len(self._table) < self._limit:
            self._table[value] = value
        return value


# Replica lists and ISRs repeat endlessly (100,000 partitions on 3 brokers have a dozen
# distinct ones): sharing one tuple per distinct value saves ~100 bytes per partition in
# every structure that holds them.
_SHARED_TUPLES: SharedValues[tuple[int, ...]] = SharedValues(100_000)
# Its table's lookup: a hit (nearly every call: a LeaderAndIsr makes 2-3 per partition)
# without the Python frame of SharedValues.__call__.
_shared_tuple = _SHARED_TUPLES._table.get


def shared_ints(values: Iterable[int]) -> tuple[int, ...]:
    """An equal tuple, the same object for every equal value (while the table has room).

    Only for values already known to be ints: (True,) and (1.0,) are equal to (1,).
    """
    value = tuple(values)
    return _shared_tuple(value) or _SHARED_TUPLES(value)  # () is falsy: the call has it


# A partition index past 256 is a new int each time one is decoded (wire, JSON, a folder
# name), and a broker's structures each hold one per partition: its partitions, logs
# and metadata, besides the controller's (32 bytes each: 2.4 MB a structure at 100,000
# partitions of 1,000-partition topics). Index i of this list is the int i every caller
# gets. It is replaced, never changed, when it grows: a reader racing a growth gets
# either list, and both are right. It grows to the largest index seen, below a bound
# (at most 2.6 MB, for a topic of 65,536 partitions: a bad index costs no more).
_INDEXES: list[int] = list(range(1024))
_INDEXES_MAX = 1 << 16


def shared_index(index: int) -> int:
    """An int equal to ``index``: the same object for every equal partition index
    (below 2**16; others as given)."""
    indexes = _INDEXES
    if 0 <= index < len(indexes):
        return indexes[index]
    if index < 0 or index >= _INDEXES_MAX:
        return index
    return _grow_indexes(index)


def shared_indexes(indexes: list[int]) -> list[int]:
    """`shared_index` of each index (looked up in C when all are in the table)."""
    if not indexes:
        return indexes
    top = max(indexes)
    if top >= len(_INDEXES):
        shared_index(top)  # grown to it, unless past the bound
    table = _INDEXES
    if top >= len(table) or min(indexes) < 0:
        return [shared_index(i) for i in indexes]
    return list(map(table.__getitem__, indexes))


def _grow_indexes(index: int) -> int:
    global _INDEXES
    indexes = _INDEXES
    size = min(max(index + 1, 2 * len(indexes)), _INDEXES_MAX)
    grown = indexes + list(range(len(indexes), size))
    _INDEXES = grown
    return grown[index]


class MalformedZnode(ValueError):
    """A znode's data could not be decoded. Carries the path, so reports can name it."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"malformed data in znode {path}: {reason}")
        self.path = path
        self.reason = reason


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _loads_object(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        raise MalformedZnode(path, "no data")
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise MalformedZnode(path, f"not JSON ({e})") from None
    except RecursionError:
        raise MalformedZnode(path, "JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise MalformedZnode(path, f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _int(path: str, obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    # bool is an int in Python; a JSON true is not a broker id.
    if not _is_int32(value):
        raise MalformedZnode(path, f"field {key!r} must be a 32-bit integer, got {value!r}")
    return value


def _is_int32(value: object) -> TypeGuard[int]:
    return (
        isinstance(value, int) and not isinstance(value, bool) and _INT32_MIN <= value <= _INT32_MAX
    )


def _int_list(path: str, value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(_is_int32(v) for v in value):
        raise MalformedZnode(path, f"{what} must be a list of 32-bit integers, got {value!r}")
    return tuple(value)


def _int_text(path: str, text: str, what: str) -> int:
    # Kafka reads these with Scala's toInt (Integer.parseInt), untrimmed.
    value = java_int_in_range(text, _INT32_MIN, _INT32_MAX)
    if value is None:
        raise MalformedZnode(path, f"{what} {text!r} is not a 32-bit integer")
    return value


# Kafka's wire strings are UTF-8 of at most Short.MAX_VALUE bytes (its writers throw past it).
_MAX_WIRE_STRING_BYTES = 0x7FFF


def _wire_string(path: str, value: str, what: str) -> str:
    """``value``, if Kafka's protocol can carry it: a string that goes into requests every
    broker gets (a broker's host, listener, rack) must encode, or one bad znode would keep
    those requests from all of them (a topic's name is held to Kafka's stricter topic
    rule: see decode_topic). JSON can name a lone surrogate ("\\ud800"), which
    UTF-8 cannot encode."""
    try:
        # isascii: no copy for the usual string.
        size = len(value) if value.isascii() else len(value.encode())
    except UnicodeEncodeError:
        raise MalformedZnode(path, f"{what} is not encodable as UTF-8 (a lone surrogate)") from None
    if size > _MAX_WIRE_STRING_BYTES:
        raise MalformedZnode(
            path, f"{what} has {size} bytes of UTF-8, more than {_MAX_WIRE_STRING_BYTES}"
        )
    return value


def _str(path: str, obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise MalformedZnode(path, f"field {key!r} must be a string, got {value!r}")
    return value


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# --- /controller and /controller_epoch -------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    ts = now_ms() if timestamp_ms is None else timestamp_ms
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(ts)})


def decode_controller(data: bytes | None, path: str = paths.CONTROLLER) -> int:
    """The controller's broker id. Accepts Kafka 0.8's bare-integer form too. A negative
    id names no broker (and -1 would read as no controller at all): malformed."""
    if data is not None and INT_TEXT.fullmatch(data.strip().decode("ascii", "replace")):
        controller_id = _int_text(path, data.strip().decode(), "controller id")
    else:
        controller_id = _int(path, _loads_object(path, data), "brokerid")
    if controller_id < 0:
        raise MalformedZnode(path, f"negative controller id {controller_id}")
    return controller_id


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None, path: str = paths.CONTROLLER_EPOCH) -> int:
    # Kafka's ControllerEpochZNode.decode: new String(bytes, UTF_8).toInt, no trim.
    try:
        text = (data or b"").decode()
    except UnicodeDecodeError:
        raise MalformedZnode(path, f"expected an integer epoch, got {data!r}") from None
    epoch = _int_text(path, text, "epoch")
    if epoch < 0:
        raise MalformedZnode(path, f"negative epoch {epoch}")
    return epoch


# --- /brokers/ids/<id> -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EndPoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        # Kafka's Utils.formatAddress: an IPv6 host goes in brackets.
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """The data of /brokers/ids/<id>. The broker epoch is the znode's czxid, not in here."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    timestamp_ms: int = 0
    jmx_port: int = -1

    @property
    def host(self) -> str:
        return self.endpoints[0].host

    @property
    def port(self) -> int:
        return self.endpoints[0].port

    def endpoint(self, listener: str) -> EndPoint | None:
        for ep in self.endpoints:
            if ep.listener == listener:
                return ep
        return None

    def address(self, listener: str) -> tuple[str, int]:
        """(host, port) of the endpoint called ``listener``; the first endpoint when the
        broker has none of that name (a registration of a differently configured broker:
        better to try it than to never reach the broker)."""
        ep = self.endpoint(listener) or self.endpoints[0]
        return ep.host, ep.port


def encode_broker(reg: BrokerRegistration) -> bytes:
    """Version 5, as Kafka 2.8 writes it (BrokerInfo: version 5, with the broker's
    supported features, from inter.broker.protocol.version 2.7-IV0, its default's
    included; none are supported, so {}). host and port, for readers older than
    endpoints, are the first PLAINTEXT endpoint's, else null and -1.

    The key order is that of the mutable HashMap BrokerIdZNode.encode builds, as the
    Scala 2.13 build of Kafka (the one Apache recommends, and Confluent's images run)
    iterates it: 16 buckets by the spread String hash, each in signed hash order. (The
    Scala 2.12 build's table orders them otherwise; readers never depend on it.)"""
    plaintext = next((ep for ep in reg.endpoints if ep.security_protocol == "PLAINTEXT"), None)
    obj: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {
            ep.listener: ep.security_protocol for ep in reg.endpoints
        },
        "endpoints": [ep.connection_string() for ep in reg.endpoints],
    }
    if reg.rack is not None:
        obj["rack"] = reg.rack
    obj.update(
        {
            "jmx_port": reg.jmx_port,
            "port": plaintext.port if plaintext else -1,
            "host": plaintext.host if plaintext else None,
            "version": 5,
            "timestamp": str(reg.timestamp_ms or now_ms()),
        }
    )
    return _dumps(obj)


def _parse_endpoint(path: str, text: object, protocols: Mapping[str, Any]) -> EndPoint:
    if not isinstance(text, str) or "://" not in text:
        raise MalformedZnode(path, f"endpoint {text!r} is not LISTENER://host:port")
    listener, _, hostport = text.partition("://")
    host, sep, port_text = hostport.rpartition(":")
    if not sep or not (port_text.isascii() and port_text.isdigit()):
        raise MalformedZnode(path, f"endpoint {text!r} has no port")
    port = small_int_text(port_text, 5)
    if port is None or port > _MAX_PORT:
        raise MalformedZnode(path, f"endpoint {text!r} has a port outside 0..{_MAX_PORT}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    protocol = str(protocols.get(listener, listener))
    return EndPoint(
        _wire_string(path, listener, "an endpoint's listener name"),
        _wire_string(path, host, "an endpoint's host"),
        port,
        _wire_string(path, protocol, "an endpoint's security protocol"),
    )


def decode_broker(
    broker_id: int, data: bytes | None, path: str | None = None
) -> BrokerRegistration:
    path = path or paths.broker(broker_id)
    obj = _loads_object(path, data)
    version = _int(path, obj, "version")
    if version < 1:
        # Kafka's BrokerIdZNode.decode: "Unsupported version of broker registration".
        raise MalformedZnode(path, f"unsupported version {version} of a broker registration")
    protocols = obj.get("listener_security_protocol_map") or {}
    if not isinstance(protocols, dict):
        raise MalformedZnode(path, "listener_security_protocol_map must be an object")
    raw_endpoints = obj.get("endpoints")
    if version >= 2 and raw_endpoints:
        if not isinstance(raw_endpoints, list):
            raise MalformedZnode(path, "endpoints must be a list")
        endpoints = tuple(_parse_endpoint(path, e, protocols) for e in raw_endpoints)
    else:
        port = _int(path, obj, "port")
        if not 0 <= port <= _MAX_PORT:
            raise MalformedZnode(path, f"port {port} is outside 0..{_MAX_PORT}")
        endpoints = (
            EndPoint("PLAINTEXT", _wire_string(path, _str(path, obj, "host"), "host"), port),
        )
    rack = obj.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise MalformedZnode(path, f"rack must be a string or null, got {rack!r}")
    if rack is not None:
        _wire_string(path, rack, "rack")
    ts = obj.get("timestamp", "0")
    if isinstance(ts, bool) or not isinstance(ts, str | int):
        raise MalformedZnode(path, f"timestamp {ts!r} is not a number")
    try:
        timestamp_ms = int(ts)
    except ValueError:
        raise MalformedZnode(path, f"timestamp {ts!r} is not a number") from None
    jmx = _int(path, obj, "jmx_port") if "jmx_port" in obj else -1
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=endpoints,
        rack=rack,
        timestamp_ms=timestamp_ms,
        jmx_port=jmx,
    )


# --- /brokers/topics/<t> ---------------------------------------------------------------


def new_topic_id() -> uuid.UUID:
    # Kafka reserves the zero id and ids whose base64 form starts with '-'.
    while True:
        tid = uuid.uuid4()
        if not topic_id_to_str(tid).startswith("-"):
            return tid


def topic_id_to_str(tid: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(tid.bytes).rstrip(b"=").decode()


def topic_id_from_str(text: str) -> uuid.UUID:
    # Python's base64 would also take '+', '/' and skip junk, decoding to another id.
    if not _TOPIC_ID_TEXT.fullmatch(text):
        raise ValueError(f"topic id {text!r} is not 22 characters of URL-safe base64")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """The data of /brokers/topics/<t>: partition -> replicas, plus reassignment state."""

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    topic_id: uuid.UUID | None = None
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


def _encode_partition_map(m: Mapping[int, Iterable[int]]) -> dict[str, list[int]]:
    return {str(p): list(r) for p, r in sorted(m.items())}


def encode_topic(assignment: TopicAssignment) -> bytes:
    obj: dict[str, Any] = {"version": 2}
    if assignment.topic_id is not None:
        obj = {"version": 3, "topic_id": topic_id_to_str(assignment.topic_id)}
    obj["partitions"] = _encode_partition_map(assignment.partitions)
    obj["adding_replicas"] = _encode_partition_map(assignment.adding_replicas)
    obj["removing_replicas"] = _encode_partition_map(assignment.removing_replicas)
    return _dumps(obj)


def _decode_partition_map(path: str, value: object, what: str) -> dict[int, tuple[int, ...]]:
    if value is None:
        return {}
    if type(value) is dict:
        # Hot path (a failover reads every topic: 100,000 partitions): plainly valid maps
        # are checked and built by whole-map operations that loop in C, not by a Python
        # loop over the partitions; anything else goes through the strict checks below for
        # their precise error.
        lists = list(value.values())
        if not lists:
            return {}
        keys = "".join(value)  # JSON object keys are str
        if (
            all(value)  # no empty key
            # None past 10 digits (int() refuses 4,300; the range check catches the rest)
            and max(map(len, value)) <= _INT32_DIGITS
            and keys.isascii()
            and keys.isdigit()
            and set(map(type, lists)) == {list}
        ):
            replicas = list(chain.from_iterable(lists))
            partition_ids = shared_indexes(list(map(int, value)))
            if (
                # Types checked before sharing: (True,) and (1.0,) equal (1,) as dict keys.
                set(map(type, replicas)) <= {int}
                and (not replicas or (min(replicas) >= _INT32_MIN and max(replicas) <= _INT32_MAX))
                and max(partition_ids) <= _INT32_MAX
            ):
                tuples = list(map(tuple, lists))
                # A cluster has a handful of replica lists: each distinct one made shared once.
                shared = {t: shared_ints(t) for t in set(tuples)}
                return dict(zip(partition_ids, map(shared.__getitem__, tuples), strict=True))
    return _decode_partition_map_strictly(path, value, what)


def _decode_partition_map_strictly(
    path: str, value: object, what: str
) -> dict[int, tuple[int, ...]]:
    if not isinstance(value, dict):
        raise MalformedZnode(path, f"{what} must be an object")
    out: dict[int, tuple[int, ...]] = {}
    for key, replicas in value.items():
        partition_id = _int_text(path, key, f"{what}: partition key")
        if partition_id < 0:
            raise MalformedZnode(path, f"{what} has a negative partition {partition_id}")
        out[partition_id] = _int_list(path, replicas, f"{what}[{key}]")
    return out


def decode_topic(topic: str, data: bytes | None, path: str | None = None) -> TopicAssignment:
    path = path or paths.topic(topic)
    # A child of /brokers/topics, which ZooKeeper takes at any length and with any
    # character: one no wire string carries would fail every request naming it, and one
    # too long for a file name every broker's log of it, <topic>-<partition> (item 41).
    problem = paths.topic_name_problem(topic)
    if problem is not None:
        raise MalformedZnode(path, problem)
    obj = _loads_object(path, data)
    partitions = _decode_partition_map(path, obj.get("partitions"), "partitions")
    if not partitions:
        raise MalformedZnode(path, "no partitions")
    # Each distinct replica list checked once (equal lists are one shared tuple).
    if not all(
        replicas and len(set(replicas)) == len(replicas) for replicas in set(partitions.values())
    ):
        for p, replicas in partitions.items():
            if not replicas:
                raise MalformedZnode(path, f"partition {p} has no replicas")
            if len(set(replicas)) != len(replicas):
                raise MalformedZnode(path, f"partition {p} lists a replica twice: {list(replicas)}")
    topic_id = None
    raw_id = obj.get("topic_id")
    if raw_id is not None:
        try:
            topic_id = topic_id_from_str(raw_id if isinstance(raw_id, str) else "")
        except ValueError:
            raise MalformedZnode(path, f"topic_id {raw_id!r} is not a Kafka Uuid") from None
    return TopicAssignment(
        topic=topic,
        partitions=partitions,
        topic_id=topic_id,
        adding_replicas=_decode_partition_map(path, obj.get("adding_replicas"), "adding_replicas"),
        removing_replicas=_decode_partition_map(
            path, obj.get("removing_replicas"), "removing_replicas"
        ),
    )


# --- /brokers/topics/<t>/partitions/<p>/state ------------------------------------------


class LeaderAndIsr(NamedTuple):
    """A partition's leadership: leader, leader epoch, ISR, and the state znode's version.

    `zk_version` is the version of the state znode this was read from or written as; the
    next write is conditional on it, so a stale writer fails instead of overwriting.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int = 0

    def new_leader_and_isr(self, leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
        """The next decision: every controller change of leader or ISR bumps the epoch."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, isr, self.zk_version)


def next_zk_version(version: int) -> int:
    """The version a setData of a znode at ``version`` gives it: ZooKeeper keeps it in a
    Java int (PrepRequestProcessor's checkAndIncVersion: currentVersion + 1), so it wraps
    from 2**31 - 1 to -2**31."""
    return version + 1 if version < _INT32_MAX else _INT32_MIN


class PartitionState(NamedTuple):
    """The data of a partition state znode: its leadership and the controller that wrote it."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int


def encode_partition_state(leader_and_isr: LeaderAndIsr, controller_epoch: int) -> bytes:
    # Key order as Kafka writes it (a Scala HashMap's order); hot path, so no json.dumps.
    isr = ",".join(map(str, leader_and_isr.isr))
    return (
        f'{{"controller_epoch":{controller_epoch},"leader":{leader_and_isr.leader},'
        f'"version":1,"leader_epoch":{leader_and_isr.leader_epoch},"isr":[{isr}]}}'
    ).encode()


def decode_partition_state(path: str, data: bytes | None, zk_version: int) -> PartitionState:
    # Hot path (a failover decodes every partition): accept what is plainly valid at C
    # speed, and hand anything else to the strict decoder for its precise error.
    try:
        text = data.decode()  # type: ignore[union-attr]
        obj, end = _scan_json(text, 0)
        leader = obj["leader"]
        leader_epoch = obj["leader_epoch"]
        controller_epoch = obj["controller_epoch"]
        raw_isr = obj["isr"]
    except Exception:
        return _decode_partition_state_strictly(path, data, zk_version)
    if (
        end == len(text)
        and type(leader) is int
        and type(leader_epoch) is int
        and type(controller_epoch) is int
        and LEADER_DURING_DELETE <= leader <= _INT32_MAX
        and 0 <= leader_epoch <= _INT32_MAX
        and 0 <= controller_epoch <= _INT32_MAX
        and type(raw_isr) is list
        # Types checked before sharing: (True,) and (1.0,) equal (1,) as dict keys.
        and all(type(r) is int and 0 <= r <= _INT32_MAX for r in raw_isr)
        and len(set(raw_isr)) == len(raw_isr)
    ):
        isr = shared_ints(raw_isr)
        return PartitionState(LeaderAndIsr(leader, leader_epoch, isr, zk_version), controller_epoch)
    return _decode_partition_state_strictly(path, data, zk_version)


def _decode_partition_state_strictly(
    path: str, data: bytes | None, zk_version: int
) -> PartitionState:
    obj = _loads_object(path, data)
    leader = _int(path, obj, "leader")
    leader_epoch = _int(path, obj, "leader_epoch")
    controller_epoch = _int(path, obj, "controller_epoch")
    isr = _int_list(path, obj.get("isr"), "isr")
    if leader < LEADER_DURING_DELETE or leader_epoch < 0 or controller_epoch < 0:
        raise MalformedZnode(path, "negative leader, leader_epoch or controller_epoch")
    if len(set(isr)) != len(isr):
        raise MalformedZnode(path, f"isr lists a replica twice: {list(isr)}")
    return PartitionState(LeaderAndIsr(leader, leader_epoch, isr, zk_version), controller_epoch)


# --- admin and notification znodes -----------------------------------------------------


class TopicPartition(NamedTuple):
    # A NamedTuple: built, hashed and compared in C, which matters with 100,000 of them.
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def _partition_entries(path: str, data: bytes | None) -> list[Any]:
    """The entries of a partition list znode: the znode is malformed whole unless it is a
    JSON object holding a list of them."""
    obj = _loads_object(path, data)
    items = obj.get("partitions")
    if not isinstance(items, list):
        raise MalformedZnode(path, "field 'partitions' must be a list")
    return items


def _entry_object(path: str, item: object) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise MalformedZnode(path, "not an object")
    return item


def _topic_partition(path: str, entry: Mapping[str, Any]) -> TopicPartition:
    topic = _str(path, entry, "topic")
    partition = _int(path, entry, "partition")
    if partition < 0:
        raise MalformedZnode(path, f"negative partition {partition}")
    return TopicPartition(topic, partition)


def _partition_entry(path: str, item: object) -> TopicPartition:
    return _topic_partition(path, _entry_object(path, item))


def _reassignment_entry(path: str, item: object) -> tuple[TopicPartition, tuple[int, ...]]:
    entry = _entry_object(path, item)
    tp = _topic_partition(path, entry)
    replicas = _int_list(path, entry.get("replicas"), "replicas")
    if not replicas or len(set(replicas)) != len(replicas):
        raise MalformedZnode(path, f"replicas {list(replicas)} must be distinct and non-empty")
    return tp, replicas


_REPORTED_CHARS = 200  # of an entry and of what is wrong with it: a znode holds up to 1 MB


def _cut(text: str) -> str:
    return text if len(text) <= _REPORTED_CHARS else f"{text[:_REPORTED_CHARS]}..."


def _decode_entries(
    path: str, data: bytes | None, decode_entry: Callable[[str, object], _T]
) -> tuple[list[_T], list[MalformedZnode]]:
    """Each entry of a partition list znode decoded alone: one that cannot be read is left
    out, its MalformedZnode (the znode's path, the entry and what is wrong) returned."""
    decoded: list[_T] = []
    unreadable: list[MalformedZnode] = []
    for item in _partition_entries(path, data):
        try:
            decoded.append(decode_entry(path, item))
        except MalformedZnode as e:
            unreadable.append(
                MalformedZnode(path, f"partition entry {_cut(repr(item))}: {_cut(e.reason)}")
            )
    return decoded, unreadable


def encode_partition_list(partitions: Iterable[TopicPartition]) -> bytes:
    """Data of /isr_change_notification/isr_change_<n> and /admin/preferred_replica_election."""
    return _dumps(
        {
            "version": 1,
            "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in partitions],
        }
    )


def decode_partition_list_entries(
    path: str, data: bytes | None
) -> tuple[list[TopicPartition], list[MalformedZnode]]:
    """The partitions of an admin request (/admin/preferred_replica_election) read entry
    by entry, as Kafka 2.8 acts on each alone: those that can be read, and the errors of
    those that cannot (left out). Raises MalformedZnode for a znode that is no JSON object
    with a list of entries."""
    return _decode_entries(path, data, _partition_entry)


def decode_partition_list(path: str, data: bytes | None) -> list[TopicPartition]:
    """The partitions listed; MalformedZnode if any entry cannot be read."""
    partitions, unreadable = decode_partition_list_entries(path, data)
    if unreadable:
        raise unreadable[0]
    return partitions


def encode_reassignment(targets: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)}
                for tp, r in sorted(targets.items())
            ],
        }
    )


def decode_reassignment_entries(
    data: bytes | None, path: str = paths.REASSIGN_PARTITIONS
) -> tuple[dict[TopicPartition, tuple[int, ...]], list[MalformedZnode]]:
    """/admin/reassign_partitions read entry by entry, as Kafka 2.8 acts on each partition
    alone: the targets of the entries that can be read (the last one of a partition wins,
    as Kafka's toMap), and the errors of those that cannot (left out). Raises
    MalformedZnode for a znode that is no JSON object with a list of entries."""
    targets, unreadable = _decode_entries(path, data, _reassignment_entry)
    return dict(targets), unreadable


def decode_reassignment(
    data: bytes | None, path: str = paths.REASSIGN_PARTITIONS
) -> dict[TopicPartition, tuple[int, ...]]:
    """The targets asked for; MalformedZnode if any entry cannot be read."""
    targets, unreadable = decode_reassignment_entries(data, path)
    if unreadable:
        raise unreadable[0]
    return targets


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(config)})


def decode_topic_config(topic: str, data: bytes | None, path: str | None = None) -> dict[str, str]:
    path = path or paths.topic_config(topic)
    obj = _loads_object(path, data)
    config = obj.get("config", {})
    if not isinstance(config, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in config.items()
    ):
        raise MalformedZnode(path, "config must map strings to strings")
    # DescribeConfigs answers each key and value as a wire string: an entry no wire
    # string can carry is left out, with a warning, as a key unknown to the broker is
    # (no key Kafka knows is one); the rest of the topic's config stands.
    kept: dict[str, str] = {}
    for key, value in config.items():
        try:
            _wire_string(path, key, f"the config key {key!r}")
            _wire_string(path, value, f"the value of {key!r}")
        except MalformedZnode as e:
            log.warning("%s; that entry is ignored", e)
            continue
        kept[key] = value
    return kept


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None, path: str = paths.CLUSTER_ID) -> str:
    # Every Metadata answer carries it: a broker that could not encode it would serve none.
    return _wire_string(path, _str(path, _loads_object(path, data), "id"), "the cluster id")


def encode_config_change(entity_path: str) -> bytes:
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(path: str, data: bytes | None) -> str:
    """The entity path of a /config/changes notification ("topics/t"): version 2 names it
    (``entity_path``), version 1 gives its type and name (Kafka 0.9-1.x's tools)."""
    obj = _loads_object(path, data)
    version = obj.get("version")
    # Kafka reads it .to[Int]: a JSON int, not true (== 1 here) nor 2.0.
    if not _is_int32(version):
        raise MalformedZnode(path, f"field 'version' must be a 32-bit integer, got {version!r}")
    if version == 2:
        return _str(path, obj, "entity_path")
    if version == 1:
        return f"{_str(path, obj, 'entity_type')}/{_str(path, obj, 'entity_name')}"
    raise MalformedZnode(path, f"unknown version {version!r} of a config change notification")


# --- /consumers/<group>/offsets/<topic>/<partition> -------------------------------------

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def encode_consumer_offset(offset: int) -> bytes:
    """An OffsetCommit v0's offset as Kafka's ConsumerOffset.encode writes it: decimal
    text (the commit's metadata is not kept)."""
    return str(offset).encode()


def decode_consumer_offset(path: str, data: bytes | None) -> int | None:
    """The offset a consumer offset znode holds, None for one with no data (Kafka's
    ConsumerOffset.decode: Option(bytes), then new String(_, UTF_8).toLong, untrimmed)."""
    if data is None:
        return None
    text = data.decode(errors="replace")  # (a replaced byte is no digit either)
    value = java_int_in_range(text, _INT64_MIN, _INT64_MAX)
    if value is None:
        raise MalformedZnode(path, f"offset {text[:50]!r} is not a 64-bit integer")
    return value


# Kafka's LogDirEventNotificationSequenceZNode.LogDirFailureEvent: the only event there is.
LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    """Data of /log_dir_event_notification/log_dir_event_<n>: a log directory of this
    broker failed."""
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(path: str, data: bytes | None) -> int:
    """The broker id of a log directory event notification (Kafka reads only that)."""
    broker_id = _int(path, _loads_object(path, data), "broker")
    if broker_id < 0:
        raise MalformedZnode(path, f"broker id {broker_id} is negative")
    return broker_id


# --- /brokers/identities/<id> (ours: persistent broker identities) ----------------------


@dataclass(frozen=True)
class IdentityClaim:
    """Who holds an allocated broker id (broker.identity.mode=persistent).

    ``check_code`` is the random code the broker wrote in its temp identity file before
    claiming: a repeated claim with the same code is the same broker retrying."""

    broker_id: int
    cluster_name: str
    broker_name: str
    address: str
    check_code: str
    timestamp_ms: int = 0

    @property
    def identity(self) -> str:
        return f"{self.cluster_name}:{self.broker_name}:{self.broker_id}"


def encode_identity_claim(claim: IdentityClaim) -> bytes:
    return _dumps(
        {
            "version": 1,
            "cluster_name": claim.cluster_name,
            "broker_name": claim.broker_name,
            "address": claim.address,
            "check_code": claim.check_code,
            "timestamp": str(claim.timestamp_ms or now_ms()),
        }
    )


def decode_identity_claim(broker_id: int, data: bytes | None) -> IdentityClaim:
    path = paths.broker_identity(broker_id)
    obj = _loads_object(path, data)
    _int(path, obj, "version")
    ts = obj.get("timestamp", "0")
    try:
        timestamp_ms = int(ts) if isinstance(ts, str) else -1
    except ValueError:
        timestamp_ms = -1
    if timestamp_ms < 0:
        raise MalformedZnode(path, f"timestamp {ts!r} is not a number")
    return IdentityClaim(
        broker_id=broker_id,
        cluster_name=_str(path, obj, "cluster_name"),
        broker_name=_str(path, obj, "broker_name"),
        address=_str(path, obj, "address"),
        check_code=_str(path, obj, "check_code"),
        timestamp_ms=timestamp_ms,
    )

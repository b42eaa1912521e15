"""Kafka API keys and the versions of each that the schemas (and so this codec) support."""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType
from typing import Final

from wire.schema_types import MessageSpec
from wire.schemas import MESSAGES


class ApiKey(IntEnum):
    """Every API with a schema in `wire.schemas`, named as Kafka's `ApiKeys` enum names them."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_CLUSTER = 60


class UpdateMetadataType(IntEnum):
    """UpdateMetadata v8's Type (Kafka's AbstractControlRequest.Type, KIP-866). This
    project's controller sends a full update (every partition) in requests of whole topics,
    the last marked FULL and those before it INCREMENTAL, as are other updates: a broker
    knows when its first full update is whole (docs/architecture.md, item 13)."""

    UNKNOWN = 0  # what a v0-v7 request, or a Kafka ZooKeeper-mode controller, says
    INCREMENTAL = 1
    FULL = 2


def _by_key(kind: str) -> dict[int, MessageSpec]:
    found: dict[int, MessageSpec] = {}
    for spec in MESSAGES.values():
        if spec.type == kind and spec.api_key is not None:
            found[ApiKey(spec.api_key)] = spec
    missing = set(ApiKey) - set(found)
    if missing:
        raise ImportError(f"wire.schemas has no {kind} schema for {sorted(missing)}")
    return found


# Keyed by ApiKey members, which also match plain ints.
_REQUESTS: Final[Mapping[int, MessageSpec]] = MappingProxyType(_by_key("request"))
_RESPONSES: Final[Mapping[int, MessageSpec]] = MappingProxyType(_by_key("response"))

# (lowest, highest) version of each API, from the request schema's validVersions (Kafka keeps
# a request and its response on the same versions).
VERSION_RANGES: Final[Mapping[ApiKey, tuple[int, int]]] = MappingProxyType(
    {
        ApiKey(key): (spec.versions.start, spec.versions.stop - 1)
        for key, spec in sorted(_REQUESTS.items())
    }
)


def request_spec(key: int) -> MessageSpec:
    """The request schema of an API (KeyError if there is none)."""
    try:
        return _REQUESTS[key]
    except KeyError:
        raise KeyError(f"no schema for API key {key}") from None


def response_spec(key: int) -> MessageSpec:
    """The response schema of an API (KeyError if there is none)."""
    try:
        return _RESPONSES[key]
    except KeyError:
        raise KeyError(f"no schema for API key {key}") from None


def version_range(key: int) -> tuple[int, int]:
    """(lowest, highest) valid version of an API (KeyError if there is no schema)."""
    spec = request_spec(key)
    return spec.versions.start, spec.versions.stop - 1

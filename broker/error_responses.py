"""The response that says a request failed (Kafka's AbstractRequest.getErrorResponse).

An error goes in whichever fields the response's version has: its top-level error code
where the version carries one, and, for the APIs whose errors Kafka reports per item (per
partition of a Fetch or Produce, per topic of a Metadata, per key of a FindCoordinator
v4...), one item per item of the request, each with the error, as Kafka's
getErrorResponse builds them. Whether a field is there is decided by the schema of that
version: a body always has every key (`Codec.new`), and the encoder silently drops an
ignorable field the version lacks, so a key's presence says nothing.

A response that would carry no error at all (a version whose errors are per partition,
for a request naming none, or a request that could not be decoded, whose items are
unknown) is not sent: the caller closes the connection, as Kafka does when
getErrorResponse gives no response and on any request it cannot parse.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from broker.apis import api_versions_response
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import response_codec
from wire.schema_types import FieldSpec

log = logging.getLogger(__name__)

_ALL = range(0x8000)


def _itself(value: Any) -> Any:
    return value


def _name_or_empty(topic: Mapping[str, Any]) -> Any:
    # A Metadata request may name a topic by id only (v10+); the response's name may not
    # be null before v12, and Kafka's getErrorResponse answers "" in every version.
    return "" if topic["name"] is None else topic["name"]


@dataclass(frozen=True)
class _Echo:
    """One response item per item of a request's array: `copy` gives the response's
    fields from the request item's, `fixed` sets others; the innermost items carry the
    error (`error_code`)."""

    request: str
    response: str
    copy: tuple[tuple[str, Callable[[Any], Any]], ...]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    inner: _Echo | None = None

    def build(self, request: Mapping[str, Any], error: int) -> list[dict[str, Any]]:
        out = []
        for item in request[self.request] or ():
            answer = {key: get(item) for key, get in self.copy}
            answer.update(self.fixed)
            if self.inner is None:
                answer["error_code"] = error
            else:
                answer[self.inner.response] = self.inner.build(item, error)
            out.append(answer)
        return out


def _get(key: str | None) -> Callable[[Any], Any]:
    return _itself if key is None else itemgetter(key)


def _per_partition(
    topics: tuple[str, str, str, str],
    partitions: tuple[str, str, str | None, str],
    fixed: Mapping[str, Any] | None = None,
) -> _Echo:
    """Topics, then partitions: each as (request array, response array, request item's
    key, response item's key); a None key: the request's items are the partition numbers."""
    request, response, key, response_key = topics
    inner_request, inner_response, inner_key, inner_response_key = partitions
    inner = _Echo(
        inner_request, inner_response, ((inner_response_key, _get(inner_key)),), fixed or {}
    )
    return _Echo(request, response, ((response_key, _get(key)),), inner=inner)


# For each API, the versions whose error response Kafka fills item by item, and how.
_ECHOES: dict[int, tuple[tuple[range, _Echo], ...]] = {
    # ProduceRequest.getErrorResponse: PartitionResponse(error): offsets and times unknown.
    ApiKey.PRODUCE: (
        (
            _ALL,
            _per_partition(
                ("topic_data", "responses", "name", "name"),
                ("partition_data", "partition_responses", "index", "index"),
                {"base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1},
            ),
        ),
    ),
    # FetchRequest.getErrorResponse: every partition with the error (FetchResponse.
    # partitionResponse), and the top-level error code where the version has one. Records
    # empty, never null: older librdkafka cannot parse a null record set.
    ApiKey.FETCH: (
        (
            _ALL,
            _per_partition(
                ("topics", "responses", "topic", "topic"),
                ("partitions", "partitions", "partition", "partition_index"),
                {
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": b"",
                },
            ),
        ),
    ),
    ApiKey.LIST_OFFSETS: (
        (
            _ALL,
            _per_partition(
                ("topics", "topics", "name", "name"),
                ("partitions", "partitions", "partition_index", "partition_index"),
                {"timestamp": -1, "offset": -1, "leader_epoch": -1},
            ),
        ),
    ),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (
        (
            _ALL,
            _per_partition(
                ("topics", "topics", "topic", "topic"),
                ("partitions", "partitions", "partition", "partition"),
                {"leader_epoch": -1, "end_offset": -1},
            ),
        ),
    ),
    # MetadataRequest.getErrorResponse: each topic asked for, with no partitions (none
    # for a request of all topics).
    ApiKey.METADATA: (
        (
            _ALL,
            _Echo(
                "topics",
                "topics",
                (("name", _name_or_empty), ("topic_id", _get("topic_id"))),
                fixed={"is_internal": False, "partitions": []},
            ),
        ),
    ),
    ApiKey.OFFSET_COMMIT: (
        (
            _ALL,
            _per_partition(
                ("topics", "topics", "name", "name"),
                ("partitions", "partitions", "partition_index", "partition_index"),
            ),
        ),
    ),
    # OffsetFetchRequest.getErrorResponse: per partition before v2, the top-level error
    # code from v2.
    ApiKey.OFFSET_FETCH: (
        (
            range(2),
            _per_partition(
                ("topics", "topics", "name", "name"),
                ("partition_indexes", "partitions", None, "partition_index"),
                {"committed_offset": -1, "committed_leader_epoch": -1, "metadata": ""},
            ),
        ),
    ),
    # FindCoordinatorRequest.getErrorResponse: per key from v4 (batched lookups).
    ApiKey.FIND_COORDINATOR: (
        (range(4, 0x8000), _Echo("coordinator_keys", "coordinators", (("key", _itself),))),
    ),
    ApiKey.DESCRIBE_GROUPS: ((_ALL, _Echo("groups", "groups", (("group_id", _itself),))),),
    ApiKey.CREATE_TOPICS: ((_ALL, _Echo("topics", "topics", (("name", _get("name")),))),),
    ApiKey.DELETE_TOPICS: (
        (range(6), _Echo("topic_names", "responses", (("name", _itself),))),
        (
            range(6, 0x8000),
            _Echo("topics", "responses", (("name", _get("name")), ("topic_id", _get("topic_id")))),
        ),
    ),
    ApiKey.CREATE_PARTITIONS: ((_ALL, _Echo("topics", "results", (("name", _get("name")),))),),
    ApiKey.DESCRIBE_CONFIGS: (
        (
            _ALL,
            _Echo(
                "resources",
                "results",
                (
                    ("resource_type", _get("resource_type")),
                    ("resource_name", _get("resource_name")),
                ),
                fixed={"configs": []},
            ),
        ),
    ),
    # ElectLeadersRequest.getErrorResponse: per partition (none for a request of all
    # partitions), and the top-level error code from v1.
    ApiKey.ELECT_LEADERS: (
        (
            _ALL,
            _per_partition(
                ("topic_partitions", "replica_election_results", "topic", "topic"),
                ("partitions", "partition_result", None, "partition_id"),
            ),
        ),
    ),
}


def error_response(
    api_key: int,
    version: int,
    error: ErrorCode,
    request: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """A response of this API and version that says `error` about `request` (its decoded
    body; None when it could not be decoded), or None when no such response can say it:
    then the only answer is to close the connection."""
    if api_key == ApiKey.API_VERSIONS:
        return api_versions_response(error)
    codec = response_codec(api_key, version)
    body = codec.new()
    fields = codec.spec.fields
    if _present(fields, "error_code", version):
        body["error_code"] = int(error)
    if request is not None:
        if api_key == ApiKey.PRODUCE and request.get("acks") == 0:
            return None  # Kafka's getErrorResponse: a producer wanting no answer gets none
        for versions, echo in _ECHOES.get(api_key, ()):
            if version in versions:
                try:
                    body[echo.response] = echo.build(request, int(error))
                except (KeyError, TypeError, AttributeError):
                    log.exception("could not list the items of a failed %s", ApiKey(api_key).name)
        if api_key == ApiKey.FETCH and _present(fields, "session_id", version):
            body["session_id"] = request.get("session_id", 0)
    if api_key == ApiKey.JOIN_GROUP and version >= 7:
        # JoinGroupRequest.getErrorResponse: no protocol name, null where it may be.
        body["protocol_name"] = None
    return body if _carries_error(fields, version, body) else None


def _present(fields: tuple[FieldSpec, ...], key: str, version: int) -> bool:
    return any(f.key == key and f.present_in(version) for f in fields)


def _carries_error(fields: tuple[FieldSpec, ...], version: int, body: Mapping[str, Any]) -> bool:
    """Whether a non-zero error code of `body` is in a field its version has."""
    for f in fields:
        if not f.present_in(version):
            continue
        value = body.get(f.key)
        if f.key == "error_code" and value:
            return True
        if f.fields and value:
            items = value if f.is_array else (value,)
            if any(
                isinstance(item, Mapping) and _carries_error(f.fields, version, item)
                for item in items
            ):
                return True
    return False

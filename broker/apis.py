"""Request handling (Kafka's KafkaApis): one method per API this broker speaks.

Controller requests are fenced here first by broker epoch (a request meant for this
broker's previous incarnation gets STALE_BROKER_EPOCH), then by controller epoch (in the
replica manager and here for UpdateMetadata). Handlers run on connection threads; the
controller is only ever asked through its event queue.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Collection, Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.admin_apis import AdminApis
from broker.authorized_operations import CLUSTER_OPERATIONS, NOT_ASKED, TOPIC_OPERATIONS
from broker.fetch_session import (
    DEFAULT_EVICTION_MS,
    DEFAULT_MAX_ENTRIES,
    CachedPartition,
    ChangeJournal,
    FetchContext,
    FetchSession,
    FetchSessionCache,
    PartitionData,
    PartitionRequest,
)
from broker.group_apis import GroupApis
from broker.log_limit import OncePer
from broker.metadata_cache import ZERO_UUID, MetadataCache, StaleControllerEpoch
from broker.replica_manager import Partition, RejectedRecords, ReplicaManager
from broker.state_change_log import StateChangeLog
from controller.controller import CONTROLLED_SHUTDOWN_APPLIED_WAIT_S, KafkaController
from groups.coordinator import OFFSETS_TOPIC
from storage import codecs
from storage.errors import (
    CorruptRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    StorageError,
    UnknownCompressionError,
)
from storage.legacy import (
    LegacyUnsupportedCompressionError,
    down_convert,
    produce_records,
)
from storage.log import PartitionLog, ReadInfo
from storage.records import (
    ATTR_COMPRESSION_MASK,
    Compression,
    entry_size,
)
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.paths import INTERNAL_TOPICS
from zkdata.znodes import LEADER_DURING_DELETE, TopicPartition

log = logging.getLogger(__name__)

_FETCH_SESSIONS_INIT = threading.Lock()
# How often an incremental fetch session's sweep looks at each of its partitions, besides
# the ones its requests list and those notified as changed (at most a quarter of
# replica.lag.time.max.ms, so a follower is always recorded on its live partitions).
_SESSION_RECHECK_MS = 5000
# A partition whose log cannot be read is logged at most once a minute per log.
_UNREADABLE_LOGGED = OncePer(60.0)
# An incremental fetch reads the partitions notified as changed instead of looking at
# every partition of its session while they are at most 1/_SCAN_COST_RATIO of it.
_SCAN_COST_RATIO = 4
# zstd batches came with Produce v7 and Fetch v10 (KIP-110).
_PRODUCE_ZSTD_VERSION = 7
# The exceptions Kafka 2.8's appendToLocalLog lists, answered with log start offset -1;
# every other failure of a leader's append carries the partition's (processFailedRecord).
_APPEND_ERRORS_WITHOUT_LOG_START = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
_FETCH_ZSTD_VERSION = 10
# KAFKA_STORAGE_ERROR came with Fetch v6: older fetches are told NOT_LEADER_OR_FOLLOWER.
_FETCH_LAST_VERSION_WITHOUT_STORAGE_ERROR = 5
# Record batches (magic 2) came with Produce v3 and Fetch v4 (KIP-98): before, messages of
# magic 0 (Produce and Fetch v0-v1) and 1 (Produce v2, Fetch v2-v3), converted here.
_PRODUCE_FIRST_BATCH_VERSION = 3
_FETCH_FIRST_BATCH_VERSION = 4
# Kafka 2.8's fetchMessages(hardMaxBytesLimit = versionId <= 2): KIP-74 came with v3.
_FETCH_LAST_HARD_LIMIT_VERSION = 2
_MAGIC_AT = 16  # a batch's magic byte, and the low byte of its attributes
_ATTRIBUTES_LOW_BYTE = 22
_VALID_ACKS = (-1, 0, 1)
# ListOffsets answers OFFSET_NOT_AVAILABLE from v5 (KIP-207), LEADER_NOT_AVAILABLE before.
_LIST_OFFSETS_NOT_AVAILABLE_VERSION = 5
# fetch.max.bytes's default (broker/config.py), for a handler made without a config.
DEFAULT_FETCH_MAX_BYTES = 55 * 1024 * 1024
# ListOffsets' replica ids that are no broker (Kafka's ListOffsetsRequest).
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
# The client id that may produce to internal topics (Kafka's AdminUtils.AdminClientId).
_ADMIN_CLIENT_ID = "__admin_client"
# ApiVersions v3+'s client software name and version (ApiVersionsRequest's pattern).
_SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class CloseConnection(Exception):
    """Raised by a handler: close the client's connection instead of answering (the
    message says why; it is logged)."""


@dataclass(frozen=True)
class Supported:
    min_version: int
    max_version: int


# What this broker answers, advertised in ApiVersions. Every version in a range is handled.
SUPPORTED: dict[ApiKey, Supported] = {
    ApiKey.PRODUCE: Supported(0, 9),
    ApiKey.FETCH: Supported(0, 12),
    ApiKey.LIST_OFFSETS: Supported(0, 6),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Supported(0, 4),
    ApiKey.FIND_COORDINATOR: Supported(0, 4),
    ApiKey.METADATA: Supported(0, 12),
    ApiKey.LEADER_AND_ISR: Supported(0, 7),
    ApiKey.STOP_REPLICA: Supported(0, 4),
    ApiKey.UPDATE_METADATA: Supported(0, 8),
    ApiKey.CONTROLLED_SHUTDOWN: Supported(0, 3),
    ApiKey.API_VERSIONS: Supported(0, 3),
    # Carried out by the controller's broker (broker/admin_apis.py), as in Kafka 2.8.
    ApiKey.CREATE_TOPICS: Supported(0, 7),
    ApiKey.DELETE_TOPICS: Supported(0, 6),
    ApiKey.CREATE_PARTITIONS: Supported(0, 3),
    ApiKey.ELECT_LEADERS: Supported(0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Supported(0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Supported(0, 0),
    ApiKey.DESCRIBE_CONFIGS: Supported(0, 4),
    # v0, Kafka 2.8's (KIP-700); v1 describes a KRaft cluster's controllers.
    ApiKey.DESCRIBE_CLUSTER: Supported(0, 0),
    # Consumer groups (broker/group_apis.py), as Kafka 2.8 serves them (JoinGroup and
    # SyncGroup up to KIP-559's protocol type and name); OffsetCommit and OffsetFetch
    # from v0, whose offsets are kept in ZooKeeper (Kafka 0.8's), not by the coordinator.
    ApiKey.JOIN_GROUP: Supported(0, 7),
    ApiKey.SYNC_GROUP: Supported(0, 5),
    ApiKey.HEARTBEAT: Supported(0, 4),
    ApiKey.LEAVE_GROUP: Supported(0, 4),
    ApiKey.OFFSET_COMMIT: Supported(0, 8),
    ApiKey.OFFSET_FETCH: Supported(0, 7),
    ApiKey.LIST_GROUPS: Supported(0, 4),
    ApiKey.DESCRIBE_GROUPS: Supported(0, 5),
}
# Served by the group APIs when the broker has them.
_GROUP_APIS = frozenset(
    {
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.LIST_GROUPS,
        ApiKey.DESCRIBE_GROUPS,
    }
)


class KafkaApis:
    def __init__(
        self,
        broker_id: int,
        metadata: MetadataCache,
        replicas: ReplicaManager,
        controller: KafkaController,
        state_log: StateChangeLog,
        broker_epoch: Callable[[], int],
        *,
        request_timeout_s: float = 30.0,
        metadata_wait_s: float = 0.0,
        on_live_leaders: Callable[[list[dict[str, Any]]], None] | None = None,
        admin: AdminApis | None = None,
        groups: GroupApis | None = None,
        registered: threading.Event | None = None,
        fetch_session_cache_slots: int = DEFAULT_MAX_ENTRIES,
        fetch_session_eviction_ms: int = DEFAULT_EVICTION_MS,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
    ) -> None:
        self.broker_id = broker_id
        # max.incremental.fetch.session.cache.slots, min.incremental.fetch.session.eviction.ms
        self.fetch_session_cache_slots = fetch_session_cache_slots
        self.fetch_session_eviction_ms = fetch_session_eviction_ms
        # fetch.max.bytes: the most a fetch is answered, whatever it asks for.
        self.fetch_max_bytes = fetch_max_bytes
        # Set once this process has registered (its broker epoch known): see
        # _stale_broker_epoch.
        self.registered = registered
        self.metadata = metadata
        self.replicas = replicas
        self.controller = controller
        self.state_log = state_log
        self.broker_epoch = broker_epoch
        self.request_timeout_s = request_timeout_s
        self.metadata_wait_s = metadata_wait_s
        self.on_live_leaders = on_live_leaders
        self.admin = admin
        self.groups = groups
        # Called once an UpdateMetadata is applied (brokers' addresses may have changed).
        self.on_metadata_updated: Callable[[], None] | None = None
        # Called with the topics an UpdateMetadata marked deleted (the group coordinator
        # drops their committed offsets, as Kafka's handleDeletedPartitions).
        self.on_topics_deleted: Callable[[list[str]], object] | None = None
        # Long-polling fetches wait on these (one lock): followers on `fetch_wakeup`, which
        # new data and partition state changes notify; consumers on `consumer_wakeup`,
        # which those and high watermark moves notify. A follower's fetch is not answered
        # for a high watermark move alone (Kafka's DelayedFetch waits for bytes too): it
        # learns it with its next records or when its long poll ends, so a round of
        # replication costs one wake-up per follower, not two.
        lock = threading.RLock()
        self.fetch_wakeup = threading.Condition(lock)
        self.consumer_wakeup = threading.Condition(lock)
        # What changed, for incremental fetches to look at (guarded by the lock above).
        self.fetch_changes = ChangeJournal()

    def supported(self, api_key: int, version: int) -> bool:
        s = SUPPORTED.get(ApiKey(api_key)) if api_key in ApiKey._value2member_map_ else None
        if s is not None and self.groups is None and api_key in _GROUP_APIS:
            return False
        return s is not None and s.min_version <= version <= s.max_version

    def handle(
        self,
        api_key: int,
        version: int,
        header: dict[str, Any],
        body: dict[str, Any],
        *,
        listener: str | None = None,
        client_host: str = "",
    ) -> dict[str, Any] | None:
        """The response body; ``listener`` names the listener the request came in on
        (None: the inter-broker one), ``client_host`` the client's address."""
        if api_key == ApiKey.METADATA:
            return self._handle_metadata(version, body, listener)
        if api_key == ApiKey.DESCRIBE_CLUSTER:
            return self._handle_describe_cluster(body, listener)
        groups = self.groups
        if groups is not None:
            if api_key == ApiKey.FIND_COORDINATOR:
                return groups.find_coordinator(version, body, listener)
            if api_key == ApiKey.JOIN_GROUP:
                return groups.join_group(version, body, header, client_host)
            if api_key in _GROUP_APIS:
                group_handler = getattr(groups, ApiKey(api_key).name.lower())
                answer: dict[str, Any] = group_handler(version, body, header)
                return answer
        handler = getattr(self, f"_handle_{ApiKey(api_key).name.lower()}")
        result: dict[str, Any] | None = handler(version, body, header)
        return result

    # --- client APIs --------------------------------------------------------------------

    def _handle_describe_cluster(
        self, body: dict[str, Any], listener: str | None
    ) -> dict[str, Any]:
        """The cluster id, the controller and the live brokers at their address on the
        request's listener, as this broker's Metadata answer gives them (any broker
        answers). Asked for, the cluster's authorized operations are every operation a
        cluster supports, as Kafka answers without an authorizer; else the schema's
        default, "not asked"."""
        known = self.metadata.metadata_response([], 12, listener)
        return {
            "throttle_time_ms": 0,
            "error_code": int(ErrorCode.NONE),
            "error_message": None,
            "cluster_id": known["cluster_id"] or "",
            "controller_id": known["controller_id"],
            "brokers": [
                {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                for b in known["brokers"]
            ],
            "cluster_authorized_operations": (
                CLUSTER_OPERATIONS
                if body.get("include_cluster_authorized_operations")
                else NOT_ASKED
            ),
        }

    def _handle_api_versions(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        if not api_versions_request_valid(version, body):
            # Kafka's getErrorResponse: the error and the throttle time, no API keys.
            return {
                "error_code": int(ErrorCode.INVALID_REQUEST),
                "api_keys": [],
                "throttle_time_ms": 0,
            }
        return api_versions_response(ErrorCode.NONE)

    def _handle_metadata(
        self, version: int, body: dict[str, Any], listener: str | None
    ) -> dict[str, Any]:
        """Brokers' addresses are those of the listener the request came in on, as
        Kafka answers: a client reaches the brokers the way it reached this one."""
        asked = metadata_asked(version, body.get("topics"))
        if asked.invalid is not None:
            log.info("Metadata v%d refused: %s", version, asked.invalid)
            return metadata_error_response(body.get("topics") or [], ErrorCode.INVALID_REQUEST)
        # A broker that started moments ago knows no broker and no topic until the
        # controller's first UpdateMetadata, and only some topics until the last request
        # of that full update. Answering from that cache (as Kafka 2.8 does from its empty
        # one) tells a client the cluster has no brokers and its topics do not exist:
        # librdkafka then forgets every broker and fails its queued messages as for a
        # deleted topic. So the request waits for that first update to be whole, within a
        # bound.
        informed = self.metadata.wait_first_update(self.metadata_wait_s)
        if not informed:
            log.info("answering Metadata before the first full UpdateMetadata was whole")
        names = asked.names
        unknown_ids: list[uuid.UUID] = []
        if asked.ids:
            # v12 by id (Kafka 3.1): each id known is answered as its topic, by name.
            known = self.metadata.topic_names(asked.ids)
            names = list(dict.fromkeys(known[i] for i in asked.ids if i in known))
            unknown_ids = [i for i in asked.ids if i not in known]
        response = self.metadata.metadata_response(names, version, listener)
        admin = self.admin
        # v4+ says whether the client wants unknown topics made (a consumer's
        # allow.auto.create.topics: the Java consumer's default is true, librdkafka's false).
        # A topic asked for by id existed: one gone since is not made again.
        if (
            not asked.ids
            and admin is not None
            and admin.auto_creates_topics
            and body.get("allow_auto_topic_creation", True)
        ):
            unknown = {
                t["name"]: t
                for t in response["topics"]
                if t["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            }
            # __consumer_offsets with its own settings, as Kafka's creatableTopic makes
            # it (a console consumer reading it before any group); __transaction_state
            # never (no transaction coordinator here).
            offsets = unknown.pop(OFFSETS_TOPIC, None)
            groups = self.groups
            if offsets is not None and groups is not None:
                code = groups.create_offsets_topic()
                # A write whose answer was lost may have landed (auto_create_topics).
                landed = code in (ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT)
                offsets["error_code"] = int(ErrorCode.LEADER_NOT_AVAILABLE if landed else code)
            for name in [n for n in unknown if n in INTERNAL_TOPICS]:
                del unknown[name]
            if unknown:
                for name, code in admin.auto_create_topics(list(unknown)).items():
                    unknown[name]["error_code"] = int(code)
        # Without an authorizer Kafka answers, when asked (v8+), every operation a topic
        # (each topic answered, found or not) and a cluster (v8-v10) supports.
        topic_operations = (
            TOPIC_OPERATIONS
            if version >= 8 and body.get("include_topic_authorized_operations")
            else NOT_ASKED
        )
        for topic in response["topics"]:
            topic["topic_authorized_operations"] = topic_operations
        # First, as Kafka lists them; no operations (Kafka's default), there is no topic.
        # Before the first full update is whole an id not known yet is not unknown: "not
        # available yet" (retriable), as for a name.
        missing = ErrorCode.UNKNOWN_TOPIC_ID if informed else ErrorCode.LEADER_NOT_AVAILABLE
        response["topics"][:0] = [
            _metadata_error_topic(None, topic_id, missing) for topic_id in unknown_ids
        ]
        response["cluster_authorized_operations"] = (
            CLUSTER_OPERATIONS
            if 8 <= version <= 10 and body.get("include_cluster_authorized_operations")
            else NOT_ASKED
        )
        return response

    # Fetch sessions (KIP-227), made on first use: see broker/fetch_session.py.
    _fetch_sessions: FetchSessionCache | None = None

    def _fetch_session_cache(self) -> FetchSessionCache:
        cache = self._fetch_sessions
        if cache is None:
            with _FETCH_SESSIONS_INIT:
                cache = self._fetch_sessions
                if cache is None:
                    cache = self._fetch_sessions = FetchSessionCache(
                        self.fetch_session_cache_slots, self.fetch_session_eviction_ms
                    )
        return cache

    def _handle_fetch(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        replica_id = body.get("replica_id", -1)
        deadline = time.monotonic() + max(0, body.get("max_wait_ms", 0)) / 1000
        fetch_data: dict[TopicPartition, PartitionRequest] = {}
        partitions = self.replicas.partitions
        for topic in body.get("topics", []):
            name = topic.get("topic")
            for fp in topic["partitions"]:
                tp = TopicPartition(name, fp["partition"])
                # The replica manager's own key object: a follower's session keeps every
                # partition it fetches, and a leader of 100,000 has two such sessions.
                p = partitions.get(tp)
                fetch_data[tp if p is None else p.topic_partition] = PartitionRequest.from_wire(fp)
        forgotten = [
            TopicPartition(ft["topic"], p)
            for ft in body.get("forgotten_topics_data") or []
            for p in ft["partitions"]
        ]
        # Before v7 there are no session fields: epoch -1 means a sessionless fetch.
        ctx = self._fetch_session_cache().new_context(
            body.get("session_id", 0),
            body.get("session_epoch", -1),
            fetch_data,
            forgotten,
            privileged=replica_id >= 0,
            replica_id=replica_id,
        )
        # Kafka 2.8's handleFetchRequest: at most the broker's fetch.max.bytes, and no
        # more than that asked for as min_bytes (a fetch would wait for bytes it could
        # never be answered).
        ctx.max_bytes = min(body.get("max_bytes", 0x7FFFFFFF), self.fetch_max_bytes)
        ctx.min_bytes = min(body.get("min_bytes", 1), ctx.max_bytes)
        ctx.zstd_readable = version >= _FETCH_ZSTD_VERSION or replica_id >= 0
        ctx.hard_max_bytes = version <= _FETCH_LAST_HARD_LIMIT_VERSION
        updates: dict[TopicPartition, PartitionData] = {}
        if ctx.error == ErrorCode.NONE:  # a session error is answered at once
            updates = self._fetch_and_wait(ctx, replica_id, deadline)
        result = ctx.respond(updates)
        fetch_offsets = {tp: req.fetch_offset for tp, req in fetch_data.items()}
        responses: dict[str, list[PartitionData]] = {}
        for tp, data in result.partitions:
            answer = data
            if (
                version <= _FETCH_LAST_VERSION_WITHOUT_STORAGE_ERROR
                and data["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
            ):
                # Kafka 2.8's maybeDownConvertStorageError: such a client may take the
                # code for an unknown (fatal) error; this one it retries after a metadata
                # refresh.
                answer = {**data, "error_code": int(ErrorCode.NOT_LEADER_OR_FOLLOWER)}
            if version < _FETCH_FIRST_BATCH_VERSION and data["records"]:
                answer = self._down_converted(
                    tp, answer, version, fetch_offsets.get(tp, 0), replica_id >= 0
                )
            responses.setdefault(tp.topic, []).append(answer)
        return {
            "throttle_time_ms": 0,
            "error_code": int(result.error),
            "session_id": result.session_id,
            "responses": [{"topic": t, "partitions": ps} for t, ps in responses.items()],
        }

    def _max_decompressed(self, tp: TopicPartition) -> int:
        """What a batch of ``tp`` may hold decompressed (its log's bound, else the one of
        the default max.message.bytes)."""
        p = self.replicas.partitions.get(tp)
        if p is None or p.log is None:
            return codecs.MAX_SIZE
        return p.log.config.max_decompressed_bytes

    def _down_converted(
        self,
        tp: TopicPartition,
        data: PartitionData,
        version: int,
        fetch_offset: int,
        follower: bool = False,
    ) -> PartitionData:
        """A Fetch v0-v3 answer's records as messages of magic 0 (v0-v1) or 1 (v2-v3), as
        Kafka 2.8's maybeConvertFetchedData converts them. A consumer's fetch of a topic
        with message.downconversion.enable=false is answered UNSUPPORTED_VERSION instead
        (a follower's is converted whatever it says), with no offsets, as Kafka's
        errorResponse. A batch that cannot be converted (zstd, which those versions never
        get from a zstd topic, first in the answer, or one that does not decode) answers
        the partition its error, no records; only the latter is logged (a zstd batch is
        no damage: Kafka traces it)."""
        if not follower:
            p = self.replicas.partitions.get(tp)
            if p is not None and p.log is not None and not p.log.config.downconversion_enabled:
                return {
                    **data,
                    "error_code": int(ErrorCode.UNSUPPORTED_VERSION),
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "records": b"",
                }
        to_magic = 0 if version <= 1 else 1
        try:
            records = down_convert(
                data["records"], to_magic, fetch_offset, max_size=self._max_decompressed(tp)
            )
        except LegacyUnsupportedCompressionError as exc:
            error = ErrorCode.of(exc.error_code)
            return {**data, "error_code": int(error), "records": b""}
        except Exception as exc:
            p = self.replicas.partitions.get(tp)
            if p is None:
                error = read_error_code(exc)
            else:
                error = unreadable_partition(tp, p, "down-conversion", fetch_offset, exc)
            return {**data, "error_code": int(error), "records": b""}
        return {**data, "records": records}

    def _fetch_and_wait(
        self, ctx: FetchContext, replica_id: int, deadline: float
    ) -> dict[TopicPartition, PartitionData]:
        """Read the fetch's partitions; with nothing to return (fewer bytes readable than
        min_bytes, when that is over 1, as _Readable counts them; none, when it is 1) and
        no error, wait out max_wait_ms (long polling, as Kafka does; min_bytes 0 never
        waits), reading (and counting) again whenever partition state changes.
        A follower's position is recorded once per round, after the wait: for the
        partitions it lists or is sent records of, and through its session's clock for
        the others (at the log end, positions unmoved), so the ISR sees it fetching while
        the wire carries nothing; every position is recorded again after a look at every
        partition."""
        # Reading under the condition's lock: a change notified meanwhile is not missed.
        with self.fetch_wakeup:
            updates, answer_now, positions = self._read_fetch(ctx, replica_id)
            if replica_id >= 0 and ctx.fetch_data and not answer_now:
                # The partitions this fetch lists moved forward: record that before the long
                # poll, as Kafka does, or producers waiting for acks=all would wait out
                # max_wait_ms for the high watermark the follower's progress allows.
                listed = [
                    (p, offset) for p, offset in positions if p.topic_partition in ctx.fetch_data
                ]
                if listed:
                    self.fetch_wakeup.release()
                    try:
                        self.replicas.record_follower_fetches(replica_id, listed)
                    finally:
                        self.fetch_wakeup.acquire()
                    # A change notified while the lock was given up must not be slept
                    # through: look again before waiting.
                    updates, answer_now, positions = self._read_fetch(ctx, replica_id, updates)
            wakeup = self.fetch_wakeup if replica_id >= 0 else self.consumer_wakeup
            changes = self.fetch_changes
            seen = changes.generation
            # A read of every partition listed (no session, or its first fetch) follows
            # only a change that may concern one of them, as Kafka's purgatory keys a
            # waiting fetch by its partitions: every librdkafka consumer fetches without a
            # session, and each append anywhere re-read all of each one's partitions.
            watched = None if ctx.session is not None and ctx.incremental else ctx.fetch_data
            while not answer_now:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not wakeup.wait(remaining):
                    # Out of time: answer with what changed meanwhile without waking this
                    # fetch (a follower's high watermark).
                    if _changed_since(changes, seen, watched):
                        updates, _, positions = self._read_fetch(ctx, replica_id, updates)
                    break
                concerned = _changed_since(changes, seen, watched)
                seen = changes.generation
                if concerned:
                    updates, answer_now, positions = self._read_fetch(ctx, replica_id, updates)
        session = ctx.session
        if replica_id >= 0 and session is not None and ctx.incremental:
            self.replicas.record_follower_fetches(replica_id, positions, session.clock)
            session.positions_unrecorded = False
            session.swept_unrecorded.clear()
        elif positions:
            self.replicas.record_follower_fetches(
                replica_id, positions, None if session is None else session.clock
            )
        return updates

    def _read_fetch(
        self,
        ctx: FetchContext,
        replica_id: int,
        again: Collection[TopicPartition] | None = None,
    ) -> tuple[dict[TopicPartition, PartitionData], bool, list[tuple[Partition, int]]]:
        """(partitions to answer, whether to answer without waiting, follower positions).
        `again`: for a read after the request's first, the partitions an earlier read
        found something to say about (an incremental read looks at them again, and at
        what changed since, not at what the request lists)."""
        if ctx.session is not None and ctx.incremental:
            return self._read_session(ctx, replica_id, again)
        updates: dict[TopicPartition, PartitionData] = {}
        positions: list[tuple[Partition, int]] = []
        errored = False
        readable = _Readable(ctx.min_bytes)
        # With min_bytes 1 the bytes read tell (followers, every round): nothing to count.
        counted = readable if ctx.min_bytes > 1 else None
        budget = _ByteBudget(ctx.max_bytes, hard=ctx.hard_max_bytes)
        follower = replica_id >= 0
        for tp, req in ctx.fetch_data.items():
            error, p = self._fetched_partition(tp, req.current_leader_epoch)
            updates[tp] = data = _partition_data(
                tp,
                error,
                p,
                req.fetch_offset,
                budget,
                req.max_bytes,
                follower,
                ctx.zstd_readable,
                follower and p is not None and replica_id not in p.followers,
                counted,
                req.last_fetched_epoch,
            )
            diverged = "diverging_epoch" in data
            if p is not None and follower and not diverged:
                positions.append((p, req.fetch_offset))
            if data["error_code"] or diverged:
                # fetchMessages answers a diverging epoch at once too (hasDivergingEpoch).
                errored = True
            elif records := data["records"]:
                readable.read += len(records)
        # A fetch of no partition (a consumer closing its fetch session, one forgetting
        # its last partition) has nothing to wait for: Kafka's fetchInfos.isEmpty.
        return updates, errored or not ctx.fetch_data or readable.enough(), positions

    def _read_session(
        self, ctx: FetchContext, replica_id: int, again: Collection[TopicPartition] | None
    ) -> tuple[dict[TopicPartition, PartitionData], bool, list[tuple[Partition, int]]]:
        """An incremental fetch. Read are the partitions the request lists, those whose
        last answer was an error and those with a last fetched epoch (or, reading again,
        `again`), those the change journal
        names since the session last looked, and those of the session's sweep due now
        that may have something to say: the sweep looks (cheaply) at each partition once
        an interval, a part each read, so changes nobody notifies (a log start offset
        moved by retention) are seen, and every follower position is recorded. Every
        partition is looked at in one pass instead when the journal no longer knows what
        changed, or when that is a large part of the session. The follower's positions
        are those of the looks, kept up to date with what the requests list."""
        session = ctx.session
        assert session is not None
        follower = replica_id >= 0
        now = _now_ms()
        journal = self.fetch_changes
        generation = journal.generation
        interval = min(_SESSION_RECHECK_MS, self.replicas.replica_lag_time_max_ms // 4)
        with session.lock:
            cached = session.partitions
            maybe: list[CachedPartition] | None = None
            if not session.look_at_all:
                changed = journal.since(session.checked_generation)
                if changed is not None:
                    if again is None:
                        # Errors go out each time, and so does a divergence, which
                        # only a read finds (those with a last fetched epoch).
                        looks = dict.fromkeys(
                            (*ctx.fetch_data, *session.errored, *session.last_fetched_epochs)
                        )
                    else:
                        looks = dict.fromkeys(again)
                    more = len(looks)
                    looks.update(dict.fromkeys(changed))
                    # Reading a partition costs more than the scan's look at it (though a
                    # scan also records every position).
                    if (len(looks) - more) * _SCAN_COST_RATIO <= len(cached):
                        swept = session.sweep_due(now, interval)
                        if swept:
                            looks.update(
                                (cp.topic_partition, None)
                                for cp in self._look(swept, follower, session.last_fetched_epochs)
                            )
                            if follower:
                                session.swept_unrecorded += swept
                        maybe = [cp for tp in looks if (cp := cached.get(tp)) is not None]
            if maybe is None:
                maybe = self._scan_session(session, follower)
                session.look_at_all = False
                session.restart_sweep(now)
                session.positions_unrecorded = follower
            session.checked_generation = generation
            updates: dict[TopicPartition, PartitionData] = {}
            answer_now = False
            readable = _Readable(ctx.min_bytes)
            counted = readable if ctx.min_bytes > 1 else None
            budget = _ByteBudget(ctx.max_bytes, hard=ctx.hard_max_bytes)
            epochs = session.last_fetched_epochs
            for cp in maybe:
                tp = cp.topic_partition
                error, p = self._fetched_partition(tp, cp.current_leader_epoch)
                data = _partition_data(
                    tp,
                    error,
                    p,
                    cp.fetch_offset,
                    budget,
                    cp.max_bytes,
                    follower,
                    ctx.zstd_readable,
                    follower and p is not None and replica_id not in p.followers,
                    counted,
                    epochs.get(tp, -1) if epochs else -1,
                )
                diverged = "diverging_epoch" in data
                if follower:
                    # A diverged follower's offset is no position in this log: not
                    # recorded (Kafka's updateFollowerFetchState, KAFKA-13141).
                    cp.partition = None if diverged else p
                if cp.maybe_update_response(data, False):
                    updates[tp] = data
                    # A follower waits for records (or an error), not a high watermark;
                    # a consumer asking for more than a byte, for that many.
                    if data["error_code"] or diverged:
                        answer_now = True
                    elif records := data["records"]:
                        readable.read += len(records)
                    elif not follower and ctx.min_bytes <= 1:
                        answer_now = True
            if readable.enough():
                answer_now = True
            if budget.ran_out:
                # Partitions with records left out for max_bytes may have been notified
                # before this look: look at every partition next time, not just what
                # changes.
                session.look_at_all = True
            if session.positions_unrecorded:
                # This round looked at every partition: record every position (a follower
                # back at the leader's log end rejoins the ISR without listing anything).
                positions = session.positions()
            else:
                # The listed ones, and the ones answered with records (behind the log end),
                # are recorded one by one; the session's clock stands for the others, at the
                # log end with their positions unmoved. That gives Kafka's caught-up times
                # exactly (tests/unit/test_follower_clock.py).
                answered = (tp for tp, data in updates.items() if data["records"])
                listed = dict.fromkeys((*ctx.fetch_data, *answered))
                positions = [pos for tp in listed if (pos := session.position(tp)) is not None]
                # And the ones the sweep looked at (thousands a round at 100,000: read
                # straight from the session's entries).
                looked = session.swept_unrecorded
                if looked and listed:
                    looked = [cp for cp in looked if cp.topic_partition not in listed]
                positions += [(p, cp.fetch_offset) for cp in looked if (p := cp.partition)]
        return updates, answer_now, positions

    def _fetched_partition(
        self, tp: TopicPartition, current_leader_epoch: int
    ) -> tuple[ErrorCode, Partition | None]:
        """A fetched partition, as the replica manager has it, unless the metadata cache
        does not list it: Kafka 2.8's handleFetchRequest answers that
        UNKNOWN_TOPIC_OR_PARTITION, a follower's fetch too, before anything is read (a
        topic the controller's UpdateMetadata marked deleted is not read at its leader
        while the StopReplica is on its way)."""
        if self.metadata.partition(tp.topic, tp.partition) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return self.replicas.leader_partition(tp, current_leader_epoch)

    def _scan_session(self, session: FetchSession, follower: bool) -> list[CachedPartition]:
        """A look at every partition of the session (see _look)."""
        return self._look(session.partitions.values(), follower, session.last_fetched_epochs)

    def _look(
        self,
        cps: Iterable[CachedPartition],
        follower: bool,
        epochs: Container[TopicPartition] = (),
    ) -> list[CachedPartition]:
        """A cheap look at these partitions of a session: the ones that may have
        something to say, and (for a follower) its position in each of the others.
        Those with a last fetched epoch (`epochs`) are read: only a read tells whether
        the fetcher's log diverged, and a diverged position is not recorded."""
        partitions = self.replicas.partitions
        me = self.broker_id
        maybe: list[CachedPartition] = []
        topic: str | None = None
        listed: Container[int] = ()
        for cp in cps:
            tp = cp.topic_partition
            p = partitions.get(tp)
            if tp.topic != topic:
                topic = tp.topic
                listed = self.metadata.partition_indexes(topic)
            if (
                p is None
                or tp.partition not in listed  # UNKNOWN_TOPIC_OR_PARTITION (_fetched_partition)
                or p.stale
                or p.leader != me
                or (cp.current_leader_epoch >= 0 and cp.current_leader_epoch != p.leader_epoch)
            ):
                cp.partition = None
                maybe.append(cp)  # an error to report
                continue
            if epochs and tp in epochs:
                maybe.append(cp)
                continue
            if follower:
                cp.partition = p
            # Must match _partition_data: the last stable offset is the high watermark
            # (no transactions).
            readable_end = p.log_end_offset if follower else p.high_watermark
            hw = p.high_watermark
            if (
                hw != cp.high_watermark
                or hw != cp.last_stable_offset
                or cp.log_start_offset != p.log_start_offset
                or cp.fetch_offset < readable_end
                or cp.fetch_offset > p.log_end_offset  # OFFSET_OUT_OF_RANGE to report
            ):
                maybe.append(cp)
        return maybe

    def _handle_produce(
        self, version: int, body: dict[str, Any], header: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Append each partition's batches as its leader; answer after the local append
        (acks=1), after every ISR member has them (acks=all: the high watermark passed
        them), or not at all (acks=0). Internal topics take a client's batches only from
        the admin client id (the group coordinator appends its own directly)."""
        acks = body["acks"]
        internal_allowed = header.get("client_id") == _ADMIN_CLIENT_ID
        timeout_s = max(0, body.get("timeout_ms", 30_000)) / 1000
        deadline = time.monotonic() + timeout_s
        answers: dict[TopicPartition, dict[str, Any]] = {}
        waiting: list[tuple[TopicPartition, Any, int]] = []
        # A partition listed twice is appended once, with its last entry, and answered
        # once, as Kafka's handleProduceRequest builds a map (both were appended).
        requested: dict[TopicPartition, Any] = {}
        for topic in body["topic_data"]:
            for pd in topic["partition_data"]:
                requested[TopicPartition(topic["name"], pd["index"])] = pd["records"]
        # Kafka 2.8's handleProduceRequest validates every partition before appending any:
        # a batch naming no codec before v7 fails the request whole, nothing appended
        # (_check_produce_records raises).
        invalid: dict[TopicPartition, tuple[ErrorCode, str] | None] = {}
        for tp, records in requested.items():
            if self.metadata.partition(tp.topic, tp.partition) is None:
                # Kafka 2.8's handleProduceRequest looks in its metadata cache first: a
                # topic the controller's UpdateMetadata marked deleted (leader -2) takes
                # no batch, though its leader has not had its StopReplica yet.
                answers[tp] = _produce_answer(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            elif version >= _PRODUCE_FIRST_BATCH_VERSION or records is None:
                # Kafka 2.8's ProduceRequest.validateRecords checks versions 3 and up: the
                # log's reading of a v0-v2 message set is all there is (produce_records).
                invalid[tp] = _check_produce_records(version, records)
            else:
                invalid[tp] = None
        for tp, records in requested.items():
            if tp not in invalid:
                continue  # answered above
            refusal = invalid[tp]
            if refusal is not None:
                answers[tp] = _produce_answer(tp, *refusal)
                continue
            legacy = version < _PRODUCE_FIRST_BATCH_VERSION and records is not None
            if acks not in _VALID_ACKS:
                # Kafka's appendRecords appends nothing and answers every partition so
                # (librdkafka lets request.required.acks be up to 1000).
                answers[tp] = _produce_answer(
                    tp, ErrorCode.INVALID_REQUIRED_ACKS, f"acks {acks} is not -1, 0 or 1"
                )
                continue
            if tp.topic in INTERNAL_TOPICS and not internal_allowed:
                # Kafka's appendToLocalLog: __consumer_offsets holds the coordinator's
                # records, which a client's could corrupt.
                answers[tp] = _produce_answer(
                    tp,
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Cannot append to internal topic {tp.topic}",
                )
                continue
            appended = records
            if legacy:
                # Kafka 2.8's LogValidator converts messages of magic 0 and 1 to a record
                # batch (message.format.version 2.8), which is then appended as any.
                try:
                    appended = produce_records(records, max_size=self._max_decompressed(tp))
                except StorageError as e:
                    error = ErrorCode.of(e.error_code)
                    answers[tp] = _produce_answer(
                        tp, error, str(e), log_start_offset=self._failed_log_start(tp, error)
                    )
                    continue
            try:
                error, p, info, message = self.replicas.append_as_leader(tp, appended, acks)
            except Exception:
                # As Kafka's appendToLocalLog (case t: Throwable): this partition's error
                # (no message, as there), logged; the partitions appended before it must
                # not be told they failed (their producers would write them again).
                log.exception("append to %s failed", tp)
                error = ErrorCode.UNKNOWN_SERVER_ERROR
                answers[tp] = _produce_answer(
                    tp, error, None, log_start_offset=self._failed_log_start(tp, error)
                )
                continue
            if isinstance(message, RejectedRecords) and p is not None:
                # Kafka's appendToLocalLog answers a RecordValidationException with its
                # record errors and the log start offset (processFailedRecord).
                answers[tp] = _produce_answer(
                    tp, error, message, log_start_offset=p.log_start_offset
                )
                answers[tp]["record_errors"] = [
                    {"batch_index": index, "batch_index_error_message": why}
                    for index, why in message.record_errors
                ]
                continue
            if info is None or p is None:
                answers[tp] = _produce_answer(
                    tp, error, message, log_start_offset=self._failed_log_start(tp, error)
                )
                continue
            answers[tp] = _produce_answer(
                tp,
                ErrorCode.NONE,
                None,
                info.first_offset,
                info.log_append_time,
                info.log_start_offset,
            )
            if acks == -1:
                waiting.append((tp, p, info.last_offset))
        if acks == 0:
            refused = [a for a in answers.values() if a["error_code"] != ErrorCode.NONE]
            if refused:
                # No answer to carry the error: close the connection, as Kafka does, so
                # the producer notices (and refreshes its metadata) instead of sending on.
                errors = sorted({ErrorCode(a["error_code"]).name for a in refused})
                raise CloseConnection(f"acks=0 produce refused ({', '.join(errors)})")
            return None  # the producer asked for no answer
        for tp, p, last_offset in waiting:
            error = self.replicas.wait_for_replication(
                p, last_offset, max(0.0, deadline - time.monotonic())
            )
            if error != ErrorCode.NONE:
                answers[tp]["error_code"] = int(error)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in requested:  # in the request's order
            by_topic.setdefault(tp.topic, []).append(answers[tp])
        return {
            "responses": [{"name": t, "partition_responses": ps} for t, ps in by_topic.items()],
            "throttle_time_ms": 0,
        }

    def _failed_log_start(self, tp: TopicPartition, error: ErrorCode) -> int:
        """The log start offset a failed append's answer carries: Kafka 2.8's
        appendToLocalLog gives the partition's (processFailedRecord: its leader log's, -1
        where this broker does not lead it) for every failure but those it lists."""
        if error == ErrorCode.NONE or error in _APPEND_ERRORS_WITHOUT_LOG_START:
            return -1
        p = self.replicas.partitions.get(tp)
        if p is None or p.log is None or p.leader != self.replicas.broker_id:
            return -1
        return p.log.log_start_offset

    def _handle_list_offsets(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        """Earliest (-2), latest (-1: the high watermark, what a consumer can read) or the
        first offset at or after a timestamp.

        As Kafka 2.8's handleListOffsetRequestV1AndAbove: only a consumer (replica id -1)
        is bounded by the high watermark and told to retry while it lags; any other id
        reads up to the log end, and the debugging id (-2) is answered by a follower too.
        """
        replica_id = body.get("replica_id", CONSUMER_REPLICA_ID)
        from_client = replica_id == CONSUMER_REPLICA_ID
        leader_only = replica_id != DEBUGGING_REPLICA_ID
        if version == 0:
            return self._list_offsets_v0(body, from_client, leader_only)
        duplicates = duplicate_partitions(body["topics"])
        topics = []
        for topic in body["topics"]:
            parts = []
            for lp in topic["partitions"]:
                tp = TopicPartition(topic["name"], lp["partition_index"])
                if tp in duplicates:
                    # Every entry of a partition listed twice, as Kafka 2.8 answers.
                    error, p = ErrorCode.INVALID_REQUEST, None
                else:
                    current_epoch = lp.get("current_leader_epoch", -1)
                    error, p = self.replicas.leader_partition(tp, current_epoch, leader_only)
                answer: dict[str, Any] = {
                    "partition_index": tp.partition,
                    "error_code": int(error),
                    "timestamp": -1,
                    "offset": -1,
                    "leader_epoch": -1,
                }
                if version < 4:
                    # No leader epoch in the answer before v4: encoding one would fail.
                    del answer["leader_epoch"]
                if p is not None and p.log is not None:
                    requested = lp["timestamp"]
                    readable_end = p.high_watermark if from_client else p.log_end_offset
                    # KIP-207: a new leader's high watermark may lag where its epoch began
                    # (it learns the followers' positions only as they fetch): a client
                    # is told to retry rather than given a lagging offset (Kafka's
                    # fetchOffsetForTimestamp; OFFSET_NOT_AVAILABLE is v5's).
                    lagging = from_client and p.epoch_start_offset > readable_end
                    not_available = int(
                        ErrorCode.OFFSET_NOT_AVAILABLE
                        if version >= _LIST_OFFSETS_NOT_AVAILABLE_VERSION
                        else ErrorCode.LEADER_NOT_AVAILABLE
                    )
                    if requested == -2:
                        answer["offset"], epoch = p.log.earliest_offset_and_epoch()
                        if version >= 4:
                            answer["leader_epoch"] = epoch
                    elif lagging and requested == -1:
                        answer["error_code"] = not_available
                    elif requested == -1:
                        answer["offset"] = readable_end
                        if version >= 4:
                            answer["leader_epoch"] = p.leader_epoch
                    else:
                        try:
                            found = p.log.offset_for_timestamp(requested)
                        except KafkaStorageError:  # its log directory failed (reported)
                            answer["error_code"] = int(ErrorCode.KAFKA_STORAGE_ERROR)
                            found = None
                        except Exception as exc:
                            # A batch damaged on disk, or a bug: this partition's error,
                            # the others answered (Kafka 2.8 catches per partition).
                            code = unreadable_partition(tp, p, "offset lookup", requested, exc)
                            answer["error_code"] = int(code)
                            found = None
                        if found is not None and found.offset < readable_end:
                            answer.update(timestamp=found.timestamp, offset=found.offset)
                            if version >= 4:
                                answer["leader_epoch"] = found.leader_epoch
                        elif lagging and answer["error_code"] == ErrorCode.NONE:
                            # None found below the high watermark: it may be above it.
                            answer["error_code"] = not_available
                parts.append(answer)
            topics.append({"name": topic["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    def _list_offsets_v0(
        self, body: dict[str, Any], from_client: bool, leader_only: bool
    ) -> dict[str, Any]:
        """ListOffsets v0 (clients before Kafka 0.10.1, librdkafka with
        broker.version.fallback=0.9.0), as Kafka 2.8's handleListOffsetRequestV0 answers
        each entry: the log's offsets before a time (PartitionLog.legacy_offsets_before),
        a consumer's those up to the high watermark, led by it if any was above
        (Partition.legacyFetchOffsetsForTimestamp)."""
        topics = []
        for topic in body["topics"]:
            parts = []
            for lp in topic["partitions"]:
                tp = TopicPartition(topic["name"], lp["partition_index"])
                error, p = self.replicas.leader_partition(tp, -1, leader_only)
                offsets: list[int] = []
                if p is not None and p.log is not None:
                    offsets = p.log.legacy_offsets_before(lp["timestamp"], lp["max_num_offsets"])
                    hw = p.high_watermark
                    if from_client and any(o > hw for o in offsets):
                        offsets = [hw, *(o for o in offsets if o <= hw)]
                parts.append(
                    {
                        "partition_index": tp.partition,
                        "error_code": int(error),
                        "old_style_offsets": offsets,
                    }
                )
            topics.append({"name": topic["name"], "partitions": parts})
        return {"topics": topics}

    def _handle_offset_for_leader_epoch(
        self, _version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        """KIP-101: where a leader epoch ended in this leader's log, so a follower (or a
        consumer) can truncate exactly where its log diverged."""
        topics = []
        for topic in body["topics"]:
            parts = []
            for op in topic["partitions"]:
                tp = TopicPartition(topic["topic"], op["partition"])
                error, p = self.replicas.leader_partition(tp, op.get("current_leader_epoch", -1))
                epoch, end_offset = -1, -1
                if p is not None and p.log is not None:
                    epoch, end_offset = p.log.end_offset_for_epoch(op["leader_epoch"])
                parts.append(
                    {
                        "error_code": int(error),
                        "partition": tp.partition,
                        "leader_epoch": epoch,
                        "end_offset": end_offset,
                    }
                )
            topics.append({"topic": topic["topic"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    def _handle_find_coordinator(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        """A broker made without a group coordinator (a test's): every coordinator lookup
        is answered, correctly, with COORDINATOR_NOT_AVAILABLE, which clients retry
        quietly. Brokers answer through their group APIs."""
        error = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        message = "this broker runs no group coordinator"
        if version < 4:
            return {
                "throttle_time_ms": 0,
                "error_code": error,
                "error_message": message,
                "node_id": -1,
                "host": "",
                "port": -1,
            }
        return {
            "throttle_time_ms": 0,
            "coordinators": [
                {
                    "key": key,
                    "node_id": -1,
                    "host": "",
                    "port": -1,
                    "error_code": error,
                    "error_message": message,
                }
                for key in body.get("coordinator_keys", [])
            ],
        }

    # --- admin (the controller's broker carries them out) ------------------------------

    def _admin(self) -> AdminApis:
        if self.admin is None:
            raise CloseConnection("this broker was started without the admin APIs")
        return self.admin

    def _handle_create_topics(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        return self._admin().create_topics(version, body)

    def _handle_delete_topics(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        return self._admin().delete_topics(version, body)

    def _handle_create_partitions(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        return self._admin().create_partitions(version, body)

    def _handle_describe_configs(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        return self._admin().describe_configs(version, body)

    def _handle_elect_leaders(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        return self._admin().elect_leaders(version, body)

    def _handle_alter_partition_reassignments(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        return self._admin().alter_partition_reassignments(version, body)

    def _handle_list_partition_reassignments(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        return self._admin().list_partition_reassignments(version, body)

    # --- controller to broker -----------------------------------------------------------

    def _stale_broker_epoch(self, api: str, body: dict[str, Any]) -> bool:
        requested = body.get("broker_epoch", -1)
        current = self.broker_epoch()
        if requested != -1 and current == -1 and self.registered is not None:
            # Not registered yet (a restart waits for its earlier incarnation's
            # registration to expire): a controller cannot know this process's epoch, so
            # the request is the earlier incarnation's, unless the registration is being
            # made this instant. Kafka processes no request before it registers: wait for
            # it, then compare.
            self.registered.wait(self.request_timeout_s)
            current = self.broker_epoch()
        if requested != -1 and (requested < current or current == -1):
            log.info(
                "%s from controller %d carries broker epoch %d, older than ours (%d): refused",
                api,
                body["controller_id"],
                requested,
                current,
            )
            self.state_log.request_rejected(
                api,
                body["controller_id"],
                body["controller_epoch"],
                requested,
                "STALE_BROKER_EPOCH",
            )
            return True
        return False

    def _handle_leader_and_isr(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        if version < 2:
            # v0/v1 carry partitions ungrouped: group them as later versions do.
            grouped: dict[str, list[dict[str, Any]]] = {}
            for ps in body.get("ungrouped_partition_states", []):
                grouped.setdefault(ps["topic_name"], []).append(ps)
            body["topic_states"] = [
                {"topic_name": t, "partition_states": ps} for t, ps in grouped.items()
            ]
        if self._stale_broker_epoch("LeaderAndIsr", body):
            return _leader_and_isr_refused(version, body, ErrorCode.STALE_BROKER_EPOCH)
        if self.on_live_leaders is not None:
            self.on_live_leaders(body.get("live_leaders", []))
        response = self.replicas.become_leader_or_follower(body)
        if response["error_code"] and not response["topics"]:
            # Refused whole (an older controller's).
            return _leader_and_isr_refused(version, body, ErrorCode(response["error_code"]))
        if version >= 5:
            return response
        # v0-v4 answer per partition, ungrouped, with topic names.
        return {
            "error_code": response["error_code"],
            "partition_errors": [
                {
                    "topic_name": ts["topic_name"],
                    "partition_index": pe["partition_index"],
                    "error_code": pe["error_code"],
                }
                for ts, te in zip(body["topic_states"], response["topics"], strict=False)
                for pe in te["partition_errors"]
            ],
        }

    def _update_metadata_from_stale_controller(self, body: dict[str, Any]) -> dict[str, Any]:
        self.state_log.request_rejected(
            "UpdateMetadata",
            body["controller_id"],
            body["controller_epoch"],
            body.get("broker_epoch", -1),
            "STALE_CONTROLLER_EPOCH",
        )
        return {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH)}

    def _handle_update_metadata(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        if self._stale_broker_epoch("UpdateMetadata", body):
            return {"error_code": int(ErrorCode.STALE_BROKER_EPOCH)}
        if not self.replicas.check_controller_epoch(body["controller_epoch"]):
            return self._update_metadata_from_stale_controller(body)
        if "topic_states" not in body or not body["topic_states"]:
            grouped: dict[str, list[dict[str, Any]]] = {}
            for ps in body.get("ungrouped_partition_states", []):
                grouped.setdefault(ps["topic_name"], []).append(ps)
            body["topic_states"] = [
                {"topic_name": t, "partition_states": ps} for t, ps in grouped.items()
            ]
        if version == 0:
            # v0 gives each live broker one address, PLAINTEXT (Kafka's UpdateMetadataRequest
            # makes it the broker's one endpoint).
            for b in body.get("live_brokers", []):
                b["endpoints"] = [
                    {
                        "host": b.get("v0_host", ""),
                        "port": b.get("v0_port", 0),
                        "listener": "PLAINTEXT",
                        "security_protocol": 0,
                    }
                ]
        try:
            deleted = self.metadata.update(body)
        except StaleControllerEpoch:
            # A newer controller's update was applied since the check above.
            return self._update_metadata_from_stale_controller(body)
        unlisted = [
            TopicPartition(ts["topic_name"], ps["partition_index"])
            for ts in body["topic_states"]
            for ps in ts.get("partition_states", [])
            if ps["leader"] == LEADER_DURING_DELETE
        ]
        if unlisted:
            # Fetch sessions look at what changed: these are UNKNOWN_TOPIC_OR_PARTITION
            # from now on (_fetched_partition), answered at their next fetch.
            self.wake_fetches(partitions=unlisted)
        if deleted:
            log.info("topics deleted: %s", deleted)
            if self.on_topics_deleted is not None:
                try:
                    self.on_topics_deleted(deleted)
                except Exception:  # the metadata is applied; the offsets expire in time
                    log.exception("dropping the committed offsets of %s failed", deleted)
        if self.on_metadata_updated is not None:
            self.on_metadata_updated()
        return {"error_code": 0}

    def _handle_stop_replica(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        if self._stale_broker_epoch("StopReplica", body):
            return {"error_code": int(ErrorCode.STALE_BROKER_EPOCH), "partition_errors": []}
        if version < 3:
            delete = body.get("delete_partitions", False)
            states = []
            for t in body.get("topics", []):
                states.append(
                    {
                        "topic_name": t["name"],
                        "partition_states": [
                            {"partition_index": p, "leader_epoch": -1, "delete_partition": delete}
                            for p in t["partition_indexes"]
                        ],
                    }
                )
            for p in body.get("ungrouped_partitions", []):
                states.append(
                    {
                        "topic_name": p["topic_name"],
                        "partition_states": [
                            {
                                "partition_index": p["partition_index"],
                                "leader_epoch": -1,
                                "delete_partition": delete,
                            }
                        ],
                    }
                )
            body["topic_states"] = states
        return self.replicas.stop_replicas(body)

    def _handle_controlled_shutdown(
        self, _version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        done = threading.Event()
        answer: dict[str, Any] = {}

        def reply(code: int, remaining: list[TopicPartition]) -> None:
            answer["error_code"] = code
            answer["remaining_partitions"] = [
                {"topic_name": tp.topic, "partition_index": tp.partition} for tp in remaining
            ]
            done.set()

        self.controller.controlled_shutdown(body["broker_id"], body.get("broker_epoch", -1), reply)
        # The controller answers once its work is done, as Kafka's, and then once the
        # brokers applied the moves (up to CONTROLLED_SHUTDOWN_APPLIED_WAIT_S more): that
        # wait is no timeout, the moves are made.
        if not done.wait(self.request_timeout_s + CONTROLLED_SHUTDOWN_APPLIED_WAIT_S):
            return {"error_code": int(ErrorCode.REQUEST_TIMED_OUT), "remaining_partitions": []}
        return answer

    def wake_fetches(
        self, followers: bool = True, partitions: Collection[TopicPartition] | None = None
    ) -> None:
        """New data or a partition state change (`followers`), or only a high watermark
        move, in `partitions` (None: any): wake the long-polling fetches it may give
        something to say."""
        # Recorded under the lock the waiters read under: a fetch that starts right after
        # an append sees the change and looks, rather than sleeping through it.
        with self.fetch_wakeup:
            self.fetch_changes.record(partitions)
            if followers:
                self.fetch_wakeup.notify_all()
            self.consumer_wakeup.notify_all()


def _leader_and_isr_refused(version: int, body: dict[str, Any], error: ErrorCode) -> dict[str, Any]:
    """The answer to a LeaderAndIsr refused whole (its topics grouped): the error for the
    request and each of its partitions, v0-v4 naming their topics, v5+ by topic id
    (Kafka's LeaderAndIsrRequest.getErrorResponse)."""
    code = int(error)
    if version < 5:
        return {
            "error_code": code,
            "partition_errors": [
                {
                    "topic_name": ts["topic_name"],
                    "partition_index": ps["partition_index"],
                    "error_code": code,
                }
                for ts in body["topic_states"]
                for ps in ts["partition_states"]
            ],
        }
    return {
        "error_code": code,
        "topics": [
            {
                "topic_id": ts.get("topic_id") or ZERO_UUID,
                "partition_errors": [
                    {"partition_index": ps["partition_index"], "error_code": code}
                    for ps in ts["partition_states"]
                ],
            }
            for ts in body["topic_states"]
        ],
    }


def _changed_since(
    changes: ChangeJournal, seen: int, listed: Mapping[TopicPartition, Any] | None
) -> bool:
    """Whether anything changed after generation ``seen`` that a fetch listing ``listed``
    (None: whatever its session holds, which its own read sorts out) may have to answer;
    a change the journal no longer knows of, or of unknown partitions, may."""
    if changes.generation == seen:
        return False
    if listed is None:
        return True
    changed = changes.since(seen)
    return changed is None or any(tp in listed for tp in changed)


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _enough(readable: int, min_bytes: int) -> bool:
    """Whether a fetch's record bytes read answer it at once: Kafka's fetchMessages waits
    (up to max_wait_ms) until min_bytes are readable, and at least one (records, not a
    high watermark alone); a fetch asking for none (min_bytes 0, which a consumer's
    fetch.min.bytes allows) is answered at once, as there (bytesReadable >= 0)."""
    return min_bytes <= 0 or (readable > 0 and readable >= min_bytes)


class _Readable:
    """What a fetch's reads found readable, for its min_bytes, counted as Kafka 2.8
    counts it. fetchMessages answers once the record bytes read reach min_bytes;
    DelayedFetch.tryComplete once the bytes from each partition's fetch position to its
    readable end (the high watermark; a follower's, the log end), each at most the
    partition's max bytes, sum to min_bytes (Case G), and at once when a readable end
    lies in a later segment than the fetch position (Case F). The bytes read alone are
    not enough: reads stay within a segment (a position in a segment's last batch never
    reached min_bytes), and whole batches never quite reach a partition's max bytes."""

    __slots__ = ("available", "later_segment", "min_bytes", "read")

    def __init__(self, min_bytes: int) -> None:
        self.min_bytes = min_bytes
        self.read = 0  # record bytes read
        self.available = 0  # readable bytes, each partition's at most its max bytes
        self.later_segment = False

    def count_to(self, partition_max_bytes: int) -> int:
        """How far a read must count what is readable (no further than min_bytes)."""
        return min(partition_max_bytes, self.min_bytes)

    def add(self, read: ReadInfo, partition_max_bytes: int) -> None:
        self.available += min(read.bytes_to_end, partition_max_bytes)
        self.later_segment = self.later_segment or read.end_in_later_segment

    def enough(self) -> bool:
        if self.min_bytes <= 0:
            return True
        return (
            self.later_segment
            or _enough(self.read, self.min_bytes)
            or _enough(self.available, self.min_bytes)
        )


def _check_produce_records(version: int, records: bytes | None) -> tuple[ErrorCode, str] | None:
    """Kafka's ProduceRequest.validateRecords (versions 3 and up), reading the entries
    as its iterator does (``entry_size``), in its order: no whole entry is INVALID_RECORD
    (at least one batch), a first entry of magic 0 or 1 INVALID_RECORD, zstd before
    version 7 UNSUPPORTED_COMPRESSION_TYPE (KIP-110), a second whole entry INVALID_RECORD
    (exactly one batch); a size field below 14 or a magic outside 0-2, in the first
    entry or the next, CORRUPT_MESSAGE (the iterator's CorruptRecordException, an
    ApiException handleProduceRequest answers the partition). A first batch naming no
    codec (5-7) before version 7 raises UnknownCompressionError: CompressionType.forId's
    IllegalArgumentException there fails the request whole. An incomplete entry after
    the batch passes: the log leaves it out. The batch itself is the log's to check, and
    so are null records, which validateRecords passes."""
    if records is None:
        return None  # not an instance of Records: the log's to fail (UNKNOWN_SERVER_ERROR)
    try:
        first = entry_size(records)
        if first is None:
            return (
                ErrorCode.INVALID_RECORD,
                f"produce requests with version {version} must have at least one record batch",
            )
        if records[_MAGIC_AT] != 2:
            return (
                ErrorCode.INVALID_RECORD,
                f"produce requests with version {version} may only hold record batches of magic 2",
            )
        # Inside the first entry: its size field is 14 or more, so 26 bytes at least.
        codec = records[_ATTRIBUTES_LOW_BYTE] & ATTR_COMPRESSION_MASK
        if version < _PRODUCE_ZSTD_VERSION and codec > Compression.ZSTD:
            # CompressionType.forId throws IllegalArgumentException, no ApiException: the
            # request fails whole (the handler's error response, UNKNOWN_SERVER_ERROR).
            raise UnknownCompressionError(codec, position=0)
        if version < _PRODUCE_ZSTD_VERSION and codec == Compression.ZSTD:
            return (
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"produce requests with version {version} may not use zstd (version 7 and up)",
            )
        if entry_size(records, first) is not None:
            return (
                ErrorCode.INVALID_RECORD,
                f"produce requests with version {version} may hold exactly one record batch",
            )
    except CorruptRecordError as e:
        return ErrorCode.CORRUPT_MESSAGE, str(e)
    return None


def _produce_answer(
    tp: TopicPartition,
    error: ErrorCode,
    message: str | None,
    base_offset: int = -1,
    log_append_time: int = -1,
    log_start_offset: int = -1,
) -> dict[str, Any]:
    return {
        "index": tp.partition,
        "error_code": int(error),
        "base_offset": base_offset,
        "log_append_time_ms": log_append_time,
        "log_start_offset": log_start_offset,
        "record_errors": [],
        "error_message": message,
    }


class _ByteBudget:
    """A fetch's max_bytes across its partitions, as Kafka 2.8's readFromLocalLog spends
    it: each partition gets what is left (at most its own max bytes), and only the first
    partition with records may go over that by its first batch (KIP-74), so that a large
    batch never blocks a consumer. A batch that does not fit a later partition stays out:
    an answer is at most max_bytes, or one batch. ``hard`` (Fetch v0-v2, before KIP-74):
    no partition goes over, Kafka's hardMaxBytesLimit (minOneMessage false throughout)."""

    def __init__(self, max_bytes: int, *, hard: bool = False) -> None:
        # 0 (a consumer's fetch.max.bytes may be 0) is no bytes: the first batch only. A
        # negative one is kept for the first partition read, as Kafka's limitBytes.
        self.left = max_bytes
        self.hard = hard
        self.first = not hard  # no partition has returned records yet (KIP-74's)
        self.ran_out = False  # records may have been left out for want of bytes

    def take(self, partition_max_bytes: int) -> int:
        """The bytes the next partition may read; negative when its own max bytes or the
        request's (for the first partition read) is: a size Kafka's LogSegment.read
        refuses (IllegalArgumentException), should the read reach a segment."""
        adjusted = min(partition_max_bytes, self.left)
        if adjusted < 0:
            return adjusted
        if self.first:
            return max(1, adjusted)
        if self.left <= 0:
            self.ran_out = True
            return 0
        return adjusted

    def spend(self, data: PartitionData, cut: bool) -> None:
        """`cut`: the partition had records the bytes given to it did not reach."""
        records = data["records"]
        # Never below 0 once a partition was read (Kafka's max(0, limitBytes - size)).
        self.left = max(0, self.left - len(records))
        if records:
            self.first = False
        if cut:
            self.ran_out = True


def duplicate_partitions(topics: list[dict[str, Any]]) -> set[TopicPartition]:
    """The partitions a ListOffsets request lists more than once, over all its topic
    entries (Kafka 2.8's ListOffsetsRequest.duplicatePartitions)."""
    seen: set[TopicPartition] = set()
    duplicates: set[TopicPartition] = set()
    for topic in topics:
        for lp in topic["partitions"]:
            tp = TopicPartition(topic["name"], lp["partition_index"])
            if tp in seen:
                duplicates.add(tp)
            seen.add(tp)
    return duplicates


def _partition_data(
    tp: TopicPartition,
    error: ErrorCode,
    p: Partition | None,
    fetch_offset: int,
    budget: _ByteBudget,
    partition_max_bytes: int,
    follower: bool = False,
    zstd_readable: bool = True,
    not_a_replica: bool = False,
    readable: _Readable | None = None,
    last_fetched_epoch: int = -1,
) -> PartitionData:
    """One partition of a fetch response: whole batches from `fetch_offset`, up to the log
    end for a follower and up to the high watermark for a consumer (no transactions here,
    so the last stable offset is the high watermark), within what `budget` gives it. A
    fetch too old for zstd of a topic whose compression.type is zstd:
    UNSUPPORTED_COMPRESSION_TYPE, as Kafka answers. A fetch with the replica id of a
    broker that is not one of the partition's replicas (`not_a_replica`) gets no
    records, as Kafka 2.8's updateFollowerFetchState answers it after the read
    (withEmptyFetchInfo): the log end is for followers only. What the read finds readable
    is counted in `readable`, for the fetch's min_bytes. A fetcher that sends the epoch
    of its last fetched batch (Fetch v12, `last_fetched_epoch` >= 0) and whose log
    diverged from this one is answered where (`diverging_epoch`), no records, as Kafka
    2.8's Partition.readRecords answers it."""
    # An empty record set, never null: Kafka sends empty ones, and older librdkafka
    # (kcat's) cannot parse a null one ("invalid MessageSetSize -1").
    records: bytes = b""
    cut = False
    if (
        not zstd_readable
        and p is not None
        and p.log is not None
        and p.log.config.compression == Compression.ZSTD
    ):
        error = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    diverging: dict[str, int] | None = None
    if p is None or error != ErrorCode.NONE:
        hw, log_start = -1, -1
    else:
        hw = p.high_watermark
        log_start = p.log_start_offset
        if last_fetched_epoch >= 0 and p.log is not None:
            error, diverging = _divergence(p.log, last_fetched_epoch, fetch_offset, log_start)
        # A diverging or refused partition reads nothing, and spends none of the budget.
        readable_here = error == ErrorCode.NONE and diverging is None
        max_bytes = budget.take(partition_max_bytes) if readable_here else 0
        if p.log is not None and max_bytes != 0:
            min_one_batch = budget.first and max_bytes > 0
            try:
                read = p.log.read(
                    fetch_offset,
                    max(0, max_bytes),
                    None if follower else hw,
                    min_one_batch=min_one_batch,
                    count_to=0 if readable is None else readable.count_to(partition_max_bytes),
                )
                if max_bytes < 0 and fetch_offset < (read.log_end_offset if follower else hw):
                    # Records to read with a negative size: Kafka's LogSegment.read throws
                    # (UNKNOWN_SERVER_ERROR); at the end of what it may read (or out of
                    # range, raised above) Log.read answers before any segment is read.
                    log.debug("fetch of %s: invalid max size %d", tp, max_bytes)
                    error = ErrorCode.UNKNOWN_SERVER_ERROR
                else:
                    if readable is not None and not not_a_replica:
                        readable.add(read, partition_max_bytes)
                    if read.region is not None:
                        records = read.to_bytes()
                    elif not min_one_batch:
                        cut = fetch_offset < (read.log_end_offset if follower else hw)
                        if cut and budget.hard:
                            records = _cut_first_batch(p.log, fetch_offset, max_bytes, follower, hw)
            except OffsetOutOfRangeError:
                error = ErrorCode.OFFSET_OUT_OF_RANGE
            except (KafkaStorageError, OSError):
                # Its log directory failed (reported by the log), or the log was closed
                # with it while this read copied its bytes.
                error = ErrorCode.KAFKA_STORAGE_ERROR
            except Exception as exc:
                # A batch damaged on disk (CorruptRecordError), or a bug: this partition
                # is answered the error, the others are served (Kafka 2.8's
                # readFromLocalLog catches per partition).
                error = unreadable_partition(tp, p, "fetch", fetch_offset, exc)
            if not_a_replica and error == ErrorCode.NONE:
                # Read (an offset out of range is still told), then dropped.
                records, cut = b"", False
        elif (
            readable_here
            and p.log is not None
            and not log_start <= fetch_offset <= p.log_end_offset
        ):
            # Given no bytes (the fetch's max_bytes spent), still told it is out of
            # range: Kafka's Log.read checks the offset before it reads any bytes.
            error = ErrorCode.OFFSET_OUT_OF_RANGE
        if error != ErrorCode.NONE:
            # A read that failed says no offsets (Kafka 2.8's readFromLocalLog answers
            # Log.UnknownOffset for each, and no last stable offset).
            hw, log_start = -1, -1
    data: PartitionData = {
        "partition_index": tp.partition,
        "error_code": int(error),
        "high_watermark": hw,
        "last_stable_offset": hw,
        "log_start_offset": log_start,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": records,
    }
    if diverging is not None:
        data["diverging_epoch"] = diverging
    budget.spend(data, cut)
    return data


def _cut_first_batch(
    log: PartitionLog, fetch_offset: int, max_bytes: int, follower: bool, hw: int
) -> bytes:
    """The first ``max_bytes`` bytes of the batch holding ``fetch_offset``, which does
    not fit them: what Kafka 2.8 answers a Fetch v0-v2 (hardMaxBytesLimit), whose
    LogSegment.read slices the file at max_bytes (firstEntryIncomplete, kept for those
    versions by readFromLocalLog). The bytes go out as they are, unconverted, since
    they hold no whole batch (hasCompatibleMagic finds none): the client finds its
    message cut short (the Java consumer's RecordTooLargeException, librdkafka's larger
    fetch)."""
    read = log.read(fetch_offset, max_bytes, None if follower else hw, min_one_batch=True)
    return read.to_bytes()[:max_bytes] if read.region is not None else b""


def _divergence(
    log: PartitionLog, last_fetched_epoch: int, fetch_offset: int, log_start: int
) -> tuple[ErrorCode, dict[str, int] | None]:
    """Kafka 2.8's Partition.readRecords given a last fetched epoch: OFFSET_OUT_OF_RANGE
    when this log cannot say where that epoch ends (an epoch above every one it has), or
    when the fetch offset is below the log start (whether or not the logs diverged,
    KAFKA-12996); a diverging epoch, this log's (epoch, end offset) for it, when this
    log has no such epoch or that epoch ends before the fetch offset: the fetcher's log
    holds records this one does not, and must truncate to that end first."""
    epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
    if epoch < 0 or end_offset < 0 or fetch_offset < log_start:
        return ErrorCode.OFFSET_OUT_OF_RANGE, None
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return ErrorCode.NONE, {"epoch": epoch, "end_offset": end_offset}
    return ErrorCode.NONE, None


def read_error_code(exc: Exception) -> ErrorCode:
    """The error a partition whose read raised ``exc`` is answered, as Kafka's
    Errors.forException maps it: a storage error's own code (CORRUPT_MESSAGE for a
    damaged batch), UNKNOWN_SERVER_ERROR for anything else."""
    if isinstance(exc, StorageError):
        return ErrorCode.of(exc.error_code)
    return ErrorCode.UNKNOWN_SERVER_ERROR


def unreadable_partition(
    tp: TopicPartition, p: Partition, what: str, offset: int, exc: Exception
) -> ErrorCode:
    """Log a read of ``tp`` that failed with ``exc`` (once a minute per log: a follower
    retries every replica.fetch.backoff.ms) and return the error it is answered."""
    code = read_error_code(exc)
    directory = p.log.directory if p.log is not None else "?"
    if _UNREADABLE_LOGGED(directory):
        log.error(
            "%s of %s at %d answered %s: %s (in %s; logged once a minute)",
            what,
            tp,
            offset,
            code.name,
            exc,
            directory,
            # A damaged batch's reason says what is wrong; anything else is a bug.
            exc_info=not isinstance(exc, StorageError),
        )
    else:
        log.debug("%s of %s at %d answered %s: %s", what, tp, offset, code.name, exc)
    return code


@dataclass(frozen=True)
class MetadataAsked:
    """The topics a Metadata request asks for (Kafka's handleTopicMetadataRequest)."""

    names: list[str] | None  # None: every topic
    ids: list[uuid.UUID]  # v12+ (KIP-516): asked for by id; the names are then not looked at
    invalid: str | None = None  # why the whole request is INVALID_REQUEST


def metadata_asked(version: int, requested: list[dict[str, Any]] | None) -> MetadataAsked:
    """As Kafka 3.1 reads a request (Kafka 2.8's is the same up to its v11): before v12 a
    null name or a topic id refuses the whole request; from v12, if any topic is given by
    a (non-zero) id, the ids alone are what is asked for, each once; else the names."""
    if requested is None or (version == 0 and not requested):
        return MetadataAsked(None, [])  # v0 has no null: an empty list means all topics
    ids = list(
        dict.fromkeys(t["topic_id"] for t in requested if t.get("topic_id", ZERO_UUID) != ZERO_UUID)
    )
    if version < 12:
        if any(t.get("name") is None for t in requested):
            return MetadataAsked([], [], f"a null topic name at version {version}")
        if ids:
            return MetadataAsked([], [], f"a topic id at version {version}")
    elif ids:
        return MetadataAsked([], ids)
    elif any(t.get("name") is None for t in requested):
        # Neither name nor id: Kafka 3.1 fails on the null name (an UNKNOWN_SERVER_ERROR).
        return MetadataAsked([], [], "a topic with neither a name nor an id")
    # An empty name is asked for like any other (and answered INVALID_TOPIC_EXCEPTION);
    # a name given twice is asked for once (Kafka takes the topics as a set).
    return MetadataAsked(list(dict.fromkeys(t["name"] for t in requested)), [])


def _metadata_error_topic(
    name: str | None, topic_id: uuid.UUID, error: ErrorCode
) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": NOT_ASKED,
    }


def metadata_error_response(requested: list[dict[str, Any]], error: ErrorCode) -> dict[str, Any]:
    """Kafka's MetadataRequest.getErrorResponse: each topic asked for with ``error`` (a
    null name as "", the answer's schema before v12 has no null), no brokers."""
    return {
        "throttle_time_ms": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [
            _metadata_error_topic(t.get("name") or "", t.get("topic_id", ZERO_UUID), error)
            for t in requested
        ],
        "cluster_authorized_operations": NOT_ASKED,
    }


def api_versions_request_valid(version: int, body: dict[str, Any]) -> bool:
    """Kafka's ApiVersionsRequest.isValid: from v3 (KIP-511) the client's software name
    and version each match _SOFTWARE_NAME_OR_VERSION (librdkafka sanitizes its own to it)."""
    if version < 3:
        return True
    return all(
        _SOFTWARE_NAME_OR_VERSION.fullmatch(body[field])
        for field in ("client_software_name", "client_software_version")
    )


def api_versions_response(error: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "api_keys": [
            {"api_key": int(k), "min_version": s.min_version, "max_version": s.max_version}
            for k, s in sorted(SUPPORTED.items())
        ],
        "throttle_time_ms": 0,
    }

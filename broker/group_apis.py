"""The consumer group APIs (Kafka's KafkaApis for groups): FindCoordinator, JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups and
DescribeGroups, turned into calls on the group coordinator (groups/coordinator.py).

Static membership (KIP-345): a member's `group.instance.id` (JoinGroup v5+, SyncGroup and
Heartbeat v3+, LeaveGroup v3+, OffsetCommit v7+) is passed to the coordinator.

OffsetCommit v0 and OffsetFetch v0 are Kafka 0.8's offsets, kept in ZooKeeper
(groups/zookeeper_offsets.py), not the coordinator's: any broker answers them, as Kafka
2.8's handleOffsetCommitRequest and handleOffsetFetchRequest do, and they see no offset
a later version committed, nor a later version theirs.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from broker.admin_apis import AdminApis
from broker.authorized_operations import GROUP_OPERATIONS, NOT_ASKED
from broker.metadata_cache import MetadataCache
from groups.coordinator import OFFSETS_TOPIC, GroupCoordinator, metadata_length
from groups.offset_records import NO_TIMESTAMP, CommittedOffset
from groups.zookeeper_offsets import get_consumer_offset, set_or_create_consumer_offset
from wire.errors import ErrorCode
from zkdata.client import ZkClient
from zkdata.znodes import TopicPartition

log = logging.getLogger(__name__)

Body = dict[str, Any]


def offsets_topic_configs(segment_bytes: int) -> dict[str, str]:
    """The topic's own settings, as Kafka's GroupMetadataManager gives it: compacted (the
    log cleaner keeps each commit's and group's latest record), its segments
    ``offsets.topic.segment.bytes``."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(segment_bytes),
    }


_KEY_TYPE_GROUP = 0
_KEY_TYPE_TRANSACTION = 1


class GroupApis:
    def __init__(
        self,
        coordinator: GroupCoordinator,
        metadata: MetadataCache,
        admin: AdminApis | None,
        *,
        offsets_replication_factor: int,
        offsets_segment_bytes: int = 100 * 1024 * 1024,
        zk: ZkClient | None = None,
    ) -> None:
        """``zk``: where OffsetCommit v0 and OffsetFetch v0 keep offsets; without it they
        are answered UNSUPPORTED_VERSION (Kafka 2.8's requireZkOrThrow, a broker without
        ZooKeeper)."""
        self.coordinator = coordinator
        self.zk = zk
        self.metadata = metadata
        self.admin = admin
        self.offsets_replication_factor = offsets_replication_factor
        self.offsets_topic_configs = offsets_topic_configs(offsets_segment_bytes)

    # --- FindCoordinator ---------------------------------------------------------------

    def _find(self, key: str, key_type: int, listener: str | None) -> Body:
        """The coordinator of group ``key``: the leader of its partition of
        __consumer_offsets, at its address on the request's listener. The topic is made
        when first needed, and COORDINATOR_NOT_AVAILABLE answered until it has leaders."""

        def missing(error: ErrorCode, message: str) -> Body:
            return {
                "node_id": -1,
                "host": "",
                "port": -1,
                "error_code": int(error),
                "error_message": message,
            }

        if key_type == _KEY_TYPE_TRANSACTION:
            return missing(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, "transactions are not served by this broker"
            )
        if key_type != _KEY_TYPE_GROUP:
            # Kafka's CoordinatorType.forId throws InvalidRequestException.
            return missing(
                ErrorCode.INVALID_REQUEST, f"Unknown coordinator type received: {key_type}"
            )
        index = self.coordinator.partition_of(key)
        partition = self.metadata.partition(OFFSETS_TOPIC, index)
        if partition is None:
            if OFFSETS_TOPIC not in self.metadata.topics() and self.admin is not None:
                error = self.create_offsets_topic()
                if error != ErrorCode.NONE:
                    log.warning("%s could not be created: %s", OFFSETS_TOPIC, error.name)
                    return missing(
                        ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        f"{OFFSETS_TOPIC} could not be created: {error.name}",
                    )
            return missing(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} has no leaders yet"
            )
        endpoint = self.metadata.endpoint(partition.leader, listener)
        if endpoint is None:
            return missing(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"{OFFSETS_TOPIC}-{index} has no live leader on this listener",
            )
        return {
            "node_id": endpoint.broker_id,
            "host": endpoint.host,
            "port": endpoint.port,
            "error_code": int(ErrorCode.NONE),
            "error_message": None,
        }

    def create_offsets_topic(self) -> ErrorCode:
        """Make __consumer_offsets with its own settings (FindCoordinator, or a client's
        Metadata naming it, as Kafka's AutoTopicCreationManager.creatableTopic): NONE once
        asked for, else the error. Without admin APIs, COORDINATOR_NOT_AVAILABLE."""
        if self.admin is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return self.admin.create_internal_topic(
            OFFSETS_TOPIC,
            # The count groups are hashed over (no topic at start-up: the setting).
            self.coordinator.offsets_partitions,
            self.offsets_replication_factor,
            self.offsets_topic_configs,
        )

    def find_coordinator(self, version: int, body: Body, listener: str | None) -> Body:
        key_type = int(body.get("key_type", _KEY_TYPE_GROUP))
        if version < 4:
            found = self._find(body["key"], key_type, listener)
            return {"throttle_time_ms": 0, **found}
        return {
            "throttle_time_ms": 0,
            "coordinators": [
                {"key": key, **self._find(key, key_type, listener)}
                for key in body.get("coordinator_keys") or []
            ],
        }

    # --- membership ------------------------------------------------------------------

    def join_group(self, version: int, body: Body, header: Body, client_host: str) -> Body:
        session_timeout_ms = int(body["session_timeout_ms"])
        # v0 has one timeout for both; a later version's is kept as sent, negative too
        # (Kafka 2.8's JoinGroupRequest.maybeOverrideRebalanceTimeout: v0 only), which
        # times the group's join and sync phases as 0 (GroupMetadata.rebalanceTimeoutMs).
        if version == 0:
            rebalance_timeout_ms = session_timeout_ms
        else:
            rebalance_timeout_ms = int(body["rebalance_timeout_ms"])
        group_instance_id = _instance_id(body)
        answer = self.coordinator.join_group(
            body["group_id"],
            body["member_id"] or "",
            # KIP-394's round for a member id, from v4, is for dynamic members alone (Kafka
            # 2.8's handleJoinGroupRequest: version >= 4 && groupInstanceId.isEmpty).
            require_known_member_id=version >= 4 and group_instance_id is None,
            client_id=header.get("client_id") or "",
            client_host=client_host,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=body["protocol_type"],
            protocols=tuple((p["name"], bytes(p["metadata"])) for p in body["protocols"]),
            group_instance_id=group_instance_id,
        )
        return {
            "throttle_time_ms": 0,
            "error_code": int(answer.error),
            "generation_id": answer.generation_id,
            "protocol_type": answer.protocol_type,
            # An answer without a protocol (an error's) names none: null from v7 (KIP-559),
            # before it "" (Kafka 2.8's handleJoinGroupRequest, GroupCoordinator.NoProtocol).
            "protocol_name": answer.protocol_name if version >= 7 else answer.protocol_name or "",
            "leader": answer.leader,
            "member_id": answer.member_id,
            "members": [
                # (The field is ignorable: a leader on v4 or older is not sent it.)
                {"member_id": m, "group_instance_id": instance_id, "metadata": data}
                for (m, data), instance_id in zip(
                    answer.members,
                    answer.instance_ids or (None,) * len(answer.members),
                    strict=True,
                )
            ],
        }

    def sync_group(self, version: int, body: Body, _header: Body) -> Body:
        # v5+ names the group's protocol type and name (KIP-559), which the coordinator
        # checks against the group's; older versions have no such fields (None: unchecked).
        protocol_type = body.get("protocol_type") if version >= 5 else None
        protocol_name = body.get("protocol_name") if version >= 5 else None
        if version >= 5 and (protocol_type is None or protocol_name is None):
            # Mandatory from v5 (Kafka 2.8's handleSyncGroupRequest:
            # areMandatoryProtocolTypeAndNamePresent), refused before the coordinator.
            return {
                "throttle_time_ms": 0,
                "error_code": int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
                "protocol_type": None,
                "protocol_name": None,
                "assignment": b"",
            }
        answer = self.coordinator.sync_group(
            body["group_id"],
            body["member_id"],
            int(body["generation_id"]),
            protocol_type,
            protocol_name,
            {a["member_id"]: bytes(a["assignment"]) for a in body.get("assignments") or []},
            group_instance_id=_instance_id(body),
        )
        return {
            "throttle_time_ms": 0,
            "error_code": int(answer.error),
            "protocol_type": answer.protocol_type,
            "protocol_name": answer.protocol_name,
            "assignment": answer.assignment,
        }

    def heartbeat(self, _version: int, body: Body, _header: Body) -> Body:
        error = self.coordinator.heartbeat(
            body["group_id"],
            body["member_id"],
            int(body["generation_id"]),
            group_instance_id=_instance_id(body),
        )
        return {"throttle_time_ms": 0, "error_code": int(error)}

    def leave_group(self, version: int, body: Body, _header: Body) -> Body:
        members: list[tuple[str, str | None]]
        if version >= 3:
            members = [
                (m.get("member_id") or "", _instance_id(m)) for m in body.get("members") or []
            ]
        else:
            members = [(body["member_id"], None)]
        error, errors = self.coordinator.leave_group_members(body["group_id"], members)
        if version < 3:
            own = errors[0] if error == ErrorCode.NONE and errors else error
            return {"throttle_time_ms": 0, "error_code": int(own)}
        if error != ErrorCode.NONE:
            # Not (yet) the coordinator: the group's error, no members (Kafka's
            # leaveError(error, List.empty)).
            return {"throttle_time_ms": 0, "error_code": int(error), "members": []}
        return {
            "throttle_time_ms": 0,
            "error_code": int(error),
            "members": [
                {"member_id": m, "group_instance_id": instance_id, "error_code": int(e)}
                for (m, instance_id), e in zip(members, errors, strict=True)
            ],
        }

    # --- offsets ---------------------------------------------------------------------

    def offset_commit(self, version: int, body: Body, _header: Body) -> Body:
        now_ms = _now_ms()
        # v2-v4 may set the offsets' retention; -1 (and v1, v5+) leaves it to the broker's.
        retention_ms = int(body.get("retention_time_ms", -1))
        expire_ms = now_ms + retention_ms if retention_ms != -1 else NO_TIMESTAMP
        offsets: dict[TopicPartition, CommittedOffset] = {}
        # Each partition is answered once, in one entry of its topic, however often the
        # request names them, and the last of its offsets is written: Kafka 2.8's
        # handleOffsetCommitRequest collects them in maps, and OffsetCommitResponse groups
        # its map's partitions by topic. (Here in the order first named; Kafka's is a
        # HashMap's.)
        order: dict[str, dict[int, None]] = {}
        # A partition this broker's metadata does not know (its topic deleted, or never
        # made) is refused, the rest written (Kafka's handleOffsetCommitRequest): else a
        # commit racing a deletion outlives it, for a topic made again under the name.
        errors: dict[TopicPartition, ErrorCode] = {}
        known: dict[TopicPartition, Body] = {}
        for topic in body["topics"]:
            indexes = order.setdefault(topic["name"], {})
            for p in topic["partitions"]:
                tp = TopicPartition(topic["name"], p["partition_index"])
                indexes[tp.partition] = None
                if version == 0 and self.zk is None:
                    # (Kafka's getErrorResponse of requireZkOrThrow's exception.)
                    errors[tp] = ErrorCode.UNSUPPORTED_VERSION
                elif self.metadata.partition(tp.topic, tp.partition) is None:
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    known[tp] = p
        for tp, p in known.items():
            if version == 0:
                # v0: written to ZooKeeper, whichever broker coordinates the group (its
                # coordinator is not asked), one partition after another.
                errors[tp] = self._commit_to_zookeeper(body["group_id"], tp, p)
                continue
            # v1 carries each partition's commit timestamp, -1 (DEFAULT_TIMESTAMP): now,
            # as Kafka 2.8's handleOffsetCommitRequest takes it; the offset expires by it
            # (offsets.retention.minutes after it, groups/retention.py).
            given_ms = int(p.get("commit_timestamp", NO_TIMESTAMP)) if version == 1 else -1
            offsets[tp] = CommittedOffset(
                offset=int(p["committed_offset"]),
                leader_epoch=int(p.get("committed_leader_epoch", -1)),
                metadata=p.get("committed_metadata") or "",
                commit_timestamp_ms=now_ms if given_ms == NO_TIMESTAMP else given_ms,
                expire_timestamp_ms=expire_ms,
            )
        if offsets:
            errors |= self.coordinator.commit_offsets(
                body["group_id"],
                body.get("member_id") or "",
                int(body.get("generation_id_or_member_epoch", -1)),
                offsets,
                group_instance_id=_instance_id(body),
            )
        return {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": i,
                            "error_code": int(errors[TopicPartition(name, i)]),
                        }
                        for i in indexes
                    ],
                }
                for name, indexes in order.items()
            ],
        }

    def _commit_to_zookeeper(self, group_id: str, tp: TopicPartition, p: Body) -> ErrorCode:
        """An OffsetCommit v0's partition, as Kafka 2.8 writes it: refused
        OFFSET_METADATA_TOO_LARGE past offset.metadata.max.bytes (a Java String's length),
        else its offset written (its metadata is not kept); what ZooKeeper raises is
        UNKNOWN_SERVER_ERROR (Errors.forException of a KeeperException)."""
        assert self.zk is not None
        metadata = p.get("committed_metadata")
        if metadata is not None and (
            metadata_length(metadata) > self.coordinator.offset_metadata_max_bytes
        ):
            return ErrorCode.OFFSET_METADATA_TOO_LARGE
        try:
            set_or_create_consumer_offset(self.zk, group_id, tp, int(p["committed_offset"]))
        except Exception as e:
            log.warning("OffsetCommit v0 of group %r, %s: %r", group_id, tp, e)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return ErrorCode.NONE

    def _fetch_from_zookeeper(self, group_id: str, tp: TopicPartition) -> Body:
        """An OffsetFetch v0's partition, as Kafka 2.8 reads it: -1 (INVALID_OFFSET) and no
        error for a partition the metadata does not know or with no offset in ZooKeeper
        (UNKNOWN_PARTITION), -1 and UNKNOWN_SERVER_ERROR when the read fails; never any
        metadata (NO_METADATA, "")."""
        offset: int | None = None
        error = ErrorCode.NONE
        if self.zk is None:
            error = ErrorCode.UNSUPPORTED_VERSION  # (as OffsetCommit v0 without it)
        elif self.metadata.partition(tp.topic, tp.partition) is not None:
            try:
                offset = get_consumer_offset(self.zk, group_id, tp)
            except Exception as e:
                log.warning("OffsetFetch v0 of group %r, %s: %r", group_id, tp, e)
                error = ErrorCode.UNKNOWN_SERVER_ERROR
        return {
            "partition_index": tp.partition,
            "committed_offset": -1 if offset is None else offset,
            "committed_leader_epoch": -1,
            "metadata": "",
            "error_code": int(error),
        }

    def offset_fetch(self, version: int, body: Body, _header: Body) -> Body:
        if version == 0:
            # v0: read from ZooKeeper, whichever broker coordinates the group; each
            # partition answered once (Kafka's toMap), grouped by topic. (v0's topics
            # cannot be null: a request of all topics is v2's.)
            from_zk: dict[str, dict[int, Body]] = {}
            for t in body["topics"]:
                answered = from_zk.setdefault(t["name"], {})
                for index in t["partition_indexes"]:
                    if index not in answered:
                        tp = TopicPartition(t["name"], index)
                        answered[index] = self._fetch_from_zookeeper(body["group_id"], tp)
            return {
                "throttle_time_ms": 0,
                "error_code": int(ErrorCode.NONE),
                "topics": [
                    {"name": name, "partitions": list(ps.values())} for name, ps in from_zk.items()
                ],
            }
        requested = body.get("topics")
        partitions = (
            None
            if requested is None
            else [TopicPartition(t["name"], i) for t in requested for i in t["partition_indexes"]]
        )
        error, found, unstable = self.coordinator.fetch_offsets_stable(body["group_id"], partitions)
        # v7+: require_stable (the Java consumer always, librdkafka for read_committed):
        # a partition with a commit still being written is answered UNSTABLE_OFFSET_COMMIT
        # and no offset, and the client asks again (Kafka 2.8's getOffsets).
        if not body.get("require_stable"):
            unstable = set()
        by_topic: dict[str, list[Body]] = {}
        if error == ErrorCode.NONE:
            for tp, committed in found.items():
                value = None if tp in unstable else committed
                by_topic.setdefault(tp.topic, []).append(
                    {
                        "partition_index": tp.partition,
                        "committed_offset": -1 if value is None else value.offset,
                        "committed_leader_epoch": -1 if value is None else value.leader_epoch,
                        "metadata": "" if value is None else value.metadata,
                        "error_code": int(
                            ErrorCode.UNSTABLE_OFFSET_COMMIT if tp in unstable else ErrorCode.NONE
                        ),
                    }
                )
        elif version < 2 and partitions is not None:
            # v0 and v1 have no top-level error: each partition carries it.
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(
                    {
                        "partition_index": tp.partition,
                        "committed_offset": -1,
                        "committed_leader_epoch": -1,
                        "metadata": "",
                        "error_code": int(error),
                    }
                )
        return {
            "throttle_time_ms": 0,
            "error_code": int(error),
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }

    # --- listing ---------------------------------------------------------------------

    def list_groups(self, _version: int, body: Body, _header: Body) -> Body:
        error, groups = self.coordinator.list_groups()
        # Kafka 2.8's handleListGroups keeps the groups whose state is named exactly.
        wanted = set(body.get("states_filter") or [])
        return {
            "throttle_time_ms": 0,
            "error_code": int(error),
            "groups": [
                {"group_id": g, "protocol_type": t, "group_state": s}
                for g, t, s in groups
                if not wanted or s in wanted
            ],
        }

    def describe_groups(self, version: int, body: Body, _header: Body) -> Body:
        # v3+, asked for: every operation a group supports (Kafka without an authorizer),
        # for a group described without an error.
        asked = version >= 3 and bool(body.get("include_authorized_operations"))
        described = []
        for group_id in body["groups"]:
            error, snapshot = self.coordinator.describe_group(group_id)
            entry: Body = {
                "error_code": int(error),
                "group_id": group_id,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
            }
            if error == ErrorCode.NONE:
                entry.update(snapshot)  # (instance ids are ignorable before v4)
            entry["authorized_operations"] = (
                GROUP_OPERATIONS if asked and error == ErrorCode.NONE else NOT_ASKED
            )
            described.append(entry)
        return {"throttle_time_ms": 0, "groups": described}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _instance_id(body: Body) -> str | None:
    """A request's group instance id: None (a dynamic member) when absent (null, or a
    version without the field). An empty one is an instance id, "": Kafka 2.8's KafkaApis
    and handleLeaveGroup take Option(groupInstanceId), a static member whatever its name."""
    value = body.get("group_instance_id")
    return value if isinstance(value, str) else None

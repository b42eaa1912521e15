"""Request handling (Kafka's KafkaApis): one method per API this broker speaks.

Controller requests are fenced here first by broker epoch (a request meant for this
broker's previous incarnation gets STALE_BROKER_EPOCH), then by controller epoch (in the
replica manager and here for UpdateMetadata). Handlers run on connection threads; the
controller is only ever asked through its event queue.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from controller.controller import KafkaController
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import response_codec
from zkdata.znodes import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Supported:
    min_version: int
    max_version: int


# What this broker answers, advertised in ApiVersions. Every version in a range is handled.
SUPPORTED: dict[ApiKey, Supported] = {
    ApiKey.FETCH: Supported(4, 12),
    ApiKey.METADATA: Supported(0, 12),
    ApiKey.LEADER_AND_ISR: Supported(0, 7),
    ApiKey.STOP_REPLICA: Supported(0, 4),
    ApiKey.UPDATE_METADATA: Supported(0, 8),
    ApiKey.CONTROLLED_SHUTDOWN: Supported(0, 3),
    ApiKey.API_VERSIONS: Supported(0, 3),
}


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
        on_live_leaders: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.replicas = replicas
        self.controller = controller
        self.state_log = state_log
        self.broker_epoch = broker_epoch
        self.request_timeout_s = request_timeout_s
        self.on_live_leaders = on_live_leaders
        # Long-polling fetches wait on this; anything that may give them data notifies it.
        self.fetch_wakeup = threading.Condition()

    def supported(self, api_key: int, version: int) -> bool:
        s = SUPPORTED.get(ApiKey(api_key)) if api_key in ApiKey._value2member_map_ else None
        return s is not None and s.min_version <= version <= s.max_version

    def handle(
        self, api_key: int, version: int, header: dict[str, Any], body: dict[str, Any]
    ) -> dict[str, Any] | None:
        handler = getattr(self, f"_handle_{ApiKey(api_key).name.lower()}")
        result: dict[str, Any] | None = handler(version, body, header)
        return result

    # --- client APIs --------------------------------------------------------------------

    def _handle_api_versions(
        self, _version: int, _body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        return api_versions_response(ErrorCode.NONE)

    def _handle_metadata(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        requested = body.get("topics")
        names = None if requested is None else [t["name"] for t in requested if t.get("name")]
        if version == 0 and names == []:
            names = None  # v0 has no null: an empty list means all topics
        return self.metadata.metadata_response(names, version)

    def _handle_fetch(
        self, version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        replica_id = body.get("replica_id", -1)
        deadline = time.monotonic() + max(0, body.get("max_wait_ms", 0)) / 1000
        responses = []
        for topic in body.get("topics", []):
            name = topic.get("topic")
            parts = []
            for fp in topic["partitions"]:
                tp = TopicPartition(name, fp["partition"])
                error, p = self.replicas.leader_partition(tp, fp.get("current_leader_epoch", -1))
                hw = -1
                if p is not None:
                    if replica_id >= 0:
                        self.replicas.record_follower_fetch(p, replica_id, fp["fetch_offset"])
                    hw = p.high_watermark
                parts.append(
                    {
                        "partition_index": tp.partition,
                        "error_code": int(error),
                        "high_watermark": hw,
                        "last_stable_offset": hw,
                        "log_start_offset": 0 if p is not None else -1,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": None,
                    }
                )
            responses.append({"topic": name, "partitions": parts})
        # Nothing to return yet: wait out max_wait_ms (long polling), as Kafka does; an
        # error is answered at once so the fetcher can back off or find the new leader.
        has_error = any(p["error_code"] for r in responses for p in r["partitions"])
        remaining = deadline - time.monotonic()
        if remaining > 0 and not has_error:
            with self.fetch_wakeup:
                self.fetch_wakeup.wait(remaining)
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}

    # --- controller to broker -----------------------------------------------------------

    def _stale_broker_epoch(self, api: str, body: dict[str, Any]) -> bool:
        requested = body.get("broker_epoch", -1)
        current = self.broker_epoch()
        if requested != -1 and requested < current:
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
        if self._stale_broker_epoch("LeaderAndIsr", body):
            return {"error_code": int(ErrorCode.STALE_BROKER_EPOCH)}
        if version < 2:
            # v0/v1 carry partitions ungrouped: group them as later versions do.
            grouped: dict[str, list[dict[str, Any]]] = {}
            for ps in body.get("ungrouped_partition_states", []):
                grouped.setdefault(ps["topic_name"], []).append(ps)
            body["topic_states"] = [
                {"topic_name": t, "partition_states": ps} for t, ps in grouped.items()
            ]
        if self.on_live_leaders is not None:
            self.on_live_leaders(body.get("live_leaders", []))
        response = self.replicas.become_leader_or_follower(body)
        self._wake_fetches()
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

    def _handle_update_metadata(
        self, _version: int, body: dict[str, Any], _h: dict[str, Any]
    ) -> dict[str, Any]:
        if self._stale_broker_epoch("UpdateMetadata", body):
            return {"error_code": int(ErrorCode.STALE_BROKER_EPOCH)}
        if not self.replicas.check_controller_epoch(body["controller_epoch"]):
            self.state_log.request_rejected(
                "UpdateMetadata",
                body["controller_id"],
                body["controller_epoch"],
                body.get("broker_epoch", -1),
                "STALE_CONTROLLER_EPOCH",
            )
            return {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH)}
        if "topic_states" not in body or not body["topic_states"]:
            grouped: dict[str, list[dict[str, Any]]] = {}
            for ps in body.get("ungrouped_partition_states", []):
                grouped.setdefault(ps["topic_name"], []).append(ps)
            body["topic_states"] = [
                {"topic_name": t, "partition_states": ps} for t, ps in grouped.items()
            ]
        deleted = self.metadata.update(body)
        if deleted:
            log.info("topics deleted: %s", deleted)
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
        if not done.wait(self.request_timeout_s):
            return {"error_code": int(ErrorCode.REQUEST_TIMED_OUT), "remaining_partitions": []}
        return answer

    def _wake_fetches(self) -> None:
        with self.fetch_wakeup:
            self.fetch_wakeup.notify_all()


def api_versions_response(error: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "api_keys": [
            {"api_key": int(k), "min_version": s.min_version, "max_version": s.max_version}
            for k, s in sorted(SUPPORTED.items())
        ],
        "throttle_time_ms": 0,
    }


def error_response(api_key: int, version: int, error: ErrorCode) -> dict[str, Any] | None:
    """A response of this API and version that says `error`, or None when the response has
    no top-level error code to say it with (then the only answer is to close)."""
    if api_key == ApiKey.API_VERSIONS:
        return api_versions_response(error)
    body = response_codec(api_key, version).new()
    if "error_code" not in body:
        return None
    body["error_code"] = int(error)
    return body

"""A Kafka admin client of the cluster's brokers, for what `zkctl` asks over the wire
(Kafka's AdminClient, the part kafka-reassign-partitions.sh --bootstrap-server uses):
Metadata from a bootstrap broker names the controller; the request goes to it, and is
sent again, to the controller a fresh Metadata names, while the answer is
NOT_CONTROLLER (a failover in between) or the controller cannot be reached, until the
deadline."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from admin.errors import AdminError, InvalidArgumentError
from wire.api import ApiKey
from wire.client import KafkaConnection, KafkaConnectionError
from wire.errors import ErrorCode
from zkdata.connect_string import host_name_problem
from zkdata.int_text import int_text_in_range
from zkdata.znodes import TopicPartition

Body = dict[str, Any]
Endpoint = tuple[str, int]
# A partition's reassignment in progress: its full replica set, adding, removing.
Moving = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]

# The first that can say not to make the topics it names (a broker with
# auto.create.topics.enable makes those before v4), as Kafka's AdminClient asks.
_METADATA_VERSION = 4
_RETRY_BACKOFF_S = 0.5
_MAX_PORT = 65535


def parse_bootstrap(servers: str) -> list[Endpoint]:
    """``host:port[,host:port...]``; InvalidArgumentError naming what is wrong."""
    endpoints: list[Endpoint] = []
    for item in servers.split(","):
        host, sep, port_text = item.strip().rpartition(":")
        # ASCII digits only ('²' passes str.isdigit()), never more than int() takes.
        port = int_text_in_range(port_text, 1, _MAX_PORT)
        if not sep or not host or port is None:
            raise InvalidArgumentError(
                f"--bootstrap-server: {item.strip()!r} is not host:port (e.g. 127.0.0.1:9092)"
            )
        host = host.strip("[]")
        problem = host_name_problem(host)
        if problem is not None:
            raise InvalidArgumentError(
                f"--bootstrap-server: {item.strip()!r}: {host!r} is not a host name ({problem})"
            )
        endpoints.append((host, port))
    return endpoints


class ClusterAdmin:
    def __init__(
        self, bootstrap: Sequence[Endpoint], timeout_s: float = 30.0, client_id: str = "zkctl"
    ) -> None:
        self.bootstrap = list(bootstrap)
        self.timeout_s = timeout_s
        self.client_id = client_id

    # --- requests -------------------------------------------------------------------------

    def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """Each partition's target replicas, or None to cancel its reassignment: each
        partition's (error code, message) from the controller."""
        topics: dict[str, list[Body]] = {}
        for tp, replicas in targets.items():
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "replicas": None if replicas is None else list(replicas),
                }
            )
        body = {
            "timeout_ms": int(self.timeout_s * 1000),
            "topics": [{"name": name, "partitions": ps} for name, ps in topics.items()],
        }
        answer = self.to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body)
        return {
            TopicPartition(t["name"], p["partition_index"]): (p["error_code"], p["error_message"])
            for t in answer["responses"]
            for p in t["partitions"]
        }

    def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, Moving]:
        """The reassignments in progress among ``partitions`` (None: all)."""
        topics: list[Body] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": n, "partition_indexes": ps} for n, ps in by_topic.items()]
        body = {"timeout_ms": int(self.timeout_s * 1000), "topics": topics}
        answer = self.to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, body)
        return {
            TopicPartition(t["name"], p["partition_index"]): (
                tuple(p["replicas"]),
                tuple(p["adding_replicas"]),
                tuple(p["removing_replicas"]),
            )
            for t in answer["topics"]
            for p in t["partitions"]
        }

    def replicas(self, topics: Sequence[str]) -> dict[TopicPartition, tuple[int, ...]]:
        """Each partition's replicas as the brokers' metadata shows them (topics that do
        not exist are left out)."""
        metadata = self.metadata([{"name": t} for t in dict.fromkeys(topics)])
        return {
            TopicPartition(t["name"], p["partition_index"]): tuple(p["replica_nodes"])
            for t in metadata["topics"]
            if t["error_code"] == ErrorCode.NONE
            for p in t["partitions"]
        }

    # --- plumbing -------------------------------------------------------------------------

    def metadata(self, topics: list[Body] | None = None) -> Body:
        """Metadata from the first bootstrap broker that answers; a topic it names that
        does not exist is not made (a look must not create a mistyped name)."""
        body = {"topics": topics, "allow_auto_topic_creation": False}
        failures = []
        for host, port in self.bootstrap:
            try:
                with self._connect((host, port)) as conn:
                    return conn.request(ApiKey.METADATA, _METADATA_VERSION, body)
            except KafkaConnectionError as e:
                failures.append(str(e))
        raise AdminError(f"no bootstrap server answered: {'; '.join(failures)}")

    def to_controller(self, api: ApiKey, version: int, body: Body) -> Body:
        """``body`` sent to the controller; sent again while the answer's top-level error
        is NOT_CONTROLLER or no controller can be reached, until the deadline. Any other
        top-level error is an AdminError."""
        deadline = time.monotonic() + self.timeout_s
        last = "no answer yet"
        while True:
            try:
                answer = self._ask_controller(api, version, body)
                code = int(answer.get("error_code", ErrorCode.NONE))
                if code == ErrorCode.NONE:
                    return answer
                message = answer.get("error_message") or error_name(code)
                if code != ErrorCode.NOT_CONTROLLER:
                    raise AdminError(f"{api.name} refused: {error_name(code)}: {message}")
                last = f"NOT_CONTROLLER: {message}"
            except (KafkaConnectionError, _NoController) as e:
                last = str(e)
            if time.monotonic() + _RETRY_BACKOFF_S > deadline:
                raise AdminError(
                    f"{api.name}: the controller did not answer within {self.timeout_s:g} s"
                    f" ({last})"
                )
            time.sleep(_RETRY_BACKOFF_S)

    def _ask_controller(self, api: ApiKey, version: int, body: Body) -> Body:
        metadata = self.metadata([])
        controller = metadata.get("controller_id", -1)
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in metadata["brokers"]}
        if controller not in brokers:
            raise _NoController(f"the brokers know of no controller (controller id {controller})")
        with self._connect(brokers[controller]) as conn:
            return conn.request(api, version, body)

    def _connect(self, endpoint: Endpoint) -> KafkaConnection:
        return KafkaConnection(
            endpoint[0], endpoint[1], client_id=self.client_id, timeout_s=self.timeout_s
        )


class _NoController(Exception):
    pass


def report_lines(results: Mapping[TopicPartition, tuple[int, str | None]]) -> list[str]:
    """The partitions refused, one line each: ``t-0: ERROR_NAME (message)``."""
    return [
        f"{tp}: {error_name(code)}" + (f" ({message})" if message else "")
        for tp, (code, message) in sorted(results.items())
        if code != ErrorCode.NONE
    ]


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"

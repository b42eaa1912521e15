"""The broker's handlers of the controller's requests (Kafka 2.8's KafkaApis
handleLeaderAndIsrRequest, handleUpdateMetadataRequest, handleStopReplicaRequest,
handleControlledShutdownRequest and isBrokerEpochStale), each version as the wire gives
it: what is applied, what is answered, what is refused and logged. No ZooKeeper, no logs:
a real replica manager and metadata cache behind them."""

from __future__ import annotations

import threading
import uuid
from typing import Any, cast

import pytest

from broker import apis as apis_module
from broker.apis import KafkaApis
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from controller import events as ev
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import request_codec
from zkdata.znodes import TopicPartition

BROKER = 1
OUR_EPOCH = 10  # this broker's epoch, unless a test says otherwise
TOPIC_ID = uuid.UUID(int=7)
STALE_BROKER_EPOCH = int(ErrorCode.STALE_BROKER_EPOCH)
STALE_CONTROLLER_EPOCH = int(ErrorCode.STALE_CONTROLLER_EPOCH)


class RecordingLog(StateChangeLog):
    """A state-change log keeping its records instead of writing them."""

    def __init__(self) -> None:
        super().__init__(None, BROKER)
        self.records: list[tuple[str, dict[str, Any]]] = []

    def write(self, event: str, **fields: Any) -> None:
        self.records.append((event, fields))

    def rejected(self) -> list[dict[str, Any]]:
        return [fields for event, fields in self.records if event == "request_rejected"]


class Handler:
    """KafkaApis over a real replica manager and metadata cache; ``epoch`` is this broker's
    epoch as the handler reads it (changed by a test to model a registration)."""

    def __init__(
        self,
        epoch: int = OUR_EPOCH,
        *,
        registered: threading.Event | None = None,
        request_timeout_s: float = 30.0,
        controller: Any = None,
    ) -> None:
        self.epoch = epoch
        self.log = RecordingLog()
        self.live_leaders: list[list[dict[str, Any]]] = []
        self.replicas = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(None, BROKER))
        self.cache = MetadataCache(BROKER)
        self.apis = KafkaApis(
            BROKER,
            self.cache,
            self.replicas,
            cast(Any, controller),
            self.log,
            lambda: self.epoch,
            request_timeout_s=request_timeout_s,
            on_live_leaders=self.live_leaders.append,
            registered=registered,
        )

    def send(self, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        """The request as the broker reads it off the wire (every field of the version,
        defaults for those it lacks), answered."""
        codec = request_codec(api, version)
        decoded = codec.decode(bytes(codec.encode(body)))
        answer = self.apis.handle(api, version, {}, decoded)
        assert answer is not None
        return answer

    def leader_epochs(self) -> dict[tuple[str, int], tuple[int, int, bool]]:
        """(topic, partition) -> (leader, leader epoch, stale) of the partitions hosted."""
        return {
            (tp.topic, tp.partition): (p.leader, p.leader_epoch, p.stale)
            for tp, p in self.replicas.partitions.items()
        }


def notified(apis: KafkaApis) -> list[str]:
    """The names of the wake-up conditions notified from now on, in turn."""
    names: list[str] = []
    for name in ("fetch_wakeup", "consumer_wakeup"):
        condition = getattr(apis, name)

        def notify_all(name: str = name, original: Any = condition.notify_all) -> None:
            names.append(name)
            original()

        condition.notify_all = notify_all
    return names


# --- LeaderAndIsr ---------------------------------------------------------------------


def partition_state(
    topic: str, partition: int, leader: int, leader_epoch: int, replicas: list[int] | None = None
) -> dict[str, Any]:
    replicas = [1, 2] if replicas is None else replicas
    return {
        "topic_name": topic,
        "partition_index": partition,
        "controller_epoch": 3,
        "leader": leader,
        "leader_epoch": leader_epoch,
        "isr": replicas,
        "partition_epoch": leader_epoch,
        "replicas": replicas,
        "is_new": True,
    }


LIVE_LEADERS = [
    {"broker_id": 2, "host_name": "b2", "port": 9092},
    {"broker_id": 3, "host_name": "b3", "port": 9093},
]


def leader_and_isr(
    version: int,
    states: list[dict[str, Any]],
    *,
    controller_epoch: int = 3,
    broker_epoch: int = OUR_EPOCH,
) -> dict[str, Any]:
    """v0/v1 list the partition states ungrouped; v2+ by topic, in the order given."""
    body: dict[str, Any] = {
        "controller_id": 9,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "live_leaders": LIVE_LEADERS,
    }
    if version < 2:
        body["ungrouped_partition_states"] = states
    else:
        topics: dict[str, list[dict[str, Any]]] = {}
        for s in states:
            topics.setdefault(s["topic_name"], []).append(s)
        body["topic_states"] = [
            {"topic_name": t, "topic_id": TOPIC_ID, "partition_states": ps}
            for t, ps in topics.items()
        ]
    return body


def ungrouped_errors(answer: dict[str, Any]) -> list[tuple[str, int, int]]:
    return sorted(
        (e["topic_name"], e["partition_index"], e["error_code"]) for e in answer["partition_errors"]
    )


# Two topics, their partitions interleaved; broker 1 is no replica of b-1.
STATES = [
    partition_state("a", 0, leader=1, leader_epoch=4),
    partition_state("b", 0, leader=2, leader_epoch=4),
    partition_state("a", 1, leader=2, leader_epoch=4),
    partition_state("b", 1, leader=2, leader_epoch=4, replicas=[2, 3]),
]
ANSWERED = [
    ("a", 0, 0),
    ("a", 1, 0),
    ("b", 0, 0),
    ("b", 1, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)),
]
APPLIED = {("a", 0): (1, 4, False), ("a", 1): (2, 4, False), ("b", 0): (2, 4, False)}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_leader_and_isr_up_to_v4_is_applied_and_answered_per_partition_with_topic_names(
    version: int,
) -> None:
    """v0/v1 carry the partitions ungrouped, v2+ by topic; v0-v4 are answered by one list
    of partitions naming their topics, each partition's own error (Kafka's
    LeaderAndIsrResponse before v5)."""
    h = Handler()
    answer = h.send(ApiKey.LEADER_AND_ISR, version, leader_and_isr(version, STATES))
    assert answer["error_code"] == 0
    assert "topics" not in answer
    assert ungrouped_errors(answer) == ANSWERED
    assert h.leader_epochs() == APPLIED


@pytest.mark.parametrize("version", [5, 6, 7])
def test_leader_and_isr_from_v5_is_answered_by_topic(version: int) -> None:
    h = Handler()
    answer = h.send(ApiKey.LEADER_AND_ISR, version, leader_and_isr(version, STATES))
    assert answer["error_code"] == 0
    assert "partition_errors" not in answer
    by_partition = sorted(
        (str(t["topic_id"]), e["partition_index"], e["error_code"])
        for t in answer["topics"]
        for e in t["partition_errors"]
    )
    assert [p for _, p, _ in by_partition] == [0, 0, 1, 1]
    assert {t["topic_id"] for t in answer["topics"]} == {TOPIC_ID}
    assert sorted(e for _, _, e in by_partition) == sorted(e for _, _, e in ANSWERED)
    assert h.leader_epochs() == APPLIED


@pytest.mark.parametrize("version", [1, 4, 5])
def test_the_live_leaders_of_a_leader_and_isr_are_known_before_its_partitions_change(
    version: int,
) -> None:
    """Kafka's makeFollowers finds the leaders' addresses in the request's live leaders:
    a follower's fetcher is started knowing where its leader is."""
    h = Handler()
    known_at_change: list[list[list[dict[str, Any]]]] = []
    h.replicas.on_become = lambda leaders, followers: known_at_change.append(list(h.live_leaders))
    h.send(ApiKey.LEADER_AND_ISR, version, leader_and_isr(version, STATES[1:2]))
    assert h.live_leaders == [LIVE_LEADERS]
    assert known_at_change == [[LIVE_LEADERS]]


REFUSED = [
    partition_state("a", 0, leader=2, leader_epoch=9),
    partition_state("b", 0, leader=1, leader_epoch=9),
    partition_state("a", 1, leader=1, leader_epoch=9),
]


@pytest.mark.parametrize(
    ("why", "version"),
    # A broker epoch came with v2 (KIP-380).
    [("older controller", v) for v in (1, 4, 5)] + [("older broker epoch", v) for v in (2, 4, 5)],
)
def test_a_leader_and_isr_refused_whole_answers_each_of_its_partitions_so(
    why: str, version: int
) -> None:
    """An older controller's request (Kafka's becomeLeaderOrFollower) or one for an earlier
    incarnation of this broker (isBrokerEpochStale) changes nothing and is answered with
    Kafka's LeaderAndIsrRequest.getErrorResponse: the error for the request and for each
    of its partitions (v0-v4 naming their topics, v5+ by topic id)."""
    h = Handler()
    h.send(ApiKey.LEADER_AND_ISR, version, leader_and_isr(version, STATES))
    if why == "older controller":
        body, error = leader_and_isr(version, REFUSED, controller_epoch=2), STALE_CONTROLLER_EPOCH
    else:
        body, error = (
            leader_and_isr(version, REFUSED, broker_epoch=OUR_EPOCH - 1),
            STALE_BROKER_EPOCH,
        )
    answer = h.send(ApiKey.LEADER_AND_ISR, version, body)
    assert answer["error_code"] == error
    if version < 5:
        assert ungrouped_errors(answer) == [("a", 0, error), ("a", 1, error), ("b", 0, error)]
    else:
        assert [
            (
                t["topic_id"],
                [(e["partition_index"], e["error_code"]) for e in t["partition_errors"]],
            )
            for t in answer["topics"]
        ] == [(TOPIC_ID, [(0, error), (1, error)]), (TOPIC_ID, [(0, error)])]
    assert h.leader_epochs() == APPLIED
    if why == "older broker epoch":
        # Nor are its live leaders taken (those of the first request only).
        assert h.live_leaders == [LIVE_LEADERS]


# --- broker epoch fencing (Kafka's isBrokerEpochStale) --------------------------------


def update_metadata(
    broker_epoch: int,
    *,
    controller_epoch: int = 3,
    leader: int = 2,
    version: int = 7,
    topics: tuple[str, ...] = ("t",),
) -> dict[str, Any]:
    """Partition 0 of each topic (t) led by ``leader``; before v5 (KIP-516's topic states)
    ungrouped."""
    states = [
        {
            "topic_name": topic,
            "partition_index": 0,
            "controller_epoch": controller_epoch,
            "leader": leader,
            "leader_epoch": 1,
            "isr": [1, 2],
            "zk_version": 1,
            "replicas": [1, 2],
            "offline_replicas": [],
        }
        for topic in topics
    ]
    body: dict[str, Any] = {
        "controller_id": 9,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "live_brokers": [],
    }
    if version < 5:
        body["ungrouped_partition_states"] = states
    else:
        body["topic_states"] = [
            {"topic_name": s["topic_name"], "topic_id": TOPIC_ID, "partition_states": [s]}
            for s in states
        ]
    return body


def leader_of_t0(h: Handler) -> int | None:
    partition = h.cache.partition("t", 0)
    return None if partition is None else partition.leader


def test_a_request_carrying_a_newer_broker_epoch_than_ours_is_applied() -> None:
    """Kafka refuses only an older one: the controller may learn the broker's new epoch
    (its registration's czxid) before the broker does."""
    h = Handler()
    assert h.send(ApiKey.UPDATE_METADATA, 7, update_metadata(OUR_EPOCH + 1)) == {"error_code": 0}
    assert leader_of_t0(h) == 2
    assert h.log.rejected() == []


class NeverRegistered(threading.Event):
    """A registration that never comes: each wait for it is counted, and times out."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        return False


def test_a_request_without_a_broker_epoch_is_applied_at_once_even_before_registration() -> None:
    """v0/v1 of UpdateMetadata carry no broker epoch (-1, Kafka's UNKNOWN_BROKER_EPOCH):
    never stale, nothing to compare, so nothing to wait for."""
    registration = NeverRegistered()
    h = Handler(-1, registered=registration)
    body = update_metadata(-1, version=0)
    body["live_brokers"] = [{"id": 2, "v0_host": "b2", "v0_port": 9092}]
    assert h.send(ApiKey.UPDATE_METADATA, 0, body) == {"error_code": 0}
    assert leader_of_t0(h) == 2
    assert registration.waits == 0


def test_a_request_carrying_an_epoch_while_this_broker_never_registered_is_refused() -> None:
    registration = NeverRegistered()
    h = Handler(-1, registered=registration)
    answer = h.send(ApiKey.UPDATE_METADATA, 7, update_metadata(OUR_EPOCH))
    assert answer == {"error_code": STALE_BROKER_EPOCH}
    assert registration.waits == 1
    assert leader_of_t0(h) is None


@pytest.mark.parametrize(("carried", "applied"), [(12, True), (11, False)])
def test_a_request_that_comes_before_the_registration_is_compared_with_its_epoch(
    carried: int, applied: bool
) -> None:
    """A restarting broker takes requests before its registration is made (the earlier
    incarnation's has to expire first): one meant for the registration being made
    (its epoch, 12) waits for it and is applied; one of the earlier incarnation is
    refused once the epoch is known."""
    registration = threading.Event()
    h = Handler(-1, registered=registration)
    answers: list[dict[str, Any]] = []
    asking = threading.Thread(
        target=lambda: answers.append(h.send(ApiKey.UPDATE_METADATA, 7, update_metadata(carried)))
    )
    asking.start()
    asking.join(0.2)  # most likely waiting by now; the answer is the same either way
    h.epoch = 12
    registration.set()
    asking.join(30)
    assert not asking.is_alive()
    if applied:
        assert answers == [{"error_code": 0}]
        assert leader_of_t0(h) == 2
    else:
        assert answers == [{"error_code": STALE_BROKER_EPOCH}]
        assert leader_of_t0(h) is None


def stop_replica_v3(broker_epoch: int = OUR_EPOCH) -> dict[str, Any]:
    return {
        "controller_id": 9,
        "controller_epoch": 3,
        "broker_epoch": broker_epoch,
        "topic_states": [
            {
                "topic_name": "a",
                "partition_states": [{"partition_index": 0, "leader_epoch": 5}],
            }
        ],
    }


def test_a_stale_broker_epoch_is_refused_and_logged_naming_the_request() -> None:
    """Each of the three requests carrying a broker epoch older than ours is answered
    STALE_BROKER_EPOCH, changes nothing, and is logged with the epoch it carried."""
    h = Handler()
    h.send(ApiKey.LEADER_AND_ISR, 4, leader_and_isr(4, STATES))
    stale = OUR_EPOCH - 1
    newer = [partition_state("a", 0, leader=2, leader_epoch=5)]
    assert h.send(ApiKey.LEADER_AND_ISR, 4, leader_and_isr(4, newer, broker_epoch=stale)) == {
        "error_code": STALE_BROKER_EPOCH,
        "partition_errors": [
            {"topic_name": "a", "partition_index": 0, "error_code": STALE_BROKER_EPOCH}
        ],
    }
    assert h.send(ApiKey.UPDATE_METADATA, 7, update_metadata(stale, controller_epoch=4)) == {
        "error_code": STALE_BROKER_EPOCH
    }
    assert h.send(ApiKey.STOP_REPLICA, 3, stop_replica_v3(stale)) == {
        "error_code": STALE_BROKER_EPOCH,
        "partition_errors": [],
    }
    assert h.leader_epochs() == APPLIED
    assert leader_of_t0(h) is None
    assert h.log.rejected() == [
        {
            "api": api,
            "controller_id": 9,
            "controller_epoch": epoch,
            "broker_epoch": stale,
            "error": "STALE_BROKER_EPOCH",
        }
        for api, epoch in (("LeaderAndIsr", 3), ("UpdateMetadata", 4), ("StopReplica", 3))
    ]


# --- UpdateMetadata ---------------------------------------------------------------------


def test_an_update_metadata_of_an_older_controller_is_logged_as_such() -> None:
    h = Handler()
    assert h.send(ApiKey.UPDATE_METADATA, 7, update_metadata(OUR_EPOCH, controller_epoch=4)) == {
        "error_code": 0
    }
    older = update_metadata(OUR_EPOCH, controller_epoch=3, leader=1)
    assert h.send(ApiKey.UPDATE_METADATA, 7, older) == {"error_code": STALE_CONTROLLER_EPOCH}
    assert leader_of_t0(h) == 2
    assert h.log.rejected() == [
        {
            "api": "UpdateMetadata",
            "controller_id": 9,
            "controller_epoch": 3,
            "broker_epoch": OUR_EPOCH,
            "error": "STALE_CONTROLLER_EPOCH",
        }
    ]


@pytest.mark.parametrize("version", [1, 2])
def test_update_metadata_v1_v2_keep_each_brokers_endpoints(version: int) -> None:
    """v1 brought endpoints (KIP-2's many listeners); only v0 has one address a broker."""
    h = Handler()
    body = update_metadata(-1, version=version)
    body["live_brokers"] = [
        {"id": 2, "endpoints": [{"host": "b2", "port": 9093, "security_protocol": 0}]}
    ]
    assert h.send(ApiKey.UPDATE_METADATA, version, body) == {"error_code": 0}
    assert [(b.broker_id, b.host, b.port) for b in h.cache.alive_brokers()] == [(2, "b2", 9093)]
    assert leader_of_t0(h) == 2


def deleting(epoch: int = 3, topics: tuple[str, ...] = ("t",)) -> dict[str, Any]:
    """An UpdateMetadata marking the topics deleted (their partitions' leader -2)."""
    return update_metadata(OUR_EPOCH, controller_epoch=epoch, leader=-2, topics=topics)


def test_a_topic_marked_deleted_is_handed_on_and_its_partitions_noted_for_every_fetch() -> None:
    """Kafka's handleUpdateMetadataRequest: the group coordinator is told of the deleted
    partitions (their committed offsets go), and fetches waiting on them, followers' too,
    learn they are gone. Whoever is told of an update finds it applied."""
    h = Handler()
    deleted: list[list[str]] = []
    updated: list[int | None] = []  # the leader of t-0 each time
    h.apis.on_topics_deleted = deleted.append
    h.apis.on_metadata_updated = lambda: updated.append(leader_of_t0(h))
    both = ("t", "u")
    assert h.send(ApiKey.UPDATE_METADATA, 7, update_metadata(OUR_EPOCH, topics=both)) == {
        "error_code": 0
    }
    assert (deleted, updated) == ([], [2])
    woken = notified(h.apis)
    seen = h.apis.fetch_changes.generation
    assert h.send(ApiKey.UPDATE_METADATA, 7, deleting(topics=both)) == {"error_code": 0}
    assert [sorted(topics) for topics in deleted] == [["t", "u"]]
    assert updated == [2, None]
    assert sorted(h.apis.fetch_changes.since(seen) or []) == [
        TopicPartition("t", 0),
        TopicPartition("u", 0),
    ]
    assert sorted(woken) == ["consumer_wakeup", "fetch_wakeup"]


def test_a_failing_deletion_hook_still_answers_the_update_applied() -> None:
    h = Handler()
    updated: list[int] = []

    def fail(topics: list[str]) -> None:
        raise OSError("the offsets could not be dropped")

    h.apis.on_topics_deleted = fail
    h.apis.on_metadata_updated = lambda: updated.append(1)
    h.send(ApiKey.UPDATE_METADATA, 7, update_metadata(OUR_EPOCH))
    assert h.send(ApiKey.UPDATE_METADATA, 7, deleting()) == {"error_code": 0}
    assert leader_of_t0(h) is None
    assert updated == [1, 1]


def test_a_refused_update_metadata_tells_nobody() -> None:
    h = Handler()
    deleted: list[list[str]] = []
    updated: list[int] = []
    h.apis.on_topics_deleted = deleted.append
    h.apis.on_metadata_updated = lambda: updated.append(1)
    h.send(ApiKey.UPDATE_METADATA, 7, update_metadata(OUR_EPOCH, controller_epoch=4))
    seen = h.apis.fetch_changes.generation
    for refused in (deleting(epoch=3), {**deleting(epoch=4), "broker_epoch": OUR_EPOCH - 1}):
        assert h.send(ApiKey.UPDATE_METADATA, 7, refused)["error_code"] != 0
    assert (deleted, updated) == ([], [1])
    assert h.apis.fetch_changes.generation == seen
    assert leader_of_t0(h) == 2


# --- StopReplica ----------------------------------------------------------------------


def hosting(h: Handler, leader_epoch: int = 5) -> None:
    """Broker 1 leads a-0 and a-1, follows b-0, at ``leader_epoch``."""
    states = [
        partition_state("a", 0, leader=1, leader_epoch=leader_epoch),
        partition_state("a", 1, leader=1, leader_epoch=leader_epoch),
        partition_state("b", 0, leader=2, leader_epoch=leader_epoch),
    ]
    assert h.send(ApiKey.LEADER_AND_ISR, 4, leader_and_isr(4, states))["error_code"] == 0


def stop_replica_v0_to_v2(version: int, delete: bool) -> dict[str, Any]:
    """a-0, a-1 and b-0: v0 lists them ungrouped, v1/v2 by topic; none carries an epoch."""
    body: dict[str, Any] = {
        "controller_id": 9,
        "controller_epoch": 3,
        "broker_epoch": OUR_EPOCH,
        "delete_partitions": delete,
    }
    if version == 0:
        body["ungrouped_partitions"] = [
            {"topic_name": t, "partition_index": p} for t, p in (("a", 0), ("a", 1), ("b", 0))
        ]
    else:
        body["topics"] = [
            {"name": "a", "partition_indexes": [0, 1]},
            {"name": "b", "partition_indexes": [0]},
        ]
    return body


def stopped_errors(answer: dict[str, Any]) -> list[tuple[str, int, int]]:
    return sorted(
        (e["topic_name"], e["partition_index"], e["error_code"]) for e in answer["partition_errors"]
    )


ALL_STOPPED = [("a", 0, 0), ("a", 1, 0), ("b", 0, 0)]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_stop_replica_up_to_v2_deletes_the_partitions_it_lists_when_it_says_so(
    version: int,
) -> None:
    """Before v3 one DeletePartitions flag holds for every partition listed, and no leader
    epoch is given (Kafka's StopReplicaRequest.partitionStates: -1, never fenced)."""
    h = Handler()
    hosting(h)
    answer = h.send(ApiKey.STOP_REPLICA, version, stop_replica_v0_to_v2(version, delete=True))
    assert answer["error_code"] == 0
    assert stopped_errors(answer) == ALL_STOPPED
    assert h.replicas.partitions == {}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_stop_replica_up_to_v2_without_deletion_stops_replicating_and_keeps_the_epochs(
    version: int,
) -> None:
    h = Handler()
    hosting(h)
    answer = h.send(ApiKey.STOP_REPLICA, version, stop_replica_v0_to_v2(version, delete=False))
    assert answer["error_code"] == 0
    assert stopped_errors(answer) == ALL_STOPPED
    assert h.leader_epochs() == {
        ("a", 0): (1, 5, True),
        ("a", 1): (1, 5, True),
        ("b", 0): (2, 5, True),
    }


@pytest.mark.parametrize("version", [3, 4])
def test_stop_replica_from_v3_takes_each_partitions_own_epoch_and_deletion(version: int) -> None:
    """v3 (KIP-570) gives each partition its leader epoch and deletion: an older epoch is
    FENCED_LEADER_EPOCH, a topic deletion's sentinel (-2) always applies."""
    h = Handler()
    hosting(h)
    body = {
        "controller_id": 9,
        "controller_epoch": 3,
        "broker_epoch": OUR_EPOCH,
        "topic_states": [
            {
                "topic_name": "a",
                "partition_states": [
                    {"partition_index": 0, "leader_epoch": -2, "delete_partition": True},
                    {"partition_index": 1, "leader_epoch": 4, "delete_partition": True},
                ],
            },
            {
                "topic_name": "b",
                "partition_states": [
                    {"partition_index": 0, "leader_epoch": 6, "delete_partition": False}
                ],
            },
        ],
    }
    answer = h.send(ApiKey.STOP_REPLICA, version, body)
    assert answer["error_code"] == 0
    assert stopped_errors(answer) == [
        ("a", 0, 0),
        ("a", 1, int(ErrorCode.FENCED_LEADER_EPOCH)),
        ("b", 0, 0),
    ]
    assert h.leader_epochs() == {("a", 1): (1, 5, False), ("b", 0): (2, 5, True)}


# --- ControlledShutdown -----------------------------------------------------------------


class Controller:
    """The controller's side of a ControlledShutdown: records who asked, and answers
    (at once, later from another thread, or never)."""

    def __init__(
        self,
        code: int = 0,
        remaining: list[TopicPartition] | None = None,
        *,
        later: threading.Event | None = None,
        never: bool = False,
    ) -> None:
        self.code = code
        self.remaining = remaining or []
        self.later = later
        self.never = never
        self.asked: list[tuple[int, int]] = []

    def controlled_shutdown(
        self, broker_id: int, broker_epoch: int, reply: ev.ShutdownReply
    ) -> None:
        self.asked.append((broker_id, broker_epoch))
        if self.never:
            return
        later = self.later
        if later is None:
            reply(self.code, self.remaining)
            return

        def answer() -> None:
            later.wait(30)
            reply(self.code, self.remaining)

        threading.Thread(target=answer, daemon=True).start()


def test_a_controlled_shutdown_is_answered_as_the_controller_replies() -> None:
    remaining = [TopicPartition("a", 3), TopicPartition("b", 0)]
    controller = Controller(0, remaining)
    h = Handler(controller=controller)
    answer = h.send(ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": 4, "broker_epoch": 77})
    assert controller.asked == [(4, 77)]
    assert answer == {
        "error_code": 0,
        "remaining_partitions": [
            {"topic_name": "a", "partition_index": 3},
            {"topic_name": "b", "partition_index": 0},
        ],
    }


def test_a_controlled_shutdown_v0_carries_no_broker_epoch_and_an_error_is_answered() -> None:
    controller = Controller(int(ErrorCode.STALE_BROKER_EPOCH))
    h = Handler(controller=controller)
    answer = h.send(ApiKey.CONTROLLED_SHUTDOWN, 0, {"broker_id": 4})
    assert controller.asked == [(4, -1)]
    assert answer == {"error_code": STALE_BROKER_EPOCH, "remaining_partitions": []}


def test_a_controlled_shutdown_the_controller_never_answers_times_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(apis_module, "CONTROLLED_SHUTDOWN_APPLIED_WAIT_S", 0.0)
    h = Handler(controller=Controller(never=True), request_timeout_s=0.05)
    answer = h.send(ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": 4, "broker_epoch": 77})
    assert answer == {"error_code": int(ErrorCode.REQUEST_TIMED_OUT), "remaining_partitions": []}


def test_a_controlled_shutdown_answer_after_the_request_timeout_waits_for_the_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The controller answers once the brokers applied the moves, which may take up to
    CONTROLLED_SHUTDOWN_APPLIED_WAIT_S beyond the request timeout: no timeout then."""
    monkeypatch.setattr(apis_module, "CONTROLLED_SHUTDOWN_APPLIED_WAIT_S", 60.0)
    go = threading.Event()
    timer = threading.Timer(0.2, go.set)
    timer.start()
    try:
        h = Handler(controller=Controller(0, later=go), request_timeout_s=0.0)
        answer = h.send(ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": 4, "broker_epoch": 77})
    finally:
        timer.cancel()
    assert answer == {"error_code": 0, "remaining_partitions": []}


# --- wake_fetches -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("followers", "woken"),
    [(True, ["consumer_wakeup", "fetch_wakeup"]), (False, ["consumer_wakeup"])],
)
def test_a_high_watermark_move_alone_wakes_consumers_only(
    followers: bool, woken: list[str]
) -> None:
    """New data or a state change wakes both kinds of fetch; a high watermark move alone
    only consumers' (a follower learns it with its next records), and either is noted
    for the incremental sessions, by partition."""
    h = Handler()
    woken_now = notified(h.apis)
    seen = h.apis.fetch_changes.generation
    h.apis.wake_fetches(followers, [TopicPartition("a", 0)])
    assert sorted(woken_now) == woken
    assert h.apis.fetch_changes.since(seen) == [TopicPartition("a", 0)]

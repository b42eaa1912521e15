"""The admin APIs' own logic (broker/admin_apis.py): each topic's checks and their Kafka
error codes, the configs CreateTopics v5+ returns, waiting on the metadata cache, and that
every answer encodes at every version advertised. ZooKeeper's part is in
tests/integration/test_admin_wire.py."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from typing import Any, cast

import pytest
from kazoo.exceptions import ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

import broker.admin_apis
from admin.errors import (
    AdminError,
    ConcurrentChangeError,
    MarkedForDeletionError,
    PartitionCountError,
    ReassignmentInProgressError,
    ReplicaAssignmentError,
    ReplicationFactorError,
    TopicCollisionError,
    TopicExistsError,
    UnknownTopicError,
)
from admin.topics import (
    CreateTopicRequest,
    TopicCreationPlan,
    create_topic,
    delete_topic,
    plan_topic_creation,
)
from broker.admin_apis import AdminApis, TopicError, creatable_topic, error_of
from broker.apis import SUPPORTED
from broker.config import ConfigError, load_broker_config
from broker.config_entries import broker_entries, create_topics_row, topic_entries
from broker.metadata_cache import ZERO_UUID, MetadataCache
from controller import events as ev
from controller.assignment import BrokerMetadata
from controller.context import ReplicaAssignment
from tests.unit.fake_cluster import add_topic, register, registration
from tests.unit.fake_zk import FakeZk
from tests.unit.test_metadata_cache import request as metadata_request
from tests.unit.test_metadata_cache import state as partition_state
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import request_codec, response_codec
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import (
    LEADER_DURING_DELETE,
    TopicPartition,
    decode_topic,
    decode_topic_config,
    encode_broker,
)


def topic(name: str = "t", partitions: int = 3, rf: int = 2, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": rf,
        "assignments": [],
        "configs": [],
        **more,
    }


def code_of(t: dict[str, Any]) -> ErrorCode:
    with pytest.raises(TopicError) as e:
        creatable_topic(t, 1, 1)
    return e.value.code


# --- each topic's checks ------------------------------------------------------------------


def test_a_valid_topic_and_the_brokers_defaults() -> None:
    r = creatable_topic(topic(configs=[{"name": "retention.ms", "value": "1000"}]), 1, 1)
    assert (r.name, r.partitions, r.replication_factor) == ("t", 3, 2)
    assert dict(r.config) == {"retention.ms": "1000"}
    d = creatable_topic(topic(partitions=-1, rf=-1), 4, 3)
    assert (d.partitions, d.replication_factor) == (4, 3)
    a = creatable_topic(
        topic(
            partitions=-1,
            rf=-1,
            assignments=[
                {"partition_index": 1, "broker_ids": [2, 1]},
                {"partition_index": 0, "broker_ids": [1, 2]},
            ],
        ),
        1,
        1,
    )
    assert a.replica_assignment == {0: [1, 2], 1: [2, 1]}
    assert a.partitions is None


@pytest.mark.parametrize(
    ("t", "code"),
    [
        (topic(name="a/b"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (topic(name=".."), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (topic(name="x" * 250), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (topic(partitions=0), ErrorCode.INVALID_PARTITIONS),
        (topic(partitions=-2), ErrorCode.INVALID_PARTITIONS),
        (topic(partitions=2**31 - 1), ErrorCode.INVALID_PARTITIONS),
        (topic(rf=0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (
            topic(assignments=[{"partition_index": 0, "broker_ids": [1]}]),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            topic(
                partitions=-1,
                rf=-1,
                assignments=[
                    {"partition_index": 0, "broker_ids": [1]},
                    {"partition_index": 0, "broker_ids": [2]},
                ],
            ),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (topic(configs=[{"name": "retention.ms", "value": None}]), ErrorCode.INVALID_REQUEST),
        (topic(configs=[{"name": "retention.ms", "value": "soon"}]), ErrorCode.INVALID_CONFIG),
        (topic(configs=[{"name": "no.such.key", "value": "1"}]), ErrorCode.INVALID_CONFIG),
    ],
)
def test_a_bad_topic_gets_kafkas_error(t: dict[str, Any], code: ErrorCode) -> None:
    assert code_of(t) == code


def test_the_plans_failures_get_kafkas_errors() -> None:
    brokers = [BrokerMetadata(1), BrokerMetadata(2)]
    req = creatable_topic(topic(name="a.b", rf=2), 1, 1)
    with pytest.raises(TopicExistsError):
        plan_topic_creation(req, brokers, {"a.b"}, set())
    with pytest.raises(TopicExistsError):
        plan_topic_creation(req, brokers, set(), {"a.b"})  # being deleted
    with pytest.raises(TopicCollisionError):
        plan_topic_creation(req, brokers, {"a_b"}, set())
    with pytest.raises(ReplicationFactorError):
        plan_topic_creation(creatable_topic(topic(rf=3), 1, 1), brokers, set(), set())
    unknown = creatable_topic(
        topic(partitions=-1, rf=-1, assignments=[{"partition_index": 0, "broker_ids": [9]}]),
        1,
        1,
    )
    with pytest.raises(ReplicaAssignmentError):
        plan_topic_creation(unknown, brokers, set(), set())
    # More than a znode holds (ZooKeeper's 1 MB): refused before anything is written.
    three = [BrokerMetadata(1), BrokerMetadata(2), BrokerMetadata(3)]
    huge = creatable_topic(topic(partitions=90_000, rf=3), 1, 1)
    with pytest.raises(PartitionCountError, match="more than a znode holds"):
        plan_topic_creation(huge, three, set(), set())
    assert plan_topic_creation(creatable_topic(topic(partitions=30_000, rf=3), 1, 1), three, (), ())


@pytest.mark.parametrize(
    ("e", "code"),
    [
        (TopicExistsError("x"), ErrorCode.TOPIC_ALREADY_EXISTS),
        (UnknownTopicError("x"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TopicCollisionError("x"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (MarkedForDeletionError("x"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (ReassignmentInProgressError("x"), ErrorCode.REASSIGNMENT_IN_PROGRESS),
        (PartitionCountError("x"), ErrorCode.INVALID_PARTITIONS),
        (ReplicationFactorError("x"), ErrorCode.INVALID_REPLICATION_FACTOR),
        (ReplicaAssignmentError("x"), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (ConcurrentChangeError("x"), ErrorCode.INVALID_REQUEST),
        (AdminError("x"), ErrorCode.INVALID_REQUEST),
        (ConfigError([]), ErrorCode.INVALID_CONFIG),
        (OSError("connection lost"), ErrorCode.UNKNOWN_SERVER_ERROR),
        # ZooKeeper out of reach: whether the write landed is not known, ask again
        (ConnectionLoss(), ErrorCode.REQUEST_TIMED_OUT),
        (SessionExpiredError(), ErrorCode.REQUEST_TIMED_OUT),
        (KazooTimeoutError(), ErrorCode.REQUEST_TIMED_OUT),
    ],
)
def test_error_codes(e: Exception, code: ErrorCode) -> None:
    assert error_of(e).code == code


# --- configs in CreateTopics v5+ ----------------------------------------------------------


def test_configs_say_where_each_value_comes_from() -> None:
    broker = load_broker_config(
        overrides=["broker.id=1", "zookeeper.connect=z:2181", "log.retention.hours=1"]
    )
    entries = {e.name: e for e in topic_entries(broker, {"segment.bytes": "1048576"})}
    segment = entries["segment.bytes"]
    assert (segment.value, segment.source) == ("1048576", 1)  # the topic's own
    assert segment.synonyms == (
        ("segment.bytes", "1048576", 1),
        ("log.segment.bytes", str(2**30), 5),
    )
    # The broker's log.retention.hours=1, resolved, but Kafka 2.8's configSynonyms drops
    # every synonym above log.retention.ms, which is unset: a default, with none.
    retention = entries["retention.ms"]
    assert (retention.value, retention.source, retention.synonyms) == ("3600000", 5, ())
    cleanup = entries["cleanup.policy"]
    assert (cleanup.value, cleanup.source, cleanup.type) == ("delete", 5, 7)  # a default list
    assert entries["preallocate"].value == "false"
    assert create_topics_row(cleanup) == {
        "name": "cleanup.policy",
        "value": "delete",
        "read_only": False,
        "config_source": 5,
        "is_sensitive": False,
    }
    own = {e.name: e for e in broker_entries(broker)}
    assert (own["log.retention.hours"].value, own["log.retention.hours"].source) == ("1", 4)
    assert (own["num.partitions"].value, own["num.partitions"].source) == ("1", 5)
    assert all(e.read_only for e in own.values())
    # Kafka 2.8's KRaft keys are internal: described only when given (allConfigs).
    assert "controller.quorum.voters" not in own
    assert "node.id" not in own
    assert own["quota.window.num"].value == "11"


# --- answers without ZooKeeper -----------------------------------------------------------


class NoZooKeeper:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"ZooKeeper was used ({name})")


def apis(controller: bool) -> AdminApis:
    return AdminApis(cast(ZkClient, NoZooKeeper()), MetadataCache(1), lambda: controller)


def test_not_the_controller_and_duplicates_are_answered_without_zookeeper() -> None:
    a = apis(controller=False)
    body = {"topics": [topic("a"), topic("b"), topic("a")], "timeout_ms": 1000}
    got = [(t["name"], t["error_code"]) for t in a.create_topics(7, body)["topics"]]
    # Kafka's handleCreateTopicsRequest: NOT_CONTROLLER at every entry, duplicates too.
    assert got == [("a", 41), ("b", 41), ("a", 41)]
    grown = a.create_partitions(
        3, {"topics": [{"name": "a", "count": 2, "assignments": None}] * 2, "timeout_ms": 0}
    )
    # handleCreatePartitionsRequest answers a map: one per name, NOT_CONTROLLER first.
    assert [r["error_code"] for r in grown["results"]] == [ErrorCode.NOT_CONTROLLER]
    deleted = a.delete_topics(5, {"topic_names": ["a"], "timeout_ms": 0})
    assert [r["error_code"] for r in deleted["responses"]] == [ErrorCode.NOT_CONTROLLER]
    unknown_id = uuid.uuid4()
    by_id = apis(controller=True).delete_topics(
        6, {"topics": [{"name": None, "topic_id": unknown_id}]}
    )
    assert by_id["responses"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
    both = apis(controller=True).delete_topics(
        6, {"topics": [{"name": "a", "topic_id": unknown_id}]}
    )
    assert both["responses"][0]["error_code"] == ErrorCode.INVALID_REQUEST


class ZooKeeperGone:
    """A ZooKeeper client whose session ended with a request in flight."""

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise SessionExpiredError()

        return call


def test_zookeeper_out_of_reach_is_request_timed_out_in_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = MetadataCache(1)
    update_with(cache, {0: 1}, "a")  # listed: DeleteTopics then asks ZooKeeper
    a = AdminApis(cast(ZkClient, ZooKeeperGone()), cache, lambda: True)
    deleted = a.delete_topics(5, {"topic_names": ["a"], "timeout_ms": 1000})
    created = a.create_topics(7, {"topics": [topic("b")], "timeout_ms": 1000})
    answers = [deleted["responses"][0], created["topics"][0]]
    assert [r["error_code"] for r in answers] == [ErrorCode.REQUEST_TIMED_OUT] * 2
    assert all("send the request again" in r["error_message"] for r in answers)
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"]
    assert not any(r.exc_info for r in caplog.records)  # no stack trace for an outage


def every_version(api: ApiKey) -> range:
    s = SUPPORTED[api]
    return range(s.min_version, s.max_version + 1)


def test_every_answer_encodes_at_every_version() -> None:
    """Each response field the handlers fill exists at every version advertised (the
    codec refuses unknown fields)."""
    a = apis(controller=False)
    plan = TopicCreationPlan("t", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1"}, uuid.uuid4())
    created = {"name": "t", **a._created(plan)}
    for v in every_version(ApiKey.CREATE_TOPICS):
        answer = a.create_topics(v, {"topics": [topic("x"), topic("x"), topic("y")]})
        answer["topics"].append(created)
        decoded = response_codec(ApiKey.CREATE_TOPICS, v).decode(
            bytes(response_codec(ApiKey.CREATE_TOPICS, v).encode(answer))
        )
        assert [t["error_code"] for t in decoded["topics"]] == [41, 41, 41, 0]
        if v >= 5:
            assert decoded["topics"][3]["num_partitions"] == 2
            assert decoded["topics"][3]["replication_factor"] == 2
    for v in every_version(ApiKey.CREATE_PARTITIONS):
        body: dict[str, Any] = {"topics": [{"name": "x", "count": 2, "assignments": None}] * 2}
        answer = a.create_partitions(v, body)
        response_codec(ApiKey.CREATE_PARTITIONS, v).encode(answer)
    for v in every_version(ApiKey.DELETE_TOPICS):
        body = (
            {"topics": [{"name": "x", "topic_id": uuid.UUID(int=0)}]}
            if v >= 6
            else {"topic_names": ["x"]}
        )
        response_codec(ApiKey.DELETE_TOPICS, v).encode(a.delete_topics(v, body))


def test_a_zero_timeout_answers_each_change_made_request_timed_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka 2.8's ZkAdminManager with timeout_ms <= 0: the writes are made and each
    topic changed is answered REQUEST_TIMED_OUT at once (only the wait is skipped);
    validate_only, and topics refused, keep their own codes."""
    a = apis(controller=True)
    update_with(a.metadata, {0: 1}, "a")
    deleted: list[str] = []
    plan = TopicCreationPlan("a", {0: [1]}, {}, uuid.uuid4())
    monkeypatch.setattr(a, "_cluster", lambda: ([BrokerMetadata(1)], set(), set()))

    def create_one(t: dict[str, Any], *_: Any) -> TopicCreationPlan:
        if t["name"] != "a":
            raise TopicExistsError(f"topic {t['name']!r} already exists")
        return plan

    monkeypatch.setattr(a, "_create_one", create_one)
    monkeypatch.setattr(a, "_grow_one", lambda t, *_: [1])
    monkeypatch.setattr(a, "_check_racks", lambda: None)  # the brokers' racks: none
    monkeypatch.setattr(broker.admin_apis, "delete_topic", lambda _zk, n, **_: deleted.append(n))
    for timeout_ms in (0, -1):
        body = {"topics": [topic("a"), topic("b")], "timeout_ms": timeout_ms}
        got = {t["name"]: t["error_code"] for t in a.create_topics(7, body)["topics"]}
        assert got == {"a": ErrorCode.REQUEST_TIMED_OUT, "b": ErrorCode.TOPIC_ALREADY_EXISTS}
        checked = a.create_topics(7, {**body, "validate_only": True})["topics"]
        assert [t["error_code"] for t in checked] == [0, ErrorCode.TOPIC_ALREADY_EXISTS]
        asked = {"topics": [{"name": "a", "count": 2, "assignments": None}]}
        grown = a.create_partitions(3, {**asked, "timeout_ms": timeout_ms})["results"]
        assert [r["error_code"] for r in grown] == [ErrorCode.REQUEST_TIMED_OUT]
        body = {**asked, "timeout_ms": timeout_ms, "validate_only": True}
        assert [r["error_code"] for r in a.create_partitions(3, body)["results"]] == [0]
        gone = a.delete_topics(5, {"topic_names": ["a"], "timeout_ms": timeout_ms})
        assert [r["error_code"] for r in gone["responses"]] == [ErrorCode.REQUEST_TIMED_OUT]
    assert deleted == ["a", "a"]  # the deletions were asked for all the same


def test_delete_topics_deletes_an_internal_topic_as_kafka_does() -> None:
    """Kafka 2.8's DeleteTopics (AdminZkClient.deleteTopic) marks an internal topic for
    deletion as any other; only its TopicCommand refuses (so does zkctl topic delete)."""
    zk = FakeZk()
    zk.put(paths.topic(OFFSETS_TOPIC), b"{}")
    zk.put(paths.DELETE_TOPICS, b"")
    cache = MetadataCache(1)
    update_with(cache, {0: 1}, OFFSETS_TOPIC)
    a = AdminApis(cast(ZkClient, zk), cache, lambda: True)
    body = {"topic_names": [OFFSETS_TOPIC], "timeout_ms": 0}
    (got,) = a.delete_topics(5, body)["responses"]
    assert (got["name"], got["error_code"]) == (OFFSETS_TOPIC, ErrorCode.REQUEST_TIMED_OUT)
    assert zk.exists(paths.delete_topic(OFFSETS_TOPIC)) is not None
    with pytest.raises(AdminError, match="internal topic"):
        delete_topic(cast(ZkClient, zk), OFFSETS_TOPIC)


# --- waiting on the metadata cache --------------------------------------------------------


def update_with(cache: MetadataCache, leaders: dict[int, int], topic_name: str = "t") -> None:
    cache.update(
        {
            "controller_id": 1,
            "controller_epoch": 1,
            "live_brokers": [],
            "topic_states": [
                {
                    "topic_name": topic_name,
                    "partition_states": [
                        {
                            "partition_index": p,
                            "controller_epoch": 1,
                            "leader": leader,
                            "leader_epoch": 0,
                            "isr": [1],
                            "zk_version": 0,
                            "replicas": [1],
                            "offline_replicas": [],
                        }
                        for p, leader in leaders.items()
                    ],
                }
            ],
        }
    )


@pytest.mark.timeout(60)  # woken by the deadline (600 s), not the update: a hang
def test_a_wait_ends_when_an_update_brings_the_leaders() -> None:
    cache = MetadataCache(1)
    update_with(cache, {0: -1})
    assert not cache.leaders_known("t", range(2))
    later = threading.Timer(0.2, update_with, (cache, {0: 1, 1: 1}))
    later.start()
    try:
        assert cache.wait_until(lambda: cache.leaders_known("t", range(2)), 600)
    finally:
        later.cancel()


def test_a_wait_for_leaders_that_never_come_times_out() -> None:
    a = apis(controller=True)
    update_with(a.metadata, {0: 1, 1: -1})
    late = a._wait(time.monotonic() + 0.2, {"t": range(2), "other": range(1)})
    assert late == ["t", "other"]
    assert a._wait(time.monotonic() + 0.2, {"t": range(1)}) == []
    assert a._wait_deleted(time.monotonic() + 0.1, ["t", "gone"]) == {"t"}


# --- ElectLeaders --------------------------------------------------------------------------


class Answering:
    """Stands in for the controller's event queue: each request is answered at once with
    what the test gave (the controller's own part is tested in test_reassignment.py and
    test_controller_model.py), and kept for the test to look at."""

    def __init__(self, *answer: Any) -> None:
        self.answer = answer
        self.asked: list[Any] = []

    def _reply(self, asked: Any, reply: Any) -> None:
        self.asked.append(asked)
        reply(*self.answer)

    def elect_leaders(self, partitions: Any, _election_type: int, reply: Any) -> None:
        self._reply(partitions, reply)

    def alter_partition_reassignments(self, reassignments: Any, reply: Any) -> None:
        self._reply(reassignments, reply)

    def list_partition_reassignments(self, partitions: Any, reply: Any) -> None:
        self._reply(partitions, reply)


def answered_by(controller: Answering) -> AdminApis:
    """The controller's broker, whose controller answers as ``controller`` does."""
    a = AdminApis(cast(ZkClient, NoZooKeeper()), MetadataCache(1), lambda: True, None, controller)
    update_with(a.metadata, {0: 2, 1: 1})
    return a


def electing(answer: dict[TopicPartition, tuple[int, str | None, int]]) -> AdminApis:
    return answered_by(Answering(answer))


def election_results(body: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {
        (t["topic"], p["partition_id"]): p["error_code"]
        for t in body["replica_election_results"]
        for p in t["partition_result"]
    }


OFFSETS_TOPIC = "__consumer_offsets"

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
ASKED = [{"topic": "t", "partitions": [0, 1]}]


def test_elect_leaders_answers_what_the_controller_decided() -> None:
    a = electing({T0: (0, None, 2), T1: (int(ErrorCode.ELECTION_NOT_NEEDED), "leads", 1)})
    body = {"election_type": 0, "topic_partitions": ASKED, "timeout_ms": 5000}
    assert election_results(a.elect_leaders(1, body)) == {("t", 0): 0, ("t", 1): 84}
    # Asked for every partition: those that needed no election are left out.
    body = {"election_type": 0, "topic_partitions": None, "timeout_ms": 5000}
    assert election_results(a.elect_leaders(1, body)) == {("t", 0): 0}


def test_elect_leaders_times_out_when_the_metadata_does_not_show_the_leader() -> None:
    a = electing({T0: (0, None, 3)})  # the metadata says 2 leads
    body = {"election_type": 0, "topic_partitions": ASKED[:1], "timeout_ms": 200}
    assert election_results(a.elect_leaders(2, body)) == {("t", 0): ErrorCode.REQUEST_TIMED_OUT}
    # timeout_ms <= 0: one look at the metadata (Kafka's DelayedElectLeader expires at
    # once): a leader it shows is NONE, one it does not REQUEST_TIMED_OUT.
    body["timeout_ms"] = 0
    assert election_results(a.elect_leaders(2, body)) == {("t", 0): ErrorCode.REQUEST_TIMED_OUT}
    a = electing({T0: (0, None, 2), T1: (0, None, 3)})
    body = {"election_type": 0, "topic_partitions": ASKED, "timeout_ms": 0}
    assert election_results(a.elect_leaders(2, body)) == {
        ("t", 0): 0,
        ("t", 1): ErrorCode.REQUEST_TIMED_OUT,
    }


def test_elect_leaders_refused() -> None:
    body = {"election_type": 0, "topic_partitions": ASKED, "timeout_ms": 100}
    assert election_results(apis(controller=False).elect_leaders(1, body)) == {
        ("t", 0): ErrorCode.NOT_CONTROLLER,
        ("t", 1): ErrorCode.NOT_CONTROLLER,
    }
    body["election_type"] = 7
    assert set(election_results(electing({}).elect_leaders(1, body)).values()) == {
        ErrorCode.INVALID_REQUEST
    }


class Resigning:
    """A controller that resigns with the request on its queue: the event is answered as
    one dropped from it (its preempt)."""

    def elect_leaders(self, partitions: Any, election_type: int, reply: Any) -> None:
        ev.ElectLeaders(partitions, election_type, reply).preempt()


class Silent:
    """A controller that does not answer in time."""

    def elect_leaders(self, _partitions: Any, _election_type: int, _reply: Any) -> None:
        pass


def test_elect_leaders_of_every_partition_refused_names_each_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Asked for every partition (null) of a broker that is not the controller, or whose
    controller resigns or answers late: each partition the broker's metadata knows is
    answered so, as Kafka expands null from its metadata cache. The answer was an empty
    list, which a client reads as "nothing needed electing"."""
    body = {"election_type": 0, "topic_partitions": None, "timeout_ms": 100}
    off = apis(controller=False)
    update_with(off.metadata, {0: 2, 1: 1})
    not_controller = {("t", 0): ErrorCode.NOT_CONTROLLER, ("t", 1): ErrorCode.NOT_CONTROLLER}
    assert election_results(off.elect_leaders(1, body)) == not_controller
    assert election_results(answered_by(cast(Any, Resigning())).elect_leaders(1, body)) == (
        not_controller
    )
    monkeypatch.setattr(broker.admin_apis, "_answer_s", lambda _body: 0.05)
    assert election_results(answered_by(cast(Any, Silent())).elect_leaders(1, body)) == {
        ("t", 0): ErrorCode.REQUEST_TIMED_OUT,
        ("t", 1): ErrorCode.REQUEST_TIMED_OUT,
    }


def test_elect_leaders_answers_at_every_version() -> None:
    a = electing({T0: (0, None, 2), T1: (int(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE), "x", -1)})
    for v in every_version(ApiKey.ELECT_LEADERS):
        body = {"election_type": 0, "topic_partitions": ASKED, "timeout_ms": 1000}
        codec = response_codec(ApiKey.ELECT_LEADERS, v)
        decoded = codec.decode(bytes(codec.encode(a.elect_leaders(v, body))))
        assert election_results(decoded) == {("t", 0): 0, ("t", 1): 80}


# --- AlterPartitionReassignments, ListPartitionReassignments --------------------------------


def round_trip_request(api: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as a broker decodes it off the wire (its field names, its nulls)."""
    codec = request_codec(api, 0)
    return codec.decode(bytes(codec.encode(body)))


def answered(api: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    """A response as the client decodes it: refuses a field outside the schema."""
    codec = response_codec(api, 0)
    return codec.decode(bytes(codec.encode(body)))


REASSIGN = {
    "timeout_ms": 5000,
    "topics": [
        {
            "name": "t",
            "partitions": [
                {"partition_index": 1, "replicas": [3, 1]},
                {"partition_index": 0, "replicas": None},
            ],
        },
        {"name": "u", "partitions": [{"partition_index": 0, "replicas": []}]},
    ],
}


def test_alter_partition_reassignments_hands_the_targets_to_the_controller() -> None:
    controller = Answering(
        0,
        {
            TopicPartition("t", 1): (0, None),
            T0: (int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), "none to cancel"),
            TopicPartition("u", 0): (int(ErrorCode.INVALID_REPLICA_ASSIGNMENT), "empty"),
        },
    )
    a = answered_by(controller)
    api = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    got = answered(api, a.alter_partition_reassignments(0, round_trip_request(api, REASSIGN)))
    # A null replica list cancels; the partitions go in the request's order.
    assert controller.asked == [
        {TopicPartition("t", 1): (3, 1), T0: None, TopicPartition("u", 0): ()}
    ]
    assert got["error_code"] == 0
    assert [
        (t["name"], p["partition_index"], p["error_code"], p["error_message"])
        for t in got["responses"]
        for p in t["partitions"]
    ] == [("t", 1, 0, None), ("t", 0, 85, "none to cancel"), ("u", 0, 39, "empty")]


def test_reassignment_requests_are_refused_as_a_whole_off_the_controller() -> None:
    api = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    # Not the controller's broker; then a controller that resigned before it answered
    # (the event pre-empted). Either way the client asks the controller Metadata names.
    for a in (apis(controller=False), answered_by(Answering(int(ErrorCode.NOT_CONTROLLER), {}))):
        got = answered(api, a.alter_partition_reassignments(0, REASSIGN))
        assert (got["error_code"], got["responses"]) == (ErrorCode.NOT_CONTROLLER, [])
        listing = ApiKey.LIST_PARTITION_REASSIGNMENTS
        got = answered(listing, a.list_partition_reassignments(0, {"topics": None}))
        assert (got["error_code"], got["topics"]) == (ErrorCode.NOT_CONTROLLER, [])


def test_list_partition_reassignments_shows_the_replicas_moving() -> None:
    moving = ReplicaAssignment.for_reassignment((1, 2), (2, 3))
    controller = Answering(0, {TopicPartition("t", 1): moving})
    api = ApiKey.LIST_PARTITION_REASSIGNMENTS
    a = answered_by(controller)
    asked = {"timeout_ms": 1000, "topics": [{"name": "t", "partition_indexes": [0, 1]}]}
    got = answered(api, a.list_partition_reassignments(0, round_trip_request(api, asked)))
    everything = a.list_partition_reassignments(0, round_trip_request(api, {"topics": None}))
    assert controller.asked == [[T0, T1], None]
    assert got["error_code"] == 0
    assert got["topics"] == [
        {
            "name": "t",
            "partitions": [
                {
                    "partition_index": 1,
                    "replicas": [2, 3, 1],
                    "adding_replicas": [3],
                    "removing_replicas": [1],
                }
            ],
        }
    ]
    assert answered(api, everything)["topics"] == got["topics"]


# --- DescribeConfigs ------------------------------------------------------------------------


def test_a_broker_describes_its_own_configs_at_every_version() -> None:
    config = load_broker_config(
        overrides=["broker.id=1", "zookeeper.connect=z:2181", "num.partitions=4"]
    )
    a = AdminApis(cast(ZkClient, NoZooKeeper()), MetadataCache(1), lambda: False, config)
    resources = [
        {
            "resource_type": 4,
            "resource_name": "1",
            "configuration_keys": ["num.partitions", "num.network.threads"],
        },
        {"resource_type": 4, "resource_name": "2", "configuration_keys": None},
        {"resource_type": 8, "resource_name": "x", "configuration_keys": None},
    ]
    for v in every_version(ApiKey.DESCRIBE_CONFIGS):
        body = {"resources": resources, "include_synonyms": True, "include_documentation": True}
        codec = response_codec(ApiKey.DESCRIBE_CONFIGS, v)
        got = codec.decode(bytes(codec.encode(a.describe_configs(v, body))))["results"]
        assert [r["error_code"] for r in got] == [0, 42, 42]
        row, default = sorted(got[0]["configs"], key=lambda r: r["name"] != "num.partitions")
        assert (row["name"], row["value"], row["read_only"]) == ("num.partitions", "4", True)
        if v == 0:
            assert (row["is_default"], default["is_default"]) == (False, True)
        else:
            assert default["config_source"] == 5
            assert row["config_source"] == 4
            # The file's value, then Kafka's default beneath it (configSynonyms).
            assert [(s["name"], s["value"]) for s in row["synonyms"]] == [
                ("num.partitions", "4"),
                ("num.partitions", "1"),
            ]
        if v >= 3:
            assert row["config_type"] == 3  # INT
            assert "partitions" in row["documentation"]


def test_an_empty_configuration_keys_list_describes_every_config() -> None:
    """Kafka's ConfigHelper: null or empty configuration keys mean every config (kafkajs
    asks with an empty list); only a non-empty list filters."""
    config = load_broker_config(overrides=["broker.id=1", "zookeeper.connect=z:2181"])
    a = AdminApis(cast(ZkClient, NoZooKeeper()), MetadataCache(1), lambda: False, config)

    def names(keys: list[str] | None) -> list[str]:
        body = {
            "resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": keys}]
        }
        (result,) = a.describe_configs(4, body)["results"]
        assert result["error_code"] == 0
        return [c["name"] for c in result["configs"]]

    every = names(None)
    assert len(every) > 100
    assert names([]) == every
    assert names(["num.partitions"]) == ["num.partitions"]


def test_the_broker_resource_named_empty_is_the_clusters_dynamic_defaults() -> None:
    """Kafka 2.8's ConfigHelper.describeConfigs: the broker "" is the cluster-wide dynamic
    default configs, none without dynamic broker configs (not this broker's static ones)."""
    config = load_broker_config(
        overrides=["broker.id=1", "zookeeper.connect=z:2181", "log.retention.hours=1"]
    )
    a = AdminApis(cast(ZkClient, NoZooKeeper()), MetadataCache(1), lambda: False, config)
    for v in every_version(ApiKey.DESCRIBE_CONFIGS):
        body = {
            "resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}]
        }
        codec = response_codec(ApiKey.DESCRIBE_CONFIGS, v)
        (got,) = codec.decode(bytes(codec.encode(a.describe_configs(v, body))))["results"]
        assert (got["error_code"], got["configs"]) == (0, [])


def test_a_topic_config_entry_no_wire_string_can_carry_is_ignored() -> None:
    """JSON can name a lone surrogate ("\\udc80"), which UTF-8 cannot encode: a topic
    config znode holding one in a key or a value was taken as it was, and the
    DescribeConfigs answer naming it could not be encoded (the broker closed the
    connection, with every other resource's answer). That entry is left out, with a
    warning, as an unknown key is; the rest of the topic's config stands."""
    config = load_broker_config(overrides=["broker.id=1", "zookeeper.connect=z:2181"])
    for bad in ({"cleanup.policy": "delete\udc80"}, {"cleanup.policy\udc80": "delete"}):
        zk = FakeZk()
        zk.put(paths.topic("t"), b"{}")
        data = json.dumps({"version": 1, "config": {**bad, "retention.ms": "1000"}}).encode()
        zk.put(paths.topic_config("t"), data)
        assert decode_topic_config("t", data) == {"retention.ms": "1000"}
        cache = MetadataCache(1)
        cache.update(metadata_request(("t", [partition_state(0, 1)])))
        a = AdminApis(cast(ZkClient, zk), cache, lambda: False, config)
        body = {
            "resources": [
                {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
                {
                    "resource_type": 4,
                    "resource_name": "1",
                    "configuration_keys": ["num.partitions"],
                },
            ]
        }
        codec = response_codec(ApiKey.DESCRIBE_CONFIGS, 4)
        got = codec.decode(bytes(codec.encode(a.describe_configs(4, body))))["results"]
        assert [r["error_code"] for r in got] == [ErrorCode.NONE, ErrorCode.NONE]
        values = {row["name"]: row["value"] for row in got[0]["configs"]}
        assert (values["retention.ms"], values["cleanup.policy"]) == ("1000", "delete")


# --- found by review: Kafka 2.8's answers where they differed ----------------------------


def zk_cluster(*topics: str) -> tuple[FakeZk, AdminApis]:
    """Brokers 1-3 registered, ``topics`` (one partition each), this broker the controller."""
    zk = FakeZk()
    for path in (paths.BROKER_IDS, paths.BROKER_TOPICS, paths.DELETE_TOPICS):
        zk.ensure_paths([path])
    for b in (1, 2, 3):
        register(zk, b)
    for name in topics:
        add_topic(zk, name, {0: (1, 2)})
    config = load_broker_config(overrides=["broker.id=1", "zookeeper.connect=z:2181"])
    return zk, AdminApis(cast(ZkClient, zk), MetadataCache(1), lambda: True, config)


def encodes(api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """The response as the client decodes it (the codec refuses a string past 32,767
    bytes: the broker could only close the connection)."""
    codec = response_codec(api, version)
    return codec.decode(bytes(codec.encode(body)))


def test_create_partitions_naming_an_unregistered_broker_is_answered() -> None:
    """A 1,000-partition assignment naming broker 9 (down, or a typo) was refused with a
    problem per partition, 100 KB no wire string holds: no answer, the connection closed.
    Kafka 2.8's ZkAdminManager.createPartitions names each unknown broker once."""
    _zk, a = zk_cluster("t")
    new = [{"broker_ids": [9, 1]} for _ in range(1000)]
    body = {"topics": [{"name": "t", "count": 1001, "assignments": new}], "timeout_ms": 0}
    (got,) = encodes(ApiKey.CREATE_PARTITIONS, 3, a.create_partitions(3, body))["results"]
    assert got["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert got["error_message"] == (
        "invalid replica assignment: broker(s) 9 not available (available brokers: 1, 2, 3),"
        " in partitions 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20"
        " and 980 more"
    )


def test_a_created_topic_is_answered_beside_a_refusal_of_any_length() -> None:
    """CreateTopics of [valid, 6,000 partitions each naming a broker twice]: the first
    was created, and the second's message (a problem per partition) could not be
    encoded, so the client never learnt of the first (its retry: TOPIC_ALREADY_EXISTS).
    Any message in an admin answer is capped."""
    zk, a = zk_cluster()
    given = [{"partition_index": p, "broker_ids": [1, 1]} for p in range(6000)]
    big = topic("big", partitions=-1, rf=-1, assignments=given)
    answer = a.create_topics(7, {"topics": [topic("other", 1, 1), big], "timeout_ms": 0})
    got = {t["name"]: t for t in encodes(ApiKey.CREATE_TOPICS, 7, answer)["topics"]}
    assert got["other"]["error_code"] == ErrorCode.REQUEST_TIMED_OUT  # created, not waited
    assert zk.exists(paths.topic("other")) is not None
    assert got["big"]["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    message = got["big"]["error_message"]
    assert message.startswith("invalid replica assignment: partition 0: duplicate broker(s) 1")
    assert message.endswith("; ... and 5990 more")


@pytest.mark.parametrize("text", ["x" * 100_000, "é" * 40_000, "ok"])
def test_an_error_message_is_capped_at_a_character(text: str) -> None:
    e = TopicError(ErrorCode.INVALID_REQUEST, text)
    assert len(e.message.encode()) <= broker.admin_apis.MAX_MESSAGE_BYTES
    assert text.startswith(e.message.split(" [")[0])
    if text == "ok":
        assert e.message == "ok"
    else:
        assert e.message.endswith("bytes more]")


@pytest.mark.parametrize(
    "t",
    [
        # a config a newer Kafka knows (tiered storage, 3.x): an "ensure the topic" tool's
        topic("t", configs=[{"name": "local.retention.ms", "value": "1000"}]),
        topic("t", configs=[{"name": "retention.ms", "value": "soon"}]),
        topic("t", partitions=0),
        topic("t", rf=0),
        topic("t", partitions=-1, rf=-1, assignments=[{"partition_index": 0, "broker_ids": [9]}]),
        topic("gone"),  # marked for deletion: still in Kafka's metadata cache
    ],
)
def test_create_of_an_existing_topic_is_topic_already_exists(t: dict[str, Any]) -> None:
    """Kafka 2.8's ZkAdminManager.createTopics looks the name up in its metadata cache
    first (TopicExistsException), before configs, partitions or replication factor."""
    zk, a = zk_cluster("t", "gone")
    zk.ensure_paths([paths.delete_topic("gone")])
    update_with(a.metadata, {0: 1}, "t")
    update_with(a.metadata, {0: 1}, "gone")  # its deletion not begun yet
    (got,) = a.create_topics(7, {"topics": [t], "timeout_ms": 0})["topics"]
    assert ErrorCode(got["error_code"]) == ErrorCode.TOPIC_ALREADY_EXISTS, got


@pytest.mark.parametrize("name", ["a/b", "", "x" * 300, "with space", ".."])
def test_delete_of_a_name_no_topic_can_have_is_unknown_topic(
    name: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka 2.8's handleDeleteTopicsRequest (and ZkAdminManager.createPartitions): a
    name not in its metadata cache is UNKNOWN_TOPIC_OR_PARTITION, whatever the name; it
    was UNKNOWN_SERVER_ERROR, logged with a traceback."""
    _zk, a = zk_cluster("t")
    (got,) = a.delete_topics(5, {"topic_names": [name], "timeout_ms": 0})["responses"]
    assert ErrorCode(got["error_code"]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, got
    # Nor is it a path to read: CreatePartitions' ZooKeeper read of "..", "" was refused.
    a = apis(controller=True)
    (got,) = a.delete_topics(5, {"topic_names": [name], "timeout_ms": 0})["responses"]
    assert ErrorCode(got["error_code"]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, got
    monkeypatch.setattr(a, "_check_racks", lambda: None)  # the brokers' racks: none
    body = {"topics": [{"name": name, "count": 2, "assignments": None}], "timeout_ms": 0}
    (grown,) = a.create_partitions(3, body)["results"]
    assert ErrorCode(grown["error_code"]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, grown
    assert not [r for r in caplog.records if r.exc_info]


def test_validate_only_create_returns_the_zero_topic_id() -> None:
    """Kafka 2.8 gives a topic its id when it writes it: validate_only answers the zero
    UUID, not an id no topic has."""
    zk, a = zk_cluster()
    body = {"topics": [topic("new", 1, 1)], "timeout_ms": 0, "validate_only": True}
    (got,) = a.create_topics(7, body)["topics"]
    assert (got["error_code"], got["num_partitions"]) == (ErrorCode.NONE, 1)
    assert zk.exists(paths.topic("new")) is None
    assert got["topic_id"] == ZERO_UUID
    created = a.create_topics(7, {**body, "validate_only": False})["topics"][0]
    assert created["error_code"] == ErrorCode.REQUEST_TIMED_OUT  # created, not waited for


def test_delete_topics_of_a_topic_being_deleted_is_unknown_topic_as_in_kafka() -> None:
    """A topic whose deletion is under way: the controller's UpdateMetadata (leader -2)
    dropped it from this broker's metadata cache, its znodes still stand. Kafka 2.8's
    handleDeleteTopicsRequest answers UNKNOWN_TOPIC_OR_PARTITION for a name its metadata
    cache lacks, before ZkAdminManager looks at ZooKeeper; it was answered NONE at once."""
    zk = FakeZk()
    zk.put(paths.DELETE_TOPICS, b"")
    add_topic(zk, "t", {0: (1, 2, 3)})
    zk.put(paths.delete_topic("t"), b"")  # its deletion asked, not finished
    cache = MetadataCache(1)
    cache.update(metadata_request(("t", [partition_state(0, 1)])))
    cache.update(metadata_request(("t", [partition_state(0, LEADER_DURING_DELETE)])))
    assert "t" not in cache.topics()
    a = AdminApis(cast(ZkClient, zk), cache, lambda: True)
    (got,) = a.delete_topics(5, {"topic_names": ["t"], "timeout_ms": 1000})["responses"]
    assert ErrorCode(got["error_code"]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, got


def test_delete_topics_of_a_topic_already_marked_but_listed_is_answered_none() -> None:
    """Marked for deletion, its deletion not yet begun (still in the metadata cache):
    Kafka 2.8's ZkAdminManager.deleteTopics swallows TopicAlreadyMarkedForDeletion, and
    the answer waits for the deletion as the first one's does."""
    zk = FakeZk()
    zk.put(paths.DELETE_TOPICS, b"")
    add_topic(zk, "t", {0: (1, 2, 3)})
    zk.put(paths.delete_topic("t"), b"")
    cache = MetadataCache(1)
    cache.update(metadata_request(("t", [partition_state(0, 1)])))
    a = AdminApis(cast(ZkClient, zk), cache, lambda: True)
    (got,) = a.delete_topics(5, {"topic_names": ["t"], "timeout_ms": 0})["responses"]
    assert ErrorCode(got["error_code"]) == ErrorCode.REQUEST_TIMED_OUT, got  # not waited
    threading.Timer(
        0.05,
        lambda: cache.update(metadata_request(("t", [partition_state(0, LEADER_DURING_DELETE)]))),
    ).start()
    (got,) = a.delete_topics(5, {"topic_names": ["t"], "timeout_ms": 5000})["responses"]
    assert ErrorCode(got["error_code"]) == ErrorCode.NONE, got


def test_validate_only_collides_only_with_topics_in_zookeeper() -> None:
    """Kafka 2.8's validateTopicCreate checks a name against the topics in ZooKeeper:
    with validate_only nothing is written, so 'a_b' collides with no 'a.b' asked for
    beside it (it was refused, INVALID_TOPIC_EXCEPTION); written, the second collides."""
    zk, a = zk_cluster()
    body = {"topics": [topic("a.b", 1, 1), topic("a_b", 1, 1)], "timeout_ms": 0}
    checked = a.create_topics(7, {**body, "validate_only": True})["topics"]
    assert [(t["name"], t["error_code"]) for t in checked] == [("a.b", 0), ("a_b", 0)]
    assert zk.exists(paths.topic("a.b")) is None
    made = a.create_topics(7, body)["topics"]
    assert [(t["name"], t["error_code"]) for t in made] == [
        ("a.b", ErrorCode.REQUEST_TIMED_OUT),  # created, not waited for
        ("a_b", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ]


def test_describe_configs_of_a_topic_its_metadata_lacks_is_unknown_topic() -> None:
    """Kafka 2.8's ConfigHelper.describeConfigs answers a topic its metadata cache lacks
    UNKNOWN_TOPIC_OR_PARTITION, with no configs: one whose deletion began (the
    controller's UpdateMetadata, leader -2, dropped it) though its znodes stand. It was
    answered every config, read from ZooKeeper."""
    zk = FakeZk()
    add_topic(zk, "t", {0: (1, 2, 3)})
    zk.put(paths.delete_topic("t"), b"")
    cache = MetadataCache(1)
    cache.update(metadata_request(("t", [partition_state(0, 1)])))
    config = load_broker_config(overrides=["broker.id=1", "zookeeper.connect=z:2181"])
    a = AdminApis(cast(ZkClient, zk), cache, lambda: False, config)
    body = {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}]}
    (listed,) = a.describe_configs(4, body)["results"]
    assert (listed["error_code"], len(listed["configs"]) > 10) == (ErrorCode.NONE, True)
    cache.update(metadata_request(("t", [partition_state(0, LEADER_DURING_DELETE)])))
    (got,) = encodes(ApiKey.DESCRIBE_CONFIGS, 4, a.describe_configs(4, body))["results"]
    assert (got["error_code"], got["configs"]) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])


def test_create_partitions_waits_for_a_leader_of_every_partition_of_the_topic() -> None:
    """Kafka 2.8's ZkAdminManager.createPartitions waits on the updated assignment's
    partitions, the existing ones too (CreatePartitionsMetadata(topic,
    updatedReplicaAssignment.keySet)): an offline partition 0 is REQUEST_TIMED_OUT
    however soon the new partition 1 has a leader. Only the new ones were waited for."""
    _zk, a = zk_cluster("t")
    update_with(a.metadata, {0: -1, 1: 1}, "t")
    body: dict[str, Any] = {
        "topics": [{"name": "t", "count": 2, "assignments": None}],
        "timeout_ms": 200,
    }
    (got,) = a.create_partitions(3, body)["results"]
    assert got["error_code"] == ErrorCode.REQUEST_TIMED_OUT, got
    update_with(a.metadata, {0: 2, 1: 1, 2: 3}, "t")
    (got,) = a.create_partitions(3, {**body, "topics": [{**body["topics"][0], "count": 3}]})[
        "results"
    ]
    assert got["error_code"] == ErrorCode.NONE, got


def test_a_topic_named_twice_is_answered_as_kafka_2_8_answers_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka 2.8's KafkaApis, at the controller: CreateTopics answers each entry of a name
    given twice INVALID_REQUEST "Found multiple entries for this topic." (one result per
    entry); CreatePartitions one INVALID_REQUEST "Duplicate topic in request." per name;
    DeleteTopics deletes the name once and answers its outcome at the first entry only,
    the next keeping NONE. Each was one answer per name, with this project's text."""
    zk, a = zk_cluster("t", "u")
    body = {"topics": [topic("d", 1, 1), topic("d", 1, 1), topic("e", 1, 1)], "timeout_ms": 0}
    got = [
        (t["name"], t["error_code"], t["error_message"]) for t in a.create_topics(7, body)["topics"]
    ]
    twice = "Found multiple entries for this topic."
    assert got == [
        ("d", 42, twice),
        ("d", 42, twice),
        ("e", ErrorCode.REQUEST_TIMED_OUT, got[2][2]),
    ]
    assert zk.exists(paths.topic("d")) is None
    grow = [{"name": n, "count": 2, "assignments": None} for n in ("t", "u", "t")]
    grown = a.create_partitions(3, {"topics": grow, "timeout_ms": 0})["results"]
    assert [(r["name"], r["error_code"], r["error_message"]) for r in grown] == [
        ("t", 42, "Duplicate topic in request."),
        ("u", ErrorCode.REQUEST_TIMED_OUT, grown[1]["error_message"]),
    ]
    update_with(a.metadata, {0: 1}, "t")
    deleted: list[str] = []
    monkeypatch.setattr(broker.admin_apis, "delete_topic", lambda _zk, n, **_: deleted.append(n))
    gone = a.delete_topics(5, {"topic_names": ["t", "absent", "t", "absent"], "timeout_ms": 0})
    assert [(r["name"], r["error_code"]) for r in gone["responses"]] == [
        ("t", ErrorCode.REQUEST_TIMED_OUT),
        ("absent", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", ErrorCode.NONE),
        ("absent", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert deleted == ["t"]


def test_brokers_with_only_some_racks_are_an_unknown_server_error_over_the_wire() -> None:
    """Kafka 2.8: CreateTopics gives the metadata cache's brokers to
    AdminUtils.assignReplicasToBrokers, which checks the replication factor, then throws
    AdminOperationException("Not all brokers have rack information for replica rack aware
    assignment."); CreatePartitions first reads them with getBrokerMetadatas (Enforced),
    which throws, so the whole request fails. No ApiException: UNKNOWN_SERVER_ERROR (with
    no message: ApiError.fromThrowable). Both
    were INVALID_REQUEST with zkctl's advice ("Add --disable-rack-aware in command line"),
    which `zkctl topic create` keeps."""
    zk, a = zk_cluster("t")
    racked = dataclasses.replace(registration(3), rack="r1")
    zk.put(paths.broker(3), encode_broker(racked))
    body = {
        "topics": [
            topic("n", 2, 2),
            topic("big", 1, 4),
            topic("given", -1, -1, assignments=[{"partition_index": 0, "broker_ids": [1, 3]}]),
        ],
        "timeout_ms": 0,
        "validate_only": True,
    }
    got = {
        t["name"]: (t["error_code"], t["error_message"]) for t in a.create_topics(7, body)["topics"]
    }
    assert got == {
        "n": (ErrorCode.UNKNOWN_SERVER_ERROR, None),  # Kafka's null message; logged
        # the replication factor is checked first; an explicit assignment is not checked
        "big": (ErrorCode.INVALID_REPLICATION_FACTOR, got["big"][1]),
        "given": (ErrorCode.NONE, None),
    }
    grow = [{"name": n, "count": 2, "assignments": None} for n in ("t", "absent", "t")]
    grown = a.create_partitions(3, {"topics": grow, "timeout_ms": 0})["results"]
    assert [(r["name"], r["error_code"]) for r in grown] == [
        ("t", ErrorCode.UNKNOWN_SERVER_ERROR),
        ("absent", ErrorCode.UNKNOWN_SERVER_ERROR),
        ("t", ErrorCode.UNKNOWN_SERVER_ERROR),
    ]
    assert all(r["error_message"] is None for r in grown)
    with pytest.raises(AdminError, match="Add --disable-rack-aware in command line"):
        create_topic(
            cast(ZkClient, zk), CreateTopicRequest("z", partitions=1, replication_factor=1)
        )


def test_a_created_topic_timed_out_is_answered_with_its_topic_id() -> None:
    """Kafka 2.8's ZkAdminManager.createTopics sets the topic id right after the write
    (populateIds), and handleCreateTopicsResults resets only the configs, partition count
    and replication factor of a topic answered an error: REQUEST_TIMED_OUT v7+ carries
    the id written. It was the zero UUID."""
    zk, a = zk_cluster()
    (got,) = a.create_topics(7, {"topics": [topic("new", 2, 1)], "timeout_ms": 0})["topics"]
    got = encodes(ApiKey.CREATE_TOPICS, 7, {"throttle_time_ms": 0, "topics": [got]})["topics"][0]
    written = zk.get(paths.topic("new"))
    assert written is not None
    topic_id = decode_topic("new", written[0]).topic_id
    assert topic_id not in (None, ZERO_UUID)
    assert (got["error_code"], got["topic_id"]) == (ErrorCode.REQUEST_TIMED_OUT, topic_id)
    assert (got["num_partitions"], got["replication_factor"], got["configs"]) == (-1, -1, [])
    # Refused before the write: no id.
    (again,) = a.create_topics(7, {"topics": [topic("new", 2, 1)], "timeout_ms": 0})["topics"]
    assert again["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert again.get("topic_id", ZERO_UUID) == ZERO_UUID


def deleting_t(monkeypatch: pytest.MonkeyPatch) -> tuple[AdminApis, list[str]]:
    """The controller's AdminApis with topic t in its metadata, and the names its
    DeleteTopics marks for deletion (delete_topic's ZooKeeper write replaced)."""
    _zk, a = zk_cluster("t")
    update_with(a.metadata, {0: 1}, "t")
    deleted: list[str] = []
    monkeypatch.setattr(broker.admin_apis, "delete_topic", lambda _zk, n, **_: deleted.append(n))
    return a, deleted


def delete_over_the_wire(a: AdminApis, version: int, body: dict[str, Any]) -> list[dict[str, Any]]:
    """DeleteTopics as the broker decodes the request and the client the response."""
    codec = request_codec(ApiKey.DELETE_TOPICS, version)
    request = codec.decode(bytes(codec.encode(body)))
    answer = encodes(ApiKey.DELETE_TOPICS, version, a.delete_topics(version, request))
    return cast(list[dict[str, Any]], answer["responses"])


def test_delete_topics_off_the_controller_is_not_controller_before_any_topic_id() -> None:
    """Kafka 2.8's handleDeleteTopicsRequest answers every entry NOT_CONTROLLER (then, at
    the controller, every entry TOPIC_DELETION_DISABLED) before it resolves any topic id:
    an id this broker's metadata does not know was UNKNOWN_TOPIC_ID off the controller, so
    the client took it as final instead of asking the controller."""
    unknown_id = uuid.uuid4()
    body = {
        "topics": [{"name": None, "topic_id": unknown_id}, {"name": "a", "topic_id": ZERO_UUID}],
        "timeout_ms": 0,
    }
    got = delete_over_the_wire(apis(controller=False), 6, body)
    assert [(r["name"], r["topic_id"], r["error_code"]) for r in got] == [
        (None, unknown_id, ErrorCode.NOT_CONTROLLER),
        ("a", ZERO_UUID, ErrorCode.NOT_CONTROLLER),
    ]
    config = load_broker_config(
        overrides=["broker.id=1", "zookeeper.connect=z:2181", "delete.topic.enable=false"]
    )
    disabled = AdminApis(cast(ZkClient, NoZooKeeper()), MetadataCache(1), lambda: True, config)
    got = delete_over_the_wire(disabled, 6, body)
    assert [(r["name"], r["error_code"]) for r in got] == [
        (None, ErrorCode.TOPIC_DELETION_DISABLED),
        ("a", ErrorCode.TOPIC_DELETION_DISABLED),
    ]


def test_delete_topics_with_an_entry_of_both_name_and_id_fails_as_a_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka 2.8's handleDeleteTopicsRequest throws InvalidRequestException at an entry
    giving both a name and a topic id, before it deletes anything: the request fails as a
    whole (DeleteTopicsRequest.getErrorResponse: every entry INVALID_REQUEST, as given).
    Only that entry was refused; the request's other topics were deleted."""
    a, deleted = deleting_t(monkeypatch)
    some_id = uuid.uuid4()
    body = {
        "topics": [{"name": "t", "topic_id": ZERO_UUID}, {"name": "u", "topic_id": some_id}],
        "timeout_ms": 0,
    }
    got = delete_over_the_wire(a, 6, body)
    assert [(r["name"], r["topic_id"], r["error_code"]) for r in got] == [
        ("t", ZERO_UUID, ErrorCode.INVALID_REQUEST),
        ("u", some_id, ErrorCode.INVALID_REQUEST),
    ]
    assert deleted == []


class Broken:
    """A ZooKeeper client failing as no request should make it fail (a bug's exception)."""

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("internal detail /secret/path")

        return call


def test_an_unknown_server_error_carries_no_message_as_in_kafka(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kafka 2.8 answers UNKNOWN_SERVER_ERROR with a null message in the admin APIs
    (ApiError.fromThrowable, "to ensure we don't leak sensitive information": CreateTopics
    per topic, CreatePartitions' and DescribeConfigs' getErrorResponse/ConfigHelper,
    ElectLeaders' KafkaController.electLeaders; DeleteTopics sets no message at all); the
    broker logs the cause. Each carried the exception's text."""
    zk, a = zk_cluster("t")
    racked = dataclasses.replace(registration(3), rack="r1")
    zk.put(paths.broker(3), encode_broker(racked))
    created = a.create_topics(7, {"topics": [topic("n", 2, 2)], "timeout_ms": 0})
    (made,) = encodes(ApiKey.CREATE_TOPICS, 7, created)["topics"]
    grow = [{"name": "t", "count": 2, "assignments": None}]
    grown = a.create_partitions(3, {"topics": grow, "timeout_ms": 0})
    (more,) = encodes(ApiKey.CREATE_PARTITIONS, 3, grown)["results"]
    broken = AdminApis(cast(ZkClient, Broken()), a.metadata, lambda: True, a.config)
    update_with(broken.metadata, {0: 1}, "t")
    deleted = broken.delete_topics(5, {"topic_names": ["t"], "timeout_ms": 0})
    (gone,) = encodes(ApiKey.DELETE_TOPICS, 5, deleted)["responses"]
    body = {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}]}
    (described,) = encodes(ApiKey.DESCRIBE_CONFIGS, 4, broken.describe_configs(4, body))["results"]
    failing = electing({T0: (int(ErrorCode.UNKNOWN_SERVER_ERROR), "KeyError('x')", -1)})
    election = {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0]}]}
    elected = encodes(ApiKey.ELECT_LEADERS, 2, failing.elect_leaders(2, election))
    (elect,) = elected["replica_election_results"][0]["partition_result"]
    answers = [made, more, gone, described, elect]
    assert [(r["error_code"], r["error_message"]) for r in answers] == [
        (ErrorCode.UNKNOWN_SERVER_ERROR, None)
    ] * 5
    logged = caplog.text
    assert "Not all brokers have rack information" in logged
    assert "/secret/path" in logged


def test_broker_loggers_are_described_with_their_levels_at_every_version() -> None:
    """Kafka 2.8's ConfigHelper answers a BROKER_LOGGER resource (8) naming the broker
    itself with its loggers and the level each logs at (Log4jController.loggers: "root",
    then every logger, its level resolved from its ancestors), each
    DYNAMIC_BROKER_LOGGER_CONFIG, not read-only, no synonyms, no type, no documentation;
    an empty name or another broker's id is INVALID_REQUEST. Here the loggers are the
    broker's Python loggers. Every BROKER_LOGGER resource was refused INVALID_REQUEST."""
    import logging

    config = load_broker_config(overrides=["broker.id=1", "zookeeper.connect=z:2181"])
    a = AdminApis(cast(ZkClient, NoZooKeeper()), MetadataCache(1), lambda: False, config)
    quiet = logging.getLogger("test_admin_apis.quiet")
    quiet.setLevel(logging.ERROR)
    inherits = logging.getLogger("test_admin_apis.quiet.child")
    resources = [
        {"resource_type": 8, "resource_name": "1", "configuration_keys": None},
        {
            "resource_type": 8,
            "resource_name": "01",
            "configuration_keys": ["root", inherits.name, "no.such.logger"],
        },
        {"resource_type": 8, "resource_name": "", "configuration_keys": None},
        {"resource_type": 8, "resource_name": "2", "configuration_keys": None},
    ]
    root_level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
    for v in every_version(ApiKey.DESCRIBE_CONFIGS):
        body = {"resources": resources, "include_synonyms": True, "include_documentation": True}
        got = encodes(ApiKey.DESCRIBE_CONFIGS, v, a.describe_configs(v, body))["results"]
        assert [(r["error_code"], r["error_message"]) for r in got] == [
            (0, None),
            (0, None),
            (42, "Broker id must not be empty"),
            (42, "Unexpected broker id, expected 1 but received 2"),
        ]
        every = {row["name"]: row for row in got[0]["configs"]}
        assert every["root"]["value"] == root_level
        assert every[quiet.name]["value"] == "ERROR"
        assert every["broker.admin_apis"]["value"] == logging.getLevelName(
            logging.getLogger("broker.admin_apis").getEffectiveLevel()
        )
        asked = [(row["name"], row["value"]) for row in got[1]["configs"]]
        assert asked == [("root", root_level), (inherits.name, "ERROR")]
        row = every[inherits.name]
        assert (row["read_only"], row["is_sensitive"]) == (False, False)
        if v == 0:
            assert row["is_default"] is False
        else:
            assert (row["config_source"], row["synonyms"]) == (6, [])
        if v >= 3:
            assert (row["config_type"], row["documentation"]) == (0, None)


def test_describe_configs_of_a_resource_type_kafka_does_not_describe_fails_as_a_whole() -> None:
    """Kafka 2.8's handleDescribeConfigsRequest throws InvalidRequestException for a
    resource type other than topic, broker and broker logger before it describes any
    resource: DescribeConfigsRequest.getErrorResponse answers every resource
    INVALID_REQUEST with Errors' text, no configs. Only that resource was refused."""
    config = load_broker_config(overrides=["broker.id=1", "zookeeper.connect=z:2181"])
    a = AdminApis(cast(ZkClient, NoZooKeeper()), MetadataCache(1), lambda: False, config)
    body = {
        "resources": [
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
            {"resource_type": 3, "resource_name": "g", "configuration_keys": None},
        ]
    }
    for v in every_version(ApiKey.DESCRIBE_CONFIGS):
        got = encodes(ApiKey.DESCRIBE_CONFIGS, v, a.describe_configs(v, body))["results"]
        assert [(r["resource_type"], r["resource_name"], r["error_code"]) for r in got] == [
            (4, "1", ErrorCode.INVALID_REQUEST),
            (3, "g", ErrorCode.INVALID_REQUEST),
        ]
        assert all(r["configs"] == [] for r in got)
        assert got[0]["error_message"].startswith("This most likely occurs because of a request")


def test_delete_topics_of_an_entry_with_neither_name_nor_id_is_topic_authorization_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka 2.8's handleDeleteTopicsRequest resolves a v6 entry of no name and the zero
    id to no name; authorization (filterByAuthorized, which without an authorizer passes
    every named entry) leaves it out, so it is TOPIC_AUTHORIZATION_FAILED, not an unknown
    topic id (that is for a non-zero id it cannot resolve). The other entries go on."""
    a, deleted = deleting_t(monkeypatch)
    unknown_id = uuid.uuid4()
    body = {
        "topics": [
            {"name": None, "topic_id": ZERO_UUID},
            {"name": None, "topic_id": unknown_id},
            {"name": "t", "topic_id": ZERO_UUID},
        ],
        "timeout_ms": 0,
    }
    got = delete_over_the_wire(a, 6, body)
    assert [(r["name"], r["topic_id"], r["error_code"]) for r in got] == [
        (None, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        (None, unknown_id, ErrorCode.UNKNOWN_TOPIC_ID),
        ("t", ZERO_UUID, ErrorCode.REQUEST_TIMED_OUT),  # marked, not waited for
    ]
    assert deleted == ["t"]


@pytest.mark.parametrize(
    ("t", "code"),
    [
        (topic("a/b", partitions=0), ErrorCode.INVALID_PARTITIONS),
        (topic("a/b", rf=0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (topic("a/b", rf=4), ErrorCode.INVALID_REPLICATION_FACTOR),  # 3 brokers
        (topic("x" * 250, partitions=-1, rf=4), ErrorCode.INVALID_REPLICATION_FACTOR),
        (
            topic("a/b", configs=[{"name": "retention.ms", "value": None}]),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            topic("a/b", configs=[{"name": "retention.ms", "value": "soon"}]),
            ErrorCode.INVALID_TOPIC_EXCEPTION,
        ),
        (topic("a/b", rf=3), ErrorCode.INVALID_TOPIC_EXCEPTION),
        # A valid name colliding with a topic: the replicas are assigned first too.
        (topic("a_b", rf=4), ErrorCode.INVALID_REPLICATION_FACTOR),
        (topic("a_b", rf=3), ErrorCode.INVALID_TOPIC_EXCEPTION),
    ],
)
def test_create_topics_checks_the_name_after_the_partitions_and_replication_factor(
    t: dict[str, Any], code: ErrorCode
) -> None:
    """Kafka 2.8's ZkAdminManager.createTopics assigns the replicas
    (AdminUtils.assignReplicasToBrokers: partitions and replication factor larger than 0,
    no more replicas than live brokers) before validateTopicCreate runs Topic.validate and
    looks for collisions; only null configs and both a count and an assignment come
    earlier. The name was checked first: INVALID_TOPIC_EXCEPTION for each of these."""
    zk, a = zk_cluster("a.b")
    (got,) = a.create_topics(7, {"topics": [t], "timeout_ms": 0})["topics"]
    assert ErrorCode(got["error_code"]) == code, got
    assert zk.exists(paths.topic(t["name"])) is None


def test_create_of_a_topic_whose_deletion_began_checks_its_replication_factor_first() -> None:
    """A topic being deleted that the controller's UpdateMetadata (leader -2) dropped from
    this broker's metadata cache, its znodes still there: Kafka 2.8's createTopics passes
    the cache's look-up, assigns the replicas (INVALID_REPLICATION_FACTOR for more than the
    live brokers), and only then finds the topic in ZooKeeper (TOPIC_ALREADY_EXISTS). It
    was TOPIC_ALREADY_EXISTS whatever the request."""
    zk, a = zk_cluster("gone")
    zk.ensure_paths([paths.delete_topic("gone")])
    a.metadata.update(metadata_request(("gone", [partition_state(0, 1)])))
    a.metadata.update(metadata_request(("gone", [partition_state(0, LEADER_DURING_DELETE)])))
    assert not a.metadata.contains("gone")
    asked = [topic("gone", rf=4), topic("gone", partitions=0)]
    got = [a.create_topics(7, {"topics": [t], "timeout_ms": 0})["topics"][0] for t in asked]
    assert [ErrorCode(g["error_code"]) for g in got] == [
        ErrorCode.INVALID_REPLICATION_FACTOR,
        ErrorCode.INVALID_PARTITIONS,
    ]
    (got,) = a.create_topics(7, {"topics": [topic("gone", rf=3)], "timeout_ms": 0})["topics"]
    assert ErrorCode(got["error_code"]) == ErrorCode.TOPIC_ALREADY_EXISTS, got

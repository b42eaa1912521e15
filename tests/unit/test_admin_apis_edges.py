"""The admin APIs' edges that mutation testing found unchecked (broker/admin_apis.py): the
message cap's boundary, a lost conditional write tried again, CreateTopics' defaults and
its assignment-or-counts rule, topics made by a client's Metadata, DeleteTopics' refusal
before v3, CreatePartitions' validate_only and its new-partitions-only assignment,
DescribeConfigs' topic name check, and the controller requests' own refusals (not the
controller's broker, an answer late, an empty listing). Helpers: test_admin_apis."""

from __future__ import annotations

import json
import threading
from typing import Any, cast

import pytest

import broker.admin_apis
from admin.errors import ConcurrentChangeError
from admin.topics import MAX_PARTITIONS, MAX_REPLICATION_FACTOR
from broker.admin_apis import MAX_MESSAGE_BYTES, AdminApis, TopicError, creatable_topic
from broker.config import load_broker_config
from broker.metadata_cache import MetadataCache
from controller.reactions import PREFERRED_ELECTION, UNCLEAN_ELECTION
from tests.unit.fake_cluster import add_topic
from tests.unit.fake_zk import FakeZk
from tests.unit.test_admin_apis import (
    ASKED,
    REASSIGN,
    T0,
    T1,
    Answering,
    NoZooKeeper,
    answered,
    answered_by,
    election_results,
    encodes,
    topic,
    update_with,
    zk_cluster,
)
from tests.unit.test_metadata_cache import TOPIC_ID
from tests.unit.test_metadata_cache import request as metadata_request
from tests.unit.test_metadata_cache import state as partition_state
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import request_codec
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import TopicPartition


def partitions_of(zk: FakeZk, name: str) -> dict[str, list[int]]:
    """The topic's replica assignment as its znode holds it."""
    got = zk.get(paths.topic(name))
    assert got is not None
    return cast(dict[str, list[int]], json.loads(got[0])["partitions"])


# --- a message's cap, a lost race ---------------------------------------------------------


def test_a_message_of_exactly_the_cap_is_kept_whole_and_one_byte_more_is_cut() -> None:
    exact = "x" * MAX_MESSAGE_BYTES
    assert TopicError(ErrorCode.INVALID_REQUEST, exact).message == exact
    cut = TopicError(ErrorCode.INVALID_REQUEST, exact + "y").message
    assert cut.endswith("bytes more]")
    assert len(cut.encode()) <= MAX_MESSAGE_BYTES


def test_a_message_cut_inside_a_character_drops_the_character_not_replaces_it() -> None:
    # One ASCII byte first: the cut (an even byte count) falls inside a two-byte 'é'.
    text = "a" + "é" * 10_000
    message = TopicError(ErrorCode.INVALID_REQUEST, text).message
    kept = message.split(" [")[0]
    assert "\ufffd" not in message
    assert text.startswith(kept)
    assert message.endswith(f"[... {len(text.encode()) - len(kept.encode())} bytes more]")


class Racing:
    """A conditional write that loses its race ``losses`` times, then is made."""

    def __init__(self, losses: int) -> None:
        self.losses = losses
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.losses:
            raise ConcurrentChangeError("changed by someone else meanwhile")
        return "written"


def test_a_write_that_lost_a_race_is_made_again_up_to_three_times() -> None:
    won = Racing(2)
    assert broker.admin_apis._retried(won) == "written"
    assert won.calls == 3
    lost = Racing(3)
    with pytest.raises(ConcurrentChangeError):
        broker.admin_apis._retried(lost)
    assert lost.calls == 3


# --- CreateTopics -------------------------------------------------------------------------


@pytest.mark.parametrize(("partitions", "rf"), [(-1, 2), (3, -1)])
def test_an_assignment_beside_either_count_is_invalid_request(partitions: int, rf: int) -> None:
    """Kafka 2.8's ZkAdminManager.createTopics: numPartitions OR replicationFactor set
    beside replicasAssignments is InvalidRequestException."""
    given = [{"partition_index": 0, "broker_ids": [1, 2]}]
    with pytest.raises(TopicError) as e:
        creatable_topic(topic(partitions=partitions, rf=rf, assignments=given), 1, 1)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    assert "both cannot be used at the same time" in e.value.message


def test_the_largest_partition_count_and_replication_factor_pass_the_topics_own_check() -> None:
    """Most partitions this model makes, and the largest replication factor a
    CreateTopics carries (a Java short): not refused by the topic's own checks (too few
    brokers is the plan's refusal, as AdminUtils' in Kafka)."""
    most = creatable_topic(topic(partitions=MAX_PARTITIONS, rf=1), 1, 1)
    assert most.partitions == MAX_PARTITIONS
    widest = creatable_topic(topic(partitions=1, rf=MAX_REPLICATION_FACTOR), 1, 1)
    assert widest.replication_factor == MAX_REPLICATION_FACTOR
    with pytest.raises(TopicError) as e:
        creatable_topic(topic(partitions=MAX_PARTITIONS + 1, rf=1), 1, 1)
    assert e.value.code == ErrorCode.INVALID_PARTITIONS


def test_create_topics_defaults_are_num_partitions_and_default_replication_factor() -> None:
    """-1 partitions and replication factor: the broker's num.partitions and
    default.replication.factor (Kafka 2.8's ZkAdminManager.createTopics); the answer
    gives the topic's partition count and replication factor."""
    zk, _ = zk_cluster()
    config = load_broker_config(
        overrides=[
            "broker.id=1",
            "zookeeper.connect=z:2181",
            "num.partitions=4",
            "default.replication.factor=2",
        ]
    )
    a = AdminApis(cast(ZkClient, zk), MetadataCache(1), lambda: True, config)
    body = {"topics": [topic("d", partitions=-1, rf=-1), topic("e", 3, 1)], "timeout_ms": 0}
    body["validate_only"] = True
    got = {t["name"]: t for t in a.create_topics(7, body)["topics"]}
    assert (got["d"]["num_partitions"], got["d"]["replication_factor"]) == (4, 2)
    assert (got["e"]["num_partitions"], got["e"]["replication_factor"]) == (3, 1)
    del body["validate_only"]
    a.create_topics(7, body)
    partitions = partitions_of(zk, "d")
    assert len(partitions) == 4
    assert {len(r) for r in partitions.values()} == {2}


# --- topics made by a client's Metadata (auto.create.topics.enable) -----------------------


def test_auto_creation_of_a_topic_that_exists_or_is_being_deleted_is_leader_not_available() -> None:
    """Kafka 2.8's createTopicsInZk answers TOPIC_ALREADY_EXISTS as LEADER_NOT_AVAILABLE:
    a topic made meanwhile, or one marked for deletion (validateTopicCreate's
    TopicExistsException): the client asks again. Neither is written again."""
    zk, a = zk_cluster("there", "gone")
    zk.ensure_paths([paths.delete_topic("gone")])
    before = {n: zk.get(paths.topic(n)) for n in ("there", "gone")}
    got = a.auto_create_topics(["there", "gone"])
    assert got == {
        "there": ErrorCode.LEADER_NOT_AVAILABLE,
        "gone": ErrorCode.LEADER_NOT_AVAILABLE,
    }
    assert {n: zk.get(paths.topic(n)) for n in ("there", "gone")} == before


def test_auto_creation_with_too_few_brokers_is_invalid_replication_factor_even_if_deleting() -> (
    None
):
    """default.replication.factor above the live brokers: Kafka 2.8's createTopicsInZk
    (ZkAdminManager.createTopics) assigns the replicas before validateTopicCreate finds
    the topic in ZooKeeper, so a topic marked for deletion (its znodes still there, the
    metadata cache no longer listing it, hence the auto-creation), or one made meanwhile,
    is INVALID_REPLICATION_FACTOR as a new one is; it was LEADER_NOT_AVAILABLE."""
    zk, _ = zk_cluster("there", "gone")
    zk.ensure_paths([paths.delete_topic("gone")])
    config = load_broker_config(
        overrides=["broker.id=1", "zookeeper.connect=z:2181", "default.replication.factor=4"]
    )
    a = AdminApis(cast(ZkClient, zk), MetadataCache(1), lambda: True, config)
    assert a.auto_create_topics(["gone", "there", "new"]) == {
        "gone": ErrorCode.INVALID_REPLICATION_FACTOR,
        "there": ErrorCode.INVALID_REPLICATION_FACTOR,
        "new": ErrorCode.INVALID_REPLICATION_FACTOR,
    }
    assert zk.exists(paths.topic("new")) is None


def test_auto_creation_of_a_name_kafka_refuses_is_invalid_topic_without_zookeeper() -> None:
    """AutoTopicCreationManager's filterCreatableTopics: an invalid name is
    INVALID_TOPIC_EXCEPTION before any request is made."""
    config = load_broker_config(overrides=["broker.id=1", "zookeeper.connect=z:2181"])
    a = AdminApis(cast(ZkClient, NoZooKeeper()), MetadataCache(1), lambda: False, config)
    assert a.auto_create_topics(["a/b", ".."]) == {
        "a/b": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "..": ErrorCode.INVALID_TOPIC_EXCEPTION,
    }


def test_auto_creation_checks_each_name_against_the_topics_made_before_it() -> None:
    """validateTopicCreate reads the topics in ZooKeeper for each topic: 'a_b' collides
    with the 'a.b' the same Metadata request made just before it."""
    zk, a = zk_cluster()
    got = a.auto_create_topics(["a.b", "a_b"])
    assert got == {"a.b": ErrorCode.LEADER_NOT_AVAILABLE, "a_b": ErrorCode.INVALID_TOPIC_EXCEPTION}
    assert zk.exists(paths.topic("a.b")) is not None
    assert zk.exists(paths.topic("a_b")) is None


def test_auto_creation_with_no_broker_registered_still_refuses_a_colliding_name() -> None:
    """No registration for the moment is LEADER_NOT_AVAILABLE (ask again), but a name
    that collides with a topic is refused as it would be with brokers registered."""
    zk = FakeZk()
    for path in (paths.BROKER_IDS, paths.BROKER_TOPICS, paths.DELETE_TOPICS):
        zk.ensure_paths([path])
    add_topic(zk, "a.b", {0: (1,)})
    config = load_broker_config(overrides=["broker.id=1", "zookeeper.connect=z:2181"])
    a = AdminApis(cast(ZkClient, zk), MetadataCache(1), lambda: False, config)
    got = a.auto_create_topics(["a_b", "fresh"])
    assert got == {
        "a_b": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "fresh": ErrorCode.LEADER_NOT_AVAILABLE,
    }
    assert zk.exists(paths.topic("fresh")) is None


# --- DeleteTopics -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "code"),
    [
        (0, ErrorCode.INVALID_REQUEST),
        (2, ErrorCode.INVALID_REQUEST),
        (3, ErrorCode.TOPIC_DELETION_DISABLED),
        (5, ErrorCode.TOPIC_DELETION_DISABLED),
    ],
)
def test_deletion_disabled_is_invalid_request_before_v3(version: int, code: ErrorCode) -> None:
    """Kafka 2.8's handleDeleteTopicsRequest: delete.topic.enable=false is
    TOPIC_DELETION_DISABLED from v3, INVALID_REQUEST before (no such error then)."""
    config = load_broker_config(
        overrides=["broker.id=1", "zookeeper.connect=z:2181", "delete.topic.enable=false"]
    )
    a = AdminApis(cast(ZkClient, NoZooKeeper()), MetadataCache(1), lambda: True, config)
    body = {"topic_names": ["a", "b"], "timeout_ms": 0}
    got = encodes(ApiKey.DELETE_TOPICS, version, a.delete_topics(version, body))["responses"]
    assert [(r["name"], r["error_code"]) for r in got] == [("a", code), ("b", code)]


# --- CreatePartitions ---------------------------------------------------------------------


def test_create_partitions_validate_only_writes_nothing() -> None:
    zk, a = zk_cluster("t")
    before = zk.get(paths.topic("t"))
    body = {
        "topics": [{"name": "t", "count": 3, "assignments": None}],
        "timeout_ms": 0,
        "validate_only": True,
    }
    (got,) = a.create_partitions(3, body)["results"]
    assert got["error_code"] == ErrorCode.NONE
    assert zk.get(paths.topic("t")) == before
    del body["validate_only"]
    (grown,) = a.create_partitions(3, body)["results"]
    assert grown["error_code"] == ErrorCode.REQUEST_TIMED_OUT  # grown, not waited for
    assert len(partitions_of(zk, "t")) == 3


def test_create_partitions_assignments_list_the_new_partitions_only() -> None:
    """Kafka 2.8's ZkAdminManager.createPartitions: the assignments are the new
    partitions', one each; listing the existing one too (as kafka-topics.sh's
    --replica-assignment may) is INVALID_REPLICA_ASSIGNMENT."""
    zk, a = zk_cluster("t")
    before = zk.get(paths.topic("t"))
    every = [{"broker_ids": [1, 2]}, {"broker_ids": [2, 3]}]
    body = {"topics": [{"name": "t", "count": 2, "assignments": every}], "timeout_ms": 0}
    (got,) = a.create_partitions(3, body)["results"]
    assert got["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert (
        got["error_message"]
        == "Increasing the number of partitions by 1 but 2 assignments provided."
    )
    assert zk.get(paths.topic("t")) == before


# --- DescribeConfigs ----------------------------------------------------------------------


def test_describe_configs_of_a_name_no_topic_can_have_is_invalid_topic() -> None:
    """Kafka 2.8's ConfigHelper: Topic.validate before the metadata cache is asked."""
    _zk, a = zk_cluster("t")
    body = {
        "resources": [
            {"resource_type": 2, "resource_name": "a/b", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "-1", "configuration_keys": None},
        ]
    }
    bad, other_broker = a.describe_configs(3, body)["results"]
    assert bad["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    # A negative id is an id (Scala's toInt), only not this broker's.
    assert other_broker["error_code"] == ErrorCode.INVALID_REQUEST
    assert other_broker["error_message"] == (
        "Unexpected broker id, expected 1 or empty string, but received -1"
    )


# --- ElectLeaders, reassignments: the controller's requests -------------------------------


class Recording(Answering):
    """Answering, keeping the election type each election was asked with."""

    def __init__(self, *answer: Any) -> None:
        super().__init__(*answer)
        self.types: list[int] = []

    def elect_leaders(self, partitions: Any, election_type: int, reply: Any) -> None:
        self.types.append(election_type)
        super().elect_leaders(partitions, election_type, reply)


def test_elect_leaders_v0_is_a_preferred_election() -> None:
    """ElectLeaders v0 has no election type: a preferred leader election."""
    controller = Recording({T0: (0, None, 2)})
    a = answered_by(controller)
    codec = request_codec(ApiKey.ELECT_LEADERS, 0)
    body = codec.decode(bytes(codec.encode({"topic_partitions": ASKED[:1], "timeout_ms": 100})))
    assert election_results(a.elect_leaders(0, {**body, "election_type": UNCLEAN_ELECTION})) == {
        ("t", 0): 0
    }
    a.elect_leaders(1, {**body, "election_type": UNCLEAN_ELECTION})
    assert controller.types == [PREFERRED_ELECTION, UNCLEAN_ELECTION]


def test_elect_leaders_asks_the_controller_for_each_partition_once() -> None:
    """A partition named twice is elected once (Kafka's request gives a set)."""
    controller = Recording({T0: (0, None, 2), T1: (0, None, 1)})
    a = answered_by(controller)
    twice = [{"topic": "t", "partitions": [0, 1, 0]}, {"topic": "t", "partitions": [1]}]
    body = {"election_type": 0, "topic_partitions": twice, "timeout_ms": 100}
    assert election_results(a.elect_leaders(1, body)) == {("t", 0): 0, ("t", 1): 0}
    assert controller.asked == [[T0, T1]]


def test_a_broker_not_the_controller_does_not_ask_its_own_controller() -> None:
    """Every broker runs a controller, active or not: a broker that is not the
    controller answers NOT_CONTROLLER without putting a request on its queue."""
    controller = Recording({T0: (0, None, 2), T1: (0, None, 1)}, {})
    a = AdminApis(cast(ZkClient, NoZooKeeper()), MetadataCache(1), lambda: False, None, controller)
    update_with(a.metadata, {0: 2, 1: 1})
    body = {"election_type": 0, "topic_partitions": ASKED, "timeout_ms": 100}
    assert election_results(a.elect_leaders(1, body)) == {
        ("t", 0): ErrorCode.NOT_CONTROLLER,
        ("t", 1): ErrorCode.NOT_CONTROLLER,
    }
    got = a.alter_partition_reassignments(0, REASSIGN)
    assert (got["error_code"], got["responses"]) == (ErrorCode.NOT_CONTROLLER, [])
    assert got["error_message"] == "this broker is not the controller"
    listed = a.list_partition_reassignments(0, {"topics": None})
    assert (listed["error_code"], listed["topics"]) == (ErrorCode.NOT_CONTROLLER, [])
    assert controller.asked == []


def test_a_controller_that_resigned_is_answered_not_controller_with_its_message() -> None:
    a = answered_by(Answering(int(ErrorCode.NOT_CONTROLLER), {}))
    got = a.alter_partition_reassignments(0, REASSIGN)
    assert (got["error_code"], got["error_message"]) == (
        ErrorCode.NOT_CONTROLLER,
        "this broker is not the controller",
    )


def test_the_controller_is_waited_for_at_least_30_seconds_or_the_requests_timeout() -> None:
    """A controller busy with a failover answers late but answers: a request of a short
    (or zero) timeout still waits 30 s for it; one of a longer timeout, that long."""
    assert broker.admin_apis._answer_s({"timeout_ms": 0}) == 30.0
    assert broker.admin_apis._answer_s({"timeout_ms": 100}) == 30.0
    assert broker.admin_apis._answer_s({"timeout_ms": 60_000}) == 60.0


class SilentAboutReassignments:
    """A controller that does not answer in time."""

    def alter_partition_reassignments(self, _reassignments: Any, _reply: Any) -> None:
        pass

    def list_partition_reassignments(self, _partitions: Any, _reply: Any) -> None:
        pass


def test_reassignment_requests_the_controller_does_not_answer_in_time_are_timed_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(broker.admin_apis, "_answer_s", lambda _body: 0.05)
    a = answered_by(cast(Any, SilentAboutReassignments()))
    got = answered(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS, a.alter_partition_reassignments(0, REASSIGN)
    )
    assert (got["error_code"], got["responses"]) == (ErrorCode.REQUEST_TIMED_OUT, [])
    listing = ApiKey.LIST_PARTITION_REASSIGNMENTS
    listed = answered(listing, a.list_partition_reassignments(0, {"topics": None}))
    assert (listed["error_code"], listed["topics"]) == (ErrorCode.REQUEST_TIMED_OUT, [])


def test_a_reassignments_refusal_message_is_capped() -> None:
    long = "broker 9 is not registered; " * 1000
    controller = Answering(
        0,
        {
            TopicPartition("t", 1): (int(ErrorCode.INVALID_REPLICA_ASSIGNMENT), long),
            T0: (0, None),
            TopicPartition("u", 0): (0, None),
        },
    )
    api = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    got = answered(api, answered_by(controller).alter_partition_reassignments(0, REASSIGN))
    message = got["responses"][0]["partitions"][0]["error_message"]
    assert len(message.encode()) <= MAX_MESSAGE_BYTES
    assert message.endswith("bytes more]")


def test_listing_the_reassignments_of_no_partition_asks_for_none() -> None:
    """An empty topic list (not null) names no partition: nothing is listed, as Kafka
    2.8's handleListPartitionReassignmentsRequest gives the controller an empty set."""
    controller = Answering(0, {})
    a = answered_by(controller)
    got = answered(
        ApiKey.LIST_PARTITION_REASSIGNMENTS, a.list_partition_reassignments(0, {"topics": []})
    )
    assert (got["error_code"], got["topics"]) == (0, [])
    assert controller.asked == [[]]


# --- an internal topic its coordinator asks for ---------------------------------------------


def test_an_internal_topic_asked_for_is_made_and_answered_none() -> None:
    zk, a = zk_cluster()
    got = a.create_internal_topic("__consumer_offsets", 3, 2, {"cleanup.policy": "compact"})
    assert got == ErrorCode.NONE
    partitions = partitions_of(zk, "__consumer_offsets")
    assert len(partitions) == 3
    assert {len(r) for r in partitions.values()} == {2}


def test_an_internal_topic_still_marked_for_deletion_is_answered_none() -> None:
    """Its znode gone, its deletion marker not yet: TopicExistsException in Kafka, which
    the coordinator takes as "asked for"; nothing is written."""
    zk, a = zk_cluster()
    zk.ensure_paths([paths.delete_topic("__consumer_offsets")])
    got = a.create_internal_topic("__consumer_offsets", 3, 2, {})
    assert got == ErrorCode.NONE
    assert zk.exists(paths.topic("__consumer_offsets")) is None


def test_an_empty_config_value_is_an_invalid_config_not_a_null() -> None:
    with pytest.raises(TopicError) as e:
        creatable_topic(topic(configs=[{"name": "retention.ms", "value": ""}]), 1, 1)
    assert e.value.code == ErrorCode.INVALID_CONFIG


# --- answers found by mutation: names, configs, a leader shown later --------------------------


def test_a_message_with_a_lone_surrogate_is_encodable() -> None:
    """A name not UTF-8 (a lone surrogate once decoded) in a message: '?', so the answer
    encodes."""
    message = TopicError(ErrorCode.INVALID_REQUEST, "topic 'a\udcffb' refused").message
    assert message == "topic 'a?b' refused"
    assert message.encode() == b"topic 'a?b' refused"


def test_delete_topics_by_id_answers_the_topics_name() -> None:
    """DeleteTopics v6 naming a topic by its id: Kafka 2.8's handleDeleteTopicsRequest
    answers the entry with the name its metadata cache resolves."""
    zk, a = zk_cluster("t")
    a.metadata.update(metadata_request(("t", [partition_state(0, 1)])))
    body = {"topics": [{"name": None, "topic_id": TOPIC_ID}], "timeout_ms": 0}
    (got,) = encodes(ApiKey.DELETE_TOPICS, 6, a.delete_topics(6, body))["responses"]
    assert (got["name"], got["topic_id"]) == ("t", TOPIC_ID)
    assert got["error_code"] == ErrorCode.REQUEST_TIMED_OUT  # marked, not waited for
    assert zk.exists(paths.delete_topic("t")) is not None


def test_create_topics_answers_the_topics_own_configs() -> None:
    """CreateTopics v5+: each config of the topic as it would be created (validate_only:
    answered NONE, not timed out, which drops them), its overrides the topic's own
    (TOPIC_CONFIG)."""
    _zk, a = zk_cluster()
    made = topic("new", 1, 1, configs=[{"name": "retention.ms", "value": "1000"}])
    (got,) = encodes(
        ApiKey.CREATE_TOPICS,
        5,
        a.create_topics(5, {"topics": [made], "timeout_ms": 0, "validate_only": True}),
    )["topics"]
    configs = {c["name"]: c for c in got["configs"]}
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["config_source"]) == (
        "1000",
        1,
    )
    assert configs["cleanup.policy"]["config_source"] == 5  # a default


@pytest.mark.timeout(60)
def test_elect_leaders_waits_for_the_metadata_to_show_the_elected_leader() -> None:
    """The elected leader shows in this broker's metadata after the controller answered:
    the request waits for it (within its timeout) and answers NONE."""
    a = answered_by(Answering({T0: (0, None, 3)}))  # the metadata says 2 leads
    later = threading.Timer(0.1, update_with, (a.metadata, {0: 3, 1: 1}))
    later.start()
    try:
        body = {"election_type": 0, "topic_partitions": ASKED, "timeout_ms": 30_000}
        assert election_results(a.elect_leaders(2, body)) == {("t", 0): ErrorCode.NONE}
    finally:
        later.cancel()


BAD_CONFIG = [{"name": "retention.ms", "value": "soon"}]


@pytest.mark.parametrize(
    ("t", "code"),
    [
        (topic("new", partitions=0, configs=BAD_CONFIG), ErrorCode.INVALID_PARTITIONS),
        (topic("new", rf=0, configs=BAD_CONFIG), ErrorCode.INVALID_REPLICATION_FACTOR),
        (
            topic(
                "new",
                partitions=-1,
                rf=2,
                assignments=[{"partition_index": 0, "broker_ids": [1, 2]}],
                configs=BAD_CONFIG,
            ),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            topic("new", partitions=1, rf=4, configs=BAD_CONFIG),
            ErrorCode.INVALID_REPLICATION_FACTOR,
        ),
        (topic("a_b", partitions=1, rf=1, configs=BAD_CONFIG), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (
            topic(
                "new",
                partitions=-1,
                rf=-1,
                assignments=[{"partition_index": 0, "broker_ids": [1, 1]}],
                configs=BAD_CONFIG,
            ),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (topic("new", partitions=1, rf=1, configs=BAD_CONFIG), ErrorCode.INVALID_CONFIG),
    ],
)
def test_create_topics_checks_the_configs_last_as_kafka_does(
    t: dict[str, Any], code: ErrorCode
) -> None:
    """Kafka 2.8's ZkAdminManager.createTopics: the both-set check, then the assignment
    (AdminUtils: partitions, replication factor, too few brokers), then
    validateTopicCreate (collisions, the assignment's replicas), LogConfig.validate last:
    a topic wrong in two ways gets the earlier error, not INVALID_CONFIG. Nothing is
    written."""
    zk, a = zk_cluster("a.b")
    (got,) = a.create_topics(7, {"topics": [t], "timeout_ms": 0})["topics"]
    assert ErrorCode(got["error_code"]) == code, got
    assert zk.exists(paths.topic(t["name"])) is None or t["name"] == "a.b"


def test_a_controller_refusing_a_whole_request_is_answered_with_its_code() -> None:
    """The controller's refusal of a whole reassignment request other than
    NOT_CONTROLLER is answered as its own code, not an unknown server error."""
    refused = int(ErrorCode.REQUEST_TIMED_OUT)
    a = answered_by(Answering(refused, {}))
    got = answered(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS, a.alter_partition_reassignments(0, REASSIGN)
    )
    assert (got["error_code"], got["error_message"], got["responses"]) == (
        refused,
        "REQUEST_TIMED_OUT",
        [],
    )
    listing = ApiKey.LIST_PARTITION_REASSIGNMENTS
    listed = answered(listing, a.list_partition_reassignments(0, {"topics": None}))
    assert (listed["error_code"], listed["topics"]) == (refused, [])


class Untouched:
    """A ZooKeeper client that records each use (a handler's broad except would swallow
    NoZooKeeper's AssertionError)."""

    def __init__(self) -> None:
        self.used: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.used.append(name)
        raise AssertionError(f"ZooKeeper was used ({name})")


def test_requests_with_nothing_to_look_up_read_nothing_from_zookeeper() -> None:
    """Auto-created names all refused, a CreateTopics of duplicates only: answered
    without a ZooKeeper read."""
    zk = Untouched()
    config = load_broker_config(overrides=["broker.id=1", "zookeeper.connect=z:2181"])
    a = AdminApis(cast(ZkClient, zk), MetadataCache(1), lambda: True, config)
    assert a.auto_create_topics(["a/b"]) == {"a/b": ErrorCode.INVALID_TOPIC_EXCEPTION}
    body = {"topics": [topic("d"), topic("d")], "timeout_ms": 0}
    got = [(t["name"], t["error_code"]) for t in a.create_topics(7, body)["topics"]]
    assert got == [("d", ErrorCode.INVALID_REQUEST), ("d", ErrorCode.INVALID_REQUEST)]
    assert zk.used == []

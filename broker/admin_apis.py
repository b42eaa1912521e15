"""The admin APIs of a Kafka 2.8 broker in ZooKeeper mode: CreateTopics, DeleteTopics,
CreatePartitions, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments
and DescribeConfigs, so that a Kafka client's admin (confluent-kafka's ``AdminClient``,
``kafka-topics.sh --bootstrap-server``, ``kafka-reassign-partitions.sh
--bootstrap-server``) manages topics as it would against Kafka.

As in Kafka 2.8, only the controller's broker carries out the changes; the others answer
NOT_CONTROLLER, and the client asks again of the controller Metadata names. Topics are
changed by writing the znodes `zkctl topic create|delete|add-partitions` write
(admin/topics.py), as Kafka's AdminZkClient does: these are not the controller's own
writes (no controller epoch fences them); the controller reacts to them through its
watches, as to the CLI's. An election or a reassignment is an event on the controller's
queue, answered once its fenced writes are made (a reassignment once it is started).
Then the handler waits, within the request's ``timeout_ms``, until its own metadata
shows the outcome (every partition of a new or grown topic has a leader; a deleted
topic is gone; the elected leader leads), else that topic or partition gets
REQUEST_TIMED_OUT (the change still happens, as in Kafka). DescribeConfigs is any
broker's: it only reads.

Each topic's request is checked in Kafka's order and gets Kafka's error code; a failure
of one topic does not stop the others. Handlers run on connection threads: the ZooKeeper
reads and writes are synchronous there, a few per request, never per partition.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from admin import metadata as zk_metadata
from admin.errors import (
    AdminError,
    ConcurrentChangeError,
    MarkedForDeletionError,
    PartitionCountError,
    Problems,
    RackInfoError,
    ReassignmentInProgressError,
    ReplicaAssignmentError,
    ReplicationFactorError,
    TopicCollisionError,
    TopicExistsError,
    UnknownTopicError,
)
from admin.topics import (
    MAX_PARTITIONS,
    MAX_REPLICATION_FACTOR,
    CreateTopicRequest,
    TopicCreationPlan,
    add_partitions,
    assign_for_creation,
    delete_topic,
    plan_topic_creation,
    write_topic_creation,
)
from broker.config import (
    BrokerConfig,
    ConfigError,
    validate_topic_config,
)
from broker.config_entries import (
    ROOT_LOGGER,
    ConfigEntry,
    broker_entries,
    create_topics_row,
    describe_configs_row,
    logger_entries,
    topic_entries,
)
from broker.metadata_cache import ZERO_UUID, MetadataCache
from controller.assignment import BrokerMetadata, IncompleteRackInfoError, broker_metadatas
from controller.events import ElectionReply, ListingReply, ReassignmentReply
from controller.reactions import PREFERRED_ELECTION, UNCLEAN_ELECTION
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.client import ZOOKEEPER_UNAVAILABLE, ZkClient
from zkdata.int_text import INT32_MAX, INT32_MIN, java_int_in_range
from zkdata.znodes import MalformedZnode, TopicPartition, decode_topic_config

log = logging.getLogger(__name__)

# A conditional write that lost a race (another admin, a reassignment) is tried again.
_ATTEMPTS = 3
# DescribeConfigs' resource types.
_TOPIC_RESOURCE = 2
_BROKER_RESOURCE = 4
_BROKER_LOGGER_RESOURCE = 8
# Errors.INVALID_REQUEST's text, which Kafka's getErrorResponse of a DescribeConfigs gives.
_INVALID_REQUEST_TEXT = (
    "This most likely occurs because of a request being malformed by the client library or"
    " the message was sent to an incompatible broker. See the broker logs for more details."
)

Body = dict[str, Any]
_T = TypeVar("_T")
# A partition's election outcome: error code, message, leader elected (-1: none).
Elected = tuple[int, str | None, int]
# A partition's reassignment target, or None to cancel its reassignment in progress.
Target = tuple[int, ...] | None


class ControllerRequests(Protocol):
    """What the admin APIs ask of this broker's controller: events on its queue, each
    answered through ``reply`` (KafkaController's methods of these names)."""

    def elect_leaders(
        self,
        partitions: list[TopicPartition] | None,
        election_type: int,
        reply: ElectionReply,
    ) -> None: ...

    def alter_partition_reassignments(
        self, reassignments: dict[TopicPartition, Target], reply: ReassignmentReply
    ) -> None: ...

    def list_partition_reassignments(
        self, partitions: list[TopicPartition] | None, reply: ListingReply
    ) -> None: ...


# An error message in an admin answer is cut to this many UTF-8 bytes: a Kafka string
# holds 32,767, and a message past that cannot be encoded (the broker could only close
# the connection, the answers of the request's other topics lost with it).
MAX_MESSAGE_BYTES = 4096


def capped_message(message: str) -> str:
    """``message``, or its first MAX_MESSAGE_BYTES at a character, marked as cut."""
    text = message.encode("utf-8", "replace").decode()  # a lone surrogate: '?'
    data = text.encode()
    if len(data) <= MAX_MESSAGE_BYTES:
        return text
    kept = data[: MAX_MESSAGE_BYTES - 40].decode("utf-8", "ignore")
    return f"{kept} [... {len(data) - len(kept.encode())} bytes more]"


class TopicError(Exception):
    """One topic's request fails with this Kafka error code and message (capped)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = capped_message(message)


def error_of(e: Exception) -> TopicError:
    """The Kafka error an admin failure is, as Kafka's admin manager reports it."""
    if isinstance(e, TopicError):
        return e
    if isinstance(e, ConfigError):
        return TopicError(ErrorCode.INVALID_CONFIG, str(e))
    codes: tuple[tuple[type[AdminError], ErrorCode], ...] = (
        (TopicExistsError, ErrorCode.TOPIC_ALREADY_EXISTS),
        (UnknownTopicError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TopicCollisionError, ErrorCode.INVALID_TOPIC_EXCEPTION),
        (MarkedForDeletionError, ErrorCode.INVALID_TOPIC_EXCEPTION),
        (ReassignmentInProgressError, ErrorCode.REASSIGNMENT_IN_PROGRESS),
        (PartitionCountError, ErrorCode.INVALID_PARTITIONS),
        (ReplicationFactorError, ErrorCode.INVALID_REPLICATION_FACTOR),
        (ReplicaAssignmentError, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        # Kafka's AdminOperationException, no ApiException.
        (RackInfoError, ErrorCode.UNKNOWN_SERVER_ERROR),
        (AdminError, ErrorCode.INVALID_REQUEST),
    )
    for kind, code in codes:
        if isinstance(e, kind):
            return TopicError(code, str(e))
    if isinstance(e, ZOOKEEPER_UNAVAILABLE):
        # Kafka answers UNKNOWN_SERVER_ERROR, which a client takes as final; the write
        # may or may not have landed, which is what REQUEST_TIMED_OUT says: ask again.
        return TopicError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"ZooKeeper did not answer ({type(e).__name__}); whether the change was made"
            " is not known: send the request again",
        )
    return TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")


# Failures a request can meet by itself: answered with their error, nothing logged.
_EXPECTED = (TopicError, AdminError, ConfigError, MalformedZnode)


def _refused(e: Exception, what: str) -> TopicError:
    """The Kafka error a failure is; one no request should cause is logged in full, and
    ZooKeeper out of reach in one line."""
    if isinstance(e, ZOOKEEPER_UNAVAILABLE):
        log.warning("%s failed: ZooKeeper did not answer (%s)", what, type(e).__name__)
    elif not isinstance(e, _EXPECTED):
        log.exception("%s failed", what)
        return error_of(e)
    error = error_of(e)
    if error.code == ErrorCode.UNKNOWN_SERVER_ERROR:
        # Its answer carries no message (_message_of): the log is where it is told.
        log.error("%s failed: %s", what, error.message)
    return error


def _retried(write: Callable[[], _T]) -> _T:
    """A conditional write, made again when it lost a race with another writer."""
    for _ in range(_ATTEMPTS - 1):
        try:
            return write()
        except ConcurrentChangeError:
            continue
    return write()


def _named_twice(message: str) -> TopicError:
    """A topic the request names more than once (Kafka's text, which differs per API)."""
    return TopicError(ErrorCode.INVALID_REQUEST, message)


def duplicates(names: Iterable[str | None]) -> set[str]:
    return {n for n, count in Counter(names).items() if count > 1 and n is not None}


def creatable_topic(
    topic: Mapping[str, Any],
    default_partitions: int,
    default_replication_factor: int,
    *,
    check_config: bool = True,
    check_name: bool = True,
) -> CreateTopicRequest:
    """One CreatableTopic of a CreateTopics request, checked on its own (Kafka's order);
    raises TopicError. -1 partitions or replication factor: the broker's default. Without
    ``check_config`` its configs are left out (null values still refused): the caller
    checks them with topic_config once the plan's own checks passed, as Kafka 2.8's
    validateTopicCreate checks them last. Without ``check_name`` the name is left for
    the caller to check (check_topic_name) once the replicas are assigned, as
    validateTopicCreate's Topic.validate comes after AdminUtils.assignReplicasToBrokers
    (ZkAdminManager.createTopics); with it, the name is checked first, as
    AutoTopicCreationManager does before creating anything."""
    name = str(topic["name"])
    if check_name:
        check_topic_name(name)
    partitions = int(topic.get("num_partitions", -1))
    replication_factor = int(topic.get("replication_factor", -1))
    given = topic.get("assignments") or []
    configs = topic.get("configs") or []
    nulls = sorted(str(c["name"]) for c in configs if c.get("value") is None)
    if nulls:
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            f"null value not supported for topic configs: {', '.join(nulls)}",
        )
    config = topic_config(topic) if check_config else {}
    if given:
        if partitions != -1 or replication_factor != -1:
            raise TopicError(
                ErrorCode.INVALID_REQUEST,
                "both numPartitions or replicationFactor and replicasAssignments were set;"
                " both cannot be used at the same time",
            )
        listed = [int(a["partition_index"]) for a in given]
        twice = sorted(duplicates(map(str, listed)), key=int)
        if twice:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"partitions listed more than once: {', '.join(twice)}",
            )
        assignment = {int(a["partition_index"]): list(a["broker_ids"]) for a in given}
        return CreateTopicRequest(
            name=name, replica_assignment=assignment, config=config, rack_aware_mode=None
        )
    if partitions == -1:
        partitions = default_partitions
    if replication_factor == -1:
        replication_factor = default_replication_factor
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"number of partitions must be from 1 to {MAX_PARTITIONS}, not {partitions}",
        )
    if not 1 <= replication_factor <= MAX_REPLICATION_FACTOR:
        raise TopicError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor must be larger than 0, not {replication_factor}",
        )
    # Kafka's ZkAdminManager assigns replicas to its metadata cache's brokers as they are
    # (no getBrokerMetadatas): some without a rack is AdminUtils' own refusal, not the
    # command line's.
    return CreateTopicRequest(
        name=name,
        partitions=partitions,
        replication_factor=replication_factor,
        config=config,
        rack_aware_mode=None,
    )


def check_topic_name(name: str) -> None:
    """Raise TopicError (INVALID_TOPIC_EXCEPTION) if Kafka's Topic.validate refuses
    ``name``."""
    problem = paths.topic_name_problem(name)
    if problem is not None:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)


def topic_config(topic: Mapping[str, Any]) -> dict[str, str]:
    """A CreatableTopic's configs, checked (no null value among them); raises TopicError
    (INVALID_CONFIG)."""
    configs = topic.get("configs") or []
    try:
        return validate_topic_config({str(c["name"]): str(c["value"]) for c in configs})
    except ConfigError as e:
        raise error_of(e) from None


class AdminApis:
    def __init__(
        self,
        zk: ZkClient,
        metadata: MetadataCache,
        is_controller: Callable[[], bool],
        config: BrokerConfig | None = None,
        controller: ControllerRequests | None = None,
    ) -> None:
        self.zk = zk
        self.metadata = metadata
        self.is_controller = is_controller
        self.config = config
        self.controller = controller

    # --- CreateTopics -------------------------------------------------------------------

    def create_topics(self, version: int, body: Body) -> Body:
        topics: list[Body] = list(body.get("topics") or [])
        validate_only = bool(body.get("validate_only", False))
        # timeout_ms <= 0: answered at once, each topic changed REQUEST_TIMED_OUT (Kafka's
        # ZkAdminManager: the write is made, only the wait is skipped).
        timeout_ms = int(body.get("timeout_ms", 0))
        deadline = time.monotonic() + timeout_ms / 1000
        if topics and not self.is_controller():
            # Kafka's handleCreateTopicsRequest: every entry, a duplicate's too.
            refused = _not_created(_not_controller())
            return {
                "throttle_time_ms": 0,
                "topics": [{"name": t["name"], **refused} for t in topics],
            }
        # The answer of each name asked once; one asked more than once is answered so at
        # each of its entries (Kafka's results are a multi-collection, one per entry).
        results: dict[str, Body] = {}
        planned: dict[str, TopicCreationPlan] = {}
        twice = duplicates(t["name"] for t in topics)
        todo = [t for t in topics if t["name"] not in twice]
        brokers: list[BrokerMetadata] = []
        existing: set[str] = set()
        marked: set[str] = set()
        if todo:
            try:
                brokers, existing, marked = self._cluster()
            except Exception as e:  # ZooKeeper out of reach: each topic says so
                log.warning("CreateTopics: reading the cluster from ZooKeeper failed: %r", e)
                for t in todo:
                    results[t["name"]] = _not_created(error_of(e))
                todo = []
        for t in todo:
            name = t["name"]
            try:
                plan = self._create_one(t, brokers, existing, marked, validate_only)
            except Exception as e:
                results[name] = _not_created(_refused(e, f"CreateTopics of topic {name!r}"))
                continue
            if not validate_only:
                # Kafka's validateTopicCreate checks against the topics in ZooKeeper: one
                # only validated was not written, so nothing collides with it.
                existing.add(name)
            planned[name] = plan
            results[name] = self._created(plan, validate_only=validate_only)
        if planned and not validate_only:
            waited = {n: range(len(p.assignment)) for n, p in planned.items()}
            for name in self._wait(deadline, waited) if timeout_ms > 0 else waited:
                results[name] = _not_created(
                    TopicError(
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"topic {name!r} was created; its partitions had no leader yet"
                        " when the request's timeout ran out",
                    )
                )
                # Kafka sets the id once written (populateIds); an error resets the configs,
                # partition count and replication factor, not the id.
                results[name]["topic_id"] = planned[name].topic_id
        repeated = _not_created(_named_twice("Found multiple entries for this topic."))
        return {
            "throttle_time_ms": 0,
            "topics": [
                {"name": t["name"], **(repeated if t["name"] in twice else results[t["name"]])}
                for t in topics
            ],
        }

    def _cluster(self) -> tuple[list[BrokerMetadata], set[str], set[str]]:
        problems = Problems()
        registrations = zk_metadata.live_brokers(self.zk, problems)
        return (
            zk_metadata.broker_metadatas(registrations.values()),
            set(zk_metadata.topic_names(self.zk)),
            zk_metadata.topics_marked_for_deletion(self.zk),
        )

    def _create_one(
        self,
        topic: Body,
        brokers: Sequence[BrokerMetadata],
        existing: set[str],
        marked: set[str],
        validate_only: bool,
    ) -> TopicCreationPlan:
        name = str(topic["name"])
        if self.metadata.contains(name):
            # Kafka's ZkAdminManager.createTopics looks the name up in its metadata cache
            # before anything else of the request: one marked for deletion is still
            # there until its deletion begins (UpdateMetadata, leader -2); ZooKeeper's
            # topics are looked at after the replicas are assigned (_plan).
            raise TopicExistsError(f"topic {name!r} already exists")
        defaults = self.config
        request = creatable_topic(
            topic,
            defaults.num_partitions if defaults is not None else 1,
            defaults.default_replication_factor if defaults is not None else 1,
            check_config=False,
            check_name=False,
        )
        plan = _plan(request, brokers, existing, marked)
        # Kafka 2.8's validateTopicCreate checks the configs last (LogConfig.validate),
        # after the assignment and the name's collisions.
        plan = dataclasses.replace(plan, config=topic_config(topic))
        if not validate_only:
            _retried(lambda: write_topic_creation(self.zk, plan, if_not_exists=False))
        return plan

    def _created(self, plan: TopicCreationPlan, *, validate_only: bool = False) -> Body:
        replicas = next(iter(plan.assignment.values()), [])
        return {
            # Kafka 2.8 gives the id of the topic it wrote; none was written: zero.
            "topic_id": ZERO_UUID if validate_only else plan.topic_id,
            "error_code": int(ErrorCode.NONE),
            "error_message": None,
            "num_partitions": len(plan.assignment),
            "replication_factor": len(replicas),
            "configs": [create_topics_row(e) for e in topic_entries(self.config, plan.config)],
        }

    # --- topics created by Metadata (auto.create.topics.enable) ------------------------

    @property
    def auto_creates_topics(self) -> bool:
        return self.config is not None and self.config.auto_create_topics_enable

    def auto_create_topics(self, names: Sequence[str]) -> dict[str, ErrorCode]:
        """Kafka 2.8's auto topic creation (KafkaApis.getTopicMetadata): each topic of
        ``names`` that does not exist is created by this broker, whichever it is, with
        num.partitions and default.replication.factor, and answered LEADER_NOT_AVAILABLE
        (the client asks again once the controller has elected its leaders); so is one
        that exists by now or is being deleted. A name Kafka refuses is
        INVALID_TOPIC_EXCEPTION, too few brokers INVALID_REPLICATION_FACTOR, whether or not
        the topic exists or is being deleted (the replicas are assigned first, see _plan;
        none registered for the moment: LEADER_NOT_AVAILABLE, see _auto_create)."""
        assert self.config is not None
        out: dict[str, ErrorCode] = {}
        requests: list[CreateTopicRequest] = []
        for name in names:  # a name Kafka refuses costs no ZooKeeper read
            try:
                requests.append(
                    creatable_topic(
                        {"name": name},
                        self.config.num_partitions,
                        self.config.default_replication_factor,
                    )
                )
            except TopicError as e:
                out[name] = e.code
        if not requests:
            return out
        try:
            brokers, existing, marked = self._cluster()
        except Exception as e:  # ZooKeeper out of reach: the client asks again
            log.warning("auto topic creation: reading the cluster from ZooKeeper failed: %r", e)
            out.update((r.name, ErrorCode.LEADER_NOT_AVAILABLE) for r in requests)
            return out
        for request in requests:
            try:
                out[request.name] = self._auto_create(request, brokers, existing, marked)
            except TopicExistsError:
                out[request.name] = ErrorCode.LEADER_NOT_AVAILABLE
            except Exception as e:
                code = _refused(e, f"auto creation of topic {request.name!r}").code
                # A write whose answer was lost may have landed: the client asks again
                # (Kafka's createTopicsInZk answers REQUEST_TIMED_OUT so too), where
                # REQUEST_TIMED_OUT is no metadata error to a client, which would wait
                # out metadata.max.age.ms.
                timed_out = code == ErrorCode.REQUEST_TIMED_OUT
                out[request.name] = ErrorCode.LEADER_NOT_AVAILABLE if timed_out else code
        return out

    def create_internal_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> ErrorCode:
        """Make an internal topic (``__consumer_offsets``) as its coordinator asks for it,
        Kafka's way: by whichever broker is asked first, with the broker's settings for
        it; NONE once it is asked for (or exists), else the error (too few live brokers
        for its replication factor is INVALID_REPLICATION_FACTOR, as in Kafka)."""
        try:
            request = creatable_topic(
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                },
                partitions,
                replication_factor,
            )
            brokers, existing, marked = self._cluster()
            if name in existing:
                return ErrorCode.NONE
            self._auto_create(request, brokers, existing, marked, "for its coordinator")
            return ErrorCode.NONE
        except TopicExistsError:
            return ErrorCode.NONE
        except Exception as e:
            return _refused(e, f"creation of internal topic {name!r}").code

    def _auto_create(
        self,
        request: CreateTopicRequest,
        brokers: Sequence[BrokerMetadata],
        existing: set[str],
        marked: set[str],
        why: str = "for a client's Metadata (auto.create.topics.enable)",
    ) -> ErrorCode:
        name = request.name
        try:
            plan = _plan(request, brokers, existing, marked)
        except AdminError as e:
            if brokers or type(e) is not AdminError:
                raise
            # Every registration gone for the moment (sessions expired, each broker
            # registering again) while this broker's metadata still lists them, from which
            # Kafka 2.8 assigns and creates the topic: "not available yet", the client
            # asks again (INVALID_REQUEST, "start the brokers first", is no answer of
            # Kafka's here).
            log.info("topic %s not created %s: no broker is registered", name, why)
            raise TopicError(ErrorCode.LEADER_NOT_AVAILABLE, "no broker is registered") from None
        if _retried(lambda: write_topic_creation(self.zk, plan, if_not_exists=True)):
            log.info(
                "topic %s created %s: %d partitions, replication factor %d",
                name,
                why,
                len(plan.assignment),
                len(next(iter(plan.assignment.values()), [])),
            )
        existing.add(name)
        return ErrorCode.LEADER_NOT_AVAILABLE

    # --- DeleteTopics -------------------------------------------------------------------

    def delete_topics(self, version: int, body: Body) -> Body:
        # timeout_ms <= 0: answered at once, each topic changed REQUEST_TIMED_OUT (Kafka's
        # ZkAdminManager: the write is made, only the wait is skipped).
        timeout_ms = int(body.get("timeout_ms", 0))
        deadline = time.monotonic() + timeout_ms / 1000
        if version >= 6:
            wanted = [(t.get("name"), t.get("topic_id", ZERO_UUID)) for t in body["topics"]]
        else:
            wanted = [(n, ZERO_UUID) for n in body.get("topic_names") or []]
        refused = self._deletion_refused(version) or _named_and_identified(wanted)
        if refused is not None:
            # Kafka's handleDeleteTopicsRequest answers every entry so, as given, before
            # it resolves any topic id or deletes any topic.
            return {
                "throttle_time_ms": 0,
                "responses": [{"name": n, "topic_id": i, **_failed(refused)} for n, i in wanted],
            }
        results: list[Body] = []
        # Each name's first entry: Kafka's handleDeleteTopicsRequest deletes a name once
        # (a set) and answers the outcome at its first entry only (results.find), an
        # entry naming it again keeping NONE whatever that outcome.
        asked: dict[str, Body] = {}
        for given, topic_id in wanted:
            result: Body = {"name": given, "topic_id": topic_id}
            results.append(result)
            try:
                name = result["name"] = self._deletable(given, topic_id)
                result.update(error_code=int(ErrorCode.NONE), error_message=None)
                if name not in asked:
                    asked[name] = result
                    # Kafka's broker deletes an internal topic too; only its TopicCommand
                    # refuses. Already marked (its deletion not yet begun) is answered
                    # NONE, as ZkAdminManager.deleteTopics swallows
                    # TopicAlreadyMarkedForDeletion.
                    delete_topic(self.zk, name, internal_allowed=True)
            except Exception as e:
                result.update(_failed(_refused(e, f"DeleteTopics of topic {result['name']!r}")))
        marked = [n for n, r in asked.items() if r["error_code"] == ErrorCode.NONE]
        if marked:
            late = self._wait_deleted(deadline, marked) if timeout_ms > 0 else set(marked)
            for name, result in asked.items():
                if name in late and result["error_code"] == ErrorCode.NONE:
                    result.update(
                        _failed(
                            TopicError(
                                ErrorCode.REQUEST_TIMED_OUT,
                                f"topic {result['name']!r} is marked for deletion; it was"
                                " not deleted yet when the request's timeout ran out",
                            )
                        )
                    )
        return {"throttle_time_ms": 0, "responses": results}

    def _deletion_refused(self, version: int) -> TopicError | None:
        """Why this broker deletes no topic of a request at all: it is not the controller,
        or topic deletion is disabled."""
        if not self.is_controller():
            return _not_controller()
        if self.config is not None and not self.config.delete_topic_enable:
            # Before v3 there was no such error (Kafka answers INVALID_REQUEST).
            return TopicError(
                ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST,
                "topic deletion is disabled (delete.topic.enable=false)",
            )
        return None

    def _deletable(self, name: str | None, topic_id: Any) -> str:
        """The name of a topic to delete (given, or found by its id), once Kafka's checks
        of it before ZooKeeper's pass; raises TopicError."""
        if name is None:
            if topic_id == ZERO_UUID:
                # Kafka 2.8's handleDeleteTopicsRequest: an entry of neither a name nor an
                # id resolves to no name, and filterByAuthorized (authorizer or none) only
                # passes named entries, so it is TOPIC_AUTHORIZATION_FAILED.
                raise TopicError(
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    "neither a topic name nor a topic id was given",
                )
            name = self.metadata.topic_name(topic_id)
            if name is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic has id {topic_id}")
        _refuse_impossible_name(name)
        if not self.metadata.contains(name):
            # Kafka 2.8's handleDeleteTopicsRequest answers a name its metadata cache
            # lacks so before looking at ZooKeeper: one not made yet as far as the
            # brokers know, or whose deletion began (its UpdateMetadata dropped it).
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {name!r} does not exist, or its deletion is under way",
            )
        return name

    # --- CreatePartitions ---------------------------------------------------------------

    def create_partitions(self, version: int, body: Body) -> Body:
        topics: list[Body] = list(body.get("topics") or [])
        validate_only = bool(body.get("validate_only", False))
        # timeout_ms <= 0: answered at once, each topic changed REQUEST_TIMED_OUT (Kafka's
        # ZkAdminManager: the write is made, only the wait is skipped).
        timeout_ms = int(body.get("timeout_ms", 0))
        deadline = time.monotonic() + timeout_ms / 1000
        twice = duplicates(t["name"] for t in topics)
        controller = self.is_controller()
        # One answer per name, a duplicate's too (Kafka's handleCreatePartitionsRequest
        # answers a map): NOT_CONTROLLER first, then INVALID_REQUEST for a duplicate.
        if topics and controller:
            try:
                self._check_racks()
            except Exception as e:
                # Kafka's ZkAdminManager.createPartitions reads the brokers first
                # (getBrokerMetadatas, Enforced), outside any topic's try: the whole
                # request fails, each entry answered alike (getErrorResponse).
                refused = _failed(_refused(e, "CreatePartitions"))
                return {
                    "throttle_time_ms": 0,
                    "results": [{"name": t["name"], **refused} for t in topics],
                }
        results: dict[str, Body] = {}
        # Each grown topic's every partition, the existing ones too: Kafka's
        # DelayedCreatePartitions waits on the whole updated assignment.
        grown: dict[str, range] = {}
        for t in topics:
            name = t["name"]
            if name in results:
                continue
            if not controller:
                results[name] = _failed(_not_controller())
                continue
            if name in twice:
                results[name] = _failed(_named_twice("Duplicate topic in request."))
                continue
            try:
                added = self._grow_one(t, validate_only)
                if added:
                    grown[name] = range(max(added) + 1)
                results[name] = {"error_code": int(ErrorCode.NONE), "error_message": None}
            except Exception as e:
                results[name] = _failed(_refused(e, f"CreatePartitions of topic {name!r}"))
        if grown and not validate_only:
            for name in self._wait(deadline, grown) if timeout_ms > 0 else grown:
                results[name] = _failed(
                    TopicError(
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"topic {name!r} was given its new partitions; not all of its"
                        " partitions had a leader when the request's timeout ran out",
                    )
                )
        return {
            "throttle_time_ms": 0,
            "results": [{"name": n, **r} for n, r in results.items()],
        }

    def _check_racks(self) -> None:
        """Raise RackInfoError if some registered brokers have a rack and some do not."""
        registrations = zk_metadata.live_brokers(self.zk, Problems())
        try:
            broker_metadatas(zk_metadata.broker_metadatas(registrations.values()))
        except IncompleteRackInfoError:
            raise RackInfoError(
                "Not all brokers have rack information for replica rack aware assignment."
            ) from None

    def _grow_one(self, topic: Body, validate_only: bool) -> list[int]:
        """Give one topic its new partitions (or only check that it can be done); their
        indexes."""
        _refuse_impossible_name(str(topic["name"]))
        given = topic.get("assignments")
        # The wire's assignments list the new partitions only, in order; any other count
        # is refused (Kafka's ZkAdminManager), unlike zkctl's, which may list them all.
        assignment = (
            None if given is None else {i: list(a["broker_ids"]) for i, a in enumerate(given)}
        )
        result = _retried(
            lambda: add_partitions(
                self.zk,
                topic["name"],
                int(topic["count"]),
                replica_assignment=assignment,
                validate_only=validate_only,
                # Kafka's broker grows an internal topic too; only its TopicCommand refuses.
                internal_allowed=True,
                new_partitions_only=True,
            )
        )
        return list(result.added)

    # --- DescribeConfigs ----------------------------------------------------------------

    def describe_configs(self, version: int, body: Body) -> Body:
        """A topic's configs (its znode over the broker's defaults), this broker's own, or
        its loggers' levels (BROKER_LOGGER); any broker answers (a broker's, only that
        broker; the broker "", the cluster's dynamic defaults: none). Each resource fails
        alone."""
        synonyms = bool(body.get("include_synonyms", False)) and version >= 1
        documentation = bool(body.get("include_documentation", False)) and version >= 3
        resources: list[Body] = list(body.get("resources") or [])
        described = (_TOPIC_RESOURCE, _BROKER_RESOURCE, _BROKER_LOGGER_RESOURCE)
        if any(int(r["resource_type"]) not in described for r in resources):
            # Kafka 2.8's handleDescribeConfigsRequest throws InvalidRequestException for
            # such a resource before describing any: every resource is answered so.
            refused = {"error_code": int(ErrorCode.INVALID_REQUEST), "configs": []}
            return {
                "throttle_time_ms": 0,
                "results": [
                    {
                        "resource_type": int(r["resource_type"]),
                        "resource_name": str(r["resource_name"]),
                        "error_message": _INVALID_REQUEST_TEXT,
                        **refused,
                    }
                    for r in resources
                ],
            }
        results: list[Body] = []
        for resource in resources:
            kind, name = int(resource["resource_type"]), str(resource["resource_name"])
            keys = resource.get("configuration_keys")
            result: Body = {"resource_type": kind, "resource_name": name, "configs": []}
            try:
                entries = self._config_entries(kind, name)
                # Null or empty: every config (Kafka's ConfigHelper; kafkajs sends []).
                if keys:
                    wanted = set(keys)
                    entries = [e for e in entries if e.name in wanted]
                result["configs"] = [
                    describe_configs_row(e, version, synonyms=synonyms, documentation=documentation)
                    for e in entries
                ]
                result.update(error_code=int(ErrorCode.NONE), error_message=None)
            except Exception as e:
                result.update(_failed(_refused(e, f"DescribeConfigs of {kind} {name!r}")))
            results.append(result)
        return {"throttle_time_ms": 0, "results": results}

    def _config_entries(self, kind: int, name: str) -> list[ConfigEntry]:
        if kind == _TOPIC_RESOURCE:
            problem = paths.topic_name_problem(name)
            if problem is not None:
                raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
            if not self.metadata.contains(name):
                # Kafka 2.8's ConfigHelper asks its metadata cache, not ZooKeeper: a topic
                # whose deletion began (its UpdateMetadata dropped it) is unknown too.
                raise TopicError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {name!r} does not exist, or its deletion is under way",
                )
            got = self.zk.get(paths.topic_config(name))
            overrides = {} if got is None else decode_topic_config(name, got[0])
            return topic_entries(self.config, overrides)
        if kind == _BROKER_RESOURCE:
            if name == "":
                # The cluster-wide dynamic defaults (Kafka's ConfigHelper:
                # currentDynamicDefaultConfigs); dynamic broker configs are not kept here.
                return []
            if _broker_id_of(name) != self.metadata.broker_id:
                raise TopicError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unexpected broker id, expected {self.metadata.broker_id} or empty string,"
                    f" but received {name}",
                )
            if self.config is None:
                raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, "this broker has no config")
            return broker_entries(self.config)
        if kind == _BROKER_LOGGER_RESOURCE:
            # Kafka's ConfigHelper: the broker's own loggers only (its texts).
            if name == "":
                raise TopicError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
            if _broker_id_of(name) != self.metadata.broker_id:
                raise TopicError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unexpected broker id, expected {self.metadata.broker_id} but received {name}",
                )
            return logger_entries(broker_loggers())
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            f"resource type {kind} is not described here (topics: 2, brokers: 4,"
            " broker loggers: 8)",
        )

    # --- ElectLeaders --------------------------------------------------------------------

    def elect_leaders(self, version: int, body: Body) -> Body:
        """The controller's elections (an event on its queue, answered once its writes are
        made), then a wait within ``timeout_ms`` until this broker's metadata shows each
        elected leader. Asked for every partition (null): every partition this broker's
        metadata knows, as Kafka expands it, and only those elected or failed are listed
        (so a broker that is not the controller answers each NOT_CONTROLLER, not an empty
        list that says nothing needed electing)."""
        election_type = int(body.get("election_type", PREFERRED_ELECTION)) if version >= 1 else 0
        timeout_ms = int(body.get("timeout_ms", 0))
        deadline = time.monotonic() + timeout_ms / 1000
        wanted = body.get("topic_partitions")
        partitions = (
            self.metadata.all_partitions()
            if wanted is None
            else list(
                dict.fromkeys(
                    TopicPartition(str(t["topic"]), int(p)) for t in wanted for p in t["partitions"]
                )
            )
        )
        results: dict[TopicPartition, Elected]
        if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            bad = (int(ErrorCode.INVALID_REQUEST), f"unknown election type {election_type}", -1)
            results = dict.fromkeys(partitions, bad)
        elif not self.is_controller() or self.controller is None:
            results = dict.fromkeys(partitions, _election_failed(_not_controller()))
        else:
            results = self._elect(partitions, election_type, _answer_s(body))
        elected = {
            tp: leader for tp, (code, _m, leader) in results.items() if code == ErrorCode.NONE
        }
        # timeout_ms <= 0: Kafka's DelayedElectLeader expires at once, after one look at
        # the metadata.
        if elected:
            for tp in self._wait_leaders(deadline, elected):
                results[tp] = _election_failed(
                    TopicError(
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"broker {elected[tp]} was elected leader of {tp}; this broker's"
                        " metadata did not show it yet when the request's timeout ran out",
                    )
                )
        if wanted is None:
            results = {tp: r for tp, r in results.items() if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
        by_topic: dict[str, list[Body]] = {}
        for tp, (code, message, _leader) in results.items():
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_id": tp.partition,
                    "error_code": int(code),
                    "error_message": (
                        None if message is None else _message_of(code, capped_message(message))
                    ),
                }
            )
        return {
            "throttle_time_ms": 0,
            "error_code": int(ErrorCode.NONE),
            "replica_election_results": [
                {"topic": topic, "partition_result": rows} for topic, rows in by_topic.items()
            ],
        }

    def _elect(
        self, partitions: list[TopicPartition], election_type: int, answer_s: float
    ) -> dict[TopicPartition, Elected]:
        controller = self.controller
        assert controller is not None
        answer = self._ask(
            lambda reply: controller.elect_leaders(partitions, election_type, reply), answer_s
        )
        if answer is None:
            return dict.fromkeys(partitions, _election_failed(_controller_late()))
        return dict(answer[0])

    @staticmethod
    def _ask(
        send: Callable[[Callable[..., None]], None], answer_s: float
    ) -> tuple[Any, ...] | None:
        """Put a request on the controller's queue (``send(reply)``) and wait for its
        answer: the arguments ``reply`` was called with, or None if none came in time."""
        done = threading.Event()
        answer: list[tuple[Any, ...]] = []

        def reply(*args: Any) -> None:
            answer.append(args)
            done.set()

        send(reply)
        return answer[0] if done.wait(answer_s) else None

    # --- AlterPartitionReassignments, ListPartitionReassignments -----------------------

    def alter_partition_reassignments(self, version: int, body: Body) -> Body:
        """The controller checks and starts each reassignment (an event on its queue) and
        answers then, as Kafka does, not when the replicas have moved:
        ListPartitionReassignments follows them. A partition named twice: the last wins
        (Kafka builds a map)."""
        requested: dict[TopicPartition, Target] = {}
        for topic in body.get("topics") or ():
            for p in topic.get("partitions") or ():
                replicas = p.get("replicas")
                requested[TopicPartition(str(topic["name"]), int(p["partition_index"]))] = (
                    None if replicas is None else tuple(int(r) for r in replicas)
                )
        controller = self.controller
        if not self.is_controller() or controller is None:
            return _top_level(_not_controller(), responses=[])
        answer = self._ask(
            lambda reply: controller.alter_partition_reassignments(requested, reply),
            _answer_s(body),
        )
        if answer is None:
            return _top_level(_controller_late(), responses=[])
        code, results = answer
        if code != ErrorCode.NONE:
            return _top_level(_controller_refused(code), responses=[])
        by_topic: dict[str, list[Body]] = {}
        for tp in requested:
            error_code, message = results[tp]
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "error_code": error_code,
                    "error_message": None if message is None else capped_message(message),
                }
            )
        return {
            "throttle_time_ms": 0,
            "error_code": int(ErrorCode.NONE),
            "error_message": None,
            "responses": [{"name": t, "partitions": rows} for t, rows in by_topic.items()],
        }

    def list_partition_reassignments(self, version: int, body: Body) -> Body:
        """The reassignments in progress among the partitions asked for (null: all), from
        the controller's context: each partition's full replica set, and the replicas
        being added and removed. A partition not being reassigned is not listed."""
        wanted = body.get("topics")
        partitions = (
            None
            if wanted is None
            else [
                TopicPartition(str(t["name"]), int(p))
                for t in wanted
                for p in t.get("partition_indexes") or ()
            ]
        )
        controller = self.controller
        if not self.is_controller() or controller is None:
            return _top_level(_not_controller(), topics=[])
        answer = self._ask(
            lambda reply: controller.list_partition_reassignments(partitions, reply),
            _answer_s(body),
        )
        if answer is None:
            return _top_level(_controller_late(), topics=[])
        code, listed = answer
        if code != ErrorCode.NONE:
            return _top_level(_controller_refused(code), topics=[])
        by_topic: dict[str, list[Body]] = {}
        for tp, ra in listed.items():
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "replicas": list(ra.replicas),
                    "adding_replicas": list(ra.adding),
                    "removing_replicas": list(ra.removing),
                }
            )
        return {
            "throttle_time_ms": 0,
            "error_code": int(ErrorCode.NONE),
            "error_message": None,
            "topics": [{"name": t, "partitions": rows} for t, rows in by_topic.items()],
        }

    def _wait_leaders(
        self, deadline: float, leaders: Mapping[TopicPartition, int]
    ) -> list[TopicPartition]:
        """Wait until this broker's metadata shows each partition's expected leader, or the
        deadline; the partitions whose leader it does not show."""

        def late() -> list[TopicPartition]:
            late = []
            for tp, leader in leaders.items():
                known = self.metadata.partition(tp.topic, tp.partition)
                if known is None or known.leader != leader:
                    late.append(tp)
            return late

        self.metadata.wait_until(lambda: not late(), deadline - time.monotonic())
        return late()

    # --- waiting for the outcome --------------------------------------------------------

    def _wait(self, deadline: float, partitions: Mapping[str, range]) -> list[str]:
        """Wait until each topic's ``partitions`` have a leader in this broker's metadata,
        or the deadline; the topics that still lack one."""

        def late() -> list[str]:
            return [
                name
                for name, indexes in partitions.items()
                if not self.metadata.leaders_known(name, indexes)
            ]

        self.metadata.wait_until(lambda: not late(), deadline - time.monotonic())
        return late()

    def _wait_deleted(self, deadline: float, names: list[str]) -> set[str]:
        def late() -> set[str]:
            known = set(self.metadata.topics())
            return {n for n in names if n in known}

        self.metadata.wait_until(lambda: not late(), deadline - time.monotonic())
        return late()


def _not_controller() -> TopicError:
    return TopicError(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")


def _named_and_identified(wanted: Sequence[tuple[str | None, Any]]) -> TopicError | None:
    """An entry giving both a topic's name and its id fails the whole DeleteTopics request:
    Kafka 2.8's handleDeleteTopicsRequest throws InvalidRequestException (its text), and
    getErrorResponse answers every entry INVALID_REQUEST."""
    if any(name is not None and topic_id != ZERO_UUID for name, topic_id in wanted):
        return TopicError(
            ErrorCode.INVALID_REQUEST, "Topic name and topic ID can not both be specified."
        )
    return None


def _plan(
    request: CreateTopicRequest,
    brokers: Sequence[BrokerMetadata],
    existing: set[str],
    marked: set[str],
) -> TopicCreationPlan:
    """A new topic's plan, checked in the order of Kafka 2.8's ZkAdminManager.createTopics:
    the replicas assigned first (AdminUtils.assignReplicasToBrokers: the partition count,
    the replication factor against the live brokers, their racks), then
    validateTopicCreate's checks: the name (Topic.validate), the topics in ZooKeeper (one
    being deleted is still there), collisions, an explicit assignment. So a request with
    several faults gets Kafka's error: a replication factor above the live brokers is
    INVALID_REPLICATION_FACTOR for a bad name or a topic being deleted too. No broker
    registered for the moment (each re-registering; Kafka's metadata cache still lists
    them, and its assignment passes) leaves the assignment to the end."""
    assignment = None
    if request.replica_assignment is None and brokers:
        assignment = assign_for_creation(request, brokers)
    check_topic_name(request.name)
    plan = plan_topic_creation(request, brokers, existing, marked, assignment=assignment)
    assert plan is not None  # not if_not_exists
    return plan


def _refuse_impossible_name(name: str) -> None:
    """A name no topic can have is one no topic has: Kafka's DeleteTopics and
    CreatePartitions answer any name their metadata lacks UNKNOWN_TOPIC_OR_PARTITION,
    without checking it (zkctl refuses it as a bad argument). Nor is it a znode path
    to read ('a/b', '..')."""
    if paths.topic_name_problem(name) is not None:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")


def broker_loggers() -> dict[str, str]:
    """This broker's loggers and the level each logs at, as Kafka 2.8's
    Log4jController.loggers lists its Log4j ones: the root logger, then every logger made
    so far, its level resolved from its ancestors. The broker is a Python process: these
    are its Python loggers, with Python's level names (WARNING where Log4j says WARN)."""
    levels = {ROOT_LOGGER: logging.getLevelName(logging.getLogger().getEffectiveLevel())}
    # A copy: another thread may make a logger meanwhile.
    for name, logger in sorted(dict(logging.Logger.manager.loggerDict).items()):
        if isinstance(logger, logging.Logger):  # not a PlaceHolder for a dotted prefix
            levels[name] = logging.getLevelName(logger.getEffectiveLevel())
    return levels


def _broker_id_of(name: str) -> int:
    """A broker resource's name as Kafka 2.8's resourceNameToBrokerId reads it (Scala's
    toInt: a sign, then decimal digits, "01" is broker 1); raises TopicError."""
    broker_id = java_int_in_range(name, INT32_MIN, INT32_MAX)
    if broker_id is None:
        raise TopicError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        )
    return broker_id


def _controller_late() -> TopicError:
    return TopicError(ErrorCode.REQUEST_TIMED_OUT, "the controller did not answer in time")


def _controller_refused(code: int) -> TopicError:
    """The controller's refusal of a whole request: NOT_CONTROLLER (it resigned, or the
    request was dropped from its queue)."""
    if code == ErrorCode.NOT_CONTROLLER:
        return _not_controller()
    return TopicError(ErrorCode(code), ErrorCode(code).name)


def _answer_s(body: Body) -> float:
    """How long a handler waits for the controller's answer: the request's timeout, and
    at least 30 s (a controller busy with a failover answers late but answers)."""
    return max(int(body.get("timeout_ms", 0)) / 1000, 30.0)


def _top_level(e: TopicError, **empty: list[Body]) -> Body:
    """A response refused as a whole (its lists ``empty``)."""
    return {"throttle_time_ms": 0, "error_code": int(e.code), "error_message": e.message, **empty}


def _election_failed(e: TopicError) -> Elected:
    return (int(e.code), e.message, -1)


def _message_of(code: int, message: str | None) -> str | None:
    """An error's message as an admin answer carries it: none for UNKNOWN_SERVER_ERROR, as
    Kafka 2.8's ApiError.fromThrowable gives none ("to ensure we don't leak sensitive
    information"); the broker's log has it."""
    return None if code == ErrorCode.UNKNOWN_SERVER_ERROR else message


def _failed(e: TopicError) -> Body:
    return {"error_code": int(e.code), "error_message": _message_of(e.code, e.message)}


def _not_created(e: TopicError) -> Body:
    """A CreateTopics result for a topic not created (v5+ says nothing of its configs)."""
    return {**_failed(e), "num_partitions": -1, "replication_factor": -1, "configs": []}

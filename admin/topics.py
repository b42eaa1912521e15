"""Topic administration through znodes, as Kafka's TopicCommand and AdminZkClient do it.

Each operation has a pure part (parse_* for the arguments, plan_* against a snapshot of
the cluster) and a thin I/O part that reads the snapshot and writes the znodes. The pure
parts raise InvalidArgumentError (bad request) or AdminError (not possible in this
cluster); the I/O parts write only after every check passed, with conditional or atomic
ZooKeeper writes, so a concurrent change is detected instead of overwritten.

Deliberate differences from Kafka's tool: ``--topic`` is an exact name, not a regular
expression (in a regex, the '.' legal in topic names matches any character); creating a
topic that is still marked for deletion is an error even with ``--if-not-exists``; an
explicit replica assignment is checked against the registered brokers.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from admin import metadata
from admin.errors import (
    AdminError,
    ConcurrentChangeError,
    InvalidArgumentError,
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
    one_line,
)
from broker.config import (
    ConfigError,
    java_trim,
    parse_configs_to_be_added,
    parse_topic_config_args,
    validate_topic_config,
)
from controller.assignment import (
    AssignmentError,
    BrokerMetadata,
    IncompleteRackInfoError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    RackAwareMode,
    assign_new_partitions,
    assign_replicas_to_brokers,
    java_split,
    parse_replica_assignment,
    validate_replica_assignment,
)
from zkdata import paths, znodes
from zkdata.client import (
    BadVersionError,
    Check,
    Create,
    NodeExistsError,
    NoNodeError,
    SetData,
    ZkClient,
    ZnodeStat,
    is_own_failure,
)
from zkdata.int_text import java_int_in_range
from zkdata.paths import INTERNAL_TOPICS
from zkdata.znodes import PartitionState, TopicAssignment, TopicPartition

MAX_REPLICATION_FACTOR = 2**15 - 1  # a Java short, as in CreateTopics
# A topic's assignment is one znode, which ZooKeeper caps (znodes.MAX_ZNODE_BYTES): past
# this many partitions it cannot fit even with one replica each, so a bigger count is
# refused before any assignment is computed for it (a request may ask for 2**31 - 1).
MAX_PARTITIONS = 100_000
# Broker and partition ids are Java ints on the wire and in Kafka's tools.
MAX_ID = 2**31 - 1
_DIGITS = re.compile("[0-9]+")

COLLISION_WARNING = (
    "Due to limitations in metric names, topics with a period ('.') or underscore"
    " ('_') could collide. To avoid issues it is best to use either, but not both."
)
ADD_PARTITIONS_WARNING = (
    "If partitions are increased for a topic that has a key, the partition logic or"
    " ordering of the messages will be affected"
)


# --- helpers shared by the operations -----------------------------------------------------


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


def colliding_topics(name: str, existing: Iterable[str]) -> list[str]:
    """Existing topics that differ from ``name`` only by '.' versus '_' (Topic.hasCollision)."""
    unified = name.replace(".", "_")
    return sorted(t for t in existing if t != name and t.replace(".", "_") == unified)


def check_topic_name(name: str) -> None:
    problem = paths.topic_name_problem(name)
    if problem is not None:
        raise InvalidArgumentError(problem)


def _config_error(e: ConfigError) -> InvalidArgumentError:
    return InvalidArgumentError(one_line([p.message for p in e.problems]))


def _assignment_error(e: InvalidReplicaAssignmentError) -> str:
    return "invalid replica assignment: " + one_line(e.summary())


def _too_many_partitions(partitions: int) -> str:
    return (
        f"a topic has at most {MAX_PARTITIONS} partitions, not {partitions}: its assignment"
        " is one znode, and ZooKeeper caps a znode at 1 MB"
    )


def _check_fits(name: str, data: bytes) -> None:
    """Raise PartitionCountError if the topic's znode is more than ZooKeeper holds."""
    if len(data) > znodes.MAX_ZNODE_BYTES:
        raise PartitionCountError(
            f"topic {name!r}'s assignment would take {len(data):,} bytes, more than a znode"
            f" holds ({znodes.MAX_ZNODE_BYTES:,}, ZooKeeper's jute.maxbuffer): fewer"
            " partitions or replicas"
        )


def _admin_error(e: AssignmentError) -> AdminError:
    if isinstance(e, InvalidReplicationFactorError):
        return ReplicationFactorError(str(e))
    if isinstance(e, InvalidPartitionsError):
        return PartitionCountError(str(e))
    if isinstance(e, IncompleteRackInfoError):
        return RackInfoError(str(e))
    return AdminError(str(e))


def parse_replicas(text: str, what: str = "--replicas") -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]``: distinct broker ids from 0 to MAX_ID, read as Kafka's
    ReassignPartitionsCommand reads --broker-list: brokerList.split(',').map(_.toInt), so
    a trailing comma ends the list and an id is Integer.parseInt's, untrimmed ("+1" and
    any BMP decimal digit are ids; " 1" is not)."""
    replicas: list[int] = []
    for item in java_split(text, ","):
        broker_id = java_int_in_range(item, 0, MAX_ID)
        if broker_id is None:
            if _DIGITS.fullmatch(item) is None:
                raise InvalidArgumentError(f"{what} {text!r}: {item!r} is not a broker id")
            raise InvalidArgumentError(
                f"{what} {text!r}: {item} is not a broker id (at most {MAX_ID})"
            )
        replicas.append(broker_id)
    dupes = sorted({r for r in replicas if replicas.count(r) > 1})
    if dupes:
        raise InvalidArgumentError(
            f"{what} {text!r} lists broker(s) {', '.join(map(str, dupes))} more than once"
        )
    return replicas


def _require_topic(record: metadata.TopicRecord | None, name: str, problems: Problems) -> None:
    if record is not None:
        return
    if paths.topic(name) in problems.paths():
        raise AdminError(
            f"topic {name!r} cannot be changed: its znode {paths.topic(name)} is malformed"
        )
    raise UnknownTopicError(f"topic {name!r} does not exist")


# --- create -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateTopicRequest:
    """A validated ``topic create`` request (no cluster state consulted yet)."""

    name: str
    partitions: int | None = None
    replication_factor: int | None = None
    replica_assignment: Mapping[int, Sequence[int]] | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    if_not_exists: bool = False
    # None: the brokers' racks as they are (a broker's CreateTopics; see
    # assign_replicas_to_brokers).
    rack_aware_mode: RackAwareMode | None = RackAwareMode.ENFORCED


def parse_create_request(
    name: str,
    *,
    partitions: int | None = None,
    replication_factor: int | None = None,
    replica_assignment: str | None = None,
    config: Iterable[str] = (),
    if_not_exists: bool = False,
    disable_rack_aware: bool = False,
) -> CreateTopicRequest:
    """Check the arguments of ``topic create`` on their own; raise InvalidArgumentError."""
    check_topic_name(name)
    assignment: dict[int, list[int]] | None = None
    if replica_assignment is not None:
        if partitions is not None or replication_factor is not None:
            raise InvalidArgumentError(
                "--replica-assignment cannot be used with --partitions or --replication-factor"
                " (the assignment gives both)"
            )
        try:
            assignment = parse_replica_assignment(replica_assignment)
        except InvalidReplicaAssignmentError as e:
            raise InvalidArgumentError(_assignment_error(e)) from None
    else:
        missing = [
            flag
            for flag, value in (
                ("--partitions", partitions),
                ("--replication-factor", replication_factor),
            )
            if value is None
        ]
        if missing or partitions is None or replication_factor is None:
            raise InvalidArgumentError(
                f"missing {' and '.join(missing)} (or give --replica-assignment)"
            )
        if partitions < 1:
            raise InvalidArgumentError(f"--partitions must be at least 1, not {partitions}")
        if partitions > MAX_PARTITIONS:
            raise InvalidArgumentError(_too_many_partitions(partitions))
        if replication_factor < 1:
            raise InvalidArgumentError(
                f"--replication-factor must be at least 1, not {replication_factor}"
            )
        if replication_factor > MAX_REPLICATION_FACTOR:
            raise InvalidArgumentError(
                f"--replication-factor must be at most {MAX_REPLICATION_FACTOR}"
            )
    try:
        configs = parse_topic_config_args(config)
    except ConfigError as e:
        raise _config_error(e) from None
    return CreateTopicRequest(
        name=name,
        partitions=partitions,
        replication_factor=replication_factor,
        replica_assignment=assignment,
        config=configs,
        if_not_exists=if_not_exists,
        rack_aware_mode=RackAwareMode.DISABLED if disable_rack_aware else RackAwareMode.ENFORCED,
    )


@dataclass(frozen=True)
class TopicCreationPlan:
    name: str
    assignment: dict[int, list[int]]
    config: dict[str, str]
    topic_id: uuid.UUID
    warnings: tuple[str, ...] = ()


def check_topic_absent(
    name: str, existing_topics: Collection[str], marked_for_deletion: Collection[str]
) -> None:
    """Raise TopicExistsError if a topic has the name, or one being deleted still has it."""
    if name in marked_for_deletion:
        raise TopicExistsError(
            f"topic {name!r} is marked for deletion; wait until the controller has deleted it"
        )
    if name in existing_topics:
        raise TopicExistsError(f"topic {name!r} already exists")


def plan_topic_creation(
    request: CreateTopicRequest,
    brokers: Sequence[BrokerMetadata],
    existing_topics: Collection[str],
    marked_for_deletion: Collection[str],
    *,
    rng: random.Random | None = None,
    assignment: dict[int, list[int]] | None = None,
) -> TopicCreationPlan | None:
    """What to write for ``request`` in a cluster with these live brokers and topics.

    None when the topic exists and ``if_not_exists`` is set. Raises TopicExistsError,
    AdminError (collision, too few brokers, unknown brokers, incomplete rack info).
    ``assignment``: the replicas assign_for_creation gave the request already (a
    broker's CreateTopics assigns them before it looks the name up, as Kafka's does).
    """
    name = request.name
    if request.if_not_exists and name in existing_topics and name not in marked_for_deletion:
        return None
    check_topic_absent(name, existing_topics, marked_for_deletion)
    warnings: list[str] = []
    if has_collision_chars(name):
        warnings.append(COLLISION_WARNING)
        collisions = colliding_topics(name, existing_topics)
        if collisions:
            raise TopicCollisionError(
                f"topic {name!r} collides with existing topics: {', '.join(collisions)}"
            )
    if assignment is None:
        assignment = assign_for_creation(request, brokers, rng=rng)
    plan = TopicCreationPlan(
        name=name,
        assignment=assignment,
        config=dict(request.config),
        topic_id=znodes.new_topic_id(),
        warnings=tuple(warnings),
    )
    _check_fits(name, _topic_data(plan))
    return plan


def assign_for_creation(
    request: CreateTopicRequest,
    brokers: Sequence[BrokerMetadata],
    *,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """The replicas of ``request``'s partitions: its explicit assignment checked against
    the brokers, or one made for its partition count and replication factor. Raises
    AdminError (no brokers, too many partitions, too few brokers, unknown brokers,
    incomplete rack info)."""
    if not brokers:
        raise AdminError(
            f"no brokers are registered in {paths.BROKER_IDS}; start the brokers first (zkctl up)"
        )
    if (request.partitions or 0) > MAX_PARTITIONS or len(
        request.replica_assignment or ()
    ) > MAX_PARTITIONS:
        raise PartitionCountError(
            _too_many_partitions(request.partitions or len(request.replica_assignment or ()))
        )
    try:
        if request.replica_assignment is not None:
            return validate_replica_assignment(request.replica_assignment, [b.id for b in brokers])
        return assign_replicas_to_brokers(
            brokers,
            request.partitions or 0,
            request.replication_factor or 0,
            rng=rng,
            rack_aware_mode=request.rack_aware_mode,
        )
    except InvalidReplicaAssignmentError as e:
        raise ReplicaAssignmentError(_assignment_error(e)) from None
    except AssignmentError as e:
        raise _admin_error(e) from None


def _topic_data(plan: TopicCreationPlan) -> bytes:
    return znodes.encode_topic(
        TopicAssignment(
            plan.name,
            {p: tuple(r) for p, r in plan.assignment.items()},
            topic_id=plan.topic_id,
        )
    )


@dataclass
class CreateTopicResult:
    name: str
    created: bool
    plan: TopicCreationPlan | None
    problems: Problems
    warnings: list[str] = field(default_factory=list)


def create_topic(
    zk: ZkClient, request: CreateTopicRequest, *, rng: random.Random | None = None
) -> CreateTopicResult:
    """Create the topic: /config/topics/<t> and /brokers/topics/<t> in one multi.

    The config op comes first, as Kafka writes the config before the assignment (the
    controller reacts to the topic znode and must find its config); doing both in one
    transaction means a topic created concurrently by someone else keeps its own config,
    and this one is told the topic exists (TopicExistsError, or nothing done with
    ``if_not_exists``), as Kafka's AdminZkClient.createTopic is.
    """
    problems = Problems()
    registrations = metadata.live_brokers(zk, problems)
    plan = plan_topic_creation(
        request,
        metadata.broker_metadatas(registrations.values()),
        metadata.topic_names(zk),
        metadata.topics_marked_for_deletion(zk),
        rng=rng,
    )
    if plan is None:
        return CreateTopicResult(request.name, False, None, problems)
    if not write_topic_creation(zk, plan, if_not_exists=request.if_not_exists):
        return CreateTopicResult(plan.name, False, None, problems, list(plan.warnings))
    return CreateTopicResult(plan.name, True, plan, problems, list(plan.warnings))


def write_topic_creation(zk: ZkClient, plan: TopicCreationPlan, *, if_not_exists: bool) -> bool:
    """Write the planned topic (see create_topic); False if it exists and ``if_not_exists``."""
    zk.ensure_paths([paths.BROKER_TOPICS, paths.CONFIG_TOPICS])
    config_path = paths.topic_config(plan.name)
    config_data = znodes.encode_topic_config(plan.config)
    # A config znode can outlive its topic (a deletion interrupted half-way): overwrite it.
    stat = zk.exists(config_path)
    config_op: Create | SetData = (
        Create(config_path, config_data)
        if stat is None
        else SetData(config_path, config_data, stat.version)
    )
    topic_data = _topic_data(plan)
    results = zk.multi([config_op, Create(paths.topic(plan.name), topic_data)])
    exists = isinstance(results[1], NodeExistsError)
    if not exists and is_own_failure(results[0]):
        # ZooKeeper stops at the first failed op: when another creator wrote both znodes
        # after our reads, the config op fails and the topic's Create answers only
        # RuntimeInconsistency, so whether the topic exists now is read.
        exists = zk.exists(paths.topic(plan.name)) is not None
    if exists:
        if if_not_exists:
            return False
        raise TopicExistsError(f"topic {plan.name!r} already exists")
    if is_own_failure(results[0]):
        raise ConcurrentChangeError(
            f"the config znode {config_path} changed while topic {plan.name!r} was being"
            " created; nothing was written, run the command again"
        )
    _raise_first_error(results)
    return True


def _raise_first_error(results: Sequence[object]) -> None:
    for r in results:
        if isinstance(r, Exception) and is_own_failure(r):
            raise r


# --- delete -------------------------------------------------------------------------------


@dataclass
class DeleteTopicResult:
    name: str
    # "marked": this call created the deletion znode; "already_marked"; "absent" (--if-exists)
    outcome: str


def delete_topic(
    zk: ZkClient, name: str, *, if_exists: bool = False, internal_allowed: bool = False
) -> DeleteTopicResult:
    """Mark the topic for deletion: create /admin/delete_topics/<t> (the controller deletes).
    An internal topic is refused unless ``internal_allowed``: Kafka's TopicCommand refuses
    it, its DeleteTopics request (AdminZkClient.deleteTopic) does not. Whether the topic
    exists is checked first, as TopicCommand's ensureTopicExists: an absent internal topic
    is nothing to do with ``if_exists``."""
    check_topic_name(name)
    if zk.exists(paths.topic(name)) is None:
        if if_exists:
            return DeleteTopicResult(name, "absent")
        raise UnknownTopicError(f"topic {name!r} does not exist")
    if name in INTERNAL_TOPICS and not internal_allowed:
        raise AdminError(
            f"topic {name!r} is a Kafka internal topic and is not allowed to be marked for deletion"
        )
    try:
        zk.create(paths.delete_topic(name), make_parents=True)
    except NodeExistsError:
        return DeleteTopicResult(name, "already_marked")
    return DeleteTopicResult(name, "marked")


# --- list ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicListing:
    name: str
    marked_for_deletion: bool


def list_topics(zk: ZkClient, *, exclude_internal: bool = False) -> list[TopicListing]:
    marked = metadata.topics_marked_for_deletion(zk)
    return [
        TopicListing(t, t in marked)
        for t in metadata.topic_names(zk)
        if not (exclude_internal and t in INTERNAL_TOPICS)
    ]


# --- describe -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionDescription:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    # None while the partition has no (readable) state znode.
    state: PartitionState | None = None
    # Why ``state`` is None when its znode exists but could not be decoded.
    state_problem: str | None = None

    @property
    def leader(self) -> int | None:
        """The leader's broker id; None when there is none (-1, -2 or no state yet)."""
        if self.state is None or self.state.leader_and_isr.leader < 0:
            return None
        return self.state.leader_and_isr.leader

    @property
    def leader_epoch(self) -> int | None:
        return None if self.state is None else self.state.leader_and_isr.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return () if self.state is None else self.state.leader_and_isr.isr

    def is_under_replicated(self) -> bool:
        """Kafka's definition: fewer in-sync replicas than replicas (reassignment aside)."""
        return len(self.isr) < len(self.replicas) - len(self.adding_replicas)

    def is_unavailable(self, live_brokers: Collection[int]) -> bool:
        """No leader, or a leader that is not a registered broker."""
        return self.leader is None or self.leader not in live_brokers

    def to_json(self, live_brokers: Collection[int]) -> dict[str, object]:
        return {
            "partition": self.partition,
            "replicas": list(self.replicas),
            "adding_replicas": list(self.adding_replicas),
            "removing_replicas": list(self.removing_replicas),
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "controller_epoch": None if self.state is None else self.state.controller_epoch,
            "under_replicated": self.is_under_replicated(),
            "unavailable": self.is_unavailable(live_brokers),
            "state_problem": self.state_problem,
        }


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    partitions: tuple[PartitionDescription, ...]
    config: Mapping[str, str]
    marked_for_deletion: bool
    # None when the config znode is malformed (reported in the problems).
    config_problem: str | None = None

    @property
    def replication_factor(self) -> int:
        first = self.partitions[0]
        return len(first.replicas) - len(first.adding_replicas)

    def to_json(self, live_brokers: Collection[int]) -> dict[str, object]:
        return {
            "name": self.name,
            "topic_id": None if self.topic_id is None else znodes.topic_id_to_str(self.topic_id),
            "partition_count": len(self.partitions),
            "replication_factor": self.replication_factor,
            "config": dict(self.config),
            "config_problem": self.config_problem,
            "marked_for_deletion": self.marked_for_deletion,
            "partitions": [p.to_json(live_brokers) for p in self.partitions],
        }


@dataclass
class DescribeResult:
    topics: list[TopicDescription]
    live_brokers: set[int]
    problems: Problems


def describe_topic_record(
    record: metadata.TopicRecord,
    states: Mapping[TopicPartition, PartitionState],
    config: Mapping[str, str] | None,
    marked_for_deletion: bool,
    problems: Problems,
) -> TopicDescription:
    """Pure: a topic's description from what was read."""
    a = record.assignment
    problem_by_path = {e.path: e.reason for e in problems}
    parts = []
    for p in sorted(a.partitions):
        tp = TopicPartition(a.topic, p)
        parts.append(
            PartitionDescription(
                topic=a.topic,
                partition=p,
                replicas=a.partitions[p],
                adding_replicas=a.adding_replicas.get(p, ()),
                removing_replicas=a.removing_replicas.get(p, ()),
                state=states.get(tp),
                state_problem=problem_by_path.get(paths.partition_state(a.topic, p)),
            )
        )
    return TopicDescription(
        name=a.topic,
        topic_id=a.topic_id,
        partitions=tuple(parts),
        config=dict(config or {}),
        marked_for_deletion=marked_for_deletion,
        config_problem=problem_by_path.get(paths.topic_config(a.topic)),
    )


def describe_topics(
    zk: ZkClient, names: Sequence[str] | None = None, *, if_exists: bool = False
) -> DescribeResult:
    """Assignment, leadership, ISR and configs of the named topics (None: all topics)."""
    problems = Problems()
    live = metadata.registered_broker_ids(zk, problems)
    if names is None:
        wanted = metadata.topic_names(zk)
    else:
        for name in names:
            check_topic_name(name)
        wanted = list(dict.fromkeys(names))
    records, missing = metadata.read_topics(zk, wanted, problems)
    if missing and names is not None and not if_exists:
        raise UnknownTopicError(
            f"topic(s) {', '.join(repr(n) for n in wanted if n in missing)} do not exist"
        )
    ordered = [records[n] for n in wanted if n in records]
    states = metadata.read_partition_states(zk, metadata.all_partitions(ordered), problems)
    configs = metadata.read_topic_configs(zk, [r.assignment.topic for r in ordered], problems)
    marked = metadata.topics_marked_for_deletion(zk)
    topics = [
        describe_topic_record(
            r, states, configs.get(r.assignment.topic), r.assignment.topic in marked, problems
        )
        for r in ordered
    ]
    return DescribeResult(topics, live, problems)


# --- add partitions -----------------------------------------------------------------------


def parse_add_partitions(
    name: str, partitions: int | None, replica_assignment: str | None
) -> tuple[int, dict[int, list[int]] | None]:
    """Check ``topic add-partitions`` arguments; return (total partitions, assignment)."""
    check_topic_name(name)
    if partitions is None:
        raise InvalidArgumentError("missing --partitions (the new total number of partitions)")
    if partitions < 1:
        raise InvalidArgumentError(f"--partitions must be at least 1, not {partitions}")
    if partitions > MAX_PARTITIONS:
        raise InvalidArgumentError(_too_many_partitions(partitions))
    if replica_assignment is None:
        return partitions, None
    try:
        return partitions, parse_replica_assignment(replica_assignment)
    except InvalidReplicaAssignmentError as e:
        raise InvalidArgumentError(_assignment_error(e)) from None


def plan_new_partitions(
    assignment: TopicAssignment,
    total_partitions: int,
    brokers: Sequence[BrokerMetadata],
    *,
    replica_assignment: Mapping[int, Sequence[int]] | None = None,
    marked_for_deletion: bool = False,
    reassigning: bool = False,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    internal_allowed: bool = False,
    new_partitions_only: bool = False,
) -> dict[int, list[int]]:
    """The replicas of the partitions to add (Kafka's createNewPartitionsAssignment).

    ``replica_assignment`` (numbered from 0) may list every partition, as Kafka's tool
    takes it (the existing ones are then ignored), or only the new ones; with
    ``new_partitions_only`` (a CreatePartitions request's, as Kafka's ZkAdminManager
    takes it) only the new ones. An internal topic's partitions are not added unless
    ``internal_allowed``: Kafka's TopicCommand refuses them, its CreatePartitions request
    does not.
    """
    name = assignment.topic
    existing = len(assignment.partitions)
    if name in INTERNAL_TOPICS and not internal_allowed:
        raise AdminError(
            f"the number of partitions of the internal topic {name!r} cannot be changed"
        )
    if marked_for_deletion:
        raise MarkedForDeletionError(f"topic {name!r} is marked for deletion")
    if reassigning:
        raise ReassignmentInProgressError(
            f"a reassignment of topic {name!r} is in progress; add partitions when it is done"
            " (zkctl reassign --verify)"
        )
    if total_partitions > MAX_PARTITIONS:
        raise PartitionCountError(_too_many_partitions(total_partitions))
    if total_partitions <= existing:
        raise PartitionCountError(
            f"the number of partitions of a topic can only be increased: topic {name!r} has"
            f" {existing} partitions, {total_partitions} would not be an increase"
        )
    explicit: dict[int, list[int]] | None = None
    if replica_assignment is not None:
        to_add = total_partitions - existing
        given = [list(replica_assignment[p]) for p in sorted(replica_assignment)]
        if new_partitions_only and len(given) != to_add:
            raise ReplicaAssignmentError(
                f"Increasing the number of partitions by {to_add} but {len(given)}"
                " assignments provided."
            )
        if len(given) == total_partitions:
            given = given[existing:]
        elif len(given) != to_add:
            raise ReplicaAssignmentError(
                f"--replica-assignment lists {len(given)} partitions: give either the"
                f" {to_add} new ones or all {total_partitions}"
            )
        explicit = {existing + i: r for i, r in enumerate(given)}
    if not brokers:
        raise AdminError(f"no brokers are registered in {paths.BROKER_IDS}")
    try:
        return assign_new_partitions(
            brokers,
            {p: list(r) for p, r in assignment.partitions.items()},
            total_partitions,
            replica_assignment=explicit,
            rack_aware_mode=rack_aware_mode,
        )
    except InvalidReplicaAssignmentError as e:
        raise ReplicaAssignmentError(_assignment_error(e)) from None
    except AssignmentError as e:
        raise _admin_error(e) from None


@dataclass
class AddPartitionsResult:
    name: str
    added: dict[int, list[int]]
    problems: Problems
    warnings: list[str] = field(default_factory=list)
    # False: the topic does not exist and nothing was done (``if_exists``).
    exists: bool = True


def incarnation_change(
    name: str,
    read: ZnodeStat,
    assignment: TopicAssignment,
    now: tuple[bytes, ZnodeStat] | None,
) -> AdminError | None:
    """Why a write of the topic znode read (``read``, ``assignment``) must not be made,
    given what it holds ``now``: gone, another incarnation (czxid or id), or changed."""
    if now is None:
        return UnknownTopicError(f"topic {name!r} was deleted meanwhile; nothing was written")
    data, stat = now
    try:
        topic_id = znodes.decode_topic(name, data).topic_id
    except znodes.MalformedZnode:
        topic_id = None
    if stat.czxid != read.czxid:
        return ConcurrentChangeError(
            f"topic {name!r} was deleted and created again while partitions were being"
            " added; nothing was written, run the command again"
        )
    if topic_id != assignment.topic_id:
        # The same znode, rewritten by another writer with another id (or unreadable):
        # not a new topic, but not the one read either.
        now_holds = "no readable topic id" if topic_id is None else f"topic id {topic_id}"
        return ConcurrentChangeError(
            f"topic {name!r}'s znode was rewritten with {now_holds} (it had"
            f" {assignment.topic_id}) while partitions were being added; nothing was"
            " written, run the command again"
        )
    if stat.version != read.version:
        return ConcurrentChangeError(
            f"topic {name!r} was changed by someone else while partitions were being added;"
            " nothing was written, run the command again"
        )
    return None


def add_partitions(
    zk: ZkClient,
    name: str,
    total_partitions: int,
    *,
    replica_assignment: Mapping[int, Sequence[int]] | None = None,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    validate_only: bool = False,
    internal_allowed: bool = False,
    new_partitions_only: bool = False,
    if_exists: bool = False,
) -> AddPartitionsResult:
    """Grow the topic to ``total_partitions``: one setData of the topic znode, conditional
    on the version read, so a concurrent change (another add, a reassignment) is detected.
    With ``validate_only``, everything but the write. An internal topic is refused unless
    ``internal_allowed``, an assignment of the existing partitions too with
    ``new_partitions_only`` (see plan_new_partitions). A missing topic is nothing to do
    with ``if_exists`` (Kafka 2.8's alterTopic: ensureTopicExists(..., !ifExists))."""
    problems = Problems()
    records, _missing = metadata.read_topics(zk, [name], problems)
    record = records.get(name)
    if record is None and if_exists and paths.topic(name) not in problems.paths():
        return AddPartitionsResult(name, {}, problems, exists=False)
    _require_topic(record, name, problems)
    assert record is not None
    registrations = metadata.live_brokers(zk, problems)
    pending = metadata.pending_reassignment(zk, problems)
    a = record.assignment
    reassigning = bool(a.adding_replicas or a.removing_replicas) or (
        pending is not None and pending.holds_topic(name)
    )
    added = plan_new_partitions(
        a,
        total_partitions,
        metadata.broker_metadatas(registrations.values()),
        replica_assignment=replica_assignment,
        marked_for_deletion=name in metadata.topics_marked_for_deletion(zk),
        reassigning=reassigning,
        rack_aware_mode=rack_aware_mode,
        internal_allowed=internal_allowed,
        new_partitions_only=new_partitions_only,
    )
    new_partitions = dict(a.partitions)
    new_partitions.update({p: tuple(r) for p, r in added.items()})
    data = znodes.encode_topic(
        TopicAssignment(
            a.topic,
            new_partitions,
            topic_id=a.topic_id,
            adding_replicas=a.adding_replicas,
            removing_replicas=a.removing_replicas,
        )
    )
    _check_fits(name, data)
    if validate_only:
        return AddPartitionsResult(name, added, problems, [ADD_PARTITIONS_WARNING])
    # The write is conditional on the version read, but a topic deleted and created again
    # meanwhile has a new znode at version 0 again: the write would land on the new
    # incarnation with this one's id and replicas. ZooKeeper's check op sees only the
    # version, so the incarnation (czxid, id) is read again just before the write (Kafka
    # 2.8's writeTopicPartitionAssignment re-reads the id); the controller undoes a write
    # naming another id all the same.
    changed = incarnation_change(name, record.stat, a, zk.get(paths.topic(name)))
    if changed is not None:
        raise changed
    try:
        zk.set(paths.topic(name), data, version=record.stat.version)
    except BadVersionError:
        raise ConcurrentChangeError(
            f"topic {name!r} was changed by someone else while partitions were being added;"
            " nothing was written, run the command again"
        ) from None
    except NoNodeError:
        raise UnknownTopicError(f"topic {name!r} was deleted meanwhile") from None
    return AddPartitionsResult(name, added, problems, [ADD_PARTITIONS_WARNING])


# --- configs ------------------------------------------------------------------------------


def parse_config_alteration(
    name: str, add_config: Iterable[str], delete_config: Iterable[str]
) -> tuple[dict[str, str], list[str]]:
    """Check ``topic alter-config`` arguments: (configs to set, keys to remove)."""
    check_topic_name(name)
    try:
        additions = parse_configs_to_be_added(add_config)
    except ConfigError as e:
        raise _config_error(e) from None
    # kafka-configs.sh's --delete-config: keys separated by ',' (withValuesSeparatedBy),
    # each trimmed as Java's String.trim.
    keys = []
    for given in delete_config:
        for key in map(java_trim, given.split(",")):
            if not key:
                raise InvalidArgumentError(f"--delete-config {given!r}: an empty config key")
            keys.append(key)
    deletions = list(dict.fromkeys(keys))
    if not additions and not deletions:
        raise InvalidArgumentError("nothing to change: give --add-config and/or --delete-config")
    both = sorted(set(additions) & set(deletions))
    if both:
        raise InvalidArgumentError(
            f"config(s) {', '.join(both)} given to both --add-config and --delete-config"
        )
    try:
        validate_topic_config(additions)
    except ConfigError as e:
        raise _config_error(e) from None
    return additions, deletions


def plan_config_alteration(
    current: Mapping[str, str], additions: Mapping[str, str], deletions: Sequence[str]
) -> dict[str, str]:
    """The new config overrides; the combination is validated (e.g. min <= max lag)."""
    absent = [k for k in deletions if k not in current]
    if absent:
        raise AdminError(
            f"cannot delete config(s) {', '.join(absent)}: not set on this topic"
            f" (set: {', '.join(sorted(current)) or 'none'})"
        )
    updated = {k: v for k, v in current.items() if k not in deletions}
    updated.update(additions)
    try:
        return validate_topic_config(updated)
    except ConfigError as e:
        raise AdminError(one_line([p.message for p in e.problems])) from None


@dataclass
class AlterConfigResult:
    name: str
    before: dict[str, str]
    after: dict[str, str]
    problems: Problems


def alter_topic_config(
    zk: ZkClient, name: str, additions: Mapping[str, str], deletions: Sequence[str]
) -> AlterConfigResult:
    """Rewrite /config/topics/<t> (conditionally on its version) and, in the same multi,
    create the /config/changes notification the brokers watch (Kafka's changeTopicConfig).
    The multi also checks that the topic still exists: a config znode created for a topic
    the controller deleted meanwhile would outlive it (Kafka checks before, not in it)."""
    problems = Problems()
    if zk.exists(paths.topic(name)) is None:
        raise UnknownTopicError(f"topic {name!r} does not exist")
    config_path = paths.topic_config(name)
    got = zk.get(config_path)
    current: dict[str, str] = {}
    if got is not None:
        try:
            current = znodes.decode_topic_config(name, got[0])
        except znodes.MalformedZnode as e:
            # Replaced wholesale below: a malformed config cannot be merged into.
            problems.add(e)
    updated = plan_config_alteration(current, additions, deletions)
    zk.ensure_paths([paths.CONFIG_TOPICS, paths.CONFIG_CHANGES])
    data = znodes.encode_topic_config(updated)
    config_op: Create | SetData = (
        Create(config_path, data) if got is None else SetData(config_path, data, got[1].version)
    )
    notification = Create(
        f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
        znodes.encode_config_change(f"topics/{name}"),
        sequential=True,
    )
    results = zk.multi([Check(paths.topic(name), -1), config_op, notification])
    if isinstance(results[0], NoNodeError):
        raise UnknownTopicError(f"topic {name!r} was deleted meanwhile; nothing was written")
    if is_own_failure(results[1]):
        raise ConcurrentChangeError(
            f"the config of topic {name!r} was changed by someone else meanwhile; nothing was"
            " written, run the command again"
        )
    _raise_first_error(results)
    return AlterConfigResult(name, current, updated, problems)

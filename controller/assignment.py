"""Kafka's replica assignment (``kafka.admin.AdminUtils`` in Kafka 2.8), as pure functions.

What goes where is Kafka's exact algorithm, so a topic created here lands on the same
brokers as it would in Kafka given the same broker list and the same start index and shift:

* rack-unaware: the first replica of partition ``p`` goes to broker ``(start + p) % n``; the
  others follow at a shift that grows by one every ``n`` partitions, so that a broker's
  followers do not always sit on the same neighbours;
* rack-aware (every broker has a rack): the same round robin over a rack-alternated broker
  list, skipping brokers whose rack (or themselves) already holds a replica of the partition
  while some rack (or broker) holds none;
* adding partitions: a fixed start index (where partition 0's first replica sits) and a
  start partition id, as ``AdminZkClient.createNewPartitionsAssignment`` does.

Randomness is injectable (``rng`` or ``fixed_start_index``) so callers and tests can be
deterministic. Manual assignments (``--replica-assignment 1:2,2:3``) are parsed and validated
with every problem reported at once.
"""

from __future__ import annotations

import enum
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from broker.config import java_trim
from zkdata.int_text import INT32_MAX, java_int_in_range

__all__ = [
    "AssignmentError",
    "BrokerMetadata",
    "IncompleteRackInfoError",
    "InvalidPartitionsError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "RackAwareMode",
    "assign_new_partitions",
    "assign_replicas_to_brokers",
    "broker_metadatas",
    "format_replica_assignment",
    "java_split",
    "parse_replica_assignment",
    "rack_alternated_broker_list",
    "replica_index",
    "validate_replica_assignment",
]


class AssignmentError(ValueError):
    """Base class of every error this module raises."""


class InvalidPartitionsError(AssignmentError):
    """Kafka's InvalidPartitionsException (error code 37)."""


class InvalidReplicationFactorError(AssignmentError):
    """Kafka's InvalidReplicationFactorException (error code 38)."""


class IncompleteRackInfoError(AssignmentError):
    """Some brokers have a rack and some do not (Kafka's AdminOperationException)."""


# How many problems of an assignment, and ids in one, a message names before "and N more".
MAX_PROBLEMS_SHOWN = 10
MAX_IDS_SHOWN = 20


def listed(items: Sequence[object], limit: int = MAX_IDS_SHOWN) -> str:
    """``items`` comma-separated; past ``limit``, the first ones and how many more."""
    text = ", ".join(map(str, items[:limit]))
    return text if len(items) <= limit else f"{text} and {len(items) - limit} more"


class InvalidReplicaAssignmentError(AssignmentError):
    """A manual assignment is wrong (Kafka's InvalidReplicaAssignmentException, code 39).

    ``problems`` lists every problem found, not just the first.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        shown = self.summary()
        if len(shown) == 1:
            message = f"invalid replica assignment: {shown[0]}"
        else:
            message = "invalid replica assignment:\n" + "\n".join(f"  - {p}" for p in shown)
        super().__init__(message)

    def summary(self) -> list[str]:
        """The first problems and how many more: an assignment of 100,000 partitions can
        have a problem each, and the message goes to a terminal or into an answer."""
        if len(self.problems) <= MAX_PROBLEMS_SHOWN:
            return list(self.problems)
        hidden = len(self.problems) - MAX_PROBLEMS_SHOWN
        return [*self.problems[:MAX_PROBLEMS_SHOWN], f"... and {hidden} more"]


@dataclass(frozen=True, order=True)
class BrokerMetadata:
    """A broker as assignment sees it: its id and, optionally, its rack."""

    id: int
    rack: str | None = None


class RackAwareMode(enum.Enum):
    """Kafka's RackAwareMode: what to do with rack information when placing replicas."""

    #: use racks; error if only some brokers have one (Kafka's default)
    ENFORCED = "enforced"
    #: use racks if every broker has one, otherwise ignore them
    SAFE = "safe"
    #: ignore racks (kafka-topics.sh --disable-rack-aware)
    DISABLED = "disabled"


# Kafka draws its start index and shift from one shared java.util.Random; a module-level
# generator plays that part when the caller injects none.
_RANDOM = random.Random()


def broker_metadatas(
    brokers: Iterable[BrokerMetadata | int],
    rack_aware_mode: RackAwareMode | None = RackAwareMode.ENFORCED,
) -> list[BrokerMetadata]:
    """The brokers sorted by id, racks kept or dropped per ``rack_aware_mode`` (None:
    kept as they are).

    This is ``AdminZkClient.getBrokerMetadatas``; a bare int is a broker without a rack.
    """
    metas = [b if isinstance(b, BrokerMetadata) else BrokerMetadata(b) for b in brokers]
    duplicates = sorted(i for i, c in Counter(m.id for m in metas).items() if c > 1)
    if duplicates:
        raise AssignmentError(f"duplicate broker ids: {', '.join(map(str, duplicates))}")
    with_rack = sum(1 for m in metas if m.rack is not None)
    partial = 0 < with_rack < len(metas)
    if rack_aware_mode is RackAwareMode.ENFORCED and partial:
        raise IncompleteRackInfoError(
            "Not all brokers have rack information. Add --disable-rack-aware in command line"
            " to make replica assignment without rack information."
        )
    if rack_aware_mode is RackAwareMode.DISABLED or (
        rack_aware_mode is RackAwareMode.SAFE and partial
    ):
        metas = [BrokerMetadata(m.id) for m in metas]
    return sorted(metas, key=lambda m: m.id)


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one per rack in turn, racks in name order, brokers in id order.

    ``{0: rack1, 1: rack3, 2: rack3, 3: rack2, 4: rack2, 5: rack1}`` gives ``0, 3, 1, 5, 4, 2``.
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[rack], reverse=True) for rack in sorted(by_rack)]
    result: list[int] = []
    rack_index = 0
    while len(result) < len(broker_racks):
        queue = queues[rack_index]
        if queue:
            result.append(queue.pop())
        rack_index = (rack_index + 1) % len(queues)
    return result


def replica_index(
    first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int
) -> int:
    """Kafka's ``AdminUtils.replicaIndex``: where replica ``replica_index + 1`` goes.

    The shift is in ``1 .. n_brokers - 1``, so a follower never lands on the leader's slot.
    """
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def assign_replicas_to_brokers(
    brokers: Iterable[BrokerMetadata | int],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int | None = None,
    start_partition_id: int | None = None,
    rng: random.Random | None = None,
    rack_aware_mode: RackAwareMode | None = RackAwareMode.ENFORCED,
) -> dict[int, list[int]]:
    """Kafka's ``AdminUtils.assignReplicasToBrokers``: partition id -> replica broker ids.

    The brokers are first taken through ``broker_metadatas(brokers, rack_aware_mode)``,
    as Kafka's tools do (``getBrokerMetadatas``); ``rack_aware_mode`` None takes them as
    they are, as Kafka 2.8's ZkAdminManager.createTopics passes its metadata cache's: then
    some brokers without a rack are refused after the replication factor's check, with
    AdminUtils' own message.

    ``fixed_start_index`` (None or negative: random, as Kafka's -1) fixes both the start
    index and the initial replica shift, exactly as Kafka does. Otherwise both are drawn
    from ``rng`` (start index first). Partitions are numbered from ``start_partition_id``
    (None or negative: 0). Brokers are sorted by id first, as Kafka's callers do.
    """
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    metas = broker_metadatas(brokers, rack_aware_mode)
    if replication_factor > len(metas):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(metas)}."
        )
    gen = rng if rng is not None else _RANDOM
    fixed = fixed_start_index if fixed_start_index is not None and fixed_start_index >= 0 else -1
    first_partition = max(0, start_partition_id if start_partition_id is not None else 0)
    if all(m.rack is None for m in metas):
        ids = [m.id for m in metas]
        return _assign_rack_unaware(
            n_partitions,
            replication_factor,
            ids,
            fixed=fixed,
            first_partition=first_partition,
            gen=gen,
        )
    if any(m.rack is None for m in metas):
        # Only without rack_aware_mode: broker_metadatas raised on partial rack info or
        # dropped it otherwise.
        raise IncompleteRackInfoError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    racks = {m.id: m.rack for m in metas if m.rack is not None}
    return _assign_rack_aware(
        n_partitions,
        replication_factor,
        racks,
        fixed=fixed,
        first_partition=first_partition,
        gen=gen,
    )


def _start_and_shift(fixed: int, n: int, gen: random.Random) -> tuple[int, int]:
    # Kafka: startIndex = fixed or rand.nextInt(n); nextReplicaShift = fixed or rand.nextInt(n).
    start = fixed if fixed >= 0 else gen.randrange(n)
    shift = fixed if fixed >= 0 else gen.randrange(n)
    return start, shift


def _assign_rack_unaware(
    n_partitions: int,
    replication_factor: int,
    broker_ids: list[int],
    *,
    fixed: int,
    first_partition: int,
    gen: random.Random,
) -> dict[int, list[int]]:
    n = len(broker_ids)
    start, shift = _start_and_shift(fixed, n, gen)
    result: dict[int, list[int]] = {}
    partition = first_partition
    for _ in range(n_partitions):
        # The shift grows when a new round of n partitions begins (by partition id, not by
        # count), which is why adding partitions passes the existing count as the start id.
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [broker_ids[first]]
        replicas.extend(
            broker_ids[replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
        )
        result[partition] = replicas
        partition += 1
    return result


def _assign_rack_aware(
    n_partitions: int,
    replication_factor: int,
    broker_racks: dict[int, str],
    *,
    fixed: int,
    first_partition: int,
    gen: random.Random,
) -> dict[int, list[int]]:
    n_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    start, shift = _start_and_shift(fixed, n, gen)
    result: dict[int, list[int]] = {}
    partition = first_partition
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[replica_index(first, shift * n_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                # Skip a broker whose rack already has a replica while some rack has none, and
                # a broker that already has one while some broker has none.
                rack_ok = rack not in racks_used or len(racks_used) == n_racks
                broker_ok = broker not in brokers_used or len(brokers_used) == n
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        result[partition] = replicas
        partition += 1
    return result


def assign_new_partitions(
    brokers: Iterable[BrokerMetadata | int],
    existing_assignment: Mapping[int, Sequence[int]],
    total_partitions: int,
    *,
    replica_assignment: Mapping[int, Sequence[int]] | None = None,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
) -> dict[int, list[int]]:
    """Replicas for the partitions added when a topic grows to ``total_partitions``.

    Kafka's ``AdminZkClient.createNewPartitionsAssignment``: the replication factor is
    partition 0's; the start index is the position (in the id-sorted broker list) of the
    first broker whose id is >= partition 0's first replica, and it also fixes the shift;
    new partitions are numbered from the existing count. A ``replica_assignment`` for the
    new partitions is validated and returned instead. Only the new partitions are returned.
    """
    if 0 not in existing_assignment:
        raise AssignmentError(
            "Unexpected existing replica assignment: partition id 0 is missing."
            f" Assignment: {dict(existing_assignment)}"
        )
    partition0 = list(existing_assignment[0])
    if not partition0:
        raise AssignmentError(
            "Unexpected existing replica assignment: partition 0 has no replicas."
        )
    existing = len(existing_assignment)
    to_add = total_partitions - existing
    if to_add <= 0:
        raise InvalidPartitionsError(
            "The number of partitions for a topic can only be increased. Topic currently has"
            f" {existing} partitions, {total_partitions} would not be an increase."
        )
    metas = broker_metadatas(brokers, rack_aware_mode)
    if replica_assignment is not None:
        validated = validate_replica_assignment(
            replica_assignment,
            [m.id for m in metas],
            expected_replication_factor=len(partition0),
            first_partition_id=existing,
        )
        if len(validated) != to_add:
            raise InvalidReplicaAssignmentError(
                [
                    f"{len(validated)} partitions assigned but {to_add} are being added"
                    f" ({existing} -> {total_partitions})"
                ]
            )
        return validated
    # Kafka indexes into the id-sorted list even when the rack-aware path then uses the
    # index in its rack-alternated list; kept, so placements match Kafka's.
    start = next((i for i, m in enumerate(metas) if m.id >= partition0[0]), 0)
    return assign_replicas_to_brokers(
        metas,
        to_add,
        len(partition0),
        fixed_start_index=start,
        start_partition_id=existing,
        rack_aware_mode=rack_aware_mode,
    )


def java_split(text: str, separator: str) -> list[str]:
    """``text.split(separator)`` as Java's String.split(regex) splits: trailing empty
    strings are dropped (a text without the separator is itself, "" included)."""
    parts = text.split(separator)
    if len(parts) > 1:
        while parts and not parts[-1]:
            parts.pop()
    return parts


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Parse ``kafka-topics.sh --replica-assignment``: ``"1:2,2:3"`` -> ``{0: [1, 2], 1: [2, 3]}``.

    Partitions are separated by commas and numbered from 0, replicas by colons. Raises
    InvalidReplicaAssignmentError listing every malformed id, duplicate broker and replication
    factor that differs from partition 0's (TopicCommand.parseReplicaAssignment's checks).
    """
    problems: list[str] = []
    result: dict[int, list[int]] = {}
    if not text.strip():
        raise InvalidReplicaAssignmentError(["the replica assignment is empty"])
    for partition, entry in enumerate(java_split(text, ",")):
        replicas: list[int] = []
        bad = False
        for item in java_split(entry, ":"):
            # Kafka's s.trim().toInt: String.trim, Integer.parseInt (a '+', any BMP decimal
            # digit; not Python's "1_0" nor its Unicode spaces); a broker id is from 0.
            token = java_trim(item)
            broker_id = java_int_in_range(token, 0, INT32_MAX)
            if broker_id is not None:
                replicas.append(broker_id)
            else:
                problems.append(
                    f"partition {partition}: {token!r} is not a broker id (in {entry!r})"
                )
                bad = True
        if bad:
            continue
        dupes = sorted(b for b, c in Counter(replicas).items() if c > 1)
        if dupes:
            problems.append(
                f"partition {partition}: duplicate broker(s) {', '.join(map(str, dupes))}"
                f" in {entry.strip()!r}"
            )
        result[partition] = replicas
    if 0 in result:
        rf0 = len(result[0])
        for partition, replicas in result.items():
            if len(replicas) != rf0:
                problems.append(
                    f"partition {partition} has replication factor {len(replicas)}"
                    f" but partition 0 has {rf0}"
                )
    if problems:
        raise InvalidReplicaAssignmentError(problems)
    return result


def validate_replica_assignment(
    assignment: Mapping[int, Sequence[int]],
    broker_ids: Iterable[int],
    *,
    expected_replication_factor: int | None = None,
    first_partition_id: int = 0,
) -> dict[int, list[int]]:
    """Check a manual assignment; return it as ``{partition: [brokers]}`` sorted by partition.

    Every partition needs at least one replica, no broker twice, only brokers in
    ``broker_ids``, and the same replication factor (``expected_replication_factor``, or the
    lowest partition's when None). Partition ids must run consecutively from
    ``first_partition_id``. Raises InvalidReplicaAssignmentError with every problem found.
    """
    problems: list[str] = []
    available = set(broker_ids)
    # Each unknown broker is named once, with the partitions naming it, as Kafka's
    # "Unknown broker(s) in replica assignment" does, not once per partition.
    unknown: dict[int, None] = {}
    naming_unknown: list[int] = []
    ordered = {p: list(assignment[p]) for p in sorted(assignment)}
    if not ordered:
        raise InvalidReplicaAssignmentError(["no partitions are assigned"])
    expected_ids = list(range(first_partition_id, first_partition_id + len(ordered)))
    if list(ordered) != expected_ids:
        problems.append(
            f"partition ids must be consecutive from {first_partition_id}:"
            f" got {', '.join(map(str, ordered))}"
        )
    rf = (
        expected_replication_factor
        if expected_replication_factor is not None
        else len(next(iter(ordered.values())))
    )
    for partition, replicas in ordered.items():
        if not replicas:
            problems.append(f"partition {partition} has no replicas")
            continue
        dupes = sorted(b for b, c in Counter(replicas).items() if c > 1)
        if dupes:
            problems.append(
                f"partition {partition}: duplicate broker(s) {', '.join(map(str, dupes))}"
                f" in {replicas}"
            )
        missing = set(replicas) - available
        if missing:
            unknown.update(dict.fromkeys(sorted(missing)))
            naming_unknown.append(partition)
        if len(replicas) != rf:
            problems.append(
                f"partition {partition} has replication factor {len(replicas)}, expected {rf}"
            )
    if unknown:
        partitions = "partition" if len(naming_unknown) == 1 else "partitions"
        problems.append(
            f"broker(s) {listed(sorted(unknown))} not available (available brokers:"
            f" {listed(sorted(available)) or 'none'}), in {partitions} {listed(naming_unknown)}"
        )
    if problems:
        raise InvalidReplicaAssignmentError(problems)
    return ordered


def format_replica_assignment(assignment: Mapping[int, Sequence[int]]) -> str:
    """The inverse of parse_replica_assignment for a 0-based consecutive assignment."""
    return ",".join(":".join(map(str, assignment[p])) for p in sorted(assignment))

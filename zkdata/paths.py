"""Every znode path the cluster uses, exactly Kafka's layout (ZkData.scala).

One module owns the paths so that no other module formats a path string by hand.

/consumers is Kafka 0.8's consumers' (ConsumerPathZNode): OffsetCommit v0 writes a
group's offsets under it, /consumers/<group>/offsets/<topic>/<partition>, and OffsetFetch
v0 reads them (ConsumerOffset), as Kafka 2.8 still serves them. Every broker makes it at
start-up, as Kafka 2.8's createTopLevelPaths (the first of its PersistentZkPaths).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import starmap

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
# Persistent broker identities (broker.identity.mode=persistent, docs/broker-identity.md):
# one persistent child per allocated id, holding its claim. Not Kafka's; ours.
BROKER_IDENTITIES = "/brokers/identities"

ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"

ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"

CLUSTER_ID = "/cluster/id"

CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"

# A broker whose log directory failed says so here (KIP-112); the controller then asks it
# which of its replicas are still online.
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"

# Kafka 0.8's ZooKeeper-kept consumer offsets (ZkData's ConsumerPathZNode, ConsumerOffset).
CONSUMERS = "/consumers"

# Created (empty) by every broker at start-up, as Kafka's ZkData.PersistentZkPaths.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    DELETE_TOPICS,
    CONFIG_TOPICS,
    CONFIG_CHANGES,
    LOG_DIR_EVENT_NOTIFICATION,
)


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def broker_identity(broker_id: int) -> str:
    return f"{BROKER_IDENTITIES}/{broker_id}"


def topic(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}"


def topic_partitions(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions"


def partition(name: str, partition_id: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{partition_id}"


def consumer_offset(group: str, topic_name: str, partition_id: int) -> str:
    """Where OffsetCommit v0 keeps a group's offset of a partition. The group id is put in
    as it is, as Kafka puts it: one with a '/' names a deeper path, an empty one an
    invalid path (see `zookeeper_path_problem`)."""
    return f"{CONSUMERS}/{group}/offsets/{topic_name}/{partition_id}"


def zookeeper_path_problem(path: str) -> str | None:
    """Why ZooKeeper's Java client refuses a path (PathUtils.validatePath, which Kafka's
    requests meet before they are sent), or None. kazoo checks none of this, and silently
    drops an empty name ("//"), so a path built from a client's text is checked here."""
    if not path.startswith("/"):
        return "a path must start with '/'"
    if path == "/":
        return None
    if path.endswith("/"):
        return "a path must not end with '/'"
    for name in path[1:].split("/"):
        if not name:
            return "empty node name"
        if name in (".", ".."):
            return "relative paths not allowed"
        for ch in name:
            # Java's chars: one beyond the Basic Multilingual Plane is two surrogates.
            if (
                ch == "\0"
                or "\u0001" <= ch <= "\u001f"
                or "\u007f" <= ch <= "\u009f"
                or "\ud800" <= ch <= "\uf8ff"
                or ch >= "\ufff0"
            ):
                return f"invalid character {ch!r}"
    return None


def child(parent: str, name: str) -> str:
    """The path of child ``name`` of ``parent`` (one whose name is not known to be one of
    the layout's, such as a stray child met while deleting a topic's znodes)."""
    return f"{parent.rstrip('/')}/{name}"


def parse_partition_id(child_name: str) -> int | None:
    """The partition of a child of /brokers/topics/<t>/partitions, or None for a name that
    is not one (as the controller writes it: ASCII digits, no leading zero, a Java int)."""
    return parse_broker_id(child_name)  # the same rule: a non-negative 32-bit integer


_PARTITION_STATE = BROKER_TOPICS + "/{}/partitions/{}/state"


def partition_state(name: str, partition_id: int) -> str:
    return _PARTITION_STATE.format(name, partition_id)


def partition_states(partitions: Iterable[tuple[str, int]]) -> list[str]:
    """``partition_state`` of each (topic, partition), made by a loop in C (a failover
    reads 100,000)."""
    return list(starmap(_PARTITION_STATE.format, partitions))


def delete_topic(name: str) -> str:
    return f"{DELETE_TOPICS}/{name}"


def topic_config(name: str) -> str:
    return f"{CONFIG_TOPICS}/{name}"


def isr_change_notification(child: str) -> str:
    return f"{ISR_CHANGE_NOTIFICATION}/{child}"


def log_dir_event_notification(child: str) -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{child}"


# Kafka's broker ids are Java ints: every request and UpdateMetadata carries them as int32.
MAX_BROKER_ID = 2**31 - 1


def parse_broker_id(child: str) -> int | None:
    """The broker id of a child of /brokers/ids, or None for a name that is not one: a
    non-negative 32-bit integer written as Kafka writes it (ASCII digits, no leading zero)."""
    if not (child.isascii() and child.isdigit()) or len(child) > len(str(MAX_BROKER_ID)):
        return None
    value = int(child)
    return value if value <= MAX_BROKER_ID and str(value) == child else None


# Kafka's topic-name rule (Topic.scala): legal characters, and at most 249 of them.
_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_TOPIC_NAME_LENGTH = 249
# The same rule in one C loop: a failover checks every topic's name (100,000 of them).
_LEGAL_TOPIC_NAME = re.compile(f"[a-zA-Z0-9._-]{{1,{MAX_TOPIC_NAME_LENGTH}}}")


# Kafka's internal topics: made by their coordinators with their own settings, never by
# a client's Metadata, and flagged internal in Metadata answers.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def topic_name_problem(name: str) -> str | None:
    """Why a topic name is illegal, or None when it is legal."""
    if _LEGAL_TOPIC_NAME.fullmatch(name) and name not in (".", ".."):
        return None
    if not name:
        return "a topic name must not be empty"
    if name in (".", ".."):
        return f"a topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"a topic name is at most {MAX_TOPIC_NAME_LENGTH} characters, not {len(name)}"
    bad = sorted(set(name) - _LEGAL_TOPIC_CHARS)
    if bad:
        return (
            f"topic name {name!r} has illegal characters {''.join(bad)!r}; "
            "legal are ASCII letters, digits, '.', '_' and '-'"
        )
    return None

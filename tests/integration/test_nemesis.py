"""A seeded schedule of real faults against a cluster under load, then the safety checks.

One broker is killed (SIGKILL), or two at once, or one is paused past its session
timeout (a zombie when it is the controller) or briefly, or shut down in a controlled
way, or cut off from ZooKeeper while it goes on running (a network partition; past the
session timeout or not; or only ZooKeeper's answers lost, its session kept alive by what
still arrives), or cut off from the other brokers (they cannot reach its inter-broker
listener; past replica.lag.time.max.ms or not; or only its answers to them lost), or
either link congested (every byte delivered late, up to three quarters of the session
timeout to ZooKeeper and 4.5 s between brokers, nothing lost), or the controller is
made to move by deleting /controller, or a client asks for a preferred election of every
partition (ElectLeaders, through the controller's queue), or moves a
partition's replica off a broker and back (AlterPartitionReassignments, twice: the
replica is deleted, then fetches the whole log again), or creates a short-lived topic and
deletes it (CreateTopics, DeleteTopics: it must end gone everywhere), or (in the
schedules that heal between faults) a broker's disks are replaced: killed, its log
directories emptied, restarted; the target is the controller half of the time. A second
schedule runs against a three-server ZooKeeper ensemble and adds its faults: a member
killed or paused (the leader half the time), and the whole ensemble paused, sometimes
past the session timeout; after each,
the ensemble must commit a fresh client's write again, or its leader is restarted as an
operator would (workload.py's unstick_ensemble: ZooKeeper 3.8.0 can stay stuck after a
pause, with no client to blame), and a broker whose restart gave up on ZooKeeper (out of
reach past its 15 s connection timeout: it exits, as Kafka's does) is started again, as
its supervisor would (revive_failed_start). Between faults the cluster heals (every broker
registered, a controller active, every ISR full), so with RF 3, min.insync.replicas 2
and unclean election off nothing acknowledged may be lost.
Meanwhile a confluent-kafka producer (acks=all) writes without pause.

Afterwards: the producer had no message refused, every acknowledged message is read back
at its offset, a last batch is fully acknowledged (the cluster serves again), and every
broker's state-change log passes tests/history_checks.py (one controller per epoch,
fenced writes, one leader per leader epoch, every zkVersion won once, epochs applied in
order).

Another gives each broker a second log directory on a small disk of its own and adds
that disk filling up (a real ENOSPC on a tmpfs): the broker takes the directory offline
and serves the other, the controller moves what was there (KIP-112), and an operator then
frees the disk and restarts the broker.

A third runs two broker-fault schedules at once, neither waiting for the cluster to heal,
so faults land in each other's failovers, restarts and ISR refills (each broker has one
fault at a time); the same checks follow once it has healed. A fourth does the same
against a three-server ensemble, with a third worker doing the ensemble's faults meanwhile,
and a fifth with the small disks and their filling among the workers' faults.

The seed also picks the stream's codecs: its topic's compression.type (a leader compresses
what it is sent again when that names a codec; every replica must then store only that
codec) and its producer's, and the group coordinator's (offsets.topic.compression.codec:
the cleaner compacts, and a new coordinator loads, batches of it). The schedule is
printed and follows from the seed (the overlapping one's faults do; when they overlap
depends on timing); ZKCTL_NEMESIS_SEEDS (e.g. "1,2,3"), ZKCTL_NEMESIS_ZK_SEEDS (the
ensemble's), ZKCTL_NEMESIS_DISK_SEEDS, ZKCTL_NEMESIS_OVERLAP_SEEDS,
ZKCTL_NEMESIS_OVERLAP_ZK_SEEDS, ZKCTL_NEMESIS_OVERLAP_DISK_SEEDS and ZKCTL_NEMESIS_FAULTS
run others and longer ones (a seed variable set empty runs none of its kind).
ZKCTL_NEMESIS_CLIENT_LOG=<file> writes the producer's librdkafka debug log there, with
the faults and, each second, how many messages were sent, acknowledged, refused and
queued: to tell the client's part in a stall from the brokers'.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewPartitions,
    NewTopic,
)
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from admin.cluster_admin import ClusterAdmin, error_name, parse_bootstrap
from admin.errors import AdminError
from cluster import zookeeper as zkp
from cluster.netsplit import InterBrokerLink, ZooKeeperLink, linked, linked_brokers
from groups.coordinator import OFFSETS_TOPIC
from storage.checkpoints import read_topic_ids
from storage.errors import CheckpointError
from storage.log_manager import TOPIC_IDS_FILE
from storage.records import iter_batches
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import bootstrap, consume, lost_acknowledged, produce
from tests.integration.harness import Cluster, wait_for
from tests.integration.workload import (
    ASSIGNMENT,
    BROKERS,
    PARTITIONS,
    REPLICA_LAG_S,
    TOPIC,
    Committer,
    GroupMembers,
    Stream,
    client_log,
    diagnose,
    history_problems,
    revive_failed_start,
    unstick_ensemble,
    wait_healed,
)
from tests.small_disks import fill, tmpfs
from wire.api import ApiKey
from wire.client import KafkaConnection, KafkaConnectionError
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.znodes import TopicPartition

# The test's own ZooKeeper requests fail while the ensemble is down (a fault of it).
ZK_ERRORS = (KazooException, KazooTimeoutError)

pytestmark = pytest.mark.integration

# The brokers' settings in every schedule. __consumer_offsets rolls small segments and
# the cleaner looks often, so the committer's and the members' records are compacted
# during the faults: a coordinator that takes over loads a compacted partition, followers
# fetch its gaps, a broker killed mid-swap finishes it at its restart.
SCHEDULE_SETTINGS = {
    "replica_lag_time_max_ms": str(REPLICA_LAG_S * 1000),
    "offsets_topic_segment_bytes": "16384",
    "log_cleaner_backoff_ms": "500",
}


# The stream's codecs, drawn from the seed (apart from the schedule's draws): the topic's
# compression.type (a leader compresses what it is sent again with one naming a codec)
# and the producer's. So the faults meet every codec's decoding, encoding and
# recompression on the leader's path.
TOPIC_CODECS = ("producer", "producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
PRODUCER_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def stream_codecs(seed: int) -> tuple[str, str]:
    """(the topic's compression.type, the producer's compression.codec) for a seed."""
    rng = random.Random(f"codecs {seed}")
    return rng.choice(TOPIC_CODECS), rng.choice(PRODUCER_CODECS)


def schedule_settings(seed: int) -> dict[str, str]:
    """The brokers' settings for a seed's schedule: SCHEDULE_SETTINGS, and the group
    coordinator's codec (offsets.topic.compression.codec, 0-4), so the cleaner rewrites
    and a new coordinator loads batches of that codec."""
    codec = random.Random(f"offsets codec {seed}").choice((0, 1, 2, 3, 4))
    return {**SCHEDULE_SETTINGS, "offsets_topic_compression_codec": str(codec)}


def _ints(variable: str, default: str) -> list[int]:
    """Comma-separated integers from the environment; set but empty: none (that kind of
    schedule does not run)."""
    text = os.environ.get(variable, default)
    try:
        return [int(s) for s in text.replace(" ", "").split(",") if s]
    except ValueError:
        raise ValueError(f"{variable}={text!r}: comma-separated integers expected") from None


def _int(variable: str, default: int) -> int:
    text = os.environ.get(variable) or str(default)
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{variable}={text!r}: an integer expected") from None


# Seed 15's first eight faults include three admin reassignments (1-3's none).
SEEDS = _ints("ZKCTL_NEMESIS_SEEDS", "1,2,3,15")
FAULTS = _int("ZKCTL_NEMESIS_FAULTS", 8)
ZK_SEEDS = _ints("ZKCTL_NEMESIS_ZK_SEEDS", "1,2")
OVERLAP_SEEDS = _ints("ZKCTL_NEMESIS_OVERLAP_SEEDS", "1")
OVERLAP_ZK_SEEDS = _ints("ZKCTL_NEMESIS_OVERLAP_ZK_SEEDS", "1")
DISK_SEEDS = _ints("ZKCTL_NEMESIS_DISK_SEEDS", "1")
OVERLAP_DISK_SEEDS = _ints("ZKCTL_NEMESIS_OVERLAP_DISK_SEEDS", "1")
# A schedule's own bounds (a worker's FAULTS faults within FAULTS * 150 s) catch a hang; the
# suite-wide pytest-timeout (300 s) would cut a longer ZKCTL_NEMESIS_FAULTS schedule short.
# The margin is for the cluster's start, the checks after the faults and the teardown.
SCHEDULE_TIMEOUT_S = max(300, FAULTS * 150 + 300)
BROKER_FAULTS = [
    "kill",
    "kill_two",
    "pause_past_session",
    "pause_short",
    "controlled_stop",
    "reelect",
    "zk_cut",
    "zk_answers_cut",
    "broker_cut",
    "broker_answers_cut",
    "zk_slow",
    "broker_slow",
    "admin_elect",
    "admin_reassign",
    "topic_churn",
]
# Only where each fault waits for a healed cluster (every partition with a full ISR): a
# broker's disks replaced (killed, every log directory emptied, restarted once out of
# every ISR it shares; left a partition's last ISR member, it keeps its disk). With the
# overlapping schedules another broker may be down at the time, and a broker whose disk
# is lost while it is a partition's last ISR member loses what it acknowledged, in Kafka
# as here (unclean election's risk without the election).
SEQUENTIAL_FAULTS = ["disk_replaced"]
# What an admin's preferred election of every partition may answer for one, racing the
# other faults: elected, refused where the preferred replica cannot lead (down, out of the
# ISR), or the controller gone meanwhile (resigned, fenced, or the client's request lost
# with a cut or killed broker); a partition of a topic being deleted (topic_churn's):
# INVALID_TOPIC_EXCEPTION, which librdkafka names TOPIC_EXCEPTION.
ELECTION_ANSWERS = {
    "NO_ERROR",
    "PREFERRED_LEADER_NOT_AVAILABLE",
    "NOT_CONTROLLER",
    "REQUEST_TIMED_OUT",
    "_TIMED_OUT",
    "_TRANSPORT",
    "TOPIC_EXCEPTION",
}
# What an admin's reassignment of a partition may be answered, racing the other faults:
# started, or (moving a replica back onto a broker) refused while that broker is not live;
# NO_ANSWER: no controller answered within the client's 30 s (sent again).
REASSIGNMENT_ANSWERS = {"NONE", "INVALID_REPLICA_ASSIGNMENT", "NO_ANSWER"}
# What a client's CreateTopics or DeleteTopics of a short-lived topic may be answered,
# racing the other faults: done; already so (its first answer lost, sent again: or never
# created; a deletion: the topic being deleted, gone from the metadata, is
# UNKNOWN_TOPIC_OR_PARTITION as in Kafka 2.8); too few brokers registered for three
# replicas (a broker restarting; not created). Sent again: no controller reached, or the
# outcome not known (REQUEST_TIMED_OUT: accepted but not done in time, or ZooKeeper out of
# reach).
CHURN_DONE = {
    "NO_ERROR",
    "TOPIC_ALREADY_EXISTS",
    "UNKNOWN_TOPIC_OR_PART",
    "INVALID_REPLICATION_FACTOR",
}
CHURN_AGAIN = {"NOT_CONTROLLER", "REQUEST_TIMED_OUT", "_TIMED_OUT", "_TRANSPORT"}
# What a CreatePartitions racing the topic's deletion may be answered: grown; already grown
# (its first answer lost, sent again); marked for deletion (INVALID_TOPIC_EXCEPTION, which
# librdkafka names TOPIC_EXCEPTION) or deleted already; too few brokers registered for the
# new partitions' three replicas. Sent again as CHURN_AGAIN's (REQUEST_TIMED_OUT also: the
# new partitions had no leader within the request's timeout, the deletion under way).
GROWTH_DONE = {
    "NO_ERROR",
    "INVALID_PARTITIONS",
    "TOPIC_EXCEPTION",
    "UNKNOWN_TOPIC_OR_PART",
    "INVALID_REPLICATION_FACTOR",
}
# With a second log directory on a small disk of its own for each broker: that disk
# filled (drawn as often as four of the others together).
DISK_FAULTS = ["disk_full"] * 4
# Against a three-server ensemble: a member killed and restarted (the leader half the
# time), a member paused, and the whole ensemble paused (an outage; past the session
# timeout every session expires when it ends).
ZOOKEEPER_FAULTS = ["zk_kill_member", "zk_pause_member", "zk_outage"]


def inject(
    c: Cluster,
    rng: random.Random,
    fault: str,
    target: int,
    link: ZooKeeperLink,
    broker_link: InterBrokerLink,
    *,
    other: int | None = None,
    disk: Path | None = None,
) -> dict[str, Any]:
    """Do one fault to one broker (or to the controller's term), and undo it. ``link``:
    the broker's path to ZooKeeper; ``broker_link``: the other brokers' path to it;
    ``other``: kill_two's second broker (drawn here when not given); ``disk``: the
    broker's second log directory, a small disk of its own (disk_full)."""
    broker = c[target]
    record: dict[str, Any] = {"fault": fault, "broker": target}
    if fault == "kill":
        broker.kill()
        time.sleep(rng.uniform(0.5, 3.0))
        broker.start()
    elif fault == "pause_past_session":
        broker.pause()
        time.sleep(c.session_timeout_s + rng.uniform(0.5, 2.0))
        broker.resume()
    elif fault == "pause_short":
        broker.pause()
        time.sleep(rng.uniform(0.2, c.session_timeout_s / 2))
        broker.resume()
    elif fault == "controlled_stop":
        record["exit_code"] = broker.stop(timeout=90)
        if record["exit_code"] == -signal.SIGTERM:
            # Only a SIGTERM in the process's first instants, before the interpreter ran
            # the broker's first line (which installs its handler), ends it so; it then
            # had done nothing, not even log. Two schedules at once can stop a broker the
            # moment the other started it.
            this_run = broker.root / f"broker-{broker.starts - 1}.out"
            record["before_its_handler"] = this_run.read_text() == ""
        time.sleep(rng.uniform(0.5, 2.0))
        broker.start()
    elif fault == "disk_replaced":
        # A new disk: nothing of its logs, checkpoints or meta.properties is left (the
        # state-change log is kept: the history check reads it). Half the time it comes
        # back at once: registered again before the cluster saw it go, as the controller
        # itself or with the controller moving meanwhile, it is still in the ISRs its
        # earlier incarnation was in, and the next controller must take it for a broker
        # that bounced (its registration is newer than those states), not let it lead
        # with nothing. The other half, once the cluster saw it gone (out of every ISR).
        # Then it fetches everything again.
        # If the cluster saw it gone while it was a partition's last ISR member (a
        # leader's shrink, decided in a cut just healed, landing after the heal was seen),
        # it keeps that place, and a new disk would lose what only it held, in Kafka as
        # here: it comes back with its disk then (seed disk 87 met it).
        broker.kill()
        record["at_once"] = rng.random() < 0.5
        if record["at_once"]:
            broker.replace_disks()
        else:
            wait_for(
                lambda: target not in c.registered() and not in_an_isr(c, target, shared=True),
                c.session_timeout_s + 90,
                f"broker {target} out of every ISR it shares",
            )
            if sole := last_isr_member_of(c, target):
                record["disk_kept"] = sole
            else:
                broker.replace_disks()
        time.sleep(rng.uniform(0.5, 3.0))
        broker.start()
    elif fault == "kill_two":
        # Two brokers at once: partitions whose ISR held only them go offline (unclean
        # election is off) until one returns; what was acknowledged is on the third too
        # or waits for them.
        if other is None:
            other = rng.choice([b for b in BROKERS if b != target])
        record["also"] = other
        broker.kill()
        c[other].kill()
        time.sleep(rng.uniform(0.5, 3.0))
        broker.start()
        c[other].start()
    elif fault == "reelect":
        try:
            c.zk.delete(paths.CONTROLLER)  # gone already (an election under way): as good
        except ZK_ERRORS as e:  # the ensemble is down meanwhile (overlapping schedules)
            record["not_done"] = type(e).__name__
    elif fault == "disk_full":
        # Its second log directory fills: the next append there fails (ENOSPC), the
        # broker takes that directory offline and goes on serving the other, and the
        # controller moves the leaderships and ISR places of the partitions that were
        # there (KIP-112). Then an operator frees the disk and restarts the broker.
        assert disk is not None
        record["partitions_there"] = len([e for e in disk.iterdir() if e.is_dir()])
        fill(disk)
        time.sleep(rng.uniform(1.0, 4.0))
        record["exit_code"] = broker.stop(timeout=90)
        (disk / "filler").unlink()
        broker.start()
    elif fault == "admin_elect":
        record["answers"] = admin_preferred_election(c)
    elif fault == "admin_reassign":
        record.update(admin_reassignment(c, rng, target))
    elif fault == "topic_churn":
        record.update(topic_churn(c, rng))
    elif fault in ("zk_cut", "zk_answers_cut"):
        # zk_answers_cut: only ZooKeeper's answers are lost. The broker's requests, pings
        # and reconnection attempts still arrive, so its session never expires, however
        # long this lasts, while it hears nothing (a write it made may land unanswered).
        record["seconds"] = round(rng.uniform(0.5, c.session_timeout_s + 2.0), 1)
        (link.cut if fault == "zk_cut" else link.cut_answers)()
        try:
            time.sleep(record["seconds"])
        finally:
            link.heal()
    elif fault in ("broker_cut", "broker_answers_cut"):
        # The other brokers cannot reach it; it still reaches them, ZooKeeper and its
        # clients. Past replica.lag.time.max.ms (3 s here) it shrinks its ISRs to itself.
        # broker_answers_cut: what they send arrives and is acted on (a LeaderAndIsr is
        # applied, a follower's fetch position recorded); its answers are lost.
        record["seconds"] = round(rng.uniform(0.5, REPLICA_LAG_S + 3.0), 1)
        (broker_link.cut if fault == "broker_cut" else broker_link.cut_answers)()
        try:
            time.sleep(record["seconds"])
        finally:
            broker_link.heal()
    elif fault == "zk_slow":
        # Its link to ZooKeeper congested: every byte arrives late, each way, nothing is
        # lost. Late by more than a third of the session timeout, its client takes the
        # silence for a lost connection and connects again (as slowly); by more than the
        # session timeout, ZooKeeper expires the session.
        record["delay_s"] = round(rng.uniform(0.05, c.session_timeout_s * 0.75), 2)
        record["seconds"] = round(rng.uniform(1.0, c.session_timeout_s + 3.0), 1)
        link.slow(record["delay_s"])
        try:
            time.sleep(record["seconds"])
        finally:
            link.heal()
    elif fault == "broker_slow":
        # The other brokers' path to it congested: followers' fetches from it, their
        # answers, and the controller's requests to it arrive late (past
        # replica.lag.time.max.ms, its followers fall out of its ISRs).
        record["delay_s"] = round(rng.uniform(0.05, REPLICA_LAG_S * 1.5), 2)
        record["seconds"] = round(rng.uniform(1.0, REPLICA_LAG_S + 3.0), 1)
        broker_link.slow(record["delay_s"])
        try:
            time.sleep(record["seconds"])
        finally:
            broker_link.heal()
    else:
        raise ValueError(fault)
    return record


def admin_client(c: Cluster) -> AdminClient:
    """A client's AdminClient on the live brokers, finding a new controller quickly."""
    return AdminClient(
        {
            "bootstrap.servers": bootstrap(c),
            "socket.timeout.ms": 30_000,  # elect_leaders' own timeouts cannot be passed
            "topic.metadata.refresh.interval.ms": 1000,  # to find a new controller
        }
    )


def admin_preferred_election(c: Cluster) -> dict[str, int]:
    """A client's ElectLeaders of every partition (preferred): an event on the controller's
    queue and fenced writes, racing whatever else is under way. Answered within the
    client's timeout, never hung; how many partitions got each answer."""
    admin = admin_client(c)
    answers: dict[str, int] = {}
    try:
        results = admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=90)
    except KafkaException as e:
        answers[e.args[0].name()] = 1
    else:
        for error in results.values():
            name = "NO_ERROR" if error is None else error.name()
            answers[name] = answers.get(name, 0) + 1
    unexpected = set(answers) - ELECTION_ANSWERS
    assert not unexpected, f"ElectLeaders answered {answers}"
    return answers


def admin_reassignment(c: Cluster, rng: random.Random, broker: int) -> dict[str, Any]:
    """A client's AlterPartitionReassignments (through the controller's queue, its writes
    fenced): one to three partitions moved off ``broker`` in one request (3 replicas to 2:
    their replicas stopped and deleted), then a moment later back onto it, so that it
    fetches their whole logs again, under load; the second sent again until the controller
    accepts it (it refuses while the broker is not live). The first may land while the
    second is still to be made, or be overridden by it before it completes; another worker
    may move the same partitions meanwhile (each ends by putting back the whole
    assignment). The partitions after the first are not drawn from ``rng`` (how many
    follows from the first and the broker), so the seeds' schedules stay as they were."""
    first = rng.randrange(PARTITIONS)
    moved = [(first + i) % PARTITIONS for i in range(1 + (first + broker) % 3)]
    tps = {TopicPartition(TOPIC, p): ASSIGNMENT[p] for p in moved}
    record: dict[str, Any] = {"partitions": moved}
    off = {tp: tuple(r for r in whole if r != broker) for tp, whole in tps.items()}
    record["off"] = reassign_once(c, off)
    time.sleep(rng.uniform(0.5, 3.0))
    back: list[list[str]] = []
    deadline = time.monotonic() + 180
    while not back or set(back[-1]) != {"NONE"}:
        assert time.monotonic() < deadline, f"{moved} not moved back onto broker {broker}: {back}"
        if back:
            time.sleep(1.0)
            # Refused while the broker is not live: it may be down because its last
            # start gave up on ZooKeeper (this fault holds it: no other one restarts it).
            revive_failed_start(c[broker])
        back.append(reassign_once(c, tps))
    record["back"] = back
    unexpected = {*record["off"], *(name for answers in back for name in answers)}
    assert not unexpected - REASSIGNMENT_ANSWERS, f"AlterPartitionReassignments answered {record}"
    return record


def topic_churn(c: Cluster, rng: random.Random) -> dict[str, Any]:
    """A client creates a topic (RF 3, one to four partitions), then a moment later deletes
    it, each sent again until answered (the controller may be moving meanwhile, in an
    overlapping schedule a broker down). Half the time another client adds one or two
    partitions to it at about the moment the deletion is sent (on its own connection: the
    growth's check that the topic is not being deleted races the marking, and the new
    partitions' creation the deletion's start). The check after healing (churn_leftovers)
    wants it gone everywhere: its znodes, its logs, the brokers' metadata."""
    topic = f"churn-{rng.randrange(10**9)}"
    partitions = rng.randint(1, 4)
    grow_by = rng.choice([0, 0, 1, 2])
    grow_at = rng.uniform(-0.3, 0.3)  # s after the deletion is sent (before it: negative)

    def until_answered(
        request: Any, done: set[str], again: Callable[[str], bool] = lambda _: False
    ) -> list[str]:
        answers: list[str] = []
        deadline = time.monotonic() + 180
        while not answers or answers[-1] in CHURN_AGAIN or again(answers[-1]):
            assert time.monotonic() < deadline, f"{topic}: no answer in 180 s: {answers}"
            if answers:
                time.sleep(1.0)
            try:
                request()[topic].result(timeout=90)
            except KafkaException as e:
                answers.append(e.args[0].name())
            else:
                answers.append("NO_ERROR")
        unexpected = set(answers) - done - CHURN_AGAIN
        assert not unexpected, f"{topic}: answered {answers}"
        return answers

    admin = admin_client(c)
    record: dict[str, Any] = {"topic": topic, "partitions": partitions}
    record["created"] = until_answered(
        lambda: admin.create_topics(
            [NewTopic(topic, partitions, 3)], operation_timeout=10, request_timeout=30
        ),
        CHURN_DONE,
    )
    grown: list[list[str] | BaseException] = []
    growth = threading.Thread()
    if grow_by:
        other = admin_client(c)
        growth_request = [NewPartitions(topic, partitions + grow_by)]
        # Connected to the controller beforehand (a validation changes nothing), so that
        # the growth lands near the deletion, not after it.
        with contextlib.suppress(KafkaException):
            other.create_partitions(growth_request, validate_only=True)[topic].result(timeout=30)

        def grow() -> None:
            time.sleep(max(grow_at, 0.0))
            try:
                answers: list[str] | BaseException = until_answered(
                    lambda: other.create_partitions(
                        growth_request, operation_timeout=10, request_timeout=30
                    ),
                    GROWTH_DONE,
                )
            except BaseException as e:  # raised again by the schedule's thread
                answers = e
            grown.append(answers)

        growth = threading.Thread(target=grow, name=f"grow {topic}", daemon=True)
    time.sleep(rng.uniform(0.5, 3.0))
    if grow_by:
        growth.start()
        time.sleep(max(-grow_at, 0.0))

    def unlisted_yet(answer: str) -> bool:
        """DeleteTopics answers UNKNOWN_TOPIC_OR_PARTITION for a topic the controller's
        broker's metadata does not list (Kafka 2.8's handleDeleteTopicsRequest): gone or
        being deleted, or not listed there yet (a controller just elected, its failover's
        UpdateMetadata not yet in): then, its znode standing unmarked, sent again."""
        if answer != "UNKNOWN_TOPIC_OR_PART":
            return False
        try:
            return (
                c.zk.exists(paths.topic(topic)) is not None
                and c.zk.exists(paths.delete_topic(topic)) is None
            )
        except ZK_ERRORS:
            return True

    record["deleted"] = until_answered(
        lambda: admin.delete_topics([topic], operation_timeout=10, request_timeout=30),
        CHURN_DONE,
        unlisted_yet,
    )
    if grow_by:
        growth.join(timeout=200)
        assert grown, f"{topic}: the CreatePartitions beside its deletion never ended"
        if isinstance(grown[0], BaseException):
            raise grown[0]
        record.update(grown_by=grow_by, grown=grown[0])
    return record


def in_an_isr(c: Cluster, broker: int, *, shared: bool = False) -> bool:
    """Whether the broker is in the ISR of a partition of the stream's topic or of the
    offsets topic (ZooKeeper out of reach: True, asked again); ``shared``: only where it
    leads or shares the ISR (a partition left leaderless with it as the last member does
    not count: the controller keeps that, as Kafka's does)."""
    try:
        for topic in (TOPIC, OFFSETS_TOPIC):
            with contextlib.suppress(LookupError):
                for s in c.partition_states(topic).values():
                    if broker in s.isr and (not shared or s.leader == broker or len(s.isr) > 1):
                        return True
    except ZK_ERRORS:
        return True
    return False


def last_isr_member_of(c: Cluster, broker: int) -> list[str]:
    """The partitions of the stream's topic and the offsets topic whose ISR is the broker
    alone."""
    found: list[str] = []
    for topic in (TOPIC, OFFSETS_TOPIC):
        with contextlib.suppress(LookupError):
            states = c.partition_states(topic)
            found += [f"{topic}-{p}" for p, s in sorted(states.items()) if s.isr == (broker,)]
    return found


def stored_codecs(c: Cluster, topic: str) -> set[str]:
    """The codecs of the batches of a topic's logs, on every broker (a segment deleted or
    swapped while being read: read again)."""
    names = {0: "uncompressed", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

    def read() -> set[str] | None:
        found: set[str] = set()
        try:
            for b in BROKERS:
                broker = c[b]
                for directory in broker.log_dirs:
                    for segment in directory.glob(f"{topic}-*/*.log"):
                        found.update(
                            names.get(h.compression, str(h.compression))
                            for h in iter_batches(segment.read_bytes())
                        )
        except (FileNotFoundError, ValueError):
            return None
        return found

    return wait_for(read, 30, f"the batches of {topic}")


def churn_leftovers(c: Cluster, topic: str) -> list[str]:
    """What is left of a deleted topic: its znodes, its partitions' logs (not those renamed
    for deletion, removed after log.segment.delete.delay.ms), its id in a log directory's
    topic-ids, and each broker's metadata of it."""
    left = [
        path
        for path in (paths.topic(topic), paths.delete_topic(topic), paths.topic_config(topic))
        if c.zk.exists(path) is not None
    ]
    for b in BROKERS:
        broker = c[b]
        for directory in broker.log_dirs:
            for entry in directory.iterdir():
                name, _, partition = entry.name.rpartition("-")
                if name == topic and partition.isdigit():
                    left.append(str(entry))
            try:
                if topic in read_topic_ids(directory / TOPIC_IDS_FILE):
                    left.append(f"{directory}/{TOPIC_IDS_FILE} names it")
            except CheckpointError as e:  # written by rename: never seen half-written
                left.append(str(e))
        try:
            with KafkaConnection("127.0.0.1", broker.port(), timeout_s=10) as conn:
                # v4: the first that can ask not to create the topic it names
                metadata = conn.request(
                    ApiKey.METADATA,
                    4,
                    {"topics": [{"name": topic}], "allow_auto_topic_creation": False},
                )
        except KafkaConnectionError as e:
            left.append(f"broker {b}: no Metadata answer ({e})")
            continue
        for t in metadata["topics"]:
            if t["error_code"] != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                left.append(f"broker {b}'s metadata: {t['name']}, error {t['error_code']}")
    return left


def reassign_once(c: Cluster, targets: dict[TopicPartition, tuple[int, ...]]) -> list[str]:
    """One AlterPartitionReassignments through the live brokers: each partition's answer
    (its error name), or NO_ANSWER for each."""
    live = bootstrap(c)
    if not live:
        return ["NO_ANSWER"] * len(targets)
    try:
        results = ClusterAdmin(parse_bootstrap(live), timeout_s=30).alter_partition_reassignments(
            targets
        )
    except AdminError:
        return ["NO_ANSWER"] * len(targets)
    return [error_name(results[tp][0]) for tp in targets]


def inject_zookeeper(
    ensemble: zkp.LocalZooKeeper, rng: random.Random, fault: str, session_timeout_s: float
) -> dict[str, Any]:
    """Do one fault to the ZooKeeper ensemble, and undo it."""
    leader = ensemble.leader()
    member = leader if leader is not None and rng.random() < 0.5 else rng.choice(ensemble.servers)
    record: dict[str, Any] = {"fault": fault}
    if fault == "zk_kill_member":
        record.update(member=member.myid, was_leader=member is leader)
        member.kill()
        time.sleep(rng.uniform(0.5, 3.0))
        member.restart(timeout=60)
    elif fault == "zk_pause_member":
        record.update(member=member.myid, was_leader=member is leader)
        member.pause()
        time.sleep(rng.uniform(0.5, session_timeout_s))
        member.resume()
    elif fault == "zk_outage":
        record["seconds"] = round(rng.uniform(0.5, 1.5 * session_timeout_s), 1)
        for server in ensemble.servers:
            server.pause()
        try:
            time.sleep(record["seconds"])
        finally:
            for server in ensemble.servers:
                server.resume()
    else:
        raise ValueError(fault)
    unstick_ensemble(ensemble, record)
    return record


@pytest.mark.slow
@pytest.mark.timeout(SCHEDULE_TIMEOUT_S)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_schedule_of_faults_under_load_keeps_every_safety_property(
    cluster_factory: ClusterFactory, seed: int
) -> None:
    # Brokers come back on their ports, as deployed ones do: the producer, which knows
    # brokers by address, must be able to find them again after a fault.
    c = cluster_factory(BROKERS, start=False, keep_ports=True, **schedule_settings(seed))
    run_schedule(c, seed, BROKER_FAULTS + SEQUENTIAL_FAULTS)


@pytest.mark.slow
@pytest.mark.timeout(SCHEDULE_TIMEOUT_S)
@pytest.mark.parametrize("seed", DISK_SEEDS)
def test_a_schedule_with_full_disks_too_keeps_every_safety_property(
    cluster_factory: ClusterFactory, tmp_path: Path, seed: int
) -> None:
    """The broker faults and a disk filling: each broker has a second log directory on a
    small disk of its own (a tmpfs, see tests/small_disks.py), which a fault fills."""
    c = cluster_factory(BROKERS, start=False, keep_ports=True, **schedule_settings(seed))
    with small_disks(c, tmp_path) as disks:
        run_schedule(c, seed, BROKER_FAULTS + SEQUENTIAL_FAULTS + DISK_FAULTS, disks=disks)


@contextlib.contextmanager
def small_disks(c: Cluster, tmp_path: Path) -> Iterator[dict[int, Path]]:
    """A second log directory for each broker of the (unstarted) cluster, on a 128 MiB
    disk of its own; unmounted lazily afterwards (the brokers may still hold files there
    until the teardown)."""
    with contextlib.ExitStack() as mounted:
        disks = {b: mounted.enter_context(tmpfs(tmp_path / f"disk-{b}", "128m")) for b in BROKERS}
        for b, disk in disks.items():
            c[b].overrides["log.dirs"] = f"{c[b].data_dir},{disk}"
        yield disks


@pytest.mark.slow
@pytest.mark.timeout(SCHEDULE_TIMEOUT_S)
@pytest.mark.parametrize("seed", ZK_SEEDS)
def test_a_schedule_with_zookeeper_faults_too_keeps_every_safety_property(
    cluster_factory: ClusterFactory, zk_ensemble: zkp.LocalZooKeeper, seed: int
) -> None:
    c = on_the_ensemble(cluster_factory, zk_ensemble, seed)
    run_schedule(c, seed, BROKER_FAULTS + SEQUENTIAL_FAULTS + ZOOKEEPER_FAULTS, zk_ensemble)


def on_the_ensemble(
    cluster_factory: ClusterFactory, ensemble: zkp.LocalZooKeeper, seed: int
) -> Cluster:
    """The (unstarted) cluster of the schedules, on the three-server ensemble."""
    connect = zkp.chroot_connect_string(ensemble.connect_string, "/cluster")
    # A session long enough to outlast the ensemble's own leader election.
    return cluster_factory(
        BROKERS,
        start=False,
        connect=connect,
        keep_ports=True,
        zookeeper_session_timeout_ms="8000",
        **schedule_settings(seed),
    )


@pytest.mark.slow
@pytest.mark.timeout(SCHEDULE_TIMEOUT_S)
@pytest.mark.parametrize("seed", OVERLAP_SEEDS)
def test_overlapping_faults_under_load_keep_every_safety_property(
    cluster_factory: ClusterFactory, seed: int
) -> None:
    """Two fault schedules at once, neither waiting for the cluster to heal: a fault lands
    during another's failover, a broker's restart, a controlled shutdown or an ISR being
    refilled. Each broker has one fault at a time."""
    c = cluster_factory(BROKERS, start=False, keep_ports=True, **schedule_settings(seed))
    run_overlapping(c, seed)


@pytest.mark.slow
@pytest.mark.timeout(SCHEDULE_TIMEOUT_S)
@pytest.mark.parametrize("seed", OVERLAP_ZK_SEEDS)
def test_overlapping_faults_with_zookeeper_faults_keep_every_safety_property(
    cluster_factory: ClusterFactory, zk_ensemble: zkp.LocalZooKeeper, seed: int
) -> None:
    """The two overlapping broker schedules against a three-server ensemble, and a third
    worker doing the ensemble's faults meanwhile: a member killed or paused, or the whole
    ensemble paused, during a failover, a restart or a controlled shutdown."""
    run_overlapping(on_the_ensemble(cluster_factory, zk_ensemble, seed), seed, zk_ensemble)


@pytest.mark.slow
@pytest.mark.timeout(SCHEDULE_TIMEOUT_S)
@pytest.mark.parametrize("seed", OVERLAP_DISK_SEEDS)
def test_overlapping_faults_with_full_disks_too_keep_every_safety_property(
    cluster_factory: ClusterFactory, tmp_path: Path, seed: int
) -> None:
    """The two overlapping broker schedules with a small second disk for each broker, whose
    filling is among their faults: a directory goes offline during another broker's
    failover, restart or controlled shutdown, or a reassignment moving a replica there."""
    c = cluster_factory(BROKERS, start=False, keep_ports=True, **schedule_settings(seed))
    with small_disks(c, tmp_path) as disks:
        run_overlapping(c, seed, disks=disks)


def run_overlapping(
    c: Cluster,
    seed: int,
    ensemble: zkp.LocalZooKeeper | None = None,
    disks: dict[int, Path] | None = None,
) -> None:
    with linked(c) as link, linked_brokers(c) as broker_links:
        c.start()
        topic_codec, producer_codec = stream_codecs(seed)
        c.create_topic(
            TOPIC, ASSIGNMENT, {"min.insync.replicas": "2", "compression.type": topic_codec}
        )
        wait_healed(c, ensemble)
        schedule: list[dict[str, Any]] = []
        stream = Stream(c, producer_codec)
        stream.start()
        committer = Committer(c)
        committer.start()
        members = GroupMembers(c)
        members.start()
        unanswered: int | None = None
        try:
            with overlapping_faults(c, seed, link, broker_links, schedule, ensemble, disks or {}):
                try:
                    wait_healed(c, ensemble)
                finally:
                    committer.stop()
                    unanswered = stream.stop()
                # While the brokers the workers restarted still run (see overlapping_faults).
                check_outcome(c, seed, stream, unanswered, schedule, committer, members)
        finally:
            members.stop()
            committer.stop()
            if unanswered is None:
                stream.stop()


class _Brokers:
    """Which brokers a fault holds: a fault takes its brokers, or waits for them."""

    def __init__(self) -> None:
        self._busy: set[int] = set()
        self._changed = threading.Condition()

    def take(self, want: list[int], timeout: float) -> bool:
        with self._changed:
            if not self._changed.wait_for(lambda: not self._busy & set(want), timeout):
                return False
            self._busy.update(want)
            return True

    def give_back(self, brokers: list[int]) -> None:
        with self._changed:
            self._busy.difference_update(brokers)
            self._changed.notify_all()


def current_controller(c: Cluster) -> tuple[int, int] | None:
    """The controller, or None: none (a failover under way), or ZooKeeper down."""
    try:
        return c.controller()
    except ZK_ERRORS:
        return None


@contextlib.contextmanager
def overlapping_faults(
    c: Cluster,
    seed: int,
    link: dict[int, ZooKeeperLink],
    broker_links: dict[int, InterBrokerLink],
    schedule: list[dict[str, Any]],
    ensemble: zkp.LocalZooKeeper | None = None,
    disks: dict[int, Path] | None = None,
) -> Iterator[None]:
    """FAULTS faults from each of two workers, each seeded from ``seed``; what each did is
    appended to ``schedule``, in the order they ended. With ``ensemble``, a third worker
    does FAULTS // 2 of ZooKeeper's own faults meanwhile; with ``disks`` (each broker's
    second log directory), their filling is among the workers' faults. Enters once every
    fault is over.
    The workers' threads live on until the block ends: a broker dies with the thread that
    started it (the death signal cluster/processes.py sets follows the starting thread),
    and they restart the brokers they kill."""
    held = _Brokers()
    disks = disks or {}
    faults = BROKER_FAULTS + DISK_FAULTS if disks else BROKER_FAULTS
    errors: list[BaseException] = []
    lock = threading.Lock()
    release = threading.Event()
    finished = threading.Semaphore(0)

    def zookeeper_worker(n: int) -> None:
        assert ensemble is not None
        rng = random.Random(seed * 100 + n)
        for _ in range(FAULTS // 2):
            time.sleep(rng.uniform(0.0, 4.0))
            fault = rng.choice(ZOOKEEPER_FAULTS)
            record = inject_zookeeper(ensemble, rng, fault, c.session_timeout_s)
            record.update(worker=n)
            with lock:
                schedule.append(record)
            print("nemesis:", record)

    def worker(n: int) -> None:
        if n == 3:
            zookeeper_worker(n)
            return
        rng = random.Random(seed * 100 + n)
        for _ in range(FAULTS):
            time.sleep(rng.uniform(0.0, 2.0))
            revive_failed_starts(held)
            current = current_controller(c)  # none while a failover is under way
            fault = rng.choice(faults)
            if fault == "reelect" and current is None:
                fault = "kill"
            target = (
                current[0] if current is not None and rng.random() < 0.5 else rng.choice(BROKERS)
            )
            # kill_two's second broker is its own draw: hold both, or neither.
            other = rng.choice([b for b in BROKERS if b != target])
            wanted = [target, other] if fault == "kill_two" else [target]
            if not held.take(wanted, timeout=120):
                raise AssertionError(f"brokers {wanted} stayed held for two minutes")
            fault_rng = random.Random(rng.random())
            try:
                record = inject(
                    c,
                    fault_rng,
                    fault,
                    target,
                    link[target],
                    broker_links[target],
                    other=other,
                    disk=disks.get(target),
                )
            except RuntimeError:
                # "not running": its restart (by an earlier fault) gave up on ZooKeeper,
                # out of reach through the ensemble's fault, after the last look; its
                # supervisor starts it again, and this fault is not done.
                if fault == "disk_full":
                    (disks[target] / "filler").unlink(missing_ok=True)
                if not [b for b in wanted if revive_failed_start(c[b])]:
                    raise
                record = {"fault": fault, "broker": target, "not_done": "its start had failed"}
            finally:
                held.give_back(wanted)
            record.update(worker=n, controller=current[0] if current is not None else None)
            with lock:
                schedule.append(record)
            print("nemesis:", record)

    def revive_failed_starts(held: _Brokers) -> None:
        """A broker whose start gave up on ZooKeeper (an ensemble fault outlasting its
        connection timeout) is started again, as its supervisor would, by whichever
        worker finds it free."""
        for b in BROKERS:
            if held.take([b], timeout=0):
                try:
                    revive_failed_start(c[b])
                finally:
                    held.give_back([b])

    def guarded(n: int) -> None:
        try:
            worker(n)
        except BaseException as e:  # reported on the test's thread
            errors.append(e)
        finished.release()
        release.wait()

    workers = [
        threading.Thread(target=guarded, args=(n,), name=f"nemesis-{n}", daemon=True)
        for n in ((1, 2, 3) if ensemble is not None else (1, 2))
    ]
    for w in workers:
        w.start()
    try:
        for _ in workers:
            # Each fault is over within ~90 s (a controlled shutdown's bound): this only
            # catches a hang.
            assert finished.acquire(timeout=FAULTS * 150), "a worker still injecting faults"
        if errors:
            raise errors[0]
        yield
    finally:
        release.set()
        for w in workers:
            w.join(timeout=30)


def run_schedule(
    c: Cluster,
    seed: int,
    faults: list[str],
    ensemble: zkp.LocalZooKeeper | None = None,
    disks: dict[int, Path] | None = None,
) -> None:
    """Start the (unstarted) cluster, each broker reaching ZooKeeper through a link of its
    own and reached by the other brokers through another, which faults can cut, and run
    the schedule. ``disks``: each broker's second log directory (disk_full fills it)."""
    with linked(c) as link, linked_brokers(c) as broker_links:
        c.start()
        _run_schedule(c, seed, faults, link, broker_links, ensemble, disks or {})


def _run_schedule(
    c: Cluster,
    seed: int,
    faults: list[str],
    link: dict[int, ZooKeeperLink],
    broker_links: dict[int, InterBrokerLink],
    ensemble: zkp.LocalZooKeeper | None,
    disks: dict[int, Path],
) -> None:
    topic_codec, producer_codec = stream_codecs(seed)
    c.create_topic(TOPIC, ASSIGNMENT, {"min.insync.replicas": "2", "compression.type": topic_codec})
    wait_healed(c, ensemble)
    rng = random.Random(seed)
    schedule: list[dict[str, Any]] = []
    stream = Stream(c, producer_codec)
    stream.start()
    committer = Committer(c)
    committer.start()
    members = GroupMembers(c)
    members.start()
    try:
        for _ in range(FAULTS):
            wait_healed(c, ensemble)
            controller_id, _epoch = c.wait_controller()
            fault = rng.choice(faults)
            target = controller_id if rng.random() < 0.5 else rng.choice(BROKERS)
            if fault == "reelect":
                target = controller_id  # its term is what ends
            if fault in ZOOKEEPER_FAULTS:
                assert ensemble is not None
                record = inject_zookeeper(ensemble, rng, fault, c.session_timeout_s)
            else:
                record = inject(
                    c,
                    rng,
                    fault,
                    target,
                    link[target],
                    broker_links[target],
                    disk=disks.get(target),
                )
            record["controller"] = controller_id
            schedule.append(record)
            print("nemesis:", record)
            if (log := client_log()) is not None:
                log.info("nemesis: %s", record)
        wait_healed(c, ensemble)
    finally:
        committer.stop()
        unanswered = stream.stop()
    try:
        check_outcome(c, seed, stream, unanswered, schedule, committer, members)
    finally:
        members.stop()


def check_outcome(
    c: Cluster,
    seed: int,
    stream: Stream,
    unanswered: int,
    schedule: list[dict[str, Any]],
    committer: Committer,
    members: GroupMembers,
) -> None:
    """After the faults, the cluster healed and the stream and committer stopped: what
    was acknowledged is all there (messages and the group's last offset commit), the
    cluster serves, the group's members come together in one generation and completed
    none unsafely, and every broker's history is safe."""
    assert unanswered == 0, f"seed {seed}: {unanswered} messages never answered; {schedule}"
    assert all(r.get("exit_code", 0) == 0 or r.get("before_its_handler") for r in schedule), (
        schedule
    )
    # The cluster serves again: a last batch is acknowledged whole.
    last = produce(c, TOPIC, [f"last-{i:05d}".encode() for i in range(2000)])
    assert last.errors == [], (
        f"seed {seed}: {len(last.errors)} refused after healing ({last.errors[:3]}), in "
        f"partitions {sorted(set(last.error_partitions))}; {schedule}\n{diagnose(c)}"
    )
    assert len(stream.acked.by_offset) > 1000, f"seed {seed}: the stream hardly ran; {schedule}"
    # Every replica stores the codec the topic names (the leaders compressed again).
    topic_codec, producer_codec = stream_codecs(seed)
    stored = sorted(stored_codecs(c, TOPIC))
    if topic_codec != "producer":
        assert stored == [topic_codec], f"seed {seed}: batches of {stored} stored"
    lost = lost_acknowledged(consume(c, TOPIC, range(PARTITIONS)), stream.acked, last)
    assert not lost, f"seed {seed}: {len(lost)} acknowledged messages lost, e.g. {lost[:3]}"
    commit_problems = committer.problems()
    assert commit_problems == [], f"seed {seed}: {commit_problems}; {schedule}\n{diagnose(c)}"
    members.churn = False
    deadline = time.monotonic() + 90
    while not (together := members.together()) and time.monotonic() < deadline:
        time.sleep(0.2)
    members.stop()
    member_problems = members.problems()
    assert member_problems == [], (
        f"seed {seed}: {member_problems}; completed {members.completed}; {schedule}"
    )
    assert together, (
        f"seed {seed}: the group's members not in one generation 90 s after healing;"
        f" completed {members.completed}; errors {members.errors}; {schedule}"
    )
    # Every topic a client created and deleted is gone everywhere once the cluster healed
    # (a deletion waits for the brokers holding its replicas).
    for topic in [r["topic"] for r in schedule if r["fault"] == "topic_churn"]:
        left: list[str] = []
        deadline = time.monotonic() + 120
        while (left := churn_leftovers(c, topic)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not left, f"seed {seed}: {topic} deleted, yet 120 s later {left}; {schedule}"
    rows = [r for b in BROKERS for r in c[b].state_changes()]
    problems = history_problems(c, rows)
    assert problems == [], f"seed {seed}, schedule {schedule}:\n" + "\n".join(problems[:20])
    # Safety first (above), then this: every fault is over within seconds and the producer
    # retries for two minutes, so it should have had nothing refused.
    refused = stream.acked.errors
    assert not refused, (
        f"seed {seed}: {len(refused)} of {stream.sent} refused ({sorted(set(refused))}) in "
        f"partitions {sorted(set(stream.acked.error_partitions))}; {schedule}\n{diagnose(c)}"
    )
    print(
        f"nemesis seed {seed}: {len(schedule)} faults, {len(stream.acked.by_offset)} acknowledged"
        f" ({len(stream.acked.errors)} refused), {len(rows)} state-change lines checked,"
        f" {committer.acknowledged} of {committer.attempted} offset commits acknowledged"
        f" (errors met after the last: {committer.errors_since_acknowledged or 'none'}),"
        f" {sum(map(len, members.completed.values()))} generations completed by the members"
        f" (the static one back in its place {members.static_rejoins} times,"
        f" {members.static_rejoins_kept} of them in its generation),"
        f" {cleanings(c)} cleanings of {OFFSETS_TOPIC} partitions"
        f" ({swaps_finished(c)} swaps finished by a restart);"
        f" topic compression.type {topic_codec}, producer {producer_codec}, stored {stored};"
        f" offsets.topic.compression.codec"
        f" {schedule_settings(seed)['offsets_topic_compression_codec']}"
    )


def cleanings(c: Cluster) -> int:
    """How many times the brokers' log cleaners cleaned a partition of the offsets topic."""
    return sum(c[b].output().count(f"cleaned {OFFSETS_TOPIC}-") for b in BROKERS)


def swaps_finished(c: Cluster) -> int:
    """How many cleaned segments a broker's restart swapped in (a kill cut the swap)."""
    return sum(c[b].output().count("completed the swap") for b in BROKERS)

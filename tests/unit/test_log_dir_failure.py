"""A log directory that fails (KIP-112, Kafka 2.8 in ZooKeeper mode), the broker's half:
the directory is reported once, its partitions go offline (every request for them is
answered KAFKA_STORAGE_ERROR), the partitions of the other directories go on working, and
the broker halts when no directory is left.

The I/O errors are real: a log directory on a 256 KiB tmpfs, filled with a filler file,
gives ENOSPC to the next write that needs a page (so the batches appended here are larger
than a page). The tests mount it, as root; a machine where they cannot fails them.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from broker.apis import KafkaApis
from broker.config import BrokerConfig
from broker.fetcher import FetchState, ReplicaFetcherThread
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.errors import (
    CorruptRecordError,
    KafkaStorageError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from storage.log import PartitionLog
from storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from storage.testing import build_batch
from tests.small_disks import fill, tmpfs
from tests.unit.leader_and_isr_requests import update_metadata_listing
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.znodes import TopicPartition, decode_log_dir_event, encode_log_dir_event

BROKER = 1
TOPIC = "t"
TOPIC_ID = uuid.UUID(int=7)
CONFIG = BrokerConfig.from_properties(
    {"zookeeper.connect": "127.0.0.1:2181", "broker.id": str(BROKER)}
)
STORAGE_ERROR = int(ErrorCode.KAFKA_STORAGE_ERROR)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A log directory on a 256 KiB tmpfs of its own (see ``fill``)."""
    with tmpfs(tmp_path / "small-disk", "256k") as disk:
        yield disk


def big_batch(base_offset: int = 0) -> bytearray:
    """A batch larger than a page: its append needs a new one."""
    return build_batch([b"x" * 9000], base_offset=base_offset, partition_leader_epoch=0)


def leader_and_isr(
    states: dict[int, tuple[int, bool]], *, controller_epoch: int = 1
) -> dict[str, Any]:
    """Partition of "t" -> (leader epoch, is_new); this broker leads, ISR [1]."""
    return {
        "controller_id": 9,
        "controller_epoch": controller_epoch,
        "broker_epoch": 100,
        "topic_states": [
            {
                "topic_name": TOPIC,
                "topic_id": TOPIC_ID,
                "partition_states": [
                    {
                        "partition_index": p,
                        "controller_epoch": controller_epoch,
                        "leader": BROKER,
                        "leader_epoch": epoch,
                        "isr": [BROKER],
                        "partition_epoch": epoch,
                        "replicas": [BROKER, 2],
                        "adding_replicas": [],
                        "removing_replicas": [],
                        "is_new": is_new,
                    }
                    for p, (epoch, is_new) in states.items()
                ],
            }
        ],
    }


def errors(response: dict[str, Any]) -> dict[int, int]:
    return {
        e["partition_index"]: e["error_code"]
        for topic in response["topics"]
        for e in topic["partition_errors"]
    }


def tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition(TOPIC, p) for p in partitions]


# --- the storage layer: the failure is reported where it happens, once ------------------


def test_a_full_log_directory_is_reported_once_however_many_operations_fail(
    small_disk: Path,
) -> None:
    logs = LogManager([small_disk], CONFIG)
    try:
        first, second = (logs.get_or_create(tp) for tp in tps(0, 1))
        fill(small_disk)
        for partition_log in (first, second, first, second, first):
            with pytest.raises(KafkaStorageError, match="No space left on device"):
                partition_log.append_as_leader(big_batch(), 0)
        logs.checkpoint_high_watermarks()  # fails too (its temporary file): not raised
        channel = logs.dir_failures
        assert channel.take_next_offline_log_dir(0.1) == os.fspath(small_disk)
        assert channel.take_next_offline_log_dir(0.1) is None  # queued once
        assert not logs.is_log_dir_online(small_disk)
        # A failed append wrote nothing and moved nothing.
        assert (first.log_end_offset, second.log_end_offset) == (0, 0)

        # The failure handler's half in the log manager: its logs leave, closed.
        assert sorted(logs.handle_log_dir_failure(os.fspath(small_disk))) == tps(0, 1)
        assert logs.get_log(tps(0)[0]) is None
        assert len(logs) == 0
        assert first.closed
        assert second.closed
        assert logs.handle_log_dir_failure(os.fspath(small_disk)) == []  # once
    finally:
        logs.close()
    # Nothing more was written into the failed directory, not even at a clean shutdown.
    assert not (small_disk / CLEAN_SHUTDOWN_FILE).exists()


def test_a_failed_checkpoint_write_reports_its_directory_and_no_other(
    small_disk: Path, tmp_path: Path
) -> None:
    healthy = tmp_path / "healthy"
    logs = LogManager([small_disk, healthy], CONFIG)
    try:
        for tp in tps(0, 1):
            logs.get_or_create(tp).append_as_leader(build_batch([b"v"]), 0)
        fill(small_disk)
        logs.checkpoint_high_watermarks()
        logs.checkpoint_recovery_points()
        channel = logs.dir_failures
        assert channel.take_next_offline_log_dir(0.1) == os.fspath(small_disk)
        assert channel.take_next_offline_log_dir(0.1) is None
        assert logs.live_log_dirs == [healthy]
        assert (healthy / "replication-offset-checkpoint").exists()
    finally:
        logs.close()


def test_a_directory_that_fails_at_the_clean_shutdown_fails_alone(
    small_disk: Path, tmp_path: Path
) -> None:
    """The disk fills after the last append there, so the shutdown's own writes (epoch
    checkpoints, offset checkpoints) are the first to fail: that directory is reported
    and gets no clean-shutdown marker (recovered at the next start), the others are
    closed cleanly, and nothing is raised (Kafka's LogManager.shutdown, per directory)."""
    healthy = tmp_path / "healthy"
    logs = LogManager([small_disk, healthy], CONFIG)
    for tp in tps(0, 1, 2, 3):
        logs.get_or_create(tp).append_as_leader(big_batch(), 0)
    where = {tp: pl.log_dir for tp, pl in logs.all_logs().items()}
    assert sorted(where.values()) == sorted([os.fspath(small_disk), os.fspath(healthy)] * 2)
    fill(small_disk)
    logs.close()
    assert logs.dir_failures.take_next_offline_log_dir(0.1) == os.fspath(small_disk)
    assert logs.dir_failures.take_next_offline_log_dir(0.01) is None
    assert (healthy / CLEAN_SHUTDOWN_FILE).exists()
    assert not (small_disk / CLEAN_SHUTDOWN_FILE).exists()
    # Freed, both directories load again: the healthy one without recovery, the other
    # recovered, every appended batch there.
    (small_disk / "filler").unlink()
    again = LogManager([small_disk, healthy], CONFIG)
    try:
        for tp, log_dir in where.items():
            assert again.recovery_reports[tp].clean_shutdown == (log_dir == os.fspath(healthy))
            partition_log = again.get_log(tp)
            assert partition_log is not None
            assert partition_log.log_end_offset == 1
    finally:
        again.close()


def test_a_start_on_a_disk_still_full_after_a_crash_loads_its_logs(
    small_disk: Path, tmp_path: Path
) -> None:
    """The broker crashed and was restarted before anyone freed its disk: recovery only
    reads there (and rebuilds indexes in their pages), so every log loads with all it had;
    the first write the directory needs then fails it, and a clean shutdown leaves it
    without its marker."""
    healthy = tmp_path / "healthy"
    logs = LogManager([small_disk, healthy], CONFIG)
    partition_log: PartitionLog | None  # get_log's, after the restart
    for tp in tps(0, 1, 2, 3):
        partition_log = logs.get_or_create(tp)
        for _ in range(3):
            partition_log.append_as_leader(big_batch(), 0)
    where = {tp: pl.log_dir for tp, pl in logs.all_logs().items()}
    logs._unlock_dirs()  # a crash: no flush, no checkpoint, no marker; the locks go
    fill(small_disk)
    again = LogManager([small_disk, healthy], CONFIG)
    try:
        assert again.live_log_dirs == [small_disk, healthy]
        for tp, log_dir in where.items():
            assert not again.recovery_reports[tp].clean_shutdown
            partition_log = again.get_log(tp)
            assert partition_log is not None
            assert (partition_log.log_dir, partition_log.log_end_offset) == (log_dir, 3)
        on_disk = next(tp for tp, log_dir in where.items() if log_dir == os.fspath(small_disk))
        with pytest.raises(KafkaStorageError, match="No space left on device"):
            again.get_log(on_disk).append_as_leader(big_batch(), 0)  # type: ignore[union-attr]
        assert again.dir_failures.offline() == [os.fspath(small_disk)]
    finally:
        again.close()
    assert (healthy / CLEAN_SHUTDOWN_FILE).exists()
    assert not (small_disk / CLEAN_SHUTDOWN_FILE).exists()


# --- the replica manager: offline partitions, and the others ----------------------------


class FailedDirectoryBroker:
    """Broker 1 leading partitions 0-3 of "t" in two log directories, the first of which
    (the small disk) has just failed: an append to one of its partitions met ENOSPC."""

    def __init__(self, small_disk: Path, tmp_path: Path) -> None:
        self.failed_dir = os.fspath(small_disk)
        self.healthy_dir = tmp_path / "healthy"
        self.state_log_dir = tmp_path
        self.logs = LogManager([small_disk, self.healthy_dir], CONFIG)
        self.replicas = ReplicaManager(
            BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=self.logs
        )
        self.stopped: list[tuple[list[TopicPartition], bool]] = []
        self.replicas.on_stop = lambda stopped, deleted: self.stopped.append((stopped, deleted))
        answer = self.replicas.become_leader_or_follower(
            leader_and_isr({p: (0, True) for p in range(4)})
        )
        assert errors(answer) == dict.fromkeys(range(4), 0)
        partitions = self.replicas.partitions
        self.offline = sorted(tp for tp in tps(0, 1, 2, 3) if self.dir_of(tp) == self.failed_dir)
        self.online = sorted(tp for tp in tps(0, 1, 2, 3) if tp not in self.offline)
        assert len(self.offline) == len(self.online) == 2  # spread over the directories
        for tp in partitions:
            assert self.produce(tp)[0] == ErrorCode.NONE
        fill(small_disk)
        error, _p, _info, message = self.produce(self.offline[0])
        assert error == ErrorCode.KAFKA_STORAGE_ERROR, message

    def dir_of(self, tp: TopicPartition) -> str:
        partition_log = self.replicas.partitions[tp].log
        assert partition_log is not None
        return partition_log.log_dir

    def produce(self, tp: TopicPartition) -> tuple[ErrorCode, Any, Any, str | None]:
        return self.replicas.append_as_leader(tp, big_batch(), 1)

    def handle_failure(self) -> list[TopicPartition]:
        """What the log dir failure handler thread does with the queued directory, up to
        the ZooKeeper notification."""
        log_dir = self.logs.dir_failures.take_next_offline_log_dir(0.1)
        assert log_dir == self.failed_dir
        assert self.logs.dir_failures.take_next_offline_log_dir(0.01) is None
        return self.replicas.handle_log_dir_failure(log_dir)

    def state_changes(self) -> list[dict[str, Any]]:
        text = (self.state_log_dir / "state-change.log").read_text()
        lines = [json.loads(line) for line in text.splitlines()]
        return [row for row in lines if row["event"] == "leader_and_isr"]

    def close(self) -> None:
        self.replicas.close()
        self.logs.close()


@pytest.fixture
def failed(small_disk: Path, tmp_path: Path) -> Iterator[FailedDirectoryBroker]:
    broker = FailedDirectoryBroker(small_disk, tmp_path)
    try:
        yield broker
    finally:
        broker.close()


def test_the_failed_directorys_partitions_go_offline_and_the_others_keep_working(
    failed: FailedDirectoryBroker,
) -> None:
    rm = failed.replicas
    assert failed.handle_failure() == failed.offline
    assert sorted(rm.offline_partitions) == failed.offline
    assert sorted(rm.partitions) == failed.online
    # The fetchers are told to drop them (as for a StopReplica without deletion).
    assert failed.stopped == [(failed.offline, False)]
    # Their logs left the log manager, closed.
    assert all(failed.logs.get_log(tp) is None for tp in failed.offline)
    for tp in failed.offline:
        assert failed.produce(tp)[0] == ErrorCode.KAFKA_STORAGE_ERROR
        assert rm.leader_partition(tp, -1) == (ErrorCode.KAFKA_STORAGE_ERROR, None)
    for tp in failed.online:
        error, p, info, message = failed.produce(tp)
        assert error == ErrorCode.NONE, message
        assert info is not None
        assert info.first_offset == 1
        read = p.log.read(0, 1 << 20)
        assert read.next_offset == 2
        assert len(read.to_bytes()) > 18_000
    assert failed.logs.live_log_dirs == [failed.healthy_dir]


def test_leader_and_isr_answers_storage_errors_for_offline_and_unknown_old_partitions(
    failed: FailedDirectoryBroker,
) -> None:
    rm = failed.replicas
    failed.handle_failure()
    # Every partition moves to leader epoch 1 (one offline partition said to be new: it
    # is still offline); 10 is not hosted here and not new (its log may be in the failed
    # directory); 11 is new.
    states = {p: (1, False) for p in range(4)} | {10: (0, False), 11: (0, True)}
    states[failed.offline[0].partition] = (1, True)
    answer = rm.become_leader_or_follower(leader_and_isr(states, controller_epoch=2))
    offline = {tp.partition for tp in failed.offline}
    expected = {p: STORAGE_ERROR if p in offline or p == 10 else 0 for p in states}
    assert errors(answer) == expected
    # The new partition's log is made in the online directory; no log for 10.
    new_log = failed.logs.get_log(TopicPartition(TOPIC, 11))
    assert new_log is not None
    assert new_log.log_dir == os.fspath(failed.healthy_dir)
    for tp in [TopicPartition(TOPIC, 10), *failed.offline]:
        assert failed.logs.get_log(tp) is None
        assert tp not in rm.partitions
    # The refusals are in the state-change log as rejected, with their error.
    rows = {(r["partition"], r["leader_epoch"]): r for r in failed.state_changes()}
    for p in [*offline, 10]:
        assert rows[p, states[p][0]]["result"] == "rejected", rows[p, states[p][0]]
        assert rows[p, states[p][0]]["error"] == "KAFKA_STORAGE_ERROR"
    for p in set(states) - offline - {10}:
        assert rows[p, states[p][0]]["result"] == "applied"


def test_a_not_new_partition_is_refused_while_a_directory_is_offline_even_before_handling(
    failed: FailedDirectoryBroker,
) -> None:
    # The directory is reported; its failure handler has not run yet.
    answer = failed.replicas.become_leader_or_follower(
        leader_and_isr({10: (0, False), 11: (0, True)}, controller_epoch=2)
    )
    assert errors(answer) == {10: STORAGE_ERROR, 11: 0}
    assert failed.logs.get_log(TopicPartition(TOPIC, 11)).log_dir == os.fspath(  # type: ignore[union-attr]
        failed.healthy_dir
    )
    # A hosted partition of the failed directory is applied, as in Kafka, until the
    # failure handler takes it offline with the others.
    offline = failed.offline[0]
    answer = failed.replicas.become_leader_or_follower(
        leader_and_isr({offline.partition: (1, False)}, controller_epoch=2)
    )
    assert errors(answer) == {offline.partition: 0}
    assert failed.handle_failure() == failed.offline
    answer = failed.replicas.become_leader_or_follower(
        leader_and_isr({offline.partition: (2, False)}, controller_epoch=2)
    )
    assert errors(answer) == {offline.partition: STORAGE_ERROR}


def test_a_log_found_in_a_failed_directory_is_not_hosted_even_before_handling(
    small_disk: Path, tmp_path: Path
) -> None:
    # Its log is there (found at start, say), the partition not yet hosted.
    logs = LogManager([small_disk, tmp_path / "healthy"], CONFIG)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        found = logs.get_or_create(TopicPartition(TOPIC, 5))
        assert found.log_dir == os.fspath(small_disk)
        fill(small_disk)
        with pytest.raises(KafkaStorageError):
            found.append_as_leader(big_batch(), 0)
        answer = rm.become_leader_or_follower(leader_and_isr({5: (0, False)}))
        assert errors(answer) == {5: STORAGE_ERROR}
        assert TopicPartition(TOPIC, 5) in rm.offline_partitions
    finally:
        rm.close()
        logs.close()


def stop_replica_deleting(partitions: list[int], leader_epoch: int) -> dict[str, Any]:
    """A StopReplica (delete) of these partitions of TOPIC, from controller epoch 2."""
    return {
        "controller_id": 9,
        "controller_epoch": 2,
        "broker_epoch": 100,
        "topic_states": [
            {
                "topic_name": TOPIC,
                "partition_states": [
                    {"partition_index": p, "leader_epoch": leader_epoch, "delete_partition": True}
                    for p in partitions
                ],
            }
        ],
    }


def test_stop_replica_of_an_offline_partition_is_a_storage_error(
    failed: FailedDirectoryBroker,
) -> None:
    failed.handle_failure()
    request = stop_replica_deleting([failed.offline[0].partition, failed.online[0].partition], 1)
    answer = failed.replicas.stop_replicas(request)
    got = {e["partition_index"]: e["error_code"] for e in answer["partition_errors"]}
    assert got == {failed.offline[0].partition: STORAGE_ERROR, failed.online[0].partition: 0}
    assert failed.logs.get_log(failed.online[0]) is None  # deleted


def test_stop_replica_deleting_a_log_not_here_while_a_directory_is_offline_is_a_storage_error(
    failed: FailedDirectoryBroker,
) -> None:
    # Partition 10 is not hosted here and its LeaderAndIsr was refused (its log may be in
    # the failed directory): its deletion cannot be answered done, or the controller
    # would take the topic as deleted and that log would stay for good (Kafka's
    # asyncDelete). 11 is hosted in the healthy directory and goes.
    failed.handle_failure()
    rm = failed.replicas
    answer = rm.become_leader_or_follower(
        leader_and_isr({10: (0, False), 11: (0, True)}, controller_epoch=2)
    )
    assert errors(answer) == {10: STORAGE_ERROR, 11: 0}
    request = stop_replica_deleting([10, 11], -2)
    answer = rm.stop_replicas(request)
    got = {e["partition_index"]: e["error_code"] for e in answer["partition_errors"]}
    assert got == {10: STORAGE_ERROR, 11: 0}
    assert failed.logs.get_log(TopicPartition(TOPIC, 11)) is None
    # Asked again, 11 is a storage error too: with a directory offline, a log deleted
    # cannot be told from one the broker cannot see (as in Kafka).
    again = rm.stop_replicas(request)
    assert {e["partition_index"]: e["error_code"] for e in again["partition_errors"]} == {
        10: STORAGE_ERROR,
        11: STORAGE_ERROR,
    }


@pytest.mark.parametrize(
    ("version", "expected"),
    [(4, ErrorCode.NOT_LEADER_OR_FOLLOWER), (5, ErrorCode.NOT_LEADER_OR_FOLLOWER), (6, None)],
)
def test_a_fetch_before_v6_is_told_not_leader_of_an_offline_partition(
    failed: FailedDirectoryBroker, version: int, expected: ErrorCode | None
) -> None:
    """A client of Fetch v5 or older may not know KAFKA_STORAGE_ERROR (v6's): Kafka 2.8's
    handleFetchRequest answers it NOT_LEADER_OR_FOLLOWER instead
    (maybeDownConvertStorageError), which it retries after a metadata refresh, where an
    unknown error code is fatal to it."""
    failed.handle_failure()
    metadata = MetadataCache(BROKER)
    metadata.update(update_metadata_listing([*failed.offline, *failed.online], BROKER, [BROKER]))
    apis = KafkaApis(
        BROKER, metadata, failed.replicas, cast(Any, None), StateChangeLog(None, BROKER), lambda: 1
    )
    everything = [*failed.offline, *failed.online]
    fetched = apis.handle(
        ApiKey.FETCH,
        version,
        {},
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {"partition": tp.partition, "fetch_offset": 0, "partition_max_bytes": 1024}
                        for tp in everything
                    ],
                }
            ],
        },
    )
    assert fetched is not None
    errors = {
        p["partition_index"]: p["error_code"] for t in fetched["responses"] for p in t["partitions"]
    }
    offline = ErrorCode.KAFKA_STORAGE_ERROR if expected is None else expected
    assert errors == {tp.partition: offline for tp in failed.offline} | {
        tp.partition: ErrorCode.NONE for tp in failed.online
    }


def test_produce_fetch_list_offsets_and_epochs_of_offline_partitions_are_storage_errors(
    failed: FailedDirectoryBroker,
) -> None:
    failed.handle_failure()
    metadata = MetadataCache(BROKER)
    metadata.update(update_metadata_listing([*failed.offline, *failed.online], BROKER, [BROKER]))
    apis = KafkaApis(
        BROKER,
        metadata,
        failed.replicas,
        cast(Any, None),
        StateChangeLog(None, BROKER),
        lambda: 100,
    )
    everything = [*failed.offline, *failed.online]
    bad = {tp.partition: STORAGE_ERROR for tp in failed.offline}
    good = {tp.partition: 0 for tp in failed.online}

    produced = apis.handle(
        ApiKey.PRODUCE,
        9,
        {},
        {
            "acks": 1,
            "timeout_ms": 1000,
            "topic_data": [
                {
                    "name": TOPIC,
                    "partition_data": [
                        {"index": tp.partition, "records": big_batch()} for tp in everything
                    ],
                }
            ],
        },
    )
    assert produced is not None
    answers = {
        p["index"]: p["error_code"] for t in produced["responses"] for p in t["partition_responses"]
    }
    assert answers == bad | good

    for replica_id in (-1, 2):  # a consumer's fetch, a follower's
        fetched = apis.handle(
            ApiKey.FETCH,
            12,
            {},
            {
                "replica_id": replica_id,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": TOPIC,
                        "partitions": [
                            {
                                "partition": tp.partition,
                                "current_leader_epoch": 0,
                                "fetch_offset": 0,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                            for tp in everything
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
        assert fetched is not None
        parts = [p for t in fetched["responses"] for p in t["partitions"]]
        assert {p["partition_index"]: p["error_code"] for p in parts} == bad | good
        assert all(p["records"] for p in parts if p["error_code"] == 0)

    listed = apis.handle(
        ApiKey.LIST_OFFSETS,
        5,
        {},
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": tp.partition, "timestamp": -1} for tp in everything
                    ],
                }
            ],
        },
    )
    assert listed is not None
    answers = {
        p["partition_index"]: p["error_code"] for t in listed["topics"] for p in t["partitions"]
    }
    assert answers == bad | good

    epochs = apis.handle(
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        3,
        {},
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {"partition": tp.partition, "current_leader_epoch": 0, "leader_epoch": 0}
                        for tp in everything
                    ],
                }
            ],
        },
    )
    assert epochs is not None
    answers = {p["partition"]: p["error_code"] for t in epochs["topics"] for p in t["partitions"]}
    assert answers == bad | good


@contextlib.contextmanager
def following_two(
    small_disk: Path, tmp_path: Path
) -> Iterator[tuple[ReplicaManager, LogManager, TopicPartition, TopicPartition]]:
    """This broker, with a log directory on the small disk and a healthy one, a follower
    of broker 2 in partitions 0 and 1: the replica manager, its logs, the partition whose
    log is on the small disk and the other."""
    healthy = tmp_path / "healthy"
    logs = LogManager([small_disk, healthy], CONFIG)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        request = leader_and_isr({0: (0, True), 1: (0, True)})
        for state in request["topic_states"][0]["partition_states"]:
            state["leader"] = 2
        assert errors(rm.become_leader_or_follower(request)) == {0: 0, 1: 0}
        by_dir = {rm.partitions[tp].log.log_dir: tp for tp in tps(0, 1)}  # type: ignore[union-attr]
        yield rm, logs, by_dir[os.fspath(small_disk)], by_dir[os.fspath(healthy)]
    finally:
        rm.close()
        logs.close()


def test_a_failed_follower_append_reports_its_directory_and_the_partition_goes_offline(
    small_disk: Path, tmp_path: Path
) -> None:
    with following_two(small_disk, tmp_path) as (rm, logs, failing, working):
        fill(small_disk)
        with pytest.raises(KafkaStorageError, match="No space left on device"):
            rm.append_as_follower(failing, 2, 0, bytes(big_batch()), 0)
        assert rm.append_as_follower(working, 2, 0, bytes(big_batch()), 0) == 1
        log_dir = logs.dir_failures.take_next_offline_log_dir(0.1)
        assert log_dir == os.fspath(small_disk)
        assert rm.handle_log_dir_failure(log_dir) == [failing]
        # A fetch answer still in flight for it is dropped, not applied.
        assert rm.append_as_follower(failing, 2, 0, bytes(big_batch()), 0) is None
        assert rm.append_as_follower(working, 2, 0, bytes(big_batch(1)), 0) == 2


def test_the_failure_handler_thread_takes_the_directory_from_the_queue(
    failed: FailedDirectoryBroker,
) -> None:
    rm = failed.replicas
    rm.start()  # the log dir failure handler thread (and the ISR writer)
    deadline = time.monotonic() + 10
    while sorted(rm.offline_partitions) != failed.offline:
        assert time.monotonic() < deadline, "the handler did not take the directory"
        time.sleep(0.01)
    assert failed.produce(failed.offline[0])[0] == ErrorCode.KAFKA_STORAGE_ERROR
    assert failed.produce(failed.online[0])[0] == ErrorCode.NONE
    # What it writes next (and retries: there is no ZooKeeper here) until it is written
    # or the broker stops: the controller reads the broker id from it.
    path, data = rm.log_dir_event_notification()
    assert path == paths.LOG_DIR_EVENT_NOTIFICATION + "/" + paths.LOG_DIR_EVENT_PREFIX
    assert data == encode_log_dir_event(BROKER)
    assert decode_log_dir_event(path + "0000000000", data) == BROKER


def test_the_broker_halts_when_its_last_log_directory_fails(
    small_disk: Path, tmp_path: Path
) -> None:
    logs = LogManager([small_disk], CONFIG)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    halted: list[list[str]] = []
    rm.on_all_log_dirs_failed = halted.append
    try:
        rm.become_leader_or_follower(leader_and_isr({0: (0, True)}))
        fill(small_disk)
        error, *_ = rm.append_as_leader(TopicPartition(TOPIC, 0), big_batch(), 1)
        assert error == ErrorCode.KAFKA_STORAGE_ERROR
        log_dir = logs.dir_failures.take_next_offline_log_dir(0.1)
        assert log_dir == os.fspath(small_disk)
        assert rm.handle_log_dir_failure(log_dir) == tps(0)
        assert halted == [[os.fspath(small_disk)]]
    finally:
        rm.close()
        logs.close()


def test_a_last_directory_failing_in_the_clean_shutdown_halts_nothing(
    small_disk: Path, tmp_path: Path
) -> None:
    """Its only directory's disk filled after the last append: the shutdown's writes
    fail, the directory is reported, and the stopped handler thread neither takes it
    nor halts the broker mid-shutdown (Kafka stops that thread first)."""
    logs = LogManager([small_disk], CONFIG)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    halted: list[list[str]] = []
    rm.on_all_log_dirs_failed = halted.append
    rm.start()
    rm.become_leader_or_follower(leader_and_isr({0: (0, True)}))
    assert rm.append_as_leader(TopicPartition(TOPIC, 0), big_batch(), 1)[0] == ErrorCode.NONE
    fill(small_disk)
    rm.close()
    logs.close()
    assert logs.dir_failures.offline() == [os.fspath(small_disk)]
    time.sleep(1.0)  # the handler's wait for the queue is 0.5 s
    assert halted == []
    assert rm.offline_partitions == {}
    assert not (small_disk / CLEAN_SHUTDOWN_FILE).exists()


# --- the first log directory: the state-change log ---------------------------------------


def test_the_state_change_log_on_a_failed_directory_neither_raises_nor_stops_the_writer(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state_log = StateChangeLog(small_disk, BROKER)
    state_log.write("first", n=0)
    fill(small_disk)
    with caplog.at_level(logging.ERROR, logger="broker.state_change_log"):
        for n in range(20):  # past the page the first line began
            state_log.write("filler", text="y" * 1000, n=n)
        state_log.write_many("rows", [{"n": 1}, {"n": 2}])
    assert any("state-change log" in r.getMessage() for r in caplog.records)
    assert len(caplog.records) == 1  # reported once
    state_log.close()
    first = (small_disk / "state-change.log").read_text().splitlines()[0]
    assert json.loads(first)["event"] == "first"


def test_the_state_change_log_is_written_again_once_its_disk_has_room(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As log4j's appender keeps trying Kafka's: the lines while the disk is full are
    lost, a torn piece ends its own line, and the next lines are whole."""
    state_log = StateChangeLog(small_disk, BROKER, retry_s=0.0)
    state_log.write("first", n=0)
    fill(small_disk)
    with caplog.at_level(logging.WARNING, logger="broker.state_change_log"):
        for n in range(20):  # refused, then tried again each time (retry_s 0): quiet
            state_log.write("filler", text="y" * 1000, n=n)
        assert [r.levelno for r in caplog.records] == [logging.ERROR]
        (small_disk / "filler").unlink()
        state_log.write("after", n=1)
        state_log.write_many("rows", [{"n": 2}, {"n": 3}])
    state_log.close()
    state_log.write("closed", n=4)  # after close: nothing, not reopened
    (again,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "written again" in again
    text = (small_disk / "state-change.log").read_text()
    assert text.endswith("\n")
    whole = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            whole.append(json.loads(line))
    events = [(row["event"], row["n"]) for row in whole if isinstance(row, dict)]
    assert events[0] == ("first", 0)
    assert events[-3:] == [("after", 1), ("rows", 2), ("rows", 3)]
    assert ("closed", 4) not in events


def test_a_state_change_log_still_failing_is_tried_again_only_every_retry_s(
    small_disk: Path,
) -> None:
    state_log = StateChangeLog(small_disk, BROKER, retry_s=3600.0)
    fill(small_disk)
    for n in range(20):
        state_log.write("filler", text="y" * 1000, n=n)
    (small_disk / "filler").unlink()
    state_log.write("soon", n=1)  # not tried before the hour is over: lost
    state_log.close()
    assert "soon" not in (small_disk / "state-change.log").read_text()


def test_a_write_from_another_thread_survives_a_failed_state_change_log(
    small_disk: Path,
) -> None:
    state_log = StateChangeLog(small_disk, BROKER)
    fill(small_disk)
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            for n in range(20):
                state_log.write("filler", text="y" * 1000, n=n)
        except BaseException as e:  # what would end the thread
            failures.append(e)

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join(60)  # a bound that only catches a hang
    assert not thread.is_alive(), "thread still running after 60 s"
    assert failures == []
    state_log.close()


# --- start-up: a directory that cannot be created or locked is offline from the start ----


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Path]:
    """A read-only tmpfs: nothing can be created in it (EROFS)."""
    with tmpfs(tmp_path / "read-only-disk", "64k", read_only=True) as disk:
        yield disk


def test_a_directory_that_cannot_be_created_or_locked_is_offline_from_the_start(
    read_only_disk: Path, tmp_path: Path
) -> None:
    cannot_create = read_only_disk / "logs"  # mkdir: EROFS
    cannot_lock = read_only_disk  # exists; its .lock cannot be created: EROFS
    healthy = tmp_path / "healthy"
    logs = LogManager([cannot_create, healthy, cannot_lock], CONFIG)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        assert logs.live_log_dirs == [healthy]
        assert not logs.is_log_dir_online(cannot_create)
        assert not logs.is_log_dir_online(cannot_lock)
        # Nothing for the failure handler: no partition of them was ever served.
        assert logs.dir_failures.take_next_offline_log_dir(0.01) is None
        # A partition not new may have its log there: refused; a new one is made in the
        # online directory.
        answer = rm.become_leader_or_follower(leader_and_isr({0: (0, False), 1: (0, True)}))
        assert errors(answer) == {0: STORAGE_ERROR, 1: 0}
        assert rm.partitions[TopicPartition(TOPIC, 1)].log.log_dir == os.fspath(healthy)  # type: ignore[union-attr]
    finally:
        rm.close()
        logs.close()
    assert (healthy / CLEAN_SHUTDOWN_FILE).exists()


def test_the_start_fails_clearly_when_no_directory_can_be_used(
    read_only_disk: Path,
) -> None:
    with pytest.raises(StorageError, match="can be created, locked or read"):
        LogManager([read_only_disk / "a", read_only_disk / "b"], CONFIG)


def test_a_directory_whose_meta_properties_failed_is_offline_from_the_start(
    small_disk: Path, tmp_path: Path
) -> None:
    healthy = tmp_path / "healthy"
    failure = OSError(errno.ENOSPC, "No space left on device")
    logs = LogManager(
        [small_disk, healthy], CONFIG, offline_at_start={os.fspath(small_disk): failure}
    )
    try:
        assert logs.live_log_dirs == [healthy]
        assert logs.get_or_create(TopicPartition(TOPIC, 0)).log_dir == os.fspath(healthy)
        with pytest.raises(KafkaStorageError, match="are offline"):
            logs.get_or_create(TopicPartition(TOPIC, 1), is_new=False)
    finally:
        logs.close()
    assert not (small_disk / ".lock").exists()  # not even locked


# A partition refused KAFKA_STORAGE_ERROR because its log could not be made (not new while
# a directory is offline: its log may be there) stays offline until the broker restarts,
# as Kafka 2.8's becomeLeaderOrFollower marks it (`if (localLog(tp).isEmpty)
# markPartitionOffline(tp)`). Else a later LeaderAndIsr sending it as new (a reassignment
# moving the replica back) made a second, empty log of it in a healthy directory, and once
# the failed one was back the broker could not start (two logs of one partition).


def following_state(epoch: int, is_new: bool) -> dict[str, Any]:
    """A LeaderAndIsr of partition 0 of "t": broker 2 leads, this broker follows."""
    request = leader_and_isr({0: (epoch, is_new)}, controller_epoch=2)
    state = request["topic_states"][0]["partition_states"][0]
    state |= {"leader": 2, "isr": [2], "replicas": [2, BROKER]}
    return request


def stop_replica(partition: int, leader_epoch: int, *, delete: bool) -> dict[str, Any]:
    request = stop_replica_deleting([partition], leader_epoch)
    request["topic_states"][0]["partition_states"][0]["delete_partition"] = delete
    return request


def stop_errors(answer: dict[str, Any]) -> dict[int, int]:
    return {e["partition_index"]: e["error_code"] for e in answer["partition_errors"]}


def with_a_record(log_dir: Path) -> None:
    """Partition 0 of "t" in ``log_dir``, holding one (acknowledged) record."""
    logs = LogManager([log_dir], CONFIG)
    logs.get_or_create(TopicPartition(TOPIC, 0)).append_as_leader(
        build_batch([b"acked"], partition_leader_epoch=0), 0
    )
    logs.close()


def assert_offline_for_good(rm: ReplicaManager, logs: LogManager) -> None:
    """Partition 0 is offline: every later request for it is KAFKA_STORAGE_ERROR (a
    LeaderAndIsr sending it as new included) and no log of it is made."""
    tp = TopicPartition(TOPIC, 0)
    assert stop_errors(rm.stop_replicas(stop_replica(0, 6, delete=False))) == {0: STORAGE_ERROR}
    assert stop_errors(rm.stop_replicas(stop_replica(0, 6, delete=True))) == {0: STORAGE_ERROR}
    answer = rm.become_leader_or_follower(following_state(8, True))
    made = logs.get_log(tp)
    assert errors(answer) == {0: STORAGE_ERROR}, f"a second log made in {made and made.log_dir}"
    assert made is None
    # The leader's answer too, were it told to lead: never a log made from nothing.
    assert errors(
        rm.become_leader_or_follower(leader_and_isr({0: (9, True)}, controller_epoch=2))
    ) == {0: STORAGE_ERROR}
    assert logs.get_log(tp) is None
    # Produce and fetch answer KAFKA_STORAGE_ERROR, not an unknown partition.
    assert rm.leader_partition(tp, -1) == (ErrorCode.KAFKA_STORAGE_ERROR, None)
    assert rm.leader_partition(tp, -1, leader_only=False) == (ErrorCode.KAFKA_STORAGE_ERROR, None)
    assert rm.append_as_leader(tp, big_batch(), 1)[0] == ErrorCode.KAFKA_STORAGE_ERROR
    assert tp in rm.offline_partitions
    assert tp not in rm.partitions


def test_a_partition_refused_at_start_for_an_offline_directory_stays_offline(
    tmp_path: Path,
) -> None:
    a, c = tmp_path / "a", tmp_path / "c"
    with_a_record(a)
    # Started again with a's meta.properties unreadable (its disk failing): a is offline
    # from the start, c is healthy.
    failure = OSError(errno.EIO, "Input/output error")
    logs = LogManager([a, c], CONFIG, offline_at_start={os.fspath(a): failure})
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        # The controller's LeaderAndIsr of the existing replica: refused, its log may be in a.
        assert errors(rm.become_leader_or_follower(following_state(5, False))) == {0: STORAGE_ERROR}
        assert_offline_for_good(rm, logs)
    finally:
        rm.close()
        logs.close()
    # Directory a readable again: the broker starts, with the one log of the partition.
    logs = LogManager([a, c], CONFIG)
    try:
        kept = logs.get_log(TopicPartition(TOPIC, 0))
        assert kept is not None
        assert kept.log_dir == os.fspath(a)
        assert kept.log_end_offset == 1
    finally:
        logs.close()


def test_a_partition_loaded_but_not_hosted_when_its_directory_failed_stays_offline(
    tmp_path: Path,
) -> None:
    """A directory failing at run time after the partition's log was loaded from it and
    before the controller's LeaderAndIsr of it came: the failure handler found nothing
    hosted there, the log manager dropped the log."""
    a, c = tmp_path / "a", tmp_path / "c"
    with_a_record(a)
    logs = LogManager([a, c], CONFIG)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        loaded = logs.get_log(TopicPartition(TOPIC, 0))
        assert loaded is not None
        assert loaded.log_dir == os.fspath(a)
        logs.dir_failures.maybe_add_offline_log_dir(os.fspath(a), "EIO", OSError(errno.EIO, "EIO"))
        assert logs.dir_failures.take_next_offline_log_dir(0.1) == os.fspath(a)
        assert rm.handle_log_dir_failure(os.fspath(a)) == []  # what the handler thread does
        assert errors(rm.become_leader_or_follower(following_state(5, False))) == {0: STORAGE_ERROR}
        assert_offline_for_good(rm, logs)
    finally:
        rm.close()
        logs.close()


def test_a_hosted_partition_refused_for_its_missing_log_goes_offline_as_the_handler_takes_it(
    tmp_path: Path,
) -> None:
    """A partition still hosted whose log left the log manager with its directory's
    failure (the handler's own part runs after it takes the hosted partitions, under no
    lock of this request): refused, it leaves the hosted partitions as the failure handler
    takes them, its fetcher is told and its waiters answer."""
    a, c = tmp_path / "a", tmp_path / "c"
    with_a_record(a)
    logs = LogManager([a, c], CONFIG)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    stopped: list[tuple[list[TopicPartition], bool]] = []
    rm.on_stop = lambda tps_, deleted: stopped.append((tps_, deleted))
    woken: list[Any] = []
    rm.on_data = lambda data, partitions: woken.append(partitions)
    try:
        assert errors(rm.become_leader_or_follower(following_state(5, False))) == {0: 0}
        assert TopicPartition(TOPIC, 0) in rm.partitions
        logs.dir_failures.maybe_add_offline_log_dir(os.fspath(a), "EIO", OSError(errno.EIO, "EIO"))
        logs.handle_log_dir_failure(os.fspath(a))
        woken.clear()
        assert errors(rm.become_leader_or_follower(following_state(6, False))) == {0: STORAGE_ERROR}
        assert stopped == [(tps(0), False)]
        assert tps(0) in woken
        assert_offline_for_good(rm, logs)
    finally:
        rm.close()
        logs.close()


# --- the follower's fetcher ----------------------------------------------------------------


class LeaderAnswering:
    """Broker 2 answering a fetch with one large batch for every partition asked."""

    def request(self, api_key: int, _version: int, body: Mapping[str, Any]) -> Any:
        assert api_key == ApiKey.FETCH
        return {
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": t["topic"],
                    "partitions": [
                        {
                            "partition_index": p["partition"],
                            "error_code": 0,
                            "high_watermark": 1,
                            "records": bytes(big_batch(p["fetch_offset"])),
                        }
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ],
        }

    def close(self) -> None:
        pass


def test_the_fetcher_stops_fetching_a_partition_whose_log_failed_and_goes_on_with_the_others(
    small_disk: Path, tmp_path: Path
) -> None:
    with following_two(small_disk, tmp_path) as (rm, logs, failing, working):
        fetcher = ReplicaFetcherThread(
            BROKER,
            2,
            ("127.0.0.1", 1),
            rm.append_as_follower,
            rm,
            connect=lambda _endpoint, _client, _timeout: LeaderAnswering(),
        )
        fetcher.add_all([(tp, FetchState(0, 0, truncating=False)) for tp in (failing, working)])
        fill(small_disk)
        fetch = fetcher._build_fetch()
        assert fetch is not None
        fetcher._fetch_once(fetch)  # does not raise: the failed partition is set apart
        assert set(fetcher.partitions) == {working}
        assert fetcher.partitions[working].fetch_offset == 1
        assert logs.dir_failures.take_next_offline_log_dir(0.1) == os.fspath(small_disk)


def test_the_fetcher_sets_apart_a_partition_its_log_refuses_and_goes_on_with_the_others() -> None:
    """Beyond a failed log, as Kafka's AbstractFetcherThread: invalid records, fetched
    again after the backoff; any other storage error (a batch starting inside what the log
    holds), no longer fetched until a LeaderAndIsr follows it again. Raised to the
    fetcher, one such partition stopped the others from the same leader."""
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    appended: list[TopicPartition] = []

    def sink(tp: TopicPartition, *_: object) -> int:
        if tp == a0:
            raise UnexpectedAppendOffsetError(
                "the first batch starts below the log end offset", expected=20, found=7
            )
        if tp == a1:
            raise CorruptRecordError("CRC-32C mismatch", position=0)
        appended.append(tp)
        return 30

    fetcher = ReplicaFetcherThread(
        BROKER,
        2,
        ("127.0.0.1", 1),
        sink,
        None,
        backoff_ms=60_000,
        connect=lambda _endpoint, _client, _timeout: LeaderAnswering(),
    )
    fetcher.add_all([(tp, FetchState(20, 5, truncating=False)) for tp in (a0, a1, b0)])
    fetch = fetcher._build_fetch()
    assert fetch is not None
    fetcher._fetch_once(fetch)  # raises nothing
    assert a0 not in fetcher.partitions  # not fetched until followed again
    assert fetcher.partitions[a1].delayed_until > time.monotonic()  # fetched again later
    assert appended == [b0]
    assert fetcher.partitions[b0].fetch_offset == 30
    fetcher.add_all([(a0, FetchState(20, 6, truncating=False))])  # a new LeaderAndIsr
    assert a0 in fetcher.partitions


def test_a_stop_replica_whose_rename_fails_answers_a_storage_error_for_those_logs_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A deletion's rename failing in one directory (EIO, say): that directory's logs are
    # answered KAFKA_STORAGE_ERROR, so the controller does not take them as deleted; the
    # other directory's logs go and are answered done, each partition once.
    failing, healthy = tmp_path / "failing", tmp_path / "healthy"
    logs = LogManager([failing, healthy], CONFIG)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        partitions = list(range(6))
        answer = rm.become_leader_or_follower(leader_and_isr(dict.fromkeys(partitions, (0, True))))
        assert errors(answer) == dict.fromkeys(partitions, 0)
        hosted = {p: logs.get_log(TopicPartition(TOPIC, p)) for p in partitions}
        in_failing = {p for p, lg in hosted.items() if lg and lg.log_dir == os.fspath(failing)}
        assert in_failing  # each directory holds some: the least-filled one gets the next
        assert in_failing != set(partitions)
        rename = os.rename

        def rename_failing_there(source: str, target: str) -> None:
            if os.path.dirname(source) == os.fspath(failing):
                raise OSError(errno.EIO, "Input/output error", source)
            rename(source, target)

        monkeypatch.setattr(os, "rename", rename_failing_there)
        answer = rm.stop_replicas(stop_replica_deleting(partitions, -2))
        got = [(e["partition_index"], e["error_code"]) for e in answer["partition_errors"]]
        assert sorted(got) == [(p, STORAGE_ERROR if p in in_failing else 0) for p in partitions]
        for p in set(partitions) - in_failing:
            assert logs.get_log(TopicPartition(TOPIC, p)) is None
            assert not (healthy / f"{TOPIC}-{p}").exists()
    finally:
        rm.close()
        logs.close()

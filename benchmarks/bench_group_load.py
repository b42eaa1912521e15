"""A new coordinator reading a __consumer_offsets partition back, in one process.

A partition of N offset commits (each of P partitions of one of G groups, as a group's
members commit them, one batch each), written through a real replica manager's leader
appends; then the partition moved to another broker and led here again, as after a
failover (a new leader epoch alone, the same leader, is no election: not read again), and
timed until the coordinator has loaded it (every group's latest offsets). Floor, in the
same run: reading the same log from its start as the load does, decoding every record
batch's header and nothing more. No log cleaner compacts the topic here, so a
coordinator reads every commit ever made: the figure per million commits says what a
failover of the group's coordinator costs after that many.

    .venv/bin/python benchmarks/bench_group_load.py [--commits 100000] [--partitions 10]
        [--groups 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from common import at_least, emit

from broker.config import BrokerConfig, TopicConfig
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from groups.coordinator import OFFSETS_TOPIC, GroupCoordinator
from groups.membership import GroupLimits
from groups.offset_records import CommittedOffset, OffsetKey, offset_commit_batch
from storage.log_manager import LogManager
from storage.records import iter_batches
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

BROKER = 1
CONFIG = BrokerConfig.from_properties({"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1"})
OFFSETS_TP = TopicPartition(OFFSETS_TOPIC, 0)


OTHER = 2


def leader_and_isr(epoch: int, leader: int = BROKER) -> dict[str, Any]:
    return {
        "controller_id": 9,
        "controller_epoch": 1,
        "broker_epoch": 100,
        "topic_states": [
            {
                "topic_name": OFFSETS_TOPIC,
                "topic_id": None,
                "partition_states": [
                    {
                        "partition_index": 0,
                        "controller_epoch": 1,
                        "leader": leader,
                        "leader_epoch": epoch,
                        "isr": [BROKER] if leader == BROKER else [leader, BROKER],
                        "partition_epoch": epoch,
                        "replicas": [BROKER] if leader == BROKER else [leader, BROKER],
                        "adding_replicas": [],
                        "removing_replicas": [],
                        "is_new": epoch == 0,
                    }
                ],
            }
        ],
    }


@contextlib.contextmanager
def offsets_leader(
    root: Path, topic_config: TopicConfig | None = None
) -> Iterator[tuple[ReplicaManager, GroupCoordinator]]:
    """A replica manager over real logs in ``root`` leading __consumer_offsets-0 (one
    partition), and its group coordinator."""
    state_log = StateChangeLog(root, BROKER)
    logs = LogManager(
        [root / "logs"],
        CONFIG,
        topic_config=None if topic_config is None else (lambda _t: topic_config),
    )
    replicas = ReplicaManager(BROKER, cast(Any, None), state_log, logs=logs)
    coordinator = GroupCoordinator(BROKER, replicas, offsets_partitions=1, limits=GroupLimits())
    replicas.on_become = coordinator.on_become
    replicas.start()
    coordinator.start()
    try:
        replicas.become_leader_or_follower(leader_and_isr(0))
        yield replicas, coordinator
    finally:
        coordinator.close()
        replicas.close()
        logs.close()
        state_log.close()


def led_again(replicas: ReplicaManager, epoch: int) -> None:
    """The partition led by another broker at ``epoch``, then here again at ``epoch + 1``:
    a new coordinator here, which reads it."""
    replicas.become_leader_or_follower(leader_and_isr(epoch, OTHER))
    replicas.become_leader_or_follower(leader_and_isr(epoch + 1))


def write_commits(replicas: ReplicaManager, commits: int, partitions: int, groups: int) -> None:
    """``commits`` offset commits, each of ``partitions`` partitions of topic "orders" by
    one of ``groups`` groups in turn (commit i is group i % groups's, at offset i)."""
    now = int(time.time() * 1000)
    for i in range(commits):
        group = f"group-{i % groups}"
        batch = offset_commit_batch(
            [
                (OffsetKey(group, "orders", p), CommittedOffset(i, 0, "", now))
                for p in range(partitions)
            ],
            now,
        )
        error, _p, _info, message = replicas.append_as_leader(OFFSETS_TP, batch, -1)
        if error != ErrorCode.NONE:
            raise RuntimeError(f"append {i}: {error.name} {message}")


def run(commits: int, partitions: int, groups: int, rounds: int) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        offsets_leader(Path(tmp)) as (
            replicas,
            coordinator,
        ),
    ):
        write_commits(replicas, commits, partitions, groups)
        p = replicas.partitions[OFFSETS_TP]
        assert p.log is not None
        size_mb = p.log.size_in_bytes / 1e6
        load_s: list[float] = []
        floor_s: list[float] = []
        for r in range(rounds):
            started = time.perf_counter()
            led_again(replicas, 2 * r + 1)
            while coordinator.coordinates("group-0") != ErrorCode.NONE:
                time.sleep(0.001)
            load_s.append(time.perf_counter() - started)
            error, found = coordinator.fetch_offsets("group-0", None)
            last = max(i for i in range(commits) if i % groups == 0)
            if error != ErrorCode.NONE or {v.offset for v in found.values() if v} != {last}:
                raise RuntimeError(f"loaded wrong offsets: {error}, {found}")
            started = time.perf_counter()
            position, end, batches = p.log.log_start_offset, p.log.log_end_offset, 0
            while position < end:
                read = p.log.read(position, 4 * 1024 * 1024, end)
                if read.region is None:
                    break
                batches += sum(1 for _ in iter_batches(read.region.to_bytes()))
                position = read.next_offset
            floor_s.append(time.perf_counter() - started)
            if batches != commits:
                raise RuntimeError(f"read {batches} batches of {commits}")
    load = statistics.median_high(load_s)
    floor = statistics.median_high(floor_s)
    return {
        "benchmark": "group_load",
        "commits": commits,
        "partitions_per_commit": partitions,
        "groups": groups,
        "log_mb": round(size_mb, 1),
        "load_s": [round(s, 3) for s in load_s],
        "floor_read_batches_s": [round(s, 3) for s in floor_s],
        "load_vs_floor": round(load / floor, 1),
        "load_s_per_million_commits": round(load / commits * 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--rounds", type=at_least(1), default=3)
    args = parser.parse_args()
    emit(run(args.commits, args.partitions, args.groups, args.rounds))


if __name__ == "__main__":
    main()

"""Offset commits through the group coordinator, against their floor.

A 3-broker cluster, `__consumer_offsets` with one partition (3 replicas), so one broker
coordinates every group. A client on one connection to that broker commits the offsets
of P partitions, one OffsetCommit after another (each answered once every in-sync
replica has the commit's record). Floor, in the same run, on the same broker: a Produce
with acks=all of the very batch the commit writes, to a topic whose one partition has
the same leader and replicas; what a commit costs beyond it is the coordinator's work
(the group's checks, the record's encoding, the cache). Also timed: a group of M members
formed from nothing (JoinGroup twice each, KIP-394, then SyncGroup) with
`group.initial.rebalance.delay.ms=0`, the time until every member has its assignment.

    .venv/bin/python benchmarks/bench_group_commit.py [--commits 2000] [--partitions 10]
        [--members 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from common import at_least, chroot, emit, wait_quiet, zookeeper

from cluster.supervised import SupervisedCluster
from groups.offset_records import CommittedOffset, OffsetKey, offset_commit_batch
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode

GROUP = "bench"
FLOOR_TOPIC = "floor"
COMMITTED_TOPIC = "orders"
SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def coordinator(c: SupervisedCluster) -> int:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with KafkaConnection("127.0.0.1", c[1].port()) as conn:
            answer = conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        if answer["error_code"] == ErrorCode.NONE:
            return int(answer["node_id"])
        time.sleep(0.2)
    raise TimeoutError("no coordinator in 120 s")


def commit_body(partitions: int, offset: int) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": COMMITTED_TOPIC,
                "partitions": [
                    {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": 0}
                    for p in range(partitions)
                ],
            }
        ],
    }


def wait_known(conn: KafkaConnection, partitions: int) -> None:
    """Until the coordinator's metadata knows the committed topic's partitions."""
    deadline = time.monotonic() + 60
    while True:
        answer = conn.request(ApiKey.OFFSET_COMMIT, 6, commit_body(partitions, 0))
        codes = {p["error_code"] for t in answer["topics"] for p in t["partitions"]}
        if codes == {0}:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"commits refused: {codes}")
        time.sleep(0.05)


def time_commits(conn: KafkaConnection, commits: int, partitions: int) -> list[float]:
    out = []
    for i in range(commits):
        started = time.perf_counter()
        answer = conn.request(ApiKey.OFFSET_COMMIT, 6, commit_body(partitions, i))
        out.append(time.perf_counter() - started)
        codes = {p["error_code"] for t in answer["topics"] for p in t["partitions"]}
        if codes != {0}:
            raise RuntimeError(f"commit {i} refused: {codes}")
    return out


def time_produces(conn: KafkaConnection, commits: int, partitions: int) -> list[float]:
    out = []
    for i in range(commits):
        batch = offset_commit_batch(
            [
                (
                    OffsetKey(GROUP, COMMITTED_TOPIC, p),
                    CommittedOffset(i, 0, "", int(time.time() * 1000)),
                )
                for p in range(partitions)
            ],
            int(time.time() * 1000),
        )
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 30_000,
            "topic_data": [
                {"name": FLOOR_TOPIC, "partition_data": [{"index": 0, "records": batch}]}
            ],
        }
        started = time.perf_counter()
        answer = conn.request(ApiKey.PRODUCE, 8, body)
        out.append(time.perf_counter() - started)
        code = answer["responses"][0]["partition_responses"][0]["error_code"]
        if code != 0:
            raise RuntimeError(f"produce {i} refused: {code}")
    return out


def form_group(port: int, members: int) -> float:
    """Seconds from the first JoinGroup until all ``members`` fresh members hold their
    assignment in one generation of all of them. Each behaves as a consumer does: it
    joins, syncs, heartbeats, and joins again when told REBALANCE_IN_PROGRESS (with no
    initial delay, the first members form a generation of their own before the others
    arrive)."""
    group = f"formed-{port}-{members}-{time.monotonic_ns()}"
    barrier = threading.Barrier(members + 1)
    lock = threading.Lock()
    synced: dict[int, int] = {}  # member -> generation whose assignment it holds
    sizes: dict[int, int] = {}  # generation -> members in it (the leader's answer)
    stop = threading.Event()
    formed = threading.Event()
    errors: list[str] = []

    def member(i: int) -> None:
        join: dict[str, Any] = {
            "group_id": group,
            "session_timeout_ms": 30_000,
            "rebalance_timeout_ms": 30_000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"m%d" % i}],
        }
        with KafkaConnection("127.0.0.1", port, client_id=f"m{i}") as conn:
            barrier.wait()
            join["member_id"] = conn.request(ApiKey.JOIN_GROUP, 4, join)["member_id"]
            while not stop.is_set():
                joined = conn.request(ApiKey.JOIN_GROUP, 4, join)
                if joined["error_code"] != ErrorCode.NONE:
                    with lock:
                        errors.append(f"join: {joined['error_code']}")
                    return
                generation = joined["generation_id"]
                answer = conn.request(
                    ApiKey.SYNC_GROUP,
                    2,
                    {
                        "group_id": group,
                        "generation_id": generation,
                        "member_id": join["member_id"],
                        "assignments": [
                            {"member_id": m["member_id"], "assignment": b"a"}
                            for m in joined["members"]
                        ],
                    },
                )
                if answer["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS:
                    continue
                with lock:
                    if answer["error_code"] != ErrorCode.NONE:
                        errors.append(f"sync: {answer['error_code']}")
                        return
                    synced[i] = generation
                    if joined["members"]:
                        sizes[generation] = len(joined["members"])
                    if (
                        len(synced) == members
                        and len(set(synced.values())) == 1
                        and sizes.get(generation) == members
                    ):
                        formed.set()
                beat = {
                    "group_id": group,
                    "generation_id": generation,
                    "member_id": join["member_id"],
                }
                while not stop.is_set():
                    code = conn.request(ApiKey.HEARTBEAT, 2, beat)["error_code"]
                    if code == ErrorCode.REBALANCE_IN_PROGRESS:
                        break
                    if code != ErrorCode.NONE:
                        with lock:
                            errors.append(f"heartbeat: {code}")
                        return
                    stop.wait(0.02)

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    ok = formed.wait(timeout=120)
    took = time.perf_counter() - started
    stop.set()
    for t in threads:
        t.join(timeout=60)
    if not ok or errors:
        raise RuntimeError(f"group not formed: {errors[:3]}")
    return took


def run(commits: int, partitions: int, members: int, rounds: int) -> dict[str, Any]:
    with zookeeper() as zk_connect, tempfile.TemporaryDirectory() as tmp:
        c = SupervisedCluster(chroot(zk_connect, "group-commit"), Path(tmp), (1, 2, 3), SETTINGS)
        try:
            c.start()
            c.wait_registered([1, 2, 3], timeout=120)
            c.wait_controller(timeout=120)
            leader = coordinator(c)
            others = tuple(b for b in (1, 2, 3) if b != leader)
            c.create_topic(FLOOR_TOPIC, {0: (leader, *others)})
            # The committed topic must be known to the coordinator's metadata (else
            # UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers).
            c.create_topic(COMMITTED_TOPIC, {p: (leader, *others) for p in range(partitions)})
            c.wait_topic_online(FLOOR_TOPIC)
            c.wait_topic_online(COMMITTED_TOPIC)
            wait_quiet(c.zk_connect)
            commit_ms: list[float] = []
            produce_ms: list[float] = []
            formed_s: list[float] = []
            with KafkaConnection("127.0.0.1", c[leader].port()) as conn:
                wait_known(conn, partitions)
                time_commits(conn, 50, partitions)  # warm up both paths
                time_produces(conn, 50, partitions)
                for _ in range(rounds):
                    commit_ms.append(
                        statistics.median_high(time_commits(conn, commits, partitions))
                    )
                    produce_ms.append(
                        statistics.median_high(time_produces(conn, commits, partitions))
                    )
            for _ in range(rounds):
                formed_s.append(form_group(c[leader].port(), members))
        finally:
            c.close()
    commit = statistics.median_high(commit_ms) * 1000
    floor = statistics.median_high(produce_ms) * 1000
    return {
        "benchmark": "group_commit",
        "commits": commits,
        "partitions_per_commit": partitions,
        "rounds": rounds,
        "commit_median_ms": round(commit, 3),
        "floor_produce_acks_all_median_ms": round(floor, 3),
        "commit_vs_floor": round(commit / floor, 2),
        "commits_per_s": round(1000 / commit, 1),
        "members": members,
        "group_formed_s": [round(s, 3) for s in formed_s],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=at_least(1), default=2000)
    parser.add_argument("--partitions", type=at_least(1), default=10)
    parser.add_argument("--members", type=at_least(1), default=10)
    parser.add_argument("--rounds", type=at_least(1), default=3)
    args = parser.parse_args()
    emit(run(args.commits, args.partitions, args.members, args.rounds))


if __name__ == "__main__":
    main()

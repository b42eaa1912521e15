"""Leaders moved when a broker leading 10,000 partitions is lost, or shut down gracefully.

A 3-broker cluster (RF 3) in which broker 3 leads every partition (made so by a preferred
replica election), broker 1 being the controller. Then:

* broker loss: SIGKILL broker 3. The figure is the time from the moment the controller
  learns of the loss (its /brokers/ids watch fires) until every broker acknowledged the
  LeaderAndIsr requests of the new leaders, and the leaders re-elected per second. Floor,
  measured in the same run: the same number of epoch-checked conditional writes of
  partition state znodes, as fast as the client can issue them (packed multis, pipelined),
  and the same writes issued one multi per partition (Kafka's way).
* controlled shutdown: SIGTERM broker 3. The figure is the ControlledShutdown round trip
  as the broker sees it (every leadership moved away before the answer), and the time until
  every broker acknowledged the new leaders.

    .venv/bin/python benchmarks/bench_leader_moves.py [--partitions 10000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from common import chroot, emit, wait_quiet, write_cluster_state, zookeeper

from cluster.supervised import SupervisedCluster, wait_for
from zkdata import paths
from zkdata.client import Check, SetData, ZkClient
from zkdata.znodes import (
    LeaderAndIsr,
    TopicPartition,
    encode_partition_list,
    encode_partition_state,
)

SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "auto.leader.rebalance.enable": "false",
    "controlled.shutdown.retry.backoff.ms": "200",
}


def assignment(partitions: int) -> dict[str, dict[int, tuple[int, ...]]]:
    per_topic = 1000
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for t in range(partitions // per_topic):
        out[f"topic-{t:04d}"] = {p: (3, 1, 2) if p % 2 else (3, 2, 1) for p in range(per_topic)}
    return out


def last(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    for r in reversed(rows):
        if all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def cluster_led_by_broker_3(connect: str, partitions: int, root: Path) -> SupervisedCluster:
    write_cluster_state(connect, assignment(partitions))
    c = SupervisedCluster(connect, root, (1, 2, 3), SETTINGS)
    c[1].start()  # broker 1 first, so it is the controller
    c.wait_registered([1], timeout=120)
    c.wait_controller(timeout=600)
    c[2].start()
    c[3].start()
    c.wait_registered([1, 2, 3], timeout=120)
    wait_quiet(connect)
    # Move every leadership to broker 3 (the preferred replica) and let it settle.
    everything = [
        TopicPartition(t, p) for t, parts in assignment(partitions).items() for p in parts
    ]
    c.zk.create(paths.PREFERRED_REPLICA_ELECTION, encode_partition_list(everything))
    wait_for(
        lambda: c.zk.exists(paths.PREFERRED_REPLICA_ELECTION) is None, 600, "the preferred election"
    )
    wait_for(
        lambda: all(
            s.leader == 3 for t in assignment(partitions) for s in c.partition_states(t).values()
        ),
        600,
        "broker 3 to lead every partition",
    )
    wait_quiet(connect)
    time.sleep(2)
    return c


def floor_writes(connect: str, partitions: int) -> dict[str, float]:
    """Epoch-checked conditional writes of `partitions` state znodes, two ways."""
    zk = ZkClient(connect, session_timeout_ms=30_000)
    zk.start()
    try:
        zk.ensure_paths(["/floor"])
        zk.create("/floor/epoch", b"1")
        state = encode_partition_state(LeaderAndIsr(1, 1, (1, 2)), 1)
        pending = [zk.kazoo.create_async(f"/floor/p{i}", state) for i in range(partitions)]
        for p in pending:
            p.get(timeout=120)
        check = Check("/floor/epoch", 0)
        items = [[SetData(f"/floor/p{i}", state, 0)] for i in range(partitions)]
        started = time.perf_counter()
        results = zk.multi_batched(items, check=check)  # the controller's way
        packed = time.perf_counter() - started
        if any(isinstance(r, Exception) for item in results for r in item):
            raise RuntimeError("a floor write failed")
        started = time.perf_counter()
        one_by_one = [
            zk._multi_async([check, SetData(f"/floor/p{i}", state, 1)]) for i in range(partitions)
        ]
        for p in one_by_one:
            p.get(timeout=120)
        return {
            "packed_multis_s": round(packed, 3),
            "one_multi_per_partition_s": round(time.perf_counter() - started, 3),
        }
    finally:
        zk.close()


def run(connect_base: str, partitions: int, root: Path) -> dict[str, Any]:
    connect = chroot(connect_base, f"loss-{partitions}")
    c = cluster_led_by_broker_3(connect, partitions, root / "loss")
    try:
        controller_id, _ = c.wait_controller()
        if controller_id != 1:
            raise RuntimeError(f"broker {controller_id} is controller; the set-up wants broker 1")
        killed_at_ms = time.time() * 1000
        c[3].kill()
        ack = wait_for(
            lambda: next(
                (
                    r
                    for r in reversed(c[1].state_changes("requests_acknowledged"))
                    if r["after_event"] == "BrokerChange" and r["learned_at_ms"] > killed_at_ms
                ),
                None,
            ),
            c.session_timeout_s + 600,
            "the new leaders to be acknowledged",
        )
        moved = [
            r for r in c[1].state_changes("partition_state") if r["ts"] >= ack["learned_at_ms"]
        ]
        loss = {
            "leaders_moved": sum(
                1 for r in moved if r["reason"] == "offline" and r["leader"] in (1, 2)
            ),
            "learned_to_all_acked_s": round(ack["acked_ms"] / 1000, 3),
            "leader_and_isr_acked_s": round(
                ack["acked_ms_by_api"].get("LEADER_AND_ISR", 0) / 1000, 3
            ),
            "requests": ack["requests"],
        }
        loss["leaders_per_s"] = round(loss["leaders_moved"] / loss["learned_to_all_acked_s"])
    finally:
        c.close()
    floor = floor_writes(chroot(connect_base, "floor"), partitions)
    loss["floor"] = floor
    loss["vs_floor_packed"] = round(loss["learned_to_all_acked_s"] / floor["packed_multis_s"], 2)

    connect = chroot(connect_base, f"shutdown-{partitions}")
    c = cluster_led_by_broker_3(connect, partitions, root / "shutdown")
    try:
        c[3].terminate()
        row = wait_for(
            lambda: last(c[3].state_changes("controlled_shutdown"), remaining=0),
            600,
            "the controlled shutdown to succeed",
        )
        c[3].wait_exit(120)
        ack = wait_for(
            lambda: last(
                c[1].state_changes("requests_acknowledged"), after_event="ControlledShutdown"
            ),
            60,
            "the shutdown's requests to be acknowledged",
        )
        by_broker = ack["acked_ms_by_broker"]
        shutdown = {
            "attempts": row["attempt"],
            "controlled_shutdown_round_trip_s": round(row["ms"] / 1000, 3),
            "new_leaders_acknowledged_s": round(
                max(by_broker.get("1", 0), by_broker.get("2", 0)) / 1000, 3
            ),
            "requests": ack["requests"],
        }
    finally:
        c.close()
    return {
        "partitions_led_by_the_broker": partitions,
        "broker_loss": loss,
        "controlled_shutdown": shutdown,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=10_000)
    args = parser.parse_args()
    with zookeeper() as connect, tempfile.TemporaryDirectory(prefix="bench-leaders-") as tmp:
        result = run(connect, args.partitions, Path(tmp))
    emit(
        {
            "benchmark": "leader_moves",
            "goals": {
                "broker_loss_s": 1.0,
                "broker_loss_vs_floor": 1.5,
                "controlled_shutdown_s": 1.5,
            },
            "kafka_reference": {"kafka_1.1_controlled_shutdown_s": 3},
            **result,
        }
    )


if __name__ == "__main__":
    main()

"""Leaders moved when a broker leading 10,000 partitions is lost, or shut down gracefully.

A 3-broker cluster (RF 3) in which broker 3 leads every partition (made so by a preferred
replica election), broker 1 being the controller. Then:

* broker loss: SIGKILL broker 3. The figure is the time from the moment the controller
  learns of the loss (its /brokers/ids watch fires) until every broker acknowledged the
  LeaderAndIsr requests of the new leaders, and the leaders re-elected per second. Floor,
  measured in the same run: the same number of epoch-checked conditional writes of
  partition state znodes, as fast as the client can issue them (packed multis, pipelined),
  and the same writes issued one multi per partition (Kafka's way). Beside it, the CPU
  brokers 1 and 2 used until then (sampled every 20 ms): the controller's process does
  its event thread's work, its senders' and its own broker's share of the requests under
  one GIL, so it runs near one core whatever ZooKeeper's pace.
* broker loss in a balanced cluster: 3x as many partitions, each broker leading a third
  (its preferred ones), so broker 3 leads N and follows 2N. SIGKILL broker 3. Figures:
  the time until both survivors applied the new leaders of the N partitions it led (their
  clients can produce again), and until every request of the loss, including the 2N
  partitions whose ISRs lost broker 3, was acknowledged.
* controlled shutdown in the same balanced cluster: SIGTERM broker 3; the figures as for
  its loss, and the ControlledShutdown round trip.
* controlled shutdown: SIGTERM broker 3. The figure is the ControlledShutdown round trip
  as the broker sees it (every leadership moved away before the answer), and the time until
  every broker acknowledged the new leaders, with the CPU brokers 1 and 2 used until then.
* broker return, after the balanced cluster's loss: broker 3 started again (3N partitions,
  N of them preferring it). The figure is the time from the moment the controller learns
  of its registration (its /brokers/ids watch fires) until every broker acknowledged that
  event's requests (UpdateMetadata to every broker, the cluster's metadata and every
  replica's state to broker 3), and the brokers already up apart (they need to hear only
  that broker 3 is back). Floor, in the same run: broker 3's own acknowledgement of the
  event's requests, which are the bulk of it.

    .venv/bin/python benchmarks/bench_leader_moves.py [--partitions 10000]
        [--parts loss,balanced_loss,balanced_shutdown,shutdown]

(broker return is measured with balanced_loss)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    CpuSampler,
    chroot,
    elect_preferred_leaders,
    emit,
    last,
    require_acknowledged,
    wait_quiet,
    write_cluster_state,
    zookeeper,
)

from cluster.supervised import SupervisedCluster, wait_for
from zkdata import paths
from zkdata.client import Check, SetData, ZkClient
from zkdata.znodes import (
    LeaderAndIsr,
    decode_partition_state,
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


def cluster_led_by_broker_3(connect: str, partitions: int, root: Path) -> SupervisedCluster:
    """Broker 3 leads every partition (its preferred replica); broker 1 is the controller."""
    return cluster_led_by_preferred_replicas(connect, assignment(partitions), root)


def cluster_led_by_preferred_replicas(
    connect: str, assigned: dict[str, dict[int, tuple[int, ...]]], root: Path
) -> SupervisedCluster:
    """A 3-broker cluster whose every partition is led by its preferred (first) replica,
    settled; broker 1 is the controller."""
    write_cluster_state(connect, assigned)
    c = SupervisedCluster(connect, root, (1, 2, 3), SETTINGS)
    try:
        c[1].start()  # broker 1 first, so it is the controller
        c.wait_registered([1], timeout=120)
        c.wait_controller(timeout=600)
        c[2].start()
        c[3].start()
        c.wait_registered([1, 2, 3], timeout=120)
        wait_quiet(connect)
        elect_preferred_leaders(c.zk, assigned)
        state_paths = [paths.partition_state(t, p) for t in assigned for p in assigned[t]]
        preferred = [assigned[t][p][0] for t in assigned for p in assigned[t]]

        def led_by_preferred() -> bool:
            got = c.zk.get_many(state_paths)
            return all(
                g is not None and decode_partition_state(sp, g[0], 0).leader_and_isr.leader == want
                for sp, g, want in zip(state_paths, got, preferred, strict=True)
            )

        wait_for(led_by_preferred, 600, "every partition led by its preferred replica")
        wait_quiet(connect)
        time.sleep(2)
    except BaseException:
        # A timeout or Ctrl-C while it settles: the caller never gets the cluster to
        # close, and its brokers would outlive the benchmark.
        c.close()
        raise
    return c


def kill_broker_3(c: SupervisedCluster) -> dict[str, Any]:
    """SIGKILL broker 3; the controller's (broker 1's) record of the loss's requests, once
    every one of them was acknowledged."""
    killed_at_ms = time.time() * 1000
    c[3].kill()
    ack: dict[str, Any] = wait_for(
        lambda: next(
            (
                r
                for r in reversed(c[1].state_changes("requests_acknowledged"))
                if r["after_event"] == "BrokerChange" and r["learned_at_ms"] > killed_at_ms
            ),
            None,
        ),
        c.session_timeout_s + 600,
        "the loss's requests to be acknowledged",
    )
    return ack


def restart_broker_3(c: SupervisedCluster) -> dict[str, Any]:
    """Broker 3, lost, started again; the controller's (broker 1's) record of the
    requests of the BrokerChange that started it, once every one was acknowledged."""
    started_at_ms = time.time() * 1000
    c[3].start()
    row: dict[str, Any] = wait_for(
        lambda: next(
            (
                r
                for r in reversed(c[1].state_changes("requests_acknowledged"))
                if r["after_event"] == "BrokerChange" and r["learned_at_ms"] > started_at_ms
            ),
            None,
        ),
        600,
        "the return's requests to be acknowledged",
    )
    return row


def broker_return(row: dict[str, Any]) -> dict[str, Any]:
    require_acknowledged(row, (1, 2, 3), "the return's requests")
    by_broker = row["acked_ms_by_broker"]
    return {
        "learned_to_all_acked_s": round(row["acked_ms"] / 1000, 3),
        "brokers_up_acked_s": round(max(by_broker.get("1", 0), by_broker.get("2", 0)) / 1000, 3),
        "floor_returning_broker_acked_s": round(by_broker.get("3", 0) / 1000, 3),
        "requests": row["requests"],
    }


def shut_down_broker_3(c: SupervisedCluster) -> tuple[dict[str, Any], dict[str, Any]]:
    """SIGTERM broker 3; its record of the successful controlled shutdown, and the
    controller's record of the shutdown's requests, once every one was acknowledged."""
    c[3].terminate()
    row: dict[str, Any] = wait_for(
        lambda: last(c[3].state_changes("controlled_shutdown"), remaining=0),
        600,
        "the controlled shutdown to succeed",
    )
    c[3].wait_exit(120)
    ack: dict[str, Any] = wait_for(
        lambda: last(c[1].state_changes("requests_acknowledged"), after_event="ControlledShutdown"),
        60,
        "the shutdown's requests to be acknowledged",
    )
    return row, ack


def balanced_assignment(partitions: int) -> dict[str, dict[int, tuple[int, ...]]]:
    """`partitions` per broker as the preferred (first) replica, RF 3."""
    per_topic = 1000
    return {
        f"topic-{t:04d}": {
            p: tuple((1, 2, 3)[(p + t + i) % 3] for i in range(3)) for p in range(per_topic)
        }
        for t in range(3 * partitions // per_topic)
    }


def balanced_moves(connect: str, partitions: int, root: Path, *, graceful: bool) -> dict[str, Any]:
    """Broker 3 of a balanced cluster lost (SIGKILL) or shut down (SIGTERM)."""
    assigned = balanced_assignment(partitions)
    c = cluster_led_by_preferred_replicas(connect, assigned, root)
    try:
        led = {
            (t, p)
            for t, parts in assigned.items()
            for p, replicas in parts.items()
            if replicas[0] == 3
        }
        out: dict[str, Any] = {"partitions": 3 * partitions, "led_by_the_broker": len(led)}
        if graceful:
            row, ack = shut_down_broker_3(c)
            out["controlled_shutdown_round_trip_s"] = round(row["ms"] / 1000, 3)
        else:
            ack = kill_broker_3(c)
        learned = ack["learned_at_ms"]
        # Each survivor logs a line per partition (one as its new leader, one as a
        # follower): the partitions are counted once, and only states applied.
        applied = [
            r
            for b in (1, 2)
            for r in c[b].state_changes("leader_and_isr")
            if r["ts"] >= learned
            and (r["topic"], r["partition"]) in led
            and r["result"] == "applied"
            and r["leader"] in (1, 2)
        ]
        out["new_leaders_applied"] = len({(r["topic"], r["partition"]) for r in applied})
        if out["new_leaders_applied"] != len(led):
            raise RuntimeError(
                f"{out['new_leaders_applied']} of the {len(led)} partitions broker 3 led"
                " applied a new leader"
            )
        require_acknowledged(
            ack, (1, 2), "the requests of broker 3's loss or shutdown", abandoned_ok=graceful
        )
        out["learned_to_new_leaders_applied_s"] = round(
            max((r["ts"] - learned for r in applied), default=0) / 1000, 3
        )
        out["learned_to_all_acked_s"] = round(ack["acked_ms"] / 1000, 3)
        out["requests"] = ack["requests"]
        if not graceful:
            out["broker_return"] = broker_return(restart_broker_3(c))
        return out
    finally:
        c.close()


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


PARTS = ("loss", "balanced_loss", "balanced_shutdown", "shutdown")


def run(
    connect_base: str, partitions: int, root: Path, parts: tuple[str, ...] = PARTS
) -> dict[str, Any]:
    out: dict[str, Any] = {"partitions_led_by_the_broker": partitions}
    if "loss" in parts:
        out["broker_loss"] = lone_leader_loss(connect_base, partitions, root)
    if "balanced_loss" in parts:
        out["broker_loss_balanced"] = balanced_moves(
            chroot(connect_base, f"balanced-loss-{partitions}"),
            partitions,
            root / "balanced-loss",
            graceful=False,
        )
    if "balanced_shutdown" in parts:
        out["controlled_shutdown_balanced"] = balanced_moves(
            chroot(connect_base, f"balanced-shutdown-{partitions}"),
            partitions,
            root / "balanced-shutdown",
            graceful=True,
        )
    if "shutdown" in parts:
        out["controlled_shutdown"] = lone_leader_shutdown(connect_base, partitions, root)
    return out


def cpu_until_acked(cpu: CpuSampler, c: SupervisedCluster, ack: dict[str, Any]) -> dict[str, Any]:
    """The CPU brokers 1 (the controller) and 2 used from the moment the controller learned
    of the event until every broker acknowledged its requests: the controller's process
    runs its event thread, its senders and its own broker's share of the requests under
    one GIL, so near one core it is the bound, not ZooKeeper."""
    learned = ack["learned_at_ms"]
    return {f"broker_{b}": cpu.used(c[b].pid, learned, learned + ack["acked_ms"]) for b in (1, 2)}


def loss_figures(
    ack: dict[str, Any], partition_states: list[dict[str, Any]], partitions: int
) -> dict[str, Any]:
    """Broker 3, leader of all `partitions`, lost: the controller's record of the loss's
    requests and its partition_state lines make the figures, only if every partition got
    a new leader on broker 1 or 2 and both acknowledged their LeaderAndIsr (RuntimeError
    otherwise: a figure of part of the work is no figure)."""
    moved = {
        (r["topic"], r["partition"])
        for r in partition_states
        if r["ts"] >= ack["learned_at_ms"] and r["reason"] == "offline" and r["leader"] in (1, 2)
    }
    if len(moved) != partitions:
        raise RuntimeError(f"{len(moved)} of {partitions} partitions got a new leader")
    require_acknowledged(ack, (1, 2), "the loss's requests")
    if "LEADER_AND_ISR" not in ack["acked_ms_by_api"]:
        raise RuntimeError(f"the loss sent no LeaderAndIsr (requests {ack['requests']})")
    all_acked_s = ack["acked_ms"] / 1000
    return {
        "leaders_moved": len(moved),
        "learned_to_all_acked_s": round(all_acked_s, 3),
        "leader_and_isr_acked_s": round(ack["acked_ms_by_api"]["LEADER_AND_ISR"] / 1000, 3),
        "requests": ack["requests"],
        "leaders_per_s": round(len(moved) / all_acked_s),
    }


def lone_leader_loss(connect_base: str, partitions: int, root: Path) -> dict[str, Any]:
    connect = chroot(connect_base, f"loss-{partitions}")
    c = cluster_led_by_broker_3(connect, partitions, root / "loss")
    try:
        controller_id, _ = c.wait_controller()
        if controller_id != 1:
            raise RuntimeError(f"broker {controller_id} is controller; the set-up wants broker 1")
        with CpuSampler([c[1].pid, c[2].pid]) as cpu:
            ack = kill_broker_3(c)
        loss = loss_figures(ack, c[1].state_changes("partition_state"), partitions)
        loss["cpu_until_all_acked"] = cpu_until_acked(cpu, c, ack)
    finally:
        c.close()
    floor = floor_writes(chroot(connect_base, "floor"), partitions)
    loss["floor"] = floor
    loss["vs_floor_packed"] = round(loss["learned_to_all_acked_s"] / floor["packed_multis_s"], 2)
    return loss


def lone_leader_shutdown(connect_base: str, partitions: int, root: Path) -> dict[str, Any]:
    connect = chroot(connect_base, f"shutdown-{partitions}")
    c = cluster_led_by_broker_3(connect, partitions, root / "shutdown")
    try:
        with CpuSampler([c[1].pid, c[2].pid]) as cpu:
            row, ack = shut_down_broker_3(c)
        require_acknowledged(ack, (1, 2), "the shutdown's requests", abandoned_ok=True)
        by_broker = ack["acked_ms_by_broker"]
        shutdown = {
            "attempts": row["attempt"],
            "controlled_shutdown_round_trip_s": round(row["ms"] / 1000, 3),
            "new_leaders_acknowledged_s": round(
                max(by_broker.get("1", 0), by_broker.get("2", 0)) / 1000, 3
            ),
            "requests": ack["requests"],
            "cpu_until_all_acked": cpu_until_acked(cpu, c, ack),
        }
    finally:
        c.close()
    # The issue names no floor for it; the loss's is the closest: the same number of
    # epoch-checked writes the leadership moves make.
    floor = floor_writes(chroot(connect_base, "floor-shutdown"), partitions)
    shutdown["floor"] = floor
    shutdown["round_trip_vs_floor_packed"] = round(
        shutdown["controlled_shutdown_round_trip_s"] / floor["packed_multis_s"], 2
    )
    return shutdown


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="which to run, comma-separated: " + ", ".join(PARTS),
    )
    args = parser.parse_args()
    if args.partitions <= 0 or args.partitions % 1000:
        # Topics of 1000 partitions each: another count would build fewer than reported,
        # and the floor would make more writes than the controller.
        parser.error(f"--partitions must be a positive multiple of 1000, not {args.partitions}")
    parts = tuple(p for p in args.parts.split(",") if p)
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts: {sorted(unknown)}")
    with zookeeper() as connect, tempfile.TemporaryDirectory(prefix="bench-leaders-") as tmp:
        result = run(connect, args.partitions, Path(tmp), parts)
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

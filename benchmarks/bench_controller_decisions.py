"""The controller's own work on a broker loss, in one process against a real ZooKeeper.

bench_leader_moves.py times a broker loss end to end in a 3-broker cluster, where the
brokers and ZooKeeper share the CPU with the controller; this one times only what the
controller's event thread does, so a change to it shows. Each round: ZooKeeper holds N
partition states (RF 3) all led by broker 3, a controller context is loaded from them,
broker 3 is removed and `replicas_become_offline` runs as the controller runs it (the
elections from the cached states, their conditional writes through the fenced write
path, the state-change log lines, the ISR step, the requests built); then the requests'
wire bodies are encoded (the channel's senders do that, on their own threads). Floor, in
the same run and against the same server: the same number of epoch-checked conditional
writes of partition state znodes, packed and pipelined through the same client
(bench_leader_moves.py's). Medians of --rounds rounds after one warm-up, in seconds.
Beside it, the replica state machine's start-up on the loaded context (a failover's step
that puts every replica Online and queues its partition's state for its broker), and a
controlled shutdown in a balanced cluster: 3N partitions, each broker the preferred leader
of N, broker 3 shutting down (`controlled_shutdown_moves`: N leaders moved, broker 3 taken
out of the 2N ISRs it is in as a follower), with its floor: 3N packed writes. And the
failover after a controller crashed (the common one): broker 3, which led the N
partitions, was the controller; a context loaded with brokers 1 and 2 live runs the
failover's state machine start-up (`start_state_machines`: replicas Online, elections,
the dead replicas out of the ISRs), against the floor of N packed writes; how many times
each partition's state znode was written is read back from its zkVersion. And a topic
deletion of the N partitions (every topic deleted at once) up to its StopReplicas built,
against the same floor (one write a partition), its writes a partition read back as well;
then each broker's answer that it deleted its replicas (the last one completing every
topic, its znodes deleted). And two brokers lost at once (a rack, say) in the balanced
cluster: brokers 2 and 3 of 3N partitions, 2N of them elected to broker 1 and N, led by
broker 1, with both out of their ISRs; its floor 3N packed writes, its writes a partition
read back.

    .venv/bin/python benchmarks/bench_controller_decisions.py [--partitions 10000] [--rounds 5]
        [--parts loss,shutdown,crash,deletion,two_lost]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_leader_moves import assignment, balanced_assignment, floor_writes
from common import at_least, chroot, drop_chroot, emit, write_cluster_state, zookeeper

from broker.server import set_gc_thresholds
from broker.state_change_log import StateChangeLog
from controller import reactions
from controller.context import (
    ControllerContext,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    ReplicaAssignment,
    ReplicaStateName,
)
from controller.request_batch import BrokerRequest
from controller.state_machines import ControllerOps, PartitionStateMachine, ReplicaStateMachine
from controller.store import ZkControllerStore
from controller.topic_deletion import TopicDeletionManager
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import BrokerRegistration, EndPoint, TopicPartition

LOST = 3


def loaded_context(
    zk: ZkClient,
    assigned: dict[str, dict[int, tuple[int, ...]]],
    live: tuple[int, ...] = (1, 2, 3),
) -> ControllerContext:
    """A context as a failover loads it: the `live` brokers, every assignment and state."""
    got = zk.get(paths.CONTROLLER_EPOCH)
    assert got is not None
    ctx = ControllerContext(epoch=1, epoch_zk_version=got[1].version)
    for b in live:
        ctx.add_live_brokers(
            {b: (BrokerRegistration(b, (EndPoint("PLAINTEXT", f"b{b}", 9092),)), 100 + b)}
        )
    tps = []
    for topic, parts in assigned.items():
        for p, replicas in parts.items():
            tp = TopicPartition(topic, p)
            ctx.update_assignment(tp, ReplicaAssignment(replicas))
            tps.append(tp)
    for tp, state in ZkControllerStore(zk).read_partition_states(tps).items():
        assert state is not None
        ctx.leadership[tp] = LeaderIsrAndControllerEpoch(
            state.leader_and_isr, state.controller_epoch
        )
    return ctx


Started = tuple[
    ControllerContext,
    ControllerOps,
    PartitionStateMachine,
    ReplicaStateMachine,
    list[list[BrokerRequest]],
]


@contextlib.contextmanager
def started_controller(
    connect: str,
    assigned: dict[str, dict[int, tuple[int, ...]]],
    live: tuple[int, ...] = (1, 2, 3),
    *,
    partition_step: bool = True,
) -> Iterator[Started]:
    """ZooKeeper holding `assigned` (RF 3, each partition led by its first replica), a
    controller context loaded from it with the `live` brokers, and its state machines,
    with the partition step of a failover done if `partition_step`; what they send is
    collected in the last item."""
    write_cluster_state(connect, assigned)
    zk = ZkClient(connect, session_timeout_ms=30_000)
    zk.start()
    try:
        ctx = loaded_context(zk, assigned, live)
        sent: list[list[BrokerRequest]] = []
        with tempfile.TemporaryDirectory(prefix="bench-decisions-") as d:
            ops = ControllerOps(ctx, ZkControllerStore(zk), 1, sent.append, StateChangeLog(d, 1))
            psm, rsm = PartitionStateMachine(ops), ReplicaStateMachine(ops)
            if partition_step:
                psm.startup()
            yield ctx, ops, psm, rsm, sent
    finally:
        zk.close()


def encode_sent(sent: list[list[BrokerRequest]]) -> int:
    """Encode the requests' wire bodies, as the channel's senders do; how many there were."""
    requests = [r for batch in sent for r in batch]
    for r in requests:
        r.wire_body()
    return len(requests)


def decided_and_written(started: Started, decide: Callable[[], object]) -> dict[str, Any]:
    """``decide`` timed, then the encoding of the requests it made; and how many times it
    wrote each partition's state znode, read back (its zkVersion: created at 0)."""
    ctx, ops, _psm, _rsm, sent = started
    gc.collect()
    start = time.perf_counter()
    decide()
    decided = time.perf_counter()
    requests = encode_sent(sent)
    encoded = time.perf_counter()
    states = ops.store.read_partition_states(list(ctx.leadership))
    writes = [s.leader_and_isr.zk_version for s in states.values() if s is not None]
    return {
        "decided_s": decided - start,
        "encoded_s": encoded - decided,
        "requests": requests,
        "writes": len(writes),
        "writes_per_partition": statistics.mean(writes) if writes else 0.0,
    }


def one_round(connect: str, partitions: int) -> dict[str, Any]:
    with started_controller(connect, assignment(partitions)) as (ctx, _ops, psm, rsm, sent):
        gc.collect()
        replica_step_started = time.perf_counter()
        rsm.startup()  # a failover's replica step: every replica Online, its state re-sent
        replica_step_s = time.perf_counter() - replica_step_started
        sent.clear()
        gc.collect()
        started = time.perf_counter()
        ctx.remove_live_brokers({LOST})
        reactions.replicas_become_offline(
            psm, rsm, ctx.replicas_on_brokers({LOST}), lambda _replicas: None
        )
        decided = time.perf_counter()
        requests = encode_sent(sent)
        encoded = time.perf_counter()
    moved = sum(1 for lice in ctx.leadership.values() if lice.leader_and_isr.leader in (1, 2))
    if moved != partitions:
        raise RuntimeError(f"{moved} of {partitions} leaders moved")
    return {
        "decided_s": decided - started,
        "encoded_s": encoded - decided,
        "requests": requests,
        "failover_replica_step_s": replica_step_s,
    }


def shutdown_round(connect: str, partitions: int) -> dict[str, Any]:
    """Broker 3 of a balanced cluster (3N partitions, each broker leading N) shut down."""
    assigned = balanced_assignment(partitions)
    with started_controller(connect, assigned) as (ctx, ops, psm, rsm, sent):
        rsm.startup()
        sent.clear()
        gc.collect()
        started = time.perf_counter()
        ops.deferred = True  # as inside an event: one request of each kind per broker
        led, remaining = reactions.controlled_shutdown_moves(psm, rsm, LOST)
        ops.deferred = False
        ops.flush()
        decided = time.perf_counter()
        requests = encode_sent(sent)
        encoded = time.perf_counter()
    in_isr = sum(1 for lice in ctx.leadership.values() if LOST in lice.leader_and_isr.isr)
    if len(led) != partitions or remaining or in_isr:
        raise RuntimeError(
            f"{len(led)} led, {len(remaining)} still led, {in_isr} ISRs still hold {LOST}"
        )
    return {
        "decided_s": decided - started,
        "encoded_s": encoded - decided,
        "requests": requests,
    }


def two_lost_round(connect: str, partitions: int) -> dict[str, Any]:
    """Brokers 2 and 3 of a balanced cluster (3N partitions, each broker leading N) lost
    at once: broker 1 leads every partition, alone in its ISR."""
    lost = {2, LOST}
    with started_controller(connect, balanced_assignment(partitions)) as started:
        ctx, _ops, psm, rsm, sent = started
        rsm.startup()
        sent.clear()

        def decide() -> None:
            ctx.remove_live_brokers(lost)
            reactions.replicas_become_offline(
                psm, rsm, ctx.replicas_on_brokers(lost), lambda _replicas: None
            )

        out = decided_and_written(started, decide)
    alone = sum(
        1
        for lice in ctx.leadership.values()
        if (lice.leader_and_isr.leader, lice.leader_and_isr.isr) == (1, (1,))
    )
    if alone != 3 * partitions or out["writes"] != 3 * partitions:
        raise RuntimeError(f"{alone} of {3 * partitions} led by 1 alone in the ISR")
    return out


def crash_failover_round(connect: str, partitions: int) -> dict[str, Any]:
    """The failover after broker 3, controller and leader of every partition, crashed."""
    with started_controller(
        connect, assignment(partitions), live=(1, 2), partition_step=False
    ) as started:
        ctx, _ops, psm, rsm, _sent = started
        out = decided_and_written(started, lambda: reactions.start_state_machines(psm, rsm))
    led = sum(1 for lice in ctx.leadership.values() if lice.leader_and_isr.leader in (1, 2))
    in_isr = sum(1 for lice in ctx.leadership.values() if LOST in lice.leader_and_isr.isr)
    if led != partitions or in_isr or out["writes"] != partitions:
        raise RuntimeError(f"{led} of {partitions} led by 1 or 2, {in_isr} ISRs still hold {LOST}")
    return out


def deletion_round(connect: str, partitions: int) -> dict[str, Any]:
    """Every topic deleted at once (KafkaController's TopicDeletion), up to the StopReplicas
    (delete=true) built: the partitions Offline then NonExistent, every replica Offline
    (out of the ISRs: the state znodes' writes) then ReplicaDeletionStarted."""
    with started_controller(connect, assignment(partitions)) as started:
        ctx, ops, psm, rsm, sent = started
        rsm.startup()
        sent.clear()
        deletion = TopicDeletionManager(ops, psm, rsm, ops.store, lambda _topic: None)

        def decide() -> None:
            ops.deferred = True  # as inside an event
            deletion.enqueue(sorted(ctx.all_topics))
            ops.deferred = False
            ops.flush()

        out = decided_and_written(started, decide)
        deleting = sum(
            1
            for held in ctx.replica_states.values()
            for _replica, state in held
            if state is ReplicaStateName.DELETION_STARTED
        )
        # Then each broker's answer (its StopReplica's partitions, all deleted), handled
        # as the controller's event thread does; the last completes every topic (its
        # znodes deleted).
        answer_s = []
        for broker_id in (1, 2, 3):
            done = [PartitionReplica(tp, broker_id) for tp in ctx.all_partitions()]
            gc.collect()
            start = time.perf_counter()
            ops.deferred = True
            deletion.complete_replica_deletion(done)
            ops.deferred = False
            ops.flush()
            answer_s.append(time.perf_counter() - start)
        left = len(ctx.all_topics)
    if deleting != 3 * partitions or out["writes"] != partitions or left:
        raise RuntimeError(
            f"{deleting} replicas being deleted, {out['writes']} states read, {left} topics left"
        )
    out["answer_s"] = statistics.mean(answer_s[:2])
    out["last_answer_s"] = answer_s[2]
    return out


PARTS = ("loss", "shutdown", "crash", "deletion", "two_lost")


def _rounded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def _median(rows: list[dict[str, Any]], key: str, digits: int = 3) -> float:
    return round(float(statistics.median_high(r[key] for r in rows)), digits)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=at_least(1), default=5)
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="which to run, comma-separated: " + ", ".join(PARTS),
    )
    args = parser.parse_args()
    if args.partitions <= 0 or args.partitions % 1000:
        # Topics of 1000 partitions each (bench_leader_moves.assignment): another count
        # would build fewer partitions than the floor writes.
        parser.error(f"--partitions must be a positive multiple of 1000, not {args.partitions}")
    parts = tuple(p for p in args.parts.split(",") if p)
    if not parts or set(parts) - set(PARTS):
        parser.error(f"--parts must name some of {', '.join(PARTS)}, not {args.parts!r}")
    set_gc_thresholds()  # as the controller's broker runs
    rounds: list[dict[str, Any]] = []
    shutdowns: list[dict[str, Any]] = []
    crashes: list[dict[str, Any]] = []
    deletions: list[dict[str, Any]] = []
    two_losses: list[dict[str, Any]] = []
    floors: list[float] = []
    with zookeeper() as connect:

        def measured(name: str, run: Callable[[str, int], Any], partitions: int) -> Any:
            """``run`` on a chroot of its own, deleted after."""
            root = chroot(connect, name)
            try:
                return run(root, partitions)
            finally:
                drop_chroot(root)

        for i in range(args.rounds + 1):  # the first warms up: not counted
            # N packed writes: the loss's floor, and the crash's and the deletion's.
            floor = measured(f"decisions-floor-{i}", floor_writes, args.partitions)[
                "packed_multis_s"
            ]
            if "loss" in parts:
                r = measured(f"decisions-{i}", one_round, args.partitions)
                r["floor_s"] = floor
            if "shutdown" in parts or "two_lost" in parts:
                floor_3n = measured(f"decisions-floor-3n-{i}", floor_writes, 3 * args.partitions)[
                    "packed_multis_s"
                ]
            if "shutdown" in parts:
                s = measured(f"decisions-shutdown-{i}", shutdown_round, args.partitions)
                s["floor_s"] = floor_3n
            if "two_lost" in parts:
                t = measured(f"decisions-two-lost-{i}", two_lost_round, args.partitions)
                t["floor_s"] = floor_3n
            if "crash" in parts:
                f = measured(f"decisions-crash-{i}", crash_failover_round, args.partitions)
                f["floor_s"] = floor
            if "deletion" in parts:
                d = measured(f"decisions-deletion-{i}", deletion_round, args.partitions)
                d["floor_s"] = floor
            if i:
                floors.append(floor)
                if "loss" in parts:
                    rounds.append(r)
                if "shutdown" in parts:
                    shutdowns.append(s)
                if "crash" in parts:
                    crashes.append(f)
                if "deletion" in parts:
                    deletions.append(d)
                if "two_lost" in parts:
                    two_losses.append(t)
    floor = round(statistics.median_high(floors), 3)
    out: dict[str, Any] = {
        "benchmark": "controller_decisions",
        "partitions": args.partitions,
        "floor_packed_writes_s": floor,
    }
    if rounds:
        decided = statistics.median_high(r["decided_s"] for r in rounds)
        out["broker_loss"] = {
            "partitions_led_by_the_lost_broker": args.partitions,
            "decided_and_written_s": round(decided, 3),
            "requests_encoded_s": _median(rounds, "encoded_s"),
            # Not part of the loss: the replica step of the failover that loaded the context.
            "failover_replica_step_s": _median(rounds, "failover_replica_step_s"),
            "floor_packed_writes_s": floor,
            "decided_vs_floor": round(decided / floor, 2),
            "rounds": _rounded(rounds),
        }
    if shutdowns:
        out["controlled_shutdown_balanced"] = {
            "partitions": 3 * args.partitions,
            "decided_and_written_s": _median(shutdowns, "decided_s"),
            "requests_encoded_s": _median(shutdowns, "encoded_s"),
            "floor_packed_writes_s": _median(shutdowns, "floor_s"),
            "rounds": _rounded(shutdowns),
        }
    if crashes:
        out["failover_after_controller_crash"] = {
            "partitions_led_by_the_crashed_controller": args.partitions,
            "state_machines_started_s": _median(crashes, "decided_s"),
            "requests_encoded_s": _median(crashes, "encoded_s"),
            "writes_per_partition": _median(crashes, "writes_per_partition", 2),
            "floor_packed_writes_s": floor,
            "rounds": _rounded(crashes),
        }
    if deletions:
        out["topic_deletion"] = {
            "partitions_deleted": args.partitions,
            "decided_and_written_s": _median(deletions, "decided_s"),
            "requests_encoded_s": _median(deletions, "encoded_s"),
            "writes_per_partition": _median(deletions, "writes_per_partition", 2),
            "floor_packed_writes_s": floor,
            "answer_handled_s": _median(deletions, "answer_s"),
            "last_answer_and_znodes_deleted_s": _median(deletions, "last_answer_s"),
            "rounds": _rounded(deletions),
        }
    if two_losses:
        decided = statistics.median_high(r["decided_s"] for r in two_losses)
        floor_3n = statistics.median_high(r["floor_s"] for r in two_losses)
        out["two_brokers_lost_balanced"] = {
            "partitions": 3 * args.partitions,
            "decided_and_written_s": round(decided, 3),
            "requests_encoded_s": _median(two_losses, "encoded_s"),
            "writes_per_partition": _median(two_losses, "writes_per_partition", 2),
            "floor_packed_writes_s": round(floor_3n, 3),
            "decided_vs_floor": round(decided / floor_3n, 2),
            "rounds": _rounded(two_losses),
        }
    emit(out)


if __name__ == "__main__":
    main()

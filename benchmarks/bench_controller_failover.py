"""Controller failover time, and the controlling broker's memory, at 1K/10K/100K partitions.

For each size: a 3-broker cluster (RF 3) whose ZooKeeper holds that many partitions. The
controller is made to move by deleting /controller (what an operator does to force a
new election); the figure is the time from the old controller's resignation (the
deletion, which ends its term: its ``controller_resigned`` line is written a few
milliseconds later, once it has read /controller and closed its channel, while the new
controller is already at work; whichever is earlier) to the new
controller having loaded everything and every broker having acknowledged its
UpdateMetadata; apart, until that UpdateMetadata was handed to the channel (queued) and
until its last chunk was written to the last broker's socket (sent, the issue's words;
one request is in flight per broker, so that includes the brokers applying the chunks
before it). The floor, measured in the same run against the same ZooKeeper, is a client
reading the same znodes as fast as it can (pipelined multiReads, no decoding). Before the
timed rounds a preferred replica election balances the leaderships (brokers start one
after another, so the first controller would lead most partitions). After them, every
broker's resident memory is sampled, with how many partitions each leads, and the
controller's for a few idle seconds more (least, median, most: one sample moves by some
MB from one second to the next); each round's new controller is sampled every 50 ms from
the deletion until the failover's requests were acknowledged, for its transient peak
(``peak_rss_mb_new_controller``, every broker's in ``peak_rss_mb_by_broker``; the most
of the rounds' in ``failover_peak_rss_mb_new_controller``), and every broker's CPU every
20 ms, for the cores each kept busy from the resignation until the UpdateMetadata was
queued and until it was acknowledged (the new controller's, median of the rounds, in
``new_controller_cores_until_queued`` and ``new_controller_cores_until_acked``: one GIL
runs its event thread and its own broker). With
``--cold-start`` broker 1 starts alone and leads every partition before the others join;
``first_controller_rss_mb`` is then a cold start's first controller. The partition
states written to ZooKeeper say the partitions are not new, so at the start each broker
takes itself for one back on new disks and makes its logs empty (refusing leaderships
the ISR lists others for until it caught up); with ``--restart`` every broker is then
stopped and started again with those logs, and the figures are a restarted cluster's.

    .venv/bin/python benchmarks/bench_controller_failover.py [--sizes 1000,10000,100000]
        [--rounds 3] [--no-balance] [--cold-start] [--restart]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    CpuSampler,
    RssSampler,
    at_least,
    chroot,
    cpu_seconds,
    elect_preferred_leaders,
    emit,
    last,
    require_acknowledged,
    round_robin,
    rss_mb,
    sizes,
    wait_quiet,
    write_cluster_state,
    zookeeper,
)

from tests.integration.harness import Cluster, wait_for
from zkdata import paths
from zkdata.client import ZkClient

BROKERS = (1, 2, 3)
# Seconds the controller's memory is sampled for at the end, idle (every 0.1 s).
IDLE_SAMPLING_S = 5
SETTINGS = {
    "zookeeper.session.timeout.ms": "10000",
    "auto.leader.rebalance.enable": "false",
    "replica.fetch.wait.max.ms": "500",
}


def partition_state_paths(zk: ZkClient) -> list[str]:
    """Every partition's state znode, from the topics' assignments (read here)."""
    topics = zk.get_children(paths.BROKER_TOPICS) or []
    topic_data = zk.get_many([paths.topic(t) for t in topics])
    return [
        paths.partition_state(t, int(p))
        for t, got in zip(topics, topic_data, strict=True)
        if got is not None
        for p in json.loads(got[0])["partitions"]
    ]


def floor_read(connect: str) -> float:
    """Read every znode a failover reads, as fast as the client can."""
    zk = ZkClient(connect, session_timeout_ms=30_000)
    zk.start()
    try:
        started = time.perf_counter()
        ids = zk.get_children(paths.BROKER_IDS) or []
        zk.get_many([paths.broker(int(i)) for i in ids])
        zk.get_many(partition_state_paths(zk))
        return time.perf_counter() - started
    finally:
        zk.close()


def leaders_by_broker(connect: str) -> dict[int, int]:
    """How many partitions each broker leads, from the partition state znodes."""
    zk = ZkClient(connect, session_timeout_ms=30_000)
    zk.start()
    try:
        counts: dict[int, int] = {}
        for got in zk.get_many(partition_state_paths(zk)):
            if got is not None:
                leader = json.loads(got[0])["leader"]
                counts[leader] = counts.get(leader, 0) + 1
        return dict(sorted(counts.items()))
    finally:
        zk.close()


def wait_acknowledged(c: Cluster, controller_id: int, epoch: int, partitions: int) -> None:
    """Until the controller's failover requests were acknowledged (every broker told
    everything)."""
    wait_for(
        lambda: (
            last(c[controller_id].state_changes("requests_acknowledged"), controller_epoch=epoch)
            or partitions == 0
        ),
        900,
        "the first failover's requests to be acknowledged",
    )


def update_metadata_figures(
    ack: dict[str, Any], loaded: dict[str, Any], started_ms: float
) -> dict[str, float]:
    """From the resignation (``started_ms``, wall clock) until the new controller's
    UpdateMetadata was queued, written to the last broker's socket (the issue's "sent"),
    and acknowledged by every broker; from its ``controller_failover`` line and the
    failover's ``requests_acknowledged`` line. RuntimeError if a broker never answered
    (or sent no UpdateMetadata): the last acknowledgement would be another broker's."""
    require_acknowledged(ack, BROKERS, "the failover's requests")
    if "UPDATE_METADATA" not in ack["acked_ms_by_api"]:
        raise RuntimeError(f"the failover sent no UpdateMetadata (requests {ack['requests']})")
    failover_started_ms = loaded["ts"] - loaded["total_ms"]
    at_ms = {
        "queued": failover_started_ms + loaded["update_metadata_queued_ms"],
        "sent": ack["learned_at_ms"] + ack["sent_ms_by_api"]["UPDATE_METADATA"],
        "acked": ack["learned_at_ms"] + ack["acked_ms_by_api"]["UPDATE_METADATA"],
    }
    return {
        f"resigned_to_update_metadata_{k}_s": round((ms - started_ms) / 1000, 3)
        for k, ms in at_ms.items()
    }


def cpu_by_broker(
    cpu: CpuSampler, c: Cluster, start_ms: float, until_s: float
) -> dict[int, dict[str, float]]:
    """Each broker's CPU from ``start_ms`` (wall clock) for ``until_s`` seconds."""
    end_ms = start_ms + until_s * 1000
    return {b: cpu.used(c[b].pid, start_ms, end_ms) for b in BROKERS}


def run_size(
    connect: str,
    partitions: int,
    workdir: Path,
    rounds: int,
    balance: bool = True,
    cold_start: bool = False,
    restart: bool = False,
) -> dict[str, Any]:
    connect = chroot(connect, f"failover-{partitions}")
    per_topic = 1000 if partitions >= 1000 else max(partitions, 1)
    assignments = round_robin(partitions, per_topic) if partitions else {}
    populate_s = write_cluster_state(connect, assignments)
    c = Cluster(connect, workdir / f"p{partitions}", (1, 2, 3), SETTINGS)
    try:
        if cold_start:
            # Broker 1 alone first: it becomes controller and leads every partition, then
            # the others join (what a cluster started one broker at a time gets).
            c[1].start()
        else:
            c.start()
        controller_id, epoch = c.wait_controller(timeout=600)
        first_controller_id = controller_id
        # Let the first failover finish (every broker told everything) before timing one.
        wait_acknowledged(c, controller_id, epoch, partitions)
        if cold_start:
            c[2].start()
            c[3].start()
            c.wait_registered((1, 2, 3), timeout=600)
        settle_s = wait_quiet(connect)
        restart_s = None
        if restart:
            # The brokers made their logs at the start above (the partition states say
            # they are not new: each broker took itself for one back on new disks); now
            # they stop, all at once, and start again with their logs, as a cluster
            # restarted does.
            restarted = time.perf_counter()
            for b in BROKERS:
                c[b].terminate()
            for b in BROKERS:
                c[b].wait_exit(900)
            c.start(wait=False)
            c.wait_registered(BROKERS, timeout=900)
            controller_id, epoch = c.wait_controller(min_epoch=epoch + 1, timeout=900)
            first_controller_id = controller_id
            wait_acknowledged(c, controller_id, epoch, partitions)
            wait_quiet(connect)
            restart_s = round(time.perf_counter() - restarted, 1)
        # Brokers start one after another, so the first controller leads what the others
        # did not yet host; balance leaderships as the auto rebalance would (it is off
        # here, not to run during the timing).
        leaders_at_start = leaders_by_broker(connect) if partitions else {}
        balance_s = elect_preferred_leaders(c.zk, assignments) if balance else 0.0
        wait_quiet(connect)
        time.sleep(2)
        failovers = []
        floors = []
        for _ in range(rounds):
            floors.append(floor_read(connect))
            old_id, old_epoch = c.controller()  # type: ignore[misc]
            cpu_before = {b: cpu_seconds(c[b].pid) for b in (1, 2, 3)}
            bench_cpu_before = cpu_seconds(os.getpid())
            # Every broker's memory through the failover, its transient peak included.
            with (
                RssSampler(c[b].pid for b in BROKERS) as sampler,
                CpuSampler(c[b].pid for b in BROKERS) as cpu,
            ):
                deleted_ms = time.time() * 1000  # wall clock, as the state-change log's ts
                c.zk.delete(paths.CONTROLLER)
                new_id, new_epoch = c.wait_controller(min_epoch=old_epoch + 1, timeout=600)
                ack = (
                    wait_for(
                        lambda new_id=new_id, new_epoch=new_epoch: last(
                            c[new_id].state_changes("requests_acknowledged"),
                            controller_epoch=new_epoch,
                        ),
                        600,
                        "the failover's UpdateMetadata to be acknowledged",
                    )
                    if partitions
                    else None
                )
            # CPU each process spent from the deletion until every request of the failover
            # was acknowledged (and a poll more): where a failover's time goes on a machine
            # whose cores the brokers and ZooKeeper share (the new controller's process,
            # one GIL, is what it waits on).
            cpu_s = {b: round(cpu_seconds(c[b].pid) - cpu_before[b], 2) for b in (1, 2, 3)}
            bench_cpu_s = round(cpu_seconds(os.getpid()) - bench_cpu_before, 2)
            resigned = last(
                c[old_id].state_changes("controller_resigned"), controller_epoch=old_epoch
            )
            loaded = last(
                c[new_id].state_changes("controller_failover"), controller_epoch=new_epoch
            )
            assert resigned is not None
            assert loaded is not None
            started_ms = min(deleted_ms, resigned["ts"])
            if ack is not None:
                figures = update_metadata_figures(ack, loaded, started_ms)
                failovers.append(
                    {
                        **figures,
                        "load_s": round(loaded["load_ms"] / 1000, 3),
                        "resigned_line_after_deletion_s": round(
                            (resigned["ts"] - deleted_ms) / 1000, 3
                        ),
                        "all_requests_acked_s": round(
                            (ack["learned_at_ms"] + ack["acked_ms"] - started_ms) / 1000, 3
                        ),
                        # Requests of the failover by API, and when each broker answered
                        # its last (from the resignation): the new controller's own broker
                        # shares its process with the event thread.
                        "requests": ack["requests"],
                        "new_controller_id": new_id,
                        "last_answer_by_broker_s": {
                            b: round((ack["learned_at_ms"] + ms - started_ms) / 1000, 3)
                            for b, ms in ack["acked_ms_by_broker"].items()
                        },
                        "cpu_s_new_controller": cpu_s[new_id],
                        "cpu_s_other_brokers": [cpu_s[b] for b in (1, 2, 3) if b != new_id],
                        "cpu_s_benchmark": bench_cpu_s,
                        # Each process's CPU from the resignation until the UpdateMetadata
                        # was queued and until every broker acknowledged it (sampled every
                        # 20 ms): near one core, the new controller's process is bound by
                        # its GIL, which its event thread shares with its own broker.
                        "cpu_until_update_metadata_queued": cpu_by_broker(
                            cpu, c, started_ms, figures["resigned_to_update_metadata_queued_s"]
                        ),
                        "cpu_until_update_metadata_acked": cpu_by_broker(
                            cpu, c, started_ms, figures["resigned_to_update_metadata_acked_s"]
                        ),
                        "peak_rss_mb_new_controller": sampler.peak_mb(c[new_id].pid),
                        "peak_rss_mb_by_broker": {b: sampler.peak_mb(c[b].pid) for b in BROKERS},
                    }
                )
            wait_quiet(connect)
            time.sleep(1)
        if not floors:  # --rounds 0: memory only
            floors.append(floor_read(connect))
        controller_id = c.controller()[0]  # type: ignore[index]
        rss = {b: round(rss_mb(c[b].pid), 1) for b in (1, 2, 3)}
        # The single sample above, and the spread over a few idle seconds after it.
        with RssSampler([c[controller_id].pid], interval_s=0.1) as idle:
            time.sleep(IDLE_SAMPLING_S)
        # Leaderships stay where the cluster's start put them (auto rebalance is off): a
        # broker leading most partitions holds their leader-side state too.
        leaders = leaders_by_broker(connect) if partitions else {}
        result: dict[str, Any] = {
            "partitions": partitions,
            "populate_zookeeper_s": round(populate_s, 2),
            "settle_s": round(settle_s, 1),
            # --restart: from stopping every broker to the restarted cluster's quiet.
            "restart_s": restart_s,
            "leaderships_balanced_first": balance,
            "preferred_election_s": round(balance_s, 1),
            "floor_read_s": round(statistics.median_high(floors), 3),
            "controller_id": controller_id,
            # It led what the brokers that started after it did not yet host.
            "first_controller_id": first_controller_id,
            "controller_rss_mb": rss[controller_id],
            f"controller_rss_mb_over_{IDLE_SAMPLING_S}s": idle.spread_mb(c[controller_id].pid),
            "first_controller_rss_mb": rss[first_controller_id],
            "cold_start": cold_start,
            "broker_rss_mb": rss,
            "max_broker_rss_mb": max(rss.values()),
            "leaders_by_broker_at_start": leaders_at_start,
            "leaders_by_broker": leaders,
        }
        if failovers:
            figure = statistics.median_high(
                f["resigned_to_update_metadata_acked_s"] for f in failovers
            )
            queued = statistics.median_high(
                f["resigned_to_update_metadata_queued_s"] for f in failovers
            )
            sent = statistics.median_high(
                f["resigned_to_update_metadata_sent_s"] for f in failovers
            )
            result.update(
                {
                    "failover_peak_rss_mb_new_controller": max(
                        f["peak_rss_mb_new_controller"] for f in failovers
                    ),
                    "failover_s": figure,
                    "failover_vs_floor": round(figure / result["floor_read_s"], 2),
                    "update_metadata_queued_s": queued,
                    "queued_vs_floor": round(queued / result["floor_read_s"], 2),
                    "update_metadata_sent_s": sent,
                    "sent_vs_floor": round(sent / result["floor_read_s"], 2),
                    # The new controller's process, cores kept busy until then.
                    "new_controller_cores_until_queued": statistics.median_high(
                        f["cpu_until_update_metadata_queued"][f["new_controller_id"]]["cores"]
                        for f in failovers
                    ),
                    "new_controller_cores_until_acked": statistics.median_high(
                        f["cpu_until_update_metadata_acked"][f["new_controller_id"]]["cores"]
                        for f in failovers
                    ),
                    "rounds": failovers,
                }
            )
        return result
    finally:
        c.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=sizes, default="1000,10000,100000", help="partitions, comma-separated"
    )
    parser.add_argument(
        "--rounds", type=at_least(0), default=3, help="failovers per size (0: memory only)"
    )
    parser.add_argument(
        "--no-balance",
        action="store_true",
        help="skip the preferred election: leaderships stay where the brokers' start left them",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help=(
            "once the cluster settled, stop every broker and start them again with the logs "
            "the first start made (the figures are then a restarted cluster's)"
        ),
    )
    parser.add_argument(
        "--cold-start",
        action="store_true",
        help=(
            "start broker 1 alone, then the others once it is controller and leads every "
            "partition (the first controller's memory is then a cold start's)"
        ),
    )
    args = parser.parse_args()
    with (
        zookeeper() as connect,
        tempfile.TemporaryDirectory(
            prefix="bench-failover-", dir=ROOT / ".zkctl" if (ROOT / ".zkctl").exists() else None
        ) as tmp,
    ):
        baseline = run_size(connect, 0, Path(tmp), 1)
        results = [
            run_size(
                connect,
                n,
                Path(tmp),
                args.rounds,
                not args.no_balance,
                args.cold_start,
                args.restart,
            )
            for n in args.sizes
        ]
    emit(
        {
            "benchmark": "controller_failover",
            "what": (
                "failover_s: old controller resigned (/controller deleted) -> new controller "
                "loaded everything and every broker acknowledged UpdateMetadata; "
                "update_metadata_queued_s: until the "
                "UpdateMetadata was handed to the channel; update_metadata_sent_s: until it was "
                "written to the last broker's socket"
            ),
            "baseline_empty_cluster_controller_rss_mb": baseline["controller_rss_mb"],
            "goals": {
                "failover_s_at_100k": 5.0,
                "failover_vs_floor": 1.5,
                "controller_rss_mb_at_100k": 300,
            },
            "kafka_reference": {"kafka_1.1_100k_s": 17, "before_kafka_1.1_100k_s": 63},
            "results": results,
        }
    )


if __name__ == "__main__":
    main()

"""A broker applying the controller's requests after a broker loss, in one process.

bench_leader_moves.py times a broker loss end to end, where the survivors' work on the
controller's LeaderAndIsr is part of the figure but shares the CPU with the controller
and the other brokers; this one times only what a survivor does with those requests, so
a change to it shows. Broker 1 holds N partitions (RF 3, replicas [3, 1, 2], 1,000 to a
topic) with their logs on disk, following broker 3. Each round, the partitions move
on: broker 3 is gone, and each partition gets a new leader epoch with broker 1 or broker 2
as its leader (alternating by partition and by round, so each round half the partitions
make broker 1 their leader and half make it a follower), ISR [1, 2]. Timed per round:
the LeaderAndIsr's wire bytes decoded, then applied (`ReplicaManager`: fencing, the new
partition states, the epoch cache of each new leadership, the state-change log lines);
the UpdateMetadata of the same partitions decoded, then applied (`MetadataCache`).

Floor, in the same run: decoding the requests, which a broker cannot skip. Applying
needs no ZooKeeper (a broker writes to it only to change an ISR), so none runs. Medians of
--rounds rounds after one warm-up, in seconds.

    .venv/bin/python benchmarks/bench_broker_apply.py [--partitions N] [--rounds R]
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.config import BrokerConfig
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from wire.codec import get_codec

BROKER = 1
PER_TOPIC = 1000
CONTROLLER_EPOCH = 5
LAIR_VERSION = 5
UM_VERSION = 7


def topics(partitions: int) -> list[tuple[str, uuid.UUID, int]]:
    return [
        (f"topic-{t:04d}", uuid.UUID(int=t + 1), min(PER_TOPIC, partitions - t * PER_TOPIC))
        for t in range((partitions + PER_TOPIC - 1) // PER_TOPIC)
    ]


def leader_of(partition: int, round_: int) -> int:
    """Round 0: broker 3 leads all. Then broker 1 or 2, swapping every round."""
    if round_ == 0:
        return 3
    return BROKER if (partition + round_) % 2 == 0 else 2


def request(
    layout: list[tuple[str, uuid.UUID, int]],
    state_of: Callable[[int], dict[str, Any]],
    **fields: Any,
) -> dict[str, Any]:
    """A controller request's body: ``state_of(p)`` for each partition p."""
    return {
        "controller_id": 2,
        "controller_epoch": CONTROLLER_EPOCH,
        "broker_epoch": 100,
        "topic_states": [
            {
                "topic_name": name,
                "topic_id": topic_id,
                "partition_states": [state_of(p) for p in range(count)],
            }
            for name, topic_id, count in layout
        ],
        **fields,
    }


def partition_state(partition: int, round_: int) -> dict[str, Any]:
    """The fields both requests give a partition alike."""
    return {
        "partition_index": partition,
        "controller_epoch": CONTROLLER_EPOCH,
        "leader": leader_of(partition, round_),
        "leader_epoch": round_,
        "replicas": [3, 1, 2],
    }


def leader_and_isr(layout: list[tuple[str, uuid.UUID, int]], round_: int) -> dict[str, Any]:
    isr = [3, 1, 2] if round_ == 0 else [1, 2]
    return request(
        layout,
        lambda p: {
            **partition_state(p, round_),
            "isr": isr,
            "partition_epoch": round_,
            "adding_replicas": [],
            "removing_replicas": [],
            "is_new": round_ == 0,
        },
        type=0,
        live_leaders=[
            {"broker_id": b, "host_name": "127.0.0.1", "port": 9090 + b} for b in (1, 2, 3)
        ],
    )


def update_metadata(layout: list[tuple[str, uuid.UUID, int]], round_: int) -> dict[str, Any]:
    return request(
        layout,
        lambda p: {
            **partition_state(p, round_),
            "isr": [1, 2],
            "zk_version": round_,
            "offline_replicas": [3],
        },
        live_brokers=[
            {
                "id": b,
                "endpoints": [
                    {
                        "port": 9090 + b,
                        "host": "127.0.0.1",
                        "listener": "PLAINTEXT",
                        "security_protocol": 0,
                    }
                ],
                "rack": None,
            }
            for b in (1, 2)
        ],
    )


def timed(func: Any, *args: Any) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    result = func(*args)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.partitions < 1 or args.rounds < 1:
        parser.error("--partitions and --rounds must be at least 1")

    layout = topics(args.partitions)
    lair_codec = get_codec("LeaderAndIsrRequest", LAIR_VERSION)
    um_codec = get_codec("UpdateMetadataRequest", UM_VERSION)
    # Encoded beforehand: the broker receives bytes.
    lairs = [lair_codec.encode(leader_and_isr(layout, r)) for r in range(args.rounds + 2)]
    ums = [um_codec.encode(update_metadata(layout, r)) for r in range(args.rounds + 2)]

    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-broker-apply-") as tmp:
        config = BrokerConfig.from_properties(
            {"zookeeper.connect": "unused:2181", "broker.id": str(BROKER), "log.dirs": tmp}
        )
        logs = LogManager([tmp], config)
        replicas = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp, BROKER), logs=logs)
        metadata = MetadataCache(BROKER)
        try:
            start = time.perf_counter()
            first = replicas.become_leader_or_follower(lair_codec.decode(lairs[0]))
            setup_s = time.perf_counter() - start
            if any(e["error_code"] for t in first["topics"] for e in t["partition_errors"]):
                raise SystemExit("the first LeaderAndIsr was refused")
            metadata.update(um_codec.decode(ums[0]))
            for r in range(1, args.rounds + 2):  # round 1 warms up
                lair_decode_s, lair = timed(lair_codec.decode, lairs[r])
                lair_apply_s, answer = timed(replicas.become_leader_or_follower, lair)
                refused = sum(
                    1 for t in answer["topics"] for e in t["partition_errors"] if e["error_code"]
                )
                if answer["error_code"] or refused:
                    raise SystemExit(f"round {r}: {refused} partition states refused")
                led = sum(1 for p in replicas.partitions.values() if p.leader == BROKER)
                um_decode_s, um = timed(um_codec.decode, ums[r])
                um_apply_s, _ = timed(metadata.update, um)
                if r > 1:
                    rounds.append(
                        {
                            "leader_and_isr_decode_s": round(lair_decode_s, 4),
                            "leader_and_isr_apply_s": round(lair_apply_s, 4),
                            "update_metadata_decode_s": round(um_decode_s, 4),
                            "update_metadata_apply_s": round(um_apply_s, 4),
                            "leaderships_after": led,
                        }
                    )
        finally:
            replicas.close()
            logs.close()

    def median(key: str) -> float:
        return round(statistics.median_high(r[key] for r in rounds), 4)

    lair_apply = median("leader_and_isr_apply_s")
    lair_decode = median("leader_and_isr_decode_s")
    um_apply = median("update_metadata_apply_s")
    um_decode = median("update_metadata_decode_s")
    report = {
        "benchmark": "broker_apply",
        "partitions": args.partitions,
        "first_leader_and_isr_s": round(setup_s, 3),
        "leader_and_isr_apply_s": lair_apply,
        "leader_and_isr_apply_us_per_partition": round(lair_apply / args.partitions * 1e6, 1),
        "update_metadata_apply_s": um_apply,
        "floor_decode_s": round(lair_decode + um_decode, 4),
        "leader_and_isr_decode_s": lair_decode,
        "update_metadata_decode_s": um_decode,
        "apply_vs_floor": round((lair_apply + um_apply) / (lair_decode + um_decode), 2),
        "rounds": rounds,
        "python": platform.python_version(),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

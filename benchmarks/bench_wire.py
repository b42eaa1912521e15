"""Wire codec benchmark: the controller's largest requests, against a json floor.

Encodes and decodes an UpdateMetadataRequest v7 and a LeaderAndIsrRequest v5 covering
100,000 partitions (replication factor 3), and, as a reference point measured in the same
run, json.dumps + json.loads of the same bodies (C-implemented serialisation). Prints one
JSON object; times are the best of --repeat runs, in seconds, summed over both messages.

    .venv/bin/python benchmarks/bench_wire.py [--partitions N] [--repeat R]
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import at_least, best_of

from wire.codec import get_codec

BROKERS = 12
PARTITIONS_PER_TOPIC = 50
RF = 3


def replicas_of(topic: int, partition: int) -> list[int]:
    first = (topic + partition) % BROKERS
    return [(first + i) % BROKERS for i in range(RF)]


def update_metadata(partitions: int) -> dict[str, Any]:
    topics = []
    for t in range(max(1, partitions // PARTITIONS_PER_TOPIC)):
        states = []
        for p in range(min(PARTITIONS_PER_TOPIC, partitions - t * PARTITIONS_PER_TOPIC)):
            replicas = replicas_of(t, p)
            states.append(
                {
                    "partition_index": p,
                    "controller_epoch": 7,
                    "leader": replicas[0],
                    "leader_epoch": 3,
                    "isr": replicas,
                    "zk_version": 11,
                    "replicas": replicas,
                    "offline_replicas": [],
                }
            )
        topics.append(
            {"topic_name": f"topic-{t:05d}", "topic_id": uuid.uuid4(), "partition_states": states}
        )
    brokers = [
        {
            "id": b,
            "endpoints": [
                {
                    "port": 9092,
                    "host": f"broker-{b}.example",
                    "listener": "PLAINTEXT",
                    "security_protocol": 0,
                }
            ],
            "rack": f"rack-{b % 3}",
        }
        for b in range(BROKERS)
    ]
    return {
        "controller_id": 1,
        "controller_epoch": 7,
        "broker_epoch": 4242,
        "topic_states": topics,
        "live_brokers": brokers,
    }


def leader_and_isr(partitions: int) -> dict[str, Any]:
    source = update_metadata(partitions)
    topics = [
        {
            "topic_name": topic["topic_name"],
            "topic_id": topic["topic_id"],
            "partition_states": [
                {
                    "partition_index": s["partition_index"],
                    "controller_epoch": 7,
                    "leader": s["leader"],
                    "leader_epoch": 3,
                    "isr": s["isr"],
                    "partition_epoch": 11,
                    "replicas": s["replicas"],
                    "adding_replicas": [],
                    "removing_replicas": [],
                    "is_new": False,
                }
                for s in topic["partition_states"]
            ],
        }
        for topic in source["topic_states"]
    ]
    leaders = [
        {"broker_id": b, "host_name": f"broker-{b}.example", "port": 9092} for b in range(BROKERS)
    ]
    return {
        "controller_id": 1,
        "controller_epoch": 7,
        "broker_epoch": 4242,
        "type": 0,
        "topic_states": topics,
        "live_leaders": leaders,
    }


def jsonable(value: Any) -> Any:
    """The same data with UUIDs as strings, which json can serialise."""
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [jsonable(item) for item in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--repeat", type=at_least(1), default=5)
    args = parser.parse_args()

    cases = [
        ("UpdateMetadataRequest", 7, update_metadata(args.partitions)),
        ("LeaderAndIsrRequest", 5, leader_and_isr(args.partitions)),
    ]
    report: dict[str, Any] = {
        "benchmark": "wire_codec",
        "partitions": args.partitions,
        "replication_factor": RF,
        "encode_s": 0.0,
        "decode_s": 0.0,
        "floor_json_s": 0.0,
        "floor_json_dumps_s": 0.0,
        "floor_json_loads_s": 0.0,
        "floor_json_gc_paused_s": 0.0,
        "messages": {},
    }
    for name, version, body in cases:
        start = time.perf_counter()
        codec = get_codec(name, version)
        compile_s = time.perf_counter() - start
        encode_s, encoded = best_of(args.repeat, functools.partial(codec.encode, body))
        decode_s, decoded = best_of(args.repeat, functools.partial(codec.decode, encoded))
        if codec.encode(decoded) != encoded:
            raise SystemExit(f"{name} v{version}: decode(encode(x)) does not re-encode to x")
        plain = jsonable(body)
        dumps_s, text = best_of(args.repeat, functools.partial(json.dumps, plain))
        loads_s, _ = best_of(args.repeat, functools.partial(json.loads, text))
        # The codec pauses the cyclic collector while decoding a large message; json.loads
        # under the same condition is the stricter floor.
        loads_nogc_s, _ = best_of(args.repeat, functools.partial(json.loads, text), pause_gc=True)
        report["messages"][f"{name} v{version}"] = {
            "bytes": len(encoded),
            "compile_s": round(compile_s, 4),
            "encode_s": round(encode_s, 4),
            "decode_s": round(decode_s, 4),
            "json_bytes": len(text),
            "json_dumps_s": round(dumps_s, 4),
            "json_loads_s": round(loads_s, 4),
            "json_loads_gc_paused_s": round(loads_nogc_s, 4),
        }
        report["encode_s"] += encode_s
        report["decode_s"] += decode_s
        report["floor_json_dumps_s"] += dumps_s
        report["floor_json_loads_s"] += loads_s
        report["floor_json_s"] += dumps_s + loads_s
        report["floor_json_gc_paused_s"] += dumps_s + loads_nogc_s
    for key, value in report.items():
        if key.endswith("_s"):
            report[key] = round(value, 4)
    codec_s = report["encode_s"] + report["decode_s"]
    report["codec_vs_json"] = round(codec_s / report["floor_json_s"], 2)
    report["codec_vs_json_gc_paused"] = round(codec_s / report["floor_json_gc_paused_s"], 2)
    report["python"] = platform.python_version()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

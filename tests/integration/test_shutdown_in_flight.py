"""Produce requests in flight while a broker stops (SIGTERM): each is refused, or is in the
log, flushed, after the restart; never acknowledged and lost, never written after the
flush that the clean-shutdown marker vouches for."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from storage.checkpoints import read_offset_checkpoint
from storage.log_manager import CLEAN_SHUTDOWN_FILE
from storage.testing import build_batch
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import consume
from tests.integration.harness import wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PRODUCE_V = 8
PRODUCERS = 4


def _produce_until_refused(port: int, worker: int, acked: dict[int, bytes]) -> None:
    """Produce (acks=1) one record a request until the broker stops answering."""
    try:
        conn = KafkaConnection("127.0.0.1", port, client_id=f"in-flight-{worker}", timeout_s=30)
    except OSError:
        return
    with conn:
        for n in range(100_000):
            # Large and compressible: the leader recompresses it to the topic's lz4 in
            # Python, which keeps each request in flight for a while.
            value = (f"{worker}-{n}-".encode() * 40_000)[:400_000]
            body: dict[str, Any] = {
                "transactional_id": None,
                "acks": 1,
                "timeout_ms": 10_000,
                "topic_data": [
                    {
                        "name": "t",
                        "partition_data": [{"index": 0, "records": bytes(build_batch([value]))}],
                    }
                ],
            }
            try:
                answer = conn.request(ApiKey.PRODUCE, PRODUCE_V, body)
            except (OSError, EOFError, ConnectionError, TimeoutError):
                return
            [partition] = answer["responses"][0]["partition_responses"]
            if partition["error_code"] != 0:
                return
            acked[partition["base_offset"]] = value


def metadata_leader(conn: KafkaConnection, topic: str) -> int | None:
    """The leader of the topic's partition 0 in the broker's metadata, None if unknown."""
    answer = conn.request(ApiKey.METADATA, 9, {"topics": [{"name": topic}]})
    [t] = answer["topics"]
    leaders = [int(p["leader_id"]) for p in t["partitions"] if p["partition_index"] == 0]
    return leaders[0] if t["error_code"] == 0 and leaders else None


def test_a_produce_in_flight_at_shutdown_is_refused_or_flushed(
    cluster_factory: ClusterFactory,
) -> None:
    # No controlled shutdown (nowhere to move a one-replica partition anyway): the
    # listeners stop and the logs close while requests are being handled.
    c = cluster_factory((1,), controlled_shutdown_enable="false")
    c.create_topic("t", {0: (1,)}, {"compression.type": "lz4"})
    c.wait_topic_online("t")
    port = c[1].port()
    # Online in ZooKeeper is not yet served by the broker, and a worker stops at its first
    # refusal: until its UpdateMetadata is applied, a Produce is UNKNOWN_TOPIC_OR_PARTITION
    # (Kafka's handleProduceRequest asks the metadata cache first). Its LeaderAndIsr
    # comes before it.
    with KafkaConnection("127.0.0.1", port, timeout_s=30) as conn:
        wait_for(lambda: metadata_leader(conn, "t") == 1, 60, "broker 1's metadata: t-0 led by 1")
    acked: dict[int, bytes] = {}
    workers = [
        threading.Thread(target=_produce_until_refused, args=(port, w, acked), daemon=True)
        for w in range(PRODUCERS)
    ]
    for worker in workers:
        worker.start()
    wait_for(lambda: len(acked) >= 20 or None, 60, "20 produce requests acknowledged")
    c[1].terminate()
    assert c[1].wait_exit(60) == 0, c[1].output()[-3000:]
    for worker in workers:
        worker.join(30)
        assert not worker.is_alive()

    data = c[1].data_dir
    marker = data / CLEAN_SHUTDOWN_FILE
    assert marker.exists()
    # Nothing written to the partition's files after the marker.
    partition_dir = data / "t-0"
    written = max(os.stat(f).st_mtime_ns for f in partition_dir.iterdir())
    assert written <= os.stat(marker).st_mtime_ns
    flushed = read_offset_checkpoint(data / "recovery-point-offset-checkpoint")[("t", 0)]

    c[1].start()
    c.wait_topic_online("t")
    read = dict(consume(c, "t", [0])[0])
    # Every acknowledged record is there, at its offset; the log ends where the clean
    # shutdown's flush said it did (nothing unflushed behind the marker).
    lost = sorted(o for o, v in acked.items() if read.get(o) != v)
    assert lost == [], f"{len(lost)} acknowledged records lost: {lost[:10]}"
    assert max(read, default=-1) + 1 == flushed, (sorted(read)[-5:], flushed)

"""Produce throughput and latency with confluent-kafka: 1 KiB messages, 3 brokers, RF 3,
acks=all, min.insync.replicas=2.

For each partition count (1 and 3 by default), on a topic of its own:

* ``saturation``: the producer keeps its queue full for ``--seconds``; MB/s delivered
  (acknowledged bytes over the time from the first produce to the last delivery), and
  the per-message delivery latency (librdkafka's ``msg.latency()``: produce() to the
  delivery callback) p50/p99/max, which at saturation is mostly time spent queued in
  the client.
* ``fixed_rate``: the same, offered at a fixed rate well below saturation
  (``--rate-mb``, default 20 MB/s, or half the saturation figure if that is lower).

The floor, measured in the same run: the same number of bytes relayed in the same shape
(client -> leader -> two followers, every chunk acknowledged back by both followers
through the leader to the client) by plain loopback sockets between four processes, with
no protocol and no log, in chunks of the producer's ``batch.size``.

    .venv/bin/python benchmarks/bench_produce.py [--seconds 20] [--partitions 1,3]
    .venv/bin/python benchmarks/bench_produce.py --seconds 3 --partitions 1   # smoke run
    .venv/bin/python benchmarks/bench_produce.py --topic-compression lz4   # recompressed
"""

from __future__ import annotations

import argparse
import array
import multiprocessing as mp
import os
import random
import resource
import socket
import struct
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from common import ROOT, chroot, cpu_seconds, emit, zookeeper
from confluent_kafka import KafkaError, Message, Producer

from tests.integration.harness import Cluster

MB = 1_000_000
BROKERS = (1, 2, 3)
SETTINGS = {
    "zookeeper.session.timeout.ms": "10000",
    "auto.leader.rebalance.enable": "false",
}
GOAL_MB_S = 100.0
GOAL_FRACTION_OF_FLOOR = 0.5


def producer_config(bootstrap: str, batch_bytes: int, linger_ms: float) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": linger_ms,
        "batch.size": batch_bytes,
        "compression.type": "none",
        # 32 MiB of 1 KiB messages queued at most (the Java client's buffer.memory):
        # the latency at saturation is mostly this queue.
        "queue.buffering.max.messages": 32 * 1024,
        "queue.buffering.max.kbytes": 64 * 1024,
        "message.timeout.ms": 120_000,
    }


class Deliveries:
    """Delivery callback: counts, bytes, per-message latency, errors."""

    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0
        self.latencies = array.array("d")
        self.errors: dict[str, int] = {}
        self.last = 0.0

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors[err.name()] = self.errors.get(err.name(), 0) + 1
            return
        self.count += 1
        self.bytes += len(msg.value() or b"")
        self.latencies.append(msg.latency() or 0.0)
        self.last = time.perf_counter()


def percentile(values: array.array[float] | list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def latency_ms(values: array.array[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(values, 0.50) * 1e3, 2),
        "p99_ms": round(percentile(values, 0.99) * 1e3, 2),
        "max_ms": round(max(values, default=float("nan")) * 1e3, 2),
    }


def payloads(size: int, count: int = 256) -> list[bytes]:
    rng = random.Random(size)
    return [rng.randbytes(size) for _ in range(count)]


def run_producer(
    conf: dict[str, Any],
    topic: str,
    partitions: int,
    seconds: float,
    message_bytes: int,
    rate_mb_s: float | None,
) -> dict[str, Any]:
    """Produce for `seconds` (as fast as the queue allows, or at a fixed rate), flush,
    and report what was delivered."""
    p = Producer(conf)
    values = payloads(message_bytes)
    # Warm up: connections, metadata, the brokers' first segments.
    warm = Deliveries()
    for i in range(2000):
        p.produce(topic, values[i % len(values)], partition=i % partitions, on_delivery=warm)
    p.flush(60)
    d = Deliveries()
    ru_before = resource.getrusage(resource.RUSAGE_SELF)
    sent = 0
    started = time.perf_counter()
    end = started + seconds
    per_second = None if rate_mb_s is None else rate_mb_s * MB / message_bytes
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        if per_second is None:
            due = sent + 1000
        else:
            due = int((now - started) * per_second)
            if due <= sent:
                time.sleep(0.001)  # bursts every millisecond (poll(0.0005) would spin)
                p.poll(0)
                continue
        try:
            while sent < due:
                p.produce(
                    topic, values[sent % len(values)], partition=sent % partitions, on_delivery=d
                )
                sent += 1
        except BufferError:
            p.poll(0.001)
            continue
        p.poll(0)
    remaining = p.flush(180)
    elapsed = d.last - started
    ru_after = resource.getrusage(resource.RUSAGE_SELF)
    client_cpu = (ru_after.ru_utime + ru_after.ru_stime) - (ru_before.ru_utime + ru_before.ru_stime)
    return {
        "messages": d.count,
        "mb": round(d.bytes / MB, 1),
        "seconds": round(elapsed, 2),
        "mb_s": round(d.bytes / MB / elapsed, 1) if elapsed > 0 else 0.0,
        "offered_mb_s": None if rate_mb_s is None else round(rate_mb_s, 1),
        "latency": latency_ms(d.latencies),
        "errors": d.errors,
        "undelivered": remaining,
        "client_cpu_s": round(client_cpu, 2),
    }


# --- the floor: loopback sockets relaying the same bytes, no protocol, no log -------------------

ACK = struct.Struct(">q")


def _recv_exactly(sock: socket.socket, view: memoryview) -> bool:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            return False
        got += n
    return True


def _follower(listener: socket.socket, chunk: int) -> None:
    conn, _ = listener.accept()
    buf = bytearray(chunk)
    view = memoryview(buf)
    count = 0
    while _recv_exactly(conn, view):
        count += 1
        conn.sendall(ACK.pack(count))
    conn.close()


def _leader(listener: socket.socket, followers: list[int], chunk: int) -> None:
    links = [socket.create_connection(("127.0.0.1", port)) for port in followers]
    for s in links:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client, _ = listener.accept()
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    acked = [0] * len(links)
    lock = threading.Lock()
    sent_to_client = [0]

    def read_acks(i: int) -> None:
        buf = bytearray(ACK.size)
        while _recv_exactly(links[i], memoryview(buf)):
            with lock:
                acked[i] = ACK.unpack(buf)[0]
                both = min(acked)
                if both > sent_to_client[0]:
                    sent_to_client[0] = both
                    client.sendall(ACK.pack(both))

    readers = [threading.Thread(target=read_acks, args=(i,), daemon=True) for i in range(2)]
    for t in readers:
        t.start()
    buf = bytearray(chunk)
    view = memoryview(buf)
    while _recv_exactly(client, view):
        for s in links:
            s.sendall(view)
    for s in links:
        s.shutdown(socket.SHUT_WR)
    for t in readers:
        t.join()
    client.close()


def _serve(role: str, followers: list[int], chunk: int, port_out: Connection) -> None:
    """A relay process (spawned): listen, say on which port, then relay until EOF."""
    listener = socket.create_server(("127.0.0.1", 0))
    port_out.send(listener.getsockname()[1])
    if role == "follower":
        _follower(listener, chunk)
    else:
        _leader(listener, followers, chunk)


def _start(ctx: Any, role: str, followers: list[int], chunk: int) -> tuple[Any, int]:
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_serve, args=(role, followers, chunk, send), daemon=True)
    proc.start()
    if not receive.poll(60):
        raise RuntimeError(f"the {role} relay process did not start")
    return proc, int(receive.recv())


def floor_relay(total_bytes: int, chunk: int) -> dict[str, Any]:
    """client -> leader -> two followers over loopback TCP, four processes; each chunk is
    acknowledged by both followers, through the leader, to the client."""
    ctx = mp.get_context("spawn")  # no inherited client or broker threads
    procs: list[Any] = []
    sock: socket.socket | None = None
    try:
        ports = []
        for _ in range(2):
            proc, follower_port = _start(ctx, "follower", [], chunk)
            procs.append(proc)
            ports.append(follower_port)
        proc, port = _start(ctx, "leader", ports, chunk)
        procs.append(proc)
        chunks = max(1, total_bytes // chunk)
        payload = random.Random(1).randbytes(chunk)
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent_at = array.array("d", [0.0] * chunks)
        latencies = array.array("d")
        done = threading.Event()
        acked = [0]

        def read_acks() -> None:
            buf = bytearray(ACK.size)
            seen = 0
            while seen < chunks and _recv_exactly(sock, memoryview(buf)):
                upto = ACK.unpack(buf)[0]
                now = time.perf_counter()
                for k in range(seen, upto):
                    latencies.append(now - sent_at[k])
                seen = upto
            acked[0] = seen
            done.set()

        reader = threading.Thread(target=read_acks, daemon=True)
        reader.start()
        started = time.perf_counter()
        for k in range(chunks):
            sent_at[k] = time.perf_counter()
            sock.sendall(payload)
        if not done.wait(300):
            raise RuntimeError("the relay floor did not finish")
        elapsed = time.perf_counter() - started
        if acked[0] != chunks:
            # The relay closed early (a relay process gone): the time is that of fewer
            # chunks than the floor's bytes, a floor higher than the relay can go.
            raise RuntimeError(f"the relay floor acknowledged {acked[0]} of {chunks} chunks")
        sock.shutdown(socket.SHUT_WR)
        sock.close()
        return {
            "mb": round(chunks * chunk / MB, 1),
            "chunk_bytes": chunk,
            "mb_s": round(chunks * chunk / MB / elapsed, 1),
            "chunk_latency": latency_ms(latencies),
        }
    finally:
        if sock is not None:
            sock.close()  # the relays see EOF and end (after an error too)
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()


# --- the cluster ---------------------------------------------------------------------------------


def rotating(partitions: int) -> dict[int, tuple[int, ...]]:
    return {p: tuple(BROKERS[(p + i) % 3] for i in range(3)) for p in range(partitions)}


def make_topic(c: Cluster, name: str, partitions: int, compression_type: str) -> None:
    c.create_topic(
        name,
        rotating(partitions),
        {"min.insync.replicas": "2", "compression.type": compression_type},
    )
    c.wait_partitions(
        name,
        lambda s: all(x.leader >= 0 and len(x.isr) == 3 for x in s.values()),
        f"{name} online with full ISRs",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20, help="per measurement")
    parser.add_argument("--partitions", default="1,3", help="partition counts to run")
    parser.add_argument("--message-bytes", type=int, default=1024)
    parser.add_argument("--batch-bytes", type=int, default=1_000_000, help="batch.size")
    parser.add_argument("--linger-ms", type=float, default=5)
    parser.add_argument("--rate-mb", type=float, default=20, help="the fixed offered rate")
    parser.add_argument(
        "--topic-compression",
        default="producer",
        help="the topics' compression.type: the leaders compress the (uncompressed) "
        "batches again with it unless producer",
    )
    args = parser.parse_args()
    counts = [int(x) for x in args.partitions.split(",")]
    load_before = os.getloadavg()
    results: list[dict[str, Any]] = []
    with (
        zookeeper() as zk_connect,
        tempfile.TemporaryDirectory(
            prefix="bench-produce-", dir=ROOT / ".zkctl" if (ROOT / ".zkctl").exists() else None
        ) as tmp,
    ):
        c = Cluster(chroot(zk_connect, "produce"), Path(tmp), BROKERS, SETTINGS)
        try:
            c.start()
            bootstrap = ",".join(f"127.0.0.1:{c[b].port()}" for b in BROKERS)
            conf = producer_config(bootstrap, args.batch_bytes, args.linger_ms)
            for n in counts:
                topic = f"produce-{n}"
                make_topic(c, topic, n, args.topic_compression)
                cpu0 = {b: cpu_seconds(c[b].pid) for b in BROKERS}
                saturation = run_producer(conf, topic, n, args.seconds, args.message_bytes, None)
                cpu1 = {b: cpu_seconds(c[b].pid) for b in BROKERS}
                saturation["broker_cpu_s"] = {b: round(cpu1[b] - cpu0[b], 1) for b in BROKERS}
                rate = min(args.rate_mb, saturation["mb_s"] / 2)
                fixed = run_producer(conf, topic, n, args.seconds, args.message_bytes, rate)
                results.append({"partitions": n, "saturation": saturation, "fixed_rate": fixed})
            dead = [b for b in BROKERS if not c[b].alive()]
            if dead:
                raise RuntimeError(f"brokers {dead} died during the run")
        finally:
            c.close()
    # The floor: the largest run's bytes (the brokers are gone: nothing else competes).
    floor_bytes = max(int(r["saturation"]["mb"] * MB) for r in results)
    floor = floor_relay(max(floor_bytes, 64 * args.batch_bytes), args.batch_bytes)
    best = max(r["saturation"]["mb_s"] for r in results)
    for r in results:
        r["saturation"]["fraction_of_floor"] = round(r["saturation"]["mb_s"] / floor["mb_s"], 3)
    emit(
        {
            "benchmark": "produce",
            "what": (
                "confluent-kafka producer, acks=all, RF 3, min.insync.replicas=2, "
                f"{args.message_bytes}-byte random messages, linger.ms={args.linger_ms}, "
                f"batch.size={args.batch_bytes}, topic compression.type="
                f"{args.topic_compression}; mb_s counts acknowledged message bytes; "
                "latency is per message, produce() to delivery callback"
            ),
            "load_avg_before": [round(x, 2) for x in load_before],
            "load_avg_after": [round(x, 2) for x in os.getloadavg()],
            "cpus": os.cpu_count(),
            "results": results,
            "floor_loopback_relay": floor,
            "goals": {"mb_s": GOAL_MB_S, "fraction_of_floor": GOAL_FRACTION_OF_FLOOR},
            "best_mb_s": best,
            "met": {
                "mb_s": best >= GOAL_MB_S,
                "fraction_of_floor": best / floor["mb_s"] >= GOAL_FRACTION_OF_FLOOR,
            },
        }
    )


if __name__ == "__main__":
    main()

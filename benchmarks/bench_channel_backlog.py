"""What the controller's channel holds for a broker that does not answer for a while.

A broker applying its first LeaderAndIsr of 100,000 new logs answers nothing for
minutes, while its peers join the ISRs: the controller sends every broker an
UpdateMetadata for each batch of ISR changes, and queues them for the busy one behind the
full update it has not taken yet. Here a real channel sends to a socket that takes the
first request and never answers: behind it wait the rest of a full update of
``--partitions`` partitions, then ``--sends`` incremental UpdateMetadata of
``--batch`` partitions each, every partition's ISR growing by one at each of its changes
(40 sends of 5,000: each partition changes twice). Then the same with leaderships moving
meanwhile: after every fourth send, ``--move-batch`` other partitions get a new leader,
a LeaderAndIsr and an UpdateMetadata for them queued between the ISR changes' (what a
broker's queue held when leaderships moved while it was busy: 18 LeaderAndIsr among 25
UpdateMetadata in one probed queue).

The figures: the requests and the memory the channel holds once every send is queued
(traced, less what the same sends take when nothing is held: the context's new states),
and how long each send's queueing took on the controller's thread. The
baseline, measured in the same run: the same requests held as built (a list: what the
channel held before newer rows went into the requests waiting, as no send repeats a
whole waiting one), and how long building each send took.

    .venv/bin/python benchmarks/bench_channel_backlog.py [--partitions 100000] [--sends 40]
        [--batch 5000] [--move-batch 1000]
"""

from __future__ import annotations

import argparse
import gc
import random
import socket
import statistics
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

from common import at_least, emit

from controller.channel import ControllerChannelManager
from controller.context import ControllerContext, LeaderIsrAndControllerEpoch, ReplicaAssignment
from controller.request_batch import BrokerRequest, RequestBatch
from zkdata.znodes import BrokerRegistration, EndPoint, LeaderAndIsr, TopicPartition

BUSY = 2  # the broker that does not answer
PER_TOPIC = 1000


class SilentBroker:
    """Takes connections and reads what comes, never answering."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    @staticmethod
    def _drain(conn: socket.socket) -> None:
        try:
            while conn.recv(1 << 16):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self.server.close()
        for c in self.conns:
            c.close()


def cluster(partitions: int) -> tuple[ControllerContext, list[TopicPartition]]:
    ctx = ControllerContext(epoch=3, epoch_zk_version=2)
    ctx.add_live_brokers(
        {b: (BrokerRegistration(b, (EndPoint("PLAINTEXT", "h", 9),)), 10 * b) for b in (1, 2, 3)}
    )
    tps = []
    for i in range(partitions):
        tp = TopicPartition(f"t{i // PER_TOPIC}", i % PER_TOPIC)
        ctx.topic_ids.setdefault(tp.topic, uuid.UUID(int=i // PER_TOPIC + 1))
        tps.append(tp)
        ctx.update_assignment(tp, ReplicaAssignment((1, 2, 3)))
        ctx.leadership[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 1, (1,), 0), 3)
    return ctx, tps


def update_metadata(
    ctx: ControllerContext, tps: list[TopicPartition] | None
) -> list[BrokerRequest]:
    batch = RequestBatch()
    batch.add_update_metadata([BUSY], tps)
    return batch.build(ctx, 1)


def isr_changes(ctx: ControllerContext, tps: list[TopicPartition]) -> None:
    for tp in tps:
        lai = ctx.leadership[tp].leader_and_isr
        grown = LeaderAndIsr(lai.leader, lai.leader_epoch, (*lai.isr, len(lai.isr) + 1), 0)
        ctx.leadership[tp] = LeaderIsrAndControllerEpoch(grown, 3)


def leader_moves(ctx: ControllerContext, tps: list[TopicPartition]) -> list[BrokerRequest]:
    """Each partition's leadership moved to broker 3: the busy broker's LeaderAndIsr and
    UpdateMetadata for them."""
    updates = []
    for tp in tps:
        lai = ctx.leadership[tp].leader_and_isr
        lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(3, lai.leader_epoch + 1, lai.isr, 0), 3)
        ctx.leadership[tp] = lice
        updates.append(([BUSY], tp, lice, ctx.full_assignment(tp)))
    batch = RequestBatch()
    batch.add_leader_and_isr_updates(ctx, updates)
    return [r for r in batch.build(ctx, 1) if r.broker_id == BUSY]


def run(
    partitions: int,
    sends: int,
    batch: int,
    sink: Callable[[list[BrokerRequest]], None],
    move_batch: int = 0,
) -> tuple[list[float], list[float]]:
    """The scenario into ``sink``: seconds each ISR changes' send took to build and to
    sink. With ``move_batch``, that many other partitions move after every fourth."""
    ctx, tps = cluster(partitions)
    sink(update_metadata(ctx, None))
    order = tps[:]
    random.Random(1).shuffle(order)
    moving = tps[:]
    random.Random(2).shuffle(moving)
    built_s, sunk_s = [], []
    for i in range(sends):
        start = i * batch % len(order)
        changed = order[start : start + batch]
        isr_changes(ctx, changed)
        started = time.perf_counter()
        requests = update_metadata(ctx, changed)
        built = time.perf_counter()
        sink(requests)
        built_s.append(built - started)
        sunk_s.append(time.perf_counter() - built)
        if move_batch and i % 4 == 3:
            start = i // 4 * move_batch % len(moving)
            sink(leader_moves(ctx, moving[start : start + move_batch]))
    return built_s, sunk_s


def channel_run(
    partitions: int, sends: int, batch: int, traced: bool, move_batch: int = 0
) -> tuple[list[float], list[float], int, float]:
    broker = SilentBroker()
    channel = ControllerChannelManager(1, lambda _r, _b: None, socket_timeout_s=600)
    try:
        channel.add_broker(BUSY, "127.0.0.1", broker.port)
        first = [True]

        def sink(requests: list[BrokerRequest]) -> None:
            channel.send(requests)
            if first[0]:  # the first request taken, and one built ahead
                first[0] = False
                deadline = time.monotonic() + 30
                while channel.queue_sizes()[BUSY] > len(requests) - 1:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the channel never sent its first request")
                    time.sleep(0.01)
                if traced:
                    tracemalloc.start()

        built_s, sunk_s = run(partitions, sends, batch, sink, move_batch)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] if traced else 0
        waiting = channel.queue_sizes()[BUSY]
    finally:
        tracemalloc.stop()
        channel.close(timeout_s=1)
        broker.close()
    return built_s, sunk_s, waiting, held / 2**20


def list_run(
    partitions: int, sends: int, batch: int, keep: bool = True, move_batch: int = 0
) -> tuple[int, float]:
    """The requests held as built (``keep``), or none of them: the memory the scenario
    takes without any request held (the context's new states)."""
    held: list[BrokerRequest] = []
    first = [True]

    def sink(requests: list[BrokerRequest]) -> None:
        if first[0]:  # as the channel: the first two are taken
            first[0] = False
            if keep:
                held.extend(requests[2:])
            tracemalloc.start()
        elif keep:
            held.extend(requests)

    try:
        run(partitions, sends, batch, sink, move_batch)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return len(held), traced / 2**20


def scenario(partitions: int, sends: int, batch: int, move_batch: int) -> dict[str, Any]:
    built_s, queued_s, waiting, _ = channel_run(partitions, sends, batch, False, move_batch)
    _, _, _, held_mib = channel_run(partitions, sends, batch, True, move_batch)
    baseline_waiting, baseline_mib = list_run(partitions, sends, batch, move_batch=move_batch)
    # What the scenario itself keeps (the context's new states), taken from both.
    _, scenario_mib = list_run(partitions, sends, batch, keep=False, move_batch=move_batch)
    return {
        "requests_waiting": waiting,
        "held_mib": round(held_mib - scenario_mib, 1),
        "queue_ms_median": round(statistics.median(queued_s) * 1000, 2),
        "queue_ms_max": round(max(queued_s) * 1000, 2),
        "baseline_requests_held": baseline_waiting,
        "baseline_held_mib": round(baseline_mib - scenario_mib, 1),
        "build_ms_median": round(statistics.median(built_s) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=at_least(PER_TOPIC), default=100_000)
    parser.add_argument("--sends", type=at_least(1), default=40)
    parser.add_argument("--batch", type=at_least(1), default=5_000)
    parser.add_argument("--move-batch", type=at_least(1), default=1_000)
    args = parser.parse_args()
    emit(
        {
            "benchmark": "channel_backlog",
            "what": (
                "a broker not answering: what the controller's channel holds for it once a "
                "full update and the ISR changes' UpdateMetadata are queued, and each send's "
                "queueing time; baseline: the same requests held as built"
            ),
            "partitions": args.partitions,
            "sends": args.sends,
            "partitions_per_send": args.batch,
            **scenario(args.partitions, args.sends, args.batch, 0),
            # The same with leaderships moving after every fourth send.
            "partitions_per_leader_move": args.move_batch,
            "with_leader_moves": scenario(args.partitions, args.sends, args.batch, args.move_batch),
        }
    )


if __name__ == "__main__":
    main()

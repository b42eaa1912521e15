"""Failover as a producing client sees it: the longest stall between deliveries.

A confluent-kafka producer sends 1 KiB messages at a steady rate (acks=all) to one
partition, RF 3, min.insync.replicas=2, led by a broker that is not the controller. In
the same run, with the same producer:

* ``baseline``: no fault; the longest gap between two deliveries. This is the floor.
* ``sigkill``: the leader is SIGKILLed. ZooKeeper only notices when its session times
  out, so the goal is the session timeout plus under 1 s.
* ``preferred_election``: (once the killed broker is back in the ISR) leadership moves
  back to it while everything stays up. Reported, no goal.
* ``controlled_shutdown``: the leader is stopped with SIGTERM (controlled shutdown: its
  leaderships move first). Goal: no error reaches the application, longest stall under
  300 ms.

For each: the longest gap between consecutive delivery callbacks (the gap that spans the
fault), the longest per-message latency (produce() to delivery, ``msg.latency()``) of the
messages delivered in the window, and the errors delivered to the application.

    .venv/bin/python benchmarks/bench_client_failover.py [--session-timeout-ms 6000]
    .venv/bin/python benchmarks/bench_client_failover.py --baseline-seconds 3   # smoke run
"""

from __future__ import annotations

import argparse
import array
import bisect
import itertools
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from common import ROOT, chroot, emit, zookeeper
from confluent_kafka import KafkaError, Message, Producer

from admin import elect
from tests.integration.harness import Cluster, wait_for

BROKERS = (1, 2, 3)
TOPIC = "failover"
GRACEFUL_GOAL_S = 0.3
KILL_MARGIN_S = 1.0


class Stream(threading.Thread):
    """A producer at a fixed rate; delivery times (monotonic), latencies and errors."""

    def __init__(self, conf: dict[str, Any], rate: float, message_bytes: int) -> None:
        super().__init__(name="producer", daemon=True)
        self.conf = conf
        self.rate = rate
        self.value = os.urandom(message_bytes)
        self.delivered = array.array("d")
        self.latency = array.array("d")
        self.errors: list[tuple[float, str]] = []
        self.stopping = threading.Event()
        self.undelivered = -1

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        now = time.monotonic()
        if err is not None:
            self.errors.append((now, err.name()))
        else:
            self.delivered.append(now)
            self.latency.append(msg.latency() or 0.0)

    def run(self) -> None:
        p = Producer(self.conf)
        started = time.monotonic()
        sent = 0
        while not self.stopping.is_set():
            due = int((time.monotonic() - started) * self.rate)
            try:
                while sent < due:
                    p.produce(TOPIC, self.value, partition=0, on_delivery=self.on_delivery)
                    sent += 1
            except BufferError:
                pass
            time.sleep(0.001)
            p.poll(0)
        self.undelivered = p.flush(120)

    def window(self, start: float, end: float) -> dict[str, Any]:
        """Deliveries in [start, end], and the gap from the last one before start."""
        i = bisect.bisect_left(self.delivered, start)
        j = bisect.bisect_right(self.delivered, end)
        times = list(self.delivered[max(0, i - 1) : j])
        gaps = [b - a for a, b in itertools.pairwise(times)]
        longest = max(gaps, default=float("nan"))
        at = gaps.index(longest) if gaps else 0
        errors: dict[str, int] = {}
        for t, name in self.errors:
            if start <= t <= end:
                errors[name] = errors.get(name, 0) + 1
        return {
            "seconds": round(end - start, 2),
            "deliveries": j - i,
            "longest_gap_s": round(longest, 3),
            "longest_gap_starts_at_s": round(times[at] - start, 3) if gaps else None,
            "max_message_latency_s": round(max(self.latency[i:j], default=float("nan")), 3),
            "errors": errors,
        }


def leader(c: Cluster) -> tuple[int, tuple[int, ...]]:
    try:
        state, _ = c.partition_state(TOPIC, 0)
    except LookupError:  # not created yet
        return -1, ()
    return state.leader, state.isr


TIMELINE_EVENTS = (
    "partition_state",
    "leader_and_isr",
    "controlled_shutdown",
    "broker_change",
    "zookeeper_session",
    "controller_resigned",
    "controller_elected",
    "requests_acknowledged",
)


def timeline(c: Cluster, since_wall: float, until_wall: float) -> list[str]:
    """What the brokers' state-change logs say happened in the window, in ms from its start
    (wall clock: the logs' own clock), one line per event."""
    rows = []
    for b in BROKERS:
        for r in c[b].state_changes():
            if r["event"] not in TIMELINE_EVENTS:
                continue
            if not since_wall * 1000 - 50 <= r["ts"] <= until_wall * 1000:
                continue
            if "topic" in r and r["topic"] != TOPIC:
                continue
            keys = ("leader", "leader_epoch", "isr", "reason", "result", "dead", "state")
            detail: dict[str, Any] = {k: r[k] for k in keys if k in r}
            if "remaining" in r:
                detail["remaining"] = r["remaining"]
            if r["event"] == "requests_acknowledged":
                # acked times are from when the controller learned of the event
                detail = {
                    "after_event": r["after_event"],
                    "acked_ms_by_api": r["acked_ms_by_api"],
                    "acked_ms_by_broker": r["acked_ms_by_broker"],
                }
            ts = r.get("learned_at_ms", r["ts"])
            rows.append((ts, f"broker {r['broker']} {r['event']} {detail}"))
    return [f"+{ts - since_wall * 1000:.0f} ms {text}" for ts, text in sorted(rows)]


def controlled_shutdown_done(
    rows: list[dict[str, Any]], since_wall: float, exit_code: int
) -> dict[str, Any]:
    """The stopped leader's ``controlled_shutdown`` line that ended its shutdown, if its
    leaderships had all moved (remaining 0) and it exited cleanly. Otherwise it went down
    as after a crash (a broker gives up after controlled.shutdown.max.retries and shuts
    down anyway, exit status 0): the stall measured would be no controlled shutdown's,
    so RuntimeError."""
    attempts = [r for r in rows if r["ts"] >= since_wall * 1000]
    if exit_code != 0 or not attempts or attempts[-1]["remaining"] != 0:
        raise RuntimeError(
            f"the leader's controlled shutdown did not succeed (exit status {exit_code},"
            f" attempts {[(r['attempt'], r['remaining']) for r in attempts]}): no figure"
        )
    return attempts[-1]


def wait_resumed(s: Stream, after: float, timeout: float, what: str) -> float:
    """The time of the first delivery of a message produced after `after`: the client
    goes on with new messages, not just ones already answered when the fault hit."""

    def check() -> float | None:
        i = bisect.bisect_left(s.delivered, after)
        for k in range(i, min(len(s.delivered), len(s.latency))):
            if s.delivered[k] - s.latency[k] > after:
                return s.delivered[k]
        return None

    return wait_for(check, timeout, what, interval=0.02)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--rate", type=float, default=1000, help="messages per second")
    parser.add_argument("--message-bytes", type=int, default=1024)
    parser.add_argument("--baseline-seconds", type=float, default=20)
    parser.add_argument("--after-seconds", type=float, default=3, help="kept after each fault")
    parser.add_argument(
        "--client-debug", default="", help="librdkafka debug contexts, e.g. metadata,broker"
    )
    args = parser.parse_args()
    session_s = args.session_timeout_ms / 1000
    settings = {
        "zookeeper.session.timeout.ms": str(args.session_timeout_ms),
        "auto.leader.rebalance.enable": "false",
    }
    load_before = os.getloadavg()
    phases: dict[str, Any] = {}
    with (
        zookeeper() as zk_connect,
        tempfile.TemporaryDirectory(
            prefix="bench-client-failover-",
            dir=ROOT / ".zkctl" if (ROOT / ".zkctl").exists() else None,
        ) as tmp,
    ):
        c = Cluster(chroot(zk_connect, "client-failover"), Path(tmp), BROKERS, settings)
        stream: Stream | None = None
        try:
            c.start()
            controller_id, _ = c.wait_controller()
            victim = next(b for b in BROKERS if b != controller_id)
            replicas = (victim, *(b for b in BROKERS if b != victim))
            c.create_topic(TOPIC, {0: replicas}, {"min.insync.replicas": "2"})

            def full() -> bool:
                got = leader(c)
                return got[0] == victim and set(got[1]) == set(BROKERS)

            wait_for(full, 60, "the topic online with a full ISR")
            conf = {
                "bootstrap.servers": ",".join(f"127.0.0.1:{c[b].port()}" for b in BROKERS),
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                **({"debug": args.client_debug} if args.client_debug else {}),
            }
            stream = Stream(conf, args.rate, args.message_bytes)
            stream.start()
            wait_for(lambda: len(stream.delivered) > args.rate, 30, "the producer under way")
            time.sleep(2)

            start = time.monotonic()
            time.sleep(args.baseline_seconds)
            phases["baseline"] = stream.window(start, time.monotonic())

            # SIGKILL of the leader.
            fault, wall = time.monotonic(), time.time()
            c[victim].kill()
            moved = wait_for(
                lambda: leader(c)[0] not in (victim, -1) and time.monotonic(),
                session_s + 60,
                "a new leader",
                interval=0.02,
            )
            resumed = wait_resumed(stream, fault, 120, "deliveries after the SIGKILL")
            time.sleep(args.after_seconds)
            phases["sigkill"] = {
                **stream.window(fault, time.monotonic()),
                "new_leader_elected_after_s": round(moved - fault, 3),
                "first_new_delivery_after_s": round(resumed - fault, 3),
                "session_timeout_s": session_s,
                "fault_wall_clock": round(wall, 3),
                "broker_timeline": timeline(c, wall, time.time()),
            }

            # Back: restart, rejoin the ISR, and lead again (a preferred election).
            c[victim].start()
            wait_for(lambda: set(leader(c)[1]) == set(BROKERS), 120, "the ISR full again")
            time.sleep(1)
            fault, wall = time.monotonic(), time.time()
            elect.start_preferred_election(c.zk, elect.parse_scope(topic=TOPIC))
            wait_for(full, 60, "the preferred leader back", interval=0.02)
            wait_resumed(stream, fault, 60, "deliveries after the election")
            time.sleep(args.after_seconds)
            phases["preferred_election"] = {
                **stream.window(fault, time.monotonic()),
                "fault_wall_clock": round(wall, 3),
                "broker_timeline": timeline(c, wall, time.time()),
            }

            # Controlled shutdown of the leader.
            time.sleep(1)
            fault, wall = time.monotonic(), time.time()
            c[victim].terminate()
            code = c[victim].wait_exit(120)
            exited = time.monotonic()
            shutdown = controlled_shutdown_done(
                c[victim].state_changes("controlled_shutdown"), wall, code
            )
            resumed = wait_resumed(stream, fault, 60, "deliveries after the controlled shutdown")
            time.sleep(args.after_seconds)
            phases["controlled_shutdown"] = {
                **stream.window(fault, time.monotonic()),
                "exit_code": code,
                "controlled_shutdown_attempts": shutdown["attempt"],
                "broker_exited_after_s": round(exited - fault, 3),
                "first_new_delivery_after_s": round(resumed - fault, 3),
                "fault_wall_clock": round(wall, 3),
                "broker_timeline": timeline(c, wall, time.time()),
            }
        finally:
            if stream is not None:
                stream.stopping.set()
                stream.join(150)
            c.close()
    kill, graceful = phases["sigkill"], phases["controlled_shutdown"]
    kill_goal = session_s + KILL_MARGIN_S
    all_errors: dict[str, int] = {}
    for _, name in stream.errors if stream else []:
        all_errors[name] = all_errors.get(name, 0) + 1
    emit(
        {
            "benchmark": "client_failover",
            "what": (
                "longest gap between delivery callbacks of a confluent-kafka producer "
                f"({args.rate:.0f} msg/s of {args.message_bytes} B, acks=all, linger.ms=5, "
                "RF 3, min.insync.replicas=2) across a fault of the partition's leader "
                "(not the controller)"
            ),
            "load_avg_before": [round(x, 2) for x in load_before],
            "load_avg_after": [round(x, 2) for x in os.getloadavg()],
            "floor_baseline_longest_gap_s": phases["baseline"]["longest_gap_s"],
            "phases": phases,
            "errors_total": all_errors,
            "undelivered_at_end": stream.undelivered if stream else None,
            "goals": {
                "sigkill_longest_gap_s": kill_goal,
                "controlled_shutdown_longest_gap_s": GRACEFUL_GOAL_S,
                "controlled_shutdown_errors": 0,
            },
            "met": {
                "sigkill": kill["longest_gap_s"] <= kill_goal and not kill["errors"],
                "controlled_shutdown": graceful["longest_gap_s"] < GRACEFUL_GOAL_S
                and not graceful["errors"],
            },
        }
    )


if __name__ == "__main__":
    main()

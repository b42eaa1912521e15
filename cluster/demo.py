"""`zkctl demo`: a local cluster that shows its controller failing over, again and again.

It provisions ZooKeeper as the project does everywhere, starts brokers as child processes
(so that nothing outlives the demo, even on Ctrl-C), creates a topic, and every few
seconds takes the controller down, cycling through the three ways a controller fails:
SIGKILL (the session expires), a graceful stop (controlled shutdown, the session closes at
once), and SIGSTOP (a zombie: paused past its session, then resumed and fenced). What
happens is narrated from the brokers' own state-change logs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from admin import topics as admin_topics
from cluster import zookeeper as zkp
from cluster.supervised import SupervisedCluster, wait_for

Say = Callable[[str], None]

FAULTS = ("kill", "stop", "pause")
DEMO_TOPIC = "demo"

DEFAULT_SETTINGS = {
    # Short sessions and backoffs keep each failover a few seconds long.
    "zookeeper.session.timeout.ms": "4000",
    "controlled.shutdown.retry.backoff.ms": "300",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "300",
    "leader.imbalance.check.interval.seconds": "10",
}


@dataclass
class DemoOptions:
    brokers: int = 3
    duration_s: float | None = None
    interval_s: float = 6.0
    directory: Path = Path(".zkctl/demo")
    zookeeper: str | None = None
    session_timeout_ms: int = 4000
    partitions: int = 6


def _clock(ts_ms: float) -> str:
    t = time.localtime(ts_ms / 1000)
    return time.strftime("%H:%M:%S", t) + f".{int(ts_ms % 1000):03d}"


def describe_event(r: dict[str, Any]) -> str | None:
    """One line for a state-change log record worth showing; None for the rest."""
    b = r.get("broker")
    kind = r.get("event")
    if kind == "controller_elected":
        return f"broker {b} won the election: controller epoch {r['controller_epoch']}"
    if kind == "controller_resigned":
        return f"broker {b} resigned as controller of epoch {r['controller_epoch']} ({r['reason']})"
    if kind == "controller_failover":
        return (
            f"controller {b} loaded {r['partitions']} partitions and {r['live_brokers']} brokers "
            f"in {r['load_ms']:.0f} ms (failover done in {r['total_ms']:.0f} ms)"
        )
    if kind == "broker_change":
        parts = [f"{k} {r[k]}" for k in ("dead", "new", "bounced") if r.get(k)]
        return f"controller {b} sees brokers change: {', '.join(parts)}; live {r['live']}"
    if kind == "request_rejected":
        return (
            f"broker {b} refused {r['api']} from controller {r['controller_id']} "
            f"(epoch {r['controller_epoch']}): {r['error']}"
        )
    if kind == "leader_and_isr" and r.get("result") == "rejected":
        return (
            f"broker {b} refused the state of {r['topic']}-{r['partition']} from controller "
            f"{r['controller_id']} epoch {r['controller_epoch']}: {r['error']}"
        )
    if kind == "zookeeper_session" and r.get("state") in ("LOST", "SUSPENDED", "CLOSED"):
        state = {"LOST": "expired", "SUSPENDED": "disconnected", "CLOSED": "closed"}[r["state"]]
        return f"broker {b}'s ZooKeeper session {state}"
    if kind == "broker_registered":
        return f"broker {b} registered with broker epoch {r['broker_epoch']}"
    if kind == "isr_change":
        return f"leader {b} set the ISR of {r['topic']}-{r['partition']} to {r['isr']} ({r['why']})"
    return None


def summarize_partition_states(rows: list[dict[str, Any]]) -> str:
    """Several partition-state writes of one controller decision, as one line."""
    reason = rows[0]["reason"]
    epoch = rows[0]["controller_epoch"]
    shown = ", ".join(
        f"{r['topic']}-{r['partition']} -> {r['leader'] if r['leader'] >= 0 else 'NONE'}"
        f" (epoch {r['leader_epoch']}, isr {r['isr']})"
        for r in rows[:4]
    )
    more = f" and {len(rows) - 4} more" if len(rows) > 4 else ""
    return (
        f"controller (epoch {epoch}) wrote {len(rows)} partition states [{reason}]: {shown}{more}"
    )


class Timeline:
    """Follows every broker's state-change log and prints what happens, in time order."""

    def __init__(self, logs: list[Path], say: Say) -> None:
        self.logs = logs
        self.say = say
        self._offsets: dict[Path, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="timeline", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.flush()

    def _read_new(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for path in self.logs:
            try:
                with path.open("rb") as f:
                    f.seek(self._offsets.get(path, 0))
                    data = f.read()
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n") + 1  # leave a line still being written for next time
            self._offsets[path] = self._offsets.get(path, 0) + end
            for line in data[:end].splitlines():
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    continue
        rows.sort(key=lambda r: r.get("ts", 0))
        return rows

    def flush(self) -> None:
        rows = self._read_new()
        i = 0
        while i < len(rows):
            r = rows[i]
            if r.get("event") == "partition_state":
                group = [r]
                while (
                    i + 1 < len(rows)
                    and rows[i + 1].get("event") == "partition_state"
                    and rows[i + 1].get("reason") == r.get("reason")
                    and rows[i + 1].get("broker") == r.get("broker")
                ):
                    i += 1
                    group.append(rows[i])
                self.say(f"{_clock(r['ts'])}  {summarize_partition_states(group)}")
            else:
                line = describe_event(r)
                if line is not None:
                    self.say(f"{_clock(r['ts'])}  {line}")
            i += 1

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.flush()
            except Exception as e:  # the demo goes on without its narration
                self.say(f"(timeline error: {e})")


@contextmanager
def running_cluster(options: DemoOptions, say: Say) -> Iterator[SupervisedCluster]:
    root = (options.directory / time.strftime("run-%Y%m%d-%H%M%S")).resolve()
    with ExitStack() as stack:
        if options.zookeeper:
            connect_base = options.zookeeper
        else:
            zk = zkp.provision(
                base_dir=root / "zookeeper", progress=lambda m: say(f"[zookeeper] {m}")
            )
            stack.callback(zk.close)
            connect_base = zk.connect_string
        connect = zkp.chroot_connect_string(connect_base, f"/zkctl-demo-{int(time.time())}")
        settings = {
            **DEFAULT_SETTINGS,
            "zookeeper.session.timeout.ms": str(options.session_timeout_ms),
        }
        cluster = SupervisedCluster(connect, root, range(1, options.brokers + 1), settings)
        stack.callback(cluster.close)
        say(f"starting {options.brokers} brokers (data and logs in {root}) ...")
        cluster.start(wait=False)
        cluster.wait_registered(cluster.brokers, timeout=120)
        controller_id, epoch = cluster.wait_controller(timeout=120)
        say(f"all brokers registered; broker {controller_id} is controller, epoch {epoch}")
        yield cluster


def print_partitions(cluster: SupervisedCluster, say: Say) -> None:
    try:
        states = cluster.partition_states(DEMO_TOPIC)
    except LookupError:
        return
    for p, s in sorted(states.items()):
        leader = s.leader if s.leader >= 0 else "NONE"
        say(
            f"    {DEMO_TOPIC}-{p}: leader {leader}, "
            f"leader epoch {s.leader_epoch}, isr {list(s.isr)}"
        )


def run_demo(options: DemoOptions, say: Say) -> int:
    deadline = None if options.duration_s is None else time.monotonic() + options.duration_s
    with running_cluster(options, say) as cluster:
        timeline = Timeline(
            [b.data_dir / "state-change.log" for b in cluster.brokers.values()], say
        )
        rf = min(3, options.brokers)
        admin_topics.create_topic(
            cluster.zk,
            admin_topics.CreateTopicRequest(
                DEMO_TOPIC, partitions=options.partitions, replication_factor=rf
            ),
        )
        cluster.wait_topic_online(DEMO_TOPIC)
        say(
            f"created topic {DEMO_TOPIC!r}: {options.partitions} partitions, "
            f"replication factor {rf}"
        )
        print_partitions(cluster, say)
        timeline.flush()  # start-up history
        timeline.start()
        try:
            cycle = 0
            while deadline is None or time.monotonic() < deadline:
                fault = FAULTS[cycle % len(FAULTS)]
                cycle += 1
                _failover(cluster, fault, cycle, say)
                timeline.flush()
                print_partitions(cluster, say)
                pause_until = time.monotonic() + options.interval_s
                if deadline is not None:
                    pause_until = min(pause_until, deadline)
                while time.monotonic() < pause_until:
                    time.sleep(0.2)
        finally:
            timeline.stop()
        say(f"demo over after {cycle} failovers; stopping everything")
    return 0


def _failover(cluster: SupervisedCluster, fault: str, cycle: int, say: Say) -> None:
    controller_id, epoch = cluster.wait_controller(timeout=120)
    victim = cluster[controller_id]
    action = {
        "kill": "SIGKILL the controller",
        "stop": "stop the controller gracefully (controlled shutdown)",
        "pause": "SIGSTOP the controller (it becomes a zombie)",
    }[fault]
    verb = {"kill": "SIGKILL", "stop": "graceful stop", "pause": "SIGSTOP"}[fault]
    say(f"--- failover {cycle}: {action}: broker {controller_id}, epoch {epoch} ---")
    started = time.monotonic()
    if fault == "kill":
        victim.kill()
    elif fault == "stop":
        victim.terminate()
    else:
        victim.pause()
    new_id, new_epoch = cluster.wait_controller(
        not_id=controller_id, min_epoch=epoch + 1, timeout=120
    )
    elapsed = time.monotonic() - started
    say(
        f"    broker {new_id} took over as controller, epoch {new_epoch}, "
        f"{elapsed:.1f} s after the {verb}"
    )
    if fault == "pause":
        # Let the new controller act, then wake the zombie: it finds its session gone.
        time.sleep(1.0)
        say(f"    resuming the zombie, broker {controller_id}: it still believes it is controller")
        victim.resume()
        wait_for(
            lambda: any(
                r["controller_epoch"] == epoch for r in victim.state_changes("controller_resigned")
            ),
            60,
            "the zombie to resign",
        )
    else:
        if victim.alive():
            victim.wait_exit(60)
        victim.start()
    cluster.wait_registered([controller_id], timeout=120)
    # The returning broker catches up and rejoins the ISRs (the leaders add it back).
    wait_for(lambda: isr_complete(cluster), 60, "the ISRs to fill up again")


def isr_complete(cluster: SupervisedCluster) -> bool:
    assignment = cluster.assignment(DEMO_TOPIC)
    if assignment is None:
        return False
    states = cluster.partition_states(DEMO_TOPIC)
    return all(set(r) <= set(states[p].isr) for p, r in assignment.partitions.items())

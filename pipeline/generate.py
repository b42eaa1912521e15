"""Large, realistic state-change logs for scale tests, from the controller's own decisions.

    python -m pipeline.generate --brokers 5 --partitions 10000 --failovers 1000 --out DIR

A discrete-event simulation of a cluster: the controller's real partition and replica state
machines (`controller/state_machines.py`, deciding with `controller/election.py`) run over
an in-memory store (`pipeline.simstore`), driven by the controller's own reactions to
events (`controller/reactions.py`: failover, broker loss and start-up, new partitions,
controlled shutdown, preferred leader rebalance), as the real controller calls them, and
ISR change notifications. Brokers apply the
LeaderAndIsr requests the real request batch builds, with the replica manager's fencing,
and leaders shrink and expand ISRs. Every line is written through a `StateChangeLog`, so
lines have the real events and fields; only time is simulated.

Faults cycle through SIGKILL of the controller, a graceful stop of the controller, a paused
controller that comes back as a zombie (and is fenced), SIGKILL and graceful stop of
other brokers, and a broker bounced (its session expired and it registered again before
the controller read the change, which takes it offline and back in one event); each lost
broker comes back, followers catch up, and between faults ISRs flap and the controller
rebalances leaders. Each broker's clock is off by up to `--skew-ms`, as real clocks are.

DIR gets `broker-<id>/data/state-change.log` (the layout `zkctl demo` leaves) and
`truth.json`: what really happened, in true time, kept by the simulation itself (not read
back from the logs), for tests to compare `zkctl report`'s answers with.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config import BROKER_CONFIGS
from broker.state_change_log import (
    SCHEMA_VERSION,
    LeaderAndIsrRow,
    PartitionStateRow,
    StateChangeLog,
)
from controller import election, reactions
from controller.assignment import assign_replicas_to_brokers
from controller.context import (
    ControllerContext,
    LeaderIsrAndControllerEpoch,
    PartitionStateName,
    ReplicaAssignment,
    ReplicaStateName,
)
from controller.request_batch import BrokerRequest
from controller.state_machines import ControllerOps, PartitionStateMachine, ReplicaStateMachine
from pipeline.simstore import SimStore
from wire.api import ApiKey
from zkdata.client import ControllerMovedError
from zkdata.znodes import BrokerRegistration, EndPoint, LeaderAndIsr, TopicPartition

P = PartitionStateName
R = ReplicaStateName

FAULTS = (
    "kill_controller",
    "stop_controller",
    "pause_controller",
    "kill_broker",
    "stop_broker",
    "bounce_broker",
)
UNCLEAN_TOPIC = "unclean"
WRITE_MS = 0.01  # the controller's time per partition state written (batched ZooKeeper I/O)
APPLY_MS = 0.01  # a broker's time per partition state applied
START_MS = 1_800_000_000_000  # 2027-01-15: a fixed epoch, so runs are reproducible
# A stopping broker's controlled shutdown attempts, as its defaults make them.
SHUTDOWN_ATTEMPTS = int(BROKER_CONFIGS["controlled.shutdown.max.retries"].default)
SHUTDOWN_BACKOFF_MS = int(BROKER_CONFIGS["controlled.shutdown.retry.backoff.ms"].default)


@dataclass
class Options:
    brokers: int = 5
    partitions: int = 1000
    failovers: int = 100
    out: Path = Path("generated-logs")
    topics: int | None = None
    replication_factor: int = 3
    seed: int = 1
    skew_ms: float = 3.0
    session_timeout_ms: int = 6000
    target_lines: int | None = None
    flaps_per_episode: int | None = None


class SimLog(StateChangeLog):
    """A broker's state-change log whose clock is the simulation's (plus the broker's
    skew) and whose lines go to the simulation's buffer."""

    def __init__(self, sim: Simulation, broker_id: int) -> None:
        super().__init__(None, broker_id)
        self.sim = sim

    def write(self, event: str, **fields: Any) -> None:
        self.sim.emit(self.broker_id, event, [fields])

    def write_many(self, event: str, rows: Iterable[dict[str, Any]], **tail: Any) -> None:
        self.sim.emit(
            self.broker_id, event, [{**row, **tail} for row in rows] if tail else list(rows)
        )

    def partition_states(self, epoch: int, rows: Iterable[PartitionStateRow]) -> None:
        self.write_many("partition_state", (r._asdict() for r in rows), controller_epoch=epoch)

    def leader_and_isr(self, rows: Iterable[LeaderAndIsrRow]) -> None:
        self.write_many("leader_and_isr", (r._asdict() for r in rows))


@dataclass
class SimBroker:
    broker_id: int
    log: SimLog
    offset_ms: float
    alive: bool = True
    registered: bool = True
    epoch: int = 0  # broker epoch (registration czxid)
    controller_epoch: int = -1
    believed: int | None = None  # who it believes is controller
    parts: dict[TopicPartition, int] = field(default_factory=dict)  # partition -> leader epoch
    busy_until: float = 0.0


@dataclass
class Truth:
    tenures: list[dict[str, Any]] = field(default_factory=list)
    incidents: list[dict[str, Any]] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)
    open: dict[TopicPartition, tuple[float, int | None]] = field(default_factory=dict)
    shrinks: dict[TopicPartition, int] = field(default_factory=lambda: defaultdict(int))
    expands: dict[TopicPartition, int] = field(default_factory=lambda: defaultdict(int))
    leader_changes: dict[TopicPartition, int] = field(default_factory=lambda: defaultdict(int))
    unclean: int = 0
    rejected_requests: int = 0
    rejected_states: int = 0


class Controller:
    """The active controller: the real state machines over the store, plus Kafka's
    reactions to events (KafkaController's handlers, without ZooKeeper)."""

    def __init__(self, sim: Simulation, broker_id: int, epoch: int) -> None:
        self.sim = sim
        self.broker_id = broker_id
        self.ctx = ControllerContext(epoch=epoch, epoch_zk_version=sim.store.epoch_zk_version)
        self.outbox: list[BrokerRequest] = []
        self.ops = ControllerOps(
            self.ctx, sim.store, broker_id, self.outbox.extend, sim.brokers[broker_id].log
        )
        self.psm = PartitionStateMachine(self.ops)
        self.rsm = ReplicaStateMachine(self.ops)

    # --- KafkaController's reactions ------------------------------------------------------

    def load(self) -> None:
        """The failover's context: live brokers, assignments, partition states."""
        sim, ctx = self.sim, self.ctx
        ctx.add_live_brokers(
            {b.broker_id: (registration(b.broker_id), b.epoch) for b in sim.registered()}
        )
        for tp, replicas in sim.assignment.items():
            ctx.update_assignment(tp, ReplicaAssignment(replicas))
        for tp, st in sim.store.states.items():
            ctx.leadership[tp] = LeaderIsrAndControllerEpoch(st.leader_and_isr, st.controller_epoch)

    def failover(self) -> None:
        self.load()
        self.ops.batch.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids, None)
        self.ops.barrier()
        reactions.start_state_machines(self.psm, self.rsm)

    def create_topics(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.ctx.update_assignment(tp, ReplicaAssignment(self.sim.assignment[tp]))
        reactions.new_partitions(self.psm, self.rsm, tps)

    def broker_failure(self, dead: set[int]) -> None:
        # No topic is deleted here, so no replica deletion can fail.
        reactions.brokers_failed(self.psm, self.rsm, dead, lambda _replicas: None)

    def broker_startup(self, new: set[int]) -> None:
        started = {b: (registration(b), self.sim.brokers[b].epoch) for b in new}
        reactions.brokers_started(self.psm, self.rsm, started)

    def controlled_shutdown(self, broker: int) -> int:
        """The partitions the broker still leads once its leaderships were moved."""
        _led, remaining = reactions.controlled_shutdown_moves(self.psm, self.rsm, broker)
        self.ops.flush()
        return len(remaining)

    def isr_changed(self, tps: Iterable[TopicPartition]) -> None:
        ctx = self.ctx
        known = list(tps)
        for tp, st in self.sim.store.read_partition_states(known).items():
            if st is not None:
                ctx.leadership[tp] = LeaderIsrAndControllerEpoch(
                    st.leader_and_isr, st.controller_epoch
                )
        if known:
            self.ops.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, known)
            self.ops.flush()

    def rebalance(self) -> None:
        for _broker, tps in sorted(election.imbalanced_partitions(self.ctx, 10).items()):
            reactions.preferred_election(self.psm, tps)


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", 9092 + broker_id),))


class Simulation:
    def __init__(self, options: Options) -> None:
        self.o = options
        self.rng = random.Random(options.seed)
        self.now = float(START_MS)
        self.seq = 0
        self.buffers: dict[int, list[tuple[float, int, str]]] = defaultdict(list)
        self.lines: dict[int, int] = defaultdict(int)
        self.truth = Truth()
        self.store = SimStore(self._on_write)
        self.brokers: dict[int, SimBroker] = {}
        self.next_broker_epoch = 10
        for b in range(1, options.brokers + 1):
            offset = self.rng.uniform(-options.skew_ms, options.skew_ms)
            self.brokers[b] = SimBroker(b, SimLog(self, b), offset, epoch=self._broker_epoch())
        self.assignment: dict[TopicPartition, tuple[int, ...]] = {}
        self.controller: Controller | None = None
        self.controllers: list[Controller] = []
        self.pending_flaps: list[tuple[TopicPartition, list[int]]] = []
        self.epoch = 0
        self.files: dict[int, Any] = {}
        self.max_t = self.now
        self.ack_events = 0

    # --- time and lines -----------------------------------------------------------------

    def _broker_epoch(self) -> int:
        self.next_broker_epoch += self.rng.randint(3, 20)
        return self.next_broker_epoch

    def at(self, t: float) -> None:
        self.now = t
        self.max_t = max(self.max_t, t)

    def emit(self, broker: int, event: str, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        b = self.brokers[broker]
        ts = int(self.now + b.offset_ms)
        head = {"ts": ts, "v": SCHEMA_VERSION, "broker": broker, "event": event}
        buf = self.buffers[broker]
        for row in rows:
            self.seq += 1
            buf.append((self.now, self.seq, json.dumps({**head, **row}, separators=(",", ":"))))
        self.lines[broker] += len(rows)
        self.max_t = max(self.max_t, self.now)

    def flush(self) -> None:
        """Append each broker's buffered lines, in true-time order, to its file."""
        for b, buf in self.buffers.items():
            if not buf:
                continue
            buf.sort()
            f = self.files.get(b)
            if f is None:
                path = self.o.out / f"broker-{b}" / "data" / "state-change.log"
                path.parent.mkdir(parents=True, exist_ok=True)
                f = self.files[b] = open(path, "w", encoding="utf-8")  # noqa: SIM115
            f.write("".join(line + "\n" for _, _, line in buf))
            buf.clear()

    def close(self) -> None:
        self.flush()
        for f in self.files.values():
            f.close()

    @property
    def total_lines(self) -> int:
        return sum(self.lines.values())

    # --- truth ----------------------------------------------------------------------------

    def _on_write(
        self, tp: TopicPartition, before: LeaderAndIsr | None, after: LeaderAndIsr
    ) -> None:
        self.now += WRITE_MS  # a write takes time: big decisions spread out
        self.max_t = max(self.max_t, self.now)
        t = self.truth
        if before is not None:
            b, a = set(before.isr), set(after.isr)
            if b - a:
                t.shrinks[tp] += 1
            if a - b:
                t.expands[tp] += 1
            if after.leader != before.leader and after.leader >= 0:
                t.leader_changes[tp] += 1
        if after.leader < 0 and tp not in t.open:
            t.open[tp] = (self.now, None)

    def lost(self, broker: int, at: float, incident: dict[str, Any]) -> None:
        """Broker `broker` is known lost at `at`: every partition it leads is unavailable."""
        for tp, st in self.store.states.items():
            if st.leader_and_isr.leader == broker and tp not in self.truth.open:
                self.truth.open[tp] = (at, incident["n"])

    def led(self, tp: TopicPartition, at: float) -> None:
        w = self.truth.open.pop(tp, None)
        if w is not None:
            self.truth.windows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "start": w[0],
                    "end": at,
                    "incident": w[1],
                }
            )

    def new_incident(self, **fields: Any) -> dict[str, Any]:
        inc = {"n": len(self.truth.incidents) + 1, **fields}
        self.truth.incidents.append(inc)
        return inc

    # --- brokers ----------------------------------------------------------------------------

    def registered(self) -> list[SimBroker]:
        return [b for b in self.brokers.values() if b.registered]

    def live_others(self, broker: int) -> list[SimBroker]:
        return [
            b for b in self.brokers.values() if b.alive and b.registered and b.broker_id != broker
        ]

    def deliver(self, c: Controller, learned_at: float, event: str) -> float:
        """Send what the controller queued; brokers apply it; returns when all answered.
        Logs the controller's requests_acknowledged line."""
        requests = list(c.outbox)
        c.outbox.clear()
        if not requests:
            return self.now
        counts: dict[str, int] = defaultdict(int)
        acked_at: dict[int, float] = {}
        sent_at = self.now
        for r in requests:
            counts[r.api_key.name] += 1
            b = self.brokers[r.broker_id]
            if not b.alive:
                continue
            arrive = sent_at + self.rng.uniform(0.3, 1.5)
            start = max(arrive, b.busy_until)
            n = len(r.partitions) or 1
            done = start + 0.2 + APPLY_MS * n
            b.busy_until = done
            if r.api_key == ApiKey.LEADER_AND_ISR:
                self.apply(b, r.body, done)
            acked_at[r.broker_id] = max(acked_at.get(r.broker_id, 0.0), done + 0.3)
        last = max(acked_at.values(), default=sent_at)
        self.at(last)
        c.sim.brokers[c.broker_id].log.write(
            "requests_acknowledged",
            controller_epoch=c.ctx.epoch,
            after_event=event,
            learned_at_ms=round(learned_at + self.brokers[c.broker_id].offset_ms, 1),
            requests=dict(counts),
            acked_ms=round(last - learned_at, 1),
            acked_ms_by_api={k: round(last - learned_at, 1) for k in counts},
            acked_ms_by_broker={
                str(b): round(t - learned_at, 1) for b, t in sorted(acked_at.items())
            },
            abandoned=0,
        )
        return last

    def apply(self, b: SimBroker, body: dict[str, Any], t: float) -> None:
        """A broker applies a LeaderAndIsr (the replica manager's fencing)."""
        saved = self.now
        self.at(t)
        try:
            ce = body["controller_epoch"]
            if ce < b.controller_epoch:
                self.truth.rejected_requests += 1
                b.log.request_rejected(
                    "LeaderAndIsr",
                    body["controller_id"],
                    ce,
                    body["broker_epoch"],
                    "STALE_CONTROLLER_EPOCH",
                )
                return
            b.controller_epoch = ce
            rows = []
            for ts_ in body["topic_states"]:
                topic = ts_["topic_name"]
                for ps in ts_["partition_states"]:
                    tp = TopicPartition(topic, ps["partition_index"])
                    error = None
                    if b.broker_id not in ps["replicas"]:
                        error = "UNKNOWN_TOPIC_OR_PARTITION"
                    else:
                        cur = b.parts.get(tp)
                        epoch = ps["leader_epoch"]
                        if cur is not None and epoch < cur:
                            error = "STALE_CONTROLLER_EPOCH"
                        elif cur is not None and epoch == cur:
                            continue
                    if error is not None:
                        self.truth.rejected_states += 1
                    else:
                        b.parts[tp] = ps["leader_epoch"]
                        if ps["leader"] == b.broker_id:
                            self.led(tp, t)
                    rows.append(
                        LeaderAndIsrRow.of_request(topic, ps, body["controller_id"], ce, error)
                    )
            b.log.leader_and_isr(rows)
        finally:
            self.now = saved

    # --- the scenario ---------------------------------------------------------------------

    def setup(self) -> None:
        o = self.o
        n_topics = o.topics or max(2, o.partitions // 500 + 1)
        ids = sorted(self.brokers)
        rf = min(o.replication_factor, len(ids))
        per = [
            o.partitions // n_topics + (1 if i < o.partitions % n_topics else 0)
            for i in range(n_topics)
        ]
        names = [UNCLEAN_TOPIC] + [f"topic-{i}" for i in range(1, n_topics)]
        self.store.configs[UNCLEAN_TOPIC] = {"unclean.leader.election.enable": "true"}
        # Brokers start; the first to start wins the first election.
        for b in self.brokers.values():
            self.at(self.now + self.rng.uniform(20, 60))
            b.log.broker_registered(b.epoch, "127.0.0.1", 9092 + b.broker_id)
        first = self.brokers[ids[0]]
        self.elect(first, learned_at=self.now)
        for b in self.brokers.values():
            if b is not first:
                self.at(self.now + self.rng.uniform(0.5, 2))
                b.believed = first.broker_id
                b.log.controller_seen(first.broker_id, "election found a controller")
        # Topics are created.
        self.at(self.now + 1000)
        for name, count in zip(names, per, strict=True):
            if count == 0:
                continue
            for p, replicas in assign_replicas_to_brokers(ids, count, rf, rng=self.rng).items():
                self.assignment[TopicPartition(name, p)] = tuple(replicas)

        c = self.active()
        learned = self.now
        c.create_topics(sorted(self.assignment))
        self.deliver(c, learned, "TopicChange")
        self.flush()

    def active(self) -> Controller:
        assert self.controller is not None
        return self.controller

    def elect(self, winner: SimBroker, learned_at: float) -> Controller:
        self.store.elect()
        self.epoch += 1
        winner.believed = winner.broker_id
        winner.log.controller_elected(self.epoch, self.store.epoch_zk_version)
        elected_at = self.now
        c = Controller(self, winner.broker_id, self.epoch)
        self.controller = c
        self.controllers.append(c)
        self.truth.tenures.append(
            {"epoch": self.epoch, "broker": winner.broker_id, "start": elected_at, "end": None}
        )
        # The failover takes time in proportion to the cluster's size.
        self.at(self.now + 2 + 0.005 * len(self.assignment))
        c.failover()
        done = self.deliver(c, learned_at, "Reelect")
        self.at(max(done, self.now) + 0.5)
        total = self.now - elected_at
        winner.log.failover_loaded(
            self.epoch,
            len(c.ctx.live_brokers),
            len(self.assignment),
            {
                "load_ms": total * 0.3,
                "update_metadata_queued_ms": total * 0.35,
                "update_metadata_encoded_ms": total * 0.45,
                "replica_state_machine_ms": total * 0.6,
                "partition_state_machine_ms": total * 0.9,
                "offline_replicas_ms": total * 0.95,
                "total_ms": total,
                "since_elected_ms": total,
            },
        )
        return c

    def end_tenure(self, epoch: int, at: float, reason: str) -> None:
        for t in self.truth.tenures:
            if t["epoch"] == epoch:
                t["end"], t["end_reason"] = at, reason

    def controller_gone(self, old: int, incident: dict[str, Any] | None) -> Controller:
        """/controller disappeared: every live broker notices, one wins the election.
        With `incident` (the controller vanished): it is lost at the first notice."""
        notices = []
        others = self.live_others(old)
        base = self.now
        for b in others:
            self.at(base + self.rng.uniform(0.3, 3.0))
            if b.believed == old:
                notices.append(self.now)
            b.believed = -1
            b.log.controller_seen(-1, "controller changed")
        first = min(notices) if notices else base
        if incident is not None:
            incident["lost"] = first
            self.end_tenure(incident["epoch"], first, "lost")
            self.lost(old, first, incident)
        winner = self.rng.choice(others)
        self.at(base + 3.2 + self.rng.uniform(0.2, 2.0))
        elect_at = self.now
        for b in others:
            if b is not winner:
                self.at(elect_at + self.rng.uniform(0.5, 2.0))
                b.believed = winner.broker_id
                b.log.controller_seen(winner.broker_id, "lost the election")
                b.log.controller_seen(winner.broker_id, "controller changed")
        self.at(elect_at)
        return self.elect(winner, learned_at=elect_at)

    def restart(self, b: SimBroker, at: float) -> None:
        """A lost broker registers again (a new incarnation) and catches up."""
        self.at(at)
        b.alive = True
        b.registered = True
        b.epoch = self._broker_epoch()
        b.parts.clear()
        b.controller_epoch = -1
        b.log.broker_registered(b.epoch, "127.0.0.1", 9092 + b.broker_id)
        c = self.active()
        self.at(self.now + self.rng.uniform(0.5, 2))
        b.believed = c.broker_id
        b.log.controller_seen(c.broker_id, "election found a controller")
        self.at(self.now + self.rng.uniform(0.5, 2))
        learned = self.now
        live = sorted(x.broker_id for x in self.registered())
        self.brokers[c.broker_id].log.broker_change(c.ctx.epoch, [b.broker_id], [], [], live)
        for inc in self.truth.incidents:
            if inc["broker"] == b.broker_id and inc.get("back") is None:
                inc["back"] = self.now
        c.broker_startup({b.broker_id})
        self.deliver(c, learned, "BrokerChange")
        self.catch_up(b.broker_id, self.now + self.rng.uniform(200, 1500))

    def catch_up(self, broker: int, at: float) -> None:
        """Followers not in the ISR catch up: their leaders add them back."""
        c = self.active()
        changed = []
        t = at
        for tp, replicas in self.assignment.items():
            st = self.store.states[tp].leader_and_isr
            if broker in replicas and broker not in st.isr and st.leader >= 0:
                leader = self.brokers[st.leader]
                if not leader.alive:
                    continue
                t += 0.01
                self.at(t)
                self.isr_write(tp, leader, (*st.isr, broker), f"replica {broker} caught up")
                changed.append(tp)
        if changed:
            self.at(t + 200)
            learned = self.now
            c.isr_changed(changed)
            self.deliver(c, learned, "IsrChangeNotification")

    def isr_write(
        self, tp: TopicPartition, leader: SimBroker, isr: tuple[int, ...], why: str
    ) -> None:
        written = self.store.leader_change(
            tp, lambda lai: LeaderAndIsr(lai.leader, lai.leader_epoch, isr, lai.zk_version)
        )
        if written is None:
            return
        leader.log.write_many(
            "isr_change",
            [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "leader": written.leader,
                    "leader_epoch": written.leader_epoch,
                    "isr": list(written.isr),
                    "zk_version": written.zk_version,
                    "why": why,
                }
            ],
        )

    def flaps(self, count: int) -> None:
        """Followers fall behind (and come back later): ISR shrinks, then expands. In the
        unclean topic a leader may be left alone in its ISR, which sets up unclean elections."""
        c = self.active()
        tps = self.rng.sample(sorted(self.assignment), min(count, len(self.assignment)))
        shrunk = []
        for tp in tps:
            st = self.store.states[tp].leader_and_isr
            if st.leader < 0 or len(st.isr) < 2 or not self.brokers[st.leader].alive:
                continue
            followers = [r for r in st.isr if r != st.leader]
            drop = followers if tp.topic == UNCLEAN_TOPIC else [self.rng.choice(followers)]
            self.at(self.now + self.rng.uniform(1, 30))
            isr = tuple(r for r in st.isr if r not in drop)
            why = "; ".join(f"replica {r} fell behind" for r in drop)
            self.isr_write(tp, self.brokers[st.leader], isr, why)
            shrunk.append((tp, drop))
        if shrunk:
            self.at(self.now + 200)
            learned = self.now
            c.isr_changed([tp for tp, _ in shrunk])
            self.deliver(c, learned, "IsrChangeNotification")
        self.pending_flaps = shrunk

    def heal_flaps(self) -> None:
        c = self.active()
        healed = []
        for tp, drop in self.pending_flaps:
            st = self.store.states[tp].leader_and_isr
            if st.leader < 0 or not self.brokers[st.leader].alive:
                continue
            back = [r for r in drop if r not in st.isr and self.brokers[r].alive]
            if not back:
                continue
            self.at(self.now + self.rng.uniform(1, 30))
            why = "; ".join(f"replica {r} caught up" for r in back)
            self.isr_write(tp, self.brokers[st.leader], (*st.isr, *back), why)
            healed.append(tp)
        self.pending_flaps = []
        if healed:
            self.at(self.now + 200)
            learned = self.now
            c.isr_changed(healed)
            self.deliver(c, learned, "IsrChangeNotification")

    def episode(self, fault: str) -> None:
        o = self.o
        c = self.active()
        cid = c.broker_id
        others = [b for b in self.live_others(cid)]
        if fault.endswith("_controller"):
            victim = self.brokers[cid]
        else:
            victim = self.rng.choice(others)
            # Half the time, the leader left alone in an unclean topic's ISR: an unclean
            # election follows when it is lost.
            alone = [
                self.brokers[leader]
                for tp, _ in self.pending_flaps
                if tp.topic == UNCLEAN_TOPIC
                and (leader := self.store.leader(tp)) >= 0
                and self.brokers[leader] in others
            ]
            if alone and self.rng.random() < 0.5:
                victim = self.rng.choice(alone)
        self.at(self.max_t + self.rng.uniform(500, 3000))
        t_fault = self.now
        if fault in ("kill_controller", "pause_controller"):
            victim.alive = False
            self.at(t_fault + o.session_timeout_ms + self.rng.uniform(0, 50))
            victim.registered = False  # its session expired: the ephemerals are gone
            inc = self.new_incident(
                kind="controller", broker=cid, fault=fault, epoch=c.ctx.epoch, lost=None
            )
            new = self.controller_gone(cid, inc)
            inc["new_controller"], inc["new_epoch"] = new.broker_id, new.ctx.epoch
            inc["new_controller_ts"] = self.truth.tenures[-1]["start"]
            if fault == "pause_controller":
                self.zombie(victim, c, self.max_t + self.rng.uniform(300, 2000))
            else:
                self.restart(victim, self.max_t + self.rng.uniform(500, 4000))
        elif fault == "stop_controller":
            self.controlled_shutdown(c, victim)
            self.at(self.now + 1)
            victim.log.controller_resigned(c.ctx.epoch, "broker shutting down")
            resigned = self.now
            inc = self.new_incident(
                kind="controller", broker=cid, fault=fault, epoch=c.ctx.epoch, lost=resigned
            )
            self.end_tenure(c.ctx.epoch, resigned, "resigned")
            self.at(self.now + self.rng.uniform(1, 4))
            victim.log.session_state("CLOSED")
            victim.alive = False
            victim.registered = False
            self.lost(cid, self.now, inc)
            self.at(self.now + 1)
            new = self.controller_gone(cid, None)
            inc["new_controller"], inc["new_epoch"] = new.broker_id, new.ctx.epoch
            inc["new_controller_ts"] = self.truth.tenures[-1]["start"]
            self.restart(victim, self.max_t + self.rng.uniform(500, 4000))
        elif fault == "kill_broker":
            victim.alive = False
            self.at(t_fault + o.session_timeout_ms + self.rng.uniform(0, 50))
            victim.registered = False
            self.at(self.now + self.rng.uniform(0.3, 2))
            learned = self.now
            live = sorted(b.broker_id for b in self.registered())
            self.brokers[cid].log.broker_change(c.ctx.epoch, [], [victim.broker_id], [], live)
            inc = self.new_incident(
                kind="broker",
                broker=victim.broker_id,
                fault=fault,
                epoch=c.ctx.epoch,
                lost=self.now,
                cause="deregistered",
            )
            self.lost(victim.broker_id, self.now, inc)
            c.broker_failure({victim.broker_id})
            self.deliver(c, learned, "BrokerChange")
            self.restart(victim, self.max_t + self.rng.uniform(500, 4000))
        elif fault == "stop_broker":
            moved = self.controlled_shutdown(c, victim)
            self.at(self.now + self.rng.uniform(1, 4))
            victim.log.session_state("CLOSED")
            victim.alive = False
            victim.registered = False
            inc = self.new_incident(
                kind="broker",
                broker=victim.broker_id,
                fault=fault,
                epoch=c.ctx.epoch,
                lost=self.now,
                # Every attempt failed: an unclean shutdown, its leaderships not moved.
                cause="controlled shutdown" if moved else "session closed",
            )
            self.lost(victim.broker_id, self.now, inc)
            self.at(self.now + self.rng.uniform(1, 4))
            learned = self.now
            live = sorted(b.broker_id for b in self.registered())
            self.brokers[cid].log.broker_change(c.ctx.epoch, [], [victim.broker_id], [], live)
            c.broker_failure({victim.broker_id})
            self.deliver(c, learned, "BrokerChange")
            self.restart(victim, self.max_t + self.rng.uniform(500, 4000))
        elif fault == "bounce_broker":
            # Its session expired (a long pause) and it registered again at once, before the
            # controller read the brokers' list: one BrokerChange sees it bounced (a new
            # broker epoch), and Kafka's processBrokerChange runs onBrokerFailure, then
            # onBrokerStartup, in that one event. Its partitions with no other ISR member
            # go offline and elect its new incarnation.
            # First its followers of one clean partition it leads fall behind, so that
            # partition has no other ISR member and elects the new incarnation.
            sole = [
                tp
                for tp, st in sorted(self.store.states.items())
                if tp.topic != UNCLEAN_TOPIC
                and st.leader_and_isr.leader == victim.broker_id
                and len(st.leader_and_isr.isr) > 1
            ]
            if sole:
                tp = self.rng.choice(sole)
                drop = [
                    r for r in self.store.states[tp].leader_and_isr.isr if r != victim.broker_id
                ]
                self.at(self.now + self.rng.uniform(1, 30))
                why = "; ".join(f"replica {r} fell behind" for r in drop)
                self.isr_write(tp, victim, (victim.broker_id,), why)
                self.at(self.now + 200)
                learned = self.now
                c.isr_changed([tp])
                self.deliver(c, learned, "IsrChangeNotification")
                self.pending_flaps.append((tp, drop))
            # The broker logs it first, as every broker's Controller does (_on_zk_state,
            # then RegisterBrokerAndReelect): waking, its connection gone, its session lost,
            # a new session, its registration and the controller it finds. It is lost at
            # its session's loss (the first evidence) and back at its registration.
            self.at(self.max_t + o.session_timeout_ms + self.rng.uniform(0, 50))
            victim.log.session_state("SUSPENDED")
            self.at(self.now + self.rng.uniform(1, 5))
            victim.log.session_state("LOST")
            lost = self.now
            self.at(self.now + self.rng.uniform(0.5, 2))
            victim.log.session_state("CONNECTED")
            self.at(self.now + self.rng.uniform(1, 3))
            victim.epoch = self._broker_epoch()  # the process lives on: its state is kept
            victim.log.broker_registered(victim.epoch, "127.0.0.1", 9092 + victim.broker_id)
            back = self.now
            inc = self.new_incident(
                kind="broker",
                broker=victim.broker_id,
                fault=fault,
                epoch=c.ctx.epoch,
                lost=lost,
                back=back,
                cause="bounced",
            )
            self.lost(victim.broker_id, lost, inc)
            self.at(self.now + self.rng.uniform(0.5, 2))
            victim.believed = cid
            victim.log.controller_seen(cid, "election found a controller")
            self.at(self.now + self.rng.uniform(0.3, 2))
            learned = self.now
            live = sorted(b.broker_id for b in self.registered())
            self.brokers[cid].log.broker_change(c.ctx.epoch, [], [], [victim.broker_id], live)
            c.broker_failure({victim.broker_id})
            c.broker_startup({victim.broker_id})
            self.deliver(c, learned, "BrokerChange")
            self.catch_up(victim.broker_id, self.now + self.rng.uniform(200, 1500))
        else:
            raise ValueError(f"unknown fault {fault!r}")

    def controlled_shutdown(self, c: Controller, victim: SimBroker) -> bool:
        """A stopping broker's controlled shutdown, as broker/server.py (Kafka 2.8's
        KafkaServer.controlledShutdown) makes it: an attempt that leaves partitions led
        (no other ISR member to take them) is retried after the backoff, up to the
        attempts allowed. Whether the last one moved every leadership."""
        for attempt in range(1, SHUTDOWN_ATTEMPTS + 1):
            learned = self.now
            remaining = c.controlled_shutdown(victim.broker_id)
            self.deliver(c, learned, "ControlledShutdown")
            self.at(self.now + 0.5)
            victim.log.write(
                "controlled_shutdown",
                attempt=attempt,
                remaining=remaining,
                ms=round(self.now - learned, 1),
            )
            if remaining == 0:
                return True
            if attempt < SHUTDOWN_ATTEMPTS:
                self.at(self.now + SHUTDOWN_BACKOFF_MS)
        return False

    def zombie(self, z: SimBroker, old: Controller, at: float) -> None:
        """A paused controller resumes: its queued request reaches brokers that have heard
        from its successor (they refuse it), its own write is fenced, it resigns, and it
        registers again as a new incarnation."""
        self.at(at)
        z.alive = True
        z.log.session_state("SUSPENDED")
        # A LeaderAndIsr the zombie had queued before its pause goes out now, stale.
        for b in self.live_others(z.broker_id)[:2]:
            body = {
                "controller_id": z.broker_id,
                "controller_epoch": old.ctx.epoch,
                "broker_epoch": b.epoch,
                "topic_states": [],
            }
            self.apply(b, body, self.now + self.rng.uniform(0.5, 2))
        try:  # its next write fails the epoch check: nothing changes
            old.ops.store.update_partition_states(
                {next(iter(self.assignment)): LeaderAndIsr(z.broker_id, 0, (z.broker_id,))},
                old.ctx.epoch,
                old.ctx.epoch_zk_version,
            )
            raise AssertionError("a zombie's write went through")
        except ControllerMovedError:
            pass
        self.at(self.now + self.rng.uniform(20, 60))
        z.log.session_state("LOST")
        self.at(self.now + 1)
        z.log.controller_resigned(old.ctx.epoch, "ZooKeeper error: SessionExpiredError")
        for t in self.truth.tenures:
            if t["epoch"] == old.ctx.epoch:
                t["resigned"] = self.now
        self.at(self.now + self.rng.uniform(20, 60))
        z.log.session_state("CONNECTED")
        self.restart(z, self.now + 2)

    def run(self) -> None:
        o = self.o
        self.setup()
        flaps = o.flaps_per_episode
        if flaps is None:
            flaps = max(1, len(self.assignment) // 50)
        for i in range(o.failovers):
            if i % 5 == 4:
                c = self.active()
                self.at(self.max_t + 1000)
                learned = self.now
                c.rebalance()
                self.deliver(c, learned, "AutoPreferredReplicaLeaderElection")
            self.at(self.max_t + 500)
            self.flaps(flaps)
            fault = FAULTS[self.rng.randrange(len(FAULTS))]
            self.episode(fault)
            self.at(self.max_t + 300)
            self.heal_flaps()
            self.flush()
            if o.target_lines is not None and self.total_lines >= o.target_lines:
                break
        self.close()

    # --- the truth, as written -------------------------------------------------------------

    def truth_json(self) -> dict[str, Any]:
        t = self.truth
        windows_by_incident: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for w in t.windows:
            if w["incident"] is not None:
                windows_by_incident[w["incident"]].append(w)
        open_by_incident: dict[int, int] = defaultdict(int)
        for _tp, (_start, n) in t.open.items():
            if n is not None:
                open_by_incident[n] += 1
        incidents = []
        for inc in t.incidents:
            ws = windows_by_incident.get(inc["n"], [])
            affected = len({(w["topic"], w["partition"]) for w in ws}) + open_by_incident[inc["n"]]
            unrecovered = open_by_incident[inc["n"]] > 0
            incidents.append(
                {
                    **{k: v for k, v in inc.items() if k != "n"},
                    "incident": inc["n"],
                    "affected": affected,
                    "all_leaders_ts": None if unrecovered or not ws else max(w["end"] for w in ws),
                    "unrecovered": unrecovered,
                }
            )
        per: dict[str, dict[str, Any]] = {}
        for tp in sorted(self.assignment):
            st = self.store.states[tp].leader_and_isr
            ws = [w for w in t.windows if (w["topic"], w["partition"]) == tp]
            per[f"{tp.topic}-{tp.partition}"] = {
                "isr_shrinks": t.shrinks.get(tp, 0),
                "isr_expands": t.expands.get(tp, 0),
                "leader_changes": t.leader_changes.get(tp, 0),
                "unavailable_windows": len(ws) + (1 if tp in t.open else 0),
                "unavailable_ms": sum(w["end"] - w["start"] for w in ws),
                "open": tp in t.open,
                "final_leader": st.leader,
                "final_leader_epoch": st.leader_epoch,
                "final_isr": list(st.isr),
                "replicas": list(self.assignment[tp]),
            }
        return {
            "params": {
                "brokers": self.o.brokers,
                "partitions": len(self.assignment),
                "failovers": self.o.failovers,
                "seed": self.o.seed,
                "skew_ms": self.o.skew_ms,
                "session_timeout_ms": self.o.session_timeout_ms,
            },
            "clock_offsets_ms": {str(b.broker_id): b.offset_ms for b in self.brokers.values()},
            "lines": {str(b): n for b, n in sorted(self.lines.items())},
            "total_lines": self.total_lines,
            "first_ts": START_MS,
            "last_ts": self.max_t,
            "tenures": t.tenures,
            "incidents": incidents,
            "partitions": per,
            "totals": {
                "isr_shrinks": sum(t.shrinks.values()),
                "isr_expands": sum(t.expands.values()),
                "leader_changes": sum(t.leader_changes.values()),
                "unclean_elections": sum(c.ctx.unclean_elections for c in self.controllers),
                "rejected_requests": t.rejected_requests,
                "rejected_states": t.rejected_states,
                "unavailable_windows": len(t.windows) + len(t.open),
            },
        }


def generate(options: Options) -> dict[str, Any]:
    """Write the logs and truth.json; returns the truth."""
    # The controller's own logging (elections that find no leader, ...) is not output here.
    quiet = logging.getLogger("controller")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    options.out.mkdir(parents=True, exist_ok=True)
    sim = Simulation(options)
    sim.run()
    truth = sim.truth_json()
    (options.out / "truth.json").write_text(json.dumps(truth, indent=1))
    return truth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.generate",
        description="Write realistic state-change logs (and truth.json) by simulating a"
        " cluster with the controller's own decision code.",
    )
    parser.add_argument("--brokers", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--failovers", type=int, default=100, help="faults to inject")
    parser.add_argument("--topics", type=int, default=None)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skew-ms", type=float, default=3.0, help="clock skew bound per broker")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument(
        "--target-lines", type=int, default=None, help="stop after the fault that passes this"
    )
    parser.add_argument("--out", type=Path, required=True)
    a = parser.parse_args(argv)
    if a.brokers < 2:
        parser.error("--brokers must be at least 2")
    if a.partitions < 1 or a.failovers < 0:
        parser.error("--partitions must be positive and --failovers not negative")
    truth = generate(
        Options(
            brokers=a.brokers,
            partitions=a.partitions,
            failovers=a.failovers,
            out=a.out,
            topics=a.topics,
            replication_factor=a.replication_factor,
            seed=a.seed,
            skew_ms=a.skew_ms,
            session_timeout_ms=a.session_timeout_ms,
            target_lines=a.target_lines,
        )
    )
    print(
        f"wrote {truth['total_lines']:,} lines for {a.brokers} brokers to {a.out}"
        f" ({len(truth['incidents'])} incidents)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

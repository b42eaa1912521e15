"""The workload the fault tests share: a topic on three brokers, a producer that writes
to it without pause, a consumer group's offset commits, the wait for a healed cluster,
and the safety checks of the brokers' state-change logs (the fault schedules in
test_nemesis.py, the partitions in test_zookeeper_partition.py and
test_broker_partition.py)."""

from __future__ import annotations

import logging
import os
import random
import shutil
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from confluent_kafka import KafkaException, Producer
from kazoo.exceptions import KazooException

from cluster import zookeeper as zkp
from cluster.supervised import BrokerExited, SupervisedBroker
from tests.history_checks import check_history
from tests.integration.dataplane import Acked, bootstrap, producer
from tests.integration.harness import Cluster, wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from zkdata import paths

BROKERS = (1, 2, 3)
TOPIC = "t"
PARTITIONS = 6
ASSIGNMENT = {p: tuple(BROKERS[(p + i) % 3] for i in range(3)) for p in range(PARTITIONS)}
CLIENT_LOG = os.environ.get("ZKCTL_NEMESIS_CLIENT_LOG")
REPLICA_LAG_S = 3  # the fault tests' replica.lag.time.max.ms, in seconds


def client_log() -> logging.Logger | None:
    if not CLIENT_LOG:
        return None
    logger = logging.getLogger("nemesis.client")
    if not logger.handlers:
        handler = logging.FileHandler(CLIENT_LOG)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False  # megabytes: not for pytest's captured log
    return logger


def running_and_registered(c: Cluster, broker_id: int) -> bool:
    """The broker's current process is up and registered: its status names its pid and
    the registration's broker epoch (a killed predecessor's registration lingers in
    ZooKeeper until its session expires, and must not pass for the new process's)."""
    status = c[broker_id].status()
    return (
        status is not None
        and status.get("pid") == c[broker_id].pid
        and status.get("broker_epoch") == c.broker_epoch(broker_id)
    )


# What a broker prints when it gives up on ZooKeeper during its start-up: unreachable past
# zookeeper.connection.timeout.ms (15 s here), it exits, as Kafka's does. A restart gives
# up in its identity step (the cluster id its meta.properties names is checked there),
# whose session or chroot's session timed out.
ZOOKEEPER_START_FAILURE = "start-up failed: Connection time-out"
ZOOKEEPER_START_FAILURES = (
    ZOOKEEPER_START_FAILURE,
    "to establish the broker id (KazooTimeoutError: Connection time-out)",
    "while establishing the broker id: KazooTimeoutError Connection time-out",
)


def revive_failed_start(broker: SupervisedBroker) -> bool:
    """Start the broker again if its last start gave up on ZooKeeper (an outage of the
    ensemble longer than the connection timeout while it started), as its supervisor
    (systemd's Restart=on-failure) would; True if it did. A broker that exited for any
    other reason is left dead, for the checks to find."""
    if broker.proc is None or broker.alive():
        return False
    last_run = broker.root / f"broker-{broker.starts - 1}.out"
    try:
        output = last_run.read_text(errors="replace")
    except OSError:
        return False
    if not any(failure in output[-2000:] for failure in ZOOKEEPER_START_FAILURES):
        return False
    broker.start()
    print(f"nemesis: broker {broker.broker_id} started again after its start gave up on ZooKeeper")
    return True


def zookeeper_answers(c: Cluster) -> bool:
    try:
        return c.zk.exists("/") is not None
    except KazooException:  # an outage ended the test's own session; kazoo makes a new one
        return False


def wait_healed(c: Cluster, ensemble: zkp.LocalZooKeeper | None = None) -> None:
    """Every ZooKeeper server serving, every broker running and registered, a controller
    active, every partition led with a full ISR. If not, the failure says what the brokers
    and ZooKeeper servers report, and the servers' logs are copied beside the brokers'
    (the ensemble's directory is removed with it)."""
    try:
        _wait_healed(c, ensemble)
    except AssertionError as e:
        found = []
        diagnosis: Callable[[], str]
        for diagnosis in (lambda: diagnose(c), lambda: diagnose_ensemble(c, ensemble)):
            try:
                found.append(diagnosis())
            except Exception as d:  # ZooKeeper may not answer the diagnosis either
                found.append(f"(a diagnosis failed: {d!r})")
        raise AssertionError("\n".join([str(e), *found])) from e


def diagnose_ensemble(c: Cluster, ensemble: zkp.LocalZooKeeper | None) -> str:
    """Each ZooKeeper server's state (from `mntr`), whether a write made through it alone
    commits, its clients' connections (`cons`: a broker's queued and outstanding requests),
    its log copied into the cluster's directory. A server that answers reads and `mntr`
    while no write commits explains brokers that reconnect and then hear nothing: a
    session's requests wait behind its pending write, and a new session is a write."""
    if ensemble is None:
        return ""
    lines = []
    for s in ensemble.servers:
        mntr = zkp.four_letter_word(zkp.HOST, s.client_port, "mntr") or ""
        wanted = ("zk_server_state", "zk_outstanding_requests", "zk_synced_followers")
        state = [line.replace("\t", "=") for line in mntr.splitlines() if line.startswith(wanted)]
        copy = c.root / f"zookeeper-{s.myid}.log"
        try:
            shutil.copyfile(s.log_file, copy)
        except OSError as e:
            copy_note = f"its log not copied: {e}"
        else:
            copy_note = f"log copied to {copy}"
        running = "running" if s.is_running() else "not running"
        said = "; ".join(state) or "no answer to mntr"
        lines.append(
            f"ZooKeeper server {s.myid} ({running}): {said}; {write_probe(s.address)}; {copy_note}"
        )
        cons = zkp.four_letter_word(zkp.HOST, s.client_port, "cons") or "no answer to cons"
        lines.extend(f"  cons: {line.strip()}" for line in cons.splitlines() if line.strip())
    return "\n".join(lines)


class WriteProbe(NamedTuple):
    committed: bool
    seconds: float
    error: str | None = None

    def __str__(self) -> str:
        if self.committed:
            return f"a write committed in {self.seconds:.2f} s"
        return f"no write committed in {self.seconds:.1f} s ({self.error})"


def write_probe(hosts: str, timeout_s: float = 10.0) -> WriteProbe:
    """Whether a new session through ``hosts`` (one server, or any of several) can commit
    a write (an ephemeral node, gone with the session), and how long it took. A new
    session is itself a write: a handshake left unanswered counts as none committed."""
    started = time.monotonic()
    try:
        with zkp.kazoo_client(hosts, timeout_s) as zk:
            zk.create_async("/zkctl-write-probe-", ephemeral=True, sequence=True).get(timeout_s)
    except Exception as e:  # a probe reports whatever it meets
        return WriteProbe(False, time.monotonic() - started, repr(e))
    return WriteProbe(True, time.monotonic() - started)


# How long an ensemble may take to commit writes again after a fault before it counts as
# stuck: a new leader's election and sync take a few seconds here.
STUCK_AFTER_S = 30.0


def unstick_ensemble(ensemble: zkp.LocalZooKeeper, record: dict[str, Any]) -> None:
    """After a ZooKeeper fault: wait until the ensemble commits a write again. ZooKeeper
    3.8.0 (Debian's) can come back from a pause with a leader that serves reads and
    revalidates sessions but commits nothing, for minutes (seen with ZooKeeper and plain
    kazoo clients alone: no broker, no proxy). Its clients can do nothing about that, and
    a schedule must not blame them for it: as an operator would, restart the leader
    (then every member), and say so in ``record``. Only a fresh client's write, straight
    to ZooKeeper, decides: the brokers play no part in it."""
    ensemble.wait_quorum(timeout=60)
    deadline = time.monotonic() + STUCK_AFTER_S
    while True:
        probe = write_probe(ensemble.connect_string)
        if probe.committed:
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    leader = ensemble.leader()
    record["zookeeper_stuck"] = {"leader": leader.myid if leader else None, "probe": str(probe)}
    steps = ([leader] if leader is not None else []) + [None]  # None: every member
    for step in steps:
        for server in ensemble.servers if step is None else [step]:
            server.restart(timeout=60)
        ensemble.wait_quorum(timeout=60)
        record["zookeeper_stuck"]["restarted"] = "every member" if step is None else step.myid
        deadline = time.monotonic() + STUCK_AFTER_S
        while time.monotonic() < deadline:
            if write_probe(ensemble.connect_string).committed:
                return
            time.sleep(0.5)
    raise AssertionError(f"ZooKeeper commits no write, even restarted: {record}")


def _wait_healed(c: Cluster, ensemble: zkp.LocalZooKeeper | None) -> None:
    if ensemble is not None:
        ensemble.wait_ready(timeout=90)
        wait_for(lambda: zookeeper_answers(c), 60, "the test's ZooKeeper client")
    wait_for(
        lambda: all([revive_failed_start(c[b]) or running_and_registered(c, b) for b in BROKERS]),
        90,
        "every broker's process registered",
    )
    c.wait_controller(timeout=90)
    c.wait_partitions(
        TOPIC,
        lambda s: all(st.leader >= 0 and len(st.isr) == len(BROKERS) for st in s.values()),
        "every ISR full again",
        timeout=120,
    )


def diagnose(c: Cluster) -> str:
    """What each live broker answers a Metadata request with, and what ZooKeeper holds."""
    lines = []
    for b in BROKERS:
        if not c[b].alive():
            lines.append(f"broker {b}: not running")
            continue
        try:
            with KafkaConnection("127.0.0.1", c[b].port(), timeout_s=10) as conn:
                m = conn.request(ApiKey.METADATA, 1, {"topics": None})
        except Exception as e:  # a diagnosis reports whatever it meets
            lines.append(f"broker {b}: Metadata failed: {e!r}")
            continue
        brokers = sorted((x["node_id"], x["port"]) for x in m["brokers"])
        parts = {
            p["partition_index"]: (p["leader_id"], p["isr_nodes"])
            for t in m["topics"]
            if t["name"] == TOPIC
            for p in t["partitions"]
        }
        lines.append(
            f"broker {b} (port {c[b].port()}): brokers {brokers}, controller "
            f"{m['controller_id']}, partitions {dict(sorted(parts.items()))}"
        )
    lines.append(f"ZooKeeper: {c.partition_states(TOPIC)}, controller {c.controller()}")
    return "\n".join(lines)


class Stream:
    """A producer writing numbered messages until stopped, 50 at a time with a poll for
    answers between (a few thousand a second here)."""

    def __init__(self, c: Cluster, compression: str = "none") -> None:
        self.acked = Acked()
        self.sent = 0
        self._stop = threading.Event()
        self._log = client_log()
        debug: dict[str, object] = {}
        if self._log is not None:
            debug = {"debug": "broker,topic,metadata,protocol", "logger": self._log}
        self._producer: Producer = producer(c, compression_codec=compression, **debug)
        self._thread = threading.Thread(target=self._run, name="stream", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        p = self._producer
        logged = 0.0
        while not self._stop.is_set():
            if self._log is not None and time.monotonic() - logged > 1:
                logged = time.monotonic()
                self._log.info(
                    "stream: %d sent, %d acknowledged, %d refused, %d queued",
                    self.sent,
                    len(self.acked.by_offset),
                    len(self.acked.errors),
                    len(p),
                )
            for _ in range(50):
                value = f"s-{self.sent:09d}".encode()
                try:
                    p.produce(TOPIC, value, on_delivery=self.acked.callback)
                except BufferError:
                    break
                except KafkaException as e:  # refused before queueing: count it, go on
                    with self.acked.lock:
                        self.acked.errors.append(e.args[0].name())
                        self.acked.error_partitions.append(-1)
                self.sent += 1
            p.poll(0.05)

    def stop(self) -> int:
        """Stop writing and wait for every answer; returns how many are still unanswered.
        The producer is dropped (it would go on reconnecting to brokers the test stops)."""
        self._stop.set()
        self._thread.join(30)
        unanswered = int(self._producer.flush(150))
        del self._producer
        return unanswered


def find_coordinator(
    c: Cluster, group: str, count: Callable[[str], None], timeout_s: float = 10.0
) -> KafkaConnection | None:
    """A connection to ``group``'s coordinator as the first broker that answers names
    it, or None (each failure counted by its name)."""
    try:
        addresses = bootstrap(c).split(",")
    except BrokerExited as e:  # every broker is restarting
        count(type(e).__name__)
        return None
    for address in addresses:
        if ":" not in address:  # no broker up at that moment (bootstrap gave "")
            count("no broker address")
            continue
        host, port = address.rsplit(":", 1)
        try:
            with KafkaConnection(host, int(port), timeout_s=timeout_s) as conn:
                found = conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
            if found["error_code"] == ErrorCode.NONE:
                return KafkaConnection(found["host"], found["port"], timeout_s=timeout_s)
            count(ErrorCode(found["error_code"]).name)
        except (OSError, BrokerExited) as e:
            count(type(e).__name__)
    return None


# A member asks its coordinator again after these (it keeps its member id and generation).
_COORDINATOR_MOVED = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}


class GroupMembers:
    """Two members of a consumer group through the faults, speaking the group protocol
    as a consumer does: JoinGroup (KIP-394's member id first), SyncGroup (the leader
    assigns), Heartbeat, joining again when told to, and finding the coordinator again
    after any error while keeping their member id and generation, and every few
    seconds changing their subscription, so that the group rebalances during the
    faults (until the final check, which lets it settle). Member 1 is static (KIP-345,
    group instance id ``STATIC``): every other time it would change its subscription it
    restarts instead, and when told UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID, it joins
    again without its member id and takes its own place back. Each generation a
    member completes (its SyncGroup answered NONE: written, so a new coordinator reads it
    back) is recorded with the leader its JoinGroup answer named and, for the leader, the
    members. Afterwards: no two members completed one generation under different leaders
    or outside the leader's member list (a static member counted by its instance id,
    whatever member id it had), no member's completed generations go back, and, the
    cluster healed, both end in one generation together."""

    GROUP = "nemesis-members"
    SESSION_MS = 10_000
    STATIC = "nemesis-static"

    def __init__(self, c: Cluster, members: int = 2) -> None:
        self.c = c
        self.errors: dict[str, int] = {}
        self._lock = threading.Lock()
        # member index -> [(generation, leader, the leader's member list or None, the
        # member's identity)] in the order completed; a member's identity is its
        # instance id if static, else its member id
        self.completed: dict[int, list[tuple[int, str, tuple[str, ...] | None, str]]] = {
            i: [] for i in range(members)
        }
        self.current: dict[int, tuple[str, int] | None] = dict.fromkeys(range(members))
        # The static member's joins without its member id after it had one (it takes its
        # own place back), and how many of those kept its generation (no rebalance).
        self.static_rejoins = 0
        self.static_rejoins_kept = 0
        self._stop = threading.Event()
        # Whether members change their subscriptions now and then (stopped before the
        # final check, so the group can settle).
        self.churn = True
        self.crashed: list[str] = []
        self._threads = [
            threading.Thread(target=self._member, args=(i,), name=f"member-{i}", daemon=True)
            for i in range(members)
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)

    def _count(self, error: str) -> None:
        with self._lock:
            self.errors[error] = self.errors.get(error, 0) + 1

    def _member(self, i: int) -> None:
        try:
            self._member_loop(i)
        except Exception as e:  # a bug of the workload's: the check must fail
            self.crashed.append(f"member {i}: {e!r}")
            raise

    def _member_loop(self, i: int) -> None:
        conn: KafkaConnection | None = None
        member_id = ""
        generation: int | None = None
        instance_id = self.STATIC if i == 1 else None
        join: dict[str, Any] = {
            "group_id": self.GROUP,
            "session_timeout_ms": self.SESSION_MS,
            "rebalance_timeout_ms": self.SESSION_MS,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"member-%d" % i}],
            "group_instance_id": instance_id,
        }
        # Every few seconds a member changes its subscription (new metadata), which
        # makes the group rebalance: generations end while the faults go on.
        rng = random.Random(i)
        churn_at = time.monotonic() + rng.uniform(2, 6)
        churned = 0
        while not self._stop.is_set():
            try:
                if conn is None:
                    # Past the rebalance timeout: a JoinGroup may be held that long.
                    conn = find_coordinator(
                        self.c, self.GROUP, self._count, timeout_s=self.SESSION_MS / 500
                    )
                    if conn is None:
                        self._stop.wait(0.2)
                        continue
                if generation is not None and self.churn and time.monotonic() > churn_at:
                    churn_at = time.monotonic() + rng.uniform(2, 6)
                    churned += 1
                    if instance_id is not None and churned % 2:
                        # The static member restarts: it joins again without its member
                        # id, the same subscription, and takes its own place back.
                        member_id = ""
                    else:
                        join["protocols"] = [
                            {"name": "range", "metadata": b"member-%d-%d" % (i, churned)}
                        ]
                    generation = None  # joins again
                if generation is not None:
                    beat = {
                        "group_id": self.GROUP,
                        "generation_id": generation,
                        "member_id": member_id,
                        "group_instance_id": instance_id,
                    }
                    code = ErrorCode(conn.request(ApiKey.HEARTBEAT, 3, beat)["error_code"])
                    if code == ErrorCode.NONE:
                        self._stop.wait(0.2)
                        continue
                    self._count(f"heartbeat {code.name}")
                    if code in _COORDINATOR_MOVED:
                        conn.close()
                        conn = None
                        continue
                    if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                        member_id = ""
                    generation = None  # join again
                    with self._lock:
                        self.current[i] = None
                    continue
                rejoining = instance_id is not None and not member_id and bool(self.completed[i])
                joined = conn.request(ApiKey.JOIN_GROUP, 5, {**join, "member_id": member_id})
                code = ErrorCode(joined["error_code"])
                if rejoining and code == ErrorCode.NONE:
                    with self._lock:
                        self.static_rejoins += 1
                        if joined["generation_id"] == self.completed[i][-1][0]:
                            self.static_rejoins_kept += 1
                if code == ErrorCode.MEMBER_ID_REQUIRED:
                    member_id = joined["member_id"]
                    continue
                if code != ErrorCode.NONE:
                    self._count(f"join {code.name}")
                    if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                        member_id = ""
                    if code in _COORDINATOR_MOVED:
                        conn.close()
                        conn = None
                    self._stop.wait(0.1)
                    continue
                member_id = joined["member_id"]  # a static member's is made at its join
                listed_ids = sorted(m["member_id"] for m in joined["members"])
                # Members by identity: a static one by its instance id.
                listed = tuple(
                    sorted(m["group_instance_id"] or m["member_id"] for m in joined["members"])
                )
                synced = conn.request(
                    ApiKey.SYNC_GROUP,
                    3,
                    {
                        "group_id": self.GROUP,
                        "generation_id": joined["generation_id"],
                        "member_id": member_id,
                        "group_instance_id": instance_id,
                        "assignments": [{"member_id": m, "assignment": b"a"} for m in listed_ids],
                    },
                )
                code = ErrorCode(synced["error_code"])
                if code == ErrorCode.NONE:
                    generation = int(joined["generation_id"])
                    with self._lock:
                        self.completed[i].append(
                            (generation, joined["leader"], listed or None, instance_id or member_id)
                        )
                        self.current[i] = (instance_id or member_id, generation)
                    continue
                self._count(f"sync {code.name}")
                if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                    member_id = ""
                if code in _COORDINATOR_MOVED:
                    conn.close()
                    conn = None
            except OSError as e:  # the coordinator died, paused, or was cut off
                self._count(type(e).__name__)
                if conn is not None:
                    conn.close()
                conn = None
                self._stop.wait(0.1)
        if conn is not None:
            conn.close()

    def together(self) -> bool:
        """Both members hold the same, latest generation, which lists both."""
        with self._lock:
            held = list(self.current.values())
            if any(h is None for h in held):
                return False
            generations = {h[1] for h in held if h is not None}
            if len(generations) != 1:
                return False
            (generation,) = generations
            listed = [
                members
                for done in self.completed.values()
                for g, _leader, members, _id in done
                if g == generation and members is not None
            ]
            ids = {h[0] for h in held if h is not None}
            return bool(listed) and set(listed[-1]) == ids

    def problems(self) -> list[str]:
        """The safety checks over every generation completed (call after stop)."""
        out: list[str] = [f"a member's thread died: {c}" for c in self.crashed]
        leaders: dict[int, set[str]] = {}
        lists: dict[int, set[tuple[str, ...]]] = {}
        completers: dict[int, set[str]] = {}
        for i, done in self.completed.items():
            # (The same one twice is allowed: a follower that joins again with an
            # unchanged subscription gets the current generation again, as in Kafka.)
            generations = [g for g, _l, _m, _id in done]
            if generations != sorted(generations):
                out.append(f"member {i} completed generations out of order: {generations}")
            for g, leader, members, member_id in done:
                # A static leader replaced within a generation is named by its old id,
                # then its new one: both are its (a static member's id starts with its
                # instance id, as in Kafka).
                static = leader.startswith(self.STATIC + "-")
                leaders.setdefault(g, set()).add(self.STATIC if static else leader)
                completers.setdefault(g, set()).add(member_id)
                if members is not None:
                    lists.setdefault(g, set()).add(members)
        for g, seen in sorted(leaders.items()):
            if len(seen) > 1:
                out.append(f"generation {g} completed under leaders {sorted(seen)}")
        for g, seen_lists in sorted(lists.items()):
            if len(seen_lists) > 1:
                out.append(f"generation {g} completed with member lists {sorted(seen_lists)}")
            outside = completers[g] - set(next(iter(seen_lists)))
            if outside:
                out.append(f"generation {g} completed by {sorted(outside)}, not its members")
        if not any(self.completed.values()):
            out.append(f"no generation was ever completed: {self.errors}")
        return out


class Committer:
    """A consumer group's offset commits through the faults: one standalone commit
    (generation -1, as a consumer that assigns its own partitions commits) after another,
    each of a larger offset, to the group's coordinator as FindCoordinator names it
    (asked again after any error). An acknowledged commit is one every in-sync replica of
    the group's __consumer_offsets partition has: afterwards OffsetFetch must answer the
    last one acknowledged, or a later one attempted (written, its answer lost)."""

    GROUP = "nemesis-committer"
    # A partition of the workload's topic: a commit of one no broker knows is refused.
    PROGRESS = (TOPIC, 0)

    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.acknowledged = 0
        self.attempted = 0
        self.errors: dict[str, int] = {}
        # The errors met since the last acknowledged commit, counted: why the commits
        # tried after it (attempted - acknowledged) have no answer.
        self.errors_since_acknowledged: dict[str, int] = {}
        self.crashed: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="committer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _count(self, error: str) -> None:
        self.errors[error] = self.errors.get(error, 0) + 1
        since = self.errors_since_acknowledged
        since[error] = since.get(error, 0) + 1

    def coordinator(self) -> KafkaConnection | None:
        return find_coordinator(self.c, self.GROUP, self._count)

    def _commit_body(self, offset: int) -> dict[str, Any]:
        topic, partition = self.PROGRESS
        return {
            "group_id": self.GROUP,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": partition, "committed_offset": offset}],
                }
            ],
        }

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # a bug of the workload's: the check must fail
            self.crashed = repr(e)
            raise

    def _loop(self) -> None:
        conn: KafkaConnection | None = None
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = self.coordinator()
                    if conn is None:
                        self._stop.wait(0.2)
                        continue
                self.attempted += 1
                answer = conn.request(ApiKey.OFFSET_COMMIT, 6, self._commit_body(self.attempted))
                code = answer["topics"][0]["partitions"][0]["error_code"]
                if code == ErrorCode.NONE:
                    self.acknowledged = self.attempted
                    self.errors_since_acknowledged.clear()
                    self._stop.wait(0.02)
                    continue
                self._count(ErrorCode(code).name)
            except OSError as e:  # the coordinator died, paused, or was cut off
                self._count(type(e).__name__)
            if conn is not None:
                conn.close()
                conn = None
            self._stop.wait(0.1)
        if conn is not None:
            conn.close()

    def problems(self, timeout_s: float = 120) -> list[str]:
        """After the faults (the cluster healed): what OffsetFetch answers, checked."""
        if self.crashed is not None:
            return [f"the committer's thread died: {self.crashed}"]
        if self.acknowledged == 0:
            return [f"no commit was acknowledged ({self.attempted} tried: {self.errors})"]
        topic, partition = self.PROGRESS
        deadline = time.monotonic() + timeout_s
        while True:
            conn = self.coordinator()
            if conn is not None:
                try:
                    with conn:
                        answer = conn.request(
                            ApiKey.OFFSET_FETCH,
                            7,
                            {
                                "group_id": self.GROUP,
                                "topics": [{"name": topic, "partition_indexes": [partition]}],
                            },
                        )
                    if answer["error_code"] == ErrorCode.NONE:
                        (entry,) = answer["topics"][0]["partitions"]
                        offset = int(entry["committed_offset"])
                        if not self.acknowledged <= offset <= self.attempted:
                            return [
                                f"the committed offset is {offset}: the last acknowledged"
                                f" commit was {self.acknowledged}, the last tried"
                                f" {self.attempted}"
                            ]
                        return []
                except OSError:
                    pass
            if time.monotonic() > deadline:
                return [f"no coordinator answered OffsetFetch in {timeout_s} s: {self.errors}"]
            time.sleep(0.5)


def history_problems(c: Cluster, rows: list[dict[str, Any]] | None = None) -> list[str]:
    """tests/history_checks.py over the brokers' state-change ``rows`` (default: read now),
    with the topic's partition state versions in ZooKeeper now."""
    if rows is None:
        rows = [r for b in BROKERS for r in c[b].state_changes()]
    final_versions = {}
    for p in range(PARTITIONS):
        got = c.zk.get(paths.partition_state(TOPIC, p))
        assert got is not None
        final_versions[(TOPIC, p)] = got[1].version
    return check_history(rows, final_versions)

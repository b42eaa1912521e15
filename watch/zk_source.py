"""The ZooKeeper side of `zkctl watch`: watch notifications in, observations out.

Event-driven, not a polling loop. A watch callback only marks a group of znodes dirty and
wakes one reader thread; the reader re-reads each dirty group and hands the observations to
the model (model.py). Bursts coalesce: a failover that fires hundreds of watches costs one
re-read of each group, not hundreds.

Watches, and why there is not one per partition:

* `/controller` and `/controller_epoch` (data); `/brokers/ids` (children) and each broker's
  registration (data); `/brokers/topics` (children) and each topic znode (data);
  `/admin/delete_topics` (children: the topics queued for deletion, whose partitions the
  controller takes offline on purpose before removing their znodes);
  `/isr_change_notification` (children: leaders announce every ISR change there);
  `/log_dir_event_notification` (children: a broker announces a failed log directory
  there, whose replicas the controller then takes offline, electing new leaders);
  `/admin/reassign_partitions` and `/admin/preferred_replica_election` (data).
* Partition state znodes: with at most `per_partition_watches` partitions (1,000 by
  default) each state znode gets a data watch, so every change is seen as it happens.
  Above that, thousands of one-shot watches would each need a round trip to re-arm after
  every failover (a 10,000-partition broker loss would cost 10,000 gets just to keep
  watching). Instead, every trigger above re-reads *all* partition states with
  `ZkClient.get_many` (multiRead, 1,000 znodes a request, pipelined: ~50 ms for 10,000),
  and a bounded set of *canary* state znodes is watched: for each broker a few partitions
  it leads and a few it follows (a controlled shutdown or a rebalance moves them all), and a
  few of each kind of unsettled partition (no state yet, leaderless, a dead replica in the
  ISR, a short ISR, a leader other than the preferred replica), which are the ones the
  controller is about to rewrite, and a few state znodes that could not be read. A canary
  firing re-reads everything and picks canaries again, so a failover written in several
  batches is followed to its end. The cost: at most a hundred or so watches, and a change
  that touches no canary and fires no other watch (rare: the controller's writes come with
  one of the triggers above or move a whole group) is shown at the next trigger.

Reads arm their watch first and then read the data, so a change after the read always
fires a watch. A znode that cannot be decoded (someone's bad write) is reported (once
while it stays so: model.ProblemsSeen), and what was last read from it stands (a topic's
assignment, a partition's state, the controller epoch while /controller names the same
broker): it is unreadable, not gone or changed.
A lost connection is reported and everything is re-read (and re-watched: kazoo drops its
watch callbacks on a disconnection) when the connection comes back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from kazoo.handlers.threading import KazooTimeoutError

from watch.model import (
    CONNECTED,
    LOST,
    SUSPENDED,
    Assignments,
    BrokerInfo,
    BrokersSeen,
    ConnectionSeen,
    ControllerSeen,
    Observation,
    PartitionsSeen,
    ProblemsSeen,
    SummaryRequested,
)
from zkdata import paths
from zkdata.client import (
    ConnectionLoss,
    OperationTimeoutError,
    SessionExpiredError,
    WatchedEvent,
    ZkClient,
)
from zkdata.znodes import (
    LeaderAndIsr,
    MalformedZnode,
    TopicPartition,
    decode_broker,
    decode_controller,
    decode_controller_epoch,
    decode_partition_state,
    decode_topic,
)

log = logging.getLogger(__name__)

PER_PARTITION_WATCHES = 1000
CANARIES_PER_BROKER = 4  # partitions a broker leads, and as many it follows
CANARIES_PER_KIND = 16  # of each kind of unsettled partition

Emit = Callable[[list[Observation]], None]

CONTROLLER = "controller"
BROKERS = "brokers"
TOPICS = "topics"
PARTITIONS = "partitions"
NOTIFICATIONS = "notifications"
ALL_GROUPS = frozenset({CONTROLLER, BROKERS, TOPICS, PARTITIONS, NOTIFICATIONS})
READ = "read"  # the scope (and source) of a read that failed outright

_CONNECTION_ERRORS = (ConnectionLoss, SessionExpiredError, OperationTimeoutError, KazooTimeoutError)


def _is_connection_error(e: BaseException) -> bool:
    return isinstance(e, _CONNECTION_ERRORS)


def groups_for(path: str) -> frozenset[str]:
    """The groups to re-read when the watch on `path` fires."""
    if path in (paths.CONTROLLER, paths.CONTROLLER_EPOCH):
        return frozenset({CONTROLLER, PARTITIONS})
    if path == paths.BROKER_IDS or path.startswith(paths.BROKER_IDS + "/"):
        return frozenset({BROKERS, PARTITIONS})
    if path in (
        paths.ISR_CHANGE_NOTIFICATION,
        paths.LOG_DIR_EVENT_NOTIFICATION,
        paths.REASSIGN_PARTITIONS,
        paths.PREFERRED_REPLICA_ELECTION,
    ):
        return frozenset({NOTIFICATIONS, PARTITIONS})
    if path.startswith(paths.BROKER_TOPICS + "/") and path.endswith("/state"):
        return frozenset({PARTITIONS})
    if path == paths.BROKER_TOPICS or path.startswith(paths.BROKER_TOPICS + "/"):
        return frozenset({TOPICS, PARTITIONS})
    if path == paths.DELETE_TOPICS:
        return frozenset({TOPICS, PARTITIONS})
    return ALL_GROUPS


def choose_canaries(
    topics: Assignments,
    states: Mapping[TopicPartition, LeaderAndIsr],
    alive: Iterable[int],
    *,
    unreadable: Sequence[TopicPartition] = (),
    deleting: Collection[str] = frozenset(),
    per_broker: int = CANARIES_PER_BROKER,
    per_kind: int = CANARIES_PER_KIND,
) -> list[TopicPartition]:
    """The partitions whose state znodes to watch when there are too many to watch all.

    For each broker, `per_broker` partitions it leads and as many it follows; and up to
    `per_kind` partitions of each unsettled kind: no state yet, leaderless (leader -1 or
    not registered), a replica in the ISR that is not registered, an ISR shorter than the
    replicas, a live preferred replica that does not lead, and a state znode that could not
    be read (`unreadable`, whose repair is to be seen). One pass, in `topics` order.

    A topic being deleted (`deleting`) has none: its partitions stay leaderless with short
    ISRs while its deletion waits (a replica's broker down), and would fill those kinds for
    as long; its going is seen by the watch on its topic znode.
    """
    live = frozenset(alive)
    led: dict[int, list[TopicPartition]] = {}
    followed: dict[int, list[TopicPartition]] = {}
    kinds: dict[str, list[TopicPartition]] = {
        "no state": [],
        "leaderless": [],
        "dead in isr": [],
        "short isr": [],
        "not preferred": [],
        "unreadable": list(unreadable[:per_kind]),
    }

    def take(bucket: list[TopicPartition], tp: TopicPartition, limit: int) -> None:
        if len(bucket) < limit:
            bucket.append(tp)

    for topic, assignment in topics.items():
        if topic in deleting:
            continue
        for p, replicas in assignment.items():
            tp = TopicPartition(topic, p)
            lai = states.get(tp)
            if lai is None:
                take(kinds["no state"], tp, per_kind)
                continue
            leader = lai.leader
            if leader == -1 or (leader >= 0 and leader not in live):
                take(kinds["leaderless"], tp, per_kind)
            elif leader >= 0:
                take(led.setdefault(leader, []), tp, per_broker)
                if replicas and replicas[0] != leader and replicas[0] in live:
                    take(kinds["not preferred"], tp, per_kind)
            for r in lai.isr:
                if r != leader:
                    take(followed.setdefault(r, []), tp, per_broker)
            if not live.issuperset(lai.isr):
                take(kinds["dead in isr"], tp, per_kind)
            if len(lai.isr) < len(replicas):
                take(kinds["short isr"], tp, per_kind)
    chosen: dict[TopicPartition, None] = {}
    for group in (*led.values(), *followed.values(), *kinds.values()):
        chosen.update(dict.fromkeys(group))
    return list(chosen)


class ZkSource:
    """Reads the cluster from ZooKeeper when its watches fire; see the module docstring."""

    def __init__(
        self,
        zk: ZkClient,
        emit: Emit,
        *,
        per_partition_watches: int = PER_PARTITION_WATCHES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.zk = zk
        self._emit = emit
        self.per_partition_watches = per_partition_watches
        self._clock = clock
        self._cond = threading.Condition()
        self._dirty: set[str] = set()
        self._connected = False
        self._stopping = False
        self._summary_requested = False
        # Paths whose one-shot watch is armed (topics and partition states; the few fixed
        # paths are simply re-armed on every read of their group).
        self._armed: set[str] = set()
        self._handled: set[str] = set()  # paths with our handler registered in the ZkClient
        self._topics: dict[str, dict[int, tuple[int, ...]]] = {}
        self._deleting: frozenset[str] = frozenset()  # children of /admin/delete_topics
        # The last states and controller read, kept for a znode that turns unreadable.
        self._states: dict[TopicPartition, LeaderAndIsr] = {}
        self._controller: tuple[int | None, int | None] = (None, None)
        self._partitions: list[tuple[TopicPartition, str]] = []  # with state znode paths
        self._alive: frozenset[int] = frozenset()
        self._thread = threading.Thread(target=self._run, name="watch-source", daemon=True)
        self.refreshes = 0  # completed re-reads, for tests and --debug
        self.ready = threading.Event()  # set once everything has been read (and watched)

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        self.zk.add_state_listener(self._on_state)
        with self._cond:
            self._connected = self.zk.connected
            self._dirty |= ALL_GROUPS
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(10)
        for path in list(self._handled):
            self.zk.unregister_handler(path, self._on_watch)
        self._handled.clear()

    def _stopped(self) -> bool:
        with self._cond:
            return self._stopping

    def request_summary(self) -> None:
        """A SummaryRequested, emitted by the reader thread between re-reads and stamped
        then. A re-read stamps each group when read, then reads on and arms watches before
        handing all on: a summary stamped by its caller in between was applied before
        them yet timed after them ("56 under-replicated" printed just after "ISR grew for
        50 partitions: broker 1 rejoined")."""
        with self._cond:
            self._summary_requested = True
            self._cond.notify_all()

    def armed_paths(self) -> set[str]:
        with self._cond:
            return set(self._armed)

    # --- callbacks (kazoo's threads: they only mark and wake) ---------------------------

    def _on_watch(self, event: WatchedEvent) -> None:
        path: str | None = event.path
        if not path:
            return
        with self._cond:
            self._armed.discard(path)
            self._dirty |= groups_for(path)
            self._cond.notify_all()

    def _on_state(self, state: str) -> None:
        if self._stopping or state == "CLOSED":
            return
        ts = self._clock()
        with self._cond:
            if state == "CONNECTED":
                self._connected = True
                self._dirty |= ALL_GROUPS
            else:
                # kazoo drops every watch callback when the connection goes: re-arm all.
                self._connected = False
                self._armed.clear()
            self._cond.notify_all()
        name = {"CONNECTED": CONNECTED, "SUSPENDED": SUSPENDED}.get(state, LOST)
        self._emit([ConnectionSeen(ts, name)])

    def _mark(self, groups: Iterable[str]) -> None:
        with self._cond:
            self._dirty.update(groups)
            self._cond.notify_all()

    # --- the reader thread --------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not (
                    self._summary_requested or (self._dirty and self._connected)
                ):
                    self._cond.wait()
                if self._stopping:
                    return
                summary, self._summary_requested = self._summary_requested, False
                groups = frozenset(self._dirty) if self._connected else frozenset()
                self._dirty -= groups
            if summary:
                self._emit([SummaryRequested(self._clock())])
            if not groups:
                continue
            try:
                observations = self._refresh(groups)
            except Exception as e:
                with self._cond:
                    self._dirty |= groups
                if self._stopped():
                    return
                if not _is_connection_error(e):
                    log.warning("reading ZooKeeper failed", exc_info=True)
                    text = f"reading ZooKeeper failed ({type(e).__name__}: {e}); retrying"
                    self._emit([ProblemsSeen(self._clock(), READ, {READ: text})])
                # Back off before retrying; a lost connection waits for its return above.
                with self._cond:
                    self._cond.wait(1.0)
                continue
            self.refreshes += 1
            # A read that went through: a failure reported before is over.
            observations.append(ProblemsSeen(self._clock(), READ))
            self._emit(observations)
            if groups == ALL_GROUPS:
                self.ready.set()

    def _refresh(self, groups: frozenset[str]) -> list[Observation]:
        out: list[Observation] = []
        if CONTROLLER in groups:
            out.append(self._read_controller())
        if BROKERS in groups:
            out.extend(self._read_brokers())
        if NOTIFICATIONS in groups:
            self._arm_notifications()
        if TOPICS in groups:
            out.extend(self._read_topics())
        if PARTITIONS in groups or TOPICS in groups:
            out.extend(self._read_partitions())
        return out

    # --- reads ------------------------------------------------------------------------

    def _handle(self, path_list: Iterable[str]) -> None:
        for path in path_list:
            if path not in self._handled:
                self.zk.register_handler(path, self._on_watch)
                self._handled.add(path)

    def _children(self, path: str, group: str) -> list[str]:
        """Children of `path` with a child watch (or, if it is missing, a creation watch)."""
        self._handle([path])
        children = self.zk.get_children(path, watch=True)
        if children is None:
            # Created between the failed read and the exists-watch? Then that watch is a
            # data watch, blind to children: read again.
            if self.zk.exists(path) is not None:
                self._mark([group])
            return []
        return children

    def _arm(self, wanted: Sequence[str], read: Mapping[str, int]) -> bool:
        """Arm a data watch on each path of `wanted` not armed yet; True if one of them
        changed since `read` (path -> mzxid, absent: did not exist) was taken."""
        # Every wanted path has our handler, armed or not: an armed path without it would
        # never be re-armed, its watch firing unheard.
        self._handle(wanted)
        with self._cond:
            new = [p for p in wanted if p not in self._armed]
            self._armed.update(new)
        if not new:
            return False
        try:
            results = self.zk.get_many(new, watch=True)
        except BaseException:
            with self._cond:
                self._armed.difference_update(new)
            raise
        return any(
            (None if r is None else r[1].mzxid) != read.get(p)
            for p, r in zip(new, results, strict=True)
        )

    def _read_controller(self) -> ControllerSeen:
        pair = [paths.CONTROLLER, paths.CONTROLLER_EPOCH]
        self._handle(pair)
        self.zk.get_many(pair, watch=True)  # arm both
        controller, epoch = self.zk.get_many(pair)  # one multiRead: a consistent pair
        ts = self._clock()
        problems = []
        broker = epoch_value = None
        if controller is not None:
            try:
                broker = decode_controller(controller[0])
            except MalformedZnode as e:
                problems.append(str(e))
        if epoch is not None:
            try:
                epoch_value = decode_controller_epoch(epoch[0])
            except MalformedZnode as e:
                problems.append(str(e))
                # Unreadable is not changed: while /controller names the broker it named,
                # the epoch is the one last read (no failover happened). After a change of
                # controller the epoch is not known.
                last_broker, last_epoch = self._controller
                if broker == last_broker:
                    epoch_value = last_epoch
        self._controller = (broker, epoch_value)
        elected_at = None if controller is None else controller[1].ctime / 1000
        return ControllerSeen(ts, broker, epoch_value, "; ".join(problems) or None, elected_at)

    def _read_brokers(self) -> list[Observation]:
        ids = sorted(
            b
            for b in (paths.parse_broker_id(c) for c in self._children(paths.BROKER_IDS, BROKERS))
            if b is not None
        )
        broker_paths = [paths.broker(b) for b in ids]
        self._handle(broker_paths)
        results = self.zk.get_many(broker_paths, watch=True)
        ts = self._clock()
        problems: dict[str, str] = {}
        brokers: dict[int, BrokerInfo] = {}
        for b, path, got in zip(ids, broker_paths, results, strict=True):
            if got is None:
                continue  # gone since the children were read: the child watch fires
            data, stat = got
            try:
                reg = decode_broker(b, data, path)
                ep = reg.endpoints[0]
                host = f"[{ep.host}]" if ":" in ep.host else ep.host
                address = f"{host}:{ep.port}"
            except (MalformedZnode, IndexError) as e:
                address = "(unreadable)"
                problems[path] = str(e)
            brokers[b] = BrokerInfo(b, address, int(stat.czxid))
        self._alive = frozenset(brokers)
        return [BrokersSeen(ts, brokers), ProblemsSeen(ts, BROKERS, problems)]

    def _arm_notifications(self) -> None:
        self._children(paths.ISR_CHANGE_NOTIFICATION, NOTIFICATIONS)
        # A failed log directory's new leaders may touch no canary: its event re-reads all.
        self._children(paths.LOG_DIR_EVENT_NOTIFICATION, NOTIFICATIONS)
        admin = [paths.REASSIGN_PARTITIONS, paths.PREFERRED_REPLICA_ELECTION]
        self._handle(admin)
        for path in admin:
            self.zk.exists(path, watch=True)

    def _read_topics(self) -> list[Observation]:
        # The deletion requests first: a topic whose deletion ends between the two reads
        # is then gone, never a topic without its request (shown offline).
        self._deleting = frozenset(self._children(paths.DELETE_TOPICS, TOPICS))
        names = sorted(self._children(paths.BROKER_TOPICS, TOPICS))
        topic_paths = [paths.topic(t) for t in names]
        results = self.zk.get_many(topic_paths)
        ts = self._clock()
        problems: dict[str, str] = {}
        topics: dict[str, dict[int, tuple[int, ...]]] = {}
        read: dict[str, int] = {}
        for name, path, got in zip(names, topic_paths, results, strict=True):
            if got is None:
                continue
            read[path] = int(got[1].mzxid)
            try:
                assignment = decode_topic(name, got[0], path)
            except MalformedZnode as e:
                # Unreadable (a bad write) is not deleted: keep the last assignment read,
                # as the controller does, and its watches, to see the repair.
                problems[path] = str(e)
                if name in self._topics:
                    topics[name] = self._topics[name]
                continue
            topics[name] = {p: assignment.partitions[p] for p in sorted(assignment.partitions)}
        if self._arm(topic_paths, read):
            self._mark([TOPICS])
        self._topics = topics
        self._partitions = [
            (TopicPartition(t, p), paths.partition_state(t, p))
            for t, a in topics.items()
            for p in a
        ]
        self._forget_stale(topic_paths)
        return [ProblemsSeen(ts, TOPICS, problems)]

    def _forget_stale(self, topic_paths: Iterable[str]) -> None:
        """Unregister the handlers of topics and partitions that are gone (`topic_paths`:
        the topics there are, readable or not), and forget that their watches are armed:
        a topic created again under the name is watched again."""
        current = set(topic_paths)
        current.update(path for _, path in self._partitions)
        stale = [
            p for p in self._handled if p.startswith(paths.BROKER_TOPICS + "/") and p not in current
        ]
        for path in stale:
            self.zk.unregister_handler(path, self._on_watch)
            self._handled.discard(path)
        with self._cond:
            self._armed.difference_update(stale)

    def _read_partitions(self) -> list[Observation]:
        partitions = self._partitions
        state_paths = [path for _, path in partitions]
        results = self.zk.get_many(state_paths)
        ts = self._clock()
        states: dict[TopicPartition, LeaderAndIsr] = {}
        read: dict[str, int] = {}
        malformed: dict[str, str] = {}
        unreadable: list[TopicPartition] = []
        for (tp, path), got in zip(partitions, results, strict=True):
            if got is None:
                continue
            read[path] = int(got[1].mzxid)
            try:
                states[tp] = decode_partition_state(path, got[0], got[1].version).leader_and_isr
            except MalformedZnode as e:
                malformed[path] = str(e)
                unreadable.append(tp)
                # Unreadable (a bad write) is not a partition without a state: keep the
                # last state read, as for a topic.
                if tp in self._states:
                    states[tp] = self._states[tp]
        self._states = states
        if len(partitions) <= self.per_partition_watches:
            wanted = state_paths
        else:
            canaries = choose_canaries(
                self._topics, states, self._alive, unreadable=unreadable, deleting=self._deleting
            )
            wanted = [paths.partition_state(tp.topic, tp.partition) for tp in canaries]
        if self._arm(wanted, read):
            self._mark([PARTITIONS])
        return [
            PartitionsSeen(ts, dict(self._topics), states, self._deleting),
            ProblemsSeen(ts, PARTITIONS, malformed),
        ]

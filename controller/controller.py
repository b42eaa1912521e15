"""The controller (Kafka's KafkaController): event processing on the one event thread.

Every broker runs one. It is inactive until it wins the election; then it loads the
cluster from ZooKeeper (`on_controller_failover`), and from that moment every change it
observes arrives as an event, processed in order. Losing the term (another controller's
epoch, an expired session, a ZooKeeper outage longer than the session timeout) makes it
resign: watches removed, state dropped, channel closed, and nothing written after that.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, TypeVar

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from broker.state_change_log import StateChangeLog
from controller import events as ev
from controller.channel import ControllerChannelManager
from controller.context import (
    ControllerContext,
    PartitionReplica,
    ReplicaAssignment,
)
from controller.election import imbalanced_partitions
from controller.reactions import (
    admin_election,
    brokers_failed,
    brokers_started,
    controlled_shutdown_moves,
    drop_stale_isr_members,
    isr_changes_noticed,
    leaders_lacking_their_logs,
    log_dir_failure,
    new_partitions,
    preferred_election,
    replicas_reported_offline,
    stale_isr_members,
    start_state_machines,
)
from controller.reassignment import (
    api_reassignment_targets,
    can_complete,
    coalesced_topic_writes,
    reassign_partitions,
    topic_assignment,
)
from controller.request_batch import BrokerRequest, RequestBatch, encode_shared_bodies
from controller.request_tracker import RequestTracker
from controller.state_machines import (
    FOUND_WRITTEN,
    ControllerOps,
    PartitionStateMachine,
    ReplicaStateMachine,
    found_written,
)
from controller.store import ZkControllerStore, keeping_added_partitions
from controller.topic_deletion import TopicDeletionManager, stale_deletion_requests
from election.controller_election import (
    NO_CONTROLLER,
    FencingToken,
    delete_own_controller_znode,
    read_controller,
    try_elect,
)
from election.registration import RegistrationCancelled
from handlers import zk_handlers
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.client import ControllerMovedError, ZkClient
from zkdata.znodes import (
    BrokerRegistration,
    MalformedZnode,
    PartitionState,
    TopicAssignment,
    TopicPartition,
    decode_broker,
    decode_log_dir_event,
    decode_partition_list,
    decode_partition_list_entries,
    decode_reassignment_entries,
    decode_topic,
    new_topic_id,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


# ZooKeeper could not be used: the controller cannot know its view is whole, so it resigns.
_ZK_ERRORS = (KazooException, KazooTimeoutError)
# After an event failed on ZooKeeper: the next look at the election (ReelectAfterZkError)
# at once, then after a backoff doubling from the first to the last while ZooKeeper fails.
ZK_ERROR_RETRY_FIRST_S = 0.1
ZK_ERROR_RETRY_MAX_S = 5.0
# How long a ControlledShutdown answer waits for the brokers to apply the leadership moves
# (a broker that does not answer is not worth keeping the stopping broker for). Kafka
# answers without it: who waits for the answer adds it to its request.timeout.ms.
CONTROLLED_SHUTDOWN_APPLIED_WAIT_S = 5.0
# A new controller's first auto rebalance check, in seconds (Kafka's onControllerFailover:
# scheduleAutoLeaderRebalanceTask(delay = 5)); later ones wait the configured interval.
FIRST_REBALANCE_CHECK_S = 5.0


@dataclass
class ControllerConfig:
    broker_id: int
    session_timeout_ms: int = 18_000
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_s: float = 300.0
    delete_topic_enable: bool = True
    controller_socket_timeout_ms: int = 30_000
    #: the brokers' listener the controller talks to (inter.broker.listener.name)
    inter_broker_listener_name: str = "PLAINTEXT"


@dataclass
class FailoverTimings:
    """What the last failover cost, in milliseconds (the benchmark reads these)."""

    elected_at: float = 0.0  # time.time() when the election was won
    load_ms: float = 0.0  # loading the context from ZooKeeper
    update_metadata_ms: float = 0.0  # from election won to UpdateMetadata handed to the channel
    total_ms: float = 0.0  # the whole failover sequence
    partitions: int = 0
    brokers: int = 0


@dataclass
class _Reassignments:
    """Reassignments asked for through /admin/reassign_partitions, by target replicas."""

    zk_triggered: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    # Reassignments left waiting by this event's steps, whose watches it arms at its end.
    to_watch: list[TopicPartition] = field(default_factory=list)
    # Reassigned partitions whose ISR changed, looked at together by one queued event.
    isr_changed: set[TopicPartition] = field(default_factory=set)
    isr_changes_queued: bool = False
    # The czxid of the /admin/reassign_partitions the controller last read (None: none
    # read): one found with another was created since, a request not read yet.
    znode_czxid: int | None = None


def foreign_topic_write(known_id: uuid.UUID | None, assignment: TopicAssignment) -> bool:
    """A known topic's znode naming another topic id: written for another incarnation of
    the topic. (One naming none is an old tool's write: it gets the id known back,
    ``topic_id_restored``.)"""
    return known_id is not None and assignment.topic_id not in (None, known_id)


def topic_id_restored(ours: TopicAssignment, current: TopicAssignment) -> TopicAssignment | None:
    """What a known topic's znode gets back when it names no topic id (a tool older than
    Kafka 2.8 rewrote it, e.g. 2.7's kafka-topics.sh --alter --partitions): the
    controller's assignment and id (``ours``) with the partitions the znode added. Left
    without one, the next failover would give the topic a new id and every broker would
    set its logs aside as an earlier incarnation's. None when the znode names an id, or
    the controller knows none."""
    if current.topic_id is not None or ours.topic_id is None:
        return None
    return keeping_added_partitions(ours, current)


def stop_replica_partition_errors(
    response: dict[str, Any], asked: Sequence[TopicPartition] = ()
) -> dict[TopicPartition, int]:
    """The partitions a StopReplica answer lists, with their error codes: only those
    (Kafka's sendStopReplicaRequests callback reads no other). A partition of the request
    the answer leaves out is not reported deleted, nor failed.

    A partition listed where the request (``asked``) has it, as brokers answer, is the
    request's TopicPartition: the answer's own, with their topic names, came to 14 MB
    more for 100,000 partitions, held while the event waited (three brokers answer a
    deletion at once)."""
    out: dict[TopicPartition, int] = {}
    n = len(asked)
    for i, p in enumerate(response.get("partition_errors", [])):
        topic, partition = p["topic_name"], p["partition_index"]
        tp = asked[i] if i < n else None
        if tp is None or tp.partition != partition or tp.topic != topic:
            tp = TopicPartition(topic, partition)
        out[tp] = p["error_code"]
    return out


def _report_unreadable_reassignments(unreadable: Iterable[MalformedZnode]) -> None:
    """Entries of /admin/reassign_partitions that cannot be read: each is skipped and taken
    out of the znode, as Kafka removes a reassignment that failed
    (maybeRemoveFromZkReassignment); the others are carried out."""
    for e in unreadable:
        log.error("%s; skipping that entry and taking it out of the request", e)


class KafkaController:
    def __init__(
        self,
        config: ControllerConfig,
        zk: ZkClient,
        state_log: StateChangeLog,
        register_broker: Callable[[], int],
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self.state_log = state_log
        self.register_broker = register_broker
        self.store = ZkControllerStore(zk)
        self.ctx = ControllerContext()
        self.events = ev.ControllerEventManager(self.process)
        self.channel: ControllerChannelManager | None = None
        self.ops = ControllerOps(
            self.ctx,
            self.store,
            self.broker_id,
            self._send,
            state_log,
            unclean_default=config.unclean_leader_election_enable,
            batch=RequestBatch(inter_broker_listener=config.inter_broker_listener_name),
        )
        self.partition_sm = PartitionStateMachine(self.ops)
        self.replica_sm = ReplicaStateMachine(self.ops)
        self.deletion = TopicDeletionManager(
            self.ops, self.partition_sm, self.replica_sm, self.store, self._on_topic_removed
        )
        self.handlers = zk_handlers.HandlerRegistry(zk, self.events.put)
        self._controller_change = zk_handlers.controller_change(self.events.put)
        self._controller_epoch_change = zk_handlers.controller_epoch_change(self.events.put)
        self.reassignments = _Reassignments()
        self.active_controller_id = NO_CONTROLLER
        self.token: FencingToken | None = None
        # The term's failover is done (its controller_failover line written): what the
        # status file calls active. The token alone is set before the failover starts.
        self._failover_done = False
        self.last_failover = FailoverTimings()
        self.failovers = 0
        self.resignations = 0
        self._rebalance_timer: threading.Timer | None = None
        self._suspended_timer: threading.Timer | None = None
        # Events failed on ZooKeeper since the election was last looked at successfully,
        # and the timer of the next look (ReelectAfterZkError).
        self._zk_errors_in_a_row = 0
        self._zk_retry_timer: threading.Timer | None = None
        self._sessions_ended = 0
        # The session (`ZkClient.session_generation`) this broker last registered in: read
        # here, as the server registers after building the controller (before starting
        # it: start() registers again if it moved on), and again by
        # _register_unless_stopping. Elections are held in it only (refused once it
        # ended), as Kafka's RegisterBrokerAndReelect registers first.
        self._registered_session = zk.session_generation
        self._last_zk_state = "CONNECTED"
        self._sends_dropped = False  # logged once a term (_send)
        self._state_lock = threading.Lock()
        self._tracker: RequestTracker | None = None

    # --- lifecycle (called from the broker's threads: they only enqueue) ---------------

    @property
    def is_active(self) -> bool:
        return self.token is not None

    def start(self) -> None:
        self.zk.add_state_listener(self._on_zk_state)
        self.zk.register_handler(paths.CONTROLLER, self._controller_change)
        self.zk.register_handler(paths.CONTROLLER_EPOCH, self._controller_epoch_change)
        self.events.start()
        if self.zk.session_generation != self._registered_session:
            # A session ended before the listener above was added (the server registers,
            # then writes meta.properties and a claim address before starting us): its
            # registration may have gone with it, and no listener heard of it. Register
            # again (a no-op where the registration stands), then elect.
            self.events.put(ev.RegisterBrokerAndReelect())
        else:
            self.events.put(ev.Startup())

    def shutdown(self) -> None:
        """Stop the event thread, then resign (the broker is going away)."""
        self._cancel_suspended_timer()
        if self._zk_retry_timer is not None:
            self._zk_retry_timer.cancel()
        self.events.close()
        if self.is_active:
            self._resign("broker shutting down")
        self.zk.unregister_handler(paths.CONTROLLER, self._controller_change)
        self.zk.unregister_handler(paths.CONTROLLER_EPOCH, self._controller_epoch_change)

    def controlled_shutdown(
        self, broker_id: int, broker_epoch: int, reply: ev.ShutdownReply
    ) -> None:
        self.events.put(ev.ControlledShutdown(broker_id, broker_epoch, reply))

    def elect_leaders(
        self,
        partitions: list[TopicPartition] | None,
        election_type: int,
        reply: ev.ElectionReply,
    ) -> None:
        self.events.put(ev.ElectLeaders(partitions, election_type, reply))

    def alter_partition_reassignments(
        self,
        reassignments: dict[TopicPartition, tuple[int, ...] | None],
        reply: ev.ReassignmentReply,
    ) -> None:
        self.events.put(ev.AlterPartitionReassignments(reassignments, reply))

    def enable_topic_unclean_leader_election(self, topic: str) -> None:
        """A config change notification turned unclean election on for ``topic`` (called by
        the broker's config change listener; Kafka's enableTopicUncleanLeaderElection)."""
        if self.is_active:
            self.events.put(ev.TopicUncleanLeaderElectionEnable(topic))

    def list_partition_reassignments(
        self, partitions: list[TopicPartition] | None, reply: ev.ListingReply
    ) -> None:
        self.events.put(ev.ListPartitionReassignments(partitions, reply))

    def _on_zk_state(self, state: str) -> None:
        """kazoo's connection thread: decide which event to enqueue, nothing more."""
        with self._state_lock:
            previous, self._last_zk_state = self._last_zk_state, state
            if state == "SUSPENDED":
                self._start_suspended_timer()
            elif state == "CLOSED":
                self._cancel_suspended_timer()
            elif state == "LOST":
                self._cancel_suspended_timer()
                self.events.clear_and_put(ev.Expire("session expired"))
            elif state == "CONNECTED":
                self._cancel_suspended_timer()
                if previous == "LOST":
                    self.events.put(ev.RegisterBrokerAndReelect())
                elif previous == "SUSPENDED":
                    self.events.put(ev.Reconnected())
        self.state_log.session_state(state)

    def _start_suspended_timer(self) -> None:
        # Disconnected for a whole session timeout: ZooKeeper has (or will have) expired
        # the session, so another broker may already be controller. Stop acting now.
        self._cancel_suspended_timer()

        def expire() -> None:
            with self._state_lock:
                # Cancelled too late (the connection came back as the wait ended): its
                # reconnection event is queued, and must not be cleared away.
                if self._suspended_timer is not timer or self._last_zk_state != "SUSPENDED":
                    return
                self.events.clear_and_put(
                    ev.Expire("ZooKeeper unreachable for longer than the session timeout")
                )

        timer = threading.Timer(self.config.session_timeout_ms / 1000, expire)
        timer.daemon = True
        self._suspended_timer = timer
        timer.start()

    def _cancel_suspended_timer(self) -> None:
        if self._suspended_timer is not None:
            self._suspended_timer.cancel()
            self._suspended_timer = None

    # --- the event loop ----------------------------------------------------------------

    def process(self, event: ev.ControllerEvent) -> None:
        handler = getattr(self, f"_on_{event.name}", None)
        if handler is None:
            log.error("no handler for controller event %s", event.name)
            return
        self._tracker = RequestTracker(
            event.name,
            self.events.current_enqueued_at or time.monotonic(),
            self.state_log,
            self.ctx.epoch,
        )
        self.ops.deferred = True
        processed = False
        try:
            handler(event)
            # After the event's answer: a reassignment is durable once its topic's znode
            # is written, and a client's request is answered then, not after its watches.
            self._arm_reassignment_watches()
            self.ops.deferred = False
            self.ops.flush()
            processed = True
        except ControllerMovedError:
            log.warning("controller moved while processing %s: resigning", event.name)
            self._maybe_resign(fenced=True)
        except _ZK_ERRORS as e:
            log.warning("ZooKeeper failed while processing %s (%r)", event.name, e)
            if self.is_active:
                # The context may be half-updated: drop it rather than act on it (item 35
                # of docs/architecture.md). The session may live on, and with it our
                # /controller: it is removed once ZooKeeper answers, and an election runs.
                # Or the term's session ended under the event (its write refused): the
                # Expire queued meanwhile finds nothing more to resign.
                ended = self._term_session_ended()
                self._resign("session expired" if ended else f"ZooKeeper error: {type(e).__name__}")
            self._reelect_after_zk_error()
        except Exception as e:
            # A bug, not a fault. What the event decided so far is half made: partition
            # states written and recorded whose requests were not all batched, the rest
            # of the event's decisions never made. Left in the batch, it went out with
            # the next event's. Kafka never sends such a batch (its next newBatch finds
            # it not empty, and the controller clears it and moves: handleIllegalState,
            # triggerControllerMove); here it is dropped at once, and the term ends as
            # after a ZooKeeper error (item 35 of docs/architecture.md): the next one
            # starts from what ZooKeeper holds, and sends every broker its states.
            self.ops.drop_batch()
            if self.is_active:
                self._resign(f"error processing {event.name}: {type(e).__name__}")
                self._reelect_after_zk_error()
            raise  # logged by the event thread
        finally:
            self.ops.deferred = False
            tracker, self._tracker = self._tracker, None
            if tracker is not None:
                tracker.close()
            if not processed:
                event.preempt()

    def _term_session_ended(self) -> bool:
        """The ZooKeeper session this term was won in has ended (kazoo may be in the next
        one already): nothing of the term may act any more."""
        token = self.token
        return token is not None and token.session != self.zk.session_generation

    def _send(self, requests: list[BrokerRequest]) -> None:
        token = self.token
        if self.channel is None or token is None:
            return
        if self._term_session_ended():
            # The session of the term ended: its Expire is queued, and this event goes on
            # until its next write is refused. Kafka's cannot send meanwhile (its new
            # session waits for the Expire), and another broker may already be
            # controller of the next epoch: nothing of this term goes out any more.
            if not self._sends_dropped:
                self._sends_dropped = True
                log.warning(
                    "the ZooKeeper session of epoch %d ended: its requests to brokers are dropped",
                    token.epoch,
                )
            return
        tracker = self._tracker
        if tracker is not None:
            tracker.epoch = self.ctx.epoch
            requests = tracker.track(requests)
        self.channel.send(requests)

    @staticmethod
    def _on_abandon(request: BrokerRequest) -> None:
        if isinstance(request.tracker, RequestTracker):
            request.tracker.abandon(request)

    def _on_response(self, request: BrokerRequest, response: dict[str, Any]) -> None:
        """A sender thread: turn the broker's answer into an event."""
        if isinstance(request.tracker, RequestTracker):
            request.tracker.ack(request)
        if request.api_key == ApiKey.LEADER_AND_ISR:
            self.events.put(
                ev.LeaderAndIsrResponseReceived(request.broker_id, response, request.broker_epoch)
            )
        elif request.api_key == ApiKey.STOP_REPLICA and request.delete_partitions:
            code = response.get("error_code", 0)
            errors = stop_replica_partition_errors(response, request.partitions)
            if not errors:
                # The whole request refused (STALE_BROKER_EPOCH from a broker's next
                # incarnation, which lists no partition): it says nothing of any replica,
                # and Kafka's callback sends no event for it.
                if code:
                    log.warning(
                        "broker %d refused a StopReplica (delete) of %d partitions: %s",
                        request.broker_id,
                        len(request.partitions),
                        ErrorCode.of(code).name,
                    )
                return
            self.events.put(
                ev.TopicDeletionStopReplicaResponseReceived(
                    request.broker_id, code, errors, request.broker_epoch
                )
            )

    # --- election and resignation -------------------------------------------------------

    def _on_Startup(self, _event: ev.Startup) -> None:
        self._elect()

    def _on_ControllerChange(self, _event: ev.ControllerChange) -> None:
        self._maybe_resign()
        if self.active_controller_id == NO_CONTROLLER:
            # The /controller whose creation (or change) this reports is gone already, and
            # its deletion brings no Reelect: the watch its creation fired was re-armed
            # (by the read above) only after it went. Kafka's processControllerChange
            # only resigns, and its cluster would stay without a controller; an election
            # where none stands is always safe (docs/architecture.md, item 45).
            self._elect()

    def _on_Reelect(self, _event: ev.Reelect) -> None:
        self._maybe_resign()
        self._elect()

    def _on_Expire(self, event: ev.Expire) -> None:
        self._sessions_ended += 1
        self._zk_errors_in_a_row = 0
        if self._zk_retry_timer is not None:
            self._zk_retry_timer.cancel()
        if self.is_active:
            self._resign(event.reason)
        self.active_controller_id = NO_CONTROLLER
        event.done.set()

    def _register_unless_stopping(self) -> int | None:
        """Register again; None if the broker is stopping (nothing to register any more).
        The session is read first: should it end during the registration, the election
        that follows is refused, and the next session's registration elects."""
        session = self.zk.session_generation
        try:
            broker_epoch = self.register_broker()
        except RegistrationCancelled:
            log.info("broker %d is stopping: not registering again", self.broker_id)
            return None
        self._registered_session = session
        return broker_epoch

    def _on_RegisterBrokerAndReelect(self, _event: ev.RegisterBrokerAndReelect) -> None:
        broker_epoch = self._register_unless_stopping()
        if broker_epoch is None:
            return
        log.info(
            "re-registered broker %d in a new session, broker epoch %d",
            self.broker_id,
            broker_epoch,
        )
        self._elect()

    def _reelect_after_zk_error(self) -> None:
        """Queue a ReelectAfterZkError: at once after the first failure, then with a
        backoff (one timer at a time) while they go on failing (an event that failed on
        a bug, not on ZooKeeper, ends the term through it too). A ZooKeeper error that is
        no disconnection (a request timing out while pings go on) brings no reconnection,
        whose event would otherwise be the only one to remove a resigned controller's
        /controller: the cluster had no controller until the session ended."""
        failures = self._zk_errors_in_a_row
        self._zk_errors_in_a_row += 1
        event = ev.ReelectAfterZkError(self._sessions_ended)
        if failures == 0:
            self.events.put(event)
            return
        if self._zk_retry_timer is not None:
            self._zk_retry_timer.cancel()
        delay = min(ZK_ERROR_RETRY_FIRST_S * 2 ** min(failures - 1, 16), ZK_ERROR_RETRY_MAX_S)
        timer = threading.Timer(delay, self.events.put, (event,))
        timer.daemon = True
        self._zk_retry_timer = timer
        timer.start()

    def _on_ReelectAfterZkError(self, event: ev.ReelectAfterZkError) -> None:
        # A ZooKeeper error here comes back through process(), with a longer backoff.
        if event.sessions_ended != self._sessions_ended:
            return  # the session it was for ended: the new one's registration elects
        self._release_and_reelect("after a ZooKeeper error")
        self._zk_errors_in_a_row = 0

    def _on_Reconnected(self, _event: ev.Reconnected) -> None:
        self._release_and_reelect("after reconnecting")

    def _release_and_reelect(self, when: str) -> None:
        """The session survived a disconnection or a failed request. If we resigned
        meanwhile, our /controller may still stand with nobody acting behind it: remove
        it so an election happens. The registration is made again (a no-op where it
        stands: one that failed on the error is made now), then the election runs.
        Writes whose answer was lost are read back first, while our /controller still
        keeps any other broker from being elected and writing those partitions."""
        self._log_unanswered_writes()
        if not self.is_active and delete_own_controller_znode(self.zk, self.broker_id):
            log.info("removed this broker's stale /controller %s", when)
        if self._register_unless_stopping() is None:
            return
        if not self.is_active:
            self._elect()

    def _log_unanswered_writes(self) -> None:
        """The partition states of the last term's last write batch whose answer a lost
        connection took, read back (pipelined multiReads), and those found landed logged,
        once: their partition_state lines were to be written on the answer, and no other
        line records those writes (a next term loads them and sends them to brokers).
        Run on the event thread before any election, and on reconnection; a ZooKeeper
        error keeps them for the next try (it comes back through process())."""
        unanswered = self.ops.unanswered
        if unanswered is None:
            return
        stored = self.store.read_partition_states(unanswered.partitions())
        self.ops.unanswered = None
        rows = found_written(unanswered, stored)
        if rows:
            log.info(
                "%d partition states of controller epoch %d were written, their answer lost",
                len(rows),
                unanswered.controller_epoch,
            )
            self.state_log.partition_states_found(unanswered.controller_epoch, rows, FOUND_WRITTEN)

    def _elect(self) -> None:
        self._log_unanswered_writes()
        controller_id, owner = read_controller(self.zk, watch=True)
        if controller_id != NO_CONTROLLER:
            if (
                controller_id == self.broker_id
                and owner == self.zk.session_id
                and not self.is_active
            ):
                # Our own, left from before a resignation: clear it and race again.
                delete_own_controller_znode(self.zk, self.broker_id)
                return  # the deletion's watch brings a Reelect
            if controller_id != self.active_controller_id:
                self.state_log.controller_seen(controller_id, "election found a controller")
            self.active_controller_id = controller_id
            return
        # Only in the session this broker registered in: an event of an ended session
        # (or one taken before its Expire was queued) would otherwise win the term in the
        # next before this broker registered there, and the failover would count it dead.
        outcome = try_elect(self.zk, self.broker_id, session=self._registered_session)
        self.active_controller_id = outcome.controller_id
        if outcome.token is None:
            self.state_log.controller_seen(outcome.controller_id, "lost the election")
            return
        self.token = outcome.token
        # The term's writes are bound to the session it was won in (docs/architecture.md,
        # "Election and fencing").
        self.store.session = outcome.token.session
        self._sends_dropped = False
        self.ctx.epoch = outcome.token.epoch
        self.ctx.epoch_zk_version = outcome.token.zk_version
        self.last_failover = FailoverTimings(elected_at=time.time())
        self.state_log.controller_elected(self.ctx.epoch, self.ctx.epoch_zk_version)
        log.info("broker %d is controller, epoch %d", self.broker_id, self.ctx.epoch)
        try:
            self._on_controller_failover()
        except (ControllerMovedError, *_ZK_ERRORS):
            # Fenced, or ZooKeeper failed mid-failover (a fault, not a bug): process()
            # resigns; on reconnection our own /controller is removed if it still stands.
            raise
        except Exception:
            log.exception("controller failover failed; resigning so another broker can try")
            epoch = self.ctx.epoch
            self._resign("failover failed")
            delete_own_controller_znode(self.zk, self.broker_id)
            log.info("resigned epoch %d", epoch)

    def _maybe_resign(self, *, fenced: bool = False) -> None:
        was_active = self.is_active
        if fenced and was_active:
            # First: the read below may fail (the connection dropped), and nothing of a
            # fenced term may go on acting meanwhile (its channel, its handlers).
            self._resign("fenced: another controller's epoch")
        try:
            controller_id, _ = read_controller(self.zk, watch=True)
        except _ZK_ERRORS as e:
            if not fenced:
                raise
            log.warning("could not read /controller after being fenced (%r)", e)
            self._reelect_after_zk_error()  # reads it again, and removes ours if it stands
            return
        self.active_controller_id = controller_id
        if was_active and (fenced or controller_id != self.broker_id):
            if not fenced:
                self._resign("controller moved")
            # Ours by session, whatever it names (unreadable, another id): left standing,
            # it blocks every election. Another's is left alone.
            delete_own_controller_znode(self.zk, self.broker_id)
        elif controller_id != self.broker_id:
            self.state_log.controller_seen(controller_id, "controller changed")

    def _resign(self, reason: str) -> None:
        epoch = self.ctx.epoch
        self.token = None
        self._failover_done = False
        self.resignations += 1
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        self.handlers.unregister_all()
        if self.channel is not None:
            self.channel.close(timeout_s=0.5)
            self.channel = None
        self.ops.batch.clear()
        self.ctx.reset()
        self.reassignments = _Reassignments()
        self.state_log.controller_resigned(epoch, reason)
        log.info("broker %d resigned as controller of epoch %d: %s", self.broker_id, epoch, reason)

    # --- failover -----------------------------------------------------------------------

    def _on_controller_failover(self) -> None:
        marks: dict[str, float] = {}
        started = time.monotonic()

        def mark(name: str) -> None:
            marks[name] = (time.monotonic() - started) * 1000

        self.failovers += 1
        self.handlers.register_controller_handlers()
        # The failover sends every broker each of its partitions' states: the answers
        # say which replicas are on failed log directories, whatever these said.
        self._delete_log_dir_event_notifications(
            self.zk.get_children(paths.LOG_DIR_EVENT_NOTIFICATION, watch=True) or []
        )
        self._delete_isr_change_notifications(
            self.zk.get_children(paths.ISR_CHANGE_NOTIFICATION, watch=True) or []
        )
        written_at = self._initialize_context()
        mark("load_ms")
        pending_deletions = self.zk.get_children(paths.DELETE_TOPICS, watch=True) or []
        queued = {t for t in pending_deletions if t in self.ctx.assignments}
        if not self.config.delete_topic_enable:
            self.store.delete_notifications(
                [paths.delete_topic(t) for t in pending_deletions], self.ctx.epoch_zk_version
            )
            queued = set()
        else:
            unreadable = self.ctx.unreadable_topics & set(pending_deletions)
            self._delete_unreadable_topics(unreadable)
            self._remove_finished_deletion_requests(
                [
                    t
                    for t in pending_deletions
                    if t not in self.ctx.assignments and t not in unreadable
                ]
            )
        self.ctx.topics_to_be_deleted.update(queued)
        self.ctx.topics_ineligible_for_deletion.update(
            t for t in queued if any(tp.topic == t for tp in self.ctx.partitions_being_reassigned)
        )
        self._drop_stale_isr_members(written_at)
        # Every broker learns the whole cluster before any LeaderAndIsr (Kafka's order).
        self.ops.batch.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids, None)
        update_metadata = self.ops.barrier()
        mark("update_metadata_queued_ms")
        # Encoded here, before the state machines start (the senders send each chunk as
        # it is done): no LeaderAndIsr leaves before it anyway, and the brokers get it
        # sooner than if the senders encoded it beside the replica step, in a process
        # that is the failover's bottleneck (100,000 partitions: 10 chunks, ~25 ms each
        # on a quiet one).
        encode_shared_bodies(update_metadata)
        del update_metadata  # the channel lets go of each chunk once its broker has it
        mark("update_metadata_encoded_ms")
        start_state_machines(self.partition_sm, self.replica_sm, mark)
        self._initialize_reassignments()
        self.deletion.resume()
        self._run_pending_preferred_election()
        # The first check 5 s after the failover, the next ones every interval, as Kafka's
        # onControllerFailover schedules it: an imbalance the brokers' restarts left is
        # mended soon after a new controller takes over, not up to an interval later.
        self._schedule_rebalance(FIRST_REBALANCE_CHECK_S)
        mark("total_ms")
        t = self.last_failover
        t.load_ms = marks["load_ms"]
        t.update_metadata_ms = marks["update_metadata_queued_ms"]
        t.total_ms = marks["total_ms"]
        t.partitions = self.ctx.partition_count()
        t.brokers = len(self.ctx.live_brokers)
        marks["since_elected_ms"] = (time.time() - t.elected_at) * 1000
        self.state_log.failover_loaded(self.ctx.epoch, t.brokers, t.partitions, marks)
        self._failover_done = True
        log.info(
            "failover of epoch %d: %d brokers, %d partitions, loaded in %.0f ms, done in %.0f ms",
            self.ctx.epoch,
            t.brokers,
            t.partitions,
            t.load_ms,
            t.total_ms,
        )

    def _remove_finished_deletion_requests(self, unknown: list[str]) -> None:
        """Deletion requests naming topics the controller does not know (the failover did
        not load them, or their creation's event is still queued). One made after a topic
        of its name was is kept: the topic's creation, heard of later, starts its deletion
        (`_on_new_topics`). One older than any topic of its name is removed, as Kafka's
        failover completes a deletion with no replicas left (item 29,
        `stale_deletion_requests`). The topics are read after the requests, in the same
        round trip, so a topic of the race is there to compare with: only a controller
        deletes topics."""
        if not unknown:
            return
        request_paths = [paths.delete_topic(t) for t in unknown]
        got = self.zk.get_many([*request_paths, *(paths.topic(t) for t in unknown)])
        requests, topics = got[: len(unknown)], got[len(unknown) :]
        czxids = [
            (
                topic,
                None if request is None else request[1].czxid,
                None if created is None else created[1].czxid,
            )
            for topic, request, created in zip(unknown, requests, topics, strict=True)
        ]
        stale = stale_deletion_requests(czxids)
        kept = sorted(t for t, r, c in czxids if r is not None and c is not None and t not in stale)
        if kept:
            log.info("keeping deletion requests of topics not heard of yet: %s", kept)
        if stale:
            log.info(
                "removing deletion requests naming no topic or older than the topic of"
                " their names: %s",
                sorted(stale),
            )
            self.store.delete_notifications(
                [paths.delete_topic(t) for t in stale], self.ctx.epoch_zk_version
            )

    def _initialize_context(self) -> dict[TopicPartition, int]:
        """Load the context; return the partition states last written before the newest
        registration, with when (for `_drop_stale_isr_members`, once the topics being
        deleted are known)."""
        ctx = self.ctx
        broker_ids = self.zk.get_children(paths.BROKER_IDS, watch=True) or []
        # Those listed unreadable are not started: their handlers start them once repaired.
        brokers, _unreadable = self._read_brokers(broker_ids)
        ctx.add_live_brokers(brokers)
        self.channel = ControllerChannelManager(
            self.broker_id,
            self._on_response,
            on_abandon=self._on_abandon,
            socket_timeout_s=self.config.controller_socket_timeout_ms / 1000,
        )
        for broker_id, (reg, _) in brokers.items():
            self.channel.add_broker(broker_id, *reg.address(self.config.inter_broker_listener_name))
        topics = self.zk.get_children(paths.BROKER_TOPICS, watch=True) or []
        # The context was empty: its partitions are the ones just added, in its order.
        partitions = self._add_topics(self._read_topics(topics))
        newest_registration = max((epoch for _, epoch in brokers.values()), default=0)
        states, written_at = self.store.read_partition_states_written_before(
            partitions, newest_registration
        )
        ctx.adopt_partition_states(states)
        return written_at

    def _drop_stale_isr_members(self, written_at: dict[TopicPartition, int]) -> None:
        """Brokers that bounced while no controller watched (the earlier incarnation was
        this controller, or the controller moved meanwhile) leave the ISRs and leaderships
        their earlier incarnations held, as a BrokerChange would have had them leave."""
        stale = stale_isr_members(self.ctx, written_at)
        if not stale:
            return
        written = drop_stale_isr_members(self.partition_sm, stale)
        log.warning(
            "brokers %s registered since %d partition states listing them in the ISR were "
            "written: out of %d of those ISRs (the others have no other live member)",
            sorted(set().union(*stale.values())),
            len(stale),
            len(written),
        )

    def _read_brokers(
        self, broker_ids: Iterable[str]
    ) -> tuple[dict[int, tuple[BrokerRegistration, int]], dict[int, int]]:
        """Registrations and broker epochs (czxid), watched for modifications; and the
        epochs of the brokers listed whose registration cannot be read (reported; its
        repair starts it). Each broker listed has its BrokerModifications handler, but one
        gone by the read."""
        ids: list[int] = []
        skipped: list[str] = []
        for child in broker_ids:
            broker_id = paths.parse_broker_id(child)
            if broker_id is None:
                skipped.append(child)
            else:
                ids.append(broker_id)
        if skipped:
            log.error(
                "ignoring children of %s that are no broker id (a 32-bit integer >= 0): %s",
                paths.BROKER_IDS,
                ", ".join(repr(c if len(c) <= 20 else c[:20] + "...") for c in sorted(skipped)),
            )
        # The handlers before the read that arms their watches, as Kafka's
        # registerZNodeChangeHandlerAndCheckExistence: a change landing after the read
        # would fire into no handler, and nothing would arm the spent watch again.
        for broker_id in ids:
            self.handlers.register(zk_handlers.broker_modifications(self.events.put, broker_id))
        got = self.zk.get_many([paths.broker(i) for i in ids], watch=True)
        out: dict[int, tuple[BrokerRegistration, int]] = {}
        unreadable: dict[int, int] = {}
        for broker_id, item in zip(ids, got, strict=True):
            if item is None:
                self.handlers.unregister(paths.broker(broker_id))
                continue
            try:
                out[broker_id] = (decode_broker(broker_id, item[0]), int(item[1].czxid))
            except MalformedZnode as e:
                log.error(
                    "%s; broker %d keeps the registration known before, if any: it is not"
                    " started until it is fixed",
                    e,
                    broker_id,
                )
                unreadable[broker_id] = int(item[1].czxid)
        return out, unreadable

    def _read_topics(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        """Assignments of these topics, watched for partition additions; malformed ones are
        reported and skipped, and gone ones skipped. Topics without an id (older tools) get
        one, as Kafka 2.8."""
        names = sorted(set(topics))
        for t in names:
            self.handlers.register(zk_handlers.partition_modifications(self.events.put, t))
        got = self.zk.get_many([paths.topic(t) for t in names], watch=True)
        out: dict[str, TopicAssignment] = {}
        missing_ids: list[TopicAssignment] = []
        for topic, item in zip(names, got, strict=True):
            if item is None:
                continue
            try:
                assignment = decode_topic(topic, item[0])
            except MalformedZnode as e:
                log.error("%s; ignoring topic %s until it is fixed", e, topic)
                self.ctx.unreadable_topics.add(topic)
                continue
            self.ctx.unreadable_topics.discard(topic)
            if assignment.topic_id is None:
                # A known topic keeps its id (item 42); only a new one gets a new id.
                assignment = TopicAssignment(
                    topic,
                    assignment.partitions,
                    self.ctx.topic_ids.get(topic) or new_topic_id(),
                    assignment.adding_replicas,
                    assignment.removing_replicas,
                )
                missing_ids.append(assignment)
            out[topic] = assignment
        if missing_ids:
            # One removed since it was read is skipped, as one gone before the read: its
            # TopicChange follows, and nothing of it is in the context.
            for topic in self.store.write_topic_assignments(missing_ids, self.ctx.epoch_zk_version):
                del out[topic]
        return out

    def _add_topics(self, assignments: dict[str, TopicAssignment]) -> list[TopicPartition]:
        """Add these topics' assignments to the context; their partitions, in the order
        the context now lists them."""
        ctx = self.ctx
        added: list[TopicPartition] = []
        # Equal assignments are one immutable object (a cluster has a handful of replica
        # orders); a later change replaces a partition's, never changes it.
        shared: dict[ReplicaAssignment, ReplicaAssignment] = {}
        for topic, a in assignments.items():
            if a.topic_id is not None:
                # A known topic's id is never replaced (Kafka 2.8's processTopicIds sets
                # ids only for topics lacking one).
                ctx.topic_ids.setdefault(topic, a.topic_id)
            parts = ctx.assignments.setdefault(topic, {})
            if not (a.adding_replicas or a.removing_replicas):
                # Nothing being reassigned (the usual topic, 1,000s of partitions): one
                # assignment per distinct replica list, set without a loop per partition.
                by_replicas: dict[tuple[int, ...], ReplicaAssignment] = {}
                for replicas in set(a.partitions.values()):
                    ra = ReplicaAssignment(replicas)
                    by_replicas[replicas] = shared.setdefault(ra, ra)
                parts.update(
                    zip(
                        a.partitions,
                        map(by_replicas.__getitem__, a.partitions.values()),
                        strict=True,
                    )
                )
                added += map(TopicPartition, repeat(topic), a.partitions)
                continue
            for p, replicas in a.partitions.items():
                adding = a.adding_replicas.get(p, ())
                removing = a.removing_replicas.get(p, ())
                ra = ReplicaAssignment(replicas, adding, removing)
                parts[p] = shared.setdefault(ra, ra)
                tp = TopicPartition(topic, p)
                if adding or removing:
                    ctx.partitions_being_reassigned.add(tp)
                added.append(tp)
        return added

    def _delete_log_dir_event_notifications(self, children: list[str]) -> None:
        self.store.delete_notifications(
            [paths.log_dir_event_notification(c) for c in children], self.ctx.epoch_zk_version
        )

    def _delete_isr_change_notifications(self, children: list[str]) -> None:
        self.store.delete_notifications(
            [paths.isr_change_notification(c) for c in children], self.ctx.epoch_zk_version
        )

    def _schedule_rebalance(self, delay_s: float | None = None) -> None:
        """The next auto rebalance check, ``delay_s`` from now (by default the configured
        leader.imbalance.check.interval.seconds)."""
        if not self.config.auto_leader_rebalance_enable or not self.is_active:
            return
        timer = threading.Timer(
            self.config.leader_imbalance_check_interval_s if delay_s is None else delay_s,
            lambda: self.events.put(ev.AutoPreferredReplicaLeaderElection()),
        )
        timer.daemon = True
        self._rebalance_timer = timer
        timer.start()

    # --- brokers ------------------------------------------------------------------------

    def _on_BrokerChange(self, _event: ev.BrokerChange) -> None:
        if not self.is_active:
            return
        ctx = self.ctx
        children = self.zk.get_children(paths.BROKER_IDS, watch=True) or []
        current, unreadable = self._read_brokers(children)
        for b, czxid in unreadable.items():
            if b in ctx.live_brokers and czxid == ctx.broker_epochs.get(b):
                # Its registration, the same znode, made unreadable by someone's write:
                # the broker lives on as it was registered (Kafka never takes a broker
                # whose znode stands for dead). A new incarnation (another czxid) whose
                # registration cannot be read leaves the old one dead, and starts once
                # it can be read (BrokerModifications).
                current[b] = (ctx.live_brokers[b], czxid)
        known = set(ctx.live_brokers)
        new = set(current) - known
        dead = known - set(current)
        bounced = {b for b in set(current) & known if current[b][1] > ctx.broker_epochs.get(b, -1)}
        if not (new or dead or bounced):
            return
        self.state_log.broker_change(ctx.epoch, new, dead, bounced, current)
        log.info("brokers: new %s, dead %s, bounced %s", sorted(new), sorted(dead), sorted(bounced))
        assert self.channel is not None
        for b in dead | bounced:
            self.channel.remove_broker(b)
        for b in dead - set(unreadable):  # one listed unreadable keeps its handler
            self.handlers.unregister(paths.broker(b))
        for b in new | bounced:
            reg = current[b][0]
            self.channel.add_broker(b, *reg.address(self.config.inter_broker_listener_name))
        if new:
            self._on_broker_startup({b: current[b] for b in new})
        if bounced:
            # A new incarnation: whatever the old one held is gone (KIP-380).
            self._on_broker_failure(bounced)
            self._on_broker_startup({b: current[b] for b in bounced})
        if dead:
            self._on_broker_failure(dead)

    def _on_broker_startup(self, started: dict[int, tuple[BrokerRegistration, int]]) -> None:
        resume = brokers_started(self.partition_sm, self.replica_sm, started)
        self._resume_reassignments(resume.reassignments)
        if resume.deletions:
            self.deletion.resume_for(resume.deletions)

    def _on_broker_failure(self, dead: set[int]) -> None:
        brokers_failed(
            self.partition_sm, self.replica_sm, dead, self.deletion.fail_replica_deletion
        )

    def _on_BrokerModifications(self, event: ev.BrokerModifications) -> None:
        if not self.is_active:
            return
        got = self.zk.get(paths.broker(event.broker_id), watch=True)
        if got is None:
            return  # gone: the BrokerChange that follows handles it
        try:
            reg = decode_broker(event.broker_id, got[0])
        except MalformedZnode as e:
            if event.broker_id in self.ctx.live_brokers:
                log.error("%s; keeping the broker's previous registration", e)
            else:
                log.error("%s; the broker is not started until it is fixed", e)
            return
        ctx = self.ctx
        old = ctx.live_brokers.get(event.broker_id)
        czxid = int(got[1].czxid)
        if old is None:
            # Registered, but not live: its registration could not be read until now.
            self._start_repaired_broker(event.broker_id, reg, czxid)
            return
        if czxid != ctx.broker_epochs.get(event.broker_id):
            return  # registered anew: the BrokerChange that follows handles it
        # Kafka's processBrokerModification acts on endpoints (or features, none here)
        # alone: a rack changes with a restart, a new registration.
        if old.endpoints != reg.endpoints:
            log.info("broker %d changed its registration: %s", event.broker_id, reg.endpoints)
            ctx.live_brokers[event.broker_id] = reg
            assert self.channel is not None
            self.channel.add_broker(
                event.broker_id, *reg.address(self.config.inter_broker_listener_name)
            )
            self.ops.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, [])
            self.ops.flush()

    def _start_repaired_broker(self, broker_id: int, reg: BrokerRegistration, czxid: int) -> None:
        """A broker listed in /brokers/ids whose registration could not be read (so never
        live, or its earlier incarnation taken for dead) can be now: it starts, as a
        BrokerChange would have started it."""
        ctx = self.ctx
        log.info("broker %d's registration can be read now: it starts", broker_id)
        self.state_log.broker_change(ctx.epoch, [broker_id], [], [], [*ctx.live_brokers, broker_id])
        assert self.channel is not None
        self.channel.add_broker(broker_id, *reg.address(self.config.inter_broker_listener_name))
        self._on_broker_startup({broker_id: (reg, czxid)})

    # --- topics -------------------------------------------------------------------------

    def _on_TopicChange(self, _event: ev.TopicChange) -> None:
        if not self.is_active:
            return
        ctx = self.ctx
        topics = set(self.zk.get_children(paths.BROKER_TOPICS, watch=True) or [])
        known = ctx.all_topics
        for t in known - topics:
            self._on_topic_removed(t)
            ctx.remove_topic(t)
        for t in ctx.unreadable_topics - topics:
            self._on_topic_removed(t)
            ctx.unreadable_topics.discard(t)
        # Those listed already but unreadable are read again too: their repair is seen
        # by their data watch (PartitionModifications), but one deleted and made again
        # meanwhile spent that watch on its deletion.
        new = topics - known
        if new:
            self._on_new_topics(new)

    def _on_new_topics(self, new: set[str]) -> None:
        """Topics that appeared (or whose znode can be read at last): their partitions
        created, and a deletion asked for them started."""
        added = self._add_topics(self._read_topics(new))
        self._on_new_partition_creation(added)
        # One whose znode shows a reassignment in progress (repaired after it turned
        # unreadable mid-reassignment, or written so) resumes it as a failover would: the
        # context marks it being reassigned, and only a step or its ISR watch ends that.
        reassigning = [tp for tp in added if tp in self.ctx.partitions_being_reassigned]
        if reassigning:
            self._resume_reassignments(reassigning)
        # A topic created after a failover read the topics and marked for deletion
        # before it read the deletion requests: nothing fires for that request again
        # (Kafka's failover deletes it, and the topic stays), so it is looked for now.
        if new & set(self.zk.get_children(paths.DELETE_TOPICS) or []):
            self._on_TopicDeletion(ev.TopicDeletion())

    def _on_new_partition_creation(self, tps: list[TopicPartition]) -> None:
        new_partitions(self.partition_sm, self.replica_sm, tps)

    def _on_PartitionModifications(self, event: ev.PartitionModifications) -> None:
        if not self.is_active:
            return
        if event.topic in self.ctx.unreadable_topics:
            # Its znode could not be read when it appeared: perhaps it is repaired now
            # (read again, with its watch), and then it is a new topic.
            self._on_new_topics({event.topic})
            return
        if event.topic not in self.ctx.assignments:
            return
        got = self.zk.get(paths.topic(event.topic), watch=True)
        if got is None:
            return
        try:
            assignment = decode_topic(event.topic, got[0])
        except MalformedZnode as e:
            log.error("%s; ignoring the change", e)
            return
        known = self.ctx.assignments[event.topic]
        known_id = self.ctx.topic_ids.get(event.topic)
        if foreign_topic_write(known_id, assignment):
            # Another incarnation's assignment (an admin's write that raced the topic's
            # deletion and re-creation): the id known stays (Kafka 2.8 sets ids only for
            # topics lacking one), and the znode gets the controller's assignment back, or
            # a failover would take that id and brokers would set this topic's logs aside.
            log.error(
                "topic %s's znode names topic id %s, not %s: a write meant for another "
                "incarnation of it; restoring its assignment",
                event.topic,
                assignment.topic_id,
                known_id,
            )
            self.store.restore_topic_assignment(
                topic_assignment(self.ctx, event.topic), got[1].version, self.ctx.epoch_zk_version
            )
            return
        added = {p: r for p, r in assignment.partitions.items() if p not in known}
        if added and self.ctx.is_topic_queued_for_deletion(event.topic):
            # Kafka's restorePartitionReplicaAssignment: the znode gets the controller's
            # assignment back, or the added partitions, never created, would stay in it
            # (and a failover meanwhile would create them).
            log.warning(
                "topic %s is being deleted: not adding partitions %s, restoring its assignment",
                event.topic,
                sorted(added),
            )
            self.store.restore_topic_assignment(
                topic_assignment(self.ctx, event.topic), got[1].version, self.ctx.epoch_zk_version
            )
            return
        restored = topic_id_restored(topic_assignment(self.ctx, event.topic), assignment)
        if restored is not None:
            # Written before the partitions are created: a failover after this event
            # finds the id (the write's own event then finds nothing to do). One that
            # loses to a later write leaves it to that write's event.
            log.warning(
                "topic %s's znode names no topic id (written by a tool older than Kafka"
                " 2.8): writing its id %s back",
                event.topic,
                known_id,
            )
            self.store.restore_topic_assignment(restored, got[1].version, self.ctx.epoch_zk_version)
        if not added:
            return
        new_tps = self._add_topics({event.topic: TopicAssignment(event.topic, added, known_id)})
        self._on_new_partition_creation(new_tps)

    def _on_topic_removed(self, topic: str) -> None:
        self.handlers.unregister(paths.topic(topic))
        for tp in self.ctx.partitions_for_topic(topic):
            self.handlers.unregister(paths.partition_state(tp.topic, tp.partition))
            self.reassignments.zk_triggered.pop(tp, None)

    def _on_TopicDeletion(self, _event: ev.TopicDeletion) -> None:
        if not self.is_active:
            return
        ctx = self.ctx
        requested = set(self.zk.get_children(paths.DELETE_TOPICS, watch=True) or [])
        unknown = requested - ctx.all_topics - ctx.unreadable_topics
        # Kafka 2.8 deletes them all; one whose topic's creation is still queued behind
        # this event is kept, as after a failover (item 29).
        self._remove_finished_deletion_requests(sorted(unknown))
        requested -= unknown
        if not requested:
            return
        if not self.config.delete_topic_enable:
            log.info("delete.topic.enable is false: ignoring deletion of %s", sorted(requested))
            self.store.delete_notifications(
                [paths.delete_topic(t) for t in sorted(requested)], ctx.epoch_zk_version
            )
            return
        self._delete_unreadable_topics(requested & ctx.unreadable_topics)
        requested &= ctx.all_topics
        if not requested:
            return
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
        ctx.topics_to_be_deleted.update(requested)
        self.deletion.mark_ineligible(requested & reassigning, "partitions are being reassigned")
        self.deletion.resume()

    def _delete_unreadable_topics(self, topics: set[str]) -> None:
        """A topic whose znode cannot be read is one of the cluster's (Kafka's allTopics):
        a deletion asked for it deletes its znodes. It has no partition the controller
        knows of, so no replica to stop first (Kafka's deletion of a topic without
        partitions goes straight to its znodes)."""
        for topic in sorted(topics):
            log.warning(
                "deleting topic %s, whose znode cannot be read: its znodes only, no replica "
                "of it is known",
                topic,
            )
            self.store.delete_topic(topic, [], self.ctx.epoch_zk_version)
            self._on_topic_removed(topic)
            self.ctx.unreadable_topics.discard(topic)
            # Its deletion is complete, as `TopicDeletionManager._complete` logs one: the
            # analytics split a partition's incarnations at these lines.
            self.state_log.write("topic_deleted", topic=topic, controller_epoch=self.ctx.epoch)

    def _on_TopicDeletionStopReplicaResponseReceived(
        self, event: ev.TopicDeletionStopReplicaResponseReceived
    ) -> None:
        if not self.is_active:
            return
        if event.broker_epoch != self.ctx.broker_epochs.get(event.broker_id):
            # An earlier incarnation's answer, handled after the broker registered anew:
            # the replicas are the new incarnation's to delete now, in
            # ReplicaDeletionStarted for it, and only its answer may end them (Kafka
            # would act on it, and a failure stalled the deletion: item 31).
            log.info(
                "a StopReplica (delete) answer of broker %d's earlier epoch: ignored",
                event.broker_id,
            )
            return
        failed: list[PartitionReplica] = []
        done: list[PartitionReplica] = []
        for tp, code in event.partition_errors.items():
            if self.ctx.is_topic_in_service(tp.topic):
                # A replica removed by a reassignment, not a topic deletion (none started):
                # a failure would take it out of its ISR, one it may be back in.
                continue
            pr = PartitionReplica(tp, event.broker_id)
            (failed if event.request_error or code else done).append(pr)
        if failed:
            self.deletion.fail_replica_deletion(failed)
        if done:
            self.deletion.complete_replica_deletion(done)

    def _on_LeaderAndIsrResponseReceived(self, event: ev.LeaderAndIsrResponseReceived) -> None:
        if not self.is_active:
            return
        response = event.response
        code = response.get("error_code", 0)
        if code:
            log.warning(
                "broker %d refused a LeaderAndIsr: %s", event.broker_id, ErrorCode.of(code).name
            )
            return
        errors = [
            (t.get("topic_id"), p["partition_index"], p["error_code"])
            for t in response.get("topics", [])
            for p in t.get("partition_errors", [])
            if p["error_code"]
        ]
        if errors:
            log.info(
                "broker %d answered LeaderAndIsr with %d partition errors (first: %s)",
                event.broker_id,
                len(errors),
                errors[0],
            )
        storage = ErrorCode.KAFKA_STORAGE_ERROR
        lacking = ErrorCode.REPLICA_NOT_AVAILABLE
        if any(e[2] == lacking for e in errors):
            self._leaders_lacking_their_logs(event)
        if not self.ctx.replicas_on_offline_dirs.get(event.broker_id) and not any(
            e[2] == storage for e in errors
        ):
            return  # the common answer: nothing on a failed log directory, before or now
        if event.broker_epoch != self.ctx.broker_epochs.get(event.broker_id):
            # An earlier incarnation's answer, arriving after the broker registered anew:
            # says nothing of the directories it has now (Kafka would act on it).
            log.info("a LeaderAndIsr answer of broker %d's earlier epoch: ignored", event.broker_id)
            return
        names = {topic_id: name for name, topic_id in self.ctx.topic_ids.items()}
        offline, online = [], []
        for t in response.get("topics", []):
            topic = names.get(t.get("topic_id"))
            if topic is None:
                continue  # deleted since
            for p in t.get("partition_errors", []):
                if p["error_code"] == storage:
                    offline.append(TopicPartition(topic, p["partition_index"]))
                elif p["error_code"] == 0:
                    online.append(TopicPartition(topic, p["partition_index"]))
        new = replicas_reported_offline(
            self.partition_sm,
            self.replica_sm,
            event.broker_id,
            offline,
            online,
            self.deletion.fail_replica_deletion,
        )
        if new:
            log.warning(
                "broker %d has %d replicas on a failed log directory (first: %s): offline",
                event.broker_id,
                len(new),
                min(new),
            )

    def _leaders_lacking_their_logs(self, event: ev.LeaderAndIsrResponseReceived) -> None:
        """The partitions a broker refused to lead for want of their logs (a broker back on
        new disks that the ISRs still listed): their leaderships go to other ISR members."""
        if event.broker_epoch != self.ctx.broker_epochs.get(event.broker_id):
            return  # an earlier incarnation's answer: the one registered now was sent its own
        names = {topic_id: name for name, topic_id in self.ctx.topic_ids.items()}
        refused = [
            TopicPartition(topic, p["partition_index"])
            for t in event.response.get("topics", [])
            if (topic := names.get(t.get("topic_id"))) is not None
            for p in t.get("partition_errors", [])
            if p["error_code"] == ErrorCode.REPLICA_NOT_AVAILABLE
        ]
        moved = leaders_lacking_their_logs(self.partition_sm, event.broker_id, refused)
        if moved:
            log.warning(
                "broker %d has no log of %d partitions it was to lead (first: %s): led by"
                " another ISR member now, it follows",
                event.broker_id,
                len(moved),
                min(moved),
            )

    def _read_notifications(
        self, parent: str, path_of: Callable[[str], str], decode: Callable[[str, bytes | None], T]
    ) -> tuple[list[str], list[T]]:
        """The children of a notification znode, in sequence order (its watch armed again),
        and what each holds; a malformed one is reported with its path and skipped, one
        gone meanwhile too. The caller deletes the children once it has acted on them."""
        children = sorted(self.zk.get_children(parent, watch=True) or [])
        decoded: list[T] = []
        if not children:
            return children, decoded
        notification_paths = [path_of(c) for c in children]
        for path, got in zip(notification_paths, self.zk.get_many(notification_paths), strict=True):
            if got is None:
                continue
            try:
                decoded.append(decode(path, got[0]))
            except MalformedZnode as e:
                log.error("%s; skipping it", e)
        return children, decoded

    def _on_LogDirEventNotification(self, _event: ev.LogDirEventNotification) -> None:
        """processLogDirEventNotification: each broker named is asked, by a LeaderAndIsr
        of each of its partitions, which are on the failed directory (its answer)."""
        if not self.is_active:
            return
        children, decoded = self._read_notifications(
            paths.LOG_DIR_EVENT_NOTIFICATION, paths.log_dir_event_notification, decode_log_dir_event
        )
        if not children:
            return
        broker_ids = set(decoded)
        try:
            if broker_ids:
                log.warning("log directory failure reported by brokers %s", sorted(broker_ids))
                log_dir_failure(self.replica_sm, broker_ids)
        finally:
            self._delete_log_dir_event_notifications(children)

    # --- ISR changes from leaders -------------------------------------------------------

    def _on_IsrChangeNotification(self, _event: ev.IsrChangeNotification) -> None:
        if not self.is_active:
            return
        children, decoded = self._read_notifications(
            paths.ISR_CHANGE_NOTIFICATION, paths.isr_change_notification, decode_partition_list
        )
        if not children:
            return
        ctx = self.ctx
        known = ctx.known_partitions({tp for tps in decoded for tp in tps})
        isr_changes_noticed(self.partition_sm, self.store.read_partition_states(known))
        if known:
            self.ops.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, known)
            self.ops.flush()
        self._delete_isr_change_notifications(children)

    # --- reassignment -------------------------------------------------------------------

    def _on_PartitionReassignment(self, _event: ev.PartitionReassignment) -> None:
        if not self.is_active:
            return
        got = self.zk.get(paths.REASSIGN_PARTITIONS, watch=True)
        self.reassignments.znode_czxid = None if got is None else got[1].czxid
        if got is None:
            return
        try:
            targets, unreadable = decode_reassignment_entries(got[0])
        except MalformedZnode as e:
            log.error("%s; removing the request", e)
            self.store.delete_recursive(paths.REASSIGN_PARTITIONS, self.ctx.epoch_zk_version)
            return
        _report_unreadable_reassignments(unreadable)
        done: dict[TopicPartition, tuple[int, ...]] = {}
        with coalesced_topic_writes(self.ops):
            self._start_zk_reassignments(targets, done)
        self._remove_done_reassignments(done, drop_unreadable=bool(unreadable))

    def _start_zk_reassignments(
        self,
        targets: dict[TopicPartition, tuple[int, ...]],
        done: dict[TopicPartition, tuple[int, ...]],
    ) -> None:
        ctx = self.ctx
        to_start: dict[TopicPartition, tuple[int, ...] | None] = {}
        for tp, target in targets.items():
            if tp.topic not in ctx.assignments or tp.partition not in ctx.assignments[tp.topic]:
                log.error("reassignment of unknown partition %s dropped", tp)
                done[tp] = target
                continue
            if ctx.is_topic_queued_for_deletion(tp.topic):
                log.warning("reassignment of %s dropped: its topic is being deleted", tp)
                done[tp] = target
                continue
            current = ctx.full_assignment(tp)
            if not current.is_being_reassigned and current.replicas == target:
                done[tp] = target  # already there
                continue
            self.reassignments.zk_triggered[tp] = target
            to_start[tp] = target
        for tp in self._on_partition_reassignments(to_start):
            done[tp] = targets[tp]

    def _remove_done_reassignments(
        self, done: dict[TopicPartition, tuple[int, ...]], *, drop_unreadable: bool = False
    ) -> None:
        """Takes what is done (complete, dropped) out of /admin/reassign_partitions, leaving
        whatever else it asks for now: the controller never writes back what it read, which
        would undo an admin's rewrite made meanwhile (Kafka's maybeRemoveFromZkReassignment
        reads it again first, and writes unconditionally). With ``drop_unreadable``, the
        entries that cannot be read go too, even if nothing is done."""
        if self.store.remove_from_reassignment_znode(
            done,
            self.ctx.epoch_zk_version,
            drop_unreadable=drop_unreadable,
            read_czxid=self.reassignments.znode_czxid,
        ):
            # Deleted: ensure we detect future reassignments (our own setData may have
            # consumed the watch), as Kafka's removePartitionsFromZkReassignment does. Or
            # created anew since it was read (an admin deleted it meanwhile): read it.
            self.events.put(ev.PartitionReassignment())

    def _initialize_reassignments(self) -> None:
        ctx = self.ctx
        done: dict[TopicPartition, tuple[int, ...]] = {}
        targets: dict[TopicPartition, tuple[int, ...]] = {}
        unreadable: list[MalformedZnode] = []
        got = self.zk.get(paths.REASSIGN_PARTITIONS, watch=True)
        self.reassignments.znode_czxid = None if got is None else got[1].czxid
        if got is not None:
            try:
                targets, unreadable = decode_reassignment_entries(got[0])
            except MalformedZnode as e:
                log.error("%s; removing the request", e)
                self.store.delete_recursive(paths.REASSIGN_PARTITIONS, ctx.epoch_zk_version)
        _report_unreadable_reassignments(unreadable)
        for tp, target in targets.items():
            if tp.topic not in ctx.assignments or tp.partition not in ctx.assignments[tp.topic]:
                done[tp] = target  # its partition is gone
            elif ctx.is_topic_queued_for_deletion(tp.topic):
                # Refused and taken out of the znode, as outside a failover (Kafka's
                # maybeTriggerPartitionReassignment); one the topic's znode shows in
                # progress already resumes below all the same, holding the deletion.
                log.warning("reassignment of %s dropped: its topic is being deleted", tp)
                done[tp] = target
            else:
                self.reassignments.zk_triggered[tp] = target
        # Requested targets the topic znodes do not show yet take over; the reassignments
        # they do show resume.
        new_targets = {
            tp: target
            for tp, target in self.reassignments.zk_triggered.items()
            if ctx.full_assignment(tp).target_replicas != target
        }
        with coalesced_topic_writes(self.ops):
            for tp in self._on_partition_reassignments(
                {
                    tp: new_targets.get(tp)
                    for tp in sorted(ctx.partitions_being_reassigned | set(new_targets))
                }
            ):
                done[tp] = ctx.replicas(tp)
        # Requests the topic znodes show done already (a controller that completed them
        # failed before it removed them).
        for tp, target in self.reassignments.zk_triggered.items():
            if tp not in ctx.partitions_being_reassigned and ctx.replicas(tp) == target:
                done[tp] = target
        for tp in done:
            self.reassignments.zk_triggered.pop(tp, None)
        self._remove_done_reassignments(done, drop_unreadable=bool(unreadable))
        self._arm_reassignment_watches()  # also run outside an event (tests call _elect)

    def _on_PartitionReassignmentIsrChange(self, event: ev.PartitionReassignmentIsrChange) -> None:
        if self.is_active and event.topic_partition in self.ctx.partitions_being_reassigned:
            self._look_at_reassignment_isrs([event.topic_partition])

    def _look_at_reassignment_isrs(self, tps: Iterable[TopicPartition]) -> None:
        """Looked at by one event with the others whose ISR changes meanwhile (their
        watches' events are queued before it): their states read in one pipelined round,
        not a round trip each, and those caught up completed together (one write of their
        topic's znode)."""
        before = len(self.reassignments.isr_changed)
        self.reassignments.isr_changed.update(tps)
        if (
            len(self.reassignments.isr_changed) > before
            and not self.reassignments.isr_changes_queued
        ):
            self.reassignments.isr_changes_queued = True
            self.events.put(ev.ReassignmentIsrChanges())

    def _on_ReassignmentIsrChanges(self, _event: ev.ReassignmentIsrChanges) -> None:
        gathered, self.reassignments.isr_changed = self.reassignments.isr_changed, set()
        self.reassignments.isr_changes_queued = False
        ctx = self.ctx
        if not self.is_active:
            return
        tps = sorted(gathered & ctx.partitions_being_reassigned)
        states = self.store.read_partition_states(tps)
        # Only a complete reassignment moves on (Kafka): every target replica in the ISR.
        caught_up = [tp for tp in tps if self._caught_up(tp, states.get(tp))]
        self._resume_reassignments(caught_up, states)
        # The others wait for their next ISR change: their watches fired, so re-armed.
        self.reassignments.to_watch.extend(
            tp for tp in tps if tp not in caught_up and tp in ctx.partitions_being_reassigned
        )

    def _caught_up(self, tp: TopicPartition, state: PartitionState | None) -> bool:
        return can_complete(self.ctx, tp, self.ctx.full_assignment(tp), state)

    def _arm_reassignment_watches(self) -> None:
        """Watches on the states of partitions whose reassignment waits for its new
        replicas to join the ISR (left waiting by this event's steps): each change brings
        a PartitionReassignmentIsrChange. Each is a read of its own (ZooKeeper ignores
        watches in a multiRead), pipelined, so they are armed only for reassignments left
        waiting after a step, not for those that complete; one whose state read with its
        watch shows it caught up already is looked at again."""
        ctx = self.ctx
        pending, self.reassignments.to_watch = self.reassignments.to_watch, []
        tps = [tp for tp in dict.fromkeys(pending) if tp in ctx.partitions_being_reassigned]
        if not self.is_active or not tps:
            return
        for tp in tps:
            self.handlers.register(
                zk_handlers.partition_reassignment_isr_change(self.events.put, tp)
            )
        state_paths = [paths.partition_state(tp.topic, tp.partition) for tp in tps]
        got = self.zk.get_many(state_paths, watch=True)
        self._look_at_reassignment_isrs(
            tp
            for tp, path, data in zip(tps, state_paths, got, strict=True)
            if self._caught_up(tp, self.store.decode_state(path, data))
        )

    def _resume_reassignments(
        self,
        tps: Iterable[TopicPartition],
        states: Mapping[TopicPartition, PartitionState | None] | None = None,
    ) -> None:
        """The next steps of reassignments in progress (a broker back, their new replicas
        caught up; ``states``: as read in this event), their topics' znodes written once."""
        with coalesced_topic_writes(self.ops):
            done = self._on_partition_reassignments(dict.fromkeys(tps), states)
        self._remove_done_reassignments({tp: self.ctx.replicas(tp) for tp in done})

    def _on_partition_reassignments(
        self,
        targets: Mapping[TopicPartition, tuple[int, ...] | None],
        states: Mapping[TopicPartition, PartitionState | None] | None = None,
    ) -> list[TopicPartition]:
        """The reassignments' next steps (controller/reassignment.py), each towards a new
        target or, for None, resumed; those left waiting for their new replicas get, at the
        event's end, the watches that bring the next steps. Those complete, in order; the
        caller then takes them out of /admin/reassign_partitions."""
        if not targets:
            return []
        complete = reassign_partitions(self.partition_sm, self.replica_sm, targets, states)
        done = [tp for tp in targets if tp in complete]
        for tp in done:
            self.reassignments.zk_triggered.pop(tp, None)
            self.handlers.unregister(paths.partition_state(tp.topic, tp.partition))
            log.info("reassignment of %s to %s complete", tp, list(self.ctx.replicas(tp)))
        self.deletion.resume_for(list(dict.fromkeys(tp.topic for tp in done)))
        self.reassignments.to_watch.extend(tp for tp in targets if tp not in complete)
        return done

    def _on_AlterPartitionReassignments(self, event: ev.AlterPartitionReassignments) -> None:
        """An admin's reassignments (Kafka's processApiPartitionReassignment): checked,
        started (answered then, not when complete, as Kafka does), each taking over a
        request for its partition in /admin/reassign_partitions: the latest request wins.
        Unlike those, they live only in the topic znodes (adding and removing replicas),
        from which a new controller resumes them."""
        if not self.is_active:
            event.preempt()
            return
        targets, refused = api_reassignment_targets(self.ctx, event.reassignments)
        zk_requested = self.reassignments.zk_triggered
        overridden = {tp: zk_requested.pop(tp) for tp in targets if tp in zk_requested}
        with coalesced_topic_writes(self.ops):
            self._on_partition_reassignments(dict(targets))
        self._remove_done_reassignments(overridden)
        results: dict[TopicPartition, tuple[int, str | None]] = {
            tp: (int(r.error_code), r.message) for tp, r in refused.items()
        }
        results.update((tp, (int(ErrorCode.NONE), None)) for tp in targets)
        event.answer(int(ErrorCode.NONE), results)

    def _on_ListPartitionReassignments(self, event: ev.ListPartitionReassignments) -> None:
        if not self.is_active:
            event.preempt()
            return
        ctx = self.ctx
        wanted = ctx.partitions_being_reassigned if event.partitions is None else event.partitions
        listed = {tp: ctx.full_assignment(tp) for tp in sorted(wanted)}
        event.answer(
            int(ErrorCode.NONE), {tp: ra for tp, ra in listed.items() if ra.is_being_reassigned}
        )

    # --- preferred leaders --------------------------------------------------------------

    def _on_PreferredReplicaElection(self, _event: ev.PreferredReplicaElection) -> None:
        if self.is_active:
            self._run_pending_preferred_election()

    def _run_pending_preferred_election(self) -> None:
        ctx = self.ctx
        got = self.zk.get(paths.PREFERRED_REPLICA_ELECTION, watch=True)
        if got is None:
            return
        try:
            requested, unreadable = decode_partition_list_entries(
                paths.PREFERRED_REPLICA_ELECTION, got[0]
            )
        except MalformedZnode as e:
            log.error("%s; removing the request", e)
            requested, unreadable = [], []
        for entry_error in unreadable:  # the others are elected: Kafka skips unknown ones
            log.error("%s; skipping that entry", entry_error)
        self._elect_preferred(requested)
        self.store.delete_recursive(paths.PREFERRED_REPLICA_ELECTION, ctx.epoch_zk_version)

    def _elect_preferred(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Any]:
        return preferred_election(self.partition_sm, tps)

    def _on_TopicUncleanLeaderElectionEnable(
        self, event: ev.TopicUncleanLeaderElectionEnable
    ) -> None:
        """Kafka's processTopicUncleanLeaderElectionEnable: the topic's New and Offline
        partitions go Online if they can; the offline election reads the topic's config,
        so a partition with no live ISR replica now takes an out-of-sync one."""
        if not self.is_active:
            return
        self.partition_sm.trigger_online_partition_state_change([event.topic])

    def _on_AutoPreferredReplicaLeaderElection(
        self, _event: ev.AutoPreferredReplicaLeaderElection
    ) -> None:
        if not self.is_active:
            return
        try:
            if not self.ctx.partitions_being_reassigned:
                for broker, tps in sorted(
                    imbalanced_partitions(
                        self.ctx, self.config.leader_imbalance_per_broker_percentage
                    ).items()
                ):
                    log.info(
                        "auto rebalance: moving %d partitions back to broker %d", len(tps), broker
                    )
                    self._elect_preferred(tps)
        finally:
            self._schedule_rebalance()

    def _on_ElectLeaders(self, event: ev.ElectLeaders) -> None:
        if not self.is_active:
            event.preempt()
            return
        results = admin_election(self.partition_sm, event.partitions, event.election_type)
        event.answer(results)

    # --- controlled shutdown ------------------------------------------------------------

    def _on_ControlledShutdown(self, event: ev.ControlledShutdown) -> None:
        ctx = self.ctx
        if not self.is_active:
            event.answer(int(ErrorCode.NOT_CONTROLLER), [])
            return
        known_epoch = ctx.broker_epochs.get(event.broker_id)
        if known_epoch is None:
            event.answer(int(ErrorCode.BROKER_NOT_AVAILABLE), [])
            return
        if event.broker_epoch != -1 and event.broker_epoch < known_epoch:
            event.answer(int(ErrorCode.STALE_BROKER_EPOCH), [])
            return
        led, remaining = controlled_shutdown_moves(
            self.partition_sm, self.replica_sm, event.broker_id
        )
        log.info(
            "controlled shutdown of broker %d: moved %d leaders, %d remaining",
            event.broker_id,
            len(led) - len(remaining),
            len(remaining),
        )
        # Answer once the event's ZooKeeper writes are made (as Kafka answers: the moves
        # and the ISR step are written by now) and every broker has applied the moves
        # (bounded): when the broker then closes its connections, clients that ask any
        # broker for metadata are told the new leaders, rather than the old ones for a
        # metadata refresh interval. The requests of the ISR step of the partitions it
        # followed are not waited for, nor made first: the event builds and sends them
        # after this handler, which with 20,000 of them takes a few tenths of a second
        # (Kafka hands them to its channel before answering; no broker has them then
        # either), and they tell clients nothing they need.

        def reply() -> None:
            event.answer(int(ErrorCode.NONE), sorted(remaining))

        tracker = self._tracker
        if tracker is None:
            reply()
            return
        timer = threading.Timer(CONTROLLED_SHUTDOWN_APPLIED_WAIT_S, reply)
        timer.daemon = True
        timer.start()

        def applied() -> None:
            timer.cancel()
            reply()

        # What was sent so far: the moves (see controlled_shutdown_moves), not what the
        # ISR step left batched for the event's end.
        tracker.when_answered(applied)

    # --- observability ------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """A snapshot for the status file and `zkctl controller` (safe from any thread).
        Active once the failover is done (Kafka's ActiveControllerCount is 1 from the
        election on): `zkctl controller` reads the file again until then, and the harness
        and the demo take an active controller for one whose failover's line is written;
        the counts are those of the context the failover loaded."""
        ctx = self.ctx
        active = self.is_active and self._failover_done
        return {
            "broker_id": self.broker_id,
            "active": active,
            "active_controller_id": self.active_controller_id,
            "controller_epoch": ctx.epoch if active else None,
            "event_queue_size": self.events.queue_size,
            "event_queue_time_ms": self.events.queue_time.snapshot(),
            "event_process_time_ms": self.events.process_time.snapshot(),
            "current_event": self.events.current_event,
            "channel_queue_sizes": self.channel.queue_sizes() if self.channel is not None else {},
            "channel_queue_time_ms": (
                self.channel.queue_times() if self.channel is not None else {}
            ),
            "channel_update_metadata_superseded": (
                self.channel.superseded() if self.channel is not None else 0
            ),
            "offline_partitions": ctx.offline_partition_count if active else None,
            "partitions": ctx.partition_count() if active else None,
            "unclean_elections": ctx.unclean_elections,
            "failovers": self.failovers,
            "resignations": self.resignations,
            "last_failover": vars(self.last_failover),
        }

"""Topic deletion (Kafka's TopicDeletionManager).

A topic queued for deletion is taken offline, every broker is told its leader is -2
(LeaderDuringDelete), its replicas are stopped with delete=true, and once every replica
answered the StopReplica its znodes are removed. A replica on a dead broker makes the
topic ineligible until that broker returns; deletion then resumes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from controller.context import PartitionReplica, PartitionStateName, ReplicaStateName
from controller.state_machines import ControllerOps, PartitionStateMachine, ReplicaStateMachine
from controller.store import ControllerStore
from zkdata.znodes import TopicPartition

log = logging.getLogger(__name__)

R = ReplicaStateName
P = PartitionStateName


def stale_deletion_requests(
    unknown: Iterable[tuple[str, int | None, int | None]],
) -> list[str]:
    """Of deletion requests naming topics the controller does not know, given as (name,
    the request's czxid, the czxid of the topic's znode now; None for a znode absent),
    those to remove (item 29). One newer than the topic of its name is kept: the topic
    was made, then marked, and its creation, not yet heard of, starts its deletion. One
    older than any topic of its name is what a finished deletion left behind, or named
    no topic: kept, it would block the name for good and delete a topic made under it."""
    return [
        name
        for name, request, topic in unknown
        if request is not None and (topic is None or request < topic)
    ]


class TopicDeletionManager:
    def __init__(
        self,
        ops: ControllerOps,
        partitions: PartitionStateMachine,
        replicas: ReplicaStateMachine,
        store: ControllerStore,
        on_topic_removed: Callable[[str], None],
    ) -> None:
        self.ops = ops
        self.ctx = ops.ctx
        self.partitions = partitions
        self.replicas = replicas
        self.store = store
        self.on_topic_removed = on_topic_removed

    def enqueue(self, topics: Iterable[str]) -> None:
        self.ctx.topics_to_be_deleted.update(topics)
        self.resume()

    def mark_ineligible(self, topics: Iterable[str], why: str) -> None:
        topics = [t for t in topics if t in self.ctx.topics_to_be_deleted]
        if topics:
            self.ctx.topics_ineligible_for_deletion.update(topics)
            log.info("deletion of topics %s halted: %s", sorted(topics), why)

    def resume_for(self, topics: Iterable[str]) -> None:
        """A broker back, or reassignments complete: their topics' deletions may go on.
        A topic with a partition still being reassigned stays held (Kafka's
        resumeDeletionForTopics lets it go, and marks it again only at the reassignment's
        next step, by which time its partitions may be deleted under it)."""
        ctx = self.ctx
        queued = [t for t in topics if t in ctx.topics_to_be_deleted]
        if ctx.partitions_being_reassigned and queued:
            reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
            queued = [t for t in queued if t not in reassigning]
        if queued:
            ctx.topics_ineligible_for_deletion.difference_update(queued)
            self.resume()

    def fail_replica_deletion(self, replicas: list[PartitionReplica]) -> None:
        """Replicas of topics being deleted that cannot be deleted now (their broker
        failed, or answered the StopReplica with an error): their topics wait for them.
        Not for topics whose deletion is held before it started (`is_topic_in_service`)."""
        failed = self._to_ineligible(
            [pr for pr in replicas if pr.topic_partition.topic in self.ctx.topics_to_be_deleted]
        )
        if failed:
            self.mark_ineligible(
                {pr.topic_partition.topic for pr in failed}, "a replica failed to delete"
            )
            self.resume()

    def _to_ineligible(self, replicas: list[PartitionReplica]) -> list[PartitionReplica]:
        """Moves `replicas` to ReplicaDeletionIneligible by valid transitions; returns those
        it moved. A replica whose deletion succeeded stays deleted, and one already
        ineligible stays so. One its topic's deletion has not reached yet (New or Online:
        a partition was created while its broker was down) goes Offline first, as its
        deletion would take it. Kafka moves them all at once, which its state machine
        refuses (and logs) from those states: such a replica stayed Online, its broker
        down. Replicas of a topic whose deletion is held before it started never come
        here: that topic is led as any other (`is_topic_in_service`), and taking a leader
        Offline here left its partition leaderless for good (item 36)."""
        ctx = self.ctx
        moved = [
            pr
            for pr in replicas
            if ctx.replica_state(pr)
            not in (R.DELETION_SUCCESSFUL, R.DELETION_INELIGIBLE, R.NON_EXISTENT)
        ]
        not_reached = [pr for pr in moved if ctx.replica_state(pr) in (R.NEW, R.ONLINE)]
        self.replicas.handle_state_changes(not_reached, R.OFFLINE, reason="deleted")
        self.replicas.handle_state_changes(moved, R.DELETION_INELIGIBLE)
        return moved

    def complete_replica_deletion(self, replicas: list[PartitionReplica]) -> None:
        """Replicas a broker answered it deleted. Only those still being deleted complete:
        an answer can land after another failure made its replica ineligible (its
        broker's log directory failed meanwhile, say), and the retry that follows asks
        the broker again. Kafka attempts the transition, which its state machine refuses
        and logs as an error."""
        if not replicas:
            return
        ctx = self.ctx
        started = [pr for pr in replicas if ctx.replica_state(pr) is R.DELETION_STARTED]
        if len(started) < len(replicas):
            stale = [pr for pr in replicas if ctx.replica_state(pr) is not R.DELETION_STARTED]
            log.info(
                "%d answered deletions of replicas no longer being deleted (first: %s, %s):"
                " asked again if still wanted",
                len(stale),
                stale[0],
                ctx.replica_state(stale[0]).value,
            )
        if started:
            self.replicas.handle_state_changes(started, R.DELETION_SUCCESSFUL)
        self.resume()

    def is_eligible(self, topic: str) -> bool:
        return self._is_eligible(topic, self.ctx.topic_replica_states(topic))

    def _is_eligible(self, topic: str, states: set[ReplicaStateName]) -> bool:
        """``is_eligible``, given the topic's replica states."""
        ctx = self.ctx
        return (
            topic in ctx.topics_to_be_deleted
            and R.DELETION_STARTED not in states
            and topic not in ctx.topics_ineligible_for_deletion
        )

    def resume(self) -> None:
        ctx = self.ctx
        retry: list[str] = []
        eligible: list[str] = []
        finished: list[str] = []
        for topic in sorted(ctx.topics_to_be_deleted):
            states = ctx.topic_replica_states(topic)
            if states <= {R.DELETION_SUCCESSFUL}:
                finished.append(topic)
                continue
            if R.DELETION_STARTED not in states and R.DELETION_INELIGIBLE in states:
                retry.append(topic)
            if self._is_eligible(topic, states):
                eligible.append(topic)
        if finished:
            self._complete(finished)
        if retry:
            failed = [
                pr
                for t in retry
                for pr in ctx.replicas_for_topic(t)
                if ctx.replica_state(pr) is R.DELETION_INELIGIBLE
            ]
            self.replicas.handle_state_changes(failed, R.OFFLINE, reason="deleted")
        if eligible:
            self._on_topic_deletion(eligible)

    def _on_topic_deletion(self, topics: list[str]) -> None:
        ctx, ops = self.ctx, self.ops
        unseen = [t for t in topics if t not in ctx.topics_with_deletion_started]
        # Each partition one object through the step: its state changes, the requests and
        # the replicas' list share it.
        by_topic = ctx.partitions_by_topic(topics)
        if unseen:
            tps = [tp for t in unseen for tp in by_topic.get(t, ())]
            self.partitions.handle_state_changes(tps, P.OFFLINE)
            self.partitions.handle_state_changes(tps, P.NON_EXISTENT)
            ctx.topics_with_deletion_started.update(unseen)
        # Tell every broker the partitions are being deleted (leader -2).
        ops.batch.add_update_metadata(
            ctx.live_or_shutting_down_broker_ids,
            [tp for t in topics for tp in by_topic.get(t, ())],
        )
        ops.flush()
        dead: list[PartitionReplica] = []
        # Each partition's replicas to delete, by id (as the replica steps take them):
        # 300,000 replica objects for 100,000 partitions were 19 MB more at the peak.
        retry: dict[TopicPartition, tuple[int, ...]] = {}
        # A partition's replica states are (replica, state) pairs: looked up in place.
        held_states = ctx.replica_states.get
        for topic in topics:
            for tp in by_topic.get(topic, ()):
                replicas = ctx.replicas(tp)
                held = held_states(tp, ())
                online = []
                for r in replicas:
                    if (r, R.DELETION_SUCCESSFUL) in held:
                        continue  # deleted already: its broker need not be live
                    if not ctx.is_replica_online(r, tp):
                        dead.append(PartitionReplica(tp, r))
                    else:
                        online.append(r)
                if online:
                    # Every replica (the common case): the assignment's own tuple.
                    retry[tp] = replicas if len(online) == len(replicas) else tuple(online)
        # Only replicas not deleted yet hold a topic: Kafka holds it for any replica on a
        # dead broker, one already deleted too, which then waits for that broker.
        ineligible = {pr.topic_partition.topic for pr in dead}
        self._to_ineligible(dead)
        self.replicas.handle_state_changes(retry, R.OFFLINE, reason="deleted")
        self.replicas.handle_state_changes(retry, R.DELETION_STARTED)
        if ineligible:
            self.mark_ineligible(ineligible, "a replica is on a dead broker")

    def _complete(self, topics: list[str]) -> None:
        """Topics whose every replica is deleted: their znodes removed, all at once (one
        broker's answer often finishes many: one at a time, each waited for its own
        ZooKeeper round trips)."""
        ctx = self.ctx
        partition_ids = {topic: list(ctx.assignments.get(topic, {})) for topic in topics}
        # Kafka's completeDeleteTopic mutes the topic's handlers first; here they are
        # found by the topic's partitions, which remove_topic forgets.
        for topic in topics:
            self.on_topic_removed(topic)
        # Kafka moves every replica to NonExistentReplica here, which takes it out of its
        # partition's assignment and forgets its state, one replica at a time; every
        # replica of these topics is ReplicaDeletionSuccessful (resume), and remove_topic
        # below forgets the same states and assignments at once (the transitions sent
        # nothing: a second of the event thread for 100,000 partitions, measured).
        self.store.delete_topics(partition_ids, ctx.epoch_zk_version)
        for topic in topics:
            ctx.remove_topic(topic)
            self.ops.state_log.write("topic_deleted", topic=topic, controller_epoch=ctx.epoch)
            log.info("deleted topic %s", topic)

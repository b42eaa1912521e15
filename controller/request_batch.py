"""Collects the requests a controller decision owes each broker (ControllerBrokerRequestBatch).

A state change adds per-broker partition states here; `build` turns them into at most one
LeaderAndIsr, one UpdateMetadata and one StopReplica body per broker, in that order
(Kafka sends LeaderAndIsr before UpdateMetadata so that a broker knows its own role first).
Pure: it reads the context when building and touches no socket.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from controller.context import ControllerContext, LeaderIsrAndControllerEpoch, ReplicaAssignment
from wire.api import ApiKey
from zkdata.znodes import LEADER_DURING_DELETE, TopicPartition

LEADER_AND_ISR_VERSION = 5
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3

NO_EPOCH = -1
EPOCH_DURING_DELETE = -2

_SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class BrokerRequest:
    """One request for one broker, ready for the wire codec."""

    broker_id: int
    api_key: ApiKey
    api_version: int
    body: dict[str, Any]
    partitions: tuple[TopicPartition, ...] = ()
    # For StopReplica: whether it deletes the partitions (topic deletion waits for these).
    delete_partitions: bool = False
    # Set by the controller: the event whose decisions this request carries.
    tracker: Any = None


@dataclass(slots=True)
class _LeaderAndIsrEntry:
    lice: LeaderIsrAndControllerEpoch
    assignment: ReplicaAssignment
    is_new: bool


@dataclass
class RequestBatch:
    leader_and_isr: dict[int, dict[TopicPartition, _LeaderAndIsrEntry]] = field(
        default_factory=dict
    )
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    update_metadata_all: bool = False
    stop_replica: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata_brokers or self.stop_replica)

    def clear(self) -> None:
        self.leader_and_isr.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()
        self.update_metadata_all = False
        self.stop_replica.clear()

    def add_leader_and_isr(
        self,
        ctx: ControllerContext,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        lice: LeaderIsrAndControllerEpoch,
        assignment: ReplicaAssignment,
        *,
        is_new: bool,
        update_metadata: bool = True,
    ) -> None:
        """A partition's state for these brokers; by default every live broker also gets
        the partition in an UpdateMetadata. `update_metadata=False` is for re-sending a
        state every broker already has (a failover sends a full UpdateMetadata first)."""
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self.leader_and_isr.setdefault(broker_id, {})
            previous = per_broker.get(tp)
            per_broker[tp] = _LeaderAndIsrEntry(
                lice, assignment, is_new or (previous is not None and previous.is_new)
            )
        if update_metadata:
            if not self.update_metadata_brokers >= ctx.live_brokers.keys():
                self.update_metadata_brokers.update(ctx.live_brokers)
            self.update_metadata_partitions.add(tp)

    def add_update_metadata(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] | None
    ) -> None:
        """Partitions None means all of them (a full metadata refresh)."""
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        if partitions is None:
            self.update_metadata_all = True
        else:
            self.update_metadata_partitions.update(partitions)

    def add_stop_replica(
        self, broker_ids: Iterable[int], tp: TopicPartition, *, delete_partition: bool
    ) -> None:
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self.stop_replica.setdefault(broker_id, {})
            per_broker[tp] = per_broker.get(tp, False) or delete_partition

    # --- building -----------------------------------------------------------------------

    def build(self, ctx: ControllerContext, controller_id: int) -> list[BrokerRequest]:
        """The requests for live brokers, and clear the batch."""
        out: list[BrokerRequest] = []
        live = ctx.live_or_shutting_down_broker_ids
        shared: dict[tuple[TopicPartition, bool], tuple[Any, Any, dict[str, Any]]] = {}
        for broker_id, states in sorted(self.leader_and_isr.items()):
            if broker_id in live:
                out.append(
                    self._leader_and_isr_request(ctx, controller_id, broker_id, states, shared)
                )
        if self.update_metadata_brokers:
            targets = sorted(b for b in self.update_metadata_brokers if b in live)
            if targets:
                topic_states = update_metadata_topic_states(
                    ctx, None if self.update_metadata_all else self.update_metadata_partitions
                )
                brokers = update_metadata_live_brokers(ctx)
                for broker_id in targets:
                    out.append(
                        BrokerRequest(
                            broker_id,
                            ApiKey.UPDATE_METADATA,
                            UPDATE_METADATA_VERSION,
                            {
                                "controller_id": controller_id,
                                "controller_epoch": ctx.epoch,
                                "broker_epoch": ctx.broker_epochs.get(broker_id, -1),
                                "topic_states": topic_states,
                                "live_brokers": brokers,
                            },
                        )
                    )
        for broker_id, stops in sorted(self.stop_replica.items()):
            if broker_id not in live:
                continue
            # One request per delete flag, so a deletion's responses are told apart.
            for delete in (False, True):
                tps = sorted(tp for tp, d in stops.items() if d is delete)
                if tps:
                    out.append(
                        self._stop_replica_request(ctx, controller_id, broker_id, tps, delete)
                    )
        self.clear()
        return out

    def _leader_and_isr_request(
        self,
        ctx: ControllerContext,
        controller_id: int,
        broker_id: int,
        states: dict[TopicPartition, _LeaderAndIsrEntry],
        shared: dict[tuple[TopicPartition, bool], tuple[Any, Any, dict[str, Any]]],
    ) -> BrokerRequest:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        leader_ids: set[int] = set()
        for tp, entry in states.items():
            lai = entry.lice.leader_and_isr
            leader_ids.add(lai.leader)
            # The same partition state goes to every replica: build its dict once and share
            # it between the brokers' bodies (the codec only reads them).
            hit = shared.get((tp, entry.is_new))
            if hit is not None and hit[0] is entry.lice and hit[1] is entry.assignment:
                state = hit[2]
            else:
                state = {
                    "partition_index": tp.partition,
                    "controller_epoch": entry.lice.controller_epoch,
                    "leader": lai.leader,
                    "leader_epoch": lai.leader_epoch,
                    "isr": list(lai.isr),
                    "partition_epoch": lai.zk_version,
                    "replicas": list(entry.assignment.replicas),
                    "adding_replicas": list(entry.assignment.adding),
                    "removing_replicas": list(entry.assignment.removing),
                    "is_new": entry.is_new,
                }
                shared[(tp, entry.is_new)] = (entry.lice, entry.assignment, state)
            by_topic.setdefault(tp.topic, []).append(state)
        live_leaders = []
        for leader in sorted(leader_ids):
            reg = ctx.live_brokers.get(leader)
            if reg is not None:
                live_leaders.append({"broker_id": leader, "host_name": reg.host, "port": reg.port})
        body = {
            "controller_id": controller_id,
            "controller_epoch": ctx.epoch,
            "broker_epoch": ctx.broker_epochs.get(broker_id, -1),
            "type": 0,
            "topic_states": [
                {
                    "topic_name": topic,
                    "topic_id": ctx.topic_ids.get(topic, _ZERO_UUID),
                    "partition_states": parts,
                }
                for topic, parts in by_topic.items()
            ],
            "live_leaders": live_leaders,
        }
        return BrokerRequest(
            broker_id, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, body, tuple(states)
        )

    @staticmethod
    def _stop_replica_request(
        ctx: ControllerContext,
        controller_id: int,
        broker_id: int,
        tps: list[TopicPartition],
        delete: bool,
    ) -> BrokerRequest:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in tps:
            if delete:
                epoch = EPOCH_DURING_DELETE
            else:
                lice = ctx.leadership.get(tp)
                epoch = lice.leader_and_isr.leader_epoch if lice else NO_EPOCH
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "leader_epoch": epoch, "delete_partition": delete}
            )
        body = {
            "controller_id": controller_id,
            "controller_epoch": ctx.epoch,
            "broker_epoch": ctx.broker_epochs.get(broker_id, -1),
            "topic_states": [
                {"topic_name": t, "partition_states": parts} for t, parts in by_topic.items()
            ],
        }
        return BrokerRequest(
            broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, body, tuple(tps), delete
        )


def update_metadata_topic_states(
    ctx: ControllerContext, partitions: Iterable[TopicPartition] | None
) -> list[dict[str, Any]]:
    """UpdateMetadata partition states, grouped by topic; `partitions` None means all."""
    live = ctx.live_broker_ids
    leadership = ctx.leadership
    deleting = ctx.topics_to_be_deleted
    if partitions is None:
        wanted: dict[str, Iterable[int]] = {t: parts.keys() for t, parts in ctx.assignments.items()}
    else:
        wanted = {}
        for tp in partitions:
            wanted.setdefault(tp.topic, []).append(tp.partition)  # type: ignore[attr-defined]
    out = []
    for topic, partition_ids in wanted.items():
        assignment = ctx.assignments.get(topic)
        if assignment is None:
            continue
        states = []
        during_delete = topic in deleting
        for p in partition_ids:
            lice = leadership.get(TopicPartition(topic, p))
            ra = assignment.get(p)
            if lice is None or ra is None:
                continue  # no leader decided yet: nothing to tell
            lai = lice.leader_and_isr
            replicas = ra.replicas
            states.append(
                {
                    "partition_index": p,
                    "controller_epoch": lice.controller_epoch,
                    "leader": LEADER_DURING_DELETE if during_delete else lai.leader,
                    "leader_epoch": lai.leader_epoch,
                    "isr": list(lai.isr),
                    "zk_version": lai.zk_version,
                    "replicas": list(replicas),
                    "offline_replicas": []
                    if live.issuperset(replicas)
                    else [r for r in replicas if r not in live],
                }
            )
        if states:
            out.append(
                {
                    "topic_name": topic,
                    "topic_id": ctx.topic_ids.get(topic, _ZERO_UUID),
                    "partition_states": states,
                }
            )
    return out


def update_metadata_live_brokers(ctx: ControllerContext) -> list[dict[str, Any]]:
    return [
        {
            "id": broker_id,
            "endpoints": [
                {
                    "port": ep.port,
                    "host": ep.host,
                    "listener": ep.listener,
                    "security_protocol": _SECURITY_PROTOCOL_IDS.get(ep.security_protocol, 0),
                }
                for ep in reg.endpoints
            ],
            "rack": reg.rack,
        }
        for broker_id, reg in sorted(ctx.live_brokers.items())
    ]

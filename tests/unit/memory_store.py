"""An in-memory `ControllerStore` for unit tests of the state machines.

A test double of the I/O port, not a fake of ZooKeeper: partition state "znodes" hold the
bytes Kafka's codec writes and a version that grows by one on every write, as a znode's
`stat.version` does. Every controller write is conditional on the `/controller_epoch`
zkVersion the controller was elected with; `elect_other_controller` moves that version, after
which every write raises ControllerMovedError and changes nothing. `race` makes a "leader"
change a partition between the controller's read and its write, so the write gets
BadVersion and the controller has to re-read. `history` keeps every value a znode held.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from controller.store import UpdateResult, WrittenCallback, check_fence, refuse_epochs_past_int32
from zkdata.client import BadVersionError, ControllerMovedError, NodeExistsError, NoNodeError
from zkdata.znodes import (
    LeaderAndIsr,
    MalformedZnode,
    PartitionState,
    TopicAssignment,
    TopicPartition,
    decode_partition_state,
    encode_partition_state,
)

# A leader's rewrite of its partition's state; None: its conditional write failed.
LeaderChange = Callable[[LeaderAndIsr], LeaderAndIsr | None]


@dataclass(frozen=True)
class Znode:
    data: bytes
    version: int


@dataclass(frozen=True)
class Write:
    """One successful write of the controller: what the znode held before and after."""

    op: str  # "create" or "update"
    tp: TopicPartition
    before: PartitionState | None
    after: PartitionState


class MemoryStore:
    def __init__(self) -> None:
        self.znodes: dict[TopicPartition, Znode] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.topics: dict[str, TopicAssignment] = {}  # each topic znode's assignment
        self.topic_writes: list[TopicAssignment] = []  # the controller's, in order
        self.deleted_topics: list[str] = []  # topics whose znodes the controller removed
        self.epoch_zk_version = 0
        self.writes: list[Write] = []  # the controller's successful writes, in order
        self.history: list[tuple[TopicPartition, Znode]] = []  # every value of every znode
        # ZooKeeper's transaction ids: each write takes the next (a znode's mzxid is its
        # last write's), and so does a broker's registration (its czxid, the broker epoch).
        self.zxid = 0
        self.mzxids: dict[TopicPartition, int] = {}
        self.reads = 0  # read_partition_states calls (each one pipelined round)
        self.updates = 0  # update_partition_states calls
        self._races: dict[TopicPartition, deque[LeaderChange]] = {}
        # Written states reported to on_written this many at a time (ZooKeeper answers a
        # packed multi at a time): small, so the tests go through several slices.
        self.answer_slice = 3
        # Set: another controller wins after this many more of the controller's state
        # creations or updates, between two of its packed multis (the later ones fail
        # their check).
        self.fence_moves_after_updates: int | None = None

    # --- what tests do ------------------------------------------------------------------

    def next_zxid(self) -> int:
        """A transaction of its own, a broker's registration for one: its zxid."""
        self.zxid += 1
        return self.zxid

    def elect_other_controller(self) -> None:
        """Another broker won an election: /controller_epoch's zkVersion moves on."""
        self.epoch_zk_version += 1

    def put(
        self,
        tp: TopicPartition,
        lai: LeaderAndIsr,
        controller_epoch: int,
        version: int | None = None,
    ) -> None:
        """Write a state as anyone but the controller (setup, or a leader changing the ISR).
        The version is the next one unless given (to set up a znode with a past)."""
        self.put_raw(tp, encode_partition_state(lai, controller_epoch), version)

    def put_raw(self, tp: TopicPartition, data: bytes, version: int | None = None) -> None:
        if version is None:
            old = self.znodes.get(tp)
            version = 0 if old is None else old.version + 1
        self._set(tp, Znode(data, version))

    def state(self, tp: TopicPartition) -> PartitionState:
        node = self.znodes[tp]
        return decode_partition_state(str(tp), node.data, node.version)

    def leader_change(self, tp: TopicPartition, change: LeaderChange) -> bool:
        """A partition leader rewrites its state (2.6 model): it keeps the controller epoch and
        the leader epoch of the controller's decision and bumps only the zkVersion."""
        if tp not in self.znodes:
            return False  # the topic was deleted: NoNode
        current = self.state(tp)
        new = change(current.leader_and_isr)
        if new is None:
            return False
        self.put(tp, new, current.controller_epoch)
        return True

    def race(self, tp: TopicPartition, change: LeaderChange, times: int = 1) -> None:
        """The next `times` controller writes of `tp` each lose a race against `change`."""
        self._races.setdefault(tp, deque()).extend([change] * times)

    def pending_races(self) -> int:
        return sum(len(q) for q in self._races.values())

    def settle_races(self) -> list[TopicPartition]:
        """Leader writes that met no controller write land now; returns what changed."""
        changed = []
        for tp, changes in self._races.items():
            while changes:
                if self.leader_change(tp, changes.popleft()):
                    changed.append(tp)
        return changed

    def snapshot(self) -> dict[TopicPartition, Znode]:
        return dict(self.znodes)

    # --- the ControllerStore protocol -------------------------------------------------

    def read_partition_states(
        self, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionState | None]:
        self.reads += 1
        out: dict[TopicPartition, PartitionState | None] = {}
        for tp in tps:
            try:
                out[tp] = self.state(tp) if tp in self.znodes else None
            except MalformedZnode:
                out[tp] = None  # as ZkControllerStore.decode_state: logged and skipped
        return out

    def read_partition_states_written_before(
        self, tps: Sequence[TopicPartition], zxid: int
    ) -> tuple[dict[TopicPartition, PartitionState | None], dict[TopicPartition, int]]:
        states = self.read_partition_states(tps)
        older = {tp: self.mzxids[tp] for tp in tps if tp in self.znodes and self.mzxids[tp] < zxid}
        return states, older

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        epoch_zk_version: int,
        on_created: WrittenCallback | None = None,
        on_unanswered: WrittenCallback | None = None,  # never: every answer comes
    ) -> dict[TopicPartition, Exception | None]:
        check_fence(epoch_zk_version, self.epoch_zk_version, states)
        out: dict[TopicPartition, Exception | None] = {}
        created: dict[TopicPartition, LeaderAndIsr] = {}

        def report() -> None:
            # A slice at a time, as ZooKeeper answers packed multis.
            if on_created is not None and created:
                on_created(dict(created))
            created.clear()

        for tp, lai in states.items():
            if len(created) >= self.answer_slice:
                report()
            self._count_down_fence(report)
            if tp in self.znodes:
                out[tp] = NodeExistsError()
                continue
            self._set(tp, Znode(encode_partition_state(lai, controller_epoch), 0))
            self.writes.append(Write("create", tp, None, self.state(tp)))
            out[tp] = None
            created[tp] = lai
        report()
        return out

    def _count_down_fence(self, report: Callable[[], None]) -> None:
        """Before each partition's write: once ``fence_moves_after_updates`` writes went
        through, another controller is elected, what was written is reported (as
        ZooKeeper answered it) and the fenced write raises."""
        if self.fence_moves_after_updates is None:
            return
        if self.fence_moves_after_updates == 0:
            self.fence_moves_after_updates = None
            self.elect_other_controller()
            report()
            raise ControllerMovedError("/controller_epoch moved between two multis")
        self.fence_moves_after_updates -= 1

    def update_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        epoch_zk_version: int,
        on_written: WrittenCallback | None = None,
        on_unanswered: WrittenCallback | None = None,  # never: every answer comes
    ) -> UpdateResult:
        self.updates += 1
        check_fence(epoch_zk_version, self.epoch_zk_version, states)
        result = UpdateResult()
        states = refuse_epochs_past_int32(states, result)
        reported = 0

        def report() -> None:
            # As ZooKeeper answers packed multis: slices of what was written, while the
            # rest is still being written.
            nonlocal reported
            if on_written is not None and len(result.finished) > reported:
                on_written(dict(list(result.finished.items())[reported:]))
            reported = len(result.finished)

        for tp, lai in states.items():
            if len(result.finished) - reported >= self.answer_slice:
                report()
            self._count_down_fence(report)
            races = self._races.get(tp)
            if races:
                self.leader_change(tp, races.popleft())
            node = self.znodes.get(tp)
            if node is None:
                result.add(tp, lai, NoNodeError())
            elif node.version != lai.zk_version:
                result.add(tp, lai, BadVersionError())
            else:
                before = self.state(tp)
                data = encode_partition_state(lai, controller_epoch)
                self._set(tp, Znode(data, node.version + 1))
                self.writes.append(Write("update", tp, before, self.state(tp)))
                result.add(tp, lai, node.version + 1)
        report()
        return result

    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        return {t: dict(self.configs.get(t, {})) for t in topics}

    def delete_topic(self, topic: str, partitions: Iterable[int], epoch_zk_version: int) -> None:
        check_fence(epoch_zk_version, self.epoch_zk_version, [topic])
        for tp in [tp for tp in self.znodes if tp.topic == topic]:
            del self.znodes[tp]
        self.topics.pop(topic, None)
        self.configs.pop(topic, None)
        self.deleted_topics.append(topic)

    def delete_topics(self, topics: Mapping[str, Iterable[int]], epoch_zk_version: int) -> None:
        for topic, partitions in topics.items():
            self.delete_topic(topic, partitions, epoch_zk_version)

    def write_topic_assignments(
        self, assignments: Sequence[TopicAssignment], epoch_zk_version: int
    ) -> set[str]:
        check_fence(epoch_zk_version, self.epoch_zk_version, assignments)
        for a in assignments:
            self.topics[a.topic] = a
            self.topic_writes.append(a)
        return set()

    # --- internals ----------------------------------------------------------------------

    def _set(self, tp: TopicPartition, node: Znode) -> None:
        self.znodes[tp] = node
        self.mzxids[tp] = self.next_zxid()
        self.history.append((tp, node))

"""An in-memory `ControllerStore` for the log generator (a ZooKeeper stand-in, not a fake).

Partition states live in a dict with a version that grows by one on every write, like a
znode's. Every controller write is conditional on the `/controller_epoch` zkVersion the
controller was elected with (`elect` moves it on), so a controller that lost its term
changes nothing, as with the real store. Leaders change ISRs through `leader_change`,
conditional on the version they read. `on_write` sees every successful write, which is how
the generator keeps its ground truth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from controller.store import UpdateResult, WrittenCallback, check_fence, refuse_epochs_past_int32
from zkdata.client import BadVersionError, NodeExistsError, NoNodeError
from zkdata.znodes import LeaderAndIsr, PartitionState, TopicAssignment, TopicPartition

OnWrite = Callable[[TopicPartition, LeaderAndIsr | None, LeaderAndIsr], None]


class SimStore:
    def __init__(self, on_write: OnWrite | None = None) -> None:
        self.states: dict[TopicPartition, PartitionState] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.epoch_zk_version = 0
        self.on_write = on_write

    def elect(self) -> int:
        """A controller was elected: /controller_epoch's zkVersion moves on."""
        self.epoch_zk_version += 1
        return self.epoch_zk_version

    def leader(self, tp: TopicPartition) -> int:
        st = self.states.get(tp)
        return st.leader_and_isr.leader if st is not None else -1

    def leader_change(
        self, tp: TopicPartition, change: Callable[[LeaderAndIsr], LeaderAndIsr | None]
    ) -> LeaderAndIsr | None:
        """A leader rewrites its partition's ISR (Kafka 2.6's model): same leader epoch and
        controller epoch, the next version. Returns the new state, or None if unchanged."""
        current = self.states[tp]
        new = change(current.leader_and_isr)
        if new is None:
            return None
        written = LeaderAndIsr(
            new.leader, new.leader_epoch, new.isr, current.leader_and_isr.zk_version + 1
        )
        self._set(tp, current.leader_and_isr, PartitionState(written, current.controller_epoch))
        return written

    # --- the ControllerStore protocol -------------------------------------------------

    def read_partition_states(
        self, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionState | None]:
        return {tp: self.states.get(tp) for tp in tps}

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
        for tp, lai in states.items():
            if tp in self.states:
                out[tp] = NodeExistsError()
                continue
            created[tp] = lai._replace(zk_version=0)
            self._set(tp, None, PartitionState(created[tp], controller_epoch))
            out[tp] = None
        if on_created is not None and created:
            on_created(created)
        return out

    def update_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        epoch_zk_version: int,
        on_written: WrittenCallback | None = None,
        on_unanswered: WrittenCallback | None = None,  # never: every answer comes
    ) -> UpdateResult:
        check_fence(epoch_zk_version, self.epoch_zk_version, states)
        result = UpdateResult()
        for tp, lai in refuse_epochs_past_int32(states, result).items():
            current = self.states.get(tp)
            if current is None:
                result.add(tp, lai, NoNodeError())
            elif current.leader_and_isr.zk_version != lai.zk_version:
                result.add(tp, lai, BadVersionError())
            else:
                written = lai._replace(zk_version=lai.zk_version + 1)
                self._set(tp, current.leader_and_isr, PartitionState(written, controller_epoch))
                result.add(tp, lai, written.zk_version)
        if on_written is not None and result.finished:
            on_written(dict(result.finished))
        return result

    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        return {t: dict(self.configs.get(t, {})) for t in topics}

    def delete_topic(self, topic: str, partitions: Iterable[int], epoch_zk_version: int) -> None:
        check_fence(epoch_zk_version, self.epoch_zk_version, [topic])
        for tp in [tp for tp in self.states if tp.topic == topic]:
            del self.states[tp]
        self.topics.pop(topic, None)

    def delete_topics(self, topics: Mapping[str, Iterable[int]], epoch_zk_version: int) -> None:
        for topic, partitions in topics.items():
            self.delete_topic(topic, partitions, epoch_zk_version)

    def write_topic_assignments(
        self, assignments: Sequence[TopicAssignment], epoch_zk_version: int
    ) -> set[str]:
        check_fence(epoch_zk_version, self.epoch_zk_version, assignments)
        for a in assignments:
            self.topics[a.topic] = a
        return set()

    # --- internals --------------------------------------------------------------------

    def _set(self, tp: TopicPartition, before: LeaderAndIsr | None, state: PartitionState) -> None:
        self.states[tp] = state
        if self.on_write is not None:
            self.on_write(tp, before, state.leader_and_isr)

"""ZkControllerStore's partition-state reads and writes, on the fake ZooKeeper, as Kafka
2.8's KafkaZkClient does them: updateLeaderAndIsr's setData conditional on each state's
zkVersion (BADVERSION: retried after a re-read; any other error: failed; written: the new
zkVersion), createTopicPartitionStatesRaw's creates (NODEEXISTS is the partition's own
failure), getPartitionStates in batched reads, and every write behind the
/controller_epoch zkVersion check (checkedEphemeral's CheckOp first: a moved epoch is a
ControllerMovedException and nothing is written)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)

from controller import store as st
from controller.store import UpdateResult, ZkControllerStore
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import ControllerMovedError, ZkClient
from zkdata.int_text import INT32_MAX
from zkdata.znodes import (
    LeaderAndIsr,
    MalformedZnode,
    PartitionState,
    TopicAssignment,
    TopicPartition,
    decode_partition_state,
    encode_partition_state,
)

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)


def cluster(*states: tuple[TopicPartition, LeaderAndIsr]) -> tuple[FakeZk, ZkControllerStore, int]:
    """A fake ZooKeeper holding /controller_epoch and these partition states (each at
    version 0), its store, and the epoch's zkVersion."""
    zk = FakeZk()
    zk.ensure_paths([paths.CONTROLLER_EPOCH])
    for tp, lai in states:
        zk.ensure_paths([paths.partition(tp.topic, tp.partition)])
        zk.put(paths.partition_state(tp.topic, tp.partition), encode_partition_state(lai, 1))
    return zk, ZkControllerStore(cast(ZkClient, zk)), zk.nodes[paths.CONTROLLER_EPOCH][1].version


def state_of(zk: FakeZk, tp: TopicPartition) -> PartitionState:
    path = paths.partition_state(tp.topic, tp.partition)
    data, stat = zk.nodes[path]
    return decode_partition_state(path, data, stat.version)


def test_each_state_is_written_conditionally_and_filed_by_outcome() -> None:
    zk, store, epoch = cluster((T0, LeaderAndIsr(1, 0, (1, 2))), (T1, LeaderAndIsr(1, 0, (1,))))
    zk.set_data(paths.partition_state("t", 1), zk.nodes[paths.partition_state("t", 1)][0])
    written: list[dict[TopicPartition, LeaderAndIsr]] = []
    result = store.update_partition_states(
        {
            T0: LeaderAndIsr(2, 1, (2,), 0),
            T1: LeaderAndIsr(2, 1, (2,), 0),  # the znode is at version 1 now
            T2: LeaderAndIsr(2, 1, (2,), 0),  # no such znode
        },
        5,
        epoch,
        on_written=written.append,
    )
    assert result.finished == {T0: LeaderAndIsr(2, 1, (2,), 1)}
    assert written == [{T0: LeaderAndIsr(2, 1, (2,), 1)}]
    assert result.retry == [T1]
    assert list(result.failed) == [T2]
    assert isinstance(result.failed[T2], NoNodeError)
    assert state_of(zk, T0) == PartitionState(LeaderAndIsr(2, 1, (2,), 1), 5)
    assert state_of(zk, T1).leader_and_isr == LeaderAndIsr(1, 0, (1,), 1)  # untouched


def test_the_result_files_each_outcome() -> None:
    result = UpdateResult()
    result.add(T0, LeaderAndIsr(1, 2, (1,), 4), 5)
    result.add(T1, LeaderAndIsr(1, 2, (1,), 4), BadVersionError())
    error = NoNodeError()
    result.add(T2, LeaderAndIsr(1, 2, (1,), 4), error)
    assert result.finished == {T0: LeaderAndIsr(1, 2, (1,), 5)}
    assert result.retry == [T1]
    assert result.failed == {T2: error}


def test_a_leader_epoch_up_to_int32s_largest_is_written_and_one_past_it_is_not() -> None:
    zk, store, epoch = cluster((T0, LeaderAndIsr(1, 0, (1,))), (T1, LeaderAndIsr(1, 0, (1,))))
    result = store.update_partition_states(
        {T0: LeaderAndIsr(1, INT32_MAX, (1,), 0), T1: LeaderAndIsr(1, INT32_MAX + 1, (1,), 0)},
        1,
        epoch,
    )
    assert result.finished == {T0: LeaderAndIsr(1, INT32_MAX, (1,), 1)}
    assert isinstance(result.failed[T1], MalformedZnode)
    assert state_of(zk, T1).leader_and_isr == LeaderAndIsr(1, 0, (1,), 0)
    alone = store.update_partition_states({T0: LeaderAndIsr(1, INT32_MAX, (1,), 1)}, 1, epoch)
    assert alone.finished == {T0: LeaderAndIsr(1, INT32_MAX, (1,), 2)}
    assert not alone.failed


def test_a_moved_epoch_writes_nothing() -> None:
    zk, store, epoch = cluster((T0, LeaderAndIsr(1, 0, (1,))))
    zk.set_data(paths.CONTROLLER_EPOCH, b"2")
    with pytest.raises(ControllerMovedError):
        store.update_partition_states({T0: LeaderAndIsr(2, 1, (2,), 0)}, 1, epoch)
    assert state_of(zk, T0).leader_and_isr == LeaderAndIsr(1, 0, (1,), 0)


def test_an_in_memory_fence_checks_only_writes_with_another_epoch_version() -> None:
    st.check_fence(3, 3, [object()])
    st.check_fence(2, 3, [])  # no ops, no multi, no check
    for elected_with in (2, 4):
        with pytest.raises(ControllerMovedError):
            st.check_fence(elected_with, 3, [object()])


def test_a_lost_connection_reports_each_unanswered_state_with_the_version_it_would_have() -> None:
    zk, store, epoch = cluster(
        (T0, LeaderAndIsr(1, 0, (1,))),
        (T1, LeaderAndIsr(1, 0, (1,))),
        (T2, LeaderAndIsr(1, 0, (1,))),
    )
    T3 = TopicPartition("t", 3)
    written: list[dict[TopicPartition, LeaderAndIsr]] = []
    unanswered: list[dict[TopicPartition, LeaderAndIsr]] = []

    def on_written(states: dict[TopicPartition, LeaderAndIsr]) -> None:
        written.append(states)
        zk.fail_next.append(ConnectionLoss())  # the answer after T1's is lost

    with pytest.raises(ConnectionLoss):
        store.update_partition_states(
            {
                T3: LeaderAndIsr(2, 1, (2,), 0),  # no znode: failed, answered
                T1: LeaderAndIsr(2, 1, (2,), 7),  # BadVersion: retried, answered
                T0: LeaderAndIsr(2, 1, (2,), 0),  # written, answered
                T2: LeaderAndIsr(2, 1, (2,), 4),
            },
            1,
            epoch,
            on_written=on_written,
            on_unanswered=unanswered.append,
        )
    assert written == [{T0: LeaderAndIsr(2, 1, (2,), 1)}]
    assert unanswered == [{T2: LeaderAndIsr(2, 1, (2,), 5)}]


def test_created_states_are_reported_and_an_existing_one_is_its_partitions_failure() -> None:
    zk, store, epoch = cluster((T1, LeaderAndIsr(1, 0, (1,))))
    created: list[dict[TopicPartition, LeaderAndIsr]] = []
    out = store.create_partition_states(
        {T0: LeaderAndIsr(1, 0, (1, 2)), T1: LeaderAndIsr(2, 0, (2,))},
        3,
        epoch,
        on_created=created.append,
    )
    assert out[T0] is None
    assert isinstance(out[T1], NodeExistsError)
    assert created == [{T0: LeaderAndIsr(1, 0, (1, 2))}]
    assert state_of(zk, T0) == PartitionState(LeaderAndIsr(1, 0, (1, 2), 0), 3)
    assert state_of(zk, T1).leader_and_isr.leader == 1
    # Nothing created: no call.
    again = store.create_partition_states(
        {T1: LeaderAndIsr(2, 0, (2,))}, 3, epoch, on_created=created.append
    )
    assert isinstance(again[T1], NodeExistsError)
    assert len(created) == 1


def test_creates_cut_short_report_the_unanswered_states_at_version_zero() -> None:
    zk, store, epoch = cluster()
    zk.ensure_paths([paths.topic("t")])
    unanswered: list[dict[TopicPartition, LeaderAndIsr]] = []

    def lose_the_next_answer(states: dict[TopicPartition, LeaderAndIsr]) -> None:
        zk.fail_next.append(ConnectionLoss())

    with pytest.raises(ConnectionLoss):
        store.create_partition_states(
            {T0: LeaderAndIsr(1, 0, (1,), 6), T1: LeaderAndIsr(1, 0, (1,), 6)},
            3,
            epoch,
            on_created=lose_the_next_answer,
            on_unanswered=unanswered.append,
        )
    assert unanswered == [{T1: LeaderAndIsr(1, 0, (1,), 0)}]


def test_states_read_in_slices_say_which_were_written_before_a_zxid() -> None:
    n = st.READ_SLICE + 2
    zk, store, _ = cluster()
    tps = [TopicPartition("t", p) for p in range(n)]
    data = encode_partition_state(LeaderAndIsr(1, 0, (1,)), 1)
    for tp in tps:
        zk.put(paths.partition_state(tp.topic, tp.partition), data)
    mzxid = {tp: zk.nodes[paths.partition_state(tp.topic, tp.partition)][1].mzxid for tp in tps}
    last = tps[-1]
    got, before = store.read_partition_states_written_before(tps, mzxid[last])
    assert len(got) == n
    assert got[last] == PartitionState(LeaderAndIsr(1, 0, (1,), 0), 1)
    # Those of the second slice too; not the one written at the zxid itself.
    assert before == {tp: mzxid[tp] for tp in tps[:-1]}
    # A slice with a missing znode takes the loop per partition: the same rule.
    missing = TopicPartition("t", n)
    got, before = store.read_partition_states_written_before(
        [tps[0], missing, tps[1]], mzxid[tps[1]]
    )
    assert got[missing] is None
    assert before == {tps[0]: mzxid[tps[0]]}


def test_a_malformed_state_is_skipped_and_the_rest_of_its_slice_read() -> None:
    zk, store, _ = cluster((T0, LeaderAndIsr(1, 0, (1,))), (T2, LeaderAndIsr(2, 3, (2,))))
    zk.ensure_paths([paths.partition("t", 1)])
    zk.put(paths.partition_state("t", 1), b"{not json")
    got = store.read_partition_states([T0, T1, T2])
    assert got == {
        T0: PartitionState(LeaderAndIsr(1, 0, (1,), 0), 1),
        T1: None,
        T2: PartitionState(LeaderAndIsr(2, 3, (2,), 0), 1),
    }


def test_topic_znodes_a_controller_never_writes_are_strays() -> None:
    base = paths.topic_partitions("t")
    under = [
        base,
        base + "/0",
        base + "/0/state",
        base + "/0/state/x",
        base + "/0/other",
        base + "/x",
        paths.topic("t") + "/stray",
    ]
    assert st.stray_topic_znodes("t", under) == [
        base + "/0/state/x",
        base + "/0/other",
        base + "/x",
        paths.topic("t") + "/stray",
    ]


def test_a_warning_names_twenty_strays_and_counts_the_rest() -> None:
    twenty = [f"/s{i}" for i in range(20)]
    assert st.said_of(twenty) == ", ".join(repr(p) for p in twenty)
    assert st.said_of([*twenty, "/s20", "/s21"]).endswith("'/s19' and 2 more")


def test_a_delete_that_found_the_znode_gone_did_not_fail() -> None:
    assert st.delete_failure(True) is None
    assert st.delete_failure(NoNodeError()) is None
    error = NotEmptyError()
    assert st.delete_failure(error) is error


def test_partitions_an_admin_added_are_kept_and_the_controllers_win() -> None:
    ours = TopicAssignment("t", {0: (1, 2)})
    assert st.keeping_added_partitions(ours, None) is ours
    assert st.keeping_added_partitions(ours, TopicAssignment("t", {0: (3, 4)})) is ours
    merged = st.keeping_added_partitions(ours, TopicAssignment("t", {0: (3, 4), 1: (5,)}))
    assert merged.partitions == {0: (1, 2), 1: (5,)}


def test_a_state_at_int32s_largest_version_is_written_at_the_wrapped_one() -> None:
    """ZooKeeper keeps a znode's version in a Java int: the write after 2147483647 gives
    -2147483648, and the state's next write is conditional on that."""
    zk, store, epoch = cluster((T0, LeaderAndIsr(1, 0, (1,))))
    path = paths.partition_state("t", 0)
    data, stat = zk.nodes[path]
    zk.nodes[path] = (data, stat._replace(version=INT32_MAX))
    result = store.update_partition_states({T0: LeaderAndIsr(2, 1, (2,), INT32_MAX)}, 1, epoch)
    assert result.finished == {T0: LeaderAndIsr(2, 1, (2,), -(2**31))}
    again = store.update_partition_states(result.finished, 1, epoch)
    assert again.finished == {T0: LeaderAndIsr(2, 1, (2,), -(2**31) + 1)}


def test_a_parent_another_writer_created_meanwhile_is_no_failure() -> None:
    """The partitions znode and a partition's znode, created by someone else between the
    store's read and its create (NODEEXISTS): the state is created under them."""
    zk, store, epoch = cluster()
    zk.ensure_paths([paths.topic("t")])
    real = zk.get_many

    def stale_read(path_list: Any, **kwargs: Any) -> Any:
        got = real(path_list, **kwargs)
        zk.ensure_paths(list(path_list))  # created right after the read
        return got

    zk.get_many = stale_read  # type: ignore[method-assign]
    out = store.create_partition_states({T0: LeaderAndIsr(1, 0, (1,))}, 3, epoch)
    assert out == {T0: None}
    assert state_of(zk, T0) == PartitionState(LeaderAndIsr(1, 0, (1,), 0), 3)

"""`bounced_unseen`: which brokers a failover takes for failed and started again, because
they registered after the last write of a partition state whose ISR lists them."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given
from hypothesis import strategies as st

from controller.context import ControllerContext
from controller.reactions import bounced_unseen as _bounced_unseen
from zkdata.znodes import LeaderAndIsr, PartitionState, TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("u", 0)


def state(leader: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(LeaderAndIsr(leader, 3, isr, 5), 2)


def bounced_unseen(
    states: Mapping[TopicPartition, PartitionState | None],
    written_at: Mapping[TopicPartition, int],
    broker_epochs: Mapping[int, int],
    deleting: set[str] | None = None,
) -> set[int]:
    """`bounced_unseen` over a context a failover loaded with these states."""
    ctx = ControllerContext(epoch=3, epoch_zk_version=2)
    ctx.adopt_partition_states(states)
    ctx.topics_to_be_deleted = set(deleting or ())
    return _bounced_unseen(ctx, written_at, broker_epochs)


def test_a_broker_registered_after_a_state_listing_it_was_written_is_taken() -> None:
    # Broker 2 registered at zxid 100, after t-0's state (zxid 40) listed it as leader.
    states = {T0: state(2, (2, 1, 3)), T1: state(1, (1, 3))}
    assert bounced_unseen(states, {T0: 40, T1: 40}, {1: 10, 2: 100, 3: 12}) == {2}


def test_nor_a_broker_outside_the_isrs_written_before_it() -> None:
    # t-1 was written before broker 2 registered, but its ISR does not list 2: the
    # controller that saw 2 go took it out (that write came before 2 registered again).
    states = {T0: state(1, (1, 3)), T1: state(3, (3,))}
    assert bounced_unseen(states, {T0: 40, T1: 40}, {1: 10, 2: 100, 3: 12}) == set()


def test_nor_one_whose_partitions_were_written_since() -> None:
    # Only states older than the newest registration come with their zxid; t-0 (ISR with
    # 2) was written since 2 registered, so it is not among them.
    states = {T0: state(2, (2, 1)), T1: state(1, (1, 3))}
    assert bounced_unseen(states, {T1: 40}, {1: 10, 2: 100, 3: 12}) == set()


def test_a_last_isr_member_without_a_leader_is_taken_too() -> None:
    """Offline with the broker as its last ISR member (leader -1): it would be elected on
    its return anyway; taken for bounced, it is, once started."""
    states = {T0: state(-1, (2,))}
    assert bounced_unseen(states, {T0: 40}, {1: 10, 2: 100}) == {2}


def test_missing_states_and_unregistered_brokers_are_left_out() -> None:
    states: dict[TopicPartition, PartitionState | None] = {T0: None, T1: state(4, (4, 2))}
    # 4 is not registered (no broker epoch); 2 registered before t-1 was written.
    assert bounced_unseen(states, {T0: 1, T1: 40}, {1: 10, 2: 30}) == set()


def test_nor_in_a_topic_queued_for_deletion() -> None:
    """A broker's death leaves the states of a topic being deleted as they were (its
    replicas become ineligible for deletion, not Offline): after its return they are
    older than its registration, and say nothing of it."""
    states = {T0: state(2, (2, 1)), T2: state(2, (2, 1))}
    epochs = {1: 10, 2: 100}
    assert bounced_unseen(states, {T0: 40}, epochs, deleting={"t"}) == set()
    assert bounced_unseen(states, {T0: 40, T2: 40}, epochs, deleting={"t"}) == {2}


def test_several_brokers_and_isrs() -> None:
    states = {T0: state(1, (1, 2)), T1: state(2, (2, 3)), T2: state(3, (3, 1))}
    written = {T0: 50, T1: 70, T2: 20}
    # 1 registered at 60: after t-0 (50) and u-0 (20); 2 at 65: after t-0 only; 3 at 25:
    # after u-0 (20), which lists it.
    assert bounced_unseen(states, written, {1: 60, 2: 65, 3: 25}) == {1, 2, 3}
    assert bounced_unseen(states, written, {1: 15, 2: 45, 3: 15}) == set()


brokers = st.integers(1, 5)
isrs = st.lists(brokers, min_size=1, max_size=4, unique=True).map(tuple)


@given(
    st.dictionaries(
        st.integers(0, 30).map(lambda p: TopicPartition("t", p)),
        st.tuples(st.integers(-1, 5), isrs, st.integers(0, 200)),
    ),
    st.dictionaries(brokers, st.integers(0, 200)),
)
def test_taken_exactly_when_registered_after_a_write_of_a_state_listing_it(
    partitions: dict[TopicPartition, tuple[int, tuple[int, ...], int]],
    broker_epochs: dict[int, int],
) -> None:
    states = {tp: state(leader, isr) for tp, (leader, isr, _) in partitions.items()}
    newest = max(broker_epochs.values(), default=0)
    # What the store returns: the states last written before the newest registration.
    written = {tp: zxid for tp, (_, _, zxid) in partitions.items() if zxid < newest}
    taken = bounced_unseen(states, written, broker_epochs)
    for b in range(1, 6):
        registered = broker_epochs.get(b)
        listed_before = any(
            b in isr and registered is not None and zxid < registered
            for _, isr, zxid in partitions.values()
        )
        assert (b in taken) == listed_before

"""The watch model's finer points during a failover: what each partition shows (a leader
epoch bumped alone), how waits are summarised when many partitions recover at once, when
changes are aggregated, and which broker losses make a partition under-replicated."""

from __future__ import annotations

from collections.abc import Mapping

from watch import model
from watch.model import (
    BrokerInfo,
    BrokersSeen,
    ControllerSeen,
    Event,
    PartitionsSeen,
    WatchState,
    reduce,
    running_clocks,
)
from zkdata.znodes import LeaderAndIsr, TopicPartition

T0 = 1_800_000_000.0

State = tuple[int, int, tuple[int, ...]]  # leader, leader epoch, ISR


def brokers(ts: float, *ids: int) -> BrokersSeen:
    return BrokersSeen(ts, {b: BrokerInfo(b, f"127.0.0.1:{9000 + b}", 100 + b) for b in ids})


def partitions(
    ts: float,
    states: Mapping[tuple[str, int], State],
    replicas: Mapping[tuple[str, int], tuple[int, ...]] | None = None,
) -> PartitionsSeen:
    topics: dict[str, dict[int, tuple[int, ...]]] = {}
    for t, p in states:
        topics.setdefault(t, {})[p] = (replicas or {}).get((t, p), (1, 2, 3))
    return PartitionsSeen(
        ts,
        topics,
        {TopicPartition(t, p): LeaderAndIsr(*s) for (t, p), s in states.items()},
    )


def run(state: WatchState, *observations: model.Observation) -> tuple[WatchState, list[Event]]:
    out: list[Event] = []
    for obs in observations:
        state, events = reduce(state, obs)
        out.extend(events)
    return state, out


def cluster(states: Mapping[tuple[str, int], State]) -> WatchState:
    """Controller 1 (epoch 5), brokers 1-3, the partitions as given."""
    state, _ = run(
        model.initial_state(T0),
        ControllerSeen(T0, 1, 5),
        brokers(T0, 1, 2, 3),
        partitions(T0, states),
    )
    return state


def round_robin(n: int) -> dict[tuple[str, int], State]:
    return {("t", p): (p % 3 + 1, 0, (1, 2, 3)) for p in range(n)}


def test_a_leader_epoch_bumped_alone_is_shown_on_the_partition() -> None:
    # A preferred-leader election of the leader it already has, or a controlled shutdown
    # that left the leader in place, bumps only the leader epoch: no event, but the view
    # shows the epoch the partition has now, not the one it had.
    states = round_robin(3)
    state = cluster(states)
    states[("t", 0)] = (1, 7, (1, 2, 3))
    state, events = run(state, partitions(T0 + 1, states))
    assert events == []
    assert state.partitions[TopicPartition("t", 0)].leader_epoch == 7


def test_a_leader_moved_without_a_wait_is_information_not_good_news() -> None:
    states = round_robin(15)
    state = cluster(states)
    # One leader moved by a reassignment or a preferred election: no outage ended.
    moved = dict(states)
    moved[("t", 0)] = (2, 1, (1, 2, 3))
    _, events = run(state, partitions(T0 + 1, moved))
    assert [(e.text, e.severity) for e in events] == [
        ("leader of t-0 moved 1 -> 2 (leader epoch 1)", "info")
    ]
    # Many moved the same way: one line, information too.
    many = {k: ((2 if lead == 1 else lead), 1, isr) for k, (lead, _, isr) in states.items()}
    _, events = run(state, partitions(T0 + 1, many))
    assert len(events) == 1
    assert events[0].text.startswith("leader moved for 5 partitions: 1 -> 2 (5) (e.g. t-0, ")
    assert events[0].severity == "info"


def test_many_partitions_back_at_once_name_the_longest_wait() -> None:
    states = round_robin(12)
    state = cluster(states)
    # Three partitions lose their leader at T0+1, two more at T0+3; all back at T0+6.
    down = dict(states)
    for p in (0, 1, 2):
        down[("t", p)] = (-1, 1, (1, 2, 3))
    state, _ = run(state, partitions(T0 + 1, down))
    for p in (3, 4):
        down[("t", p)] = (-1, 1, (1, 2, 3))
    state, _ = run(state, partitions(T0 + 3, down))
    back = {k: ((1, 2, s[2]) if s[0] < 0 else s) for k, s in down.items()}
    _, events = run(state, partitions(T0 + 6, back))
    assert [(e.text, e.severity) for e in events] == [
        (
            "5 partitions back online after up to 5.0 s without a leader; leaders 1 (5)",
            "good",
        )
    ]


def test_many_leaders_moved_off_lost_brokers_name_the_longest_wait() -> None:
    states = round_robin(12)  # 4 partitions each led by brokers 1, 2 and 3
    state = cluster(states)
    state, _ = run(state, brokers(T0 + 1, 1, 3), brokers(T0 + 3, 1))
    after = {k: (1, 1, (1,)) for k in states}
    _, events = run(state, partitions(T0 + 6, after))
    moved = [e for e in events if e.text.startswith("leader moved")]
    assert [(e.text, e.severity) for e in moved] == [
        (
            "leader moved for 8 partitions: 2 -> 1 (4), 3 -> 1 (4) after up to 5.0 s"
            " without a leader (e.g. t-1, t-2, t-4, ...)",
            "good",
        )
    ]


def test_four_partitions_offline_are_named_one_by_one_and_five_are_one_line() -> None:
    states = round_robin(12)
    state = cluster(states)
    four = {k: ((-1, 1, (1, 2, 3)) if k[1] < 4 else s) for k, s in states.items()}
    _, events = run(state, partitions(T0 + 1, four))
    assert [e.text for e in events] == [
        f"t-{p} offline: no leader (ISR [1, 2, 3])" for p in range(4)
    ]
    five = {k: ((-1, 1, (1, 2, 3)) if k[1] < 5 else s) for k, s in states.items()}
    _, events = run(state, partitions(T0 + 1, five))
    assert [e.text for e in events] == ["5 partitions offline: no leader (e.g. t-0, t-1, t-2, ...)"]


def test_up_to_three_leaderless_partitions_each_have_a_clock_and_four_share_one() -> None:
    states = round_robin(12)
    state = cluster(states)
    three = {k: ((-1, 1, (1,)) if k[1] < 3 else s) for k, s in states.items()}
    s3, _ = run(state, partitions(T0 + 1, three))
    assert running_clocks(s3, T0 + 3) == [
        f"partition t-{p} without leader for 2.0 s" for p in range(3)
    ]
    four = {k: ((-1, 1, (1,)) if k[1] < 4 else s) for k, s in states.items()}
    s4, _ = run(state, partitions(T0 + 1, four))
    assert running_clocks(s4, T0 + 3) == ["4 partitions without leader, the longest for 2.0 s"]


def test_with_no_controller_the_clock_names_the_last_one_not_the_first() -> None:
    state = cluster(round_robin(3))
    state, _ = run(
        state,
        ControllerSeen(T0 + 1, None, 5),
        ControllerSeen(T0 + 2, 2, 6),
        ControllerSeen(T0 + 3, None, 6),
    )
    assert running_clocks(state, T0 + 5) == ["no controller for 2.0 s (last: broker 2, epoch 6)"]


def test_a_broker_that_joined_the_isr_and_is_lost_makes_the_partition_under_replicated() -> None:
    states = {("t", 0): (1, 0, (1, 2)), ("t", 1): (2, 0, (2, 1, 3))}
    state = cluster(states)
    tp = TopicPartition("t", 0)
    assert state.summary.under_replicated == (tp,)
    # Broker 3 catches up: the leader is the same, only the ISR grew.
    states[("t", 0)] = (1, 0, (1, 2, 3))
    state, _ = run(state, partitions(T0 + 1, states))
    assert state.summary.under_replicated == ()
    # Broker 3 is lost before the leader shrinks the ISR: short of a replica already.
    state, _ = run(state, brokers(T0 + 2, 1, 2))
    assert state.partitions[tp].under_replicated
    assert state.summary.under_replicated == (TopicPartition("t", 0), TopicPartition("t", 1))


def test_a_new_topic_names_its_largest_replication_factor() -> None:
    state = cluster(round_robin(3))
    states = {**round_robin(3), ("u", 0): (1, 0, (1, 2, 3)), ("u", 1): (1, 0, (1, 2))}
    _, events = run(
        state, partitions(T0 + 1, states, replicas={("u", 0): (1, 2), ("u", 1): (1, 2, 3)})
    )
    assert "topic u created: 2 partitions, replication factor 3" in [e.text for e in events]


def test_many_partitions_started_without_a_leader_credit_no_broker() -> None:
    state = cluster(round_robin(3))
    states = {**round_robin(3), **{("u", p): (-1, 0, ()) for p in range(4)}, ("u", 4): (2, 0, (2,))}
    _, events = run(state, partitions(T0 + 1, states))
    assert "5 new partitions started; leaders 2 (1)" in [e.text for e in events]


def test_epochs_won_and_lost_while_no_controller_is_seen_are_named() -> None:
    # Kafka 2.8 bumps /controller_epoch only with /controller created (one multi-op), so
    # an epoch grown while /controller is read empty was a controller elected and gone
    # between two reads.
    state = cluster(round_robin(3))
    state, events = run(state, ControllerSeen(T0 + 1, None, 6))
    assert [e.text for e in events] == [
        "controller resigned: broker 1 (epoch 5) no longer holds /controller",
        "epoch 6 came and went between two reads",
    ]
    assert events[-1].severity == "warn"
    state, events = run(state, ControllerSeen(T0 + 2, None, 9))
    assert [e.text for e in events] == ["epochs 7 to 9 came and went between two reads"]
    # Counted from the last epoch read, not from the last controller seen.
    state, events = run(state, ControllerSeen(T0 + 3, 2, 10))
    assert [e.text for e in events] == [
        "broker 2 elected controller, epoch 10 after 2.0 s without a controller"
    ]
    # The same epoch read again, or none readable: nothing came and went.
    state, _ = run(state, ControllerSeen(T0 + 4, None, 10))
    for epoch in (10, None):
        _, events = run(state, ControllerSeen(T0 + 5, None, epoch))
        assert events == []


def test_many_topics_created_or_marked_for_deletion_at_once_are_one_line_each() -> None:
    state = cluster(round_robin(3))
    topics = {f"n{i}": {0: (1, 2, 3)} for i in range(5)}
    states = {TopicPartition(t, 0): LeaderAndIsr(1, 0, (1, 2, 3)) for t in topics}
    base = partitions(T0 + 1, round_robin(3))
    created = PartitionsSeen(
        T0 + 1, {**base.topics, **topics}, {**base.states, **states}, frozenset()
    )
    state, events = run(state, created)
    assert [e.text for e in events if e.kind == "topic"] == ["5 topics created: n0, n1, n2, ..."]
    marked = PartitionsSeen(T0 + 2, created.topics, created.states, frozenset(topics))
    _, events = run(state, marked)
    assert [e.text for e in events if e.kind == "topic"] == [
        "5 topics marked for deletion: n0, n1, n2, ..."
    ]


def test_many_back_online_name_each_new_leader() -> None:
    states = round_robin(12)
    state = cluster(states)
    down = {k: ((-1, 1, (1, 2, 3)) if k[1] < 6 else s) for k, s in states.items()}
    state, _ = run(state, partitions(T0 + 1, down))
    back = {k: ((k[1] % 2 + 1, 2, (1, 2, 3)) if k[1] < 6 else s) for k, s in down.items()}
    _, events = run(state, partitions(T0 + 3, back))
    assert [e.text for e in events] == [
        "6 partitions back online after up to 2.0 s without a leader; leaders 1 (3), 2 (3)"
    ]


def test_a_line_read_late_goes_after_those_of_the_same_time() -> None:
    state = cluster(round_robin(3))
    state, _ = run(
        state,
        model.Note(T0 + 5, "first at 5"),
        model.Note(T0 + 6, "at 6"),
        model.Note(T0 + 5, "read late, also at 5", source="log"),
    )
    assert [e.text for e in state.timeline[-3:]] == [
        "first at 5",
        "read late, also at 5",
        "at 6",
    ]


def test_durations_change_unit_at_a_minute_and_an_hour() -> None:
    assert model.fmt_duration(59.94) == "59.9 s"
    assert model.fmt_duration(60) == "1 min 00 s"
    assert model.fmt_duration(3599) == "59 min 59 s"
    assert model.fmt_duration(3600) == "1 h 00 min"


def test_a_state_znode_of_a_partition_not_assigned_hides_no_other_change() -> None:
    # A state znode left for a partition its topic no longer assigns (or not yet) is
    # ignored; a change read with it, in the same read, is not.
    topics = {"t": {0: (1, 2, 3), 1: (1, 2, 3)}}
    stray = TopicPartition("t", 9)

    def seen(ts: float, stray_epoch: int, leader: int) -> PartitionsSeen:
        return PartitionsSeen(
            ts,
            topics,
            {
                stray: LeaderAndIsr(1, stray_epoch, (1,)),
                TopicPartition("t", 0): LeaderAndIsr(leader, stray_epoch, (1, 2, 3)),
                TopicPartition("t", 1): LeaderAndIsr(2, 0, (1, 2, 3)),
            },
        )

    state, _ = run(
        model.initial_state(T0), ControllerSeen(T0, 1, 5), brokers(T0, 1, 2, 3), seen(T0, 0, 1)
    )
    state, events = run(state, seen(T0 + 1, 1, 3))
    assert state.partitions[TopicPartition("t", 0)].leader == 3
    assert stray not in state.partitions
    assert [e.text for e in events] == ["leader of t-0 moved 1 -> 3 (leader epoch 1)"]


def test_five_problems_found_at_once_are_one_line_and_four_are_four() -> None:
    state = cluster(round_robin(3))
    four = {f"/brokers/topics/t{i}": f"t{i}: not JSON" for i in range(4)}
    _, events = run(state, model.ProblemsSeen(T0 + 1, "topics", four))
    assert [e.text for e in events] == [f"t{i}: not JSON" for i in range(4)]
    five = {f"/brokers/topics/t{i}": f"t{i}: not JSON" for i in range(5)}
    _, events = run(state, model.ProblemsSeen(T0 + 1, "topics", five))
    assert [e.text for e in events] == ["t0: not JSON (and 4 more)"]


def test_a_summary_without_a_controller_says_so() -> None:
    state = cluster(round_robin(3))
    state, _ = run(state, ControllerSeen(T0 + 1, None, 5))
    _, events = run(state, model.SummaryRequested(T0 + 2))
    assert [e.text for e in events] == [
        "no controller; 3 partitions in 1 topic: 3 online, 0 offline, 0 under-replicated;"
        " leaders by broker 1: 1, 2: 1, 3: 1"
    ]

"""The watch view's reducer: ZooKeeper observations in, view state and timeline events out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from watch import model
from watch.model import (
    BrokerInfo,
    BrokersSeen,
    ConnectionSeen,
    ControllerSeen,
    Note,
    PartitionsSeen,
    ProblemsSeen,
    SummaryRequested,
    WatchState,
    reduce,
    reduce_all,
    running_clocks,
)
from watch.screen import screen_lines
from watch.text import printable
from zkdata.znodes import LeaderAndIsr, TopicPartition

T0 = 1_800_000_000.0


def brokers(*ids: int, epochs: Mapping[int, int] | None = None) -> BrokersSeen:
    return BrokersSeen(
        0.0,
        {b: BrokerInfo(b, f"127.0.0.1:{9000 + b}", (epochs or {}).get(b, 100 + b)) for b in ids},
    )


def at(ts: float, obs: model.Observation) -> model.Observation:
    """The observation with its time set (the helpers build them at 0)."""
    fields = {k: getattr(obs, k) for k in obs.__dataclass_fields__}
    fields["ts"] = ts
    return type(obs)(**fields)


def partitions(
    states: Mapping[tuple[str, int], tuple[int, int, tuple[int, ...]]],
    replicas: Mapping[tuple[str, int], tuple[int, ...]] | None = None,
    *,
    extra: Mapping[tuple[str, int], tuple[int, ...]] | None = None,
) -> PartitionsSeen:
    """states: (topic, p) -> (leader, leader epoch, isr); replicas default to (1, 2, 3);
    `extra` partitions are assigned but have no state znode."""
    topics: dict[str, dict[int, tuple[int, ...]]] = {}
    for t, p in [*states, *(extra or {})]:
        r = (replicas or {}).get((t, p)) or (extra or {}).get((t, p)) or (1, 2, 3)
        topics.setdefault(t, {})[p] = r
    return PartitionsSeen(
        0.0,
        topics,
        {
            TopicPartition(t, p): LeaderAndIsr(lead, le, isr)
            for (t, p), (lead, le, isr) in states.items()
        },
    )


def texts(events: list[model.Event]) -> list[str]:
    return [e.text for e in events]


def run(state: WatchState, *steps: tuple[float, model.Observation]) -> tuple[WatchState, list[str]]:
    out: list[str] = []
    for ts, obs in steps:
        state, events = reduce(state, at(ts, obs))
        out.extend(texts(events))
    return state, out


def healthy_cluster() -> WatchState:
    """Controller 1 (epoch 5), brokers 1-3, topic t with 6 partitions led round-robin."""
    state = model.initial_state(T0)
    state, _ = run(
        state,
        (T0, ControllerSeen(0.0, 1, 5)),
        (T0, brokers(1, 2, 3)),
        (T0, partitions({("t", p): (p % 3 + 1, 0, (1, 2, 3)) for p in range(6)})),
    )
    return state


# --- the controller -------------------------------------------------------------------------


def test_first_sight_of_a_controller_names_it_without_claiming_an_election() -> None:
    state, out = run(model.initial_state(T0), (T0, ControllerSeen(0.0, 2, 7)))
    assert out == ["controller is broker 2, epoch 7"]
    assert state.controller is not None
    assert (state.controller.broker, state.controller.epoch) == (2, 7)
    assert not state.controller.seen_elected
    assert running_clocks(state, T0 + 5) == []


def test_a_controller_already_there_is_controller_since_its_election() -> None:
    # Its term began when /controller was created, not when the watch first looked.
    seen = ControllerSeen(T0, 2, 7, elected_at=T0 - 3600)
    state, _ = run(model.initial_state(T0), (T0, seen))
    assert state.controller is not None
    assert state.controller.since == T0 - 3600
    # A ZooKeeper server's clock ahead of ours: no later than the watch's first look.
    seen = ControllerSeen(T0, 2, 7, elected_at=T0 + 5)
    state, _ = run(model.initial_state(T0), (T0, seen))
    assert state.controller is not None
    assert state.controller.since == T0


def test_no_controller_at_first_starts_the_clock_and_an_election_stops_it() -> None:
    state, out = run(model.initial_state(T0), (T0, ControllerSeen(0.0, None, None)))
    assert out == ["no controller"]
    assert running_clocks(state, T0 + 3.25) == ["no controller for 3.2 s"]
    state, out = run(state, (T0 + 4.5, ControllerSeen(0.0, 3, 1)))
    assert out == ["broker 3 elected controller, epoch 1 after 4.5 s without a controller"]
    assert running_clocks(state, T0 + 10) == []
    assert state.controller is not None
    assert state.controller.gap_before == 4.5


def test_resignation_then_election_keeps_the_history_and_the_gap() -> None:
    state = healthy_cluster()
    state, out = run(state, (T0 + 10, ControllerSeen(0.0, None, 5)))
    assert out == ["controller resigned: broker 1 (epoch 5) no longer holds /controller"]
    assert running_clocks(state, T0 + 12) == ["no controller for 2.0 s (last: broker 1, epoch 5)"]
    state, out = run(state, (T0 + 13.2, ControllerSeen(0.0, 2, 6)))
    assert out == ["broker 2 elected controller, epoch 6 after 3.2 s without a controller"]
    assert [(t.broker, t.epoch, t.since, t.until) for t in state.history] == [(1, 5, T0, T0 + 10)]
    assert state.controller is not None
    assert (state.controller.broker, state.controller.epoch, state.controller.since) == (
        2,
        6,
        T0 + 13.2,
    )


def test_a_controller_replaced_between_two_reads_is_a_resignation_and_an_election() -> None:
    state, out = run(healthy_cluster(), (T0 + 1, ControllerSeen(0.0, 3, 6)))
    assert out == [
        "controller resigned: broker 1 (epoch 5) no longer holds /controller",
        "broker 3 elected controller, epoch 6 after 0.00 s without a controller",
    ]
    # The same broker elected again (its session bounced) is a change too.
    _, out = run(state, (T0 + 2, ControllerSeen(0.0, 3, 7)))
    assert out[-1] == "broker 3 elected controller, epoch 7 after 0.00 s without a controller"


def test_epochs_elected_and_lost_between_reads_are_named() -> None:
    _, out = run(healthy_cluster(), (T0 + 1, ControllerSeen(0.0, 2, 7)))
    assert "epoch 6 came and went between two reads" in out
    _, out = run(healthy_cluster(), (T0 + 1, ControllerSeen(0.0, 2, 9)))
    assert "epochs 6 to 8 came and went between two reads" in out


def test_an_unchanged_controller_is_no_event_and_the_same_state() -> None:
    state = healthy_cluster()
    new, events = reduce(state, ControllerSeen(T0 + 1, 1, 5))
    assert events == []
    assert new is state


def test_history_is_bounded() -> None:
    state = healthy_cluster()
    for i in range(model.HISTORY_MAX + 10):
        state, _ = reduce(state, ControllerSeen(T0 + i, 1 + i % 3, 6 + i))
    assert len(state.history) == model.HISTORY_MAX
    assert state.history[0].epoch == 6 + model.HISTORY_MAX + 8  # newest first


def test_an_unreadable_controller_is_reported_once_while_it_stays_so() -> None:
    state = model.initial_state(T0)
    state, first = reduce(state, ControllerSeen(T0, None, 4, problem="malformed /controller"))
    state, second = reduce(state, ControllerSeen(T0 + 1, None, 4, problem="malformed /controller"))
    assert texts(first) == ["malformed /controller", "no controller (the last epoch was 4)"]
    assert second == []
    # Read fine, then broken the same way again: reported again.
    state, _ = reduce(state, ControllerSeen(T0 + 2, None, 4))
    state, third = reduce(state, ControllerSeen(T0 + 3, None, 4, problem="malformed /controller"))
    assert texts(third) == ["malformed /controller"]


def test_problems_are_reported_by_source_as_they_appear_and_reappear() -> None:
    """Reported once per text ever, and every text forgotten once 1,000 had been seen: a
    znode broken again after its repair went unreported, and past 1,000 texts all that was
    still wrong was reported again at once."""
    bad = {
        f"/brokers/topics/t{i}": f"malformed data in znode /brokers/topics/t{i}"
        for i in range(1500)
    }
    state, events = reduce(model.initial_state(T0), ProblemsSeen(T0, "topics", bad))
    assert texts(events) == ["malformed data in znode /brokers/topics/t0 (and 1,499 more)"]
    for i in range(3):
        state, events = reduce(state, ProblemsSeen(T0 + 1 + i, "topics", bad))
        assert events == []
    # Another scope's read clears none of these.
    state, events = reduce(state, ProblemsSeen(T0 + 5, "brokers", {}))
    assert events == []
    assert len(state.problems["topics"]) == 1500
    # t7 repaired, then broken again the same way; t8 broken another way.
    fixed = {k: v for k, v in bad.items() if k != "/brokers/topics/t7"}
    state, events = reduce(state, ProblemsSeen(T0 + 6, "topics", fixed))
    assert events == []
    again = {**bad, "/brokers/topics/t8": "no data in znode /brokers/topics/t8"}
    state, events = reduce(state, ProblemsSeen(T0 + 7, "topics", again))
    assert texts(events) == [
        "malformed data in znode /brokers/topics/t7",
        "no data in znode /brokers/topics/t8",
    ]
    # All read fine (or gone): nothing is remembered.
    state, events = reduce(state, ProblemsSeen(T0 + 8, "topics", {}))
    assert events == []
    assert state.problems == {}


# --- brokers --------------------------------------------------------------------------------


def test_broker_loss_makes_its_partitions_leaderless_until_a_new_leader_is_written() -> None:
    state = healthy_cluster()
    state, out = run(state, (T0 + 10, brokers(1, 3)))
    assert out == [
        "broker 2 lost: its registration is gone; 2 partitions it led now without a leader"
        " (t-1, t-4)"
    ]
    s = state.summary
    assert (s.online, s.offline_count, s.under_replicated_count) == (4, 2, 4)
    assert s.offline == (TopicPartition("t", 1), TopicPartition("t", 4))
    assert running_clocks(state, T0 + 11.5) == [
        "partition t-1 without leader for 1.5 s",
        "partition t-4 without leader for 1.5 s",
    ]
    assert not state.brokers[2].alive
    # The controller writes new leaders and shrinks the ISRs.
    new_states: dict[tuple[str, int], tuple[int, int, tuple[int, ...]]] = {
        ("t", p): (p % 3 + 1, 0, (1, 2, 3)) for p in range(6)
    }
    new_states[("t", 1)] = (3, 1, (1, 3))
    new_states[("t", 4)] = (1, 1, (1, 3))
    state, out = run(state, (T0 + 12, partitions(new_states)))
    assert out == [
        "leader of t-1 moved 2 -> 3 (leader epoch 1) after 2.0 s without a leader",
        "leader of t-4 moved 2 -> 1 (leader epoch 1) after 2.0 s without a leader",
        "ISR of t-1 shrank: [1, 2, 3] -> [1, 3]",
        "ISR of t-4 shrank: [1, 2, 3] -> [1, 3]",
    ]
    assert state.summary.offline_count == 0
    assert running_clocks(state, T0 + 13) == []


def test_a_broker_back_before_its_leaderships_moved_leads_again() -> None:
    state = healthy_cluster()
    state, _ = run(state, (T0 + 10, brokers(1, 3)))
    state, out = run(state, (T0 + 12.5, brokers(1, 2, 3, epochs={2: 555})))
    assert out == [
        "broker 2 back after 2.5 s: 127.0.0.1:9002, broker epoch 555",
        "2 partitions have their leader back: it registered again (t-1, t-4)",
    ]
    assert state.summary.offline_count == 0
    assert state.brokers[2].alive


def test_one_partition_back_is_said_in_the_singular() -> None:
    state = model.initial_state(T0)
    state, _ = run(
        state,
        (T0, ControllerSeen(0.0, 1, 5)),
        (T0, brokers(1, 2)),
        (T0, partitions({("t", 0): (2, 0, (1, 2))})),
    )
    state, _ = run(state, (T0 + 10, brokers(1)))
    state, out = run(state, (T0 + 12.5, brokers(1, 2, epochs={2: 555})))
    assert out[-1] == "1 partition has its leader back: it registered again (t-0)"


def test_a_bounced_broker_and_a_moved_broker_are_named() -> None:
    state = healthy_cluster()
    _, out = run(state, (T0 + 1, brokers(1, 2, 3, epochs={3: 999})))
    assert out == ["broker 3 re-registered (it bounced): broker epoch 103 -> 999"]
    moved = BrokersSeen(
        T0 + 1, {**brokers(1, 2, 3).brokers, 1: BrokerInfo(1, "10.0.0.9:9092", 101)}
    )
    _, events = reduce(state, moved)
    assert texts(events) == ["broker 1 now at 10.0.0.9:9092"]


def test_brokers_named_by_assignments_are_listed_even_if_never_registered() -> None:
    state = model.initial_state(T0)
    state, out = run(
        state,
        (T0, brokers(1)),
        (T0, partitions({("t", 0): (2, 0, (2, 1))}, {("t", 0): (2, 1)})),
    )
    assert out == [
        "1 broker registered: [1]",
        "1 partition in 1 topic: 0 online, 1 offline, 0 under-replicated",
    ]
    assert model.broker_ids(state) == [1, 2]


# --- partitions -----------------------------------------------------------------------------


def test_offline_and_back_online() -> None:
    state = healthy_cluster()
    states: dict[tuple[str, int], tuple[int, int, tuple[int, ...]]] = {
        ("t", p): (p % 3 + 1, 0, (1, 2, 3)) for p in range(6)
    }
    states[("t", 0)] = (-1, 1, (1,))
    state, out = run(state, (T0 + 1, brokers(2, 3)), (T0 + 2, partitions(states)))
    assert "t-0 offline: no leader (ISR [1])" in out
    states[("t", 0)] = (1, 2, (1,))
    state, out = run(state, (T0 + 5, brokers(1, 2, 3)), (T0 + 6, partitions(states)))
    assert out[0] == "broker 1 back after 4.0 s: 127.0.0.1:9001, broker epoch 101"
    assert "t-0 back online: leader 1 (leader epoch 2) after 5.0 s without a leader" in out


def test_isr_changes_one_by_one() -> None:
    state = healthy_cluster()
    states: dict[tuple[str, int], tuple[int, int, tuple[int, ...]]] = {
        ("t", p): (p % 3 + 1, 0, (1, 2, 3)) for p in range(6)
    }
    states[("t", 0)] = (1, 0, (1, 2))
    state, out = run(state, (T0 + 1, partitions(states)))
    assert out == ["ISR of t-0 shrank: [1, 2, 3] -> [1, 2]"]
    assert state.summary.under_replicated == (TopicPartition("t", 0),)
    states[("t", 0)] = (1, 0, (1, 3))
    state, out = run(state, (T0 + 2, partitions(states)))
    assert out == ["ISR of t-0 changed: [1, 2] -> [1, 3]"]
    states[("t", 0)] = (1, 0, (1, 3, 2))
    state, out = run(state, (T0 + 3, partitions(states)))
    assert out == ["ISR of t-0 grew: [1, 3] -> [1, 3, 2]"]
    assert state.summary.under_replicated == ()
    # Only the order changed, or only the leader epoch: nothing to tell.
    states[("t", 0)] = (1, 1, (3, 2, 1))
    _, out = run(state, (T0 + 4, partitions(states)))
    assert out == []


def test_many_changes_of_a_kind_are_one_event_each() -> None:
    n = 3000
    state = model.initial_state(T0)
    before = {("big", p): (p % 3 + 1, 0, (1, 2, 3)) for p in range(n)}
    state, _ = run(
        state, (T0, ControllerSeen(0.0, 1, 1)), (T0, brokers(1, 2, 3)), (T0, partitions(before))
    )
    state, out = run(state, (T0 + 5, brokers(1, 3)))
    assert len(out) == 1
    assert out[0].startswith("broker 2 lost: its registration is gone; 1,000 partitions it led")
    assert state.summary.offline_count == 1000
    assert running_clocks(state, T0 + 6) == [
        "1,000 partitions without leader, the longest for 1.0 s"
    ]
    after = {
        k: ((3 if k[1] % 2 else 1) if lead == 2 else lead, le + 1, tuple(b for b in isr if b != 2))
        for k, (lead, le, isr) in before.items()
    }
    state, out = run(state, (T0 + 7, partitions(after)))
    assert out == [
        "leader moved for 1,000 partitions: 2 -> 1 (500), 2 -> 3 (500) after up to 2.0 s"
        " without a leader (e.g. big-1, big-4, big-7, ...)",
        "ISR shrank for 3,000 partitions: broker 2 left (3,000) (e.g. big-0, big-1, big-2, ...)",
    ]
    s = state.summary
    assert (s.total, s.online, s.offline_count, s.under_replicated_count) == (3000, 3000, 0, 3000)
    assert s.leaders == {1: 1500, 3: 1500}


def test_topics_created_deleted_and_grown() -> None:
    state = healthy_cluster()
    states: dict[tuple[str, int], tuple[int, int, tuple[int, ...]]] = {
        ("t", p): (p % 3 + 1, 0, (1, 2, 3)) for p in range(6)
    }
    grown = {**states, **{("u", p): (1, 0, (1, 2)) for p in range(2)}}
    state, out = run(
        state,
        (T0 + 1, partitions(states, extra={("u", 0): (1, 2), ("u", 1): (2, 1)})),
    )
    assert out == ["topic u created: 2 partitions, replication factor 2"]
    assert state.summary.no_state == 2
    state, out = run(state, (T0 + 2, partitions(grown, {("u", 0): (1, 2), ("u", 1): (2, 1)})))
    assert out == ["u-0 started: leader 1, ISR [1, 2]", "u-1 started: leader 1, ISR [1, 2]"]
    more = {**grown, **{("t", p): (1, 0, (1, 2, 3)) for p in range(6, 8)}}
    state, out = run(state, (T0 + 3, partitions(more, {("u", 0): (1, 2), ("u", 1): (2, 1)})))
    assert out[0] == "topic t: 6 -> 8 partitions"
    without_u = {k: v for k, v in more.items() if k[0] != "u"}
    _, out = run(state, (T0 + 4, partitions(without_u)))
    assert out == ["topic u deleted"]


def test_a_reassignment_and_a_topic_being_deleted() -> None:
    state = healthy_cluster()
    states: dict[tuple[str, int], tuple[int, int, tuple[int, ...]]] = {
        ("t", p): (p % 3 + 1, 0, (1, 2, 3)) for p in range(6)
    }
    state, out = run(state, (T0 + 1, partitions(states, {("t", 0): (3, 2, 1)})))
    assert out == ["replicas of t-0 changed: [1, 2, 3] -> [3, 2, 1]"]
    states[("t", 0)] = (-2, 1, (1, 2, 3))
    state, out = run(state, (T0 + 2, partitions(states, {("t", 0): (3, 2, 1)})))
    assert out == []  # leader -2: being deleted, neither offline nor a leader change
    assert (state.summary.deleting, state.summary.offline_count) == (1, 0)


def test_a_topic_being_deleted_is_no_offline_alert_and_goes_with_its_znodes() -> None:
    """Kafka 2.8's controller writes no leader -2 to ZooKeeper: deleting a topic moves its
    replicas offline (leader -1, the ISR shrunk to one) and then removes its znodes. The
    view read no /admin/delete_topics, so it showed the topic's partitions as offline,
    alert and clocks and all, as if they had failed."""
    state = healthy_cluster()
    states: dict[tuple[str, int], tuple[int, int, tuple[int, ...]]] = {
        ("t", p): (p % 3 + 1, 0, (1, 2, 3)) for p in range(6)
    }
    states[("u", 0)] = (1, 0, (1, 2, 3))
    state, _ = run(state, (T0 + 1, partitions(states)))
    marked = replace(partitions(states), deleting=frozenset({"u"}))
    state, out = run(state, (T0 + 2, marked))
    assert out == ["topic u marked for deletion: 1 partition"]
    offline = {**states, ("u", 0): (-1, 1, (3,))}  # its replicas taken offline
    state, out = run(state, (T0 + 3, replace(partitions(offline), deleting=frozenset({"u"}))))
    assert out == []
    s = state.summary
    assert (s.offline_count, s.deleting, s.online, s.under_replicated_count) == (0, 1, 6, 0)
    assert running_clocks(state, T0 + 30) == []
    lines = [t for t, _ in screen_lines(state, T0 + 30, 40, 120)]
    assert not [ln for ln in lines if ln.startswith("!!") or "OFFLINE" in ln], lines
    assert [ln for ln in lines if ln.lstrip().startswith("u-0") and "being deleted" in ln], lines
    # Its leader's broker lost meanwhile: none of its partitions is said to be leaderless.
    state, out = run(state, (T0 + 4, brokers(1, 2)))
    assert out == [
        "broker 3 lost: its registration is gone; 2 partitions it led now without a leader"
        " (t-2, t-5)"
    ]
    state, out = run(state, (T0 + 6, partitions({k: v for k, v in states.items() if k[0] == "t"})))
    assert out == ["topic u deleted"]
    assert "u" not in state.topics


def test_first_partitions_seen_is_one_overview() -> None:
    _, out = run(
        model.initial_state(T0),
        (T0, brokers(1, 2)),
        (
            T0,
            partitions(
                {("a", 0): (1, 0, (1, 2)), ("a", 1): (3, 0, (3, 1))},
                {("a", 0): (1, 2), ("a", 1): (3, 1)},
                extra={("b", 0): (1,)},
            ),
        ),
    )
    assert out == [
        "2 brokers registered: [1, 2]",
        "3 partitions in 2 topics: 1 online, 1 offline, 0 under-replicated, 1 without a state yet",
    ]


# --- connection, notes, summary -------------------------------------------------------------


def test_connection_lost_then_back_and_session_expiry() -> None:
    state = healthy_cluster()
    state, out = run(state, (T0 + 1, ConnectionSeen(0.0, model.SUSPENDED)))
    assert out == ["ZooKeeper connection lost; reconnecting"]
    assert running_clocks(state, T0 + 3)[0] == (
        "ZooKeeper connection lost 2.0 s ago; reconnecting (what is shown may be stale)"
    )
    state, out = run(state, (T0 + 4, ConnectionSeen(0.0, model.CONNECTED)))
    assert out == ["ZooKeeper connection back after 3.0 s"]
    assert running_clocks(state, T0 + 5) == []
    state, out = run(
        state,
        (T0 + 10, ConnectionSeen(0.0, model.SUSPENDED)),
        (T0 + 15, ConnectionSeen(0.0, model.LOST)),
        (T0 + 16, ConnectionSeen(0.0, model.LOST)),
        (T0 + 17, ConnectionSeen(0.0, model.CONNECTED)),
    )
    assert out == [
        "ZooKeeper connection lost; reconnecting",
        "ZooKeeper session expired; reconnecting with a new session",
        "ZooKeeper reconnected with a new session after 7.0 s; watches set again",
    ]


def test_notes_problems_and_summaries() -> None:
    state = healthy_cluster()
    state, events = reduce_all(
        state,
        [
            Note(T0 + 1, "SIGKILL the controller", "demo"),
            Note(T0 + 2, "broker 1 resigned", "log", "warn"),
            ProblemsSeen(T0 + 3, "topics", {"/x": "malformed data in znode /x"}),
            ProblemsSeen(T0 + 4, "topics", {"/x": "malformed data in znode /x"}),
            SummaryRequested(T0 + 5),
        ],
    )
    assert [(e.kind, e.severity, e.text) for e in events] == [
        ("demo", "info", "SIGKILL the controller"),
        ("log", "warn", "broker 1 resigned"),
        ("problem", "warn", "malformed data in znode /x"),
        (
            "summary",
            "info",
            "controller broker 1, epoch 5; 6 partitions in 1 topic: 6 online, 0 offline,"
            " 0 under-replicated; leaders by broker 1: 2, 2: 2, 3: 2",
        ),
    ]
    assert state.timeline[-4:] == tuple(events)


def test_a_line_read_late_takes_its_place_in_the_timeline() -> None:
    """A broker's log line is read a moment after it was written: the timeline shows it
    where its time puts it, before what ZooKeeper showed after it. Lines of one moment keep
    the order they came in."""
    state = model.initial_state(T0)
    state, _ = reduce_all(
        state,
        [Note(T0 + 1, "a", "zk"), Note(T0 + 3, "c", "zk"), Note(T0 + 3, "d", "zk")],
    )
    state, events = reduce_all(
        state, [Note(T0 + 2, "b1", "log"), Note(T0 + 3, "e", "log"), Note(T0 + 0.5, "z", "log")]
    )
    assert [e.text for e in events] == ["b1", "e", "z"]  # as they came, for the caller
    assert [e.text for e in state.timeline] == ["z", "a", "b1", "c", "d", "e"]
    # The usual case, each later than the last: added at the end.
    state, _ = reduce(state, Note(T0 + 4, "f"))
    assert state.timeline[-1].text == "f"


def test_the_timeline_is_bounded() -> None:
    state = model.initial_state(T0)
    for i in range(model.TIMELINE_MAX + 50):
        state, _ = reduce(state, Note(T0 + i, f"note {i}"))
    assert len(state.timeline) == model.TIMELINE_MAX
    assert state.timeline[-1].text == f"note {model.TIMELINE_MAX + 49}"


def test_durations_read_well() -> None:
    assert [model.fmt_duration(s) for s in (0.034, 3.25, 61, 3725, -1)] == [
        "0.03 s",
        "3.2 s",
        "1 min 01 s",
        "1 h 02 min",
        "0.00 s",
    ]


# --- properties -----------------------------------------------------------------------------

BROKER_IDS = (1, 2, 3, 4)
controller_obs = st.builds(
    ControllerSeen,
    st.just(0.0),
    st.one_of(st.none(), st.sampled_from(BROKER_IDS)),
    st.one_of(st.none(), st.integers(0, 6)),
)
brokers_obs = st.builds(lambda ids: brokers(*sorted(ids)), st.sets(st.sampled_from(BROKER_IDS)))
state_values = st.tuples(
    st.sampled_from((-2, -1, *BROKER_IDS)),
    st.integers(0, 3),
    st.lists(st.sampled_from(BROKER_IDS), max_size=4, unique=True).map(tuple),
)
partitions_obs = st.builds(
    lambda states, topics, deleting: replace(
        partitions(
            {k: v for k, v in states.items() if k[0] in topics},
            extra={k: (1, 2) for k in (("n", 0),) if "n" in topics},
        ),
        deleting=frozenset(deleting),
    ),
    st.dictionaries(
        st.tuples(st.sampled_from(("a", "b")), st.integers(0, 3)), state_values, max_size=8
    ),
    st.sets(st.sampled_from(("a", "b", "n"))),
    st.sets(st.sampled_from(("a", "n", "gone"))),  # topics queued for deletion
)
connection_obs = st.builds(
    ConnectionSeen, st.just(0.0), st.sampled_from((model.CONNECTED, model.SUSPENDED, model.LOST))
)
observations = st.lists(
    st.one_of(controller_obs, brokers_obs, partitions_obs, connection_obs), max_size=30
)


@settings(max_examples=300, deadline=None)
@given(observations)
def test_the_view_always_agrees_with_what_was_observed(obs_list: list[model.Observation]) -> None:
    state = model.initial_state(T0)
    last_controller: tuple[int | None, int | None] | None = None
    for i, generated in enumerate(obs_list):
        ts = T0 + i
        obs = at(ts, generated)
        before = state
        state, events = reduce(state, obs)
        # Applying the same observation again changes nothing and tells nothing.
        again, repeat_events = reduce(state, at(ts + 0.5, obs))
        assert repeat_events == []
        assert again.summary == state.summary
        if isinstance(obs, ControllerSeen):
            now = (obs.broker, obs.epoch)
            elected = [e for e in events if "elected controller" in e.text]
            if obs.broker is not None and last_controller is not None and now != last_controller:
                assert len(elected) == 1
                assert f"epoch {'?' if obs.epoch is None else obs.epoch}" in elected[0].text
            elif last_controller is not None and now == last_controller:
                assert events == []
            last_controller = now
            assert (state.controller is None) == (obs.broker is None)
            assert (state.no_controller_since is None) == (obs.broker is not None)
        # The summary adds up, and leaderless means what it says.
        s = state.summary
        assert (
            s.online + s.offline_count + s.no_state + s.deleting == s.total == len(state.partitions)
        )
        alive = state.alive if state.seen_brokers else None
        for tp, pv in state.partitions.items():
            assert pv.deleting == (tp.topic in state.deleting)
            if not pv.has_state or pv.leader == -2 or pv.deleting:
                assert pv.leaderless_since is None
                continue
            leaderless = pv.leader == -1 or (alive is not None and pv.leader not in alive)
            assert (pv.leaderless_since is not None) == leaderless, tp
            prev = before.partitions.get(tp)
            if leaderless and prev is not None and prev.leaderless_since is not None:
                assert pv.leaderless_since == prev.leaderless_since  # the clock keeps running
        assert set(s.offline) == {
            tp for tp, pv in state.partitions.items() if pv.leaderless_since is not None
        }
        assert len(state.timeline) <= model.TIMELINE_MAX
        assert all(e.ts == ts for e in events)


# --- text from outside ----------------------------------------------------------------------

# NUL (curses refuses it), BEL, ESC (an OSC retitling the window, a CSI clearing the screen),
# DEL and the 8-bit CSI: characters a broker registration's JSON may carry.
HOSTILE = "a\x00b\x07\x1b]0;owned\x07\x1b[2J\x7f\x9b2J"


def test_control_characters_from_znodes_and_logs_are_escaped() -> None:
    """Text read from ZooKeeper (a broker's host, a topic's name, a problem naming a znode)
    or a broker's log reaches the terminal through the state: its control characters are
    shown as \\xNN escapes, nowhere raw."""
    state = healthy_cluster()
    state, _ = reduce_all(
        state,
        [
            BrokersSeen(T0 + 1, {4: BrokerInfo(4, f"{HOSTILE}:9094", 104)}),
            partitions({(f"t{HOSTILE}", 0): (1, 0, (1, 2, 3))}),
            ProblemsSeen(T0 + 2, "topics", {"/x": f"malformed data in znode /x: {HOSTILE}"}),
            ControllerSeen(T0 + 3, 1, 5, f"malformed data in znode /controller: {HOSTILE}"),
            Note(T0 + 4, f"broker 4 at {HOSTILE}", "log"),
        ],
    )
    escaped = "a\\x00b\\x07\\x1b]0;owned\\x07\\x1b[2J\\x7f\\x9b2J"
    assert state.brokers[4].info is not None
    assert state.brokers[4].info.address == f"{escaped}:9094"
    assert TopicPartition(f"t{escaped}", 0) in state.partitions
    assert f"t{escaped}" in state.topics
    shown = [e.text for e in state.timeline]
    assert any(escaped in t for t in shown), shown
    for t in [*shown, state.brokers[4].info.address, *state.topics, *map(str, state.partitions)]:
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in t), repr(t)
    # Printable text is left as it is, non-ASCII included.
    assert printable("brøker-1.example:9092 ✓") == "brøker-1.example:9092 ✓"


# --- the incremental view ---------------------------------------------------------------------

FIXED_TPS = [TopicPartition(t, p) for t in ("a", "b") for p in range(4)]


def _fixed_read(
    states: Mapping[TopicPartition, tuple[int, int, tuple[int, ...]]], deleting: frozenset[str]
) -> PartitionsSeen:
    """Every read of the same topics, as the source hands them on between topic changes."""
    topics: dict[str, dict[int, tuple[int, ...]]] = {
        "a": dict.fromkeys(range(4), (1, 2, 3)),
        "b": dict.fromkeys(range(4), (2, 3, 4)),
    }
    topics["n"] = {0: (1, 2)}
    return PartitionsSeen(
        0.0,
        topics,
        {tp: LeaderAndIsr(*states[tp]) for tp in FIXED_TPS if tp in states},
        deleting,
    )


same_topics_obs = st.builds(
    _fixed_read,
    st.dictionaries(st.sampled_from(FIXED_TPS), state_values, max_size=8),
    st.sampled_from((frozenset(), frozenset(), frozenset(), frozenset({"a"}))),
)
incremental_observations = st.lists(
    st.one_of(same_topics_obs, same_topics_obs, same_topics_obs, brokers_obs, partitions_obs),
    max_size=40,
)


# Found by hypothesis: ISRs grown by as many partitions for two sets of brokers were named
# in the order the partitions were looked at, which differs between the two reducers.
TIED_GROWTHS = [
    partitions({(t, p): (-2, 0, ()) for t in ("a", "b") for p in range(4)}),
    partitions(
        {
            ("a", 2): (-2, 0, ()),
            ("b", 0): (-2, 0, ()),
            ("a", 3): (-2, 0, (1,)),
            ("b", 2): (-2, 0, (1,)),
            ("a", 0): (-2, 0, (1, 2)),
            ("a", 1): (-2, 0, (1, 2)),
            ("b", 1): (-2, 0, (1, 2, 3)),
            ("b", 3): (-2, 0, ()),
        }
    ),
]


@settings(max_examples=300, deadline=None)
@given(incremental_observations)
@example(TIED_GROWTHS)
def test_the_view_kept_up_to_date_equals_one_recomputed_from_scratch(
    obs_list: list[model.Observation],
) -> None:
    """The reducer updates only the partitions an observation changed (model._Index); a
    reducer given no index recomputes every partition's view and the summary. After any
    sequence the two agree: views (with their clocks), summary and events."""
    state = scratch = model.initial_state(T0)
    for i, generated in enumerate(obs_list):
        obs = at(T0 + i, generated)
        state, events = reduce(state, obs)
        scratch, scratch_events = reduce(replace(scratch, index=None), obs)
        assert dict(state.partitions) == dict(scratch.partitions)
        assert state.summary == scratch.summary
        assert sorted(texts(events)) == sorted(texts(scratch_events))

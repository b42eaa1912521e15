"""The watch screen's columns and headings during a failover: the controller's election
and earlier tenures, each broker's role and leaderships, each partition's leader and
leader epoch, what is counted when not listed, and how timeline lines are tagged."""

from __future__ import annotations

from watch import model
from watch.model import (
    LOST,
    BrokerInfo,
    BrokersSeen,
    ConnectionSeen,
    ControllerSeen,
    Event,
    Note,
    PartitionsSeen,
    WatchState,
    reduce_all,
)
from watch.screen import event_style, event_tag, screen_lines
from zkdata.znodes import LeaderAndIsr, TopicPartition

T0 = 1_800_000_000.0

Lines = list[tuple[str, str]]


def registered(*ids: int) -> BrokersSeen:
    return BrokersSeen(T0, {b: BrokerInfo(b, f"127.0.0.1:{9090 + b}", 500 + b) for b in ids})


def cluster(*more: model.Observation, n: int = 6) -> WatchState:
    """Controller 1 (epoch 4), brokers 1-3, topic orders led round-robin with leader epoch
    3, then `more`."""
    topics = {"orders": {p: (p % 3 + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1) for p in range(n)}}
    states = {
        TopicPartition("orders", p): LeaderAndIsr(r[0], 3, r) for p, r in topics["orders"].items()
    }
    state, _ = reduce_all(
        model.initial_state(T0),
        [
            ControllerSeen(T0, 1, 4, elected_at=T0 - 60),
            registered(1, 2, 3),
            PartitionsSeen(T0, topics, states),
            *more,
        ],
    )
    return state


def rows_of(lines: Lines, prefix: str) -> list[tuple[list[str], str]]:
    return [(t.split(), s) for t, s in lines if t.startswith(prefix)]


def test_a_partition_row_shows_its_leader_and_leader_epoch() -> None:
    topics = {"orders": {0: (1, 2, 3), 1: (1, 2, 3)}}
    states = {
        TopicPartition("orders", 0): LeaderAndIsr(2, 9, (2, 3)),
        TopicPartition("orders", 1): LeaderAndIsr(-1, 12, (1,)),
    }
    state = cluster(PartitionsSeen(T0 + 1, topics, states))
    lines = screen_lines(state, T0 + 2, 50, 160)
    [(row0, _)] = rows_of(lines, "  orders-0 ")
    [(row1, style1)] = rows_of(lines, "  orders-1 ")
    assert row0[:5] == ["orders-0", "2", "9", "1,2,3", "2,3"]
    assert row1[:5] == ["orders-1", "none", "12", "1,2,3", "1"]
    assert style1 == "bad"


def test_the_partitions_heading_is_an_alarm_while_one_is_offline() -> None:
    lines = screen_lines(cluster(), T0 + 1, 50, 160)
    [heading] = [(t, s) for t, s in lines if t.startswith("PARTITIONS  ")]
    assert heading[1] == "heading"
    lines = screen_lines(cluster(registered(1, 3)), T0 + 1, 50, 160)
    [heading] = [(t, s) for t, s in lines if t.startswith("PARTITIONS  ")]
    assert heading == ("PARTITIONS  6 in 1 topic: 4 online, 2 offline, 4 under-replicated", "bad")


def test_the_controller_line_tells_an_election_from_one_found_in_place() -> None:
    state = cluster()
    [line] = [t for t, _ in screen_lines(state, T0 + 1, 50, 200) if t.startswith("CONTROLLER")]
    assert line.endswith("(1 min 01 s) (already controller when the watch began)")
    state = cluster(ControllerSeen(T0 + 10, None, 4), ControllerSeen(T0 + 12.5, 2, 5))
    lines = screen_lines(state, T0 + 14, 50, 200)
    [line] = [t for t, _ in lines if t.startswith("CONTROLLER")]
    assert line.startswith("CONTROLLER  broker 2   epoch 5   since ")
    assert line.endswith("(1.5 s); elected after 2.5 s without a controller")
    # The earlier tenure is shown with how long it lasted, not how long ago it began.
    [earlier] = [t for t, _ in lines if t.startswith("  earlier epochs  ")]
    assert earlier.startswith("  earlier epochs  4: broker 1 ")
    assert earlier.endswith(" (1 min 10 s)")


def test_each_broker_row_shows_its_leaderships_and_the_controller() -> None:
    state = cluster(n=7)  # broker 1 leads 3, brokers 2 and 3 lead 2 each
    lines = screen_lines(state, T0 + 1, 50, 160)
    rows = {r[0]: (r, s) for r, s in rows_of(lines, "  ") if r and r[0] in ("1", "2", "3")}
    assert rows["1"] == (["1", "127.0.0.1:9091", "501", "alive", "3", "controller"], "bold")
    assert rows["2"] == (["2", "127.0.0.1:9092", "502", "alive", "2"], "normal")
    assert rows["3"] == (["3", "127.0.0.1:9093", "503", "alive", "2"], "normal")


def test_partitions_not_listed_are_counted_by_kind() -> None:
    # 40 partitions, broker 2 lost: about a third offline, the rest under-replicated.
    topics = {"orders": {p: (p % 3 + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1) for p in range(40)}}
    topics["going"] = {p: (1, 2, 3) for p in range(5)}
    states = {
        TopicPartition("orders", p): LeaderAndIsr(r[0], 3, r) for p, r in topics["orders"].items()
    }
    states.update({TopicPartition("going", p): LeaderAndIsr(1, 0, (1, 2, 3)) for p in range(5)})
    state = cluster(
        PartitionsSeen(T0, topics, states, deleting=frozenset({"going"})),
        registered(1, 3),
        n=0,
    )
    s = state.summary
    assert (s.total, s.offline_count, s.under_replicated_count, s.deleting) == (45, 13, 27, 5)
    lines = screen_lines(state, T0 + 1, 30, 160)
    [(more, _)] = [(t, st) for t, st in lines if t.startswith("  ... ")]
    listed = len(rows_of(lines, "  orders-"))
    assert more == (f"  ... {40 - listed:,} more offline or under-replicated; 5 being deleted")
    # With one broker back, some are healthy: counted without those being deleted.
    state = cluster(
        PartitionsSeen(T0, topics, {**states}, deleting=frozenset({"going"})),
        n=0,
    )
    lines = screen_lines(state, T0 + 1, 30, 160)
    [more] = [t for t, _ in lines if t.startswith("  ... ")]
    assert more == "  ... 40 healthy partitions not listed; 5 being deleted"


def test_partitions_are_all_listed_as_soon_as_their_rows_fit() -> None:
    state = cluster(n=30)
    fits = [
        rows
        for rows in range(20, 80)
        if len(rows_of(screen_lines(state, T0 + 1, rows, 160), "  orders-")) == 30
    ]
    assert fits
    # The fewest rows that list all 30 are all used: no row was left empty while the
    # partitions were summarised in one line.
    lines = screen_lines(state, T0 + 1, fits[0], 160)
    assert len(lines) == fits[0]
    assert not any(t.startswith("  ... ") for t, _ in lines)
    fewer = screen_lines(state, T0 + 1, fits[0] - 1, 160)
    assert any(t.startswith("  ... ") for t, _ in fewer)


def test_the_timeline_shows_the_newest_events_tagged_by_source() -> None:
    notes = [Note(T0 + 1 + i, f"note {i}") for i in range(40)]
    state = cluster(*notes, Note(T0 + 50, "a broker said so", source="log"))
    lines = screen_lines(state, T0 + 51, 30, 160)
    timeline = [t for t, _ in lines[[t for t, _ in lines].index("TIMELINE") + 1 :]]
    assert timeline[-1].endswith("  log   a broker said so")
    assert timeline[-2].endswith("  demo  note 39")
    assert event_tag(Event(T0, "controller", "x")) == "zk"


def test_good_news_is_styled_as_good() -> None:
    assert event_style(Event(T0, "partition", "back online", "good")) == "good"
    assert event_style(Event(T0, "demo", "a step", "info")) == "note"
    assert event_style(Event(T0, "log", "a line", "info")) == "dim"
    assert event_style(Event(T0, "partition", "started", "info")) == "normal"


def test_an_expired_session_is_named_in_the_title() -> None:
    state = cluster(ConnectionSeen(T0 + 1, LOST))
    title = screen_lines(state, T0 + 3, 50, 200)[0][0]
    assert "ZooKeeper session expired 2.0 s ago; reconnecting" in title


def test_a_line_exactly_as_wide_as_the_screen_is_not_cut() -> None:
    state = cluster()

    def controller_line(cols: int) -> str:
        lines = screen_lines(state, T0 + 1, 50, cols)
        return next(t for t, _ in lines if t.startswith("CONTROLLER"))

    whole = controller_line(400)
    # A screen of cols columns has cols - 1 to write in (curses spares the last cell).
    assert controller_line(len(whole) + 1) == whole
    assert controller_line(len(whole)) == whole[: len(whole) - 2] + "~"


def test_brokers_beyond_the_rows_for_them_are_counted() -> None:
    state = cluster(registered(*range(1, 14)))
    lines = [t for t, _ in screen_lines(state, T0 + 1, 80, 160)]
    assert "  ... and 1 more brokers" in lines


def test_partitions_of_a_topic_being_deleted_are_marked_so_even_without_a_state() -> None:
    topics = {"going": {0: (1, 2, 3), 1: (1, 2, 3)}}
    states = {TopicPartition("going", 0): LeaderAndIsr(-1, 4, (1,))}
    state = cluster(PartitionsSeen(T0 + 1, topics, states, deleting=frozenset({"going"})))
    lines = screen_lines(state, T0 + 2, 50, 160)
    for p in (0, 1):
        [(row, style)] = [(t, s) for t, s in lines if t.startswith(f"  going-{p} ")]
        assert row.endswith("being deleted"), row
        assert style == "dim"


def test_a_leader_of_minus_two_is_shown_as_deleting() -> None:
    topics = {"going": {0: (1, 2, 3)}}
    states = {TopicPartition("going", 0): LeaderAndIsr(-2, 4, (1,))}
    state = cluster(PartitionsSeen(T0 + 1, topics, states))
    [(row, style)] = [
        (t, s) for t, s in screen_lines(state, T0 + 2, 50, 160) if t.startswith("  going-0 ")
    ]
    assert row.split()[1:3] == ["deleting", "4"]
    assert row.endswith("being deleted")
    assert style == "dim"

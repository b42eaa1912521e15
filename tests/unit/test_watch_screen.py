"""The watch screen: what it shows, and that a frame's cost does not grow with the cluster."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace

from watch import model
from watch.model import (
    BrokerInfo,
    BrokersSeen,
    ConnectionSeen,
    ControllerSeen,
    Note,
    PartitionsSeen,
    PartitionView,
    WatchState,
    reduce_all,
)
from watch.screen import screen_lines
from zkdata.znodes import LeaderAndIsr, TopicPartition

T0 = 1_800_000_000.0


def cluster(n_partitions: int, *, live: tuple[int, ...] = (1, 2, 3)) -> WatchState:
    """Brokers 1-3 registered, then those not in `live` lost; partitions led round-robin."""
    topics = {
        "orders": {p: (p % 3 + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1) for p in range(n_partitions)}
    }
    states = {
        TopicPartition("orders", p): LeaderAndIsr(r[0], 3, r) for p, r in topics["orders"].items()
    }
    registered = {b: BrokerInfo(b, f"127.0.0.1:{9090 + b}", 4294967296 + b) for b in (1, 2, 3)}
    state, _ = reduce_all(
        model.initial_state(T0),
        [
            ControllerSeen(T0, 1, 4),
            BrokersSeen(T0, registered),
            PartitionsSeen(T0, topics, states),
            BrokersSeen(T0 + 1, {b: i for b, i in registered.items() if b in live}),
            Note(T0 + 1, "a note"),
        ],
    )
    return state


def text(lines: list[tuple[str, str]]) -> str:
    return "\n".join(t for t, _ in lines)


def test_a_small_cluster_is_listed_whole() -> None:
    state = cluster(6)
    lines = screen_lines(state, T0 + 2, 50, 160, title="127.0.0.1:2181/demo")
    screen = text(lines)
    assert lines[0][0].startswith("zkctl watch  127.0.0.1:2181/demo")
    assert "ZooKeeper connected" in lines[0][0]
    assert "CONTROLLER  broker 1   epoch 4" in screen
    assert "PARTITIONS  6 in 1 topic: 6 online, 0 offline, 0 under-replicated" in screen
    for p in range(6):
        assert f"  orders-{p} " in screen
    assert "4294967297" in screen  # broker 1's epoch
    assert "a note" in screen
    assert len(lines) <= 50
    assert all(len(t) <= 159 for t, _ in lines)


def test_offline_and_under_replicated_partitions_stand_out() -> None:
    state = cluster(6, live=(1, 3))
    lines = screen_lines(state, T0 + 3.5, 50, 160)
    by_text = dict(lines)
    offline = [t for t in by_text if "OFFLINE for 2.5 s (leader 2 is down)" in t]
    assert [t.split()[0] for t in offline] == ["orders-1", "orders-4"]
    assert all(by_text[t] == "bad" for t in offline)
    urp = [t for t in by_text if t.endswith("under-replicated") and t.startswith("  orders")]
    assert len(urp) == 4
    assert all(by_text[t] == "warn" for t in urp)
    assert ("!! partition orders-1 without leader for 2.5 s", "alert") in lines
    assert any(t.startswith("BROKERS  2 registered, 1 not registered") for t in by_text)
    assert any("LOST for 2.5 s" in t for t in by_text)


def test_a_cluster_without_controller_shows_the_running_clock() -> None:
    state, _ = reduce_all(cluster(3), [ControllerSeen(T0 + 2, None, 4)])
    screen = text(screen_lines(state, T0 + 5.25, 40, 120))
    assert "!! no controller for 3.2 s (last: broker 1, epoch 4)" in screen
    assert "CONTROLLER  none for 3.2 s" in screen
    assert "earlier epochs  4: broker 1" in screen


def test_a_lost_zookeeper_connection_is_on_screen() -> None:
    state, _ = reduce_all(cluster(3), [ConnectionSeen(T0 + 2, model.SUSPENDED)])
    lines = screen_lines(state, T0 + 4, 40, 160)
    assert "ZooKeeper connection lost 2.0 s ago; reconnecting" in lines[0][0]
    assert (
        "!! ZooKeeper connection lost 2.0 s ago; reconnecting (what is shown may be stale)",
        "alert",
    ) in lines


class NoIteration(Mapping[TopicPartition, PartitionView]):
    """Partitions that may be looked up but not walked: a frame must not visit them all."""

    def __init__(self, inner: Mapping[TopicPartition, PartitionView]) -> None:
        self.inner = inner
        self.lookups = 0

    def __getitem__(self, key: TopicPartition) -> PartitionView:
        self.lookups += 1
        return self.inner[key]

    def __iter__(self) -> Iterator[TopicPartition]:
        raise AssertionError("the screen walked every partition")

    def __len__(self) -> int:
        return len(self.inner)


def test_ten_thousand_partitions_are_summarised_in_a_frame_that_does_not_walk_them() -> None:
    state = cluster(10_000, live=(1, 3))
    s = state.summary
    assert (s.total, s.offline_count, s.under_replicated_count) == (10_000, 3_333, 6_667)
    guarded = NoIteration(state.partitions)
    lines = screen_lines(replace(state, partitions=guarded), T0 + 2, 50, 160, title="zk")
    screen = text(lines)
    assert len(lines) == 50
    assert (
        "PARTITIONS  10,000 in 1 topic: 6,667 online, 3,333 offline, 6,667 under-replicated"
        in screen
    )
    assert "!! 3,333 partitions without leader, the longest for 1.0 s" in screen
    listed = [t for t, _ in lines if t.startswith("  orders-")]
    assert listed
    assert all("OFFLINE" in t for t in listed)  # the worst first
    assert any(t.startswith("  ... ") and "more offline or under-replicated" in t for t, _ in lines)
    assert "TIMELINE" in screen
    # Only the rows on screen were looked up (each about twice), not 10,000 partitions.
    assert guarded.lookups <= 2 * len(lines)


def test_tiny_and_narrow_screens_do_not_break() -> None:
    state = cluster(200, live=(1,))
    for rows, cols in ((1, 10), (5, 40), (12, 60), (24, 80)):
        lines = screen_lines(state, T0 + 2, rows, cols)
        assert len(lines) <= rows
        assert all(len(t) <= cols - 1 for t, _ in lines)


def test_the_demo_banner_has_its_own_clock() -> None:
    lines = screen_lines(
        cluster(3), T0 + 10, 40, 160, banner="broker 2 got a SIGKILL", banner_since=T0 + 7.5
    )
    assert lines[1] == ("broker 2 got a SIGKILL 2.5 s ago", "note")
    lines = screen_lines(
        cluster(3), T0 + 10, 40, 160, banner="killed {elapsed} ago; wait", banner_since=T0 + 9
    )
    assert lines[1] == ("killed 1.0 s ago; wait", "note")

"""What `zkctl watch` reads from ZooKeeper (watch/zk_source.py) and what the view makes of
it, over an in-memory ZooKeeper: a znode that turns unreadable (someone's bad write) is
reported, and is not taken for one that is gone or changed."""

from __future__ import annotations

from tests.unit.fake_zk import FakeZk
from watch import model
from watch.model import WatchState, running_clocks
from watch.zk_source import ALL_GROUPS, ZkSource
from zkdata import paths
from zkdata.znodes import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    TopicAssignment,
    TopicPartition,
    encode_broker,
    encode_controller,
    encode_controller_epoch,
    encode_log_dir_event,
    encode_partition_state,
    encode_topic,
)

T0 = 1_800_000_000.0
T0_P = TopicPartition("t", 0)


class Watched:
    """A ZkSource over a FakeZk, its observations reduced into the view's state."""

    def __init__(self, zk: FakeZk, per_partition_watches: int = 1000) -> None:
        self.zk = zk
        self.now = T0
        self.source = ZkSource(
            zk,  # type: ignore[arg-type]
            lambda _: None,
            per_partition_watches=per_partition_watches,
            clock=lambda: self.now,
        )
        self.state: WatchState = model.initial_state(T0)
        self.events: list[model.Event] = []

    def read(self, dt: float = 1.0) -> list[model.Event]:
        """Everything read again (as after a watch), `dt` seconds on."""
        self.now += dt
        self.state, events = model.reduce_all(self.state, self.source._refresh(ALL_GROUPS))
        self.events.extend(events)
        return events

    def fired(self, dt: float = 1.0) -> list[model.Event]:
        """What the watches that fired marked dirty read again, `dt` seconds on (the
        reader thread's round, without the thread)."""
        self.now += dt
        groups = frozenset(self.source._dirty)
        self.source._dirty.clear()
        self.state, events = model.reduce_all(self.state, self.source._refresh(groups))
        self.events.extend(events)
        return events


def a_cluster(leader: int, isr: tuple[int, ...], partitions: int = 1) -> FakeZk:
    """Brokers 1 and 2, broker 1 the controller (epoch 5), topic t: t-0 with `leader` and
    `isr`, any others led by broker 1 with both in the ISR."""
    zk = FakeZk()
    for path in (paths.BROKER_IDS, paths.BROKER_TOPICS, paths.topic_partitions("t")):
        zk.put(path, b"")
    for b in (1, 2):
        reg = BrokerRegistration(b, (EndPoint("PLAINTEXT", "127.0.0.1", 9090 + b),))
        zk.put(paths.broker(b), encode_broker(reg))
    zk.put(paths.CONTROLLER, encode_controller(1))
    zk.put(paths.CONTROLLER_EPOCH, encode_controller_epoch(5))
    assignment = dict.fromkeys(range(partitions), (1, 2))
    zk.put(paths.topic("t"), encode_topic(TopicAssignment("t", assignment)))
    for p in range(partitions):
        lai = LeaderAndIsr(leader, 3, isr) if p == 0 else LeaderAndIsr(1, 0, (1, 2))
        zk.put(paths.partition("t", p), b"")
        zk.put(paths.partition_state("t", p), encode_partition_state(lai, 5))
    return zk


def texts(events: list[model.Event], kind: str | None = None) -> list[str]:
    return [e.text for e in events if kind is None or e.kind == kind]


def test_an_offline_partition_whose_state_turns_unreadable_stays_offline() -> None:
    """The unreadable state was left out of what was read, so the view took the partition
    for a new one without a state znode: no longer offline, its without-leader clock gone,
    and "t-0 started" when the state was repaired."""
    zk = a_cluster(-1, (2,))
    w = Watched(zk)
    w.read()
    assert w.state.summary.offline_count == 1
    lost_at = w.state.partitions[T0_P].leaderless_since
    assert lost_at is not None

    zk.set_data(paths.partition_state("t", 0), b'{"leader":')  # someone's bad write
    events = w.read()
    assert [t for t in texts(events, "problem") if paths.partition_state("t", 0) in t]
    pv = w.state.partitions[T0_P]
    assert (pv.has_state, pv.leader, pv.leaderless_since) == (True, -1, lost_at)
    assert (w.state.summary.offline_count, w.state.summary.no_state) == (1, 0)
    clocks = running_clocks(w.state, w.now)
    assert any(c.startswith("partition t-0 without leader") for c in clocks), clocks

    zk.set_data(paths.partition_state("t", 0), encode_partition_state(LeaderAndIsr(-1, 3, (2,)), 5))
    assert texts(w.read(), "partition") == []
    assert w.state.partitions[T0_P].leaderless_since == lost_at


def test_an_unreadable_epoch_while_the_controller_stays_is_no_failover() -> None:
    """A malformed /controller_epoch was read as no epoch: the view logged the controller's
    resignation and a new election, and kept a tenure that never ended."""
    zk = a_cluster(1, (1, 2))
    w = Watched(zk)
    w.read()
    assert w.state.controller is not None
    assert w.state.controller.epoch == 5

    zk.set_data(paths.CONTROLLER_EPOCH, b"five")  # someone's bad write
    events = w.read()
    assert [t for t in texts(events, "problem") if paths.CONTROLLER_EPOCH in t]
    assert texts(events, "controller") == []
    assert w.state.history == ()
    assert w.state.controller is not None
    assert w.state.controller.epoch == 5
    assert w.state.epoch == 5

    zk.set_data(paths.CONTROLLER_EPOCH, encode_controller_epoch(5))  # repaired
    assert texts(w.read(), "controller") == []
    assert w.state.history == ()


def test_an_unreadable_state_is_watched_when_not_every_state_is() -> None:
    """Kept as it was, a healthy partition's unreadable state is no unsettled partition,
    yet its repair is to be seen."""
    zk = a_cluster(1, (1, 2), partitions=20)
    w = Watched(zk, per_partition_watches=10)
    w.read()
    state_path = paths.partition_state("t", 17)
    assert state_path not in w.source.armed_paths()
    zk.set_data(state_path, b"{")
    w.read()
    assert state_path in w.source.armed_paths()


def test_a_registration_with_control_characters_reaches_no_terminal_raw() -> None:
    """A host the codec accepts (any valid UTF-8) carrying ESC and BEL: the plain timeline
    and the full-screen view show it escaped, so a registration cannot clear the screen
    or retitle the window; a NUL, which curses refuses, likewise."""
    from watch import render_plain
    from watch.screen import screen_lines

    w = Watched(a_cluster(leader=1, isr=(1, 2)))
    w.read()
    host = "\x1b]0;owned\x07\x1b[2J\x00"
    reg = BrokerRegistration(3, (EndPoint("PLAINTEXT", host, 9093),))
    w.zk.put(paths.broker(3), encode_broker(reg))
    lines: list[str] = []
    render_plain.write_events(w.read(), lines.append)
    lines += [t for t, _ in screen_lines(w.state, w.now, 40, 120, title="t")]
    assert any("\\x1b]0;owned\\x07\\x1b[2J\\x00:9093" in line for line in lines), lines
    assert not [ln for ln in lines if any(ord(c) < 0x20 for c in ln)], lines


def test_a_topic_queued_for_deletion_is_shown_as_being_deleted() -> None:
    """Kafka 2.8 deletes a topic (TopicDeletionManager) by taking its replicas offline,
    which leaves leader -1 in its state znodes, and then removing its znodes: no leader -2
    is written to ZooKeeper. The watch read no /admin/delete_topics and showed the topic's
    partitions offline, with an alert and a running clock, as if they had failed."""
    zk = a_cluster(1, (1, 2))
    zk.put(paths.DELETE_TOPICS, b"")
    w = Watched(zk)
    w.read()
    assert paths.DELETE_TOPICS in w.zk.handlers  # its children are watched
    zk.put(paths.delete_topic("t"), b"")
    zk.set_data(paths.partition_state("t", 0), encode_partition_state(LeaderAndIsr(-1, 4, (2,)), 5))
    events = w.read()
    assert texts(events) == ["topic t marked for deletion: 1 partition"]
    s = w.state.summary
    assert (s.offline_count, s.deleting, s.under_replicated_count) == (0, 1, 0)
    assert running_clocks(w.state, w.now + 10) == []

    for path in (
        paths.partition_state("t", 0),
        paths.partition("t", 0),
        paths.topic_partitions("t"),
        paths.topic("t"),
        paths.delete_topic("t"),
    ):
        del zk.nodes[path]
    assert texts(w.read()) == ["topic t deleted"]
    assert w.state.topics == {}
    assert w.state.partitions == {}
    assert w.state.summary.deleting == 0


def test_a_znode_broken_again_after_its_repair_is_reported_again() -> None:
    """Problems were reported once per text, ever: a topic znode repaired and then broken
    again the same way was not reported the second time."""
    zk = a_cluster(1, (1, 2))
    w = Watched(zk)
    w.read()
    good = zk.nodes[paths.topic("t")][0]
    for _ in range(2):
        zk.set_data(paths.topic("t"), b"{not json")  # someone's bad write
        problems = texts(w.read(), "problem")
        assert len(problems) == 1, problems
        assert paths.topic("t") in problems[0]
        assert texts(w.read(), "problem") == []  # still broken: not again
        zk.set_data(paths.topic("t"), good)  # repaired
        assert texts(w.read(), "problem") == []


def test_many_unreadable_znodes_are_not_reported_again_while_they_stay_so() -> None:
    """Past 1,000 distinct problem texts every one was forgotten at once: with 1,001
    unreadable registrations, each read reported nearly all of them again."""
    zk = a_cluster(1, (1, 2))
    for b in range(100, 1101):
        zk.put(paths.broker(b), b"{")
    w = Watched(zk)
    problems = texts(w.read(), "problem")  # one line for many, as for other changes
    assert len(problems) == 1, problems[:3]
    assert problems[0].endswith(" (and 1,000 more)")
    for _ in range(3):
        assert texts(w.read(), "problem") == []
    # One repaired and broken again is reported again, alone.
    zk.set_data(paths.broker(100), b"{")
    zk.set_data(
        paths.broker(100), encode_broker(BrokerRegistration(100, (EndPoint("PLAINTEXT", "h", 1),)))
    )
    assert texts(w.read(), "problem") == []
    zk.set_data(paths.broker(100), b"{")
    problems = texts(w.read(), "problem")
    assert len(problems) == 1, problems
    assert paths.broker(100) in problems[0]


def test_a_topic_being_deleted_takes_no_canary_from_a_partition_about_to_be_rewritten() -> None:
    """Above the per-partition limit: the partitions of a deletion held up (a replica's
    broker down), leaderless and with short ISRs for as long, filled the kinds of canary
    meant for partitions the controller is about to rewrite, so an offline partition of
    another topic was not watched and its new leader went unseen."""
    zk = a_cluster(1, (1, 2))
    zk.put(paths.DELETE_TOPICS, b"")
    zk.put(paths.delete_topic("a"), b"")
    zk.put(paths.topic("a"), encode_topic(TopicAssignment("a", dict.fromkeys(range(20), (1, 2)))))
    zk.put(paths.topic_partitions("a"), b"")
    for p in range(20):
        zk.put(paths.partition("a", p), b"")
        zk.put(paths.partition_state("a", p), encode_partition_state(LeaderAndIsr(-1, 1, (2,)), 5))
    t0 = paths.partition_state("t", 0)
    zk.set_data(t0, encode_partition_state(LeaderAndIsr(-1, 4, (2,)), 5))  # offline
    w = Watched(zk, per_partition_watches=10)
    w.read()
    assert w.state.summary.deleting == 20
    assert w.state.summary.offline_count == 1
    assert t0 in w.source.armed_paths()


def test_a_log_directory_failure_is_seen_though_no_canary_was_on_the_failed_directory() -> None:
    """Kafka 2.8: a broker whose log directory failed writes a log_dir_event_ child under
    /log_dir_event_notification, and the controller (LogDirEventNotificationHandler) takes
    that broker's replicas on the directory offline, electing new leaders. Above the
    per-partition limit only canaries are watched: with none of them on the failed
    directory, the new leaders went unseen until some other watch fired."""
    zk = a_cluster(1, (1, 2), partitions=20)
    zk.put(paths.LOG_DIR_EVENT_NOTIFICATION, b"")
    w = Watched(zk, per_partition_watches=10)
    w.read()
    assert paths.LOG_DIR_EVENT_NOTIFICATION in zk.handlers  # its children are watched
    armed = w.source.armed_paths()
    failed = [
        TopicPartition("t", p) for p in range(20) if paths.partition_state("t", p) not in armed
    ]
    assert failed  # broker 1's partitions on the failed directory: no canary among them
    for tp in failed:
        lai = LeaderAndIsr(2, 1, (2,))
        zk.set_data(paths.partition_state(tp.topic, tp.partition), encode_partition_state(lai, 5))
    zk.put(paths.log_dir_event_notification("log_dir_event_0000000000"), encode_log_dir_event(1))
    zk.fire(paths.LOG_DIR_EVENT_NOTIFICATION, "CHILD")
    w.fired()
    assert {w.state.partitions[tp].leader for tp in failed} == {2}

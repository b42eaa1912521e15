"""What `zkctl watch` reads from ZooKeeper and which watches it keeps (watch/zk_source.py),
read by read over an in-memory ZooKeeper: each watch armed once and re-armed when it
fires, a change between a read and the arming of its watch not missed, the handlers of a
deleted topic dropped, and what a registration or /controller says taken as Kafka 2.8
writes it."""

from __future__ import annotations

from collections.abc import Iterable

from kazoo.protocol.states import ZnodeStat

from tests.unit.fake_zk import FakeZk
from tests.unit.test_watch_source import T0_P, Watched, a_cluster
from watch.model import BrokersSeen, ControllerSeen
from watch.zk_source import ALL_GROUPS, PARTITIONS, TOPICS, ZkSource
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
    encode_partition_state,
    encode_topic,
)


class Recording(FakeZk):
    """A FakeZk that records each read (its kind, paths and whether it set a watch), and
    can run a change (once) just before the first read that sets a watch on `change_on`."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, tuple[str, ...], bool]] = []
        self.change_on = ""
        self.change: list[tuple[str, bytes]] = []

    def _before(self, kind: str, path_list: Iterable[str], watch: bool) -> None:
        got = tuple(path_list)
        self.reads.append((kind, got, watch))
        if watch and self.change_on in got and self.change:
            for path, data in self.change:
                self.set_data(path, data)
            self.change = []

    def get_many(
        self, path_list: Iterable[str], *, watch: bool = False, batch: int = 0
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        path_list = list(path_list)
        self._before("get_many", path_list, watch)
        return super().get_many(path_list, watch=watch, batch=batch)

    def get_children(self, path: str, *, watch: bool = False) -> list[str] | None:
        self._before("get_children", [path], watch)
        return super().get_children(path, watch=watch)

    def exists(self, path: str, *, watch: bool = False, watcher: object = None) -> ZnodeStat | None:
        self._before("exists", [path], watch)
        return super().exists(path, watch=watch)

    def watched(self) -> set[str]:
        return {p for _kind, got, watch in self.reads if watch for p in got}


def recording_cluster(partitions: int = 1) -> Recording:
    zk = Recording()
    zk.nodes = a_cluster(1, (1, 2), partitions).nodes
    return zk


def test_every_znode_the_view_follows_is_read_with_a_watch() -> None:
    zk = recording_cluster()
    for path in (paths.ISR_CHANGE_NOTIFICATION, paths.LOG_DIR_EVENT_NOTIFICATION):
        zk.put(path, b"")
    Watched(zk).read()
    assert {
        paths.CONTROLLER,
        paths.CONTROLLER_EPOCH,
        paths.BROKER_IDS,
        paths.broker(1),
        paths.broker(2),
        paths.BROKER_TOPICS,
        paths.topic("t"),
        paths.partition_state("t", 0),
        paths.ISR_CHANGE_NOTIFICATION,
        paths.LOG_DIR_EVENT_NOTIFICATION,
        paths.REASSIGN_PARTITIONS,
        paths.PREFERRED_REPLICA_ELECTION,
    } <= zk.watched()
    for path in zk.watched():  # each with our handler, once, to hear it fire
        assert len(zk.handlers.get(path, [])) == 1, path


def test_a_watch_still_armed_is_not_armed_again() -> None:
    """A one-shot watch stays until it fires: re-reading must not set another on each
    topic and state znode (a round trip each, above the limit ten thousand)."""
    zk = recording_cluster(partitions=3)
    w = Watched(zk)
    w.read()
    zk.reads.clear()
    w.read()
    assert paths.topic("t") not in zk.watched()
    assert not [p for p in zk.watched() if p.endswith("/state")]
    for path in (paths.topic("t"), paths.partition_state("t", 1)):
        assert len(zk.handlers[path]) == 1, path
    zk.fire(paths.partition_state("t", 1), "CHANGED")  # fired: no longer armed
    assert paths.partition_state("t", 1) not in w.source.armed_paths()
    zk.reads.clear()
    w.fired()
    assert paths.partition_state("t", 1) in zk.watched()
    assert paths.partition_state("t", 1) in w.source.armed_paths()


def test_nothing_changed_since_the_read_leaves_nothing_to_read_again() -> None:
    w = Watched(recording_cluster(partitions=3))
    w.read()
    assert w.source._dirty == set()


def test_a_state_changed_between_its_read_and_its_watch_is_read_again() -> None:
    """The watch is set after the read: a change in between fires no watch, so the
    source reads again, or the new leader would not be seen until something else fires."""
    zk = recording_cluster()
    state = paths.partition_state("t", 0)
    zk.change_on = state
    zk.change = [(state, encode_partition_state(LeaderAndIsr(2, 4, (2,)), 5))]
    w = Watched(zk)
    w.read()
    assert w.state.partitions[T0_P].leader == 1
    assert PARTITIONS in w.source._dirty
    w.fired()
    assert w.state.partitions[T0_P].leader == 2


def test_a_topic_changed_between_its_read_and_its_watch_is_read_again() -> None:
    """A partition added in between: the topic and its new partition are read again."""
    zk = recording_cluster()
    zk.change_on = paths.topic("t")
    grown = TopicAssignment("t", {0: (1, 2), 1: (2, 1)})
    zk.change = [(paths.topic("t"), encode_topic(grown))]
    zk.put(paths.partition("t", 1), b"")
    zk.put(paths.partition_state("t", 1), encode_partition_state(LeaderAndIsr(2, 0, (2, 1)), 5))
    w = Watched(zk)
    w.read()
    assert TopicPartition("t", 1) not in w.state.partitions
    assert w.source._dirty == {TOPICS}
    w.fired()
    assert w.state.partitions[TopicPartition("t", 1)].leader == 2


def test_a_watch_that_could_not_be_set_is_set_at_the_next_read() -> None:
    zk = recording_cluster()
    w = Watched(zk)
    w.read()
    state = paths.partition_state("t", 0)
    zk.fire(state, "CHANGED")
    src = w.source
    src._dirty.clear()
    zk.fail_next = []
    # The state read goes through; the arming read after it fails.
    real = zk.get_many

    def failing_arm(
        path_list: Iterable[str], *, watch: bool = False, batch: int = 0
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        if watch:
            raise TimeoutError("no answer")
        return real(path_list, watch=watch, batch=batch)

    zk.get_many = failing_arm  # type: ignore[method-assign]
    try:
        src._read_partitions()
    except TimeoutError:
        pass
    else:
        raise AssertionError("the failure was swallowed")
    assert state not in src.armed_paths()
    del zk.get_many
    src._read_partitions()
    assert state in src.armed_paths()


def test_a_deleted_topic_leaves_no_handler_and_a_topic_created_again_is_watched() -> None:
    zk = recording_cluster(partitions=2)
    w = Watched(zk)
    w.read()
    topic_paths = [paths.topic("t"), paths.partition_state("t", 0), paths.partition_state("t", 1)]
    for path in topic_paths:
        assert len(zk.handlers[path]) == 1, path
    saved = {p: zk.nodes.pop(p) for p in list(zk.nodes) if p.startswith(paths.topic("t"))}
    w.read()
    assert w.state.topics == {}
    for path in topic_paths:
        assert zk.handlers.get(path, []) == [], path
        assert path not in w.source.armed_paths(), path
    zk.nodes.update(saved)  # created again under the name
    zk.reads.clear()
    w.read()
    assert set(topic_paths) <= zk.watched()
    for path in topic_paths:
        assert len(zk.handlers[path]) == 1, path
        assert path in w.source.armed_paths(), path


def test_an_unreadable_topic_keeps_its_partitions() -> None:
    """Kafka 2.8's controller keeps the assignment it read when a topic znode cannot be
    decoded; so does the view: the topic is unreadable, not deleted."""
    zk = a_cluster(1, (1, 2), partitions=2)
    w = Watched(zk)
    w.read()
    zk.set_data(paths.topic("t"), b"{not json")
    events = w.read()
    assert [e for e in events if e.kind == "problem"]
    assert not [e for e in events if e.kind == "topic"], events
    assert w.state.topics == {"t": {0: (1, 2), 1: (1, 2)}}
    assert set(w.state.partitions) == {TopicPartition("t", 0), TopicPartition("t", 1)}


def test_exactly_the_limit_of_partitions_are_each_watched() -> None:
    zk = a_cluster(1, (1, 2), partitions=12)
    w = Watched(zk, per_partition_watches=12)
    w.read()
    assert {paths.partition_state("t", p) for p in range(12)} <= w.source.armed_paths()


def test_a_partition_led_by_an_unregistered_broker_is_a_canary() -> None:
    """Above the limit: a leader that is not registered is about to be replaced, so its
    partition is watched, which needs the brokers read to know who is registered."""
    zk = a_cluster(1, (1, 2), partitions=40)
    lai = LeaderAndIsr(3, 0, (3,))
    zk.set_data(paths.partition_state("t", 39), encode_partition_state(lai, 5))
    w = Watched(zk, per_partition_watches=10)
    w.read()
    assert w.source._alive == {1, 2}
    assert paths.partition_state("t", 39) in w.source.armed_paths()


def test_a_state_keeps_the_version_of_its_znode() -> None:
    zk = a_cluster(1, (1, 2))
    state = paths.partition_state("t", 0)
    for _ in range(3):
        zk.set_data(state, zk.nodes[state][0])
    w = Watched(zk)
    w.read()
    assert w.source._states[T0_P].zk_version == 3


def test_registrations_read_as_kafka_writes_them() -> None:
    """The broker epoch is the registration's czxid (Kafka 2.8 KafkaZkClient
    getAllBrokerAndEpochsInCluster), unchanged by a setData; an IPv6 host is bracketed;
    a child of /brokers/ids that is no broker id is no broker."""
    zk = a_cluster(1, (1, 2))
    reg = BrokerRegistration(3, (EndPoint("PLAINTEXT", "::1", 9093),))
    zk.put(paths.broker(3), encode_broker(reg))
    zk.put(paths.BROKER_IDS + "/not-a-broker", b"")
    czxid = zk.nodes[paths.broker(2)][1].czxid
    zk.set_data(paths.broker(2), zk.nodes[paths.broker(2)][0])
    src = Watched(zk).source
    seen = [o for o in src._refresh(ALL_GROUPS) if isinstance(o, BrokersSeen)]
    (brokers,) = [o.brokers for o in seen]
    assert list(brokers) == [1, 2, 3]
    assert brokers[3].address == "[::1]:9093"
    assert brokers[2].broker_epoch == czxid


def test_the_controller_read_as_kafka_writes_it() -> None:
    """elected_at is /controller's ctime, in ZooKeeper milliseconds; a malformed epoch
    after a change of controller is not the old controller's epoch."""
    zk = a_cluster(1, (1, 2))
    data, stat = zk.nodes[paths.CONTROLLER]
    zk.nodes[paths.CONTROLLER] = (data, stat._replace(ctime=1_700_000_000_123))
    src = ZkSource(zk, lambda _: None)  # type: ignore[arg-type]
    seen = src._read_controller()
    assert isinstance(seen, ControllerSeen)
    assert (seen.broker, seen.epoch, seen.elected_at) == (1, 5, 1_700_000_000.123)
    zk.put(paths.CONTROLLER, encode_controller(2))
    zk.set_data(paths.CONTROLLER_EPOCH, b"six")
    seen = src._read_controller()
    assert (seen.broker, seen.epoch) == (2, None)
    assert seen.problem is not None
    zk.set_data(paths.CONTROLLER_EPOCH, encode_controller_epoch(6))
    assert src._read_controller().epoch == 6


def test_a_path_created_just_after_it_was_missing_is_read_again() -> None:
    """get_children on a missing path sets a creation watch, blind to children: created
    in between, the group is read again."""

    class CreatedMeanwhile(FakeZk):
        def get_children(self, path: str, *, watch: bool = False) -> list[str] | None:
            got = super().get_children(path, watch=watch)
            if got is None and path == paths.DELETE_TOPICS:
                self.put(path, b"")
            return got

    zk = CreatedMeanwhile()
    zk.nodes = a_cluster(1, (1, 2)).nodes
    w = Watched(zk)
    w.source._read_topics()
    assert TOPICS in w.source._dirty
    w.source._dirty.clear()
    w.source._read_topics()  # there now: nothing more
    assert w.source._dirty == set()


def test_a_partition_state_watch_reads_neither_the_controller_nor_the_brokers() -> None:
    zk = recording_cluster()
    w = Watched(zk)
    w.read()
    zk.reads.clear()
    zk.fire(paths.partition_state("t", 0), "CHANGED")
    w.fired()
    read = {p for _kind, got, _watch in zk.reads for p in got}
    assert paths.partition_state("t", 0) in read
    assert not read & {paths.CONTROLLER, paths.BROKER_IDS, paths.broker(1), paths.topic("t")}


class Vanishing(FakeZk):
    """Children listed that are gone when read (deleted between the two reads)."""

    extra: dict[str, str] = {
        paths.BROKER_IDS: "3",
        paths.BROKER_TOPICS: "gone",
    }

    def get_children(self, path: str, *, watch: bool = False) -> list[str] | None:
        got = super().get_children(path, watch=watch)
        if got is not None and path in self.extra:
            got = [*got, self.extra[path]]
        return got


def test_znodes_gone_between_listing_and_reading_are_skipped() -> None:
    """A broker or topic deleted between the children read and the data read, and a new
    partition whose state znode the controller has not written yet."""
    zk = Vanishing()
    zk.nodes = a_cluster(1, (1, 2)).nodes
    zk.put(paths.topic("u"), encode_topic(TopicAssignment("u", {0: (1, 2)})))
    w = Watched(zk)
    w.read()
    assert sorted(w.state.brokers) == [1, 2]
    assert sorted(w.state.topics) == ["t", "u"]
    assert w.state.summary.no_state == 1


def test_an_unreadable_registration_or_controller_is_reported() -> None:
    """A registration that cannot be decoded is still a registered broker (its
    ephemeral znode is there), its address unreadable."""
    zk = a_cluster(1, (1, 2))
    zk.set_data(paths.broker(2), b"{")
    zk.set_data(paths.CONTROLLER, b"{")
    src = Watched(zk).source
    observations = src._refresh(ALL_GROUPS)
    (brokers,) = [o.brokers for o in observations if isinstance(o, BrokersSeen)]
    assert sorted(brokers) == [1, 2]
    assert brokers[2].address == "(unreadable)"
    (controller,) = [o for o in observations if isinstance(o, ControllerSeen)]
    assert controller.broker is None
    assert controller.problem is not None
    assert paths.CONTROLLER in controller.problem


def test_topics_and_partitions_are_taken_in_order() -> None:
    """ZooKeeper lists children in no order, and a topic znode's partitions come in its
    writer's order: both are sorted, so the partitions follow each other in order."""

    class Unordered(FakeZk):
        def get_children(self, path: str, *, watch: bool = False) -> list[str] | None:
            got = super().get_children(path, watch=watch)
            return None if got is None else got[::-1]

    zk = Unordered()
    zk.nodes = a_cluster(1, (1, 2), partitions=3).nodes
    zk.put(paths.topic("a"), b'{"version":1,"partitions":{"1":[1,2],"0":[2,1]}}')
    src = Watched(zk).source
    src._refresh(ALL_GROUPS)
    order = [TopicPartition("a", 0), TopicPartition("a", 1)]
    order += [TopicPartition("t", p) for p in range(3)]
    assert [tp for tp, _path in src._partitions] == order


def test_the_epoch_stands_while_no_controller_is_elected() -> None:
    """Kafka 2.8: a resigning controller's /controller goes, /controller_epoch stays
    (the next controller increments it)."""
    zk = a_cluster(1, (1, 2))
    del zk.nodes[paths.CONTROLLER]
    seen = ZkSource(zk, lambda _: None)._read_controller()  # type: ignore[arg-type]
    assert (seen.broker, seen.epoch, seen.elected_at) == (None, 5, None)

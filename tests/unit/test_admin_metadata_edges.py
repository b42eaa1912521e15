"""admin.metadata's readers and admin.controller_info over an in-memory tree: what is left
out (and named in the problems) when a znode cannot be read, what a race between two reads
leaves, and the order of what they return whatever order ZooKeeper lists children in."""

from __future__ import annotations

from kazoo.protocol.states import ZnodeStat

from admin import metadata
from admin.controller_info import read_controller
from admin.errors import Problems
from tests.unit.test_cli_args import TreeZk, tree_with_topic
from zkdata import paths
from zkdata.client import ZkClient
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


class ListedZk(TreeZk):
    """Children listed as a real ZooKeeper may list them (in no particular order), and
    some listed that are gone by the next read."""

    gone: frozenset[str] = frozenset()

    def get_children(self, path: str, *, watch: bool = False) -> list[str] | None:
        children = super().get_children(path, watch=watch)
        if children is None:
            return None
        return sorted(children, reverse=True) + sorted(
            c for c in self.gone if path == paths.BROKER_IDS
        )


def as_client(zk: TreeZk) -> ZkClient:
    client: ZkClient = zk  # type: ignore[assignment]
    return client


def paths_of(problems: Problems) -> list[str]:
    return [p.path for p in problems]


def test_a_child_of_brokers_ids_that_is_no_id_is_named_and_skipped() -> None:
    zk = tree_with_topic("t", {0: [1]}, (1, 2))
    zk.put(f"{paths.BROKER_IDS}/abc", b"")
    problems = Problems()
    assert metadata.registered_broker_ids(as_client(zk), problems) == {1, 2}
    assert paths_of(problems) == [f"{paths.BROKER_IDS}/abc"]


def test_a_broker_gone_between_the_listing_and_the_read_is_left_out_silently() -> None:
    zk = ListedZk()
    zk.nodes.update(tree_with_topic("t", {0: [1]}, (1, 3)).nodes)
    zk.gone = frozenset({"2"})
    problems = Problems()
    assert sorted(metadata.live_brokers(as_client(zk), problems)) == [1, 3]
    assert paths_of(problems) == []


def test_topic_names_are_sorted_whatever_order_they_are_listed_in() -> None:
    zk = ListedZk()
    for name in ("b", "a", "c"):
        zk.nodes.update(tree_with_topic(name, {0: [1]}, ()).nodes)
    assert metadata.topic_names(as_client(zk)) == ["a", "b", "c"]


def test_read_topics_names_the_missing_and_the_malformed_apart() -> None:
    zk = tree_with_topic("t", {0: [1]}, (1,))
    zk.put(paths.topic("bad"), b"null")
    problems = Problems()
    records, missing = metadata.read_topics(as_client(zk), ["t", "nope", "bad"], problems)
    assert (sorted(records), missing) == (["t"], {"nope"})
    assert paths_of(problems) == [paths.topic("bad")]


def test_a_topic_without_a_config_znode_has_no_overrides() -> None:
    zk = tree_with_topic("t", {0: [1]}, (1,))
    zk.put(paths.topic_config("c"), b'{"version":1,"config":{"retention.ms":"1"}}')
    zk.put(paths.topic_config("bad"), b"[]")
    problems = Problems()
    configs = metadata.read_topic_configs(as_client(zk), ["t", "c", "bad"], problems)
    assert configs == {"t": {}, "c": {"retention.ms": "1"}}
    assert paths_of(problems) == [paths.topic_config("bad")]


def test_a_partition_state_carries_its_znodes_version() -> None:
    """The zk_version a conditional write of the state (an election) is made against."""
    zk = tree_with_topic("t", {0: [1], 1: [1]}, (1,))
    zk.put(paths.partition_state("t", 0), encode_partition_state(LeaderAndIsr(1, 0, (1,)), 1))
    zk.set_data(paths.partition_state("t", 0), encode_partition_state(LeaderAndIsr(1, 1, (1,)), 1))
    problems = Problems()
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    states = metadata.read_partition_states(as_client(zk), tps, problems)
    assert list(states) == [TopicPartition("t", 0)]
    assert states[TopicPartition("t", 0)].leader_and_isr == LeaderAndIsr(1, 1, (1,), 1)


def test_all_partitions_are_in_topic_then_partition_order() -> None:
    zk = tree_with_topic("b", {1: [1], 0: [1]}, ())
    zk.put(paths.topic("a"), encode_topic(TopicAssignment("a", {0: (1,)})))
    records, _ = metadata.read_topics(as_client(zk), ["b", "a"], Problems())
    assert metadata.all_partitions(records.values()) == [
        TopicPartition("a", 0),
        TopicPartition("b", 0),
        TopicPartition("b", 1),
    ]


def test_a_pending_reassignment_as_far_as_it_can_be_read() -> None:
    """A znode that cannot be read holds any partition; an entry that cannot be read is
    named and holds none (the controller skips it)."""
    zk = TreeZk()
    assert metadata.pending_reassignment(as_client(zk), Problems()) is None

    zk.put(paths.REASSIGN_PARTITIONS, b"{not json")
    problems = Problems()
    unknown = metadata.pending_reassignment(as_client(zk), problems)
    assert unknown is not None
    assert unknown.holds(TopicPartition("t", 0))
    assert unknown.holds_topic("t")
    assert paths_of(problems) == [paths.REASSIGN_PARTITIONS]

    zk.put(
        paths.REASSIGN_PARTITIONS,
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},'
        b'{"topic":"u","partition":"x","replicas":[1]}]}',
    )
    problems = Problems()
    known = metadata.pending_reassignment(as_client(zk), problems)
    assert known is not None
    assert known.targets == {TopicPartition("t", 0): (1, 2)}
    assert known.holds(TopicPartition("t", 0))
    assert not known.holds(TopicPartition("t", 1))
    assert (known.holds_topic("t"), known.holds_topic("u")) == (True, False)
    assert paths_of(problems) == [paths.REASSIGN_PARTITIONS]


# --- admin.controller_info ------------------------------------------------------------------


def registration(broker_id: int) -> bytes:
    return encode_broker(
        BrokerRegistration(
            broker_id,
            (
                EndPoint("INTERNAL", "10.0.0.1", 9092),
                EndPoint("EXTERNAL", "example.com", 19092),
            ),
        )
    )


def stat(*, ctime: int, mtime: int, version: int, cversion: int) -> ZnodeStat:
    return ZnodeStat(5, 6, ctime, mtime, version, cversion, 0, 0, 0, 0, 5)


def test_the_controller_its_epoch_election_time_and_first_endpoint() -> None:
    """The epoch's fencing token is /controller_epoch's data version; the election time is
    /controller's creation time; the endpoint is the registration's first."""
    zk = TreeZk()
    zk.nodes[paths.CONTROLLER] = (
        encode_controller(2),
        stat(ctime=1_000, mtime=9_000, version=3, cversion=0),
    )
    zk.nodes[paths.CONTROLLER_EPOCH] = (
        encode_controller_epoch(7),
        stat(ctime=5, mtime=8_000, version=6, cversion=4),
    )
    zk.put(paths.broker(2), registration(2))
    info = read_controller(as_client(zk))
    assert (info.controller_id, info.epoch, info.epoch_zk_version) == (2, 7, 6)
    assert info.elected_at_ms == 1_000
    assert info.endpoint == "INTERNAL://10.0.0.1:9092"
    assert paths_of(info.problems) == []


def test_unreadable_controller_znodes_are_named() -> None:
    zk = TreeZk()
    zk.put(paths.CONTROLLER, b"garbage")
    zk.put(paths.CONTROLLER_EPOCH, b"x")
    info = read_controller(as_client(zk))
    assert (info.controller_id, info.epoch, info.endpoint) == (None, None, None)
    assert paths_of(info.problems) == [paths.CONTROLLER, paths.CONTROLLER_EPOCH]

    zk = TreeZk()
    zk.put(paths.CONTROLLER, encode_controller(2))
    zk.put(paths.broker(2), b"{}")
    info = read_controller(as_client(zk))
    assert (info.controller_id, info.endpoint) == (2, None)
    assert paths_of(info.problems) == [paths.broker(2)]

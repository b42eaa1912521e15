"""The admin operations against a real ZooKeeper: what they write, what they refuse, and
how they get past malformed znodes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from admin import elect, metadata, reassign, topics
from admin.controller_info import read_controller
from admin.errors import (
    AdminError,
    ConcurrentChangeError,
    InvalidArgumentError,
    Problems,
    TopicExistsError,
    UnknownTopicError,
)
from controller.assignment import RackAwareMode, assign_new_partitions
from zkdata import paths, znodes
from zkdata.client import ZkClient
from zkdata.znodes import LeaderAndIsr, TopicAssignment, TopicPartition

pytestmark = pytest.mark.integration


@pytest.fixture
def zk(zk_connect: str) -> Iterator[ZkClient]:
    client = ZkClient(zk_connect, session_timeout_ms=10_000)
    client.start()
    client.ensure_paths(paths.PERSISTENT_PATHS)
    try:
        yield client
    finally:
        client.close()


def register(zk: ZkClient, *ids: int, racks: dict[int, str] | None = None) -> None:
    for i in ids:
        reg = znodes.BrokerRegistration(
            i, (znodes.EndPoint("PLAINTEXT", "127.0.0.1", 9090 + i),), rack=(racks or {}).get(i)
        )
        zk.create(paths.broker(i), znodes.encode_broker(reg), ephemeral=True)


def put_topic(zk: ZkClient, name: str, parts: dict[int, list[int]], **kw: object) -> None:
    a = TopicAssignment(name, {p: tuple(r) for p, r in parts.items()}, **kw)  # type: ignore[arg-type]
    zk.create(paths.topic(name), znodes.encode_topic(a), make_parents=True)


def put_state(zk: ZkClient, name: str, p: int, leader: int, epoch: int, isr: list[int]) -> None:
    zk.create(
        paths.partition_state(name, p),
        znodes.encode_partition_state(LeaderAndIsr(leader, epoch, tuple(isr)), 1),
        make_parents=True,
    )


def read_topic(zk: ZkClient, name: str) -> TopicAssignment:
    got = zk.get(paths.topic(name))
    assert got is not None
    return znodes.decode_topic(name, got[0])


def create(zk: ZkClient, name: str, **kw: object) -> topics.CreateTopicResult:
    return topics.create_topic(zk, topics.parse_create_request(name, **kw))  # type: ignore[arg-type]


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


# --- create -----------------------------------------------------------------------------------


def test_create_writes_config_and_a_version_3_topic_znode(zk: ZkClient) -> None:
    register(zk, 1, 2, 3)
    result = create(
        zk, "orders", partitions=4, replication_factor=2, config=["min.insync.replicas=2"]
    )
    assert result.created
    assert result.plan is not None
    raw = json.loads(zk.get(paths.topic("orders"))[0])  # type: ignore[index]
    assert raw["version"] == 3
    a = read_topic(zk, "orders")
    assert a.topic_id == result.plan.topic_id
    assert sorted(a.partitions) == [0, 1, 2, 3]
    assert all(len(r) == 2 and set(r) <= {1, 2, 3} for r in a.partitions.values())
    config = zk.get(paths.topic_config("orders"))
    assert config is not None
    assert znodes.decode_topic_config("orders", config[0]) == {"min.insync.replicas": "2"}


def test_create_uses_the_registered_racks(zk: ZkClient) -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    register(zk, *racks, racks=racks)
    create(zk, "spread", partitions=8, replication_factor=2)
    for replicas in read_topic(zk, "spread").partitions.values():
        assert {racks[b] for b in replicas} == {"a", "b"}


def test_create_refusals_leave_nothing_behind(zk: ZkClient) -> None:
    with pytest.raises(AdminError, match="no brokers are registered"):
        create(zk, "t", partitions=1, replication_factor=1)
    register(zk, 1, 2)
    with pytest.raises(AdminError, match="larger than available brokers: 2"):
        create(zk, "t", partitions=1, replication_factor=3)
    with pytest.raises(AdminError, match=r"broker\(s\) 5 not available"):
        create(zk, "t", replica_assignment="1:5")
    assert zk.exists(paths.topic("t")) is None
    assert zk.exists(paths.topic_config("t")) is None


def test_create_existing_colliding_and_deleted_topics(zk: ZkClient) -> None:
    register(zk, 1)
    assert create(zk, "a.b", partitions=1, replication_factor=1).warnings == [
        topics.COLLISION_WARNING
    ]
    with pytest.raises(TopicExistsError, match=r"'a\.b' already exists"):
        create(zk, "a.b", partitions=1, replication_factor=1)
    assert not create(zk, "a.b", partitions=1, replication_factor=1, if_not_exists=True).created
    with pytest.raises(AdminError, match=r"collides with existing topics: a\.b"):
        create(zk, "a_b", partitions=1, replication_factor=1)
    topics.delete_topic(zk, "a.b")
    with pytest.raises(TopicExistsError, match="marked for deletion"):
        create(zk, "a.b", partitions=1, replication_factor=1, if_not_exists=True)


def test_create_with_explicit_assignment(zk: ZkClient) -> None:
    register(zk, 1, 2, 3)
    create(zk, "manual", replica_assignment="3:1,1:2,2:3")
    assert read_topic(zk, "manual").partitions == {0: (3, 1), 1: (1, 2), 2: (2, 3)}


def test_create_does_not_overwrite_a_config_of_a_topic_created_meanwhile(
    zk: ZkClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(zk, 1)
    real = metadata.topics_marked_for_deletion

    def racing(client: ZkClient) -> set[str]:
        # Someone else creates the same topic after our checks, before our write.
        client.create(paths.topic_config("race"), znodes.encode_topic_config({"x": "theirs"}))
        put_topic(client, "race", {0: [1]})
        return real(client)

    monkeypatch.setattr(metadata, "topics_marked_for_deletion", racing)
    with pytest.raises(TopicExistsError):
        create(zk, "race", partitions=3, replication_factor=1)
    got = zk.get(paths.topic_config("race"))
    assert got is not None
    assert znodes.decode_topic_config("race", got[0]) == {"x": "theirs"}
    assert sorted(read_topic(zk, "race").partitions) == [0]


# --- delete and list --------------------------------------------------------------------------


def test_delete_marks_and_list_shows_it(zk: ZkClient) -> None:
    register(zk, 1)
    create(zk, "doomed", partitions=1, replication_factor=1)
    create(zk, "kept", partitions=1, replication_factor=1)
    assert topics.delete_topic(zk, "doomed").outcome == "marked"
    assert zk.exists(paths.delete_topic("doomed")) is not None
    assert topics.delete_topic(zk, "doomed").outcome == "already_marked"
    with pytest.raises(UnknownTopicError, match="'ghost' does not exist"):
        topics.delete_topic(zk, "ghost")
    assert topics.delete_topic(zk, "ghost", if_exists=True).outcome == "absent"
    # Existence first, as Kafka's deleteTopic (ensureTopicExists), then the refusal.
    with pytest.raises(UnknownTopicError, match="'__consumer_offsets' does not exist"):
        topics.delete_topic(zk, "__consumer_offsets")
    create(zk, "__consumer_offsets", partitions=1, replication_factor=1)
    with pytest.raises(AdminError, match="internal topic"):
        topics.delete_topic(zk, "__consumer_offsets")
    with pytest.raises(InvalidArgumentError):
        topics.delete_topic(zk, "no/slash")
    assert topics.list_topics(zk) == [
        topics.TopicListing("__consumer_offsets", False),
        topics.TopicListing("doomed", True),
        topics.TopicListing("kept", False),
    ]


# --- describe ---------------------------------------------------------------------------------


def test_describe_shows_leadership_and_flags_partitions(zk: ZkClient) -> None:
    register(zk, 1, 2)  # broker 3 is not live
    put_topic(zk, "t", {0: [1, 2], 1: [2, 1], 2: [3, 1], 3: [1, 2]})
    zk.create(paths.topic_config("t"), znodes.encode_topic_config({"retention.ms": "10"}))
    put_state(zk, "t", 0, leader=1, epoch=4, isr=[1, 2])
    put_state(zk, "t", 1, leader=2, epoch=1, isr=[2])  # under-replicated
    put_state(zk, "t", 2, leader=3, epoch=7, isr=[3])  # leader not live: unavailable
    # partition 3 has no state znode yet: no leader
    result = topics.describe_topics(zk, ["t"])
    assert not result.problems
    assert result.live_brokers == {1, 2}
    (t,) = result.topics
    assert t.config == {"retention.ms": "10"}
    assert t.replication_factor == 2
    p = {d.partition: d for d in t.partitions}
    assert (p[0].leader, p[0].leader_epoch, p[0].isr) == (1, 4, (1, 2))
    under = [d.partition for d in t.partitions if d.is_under_replicated()]
    unavailable = [d.partition for d in t.partitions if d.is_unavailable(result.live_brokers)]
    assert under == [1, 2, 3]
    assert unavailable == [2, 3]
    doc = t.to_json(result.live_brokers)
    assert doc["partitions"][2]["unavailable"] is True  # type: ignore[index]


def test_describe_reports_malformed_znodes_by_path_and_goes_on(zk: ZkClient) -> None:
    register(zk, 1)
    put_topic(zk, "good", {0: [1], 1: [1]})
    put_state(zk, "good", 0, leader=1, epoch=0, isr=[1])
    zk.create(paths.partition_state("good", 1), b"{not json", make_parents=True)
    zk.create(paths.topic_config("good"), b'{"version":1,"config":{"a":1}}')
    zk.create(paths.topic("broken"), b'{"version":2,"partitions":{"0":"one"}}')
    zk.create(f"{paths.BROKER_IDS}/not-a-broker", b"")
    result = topics.describe_topics(zk)
    assert sorted(result.problems.paths()) == sorted(
        [
            paths.partition_state("good", 1),
            paths.topic_config("good"),
            paths.topic("broken"),
            f"{paths.BROKER_IDS}/not-a-broker",
        ]
    )
    assert [t.name for t in result.topics] == ["good"]
    good = result.topics[0]
    assert good.partitions[0].leader == 1
    assert good.partitions[1].state is None
    assert "not JSON" in (good.partitions[1].state_problem or "")
    assert good.config_problem is not None


def test_describe_unknown_topics(zk: ZkClient) -> None:
    with pytest.raises(UnknownTopicError, match="'nope'"):
        topics.describe_topics(zk, ["nope"])
    assert topics.describe_topics(zk, ["nope"], if_exists=True).topics == []


# --- add partitions ---------------------------------------------------------------------------


def test_add_partitions_keeps_existing_ones_and_the_topic_id(zk: ZkClient) -> None:
    register(zk, 1, 2, 3)
    create(zk, "grow", replica_assignment="2:3,3:1")
    before = read_topic(zk, "grow")
    result = topics.add_partitions(zk, "grow", 5)
    after = read_topic(zk, "grow")
    expected = assign_new_partitions([1, 2, 3], {0: [2, 3], 1: [3, 1]}, 5)
    assert result.added == expected
    assert after.topic_id == before.topic_id
    assert after.partitions == {0: (2, 3), 1: (3, 1), **{p: tuple(r) for p, r in expected.items()}}
    topics.add_partitions(zk, "grow", 6, replica_assignment={0: [1, 2]})
    assert read_topic(zk, "grow").partitions[5] == (1, 2)


def test_add_partitions_refusals(zk: ZkClient) -> None:
    register(zk, 1, 2)
    create(zk, "t", partitions=2, replication_factor=1)
    with pytest.raises(AdminError, match="can only be increased"):
        topics.add_partitions(zk, "t", 2)
    with pytest.raises(UnknownTopicError):
        topics.add_partitions(zk, "ghost", 3)
    zk.create(paths.topic("bad"), b"[]")
    with pytest.raises(AdminError, match="/brokers/topics/bad is malformed"):
        topics.add_partitions(zk, "bad", 3)
    zk.create(
        paths.REASSIGN_PARTITIONS, znodes.encode_reassignment({tp("t", 0): (2,)}), make_parents=True
    )
    with pytest.raises(AdminError, match="reassignment of topic 't' is in progress"):
        topics.add_partitions(zk, "t", 3)
    zk.delete(paths.REASSIGN_PARTITIONS)
    topics.delete_topic(zk, "t")
    with pytest.raises(AdminError, match="marked for deletion"):
        topics.add_partitions(zk, "t", 3)


def test_add_partitions_detects_a_concurrent_change(
    zk: ZkClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(zk, 1, 2)
    create(zk, "t", partitions=1, replication_factor=1)
    real = metadata.live_brokers

    def racing(client: ZkClient, problems: Problems) -> dict[int, znodes.BrokerRegistration]:
        # Another writer changes the topic znode after we read it.
        got = client.get(paths.topic("t"))
        assert got is not None
        client.set(paths.topic("t"), got[0])
        return real(client, problems)

    monkeypatch.setattr(metadata, "live_brokers", racing)
    with pytest.raises(ConcurrentChangeError, match="changed by someone else"):
        topics.add_partitions(zk, "t", 4, rack_aware_mode=RackAwareMode.DISABLED)
    assert sorted(read_topic(zk, "t").partitions) == [0]


# --- configs ----------------------------------------------------------------------------------


def test_alter_config_writes_and_notifies(zk: ZkClient) -> None:
    register(zk, 1)
    create(zk, "t", partitions=1, replication_factor=1, config=["retention.ms=100"])
    result = topics.alter_topic_config(zk, "t", {"segment.ms": "5000"}, ["retention.ms"])
    assert (result.before, result.after) == ({"retention.ms": "100"}, {"segment.ms": "5000"})
    got = zk.get(paths.topic_config("t"))
    assert got is not None
    assert znodes.decode_topic_config("t", got[0]) == {"segment.ms": "5000"}
    changes = zk.get_children(paths.CONFIG_CHANGES) or []
    assert len(changes) == 1
    assert changes[0].startswith(paths.CONFIG_CHANGE_PREFIX)
    note = zk.get(f"{paths.CONFIG_CHANGES}/{changes[0]}")
    assert note is not None
    assert json.loads(note[0]) == {"version": 2, "entity_path": "topics/t"}
    with pytest.raises(AdminError, match="not set on this topic"):
        topics.alter_topic_config(zk, "t", {}, ["retention.ms"])
    with pytest.raises(UnknownTopicError):
        topics.alter_topic_config(zk, "ghost", {"segment.ms": "1"}, [])


def test_alter_config_of_a_topic_deleted_meanwhile_leaves_no_config(
    zk: ZkClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller deletes a topic's znode, then its config's, between the alteration's
    check that the topic exists and its write: no config znode is made for the topic
    gone (one would outlive it), and nothing is notified."""
    register(zk, 1)
    create(zk, "t", partitions=1, replication_factor=1)
    real_get = zk.get

    def read_then_controller_deletes(path: str, *args: object, **kwargs: object) -> object:
        got = real_get(path, *args, **kwargs)  # type: ignore[arg-type]
        if path == paths.topic_config("t"):
            zk.kazoo.delete(paths.topic("t"), recursive=True)
            zk.kazoo.delete(path)
            return None  # the config read just after its deletion
        return got

    monkeypatch.setattr(zk, "get", read_then_controller_deletes)
    with pytest.raises(UnknownTopicError, match="deleted meanwhile"):
        topics.alter_topic_config(zk, "t", {"segment.ms": "5000"}, [])
    assert zk.exists(paths.topic_config("t")) is None
    assert zk.get_children(paths.CONFIG_CHANGES) in (None, [])


# --- reassignment -----------------------------------------------------------------------------


def test_reassignment_is_written_refused_while_running_and_verified(zk: ZkClient) -> None:
    register(zk, 1, 2, 3)
    create(zk, "t", replica_assignment="1:2,2:3")
    targets = {tp("t", 0): (3, 2), tp("t", 1): (2, 3)}
    started = reassign.start_reassignment(zk, targets)
    assert started.current == {tp("t", 0): (1, 2), tp("t", 1): (2, 3)}
    got = zk.get(paths.REASSIGN_PARTITIONS)
    assert got is not None
    assert znodes.decode_reassignment(got[0]) == targets
    with pytest.raises(AdminError, match="a reassignment is in progress"):
        reassign.start_reassignment(zk, {tp("t", 0): (1, 2)})

    verified = reassign.verify_reassignment(zk, targets)
    assert verified.pending
    assert [s.status for s in verified.statuses] == ["in_progress", "in_progress"]

    # What the controller does when it finishes: the assignment is the target, znode gone.
    put = zk.get(paths.topic("t"))
    assert put is not None
    a = znodes.decode_topic("t", put[0])
    done = TopicAssignment("t", {0: (3, 2), 1: (2, 3)}, topic_id=a.topic_id)
    zk.set(paths.topic("t"), znodes.encode_topic(done))
    zk.delete(paths.REASSIGN_PARTITIONS)
    verified = reassign.verify_reassignment(zk, targets)
    assert verified.complete
    assert not verified.pending
    wrong = reassign.verify_reassignment(zk, {tp("t", 0): (1, 3)})
    assert wrong.statuses[0].status == "failed"


def test_reassignment_validation_lists_every_problem(zk: ZkClient) -> None:
    register(zk, 1, 2)
    create(zk, "t", partitions=1, replication_factor=1)
    with pytest.raises(AdminError) as info:
        reassign.start_reassignment(zk, {tp("t", 4): (1,), tp("ghost", 0): (1,), tp("t", 0): (7,)})
    message = str(info.value)
    assert "topic 'ghost' does not exist" in message
    assert "non-existent partitions: t-4" in message
    assert "broker(s) 7 are not registered" in message
    assert zk.exists(paths.REASSIGN_PARTITIONS) is None


def test_verify_reports_malformed_znodes(zk: ZkClient) -> None:
    register(zk, 1)
    create(zk, "t", partitions=1, replication_factor=1)
    zk.create(paths.REASSIGN_PARTITIONS, b"garbage", make_parents=True)
    zk.create(paths.topic("bad"), b"{}")
    result = reassign.verify_reassignment(zk, {tp("t", 0): (1,), tp("bad", 0): (1,)})
    assert sorted(result.problems.paths()) == [paths.REASSIGN_PARTITIONS, paths.topic("bad")]
    by_topic = {s.partition.topic: s for s in result.statuses}
    assert by_topic["t"].status == "in_progress"  # a pending znode we cannot read
    assert by_topic["bad"].status == "unknown"
    assert "malformed" in by_topic["bad"].detail


def test_verify_reads_a_pending_reassignment_entry_by_entry(zk: ZkClient) -> None:
    """An entry of /admin/reassign_partitions that cannot be read is reported and left
    out, as the controller skips it (and takes it out); the others are still pending.
    Before, one such entry made the whole znode unreadable: every partition was shown in
    progress, t-1's move too, which the controller never makes."""
    register(zk, 1, 2)
    create(zk, "t", replica_assignment="1,1")
    entries = [
        {"topic": "t", "partition": 0, "replicas": [2]},
        {"topic": "t", "partition": 1, "replicas": [2, 2]},
    ]
    data = json.dumps({"version": 1, "partitions": entries}).encode()
    zk.create(paths.REASSIGN_PARTITIONS, data, make_parents=True)
    result = reassign.verify_reassignment(zk, {tp("t", 0): (2,), tp("t", 1): (2,)})
    assert result.pending
    assert result.problems.paths() == [paths.REASSIGN_PARTITIONS]
    assert "[2, 2]" in result.problems.messages()[0]
    assert [s.status for s in result.statuses] == ["in_progress", "failed"]

    # A znode whose entries are all unreadable holds no move: t-0, at its target, is
    # complete (it read as a znode unreadable as a whole, every partition in progress).
    zk.set(
        paths.REASSIGN_PARTITIONS, json.dumps({"version": 1, "partitions": entries[1:]}).encode()
    )
    result = reassign.verify_reassignment(zk, {tp("t", 0): (1,), tp("t", 1): (2,)})
    assert result.pending
    assert [s.status for s in result.statuses] == ["complete", "failed"]


# --- preferred election -----------------------------------------------------------------------


def test_preferred_election_all_partitions_and_refusal_while_pending(zk: ZkClient) -> None:
    register(zk, 1, 2)
    create(zk, "a", replica_assignment="1:2,2:1")
    create(zk, "b", replica_assignment="2:1")
    create(zk, "c", replica_assignment="1")
    topics.delete_topic(zk, "c")
    zk.create(paths.topic("bad"), b"x")
    put_state(zk, "a", 0, leader=2, epoch=1, isr=[1, 2])
    put_state(zk, "a", 1, leader=2, epoch=0, isr=[2, 1])
    result = elect.start_preferred_election(zk, elect.ElectionScope(all_partitions=True))
    assert result.partitions == [tp("a", 0), tp("a", 1), tp("b", 0)]
    assert result.problems.paths() == [paths.topic("bad")]
    got = zk.get(paths.PREFERRED_REPLICA_ELECTION)
    assert got is not None
    assert znodes.decode_partition_list(paths.PREFERRED_REPLICA_ELECTION, got[0]) == [
        tp("a", 0),
        tp("a", 1),
        tp("b", 0),
    ]
    unchanged = {n.partition: n.reason for n in result.unchanged}
    assert unchanged == {
        tp("a", 1): "already led by its preferred replica",
        tp("b", 0): "no leadership yet (no state znode)",
    }
    with pytest.raises(AdminError, match="already in progress"):
        elect.start_preferred_election(zk, elect.ElectionScope(topic="a"))


def test_preferred_election_scope_errors(zk: ZkClient) -> None:
    register(zk, 1)
    create(zk, "a", partitions=2, replication_factor=1)
    with pytest.raises(AdminError, match="non-existent partitions: a-5"):
        elect.start_preferred_election(zk, elect.parse_scope(topic="a", partition=5))
    with pytest.raises(AdminError, match="'zz' does not exist"):
        elect.start_preferred_election(zk, elect.parse_scope(topic="zz"))
    assert zk.exists(paths.PREFERRED_REPLICA_ELECTION) is None
    result = elect.start_preferred_election(zk, elect.parse_scope(partitions=[tp("a", 1)]))
    assert result.partitions == [tp("a", 1)]


# --- controller -------------------------------------------------------------------------------


def test_controller_info(zk: ZkClient) -> None:
    info = read_controller(zk)
    assert (info.controller_id, info.epoch) == (None, None)
    register(zk, 2)
    zk.create(paths.CONTROLLER, znodes.encode_controller(2), ephemeral=True)
    zk.create(paths.CONTROLLER_EPOCH, znodes.encode_controller_epoch(7))
    info = read_controller(zk)
    assert (info.controller_id, info.epoch, info.epoch_zk_version) == (2, 7, 0)
    assert info.endpoint == "PLAINTEXT://127.0.0.1:9092"
    assert info.elected_at_ms is not None
    assert not info.problems


def test_controller_info_reports_malformed_znodes(zk: ZkClient) -> None:
    zk.create(paths.CONTROLLER, b'{"version":1,"brokerid":"two"}', ephemeral=True)
    zk.create(paths.CONTROLLER_EPOCH, b"-3")
    info = read_controller(zk)
    assert (info.controller_id, info.epoch) == (None, None)
    assert sorted(info.problems.paths()) == [paths.CONTROLLER, paths.CONTROLLER_EPOCH]

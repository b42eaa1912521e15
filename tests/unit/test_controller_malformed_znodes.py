"""The real controller over an in-memory ZooKeeper (tests/unit/fake_cluster.py) meeting
znodes it cannot read: each is reported and skipped, or kept as it was, never taken for
gone, and a repair is seen."""

from __future__ import annotations

import json
from typing import cast
from unittest.mock import MagicMock

import pytest

from controller import events as ev
from controller.context import PartitionStateName
from controller.controller import KafkaController
from controller.request_batch import BrokerRequest
from tests.unit.fake_cluster import (
    add_topic,
    cluster,
    drain,
    empty_cluster,
    process,
    register,
    registration,
    start_controller,
)
from tests.unit.fake_zk import FakeZk
from wire.api import ApiKey
from zkdata import paths
from zkdata.znodes import (
    TopicAssignment,
    TopicPartition,
    decode_partition_state,
    decode_topic,
    encode_broker,
    encode_partition_list,
    encode_topic,
    new_topic_id,
)

TP = TopicPartition("t", 0)

HUGE = "1" * 5000  # past Python's 4,300-digit int() limit
HUGE_PARTITION_KEY = ('{"version":2,"partitions":{"' + HUGE + '":[1]}}').encode()
HUGE_PORT = ('{"version":4,"endpoints":["PLAINTEXT://h:' + HUGE + '"],"jmx_port":-1}').encode()


def test_a_topic_change_with_a_huge_partition_key_skips_only_that_topic() -> None:
    zk, c = cluster()
    zk.put(paths.topic("bad"), HUGE_PARTITION_KEY)
    zk.put(paths.topic("good"), encode_topic(TopicAssignment("good", {0: (1, 2)}, new_topic_id())))
    process(c, ev.TopicChange())
    assert c.is_active
    assert "good" in c.ctx.assignments
    assert "bad" not in c.ctx.assignments


def test_a_broker_change_with_a_huge_port_skips_only_that_broker() -> None:
    zk, c = cluster()
    register(zk, 9, HUGE_PORT)
    del zk.nodes[paths.broker(3)]  # and broker 3 dies
    process(c, ev.BrokerChange())
    assert c.is_active
    assert set(c.ctx.live_brokers) == {1, 2}


def test_a_failover_with_a_huge_partition_key_takes_control() -> None:
    zk = empty_cluster()
    register(zk, 1)
    zk.put(paths.topic("bad"), HUGE_PARTITION_KEY)
    c = start_controller(zk)
    assert c.is_active
    assert c.ctx.all_topics == set()


def test_a_huge_controller_epoch_holds_the_election_with_its_report() -> None:
    """Item 10 of docs/architecture.md: no election, a watch on the znode, no exception."""
    zk = empty_cluster()
    register(zk, 1)
    zk.put(paths.CONTROLLER_EPOCH, HUGE.encode())
    c = start_controller(zk)
    assert not c.is_active
    assert paths.CONTROLLER not in zk.nodes


def test_the_last_controller_epoch_holds_the_election_with_its_report(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """/controller_epoch 2147483647 (int32's largest) elected a controller with epoch
    2147483648, written back to the znode, and every request of its term failed to
    encode (controller epochs are int32 on the wire). Item 10: it is held as a malformed
    one is, the znode named."""
    zk = empty_cluster()
    register(zk, 1)
    add_topic(zk, "t", {0: (1,)})
    zk.put(paths.CONTROLLER_EPOCH, b"2147483647")
    c = start_controller(zk)
    assert not c.is_active
    assert paths.CONTROLLER not in zk.nodes
    assert zk.nodes[paths.CONTROLLER_EPOCH][0] == b"2147483647"
    assert "/controller_epoch: epoch 2147483647 cannot be incremented" in caplog.text


def test_a_broker_id_past_java_int_is_no_broker() -> None:
    """/brokers/ids/2147483648 was taken for a live broker, and every UpdateMetadata
    naming it then failed to encode (ids are int32 on the wire)."""
    zk, c = cluster()
    register(zk, 2**31)
    del zk.nodes[paths.broker(3)]
    process(c, ev.BrokerChange())
    assert set(c.ctx.live_brokers) == {1, 2}


def test_a_failover_beside_a_broker_id_past_java_int_sends_requests_that_encode() -> None:
    zk = empty_cluster()
    register(zk, 1)
    register(zk, 2**31)
    c = start_controller(zk)
    assert c.is_active
    assert set(c.ctx.live_brokers) == {1}
    sent = [r for call in cast(MagicMock, c.channel).send.call_args_list for r in call.args[0]]
    assert sent
    for request in sent:
        request.wire_body()  # what each broker's sender encodes


def _leading_at(leader_epoch: int) -> bytes:
    return json.dumps(
        {
            "controller_epoch": 1,
            "leader": 3,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": [3, 2, 1],
        }
    ).encode()


def _then(zk: FakeZk, c: KafkaController, what: str) -> None:
    both = encode_partition_list([TP, TopicPartition("u", 0)])
    if what == "broker-loss":
        del zk.nodes[paths.broker(2)]
        process(c, ev.BrokerChange())
    elif what == "isr-change":
        zk.put(paths.isr_change_notification("isr_change_0000000001"), both)
        process(c, ev.IsrChangeNotification())
    elif what == "preferred":
        zk.put(paths.PREFERRED_REPLICA_ELECTION, both)
        process(c, ev.PreferredReplicaElection())
    else:
        zk.put(paths.delete_topic("t"), b"")
        process(c, ev.TopicDeletion())
    drain(c)


@pytest.mark.parametrize("what", ["broker-loss", "isr-change", "preferred", "deletion"])
@pytest.mark.parametrize("leader_epoch", [2**31 - 1, 2**31 - 2])
def test_a_leader_epoch_at_int32s_largest_is_never_incremented_past_it(
    what: str, leader_epoch: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A state holding leader epoch 2147483647 (int32's largest; or one below, which a
    deletion's successive decisions passed) was incremented past it: 2147483648 was
    written (a state no reader accepts after, the controller's own included), and the
    LeaderAndIsr and UpdateMetadata carrying it failed to encode, each taking every
    other partition of its batch along (u-0's new leader never reached a broker). The
    write is refused, naming the znode; the other partitions go on, and the topic's
    deletion too."""
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    add_topic(zk, "t", {0: (2, 3, 1)})
    add_topic(zk, "u", {0: (2, 3, 1)})
    zk.put(paths.partition_state("t", 0), _leading_at(leader_epoch))
    c = start_controller(zk, delete_topic_enable=True)
    cast(MagicMock, c.channel).send.reset_mock()
    _then(zk, c, what)
    assert c.is_active
    sent = [r for call in cast(MagicMock, c.channel).send.call_args_list for r in call.args[0]]
    for request in sent:
        request.wire_body()  # what each broker's sender encodes
    for tp in (TP, TopicPartition("u", 0)):
        path = paths.partition_state(tp.topic, tp.partition)
        if path in zk.nodes:
            decode_partition_state(path, zk.nodes[path][0], 0)  # raises past int32
    if what == "broker-loss":
        u0 = paths.partition_state("u", 0)
        assert decode_partition_state(u0, zk.nodes[u0][0], 0).leader_and_isr.leader == 3
        told = {r.broker_id for r in sent if TopicPartition("u", 0) in r.partitions}
        assert told == {1, 3}
    if what == "deletion":  # not held up for that partition
        deleting = {r.broker_id for r in sent if r.delete_partitions and TP in r.partitions}
        assert deleting == {1, 2, 3}
    if leader_epoch == 2**31 - 1 and what != "deletion":
        assert zk.nodes[paths.partition_state("t", 0)][0] == _leading_at(leader_epoch)
    if leader_epoch == 2**31 - 1 and what in ("broker-loss", "preferred"):
        assert (
            f"{paths.partition_state('t', 0)}: leader_epoch 2147483647 cannot be incremented"
            in caplog.text
        )


def _registration_with(
    host: str = "b9", rack: str | None = None, listener: str = "PLAINTEXT"
) -> bytes:
    obj: dict[str, object] = {
        "listener_security_protocol_map": {listener: "PLAINTEXT"},
        "endpoints": [f"{listener}://{host}:9092"],
        "jmx_port": -1,
        "version": 5,
    }
    if rack is not None:
        obj["rack"] = rack
    return json.dumps(obj).encode()  # a lone surrogate is written as the escape \ud800


LONG = "h" * 40_000
NOT_WIRE_STRINGS = {
    "long-host": _registration_with(host=LONG),
    "long-rack": _registration_with(rack=LONG),
    "long-listener": _registration_with(listener="L" * 40_000),
    "surrogate-host": _registration_with(host="b\ud800"),
    "surrogate-rack": _registration_with(rack="r\udc00"),
}


def _update_metadata_to(c: KafkaController, broker_id: int) -> list[BrokerRequest]:
    return [
        r
        for call in cast(MagicMock, c.channel).send.call_args_list
        for r in call.args[0]
        if r.broker_id == broker_id and r.api_key == ApiKey.UPDATE_METADATA
    ]


@pytest.mark.parametrize("data", NOT_WIRE_STRINGS.values(), ids=NOT_WIRE_STRINGS.keys())
def test_a_failover_beside_a_registration_that_is_no_wire_string_sends_metadata(
    data: bytes,
) -> None:
    """A host, listener or rack that is no Kafka wire string (over 32,767 UTF-8 bytes, or
    a lone surrogate) made its broker live, and the UpdateMetadata meant for every broker
    (each lists all live brokers) failed to encode: no broker learnt any change."""
    zk = empty_cluster()
    register(zk, 1)
    register(zk, 2)
    register(zk, 9, data)
    c = start_controller(zk)
    assert c.is_active
    assert set(c.ctx.live_brokers) == {1, 2}
    sent = _update_metadata_to(c, 2)
    assert sent
    for request in sent:
        request.wire_body()  # what broker 2's sender encodes


@pytest.mark.parametrize("data", NOT_WIRE_STRINGS.values(), ids=NOT_WIRE_STRINGS.keys())
def test_a_broker_change_to_a_registration_that_is_no_wire_string_sends_metadata(
    data: bytes,
) -> None:
    zk, c = cluster()
    cast(MagicMock, c.channel).send.reset_mock()
    register(zk, 9, data)
    process(c, ev.BrokerChange())
    drain(c)
    assert 9 not in c.ctx.live_brokers
    del zk.nodes[paths.broker(3)]  # and broker 3 dies: the others must hear of it
    process(c, ev.BrokerChange())
    drain(c)
    sent = _update_metadata_to(c, 2)
    assert sent
    for request in sent:
        request.wire_body()


def test_a_topic_whose_name_is_no_wire_string_is_kept_aside() -> None:
    """ZooKeeper takes a child of /brokers/topics of 40,000 characters (Kafka's tools never
    write one): it was created, and every LeaderAndIsr and UpdateMetadata naming it failed
    to encode, for every broker. Its znode is now unreadable, kept aside as such."""
    long_name = "t" * 40_000
    for failover in (True, False):
        zk = empty_cluster()
        for b in (1, 2):
            register(zk, b)
        if failover:
            add_topic(zk, long_name, {0: (1, 2)})
        add_topic(zk, "good", {0: (1, 2)})
        c = start_controller(zk)
        if not failover:
            cast(MagicMock, c.channel).send.reset_mock()
            zk.put(paths.topic(long_name), encode_topic(TopicAssignment(long_name, {0: (1, 2)})))
            process(c, ev.TopicChange())
            drain(c)
        assert c.is_active
        assert long_name in c.ctx.unreadable_topics
        assert long_name not in c.ctx.assignments
        sent = [r for call in cast(MagicMock, c.channel).send.call_args_list for r in call.args[0]]
        for request in sent:
            request.wire_body()


@pytest.mark.parametrize("name", ["a" * 300, "has space", "t:1", "caf\u00e9"])
def test_a_topic_whose_name_no_topic_can_have_is_kept_aside(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A child of /brokers/topics of 300 characters (Kafka's tools never write one) was
    created and sent to broker 1, whose log "<topic>-0" no file system could name (errno
    36): its log directory was taken offline and the broker halted, at every restart. A
    name Kafka's topic rule refuses is now unreadable, reported with its path and kept
    aside, at a failover and at a topic change, as one no wire string can carry."""
    for failover in (True, False):
        zk = empty_cluster()
        for b in (1, 2):
            register(zk, b)
        if failover:
            zk.put(paths.topic(name), b'{"version":2,"partitions":{"0":[1]}}')
        add_topic(zk, "good", {0: (1, 2)})
        caplog.clear()
        c = start_controller(zk)
        if not failover:
            cast(MagicMock, c.channel).send.reset_mock()
            zk.put(paths.topic(name), b'{"version":2,"partitions":{"0":[1]}}')
            process(c, ev.TopicChange())
            drain(c)
        assert c.is_active
        assert name in c.ctx.unreadable_topics
        assert name not in c.ctx.assignments
        assert "good" in c.ctx.assignments
        assert paths.topic(name) in caplog.text
        sent = [r for call in cast(MagicMock, c.channel).send.call_args_list for r in call.args[0]]
        assert sent or not failover
        for request in sent:
            assert json.dumps(name) not in json.dumps(request.body, default=str)


def test_a_topics_znodes_are_deleted_whatever_junk_its_partitions_znode_holds() -> None:
    """A child named "\u00b2" (isdigit() is true, int() refuses it) failed the deletion for
    good. A junk child ("01" too: no partition is written so) goes with what is under it, or
    the partitions znode could not be deleted (ZooKeeper deletes no znode with children)."""
    zk, c = cluster(topics={"t": {0: (1, 2), 1: (2, 3)}})
    partitions = paths.topic_partitions("t")
    for junk in ("\u00b2", "01", "x", "9" * 5000):
        zk.put(paths.child(partitions, junk), b"")
    zk.put(paths.child(paths.child(partitions, "x"), "y"), b"")
    zk.put(paths.delete_topic("t"), b"")
    c.store.delete_topic("t", [0], c.ctx.epoch_zk_version)  # partition 1: read from the znode
    assert [p for p in zk.nodes if p.startswith(paths.topic("t"))] == []
    assert paths.delete_topic("t") not in zk.nodes


def test_a_live_broker_whose_registration_turns_malformed_stays_live() -> None:
    """Someone's write garbles broker 2's registration (its znode, its czxid): it keeps
    its registration and epoch through an unrelated BrokerChange, which took it for dead
    (Kafka never takes a broker whose znode stands for dead), and a repair is applied."""
    zk, c = cluster()
    epoch = c.ctx.broker_epochs[2]
    zk.set_data(paths.broker(2), b'{"version":4,"endpoints":"oops"}')
    zk.fire(paths.broker(2), "CHANGED")
    drain(c)
    del zk.nodes[paths.broker(3)]  # broker 3's session ends
    zk.fire(paths.BROKER_IDS, "CHILD")
    drain(c)
    assert set(c.ctx.live_brokers) == {1, 2}
    assert c.ctx.broker_epochs[2] == epoch
    assert c.ctx.leadership[TP].leader_and_isr.leader == 2
    zk.set_data(paths.broker(2), encode_broker(registration(2, port=9999)))
    zk.fire(paths.broker(2), "CHANGED")  # its modification handler is still there
    drain(c)
    assert c.ctx.live_brokers[2].port == 9999


def test_a_broker_registered_with_a_malformed_registration_starts_once_it_is_repaired() -> None:
    zk, c = cluster(brokers=(1, 2), topics={"t": {0: (3, 1)}})
    register(zk, 3, b"not json")
    zk.fire(paths.BROKER_IDS, "CHILD")
    drain(c)
    assert 3 not in c.ctx.live_brokers
    zk.set_data(paths.broker(3), encode_broker(registration(3)))
    zk.fire(paths.broker(3), "CHANGED")
    drain(c)
    assert 3 in c.ctx.live_brokers
    assert c.ctx.broker_epochs[3] == zk.nodes[paths.broker(3)][1].czxid
    cast(MagicMock, c.channel).add_broker.assert_called_with(3, "b3", 9092)


def test_a_broker_registered_again_unreadably_is_dead_until_its_new_registration_is_fixed() -> None:
    zk, c = cluster()
    old_epoch = c.ctx.broker_epochs[2]
    register(zk, 2, b"not json")  # a new incarnation: another czxid
    zk.fire(paths.BROKER_IDS, "CHILD")
    drain(c)
    assert 2 not in c.ctx.live_brokers  # the incarnation it knew is gone
    assert c.ctx.leadership[TP].leader_and_isr.leader != 2
    zk.set_data(paths.broker(2), encode_broker(registration(2)))
    zk.fire(paths.broker(2), "CHANGED")
    drain(c)
    assert c.ctx.broker_epochs[2] > old_epoch


def test_a_failover_starts_a_broker_whose_malformed_registration_is_repaired() -> None:
    zk = empty_cluster()
    register(zk, 1)
    register(zk, 2, b"{}")
    c = start_controller(zk)
    assert set(c.ctx.live_brokers) == {1}
    zk.set_data(paths.broker(2), encode_broker(registration(2)))
    zk.fire(paths.broker(2), "CHANGED")
    drain(c)
    assert set(c.ctx.live_brokers) == {1, 2}


def test_a_new_topic_whose_znode_is_repaired_is_created() -> None:
    """A new topic with a malformed znode is ignored until it is fixed: the fix fires its
    data watch, and PartitionModifications, which dropped topics the context lacks,
    creates it."""
    zk, c = cluster()
    zk.put(paths.topic("late"), b'{"version":2,"partitions":{"0":"not a list"}}')
    zk.fire(paths.BROKER_TOPICS, "CHILD")
    drain(c)
    assert "late" not in c.ctx.assignments
    zk.set_data(
        paths.topic("late"), encode_topic(TopicAssignment("late", {0: (1, 2)}, new_topic_id()))
    )
    zk.fire(paths.topic("late"), "CHANGED")
    drain(c)
    assert c.ctx.leadership[TopicPartition("late", 0)].leader_and_isr.isr == (1, 2)
    assert paths.partition_state("late", 0) in zk.nodes
    assert c.ctx.unreadable_topics == set()


def test_a_topic_unreadable_at_the_failover_is_created_once_repaired() -> None:
    zk = empty_cluster()
    register(zk, 1)
    zk.put(paths.topic("late"), b"{}")
    c = start_controller(zk)
    zk.set_data(paths.topic("late"), encode_topic(TopicAssignment("late", {0: (1,)})))
    zk.fire(paths.topic("late"), "CHANGED")
    drain(c)
    assert TopicPartition("late", 0) in c.ctx.leadership
    assert c.ctx.topic_ids["late"] is not None  # given one, as any topic without


def test_deleting_a_topic_whose_znode_is_malformed_deletes_its_znodes() -> None:
    """Its deletion request was removed as one for an unknown topic, and the topic stayed;
    Kafka has it among its topics (the children of /brokers/topics) and deletes it."""
    zk, c = cluster()
    zk.put(paths.topic("bad"), b'{"version":2,"partitions":{"x":[1]}}')
    zk.fire(paths.BROKER_TOPICS, "CHILD")
    drain(c)
    zk.put(paths.delete_topic("bad"), b"")
    zk.fire(paths.DELETE_TOPICS, "CHILD")
    drain(c)
    assert paths.topic("bad") not in zk.nodes
    assert paths.delete_topic("bad") not in zk.nodes
    zk.fire(paths.BROKER_TOPICS, "CHILD")
    drain(c)
    assert c.ctx.unreadable_topics == set()
    assert paths.topic("bad") not in zk.handlers or not zk.handlers[paths.topic("bad")]


def test_a_deletion_pending_at_the_failover_for_an_unreadable_topic_deletes_it() -> None:
    zk = empty_cluster()
    register(zk, 1)
    zk.put(paths.topic("bad"), b"[]")
    zk.put(paths.delete_topic("bad"), b"")
    start_controller(zk)
    assert paths.topic("bad") not in zk.nodes
    assert paths.delete_topic("bad") not in zk.nodes


def test_an_unreadable_topic_removed_meanwhile_is_forgotten() -> None:
    zk, c = cluster()
    zk.put(paths.topic("bad"), b"{}")
    zk.fire(paths.BROKER_TOPICS, "CHILD")
    drain(c)
    assert c.ctx.unreadable_topics == {"bad"}
    del zk.nodes[paths.topic("bad")]
    zk.fire(paths.BROKER_TOPICS, "CHILD")
    drain(c)
    assert c.ctx.unreadable_topics == set()


def test_a_repaired_topic_whose_adopted_state_has_a_dead_leader_is_elected() -> None:
    """A topic unreadable at the failover whose partition states exist (created and led
    before), repaired after its leader died: the controller adopts the state, finds its
    leader dead, and elects a live ISR member in the same event."""
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    add_topic(zk, "u", {0: (2, 3, 1)})  # led by 2, ISR 2,3,1
    good = zk.nodes[paths.topic("u")][0]
    zk.set_data(paths.topic("u"), b"{}")
    c = start_controller(zk)
    assert "u" in c.ctx.unreadable_topics
    # u-0's leader dies; the controller cannot touch u (unreadable).
    del zk.nodes[paths.broker(2)]
    process(c, ev.BrokerChange())
    drain(c)
    zk.set_data(paths.topic("u"), good)  # repaired: u is created as a new topic
    zk.fire(paths.topic("u"), "CHANGED")
    drain(c)
    tp = TopicPartition("u", 0)
    data, stat = zk.nodes[paths.partition_state("u", 0)]
    state = decode_partition_state("u-0", data, stat.version).leader_and_isr
    assert c.ctx.partition_state(tp) is PartitionStateName.ONLINE
    assert state.leader == 3
    assert c.ctx.leadership[tp].leader_and_isr == state


def test_a_repaired_topic_showing_a_reassignment_resumes_it() -> None:
    """A topic unreadable at the failover, repaired showing a reassignment in progress
    (adding and removing replicas): the reassignment is resumed as a failover resumes one.
    Marked as being reassigned with nothing to move it on, it never completed, and a
    deletion asked for the topic was held for good."""
    zk = empty_cluster()
    for b in (1, 2, 3, 4):
        register(zk, b)
    add_topic(zk, "u", {0: (1, 2, 3, 4)})  # mid-reassignment 1,2,3 -> 2,3,4
    zk.set_data(paths.topic("u"), b"{}")
    c = start_controller(zk)
    assert "u" in c.ctx.unreadable_topics
    topic_id = new_topic_id()
    zk.set_data(
        paths.topic("u"),
        encode_topic(TopicAssignment("u", {0: (1, 2, 3, 4)}, topic_id, {0: (4,)}, {0: (1,)})),
    )
    zk.fire(paths.topic("u"), "CHANGED")
    drain(c)
    tp = TopicPartition("u", 0)
    # Every replica is in the ISR: the resumed reassignment completes at once.
    assert tp not in c.ctx.partitions_being_reassigned
    assert c.ctx.replicas(tp) == (2, 3, 4)
    assert decode_topic("u", zk.nodes[paths.topic("u")][0]) == TopicAssignment(
        "u", {0: (2, 3, 4)}, topic_id
    )
    zk.put(paths.delete_topic("u"), b"")
    process(c, ev.TopicDeletion())
    drain(c)
    assert "u" not in c.ctx.topics_ineligible_for_deletion
    assert "u" in c.ctx.topics_to_be_deleted or "u" not in c.ctx.assignments


def test_a_repaired_topic_whose_reassignment_waits_completes_when_caught_up() -> None:
    """Resumed with a new replica not in the ISR yet: it waits, its state watched, holding
    a deletion (item 33), and completes when that replica joins the ISR."""
    zk = empty_cluster()
    for b in (1, 2, 3, 4):
        register(zk, b)
    add_topic(zk, "u", {0: (1, 2, 3)})  # its state: ISR 1,2,3
    zk.set_data(paths.topic("u"), b"{}")
    c = start_controller(zk)
    zk.set_data(
        paths.topic("u"),
        encode_topic(TopicAssignment("u", {0: (1, 2, 3, 4)}, new_topic_id(), {0: (4,)}, {0: (1,)})),
    )
    zk.fire(paths.topic("u"), "CHANGED")
    drain(c)
    tp = TopicPartition("u", 0)
    assert tp in c.ctx.partitions_being_reassigned  # 4 is not in the ISR
    zk.put(paths.delete_topic("u"), b"")
    process(c, ev.TopicDeletion())
    drain(c)
    assert "u" in c.ctx.topics_ineligible_for_deletion
    # Broker 4 catches up: its leader adds it to the ISR.
    path = paths.partition_state("u", 0)
    state = json.loads(zk.nodes[path][0])
    state["isr"] = [*state["isr"], 4]
    zk.set_data(path, json.dumps(state).encode())
    zk.fire(path, "CHANGED")  # the watch the resumed reassignment armed
    drain(c)
    assert tp not in c.ctx.partitions_being_reassigned
    assert c.ctx.replicas(tp) == (2, 3, 4)
    assert "u" not in c.ctx.topics_ineligible_for_deletion


def test_an_unreadable_topics_deletion_writes_its_topic_deleted_line() -> None:
    """Its znodes deleted, the deletion of an unreadable topic is complete: the
    state-change log says so (`topic_deleted`), as for any topic, at a deletion request
    and at a failover finding one pending. It wrote nothing: the analytics pipeline,
    which splits a partition's incarnations at the topic's deletions, kept the states
    the topic had before it became unreadable open to the end of the logs (or a topic
    made again under its name)."""
    zk, c = cluster()
    zk.put(paths.topic("bad"), b"{}")
    zk.fire(paths.BROKER_TOPICS, "CHILD")
    drain(c)
    zk.put(paths.delete_topic("bad"), b"")
    zk.fire(paths.DELETE_TOPICS, "CHILD")
    drain(c)
    assert paths.topic("bad") not in zk.nodes
    state_log = cast(MagicMock, c.state_log)
    state_log.write.assert_any_call("topic_deleted", topic="bad", controller_epoch=c.ctx.epoch)

    zk = empty_cluster()
    register(zk, 1)
    zk.put(paths.topic("bad"), b"[]")
    zk.put(paths.delete_topic("bad"), b"")
    c = start_controller(zk)
    assert paths.topic("bad") not in zk.nodes
    state_log = cast(MagicMock, c.state_log)
    state_log.write.assert_any_call("topic_deleted", topic="bad", controller_epoch=c.ctx.epoch)

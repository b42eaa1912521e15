"""Broker events at the controller, over an in-memory ZooKeeper (tests/unit/fake_zk.py):
a BrokerChange logs what it saw and drops a dead broker's connection (Kafka 2.8's
processBrokerChange: controllerChannelManager.removeBroker); a BrokerModifications of a
broker's registration with new endpoints updates it, its connection and every broker's
metadata (processBrokerModification, onBrokerUpdate), and one of a broker registered anew
(another broker epoch) is left to the BrokerChange that follows."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from unittest.mock import MagicMock

from controller import events as ev
from controller.controller import KafkaController
from controller.request_batch import BrokerRequest
from tests.unit import fake_cluster as fc
from tests.unit.fake_zk import FakeZk
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.znodes import TopicPartition, encode_broker


def controller() -> tuple[FakeZk, KafkaController, MagicMock, list[BrokerRequest]]:
    """Broker 1 controller of brokers 1, 2, 3 and topic "t" (partition 0 on 2, 3, 1);
    its channel (a mock) and what it sent since the failover."""
    return fc.active_controller((1, 2, 3), {"t": {0: (2, 3, 1)}})


def test_a_dead_brokers_connection_is_dropped_and_the_change_logged() -> None:
    zk, c, channel, _sent = controller()
    del zk.nodes[paths.broker(3)]
    fc.register(zk, 4)
    c.process(ev.BrokerChange())
    channel.remove_broker.assert_called_once_with(3)
    assert [call.args[0] for call in channel.add_broker.call_args_list] == [4]
    [logged] = c.state_log.broker_change.call_args_list  # type: ignore[attr-defined]
    epoch, new, dead, bounced, _current = logged.args
    assert (epoch, set(new), set(dead), set(bounced)) == (c.ctx.epoch, {4}, {3}, set())


def test_new_endpoints_update_the_broker_its_connection_and_every_brokers_metadata() -> None:
    zk, c, channel, sent = controller()
    zk.set_data(paths.broker(2), encode_broker(fc.registration(2, port=9999)))
    c.process(ev.BrokerModifications(2))
    assert c.ctx.live_brokers[2].port == 9999
    channel.add_broker.assert_called_once_with(2, "b2", 9999)
    update_metadata = [r for r in sent if r.api_key.name == "UPDATE_METADATA"]
    assert sorted(r.broker_id for r in update_metadata) == [1, 2, 3]


def test_a_rack_alone_changed_is_ignored_as_kafka_ignores_it() -> None:
    """Kafka 2.8's processBrokerModification acts only when the endpoints or the
    features changed: a rack edited into a live broker's registration is not taken (a
    broker's rack changes with its restart, a new registration)."""
    zk, c, channel, sent = controller()
    zk.set_data(paths.broker(2), encode_broker(replace(fc.registration(2), rack="r9")))
    c.process(ev.BrokerModifications(2))
    assert c.ctx.live_brokers[2].rack is None
    channel.add_broker.assert_not_called()
    assert sent == []


def test_new_endpoints_take_the_whole_new_registration_rack_included() -> None:
    """Kafka 2.8's updateBrokerMetadata(old, new): the new metadata replaces the old."""
    zk, c, _channel, sent = controller()
    zk.set_data(paths.broker(2), encode_broker(replace(fc.registration(2, port=9999), rack="r9")))
    c.process(ev.BrokerModifications(2))
    assert (c.ctx.live_brokers[2].port, c.ctx.live_brokers[2].rack) == (9999, "r9")
    assert [r.broker_id for r in sent if r.api_key.name == "UPDATE_METADATA"]


def test_a_modification_of_a_broker_registered_anew_is_left_to_the_broker_change() -> None:
    """Another broker epoch (czxid): a new incarnation, whose start the BrokerChange makes
    (a bounce: failed, then started), not an update of the one known."""
    zk, c, channel, sent = controller()
    epoch = c.ctx.broker_epochs[2]
    del zk.nodes[paths.broker(2)]
    zk.put(
        paths.broker(2),
        encode_broker(fc.registration(2, port=9999)),
        owner=fc.broker_session(2),
    )
    c.process(ev.BrokerModifications(2))
    assert c.ctx.live_brokers[2].port == 9092
    assert c.ctx.broker_epochs[2] == epoch
    channel.add_broker.assert_not_called()
    assert sent == []
    c.process(ev.BrokerChange())
    assert c.ctx.live_brokers[2].port == 9999
    assert c.ctx.broker_epochs[2] > epoch
    channel.remove_broker.assert_called_once_with(2)


def leader_and_isr_answer(
    c: KafkaController, partition_error: int, error_code: int = 0
) -> dict[str, object]:
    """A LeaderAndIsr answer naming t-0 with ``partition_error``."""
    return {
        "error_code": error_code,
        "topics": [
            {
                "topic_id": c.ctx.topic_ids["t"],
                "partition_errors": [{"partition_index": 0, "error_code": partition_error}],
            }
        ],
    }


STORAGE = int(ErrorCode.KAFKA_STORAGE_ERROR)
T0 = TopicPartition("t", 0)


def test_a_storage_error_answer_takes_the_replica_offline_and_a_later_clean_one_back() -> None:
    """Kafka 2.8's processLeaderAndIsrResponseReceived: the partitions answered
    KAFKA_STORAGE_ERROR are on a failed directory (offline replicas), those answered
    without an error are not."""
    _zk, c, _channel, _sent = controller()
    epoch = c.ctx.broker_epochs[3]
    c.process(ev.LeaderAndIsrResponseReceived(3, leader_and_isr_answer(c, STORAGE), epoch))
    assert c.ctx.is_on_offline_dir(3, T0)
    assert 3 not in c.ctx.leadership[T0].leader_and_isr.isr
    c.process(ev.LeaderAndIsrResponseReceived(3, leader_and_isr_answer(c, 0), epoch))
    assert not c.ctx.is_on_offline_dir(3, T0)


def test_a_refused_leader_and_isr_or_an_earlier_incarnations_answer_says_nothing() -> None:
    """A top-level error (Kafka: "received error ... in LeaderAndIsr response", return),
    and an answer of the broker's earlier epoch, handled after it registered anew."""
    _zk, c, _channel, _sent = controller()
    epoch = c.ctx.broker_epochs[3]
    stale = int(ErrorCode.STALE_CONTROLLER_EPOCH)
    c.process(ev.LeaderAndIsrResponseReceived(3, leader_and_isr_answer(c, STORAGE, stale), epoch))
    c.process(ev.LeaderAndIsrResponseReceived(3, leader_and_isr_answer(c, STORAGE), epoch - 1))
    assert not c.ctx.is_on_offline_dir(3, T0)
    assert 3 in c.ctx.leadership[T0].leader_and_isr.isr


def test_with_topic_deletion_disabled_a_deletion_request_is_removed_and_the_topic_stays() -> None:
    """Kafka 2.8's processTopicDeletion: delete.topic.enable=false, the requests are
    removed (deleteTopicDeletions) and nothing is deleted."""
    zk = fc.empty_cluster()
    for b in (1, 2):
        fc.register(zk, b)
    fc.add_topic(zk, "t", {0: (2, 1)})
    c = fc.start_controller(zk, delete_topic_enable=False)
    zk.put(paths.delete_topic("t"), b"")
    fc.process(c, ev.TopicDeletion())
    fc.drain(c)
    assert paths.delete_topic("t") not in zk.nodes
    assert paths.topic("t") in zk.nodes
    assert not c.ctx.topics_to_be_deleted
    assert T0 in c.ctx.leadership


def test_only_a_deleting_stop_replicas_answer_becomes_a_deletion_event() -> None:
    """Kafka 2.8's sendStopReplicaRequests gives a callback (the
    TopicDeletionStopReplicaResponseReceived event) only to StopReplica requests that
    delete the partitions; a plain stop's answer says nothing of a topic deletion."""
    _zk, c, _channel, _sent = controller()
    answer = {
        "error_code": 0,
        "partition_errors": [{"topic_name": "t", "partition_index": 0, "error_code": 0}],
    }
    for delete in (False, True):
        request = BrokerRequest(
            3, ApiKey.STOP_REPLICA, 3, dict, (T0,), delete_partitions=delete, broker_epoch=7
        )
        c._on_response(request, answer)
    [event] = fc.queued(c)
    assert isinstance(event, ev.TopicDeletionStopReplicaResponseReceived)
    assert (event.broker_id, event.partition_errors, event.broker_epoch) == (3, {T0: 0}, 7)


def test_a_stop_replica_refused_as_a_whole_fails_the_replica_deletions_it_lists() -> None:
    """A request-level error fails each replica deletion, whatever its partition's code
    (Kafka 2.8's TopicDeletionStopReplicaResponseReceived: the request's error, else the
    partition's): the topic is not deleted on such answers."""
    zk, c, _channel, _sent = controller()
    zk.put(paths.delete_topic("t"), b"")
    c.process(ev.TopicDeletion())
    assert "t" in c.ctx.topics_to_be_deleted
    refused = int(ErrorCode.UNKNOWN_SERVER_ERROR)
    for b in (1, 2, 3):
        c.process(
            ev.TopicDeletionStopReplicaResponseReceived(b, refused, {T0: 0}, c.ctx.broker_epochs[b])
        )
    assert paths.topic("t") in zk.nodes
    assert "t" in c.ctx.all_topics


def test_a_deleting_stop_replicas_answer_for_a_topic_in_service_changes_no_replica() -> None:
    """A replica a reassignment removed (no topic deletion started): its answer, success
    or failure, leaves the replica states of the topic alone."""
    _zk, c, _channel, _sent = controller()
    before = dict(c.ctx.replica_states)
    for code in (0, int(ErrorCode.KAFKA_STORAGE_ERROR)):
        c.process(
            ev.TopicDeletionStopReplicaResponseReceived(3, 0, {T0: code}, c.ctx.broker_epochs[3])
        )
    assert c.ctx.replica_states == before


def test_a_leader_lacking_its_log_gives_way_unless_the_answer_is_an_earlier_incarnations() -> None:
    """REPLICA_NOT_AVAILABLE from the leader (a broker back on new disks): its leadership
    goes to another ISR member; the same answer of its earlier epoch moves nothing."""
    _zk, c, _channel, _sent = controller()
    lacking = int(ErrorCode.REPLICA_NOT_AVAILABLE)
    epoch = c.ctx.broker_epochs[2]
    assert c.ctx.leadership[T0].leader_and_isr.leader == 2
    c.process(ev.LeaderAndIsrResponseReceived(2, leader_and_isr_answer(c, lacking), epoch - 1))
    assert c.ctx.leadership[T0].leader_and_isr.leader == 2
    c.process(ev.LeaderAndIsrResponseReceived(2, leader_and_isr_answer(c, lacking), epoch))
    assert c.ctx.leadership[T0].leader_and_isr.leader != 2


def test_a_broker_listed_but_gone_by_the_read_keeps_no_modification_handler() -> None:
    zk, c, _channel, _sent = controller()
    fc.register(zk, 4)
    real = zk.get_many

    def gone_by_the_read(path_list: Any, **kwargs: Any) -> Any:
        zk.nodes.pop(paths.broker(4), None)
        return real(path_list, **kwargs)

    zk.get_many = gone_by_the_read  # type: ignore[method-assign]
    c.process(ev.BrokerChange())
    assert 4 not in c.ctx.live_brokers
    assert zk.handlers.get(paths.broker(4), []) == []
    assert zk.handlers.get(paths.broker(3), []) != []


def test_a_broker_back_resumes_the_reassignments_adding_a_replica_on_it() -> None:
    """Kafka 2.8's onBrokerStartup: reassignments with a replica on a started broker are
    restarted (onPartitionReassignment): the step bumps the partition's leader epoch, so
    every replica, the new one too, is sent the reassignment's LeaderAndIsr."""
    zk, c, _channel, sent = controller()
    fc.register(zk, 4)
    c.process(ev.BrokerChange())
    replies: list[object] = []
    c.process(
        ev.AlterPartitionReassignments(
            {T0: (2, 3, 4)}, lambda code, results: replies.append((code, results))
        )
    )
    assert replies
    assert T0 in c.ctx.partitions_being_reassigned
    del zk.nodes[paths.broker(4)]  # 4 goes before it caught up
    c.process(ev.BrokerChange())
    epoch_before = c.ctx.leadership[T0].leader_and_isr.leader_epoch
    fc.register(zk, 4)
    sent.clear()
    c.process(ev.BrokerChange())
    assert c.ctx.leadership[T0].leader_and_isr.leader_epoch > epoch_before
    assert any(r.api_key.name == "LEADER_AND_ISR" and r.broker_id == 4 for r in sent)

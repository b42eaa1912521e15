"""Broker changes through the real KafkaController (tests/unit/fake_cluster.py): what each
broker is sent when a broker is lost, starts or bounces. Found by review against Kafka
2.8.2's sources (KafkaController.onBrokerStartup, onBrokerFailure, onReplicasBecomeOffline;
ReplicaStateMachine's Offline step; ControllerChannelManager's sends)."""

from __future__ import annotations

from controller import events as ev
from controller.request_batch import BrokerRequest
from tests.unit.fake_cluster import Controller, ZooKeeperData
from zkdata.znodes import LeaderAndIsr


def update_metadata_rows(sent: list[BrokerRequest]) -> list[tuple[int, str, int, tuple[int, ...]]]:
    """(broker, topic, partition, offline replicas) of each UpdateMetadata row sent."""
    return [
        (r.broker_id, row[0], row[1], tuple(row[4]))
        for r in sent
        if r.api_key.name == "UPDATE_METADATA"
        for row in r.update_metadata_rows or []
    ]


def test_losing_an_out_of_sync_follower_reaches_every_brokers_metadata() -> None:
    """Kafka's Offline step sends every partition of the lost replica with a leader, its
    ISR holding the replica or not, in an UpdateMetadata to every live broker, whose
    offline replicas then list it. Nothing was sent for t-0, whose ISR had left 3 out:
    Metadata went on showing replica 3 online."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (1, 2, 3)}, {0: LeaderAndIsr(1, 0, (1, 2), 0)})
    with Controller(data) as c:
        c.elect()
        c.sent.clear()
        data.unregister(3)
        c.run(ev.BrokerChange())
        c.drain()
        told = {b for b, t, p, offline in update_metadata_rows(c.sent) if offline == (3,)}
        assert told == {1, 2}


def test_a_new_broker_is_sent_the_cluster_and_the_brokers_up_only_that_it_is_live() -> None:
    """onBrokerStartup sends the brokers up an UpdateMetadata without partition states,
    the new broker one with all of them. Every broker got all 50 partitions."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {p: (1, 2) for p in range(50)})
    with Controller(data) as c:
        c.elect()
        c.sent.clear()
        data.register(4)  # hosts nothing
        c.run(ev.BrokerChange())
        c.drain()
        um = [r for r in c.sent if r.api_key.name == "UPDATE_METADATA"]
        rows = update_metadata_rows(um)
        assert {b: sum(1 for row in rows if row[0] == b) for b in (1, 2, 3, 4)} == {
            1: 0,
            2: 0,
            3: 0,
            4: 50,
        }
        assert sorted(r.broker_id for r in um) == [1, 2, 3, 4]


def test_a_bounced_brokers_new_incarnation_is_sent_no_stop_replica() -> None:
    """A bounce is onBrokerFailure then onBrokerStartup; the failure's StopReplicas are
    addressed to the old incarnation, not live when Kafka sends them. Queued until the
    event's end, they reached the new incarnation."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (2, 3), 1: (3, 2)})
    with Controller(data) as c:
        c.elect()
        c.sent.clear()
        data.unregister(3)
        data.register(3)  # the same id, a new czxid: bounced
        c.run(ev.BrokerChange())
        c.drain()
        assert [r.broker_id for r in c.sent if r.api_key.name == "STOP_REPLICA"] == []
        to_3 = [r.api_key.name for r in c.sent if r.broker_id == 3]
        assert to_3[0] == "UPDATE_METADATA"
        assert "LEADER_AND_ISR" in to_3


def test_a_broker_hosting_nothing_is_reported_gone_while_a_partition_stays_offline() -> None:
    """KAFKA-13225, fixed in Kafka 3.1: with solo-0 offline for good, Kafka 2.8 never told
    the brokers that broker 3 (hosting nothing) was gone."""
    data = ZooKeeperData(brokers=(1, 2, 3, 4))
    data.topic("solo", {0: (4,)})
    data.topic("b", {0: (1, 2)})
    with Controller(data) as c:
        c.elect()
        data.unregister(4)
        c.run(ev.BrokerChange())
        c.drain()
        c.sent.clear()
        data.unregister(3)
        c.run(ev.BrokerChange())
        c.drain()
        um = [r for r in c.sent if r.api_key.name == "UPDATE_METADATA"]
        assert sorted(r.broker_id for r in um) == [1, 2]
        assert all([b["id"] for b in r.body["live_brokers"]] == [1, 2] for r in um)

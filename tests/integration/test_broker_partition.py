"""Two listeners, and a broker the other brokers cannot reach while it keeps running.

Each broker has a CLIENT listener and a REPLICATION one (its inter-broker listener); the
other brokers reach its REPLICATION listener through a link that can be cut
(cluster/netsplit.py's InterBrokerLink), while its clients and its ZooKeeper session are
untouched. Cut off, a leader's followers cannot fetch from it, so it shrinks each of its
ISRs to itself; the controller, which still sees it registered, leaves it leader. What it
acknowledges then is on it alone: with min.insync.replicas=2, nothing; with 1, the ISR of
one keeps the followers it left behind from being elected, even when it dies.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from cluster.netsplit import InterBrokerLink, linked_brokers
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import consume, lost_acknowledged
from tests.integration.harness import Cluster, wait_for
from tests.integration.workload import (
    ASSIGNMENT,
    BROKERS,
    PARTITIONS,
    REPLICA_LAG_S,
    TOPIC,
    Stream,
    history_problems,
    wait_healed,
)
from zkdata import paths
from zkdata.znodes import decode_broker

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def split_cluster(
    cluster_factory: ClusterFactory,
) -> Iterator[tuple[Cluster, dict[int, InterBrokerLink]]]:
    """Three brokers with two listeners each, every REPLICATION listener behind a link."""
    c = cluster_factory(BROKERS, start=False, replica_lag_time_max_ms=str(REPLICA_LAG_S * 1000))
    with linked_brokers(c) as links:
        c.start()
        yield c, links


def listener_address(c: Cluster, broker_id: int, listener: str) -> tuple[str, int]:
    status = wait_for(c[broker_id].status, 30, f"broker {broker_id}'s status")
    address = status["listeners"][listener]
    return address["host"], address["port"]


def brokers_seen_through(c: Cluster, listener: str) -> dict[int, tuple[str, int]]:
    """What a real client bootstrapped from broker 1's ``listener`` learns."""
    host, port = listener_address(c, 1, listener)
    metadata = AdminClient({"bootstrap.servers": f"{host}:{port}"}).list_topics(timeout=30)
    return {b.id: (str(b.host), b.port) for b in metadata.brokers.values()}


def acked_per_partition(stream: Stream) -> Counter[int]:
    with stream.acked.lock:
        return Counter(partition for partition, _offset in stream.acked.by_offset)


def topic_and_stream(c: Cluster, min_insync_replicas: int) -> Stream:
    """The topic, once every partition has a full ISR, and a producer writing to it."""
    c.create_topic(TOPIC, ASSIGNMENT, {"min.insync.replicas": str(min_insync_replicas)})
    wait_healed(c)
    stream = Stream(c)
    stream.start()
    return stream


def cut_a_leader(
    c: Cluster, links: dict[int, InterBrokerLink], stream: Stream
) -> tuple[int, list[int]]:
    """Cut off a broker that leads and is not the controller, once the stream has been
    acknowledged on its partitions; returns it and its partitions, once it has shrunk
    each of their ISRs to itself (as leader still, in the same leader epoch)."""
    controller_id, _ = c.wait_controller()
    victim = next(b for b in BROKERS if b != controller_id)
    before = c.partition_states(TOPIC)
    led = [p for p, s in before.items() if s.leader == victim]
    assert led, f"broker {victim} leads nothing: {before}"
    wait_for(
        lambda: all(acked_per_partition(stream)[p] >= 100 for p in led),
        60,
        "acknowledgements on the partitions of the broker to cut off",
    )
    links[victim].cut()
    shrunk = c.wait_partitions(
        TOPIC,
        lambda s: all(tuple(s[p].isr) == (victim,) for p in led),
        f"broker {victim} shrinking its ISRs to itself",
    )
    for p in led:
        assert shrunk[p].leader == victim
        assert shrunk[p].leader_epoch == before[p].leader_epoch
    # The others' partitions lose it from no ISR: it still fetches from their leaders.
    for p in set(range(PARTITIONS)) - set(led):
        assert victim in shrunk[p].isr or shrunk[p].isr == before[p].isr
    return victim, led


def check_nothing_lost(c: Cluster, stream: Stream) -> None:
    assert stream.stop() == 0, "messages left unanswered"
    read = consume(c, TOPIC, range(PARTITIONS))
    lost = lost_acknowledged(read, stream.acked)
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {lost[:3]}"
    assert not history_problems(c)


def test_clients_and_brokers_each_get_the_addresses_of_their_own_listener(
    split_cluster: tuple[Cluster, dict[int, InterBrokerLink]],
) -> None:
    c, links = split_cluster
    c.wait_controller()
    for b in BROKERS:
        got = c.zk.get(paths.broker(b))
        assert got is not None
        registration = decode_broker(b, got[0])
        # REPLICATION is advertised at its link, CLIENT at its bound port.
        assert registration.address("REPLICATION") == ("127.0.0.1", links[b].proxy.port)
        assert registration.address("CLIENT") == listener_address(c, b, "CLIENT")
        # The link forwards to where REPLICATION is bound in this run.
        status = wait_for(c[b].status, 30, f"broker {b}'s status")
        bound = status["bound_listeners"]["REPLICATION"]
        assert links[b].replication_address() == (bound["host"], bound["port"])
        assert bound["port"] != links[b].proxy.port
    # Broker 1 learns the others through the controller's UpdateMetadata, which the
    # controller being active does not wait for.
    seen = wait_for(
        lambda: (got := brokers_seen_through(c, "CLIENT")).keys() == set(BROKERS) and got,
        30,
        "broker 1 to know every broker",
        interval=0.5,
    )
    assert seen == {b: listener_address(c, b, "CLIENT") for b in BROKERS}
    assert brokers_seen_through(c, "REPLICATION") == {
        b: ("127.0.0.1", links[b].proxy.port) for b in BROKERS
    }
    # Replication and the controller's requests go over REPLICATION (the listener that
    # comes second): the topic comes online with full ISRs, and what a client
    # produces through CLIENT is replicated.
    stream = topic_and_stream(c, min_insync_replicas=2)
    wait_for(lambda: len(stream.acked.by_offset) >= 1000, 60, "1000 acknowledgements")
    check_nothing_lost(c, stream)
    assert not stream.acked.errors


def test_a_leader_cut_off_from_its_followers_acknowledges_nothing_below_min_insync(
    split_cluster: tuple[Cluster, dict[int, InterBrokerLink]],
) -> None:
    c, links = split_cluster
    stream = topic_and_stream(c, min_insync_replicas=2)
    victim, led = cut_a_leader(c, links, stream)
    # Answers in flight when the ISR shrank have arrived after a second; from then on,
    # nothing on its partitions is acknowledged (it refuses with NOT_ENOUGH_REPLICAS,
    # which the producer retries), while the others' partitions go on.
    time.sleep(1)
    at_shrink = acked_per_partition(stream)
    time.sleep(4)
    later = acked_per_partition(stream)
    assert [later[p] - at_shrink[p] for p in led] == [0] * len(led)
    others = [p for p in range(PARTITIONS) if p not in led]
    assert all(later[p] > at_shrink[p] for p in others), (at_shrink, later)
    links[victim].heal()
    # The followers catch up and rejoin its ISRs; its retried messages are acknowledged.
    wait_healed(c)
    wait_for(
        lambda: all(acked_per_partition(stream)[p] > later[p] for p in led),
        60,
        "acknowledgements on its partitions after the heal",
    )
    check_nothing_lost(c, stream)


def test_a_lone_isr_keeps_its_followers_from_being_elected_when_it_dies(
    split_cluster: tuple[Cluster, dict[int, InterBrokerLink]],
) -> None:
    c, links = split_cluster
    stream = topic_and_stream(c, min_insync_replicas=1)
    victim, led = cut_a_leader(c, links, stream)
    # With min.insync.replicas=1 it acknowledges alone: those messages are on it only.
    at_shrink = acked_per_partition(stream)
    wait_for(
        lambda: all(acked_per_partition(stream)[p] >= at_shrink[p] + 100 for p in led),
        60,
        "acknowledgements by the cut-off leader alone",
    )
    c[victim].kill()
    # Its followers are live but out of the ISR: with unclean election off, its
    # partitions go offline (leader -1, the ISR still naming it) rather than lose what it
    # alone acknowledged.
    offline = c.wait_partitions(
        TOPIC,
        lambda s: all(s[p].leader == -1 for p in led),
        "its partitions offline",
        timeout=c.session_timeout_s + 30,
    )
    assert all(tuple(offline[p].isr) == (victim,) for p in led)
    time.sleep(2)  # long enough for a wrong election to have happened
    assert all(c.partition_states(TOPIC)[p].leader == -1 for p in led)
    assert not [
        r
        for b in BROKERS
        for r in c[b].state_changes("partition_state")
        if r["reason"] == "unclean"
    ]
    links[victim].heal()
    c[victim].start()
    back = c.wait_partitions(
        TOPIC,
        lambda s: all(s[p].leader == victim for p in led),
        "the restarted broker leading its partitions again",
        timeout=90,
    )
    assert all(back[p].leader_epoch > offline[p].leader_epoch for p in led)
    wait_healed(c)
    check_nothing_lost(c, stream)

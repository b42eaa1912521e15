"""election/registration.py's check before a broker registers: Kafka 2.8's
KafkaServer.createBrokerInfo refuses endpoints another registered broker advertises."""

from __future__ import annotations

from typing import Any, cast

import pytest

from election.registration import EndpointsInUse, check_endpoints_unclaimed
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import BrokerRegistration, EndPoint, encode_broker


def registered(*brokers: BrokerRegistration) -> Any:
    zk = FakeZk()
    zk.put(paths.BROKER_IDS, b"")
    for reg in brokers:
        zk.put(paths.broker(reg.broker_id), encode_broker(reg))
    return zk


def broker(broker_id: int, *endpoints: tuple[str, str, int]) -> BrokerRegistration:
    return BrokerRegistration(broker_id, tuple(EndPoint(*ep) for ep in endpoints))


def test_an_endpoint_another_broker_registered_is_refused() -> None:
    zk = registered(broker(1, ("PLAINTEXT", "127.0.0.1", 9092)))
    with pytest.raises(
        EndpointsInUse,
        match=r"^Configured end points 127\.0\.0\.1:9092 in advertised listeners are already"
        r" registered by broker 1$",
    ):
        check_endpoints_unclaimed(
            zk, broker(2, ("CLIENT", "127.0.0.1", 9093), ("REPLICATION", "127.0.0.1", 9092))
        )


def test_other_endpoints_and_the_brokers_own_registration_pass() -> None:
    zk = registered(
        broker(1, ("PLAINTEXT", "127.0.0.1", 9092)),
        broker(2, ("PLAINTEXT", "127.0.0.1", 9093)),  # an earlier run of broker 2
    )
    # The same port on another host, the same host on another port: not the same.
    check_endpoints_unclaimed(
        zk, broker(2, ("PLAINTEXT", "127.0.0.1", 9093), ("OTHER", "10.0.0.1", 9092))
    )


def test_a_registration_that_cannot_be_read_is_skipped() -> None:
    zk = registered(broker(3, ("PLAINTEXT", "127.0.0.1", 9092)))
    zk.put(paths.broker(1), b"not json")
    zk.put(paths.BROKER_IDS + "/not-a-broker", b"")
    check_endpoints_unclaimed(zk, broker(2, ("PLAINTEXT", "127.0.0.1", 9093)))
    with pytest.raises(EndpointsInUse, match="by broker 3"):
        check_endpoints_unclaimed(zk, broker(2, ("PLAINTEXT", "127.0.0.1", 9092)))


def test_a_broker_gone_since_the_listing_does_not_end_the_check() -> None:
    """A registration listed but gone by the read (its broker stopped meanwhile) is
    skipped, and the brokers after it are still checked."""

    class ListsAGoneBroker(FakeZk):
        def get_children(self, path: str, *args: Any, **kwargs: Any) -> list[str] | None:
            listed = super().get_children(path, *args, **kwargs)
            if path == paths.BROKER_IDS:
                assert listed is not None
                return [*listed, "1"]
            return listed

    zk = ListsAGoneBroker()
    zk.put(paths.BROKER_IDS, b"")
    zk.put(paths.broker(3), encode_broker(broker(3, ("PLAINTEXT", "127.0.0.1", 9092))))
    assert zk.get_many([paths.broker(1)]) == [None]
    with pytest.raises(EndpointsInUse, match="by broker 3"):
        check_endpoints_unclaimed(cast(ZkClient, zk), broker(2, ("PLAINTEXT", "127.0.0.1", 9092)))

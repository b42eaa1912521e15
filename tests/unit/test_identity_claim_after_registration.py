"""broker/server.py brings a persistent identity's claim address up to date only once the
broker's registration of /brokers/ids/<id> succeeded. Before, establishing the identity
wrote it: a broker started from a copy of a live broker's disk (same identity file, same
check code) rewrote the live broker's claim to its own address, then was refused its
registration (BrokerIdInUse), and the claim kept the address of a broker that never ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker import server
from broker.config import load_broker_config
from election.broker_identity import IdentityOutcome
from election.registration import BrokerIdInUse
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.znodes import (
    IdentityClaim,
    decode_identity_claim,
    encode_cluster_id,
    encode_identity_claim,
)

OLD = IdentityClaim(1, "DefaultCluster", "red", "10.0.0.1:9092", "code")


def new_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zk: Any
) -> tuple[server.KafkaServer, str]:
    """A persistent broker holding OLD's identity (its establishment stubbed) on a new
    address, over ``zk``; its controller and background threads are stand-ins."""
    config = load_broker_config(
        text="broker.identity.mode=persistent\nbroker.name=red\n"
        "listeners=PLAINTEXT://127.0.0.1:0\nzookeeper.connect=127.0.0.1:1\n"
        f"log.dirs={tmp_path / 'data'}\n"
    )

    def establish(_config: Any, address: str, **_: Any) -> IdentityOutcome:
        outcome = IdentityOutcome("persistent", 1, "identity-file", "DefaultCluster:red:1")
        outcome.claim = IdentityClaim(1, "DefaultCluster", "red", address, "code")
        return outcome

    monkeypatch.setattr(server, "establish_identity", establish)
    broker = server.KafkaServer(config)
    zk.start = lambda **_: None
    zk.close = lambda: None
    zk.connected = True
    broker.zk = zk
    monkeypatch.setattr(broker.controller, "start", lambda: None)
    monkeypatch.setattr(broker.config_changes, "start", lambda: None)
    monkeypatch.setattr(broker._status_thread, "start", lambda: None)
    monkeypatch.setattr(broker, "controlled_shutdown", lambda: True)
    return broker, f"127.0.0.1:{broker.socket_server.port}"


def fake_zk() -> Any:
    zk: Any = FakeZk()
    zk.put(paths.CLUSTER_ID, encode_cluster_id("cid"))
    zk.put(paths.BROKER_IDENTITIES, b"")
    zk.put(paths.broker_identity(1), encode_identity_claim(OLD))
    return zk


def claim_in(zk: Any) -> IdentityClaim:
    return decode_identity_claim(1, zk.get(paths.broker_identity(1))[0])


def test_a_broker_refused_its_registration_leaves_the_claim_address_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zk = fake_zk()
    broker, _address = new_server(tmp_path, monkeypatch, zk)

    def refused(**_: Any) -> int:
        raise BrokerIdInUse("broker.id 1 is registered by another live broker")

    monkeypatch.setattr(broker, "register", refused)
    try:
        with pytest.raises(BrokerIdInUse):
            broker.startup()
    finally:
        broker.shutdown()
    assert (claim_in(zk).address, claim_in(zk).check_code) == (OLD.address, "code")


def test_a_registered_broker_records_its_new_address_in_the_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zk = fake_zk()
    broker, address = new_server(tmp_path, monkeypatch, zk)
    written: list[str] = []

    def registered(**_: Any) -> int:
        written.append(claim_in(zk).address)  # what the claim said when registering
        return 5

    monkeypatch.setattr(broker, "register", registered)
    try:
        broker.startup()
    finally:
        broker.shutdown()
    assert written == [OLD.address]
    assert (claim_in(zk).address, claim_in(zk).check_code) == (address, "code")


def test_a_claim_that_cannot_be_read_once_registered_does_not_stop_the_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim's address is for the listing: a claim replaced by hand with data that is
    no claim (read once registered) is reported with its path, the broker goes on."""
    zk = fake_zk()
    zk.put(paths.broker_identity(1), b"{not json")
    broker, _address = new_server(tmp_path, monkeypatch, zk)
    monkeypatch.setattr(broker, "register", lambda **_: 5)
    try:
        broker.startup()
        assert broker.startup_complete.is_set()
    finally:
        broker.shutdown()
    assert zk.get(paths.broker_identity(1))[0] == b"{not json"

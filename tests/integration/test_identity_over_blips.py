"""The identity step over ZooKeeper blips (real ZooKeeper, a cuttable link): a request
cut off is sent again once connected, a claim whose answer was lost is known as ours by
its check code (no id leaks), and a broker asked to stop while it cannot reach ZooKeeper
stops at once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from cluster.netsplit import ZooKeeperLink
from cluster.supervised import wait_for
from election.broker_identity import (
    IdentityFiles,
    IdentityOutcome,
    obtain_kafka_id,
    obtain_persistent_id,
)
from election.identity_store import ZkIdentityStore
from tests.integration.test_broker_identity import Brokers, brokers  # noqa: F401 (fixture)
from zkdata import paths
from zkdata.client import CancelledWhileDisconnected, ZkClient
from zkdata.znodes import decode_identity_claim

pytestmark = pytest.mark.integration

T = TypeVar("T")

# Short, so that the client notices a cut link within seconds (it gives a connection two
# thirds of the session timeout to answer); a blip shorter than it keeps the session.
SESSION_TIMEOUT_MS = 4_000

CONNECTING = "to establish the broker id"


@pytest.fixture
def link(zk_connect: str) -> Iterator[ZooKeeperLink]:
    made = ZooKeeperLink(zk_connect)
    yield made
    made.close()


@pytest.fixture
def linked_client(link: ZooKeeperLink) -> Iterator[ZkClient]:
    zk = ZkClient(link.connect_string, session_timeout_ms=SESSION_TIMEOUT_MS)
    zk.start()
    zk.ensure_paths([paths.BROKER_IDS])
    yield zk
    zk.close()


@pytest.fixture
def direct(zk_connect: str) -> Iterator[ZkClient]:
    """A client of our own, never cut off: what ZooKeeper holds."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    yield zk
    zk.close()


class InThread:
    """`fn()` on a thread of its own; `result()` its value or its exception."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.value: object = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.value = fn()
            except BaseException as e:  # handed to the test
                self.error = e

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self, timeout: float) -> object:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"still running after {timeout} s"
        if self.error is not None:
            raise self.error
        return self.value


def claims(zk: ZkClient) -> dict[int, str]:
    """Each claimed id's check code."""
    result = {}
    for child in zk.get_children(paths.BROKER_IDENTITIES) or []:
        got = zk.get(paths.broker_identity(int(child)))
        assert got is not None
        result[int(child)] = decode_identity_claim(int(child), got[0]).check_code
    return result


def allocate(
    store: ZkIdentityStore, directory: Path, on_crash_point: Callable[[str], None]
) -> InThread:
    return InThread(
        lambda: obtain_persistent_id(
            store,
            IdentityFiles(directory),
            cluster_name="c",
            broker_name="b",
            address="127.0.0.1:9092",
            crash=on_crash_point,
        )
    )


def at(point: str, action: Callable[[], None]) -> Callable[[str], None]:
    return lambda reached: action() if reached == point else None


def test_a_claim_whose_answer_is_lost_is_known_as_ours_and_no_id_leaks(
    linked_client: ZkClient, link: ZooKeeperLink, direct: ZkClient, tmp_path: Path
) -> None:
    """ApplyBrokerId's create reaches ZooKeeper and is carried out; its answer is lost.
    Sent again once connected, it meets the claim (NodeExists), whose check code is ours:
    the id is ours, not rejected and left claimed by no one."""
    direct.ensure_paths([paths.BROKER_IDENTITIES])  # else the first create meets NoNode
    store = ZkIdentityStore(linked_client)
    # Cut the answers between the temp file and the apply: the create goes out into it.
    running = allocate(store, tmp_path, at("after_temp", link.cut_answers))
    wait_for(lambda: claims(direct), 30, "the claim to be made in ZooKeeper")
    wait_for(lambda: not linked_client.connected, 30, "the client to see its link dead")
    link.heal()
    outcome = running.result(60)
    assert isinstance(outcome, IdentityOutcome)
    assert (outcome.source, outcome.broker_id, outcome.rejected) == ("allocated", 1, [])
    final = IdentityFiles(tmp_path).read_final()
    assert final is not None
    assert final.broker_id == 1
    assert claims(direct) == {1: final.check_code}
    assert IdentityFiles(tmp_path).read_temp() is None


def test_a_request_cut_off_is_sent_again_once_connected(
    linked_client: ZkClient, link: ZooKeeperLink, direct: ZkClient, tmp_path: Path
) -> None:
    """The link is cut both ways just before the claim: the create never arrives, fails
    for want of a connection, and goes out again once the link is back."""
    store = ZkIdentityStore(linked_client)
    running = allocate(store, tmp_path, at("after_temp", link.cut))
    wait_for(lambda: not linked_client.connected, 30, "the client to see its link dead")
    assert claims(direct) == {}
    link.heal()
    outcome = running.result(60)
    assert isinstance(outcome, IdentityOutcome)
    assert (outcome.source, outcome.broker_id) == ("allocated", 1)
    final = IdentityFiles(tmp_path).read_final()
    assert final is not None
    assert claims(direct) == {1: final.check_code}


def test_a_generated_id_over_a_lost_answer_is_the_seqid_now(
    linked_client: ZkClient, link: ZooKeeperLink, direct: ZkClient, tmp_path: Path
) -> None:
    """Kafka's generated id: the seqid bump is carried out and its answer lost; the bump
    sent again skips an id (as Kafka's retry does), and the id is the seqid's version now,
    so no other broker can be given it."""
    direct.ensure_paths([paths.BROKER_SEQID])
    store = ZkIdentityStore(linked_client)

    def cut_then_store() -> ZkIdentityStore:
        link.cut_answers()
        return store

    running = InThread(
        lambda: obtain_kafka_id(
            -1,
            [str(tmp_path)],
            generation_enabled=True,
            reserved_max_id=1000,
            store_factory=cut_then_store,
            crash=lambda _point: None,
        )
    )
    wait_for(
        lambda: (st := direct.exists(paths.BROKER_SEQID)) is not None and st.version >= 1,
        30,
        "the seqid bump to be made",
    )
    wait_for(lambda: not linked_client.connected, 30, "the client to see its link dead")
    link.heal()
    outcome = running.result(60)
    assert isinstance(outcome, IdentityOutcome)
    seqid = direct.exists(paths.BROKER_SEQID)
    assert seqid is not None
    assert seqid.version == 2  # the lost bump, then the one answered
    assert outcome.broker_id == 1000 + seqid.version
    assert outcome.source == "generated"


def test_a_stop_while_the_identity_waits_for_zookeeper_gives_up(
    linked_client: ZkClient, link: ZooKeeperLink, tmp_path: Path
) -> None:
    cancelled = threading.Event()
    store = ZkIdentityStore(linked_client, cancelled)
    running = allocate(store, tmp_path, at("after_temp", link.cut))
    wait_for(lambda: not linked_client.connected, 30, "the client to see its link dead")
    cancelled.set()
    with pytest.raises(CancelledWhileDisconnected):
        running.result(10)


def test_a_broker_asked_to_stop_while_it_cannot_reach_zookeeper_exits_0_at_once(
    brokers: Brokers,  # noqa: F811 (the fixture)
    link: ZooKeeperLink,
) -> None:
    """A persistent-id broker starts with its link to ZooKeeper cut: it waits for a
    connection (at most zookeeper.connection.timeout.ms, 15 s here, as Kafka does). A
    SIGTERM meanwhile stops it at once with exit 0, not a failed start after the wait."""
    link.cut()
    b = brokers.persistent("blip")
    b.zk_connect = link.connect_string
    b.start()
    wait_for(lambda: CONNECTING in b.output() or not b.alive(), 30, "the broker to connect")
    assert b.alive(), b.output()
    b.terminate()
    assert b.wait_exit(timeout=10) == 0, b.output()
    assert "stopped while starting" in b.output()
    assert brokers.claims() == {}


def test_a_broker_whose_link_returns_within_the_connection_timeout_gets_its_id(
    brokers: Brokers,  # noqa: F811 (the fixture)
    link: ZooKeeperLink,
) -> None:
    link.cut()
    b = brokers.persistent("late")
    b.zk_connect = link.connect_string
    b.start()
    wait_for(lambda: CONNECTING in b.output() or not b.alive(), 30, "the broker to connect")
    link.heal()
    assert b.allocated_id() == 1
    brokers.wait_registered({1})

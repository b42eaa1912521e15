"""Bad input from every side: malformed znodes (reported by path, skipped or removed, and the
controller goes on), malformed requests on a broker's socket (answered or the connection
closed, and the broker goes on), and bad zkctl arguments (one clear line, no traceback)."""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings

from admin import elect, reassign, topics
from broker.apis import SUPPORTED
from cluster import ports
from cluster import zookeeper as zkp
from cluster.supervised import SupervisedBroker
from election.broker_identity import checkpoint_meta_properties
from election.controller_election import (
    NO_CONTROLLER,
    delete_controller_of_term,
    delete_own_controller_znode,
    try_elect,
)
from tests.integration.conftest import FAST, ClusterFactory
from tests.integration.harness import Cluster, wait_for
from tests.integration.workload import ZOOKEEPER_START_FAILURE, revive_failed_start
from tests.wire_bodies import struct_strategy
from wire.api import ApiKey, request_spec
from wire.client import KafkaConnection, KafkaConnectionError, negotiate_versions
from wire.errors import ErrorCode
from wire.protocol import decode_response, encode_request, request_header_version
from zkctl import cli
from zkdata import paths, znodes
from zkdata.client import WatchHandler, ZkClient
from zkdata.znodes import TopicPartition

pytestmark = pytest.mark.integration

GARBAGE = b"\x00{not json"


def malformed(path: str) -> str:
    return f"malformed data in znode {path}"


def wait_reported(c: Cluster, broker_id: int, path: str) -> None:
    wait_for(
        lambda: malformed(path) in c[broker_id].output(),
        30,
        f"broker {broker_id} to report {path}",
    )


def create_and_wait_online(c: Cluster, name: str) -> None:
    """A valid topic creation still goes online: the controller keeps working."""
    topics.create_topic(c.zk, topics.parse_create_request(name, partitions=2, replication_factor=1))
    c.wait_topic_online(name, timeout=30)


def all_alive(c: Cluster) -> bool:
    return all(b.alive() for b in c.brokers.values())


# --- malformed znodes -----------------------------------------------------------------------


def test_a_malformed_topic_znode_is_reported_and_ignored(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory(brokers=(1,))
    c.zk.create(paths.topic("bad"), GARBAGE)
    wait_reported(c, 1, paths.topic("bad"))
    # A name no topic can have, its log's too long for a file name: the broker took its
    # log directory offline and halted (item 41).
    long_name = "a" * 300
    c.zk.create(paths.topic(long_name), b'{"version":2,"partitions":{"0":[1]}}')
    wait_reported(c, 1, paths.topic(long_name))
    create_and_wait_online(c, "good")
    assert c.zk.exists(paths.topic_partitions("bad")) is None
    assert all_alive(c)


def test_a_malformed_partition_state_is_skipped_and_the_others_elected(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(brokers=(1, 2))
    controller_id, _ = c.wait_controller()
    other = 3 - controller_id
    c.create_topic("t", {0: (controller_id, other), 1: (controller_id, other)})
    c.wait_topic_online("t")
    bad = paths.partition_state("t", 1)
    c.zk.set(bad, GARBAGE)
    # The next controller loads every partition state in its failover.
    assert c[controller_id].stop() == 0
    c.wait_controller(not_id=controller_id)
    wait_reported(c, other, bad)
    state, _ = c.partition_state("t", 0)
    assert state.leader == other
    got = c.zk.get(bad)
    assert got is not None
    assert got[0] == GARBAGE  # skipped: nobody wrote over it
    create_and_wait_online(c, "good")
    assert c[other].alive()


def test_a_malformed_broker_registration_is_ignored(
    cluster_factory: ClusterFactory, own_session: ZkClient
) -> None:
    c = cluster_factory(brokers=(1, 2))
    controller_id, _ = c.wait_controller()
    own_session.create(paths.broker(9), GARBAGE, ephemeral=True)
    wait_reported(c, controller_id, paths.broker(9))
    # Admin tools skip it too: two replicas go to the two real brokers.
    topics.create_topic(
        c.zk, topics.parse_create_request("good", partitions=2, replication_factor=2)
    )
    states = c.wait_topic_online("good")
    assert all(set(s.isr) == {1, 2} for s in states.values())
    own_session.close()
    wait_for(lambda: 9 not in c.registered(), 30, "the garbage registration gone")
    create_and_wait_online(c, "after")
    assert all_alive(c)


def test_malformed_admin_requests_and_isr_notifications_are_reported_and_removed(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(brokers=(1, 2))
    controller_id, _ = c.wait_controller()
    c.create_topic("t", {0: (1,)})
    c.wait_topic_online("t")
    for path in (paths.REASSIGN_PARTITIONS, paths.PREFERRED_REPLICA_ELECTION):
        c.zk.create(path, GARBAGE, make_parents=True)
        wait_reported(c, controller_id, path)
        wait_for(lambda p=path: c.zk.exists(p) is None, 30, f"{path} removed")  # type: ignore[misc]
    created, _ = c.zk.create(
        paths.isr_change_notification(paths.ISR_CHANGE_PREFIX), GARBAGE, sequential=True
    )
    wait_reported(c, controller_id, created)
    wait_for(lambda: c.zk.exists(created) is None, 30, f"{created} removed")
    # Valid requests after them are carried out.
    reassign.start_reassignment(c.zk, {TopicPartition("t", 0): (2,)})
    wait_for(
        lambda: (
            c.zk.exists(paths.REASSIGN_PARTITIONS) is None
            and (a := c.assignment("t")) is not None
            and a.partitions == {0: (2,)}
        ),
        30,
        "the valid reassignment done",
    )
    c.create_topic("u", {0: (1, 2)})
    c.wait_topic_online("u")
    elect.start_preferred_election(c.zk, elect.parse_scope(topic="u"))
    wait_for(lambda: c.zk.exists(paths.PREFERRED_REPLICA_ELECTION) is None, 30, "election done")
    assert all_alive(c)


def test_a_malformed_controller_znode_blocks_no_broker_and_its_removal_brings_an_election(
    cluster_factory: ClusterFactory, own_session: ZkClient
) -> None:
    own_session.create(paths.CONTROLLER, GARBAGE, ephemeral=True)
    c = cluster_factory(brokers=(1, 2), start=False)
    c.start(wait=False)
    c.wait_registered([1, 2])
    for b in (1, 2):
        wait_reported(c, b, paths.CONTROLLER)
    # Somebody holds /controller, unreadable: nobody may take over while it stands.
    wait_for(
        lambda: all(
            (st := c[b].status()) is not None and st["controller"]["active"] is False
            for b in (1, 2)
        ),
        30,
        "both brokers serving, neither controller",
    )
    own_session.close()
    _, epoch = c.wait_controller()
    assert epoch == 1
    create_and_wait_online(c, "good")
    assert all_alive(c)


def test_garbage_written_over_the_live_controllers_znode_brings_a_new_election(
    cluster_factory: ClusterFactory,
) -> None:
    """The controller cannot read /controller any more, so it resigns; the znode is its own
    session's ephemeral, so it must remove it too, or the cluster stays without a controller
    until that broker restarts."""
    c = cluster_factory(brokers=(1, 2))
    controller_id, _ = c.wait_controller()
    c.zk.set(paths.CONTROLLER, GARBAGE)
    wait_reported(c, controller_id, paths.CONTROLLER)

    def garbage_gone() -> bool:
        got = c.zk.get(paths.CONTROLLER)
        return got is None or got[0] != GARBAGE

    wait_for(garbage_gone, 30, "the unreadable /controller removed")
    _, epoch = c.wait_controller(min_epoch=2, timeout=30)
    assert epoch == 2
    create_and_wait_online(c, "good")
    assert all_alive(c)


def test_the_election_with_malformed_controller_znodes(
    zk_connect: str, own_session: ZkClient
) -> None:
    """The election module's part, with no broker: a malformed /controller_epoch holds no
    election but watches the znode; a /controller made unreadable is still its session's."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        zk.create(paths.CONTROLLER_EPOCH, b"garbage")
        fired: list[object] = []
        zk.register_handler(paths.CONTROLLER_EPOCH, cast(WatchHandler, fired.append))
        outcome = try_elect(zk, 1)
        assert (outcome.controller_id, outcome.token) == (NO_CONTROLLER, None)
        assert malformed(paths.CONTROLLER_EPOCH) in (outcome.problem or "")
        assert zk.exists(paths.CONTROLLER) is None
        own_session.set(paths.CONTROLLER_EPOCH, znodes.encode_controller_epoch(7))
        wait_for(lambda: fired, 10, "the watch on /controller_epoch to fire")
        outcome = try_elect(zk, 1)
        assert outcome.token is not None
        assert outcome.token.epoch == 8

        own_session.set(paths.CONTROLLER, GARBAGE)
        assert not delete_own_controller_znode(own_session, 1)  # not that session's
        assert delete_own_controller_znode(zk, 1)
        assert zk.exists(paths.CONTROLLER) is None
    finally:
        zk.close()


@pytest.mark.parametrize("bad", [GARBAGE, b"2147483647"], ids=["garbage", "int32-max"])
def test_a_repair_of_the_controller_epoch_right_after_its_read_is_not_missed(
    zk_connect: str, own_session: ZkClient, bad: bytes
) -> None:
    """Item 10: the election held over a bad /controller_epoch runs once it is repaired.
    The watch was armed by an exists() sent after the read that found the znode bad: a
    repair landing between the two was neither read nor notified, and no broker was ever
    elected. Now the read that holds the election arms the watch itself."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        zk.create(paths.CONTROLLER_EPOCH, bad)
        fired: list[object] = []
        zk.register_handler(paths.CONTROLLER_EPOCH, cast(WatchHandler, fired.append))
        real_get = zk.get
        repaired: list[bool] = []

        def get(path: str, *, watch: bool = False) -> object:
            got = real_get(path, watch=watch)
            if path == paths.CONTROLLER_EPOCH and not watch and not repaired:
                repaired.append(True)  # the operator's repair lands right after the read
                own_session.set(paths.CONTROLLER_EPOCH, znodes.encode_controller_epoch(7))
            return got

        zk.get = get  # type: ignore[method-assign,assignment]
        outcome = try_elect(zk, 1)
        assert repaired
        if outcome.token is None:  # held: then the repair must bring the election back
            wait_for(lambda: fired, 5, "the repair of /controller_epoch to be noticed")
            outcome = try_elect(zk, 1)
        assert outcome.token is not None
        assert outcome.token.epoch == 8
    finally:
        zk.close()


def test_a_stale_view_of_its_own_controller_znode_never_deletes_the_next_ones(
    zk_connect: str, own_session: ZkClient
) -> None:
    """A resigned controller that reconnected removes its own `/controller`; the server it
    reads from may lag and still show that znode after an admin deleted it and another
    broker won the next term, with a `/controller` of the same version (0). The delete
    must remove nothing then (an ensemble fault schedule, seed 63, saw the next
    controller's removed: its term lasted 60 ms)."""
    a = ZkClient(zk_connect, session_timeout_ms=10_000)
    b = ZkClient(zk_connect, session_timeout_ms=10_000)
    a.start()
    b.start()
    try:
        assert try_elect(a, 1).token is not None
        epoch, mine = a.get(paths.CONTROLLER_EPOCH), a.get(paths.CONTROLLER)
        assert epoch is not None
        assert mine is not None  # what a lagging server would go on showing
        own_session.delete(paths.CONTROLLER)  # an admin forces an election
        assert try_elect(b, 2).token is not None
        theirs = own_session.get(paths.CONTROLLER)
        assert theirs is not None
        assert theirs[1].version == mine[1].version
        assert not delete_controller_of_term(a, epoch[1].version, mine[1].version)
        after = own_session.get(paths.CONTROLLER)
        assert after is not None
        assert znodes.decode_controller(after[0]) == 2
        # Its own, seen up to date: removed.
        b_epoch, b_node = b.get(paths.CONTROLLER_EPOCH), b.get(paths.CONTROLLER)
        assert b_epoch is not None
        assert b_node is not None
        assert not delete_own_controller_znode(a, 1)  # not a's session
        assert delete_own_controller_znode(b, 2)
        assert own_session.exists(paths.CONTROLLER) is None
    finally:
        a.close()
        b.close()


def test_a_malformed_controller_epoch_is_reported_and_the_election_retried_once_fixed(
    cluster_factory: ClusterFactory,
) -> None:
    """/controller_epoch is not a number: no broker may be elected, since nobody knows which
    epoch comes next (a guess lower than one brokers have seen would have every request of
    the new controller refused as stale). Each broker reports the znode by path and keeps
    serving; once an operator writes a valid epoch, the election goes ahead by itself."""
    c = cluster_factory(brokers=(1, 2), start=False)
    c.zk.create(paths.CONTROLLER_EPOCH, b"garbage")
    c.start(wait=False)
    c.wait_registered([1, 2])
    for b in (1, 2):
        wait_reported(c, b, paths.CONTROLLER_EPOCH)
        assert "cannot elect a controller" in c[b].output()
        assert "Traceback" not in c[b].output()  # a clear error, not a failed event
    assert c.zk.exists(paths.CONTROLLER) is None
    assert all_alive(c)
    c.zk.set(paths.CONTROLLER_EPOCH, znodes.encode_controller_epoch(7))
    _, epoch = c.wait_controller(timeout=30)
    assert epoch == 8
    create_and_wait_online(c, "good")


# --- malformed requests on a broker's socket -----------------------------------------------


@pytest.fixture(scope="module")
def broker(zookeeper: zkp.ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One broker for every request case (each case leaves it as it found it)."""
    connect = zkp.chroot_connect_string(
        zookeeper.connect_string, f"/tests/bad-requests-{uuid.uuid4().hex[:8]}"
    )
    c = Cluster(connect, tmp_path_factory.mktemp("bad-requests"), (1,), dict(FAST))
    try:
        c.start()
        c.create_topic("t", {0: (1,)})
        c.wait_topic_online("t")
        # Online in ZooKeeper first, in the broker's metadata once the controller's
        # UpdateMetadata arrives: each case checks the broker's answer shows "t".
        wait_for(lambda: metadata_names(c) == ["t"], 30, "the broker's metadata to show t")
        yield c
    finally:
        c.close()
        zkp.delete_chroot(connect)


def connect(c: Cluster) -> socket.socket:
    return socket.create_connection(("127.0.0.1", c[1].port()), timeout=10)


def header(api_key: int, version: int, correlation_id: int = 1, client_id: str = "probe") -> bytes:
    """A request header v1 (int16 key, int16 version, int32 correlation id, string client
    id), built by hand so that any key and version can be sent."""
    name = client_id.encode()
    return struct.pack(">hhih", api_key, version, correlation_id, len(name)) + name


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame (without its size prefix), or None if the broker closed."""
    prefix = _read(sock, 4)
    if prefix is None:
        return None
    (size,) = struct.unpack(">i", prefix)
    return _read(sock, size)


def _read(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def metadata_names(c: Cluster) -> list[str]:
    with connect(c) as sock:
        return [t["name"] for t in metadata_over(sock, 1)["topics"]]  # type: ignore[attr-defined]


def metadata_over(sock: socket.socket, correlation_id: int) -> dict[str, object]:
    sock.sendall(encode_request(ApiKey.METADATA, 1, correlation_id, "probe", {"topics": None}))
    frame = read_frame(sock)
    assert frame is not None, "the broker closed the connection instead of answering Metadata"
    got_id, body = decode_response(ApiKey.METADATA, 1, frame)
    assert got_id == correlation_id
    return body


def assert_closed(sock: socket.socket) -> None:
    """The broker closes the connection (and does not hang on it)."""
    assert read_frame(sock) is None


def truncated(sock: socket.socket) -> None:
    sock.sendall(struct.pack(">i", 100) + b"0123456789")
    sock.shutdown(socket.SHUT_WR)  # and then close: the frame never completes
    assert_closed(sock)


def unknown_api_key(sock: socket.socket) -> None:
    sock.sendall(framed(header(999, 0)))
    assert_closed(sock)


def unsupported_metadata_version(sock: socket.socket) -> None:
    # A readable header (v2: flexible, so a tagged-field section) of a version we lack.
    sock.sendall(framed(header(ApiKey.METADATA, 99) + b"\x00"))
    assert_closed(sock)


def offset_commit_version_above_ours(sock: socket.socket) -> None:
    # OffsetCommit v9 is in the schemas (Kafka 3.x's), but this broker answers up to v8,
    # as Kafka 2.8 (it answers from v0, as Kafka 2.8: no version below ours is left).
    assert SUPPORTED[ApiKey.OFFSET_COMMIT].max_version == 8
    sock.sendall(framed(header(ApiKey.OFFSET_COMMIT, 9) + b"\x00" * 16))
    assert_closed(sock)


def api_versions_v99(sock: socket.socket) -> None:
    # A version newer than ours: header v2 (flexible), with an empty tagged-field section.
    sock.sendall(framed(header(ApiKey.API_VERSIONS, 99, 7) + b"\x00"))
    frame = read_frame(sock)
    assert frame is not None
    correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, frame)
    assert correlation_id == 7
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION == 35  # type: ignore[comparison-overlap]  # the enum's value
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert ranges == {int(k): (s.min_version, s.max_version) for k, s in SUPPORTED.items()}
    assert metadata_over(sock, 8)["brokers"]  # the same connection goes on


def api_versions_negative_version(sock: socket.socket) -> None:
    # Kafka reads the header of any version: an ApiVersions version below ours is answered
    # in v0, as one above it is; the connection goes on.
    sock.sendall(framed(header(ApiKey.API_VERSIONS, -1, 13)))
    frame = read_frame(sock)
    assert frame is not None
    correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, frame)
    assert correlation_id == 13
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert metadata_over(sock, 14)["brokers"]


def metadata_negative_version(sock: socket.socket) -> None:
    sock.sendall(framed(header(ApiKey.METADATA, -1) + struct.pack(">i", -1)))
    assert_closed(sock)


def api_versions_body_that_does_not_decode(sock: socket.socket) -> None:
    # v3's body starts with a compact string: a length of 126 with no bytes behind it.
    sock.sendall(framed(header(ApiKey.API_VERSIONS, 3, 9) + b"\x00" + b"\x7f"))
    frame = read_frame(sock)
    assert frame is not None
    correlation_id, body = decode_response(ApiKey.API_VERSIONS, 3, frame)
    assert correlation_id == 9
    assert body["error_code"] == ErrorCode.INVALID_REQUEST
    assert metadata_over(sock, 10)["brokers"]


def client_id_length_minus_2(sock: socket.socket) -> None:
    # Kafka's RequestHeaderData reads any negative length of the nullable client id as
    # null, and the request is served.
    head = struct.pack(">hhih", ApiKey.METADATA, 1, 11, -2)
    sock.sendall(framed(head + struct.pack(">i", -1)))
    frame = read_frame(sock)
    assert frame is not None
    correlation_id, body = decode_response(ApiKey.METADATA, 1, frame)
    assert correlation_id == 11
    assert [t["name"] for t in body["topics"]] == ["t"]


def metadata_topics_count_minus_2(sock: socket.socket) -> None:
    # Metadata v1's topics is nullable: a count of -2 is null (all topics), as -1 is.
    sock.sendall(framed(header(ApiKey.METADATA, 1, 12) + struct.pack(">i", -2)))
    frame = read_frame(sock)
    assert frame is not None
    correlation_id, body = decode_response(ApiKey.METADATA, 1, frame)
    assert correlation_id == 12
    assert [t["name"] for t in body["topics"]] == ["t"]


def metadata_body_that_does_not_decode(sock: socket.socket) -> None:
    # Metadata responses have no error field to say INVALID_REQUEST with: closing is all.
    sock.sendall(framed(header(ApiKey.METADATA, 1) + b"\x00\x00\x00\x05\x00\x01"))
    assert_closed(sock)


def negative_size(sock: socket.socket) -> None:
    sock.sendall(struct.pack(">i", -1) + header(ApiKey.METADATA, 1))
    assert_closed(sock)


def huge_size(sock: socket.socket) -> None:
    sock.sendall(struct.pack(">i", 2**31 - 1) + header(ApiKey.METADATA, 1))
    assert_closed(sock)


def empty_frame(sock: socket.socket) -> None:
    sock.sendall(struct.pack(">i", 0))
    assert_closed(sock)


def random_garbage(sock: socket.socket) -> None:
    rng = random.Random(20240611)
    with contextlib.suppress(OSError):  # the broker may close before it has read it all
        sock.sendall(bytes(rng.randrange(256) for _ in range(4096)))
        sock.shutdown(socket.SHUT_WR)
    assert_closed(sock)


@pytest.mark.parametrize(
    "case",
    [
        truncated,
        unknown_api_key,
        unsupported_metadata_version,
        offset_commit_version_above_ours,
        api_versions_v99,
        api_versions_negative_version,
        metadata_negative_version,
        api_versions_body_that_does_not_decode,
        client_id_length_minus_2,
        metadata_topics_count_minus_2,
        metadata_body_that_does_not_decode,
        negative_size,
        huge_size,
        empty_frame,
        random_garbage,
    ],
    ids=lambda f: f.__name__,
)
def test_a_bad_request_leaves_the_broker_serving(broker: Cluster, case: object) -> None:
    assert callable(case)
    with connect(broker) as sock:
        case(sock)
    assert broker[1].alive()
    with connect(broker) as sock:
        body = metadata_over(sock, 1)
    assert [b["node_id"] for b in body["brokers"]] == [1]  # type: ignore[attr-defined]
    assert [t["name"] for t in body["topics"]] == ["t"]  # type: ignore[attr-defined]
    assert "Traceback" not in broker[1].output()


def test_random_request_bodies_are_answered_or_closed(broker: Cluster) -> None:
    """Valid headers of the client APIs with random bodies: each gets an answer or a closed
    connection, never a hang, and the broker serves on."""
    rng = random.Random(7)
    answered = closed = 0
    sock = connect(broker)
    try:
        for i in range(200):
            api_key = rng.choice(
                [
                    ApiKey.METADATA,
                    ApiKey.API_VERSIONS,
                    ApiKey.CREATE_TOPICS,
                    ApiKey.DELETE_TOPICS,
                    ApiKey.CREATE_PARTITIONS,
                    ApiKey.ELECT_LEADERS,
                    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                    ApiKey.LIST_PARTITION_REASSIGNMENTS,
                    ApiKey.DESCRIBE_CLUSTER,
                    ApiKey.JOIN_GROUP,
                    ApiKey.SYNC_GROUP,
                    ApiKey.HEARTBEAT,
                    ApiKey.LEAVE_GROUP,
                    ApiKey.OFFSET_COMMIT,
                    ApiKey.OFFSET_FETCH,
                    ApiKey.LIST_GROUPS,
                    ApiKey.DESCRIBE_GROUPS,
                ]
            )
            s = SUPPORTED[api_key]
            version = rng.randint(s.min_version, s.max_version)
            hv = request_header_version(api_key, version)
            head = header(api_key, version, i) + (b"\x00" if hv == 2 else b"")
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
            sock.sendall(framed(head + body))
            frame = read_frame(sock)
            if frame is None:
                closed += 1
                sock.close()
                sock = connect(broker)
            else:
                answered += 1
                assert decode_response(api_key, version, frame)[0] == i
    finally:
        sock.close()
    # Both outcomes happened, so both were exercised.
    assert answered > 0
    assert closed > 0
    assert broker[1].alive()
    with connect(broker) as fresh:
        listed = metadata_over(fresh, 1)
    assert listed["brokers"]
    # No random body made or deleted a topic (the seed's bodies; the next cases need "t").
    assert [t["name"] for t in listed["topics"]] == ["t"]  # type: ignore[attr-defined]


# Controller-to-broker APIs go last: a body drawn with a high controller epoch is taken
# for a newer controller's (Kafka's brokers do the same), and its metadata and partition
# states would stand in for the cluster's from there on.
CONTROLLER_APIS = (
    ApiKey.LEADER_AND_ISR,
    ApiKey.STOP_REPLICA,
    ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN,
)
NAMES = ("t", "t", "g", "__consumer_offsets", "")


class DrawnSender:
    """Sends drawn request bodies over one connection, and over a new one after the
    broker closed it; counts the answers and keeps why each connection ended."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = KafkaConnection("127.0.0.1", port, timeout_s=30)
        self.answered = 0
        self.ended: list[str] = []

    def send(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> None:
        if api_key == ApiKey.PRODUCE and not body.get("acks"):
            body = {**body, "acks": -1}  # acks=0 is never answered
        if api_key == ApiKey.FETCH:
            # Long polling waits as long as the request says (up to 24 days).
            body = {**body, "max_wait_ms": min(100, body.get("max_wait_ms", 0))}
        try:
            self.conn.request(api_key, version, body)
            self.answered += 1
        except KafkaConnectionError as e:
            self.ended.append(f"{api_key.name} v{version}: {e}")
            self.conn = KafkaConnection("127.0.0.1", self.port, timeout_s=30)

    def send_drawn(self, api_key: ApiKey, version: int, examples: int) -> None:
        @settings(
            max_examples=examples,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(body=struct_strategy(request_spec(api_key).fields, version, NAMES))
        def send(body: dict[str, Any]) -> None:
            self.send(api_key, version, body)

        send()


def test_schema_drawn_bodies_of_every_api_and_version_are_answered(
    cluster_factory: ClusterFactory,
) -> None:
    """Bodies drawn from the schemas, of every API and version the broker lists, naming
    its topic and group (so that they reach the handlers' logic, past the decoding the
    random bytes above stop at): each is answered, or the connection closed as Kafka
    closes it, within a deadline; no handler fails (UNKNOWN_SERVER_ERROR and a traceback
    in the log), and the broker serves on."""
    c = cluster_factory(brokers=(1,))
    c.create_topic("t", {0: (1,), 1: (1,)})
    c.wait_topic_online("t")
    sender = DrawnSender(c[1].port())
    versions = 0
    try:
        for api_key in sorted(SUPPORTED, key=lambda key: (key in CONTROLLER_APIS, key)):
            supported = SUPPORTED[api_key]
            for version in range(supported.min_version, supported.max_version + 1):
                sender.send_drawn(api_key, version, examples=20)
                versions += 1
                assert c[1].alive(), f"the broker died at {api_key.name} v{version}"
    finally:
        sender.conn.close()
    # A connection ends only where Kafka closes it (a refused acks=0 produce has none
    # here), never by a wait for an answer running out.
    assert [e for e in sender.ended if "closed the connection" not in e] == []
    assert sender.answered > 10 * versions
    output = c[1].output()
    assert "error handling" not in output
    assert "Traceback" not in output
    with KafkaConnection("127.0.0.1", c[1].port(), timeout_s=30) as fresh:
        assert negotiate_versions(fresh)[ApiKey.METADATA] == SUPPORTED[ApiKey.METADATA].max_version


# --- bad zkctl arguments (those tests/unit/test_cli_args.py and test_cli.py do not cover) ---


@pytest.fixture
def registered(own_session: ZkClient) -> ZkClient:
    """Three broker registrations (held by the test's session) and a topic 't'."""
    own_session.ensure_paths(paths.PERSISTENT_PATHS)
    for i in (1, 2, 3):
        reg = znodes.BrokerRegistration(i, (znodes.EndPoint("PLAINTEXT", "127.0.0.1", 9090 + i),))
        own_session.create(paths.broker(i), znodes.encode_broker(reg), ephemeral=True)
    topics.create_topic(
        own_session, topics.parse_create_request("t", partitions=1, replication_factor=1)
    )
    return own_session


NOT_JSON = "this is not JSON"


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (["topic", "add-partitions", "--topic", "nope", "--partitions", "3"], 1,
         "zkctl: error: topic 'nope' does not exist"),
        (["topic", "alter-config", "--topic", "nope", "--add-config", "retention.ms=1"], 1,
         "zkctl: error: topic 'nope' does not exist"),
        (["elect-leaders", "--preferred", "--topic", "nope"], 1,
         "zkctl: error: topic 'nope' does not exist"),
        (["reassign", "--topic", "nope", "--partition", "0", "--replicas", "1"], 1,
         "zkctl: error: cannot reassign: topic 'nope' does not exist"),
        (["topic", "create", "--topic", "u", "--partitions", "-1", "--replication-factor", "1"],
         2, "--partitions must be at least 1, not -1"),
        (["topic", "add-partitions", "--topic", "t", "--partitions", "-2"], 2,
         "--partitions must be at least 1, not -2"),
        (["topic", "create", "--topic", "u", "--replica-assignment", "1:2:x"], 2,
         "invalid replica assignment: partition 0: 'x' is not a broker id"),
        (["topic", "create", "--topic", "u", "--replica-assignment", "1,,2"], 2,
         "invalid replica assignment: partition 1: '' is not a broker id"),
        (["topic", "add-partitions", "--topic", "t", "--partitions", "2",
          "--replica-assignment", "x"], 2, "invalid replica assignment"),
        # Broker ids are Java ints from 0, as --replicas has them: a usage error.
        (["topic", "create", "--topic", "u", "--replica-assignment", "1:-2"], 2,
         "invalid replica assignment: partition 0: '-2' is not a broker id"),
        (["topic", "alter-config", "--topic", "t", "--add-config", "no.such.key=1"], 2,
         "unknown topic config key 'no.such.key'"),
        (["topic", "create", "--topic", "u", "--partitions", "1", "--replication-factor", "1",
          "--config", "unclean.leader.election.enable=maybe"], 2,
         "for topic config key 'unclean.leader.election.enable'"),
        (["reassign", "--reassignment-json-file", "{not_json}"], 2, "not valid JSON"),
        (["reassign", "--reassignment-json-file", "{not_json}", "--verify"], 2, "not valid JSON"),
        (["elect-leaders", "--preferred", "--path-to-json-file", "{not_json}"], 2,
         "not valid JSON"),
    ],
)  # fmt: skip
def test_bad_cli_arguments_get_one_clear_line(
    registered: ZkClient,
    zk_connect: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    expected: str,
) -> None:
    not_json = tmp_path / "plan.json"
    not_json.write_text(NOT_JSON)
    argv = [a.replace("{not_json}", str(not_json)) for a in argv]
    try:
        got = cli.main(["--zookeeper", zk_connect, *argv])
    except SystemExit as e:  # argparse's own errors
        got = int(e.code or 0)
    out, err = capsys.readouterr()
    assert (got, out) == (code, ""), err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1, err
    assert expected in errors[0]
    if code == 1:
        assert err == errors[0] + "\n"  # nothing but the one line
    else:
        assert err.startswith("usage: zkctl")  # argparse style: usage, then the line
    assert "Traceback" not in err
    assert registered.exists(paths.topic("u")) is None  # nothing was written
    assert registered.exists(paths.REASSIGN_PARTITIONS) is None
    assert registered.exists(paths.PREFERRED_REPLICA_ELECTION) is None


def test_a_broker_that_cannot_reach_zookeeper_at_start_exits_and_is_started_again(
    tmp_path: Path,
) -> None:
    """A broker whose ZooKeeper is out of reach past zookeeper.connection.timeout.ms gives
    up its start and exits non-zero with the reason, as Kafka's does; the fault schedules'
    supervisor (workload.revive_failed_start) starts such a broker again, and only such
    a one: a restart too, which gives up in its identity step (the cluster id its
    meta.properties names is checked there, as Kafka checks it before the id)."""
    # A port nothing listens on, from below the kernel's ephemeral range: a port the kernel
    # picked may be the local end of the broker's own connection to it (a TCP connection
    # to itself, which "connects") or go to another socket's listener.
    [port] = ports.free_ports(1, "127.0.0.1")
    broker = SupervisedBroker(
        1,
        tmp_path / "broker-1",
        f"127.0.0.1:{port}",
        {**FAST, "zookeeper.connection.timeout.ms": "1000"},
    )
    try:
        broker.start()
        assert broker.proc is not None
        assert broker.proc.wait(timeout=60) == 1
        assert ZOOKEEPER_START_FAILURE in broker.output()
        assert revive_failed_start(broker)
        assert broker.starts == 2
        assert broker.proc.wait(timeout=60) == 1  # still out of reach
        # a restart: its meta.properties names the cluster
        checkpoint_meta_properties([str(broker.data_dir)], 1, "cid")
        assert revive_failed_start(broker)
        assert broker.proc.wait(timeout=60) == 1
        assert "to establish the broker id" in (broker.root / "broker-2.out").read_text()
        assert revive_failed_start(broker)
        assert broker.proc.wait(timeout=60) == 1
        (broker.root / "broker-3.out").write_text("killed\n")  # as if it ended otherwise
        assert not revive_failed_start(broker)
    finally:
        broker.kill()

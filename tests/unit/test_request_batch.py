"""The request batch: which broker gets what, in which order, and bodies the wire codec takes."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller import request_batch
from controller.context import ControllerContext, LeaderIsrAndControllerEpoch, ReplicaAssignment
from controller.request_batch import (
    LEADER_AND_ISR_VERSION,
    STOP_REPLICA_VERSION,
    UPDATE_METADATA_VERSION,
    BrokerRequest,
    RequestBatch,
    SharedBody,
    UpdateMetadataRow,
    encode_shared_bodies,
    update_metadata_chunks,
)
from wire.api import ApiKey, UpdateMetadataType
from wire.codec import ZERO_UUID
from wire.protocol import (
    EncodedBody,
    decode_request_body,
    decode_request_header,
    encode_request,
    frame_size,
    request_codec,
)
from zkdata.znodes import BrokerRegistration, EndPoint, LeaderAndIsr, TopicPartition

CONTROLLER_ID = 1
T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)
P0 = TopicPartition("payments", 0)
TOPIC_ID = uuid.UUID("5f1c6c1e-8d1b-4a44-a0f1-0c7a1b2c3d4e")


def registration(broker_id: int, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id,
        (
            EndPoint("PLAINTEXT", f"broker-{broker_id}", 9092 + broker_id),
            EndPoint("SSL", f"broker-{broker_id}.example", 9192 + broker_id, "SSL"),
        ),
        rack=rack,
    )


def cluster(
    live: tuple[int, ...] = (1, 2, 3), shutting_down: tuple[int, ...] = ()
) -> ControllerContext:
    ctx = ControllerContext(epoch=7, epoch_zk_version=3)
    ctx.add_live_brokers({b: (registration(b, rack=f"r{b}"), 1000 + b) for b in live})
    ctx.shutting_down_broker_ids = set(shutting_down)
    ctx.topic_ids["orders"] = TOPIC_ID
    for tp, replicas in ((T0, (1, 2, 3)), (T1, (2, 3, 4)), (P0, (3, 1))):
        ctx.update_assignment(tp, ReplicaAssignment(replicas))
    return ctx


def lead(
    ctx: ControllerContext, tp: TopicPartition, leader: int, isr: tuple[int, ...]
) -> LeaderIsrAndControllerEpoch:
    lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 5, isr, zk_version=12), 6)
    ctx.leadership[tp] = lice
    return lice


def by_api(requests: list[BrokerRequest], api: ApiKey) -> dict[int, BrokerRequest]:
    out: dict[int, BrokerRequest] = {}
    for r in requests:
        if r.api_key == api:
            assert r.broker_id not in out, f"two {api.name} requests for broker {r.broker_id}"
            out[r.broker_id] = r
    return out


def assert_projection(sent: Any, decoded: Any, where: str = "body") -> None:
    """Everything the controller put in the body came back from the wire unchanged."""
    if isinstance(sent, dict):
        assert isinstance(decoded, dict), where
        for key, value in sent.items():
            assert key in decoded, f"{where}.{key} was lost on the wire"
            assert_projection(value, decoded[key], f"{where}.{key}")
    elif isinstance(sent, list | tuple):
        assert isinstance(decoded, list), where
        assert len(sent) == len(decoded), where
        for i, (a, b) in enumerate(zip(sent, decoded, strict=True)):
            assert_projection(a, b, f"{where}[{i}]")
    else:
        assert sent == decoded, f"{where}: sent {sent!r}, got back {decoded!r}"
        assert type(sent) is type(decoded) or {type(sent), type(decoded)} <= {int, bool}, where


def assert_on_the_wire(request: BrokerRequest) -> dict[str, Any]:
    """Encode as a whole request frame, decode it again, and compare."""
    codec = request_codec(request.api_key, request.api_version)
    data = codec.encode(request.body)
    decoded = codec.decode(data)
    assert_projection(request.body, decoded)
    assert codec.encode(decoded) == data
    frame = encode_request(request.api_key, request.api_version, 42, "controller", request.body)
    assert frame_size(frame[:4]) == len(frame) - 4
    header, offset = decode_request_header(frame[4:])
    assert (header["request_api_key"], header["request_api_version"]) == (
        request.api_key,
        request.api_version,
    )
    assert header["correlation_id"] == 42
    assert decode_request_body(request.api_key, request.api_version, frame[4:], offset) == decoded
    return decoded


# --- who gets what -----------------------------------------------------------------------


def test_a_leader_change_makes_leader_and_isr_then_update_metadata() -> None:
    ctx = cluster()
    lice = lead(ctx, T0, 2, (2, 3))
    batch = RequestBatch()
    batch.add_leader_and_isr(ctx, [2, 3], T0, lice, ctx.full_assignment(T0), is_new=False)
    requests = batch.build(ctx, CONTROLLER_ID)
    kinds = [r.api_key for r in requests]
    # every LeaderAndIsr before any UpdateMetadata: brokers learn their role first
    assert kinds == [ApiKey.LEADER_AND_ISR] * 2 + [ApiKey.UPDATE_METADATA] * 3
    assert [r.broker_id for r in requests] == [2, 3, 1, 2, 3]
    for r in requests:
        assert r.api_version == (
            LEADER_AND_ISR_VERSION
            if r.api_key == ApiKey.LEADER_AND_ISR
            else UPDATE_METADATA_VERSION
        )
        assert r.body["controller_id"] == CONTROLLER_ID
        assert r.body["controller_epoch"] == 7
        assert r.body["broker_epoch"] == 1000 + r.broker_id
        assert_on_the_wire(r)
    assert batch.is_empty()
    assert batch.build(ctx, CONTROLLER_ID) == []


def test_a_state_resent_without_update_metadata_makes_leader_and_isr_alone() -> None:
    """update_metadata=False (a failover re-sending states every broker has from its full
    UpdateMetadata): only the LeaderAndIsr goes out, no UpdateMetadata for the partition."""
    ctx = cluster()
    lice = lead(ctx, T0, 2, (2, 3))
    batch = RequestBatch()
    batch.add_leader_and_isr(
        ctx, [2, 3], T0, lice, ctx.full_assignment(T0), is_new=False, update_metadata=False
    )
    requests = batch.build(ctx, CONTROLLER_ID)
    assert [(r.api_key, r.broker_id) for r in requests] == [
        (ApiKey.LEADER_AND_ISR, 2),
        (ApiKey.LEADER_AND_ISR, 3),
    ]


def test_leader_and_isr_body() -> None:
    ctx = cluster()
    lice = lead(ctx, T0, 2, (2, 3))
    ra = ReplicaAssignment.for_reassignment((1, 2, 3), (2, 3, 4))
    batch = RequestBatch()
    batch.add_leader_and_isr(ctx, [2], T0, lice, ra, is_new=True)
    request = by_api(batch.build(ctx, CONTROLLER_ID), ApiKey.LEADER_AND_ISR)[2]
    assert request.partitions == (T0,)
    body = request.body
    assert body["type"] == 0
    assert body["live_leaders"] == [{"broker_id": 2, "host_name": "broker-2", "port": 9094}]
    [topic] = body["topic_states"]
    assert topic["topic_name"] == "orders"
    assert topic["topic_id"] == TOPIC_ID
    assert topic["partition_states"] == [
        {
            "partition_index": 0,
            "controller_epoch": 6,  # of the controller that made the decision
            "leader": 2,
            "leader_epoch": 5,
            "isr": (2, 3),
            "partition_epoch": 12,  # the state znode's zkVersion
            "replicas": (2, 3, 4, 1),
            "adding_replicas": (4,),
            "removing_replicas": (1,),
            "is_new": True,
        }
    ]
    decoded = assert_on_the_wire(request)
    assert decoded["topic_states"][0]["partition_states"][0]["partition_epoch"] == 12


def test_live_leaders_are_at_their_inter_broker_listener() -> None:
    ctx = cluster()
    lice = lead(ctx, T0, 2, (2, 3))
    batch = RequestBatch(inter_broker_listener="SSL")
    batch.add_leader_and_isr(ctx, [3], T0, lice, ctx.full_assignment(T0), is_new=False)
    request = by_api(batch.build(ctx, CONTROLLER_ID), ApiKey.LEADER_AND_ISR)[3]
    assert request.body["live_leaders"] == [
        {"broker_id": 2, "host_name": "broker-2.example", "port": 9194}
    ]
    # A listener the leader does not have: its first endpoint (better than no address).
    batch = RequestBatch(inter_broker_listener="INTERNAL")
    batch.add_leader_and_isr(ctx, [3], T0, lice, ctx.full_assignment(T0), is_new=False)
    request = by_api(batch.build(ctx, CONTROLLER_ID), ApiKey.LEADER_AND_ISR)[3]
    assert request.body["live_leaders"] == [{"broker_id": 2, "host_name": "broker-2", "port": 9094}]


def test_leader_and_isr_goes_only_to_live_brokers() -> None:
    ctx = cluster(live=(1, 2, 3), shutting_down=(3,))
    lice = lead(ctx, T1, 2, (2, 3, 4))
    batch = RequestBatch()
    # 4 is dead, -1 is "no leader": neither gets anything; shutting-down 3 still does
    batch.add_leader_and_isr(ctx, [2, 3, 4, -1], T1, lice, ctx.full_assignment(T1), is_new=False)
    requests = batch.build(ctx, CONTROLLER_ID)
    assert sorted(by_api(requests, ApiKey.LEADER_AND_ISR)) == [2, 3]
    assert sorted(by_api(requests, ApiKey.UPDATE_METADATA)) == [1, 2, 3]
    assert all(r.broker_id in (1, 2, 3) for r in requests)


def test_live_leaders_leave_out_a_missing_leader() -> None:
    ctx = cluster()
    lice = lead(ctx, T0, -1, (1,))
    batch = RequestBatch()
    batch.add_leader_and_isr(ctx, [1, 2, 3], T0, lice, ctx.full_assignment(T0), is_new=False)
    built = by_api(batch.build(ctx, CONTROLLER_ID), ApiKey.LEADER_AND_ISR)
    assert sorted(built) == [1, 2, 3]  # else the checks below would hold of nothing
    for r in built.values():
        assert r.body["live_leaders"] == []
        assert r.body["topic_states"][0]["partition_states"][0]["leader"] == -1
        assert_on_the_wire(r)


def test_is_new_sticks_within_a_batch() -> None:
    ctx = cluster()
    lice = lead(ctx, T0, 1, (1, 2, 3))
    batch = RequestBatch()
    batch.add_leader_and_isr(ctx, [2], T0, lice, ctx.full_assignment(T0), is_new=True)
    newer = lead(ctx, T0, 1, (1, 3))
    batch.add_leader_and_isr(ctx, [2], T0, newer, ctx.full_assignment(T0), is_new=False)
    request = by_api(batch.build(ctx, CONTROLLER_ID), ApiKey.LEADER_AND_ISR)[2]
    [state] = request.body["topic_states"][0]["partition_states"]
    assert state["is_new"] is True
    assert state["isr"] == (1, 3)  # the later decision wins


def test_held_states_are_not_sent_and_come_back_under_newer_ones() -> None:
    ctx = cluster()
    batch = RequestBatch()
    old_t0, old_p0 = lead(ctx, T0, 1, (1, 2, 3)), lead(ctx, P0, 3, (3, 1))
    batch.add_leader_and_isr_many(
        [([1, 2], T0, old_t0, ctx.full_assignment(T0)), ([1], P0, old_p0, ctx.full_assignment(P0))],
        is_new=False,
    )
    held = batch.hold_leader_and_isr({T0, T1})
    assert set(held) == {1, 2}
    assert set(batch.leader_and_isr) == {1}  # broker 2's only state was held: no request
    sent = by_api(batch.build(ctx, CONTROLLER_ID), ApiKey.LEADER_AND_ISR)
    assert [p["partition_index"] for p in sent[1].body["topic_states"][0]["partition_states"]] == [
        0
    ]
    assert sent[1].body["topic_states"][0]["topic_name"] == "payments"
    newer = lead(ctx, T0, 1, (1, 3))
    batch.add_leader_and_isr(ctx, [1], T0, newer, ctx.full_assignment(T0), is_new=False)
    batch.restore_leader_and_isr(held)
    sent = by_api(batch.build(ctx, CONTROLLER_ID), ApiKey.LEADER_AND_ISR)
    isr_to = {b: r.body["topic_states"][0]["partition_states"][0]["isr"] for b, r in sent.items()}
    assert isr_to == {1: (1, 3), 2: (1, 2, 3)}  # the newer state wins where there is one


def test_update_metadata_body() -> None:
    ctx = cluster(live=(1, 2, 3), shutting_down=(3,))
    lead(ctx, T1, 2, (2, 3))
    lead(ctx, P0, 3, (3, 1))
    batch = RequestBatch()
    batch.add_update_metadata([1, 5], [T1, P0, T0])  # T0 has no leader yet: left out
    requests = batch.build(ctx, CONTROLLER_ID)
    assert [r.broker_id for r in requests] == [1]  # 5 is not live
    body = requests[0].body
    states = {t["topic_name"]: t for t in body["topic_states"]}
    assert states["orders"]["topic_id"] == TOPIC_ID
    assert states["payments"]["topic_id"] == ZERO_UUID
    assert states["orders"]["partition_states"] == [
        {
            "partition_index": 1,
            "controller_epoch": 6,
            "leader": 2,
            "leader_epoch": 5,
            "isr": (2, 3),
            "zk_version": 12,
            "replicas": (2, 3, 4),
            # dead and shutting-down replicas are offline (Kafka's isReplicaOnline)
            "offline_replicas": (3, 4),
        }
    ]
    assert [b["id"] for b in body["live_brokers"]] == [1, 2, 3]
    assert body["live_brokers"][0] == {
        "id": 1,
        "endpoints": [
            {"port": 9093, "host": "broker-1", "listener": "PLAINTEXT", "security_protocol": 0},
            {"port": 9193, "host": "broker-1.example", "listener": "SSL", "security_protocol": 1},
        ],
        "rack": "r1",
    }
    assert_on_the_wire(requests[0])


def test_update_metadata_for_a_topic_being_deleted_carries_leader_minus_2() -> None:
    ctx = cluster()
    lead(ctx, T0, 2, (2, 3))
    lead(ctx, P0, 3, (3, 1))
    ctx.topics_to_be_deleted.add("orders")
    batch = RequestBatch()
    batch.add_update_metadata([1, 2, 3], None)
    requests = batch.build(ctx, CONTROLLER_ID)
    assert len(requests) == 3
    for r in requests:
        leaders = {
            (t["topic_name"], p["partition_index"]): p["leader"]
            for t in r.body["topic_states"]
            for p in t["partition_states"]
        }
        assert leaders == {("orders", 0): -2, ("payments", 0): 3}
        assert_on_the_wire(r)


def test_a_full_refresh_sends_every_partition_with_a_leader() -> None:
    ctx = cluster()
    lead(ctx, T0, 1, (1, 2))
    lead(ctx, P0, 3, (3,))
    batch = RequestBatch()
    batch.add_update_metadata([2], [])
    batch.add_update_metadata([3], None)
    requests = batch.build(ctx, CONTROLLER_ID)
    assert sorted(r.broker_id for r in requests) == [2, 3]
    for r in requests:
        sent = {
            (t["topic_name"], p["partition_index"])
            for t in r.body["topic_states"]
            for p in t["partition_states"]
        }
        assert sent == {("orders", 0), ("payments", 0)}


@pytest.mark.parametrize("epoch_where_expected", [True, False])
def test_update_metadata_is_encoded_once_with_each_brokers_epoch_written_in(
    monkeypatch: pytest.MonkeyPatch, epoch_where_expected: bool
) -> None:
    if not epoch_where_expected:  # the probe fails: each broker's body is encoded on its own
        monkeypatch.setattr(request_batch, "_BROKER_EPOCH_AT", slice(0, 8))
    ctx = cluster()
    ctx.broker_epochs.update({1: 2**40 + 1, 2: -1, 3: 7})
    lead(ctx, T0, 1, (1, 2))
    lead(ctx, P0, 3, (3,))
    batch = RequestBatch()
    batch.add_update_metadata([1, 2, 3], None)
    requests = batch.build(ctx, CONTROLLER_ID)
    encoded = {r.broker_id: r.wire_body() for r in requests}
    assert set(encoded) == {1, 2, 3}
    for r in requests:
        wire = encoded[r.broker_id]
        assert isinstance(wire, EncodedBody)
        assert bytes(wire.data) == request_codec(r.api_key, r.api_version).encode(r.body)
        decoded = request_codec(r.api_key, r.api_version).decode(bytes(wire.data))
        assert decoded["broker_epoch"] == ctx.broker_epochs[r.broker_id]
        frame = encode_request(r.api_key, r.api_version, 42, "controller", wire)
        assert frame == encode_request(r.api_key, r.api_version, 42, "controller", r.body)
    with pytest.raises(ValueError, match="encoded for api key"):
        encode_request(ApiKey.UPDATE_METADATA, 6, 1, "controller", encoded[1])


def test_leader_and_isr_to_brokers_of_the_same_partitions_is_encoded_once() -> None:
    ctx = cluster()
    ctx.broker_epochs.update({1: 11, 2: 22, 3: 33})
    lice = lead(ctx, T0, 1, (1, 2, 3))
    batch = RequestBatch()
    batch.add_leader_and_isr(ctx, [1, 2, 3], T0, lice, ctx.full_assignment(T0), is_new=False)
    # Broker 3 was told of the partition as new earlier in the batch: its state differs.
    batch.add_leader_and_isr(ctx, [3], T0, lice, ctx.full_assignment(T0), is_new=True)
    batch.add_leader_and_isr(ctx, [3], T0, lice, ctx.full_assignment(T0), is_new=False)
    requests = by_api(batch.build(ctx, CONTROLLER_ID), ApiKey.LEADER_AND_ISR)
    shared = {b: r.shared for b, r in requests.items()}
    assert shared[1] is shared[2]
    assert shared[3] is not shared[1]
    for broker_id, r in requests.items():
        wire = r.wire_body()
        assert isinstance(wire, EncodedBody)
        assert bytes(wire.data) == request_codec(r.api_key, r.api_version).encode(r.body)
        decoded = request_codec(r.api_key, r.api_version).decode(bytes(wire.data))
        assert decoded["broker_epoch"] == ctx.broker_epochs[broker_id]
        (state,) = decoded["topic_states"][0]["partition_states"]
        assert state["is_new"] is (broker_id == 3)


def test_shared_bodies_encoded_ahead_are_each_encoded_once_and_reused() -> None:
    ctx = cluster()
    ctx.broker_epochs.update({1: 11, 2: 22, 3: 33})
    lice = lead(ctx, T0, 1, (1, 2, 3))
    lead(ctx, P0, 3, (3,))
    batch = RequestBatch()
    batch.add_leader_and_isr(ctx, [1, 2, 3], T0, lice, ctx.full_assignment(T0), is_new=False)
    batch.add_update_metadata([1, 2, 3], None)
    batch.add_stop_replica([2], P0, delete_partition=False)
    requests = batch.build(ctx, CONTROLLER_ID)
    shared = {id(r.shared): r.shared for r in requests if r.shared is not None}
    # One LeaderAndIsr and one UpdateMetadata body, each shared by three brokers; the
    # StopReplica has none.
    assert len(shared) == 2
    assert sum(r.shared is None for r in requests) == 1
    built: list[int] = []
    for body in shared.values():
        make = body._make_body

        def counting(broker_epoch: int, make: Any = make) -> Any:
            built.append(broker_epoch)
            return make(broker_epoch)

        body._make_body = counting
    assert not any(b.is_encoded for b in shared.values())
    encode_shared_bodies(requests)
    assert all(b.is_encoded for b in shared.values())
    assert len(built) == 2
    encode_shared_bodies(requests)  # done already: nothing encoded again
    assert len(built) == 2
    for r in requests:
        wire = r.wire_body()
        if r.shared is None:
            continue
        assert isinstance(wire, EncodedBody)
        assert bytes(wire.data) == request_codec(r.api_key, r.api_version).encode(r.body)
        assert (
            request_codec(r.api_key, r.api_version).decode(bytes(wire.data))["broker_epoch"]
            == ctx.broker_epochs[r.broker_id]
        )
    assert len(built) == 2 + 6  # each broker's body built for the comparison only


def test_a_request_body_comes_from_make_body_or_from_a_shared_body_not_both() -> None:
    shared = SharedBody(ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, lambda e: {"e": e})
    request = BrokerRequest(
        1, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, None, shared=shared, broker_epoch=9
    )
    assert request.body == {"e": 9}
    with pytest.raises(ValueError, match="one of them"):
        BrokerRequest(1, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, dict, shared=shared)
    with pytest.raises(ValueError, match="one of them"):
        BrokerRequest(1, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, None)


def test_a_body_that_cannot_be_encoded_ahead_is_left_to_its_senders() -> None:
    def broken(_broker_epoch: int) -> dict[str, Any]:
        return {"controller_id": 2**40}  # out of int32's range

    def fine(broker_epoch: int) -> dict[str, Any]:
        return {"controller_id": 1, "controller_epoch": 1, "broker_epoch": broker_epoch}

    bad = SharedBody(ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, broken)
    good = SharedBody(ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, fine)
    requests = [
        BrokerRequest(1, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, None, shared=body)
        for body in (bad, good)
    ]
    encode_shared_bodies(requests)  # does not raise: the failover goes on
    assert not bad.is_encoded
    assert good.is_encoded
    with pytest.raises(Exception, match="controller_id"):
        bad.encoded(7)  # the sender's attempt fails, and the channel reports it


def test_a_sender_wanting_a_body_being_encoded_waits_for_it() -> None:
    started = threading.Event()
    release = threading.Event()
    builds: list[int] = []

    def slow_body(broker_epoch: int) -> dict[str, Any]:
        builds.append(broker_epoch)
        started.set()
        release.wait(10)
        return {
            "controller_id": CONTROLLER_ID,
            "controller_epoch": 1,
            "broker_epoch": broker_epoch,
            "topic_states": [],
            "live_brokers": [],
        }

    body = SharedBody(ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, slow_body)
    ahead = threading.Thread(target=body.prepare)
    ahead.start()
    assert started.wait(10)
    got: list[Any] = []
    sender = threading.Thread(target=lambda: got.append(body.encoded(42)))
    sender.start()
    sender.join(0.2)
    assert sender.is_alive()  # waiting for the encoding under way, not making its own
    release.set()
    ahead.join(10)
    sender.join(10)
    assert not ahead.is_alive()
    assert not sender.is_alive()
    assert len(builds) == 1
    (wire,) = got
    decoded = request_codec(ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION).decode(
        bytes(wire.data)
    )
    assert decoded["broker_epoch"] == 42


def test_stop_replica_bodies() -> None:
    ctx = cluster()
    lead(ctx, T0, 2, (2, 3))
    lead(ctx, P0, 3, (3, 1))
    ctx.topics_to_be_deleted.add("payments")
    batch = RequestBatch()
    batch.add_stop_replica([1], T0, delete_partition=False)
    batch.add_stop_replica([1], T1, delete_partition=False)  # no leadership known
    batch.add_stop_replica([1], P0, delete_partition=False)
    batch.add_stop_replica([3], T0, delete_partition=True)
    batch.add_stop_replica([3], P0, delete_partition=True)
    batch.add_stop_replica([3], P0, delete_partition=False)  # a delete is never downgraded
    batch.add_stop_replica([4, -1], T0, delete_partition=False)  # dead and no-broker: dropped
    requests = batch.build(ctx, CONTROLLER_ID)
    assert all(r.api_key == ApiKey.STOP_REPLICA for r in requests)
    assert all(r.api_version == STOP_REPLICA_VERSION for r in requests)
    assert [(r.broker_id, r.delete_partitions) for r in requests] == [(1, False), (3, True)]
    keep, delete = requests
    assert keep.partitions == (T0, T1, P0)
    # Kafka 2.8's addStopReplicaRequestForBrokers: -2 (EpochDuringDelete) for a topic
    # queued for deletion, else the leader epoch (-1 if none), whatever the delete flag.
    assert keep.body["topic_states"] == [
        {
            "topic_name": "orders",
            "partition_states": [
                {"partition_index": 0, "leader_epoch": 5, "delete_partition": False},
                {"partition_index": 1, "leader_epoch": -1, "delete_partition": False},
            ],
        },
        {
            "topic_name": "payments",
            "partition_states": [
                {"partition_index": 0, "leader_epoch": -2, "delete_partition": False},
            ],
        },
    ]
    assert delete.partitions == (T0, P0)
    states = [p for t in delete.body["topic_states"] for p in t["partition_states"]]
    # T0: a replica a reassignment removed (its topic stays), fenced by the leader epoch.
    assert [p["leader_epoch"] for p in states] == [5, -2]
    assert all(p["delete_partition"] for p in states)
    for r in requests:
        assert r.body["broker_epoch"] == 1000 + r.broker_id
        assert_on_the_wire(r)
    # Made by the sender, later: from what the controller decided, not what it holds then.
    before = keep.body
    ctx.leadership[T0] = LeaderIsrAndControllerEpoch(LeaderAndIsr(3, 9, (3, 2), zk_version=13), 7)
    ctx.topics_to_be_deleted.discard("payments")
    ctx.epoch += 1
    assert keep.body == before


def test_a_deletions_stop_replica_body_holds_one_state_a_partition_index() -> None:
    """The topics of a deletion share each (partition index, leader epoch)'s state: 100
    topics of 1,000 partitions were 100,000 dicts (19.3 MB) a broker while its sender
    encoded the request, now 1,000. On the wire every partition is still named with its
    own topic and epoch."""
    sizes = {"a": 3, "b": 3, "c": 2}
    ctx = many_topics(sizes)
    ctx.topics_to_be_deleted.update({"a", "b"})  # c: a reassignment's, its epoch 0
    batch = RequestBatch()
    for topic, n in sizes.items():
        for p in range(n):
            batch.add_stop_replica([2], TopicPartition(topic, p), delete_partition=True)
    (request,) = batch.build(ctx, CONTROLLER_ID)
    body = request.body
    by_topic = {t["topic_name"]: t["partition_states"] for t in body["topic_states"]}
    assert list(by_topic) == ["a", "b", "c"]
    assert [p is q for p, q in zip(by_topic["a"], by_topic["b"], strict=True)] == [True] * 3
    assert [p is q for p, q in zip(by_topic["a"], by_topic["c"], strict=False)] == [False] * 2
    decoded = assert_on_the_wire(request)
    assert [
        (t["topic_name"], p["partition_index"], p["leader_epoch"], p["delete_partition"])
        for t in decoded["topic_states"]
        for p in t["partition_states"]
    ] == [(t, p, -2 if t in "ab" else 0, True) for t, n in sizes.items() for p in range(n)]


def test_stop_replica_with_and_without_delete_for_one_broker_are_two_requests() -> None:
    ctx = cluster()
    batch = RequestBatch()
    batch.add_stop_replica([2], T0, delete_partition=False)
    batch.add_stop_replica([2], T1, delete_partition=True)
    requests = batch.build(ctx, CONTROLLER_ID)
    assert [(r.broker_id, r.delete_partitions, r.partitions) for r in requests] == [
        (2, False, (T0,)),
        (2, True, (T1,)),
    ]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from([-1, 1, 2, 3, 4]), max_size=3),
            st.sampled_from([T0, T1, P0]),
            st.booleans(),
        ),
        max_size=12,
    )
)
def test_stop_replicas_named_in_any_order_are_each_partition_once_deleted_if_any_asked(
    named: list[tuple[list[int], TopicPartition, bool]],
) -> None:
    # The model: Kafka's batch, one state a partition and broker, delete if any asked.
    model: dict[int, dict[TopicPartition, bool]] = {}
    batch = RequestBatch()
    for brokers, tp, delete in named:
        batch.add_stop_replica(brokers, tp, delete_partition=delete)
        for b in brokers:
            if b >= 0:
                model.setdefault(b, {})[tp] = model.get(b, {}).get(tp, False) or delete
    expected = [
        (b, delete, tuple(sorted(tp for tp, d in states.items() if d is delete)))
        for b, states in sorted(model.items())
        if b in (1, 2, 3)  # broker 4 is not live
        for delete in (False, True)
        if any(d is delete for d in states.values())
    ]
    requests = batch.build(cluster(), CONTROLLER_ID)
    assert [(r.broker_id, r.delete_partitions, r.partitions) for r in requests] == expected
    assert batch.is_empty()


def test_request_order_is_leader_and_isr_update_metadata_stop_replica() -> None:
    ctx = cluster()
    lice = lead(ctx, T0, 2, (2, 3))
    batch = RequestBatch()
    batch.add_stop_replica([1], T0, delete_partition=False)
    batch.add_leader_and_isr(ctx, [2, 3], T0, lice, ctx.full_assignment(T0), is_new=False)
    kinds = [r.api_key for r in batch.build(ctx, CONTROLLER_ID)]
    assert kinds == sorted(
        kinds,
        key=[ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA].index,
    )
    assert kinds.count(ApiKey.STOP_REPLICA) == 1


def test_clear_drops_everything() -> None:
    ctx = cluster()
    lice = lead(ctx, T0, 2, (2, 3))
    batch = RequestBatch()
    batch.add_leader_and_isr(ctx, [2], T0, lice, ctx.full_assignment(T0), is_new=True)
    batch.add_stop_replica([1], T0, delete_partition=True)
    batch.add_update_metadata([3], None)
    assert not batch.is_empty()
    batch.clear()
    assert batch.is_empty()
    assert batch.build(ctx, CONTROLLER_ID) == []


# --- property: whatever is queued builds into requests the codec takes -----------------


@st.composite
def batches(draw: st.DrawFn) -> tuple[ControllerContext, RequestBatch]:
    brokers = range(0, 6)
    live = draw(st.sets(st.sampled_from(brokers)))
    ctx = ControllerContext(epoch=draw(st.integers(0, 2**31 - 1)), epoch_zk_version=1)
    ctx.add_live_brokers(
        {
            b: (registration(b, draw(st.none() | st.text(max_size=4))), draw(st.integers(0, 2**62)))
            for b in live
        }
    )
    ctx.shutting_down_broker_ids = draw(st.sets(st.sampled_from(sorted(live)))) if live else set()
    tps = [TopicPartition(t, p) for t in ("a", "b-c") for p in range(draw(st.integers(1, 4)))]
    for tp in tps:
        replicas = tuple(
            draw(st.lists(st.sampled_from(brokers), min_size=1, max_size=4, unique=True))
        )
        ctx.update_assignment(tp, ReplicaAssignment(replicas))
        if draw(st.booleans()):
            isr = tuple(draw(st.lists(st.sampled_from(replicas), min_size=1, unique=True)))
            leader = draw(st.sampled_from([-1, *isr]))
            lai = LeaderAndIsr(
                leader, draw(st.integers(0, 2**31 - 1)), isr, draw(st.integers(0, 2**31 - 1))
            )
            ctx.leadership[tp] = LeaderIsrAndControllerEpoch(lai, draw(st.integers(0, 2**31 - 1)))
    if draw(st.booleans()):
        ctx.topic_ids["a"] = draw(st.uuids())
    if draw(st.booleans()):
        ctx.topics_to_be_deleted.add("b-c")
    batch = RequestBatch()
    for _ in range(draw(st.integers(0, 8))):
        tp = draw(st.sampled_from(tps))
        recipients = draw(st.lists(st.sampled_from([-1, *brokers]), max_size=4))
        kind = draw(st.sampled_from(["lai", "um", "um-all", "stop"]))
        if kind == "lai" and tp in ctx.leadership:
            batch.add_leader_and_isr(
                ctx,
                recipients,
                tp,
                ctx.leadership[tp],
                ctx.full_assignment(tp),
                is_new=draw(st.booleans()),
            )
        elif kind == "um":
            batch.add_update_metadata(recipients, [tp])
        elif kind == "um-all":
            batch.add_update_metadata(recipients, None)
        else:
            batch.add_stop_replica(recipients, tp, delete_partition=draw(st.booleans()))
    return ctx, batch


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(batches())
def test_built_requests_are_well_formed(case: tuple[ControllerContext, RequestBatch]) -> None:
    ctx, batch = case
    queued_lai = {b: set(states) for b, states in batch.leader_and_isr.items()}
    requests = batch.build(ctx, CONTROLLER_ID)
    order = [ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA]
    kinds = [r.api_key for r in requests]
    assert kinds == sorted(kinds, key=order.index)
    by_api(requests, ApiKey.LEADER_AND_ISR)  # at most one per broker
    by_api(requests, ApiKey.UPDATE_METADATA)
    for r in requests:
        assert r.broker_id in ctx.live_or_shutting_down_broker_ids
        wire = r.wire_body()
        if isinstance(wire, EncodedBody):  # encoded once for every broker, epoch written in
            assert (wire.api_key, wire.api_version) == (r.api_key, r.api_version)
            assert bytes(wire.data) == request_codec(r.api_key, r.api_version).encode(r.body)
        assert r.body["controller_epoch"] == ctx.epoch
        assert r.body["broker_epoch"] == ctx.broker_epochs[r.broker_id]
        if r.api_key == ApiKey.LEADER_AND_ISR:
            assert set(r.partitions) == queued_lai[r.broker_id]
            leaders = {p["leader"] for t in r.body["topic_states"] for p in t["partition_states"]}
            assert {b["broker_id"] for b in r.body["live_leaders"]} == leaders & set(
                ctx.live_brokers
            )
        if r.api_key == ApiKey.UPDATE_METADATA:
            for t in r.body["topic_states"]:
                for p in t["partition_states"]:
                    tp = TopicPartition(t["topic_name"], p["partition_index"])
                    lai = ctx.leadership[tp].leader_and_isr
                    if tp.topic in ctx.topics_to_be_deleted:
                        assert p["leader"] == -2
                    else:
                        assert p["leader"] == lai.leader
                    assert p["isr"] == lai.isr
        if r.api_key == ApiKey.STOP_REPLICA:
            for t in r.body["topic_states"]:
                for p in t["partition_states"]:
                    assert p["delete_partition"] is r.delete_partitions
        assert_on_the_wire(r)
    assert batch.is_empty()


@st.composite
def leader_and_isr_calls(
    draw: st.DrawFn,
) -> list[tuple[bool, list[tuple[list[int], TopicPartition, LeaderIsrAndControllerEpoch]]]]:
    """Calls of add_leader_and_isr_many: each an is_new flag and its partitions' entries
    (recipients may repeat, and include -1, "no broker")."""
    tps = [T0, T1, P0]
    calls = []
    for _ in range(draw(st.integers(1, 5))):
        entries = []
        for _ in range(draw(st.integers(0, 6))):
            brokers = draw(st.lists(st.sampled_from([-1, 1, 2, 3, 4]), max_size=4))
            epoch = draw(st.integers(0, 3))
            lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, epoch, (1, 2)), 6)
            entries.append((brokers, draw(st.sampled_from(tps)), lice))
        calls.append((draw(st.booleans()), entries))
    return calls


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(leader_and_isr_calls())
def test_many_partitions_added_at_once_are_added_as_one_at_a_time(
    calls: list[tuple[bool, list[tuple[list[int], TopicPartition, LeaderIsrAndControllerEpoch]]]],
) -> None:
    ctx = cluster()
    batch = RequestBatch()
    # The model: each broker's latest state of each partition, is_new once set staying set.
    model: dict[int, dict[TopicPartition, tuple[LeaderIsrAndControllerEpoch, bool]]] = {}
    for is_new, entries in calls:
        batch.add_leader_and_isr_many(
            [(brokers, tp, lice, ctx.full_assignment(tp)) for brokers, tp, lice in entries],
            is_new=is_new,
        )
        for brokers, tp, lice in entries:
            for b in brokers:
                if b >= 0:
                    previous = model.setdefault(b, {}).get(tp)
                    model[b][tp] = (lice, is_new or (previous is not None and previous[1]))
    got = {
        b: {tp: (e.lice, e.is_new) for tp, e in states.items()}
        for b, states in batch.leader_and_isr.items()
        if states
    }
    assert got == model
    assert not batch.update_metadata_brokers  # re-sends: no UpdateMetadata rides along


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(leader_and_isr_calls())
def test_updates_added_at_once_are_added_as_one_at_a_time(
    calls: list[tuple[bool, list[tuple[list[int], TopicPartition, LeaderIsrAndControllerEpoch]]]],
) -> None:
    """add_leader_and_isr_updates (an election's or ISR step's partitions in one call) is
    add_leader_and_isr (not new) for each, UpdateMetadata included; mixed with new ones."""
    ctx = cluster()
    bulk, one_by_one = RequestBatch(), RequestBatch()
    for is_new, entries in calls:
        if is_new:
            for batch in (bulk, one_by_one):
                for brokers, tp, lice in entries:
                    batch.add_leader_and_isr(
                        ctx, brokers, tp, lice, ctx.full_assignment(tp), is_new=True
                    )
            continue
        bulk.add_leader_and_isr_updates(
            ctx, [(brokers, tp, lice, ctx.full_assignment(tp)) for brokers, tp, lice in entries]
        )
        for brokers, tp, lice in entries:
            one_by_one.add_leader_and_isr(
                ctx, brokers, tp, lice, ctx.full_assignment(tp), is_new=False
            )
    assert bulk.leader_and_isr == one_by_one.leader_and_isr
    assert bulk.update_metadata_brokers == one_by_one.update_metadata_brokers
    assert bulk.update_metadata_partitions == one_by_one.update_metadata_partitions
    assert [(r.broker_id, r.api_key, r.body) for r in bulk.build(ctx, CONTROLLER_ID)] == [
        (r.broker_id, r.api_key, r.body) for r in one_by_one.build(ctx, CONTROLLER_ID)
    ]


# --- UpdateMetadata in requests of whole topics ---------------------------------------------


def many_topics(sizes: dict[str, int]) -> ControllerContext:
    ctx = ControllerContext(epoch=7, epoch_zk_version=3)
    ctx.add_live_brokers({b: (registration(b), 1000 + b) for b in (1, 2, 3)})
    lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2, 3), zk_version=0), 7)
    for topic, n in sizes.items():
        for p in range(n):
            tp = TopicPartition(topic, p)
            ctx.update_assignment(tp, ReplicaAssignment((1, 2, 3)))
            ctx.leadership[tp] = lice
    return ctx


def topics_of(r: BrokerRequest) -> dict[str, int]:
    return {t["topic_name"]: len(t["partition_states"]) for t in r.body["topic_states"]}


@pytest.mark.parametrize("full", [True, False])
def test_update_metadata_never_splits_a_topic_and_marks_a_full_updates_end(
    monkeypatch: pytest.MonkeyPatch, full: bool
) -> None:
    """Requests of at most MAX_PARTITIONS_PER_REQUEST partitions, but a topic's partitions
    all in one, whatever its size: a broker that applied part of a topic answered Metadata
    with fewer partitions than it has (a keyed producer then maps keys to other
    partitions). A full update's last request is FULL, the others INCREMENTAL: a new
    broker holds Metadata until its first full update is whole (item 13)."""
    monkeypatch.setattr(request_batch, "MAX_PARTITIONS_PER_REQUEST", 4)
    sizes = {"a": 3, "b": 1, "c": 6, "d": 1, "e": 2, "f": 2}
    ctx = many_topics(sizes)
    batch = RequestBatch()
    tps = [TopicPartition(t, p) for t, n in sizes.items() for p in range(n)]
    batch.add_update_metadata([2], None if full else tps)
    requests = batch.build(ctx, CONTROLLER_ID)
    chunks = [topics_of(r) for r in requests]
    # Each topic whole in one request; more than 4 partitions only as a topic alone.
    assert sorted(t for c in chunks for t in c) == sorted(sizes)
    assert all(c == {t: sizes[t] for t in c} for c in chunks)
    assert all(sum(c.values()) <= 4 or len(c) == 1 for c in chunks)
    if full:  # the context's order: packed as they come
        assert chunks == [{"a": 3, "b": 1}, {"c": 6}, {"d": 1, "e": 2}, {"f": 2}]
    kinds = [r.body["type"] for r in requests]
    assert kinds == [r.update_metadata_type for r in requests]
    last = UpdateMetadataType.FULL if full else UpdateMetadataType.INCREMENTAL
    assert kinds == [UpdateMetadataType.INCREMENTAL] * (len(requests) - 1) + [last]
    for r in requests:
        assert r.api_version == 8
        decoded = assert_on_the_wire(r)
        assert decoded["type"] == r.update_metadata_type


def test_a_topic_straddling_the_request_size_goes_whole_in_the_next_request() -> None:
    """At the real size (10,000): 6,000 + 6,000 + 1 partitions made requests of 10,000 and
    2,001, the second topic in both."""
    lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,), zk_version=0), 7)
    rows: list[UpdateMetadataRow] = [
        (topic, p, lice, (1,), (), False)
        for topic, n in (("a", 6000), ("b", 6000), ("c", 1))
        for p in range(n)
    ]
    chunks = update_metadata_chunks(rows)
    assert [sorted({row[0] for row in chunk}) for chunk in chunks] == [["a"], ["b", "c"]]
    assert [len(chunk) for chunk in chunks] == [6000, 6001]
    assert [row for chunk in chunks for row in chunk] == rows
    assert update_metadata_chunks(rows[:10]) == [rows[:10]]
    assert update_metadata_chunks([]) == []


def test_a_leader_and_isr_chunk_holds_its_own_states_not_the_brokers_map(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each chunk's body is built from its own partitions' states: a chunk sent lets go of
    them, where a body that read the broker's whole map kept all of it (100,000 entries,
    12.6 MiB) until the broker's last chunk was sent, tens of seconds for a broker joining
    a large cluster. The map is emptied after the build: every chunk still encodes its
    partitions, shared between brokers whose chunks hold the same states."""
    monkeypatch.setattr(request_batch, "MAX_PARTITIONS_PER_REQUEST", 4)
    sizes = {"a": 6, "b": 4}
    ctx = many_topics(sizes)
    ctx.broker_epochs.update({1: 11, 2: 22, 3: 33})
    tps = [TopicPartition(t, p) for t, n in sizes.items() for p in range(n)]
    batch = RequestBatch()
    batch.add_leader_and_isr_many(
        (((1, 2, 3), tp, ctx.leadership[tp], ctx.full_assignment(tp)) for tp in tps),
        is_new=False,
    )
    # Broker 3 is told of b-1 as new: its chunk of b-1 differs from the others'.
    b1 = TopicPartition("b", 1)
    batch.add_leader_and_isr(ctx, [3], b1, ctx.leadership[b1], ctx.full_assignment(b1), is_new=True)
    maps = dict(batch.leader_and_isr)
    requests = by_broker(batch.build(ctx, CONTROLLER_ID))
    for states in maps.values():
        states.clear()
    for broker_id, chunks in requests.items():
        assert [r.partitions for r in chunks] == [tuple(tps[0:4]), tuple(tps[4:8]), tuple(tps[8:])]
        for r in chunks:
            decoded = assert_on_the_wire(r)
            assert decoded["broker_epoch"] == ctx.broker_epochs[broker_id]
            got = [
                (t["topic_name"], s["partition_index"], s["is_new"])
                for t in decoded["topic_states"]
                for s in t["partition_states"]
            ]
            assert got == [
                (tp.topic, tp.partition, broker_id == 3 and tp == b1) for tp in r.partitions
            ]
    assert [r.shared for r in requests[1]] == [r.shared for r in requests[2]]
    assert [r.shared is q.shared for r, q in zip(requests[1], requests[3], strict=True)] == [
        True,
        False,  # b-1 is new for broker 3
        True,
    ]


def by_broker(requests: list[BrokerRequest]) -> dict[int, list[BrokerRequest]]:
    out: dict[int, list[BrokerRequest]] = {}
    for r in requests:
        if r.api_key == ApiKey.LEADER_AND_ISR:
            out.setdefault(r.broker_id, []).append(r)
    return out


# What the batch's LeaderAndIsr maps must hold, as one map per broker (the batch shares one
# map among brokers sent the same states): the model it is checked against below.
class _PerBrokerModel:
    def __init__(self) -> None:
        self.maps: dict[int, dict[TopicPartition, Any]] = {}

    def add(self, broker_ids: list[int], tp: TopicPartition, entry: Any) -> None:
        for b in broker_ids:
            if b < 0:
                continue
            states = self.maps.setdefault(b, {})
            previous = states.get(tp)
            states[tp] = (
                entry._replace(is_new=True)
                if previous is not None and previous.is_new and not entry.is_new
                else entry
            )

    def hold(self, tps: set[TopicPartition]) -> dict[int, dict[TopicPartition, Any]]:
        held = {}
        for b, states in list(self.maps.items()):
            taken = {tp: entry for tp in tps if (entry := states.pop(tp, None))}
            if taken:
                held[b] = taken
            if not states:
                del self.maps[b]
        return held

    def restore(self, held: dict[int, dict[TopicPartition, Any]]) -> None:
        for b, taken in held.items():
            states = self.maps.setdefault(b, {})
            for tp, entry in taken.items():
                states.setdefault(tp, entry)


_BROKERS = st.lists(st.sampled_from([-1, 1, 2, 3, 4]), max_size=5)
_TPS = st.sampled_from([T0, T1, P0, TopicPartition("payments", 1)])
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.tuples(_BROKERS, _TPS), max_size=6), st.booleans()),
        st.tuples(st.just("hold"), st.sets(_TPS), st.just(False)),
        st.tuples(st.just("restore"), st.just([]), st.just(False)),
        st.tuples(st.just("build"), st.just([]), st.just(False)),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_brokers_sharing_a_map_get_what_one_map_each_would_give(ops: list[Any]) -> None:
    """Any mix of adds to sets of brokers (repeated, overlapping, with dead ids), holds,
    restores and builds leaves each broker the states, in the order, that a map of its own
    would hold, and the requests built say so."""
    ctx = cluster(live=(1, 2, 3, 4))
    batch, model = RequestBatch(), _PerBrokerModel()
    held: list[tuple[Any, Any]] = []
    version = 0
    for op, args, is_new in ops:
        if op == "add":
            rows = []
            for broker_ids, tp in args:
                version += 1
                lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, version, (1, 2), 1), 6)
                rows.append((broker_ids, tp, lice, ReplicaAssignment((1, 2, 3, 4))))
                model.add(
                    broker_ids, tp, request_batch._LeaderAndIsrEntry(lice, rows[-1][3], is_new)
                )
            batch.add_leader_and_isr_many(rows, is_new=is_new)
        elif op == "hold":
            held.append((batch.hold_leader_and_isr(args), model.hold(args)))
        elif op == "restore" and held:
            batch_held, model_held = held.pop(0)
            batch.restore_leader_and_isr(batch_held)
            model.restore(model_held)
        elif op == "build":
            requests = by_api(batch.build(ctx, CONTROLLER_ID), ApiKey.LEADER_AND_ISR)
            assert {b: r.partitions for b, r in requests.items()} == {
                b: tuple(states) for b, states in model.maps.items()
            }
            model.maps.clear()
        assert {b: list(m.items()) for b, m in batch.leader_and_isr.items()} == {
            b: list(m.items()) for b, m in model.maps.items()
        }
        # Brokers share a map only when each was sent what the others were.
        for a, shared in batch.leader_and_isr.items():
            for b, other in batch.leader_and_isr.items():
                if a != b and shared is other:
                    assert model.maps[a] == model.maps[b]


def test_a_failover_resend_to_every_replica_keeps_one_map() -> None:
    """Every partition's state re-sent to all three brokers: one map, one read at the build,
    and a body encoded once per chunk for the three."""
    ctx = cluster()
    batch = RequestBatch()
    lice = lead(ctx, T0, 1, (1, 2, 3))
    batch.add_leader_and_isr_many(
        [
            ([1, 2, 3], T0, lice, ctx.full_assignment(T0)),
            ((1, 2, 3), T1, lice, ctx.full_assignment(T1)),
        ],
        is_new=False,
    )
    assert len({id(m) for m in batch.leader_and_isr.values()}) == 1
    batch.add_leader_and_isr(
        ctx, [3], T0, lead(ctx, T0, 3, (3,)), ctx.full_assignment(T0), is_new=False
    )
    maps = batch.leader_and_isr
    assert maps[1] is maps[2]
    assert maps[3] is not maps[1]  # broker 3 was told more
    sent = by_api(batch.build(ctx, CONTROLLER_ID), ApiKey.LEADER_AND_ISR)
    assert sent[1].shared is sent[2].shared
    assert sent[3].shared is not sent[1].shared

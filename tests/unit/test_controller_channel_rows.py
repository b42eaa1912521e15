"""The controller's channel dropping and merging UpdateMetadata waiting for a slow broker,
against a model: whatever the controller sends meanwhile, the broker is left where
sending every request as built would leave it, learns no partition's state later or out
of order, holds at each LeaderAndIsr or StopReplica the metadata it would have held for
the partitions that one names, and a request is answered only once the broker holds what
it said. No socket: the sender's queue is read in the order its thread would send it."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.channel import _BrokerSender, _Queued
from controller.context import ControllerContext, LeaderIsrAndControllerEpoch, ReplicaAssignment
from controller.request_batch import BrokerRequest, RequestBatch
from wire.api import ApiKey
from zkdata.znodes import BrokerRegistration, EndPoint, LeaderAndIsr, TopicPartition

BROKER = 7
TOPIC = "orders"
PARTITIONS = 5


@dataclass
class Tracker:
    """A request's identity as the controller made it, with the rows it said."""

    index: int
    said: dict[int, int] = field(default_factory=dict)  # partition -> leader epoch


def build(kind: str, partitions: list[int], epoch: int, index: int) -> BrokerRequest:
    """Broker 7's request of ``kind`` (um, full, lai, sr) for these partitions, every
    partition's leader epoch ``epoch``."""
    ctx = ControllerContext(epoch=3, epoch_zk_version=2)
    ctx.topic_ids[TOPIC] = uuid.UUID(int=1)
    ctx.add_live_brokers(
        {BROKER: (BrokerRegistration(BROKER, (EndPoint("PLAINTEXT", "h", 9),)), 70)}
    )
    for p in range(PARTITIONS):
        tp = TopicPartition(TOPIC, p)
        ctx.update_assignment(tp, ReplicaAssignment((BROKER,)))
        ctx.leadership[tp] = LeaderIsrAndControllerEpoch(
            LeaderAndIsr(BROKER, epoch, (BROKER,), 0), 3
        )
    batch = RequestBatch()
    tps = [TopicPartition(TOPIC, p) for p in partitions]
    if kind == "um":
        batch.add_update_metadata([BROKER], tps)
    elif kind == "full":
        batch.add_update_metadata([BROKER], None)
    elif kind == "lai":
        for tp in tps:
            batch.add_leader_and_isr_many(
                [([BROKER], tp, ctx.leadership[tp], ReplicaAssignment((BROKER,)))], is_new=False
            )
    else:
        for tp in tps:
            batch.add_stop_replica([BROKER], tp, delete_partition=False)
    [request] = batch.build(ctx, 1)
    said = {row[1]: epoch for row in request.update_metadata_rows or ()}
    return dataclasses.replace(request, tracker=Tracker(index, said))


class Broker:
    """What a broker learns from the requests it is sent, in order."""

    def __init__(self) -> None:
        self.metadata: dict[int, int] = {}  # partition -> leader epoch
        self.seen: dict[int, list[int]] = {}  # each partition's epochs, as learned
        self.at_named: list[tuple[int, dict[int, int | None]]] = []  # per LAI / StopReplica

    def apply(self, request: BrokerRequest) -> None:
        if request.api_key == ApiKey.UPDATE_METADATA:
            for row in request.update_metadata_rows or ():
                epoch = row[2].leader_and_isr.leader_epoch
                self.metadata[row[1]] = epoch
                self.seen.setdefault(row[1], []).append(epoch)
        else:
            tracker = request.tracker
            assert isinstance(tracker, Tracker)
            named = {tp.partition: self.metadata.get(tp.partition) for tp in request.partitions}
            self.at_named.append((tracker.index, named))


def kinds() -> st.SearchStrategy[tuple[str, list[int]]]:
    parts = st.lists(st.integers(0, PARTITIONS - 1), min_size=1, max_size=3, unique=True)
    return st.one_of(
        st.tuples(st.sampled_from(["um", "um", "um", "lai", "sr"]), parts),
        st.tuples(st.just("full"), st.just([])),
    )


# A send is one or more requests (an event's: a LeaderAndIsr then its UpdateMetadata).
sends_strategy = st.lists(st.lists(kinds(), min_size=1, max_size=3), min_size=1, max_size=12)


@settings(max_examples=1500, deadline=None)
@given(sends_strategy)
# A request answered with the last of a send (it said nothing the send did not) while the
# send's earlier requests, which said it, were dropped for a newer send: it waited for
# the last one only, sent before the newer send.
@example([[("um", [0])], [("um", [0]), ("um", [0]), ("um", [1])], [("um", [0])]])
# A request whose row for partition 0 went into one waiting, dropped later for a newer
# send: it waited for its own sending only.
@example([[("um", [0, 1])], [("um", [0]), ("um", [0]), ("um", [0, 2])], [("um", [0, 1])]])
# A row stays behind a LeaderAndIsr naming its partition, and goes past one that does not.
@example([[("um", [0, 1])], [("lai", [1])], [("um", [0, 1])]])
def test_the_broker_learns_what_every_request_as_built_would_have_told_it(
    sends: list[list[tuple[str, list[int]]]],
) -> None:
    sender = _BrokerSender(BROKER, "127.0.0.1", 1, 1, lambda *_: None, 10)  # never started
    reference = Broker()
    made: list[BrokerRequest] = []
    epoch = 0
    for send in sends:
        requests = []
        for kind, partitions in send:
            epoch += 1
            request = build(kind, partitions, epoch, len(made))
            made.append(request)
            requests.append(request)
            reference.apply(request)
        sender.put(requests)
    broker = Broker()
    answered: list[Any] = []
    queue: list[_Queued] = list(sender._queue)
    sent = 0
    for q in queue:
        assert q.request is not None
        broker.apply(q.request)
        sent += 1
        for r in q.told():
            tracker = r.tracker
            assert isinstance(tracker, Tracker)
            # Answered only once the broker holds, for each partition it named, a state
            # at least as new as the one it said.
            for p, said in tracker.said.items():
                assert broker.metadata.get(p, -1) >= said, (tracker.index, p)
            answered.append(tracker.index)
    # Every request answered, once.
    assert sorted(answered) == list(range(len(made)))
    assert sent <= len(made)
    # Left where sending everything would leave it.
    assert broker.metadata == reference.metadata
    # Each partition's states learned in order, none the reference did not learn.
    for p, epochs in broker.seen.items():
        assert epochs == sorted(epochs), p
        assert set(epochs) <= set(reference.seen[p]), p
    # Every LeaderAndIsr and StopReplica sent, in order, each finding the metadata of the
    # partitions it names as the reference did.
    assert broker.at_named == reference.at_named

"""A controller's resignation, over an in-memory ZooKeeper (tests/unit/fake_zk.py): a
fenced controller resigns even when it cannot read /controller afterwards; a /controller
of its own session is removed whatever broker id its data names, and after any ZooKeeper
error that made it resign; and the "disconnected for a whole session timeout" timer never
clears away the reconnection's event."""

from __future__ import annotations

import threading
from typing import Any, cast
from unittest.mock import MagicMock, patch

import pytest
from kazoo.exceptions import ConnectionLoss, OperationTimeoutError
from kazoo.handlers.threading import KazooTimeoutError

from controller import events as ev
from controller.channel import ControllerChannelManager
from controller.controller import ControllerConfig, KafkaController
from controller.request_batch import RequestBatch
from election.controller_election import (
    UNKNOWN_CONTROLLER,
    FencingToken,
    read_controller,
    try_elect,
)
from tests.unit.fake_cluster import (
    CONTROLLER_SESSION,
    Controller,
    ZooKeeperData,
    cluster,
    drain,
    process,
    start_controller,
)
from tests.unit.fake_cluster import queued as queued_events
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import ControllerMovedError, Create, SetData, ZkClient
from zkdata.znodes import (
    TopicAssignment,
    TopicPartition,
    decode_controller,
    encode_controller,
    encode_topic,
    new_topic_id,
)

OURS, THEIRS = 0x111, 0x222


def active_now(c: KafkaController) -> bool:
    """Whether ``c`` is the controller now (a call: mypy keeps no narrowing of it)."""
    return c.is_active


def active_controller(zk: FakeZk) -> KafkaController:
    """Broker 1, controller of epoch 5 (its /controller of session OURS)."""
    zk.put(paths.CONTROLLER_EPOCH, b"4")
    zk.multi([SetData(paths.CONTROLLER_EPOCH, b"5", 0)])  # version 1
    zk.put(paths.CONTROLLER, encode_controller(1), owner=OURS)
    c = KafkaController(ControllerConfig(broker_id=1), zk, MagicMock(), lambda: 123)  # type: ignore[arg-type]
    c.token = FencingToken(5, 1, zk.session_generation)
    c.ctx.epoch, c.ctx.epoch_zk_version = 5, 1
    return c


def test_a_fenced_controller_resigns_even_when_reading_controller_fails() -> None:
    """Its write met another controller's epoch, then the connection dropped: it resigns
    all the same (token, channel, handlers dropped), not only once it can read."""
    zk = FakeZk(OURS)
    c = active_controller(zk)
    channel = MagicMock()
    c.channel = cast("ControllerChannelManager | None", channel)  # not narrowed: it is dropped

    def fenced(_event: object) -> None:
        raise ControllerMovedError("the epoch check failed")

    def lost(*_args: object, **_kwargs: object) -> Any:
        raise ConnectionLoss()

    c._on_BrokerChange = fenced  # type: ignore[method-assign]
    zk.get = lost  # type: ignore[method-assign]
    c.process(ev.BrokerChange())
    assert not c.is_active
    assert c.channel is None
    channel.close.assert_called_once()


@pytest.mark.parametrize("named", [b'{"version":1,"brokerid":-1,"timestamp":"0"}', b"7"])
def test_a_controller_of_its_own_session_naming_another_broker_is_removed(named: bytes) -> None:
    """Its data rewritten by someone (the owner stays this broker's session): the broker
    resigns, and removes it, or every other broker's election would fail on it for as long
    as the session lives. A negative id is malformed: -1 read as "no controller" before."""
    zk = FakeZk(OURS)
    c = active_controller(zk)
    zk.multi([SetData(paths.CONTROLLER, named, -1)])
    other = zk.share(THEIRS)
    if named.startswith(b"{"):
        assert read_controller(cast(ZkClient, other)) == (UNKNOWN_CONTROLLER, OURS)
    c.process(ev.ControllerChange())
    assert not c.is_active
    assert paths.CONTROLLER not in zk.nodes
    assert try_elect(cast(ZkClient, other), 2).token is not None


def test_another_sessions_controller_is_left_alone() -> None:
    zk = FakeZk(OURS)
    c = active_controller(zk)
    zk.put(paths.CONTROLLER, encode_controller(2), owner=THEIRS)  # broker 2 won since
    c.process(ev.ControllerChange())
    assert not c.is_active
    assert read_controller(cast(ZkClient, zk)) == (2, THEIRS)


class SteppedTimer(threading.Timer):
    """threading.Timer, paused between its cancellation check and its call: the
    reconnection lands in between."""

    checked = threading.Event()
    go_on = threading.Event()

    def run(self) -> None:
        self.finished.wait(self.interval)
        if not self.finished.is_set():
            SteppedTimer.checked.set()
            SteppedTimer.go_on.wait(5)
            self.function(*self.args, **self.kwargs)
        self.finished.set()


def queued(c: KafkaController) -> list[str]:
    names = []
    while not c.events._queue.empty():
        names.append(c.events._queue.get_nowait().event.name)
    return names


@pytest.mark.parametrize(
    ("previous", "expected"), [("SUSPENDED", "Reconnected"), ("LOST", "RegisterBrokerAndReelect")]
)
def test_the_session_timeout_timer_never_clears_away_the_reconnection(
    previous: str, expected: str
) -> None:
    SteppedTimer.checked.clear()
    SteppedTimer.go_on.clear()
    config = ControllerConfig(broker_id=1, session_timeout_ms=50)
    c = KafkaController(config, FakeZk(), MagicMock(), lambda: 1)  # type: ignore[arg-type]
    with patch("controller.controller.threading.Timer", SteppedTimer):
        c._on_zk_state("SUSPENDED")
        timer = c._suspended_timer
        assert timer is not None
        assert SteppedTimer.checked.wait(5)  # its wait is over, its cancel check passed
        if previous == "LOST":
            c._on_zk_state("LOST")
        c._on_zk_state("CONNECTED")  # cancels it, too late, and queues the event
        SteppedTimer.go_on.set()
        timer.join(5)  # its call has run
    assert expected in queued(c)


def test_a_request_timing_out_leaves_no_controller_znode_behind_its_resignation() -> None:
    """A request that times out while the connection stays up brings no reconnection,
    whose event was the only one to remove the resigned controller's /controller: no
    broker could be elected while the session lived. Now it is removed once ZooKeeper
    answers, and the election runs again (this broker may win it)."""
    zk, c = cluster()
    epoch = c.ctx.epoch
    zk.fail_next = [KazooTimeoutError()]
    del zk.nodes[paths.broker(3)]
    process(c, ev.BrokerChange())
    assert not c.is_active
    drain(c)
    assert active_now(c)
    assert c.ctx.epoch == epoch + 1
    assert read_controller(cast(ZkClient, zk)) == (1, CONTROLLER_SESSION)
    assert set(c.ctx.live_brokers) == {1, 2}


def test_another_broker_can_be_elected_once_the_resigned_controller_removed_its_znode() -> None:
    zk, c = cluster()
    zk.fail_next = [KazooTimeoutError()]
    process(c, ev.BrokerChange())
    assert not c.is_active
    [retry] = queued_events(c)
    assert isinstance(retry, ev.ReelectAfterZkError)
    with patch.object(c, "_elect"):  # this broker stays out of the race
        process(c, retry)
    assert try_elect(cast(ZkClient, zk.share(THEIRS)), 2).token is not None


def next_event(c: KafkaController, timeout_s: float = 5.0) -> ev.ControllerEvent:
    """The next event queued, waiting for a timer to queue it."""
    item = c.events._queue.get(timeout=timeout_s)
    return item.event


def test_the_znode_is_removed_once_zookeeper_answers_again_after_a_backoff() -> None:
    zk, c = cluster()
    epoch = c.ctx.epoch
    # the event fails, then its first retry (at once) and its second (after a backoff)
    zk.fail_next = [OperationTimeoutError(), KazooTimeoutError(), ConnectionLoss()]
    process(c, ev.BrokerChange())
    process(c, next_event(c))
    assert queued_events(c) == []  # the next one waits for its timer
    process(c, next_event(c))
    assert not c.is_active
    assert paths.CONTROLLER in zk.nodes
    process(c, next_event(c))
    drain(c)
    assert active_now(c)
    assert c.ctx.epoch == epoch + 1


def test_a_retry_queued_before_the_session_expired_does_nothing() -> None:
    zk, c = cluster()
    zk.fail_next = [KazooTimeoutError()]
    process(c, ev.BrokerChange())
    retries = queued_events(c)
    process(c, ev.Expire())
    del zk.nodes[paths.CONTROLLER]  # the session's ephemeral went with it
    for retry in retries:
        process(c, retry)
    assert not c.is_active
    assert paths.CONTROLLER not in zk.nodes  # the new session's registration elects


def test_a_topic_znode_deleted_under_its_partitions_creation_fails_those_partitions_only() -> None:
    """Kafka's createTopicPartitionStatesRaw: the NoNode of a partition's parent creates
    is a failed state change of those partitions (logged), not a ZooKeeper failure that
    makes the controller resign."""
    zk, c = cluster()
    epoch = c.ctx.epoch
    zk.put(paths.topic("new"), encode_topic(TopicAssignment("new", {0: (1, 2)}, new_topic_id())))
    creating = zk.multi_fenced_batched

    def deleting_the_topic_first(epoch_zk_version: int, items: Any, **kwargs: Any) -> Any:
        items = list(items)
        if any(
            isinstance(op, Create) and op.path == paths.topic_partitions("new")
            for item in items
            for op in item
        ):
            del zk.nodes[paths.topic("new")]  # an admin deletes the topic znode meanwhile
        return creating(epoch_zk_version, items, **kwargs)

    zk.multi_fenced_batched = deleting_the_topic_first  # type: ignore[method-assign]
    process(c, ev.TopicChange())
    drain(c)
    assert c.is_active
    assert c.ctx.epoch == epoch
    assert TopicPartition("new", 0) not in c.ctx.leadership
    assert read_controller(cast(ZkClient, zk)) == (1, CONTROLLER_SESSION)


def test_an_event_failing_on_a_bug_sends_nothing_it_decided_and_ends_the_term() -> None:
    """Found by review: an event that raised anything but a fence or a ZooKeeper error
    left what it had batched (here the ISR step of a broker loss, written to ZooKeeper,
    its requests half added) for the next event to send, the context half updated. Kafka
    never sends such a batch: its next newBatch finds it not empty, and the controller
    clears it and moves (handleIllegalState). Here the batch is dropped and the term
    ends, as after a ZooKeeper error: the next term, this broker's, starts from what
    ZooKeeper holds and sends every broker its states."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
    with Controller(data) as c:
        c.elect()
        epoch = c.controller.ctx.epoch
        c.sent.clear()
        adding = RequestBatch.add_leader_and_isr_updates

        def failing(self: RequestBatch, *args: Any) -> None:
            adding(self, *args)
            raise RuntimeError("a bug")

        data.unregister(3)
        with (
            patch.object(RequestBatch, "add_leader_and_isr_updates", failing),
            pytest.raises(RuntimeError),
        ):
            c.run(ev.BrokerChange())
        assert c.sent == []
        assert not c.controller.is_active
        assert c.controller.ops.batch.is_empty()
        c.run(ev.BrokerChange())  # the next event sends nothing of it
        assert c.sent == []
        c.drain()  # the election runs again
        assert active_now(c.controller)
        assert c.controller.ctx.epoch == epoch + 1
        assert c.sent
        assert {r.body["controller_epoch"] for r in c.sent} == {epoch + 1}
        # what the failed event wrote (3 out of the ISRs) reaches the brokers now
        sent = {
            (r.broker_id, t["topic_name"], p["partition_index"]): tuple(p["isr"])
            for r in c.sent
            if r.api_key.name == "LEADER_AND_ISR"
            for t in r.body["topic_states"]
            for p in t["partition_states"]
        }
        assert sent == {(b, "t", p): isr for b in (1, 2) for p, isr in ((0, (1, 2)), (1, (2, 1)))}


def test_a_controller_change_finding_no_controller_elects() -> None:
    """/controller created and deleted again (an admin deleting it twice): a broker's
    exists watch fires on the creation and is consumed; the event's read, re-arming it,
    finds the znode gone, and no deletion event ever comes. Kafka's
    processControllerChange only resigns: every broker stayed without a controller (seen
    on real ZooKeeper, one run in five of a churn test). It now elects."""
    zk, active = cluster()
    other = start_controller(zk, broker_id=2)
    assert active.is_active
    assert not other.is_active
    del zk.nodes[paths.CONTROLLER]  # its deletion's watch event lost, as above
    process(other, ev.ControllerChange())
    drain(other)
    assert active_now(other)
    assert decode_controller(zk.nodes[paths.CONTROLLER][0]) == 2

"""The controller's imperative shell over an in-memory ZooKeeper (tests/unit/fake_zk.py):
the timers it arms (the session-timeout wait while disconnected, the backoff of the
election retried after ZooKeeper errors), the controller epoch of the requests_acknowledged
line of a failover (the epoch just won, not the one before it), and a /controller of its
own session found by a broker that is not acting as controller being removed so that an
election can happen; what a resignation drops (its timer, its batch, its handlers, its
failover's "done"), and the failover's own steps (topic deletion disabled, brokers that
bounced while no controller watched, a failover failing on a bug)."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock, patch

from controller import controller as controller_module
from controller import events as ev
from controller.controller import (
    ZK_ERROR_RETRY_FIRST_S,
    ZK_ERROR_RETRY_MAX_S,
    ControllerConfig,
    KafkaController,
)
from controller.reactions import start_state_machines
from controller.request_batch import BrokerRequest
from election.controller_election import read_controller
from tests.unit import fake_cluster as fc
from tests.unit.fake_zk import FakeZk
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.znodes import TopicPartition, decode_partition_state, encode_controller


def active(c: KafkaController) -> bool:
    """Whether ``c`` is the controller now (a call: mypy keeps no narrowing of it)."""
    return c.is_active


RecordedTimer = fc.RecordedTimer


def test_a_disconnection_is_waited_out_for_the_session_timeout() -> None:
    """Disconnected for zookeeper.session.timeout.ms: ZooKeeper has (or will have) expired
    the session, so the controller stops acting then, not sooner."""
    config = ControllerConfig(broker_id=1, session_timeout_ms=6_000)
    c = KafkaController(config, FakeZk(), MagicMock(), lambda: 1)  # type: ignore[arg-type]
    RecordedTimer.armed.clear()
    with patch("controller.controller.threading.Timer", RecordedTimer):
        c._on_zk_state("SUSPENDED")
    [timer] = RecordedTimer.armed
    assert timer.interval == 6.0
    timer.function()  # the wait is over, still disconnected
    [expire] = fc.queued(c)
    assert isinstance(expire, ev.Expire)


def test_the_election_is_retried_at_once_then_after_a_doubling_backoff_up_to_its_cap() -> None:
    c = KafkaController(ControllerConfig(broker_id=1), FakeZk(), MagicMock(), lambda: 1)  # type: ignore[arg-type]
    RecordedTimer.armed.clear()
    with patch("controller.controller.threading.Timer", RecordedTimer):
        for _ in range(10):
            c._reelect_after_zk_error()
    [first] = fc.queued(c)
    assert isinstance(first, ev.ReelectAfterZkError)
    delays = [t.interval for t in RecordedTimer.armed]
    assert delays[:3] == [
        ZK_ERROR_RETRY_FIRST_S,
        2 * ZK_ERROR_RETRY_FIRST_S,
        4 * ZK_ERROR_RETRY_FIRST_S,
    ]
    assert delays == sorted(delays)
    assert delays[-1] == ZK_ERROR_RETRY_MAX_S
    assert all(t.cancelled for t in RecordedTimer.armed[:-1])  # one timer at a time


def test_the_failovers_requests_are_logged_acknowledged_under_the_epoch_just_won() -> None:
    zk = fc.empty_cluster()
    for b in (1, 2):
        fc.register(zk, b)
    fc.add_topic(zk, "t", {0: (2, 1)})
    zk.put(paths.CONTROLLER_EPOCH, b"6")
    state_log = MagicMock()
    sent: list[BrokerRequest] = []
    channel = MagicMock()
    channel.send.side_effect = sent.extend
    c = KafkaController(
        ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False),
        zk,  # type: ignore[arg-type]
        state_log,
        lambda: 1,
    )
    with patch("controller.controller.ControllerChannelManager", return_value=channel):
        c.process(ev.Startup())
    assert c.ctx.epoch == 7
    assert sent
    for r in sent:
        c._on_response(r, {"error_code": 0})
    acked = [
        call.kwargs
        for call in state_log.write.call_args_list
        if call.args == ("requests_acknowledged",)
    ]
    assert [(a["after_event"], a["controller_epoch"]) for a in acked] == [("Startup", 7)]


def test_a_resigned_broker_removes_its_own_sessions_controller_znode_and_is_elected() -> None:
    """Its /controller left from before a resignation (its session lives on): nobody acts
    behind it, and while it stands no broker can be elected."""
    zk = fc.empty_cluster()
    fc.register(zk, 1)
    zk.put(paths.CONTROLLER, encode_controller(1), owner=fc.CONTROLLER_SESSION)
    c = KafkaController(
        ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False),
        zk,  # type: ignore[arg-type]
        MagicMock(),
        lambda: 1,
    )
    fc.process(c, ev.Startup())
    assert paths.CONTROLLER not in zk.nodes
    assert not c.is_active
    fc.process(c, ev.Reelect())  # the deletion's watch
    assert active(c)
    assert read_controller(zk) == (1, fc.CONTROLLER_SESSION)  # type: ignore[arg-type]


def test_an_expired_session_leaves_no_controller_known_and_no_watch_handled() -> None:
    """Kafka's processExpire: activeControllerId = -1, then onControllerResignation (its
    handlers unregistered: a watch of the old term queues nothing any more)."""
    zk, c = fc.cluster()
    zk.fire(paths.BROKER_IDS, "CHILD")
    assert [e.name for e in fc.queued(c)] == ["BrokerChange"]
    fc.process(c, ev.Expire("session expired"))
    assert not c.is_active
    assert c.metrics()["active_controller_id"] == -1
    zk.fire(paths.BROKER_IDS, "CHILD")
    zk.fire(paths.BROKER_TOPICS, "CHILD")
    zk.fire(paths.broker(2), "CHANGED")
    assert fc.queued(c) == []


def test_a_broker_that_saw_another_controller_knows_none_once_its_session_expired() -> None:
    zk, c = fc.cluster()
    c._resign("test")
    zk.put(paths.CONTROLLER, encode_controller(2), owner=fc.broker_session(2))
    fc.process(c, ev.ControllerChange())
    assert c.metrics()["active_controller_id"] == 2
    fc.process(c, ev.Expire("session expired"))
    assert c.metrics()["active_controller_id"] == -1


def leader(zk: FakeZk, topic: str, partition: int) -> int:
    path = paths.partition_state(topic, partition)
    got = zk.get(path)
    assert got is not None
    return decode_partition_state(path, got[0], got[1].version).leader_and_isr.leader


def test_a_controller_of_this_broker_id_in_another_session_is_a_controller_found() -> None:
    """Not ours to remove (another session of this broker, not expired yet): the broker
    takes it for the controller, as any other broker's, and waits for it to go."""
    zk = fc.empty_cluster()
    fc.register(zk, 1)
    zk.put(paths.CONTROLLER, encode_controller(1), owner=0x999)
    c = KafkaController(ControllerConfig(broker_id=1), zk, MagicMock(), lambda: 1)  # type: ignore[arg-type]
    fc.process(c, ev.Startup())
    assert not c.is_active
    assert read_controller(zk) == (1, 0x999)  # type: ignore[arg-type]
    assert c.metrics()["active_controller_id"] == 1


def test_a_failover_failing_on_a_bug_resigns_and_removes_its_controller_znode() -> None:
    """So that another broker (or this one, on the deletion's watch) can try."""
    zk = fc.empty_cluster()
    for b in (1, 2):
        fc.register(zk, b)
    fc.add_topic(zk, "t", {0: (2, 1)})
    c = KafkaController(ControllerConfig(broker_id=1), zk, MagicMock(), lambda: 1)  # type: ignore[arg-type]

    def bug(*_args: object) -> None:
        raise RuntimeError("a bug")

    with patch.object(controller_module, "start_state_machines", bug):
        fc.process(c, ev.Startup())
    assert not c.is_active
    assert paths.CONTROLLER not in zk.nodes


def test_a_resignation_cancels_the_rebalance_timer_and_drops_the_batch() -> None:
    zk = fc.empty_cluster()
    for b in (1, 2):
        fc.register(zk, b)
    fc.add_topic(zk, "t", {0: (2, 1)})
    c = KafkaController(ControllerConfig(broker_id=1), zk, MagicMock(), lambda: 1)  # type: ignore[arg-type]
    RecordedTimer.armed.clear()
    with patch("controller.controller.threading.Timer", RecordedTimer):
        fc.process(c, ev.Startup())
    [timer] = RecordedTimer.armed
    assert not timer.cancelled
    c.ops.batch.add_update_metadata([1, 2], None)  # decided, not sent yet
    c._resign("test")
    assert [t.cancelled for t in RecordedTimer.armed] == [True]
    assert c.ops.batch.is_empty()


def test_a_second_term_is_not_active_in_its_metrics_before_its_failover_is_done() -> None:
    zk, c = fc.cluster()
    assert c.metrics()["active"]
    c._resign("test")
    del zk.nodes[paths.CONTROLLER]
    seen: list[bool] = []

    def mid_failover(*args: Any) -> None:
        seen.append(c.metrics()["active"])
        start_state_machines(*args)

    with patch.object(controller_module, "start_state_machines", mid_failover):
        fc.process(c, ev.Reelect())
    assert c.is_active
    assert seen == [False]
    assert c.metrics()["active"]


def test_with_topic_deletion_disabled_a_failover_removes_the_requests_and_keeps_the_topic() -> None:
    """Kafka 2.8's TopicDeletionManager init: delete.topic.enable=false, the pending
    requests are removed (deleteTopicDeletions) and no topic is queued for deletion."""
    zk = fc.empty_cluster()
    for b in (1, 2):
        fc.register(zk, b)
    fc.add_topic(zk, "t", {0: (2, 1)})
    zk.put(paths.delete_topic("t"), b"")
    c = fc.start_controller(zk, delete_topic_enable=False)
    assert c.is_active
    assert paths.delete_topic("t") not in zk.nodes
    assert not c.ctx.topics_to_be_deleted
    assert paths.topic("t") in zk.nodes
    assert TopicPartition("t", 0) in c.ctx.leadership


def test_a_broker_that_bounced_while_no_controller_watched_leaves_the_isr_at_failover() -> None:
    """Broker 2 led t-0 and registered again after its state was written: its new
    incarnation has none of the old one's log state, so the failover takes it out of the
    ISR and leadership, as a BrokerChange would have (bounced: failed, then started)."""
    zk = fc.empty_cluster()
    fc.register(zk, 1)
    fc.add_topic(zk, "t", {0: (2, 1)})
    fc.register(zk, 2)  # after the state was written
    c = fc.start_controller(zk)
    assert c.is_active
    assert leader(zk, "t", 0) == 1


def test_no_rebalance_timer_with_auto_leader_rebalance_disabled() -> None:
    zk = fc.empty_cluster()
    fc.register(zk, 1)
    RecordedTimer.armed.clear()
    with patch("controller.controller.threading.Timer", RecordedTimer):
        c = fc.start_controller(zk)  # auto.leader.rebalance.enable=false
    assert c.is_active
    assert RecordedTimer.armed == []


def test_no_auto_rebalance_while_a_reassignment_is_in_progress() -> None:
    """Kafka 2.8's checkAndTriggerAutoLeaderRebalance moves leaders only while no partition
    is being reassigned; the next check is scheduled all the same."""
    zk = fc.empty_cluster()
    for b in (1, 2):
        fc.register(zk, b)
    # t-0 imbalanced (2 is preferred), t-1 (balanced) being reassigned
    fc.add_topic(zk, "t", {0: (2, 1), 1: (1, 2)}, leaders={0: 1})
    c = KafkaController(ControllerConfig(broker_id=1), zk, MagicMock(), lambda: 1)  # type: ignore[arg-type]
    RecordedTimer.armed.clear()
    with patch("controller.controller.threading.Timer", RecordedTimer):
        fc.process(c, ev.Startup())
        c.ctx.partitions_being_reassigned.add(TopicPartition("t", 1))
        fc.process(c, ev.AutoPreferredReplicaLeaderElection())
        assert leader(zk, "t", 0) == 1
        c.ctx.partitions_being_reassigned.clear()
        fc.process(c, ev.AutoPreferredReplicaLeaderElection())
    assert leader(zk, "t", 0) == 2
    assert len(RecordedTimer.armed) == 3


def test_the_metrics_of_a_broker_that_is_not_the_controller_give_no_cluster_counts() -> None:
    _zk, c = fc.cluster()
    m = c.metrics()
    assert (m["controller_epoch"], m["partitions"], m["offline_partitions"]) == (
        c.ctx.epoch,
        1,
        0,
    )
    c._resign("test")
    m = c.metrics()
    assert (m["active"], m["controller_epoch"], m["partitions"], m["offline_partitions"]) == (
        False,
        None,
        None,
        None,
    )


def test_the_metrics_give_the_event_queue_size() -> None:
    _zk, c = fc.cluster()
    assert c.metrics()["event_queue_size"] == 0
    c.events.put(ev.BrokerChange())
    c.events.put(ev.TopicChange())
    assert c.metrics()["event_queue_size"] == 2


def test_an_election_finding_another_controller_logs_it_once() -> None:
    zk = fc.empty_cluster()
    fc.register(zk, 1)
    zk.put(paths.CONTROLLER, encode_controller(2), owner=fc.broker_session(2))
    state_log = MagicMock()
    c = KafkaController(ControllerConfig(broker_id=1), zk, state_log, lambda: 1)  # type: ignore[arg-type]
    fc.process(c, ev.Startup())
    fc.process(c, ev.Startup())  # the same controller found again: nothing more logged
    assert not c.is_active
    assert c.metrics()["active_controller_id"] == 2
    seen = [call.args for call in state_log.controller_seen.call_args_list]
    assert seen == [(2, "election found a controller")]


def test_a_controller_shutting_down_resigns() -> None:
    """Kafka 2.8's KafkaController.shutdown: the event manager closed, then
    onControllerResignation (its channel closed, its handlers unregistered)."""
    zk, c = fc.cluster()
    channel = c.channel
    assert channel is not None
    c.shutdown()
    assert not c.is_active
    assert c.channel is None
    channel.close.assert_called_once()  # type: ignore[attr-defined]
    assert zk.handlers.get(paths.BROKER_IDS, []) == []


def test_a_leader_election_asked_of_a_broker_that_is_not_the_controller_is_answered() -> None:
    """NOT_CONTROLLER for every partition asked (Kafka's processReplicaLeaderElection
    answers NOT_CONTROLLER when not active): the client asks the controller."""
    _zk, c = fc.cluster()
    c._resign("test")
    replies: list[Any] = []
    tp = TopicPartition("t", 0)
    fc.process(c, ev.ElectLeaders([tp], 0, replies.append))
    [answer] = replies
    assert answer == {tp: (int(ErrorCode.NOT_CONTROLLER), "this broker is not the controller", -1)}

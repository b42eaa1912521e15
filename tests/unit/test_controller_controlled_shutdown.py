"""A ControlledShutdown request at the controller (Kafka 2.8's processControlledShutdown
and doControlledShutdown), over an in-memory ZooKeeper (tests/unit/fake_zk.py): NOT_CONTROLLER
from a broker that is not the controller (or whose processing failed), BROKER_NOT_AVAILABLE
for a broker it does not know, STALE_BROKER_EPOCH for an epoch older than the one it knows
(-1 is no epoch: not checked), else NONE with the partitions the broker still leads, given
once every broker answered the leadership moves."""

from __future__ import annotations

from unittest.mock import patch

from kazoo.exceptions import ConnectionLoss

from controller import events as ev
from controller.controller import KafkaController
from controller.request_batch import BrokerRequest
from tests.unit import fake_cluster as fc
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

Reply = tuple[int, list[TopicPartition]]


RecordedTimer = fc.RecordedTimer


def controller() -> tuple[KafkaController, list[BrokerRequest]]:
    """Broker 1 controller of live brokers 1 and 2 (broker 3 not registered). Topic "t":
    partition 0 on 2, 3, 1 led by 2; partition 1 on 2, 3 (2 its only live replica).
    What the controller sends is collected, never answered."""
    _zk, c, _channel, sent = fc.active_controller((1, 2), {"t": {0: (2, 3, 1), 1: (2, 3)}})
    return c, sent


def ask(c: KafkaController, broker_id: int, broker_epoch: int) -> list[Reply]:
    replies: list[Reply] = []
    event = ev.ControlledShutdown(
        broker_id, broker_epoch, lambda code, tps: replies.append((code, tps))
    )
    RecordedTimer.armed.clear()
    with patch("controller.controller.threading.Timer", RecordedTimer):
        c.process(event)
    return replies


def test_a_broker_that_is_not_the_controller_answers_not_controller() -> None:
    c, _sent = controller()
    epoch = c.ctx.broker_epochs[2]
    c._resign("test")
    assert ask(c, 2, epoch) == [(int(ErrorCode.NOT_CONTROLLER), [])]


def test_a_broker_the_controller_does_not_know_is_not_available() -> None:
    c, sent = controller()
    assert ask(c, 3, -1) == [(int(ErrorCode.BROKER_NOT_AVAILABLE), [])]
    assert sent == []
    assert 3 not in c.ctx.shutting_down_broker_ids


def test_an_older_broker_epoch_is_stale_the_same_or_a_newer_one_is_not() -> None:
    c, sent = controller()
    epoch = c.ctx.broker_epochs[2]
    assert ask(c, 2, epoch - 1) == [(int(ErrorCode.STALE_BROKER_EPOCH), [])]
    assert sent == []
    assert 2 not in c.ctx.shutting_down_broker_ids
    replies = ask(c, 2, epoch)
    for r in sent:  # every broker applied the moves
        c._on_response(r, {"error_code": 0})
    assert [code for code, _ in replies] == [int(ErrorCode.NONE)]


def test_no_broker_epoch_is_not_checked() -> None:
    """-1 (UNKNOWN_BROKER_EPOCH, a ControlledShutdown v0/v1): Kafka skips the check."""
    c, sent = controller()
    replies = ask(c, 2, -1)
    for r in sent:
        c._on_response(r, {"error_code": 0})
    assert [code for code, _ in replies] == [int(ErrorCode.NONE)]


def test_the_answer_waits_for_the_moves_and_lists_what_the_broker_still_leads() -> None:
    c, sent = controller()
    replies = ask(c, 2, c.ctx.broker_epochs[2])
    # Partition 0 moved to broker 1 (2's moves sent); partition 1 has no other live ISR
    # member: the broker still leads it.
    assert c.ctx.leadership[TopicPartition("t", 0)].leader_and_isr.leader != 2
    assert c.ctx.leadership[TopicPartition("t", 1)].leader_and_isr.leader == 2
    assert sent, "the moves were sent"
    assert replies == []  # not before the brokers applied them
    [timer] = RecordedTimer.armed
    for r in sent:
        c._on_response(r, {"error_code": 0})
    assert replies == [(int(ErrorCode.NONE), [TopicPartition("t", 1)])]
    assert timer.cancelled  # the bound on the wait goes with it


def test_the_answer_is_given_when_the_wait_for_the_moves_runs_out() -> None:
    c, _sent = controller()
    replies = ask(c, 2, c.ctx.broker_epochs[2])
    assert replies == []
    [timer] = RecordedTimer.armed
    timer.function()  # no broker answered
    assert replies == [(int(ErrorCode.NONE), [TopicPartition("t", 1)])]


def test_a_request_whose_processing_failed_on_zookeeper_is_answered_not_controller() -> None:
    """The controller resigns on the error; the broker asks again, the next controller
    (Kafka answers a failed controlled shutdown with its error), rather than waiting out
    its request timeout."""
    c, _sent = controller()
    epoch = c.ctx.broker_epochs[2]
    c.zk.fail_next = [ConnectionLoss()]  # type: ignore[attr-defined]
    replies = ask(c, 2, epoch)
    assert not c.is_active
    assert replies == [(int(ErrorCode.NOT_CONTROLLER), [])]

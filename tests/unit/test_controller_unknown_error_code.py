"""A broker's answer carrying an error code this build does not know is read as Kafka's
Errors.forCode reads it (UNKNOWN_SERVER_ERROR), not as a bug of the controller."""

from __future__ import annotations

from controller import events as ev
from tests.unit.fake_cluster import cluster, drain, process


def test_an_unknown_error_code_in_a_leader_and_isr_answer_does_not_end_the_term() -> None:
    """The handler's log line built ErrorCode(200), which raised ValueError on the event
    thread: the controller resigned, and the re-election's failover sent every broker a
    LeaderAndIsr again, which the same broker could answer the same way. Kafka 2.8's
    processLeaderAndIsrResponseReceived logs the error and the term goes on."""
    _zk, c = cluster()
    epoch, resignations = c.ctx.epoch, c.resignations
    answer = {"error_code": 200, "topics": []}
    process(c, ev.LeaderAndIsrResponseReceived(2, answer, c.ctx.broker_epochs[2]))
    drain(c)
    assert c.is_active
    assert (c.ctx.epoch, c.resignations) == (epoch, resignations)

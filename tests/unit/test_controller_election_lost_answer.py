"""The election multi whose answer is lost (ConnectionLoss, or no answer within the
request timeout), over the in-memory ZooKeeper (tests/unit/fake_zk.py).

Kafka 2.8's registerControllerAndIncrementControllerEpoch sends the multi again once
connected (retryRequestUntilConnected): one that had landed is answered NODEEXISTS, and
checkControllerAndEpoch finds /controller naming this broker and /controller_epoch at the
epoch it wrote, so the broker is controller of that epoch. One that had not landed wins
on the resend. Neither throws the term away (its /controller deleted, epoch+2 elected)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest
from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError

from controller import events as ev
from election.controller_election import try_elect
from tests.unit.fake_cluster import Controller, ZooKeeperData
from zkdata import paths
from zkdata.client import WriteOp, ZkClient
from zkdata.znodes import decode_controller, decode_controller_epoch


def is_election(ops: Sequence[WriteOp]) -> bool:
    return any(getattr(op, "path", "") == paths.CONTROLLER for op in ops)


def answer_lost(c: Controller, error: Exception, *, landed: bool) -> list[int]:
    """The first election multi of ``c`` fails with ``error``, applied or not; the count
    of election multis sent."""
    real_multi = c.zk.multi
    sent: list[int] = []

    def multi(ops: Sequence[WriteOp], *, session: Any = None) -> Any:
        if not is_election(ops):
            return real_multi(ops, session=session)
        sent.append(1)
        if len(sent) > 1:
            return real_multi(ops, session=session)
        if landed:
            real_multi(ops, session=session)
        raise error

    c.zk.multi = multi  # type: ignore[method-assign]
    return sent


@pytest.mark.parametrize("error", [ConnectionLoss, OperationTimeoutError])
@pytest.mark.parametrize("landed", [True, False], ids=["landed", "not-landed"])
def test_an_election_whose_answer_is_lost_keeps_the_term(
    error: type[Exception], landed: bool
) -> None:
    data = ZooKeeperData(brokers=(1, 2, 3), controller_epoch=4)
    data.topic("t", {0: (1, 2, 3)})
    with Controller(data) as c:
        sent = answer_lost(c, error(), landed=landed)
        c.run(ev.Startup())
        names = c.drain()
        ctl = c.controller
        assert len(sent) == 2  # sent again once connected, as Kafka's retry does
        assert ctl.is_active, f"the term won was thrown away: {names}"
        assert ctl.ctx.epoch == 5
        assert "ReelectAfterZkError" not in names
        assert decode_controller_epoch(data.zk.nodes[paths.CONTROLLER_EPOCH][0]) == 5
        znode = data.zk.nodes[paths.CONTROLLER]
        assert decode_controller(znode[0]) == 1
        assert znode[1].ephemeralOwner == c.zk.session_id
        assert ctl.token is not None
        assert ctl.token.zk_version == data.zk.nodes[paths.CONTROLLER_EPOCH][1].version


def test_an_answer_lost_while_another_broker_won_is_a_lost_race() -> None:
    """The resend meets another broker's /controller: not ours, the term is not taken."""
    data = ZooKeeperData(brokers=(1, 2, 3), controller_epoch=4)
    with Controller(data, 1) as c, Controller(data, 2) as other:
        real_multi = c.zk.multi

        def multi(ops: Sequence[WriteOp], *, session: Any = None) -> Any:
            if is_election(ops) and paths.CONTROLLER not in data.zk.nodes:
                assert try_elect(cast(ZkClient, other.zk), 2).won  # broker 2 wins meanwhile
                raise ConnectionLoss()
            return real_multi(ops, session=session)

        c.zk.multi = multi  # type: ignore[method-assign]
        outcome = try_elect(cast(ZkClient, c.zk), 1)
        assert not outcome.won
        assert outcome.controller_id == 2
        assert decode_controller_epoch(data.zk.nodes[paths.CONTROLLER_EPOCH][0]) == 5


def test_an_answer_lost_with_the_session_is_no_term() -> None:
    """The session ended before the resend: refused, as a multi of an ended session is;
    its ephemeral went with the session."""
    data = ZooKeeperData(brokers=(1, 2, 3), controller_epoch=4)
    with Controller(data) as c:
        real_multi = c.zk.multi

        def multi(ops: Sequence[WriteOp], *, session: Any = None) -> Any:
            if is_election(ops) and session == 0:
                real_multi(ops, session=session)
                c.zk.expire(0x999)
                raise ConnectionLoss()
            return real_multi(ops, session=session)

        c.zk.multi = multi  # type: ignore[method-assign]
        with pytest.raises(SessionExpiredError):
            try_elect(cast(ZkClient, c.zk), 1, session=0)
        assert paths.CONTROLLER not in data.zk.nodes


def test_an_answer_lost_for_longer_than_a_session_timeout_fails_the_event() -> None:
    """No connection back within a session timeout: the controller takes its session for
    ended (item 2 of docs/architecture.md), and the election fails as before."""
    data = ZooKeeperData(brokers=(1, 2, 3), controller_epoch=4)
    with Controller(data) as c:
        c.zk.session_timeout_ms = 100
        c.zk.wait_connected = lambda timeout_s: False  # type: ignore[method-assign]
        sent = answer_lost(c, ConnectionLoss(), landed=True)
        with pytest.raises(ConnectionLoss):
            try_elect(cast(ZkClient, c.zk), 1)
        assert len(sent) == 1

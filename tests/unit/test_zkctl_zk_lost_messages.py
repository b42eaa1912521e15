"""What zkctl says when ZooKeeper went away during a command: whether a change asked for
may have been made. zk_session records how many writes the command had sent when the
request failed; a command that sent none says nothing was changed, one that sent some says
to look before trying again (a blind retry of a create would find the topic existing)."""

from __future__ import annotations

import argparse

import pytest
from kazoo.exceptions import ConnectionLoss, NoNodeError, OperationTimeoutError, SessionExpiredError

from zkctl import cli

LOST = [ConnectionLoss, OperationTimeoutError, SessionExpiredError]


def message(exc: Exception, *, writes_sent: int | None) -> str:
    args = argparse.Namespace(connect_string="127.0.0.1:2181/c")
    if writes_sent is not None:
        args.zk_writes_sent = writes_sent
    text = cli._operational_message(exc, args)
    assert text is not None, f"{type(exc).__name__} taken for a bug"
    return text


@pytest.mark.parametrize("kind", LOST)
def test_a_read_only_command_says_nothing_was_changed(kind: type[Exception]) -> None:
    text = message(kind(), writes_sent=0)
    assert "nothing was changed" in text, text
    assert "127.0.0.1:2181/c" in text, text
    assert type(kind()).__name__ in text, text


@pytest.mark.parametrize("kind", LOST)
@pytest.mark.parametrize("writes_sent", [1, None])
def test_a_command_that_sent_writes_says_a_change_may_have_been_made(
    kind: type[Exception], writes_sent: int | None
) -> None:
    """None: the failure came before zk_session could count (not known to be read-only)."""
    text = message(kind(), writes_sent=writes_sent)
    assert "may or may not have been made" in text, text
    assert "nothing was changed" not in text, text


def test_a_session_expiry_after_writes_is_named() -> None:
    text = message(SessionExpiredError(), writes_sent=2)
    assert "session expired" in text, text


def test_another_zookeeper_error_is_reported_as_it_is() -> None:
    text = message(NoNodeError("/brokers/ids"), writes_sent=1)
    assert text.startswith("ZooKeeper request failed (127.0.0.1:2181/c): NoNodeError"), text

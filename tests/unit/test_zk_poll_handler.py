"""The poll-based wait kazoo's connection thread uses (zkdata.poll_handler)."""

from __future__ import annotations

import os
import resource
import socket
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.exceptions import ConnectionLoss
from kazoo.handlers.utils import selector_select

from zkdata.client import connection_restart_delay_s
from zkdata.poll_handler import PollingHandler, poll_select


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_nothing_to_read_times_out_empty(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _ = pair
    assert poll_select([a], [], [], 0) == ([], [], [])
    assert poll_select([a], [], [], 0.01) == ([], [], [])


def test_waiting_data_is_readable(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    b.send(b"x")
    assert poll_select([a], [], [], 5) == ([a], [], [])
    # the same object back, in the caller's order, as select returns it
    assert poll_select([b, a], [], [], 5)[0] == [a]


def test_a_socket_with_room_is_writable(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    assert poll_select([], [a, b], [], 5) == ([], [a, b], [])


def test_one_socket_in_both_lists(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    assert poll_select([a], [a], [], 5) == ([], [a], [])
    b.send(b"x")
    assert poll_select([a], [a], [], 5) == ([a], [a], [])


def test_descriptor_numbers_are_accepted(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    b.send(b"x")
    assert poll_select([a.fileno()], [], [], 5) == ([a.fileno()], [], [])


def test_a_hung_up_peer_is_readable_and_the_read_says_so(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    b.close()
    assert poll_select([a], [], [], 5)[0] == [a]
    assert a.recv(1) == b""


def test_a_closed_socket_is_an_error(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _ = pair
    a.close()  # fileno() is -1 now
    with pytest.raises(ValueError, match="Invalid file descriptor"):
        poll_select([a], [], [], 0)


def test_a_closed_descriptor_number_is_an_error() -> None:
    a, b = socket.socketpair()
    fd = a.detach()
    os.close(fd)
    try:
        with pytest.raises(ValueError, match="Invalid event mask or fd"):
            poll_select([fd], [], [], 0)
    finally:
        b.close()


@pytest.mark.parametrize("timeout", [-1, -0.5])
def test_a_negative_timeout_is_refused(
    pair: tuple[socket.socket, socket.socket], timeout: float
) -> None:
    with pytest.raises(ValueError, match="non-negative"):
        poll_select([pair[0]], [], [], timeout)


def test_a_timeout_that_is_not_a_number_is_refused(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    with pytest.raises(TypeError):
        poll_select([pair[0]], [], [], "1")  # type: ignore[arg-type]


def test_a_descriptor_above_select_s_limit() -> None:
    """kazoo moved off select.select for descriptors of 1024 and up; poll takes them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    high = 1500
    if soft <= high:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    a, b = socket.socketpair()
    fd = os.dup2(a.fileno(), high)
    try:
        high_sock = socket.socket(fileno=fd)
        b.send(b"x")
        assert poll_select([high_sock], [], [], 5) == ([high_sock], [], [])
        high_sock.close()
    finally:
        a.close()
        b.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()),
        min_size=1,
        max_size=4,
    )
)
def test_the_same_answers_as_kazoo_s_selector_select(
    layout: list[tuple[bool, bool, bool, bool]],
) -> None:
    """Each socketpair: data waiting or not, its peer closed or not, asked for reading,
    asked for writing. Both waits report the same sockets ready."""
    pairs = [socket.socketpair() for _ in layout]
    try:
        rlist, wlist = [], []
        for (a, b), (data, hung_up, want_read, want_write) in zip(pairs, layout, strict=True):
            if data:
                b.send(b"x")
            if hung_up:
                b.close()
            if want_read:
                rlist.append(a)
            if want_write:
                wlist.append(a)
        ours = poll_select(rlist, wlist, [], 0)
        theirs = selector_select(rlist, wlist, [], 0)
        # kazoo's lists follow the kernel's order, and put a socket ready for both in
        # the read list only (an elif); kazoo never asks for both at once.
        assert set(ours[0]) == set(theirs[0])
        assert {s for s in ours[1] if s not in ours[0]} == set(theirs[1])
        assert ours[2] == theirs[2] == []
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_the_handler_waits_with_poll(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    b.send(b"x")
    assert PollingHandler().select([a], [], [], 5) == ([a], [], [])


def test_an_answer_out_of_order_fails_its_request_as_a_lost_connection() -> None:
    """kazoo fails the request awaited with a bare RuntimeError: a lost answer's fate."""
    result = PollingHandler().async_result()
    result.set_exception(RuntimeError("xids do not match, expected %r received %r", 3, 4))
    with pytest.raises(ConnectionLoss, match=r"out of order \(xid 4, 3 awaited\)"):
        result.get(timeout=1)


def test_other_errors_are_left_as_they_are() -> None:
    result = PollingHandler().async_result()
    result.set_exception(RuntimeError("something else"))
    with pytest.raises(RuntimeError, match="something else"):
        result.get(timeout=1)


def test_restarts_of_the_connection_thread_back_off_up_to_ten_seconds() -> None:
    delays = [connection_restart_delay_s(n) for n in range(8)]
    assert delays == [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert connection_restart_delay_s(-1) == 0.0

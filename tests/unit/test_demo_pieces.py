"""Pieces of `zkctl demo` that need no cluster: the clients' tally, the view's thread and
its ending, and the demo's chroot on an external ZooKeeper."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest

from cluster import demo
from cluster import zookeeper as zkp
from cluster.demo import DemoOptions, DemoView
from cluster.demo_workload import Tally
from watch import render_curses
from watch.render_plain import Write
from watch.session import Watcher


class Msg:
    def __init__(self, partition: int, offset: int, value: bytes) -> None:
        self._p, self._o, self._v = partition, offset, value

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def value(self) -> bytes:
        return self._v


# --- the tally -------------------------------------------------------------------------------


def test_an_offset_acknowledged_for_two_messages_is_a_loss() -> None:
    t = Tally()
    # demo-000000005 is acknowledged at partition 0, offset 5, and read there.
    t.on_delivery(None, Msg(0, 5, b"demo-000000005"))
    t.read[(0, 5)] = b"demo-000000005"
    # A failover truncates offset 5 away; the next message is acknowledged there.
    t.on_delivery(None, Msg(0, 5, b"demo-000000011"))
    t.read[(0, 5)] = b"demo-000000011"
    # demo-000000005 was acknowledged and is in the log nowhere.
    assert t.lost() == [(0, 5)]
    assert t.acknowledged() == 2


def test_every_acknowledged_message_read_back_is_no_loss() -> None:
    t = Tally()
    for offset in range(3):
        value = f"demo-{offset:09d}".encode()
        t.on_delivery(None, Msg(1, offset, value))
        t.read[(1, offset)] = value
    t.on_delivery(None, Msg(1, 2, b"demo-000000002"))  # the same answer twice: no loss
    assert t.lost() == []
    assert t.acknowledged() == 3


def test_the_wait_for_a_partitions_first_acknowledgement_is_a_stall() -> None:
    # The demo's first failover starts a few ms after the producer: every partition
    # waited 5-7 s for its first acknowledgement, and 0.2 s (between two later ones) was
    # reported as the longest wait.
    t = Tally()
    t.started(range(3), now=time.monotonic() - 6.0)
    t.on_delivery(None, Msg(1, 0, b"demo-000000001"))
    assert t.longest_stall_s >= 6.0


# --- the view's thread -----------------------------------------------------------------------


class NoZk:
    """The source is never started: the view's queue and model are what matter."""

    connected = True


def interrupted_within(view: DemoView, seconds: float) -> bool:
    """Whether the main thread is interrupted (KeyboardInterrupt) within `seconds` of
    starting `view` (as early as its start: the view's thread may be that quick). SIGINT is
    Python's for the while, as in a terminal: a test run started in the background inherits
    it ignored (and SIGTERM left at its default), where the demo would be interrupted by the
    SIGTERM handler `zkctl demo` installs, which this test does not."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        view.start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.05)
    except KeyboardInterrupt:
        return True
    finally:
        signal.signal(signal.SIGINT, previous)
    return False


def test_the_verdict_noted_after_q_is_left_on_the_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def drew_then_q(
        watcher: Watcher, stop: threading.Event | None = None, duration_s: float | None = None
    ) -> str:
        watcher.pump(0.1)
        return "quit"

    monkeypatch.setattr(render_curses, "run", drew_then_q)
    watcher = Watcher(NoZk())  # type: ignore[arg-type]
    said: list[str] = []
    view = DemoView(watcher, "curses", said.append)
    view.note("--- failover 1: SIGKILL the controller: broker 1, epoch 1 ---")
    assert interrupted_within(view, 10), "q did not interrupt the main thread"
    assert view.quit_requested
    # run_demo's ExitStack: the workload stops first and notes its verdict, then the view
    # closes and leaves the story on the terminal.
    view.note("clients: 2,000 sent, 1,990 acknowledged, 1,990 read back; no errors")
    view.note("LOST: 3 acknowledged messages were not read back at their offsets")
    view.close()
    assert any("LOST: 3 acknowledged" in s for s in said), said
    assert any("failover 1" in s for s in said), said


def test_a_terminal_curses_cannot_drive_gets_the_plain_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TERM unset or unknown: the full-screen view fails before drawing (setupterm), and
    the demo says so and goes on in plain lines (render_curses.run_or_plain, which
    `zkctl watch` shares)."""
    import curses

    def no_terminfo(
        watcher: Watcher, stop: threading.Event | None = None, duration_s: float | None = None
    ) -> str:
        raise curses.error("setupterm: could not find terminal")

    monkeypatch.setattr(render_curses, "run", no_terminfo)
    watcher = Watcher(NoZk())  # type: ignore[arg-type]
    said: list[str] = []
    view = DemoView(watcher, "curses", said.append)
    view.start()
    view.note("starting 3 brokers")
    deadline = time.monotonic() + 10
    while not any("starting 3 brokers" in s for s in said) and time.monotonic() < deadline:
        time.sleep(0.05)
    view.close()
    assert view.mode == "plain"
    assert not view.quit_requested
    assert said[0] == (
        "(the full-screen view failed: setupterm: could not find terminal; plain lines instead)"
    ), said
    assert sum("starting 3 brokers" in s for s in said) == 1, said


def test_a_view_that_fails_interrupts_the_demo() -> None:
    """`zkctl demo | head`: the reader gone, the view's next line raises BrokenPipeError;
    the main thread is interrupted (as by q) so that the demo stops and cleans up."""

    def say(_text: str) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    watcher = Watcher(NoZk())  # type: ignore[arg-type]
    view = DemoView(watcher, "plain", say)
    view.note("starting 3 brokers")
    assert interrupted_within(view, 10), "the view failed and the demo went on"
    assert isinstance(view.failure, BrokenPipeError)
    assert not view.quit_requested
    view.close()


def test_a_reader_gone_from_the_pipe_stops_the_demo_without_a_line_to_write() -> None:
    """`zkctl demo --plain | head` between failovers (`--interval 300 --no-clients`: minutes
    without a line): the view polls its stdout pipe, as `zkctl watch --plain` does, and
    ends the demo once the reader has gone, not at its next line."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    with os.fdopen(write_fd, "w") as stdout:
        watcher = Watcher(NoZk())  # type: ignore[arg-type]
        view = DemoView(watcher, "plain", cast(Write, stdout.write), stdout=stdout)
        assert interrupted_within(view, 5), "the reader went and the demo went on"
        assert isinstance(view.failure, BrokenPipeError)
        view.close()


# --- the chroot on an external ZooKeeper ---------------------------------------------------


def test_two_demos_started_in_the_same_second_get_chroots_of_their_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made: list[str] = []

    def chroot_connect_string(base: str, chroot: str, **_: Any) -> str:
        made.append(chroot)
        return base + chroot

    monkeypatch.setattr(zkp, "chroot_connect_string", chroot_connect_string)
    monkeypatch.setattr(zkp, "delete_chroot", lambda *_a, **_k: None)
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)  # the module cluster.demo uses
    options = DemoOptions(zookeeper="127.0.0.1:2181")
    for _ in range(2):
        with demo._zookeeper(options, tmp_path, lambda _text: None):
            pass
    assert len(made) == 2, made
    assert made[0] != made[1], made
    assert all(re.fullmatch(r"/zkctl-demo-1700000000-\w+", c) for c in made), made


def test_a_failover_record_is_told_with_its_counts_in_the_right_number() -> None:
    record = {
        "event": "controller_failover",
        "broker": 2,
        "partitions": 1,
        "live_brokers": 1,
        "load_ms": 12.0,
        "total_ms": 30.0,
    }
    assert demo.describe_event(record) == (
        "controller 2 loaded 1 partition and 1 broker in 12 ms (failover done in 30 ms)"
    )
    many = {**record, "partitions": 1200, "live_brokers": 3}
    assert demo.describe_event(many) == (
        "controller 2 loaded 1,200 partitions and 3 brokers in 12 ms (failover done in 30 ms)"
    )

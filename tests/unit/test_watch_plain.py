"""The plain timeline of `zkctl watch` (no terminal): how it stops on a signal."""

from __future__ import annotations

import os
import signal
import threading
from typing import cast

import pytest

from watch import render_plain
from watch.model import Event
from watch.screen import format_event
from zkctl.watch_command import stop_on_signals


class OneBatch:
    """A watcher whose first pump returns a batch of events, and nothing after."""

    def __init__(self, events: list[Event]) -> None:
        self.batches = [events]

    def pump(self, timeout: float) -> list[Event]:
        return self.batches.pop() if self.batches else []


def test_ctrl_c_between_a_line_and_its_newline_cuts_no_line_and_drops_no_event() -> None:
    # CI once saw the last line of `zkctl watch | ...` without its newline: Ctrl-C had
    # raised KeyboardInterrupt inside print(), between the text and the end of line.
    events = [Event(1_700_000_000.0 + i, "broker", f"broker {i} registered") for i in range(5)]
    written: list[str] = []

    def write(text: str) -> None:
        written.append(text)
        if text == format_event(events[1]):
            os.kill(os.getpid(), signal.SIGINT)  # handled before the next line of Python
        written.append("\n")

    stop = threading.Event()
    with stop_on_signals(stop):
        render_plain.run(OneBatch(events), write, stop=stop)  # type: ignore[arg-type]
    assert stop.is_set()
    assert "".join(written) == "".join(format_event(e) + "\n" for e in events)


def test_a_second_signal_interrupts_a_stop_that_hangs() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    stop = threading.Event()
    with stop_on_signals(stop):
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.is_set()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    # The handlers it replaced are back.
    assert {sig: signal.getsignal(sig) for sig in before} == before


class Pumps:
    """A watcher whose pumps return these batches in turn, the clock moving one second
    at each."""

    def __init__(self, batches: list[list[Event]], now: float) -> None:
        self.batches = batches
        self.now = now
        self.pumped = 0

    def pump(self, timeout: float) -> list[Event]:
        self.now += 1
        self.pumped += 1
        return self.batches.pop(0) if self.batches else []

    def clock(self) -> float:
        return self.now


def test_lines_are_printed_in_time_order_once_held_half_a_second() -> None:
    t = 1_700_000_000.0
    zk_late = Event(t + 1.0, "broker", "broker 3 back")
    log_early = Event(t + 0.8, "log", "broker 3 learns that its session expired")
    recent = Event(t + 1.8, "log", "just now")
    watcher = Pumps([[zk_late], [log_early, recent]], now=t)
    written: list[tuple[float, str]] = []
    stop = threading.Event()

    def write(text: str) -> None:
        written.append((watcher.now, text))
        if len(written) == 3:
            stop.set()

    render_plain.run(watcher, write, stop=stop, clock=watcher.clock)  # type: ignore[arg-type]
    # The ZooKeeper line came first but is printed after the log line older than it, both
    # at the second pump (t + 2: each at least half a second old); the last line is held
    # until the next (t + 3).
    assert written == [
        (t + 2, format_event(log_early)),
        (t + 2, format_event(zk_late)),
        (t + 3, format_event(recent)),
    ]


def test_what_is_held_when_it_stops_is_printed() -> None:
    t = 1_700_000_000.0
    events = [Event(t + 1, "log", "b"), Event(t + 0.9, "zk", "a")]
    watcher = Pumps([events], now=t)  # the clock never gets half a second past them
    watcher.now = t - 10
    written: list[str] = []
    render_plain.run(
        watcher,  # type: ignore[arg-type]
        written.append,
        duration_s=0.3,
        clock=lambda: t,
    )
    assert written == [format_event(events[1]), format_event(events[0])]


@pytest.mark.timeout(60)  # a watch that learns it only at its end (600 s) hangs
def test_a_reader_gone_from_the_pipe_stops_it_without_a_line_to_write() -> None:
    # `zkctl watch --plain | head` on a quiet cluster: head exits, and with no line to
    # write the watch learnt it only at the next event, minutes later, holding its
    # ZooKeeper session all along.
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    with os.fdopen(write_fd, "w") as stdout, pytest.raises(BrokenPipeError):
        render_plain.run(
            Pumps([], now=1_700_000_000.0),  # type: ignore[arg-type]
            cast(render_plain.Write, stdout.write),  # its int answer unused
            duration_s=600,
            stdout=stdout,
        )


def test_a_pipe_with_its_reader_there_keeps_it_running() -> None:
    read_fd, write_fd = os.pipe()
    try:
        with os.fdopen(write_fd, "w") as stdout:
            watcher = Pumps([], now=1_700_000_000.0)
            render_plain.run(
                watcher,  # type: ignore[arg-type]
                cast(render_plain.Write, stdout.write),  # its int answer unused
                duration_s=0.01,
                stdout=stdout,
            )
            assert watcher.pumped >= 2  # the loop's pass and the final pump
    finally:
        os.close(read_fd)

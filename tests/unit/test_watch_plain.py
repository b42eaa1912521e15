"""The plain timeline of `zkctl watch` (no terminal): how it stops on a signal."""

from __future__ import annotations

import os
import signal
import threading

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

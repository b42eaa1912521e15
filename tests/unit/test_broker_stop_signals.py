"""`python -m broker` stops cleanly on SIGHUP too (a terminal closed, an ssh session
dropped), as Kafka 2.8 does: the JVM runs its shutdown hook on HUP. It died at once (no
controlled shutdown, no clean-shutdown marker, its registration left until the session
timed out). Under nohup (SIGHUP ignored at start) it keeps ignoring it."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from broker import __main__ as broker_main

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@pytest.fixture
def restored_handlers() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def test_sighup_stops_the_broker_as_sigterm_does(restored_handlers: None) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    broker_main._catch_stop_signals()
    for s in SIGNALS:
        assert signal.getsignal(s) == broker_main._on_signal, s.name


def test_sighup_ignored_at_start_stays_ignored(restored_handlers: None) -> None:
    """nohup's promise: the broker outlives its terminal."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    broker_main._catch_stop_signals()
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) == broker_main._on_signal


def test_the_stop_signals() -> None:
    assert broker_main.stop_signals(hup_ignored=False) == SIGNALS
    assert broker_main.stop_signals(hup_ignored=True) == SIGNALS[:2]
